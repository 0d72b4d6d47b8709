"""A warm solve that lands on another branch is walked to its target instead.

Why: seeded from the last frame, a damped descent beside a singularity (a UR's wrist centre
passing over its base axis, a 7-joint arm's coaxial joints) can converge on a far branch: the
tool is where it was asked to be, but the arm pops through half a turn between two frames. The
animator asked for the branch the arm is on. Here the tool is led from where it is at the start
to its target through intermediate poses (positions along the line, rotations along the
geodesic), each solved from the last, so the joints follow the branch they started on; a
step that itself jumps is halved. Where the walk cannot finish (beside a wrist singularity
pinned at a limit the descent stalls: the two wrist joints it must split move as one there),
seeds scattered close around the start are tried in one kernel call, and the converged answer
nearest the start is taken if it lies within the bound. When neither finds one (a limit or a
singularity bars every nearby way), the caller keeps the direct answer.
"""

from __future__ import annotations

import numpy as np

from ..model.rotations import axis_angle_matrices, rotation_log
from ._numpy_backend import descend_batch, lm_run
from ._types import TargetArrays

#: A walk's first step covers this fraction of the way; a step that lands is doubled, one that
#: jumps or fails is halved, down to MIN_FRACTION.
FIRST_FRACTION = 0.25
MIN_FRACTION = 1.0 / 512
#: Descents a walk may spend before it gives up (the direct answer stands).
MAX_STEPS = 48
#: Seeds scattered around the start, each joint within +- this fraction of the jump bound.
NEARBY_SEEDS = 16
NEARBY_SPREAD = 1.0
#: The scatter, drawn once with a fixed seed: the same frame gets the same answer every time.
_SCATTER = np.random.default_rng(20261202).uniform(-1.0, 1.0, (NEARBY_SEEDS, 64))
#: Iterations per intermediate pose (they start close; the last pose gets the caller's own).
STEP_ITERATIONS = 30
#: An intermediate pose only guides the joints, so it is met this loosely (m, rad); beside a
#: singularity the damped descent crawls onto a tight tolerance, and only the last pose needs it.
GUIDE_TOLERANCE = 1e-4


def _start_poses(problem, start: np.ndarray) -> list[np.ndarray]:
    """Each target link's pose (4, 4) at `start`."""
    q = start[None]
    return [chain.tip_poses(q)[0] for chain in problem.chains]


def _along(poses, targets: TargetArrays, fraction: float) -> TargetArrays:
    positions = np.empty_like(targets.positions)
    rotations = np.empty_like(targets.rotations)
    for t, pose in enumerate(poses):
        positions[t] = pose[:3, 3] + fraction * (targets.positions[t] - pose[:3, 3])
        turn = rotation_log(pose[:3, :3].T @ targets.rotations[t])
        angle = float(np.linalg.norm(turn))
        step = np.eye(3) if angle < 1e-15 else axis_angle_matrices(turn / angle, np.array(fraction * angle))
        rotations[t] = pose[:3, :3] @ step
    return TargetArrays(targets.links, positions, rotations, targets.wxyz, targets.weights)


def walk(problem, start: np.ndarray, targets: TargetArrays, tol_p: float, tol_r: float, max_iterations: int,
         jump: float) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(q, errors, iterations) at the target reached by small steps from `start`, no step moving
    a joint further than `jump`; None when the walk cannot get there."""
    poses = _start_poses(problem, start)
    free = problem.free
    done, fraction = 0.0, FIRST_FRACTION
    q = start.copy()
    spent = 0
    for _ in range(MAX_STEPS):
        goal = min(1.0, done + fraction)
        last = goal >= 1.0
        if last:
            q_next, errors, iterations, ok = lm_run(problem, q, targets, tol_p, tol_r, max_iterations)
        else:
            q_next, errors, iterations, ok = lm_run(problem, q, _along(poses, targets, goal), max(tol_p, GUIDE_TOLERANCE),
                                                    max(tol_r, GUIDE_TOLERANCE), STEP_ITERATIONS)
        spent += iterations
        if ok and np.max(np.abs(q_next[free] - q[free]), initial=0.0) <= jump:
            q, done = q_next, goal
            if last:
                return q, errors, spent
            fraction *= 2.0
        else:
            fraction *= 0.5
            if fraction < MIN_FRACTION:
                return None
    return None


def nearby(problem, start: np.ndarray, targets: TargetArrays, tol_p: float, tol_r: float, max_iterations: int,
           jump: float) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(q, errors, iterations) of the converged answer nearest the start among seeds scattered
    within `jump` of it, if one lands within `jump`; else None. No stall test: beside a
    singularity these descents crawl for a while and then arrive."""
    free = problem.free
    if len(free) > _SCATTER.shape[1]:
        return None
    seeds = np.tile(start, (NEARBY_SEEDS, 1))
    values = start[free] + NEARBY_SPREAD * jump * _SCATTER[:, :len(free)]
    seeds[:, free] = np.minimum(np.maximum(values, problem.lower), problem.upper)
    q, errors, _, iterations, converged = descend_batch(problem, seeds, targets, tol_p, tol_r, max_iterations, stall_window=0)
    moves = np.max(np.abs(q[:, free] - start[free]), axis=1, initial=0.0)
    moves = np.where(converged, moves, np.inf)
    best = int(np.argmin(moves))
    if not moves[best] <= jump:
        return None
    return q[best], errors[best], int(np.sum(np.maximum(iterations, 0)))
