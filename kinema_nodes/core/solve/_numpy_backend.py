"""The NumPy backend: damped least squares (Levenberg-Marquardt) on the compiled kernel.

The descent itself lives in `_kernel` (numba-compiled when numba is installed, the same loop in
plain NumPy when not), shared with Elbow Swivel and Find Solutions. This module decides which
seeds to run: a warm solve descends from the start and, only if that fails, tries one batch of
random restarts (an unreachable target must not eat the frame budget every frame); a cold
solve tries batches of seeds, the start first, until one converges or the budget ends.
Limits are hard: trial steps are projected into the box, and joints pinned at a bound that the
step pushes outward are taken out of the step (an active set).
"""

from __future__ import annotations

import time

import numpy as np

from . import _kernel
from ._chain import ChainProblem
from ._types import converged

#: Seeds per batch in a cold solve (and in a warm solve's retry).
BATCH_SEEDS = 8
MAX_STEP = _kernel.MAX_STEP
STALL_WINDOW = _kernel.STALL_WINDOW
MAX_DAMPING = _kernel.MAX_DAMPING
_ZERO_INDEX = np.zeros(1, dtype=np.int64)
_ZERO = np.zeros(1)


converged_mask = converged  # the one test (core/solve/_types.py)


def _converged(errors: np.ndarray, weights: np.ndarray, tol_p: float, tol_r: float) -> bool:
    return bool(converged_mask(errors, weights, tol_p, tol_r))


def cost_of(errors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.sum((errors * weights) ** 2, axis=(-2, -1))


def kernel_chain(problem: ChainProblem, swivel_links: tuple[str, ...] | None = None) -> _kernel.KernelChain:
    """The kernel's arrays for this problem (built once per problem and swivel link set)."""
    chains = problem.__dict__.setdefault("_kernel_chains", {})
    key = tuple(swivel_links or ())
    chain = chains.get(key)
    if chain is None:
        chain = chains[key] = _kernel.KernelChain(problem, key or None)
    return chain


def descend_batch(problem: ChainProblem, seeds: np.ndarray, targets, tol_p, tol_r, max_iterations, *, stop_at_first=False,
                  swivel_links=None, swivel=None, stall_window=STALL_WINDOW, compiled=None, posture=None, settled_out=None):
    """The kernel from every row of seeds (S, n) toward one set of targets (`check_targets`),
    over `problem` (`problem_for`): the LM loop of the solver, Elbow Swivel and Find Solutions.
    `swivel_links` (shoulder, elbow, wrist) with `swivel` (angle, or one per row) adds the
    elbow-swivel equation; `stall_window=0` never gives up on a slow descent. Returns
    (q (S,n), errors (S,T,2), swivel residual (S,), iterations (S,), converged (S,)); with
    stop_at_first, rows after the first converged one did not run (iterations -1). `posture`
    (`_posture.posture_argument`) settles converged rows toward it, `settled_out` (S,) says which."""
    seeds = np.ascontiguousarray(seeds, dtype=float)
    count = seeds.shape[0]
    chain = kernel_chain(problem, swivel_links)
    wanted = np.zeros(count) if swivel is None else np.array(np.broadcast_to(swivel, (count,)), dtype=float)
    return _kernel.solve_rows(chain, seeds, np.zeros(count, dtype=np.int64), targets.positions[None], targets.rotations[None],
                              targets.weights[None], wanted, tol_p, tol_r, max_iterations, stall_window, stop_at_first,
                              compiled, None if targets.packed is None else targets.packed[None], posture, settled_out)


def lm_run(problem: ChainProblem, q0: np.ndarray, targets, tol_p, tol_r, max_iterations, deadline=None, compiled=None,
           posture=None, settled_out=None):
    """One descent from q0 (n,): (q, errors, iterations, converged). The kernel never reads
    the clock; `deadline` is accepted for the callers' symmetry and bounded by max_iterations.
    `posture`/`settled_out`: as in `descend_batch`."""
    chain = kernel_chain(problem)
    packed = None if targets.packed is None else targets.packed[None]
    q, errors, _, iterations, converged = _kernel.solve_rows(
        chain, np.asarray(q0, dtype=float)[None], _ZERO_INDEX, targets.positions[None], targets.rotations[None],
        targets.weights[None], _ZERO, tol_p, tol_r, max_iterations, STALL_WINDOW, False, compiled, packed, posture,
        settled_out)
    return q[0], errors[0], int(iterations[0]), bool(converged[0])


def pick(q: np.ndarray, errors: np.ndarray, iterations: np.ndarray, converged: np.ndarray, reference: np.ndarray, weights,
         prefer_first: bool):
    """The answer of a batch: the first converged row (prefer_first), else the converged row
    nearest `reference`, else the lowest cost among the rows that ran."""
    ran = iterations >= 0
    if converged.any():
        if prefer_first:
            best = int(np.argmax(converged))
        else:
            distance = np.sum((q - reference) ** 2, axis=1)
            best = int(np.argmin(np.where(converged, distance, np.inf)))
    else:
        best = int(np.argmin(np.where(ran, cost_of(errors, weights), np.inf)))
    return q[best], errors[best], int(iterations[ran].sum()), bool(converged[best])


#: Random seeds as fractions of each joint's range, drawn once with a fixed seed: cold solves
#: are reproducible and drawing costs nothing per solve.
_SEED_FRACTIONS = np.random.default_rng(20240917).random((64, BATCH_SEEDS, 64))


def first_batch_fractions(k: int) -> np.ndarray | None:
    """The first batch's seed fractions for k free joints (what `random_seeds` draws at attempt
    0), for the compiled frame call (`_kernel_maths._frame`); None where `random_seeds` draws fresh ones."""
    block = _SEED_FRACTIONS[0]
    return None if k > block.shape[1] else np.ascontiguousarray(block[:, :k])


#: Batches of restart seeds drawn so far in this process (`restart_count`): a warm tracking step
#: that converges from the start draws none, so a test can tell the fast path from the restarts
#: without timing anything (#33).
_restarts = [0]


def restart_count() -> int:
    """How many batches of restart seeds `random_seeds` has drawn in this process."""
    return _restarts[0]


def random_seeds(problem: ChainProblem, start: np.ndarray, attempt: int) -> np.ndarray:
    """BATCH_SEEDS configurations spread over the free joints' seed windows (their limits; a joint
    that turns freely: start +- pi); other joints keep the start."""
    _restarts[0] += 1
    free = problem.free
    lower, upper = problem.seed_window(start[free])
    block = _SEED_FRACTIONS[attempt % len(_SEED_FRACTIONS)]
    if len(free) > block.shape[1]:  # a huge rig: fall back to fresh random numbers
        block = np.random.default_rng(attempt).random((BATCH_SEEDS, len(free)))
    seeds = np.tile(start, (BATCH_SEEDS, 1))
    seeds[:, free] = lower + block[:, :len(free)] * (upper - lower)
    return seeds


def _rows_until(problem, seeds, targets, tol_p, tol_r, max_iterations, stop_at_first: bool, deadline: float, posture=None):
    """`descend_batch` over the seeds, all in one call when the kernel is compiled; seed by seed
    on the plain NumPy form (the kernel never reads the clock, and there a seed costs
    milliseconds), stopping at the deadline. Rows not run have iterations -1. Returns the rows
    of `descend_batch` and, last, which rows settled toward `posture`."""
    settled = np.zeros(len(seeds), dtype=bool)
    if _kernel.kernel_status()[0] == "numba" and not _kernel._force_plain:
        return (*descend_batch(problem, seeds, targets, tol_p, tol_r, max_iterations, stop_at_first=stop_at_first,
                               posture=posture, settled_out=settled), settled)
    parts = []
    for row in range(len(seeds)):
        part = descend_batch(problem, seeds[row:row + 1], targets, tol_p, tol_r, max_iterations, posture=posture,
                             settled_out=settled[row:row + 1])
        parts.append(part)
        if (stop_at_first and part[4][0]) or time.perf_counter() > deadline:
            break
    rest = len(seeds) - len(parts)
    q = np.concatenate([p[0] for p in parts] + [seeds[len(parts):]])
    errors = np.concatenate([p[1] for p in parts] + [np.full((rest, len(targets.links), 2), np.inf)])
    swivel = np.concatenate([p[2] for p in parts] + [np.zeros(rest)])
    iterations = np.concatenate([p[3] for p in parts] + [np.full(rest, -1, dtype=np.int64)])
    converged = np.concatenate([p[4] for p in parts] + [np.zeros(rest, dtype=bool)])
    return q, errors, swivel, iterations, converged, settled


#: What one batch of BATCH_SEEDS cold seeds is reckoned to cost (ms), to turn a cold search's
#: budget into a number of batches (`cold_batches`): measured 0.9 ms on a 7-axis arm and 1.1 ms
#: on a 12-joint one (compiled kernel, a goal no seed reaches, so every seed runs to its stall).
MS_PER_COLD_BATCH = 1.0


def cold_batches(budget_ms: float) -> int:
    """How many batches a cold search with this budget runs: counted, not timed, so a frame's
    answer is the same however busy the machine is (a search stopped by the clock ended on
    different seeds from run to run: two playbacks of the same frame 1.1 rad apart, seen under
    load). Never more than the distinct seed blocks (`_SEED_FRACTIONS`): past them the seeds
    repeat (a 300 ms search on a 7-axis arm ran 342 batches, 278 of them repeats). The budget's
    clock still stops a search on a machine too slow for its count (said: over budget)."""
    return int(min(len(_SEED_FRACTIONS), max(1, budget_ms // MS_PER_COLD_BATCH)))


def solve_numpy(problem: ChainProblem, start: np.ndarray, targets, options, t0: float, posture=None,
                batches: int | None = None):
    """Warm: one descent from `start`, then one batch of random restarts if it failed, taking
    the converged answer nearest the start. Cold: batches of seeds (the first led by `start`),
    each stopping at its first converged seed, until one converges or `batches` have run
    (default `cold_batches(options.budget_ms)`; the clock stops it too). With
    `posture` (`_posture.posture_argument`) each converged answer settles toward it in the same
    kernel call. Returns (q, errors, iterations, converged, over_budget, settled)."""
    deadline = t0 + options.budget_ms / 1000.0
    if batches is None:
        batches = cold_batches(options.budget_ms)
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    total = 0
    best = None
    attempt = 0
    while True:
        if attempt == 0 and not options.cold:
            settled_rows = np.zeros(1, dtype=bool)
            q, errors, iterations, converged = lm_run(problem, start, targets, tol_p, tol_r, options.max_iterations,
                                                      posture=posture, settled_out=settled_rows)
            settled = bool(settled_rows[0])
        else:
            seeds = random_seeds(problem, start, attempt)
            if attempt == 0:
                seeds[0] = start  # the start leads
            rows = _rows_until(problem, seeds, targets, tol_p, tol_r, options.max_iterations, options.cold, deadline,
                               posture)
            q, errors, iterations, converged = pick(rows[0], rows[1], rows[3], rows[4], start, targets.weights, options.cold)
            settled = bool(np.any(rows[5] & np.all(rows[0] == q, axis=1)))
        total += iterations
        if converged:
            return q, errors, total, True, False, settled
        cost = float(cost_of(errors, targets.weights))
        # Warm and not converged anywhere: keep the descent from the start (the arm follows as
        # near as it can); a restart that merely got closer is another branch, a pop on replay.
        if best is None or (options.cold and cost < best[0]):
            best = (cost, q, errors)
        attempt += 1
        over = time.perf_counter() > deadline
        if over or (not options.cold and attempt > 1) or (options.cold and attempt >= batches):
            return best[1], best[2], total, False, over, False
