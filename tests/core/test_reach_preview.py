"""Reach preview (#30 item 4) in core: each sample's verdict on real arms of example-robot-data
(UR5: 6 axes, Panda: 7), from goals made by forward kinematics at chosen joint values, so the
right verdict is known: a generic pose is reachable, a wrist bent 3 degrees from straight is near
a singularity (margin 10 degrees), a joint 0.5 % of its range from a limit is near it (the bake's
1 %), a goal 2 m away is unreachable."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import reach_preview
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.solve import SolveOptions

CASES = {
    "ur5": ("tool0", [0.3, -1.2, 1.4, -1.0, -1.3, 0.2], "wrist_2_joint", "elbow_joint"),
    "panda": ("panda_link8", [0.0, -0.4, 0.0, -2.2, 0.0, 1.9, 0.8, 0.02], "panda_joint6", "panda_joint4"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_verdict_on_a_real_arm(robots, name):
    robot = robots(name)
    link, start, wrist_joint, limited_joint = CASES[name]
    start = np.array(start)
    names = robot.actuated_joint_names
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True), max_iterations=200, budget_ms=2000.0)

    bent = start.copy()
    bent[names.index(wrist_joint)] = np.radians(3.0)
    limited = start.copy()
    j = names.index(limited_joint)
    limited[j] = robot.upper[j] - 0.005 * (robot.upper[j] - robot.lower[j])
    far = link_pose(robot, start, link)
    far[:3, 3] += (2.0, 0.0, 0.0)
    samples = [reach_preview.preview(robot, link, [link_pose(robot, q, link)], q, options)[0] for q in (start, bent, limited)]
    samples.append(reach_preview.preview(robot, link, [far], start, options)[0])
    verdicts = [s.verdict for s in samples]
    assert verdicts == ["reachable", "near_singularity", "near_limit", "unreachable"], [(s.verdict, s.why) for s in samples]
    assert "wrist" in samples[1].why and limited_joint in samples[2].why
    assert reach_preview.counts(samples) == {v: 1 for v in reach_preview.VERDICTS}


def test_judging_many_at_once_gives_each_sample_s_own_verdict(robots):
    """Judge.many (batched FK and Jacobians, what the preview uses) against the judge called on
    each sample, on the UR5 and the Panda: random configurations, some pushed to a limit, some
    with the elbow or wrist straight, some not converged. The same verdict and reason, exactly."""
    rng = np.random.default_rng(30)
    for name in ("ur5", "panda"):
        robot = robots(name)
        judge = reach_preview.Judge(robot, robot.tool_point)
        low, high = np.where(np.isfinite(robot.lower), robot.lower, -np.pi), np.where(np.isfinite(robot.upper), robot.upper, np.pi)
        qs = rng.uniform(low, high, size=(120, len(low)))
        qs[:20, 1] = high[1]  # at a limit
        qs[20:40, 2:4] = 0.0  # straight elbow or wrist on many arms
        converged = rng.uniform(size=len(qs)) > 0.1
        many = judge.many(qs, converged)
        each = [judge(q, bool(c)) for q, c in zip(qs, converged)]
        assert many == each
        assert {v for v, _ in many} >= {"reachable", "near_limit", "unreachable"}


@pytest.mark.parametrize("name, posture", [("ur5", False), ("panda", False), ("panda", True)])
def test_many_frames_in_one_compiled_call_match_frame_by_frame(robots, name, posture):
    """`PreparedSolve.solve_many` (the preview's solve: the frames through the compiled kernel in
    one call, `_kernel_maths._sweep`) against `PreparedSolve.solve` frame by frame from the answer
    before, as a bake solves: the same joints to the bit and the same convergence, on a path that
    runs a joint into its limit (where the polish clips and the general path answers), leaves the
    arm's reach for a stretch and comes back, on the UR5 (polished) and the Panda (spare joint,
    with and without a posture)."""
    from kinema_nodes.core.graph.program import pose_to_target
    from kinema_nodes.core.solve import prepare
    from kinema_nodes.core.solve import _kernel

    assert _kernel.kernel_status(wait=True)[0] == "numba"
    robot = robots(name)
    link, start, _, _ = CASES[name]
    start = np.array(start)
    j = robot.actuated_joint_names.index("wrist_3_joint" if name == "ur5" else "panda_joint7")
    end = start.copy()
    end[0] += 0.6
    end[j] = robot.upper[j] - 1e-4  # runs into the limit's 1 % margin and to the limit itself
    qs = [start + (end - start) * min(1.0, 1.2 * s) for s in np.linspace(0.0, 1.0, 240)]
    goals = [link_pose(robot, q, link) for q in qs]
    for goal in goals[150:170]:
        goal[:3, 3] += (1.5, 0.0, 0.0)  # out of reach, then back
    targets = [pose_to_target(goal) for goal in goals]
    positions = np.array([[p] for p, _ in targets])
    wxyz = np.array([[r] for _, r in targets])
    held = robot.held_joints(True)
    options = SolveOptions(backend="numpy", held_joints=held,
                           posture=tuple(float(v) for v in robot.mid_configuration()) if posture else None)
    calls = []
    many = prepare(robot, [link], options)
    solve = many.solve
    many.solve = lambda *given: calls.append(1) or solve(*given)
    joints, converged = many.solve_many(positions, wxyz, start)
    one = prepare(robot, [link], options)
    current, expected, reached = start, [], []
    for p, r in zip(positions, wxyz):
        result = one.solve(p, r, current)
        current = np.asarray(result.joints, dtype=float)
        expected.append(current)
        reached.append(bool(result.converged))
    assert converged.tolist() == reached and not all(reached) and sum(reached) > 150
    assert np.array_equal(joints, np.array(expected))
    assert len(calls) < len(goals) / 3, f"{len(calls)} of {len(goals)} frames left the compiled call"
