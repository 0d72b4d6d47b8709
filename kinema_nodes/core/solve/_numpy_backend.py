"""Damped least squares (Levenberg-Marquardt) in NumPy with the analytic Jacobian.

Starts instantly (no compilation) and scales to any chain length, so it is both the fallback
when JAX is missing and the solver for huge rigs. Several seeds run side by side as one
batch (NumPy's cost per call barely grows with the batch), which is what makes cold solves
fast. Limits are hard: trial steps are projected into the box, and joints pinned at a bound
that the step pushes outward are taken out of the step (an active set).
"""

from __future__ import annotations

import time

import numpy as np

from ._chain import ChainProblem

#: Largest change of one joint in one step (rad or m): keeps cold solves from flinging the
#: arm through a singularity into a far branch.
MAX_STEP = 0.6
#: Seeds per batch in a cold solve (and in a warm solve's retry).
BATCH_SEEDS = 8
#: A seed whose cost has not halved in this many iterations stops (a restart is cheaper).
STALL_WINDOW = 10
MAX_DAMPING = 1e6


def converged_mask(errors: np.ndarray, weights: np.ndarray, tol_p: float, tol_r: float) -> np.ndarray:
    """errors (..., T, 2) -> (...) bool: every target within tolerance where it has weight."""
    ok = (errors <= (tol_p, tol_r)) | (weights == 0)
    return ok.all(axis=(-2, -1))


def _converged(errors: np.ndarray, weights: np.ndarray, tol_p: float, tol_r: float) -> bool:
    return bool(converged_mask(errors, weights, tol_p, tol_r))


def cost_of(errors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.sum((errors * weights) ** 2, axis=(-2, -1))


def lm_batch(problem: ChainProblem, seeds: np.ndarray, targets, tol_p, tol_r, max_iterations, deadline, cold: bool):
    """LM from each row of `seeds` (B, n) side by side.

    Stops when (cold) any seed converged, or (warm) seed 0 converged, or every seed converged
    or gave up, or at max_iterations / the deadline. Returns the chosen
    (q, errors, iterations, converged): the converged seed nearest the first seed — seed 0
    itself in a warm solve — else the lowest cost.
    """
    free = problem.free
    lower, upper = problem.lower, problem.upper
    weights = targets.weights
    scale = np.repeat(weights, 3, axis=1).reshape(-1)  # (6T,)
    q = seeds.copy()
    x = np.clip(q[:, free], lower, upper)
    q[:, free] = x
    errors, residual, jac = problem.residual(q, targets.rotations, targets.positions)
    cost = cost_of(errors, weights)
    batch, k = x.shape
    damping = np.full(batch, 1e-3)
    done = converged_mask(errors, weights, tol_p, tol_r)
    checkpoint = cost.copy()
    eye = np.eye(k)
    iterations = 0
    while iterations < max_iterations and k:
        ok = converged_mask(errors, weights, tol_p, tol_r)
        if (cold and ok.any()) or ok[0] or done.all():
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        iterations += 1
        j = jac * scale[:, None]
        r = residual * scale
        jt = np.swapaxes(j, 1, 2)
        jtj = jt @ j
        g = (jt @ r[..., None])[..., 0]
        step = np.linalg.solve(jtj + damping[:, None, None] * eye, g[..., None])[..., 0]
        blocked = ((x <= lower) & (step < 0)) | ((x >= upper) & (step > 0))
        if blocked.any():
            keep = (~blocked).astype(float)
            masked = jtj * keep[:, :, None] * keep[:, None, :]
            step = np.linalg.solve(masked + damping[:, None, None] * eye, (g * keep)[..., None])[..., 0] * keep
        biggest = np.max(np.abs(step), axis=1)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(biggest, 1e-300))[:, None]
        x_trial = np.clip(x + step, lower, upper)
        q_trial = q.copy()
        q_trial[:, free] = x_trial
        errors_trial, residual_trial, jac_trial = problem.residual(q_trial, targets.rotations, targets.positions)
        cost_trial = cost_of(errors_trial, weights)
        better = (cost_trial < cost) & ~done
        if better.any():
            q[better], x[better], errors[better] = q_trial[better], x_trial[better], errors_trial[better]
            residual[better], jac[better], cost[better] = residual_trial[better], jac_trial[better], cost_trial[better]
        damping = np.where(better, np.maximum(damping * 0.2, 1e-12), np.minimum(damping * 10.0, MAX_DAMPING))
        done |= converged_mask(errors, weights, tol_p, tol_r) | (damping >= MAX_DAMPING)
        if iterations % STALL_WINDOW == 0:
            done |= (cost > 0.5 * checkpoint) & (cost > 1e-12)
            checkpoint = cost.copy()
    ok = converged_mask(errors, weights, tol_p, tol_r)
    if ok.any():
        if ok[0] and not cold:
            best = 0
        else:
            distance = np.sum((q - seeds[0]) ** 2, axis=1)
            best = int(np.argmin(np.where(ok, distance, np.inf)))
    else:
        best = int(np.argmin(cost))
    return q[best], errors[best], iterations, bool(ok[best])


def lm_run(problem: ChainProblem, q0: np.ndarray, targets, tol_p, tol_r, max_iterations, deadline):
    """One LM descent from q0 (n,): the same rules as `lm_batch` for one seed, written with
    plain Python control flow because this is the every-frame path of live IK.
    Returns (q, errors, iterations, converged)."""
    free = problem.free
    lower, upper = problem.lower, problem.upper
    weights = targets.weights
    scale = np.repeat(weights, 3, axis=1).reshape(-1)
    unit_weights = bool(np.all(scale == 1.0))
    tolerance = np.array([tol_p, tol_r])
    ignore = weights == 0

    def converged(errors) -> bool:
        return bool(((errors <= tolerance) | ignore).all())

    def evaluate(q):
        errors, residual, jac = problem.residual(q[None], targets.rotations, targets.positions)
        errors, residual, jac = errors[0], residual[0], jac[0]
        if not unit_weights:
            residual, jac = residual * scale, jac * scale[:, None]
        return errors, residual, jac, float(((errors * weights) ** 2).sum())

    q = q0.copy()
    x = np.clip(q[free], lower, upper)
    q[free] = x
    k = len(free)
    if k == 0:
        errors = evaluate(q)[0]
        return q, errors, 0, converged(errors)
    errors, residual, jac, cost = evaluate(q)
    damping = 1e-3
    eye = np.eye(k)
    checkpoint = cost
    iterations = 0
    while iterations < max_iterations and not converged(errors):
        if deadline is not None and time.perf_counter() > deadline:
            break
        iterations += 1
        jtj = jac.T @ jac
        g = jac.T @ residual
        step = np.linalg.solve(jtj + damping * eye, g)
        blocked = ((x <= lower) & (step < 0)) | ((x >= upper) & (step > 0))
        if blocked.any():
            keep = ~blocked
            step = np.zeros(k)
            if keep.any():
                step[keep] = np.linalg.solve(jtj[np.ix_(keep, keep)] + damping * np.eye(int(keep.sum())), g[keep])
        biggest = float(np.abs(step).max())
        if biggest > MAX_STEP:
            step *= MAX_STEP / biggest
        x_trial = np.clip(x + step, lower, upper)
        q_trial = q.copy()
        q_trial[free] = x_trial
        trial = evaluate(q_trial)
        if trial[3] < cost:
            q, x = q_trial, x_trial
            errors, residual, jac, cost = trial
            damping = max(damping * 0.2, 1e-12)
        else:
            damping = min(damping * 10.0, MAX_DAMPING)
            if damping >= MAX_DAMPING:
                break
        if iterations % STALL_WINDOW == 0:
            if cost > 0.5 * checkpoint and cost > 1e-12:
                break
            checkpoint = cost
    return q, errors, iterations, converged(errors)


#: Random seeds as fractions of each joint's range, drawn once with a fixed seed: cold solves
#: are reproducible and drawing costs nothing per solve.
_SEED_FRACTIONS = np.random.default_rng(20240917).random((64, BATCH_SEEDS, 64))


def random_seeds(problem: ChainProblem, start: np.ndarray, attempt: int) -> np.ndarray:
    """BATCH_SEEDS configurations spread over the free joints' limits (continuous joints:
    start +- pi); other joints keep the start."""
    free = problem.free
    lower = np.where(np.isfinite(problem.lower), problem.lower, start[free] - np.pi)
    upper = np.where(np.isfinite(problem.upper), problem.upper, start[free] + np.pi)
    block = _SEED_FRACTIONS[attempt % len(_SEED_FRACTIONS)]
    if len(free) > block.shape[1]:  # a huge rig: fall back to fresh random numbers
        block = np.random.default_rng(attempt).random((BATCH_SEEDS, len(free)))
    seeds = np.tile(start, (BATCH_SEEDS, 1))
    seeds[:, free] = lower + block[:, :len(free)] * (upper - lower)
    return seeds


def solve_numpy(problem: ChainProblem, start: np.ndarray, targets, options, t0: float):
    """Warm: one run from `start`, then one batch of random restarts if it failed (an
    unreachable target must not eat the frame budget every frame). Cold: batches of seeds
    (the first includes `start`) until one converges or the budget ends.
    Returns (q, errors, iterations, converged, over_budget)."""
    deadline = t0 + options.budget_ms / 1000.0
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    total = 0
    best = None
    attempt = 0
    while True:
        if attempt == 0 and not options.cold:
            q, errors, iterations, converged = lm_run(problem, start, targets, tol_p, tol_r, options.max_iterations, deadline)
        else:
            seeds = random_seeds(problem, start, attempt)
            seeds[0] = start  # the start leads: a converged answer nearest it wins
            q, errors, iterations, converged = lm_batch(problem, seeds, targets, tol_p, tol_r, options.max_iterations, deadline, options.cold)
        total += iterations
        cost = float(cost_of(errors, targets.weights))
        if best is None or cost < best[0]:
            best = (cost, q, errors)
        if converged:
            return q, errors, total, True, False
        attempt += 1
        over = time.perf_counter() > deadline
        if over or (not options.cold and attempt > 1):
            return best[1], best[2], total, False, over
