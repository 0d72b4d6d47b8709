"""Tool paths between two keyed poses: where the tool is at each frame of a Linear or Circular move.

Pure maths on 4x4 poses (NumPy only, no Blender), so the Blender side, the CLI and the tests all
get the same pose for the same frame: a frame's pose depends only on the two key poses (and the
via point) and on where the frame falls between the keys, never on the frame before it, so
scrubbing either way and baking give the same answer.

Timing: the animator's keys stay where they are. Between two keys the tool speeds up at a
constant acceleration over the first `ramp` fraction of the segment's time, runs at constant
speed, and slows down over the last `ramp` fraction, stopping at each key (a trapezoid speed
profile). The constant speed is therefore length / ((1 - ramp) * duration); `cruise_speed` says
it, so a user can choose keys for a speed.
"""

from __future__ import annotations

import numpy as np

#: How the tool travels between two keys (the Tool node's choices).
MOVES = ("JOINT", "LINEAR", "CIRCULAR")


def progress(u: float, ramp: float) -> float:
    """The fraction of the way travelled at time fraction `u` (0..1) of a segment whose speed
    ramps up over the first `ramp` and down over the last `ramp` of it (0 <= ramp <= 0.5; 0 is
    constant speed from key to key, with a jump in speed at each key)."""
    return progress_between(u, ramp, ramp)


def progress_between(u: float, ramp_in: float, ramp_out: float) -> float:
    """`progress` of a segment that ramps up over its first `ramp_in` and down over its last
    `ramp_out` of time (either may be 0: the tool runs through that end at its constant speed,
    as at a blended key: core/key_moves.py)."""
    u = min(max(float(u), 0.0), 1.0)
    a, b = (min(max(float(r), 0.0), 0.5) for r in (ramp_in, ramp_out))
    if a <= 0.0 and b <= 0.0:
        return u
    top = 1.0 / (1.0 - (a + b) / 2.0)  # the constant speed, in path lengths per segment time
    if a > 0.0 and u < a:
        return top * u * u / (2.0 * a)
    if b > 0.0 and u > 1.0 - b:
        return 1.0 - top * (1.0 - u) ** 2 / (2.0 * b)
    return top * (u - a / 2.0)


def cruise_speed(length: float, duration: float, ramp: float) -> float:
    """The tool's constant speed (length per unit of `duration`) away from the ends."""
    return float(length) / ((1.0 - min(max(float(ramp), 0.0), 0.5)) * float(duration))


def tool_offset(location, rotation_wxyz=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """The 4x4 pose of a tool centre point in its link's frame."""
    offset = np.eye(4)
    offset[:3, :3] = quaternion_matrix(rotation_wxyz)
    offset[:3, 3] = np.asarray(location, dtype=float)
    return offset


def link_goal(control: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """Where the link must be so that its tool centre point (at `offset` from it) is at `control`."""
    if offset is None:
        return control
    return np.asarray(control, dtype=float) @ np.linalg.inv(offset)


def quaternion_matrix(wxyz) -> np.ndarray:
    w, x, y, z = np.asarray(wxyz, dtype=float) / np.linalg.norm(wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_quaternion(rotation: np.ndarray) -> np.ndarray:
    """wxyz of a rotation matrix (scale taken out first: a control may be scaled)."""
    m = _orthonormal(rotation)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def _orthonormal(rotation: np.ndarray) -> np.ndarray:
    u, _, vt = np.linalg.svd(np.asarray(rotation, dtype=float)[:3, :3])
    m = u @ vt
    if np.linalg.det(m) < 0:
        u[:, -1] *= -1
        m = u @ vt
    return m


def slerp(q0, q1, s: float) -> np.ndarray:
    """The rotation a fraction `s` along the shortest arc from q0 to q1 (wxyz)."""
    q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # the shorter of the two arcs
        q1, dot = -q1, -dot
    if dot > 0.9999995:
        q = q0 + s * (q1 - q0)
        return q / np.linalg.norm(q)
    angle = np.arccos(min(dot, 1.0))
    return (np.sin((1 - s) * angle) * q0 + np.sin(s * angle) * q1) / np.sin(angle)


def pose_matrix(position, wxyz) -> np.ndarray:
    """The 4x4 pose at `position` turned by the unit quaternion `wxyz`."""
    pose = np.eye(4)
    pose[:3, :3] = quaternion_matrix(wxyz)
    pose[:3, 3] = position
    return pose


def linear_pose(start: np.ndarray, end: np.ndarray, u: float, ramp: float) -> np.ndarray:
    """The pose at time fraction `u` of a Linear move: on the straight line from start to end,
    the orientation on the shortest arc, both at the same fraction of the way."""
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    return _linear_at(start, end, matrix_quaternion(start[:3, :3]), matrix_quaternion(end[:3, :3]), progress(u, ramp))


def _linear_at(start: np.ndarray, end: np.ndarray, q0, q1, s: float) -> np.ndarray:
    """A Linear move's pose a fraction `s` of the way (q0, q1: the ends' rotations, wxyz)."""
    return pose_matrix((1.0 - s) * start[:3, 3] + s * end[:3, 3], slerp(q0, q1, s))


def circle(start, via, end) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, float] | None:
    """(centre, radius, e1, e2, sweep) of the arc from start through via to end: the point at
    angle t is centre + radius (cos t e1 + sin t e2), t from 0 to sweep. None when the three points
    lie on one line (no circle passes through them)."""
    a, b, c = (np.asarray(p, dtype=float)[:3] for p in (start, via, end))
    ab, ac = b - a, c - a
    normal = np.cross(ab, ac)
    area2 = float(np.dot(normal, normal))
    scale = max(np.dot(ab, ab), np.dot(ac, ac))
    if scale == 0.0 or area2 <= 1e-18 * scale * scale:
        return None
    centre = a + (np.dot(ac, ac) * np.cross(normal, ab) + np.dot(ab, ab) * np.cross(ac, normal)) / (2.0 * area2)
    radius = float(np.linalg.norm(a - centre))
    n = normal / np.sqrt(area2)  # start -> via -> end turns counter-clockwise about n
    e1 = (a - centre) / radius
    e2 = np.cross(n, e1)
    sweep = float(np.arctan2(np.dot(c - centre, e2), np.dot(c - centre, e1))) % (2.0 * np.pi)
    return centre, radius, e1, e2, sweep


def circular_pose(start: np.ndarray, end: np.ndarray, via, u: float, ramp: float) -> np.ndarray:
    """The pose at time fraction `u` of a Circular move: on the arc from start through the via
    point to end at constant speed along the arc (with the ramps), the orientation on the
    shortest arc. Three points on one line make a Linear move."""
    found = circle(start[:3, 3], via, end[:3, 3])
    if found is None:
        return linear_pose(start, end, u, ramp)
    return _circular_at(found, matrix_quaternion(start[:3, :3]), matrix_quaternion(end[:3, :3]), progress(u, ramp))


def _circular_at(found, q0, q1, s: float) -> np.ndarray:
    """A Circular move's pose a fraction `s` of the way round the arc `found` (circle's answer)."""
    centre, radius, e1, e2, sweep = found
    t = s * sweep
    return pose_matrix(centre + radius * (np.cos(t) * e1 + np.sin(t) * e2), slerp(q0, q1, s))


def segment_length(start: np.ndarray, end: np.ndarray, move: str, via=None) -> float:
    """How far the tool travels in a segment (for the speed readout)."""
    a, b = np.asarray(start, dtype=float)[:3, 3], np.asarray(end, dtype=float)[:3, 3]
    if move == "CIRCULAR" and via is not None:
        found = circle(a, via, b)
        if found is not None:
            return found[1] * found[4]
    return float(np.linalg.norm(b - a))


def segment_of(keys, frame: float) -> int | None:
    """The index i of the segment keys[i]..keys[i+1] that `frame` lies in (a frame on a key
    starts the segment after it), or None outside the keys."""
    keys = list(keys)
    if len(keys) < 2 or frame < keys[0] or frame >= keys[-1]:
        return None
    for i in range(len(keys) - 1):
        if keys[i] <= frame < keys[i + 1]:
            return i
    return None


def move_pose(move: str, start: np.ndarray, end: np.ndarray, u: float, ramp: float, via=None) -> np.ndarray | None:
    """The tool's pose in one segment for a Linear or Circular move; None for a Joint move (the
    control's own animation stands)."""
    if move == "LINEAR" or (move == "CIRCULAR" and via is None):
        return linear_pose(start, end, u, ramp)
    if move == "CIRCULAR":
        return circular_pose(start, end, via, u, ramp)
    return None


# ---- Follow Path: a tool path from a curve, sampled as a polyline ------------------------------

#: How the tool is turned along a path: as the control is turned, or carried along the tangent.
PATH_ORIENTATIONS = ("KEEP", "TANGENT")


def _rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation taking unit vector a to unit vector b."""
    axis = np.cross(a, b)
    sine, cosine = float(np.linalg.norm(axis)), float(np.dot(a, b))
    if sine < 1e-12:
        if cosine > 0:
            return np.eye(3)
        other = np.eye(3)[int(np.argmin(np.abs(a)))]  # half a turn about any axis across a
        axis = np.cross(a, other)
        axis /= np.linalg.norm(axis)
        return 2.0 * np.outer(axis, axis) - np.eye(3)
    axis /= sine
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    angle = np.arctan2(sine, cosine)
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


class PolylinePath:
    """A tool path through sampled points (a curve's evaluated points, in order), measured along
    its length. Turning with the tangent is carried from segment to segment by the smallest
    rotation between their directions (no twist of its own), so a blade keeps its angle to the
    path. Points closer than 1e-9 m to the one before are dropped."""

    def __init__(self, points):
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        kept = [points[0]]
        for point in points[1:]:
            if np.linalg.norm(point - kept[-1]) > 1e-9:
                kept.append(point)
        if len(kept) < 2:
            raise ValueError("a path needs two distinct points")
        self.points = np.array(kept)
        steps = np.diff(self.points, axis=0)
        lengths = np.linalg.norm(steps, axis=1)
        self.tangents = steps / lengths[:, None]
        self.starts = np.concatenate([[0.0], np.cumsum(lengths)])
        self.length = float(self.starts[-1])
        turns = [np.eye(3)]
        for before, after in zip(self.tangents, self.tangents[1:]):
            turns.append(_rotation_between(before, after) @ turns[-1])
        quaternions = [matrix_quaternion(turn) for turn in turns]  # per segment: the turn since the first segment
        # per point: half way between the segments either side, so the turn is continuous along the path
        self.vertex_turns = [quaternions[0], *(slerp(a, b, 0.5) for a, b in zip(quaternions, quaternions[1:])), quaternions[-1]]

    def at(self, distance: float) -> tuple[np.ndarray, np.ndarray]:
        """(position, turn since the start) at `distance` along the path (clamped to its ends).
        The turn is blended along each segment between those at its two points."""
        distance = min(max(float(distance), 0.0), self.length)
        i = int(np.clip(np.searchsorted(self.starts, distance, side="right") - 1, 0, len(self.tangents) - 1))
        fraction = (distance - self.starts[i]) / (self.starts[i + 1] - self.starts[i])
        position = self.points[i] + fraction * (self.points[i + 1] - self.points[i])
        return position, quaternion_matrix(slerp(self.vertex_turns[i], self.vertex_turns[i + 1], fraction))


def path_distance(path_length: float, timing: str, frame: float, start: float, fps: float, speed: float, ramp: float,
                  progress_value: float = 0.0) -> float:
    """How far along a path of `path_length` the tool is at `frame`: timing "SPEED" runs at
    `speed` m/s from `start` (with ramps of `ramp` of the pass's time at each end, so the pass
    takes length / ((1 - ramp) speed)); "PROGRESS" takes the keyed 0..1 value."""
    if timing == "PROGRESS":
        return path_length * min(max(float(progress_value), 0.0), 1.0)
    if speed <= 0.0 or path_length <= 0.0:
        return 0.0
    seconds = path_length / ((1.0 - min(max(ramp, 0.0), 0.5)) * speed)
    return path_length * progress((frame - start) / (seconds * fps), ramp)


def follow_pose(path: PolylinePath, distance: float, rotation: np.ndarray, orientation: str) -> np.ndarray:
    """The tool's pose at `distance` along `path`: `rotation` (the control's) kept as it is, or
    turned with the path's tangent since the start."""
    position, turn = path.at(distance)
    pose = np.eye(4)
    base = _orthonormal(rotation)
    pose[:3, :3] = turn @ base if orientation == "TANGENT" else base
    pose[:3, 3] = position
    return pose


def with_approach(points, axis, approach: float, retract: float) -> np.ndarray:
    """The path's points with an approach (a point `approach` back along the tool axis from the
    start, so the tool comes in along its axis) and a retract (the tool backs away `retract`
    along its axis from the end). `axis`: the tool's Z axis, pointing out of the tool."""
    points = np.asarray(points, dtype=float)
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    head = [points[0] - approach * axis] if approach > 0 else []
    tail = [points[-1] - retract * axis] if retract > 0 else []
    return np.array([*head, *points, *tail])


def edge_loop_order(count: int, edges) -> list[int]:
    """The vertices of a mesh's one edge loop or open chain, in order along its edges: from an end
    of an open chain (the lowest-numbered end), or from vertex 0 round a closed loop and back to
    it. Raises ValueError for edges that are not one chain (a branch, or pieces)."""
    neighbours: dict[int, list[int]] = {}
    for a, b in edges:
        neighbours.setdefault(int(a), []).append(int(b))
        neighbours.setdefault(int(b), []).append(int(a))
    if not neighbours:
        raise ValueError("the mesh has no edges to follow")
    if any(len(n) > 2 for n in neighbours.values()):
        raise ValueError("the mesh's edges branch: a path needs one edge loop or one chain")
    ends = sorted(v for v, n in neighbours.items() if len(n) == 1)
    first = ends[0] if ends else min(neighbours)
    order, previous = [first], None
    while True:
        step = [v for v in neighbours[order[-1]] if v != previous]
        if not step or (not ends and step[0] == first):
            break
        previous = order[-1]
        order.append(step[0])
    if len(order) != len(neighbours):
        raise ValueError("the mesh's edges are in several pieces: a path needs one edge loop or one chain")
    return order + [first] if not ends else order
