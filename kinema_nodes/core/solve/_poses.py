"""Many poses in few kernel calls: `solve_poses`, the multi-target entry of the compiled LM kernel.

A reachability study or any sweep asks thousands of independent questions "does a solution
reach this pose from one of these starts?". Asked one pose at a time, each question pays the
interpreter (target checks, array building, the kernel's dispatch) far more than the few
microseconds the kernel spends on a warm pose. Here every pose is checked once, in one
vectorised pass, and the kernel runs in rounds: round s descends, in ONE call, from start s of
every pose that no earlier start has solved (the kernel takes a target index per row). So the
cost per pose is the kernel's own, and a pose stops at its first converged start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _kernel
from ._chain import ChainProblem
from ._types import MAX_TARGET_DISTANCE_M
from ..errors import KinemaError


@dataclass
class PoseSolutions:
    """One answer per pose: `q` (P, n) is the first converged descent, else the lowest-cost
    end of the starts that ran (always finite, within the limits the kernel keeps);
    `errors` (P, T, 2) position/rotation error of `q` per target; `iterations` (P,) summed
    over the starts that ran, `starts_run` (P,) how many ran."""

    q: np.ndarray
    converged: np.ndarray
    errors: np.ndarray
    iterations: np.ndarray
    starts_run: np.ndarray


def _targets(problem: ChainProblem, positions, rotations, weights) -> np.ndarray:
    """(P, T, 14) in the kernel's layout after one vectorised check of every number."""
    count = len(problem.links)
    positions = np.asarray(positions, dtype=float)
    rotations = np.asarray(rotations, dtype=float)
    if positions.ndim == 2:
        positions = positions[:, None]
    if rotations.ndim == 3:
        rotations = rotations[:, None]
    poses = positions.shape[0]
    if positions.shape != (poses, count, 3) or rotations.shape != (poses, count, 3, 3):
        raise KinemaError(f"solve_poses wants positions (P, {count}, 3) and rotations (P, {count}, 3, 3), "
                          f"got {positions.shape} and {rotations.shape}")
    if not (np.isfinite(positions).all() and np.isfinite(rotations).all()):
        raise KinemaError("a pose has a NaN or infinite number")
    if poses and np.abs(positions).max() > MAX_TARGET_DISTANCE_M:
        raise KinemaError(f"a pose lies more than {MAX_TARGET_DISTANCE_M:g} m from the robot's root")
    gram = np.einsum("ptji,ptjk->ptik", rotations, rotations)
    if poses and (np.abs(gram - np.eye(3)).max() > 1e-6 or (np.linalg.det(rotations) < 0).any()):
        raise KinemaError("a pose's rotation is not a rotation matrix (orthonormal, determinant +1)")
    w = np.ones((poses, count, 2)) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), (poses, count, 2))
    if not np.isfinite(w).all() or (w < 0).any():
        raise KinemaError("pose weights must be finite and not negative")
    packed = np.empty((poses, count, 14))
    packed[..., :3] = positions
    packed[..., 3:12] = rotations.reshape(poses, count, 9)
    packed[..., 12:] = w
    return packed


def solve_poses(problem: ChainProblem, positions, rotations, starts, *, position_tolerance: float = 1e-5,
                rotation_tolerance: float = 1e-5, max_iterations=100, stall_window: int = _kernel.STALL_WINDOW,
                weights=None, compiled: bool | None = None) -> PoseSolutions:
    """Solve P poses of `problem`'s links (`problem_for`), each from its starts in order until
    one converges.

    positions (P, 3) / rotations (P, 3, 3) rotation matrices for one link, or (P, T, 3) /
    (P, T, 3, 3) for T links; `weights` (P, T, 2) or broadcastable, default 1. `starts` (S, n)
    shared by every pose or (P, S, n) per pose; a start holding a NaN is skipped for its pose (a
    neighbour's witness that does not exist). `max_iterations`: one bound, or one per start (a
    start near its answer converges in a few iterations or not at all; a random one may need
    many). Bad numbers: KinemaError, nothing solved.
    """
    from ._numpy_backend import cost_of, kernel_chain

    packed = _targets(problem, positions, rotations, weights)
    poses = packed.shape[0]
    robot = problem.robot
    starts = np.asarray(starts, dtype=float)
    if starts.ndim == 2:
        starts = np.broadcast_to(starts, (poses, *starts.shape))
    if starts.ndim != 3 or starts.shape[0] != poses or starts.shape[2] != robot.dof:
        raise KinemaError(f"solve_poses wants starts (S, {robot.dof}) or ({poses}, S, {robot.dof}), got {starts.shape}")
    limits = np.broadcast_to(np.asarray(max_iterations, dtype=np.int64), (starts.shape[1],))
    chain = kernel_chain(problem)
    count = len(problem.links)
    q = np.tile(robot.mid_configuration(), (poses, 1))
    errors = np.full((poses, count, 2), np.inf)
    cost = np.full(poses, np.inf)
    done = np.zeros(poses, dtype=bool)
    iterations = np.zeros(poses, dtype=np.int64)
    starts_run = np.zeros(poses, dtype=np.int64)
    tpos, trot, twt = packed[..., :3], packed[..., 3:12].reshape(poses, count, 3, 3), packed[..., 12:]
    for s in range(starts.shape[1]):
        rows = starts[:, s]
        todo = np.flatnonzero(~done & np.isfinite(rows).all(axis=1))
        if not len(todo):
            continue
        q_s, errors_s, _, its, ok = _kernel.solve_rows(
            chain, np.ascontiguousarray(rows[todo]), todo.astype(np.int64), tpos, trot, twt, np.zeros(len(todo)),
            position_tolerance, rotation_tolerance, int(limits[s]), stall_window, False, compiled=compiled, packed=packed)
        iterations[todo] += its
        starts_run[todo] += 1
        cost_s = cost_of(errors_s, packed[todo, :, 12:])
        better = ok | (cost_s < cost[todo])
        chosen = todo[better]
        q[chosen], errors[chosen], cost[chosen] = q_s[better], errors_s[better], cost_s[better]
        done[todo[ok]] = True
    return PoseSolutions(q, done, errors, iterations, starts_run)
