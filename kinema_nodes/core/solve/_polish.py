"""The last steps of a converged answer on a chain with no spare joint (a 6-axis arm on a full
pose), shared by the general path (`_entry._complete`) and the compiled frame (`_frame.py`).

Why: there the exact answer is unique on its branch, but a descent stops anywhere inside the
tolerance, so where it stops depends on where it started: ~1e-4 rad for a 1e-6 m tolerance,
enough for forward and backward scrubbing, or a bake and playback, to disagree. A few more
float64 steps past the tolerance land on the exact answer from any nearby start, so a frame's
pose depends only on that frame's inputs (README).
"""

from __future__ import annotations

from ._contract import _finish, _within

#: Steps past the tolerance. On a target the chain meets exactly, each Gauss-Newton step from
#: 1e-6 squares the error and four were enough. A target it cannot meet exactly converges only
#: linearly to its nearest pose: a 5-joint arm on a full pose (hextilt_flying_arm_5, #29, whose
#: control's float32 matrix lies 9e-10 m off the poses it can reach) left two starts 3.6e-6 rad
#: apart after four steps, 7e-12 after six, 2e-14 after eight (a stall ends them sooner).
POLISH_STEPS = 8
#: (m, rad) A start that already meets its target this closely is left as it is: that is as exactly
#: as a control's float32 matrix can say where the tool is, and Add IK Target must leave the arm
#: unchanged to the bit (#29). Measured right after Add IK Target: 1e-8 m and 1.5e-7 rad on a UR5,
#: 2.9e-9 m and 3.4e-7 rad on robosuite's ALOHA (its arm hangs under rotated parent frames, each a
#: float32 matrix); float32 resolves 1.2e-7 at 1 m and 1 rad, a few of its steps compose here.
#: Two frames' targets this close are the same target to Blender, so no path dependence hides below it.
AS_EXACT_AS_A_CONTROL = (1e-6, 1e-6)


def polish_unique(problem, q, target_arrays):
    """(q, errors, iterations) after `POLISH_STEPS` float64 descent steps from q with no
    tolerance to stop at (a stall ends them sooner). The caller applies the contract and
    keeps the answer only if it still meets the tolerance."""
    from ._numpy_backend import lm_run

    q_polished, errors, iterations, _ = lm_run(problem, q, target_arrays, 0.0, 0.0, POLISH_STEPS)
    return q_polished, errors, iterations


def polish(robot, problem, start, q, errors, iterations, target_arrays, options):
    """A converged answer on a chain with no spare joint, polished to the exact one
    (`polish_unique`) where that still meets the tolerance after `_finish`; else as it was.
    (q, errors, iterations)."""
    from ._posture import redundancy

    if redundancy(problem, target_arrays.weights) > 0:
        return q, errors, iterations
    if iterations == 0:
        now = errors
        if now is None:
            now = problem.residual(q[None], target_arrays.rotations, target_arrays.positions, with_jacobian=False)[0][0]
        if all(p <= AS_EXACT_AS_A_CONTROL[0] and r <= AS_EXACT_AS_A_CONTROL[1] for p, r in now.tolist()):
            return q, errors, iterations
    q_polished, errors_polished, extra = polish_unique(problem, q, target_arrays)
    q2, errors2 = _finish(robot, problem, start, q_polished, target_arrays, options, errors_polished)
    if _within(errors2, target_arrays.weights, options.position_tolerance, options.rotation_tolerance):
        return q2, errors2, iterations + extra
    return q, errors, iterations + extra
