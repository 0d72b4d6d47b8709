"""The IK benchmark protocol of BENCHMARKS.md, shared by `kinema-nodes bench` and
bench/bench_ik.py so both measure the same thing.

Cold: N configurations drawn uniformly within limits (fixed seed), FK gives each target,
every solve is seeded from mid-limits. Tracking: smooth random joint trajectories, each
frame seeded from the previous answer; a frame over the 33 ms budget counts as a failure.
Success: within limits and position error <= 1e-5 m and rotation error <= 1e-5 rad.
"""

from __future__ import annotations

import time

import numpy as np

from ..defaults import DEFAULT_SOLVE_BUDGET_MS
from ..kinematics import link_pose
from ..rotations import matrix_to_quaternion
from ._api import solve, warm_up
from ._types import IKTarget, SolveOptions

STRICT = (1e-5, 1e-5)
PRACTICAL = (1e-3, 1e-2)
WARMUP_SOLVES = 10
#: Frames per tracking trajectory, and the largest joint change between frames (rad or m).
TRACK_FRAMES = 100
TRACK_STEP = 0.02


def cold_cases(robot, link: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(targets (n, 7) as xyz+wxyz, starts (n, dof), true configurations (n, dof))."""
    rng = np.random.default_rng(seed)
    truth = robot.random_configurations(n, rng)
    poses = link_pose(robot, truth, link)
    targets = np.concatenate([poses[:, :3, 3], matrix_to_quaternion(poses)], axis=1)
    starts = np.tile(robot.mid_configuration(), (n, 1))
    return targets, starts, truth


def tracking_cases(robot, link: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smooth trajectories: per trajectory, each joint follows a sum of two sines inside its
    limits, sampled so that no joint moves more than TRACK_STEP between frames. Returns
    (targets (n, 7), truth (n, dof), trajectory index per frame (n,))."""
    rng = np.random.default_rng(seed)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -2 * np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, 2 * np.pi)
    middle, half = (lower + upper) / 2, (upper - lower) / 2
    frames = []
    trajectory = []
    index = 0
    while sum(len(f) for f in frames) < n:
        centre = middle + rng.uniform(-0.5, 0.5, robot.dof) * half
        amplitude = rng.uniform(0.1, 0.45, (2, robot.dof)) * half
        frequency = rng.uniform(0.5, 2.0, (2, robot.dof))
        phase = rng.uniform(0, 2 * np.pi, (2, robot.dof))
        t = np.linspace(0.0, 1.0, TRACK_FRAMES)[:, None]
        q = centre + amplitude[0] * np.sin(2 * np.pi * frequency[0] * t + phase[0]) + amplitude[1] * np.sin(2 * np.pi * frequency[1] * t + phase[1])
        q = np.clip(q, lower, upper)
        # Resample in time so the biggest per-frame joint change is TRACK_STEP.
        speed = np.max(np.abs(np.diff(q, axis=0)), axis=1)
        arc = np.concatenate([[0.0], np.cumsum(speed)])
        samples = np.arange(0.0, arc[-1], TRACK_STEP)
        q = np.stack([np.interp(samples, arc, q[:, j]) for j in range(robot.dof)], axis=1)
        frames.append(q)
        trajectory.extend([index] * len(q))
        index += 1
    truth = np.concatenate(frames)[:n]
    poses = link_pose(robot, truth, link)
    targets = np.concatenate([poses[:, :3, 3], matrix_to_quaternion(poses)], axis=1)
    return targets, truth, np.array(trajectory[:n])


def _target(link: str, row: np.ndarray) -> IKTarget:
    return IKTarget(link, tuple(float(v) for v in row[:3]), tuple(float(v) for v in row[3:]))


def run_benchmark(robot, link: str, n: int = 1000, seed: int = 0, solver: str = "pyroki", mode: str = "cold",
                  held: frozenset[str] = frozenset()) -> dict:
    """Solve N targets and summarise. `first_call_s` is the first solve in this process,
    compile included (run in a fresh process for the new-session number)."""
    options = SolveOptions(backend=solver, cold=(mode == "cold"), held_joints=held)
    t0 = time.perf_counter()
    warm_up(robot, [link], options)
    if mode == "cold":
        targets, starts, _ = cold_cases(robot, link, n, seed)
        trajectory = None
    else:
        targets, truth, trajectory = tracking_cases(robot, link, n, seed)
        starts = truth[:1]
    first = solve(robot, _target(link, targets[0]), starts[0], options)
    first_call_s = time.perf_counter() - t0
    for i in range(WARMUP_SOLVES):
        solve(robot, _target(link, targets[i % n]), starts[i % len(starts)], options)
    times, position_errors, rotation_errors, within = [], [], [], []
    jumps = 0
    backend = first.backend
    previous = None
    for i in range(n):
        if mode == "cold":
            start = starts[i]
        else:
            start = truth[i] if previous is None or trajectory[i] != trajectory[i - 1] else previous
        t = time.perf_counter()
        result = solve(robot, _target(link, targets[i]), start, options)
        times.append((time.perf_counter() - t) * 1000.0)
        position_errors.append(result.position_error)
        rotation_errors.append(result.rotation_error)
        within.append(bool(np.all(result.joints >= robot.lower) and np.all(result.joints <= robot.upper)))
        if mode != "cold" and previous is not None and trajectory[i] == trajectory[i - 1]:
            if np.any(np.abs(result.joints - previous)[robot.is_continuous] > np.pi):
                jumps += 1
        previous = result.joints
        backend = result.backend
    times = np.array(times)
    position_errors, rotation_errors, within = np.array(position_errors), np.array(rotation_errors), np.array(within)
    on_time = times <= DEFAULT_SOLVE_BUDGET_MS if mode == "tracking" else np.ones(n, bool)

    def rate(levels):
        ok = within & on_time & (position_errors <= levels[0]) & (rotation_errors <= levels[1])
        return float(np.mean(ok))

    return {
        "robot": robot.name,
        "link": link,
        "mode": mode,
        "solver": solver,
        "backend": backend,
        "n": int(n),
        "seed": int(seed),
        "chain_joints": len(robot.chain_joint_names(link)) - len(held),
        "success_rate": rate(STRICT),
        "success_rate_practical": rate(PRACTICAL),
        "median_ms": float(np.median(times)),
        "p95_ms": float(np.percentile(times, 95)),
        "p99_ms": float(np.percentile(times, 99)),
        "max_ms": float(np.max(times)),
        "mean_ms": float(np.mean(times)),
        "first_call_s": float(first_call_s),
        "p99_position_error": float(np.percentile(position_errors, 99)),
        "p99_rotation_error": float(np.percentile(rotation_errors, 99)),
        "over_budget": int(np.sum(times > DEFAULT_SOLVE_BUDGET_MS)),
        "jumps_2pi": int(jumps),
    }
