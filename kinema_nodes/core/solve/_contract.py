"""The contract every answer leaves `solve` under, whichever backend gave it (see `_entry`'s
docstring): applied by the general path, the compiled frame's polish and the avoiding solve alike,
so it lives apart from all of them.
"""

from __future__ import annotations

import math

import numpy as np

from ._types import SolveOptions, TargetArrays


def _finish(robot, problem, start, q_raw, targets: TargetArrays, options: SolveOptions, errors=None):
    """Apply the contract (see module docstring); return (q, errors). `errors` are reused
    when they were measured in float64 at `q_raw` and nothing but 2 pi unwrapping changes."""
    q = start.copy()
    free = problem.free
    values = q_raw[free]
    continuous = problem.continuous
    if problem.has_continuous:
        delta = values[continuous] - start[free][continuous]
        turned = start[free][continuous] + (delta + np.pi) % (2 * np.pi) - np.pi
        # a joint that turns freely within limits (`turns_freely`) keeps its whole turns at them
        inside = (turned >= problem.lower[continuous]) & (turned <= problem.upper[continuous])
        values[continuous] = np.where(inside, turned, values[continuous])
    q[free] = values
    clipped = np.minimum(np.maximum(q, robot.lower), robot.upper)
    if not math.isfinite(clipped.sum()):  # cannot happen with finite inputs; never hand out NaN
        clipped = np.clip(start.copy(), robot.lower, robot.upper)
    if errors is not None and np.array_equal(clipped, q):
        return clipped, errors
    errors, _, _ = problem.residual(clipped[None], targets.rotations, targets.positions, with_jacobian=False)
    return clipped, errors[0]


def _within(errors: np.ndarray, weights: np.ndarray, tol_p: float, tol_r: float) -> bool:
    """`_converged` for one answer, in plain floats (T is 1 to 4: NumPy's reductions cost more)."""
    for (p, r), (wp, wr) in zip(errors.tolist(), weights.tolist()):
        if (p > tol_p and wp != 0) or (r > tol_r and wr != 0):
            return False
    return True
