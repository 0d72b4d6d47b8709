"""Baking: a frame range solved in order, then checked. Pure arrays in, arrays out.

`solve_frames` runs one solver step of a compiled Program over many frames — the same
`Program.run_step` the viewport runs, so a bake is the live solution written down — each frame
warm-started from the one before, so the arm stays on one branch. `check_bake` then looks for
what an animator wants to know before a shot goes out: frames that did not converge, joints
pressed against a limit, joints moving faster than the robot can, and branch flips.
Nothing here ever produces NaN: a frame that cannot be solved keeps the previous frame's joints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..model.kinematics import link_pose
from ..graph.program import FrameInputs, Program, SolverStep, frame_avoid, pose_to_target
from ..model.robot import RobotModel
from ..model.rotations import quaternion_to_matrix, rotation_angle_between
from .limits import step_velocity

#: A joint closer than this fraction of its range to either limit is flagged.
LIMIT_MARGIN = 0.01
#: A frame-to-frame joint jump (radians, or metres over the arm's reach) counts as a branch flip
#: when it is larger than this and FLIP_RATIO times larger than the target's own motion.
FLIP_MIN_JUMP = 0.35
FLIP_RATIO = 10.0


def rig_precision(q: np.ndarray) -> np.ndarray:
    """q as the rig holds it: pose bones store float32. Live IK warm-starts each frame from what
    the rig holds, so a bake seeded the same way reproduces the live solution."""
    return np.asarray(q, dtype=np.float32).astype(float)


def active_joints(robot: RobotModel, step: SolverStep, links: Sequence[str]) -> np.ndarray:
    """Joints the solver moves when aiming at `links` (the chains, less held joints)."""
    held = set(step.options.held_joints) | robot.held_joints(step.hold_prismatic)
    mask = np.zeros(robot.dof, dtype=bool)
    for link in links:
        if link in robot.links:
            for name in robot.chain_joint_names(link):
                if name not in held:
                    mask[robot.joint_index(name)] = True
    return mask


@dataclass
class BakeSolution:
    """One solver step solved over a frame range (F frames, n actuated joints, T targets)."""

    robot: RobotModel
    frames: np.ndarray  # (F,) frame numbers
    joints: np.ndarray  # (F, n), always finite, within limits
    converged: np.ndarray  # (F,) bool
    position_error: np.ndarray  # (F,) metres, worst target; inf when the frame could not be solved
    rotation_error: np.ndarray  # (F,) radians, worst target
    links: list[tuple[str, ...]]  # (F,) links solved to on each frame
    active: np.ndarray  # (F, n) bool: joints the solver moved on each frame
    targets: np.ndarray  # (F, T, 4, 4) target poses (NaN-free; identity where missing)
    summaries: list[str]  # (F,) the readout line of each frame
    milliseconds: np.ndarray  # (F,) solve time per frame
    backends: set[str] = field(default_factory=set)  # solver backends that ran (a PyRoki failure falls back to NumPy)
    scanned: int = 0  # frames solved by the batched PyRoki scan (`solve_frames_batched`), not one call per frame
    #: (F,) what each frame's solve kept clear of (a `core.collision.Avoid`, None where
    #: nothing); empty when the solver avoids nothing. `check_bake` measures each frame against it.
    avoid: list = field(default_factory=list)

    @property
    def keyed(self) -> np.ndarray:
        """(n,) bool: the joints to key — every joint active anywhere in the range."""
        return self.active.any(axis=0)


def solve_frames(
    program: Program,
    step: SolverStep,
    inputs: Sequence[FrameInputs],
    start: np.ndarray,
    *,
    solve: Callable | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> BakeSolution | None:
    """Solve `step` on every frame of `inputs` in order, each seeded from the previous answer
    (at rig precision). Returns None if `should_cancel` said so part-way."""
    robot = step.robot
    count = len(inputs)
    current = rig_precision(np.clip(np.asarray(start, dtype=float), robot.lower, robot.upper))
    previous = current.copy()
    joints = np.empty((count, robot.dof))
    converged = np.zeros(count, dtype=bool)
    position_error = np.full(count, np.inf)
    rotation_error = np.full(count, np.inf)
    active = np.zeros((count, robot.dof), dtype=bool)
    targets = np.tile(np.eye(4), (count, len(step.targets), 1, 1))
    milliseconds = np.zeros(count)
    links, summaries = [], []
    backends: set[str] = set()
    avoid = []
    for i, frame_input in enumerate(inputs):
        if should_cancel is not None and should_cancel():
            return None
        frame_input = replace(frame_input, starts={**frame_input.starts, step.rig: current})
        if step.options.avoid is not None:
            avoid.append(frame_avoid(step, frame_input))
        result = program.run_step(step, frame_input, solve)
        links.append(tuple(result.solved_links))
        summaries.append(result.summary)
        milliseconds[i] = result.ms
        for t, target in enumerate(step.targets):
            pose = frame_input.controls.get(target.node)
            if pose is not None and np.all(np.isfinite(pose)):
                position, wxyz = pose_to_target(pose)
                targets[i, t, :3, :3] = quaternion_to_matrix(wxyz)
                targets[i, t, :3, 3] = position
        if result.joints is None:  # nothing to write this frame: hold the previous pose
            joints[i] = previous
        else:
            joints[i] = result.joints
            active[i] = active_joints(robot, step, result.solved_links)
            converged[i] = bool(result.converged)
            if result.result is not None:
                backends.add(result.result.backend)
                position_error[i] = result.result.position_error
                rotation_error[i] = result.result.rotation_error
            previous = joints[i].copy()
        current = rig_precision(joints[i])
        if progress is not None:
            progress(i + 1, count)
    frames = np.array([float(f.frame) for f in inputs])
    return BakeSolution(robot, frames, joints, converged, position_error, rotation_error, links, active, targets,
                        summaries, milliseconds, backends, avoid=avoid)


# ---- checks ---------------------------------------------------------------------------------

@dataclass
class BakeReport:
    """What a bake found. Frame lists are sorted frame numbers (ints)."""

    frames: int
    converged: int
    max_position_error: float
    max_rotation_error: float
    not_converged: list[int] = field(default_factory=list)
    near_limit: dict[int, list[str]] = field(default_factory=dict)  # frame -> joints within the margin
    too_fast: dict[int, list[str]] = field(default_factory=dict)  # frame -> joints over their speed limit
    flips: list[int] = field(default_factory=list)
    #: Collision avoidance (empty when the bake avoided nothing): each frame's smallest clearance
    #: (m, negative: overlapping; None where nothing was measured), the margin kept, and the
    #: frames where something overlaps, with what ("link A vs B", "link A vs obstacle O").
    clearance: list = field(default_factory=list)
    margin_m: float | None = None
    in_collision: dict[int, list[str]] = field(default_factory=dict)
    #: Plan Between Keys: the frames a plan keyed instead of the per-frame IK (not counted as
    #: converged or not: their pose is the plan's, not a solve's), and one row per key segment
    #: (`segment_rows`): first, last, mode, least clearance (m), flag.
    planned: list[int] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)

    @property
    def flagged(self) -> list[int]:
        return sorted(set(self.not_converged) | set(self.near_limit) | set(self.too_fast) | set(self.flips)
                      | set(self.in_collision))

    @property
    def min_clearance_m(self) -> float | None:
        measured = [c for c in self.clearance if c is not None]
        return min(measured) if measured else None

    def reasons(self, frame: int) -> list[str]:
        """Short words for why a frame is flagged ("not converged", "near limit", ...)."""
        words = []
        if frame in self.in_collision:  # first: the flag that matters most survives a marker's 63-character name
            words.append("in collision: " + ", ".join(self.in_collision[frame]))
        if frame in self.not_converged:
            words.append("not converged")
        if frame in self.near_limit:
            words.append("near limit: " + ", ".join(self.near_limit[frame]))
        if frame in self.too_fast:
            words.append("too fast: " + ", ".join(self.too_fast[frame]))
        if frame in self.flips:
            words.append("branch flip")
        return words

    def counts(self) -> dict[str, int]:
        return {"not_converged": len(self.not_converged), "near_limit": len(self.near_limit),
                "too_fast": len(self.too_fast), "flips": len(self.flips), "in_collision": len(self.in_collision),
                "flagged": len(self.flagged)}

    def to_dict(self) -> dict:
        """JSON-ready (no NaN or inf: an unmeasured error is None)."""
        def finite(value):
            return float(value) if np.isfinite(value) else None

        return {
            "frames": self.frames, "converged": self.converged,
            "max_position_error": finite(self.max_position_error), "max_rotation_error": finite(self.max_rotation_error),
            "flagged": self.flagged, "not_converged": self.not_converged,
            "near_limit": {str(k): v for k, v in self.near_limit.items()},
            "too_fast": {str(k): v for k, v in self.too_fast.items()}, "flips": self.flips,
            "clearance": [None if c is None or not np.isfinite(c) else float(c) for c in self.clearance],
            "margin_m": self.margin_m, "min_clearance_m": self.min_clearance_m,
            "in_collision": {str(k): v for k, v in self.in_collision.items()},
            "planned": self.planned, "segments": self.segments,
        }

    @classmethod
    def from_dict(cls, data: dict) -> BakeReport:
        def number(value):
            return float("inf") if value is None else float(value)

        return cls(int(data["frames"]), int(data["converged"]), number(data["max_position_error"]),
                   number(data["max_rotation_error"]), [int(f) for f in data.get("not_converged", [])],
                   {int(k): list(v) for k, v in data.get("near_limit", {}).items()},
                   {int(k): list(v) for k, v in data.get("too_fast", {}).items()}, [int(f) for f in data.get("flips", [])],
                   [None if c is None else float(c) for c in data.get("clearance", [])],
                   None if data.get("margin_m") is None else float(data["margin_m"]),
                   {int(k): list(v) for k, v in data.get("in_collision", {}).items()},
                   [int(f) for f in data.get("planned", [])], [dict(r) for r in data.get("segments", [])])


def segment_rows(segments) -> list[dict]:
    """The bake report's segment rows from Plan Between Keys' segments ((first frame, last frame,
    `core.plan.SegmentPlan` or None while pending) each), JSON-ready: a least clearance that was
    not measured (a per-frame segment) is None."""
    rows = []
    for first, last, plan in segments:
        least = None if plan is None or not np.isfinite(plan.least_clearance_m) else float(plan.least_clearance_m)
        rows.append({"first": int(first), "last": int(last),
                     "mode": "pending" if plan is None else plan.mode, "least_clearance_m": least,
                     "flag": (plan.flag or None) if plan is not None else None})
    return rows


def arm_reach(robot: RobotModel, link: str) -> float:
    """A length that turns a target's travel into an angle: the distance from the first joint
    of the chain to `link` at the zero configuration (at least 0.1 m)."""
    chain = robot.chain(link)
    movable = [j for j in chain if j.is_movable]
    if not movable:
        return 1.0
    q = robot.zero_configuration()
    base = link_pose(robot, q, movable[0].parent)[:3, 3]
    tip = link_pose(robot, q, link)[:3, 3]
    return max(0.1, float(np.linalg.norm(tip - base)))


def check_bake(
    solution: BakeSolution,
    *,
    fps: float = 24.0,
    velocity_limits: np.ndarray | None = None,
    limit_margin: float = LIMIT_MARGIN,
    flip_min_jump: float = FLIP_MIN_JUMP,
    flip_ratio: float = FLIP_RATIO,
    segments: Sequence[dict] = (),
) -> BakeReport:
    """Flag frames: not converged; a solved joint within `limit_margin` of its range from a limit;
    a solved joint faster than its limit (`velocity_limits`, rad/s or m/s; the URDF's by default;
    inf = none) at `fps`; a branch flip — a joint-space jump far larger than the target's motion.
    A frame where the target link changes (a hand-off) is not checked for flips. A bake that
    avoided collisions has each frame's answer measured against what that frame avoided
    (`core.collision.clearance`, the final joints, after any stage), and a frame where
    something overlaps is flagged with the pair. `segments` (`segment_rows`): the frames of a
    planned segment are reported as planned, not by their per-frame solve's convergence."""
    robot = solution.robot
    frames = solution.frames.astype(int)
    q = solution.joints
    active = solution.active
    names = robot.actuated_joint_names
    count = len(frames)
    planned = np.zeros(count, dtype=bool)
    for row in segments:
        if row["mode"] == "planned":
            planned |= (frames >= row["first"]) & (frames <= row["last"])
    report = BakeReport(
        frames=count,
        converged=int((np.asarray(solution.converged, dtype=bool) & ~planned).sum()),
        # inf when some frame could not be solved at all (no usable control, unknown link)
        max_position_error=float(solution.position_error.max(initial=0.0)),
        max_rotation_error=float(solution.rotation_error.max(initial=0.0)),
    )
    if count == 0:
        return report
    report.not_converged = [int(f) for f in frames[~np.asarray(solution.converged, dtype=bool) & ~planned]]
    report.planned = [int(f) for f in frames[planned]]
    report.segments = [dict(row) for row in segments]
    _check_clearance(solution, report)

    span = robot.upper - robot.lower
    bounded = np.isfinite(span) & ~robot.is_continuous
    margin = np.where(bounded, limit_margin * np.where(bounded, span, 0.0), 0.0)
    near = bounded & ((q <= robot.lower + margin) | (q >= robot.upper - margin)) & active
    for i in np.flatnonzero(near.any(axis=1)):
        report.near_limit[int(frames[i])] = [names[j] for j in np.flatnonzero(near[i])]

    if count > 1:
        limits = robot.velocity_limits if velocity_limits is None else np.asarray(velocity_limits, dtype=float)
        speeds = np.abs(step_velocity(q, fps, solution.frames))
        moving = active[1:] | active[:-1]
        fast = (speeds > limits[None, :]) & moving
        for i in np.flatnonzero(fast.any(axis=1)):
            report.too_fast[int(frames[i + 1])] = [names[j] for j in np.flatnonzero(fast[i])]

        reach: dict[str, float] = {}
        same = np.array([bool(solution.links[i + 1]) and solution.links[i] == solution.links[i + 1] for i in range(count - 1)])
        target_reach = np.ones((count - 1, solution.targets.shape[1]))
        for i in np.flatnonzero(same):
            links = solution.links[i + 1]
            for t, link in enumerate(links):
                if link not in reach:
                    reach[link] = arm_reach(robot, link)
                target_reach[i, t] = reach[link]
        step = np.abs(np.diff(q, axis=0)) * moving
        step = np.where(robot.is_prismatic[None, :], step / target_reach.min(axis=1, keepdims=True), step)
        jumps = np.where(same, step.max(axis=1, initial=0.0), 0.0)
        a, b = solution.targets[:-1], solution.targets[1:]
        travel = np.linalg.norm(b[..., :3, 3] - a[..., :3, 3], axis=-1) / target_reach
        turn = rotation_angle_between(a[..., :3, :3], b[..., :3, :3])
        target_motion = np.max(travel + turn, axis=1, initial=0.0)
        flips = (jumps > flip_min_jump) & (jumps > flip_ratio * target_motion)
        report.flips = [int(frames[i + 1]) for i in np.flatnonzero(flips)]
    return report


def _check_clearance(solution: BakeSolution, report: BakeReport) -> None:
    """Each frame's clearance by `clearance()` of the keyed joints, and the frames in collision."""
    if not any(a is not None for a in solution.avoid):
        return
    from ..collision import clearance

    frames = solution.frames.astype(int)
    report.margin_m = max(float(a.margin_m) for a in solution.avoid if a is not None)
    for i, avoid in enumerate(solution.avoid):
        if avoid is None:
            report.clearance.append(None)
            continue
        found = clearance(solution.robot, solution.joints[i], avoid)
        report.clearance.append(float(found.min_m) if np.isfinite(found.min_m) else None)
        if found.colliding:
            report.in_collision[int(frames[i])] = [found.describe(pair) for pair in found.colliding]


# ---- many frames in one call: a JAX scan over frames (PyRoki backend) -------------------------

#: Frames per scan call (core.solve's PyRoki scan): one compiled scan serves every bake of a
#: chain; between chunks a bake can report progress and be cancelled.
BATCH_CHUNK = 256


def batch_reason(program: Program, step: SolverStep, inputs: Sequence[FrameInputs]) -> str | None:
    """None when the frames can be solved as one batch (PyRoki, no stage after the solver, a
    usable control and a known link on every frame); else why not."""
    from ..graph.program import stage_function

    if step.backend != "pyroki":
        return f"the {step.backend} backend solves frame by frame"
    if step.options.avoid is not None:
        return "collision avoidance solves frame by frame"
    if any(stage_function(program.spec.node(name).kind) is not None for name in step.after_solver):
        return "a node after the solver changes each frame's answer"
    for frame_input in inputs:
        for target in step.targets:
            pose = frame_input.controls.get(target.node)
            if pose is None or not np.all(np.isfinite(pose)):
                return f"the control of '{target.node}' has no usable pose on frame {frame_input.frame:g}"
        for target in step.targets:
            if program.resolve_link(target, frame_input) not in step.robot.links:
                return f"an unknown link on frame {frame_input.frame:g}"
    from ..solve import batch_unavailable

    posture = next(((f.values.get(step.node) or {}).get("posture") for f in inputs[:1]), None)
    options = replace(_batch_options(step), posture=None if posture is None else tuple(float(v) for v in posture))
    weights = [(t.position_weight, t.rotation_weight) for t in step.targets]
    for links in {tuple(program.resolve_link(t, f) for t in step.targets) for f in inputs}:
        reason = batch_unavailable(step.robot, links, options, weights)
        if reason:
            return reason
    return None


def _batch_options(step: SolverStep):
    held = set(step.options.held_joints) | step.robot.held_joints(step.hold_prismatic)
    return replace(step.options, backend="pyroki", held_joints=frozenset(held))


def solve_frames_batched(program: Program, step: SolverStep, inputs: Sequence[FrameInputs], start: np.ndarray, *,
                         progress: Callable[[int, int], None] | None = None,
                         should_cancel: Callable[[], bool] | None = None) -> BakeSolution | None:
    """`solve_frames` through `core.solve.solve_many`: with PyRoki one jitted scan per chunk of
    BATCH_CHUNK frames instead of one call per frame, every frame under the contract of `solve`
    (its checks, `_finish`, branch check, float64 errors and polish). Same seeding as live IK:
    each frame starts from the previous answer at rig precision. Call only when `batch_reason`
    is None."""
    from ..graph.program import summarise
    from ..solve import IKTarget, solve_many

    robot = step.robot
    count = len(inputs)
    options = _batch_options(step)
    weights = [(t.position_weight, t.rotation_weight) for t in step.targets]
    links = [tuple(program.resolve_link(t, f) for t in step.targets) for f in inputs]
    goals, targets = [], np.tile(np.eye(4), (count, len(step.targets), 1, 1))
    for i, frame_input in enumerate(inputs):
        frame_goals = []
        for t, target in enumerate(step.targets):
            position, wxyz = pose_to_target(frame_input.controls[target.node])
            targets[i, t, :3, :3] = quaternion_to_matrix(wxyz)
            targets[i, t, :3, 3] = position
            frame_goals.append(IKTarget(links[i][t], tuple(position), tuple(wxyz), *weights[t]))
        goals.append(frame_goals)
    postures = [(f.values.get(step.node) or {}).get("posture") for f in inputs]
    postures = [p if p is not None and len(p) == robot.dof and np.all(np.isfinite(p)) else None for p in postures]
    results = solve_many(robot, goals, start, options, seed=rig_precision, progress=progress, should_cancel=should_cancel,
                         postures=postures)
    if results is None:
        return None
    joints = np.array([r.joints for r in results]).reshape(count, robot.dof)
    converged = np.array([r.converged for r in results], dtype=bool)
    position_error = np.array([r.position_error for r in results])
    rotation_error = np.array([r.rotation_error for r in results])
    ms = np.array([r.ms for r in results])
    active_of = {group: active_joints(robot, step, group) for group in set(links)}
    active = np.array([active_of[group] for group in links]).reshape(count, robot.dof)
    frames = np.array([float(f.frame) for f in inputs])
    return BakeSolution(robot, frames, joints, converged, position_error, rotation_error, links, active, targets,
                        [summarise(r) for r in results], ms, {r.backend for r in results},
                        scanned=sum(r.batched for r in results))
