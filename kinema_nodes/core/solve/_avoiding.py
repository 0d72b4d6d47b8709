"""The solve that keeps clear of collisions: what `solve` runs when `SolveOptions.avoid` is set.

The plain solve first; if its answer is within tolerance and clear, that is the answer. Otherwise,
on an arm with joints to spare, a walk along the poses that all reach the goal to the nearest
clear one each way; then a damped least-squares descent on the pose residual plus one hinge
residual per pair closer than the margin (each pair's distance gradient from the Jacobian of its
closest point), from the plain answer and from the posture; then, if nothing on that branch
reaches the goal clear, plain solves from fixed random seeds on other branches (a cold solve
tries those first). Of the answers that do not collide, those on target win, the one nearest the
posture first; a pose that reaches the goal but collides is never reported as converged, and when
the goal cannot be reached without a collision the answer stops short with the pair named.

Given a posture, nothing here depends on the start beyond the plain answer's branch, nor on the
clock (every search is bounded by iterations and seeds): a frame's pose depends only on its
inputs, so scrubbing either way and the bake agree (README). The one exception: when nothing
those inputs lead to is clear and on target, the start and a descent from it are tried last (a
clear pose beats a repeatable collision, and continuity finds what a search from the posture
can miss, such as two hands past each other); such a frame may depend on the path to it.

The distances, the robot's capsules and the world are `core.collision`'s; this file is only the
descent and the choice of answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..collision import (Avoid, Clearance, Pairs, check_avoid, collision_reason, measure_pairs, movable_rows, prepare_pairs,
                         summarise)
from ._chain import problem_for
from ._posture import redundancy
from ._types import SolveResult, check_targets, replaced

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..model.robot import RobotModel
    from ._types import IKTarget, SolveOptions

#: Weight of a hinge residual (m) against the pose residual (m, rad).
HINGE_WEIGHT = 10.0
#: Largest joint step per iteration (rad or m): keeps a step from jumping through a thin obstacle.
MAX_STEP = 0.3
#: A descent within tolerance and clear stops after this many iterations even if it is inside the margin.
SETTLE_ITERATIONS = 20
#: Iterations of the collision-aware descent.
DESCENT_ITERATIONS = 150
#: A pose this share of the margin clear keeps the margin (the descent settles a hair inside it).
KEPT = 0.9
#: A solve that stops short with a pair this close (m, beyond the margin) was stopped by that pair.
BLOCKED_WITHIN = 0.01
#: Random seeds a cold solve tries with the plain solver for a clear branch before descending.
BRANCH_SEEDS = 24
#: Seeds beyond the start and the plain answer that a cold solve tries.
COLD_SEEDS = 6
#: Step along the poses that all reach the goal (rad of joint-space length) when sliding clear ...
SLIDE_STEP = 0.05
#: ... and how many steps each way (3 rad: the elbow of a 7-axis arm goes half round).
SLIDE_STEPS = 60
#: Gauss-Newton steps that pull a slid pose back onto the goal.
PULL_BACK = 8
#: Halvings of the step that first clears: the slid answer sits at the margin's edge to SLIDE_STEP / 2**10.
EDGE_HALVINGS = 10


def _evaluate(robot, problem, model, kin, avoid, q, targets, wrow, margin, rows):
    errors, residual, jac = problem.residual(q[None], targets.rotations, targets.positions)
    pairs, frames = measure_pairs(robot, model, kin, avoid, q)
    pairs = pairs.subset(rows)
    hinge = np.maximum(margin - pairs.d, 0.0) * HINGE_WEIGHT
    r = residual[0] * wrow
    merit = float(r @ r + hinge @ hinge)
    return errors[0], r, jac[0], pairs, frames, hinge, merit


def _damped(j, r, lam):
    """min |J dx - r|^2 + lam |diag(J^T J)| dx|^2 (Levenberg-Marquardt's step)."""
    jtj = j.T @ j
    return np.linalg.solve(jtj + lam * np.diag(np.diag(jtj)) + (1e-9 + lam * 1e-6) * np.eye(jtj.shape[0]), j.T @ r)


def _priority_step(j_pose, r_pose, j_hinge, r_hinge, lam):
    """The step that first pushes every pair closer than the margin back out to it (the hinge
    rows, solved first), then moves toward the pose only in what that leaves free (the null
    space of the hinge rows): where the pose is reachable clear of everything it converges to
    the solver's tolerance; where it is not, the pairs hold and the pose stops short."""
    n = j_pose.shape[1]
    h_pinv = np.linalg.pinv(j_hinge, rcond=1e-6)
    dx_hinge = h_pinv @ r_hinge
    null = np.eye(n) - h_pinv @ j_hinge
    j_null = j_pose @ null
    rest = r_pose - j_pose @ dx_hinge
    jtj = j_null.T @ j_null
    dx_pose = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj)) + (1e-9 + lam * 1e-6) * np.eye(n), j_null.T @ rest)
    return dx_hinge + null @ dx_pose


def _descend(robot, problem, model, kin, avoid, q0, targets, tol_p, tol_r, iterations, margin, rows=None):
    """Levenberg-Marquardt on [pose residual; hinge residuals of pairs closer than `margin`],
    a step taken only when it lowers the sum of squares. Returns the best collision-free iterate
    (one keeping the margin first, then pose error; the least-penetrating one when none is
    free), its errors (T, 2), its
    smallest distance, the iterations used, and the pair nearest at the last iterate (what
    stopped the descent, when something did)."""
    free = problem.free
    lower, upper = robot.lower[free], robot.upper[free]
    weights = targets.weights
    wrow = np.repeat(weights, 3, axis=1).reshape(-1)
    q = np.clip(q0.copy(), robot.lower, robot.upper)
    if rows is None:
        rows = movable_rows(model, kin, avoid, free)
    errors, r, jac, pairs, (origins, axes), hinge, merit = _evaluate(robot, problem, model, kin, avoid, q, targets, wrow, margin,
                                                                     rows)
    lam = 1e-3
    best = None
    used = 0
    rejected = 0
    while True:
        dmin = float(pairs.d.min()) if len(pairs.d) else math.inf
        pose_cost = float(np.sum((errors * weights) ** 2))
        key = (0 if dmin >= KEPT * margin else 1, pose_cost) if dmin >= 0 else (2, -dmin)
        if best is None or key < best[0]:
            best = (key, q.copy(), errors.copy(), dmin)
        pose_ok = bool(np.all((errors <= (tol_p, tol_r)) | (weights == 0)))
        if pose_ok and (not hinge.any() or (dmin >= 0 and used >= SETTLE_ITERATIONS)):
            break
        if used >= iterations or rejected > 10:
            break
        j_pose = jac * wrow[:, None]
        active = np.flatnonzero(hinge > 0)
        j_hinge = None
        if len(active):
            grad = kin.gradient(pairs.cap_a[active], pairs.point_a[active], pairs.normal[active], origins, axes)
            self_rows = pairs.cap_b[active] >= 0
            if self_rows.any():
                sb = active[self_rows]
                grad[self_rows] -= kin.gradient(pairs.cap_b[sb], pairs.point_b[sb], pairs.normal[sb], origins, axes)
            j_hinge = grad[:, free]
            r_hinge = hinge[active] / HINGE_WEIGHT  # metres to push out, back to the margin
        scale = 1.0
        while True:
            used += 1
            step = _priority_step(j_pose, r, j_hinge, r_hinge, lam) if j_hinge is not None else _damped(j_pose, r, lam)
            step *= scale
            biggest = float(np.max(np.abs(step), initial=0.0))
            if biggest > MAX_STEP:
                step *= MAX_STEP / biggest
            q_new = q.copy()
            q_new[free] = np.clip(q[free] + step, lower, upper)
            got = _evaluate(robot, problem, model, kin, avoid, q_new, targets, wrow, margin, rows)
            if got[-1] < merit:
                q = q_new
                errors, r, jac, pairs, (origins, axes), hinge, merit = got
                lam = max(lam * 0.3, 1e-9)
                rejected = 0
                break
            lam = min(lam * 10.0, 1e8)
            scale *= 0.5  # the push-out rows are not damped by lam: shorten the whole step
            rejected += 1
            if rejected > 10 or used >= iterations:
                break
    nearest = None
    if len(pairs.d) and float(pairs.d.min()) < margin + BLOCKED_WITHIN:
        nearest = pairs.names[int(np.argmin(pairs.d))]
    _, q_best, errors_best, dmin_best = best
    return q_best, errors_best, dmin_best, used, nearest


def _other_branches(robot, targets, anchor, plain_options, plain_solve, problem, model, kin, avoid, rows,
                    candidates) -> tuple[bool, int]:
    """Plain solves from `BRANCH_SEEDS` fixed random seeds (any branch will do); each answer on
    target and clear joins `candidates`. Returns (one keeps the margin, iterations used)."""
    warm = replace(plain_options, cold=False)
    rng = np.random.default_rng(2)
    iterations = 0
    for q in robot.random_configurations(BRANCH_SEEDS, rng):
        seed = anchor.copy()
        seed[problem.free] = q[problem.free]
        other = plain_solve(robot, targets, seed, warm, keep_branch=False)
        iterations += other.iterations
        if other.converged:
            other_pairs, _ = measure_pairs(robot, model, kin, avoid, other.joints)
            reach = other_pairs.subset(rows).d
            if not len(reach) or float(reach.min()) >= KEPT * avoid.margin_m:
                candidates.append(other.joints)
                return True, iterations
            if float(other_pairs.d.min(initial=math.inf)) >= 0:
                candidates.append(other.joints)
    return False, iterations


def _slide_clear(robot, problem, model, kin, avoid, q0, targets, tol_p, tol_r, rows) -> list[np.ndarray]:
    """On an arm with joints to spare, the poses that reach the goal form a family (an elbow
    swinging round the line from shoulder to wrist). Walk it both ways from `q0` in small steps,
    each pulled back onto the goal; where a step first keeps the margin, halve the last step
    until the pose sits at the margin's edge. Returns that pose each way: the clear answers
    nearest `q0` on its branch. Deterministic, and where the obstacle moves a little the answers
    move a little (not in steps of `SLIDE_STEP`)."""
    free = problem.free
    lower, upper = robot.lower[free], robot.upper[free]
    weights = targets.weights
    wrow = np.repeat(weights, 3, axis=1).reshape(-1)
    keep = KEPT * avoid.margin_m

    def onto_goal(q):
        for _ in range(PULL_BACK):
            errors, residual, jac = problem.residual(q[None], targets.rotations, targets.positions)
            if bool(np.all((errors[0] <= (tol_p, tol_r)) | (weights == 0))):
                return True
            step = np.linalg.lstsq(jac[0] * wrow[:, None], residual[0] * wrow, rcond=1e-9)[0]
            q[free] = np.clip(q[free] + step, lower, upper)
        errors = problem.residual(q[None], targets.rotations, targets.positions, with_jacobian=False)[0][0]
        return bool(np.all((errors <= (tol_p, tol_r)) | (weights == 0)))

    def clear(q):
        reach = measure_pairs(robot, model, kin, avoid, q)[0].subset(rows).d
        return not len(reach) or float(reach.min()) >= keep

    found = []
    for sign in (1.0, -1.0):
        q = np.clip(q0.copy(), robot.lower, robot.upper)
        direction = None
        for _ in range(SLIDE_STEPS):
            _, _, jac = problem.residual(q[None], targets.rotations, targets.positions)
            j = jac[0] * wrow[:, None]
            _, singular, vt = np.linalg.svd(j)
            rank = int(np.sum(singular > 1e-6 * max(float(singular[0]), 1e-12)))
            null = vt[rank:]
            if not len(null):
                break
            d = null[0] * sign if direction is None else null.T @ (null @ direction)
            norm = float(np.linalg.norm(d))
            if norm < 1e-9:
                break
            direction = d / norm
            behind = q.copy()
            q[free] = np.clip(q[free] + SLIDE_STEP * direction, lower, upper)
            if not onto_goal(q):
                break  # a limit or a singular pose ends the family here
            if clear(q):
                for _ in range(EDGE_HALVINGS):  # behind: on the goal, inside the margin; q: on the goal, clear
                    middle = 0.5 * (behind + q)
                    if not onto_goal(middle):
                        break
                    if clear(middle):
                        q = middle
                    else:
                        behind = middle
                found.append(q.copy())
                break
    return found


def solve_avoiding(robot: RobotModel, targets: IKTarget | Sequence[IKTarget], start: np.ndarray, options: SolveOptions,
                   plain_solve: Callable[..., SolveResult]) -> SolveResult:
    """`solve` under `options.avoid` (see the module docstring). `plain_solve` is the solve
    without avoidance (`_entry.solve`), so this file adds only the collision part."""
    t0 = time.perf_counter()
    avoid = options.avoid
    check_avoid(avoid)
    model, kin = prepare_pairs(robot, avoid)
    plain_options = replaced(options, avoid=None)
    base = plain_solve(robot, targets, start, plain_options)
    base_pairs, _ = measure_pairs(robot, model, kin, avoid, base.joints)
    base_clear = summarise(base_pairs, avoid)
    if base.converged and base_clear.min_m >= avoid.margin_m:
        return _with_clearance(base, base_clear, t0)
    arrays = check_targets(robot, targets)
    problem = problem_for(robot, arrays.links, frozenset(options.held_joints))
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    start = np.asarray(start, dtype=float)
    # Given a posture, every seed is a function of this frame's inputs, never of the frame the arm
    # came from: the plain answer (start-independent on its branch, by the posture slide), then the posture.
    anchor = _anchor(robot, start, options, problem.free)
    seeds = [base.joints, anchor]
    if options.cold:
        rng = np.random.default_rng(1)
        for q in robot.random_configurations(COLD_SEEDS, rng):
            seed = anchor.copy()
            seed[problem.free] = q[problem.free]
            seeds.append(seed)
    candidates = [anchor]  # an answer no worse than the canonical pose, whatever the descents find
    if base.converged and base_clear.min_m >= 0:
        candidates.append(base.joints)
    iterations = base.iterations
    blockers = []
    margins = (avoid.margin_m, 0.0) if avoid.margin_m > 0 else (0.0,)
    finished = False
    rows = movable_rows(model, kin, avoid, problem.free)
    if options.cold:
        # Another branch first: plain solves from random seeds cost a fraction of a millisecond
        # each, and a goal the plain answer reaches through something is often reached clear by
        # another branch (an elbow up instead of down).
        finished, used = _other_branches(robot, targets, anchor, plain_options, plain_solve, problem, model, kin, avoid, rows,
                                         candidates)
        iterations += used
        if finished:
            seeds = []
    if not finished and base.converged and redundancy(problem, arrays.weights) > 0:
        slid = _slide_clear(robot, problem, model, kin, avoid, base.joints, arrays, tol_p, tol_r, rows)
        candidates += slid
        if slid:
            seeds, finished = [], True
    # Bounded by iterations, not by the clock: the answer must not depend on the machine's load
    # (a frame's pose depends only on its inputs, and Bake keys what playback showed).
    for seed in seeds:
        for margin in margins:
            q, errors, dmin, used, nearest = _descend(robot, problem, model, kin, avoid, seed, arrays, tol_p, tol_r,
                                                      max(DESCENT_ITERATIONS, int(options.max_iterations)), margin,
                                                      rows=rows)
            iterations += used
            candidates.append(q)
            ok = bool(np.all((errors <= (tol_p, tol_r)) | (arrays.weights == 0)))
            if ok and dmin >= 0:  # within tolerance and clear; the margin is kept where the descent could
                finished = True
                break
            if not ok and nearest is not None:
                blockers.append(nearest)
            seed = q
        if finished:
            break
    if not finished and not options.cold:
        # Nothing on this branch reaches the goal clear: the free answer that exists may be on
        # another (a warm solve searches there last, so an arm that can stay on its branch does).
        finished, used = _other_branches(robot, targets, anchor, plain_options, plain_solve, problem, model, kin, avoid, rows,
                                         candidates)
        iterations += used
    # the answer: collision-free first, then within tolerance, then clear by the margin, then nearest the canonical pose
    # (on target) or the goal
    def score(q):
        q_done = np.clip(q, robot.lower, robot.upper)
        errors_done = problem.residual(q_done[None], arrays.rotations, arrays.positions, with_jacobian=False)[0][0]
        pairs, _ = measure_pairs(robot, model, kin, avoid, q_done)
        clear = summarise(pairs, avoid)
        movable = pairs.subset(rows)
        reach = float(movable.d.min()) if len(movable.d) else math.inf  # what the solve could change
        ok = bool(np.all((errors_done <= (tol_p, tol_r)) | (arrays.weights == 0)))
        cost = float(np.sum((errors_done * arrays.weights) ** 2))
        free = reach >= 0
        # among answers on target, the one nearest the canonical pose: a choice made by this frame's inputs alone
        last = float(np.sum((q_done - anchor) ** 2)) if ok else cost
        kept = reach >= KEPT * avoid.margin_m
        key = (0 if clear.min_m >= 0 else 1, 0 if free else 1, 0 if ok else 1, 0 if kept else 1, last if free else -reach)
        return key, q_done, errors_done, clear, ok, movable

    scored = sorted((score(q) for q in candidates), key=lambda item: item[0])
    if scored[0][0][:3] != (0, 0, 0) and not np.array_equal(start, anchor):
        # Nothing this frame's inputs lead to is clear and on target: then, and only then, from
        # where the arm is (two hands that have crossed stay crossed; a colliding posture is not
        # kept while a clear pose is at hand).
        extra = [start]
        for margin in margins:
            q, _, _, used, _ = _descend(robot, problem, model, kin, avoid, extra[-1], arrays, tol_p, tol_r,
                                        max(DESCENT_ITERATIONS, int(options.max_iterations)), margin, rows=rows)
            iterations += used
            extra.append(q)
        scored = sorted(scored + [score(q) for q in extra], key=lambda item: item[0])
    _, q, errors, clear, ok, movable = scored[0]
    converged = ok and clear.min_m >= 0
    if converged:
        reason = "converged"
    else:
        reason = _blocked_reason(clear, movable, blockers, avoid)
        if reason is None:
            reason = base.reason if base.reason != "converged" else "out of reach"
    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
    return SolveResult(joints=q, position_error=position_error, rotation_error=rotation_error, converged=converged,
                       reason=reason, iterations=int(iterations), ms=(time.perf_counter() - t0) * 1000.0,
                       backend=base.backend, fallback_reason=base.fallback_reason,
                       min_clearance_m=clear.min_m, colliding=clear.colliding)


def _blocked_reason(clear: Clearance, movable: Pairs, blockers: list, avoid: Avoid) -> str | None:
    """What stopped a solve, named: an overlapping pair the solve could move first, then any
    overlapping pair (the answer collides, whatever caused it), then the nearest pair the solve
    could move within the margin (+ `BLOCKED_WITHIN`), then what stopped the descents; None
    when no collision was in the way."""
    order = np.argsort(movable.d) if len(movable.d) else np.zeros(0, dtype=int)
    if len(order) and movable.d[order[0]] < 0:
        return collision_reason(movable.names[int(order[0])], clear.obstacles)
    if clear.colliding:
        return collision_reason(clear.colliding[0], clear.obstacles)
    if len(order) and movable.d[order[0]] < avoid.margin_m + BLOCKED_WITHIN:
        return collision_reason(movable.names[int(order[0])], clear.obstacles)
    if blockers:
        return collision_reason(blockers[0], clear.obstacles)
    return None


def _anchor(robot, start: np.ndarray, options: SolveOptions, free: np.ndarray) -> np.ndarray:
    """The canonical pose of this frame: its posture on the joints the solve moves (the rest as
    the frame holds them). A solve given no posture (a one-off solve, the CLI) has only the start."""
    if options.posture is not None and len(options.posture) == robot.dof and np.all(np.isfinite(options.posture)):
        anchor = start.copy()
        anchor[free] = np.asarray(options.posture, dtype=float)[free]
        return np.clip(anchor, robot.lower, robot.upper)
    return np.clip(start, robot.lower, robot.upper)


def _with_clearance(result, clear: Clearance, t0: float):
    result.min_clearance_m = clear.min_m
    result.colliding = clear.colliding
    result.ms = (time.perf_counter() - t0) * 1000.0
    return result
