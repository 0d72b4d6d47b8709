"""The Tool node at a frame: the control's pose moved along a Linear or Circular segment between
its keys, then turned into the pose its link must reach (the tool centre point's offset taken off).

The maths is core/paths.py's; this module only reads Blender: the control's keys, its pose at a
key frame and the via object. A key's pose is read from the control's F-curves at that key, so a
frame's goal depends only on the keys and the frame, never on the frames played before it:
scrubbing either way and baking give the same poses. (The control's parent, if any, is taken as
it is at the current frame: a parent that moves between the keys is not followed.)
"""

from __future__ import annotations

import numpy as np

from ..core import paths
from ..core.key_moves import KeyedMoves
from .animation import fcurves, pose_bone_path

#: The channels of a control that make its keys.
CHANNELS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")


def tool_of(target_node):
    """The Tool node wired (unmuted) into an IK Target's Link input, or None."""
    socket = target_node.inputs.get("Link") if hasattr(target_node, "inputs") else None
    if socket is None:
        return None
    for link in socket.links:
        node = link.from_node
        if getattr(node, "kind", "") == "tool" and not link.is_muted and not node.mute:
            return node
    return None


def tool_goal(target_node, rig, pose: np.ndarray | None, frame: float, step=None) -> np.ndarray | None:
    """The pose the IK Target's link must reach at `frame`: the control's pose (moved between keys
    when the Tool says Linear or Circular) with the Tool's offset taken off. Without a Tool, `pose`.
    `step`: the program step solving the target, whose robot and options choose a Follow Path's
    turn about the tool axis (none: the path's orientation as it is)."""
    tool = tool_of(target_node)
    if tool is None or pose is None:
        return pose
    moved = moved_pose(tool, target_node, rig, pose, frame, step)
    return paths.link_goal(moved, tool_offset(tool))


def tool_offset(tool) -> np.ndarray:
    return paths.tool_offset(tuple(tool.offset_location), tool.offset_wxyz())


class ControlKeys:
    """The keys of a target's control (an object, or a bone of an armature) and its pose at them."""

    def __init__(self, target_node):
        obj = target_node.control_object
        bone = target_node.control_bone
        self.owner = obj.pose.bones.get(bone) if bone and obj is not None and obj.pose else obj
        names = {name: pose_bone_path(bone, name) if bone else name for name in CHANNELS}
        wanted = {path: name for name, path in names.items()}
        self.curves = {}
        for fcurve in fcurves(obj) if obj is not None else ():
            name = wanted.get(fcurve.data_path)
            if name is not None:
                self.curves[(name, fcurve.array_index)] = fcurve
        self.keys = sorted({round(float(point.co[0]), 4) for fcurve in self.curves.values() for point in fcurve.keyframe_points})

    def _channel(self, name: str, size: int, frame: float) -> list[float]:
        values = list(getattr(self.owner, name))
        for index in range(size):
            fcurve = self.curves.get((name, index))
            if fcurve is not None:
                values[index] = fcurve.evaluate(frame)
        return values

    def basis(self, frame: float) -> np.ndarray:
        """The control's own (local) transform at `frame`, from its F-curves."""
        from mathutils import Euler, Matrix, Quaternion, Vector

        mode = self.owner.rotation_mode
        if mode == "QUATERNION":
            rotation = Quaternion(self._channel("rotation_quaternion", 4, frame)).normalized()
        elif mode == "AXIS_ANGLE":
            angle, *axis = self._channel("rotation_axis_angle", 4, frame)
            rotation = Quaternion(axis, angle)
        else:
            rotation = Euler(self._channel("rotation_euler", 3, frame), mode).to_quaternion()
        matrix = Matrix.LocRotScale(Vector(self._channel("location", 3, frame)), rotation, Vector(self._channel("scale", 3, frame)))
        return np.array(matrix, dtype=float)

    def pose_at(self, pose_now: np.ndarray, frame_now: float, key: float) -> np.ndarray:
        """The control's pose (rig space) at `key`, from its pose now: what is above its own
        transform (parent, rest) is taken as it is now."""
        return pose_now @ np.linalg.inv(self.basis(frame_now)) @ self.basis(key)


def _via_point(tool, via, rig) -> np.ndarray | None:
    if via is None:
        return None
    return np.array(rig.matrix_world.inverted_safe() @ via.matrix_world.translation, dtype=float)


def moved_pose(tool, target_node, rig, pose: np.ndarray, frame: float, step=None) -> np.ndarray:
    """The tool centre point's pose at `frame`: on the segment's Linear or Circular move (rounding
    a blended key), or the control's own pose (a Joint move, before the first key or after the last)."""
    if tool.path is not None:
        return follow_path_pose(tool, rig, pose, frame, step, target_node)
    if target_node.control_object is None:
        return pose
    keys = ControlKeys(target_node)
    if paths.segment_of(keys.keys, frame) is None:
        return pose
    moved = keyed_moves(tool, keys, rig, pose, frame).pose(frame)
    return pose if moved is None else moved


def keyed_moves(tool, keys: ControlKeys, rig, pose: np.ndarray, frame: float) -> KeyedMoves:
    """The Tool's moves between the control's keys (core/key_moves.py), each key's pose read from
    the F-curves only when a frame needs it. `pose`: the control's pose at `frame`, the current frame."""
    rows = [tool.move_at(key) for key in keys.keys[:-1]]
    vias = [_via_point(tool, via, rig) if move == "CIRCULAR" else None for move, via in rows]
    return KeyedMoves(keys.keys, [move for move, _ in rows], vias, tool.ramp, tool.blend_radius,
                      lambda i: keys.pose_at(pose, frame, keys.keys[i]))


def segments(tool, target_node, rig, pose: np.ndarray | None, frame: float, fps: float) -> list[dict]:
    """Each segment between the control's keys: its frames, move, length (m) and the tool's
    constant speed (m/s) away from the ramps (none at a blended key), as the Tool panel shows
    them. `pose` is the control's pose (rig space) at `frame`, the current frame: it anchors its
    pose at the keys."""
    if pose is None or target_node.control_object is None:
        return []
    keys = ControlKeys(target_node)
    moves = keyed_moves(tool, keys, rig, pose, frame)
    found = []
    for i, (first, last) in enumerate(zip(keys.keys, keys.keys[1:])):
        move = moves.moves[i]
        speed = moves.speed(i) * fps if move != "JOINT" else None
        found.append({"first": first, "last": last, "move": move, "length": moves.length(i), "speed": speed})
    return found



def path_points(path_object, rig, chordal: float = 0.0, angular: float = 0.0) -> np.ndarray:
    """The evaluated points of a curve (as finely as its resolution makes them), or a mesh's edge
    loop (or chain) in order along its edges, in the rig's space (the robot's root frame). With a
    chordal (m) or angular (rad) tolerance, a Bezier curve is sampled to them instead
    (core/curve_sampling.py); a mesh's edges, or a poly or NURBS curve, stay as they are."""
    import bpy

    if (chordal > 0.0 or angular > 0.0) and path_object.type == "CURVE" and path_object.data.splines \
            and all(spline.type == "BEZIER" for spline in path_object.data.splines):
        return bezier_path_points(path_object, rig, chordal, angular)

    evaluated = path_object.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    try:
        local = np.array([tuple(v.co) for v in mesh.vertices], dtype=float).reshape(-1, 3)
        edges = [tuple(e.vertices) for e in mesh.edges] if path_object.type == "MESH" else None
    finally:
        evaluated.to_mesh_clear()
    if edges is not None:  # a mesh: its edge loop (or chain), in order along the edges
        try:
            local = local[paths.edge_loop_order(len(local), edges)]
        except ValueError as exc:
            from ..core.errors import KinemaError

            raise KinemaError(f"path '{path_object.name}': {exc}") from exc
    elif path_object.type == "CURVE" and getattr(path_object.data.splines[0], "use_cyclic_u", False) and len(local):
        local = np.vstack([local, local[:1]])  # a closed curve comes back to its start
    matrix = np.array(rig.matrix_world.inverted_safe() @ path_object.matrix_world, dtype=float)
    return local @ matrix[:3, :3].T + matrix[:3, 3]


def bezier_path_points(path_object, rig, chordal: float, angular: float) -> np.ndarray:
    """A Bezier curve's points by the tolerances, its splines one after another, in the rig's space."""
    from ..core import curve_sampling

    matrix = np.array(rig.matrix_world.inverted_safe() @ path_object.matrix_world, dtype=float)
    found = []
    for spline in path_object.data.splines:
        rows = [[tuple(p.co), tuple(p.handle_left), tuple(p.handle_right)] for p in spline.bezier_points]
        if len(rows) < 2:
            continue
        local = np.array(rows, dtype=float)  # point, left handle, right handle
        moved = local @ matrix[:3, :3].T + matrix[:3, 3]  # the same curve in the rig's space (affine)
        segments = curve_sampling.spline_segments(moved[:, 0], moved[:, 1], moved[:, 2], spline.use_cyclic_u)
        found.append(curve_sampling.sample_bezier(segments, chordal, angular))
    if not found:
        from ..core.errors import KinemaError

        raise KinemaError(f"path '{path_object.name}': its curve has no segment to follow")
    return np.vstack(found)


#: Measured paths by their points (a handful: one per Tool path being played).
_PATHS: dict[bytes, paths.PolylinePath] = {}


def follow_path_pose(tool, rig, pose: np.ndarray, frame: float, step=None, target_node=None) -> np.ndarray:
    """The tool centre point's pose at `frame` on the Tool's path: its position from the timing,
    its orientation the control's (kept, or carried along the tangent), turned about the tool
    axis where the Tool allows it and `step` (the solving program step) is given."""
    import bpy

    points = path_points(tool.path, rig, tool.chordal_tolerance, tool.angular_tolerance)
    if tool.path_orientation == "KEEP" and (tool.approach > 0 or tool.retract > 0):  # along the tool's own axis: the control's Z
        points = paths.with_approach(points, pose[:3, 2], tool.approach, tool.retract)
    key = points.tobytes()
    path = _PATHS.get(key)
    if path is None:  # measuring a path (its turns) costs more than reading it: kept while it is the same
        if len(_PATHS) >= 8:
            _PATHS.clear()
        path = _PATHS[key] = paths.PolylinePath(points)
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    distance = paths.path_distance(path.length, tool.path_timing, frame, tool.path_start, fps, tool.path_speed, tool.ramp,
                                   tool.path_progress)
    found = paths.follow_pose(path, distance, pose[:3, :3], tool.path_orientation)
    if tool.turn_about_axis and tool.turn_range > 0.0 and step is not None:
        distances, turns = turn_profile(tool, target_node, path, key, pose[:3, :3], step)
        from ..core.tool_axis import turned

        found = turned(found, float(np.interp(distance, distances, turns)))
    return found


#: Turn profiles of Follow Paths with freedom about the tool axis, by what decides them (a handful).
_TURNS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def turn_profile(tool, target_node, path: paths.PolylinePath, path_key: bytes, rotation: np.ndarray, step):
    """(distances, turns): the Tool's turn about its axis along its path (core/tool_axis.turn_profile),
    chosen from the robot's mid configuration with the options the step solves with, so a
    frame's turn depends on the path, the robot and the Tool, not on the frames played before."""
    from ..core import tool_axis
    from ..core.reach_preview import bake_solve_options

    robot = step.robot
    link = tool.link_name or (target_node.link_for_index(robot, 0) if target_node is not None else robot.tool_point)
    offset = tool_offset(tool)
    options = bake_solve_options(step, robot)
    key = (path_key, np.round(rotation, 9).tobytes(), tool.path_orientation, offset.tobytes(), link,
           round(float(tool.turn_range), 9), robot.name, tuple(sorted(options.held_joints)))
    found = _TURNS.get(key)
    if found is None:  # some hundred solves: made once per path, robot and Tool
        if len(_TURNS) >= 8:
            _TURNS.clear()
        found = _TURNS[key] = tool_axis.turn_profile(robot, link, path, rotation, tool.path_orientation,
                                                     robot.mid_configuration(), options, float(tool.turn_range),
                                                     offset=offset)
    return found


def tool_poses(tool, target_node, rig, pose_now: np.ndarray, frame_now: float, frames, step=None) -> list[np.ndarray]:
    """The tool centre point's pose (rig space) at each of `frames`, read from the keys without
    going to those frames (`pose_now`: the control's pose at `frame_now`, the current frame). A
    Follow Path with keyed Progress takes the progress of the current frame."""
    keys = ControlKeys(target_node) if target_node.control_object is not None else None
    found = []
    for frame in frames:
        control = keys.pose_at(pose_now, frame_now, frame) if keys is not None and keys.curves else pose_now
        found.append(moved_pose(tool, target_node, rig, control, frame, step))
    return found
