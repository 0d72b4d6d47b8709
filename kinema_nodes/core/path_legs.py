"""A path from points, the path file of `bake --path`: its legs (one move each, timed from the
speed and the ramps) and the tool's pose at every frame.

The maths of one move is core/paths.py's, the rounding of a blended point core/key_moves.py's;
this module only lays the legs end to end and samples them by time, so the same file gives the
same poses wherever it is baked.
"""

from __future__ import annotations

import numpy as np

from .key_moves import KeyedMoves
from .paths import _circular_at, _linear_at, _orthonormal, circle, matrix_quaternion, progress_between, segment_length, with_approach


class PathLeg:
    """One move of a path made of points: from `start` to `end` (4x4 tool poses), by `move`
    (JOINT, LINEAR or CIRCULAR through `via`), taking `seconds` with the ramps of `ramp`."""

    def __init__(self, start: np.ndarray, end: np.ndarray, move: str, via, seconds: float, ramp: float,
                 ramp_out: float | None = None):
        self.start, self.end, self.move, self.ramp = start, end, move, ramp
        self.ramp_out = ramp if ramp_out is None else ramp_out  # `ramp` is the first end's; 0 at a blended point
        self.blend = 0.0  # the blend radius at the leg's end (path_legs sets it; 0: the tool stops there)
        self.via = None if via is None else np.asarray(via, dtype=float)
        self.seconds = float(seconds)
        # what every frame of the leg shares, worked out once (a 10,000-frame path: 2.3 s -> well under 1 s)
        self._rotations = matrix_quaternion(start[:3, :3]), matrix_quaternion(end[:3, :3])
        self._circle = circle(start[:3, 3], self.via, end[:3, 3]) if move == "CIRCULAR" and via is not None else None

    def pose(self, u: float) -> np.ndarray:
        """The tool's pose at time fraction `u` of the leg, as move_pose gives it. A Joint leg
        moves as a keyed control does between two rows of a targets CSV (on the line, turning on
        the shortest arc), with no promise of a constant speed: that is Linear's and Circular's."""
        s = progress_between(u, self.ramp, self.ramp_out)
        if self._circle is not None:
            return _circular_at(self._circle, *self._rotations, s)
        return _linear_at(self.start, self.end, *self._rotations, s)


def _turn_angle(a: np.ndarray, b: np.ndarray) -> float:
    cosine = (np.trace(_orthonormal(a).T @ _orthonormal(b)) - 1.0) / 2.0
    return float(np.arccos(np.clip(cosine, -1.0, 1.0)))


def path_legs(poses, moves, vias, speed: float, ramp: float = 0.1, approach: float = 0.0, retract: float = 0.0,
              turn_speed: float = np.pi / 2, blend: float = 0.0) -> list[PathLeg]:
    """The legs of a path through `poses` (4x4 tool poses, two or more): leg i goes from poses[i]
    to poses[i + 1] by moves[i] (through vias[i] for a Circular one), at `speed` m/s between
    ramps of `ramp` of its time at each end, so its time is length / ((1 - ramp) speed) (a leg
    that only turns takes its angle at `turn_speed` rad/s instead, whichever is longer). An
    approach of `approach` metres comes first: a Linear leg in along the first pose's tool axis
    (its Z), from that far back; a retract of `retract` metres last, back out along the last
    pose's Z. Why per leg and not one ramp for the whole path: each point is where the tool stops,
    as a robot program's points are. With a `blend` radius (m), a point between two Linear or
    Circular moves is not a stop: the legs on either side have no ramp there (a leg's time is
    then length / ((1 - ramps / 2) speed), its speed still `speed`) and path_frames rounds the
    corner within the radius (core/key_moves.py). The approach's end and the retract's start stay stops."""
    poses = [np.asarray(p, dtype=float) for p in poses]
    legs_from = []
    if approach > 0.0:
        back = poses[0].copy()
        back[:3, 3] = with_approach([poses[0][:3, 3]], poses[0][:3, 2], approach, 0.0)[0]
        legs_from.append((back, poses[0], "LINEAR", None))
    first = len(legs_from)
    for i, (move, via) in enumerate(zip(moves, vias)):
        legs_from.append((poses[i], poses[i + 1], move, via))
    last = len(legs_from)
    if retract > 0.0:
        out = poses[-1].copy()
        out[:3, 3] = with_approach([poses[-1][:3, 3]], poses[-1][:3, 2], 0.0, retract)[-1]
        legs_from.append((poses[-1], out, "LINEAR", None))
    # key k joins legs k - 1 and k; only the path's own points between two moves that run the line blend
    blended = {k for k in range(first + 1, last) if blend > 0.0 and legs_from[k - 1][2] != "JOINT" and legs_from[k][2] != "JOINT"}
    legs = []
    for k, (start, end, move, via) in enumerate(legs_from):
        ramp_in = 0.0 if k in blended else ramp
        ramp_out = 0.0 if k + 1 in blended else ramp
        cruise = 1.0 - (min(max(float(ramp_in), 0.0), 0.5) + min(max(float(ramp_out), 0.0), 0.5)) / 2.0
        length = segment_length(start, end, move, via)
        seconds = max(length / speed, _turn_angle(start[:3, :3], end[:3, :3]) / turn_speed) / cruise
        leg = PathLeg(start, end, move, via, seconds, ramp_in, ramp_out)
        leg.blend = blend if k + 1 in blended else 0.0  # the radius at the leg's end (0: it stops there)
        legs.append(leg)
    return legs


def path_frames(legs: list[PathLeg], fps: float, first_frame: int = 1) -> tuple[np.ndarray, list[np.ndarray]]:
    """(frames, the tool's pose at each): every whole frame from `first_frame` until the last leg
    ends (the last frame holds the end pose). A frame's pose depends only on its time, so the
    same file gives the same poses wherever it is baked. Corners at blended points are rounded
    as core/key_moves.py rounds a Tool's blended keys."""
    ends = np.cumsum([leg.seconds for leg in legs])
    total = float(ends[-1]) if len(ends) else 0.0
    count = int(np.ceil(total * fps - 1e-9)) + 1
    frames = np.arange(first_frame, first_frame + count)
    rounded = None
    radius = max((leg.blend for leg in legs), default=0.0)
    if radius > 0.0:
        times = [0.0, *ends.tolist()]
        stops = {k for k in range(1, len(legs)) if legs[k - 1].blend <= 0.0}
        ramp = max(max(leg.ramp, leg.ramp_out) for leg in legs)
        rounded = KeyedMoves(times, [leg.move for leg in legs], [leg.via for leg in legs], ramp, radius,
                             lambda k: legs[k].start if k < len(legs) else legs[-1].end, stops=stops)
    poses = []
    for k in range(count):
        t = min(k / fps, total)
        pose = rounded.pose(t) if rounded is not None else None
        if pose is None:
            i = int(min(np.searchsorted(ends, t, side="right"), len(legs) - 1))
            begin = ends[i] - legs[i].seconds
            u = (t - begin) / legs[i].seconds if legs[i].seconds > 0 else 1.0
            pose = legs[i].pose(u)
        poses.append(pose)
    return frames, poses
