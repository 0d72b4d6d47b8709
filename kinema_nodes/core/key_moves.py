"""Moves between keys with a blend radius: the tool rounds the corner at a key instead of stopping.

core/paths.py gives one segment's move: the tool leaves a key and stops at the next, its speed
ramping up and down (a trapezoid). With a blend radius, a key between two Linear or Circular
segments is not a stop: the ramps there go, the tool runs into the key at the incoming
segment's constant speed and out at the outgoing one's, and over a window of +-tau frames
about the key its path bends from one to the other (a parabolic blend: the velocity changes
at a constant rate from incoming to outgoing). This is how a robot program's zone or blend
radius behaves (ABB's zones, UR's blend radius): the key frames stay where the animator put
them, and the tool passes within the radius of a blended key instead of through it.

tau is the smaller of (radius / incoming speed) and (radius / outgoing speed), so the blend
begins and ends within the radius of the key, and every point of it is within the radius;
tau is capped at half of each segment's cruise, so two blends (or a blend and a ramp) never
overlap. A frame's pose depends only on the keys, the moves and the frame, never on the
frames played before it: scrubbing either way and baking give the same poses.

Within a window, with x = frame - key and w = (x + tau)^2 / (4 tau), the pose is the incoming
move's at key + x - w composed with the outgoing move's at key + w, both taken relative to the
key (positions add, rotations compose). For straight segments this is exactly the parabolic
blend of the two velocities; for arcs it is the same sum, so position and velocity stay
continuous at both ends of the window.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import paths


def progress(u: float, ramp_in: float, ramp_out: float) -> float:
    """paths.progress_between: the fraction of the way at time fraction `u` of a segment with a
    ramp at either end (0: no stop at that end)."""
    return paths.progress_between(u, ramp_in, ramp_out)


def _product(a, b) -> np.ndarray:
    w0, x0, y0, z0 = a
    w1, x1, y1, z1 = b
    return np.array([w0 * w1 - x0 * x1 - y0 * y1 - z0 * z1, w0 * x1 + x0 * w1 + y0 * z1 - z0 * y1,
                     w0 * y1 - x0 * z1 + y0 * w1 + z0 * x1, w0 * z1 + x0 * y1 - y0 * x1 + z0 * w1])


class KeyedMoves:
    """The tool's pose at any frame between a control's keys.

    frames: the key frames, ascending; moves[i], vias[i]: how segment i (frames[i]..frames[i+1])
    travels (paths.MOVES; a via point for CIRCULAR); ramp: as paths.progress; blend: the blend
    radius in metres (0: every key is a stop); pose_of(i): the control's 4x4 pose at key i, asked
    only for the keys a frame needs; stops: keys that stay stops whatever their moves (a path
    file's approach and retract ends)."""

    def __init__(self, frames: Sequence[float], moves: Sequence[str], vias: Sequence, ramp: float, blend: float,
                 pose_of: Callable[[int], np.ndarray], stops=frozenset()):
        self.frames = [float(f) for f in frames]
        self.stops = frozenset(stops)
        self.moves, self.vias = list(moves), list(vias)
        self.ramp, self.blend = min(max(float(ramp), 0.0), 0.5), max(float(blend), 0.0)
        self._pose_of, self._poses, self._legs, self._taus = pose_of, {}, {}, {}

    # ---- which keys are stops ---------------------------------------------------------------
    def blended(self, key: int) -> bool:
        """Whether the tool runs through key `key` (a key between two Linear or Circular segments,
        with a blend radius) instead of stopping at it."""
        return (self.blend > 0.0 and 0 < key < len(self.frames) - 1 and key not in self.stops
                and self.moves[key - 1] != "JOINT" and self.moves[key] != "JOINT")

    def ramps(self, segment: int) -> tuple[float, float]:
        """(ramp_in, ramp_out) of a segment: none at a blended end."""
        return (0.0 if self.blended(segment) else self.ramp, 0.0 if self.blended(segment + 1) else self.ramp)

    # ---- one segment, as paths has it, with its own ramps ----------------------------------------
    def key_pose(self, key: int) -> np.ndarray:
        if key not in self._poses:
            self._poses[key] = np.asarray(self._pose_of(key), dtype=float)
        return self._poses[key]

    def _leg(self, segment: int):
        if segment not in self._legs:
            start, end = self.key_pose(segment), self.key_pose(segment + 1)
            via = self.vias[segment] if self.moves[segment] == "CIRCULAR" else None
            found = paths.circle(start[:3, 3], via, end[:3, 3]) if via is not None else None
            rotations = paths.matrix_quaternion(start[:3, :3]), paths.matrix_quaternion(end[:3, :3])
            self._legs[segment] = (start, end, found, rotations)
        return self._legs[segment]

    def length(self, segment: int) -> float:
        start, end, found, _ = self._leg(segment)
        return found[1] * found[4] if found is not None else float(np.linalg.norm(end[:3, 3] - start[:3, 3]))

    def speed(self, segment: int) -> float:
        """The tool's constant speed in the segment, metres per frame, away from its ramps."""
        span = self.frames[segment + 1] - self.frames[segment]
        ramp_in, ramp_out = self.ramps(segment)
        return self.length(segment) / ((1.0 - (ramp_in + ramp_out) / 2.0) * span) if span > 0 else 0.0

    def _unblended(self, segment: int, frame: float) -> tuple[np.ndarray, np.ndarray]:
        """(position, wxyz) on the segment's own move at `frame`, the blends aside."""
        start, end, found, (q0, q1) = self._leg(segment)
        first, last = self.frames[segment], self.frames[segment + 1]
        s = progress((frame - first) / (last - first), *self.ramps(segment))
        if found is not None:
            centre, radius, e1, e2, sweep = found
            position = centre + radius * (np.cos(s * sweep) * e1 + np.sin(s * sweep) * e2)
        else:
            position = (1.0 - s) * start[:3, 3] + s * end[:3, 3]
        return position, paths.slerp(q0, q1, s)

    # ---- the blend window of a key ----------------------------------------------------------------
    def tau(self, key: int) -> float:
        """Half the blend window of key `key`, in frames (0: not blended)."""
        if not self.blended(key):
            return 0.0
        if key not in self._taus:
            bounds = []
            for segment, far in ((key - 1, key - 1), (key, key + 1)):
                span = self.frames[segment + 1] - self.frames[segment]
                far_ramp = 0.0 if self.blended(far) else self.ramp
                bounds.append(0.5 * (1.0 - far_ramp) * span)
                speed = self.speed(segment)
                if speed > 0.0:
                    bounds.append(self.blend / speed)
            self._taus[key] = max(min(bounds), 0.0)
        return self._taus[key]

    def _blend(self, key: int, frame: float) -> np.ndarray:
        x, tau = frame - self.frames[key], self.tau(key)
        w = (x + tau) ** 2 / (4.0 * tau)
        at = self.frames[key]
        p_in, q_in = self._unblended(key - 1, at + x - w)
        p_out, q_out = self._unblended(key, at + w)
        corner = self.key_pose(key)
        q_key = paths.matrix_quaternion(corner[:3, :3])
        q_key_inverse = q_key * np.array([1.0, -1.0, -1.0, -1.0])
        rotation = _product(_product(q_in, q_key_inverse), q_out)
        return paths.pose_matrix(p_in + p_out - corner[:3, 3], rotation)

    # ---- a frame ------------------------------------------------------------------------------------
    def pose(self, frame: float) -> np.ndarray | None:
        """The tool's 4x4 pose at `frame`; None outside the keys or in a Joint segment (the
        control's own animation stands there)."""
        segment = paths.segment_of(self.frames, frame)
        if segment is None or self.moves[segment] == "JOINT":
            return None
        for key in (segment, segment + 1):
            tau = self.tau(key)
            if tau > 0.0 and abs(frame - self.frames[key]) < tau:
                return self._blend(key, frame)
        return paths.pose_matrix(*self._unblended(segment, frame))
