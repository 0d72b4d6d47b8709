"""Spare joints decided by the frame's inputs, not by the path that led to the frame.

An arm with more joints than its targets need (a 7-axis arm reaching one pose) has a family of
answers for every pose. A warm-started descent stops at whichever member is nearest where the
arm happened to be, so a frame reached from the frame before and from a later frame ends up in
different places, and a bake differs from the playback the animator watched.

`settle_posture` takes a converged answer and slides it along that family (the tool held) to
the member nearest a *posture*: a joint vector that is an input of the frame (the pose the arm
had when the target was added or last handed off). The slide is a local descent, so the branch
(elbow up or down, wrist flipped or not) is still the one the warm start reached: chosen by
continuity. Within a branch the answer is the same whatever the start, to the precision the
slide converges to (STEP_TOLERANCE), and it is the same for both backends because this runs in
float64 NumPy after either of them.
"""

from __future__ import annotations

import numpy as np

from ._chain import ChainProblem

#: The slide stops when no joint moves more than this in one step (rad or m).
STEP_TOLERANCE = 1e-8
#: Largest change of one joint in one step of the slide.
MAX_STEP = 0.2
MAX_ITERATIONS = 200
#: Singular values below this fraction of the largest are treated as zero (a singular arm).
RANK_CUTOFF = 1e-9
#: A trial step that leaves a target this far off (m, rad) after the Newton return is shortened.
DRIFT_LIMIT = 1e-3
#: The Newton return onto the family stops below this error (m, rad).
PROJECTED = 1e-11
#: Pulls shorter than this are taken without the distance test (it would compare round-off).
ROUNDING = 1e-7
#: The step length adapts between these multiples of the projected pull.
MIN_FRACTION, MAX_FRACTION = 1e-6, 8.0


def redundancy(problem: ChainProblem, weights: np.ndarray) -> int:
    """Free joints minus the task equations with weight: > 0 when there is a family to choose from."""
    equations = int(np.count_nonzero(np.repeat(weights, 3, axis=1)))
    return len(problem.free) - equations


def _wrapped(difference: np.ndarray, continuous: np.ndarray) -> np.ndarray:
    out = difference.copy()
    out[continuous] = (out[continuous] + np.pi) % (2 * np.pi) - np.pi
    return out


def _step(jac: np.ndarray, residual: np.ndarray, toward: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(task, pull): the smallest change that fixes the linearised task, and the pull toward
    the posture projected onto the joint motions the task does not see; joints not in `keep`
    stay."""
    task_step, pull_step = np.zeros(len(toward)), np.zeros(len(toward))
    if not keep.any():
        return task_step, pull_step
    j = jac[:, keep]
    u, s, vt = np.linalg.svd(j, full_matrices=False)
    rank = int(np.count_nonzero(s > RANK_CUTOFF * (s[0] if len(s) else 0.0)))
    u, s, vt = u[:, :rank], s[:rank], vt[:rank]
    task = vt.T @ ((u.T @ residual) / s)
    pull = toward[keep]
    pull = pull - vt.T @ (vt @ pull)
    task_step[keep], pull_step[keep] = task, pull
    return task_step, pull_step


def _project(problem, evaluate, current, targets, used, scale, steps: int = 6):
    """Newton steps of least change back onto the family (the targets met exactly), from
    `current`. Returns (q, errors, residual, jacobian) at the end point."""
    current = current.copy()
    free = problem.free
    everything = np.ones(len(free), dtype=bool)
    for _ in range(steps + 1):
        errors, residual, jac = evaluate(current[None], targets.rotations, targets.positions)
        if float(np.max(errors[0])) < PROJECTED or _ == steps:
            break
        task, _pull = _step(jac[0][used] * scale[:, None], residual[0][used] * scale, np.zeros(len(free)), everything)
        current[free] = np.clip(current[free] + task, problem.lower, problem.upper)
    return current, errors, residual, jac


class _Compiled:
    """`ChainProblem.residual` for one configuration through the compiled kernel's `_evaluate`
    (the same FK and Jacobian the solver descends with, some 30 times faster than the batched
    NumPy form), or None while the kernel is not built here."""

    def __init__(self, problem: ChainProblem, evaluate):
        from ._kernel import KernelChain

        self.data = KernelChain(problem).data
        self.evaluate = evaluate
        self.count = len(problem.links)
        self.columns = len(problem.free)
        self.unit = np.ones((self.count, 2))

    @classmethod
    def make(cls, problem: ChainProblem):
        from . import _kernel

        leaves = _kernel._numba_leaves if _kernel._state == "ready" else None
        if leaves is None:
            return None
        compiled = problem.__dict__.get("_kinema_posture_compiled")
        if compiled is None:
            compiled = problem.__dict__["_kinema_posture_compiled"] = cls(problem, leaves["_evaluate"])
        return compiled

    def residual(self, q, rotations, positions, with_jacobian: bool = True):
        errors = np.empty((self.count, 2))
        residual = np.empty(6 * self.count)
        jac = np.empty((6 * self.count, self.columns))
        self.evaluate(self.data, np.ascontiguousarray(q[0], dtype=float), np.ascontiguousarray(positions, dtype=float),
                      np.ascontiguousarray(rotations, dtype=float), self.unit, 0.0, errors, residual, jac)
        return errors[None], residual[None], jac[None]


def settle_posture(problem: ChainProblem, q: np.ndarray, targets, posture: np.ndarray, tol_p: float, tol_r: float):
    """Slide the converged answer `q` (n,) along its family toward `posture` (n,), holding every
    target, until it stops moving. Returns (q, errors, iterations, settled): the settled answer,
    or `q` unchanged (settled False) where the slide could not keep the targets within tolerance.

    Each step pulls toward the posture within the joint motions the targets do not see, then
    Newton steps return onto the family; a step is kept only if it brings the arm nearer the
    posture (a line search whose length adapts to how curved the family is)."""
    weights = targets.weights
    rows = np.repeat(weights, 3, axis=1).reshape(-1)
    used = rows > 0
    scale = rows[used]
    free = problem.free
    lower, upper = problem.lower, problem.upper
    anchor = np.asarray(posture, dtype=float)[free]

    def distance(x):
        return 0.5 * float(np.sum(_wrapped(anchor - x, problem.continuous) ** 2))

    compiled = _Compiled.make(problem)
    evaluate = compiled.residual if compiled is not None else problem.residual
    current = q.copy()
    errors, residual, jac = evaluate(current[None], targets.rotations, targets.positions)
    if float(np.max(errors[0])) > DRIFT_LIMIT:
        return q, None, 0, False
    x = current[free].copy()
    far = distance(x)
    fraction = 1.0
    iterations = 0
    for iterations in range(1, MAX_ITERATIONS + 1):
        r = residual[0][used] * scale
        j = jac[0][used] * scale[:, None]
        toward = _wrapped(anchor - x, problem.continuous)
        keep = np.ones(len(x), dtype=bool)
        task, pull = _step(j, r, toward, keep)
        for _ in range(len(x)):  # joints on a limit that the pull pushes outward sit out
            blocked = keep & (((x <= lower) & (pull < 0)) | ((x >= upper) & (pull > 0)))
            if not blocked.any():
                break
            keep &= ~blocked
            task, pull = _step(j, r, toward, keep)
        size = float(np.max(np.abs(pull), initial=0.0))
        if size < STEP_TOLERANCE:
            if iterations == 1:  # already where it settles: leave the answer bit for bit
                return q, errors[0], 0, True
            break
        if iterations == 1:
            # Meet the targets exactly first, so that the distance test below compares pulls,
            # not the solver's tolerance.
            current, errors, residual, jac = _project(problem, evaluate, current, targets, used, scale)
            x = current[free].copy()
            far = distance(x)
            continue
        accepted = False
        while fraction >= MIN_FRACTION:
            step = fraction * pull
            biggest = float(np.max(np.abs(step), initial=0.0))
            if biggest > MAX_STEP:
                step *= MAX_STEP / biggest
            trial = current.copy()
            trial[free] = np.clip(x + task + step, lower, upper)
            trial, trial_errors, trial_residual, trial_jac = _project(problem, evaluate, trial, targets, used, scale)
            near = distance(trial[free])
            decrease = float(np.dot(step, pull))
            on_family = float(np.max(trial_errors[0])) <= DRIFT_LIMIT
            # Below ROUNDING the distances differ by round-off only: take the step as it is.
            if on_family and (near <= far - 1e-4 * decrease or size < ROUNDING):
                accepted = True
                break
            fraction *= 0.5
        if not accepted:
            break
        current, errors, residual, jac = trial, trial_errors, trial_residual, trial_jac
        x_before, x, far = x, current[free].copy(), near
        # The next length from the last step and how much the pull changed over it (a
        # Barzilai-Borwein step: the family's curvature along the way, without a Hessian).
        toward_after = _wrapped(anchor - x, problem.continuous)
        _task, pull_after = _step(jac[0][used] * scale[:, None], residual[0][used] * scale, toward_after, keep)
        moved, change = x - x_before, pull - pull_after
        curvature = float(np.dot(moved, change))
        fraction = float(np.clip(np.dot(moved, moved) / curvature, MIN_FRACTION, MAX_FRACTION)) if curvature > 0 else min(
            MAX_FRACTION, fraction * 2.0)
    errors = errors[0]
    ok = ((errors <= (tol_p, tol_r)) | (weights == 0)).all()
    if not ok:
        return q, None, iterations, False
    return current, errors, iterations, True
