"""Obstacles that move during a segment (issue #31, item 3): the plan is checked against each
obstacle where it is when each configuration is reached, not only where it stood at the first key.

A segment is planned against the obstacles at its first key (`plan_between_keys`). Where the
obstacles are not the same on every frame of the segment (keyed, constrained, or a carried
object's grasp changing), the timed path is checked frame by frame: the move from frame f to f+1
(sampled every `CHECK_STEP` of joint motion) against the obstacles as they are on frame f and as
they are on frame f+1. An obstacle is taken at the frames only, not in between them: a box that
slides less than the margin per frame stays covered. A plan that fails that check is rejected
and the segment planned again, conservatively, against the union of every frame's obstacles (the
obstacle swept over the segment, at its frames); that plan passes the same timed check, or the
segment is flagged "failed" with the per-frame path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..collision import Avoid, World
from ..model.robot import RobotModel
from .between_keys import CHECK_STEP, SegmentPlan, _Checker, plan_between_keys


def world_of(avoid: Avoid | None) -> str:
    """What a frame avoids, as text two frames are compared by (the segment key's own reading)."""
    if avoid is None or avoid.world is None:
        return "-"
    return repr((avoid.world.obstacles, avoid.world.ground, avoid.carried))


def obstacles_move(avoids: Sequence[Avoid | None]) -> bool:
    """Whether what is avoided differs between the frames of a segment."""
    return len({world_of(a) for a in avoids}) > 1


def swept_avoid(avoids: Sequence[Avoid | None]) -> Avoid:
    """One `Avoid` holding every frame's obstacles (each distinct pose once, under its own name,
    so (link, obstacle) pairs allowed to touch still match): the conservative fallback."""
    present = [a for a in avoids if a is not None]
    obstacles, names, seen = [], [], set()
    for avoid in present:
        if avoid.world is None:
            continue
        for obstacle, name in zip(avoid.world.obstacles, avoid.world.names):
            text = repr(obstacle)
            if text not in seen:
                seen.add(text)
                obstacles.append(obstacle)
                names.append(name)
    ground = any(a.world is not None and a.world.ground for a in present)
    carried = tuple({repr(c): c for a in present for c in a.carried}.values())
    return replace(present[0], world=World(tuple(obstacles), ground, tuple(names)), carried=carried)


def timed_clear(robot: RobotModel, joints: np.ndarray, avoids: Sequence[Avoid | None]) -> tuple[bool, float]:
    """Whether the timed path (one configuration per frame) keeps each frame's margin from the
    obstacles where they are on that frame and on the next, and the least distance measured."""
    joints = np.asarray(joints, dtype=float)
    checkers: dict[str, _Checker] = {}
    least = math.inf
    for f in range(len(joints) - 1):
        for avoid in {world_of(a): a for a in (avoids[f], avoids[f + 1]) if a is not None}.values():
            key = world_of(avoid)
            if key not in checkers:
                checkers[key] = _Checker(robot, avoid)
                checkers[key].memo = {}
            clear, low = checkers[key].path_clear(joints[f:f + 2], CHECK_STEP)
            least = min(least, low)
            if not clear:
                return False, least
    return True, least


def plan_between_moving_keys(robot: RobotModel, start, goal, fps: float, avoids: Sequence[Avoid | None], limits=None,
                             per_frame: np.ndarray | None = None) -> SegmentPlan:
    """`plan_between_keys` for a segment whose frames avoid `avoids` (one per frame, None: nothing
    that frame): planned against the first key's obstacles, checked against each frame's, and on
    a failure planned again against them all (module doc)."""
    count = len(avoids)
    first = next((a for a in avoids if a is not None), None)
    if first is None:
        raise ValueError("a segment with nothing to avoid on any frame keeps its per-frame path")
    if not obstacles_move(avoids):
        return plan_between_keys(robot, start, goal, count, fps, first, limits, per_frame=per_frame)
    clock = time.perf_counter()
    plan = plan_between_keys(robot, start, goal, count, fps, avoids[0] or first, limits, per_frame=per_frame)
    if plan.mode != "failed":
        clear, least = timed_clear(robot, plan.joints, avoids)
        if clear:
            return replace(plan, least_clearance_m=min(plan.least_clearance_m, least),
                           planning_s=time.perf_counter() - clock)
    swept = plan_between_keys(robot, start, goal, count, fps, swept_avoid(avoids), limits, per_frame=per_frame)
    planning = time.perf_counter() - clock
    if swept.mode == "failed":
        return replace(swept, planning_s=planning,
                       flag=f"an obstacle moves into the path during the segment; swept over it: {swept.flag}")
    clear, least = timed_clear(robot, swept.joints, avoids)
    if not clear:  # cannot happen unless the union drops an obstacle: said, never played silently
        return replace(swept, mode="failed", joints=np.asarray(per_frame if per_frame is not None else swept.joints),
                       planning_s=planning, flag=f"the plan round the moving obstacles comes within {least * 1000:.1f} mm")
    if swept.mode == "per-frame":  # clear of the swept obstacle as it was: still the per-frame answers
        return replace(swept, planning_s=planning)
    return replace(swept, least_clearance_m=min(swept.least_clearance_m, least), planning_s=planning)
