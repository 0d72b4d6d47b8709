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
from ..model.kinematics import link_pose
from ..model.rotations import matrix_to_quaternion
from ._entry import solve, warm_up
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


def _targets(links: tuple[str, ...], row: np.ndarray) -> list[IKTarget]:
    return [IKTarget(link, tuple(float(v) for v in row[7 * i:7 * i + 3]), tuple(float(v) for v in row[7 * i + 3:7 * i + 7]))
            for i, link in enumerate(links)]


def _case_targets(robot, links: tuple[str, ...], truth: np.ndarray) -> np.ndarray:
    rows = []
    for link in links:
        poses = link_pose(robot, truth, link)
        rows.append(np.concatenate([poses[:, :3, 3], matrix_to_quaternion(poses)], axis=1))
    return np.concatenate(rows, axis=1)


def run_benchmark(robot, link, n: int = 1000, seed: int = 0, solver: str = "pyroki", mode: str = "cold",
                  held: frozenset[str] = frozenset()) -> dict:
    """Solve N targets and summarise. `link` may be a list of links (one target each, solved
    together). `first_call_s` is the first solve in this process, compile included (run in a
    fresh process for the new-session number)."""
    links = (link,) if isinstance(link, str) else tuple(link)
    options = SolveOptions(backend=solver, cold=(mode == "cold"), held_joints=held)
    t0 = time.perf_counter()
    warm_up(robot, links, options)
    if mode == "cold":
        _, starts, truth = cold_cases(robot, links[0], n, seed)
        trajectory = None
    else:
        _, truth, trajectory = tracking_cases(robot, links[0], n, seed)
        starts = truth[:1]
    targets = _case_targets(robot, links, truth)
    first = solve(robot, _targets(links, targets[0]), starts[0], options)
    first_call_s = time.perf_counter() - t0
    for i in range(WARMUP_SOLVES):
        solve(robot, _targets(links, targets[i % n]), starts[i % len(starts)], options)
    times, position_errors, rotation_errors, within = [], [], [], []
    jumps = 0
    backend = first.backend
    previous = None
    for i in range(n):
        if mode == "cold":
            start = starts[i]
        else:
            start = truth[i] if previous is None or trajectory[i] != trajectory[i - 1] else previous
        case = _targets(links, targets[i])
        t = time.perf_counter()
        result = solve(robot, case, start, options)
        times.append((time.perf_counter() - t) * 1000.0)
        position_errors.append(result.position_error)
        rotation_errors.append(result.rotation_error)
        within.append(bool(np.all(result.joints >= robot.lower) and np.all(result.joints <= robot.upper)))
        same_trajectory = mode != "cold" and previous is not None and trajectory[i] == trajectory[i - 1]
        if same_trajectory and np.any(np.abs(result.joints - previous)[robot.is_continuous] > np.pi):
            jumps += 1
        previous = result.joints
        backend = result.backend
    times = np.array(times)
    position_errors, rotation_errors, within = np.array(position_errors), np.array(rotation_errors), np.array(within)
    on_time = times <= DEFAULT_SOLVE_BUDGET_MS if mode == "tracking" else np.ones(n, bool)

    def rate(levels):
        ok = within & on_time & (position_errors <= levels[0]) & (rotation_errors <= levels[1])
        return float(np.mean(ok))

    chain = {name for one in links for name in robot.chain_joint_names(one)} - set(held)
    return {
        "robot": robot.name,
        "link": links[0] if len(links) == 1 else list(links),
        "mode": mode,
        "solver": solver,
        "backend": backend,
        "fallback_reason": first.fallback_reason,
        "n": int(n),
        "seed": int(seed),
        "chain_joints": len(chain),
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
