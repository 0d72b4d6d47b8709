"""Spare joints decided by the frame's inputs, not by the path that led to the frame.

An arm with more joints than its targets need (a 7-axis arm reaching one pose) has a family of
answers for every pose. A warm-started descent stops at whichever member is nearest where the
arm happened to be, so a frame reached from the frame before and from a later frame ends up in
different places, and a bake differs from the playback the animator watched.

The slide (`_kernel_maths._settle`) takes a converged answer and moves it along that family (the tool
held) to the member nearest a *posture*: a joint vector that is an input of the frame (the pose
the arm had when the target was added or last handed off). The slide is a local descent, so the
branch (elbow up or down, wrist flipped or not) is still the one the warm start reached: chosen
by continuity. Where the distance to the posture has more than one minimum on that branch (a
humanoid's arm with its waist, far from its posture), the slide from the start would stop at
whichever is nearest; so the kernel also descends from the posture itself and slides that answer,
and takes it wherever it lies within `BRANCH_JUMP` of the first (`_kernel_maths._settle_by_inputs`).
Within a branch the answer is then the same whatever the start, to the precision the
slide converges to (`_kernel_maths.POSTURE_STEP_TOLERANCE`), and the same for both backends because it
runs in float64 in the kernel after either of them. It runs inside the compiled kernel, right
after the descent and in the same call, so a redundant arm with a posture tracks at kernel speed.
"""

from __future__ import annotations

import numpy as np

from . import _kernel
from ._chain import ChainProblem


def redundancy(problem: ChainProblem, weights: np.ndarray) -> int:
    """Free joints minus the task equations with weight: > 0 when there is a family to choose from."""
    equations = int(np.count_nonzero(np.repeat(weights, 3, axis=1)))
    return len(problem.free) - equations


def posture_argument(problem: ChainProblem, weights: np.ndarray, posture) -> np.ndarray | None:
    """The kernel's posture argument for these targets, or None where there is nothing to settle
    (no posture, or no spare joint)."""
    if posture is None or redundancy(problem, weights) <= 0:
        return None
    from ._numpy_backend import kernel_chain

    return _kernel.posture_columns(kernel_chain(problem), posture)


def settle_posture(problem: ChainProblem, q: np.ndarray, targets, posture: np.ndarray, tol_p: float, tol_r: float):
    """Slide the converged answer `q` (n,) along its family toward `posture` (n,), holding every
    target, until it stops moving (for answers that did not come from the kernel's own descent,
    e.g. PyRoki's). Returns (q, errors, iterations, settled): the settled answer, or `q` unchanged
    (settled False) where the slide could not keep the targets within tolerance."""
    from ._numpy_backend import kernel_chain

    chain = kernel_chain(problem)
    settled = np.zeros(1, dtype=bool)
    packed = None if targets.packed is None else targets.packed[None]
    out, errors, _, iterations, converged = _kernel.solve_rows(
        chain, np.asarray(q, dtype=float)[None], np.zeros(1, dtype=np.int64), targets.positions[None],
        targets.rotations[None], targets.weights[None], np.zeros(1), tol_p, tol_r, 0, _kernel.STALL_WINDOW, False, None,
        packed, _kernel.posture_columns(chain, posture), settled)
    if not (converged[0] and settled[0]):
        return q, None, int(max(iterations[0], 0)), False
    return out[0], errors[0], int(iterations[0]), True
