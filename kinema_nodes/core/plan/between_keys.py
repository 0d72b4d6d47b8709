"""Plan Between Keys (issue #31): a collision-free joint path from one key's configuration to the
next, timed to fill exactly the frames between them.

Per-frame avoidance can only stop short or flip where the keyed in-between crosses a table; what
the animator keyed was the start and the end, so the path between them is ours to choose, and
the timing is theirs. The steps:

1. the per-frame path (the per-frame IK answers when given, else the straight joint-space line)
   is checked densely; if it keeps the margin everywhere the segment is left untouched
   ("per-frame"), so nothing changes where nothing collides;
2. else OMPL's RRTConnect plans in the free joints, with our compiled capsule checker
   (`core.collision.measure_pairs`) as the state validity check (a capsule distance is a lower
   bound of the meshes' own, so a state it passes is clear on the real meshes by at least the
   margin) and as the motion validator, which checks a motion's samples every `CHECK_STEP` but
   measures only those no measured clearance already proves clear (`certify.Certifier.walk`:
   conservative advancement, every sample measured or proven); OMPL's PathSimplifier shortens
   the path (reduceVertices, ropeShortcutPath, reduceVertices); a path longer than `RETRY_ABOVE`
   times the straight line is planned again from other seeds while the work stays small
   (`plan_path`), the shortest kept;
   the result is checked densely again, every `CHECK_STEP`, the same way;
3. the path (straight pieces in joint space) is timed rest to rest on each piece with the
   minimum-jerk quintic, the pieces' durations in proportion to the shortest each could take
   under the velocity, acceleration and jerk limits, so the whole fills the segment's frames
   exactly. If the frames are too few, the segment is flagged with the shortest executable
   duration and the motion is never sped up past the limits silently: the frames still fill the
   keyed time, and the flag says so.

Deterministic: OMPL's random number generator is seeded from a hash of the segment's inputs
(robot, start, goal, free joints, obstacles, margin, frames), and the planner stops at its first
exact solution, so the same inputs give the same plan bit for bit (a plan that needs the whole
time budget is a failure, not a different plan). The simplifier runs a fixed sequence of
steps, never against a clock.

OMPL (PyPI `ompl`, 2.0.1: manylinux x86_64 wheels for cp311 and cp313) is imported lazily: without
it a segment whose per-frame path is clear is still reported, and one that needs a plan says how
to install it.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..collision.avoid import Avoid, check_avoid
from ..errors import KinemaError
from .certify import Certifier

if TYPE_CHECKING:
    from ..model.robot import RobotModel
    from ..shot.limits import Limits

#: Largest joint step (rad, or m for a prismatic joint) between two configurations the dense check
#: measures: at 0.005 rad a point 1 m from the axis moves 5 mm, well inside a margin of a centimetre.
CHECK_STEP = 0.005
#: The step (rad) at which the planner checks its motions: the dense check's own. A motion's
#: samples are measured only where no measured clearance already proves them clear
#: (`certify.Certifier.walk`), so the fine step costs little away from obstacles; and as each
#: measurement is kept for the plan, the dense check of the kept path walks the planner's own
#: samples again and finds them measured.
PLANNER_STEP = CHECK_STEP
#: The rope shortcutting's largest piece (rad, L2 in the free joints): larger pieces, fewer checks,
#: a longer path (bench/RESULTS.md, bench_plan).
ROPE_DELTA = 2.0
#: The planner's time budget (s). RRTConnect returns at its first solution, so this only bounds a failure.
PLANNING_BUDGET_S = 5.0
#: RRTConnect's first solution sometimes takes the long way round an obstacle (a different side of
#: it), which no shortcutting undoes. A simplified path longer than `RETRY_ABOVE` times the
#: straight line between the keys (joint space) is planned again from other seeds, up to
#: `PLAN_TRIES` in all, and the shortest is kept (bench/RESULTS.md, bench_plan_peer's quality).
RETRY_ABOVE = 1.2
PLAN_TRIES = 6
#: ... while the plans so far have measured fewer pair distances than this (measurements x pair
#: rows: deterministic, unlike a clock). A 7-axis arm's plan measures ~40,000, so it gets its
#: retries; a dual arm's (~1,500 rows) ~800,000, so its first plan (0.2-0.6 s) is kept.
RETRY_WORK = 400_000
#: The quintic s(t) = 10 t^3 - 15 t^4 + 6 t^5 on [0, 1]: its peak speed, acceleration and jerk.
QUINTIC_PEAKS = (1.875, 10.0 / math.sqrt(3.0), 60.0)


@dataclass(frozen=True)
class SegmentPlan:
    """One key-to-key segment: `joints` (F, dof), one configuration per frame, both keys included;
    `mode` "planned", "per-frame" (left untouched) or "failed" (no plan found: the per-frame path
    is returned, flagged); the path's length in joint space (rad, Euclidean); the least clearance
    along it (m, capsule model: the least the dense check measured, every sample it did not measure
    being proven clear by the margin from a measured one's clearance); planning time (s); a flag ("" when none) and, when the
    frames are too few, the shortest executable duration (s)."""

    joints: np.ndarray
    mode: str
    path_length_rad: float
    least_clearance_m: float
    planning_s: float
    flag: str = ""
    shortest_duration_s: float | None = None
    waypoints: np.ndarray | None = None  # the planned path's corners (W, dof); None when per-frame

    def to_dict(self) -> dict:
        return {"mode": self.mode, "path_length_rad": float(self.path_length_rad),
                "least_clearance_m": float(self.least_clearance_m) if math.isfinite(self.least_clearance_m) else None,
                "planning_s": float(self.planning_s), "flag": self.flag or None,
                "shortest_duration_s": None if self.shortest_duration_s is None else float(self.shortest_duration_s)}


def ompl_available() -> tuple[bool, str]:
    """Whether OMPL's Python bindings import, and if not, what to install."""
    try:
        from ompl import base, geometric, util  # noqa: F401
    except ImportError as exc:
        return False, f"Plan Between Keys needs OMPL: pip install ompl ({exc})"
    return True, ""


def densify(waypoints: np.ndarray, step: float = CHECK_STEP) -> np.ndarray:
    """The polyline through `waypoints` (W, n) sampled so no joint moves more than `step` between samples."""
    waypoints = np.asarray(waypoints, dtype=float)
    out = [waypoints[:1]]
    for a, b in zip(waypoints[:-1], waypoints[1:]):
        count = max(1, int(math.ceil(float(np.max(np.abs(b - a), initial=0.0)) / step)))
        t = np.arange(1, count + 1)[:, None] / count
        out.append(a + (b - a) * t)
    return np.concatenate(out)


class _Checker(Certifier):
    """The robot's capsule distances for one `Avoid`, as "is this configuration clear by the margin",
    with `Certifier.walk` / `path_clear` checking motions densely by measured clearance."""

    def least(self, configurations: np.ndarray) -> float:
        """The least distance over every configuration, each measured."""
        return min((self.distance(q) for q in configurations), default=math.inf)


def segment_seed(robot: RobotModel, start: np.ndarray, goal: np.ndarray, free: Sequence[int], avoid: Avoid,
                 frame_count: int) -> int:
    """OMPL's seed for this segment: a hash of everything the plan depends on (never 0, which OMPL ignores)."""
    h = hashlib.sha256()
    h.update(robot.fingerprint.encode())
    h.update(np.ascontiguousarray(start, dtype=float).tobytes())
    h.update(np.ascontiguousarray(goal, dtype=float).tobytes())
    h.update(repr((tuple(int(i) for i in free), avoid.self_, avoid.margin_m, avoid.srdf, frame_count)).encode())
    if avoid.world is not None:
        h.update(repr((avoid.world.obstacles, avoid.world.ground)).encode())
    return int.from_bytes(h.digest()[:4], "little") % (2 ** 31 - 1) + 1


def default_free_joints(robot: RobotModel) -> list[int]:
    """The joints a plan may move: the revolute ones (a gripper's prismatic fingers keep the keys' values)."""
    names = list(robot.actuated_joint_names)
    return [i for i, name in enumerate(names) if robot.joint_by_name[name].type in ("revolute", "continuous")]


_MOTIONS = []


def _motion_validator_type():
    """OMPL's MotionValidator calling a Python function (the type made once: a type per plan would
    pile up in the bindings)."""
    if not _MOTIONS:
        from ompl import base as ob

        class Motions(ob.MotionValidator):
            """A motion is valid when every sample `step` apart is clear, measured or certified by clearance."""

            def __init__(self, info, check):
                super().__init__(info)
                self.check = check

            def checkMotion(self, s1, s2, *last_valid):
                if last_valid:  # the (s1, s2, lastValid) form: no planner or simplifier used here calls it
                    raise NotImplementedError("checkMotion with lastValid")
                return self.check(s1, s2)

        _MOTIONS.append(Motions)
    return _MOTIONS[0]


def _plan_ompl(robot: RobotModel, checker: _Checker, start: np.ndarray, goal: np.ndarray, free: list[int],
               seed: int, step: float = PLANNER_STEP) -> np.ndarray | None:
    """RRTConnect then OMPL's PathSimplifier (reduceVertices, ropeShortcutPath, reduceVertices) in
    the free joints, every motion checked by `Certifier.walk`: the path's corners (W, dof), or None."""
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    ou.setLogLevel(ou.LOG_NONE)
    ou.RNG.setSeed(seed)  # every RNG made after this (planner, samplers, simplifier) draws from it
    n = len(free)
    space = ob.RealVectorStateSpace(n)
    bounds = ob.RealVectorBounds(n)
    for k, i in enumerate(free):
        # a continuous joint has no limits: half a turn beyond both keys is room enough to go round
        low, high = float(robot.lower[i]), float(robot.upper[i])
        bounds.setLow(k, low if math.isfinite(low) else float(min(start[i], goal[i])) - math.pi)
        bounds.setHigh(k, high if math.isfinite(high) else float(max(start[i], goal[i])) + math.pi)
    space.setBounds(bounds)
    setup = og.SimpleSetup(space)
    base_q = start.copy()

    def configuration(state) -> np.ndarray:
        q = base_q.copy()
        q[free] = [state[k] for k in range(n)]
        return q

    # each state's pair distances, measured once: a motion's ends were checked as states first,
    # and their clearance certifies the motion's samples near them (`Certifier.walk`)
    def measure(values: tuple) -> tuple[np.ndarray, np.ndarray]:
        q = base_q.copy()
        q[free] = values
        return checker.measure(q)

    margin = checker.margin

    def valid(state) -> bool:
        d = measure(tuple(state[k] for k in range(n)))[0]
        return not len(d) or float(d.min()) >= margin

    def check_motion(s1, s2) -> bool:
        a, b = tuple(s1[k] for k in range(n)), tuple(s2[k] for k in range(n))
        q_a, q_b = base_q.copy(), base_q.copy()
        q_a[free], q_b[free] = a, b
        return checker.walk(q_a, q_b, step, da=measure(a), db=measure(b))[0]

    setup.setStateValidityChecker(valid)
    info = setup.getSpaceInformation()
    motions = _motion_validator_type()(info, check_motion)
    info.setMotionValidator(motions)
    ends = []
    for q in (start, goal):
        state = space.allocState()
        for k, i in enumerate(free):
            state[k] = float(q[i])
        ends.append(state)
    setup.setStartAndGoalStates(ends[0], ends[1])
    setup.setPlanner(og.RRTConnect(info))
    setup.solve(PLANNING_BUDGET_S)
    if not setup.haveExactSolutionPath():
        return None
    path = setup.getSolutionPath()
    # vertices first (cheap: most of RRTConnect's corners go), then OMPL's rope shortcutting on
    # the path cut into pieces of at most ROPE_DELTA (rad, L2), then the vertices again: nearly
    # simplifyMax's length for a fraction of its checks (bench/RESULTS.md, bench_plan)
    simplifier = og.PathSimplifier(info)
    simplifier.reduceVertices(path)
    simplifier.ropeShortcutPath(path, ROPE_DELTA)
    simplifier.reduceVertices(path)
    return np.array([configuration(path.getState(k)) for k in range(path.getStateCount())])


def plan_path(robot: RobotModel, checker: _Checker, start: np.ndarray, goal: np.ndarray, free: list[int],
              seed: int) -> np.ndarray | None:
    """`_plan_ompl` from `seed`, then from seeds drawn from it while the path is longer than
    `RETRY_ABOVE` times the straight line (at most `PLAN_TRIES` plans, within `RETRY_WORK`): the shortest path's
    corners, or None when the first plan found none. Deterministic as each plan is."""
    straight = float(np.linalg.norm(np.asarray(goal, dtype=float)[free] - np.asarray(start, dtype=float)[free]))
    best, best_length = None, math.inf
    measured, rows = checker.measured, max(len(checker.weights), 1)
    for attempt in range(PLAN_TRIES):
        if attempt and (checker.measured - measured) * rows >= RETRY_WORK:
            break
        path = _plan_ompl(robot, checker, start, goal, free, seed if attempt == 0 else _retry_seed(seed, attempt))
        if path is None:
            break
        length = _length(path)
        if length < best_length:
            best, best_length = path, length
        if best_length <= RETRY_ABOVE * straight:
            break
    return best


def _retry_seed(seed: int, attempt: int) -> int:
    h = hashlib.sha256(repr((seed, attempt)).encode()).digest()
    return int.from_bytes(h[:4], "little") % (2 ** 31 - 1) + 1


def time_path(waypoints: np.ndarray, frame_count: int, fps: float, limits: Limits | None) -> tuple[np.ndarray, float]:
    """Frames (frame_count, n) along the polyline, each piece rest to rest on the minimum-jerk
    quintic, the pieces sharing the keyed time in proportion to the shortest each could take;
    and the shortest duration of the whole path (s) under `limits` (0 without limits)."""
    joints, total, _ = _time_path(waypoints, frame_count, fps, limits)
    return joints, total


def _time_path(waypoints: np.ndarray, frame_count: int, fps: float,
               limits: Limits | None) -> tuple[np.ndarray, float, np.ndarray]:
    """`time_path`, and the piece of the polyline each frame lies on (frame_count,)."""
    steps = np.diff(waypoints, axis=0)
    distance = np.abs(steps)  # (P, n)
    shortest = np.zeros(len(steps))
    if limits is not None:
        for peak, kind, power in zip(QUINTIC_PEAKS, ("velocity", "acceleration", "jerk"), (1, 2, 3)):
            limit = limits.effective(kind)[None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.where(np.isfinite(limit), (peak * distance / limit) ** (1.0 / power), 0.0)
            shortest = np.maximum(shortest, need.max(axis=1, initial=0.0))
    total = float(shortest.sum())
    weights = shortest if total > 0 else np.linalg.norm(steps, axis=1)
    duration = (frame_count - 1) / fps
    if float(weights.sum()) <= 0:
        return np.repeat(waypoints[:1], frame_count, axis=0), total, np.zeros(frame_count, dtype=int)
    ends = np.concatenate([[0.0], np.cumsum(weights / weights.sum() * duration)])
    ends[-1] = duration
    times = np.arange(frame_count) / fps
    times[-1] = duration
    out = np.empty((frame_count, waypoints.shape[1]))
    pieces = np.empty(frame_count, dtype=int)
    for f, t in enumerate(times):
        piece = min(int(np.searchsorted(ends, t, side="right")) - 1, len(steps) - 1)
        while piece > 0 and ends[piece + 1] - ends[piece] <= 0:
            piece -= 1
        span = ends[piece + 1] - ends[piece]
        tau = 1.0 if span <= 0 else min(max((t - ends[piece]) / span, 0.0), 1.0)
        s = tau ** 3 * (10.0 - 15.0 * tau + 6.0 * tau * tau)
        out[f] = waypoints[piece] + steps[piece] * s
        pieces[f] = piece
    out[-1] = waypoints[-1]
    return out, total, pieces


def plan_between_keys(robot: RobotModel, start: Sequence[float], goal: Sequence[float], frame_count: int, fps: float,
                      avoid: Avoid, limits: Limits | None = None, per_frame: np.ndarray | None = None,
                      free: Sequence[int] | None = None) -> SegmentPlan:
    """The segment from `start` (the first key's configuration) to `goal` (the next key's) over
    `frame_count` frames (both keys included) at `fps`, keeping `avoid`'s margin.

    `per_frame` (frame_count, dof): the per-frame IK answers, kept as they are when they are clear
    (default: the straight joint-space line). `free`: the joints the plan may move (default: the
    revolute ones); the others keep the start's values. `limits` (`core.shot.limits.limits_for`):
    the plan's timing is checked against them and flagged when the frames are too few."""
    from ..shot.limits import check_limits

    check_avoid(avoid)
    start = np.asarray(start, dtype=float).copy()
    goal = np.asarray(goal, dtype=float).copy()
    if start.shape != (robot.dof,) or goal.shape != (robot.dof,) or not np.all(np.isfinite(np.concatenate([start, goal]))):
        raise KinemaError(f"a segment needs {robot.dof} finite joint values at each key (robot '{robot.name}')")
    if int(frame_count) < 2:
        raise KinemaError(f"a segment spans at least two frames (its two keys), got {frame_count}")
    if not (math.isfinite(fps) and fps > 0):
        raise KinemaError(f"the frame rate must be a positive number, got {fps}")
    frame_count = int(frame_count)
    free = default_free_joints(robot) if free is None else [int(i) for i in free]
    held = np.setdiff1d(np.arange(robot.dof), free)
    if np.any(np.abs(start[held] - goal[held]) > 1e-12):
        # a held joint that moves between the keys moves along the straight line in the plan too
        free = sorted(set(free) | set(np.flatnonzero(np.abs(start - goal) > 1e-12).tolist()))
    keyed = per_frame is not None
    if per_frame is None:
        per_frame = start + (goal - start) * np.linspace(0.0, 1.0, frame_count)[:, None]
    per_frame = np.asarray(per_frame, dtype=float)
    if per_frame.shape != (frame_count, robot.dof):
        raise KinemaError(f"the per-frame path must be ({frame_count}, {robot.dof}), got {per_frame.shape}")
    checker = _Checker(robot, avoid)
    checker.memo = {}
    clock = time.perf_counter()
    clear, least = checker.path_clear(per_frame, CHECK_STEP)  # stops at its first sample within the margin
    if clear:
        return SegmentPlan(per_frame, "per-frame", _length(per_frame), least, time.perf_counter() - clock)

    def failed(flag: str) -> SegmentPlan:
        # the per-frame path's least clearance, every sample measured (only on the way out)
        return SegmentPlan(per_frame, "failed", _length(per_frame), checker.least(densify(per_frame)),
                           time.perf_counter() - clock, flag)

    for name, q in (("start", start), ("goal", goal)):
        if checker.distance(q) < avoid.margin_m:
            return failed(f"the {name} key itself is within the margin; nothing to plan from")
    ready, why = ompl_available()
    if not ready:
        return failed(why)
    seed = segment_seed(robot, start, goal, free, avoid, frame_count)
    waypoints = None
    if keyed:
        # the keyed in-betweens collide, but the straight joint-space line between the keys may not
        direct = np.stack([start, goal])
        if checker.path_clear(direct, CHECK_STEP)[0]:
            waypoints = direct
    if waypoints is None:
        waypoints = plan_path(robot, checker, start, goal, free, seed)
    if waypoints is None:
        return failed(f"no collision-free path found in {PLANNING_BUDGET_S:g} s")
    # the dense check: every CHECK_STEP of the path clear by the margin, measured or certified by
    # a measured sample's clearance (`Certifier.walk`)
    clear, least = checker.path_clear(waypoints, CHECK_STEP)
    if not clear:
        return failed(f"the planned path comes within {least * 1000:.1f} mm when checked densely")
    joints, shortest, piece = _time_path(waypoints, frame_count, fps, limits)
    # what plays is straight between frames (the bake keys LINEAR), which cuts a corner's frames
    # a little: two frames on one piece of the path are joined along it (checked above), two on
    # either side of a corner are joined by a chord, checked here
    for f in np.flatnonzero(piece[1:] != piece[:-1]).tolist():
        clear, low = checker.path_clear(joints[f:f + 2], CHECK_STEP)
        least = min(least, low)
        if not clear:
            return failed(f"the timed path comes within {low * 1000:.1f} mm between frames")
    planning = time.perf_counter() - clock
    flag, shortest_s = "", None
    duration = (frame_count - 1) / fps
    if limits is not None:
        report = check_limits(np.arange(frame_count), joints, limits, fps)
        if shortest > duration * (1 + 1e-9) or report.flagged:
            shortest_s = shortest
            frames_needed = int(math.ceil(shortest * fps - 1e-9)) + 1
            flag = (f"too few frames: the planned path needs at least {shortest:.3f} s ({frames_needed} frames at "
                    f"{fps:g} fps) within the limits; the keys leave {duration:.3f} s ({frame_count} frames)")
    return SegmentPlan(joints, "planned", _length(waypoints), least, planning, flag, shortest_s, waypoints)


def _length(path: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(np.asarray(path, dtype=float), axis=0), axis=1).sum())


@dataclass(frozen=True)
class PlannedShot:
    """A baked shot with every key segment through `plan_between_keys`: the joints (F, dof) to key
    and, per segment, its first and last frame numbers and its `SegmentPlan`."""

    joints: np.ndarray
    segments: list[tuple[int, int, SegmentPlan]]

    @property
    def flagged(self) -> bool:
        return any(plan.flag for _, _, plan in self.segments)

    def to_dicts(self) -> list[dict]:
        return [{"first_frame": first, "last_frame": last, **plan.to_dict()} for first, last, plan in self.segments]


def plan_shot(robot: RobotModel, frames: Sequence[int], joints: np.ndarray, key_frames: Sequence[int], fps: float,
              avoid: Avoid, limits: Limits | None = None, free: Sequence[int] | None = None) -> PlannedShot:
    """Each segment between consecutive `key_frames` of a baked shot (`frames` (F,), `joints` (F, dof),
    every frame of the range) planned from its first frame's configuration to its last frame's,
    the baked frames between them as the per-frame path. The keys' own configurations never change,
    so one segment's plan never moves another's ends."""
    frames = np.rint(np.asarray(frames, dtype=float)).astype(int)
    joints = np.asarray(joints, dtype=float)
    if joints.shape != (len(frames), robot.dof):
        raise KinemaError(f"the baked joints must be ({len(frames)}, {robot.dof}), got {joints.shape}")
    if len(frames) > 1 and np.any(np.diff(frames) != 1):
        raise KinemaError("planning between keys needs every frame of the range baked (no gaps)")
    index = {int(f): k for k, f in enumerate(frames)}
    keys = sorted({int(k) for k in key_frames if int(k) in index})
    out = joints.copy()
    segments = []
    for first, last in zip(keys[:-1], keys[1:]):
        a, b = index[first], index[last]
        if b - a < 1:
            continue
        plan = plan_between_keys(robot, joints[a], joints[b], b - a + 1, fps, avoid, limits, per_frame=joints[a:b + 1], free=free)
        if plan.mode == "planned":
            out[a:b + 1] = plan.joints
        segments.append((first, last, plan))
    return PlannedShot(out, segments)
