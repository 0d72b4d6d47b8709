"""Plan Between Keys in a live session (issue #31): a shot's key segments, the key each
segment's plan is cached under, and what a frame inside a planned segment shows.

A segment's plan depends on what the animator set for it: the control's pose on each of its
frames, what the robot avoids on them, the margin, the limits, the frame rate, the Solver's
settings and the robot. Those are hashed into the segment's key and the plan is kept under it,
so scrubbing, playing and baking show one plan, bit for bit, and an edit re-plans only the
segments whose inputs it changed. The per-frame answers the plan starts from (the keys'
configurations, the per-frame path) are not part of the key: they follow from those inputs, but
each frame's solve is warm-started from the one before, so two solves of one shot may differ in
their last bits; the plan cached for the inputs does not. They can also differ by a branch: an
edit before a segment can make IK take the other elbow at the key the two segments share, with
this segment's inputs unchanged. `keys_moved` tells that apart from the last bits
(`KEY_TOLERANCE_RAD`), and such a segment is planned again from the keys as they are now.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..lru import LRU
from .between_keys import SegmentPlan

#: Plans kept, over every shot of the session (a plan of a 100-frame segment of a 7-axis arm is ~6 kB).
PLANS_KEPT = 256

#: Segment key -> `SegmentPlan`: what every live shot and bake of this process reads.
SEGMENT_PLANS = LRU(PLANS_KEPT)


#: How far (rad, any joint) a cached plan's first or last configuration may be from the key's
#: per-frame answer and still be played: above the warm-started solve's own repeatability (1e-6
#: rad, tests/blender/test_animator_workflow.py), far below a branch change (tenths of a radian).
KEY_TOLERANCE_RAD = 1e-4


def keys_moved(plan: SegmentPlan, start: np.ndarray, end: np.ndarray, tolerance: float = KEY_TOLERANCE_RAD) -> bool:
    """Whether a planned segment no longer starts at `start` or ends at `end` (the keys' per-frame
    answers now): played as it is, it would jump at a key, so it is planned again."""
    if plan.mode != "planned":
        return False
    ends = np.stack([plan.joints[0], plan.joints[-1]])
    keys = np.stack([np.asarray(start, dtype=float), np.asarray(end, dtype=float)])
    return bool(np.max(np.abs(ends - keys)) > tolerance)


def key_segments(key_frames: Sequence[float], first: int, last: int) -> list[tuple[int, int]]:
    """The segments (first frame, last frame) between consecutive keys inside [first, last];
    keys on fractional frames are taken at their nearest frame."""
    keys = sorted({int(round(float(k))) for k in key_frames if first <= round(float(k)) <= last})
    return [(a, b) for a, b in zip(keys[:-1], keys[1:]) if b > a]


def segment_key(robot_fingerprint: str, first: int, last: int, controls: np.ndarray, worlds: Sequence, settings: str,
                limits=None, fps: float = 24.0) -> str:
    """The hash a segment's plan is cached under: the robot, the segment's frames, the controls'
    poses on each frame (F, targets, 4, 4), what is avoided on each frame (`World`s or None),
    the Solver's settings as text (margin, self, tolerances...), the limits and the frame rate."""
    h = hashlib.sha256()
    h.update(robot_fingerprint.encode())
    h.update(repr((int(first), int(last), float(fps), settings)).encode())
    h.update(np.ascontiguousarray(controls, dtype=float).tobytes())
    for world in worlds:
        h.update(b"-" if world is None else repr((world.obstacles, world.ground)).encode())
    if limits is not None:
        for kind in ("velocity", "acceleration", "jerk"):
            h.update(np.ascontiguousarray(limits.effective(kind), dtype=float).tobytes())
    return h.hexdigest()


@dataclass
class ShotSegment:
    """One segment of a live shot: its frames, its key, and its plan once known (None while planning)."""

    first: int
    last: int
    key: str
    plan: SegmentPlan | None = None


@dataclass
class ShotPlans:
    """One Solver's segments for one state of its shot (`signature`: what the live check compares)."""

    signature: bytes
    segments: list[ShotSegment] = field(default_factory=list)
    gathered: bool = False  # the segments' keys are known (the frames were read and solved)

    def joints_at(self, frame: float) -> np.ndarray | None:
        """The plan's configuration at `frame` when a planned segment holds it (between two frames:
        the straight line between them, as the bake's LINEAR keys play), else None."""
        for segment in self.segments:
            plan = segment.plan
            if plan is None or plan.mode != "planned" or not segment.first <= frame <= segment.last:
                continue
            offset = float(frame) - segment.first
            low = int(np.floor(offset))
            if offset == low:
                return plan.joints[low].copy()
            t = offset - low
            return plan.joints[low] + (plan.joints[low + 1] - plan.joints[low]) * t
        return None

    @property
    def done(self) -> int:
        return sum(segment.plan is not None for segment in self.segments)

    def readout(self) -> str:
        """'Planning 2/5 segments' while some are pending; then how many were planned, and each flag."""
        total = len(self.segments)
        if not self.gathered:
            return "Planning: reading the keys"
        if self.done < total:
            return f"Planning {self.done + 1}/{total} segments"
        planned = sum(s.plan.mode == "planned" for s in self.segments)
        parts = [f"{planned} of {total} segments planned"]
        for segment in self.segments:
            plan = segment.plan
            if plan.flag:  # a too-short segment's flag names its shortest executable duration
                parts.append(f"frames {segment.first}-{segment.last}: {plan.flag}")
        return "; ".join(parts)

    def flags(self) -> list[str]:
        return [f"frames {s.first}-{s.last}: {s.plan.flag}" for s in self.segments if s.plan is not None and s.plan.flag]
