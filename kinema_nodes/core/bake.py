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

from .model.kinematics import link_pose
from .graph.program import FrameInputs, Program, SolverStep, pose_to_target
from .model.robot import RobotModel
from .model.rotations import matrix_to_quaternion, quaternion_to_matrix, rotation_angle_between

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
    for i, frame_input in enumerate(inputs):
        if should_cancel is not None and should_cancel():
            return None
        frame_input = replace(frame_input, starts={**frame_input.starts, step.rig: current})
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
                        summaries, milliseconds, backends)


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

    @property
    def flagged(self) -> list[int]:
        return sorted(set(self.not_converged) | set(self.near_limit) | set(self.too_fast) | set(self.flips))

    def reasons(self, frame: int) -> list[str]:
        """Short words for why a frame is flagged ("not converged", "near limit", ...)."""
        words = []
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
                "too_fast": len(self.too_fast), "flips": len(self.flips), "flagged": len(self.flagged)}

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
        }

    @classmethod
    def from_dict(cls, data: dict) -> BakeReport:
        def number(value):
            return float("inf") if value is None else float(value)

        return cls(int(data["frames"]), int(data["converged"]), number(data["max_position_error"]),
                   number(data["max_rotation_error"]), [int(f) for f in data.get("not_converged", [])],
                   {int(k): list(v) for k, v in data.get("near_limit", {}).items()},
                   {int(k): list(v) for k, v in data.get("too_fast", {}).items()}, [int(f) for f in data.get("flips", [])])


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
) -> BakeReport:
    """Flag frames: not converged; a solved joint within `limit_margin` of its range from a limit;
    a solved joint faster than its limit (`velocity_limits`, rad/s or m/s; the URDF's by default;
    inf = none) at `fps`; a branch flip — a joint-space jump far larger than the target's motion.
    A frame where the target link changes (a hand-off) is not checked for flips."""
    robot = solution.robot
    frames = solution.frames.astype(int)
    q = solution.joints
    active = solution.active
    names = robot.actuated_joint_names
    count = len(frames)
    report = BakeReport(
        frames=count,
        converged=int(solution.converged.sum()),
        # inf when some frame could not be solved at all (no usable control, unknown link)
        max_position_error=float(solution.position_error.max(initial=0.0)),
        max_rotation_error=float(solution.rotation_error.max(initial=0.0)),
    )
    if count == 0:
        return report
    report.not_converged = [int(f) for f in frames[~np.asarray(solution.converged, dtype=bool)]]

    span = robot.upper - robot.lower
    bounded = np.isfinite(span) & ~robot.is_continuous
    margin = np.where(bounded, limit_margin * np.where(bounded, span, 0.0), 0.0)
    near = bounded & ((q <= robot.lower + margin) | (q >= robot.upper - margin)) & active
    for i in np.flatnonzero(near.any(axis=1)):
        report.near_limit[int(frames[i])] = [names[j] for j in np.flatnonzero(near[i])]

    if count > 1:
        limits = robot.velocity_limits if velocity_limits is None else np.asarray(velocity_limits, dtype=float)
        gaps = np.maximum(np.diff(solution.frames), 1e-9)[:, None]
        speeds = np.abs(np.diff(q, axis=0)) * fps / gaps
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


# ---- many frames in one call: a JAX scan over frames (PyRoki backend) -------------------------

#: Frames per scan call. Fixed, so one compiled scan serves every bake of a chain (the last
#: chunk is padded); between chunks a bake can report progress and be cancelled.
BATCH_CHUNK = 256
_scans: dict = {}


def batch_reason(program: Program, step: SolverStep, inputs: Sequence[FrameInputs]) -> str | None:
    """None when the frames can be solved as one batch (PyRoki, no stage after the solver, a
    usable control and a known link on every frame); else why not."""
    from .graph.program import stage_function

    if step.backend != "pyroki":
        return f"the {step.backend} backend solves frame by frame"
    if any(stage_function(program.spec.node(name).kind) is not None for name in step.passthrough):
        return "a node after the solver changes each frame's answer"
    if any((frame_input.values.get(step.node) or {}).get("posture") is not None for frame_input in inputs[:1]):
        return "spare joints settle toward the posture frame by frame, as in live IK"
    for frame_input in inputs:
        for target in step.targets:
            pose = frame_input.controls.get(target.node)
            if pose is None or not np.all(np.isfinite(pose)):
                return f"the control of '{target.node}' has no usable pose on frame {frame_input.frame:g}"
        for target in step.targets:
            if program.resolve_link(target, frame_input) not in step.robot.links:
                return f"an unknown link on frame {frame_input.frame:g}"
    from .solve._api import pyroki_size_reason
    from .solve._pyroki_backend import jax_available

    too_large = pyroki_size_reason(step.robot)
    if too_large:
        return too_large
    ok, reason = jax_available()
    return None if ok else reason


def _scan_for(compiled, robot):
    """A jitted `lax.scan` over frames around the compiled PyRoki program of one chain. The carry
    is the configuration in float32 — what the rig holds — so each frame starts where live IK
    would: from the previous frame's answer as the rig stores it."""
    key = (robot.fingerprint, compiled.layout.digest, id(compiled))
    scan = _scans.get(key)
    if scan is not None:
        return scan
    import jax
    import jax.numpy as jnp

    layout = compiled.layout
    call = compiled._call
    chain = jnp.asarray(layout.chain)
    finite_lower = jnp.asarray(np.isfinite(layout.lower))
    finite_upper = jnp.asarray(np.isfinite(layout.upper))
    lower = jnp.asarray(np.where(np.isfinite(layout.lower), layout.lower, 0.0), dtype=jnp.float32)
    upper = jnp.asarray(np.where(np.isfinite(layout.upper), layout.upper, 0.0), dtype=jnp.float32)
    fractions = jnp.asarray(layout.seed_fractions[0], dtype=jnp.float32)
    continuous = jnp.asarray(robot.is_continuous[layout.chain])

    def run(base, positions, wxyz, weights, free, tolerances, max_iterations):
        def body(base, frame):
            position, rotation, weight = frame
            chain_start = base[chain]
            low = jnp.where(finite_lower, lower, chain_start - jnp.pi)
            high = jnp.where(finite_upper, upper, chain_start + jnp.pi)
            seeds = jnp.where(free > 0, low + fractions * (high - low), chain_start)
            seeds = seeds.at[0].set(chain_start)
            vector = jnp.concatenate([base, seeds.reshape(-1), position.reshape(-1), rotation.reshape(-1), weight.reshape(-1),
                                      free, tolerances, jnp.stack([max_iterations, jnp.float32(0.0)])]).astype(jnp.float32)
            out = call(vector)
            x = out[:layout.k]
            delta = x - chain_start
            x = jnp.where(continuous, chain_start + jnp.mod(delta + jnp.pi, 2 * jnp.pi) - jnp.pi, x)
            base = base.at[chain].set(x)
            return base, (base, out)

        return jax.lax.scan(body, base, (positions, wxyz, weights))[1]

    scan = _scans[key] = jax.jit(run)
    return scan


def _check_against_single_solve(robot, links, positions, wxyz, weights, start, options, batched: np.ndarray) -> None:
    """The scan drives the PyRoki program through its packed input; if that format ever drifts
    from the backend's, the first frame would differ from a plain `solve`. Raise, so the bake
    falls back to frame-by-frame solving instead of keying nonsense."""
    from .errors import KinemaError
    from .solve import IKTarget, solve

    goals = [IKTarget(link, tuple(positions[t]), tuple(wxyz[t]), *weights[t]) for t, link in enumerate(links)]
    single = solve(robot, goals, start.astype(float), options)
    if not np.allclose(single.joints, batched, atol=1e-3):
        raise KinemaError("the batched solver disagrees with a single solve on the first frame")


def solve_frames_batched(program: Program, step: SolverStep, inputs: Sequence[FrameInputs], start: np.ndarray, *,
                         progress: Callable[[int, int], None] | None = None,
                         should_cancel: Callable[[], bool] | None = None) -> BakeSolution | None:
    """`solve_frames` for the PyRoki backend as a scan over frames (one JAX call per chunk of
    BATCH_CHUNK frames instead of one per frame). Same seeding as live IK: each frame starts from
    the previous answer at rig precision. Errors are measured again in float64; a frame the
    float32 solver leaves just outside tolerance is polished by the public `solve` (NumPy), as
    a single live solve would be. Call only when `batch_reason` is None."""
    import time as _time

    from .graph.program import summarise
    from .solve import IKTarget, SolveResult, solve
    from .solve._chain import problem_for
    from .solve._pyroki_backend import solver_for

    robot = step.robot
    count = len(inputs)
    held = set(step.options.held_joints) | robot.held_joints(step.hold_prismatic)
    options = replace(step.options, backend="pyroki", held_joints=frozenset(held))
    weights = np.array([[t.position_weight, t.rotation_weight] for t in step.targets], dtype=float)
    links = [tuple(program.resolve_link(t, f) for t in step.targets) for f in inputs]
    # `pose_to_target` for every frame at once: scale removed, rotation as a unit quaternion
    controls = np.array([[f.controls[t.node] for t in step.targets] for f in inputs], dtype=float).reshape(count, -1, 4, 4)
    rotations = controls[..., :3, :3] / np.linalg.norm(controls[..., :3, :3], axis=-2, keepdims=True)
    positions = controls[..., :3, 3].copy()
    wxyz = matrix_to_quaternion(rotations)
    targets = np.tile(np.eye(4), (count, len(step.targets), 1, 1))
    targets[..., :3, :3] = quaternion_to_matrix(wxyz)
    targets[..., :3, 3] = positions

    joints = np.empty((count, robot.dof))
    ms = np.zeros(count)
    current = rig_precision(np.clip(np.asarray(start, dtype=float), robot.lower, robot.upper))
    first = 0
    while first < count:  # runs of frames aiming at the same links share one compiled program
        last = first
        while last + 1 < count and links[last + 1] == links[first]:
            last += 1
        compiled = solver_for(robot, links[first])
        compiled.compile()
        layout = compiled.layout
        free = layout.free_mask(problem_for(robot, links[first], frozenset(held)).free)
        scan = _scan_for(compiled, robot)
        tolerances = np.array([options.position_tolerance, options.rotation_tolerance], dtype=np.float32)
        base = current.astype(np.float32)
        for chunk_start in range(first, last + 1, BATCH_CHUNK):
            if should_cancel is not None and should_cancel():
                return None
            t0 = _time.perf_counter()
            rows = np.arange(chunk_start, chunk_start + BATCH_CHUNK).clip(max=last)
            bases, _ = scan(base, positions[rows].astype(np.float32), wxyz[rows].astype(np.float32),
                            np.repeat(weights[None], BATCH_CHUNK, 0).astype(np.float32), free, tolerances,
                            np.float32(options.max_iterations))
            bases = np.asarray(bases)
            used = min(BATCH_CHUNK, last + 1 - chunk_start)
            joints[chunk_start:chunk_start + used] = np.clip(bases[:used].astype(float), robot.lower, robot.upper)
            if chunk_start == first:
                _check_against_single_solve(robot, links[first], positions[first], wxyz[first], weights, base, options,
                                            joints[first])
            base = bases[used - 1]
            ms[chunk_start:chunk_start + used] = (_time.perf_counter() - t0) * 1000.0 / used
            if progress is not None:
                progress(chunk_start + used, count)
        current = joints[last]
        first = last + 1

    # float64 errors, the same yardstick as `solve`
    position_error = np.zeros(count)
    rotation_error = np.zeros(count)
    converged = np.ones(count, dtype=bool)
    for group in sorted(set(links)):
        rows = np.array([i for i in range(count) if links[i] == group])
        for t, link in enumerate(group):
            poses = link_pose(robot, joints[rows], link)
            p_err = np.linalg.norm(poses[:, :3, 3] - positions[rows, t], axis=-1)
            r_err = rotation_angle_between(poses, targets[rows, t])
            position_error[rows] = np.maximum(position_error[rows], p_err)
            rotation_error[rows] = np.maximum(rotation_error[rows], r_err)
            ok = ((p_err <= options.position_tolerance) | (weights[t, 0] == 0)) & ((r_err <= options.rotation_tolerance) | (weights[t, 1] == 0))
            converged[rows] &= ok
    results: list = [None] * count
    for i in np.flatnonzero(~converged):
        if max(position_error[i], rotation_error[i]) < 1e-2:  # float32 bottomed out: polish in float64
            goals = [IKTarget(link, tuple(positions[i, t]), tuple(wxyz[i, t]), *weights[t]) for t, link in enumerate(links[i])]
            polished = solve(robot, goals, joints[i], replace(options, backend="numpy"))
            if polished.position_error + polished.rotation_error <= position_error[i] + rotation_error[i]:
                joints[i] = polished.joints
                position_error[i], rotation_error[i] = polished.position_error, polished.rotation_error
                converged[i] = polished.converged
                results[i] = polished
    active_of = {group: active_joints(robot, step, group) for group in set(links)}
    summaries = []
    for i in range(count):
        result = results[i] or SolveResult(joints[i], float(position_error[i]), float(rotation_error[i]), bool(converged[i]),
                                           "converged" if converged[i] else "out of reach", 0, float(ms[i]), "pyroki")
        summaries.append(summarise(result))
    frames = np.array([float(f.frame) for f in inputs])
    active = np.array([active_of[group] for group in links]).reshape(count, robot.dof)
    return BakeSolution(robot, frames, joints, converged, position_error, rotation_error, links, active, targets,
                        summaries, ms, {"pyroki"})
