"""The every-frame solve in one compiled call (core/solve/_frame.py, `_kernel._frame`).

- Wherever it answers it gives the general path's answer to the bit (joints, errors, iterations),
  through `solve` and through `prepare(...).solve`, on arms the rest of the suite does not use
  (robosuite's iiwa and Sawyer, UR3) and on the Kinova's multi-turn joints; with a posture on a
  redundant arm; with a held joint (its value to the bit).
- What it does not answer goes to the general path, which words it: a start outside the limits
  (clipped), an unreachable target (a reason), NaN (a refusal naming it).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, prepare, solve
from kinema_nodes.core.solve import _entry, _frame, _kernel
from kinema_nodes.core.solve._types import MAX_TARGET_DISTANCE_M


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    status = kernel_status(wait=True)
    assert status == ("numba", None), status
    assert _kernel.frame_form() is not None


def goals_at(robot, q, links) -> list[IKTarget]:
    goals = []
    for link in links:
        pose = link_pose(robot, q, link)
        goals.append(IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose))))
    return goals


CASES = [
    ("robosuite_iiwa", ("right_hand",), False, ()),
    ("robosuite_iiwa", ("right_hand",), True, ()),
    ("robosuite_sawyer", ("right_hand",), True, ("right_j0",)),
    ("ur3", ("tool0",), False, ()),
    ("kinova", ("j2s6s200_end_effector",), False, ()),
]


@pytest.mark.parametrize("name, links, with_posture, held", CASES)
def test_the_one_call_frame_answers_as_the_general_path_to_the_bit(robots, name, links, with_posture, held):
    robot = robots(name)
    rng = np.random.default_rng(17)
    q = robot.random_configurations(1, rng)[0]
    if name == "kinova":  # two turns up on the multi-turn joints: the answer must stay there
        q = q + 4 * np.pi * robot.is_continuous
    posture = tuple(np.clip(q + 0.3 * rng.standard_normal(robot.dof), robot.lower, robot.upper)) if with_posture else None
    options = SolveOptions(backend="numpy", held_joints=frozenset(held), posture=posture)
    prepared = prepare(robot, links, options)
    held_index = [robot.joint_index(h) for h in held]
    current = q.copy()
    for _ in range(25):
        q = q + 0.02 * rng.standard_normal(robot.dof)
        q = np.where(robot.is_continuous, q, np.clip(q, robot.lower, robot.upper))
        q[held_index] = current[held_index]
        goals = goals_at(robot, q, links)
        one_call = _frame.solve_frame(robot, goals, current, options, time.perf_counter())
        assert one_call is not None, "a converging warm frame is answered by the one compiled call"
        through_solve = solve(robot, goals, current, options)
        through_prepare = prepared.solve(np.array([g.position for g in goals]), np.array([g.wxyz for g in goals]), current)
        general = _entry._solve(robot, goals, current, options, time.perf_counter())
        assert general.converged
        for result in (one_call, through_solve, through_prepare):
            np.testing.assert_array_equal(result.joints, general.joints)
            assert (result.position_error, result.rotation_error) == (general.position_error, general.rotation_error)
            assert result.iterations == general.iterations
            assert (result.converged, result.reason, result.backend) == (True, "converged", "numpy")
        assert np.all(through_solve.joints[held_index] == current[held_index])  # held: to the bit
        if name == "kinova":
            near = np.abs(through_solve.joints - current)[robot.is_continuous]
            assert np.all(near <= np.pi), near
        current = through_solve.joints


def test_what_the_one_call_does_not_answer_goes_to_the_general_path(robots):
    robot = robots("robosuite_sawyer")
    link = "right_hand"
    options = SolveOptions(backend="numpy")
    prepared = prepare(robot, [link], options)
    rng = np.random.default_rng(5)
    q = robot.random_configurations(1, rng)[0]
    goals = goals_at(robot, q, (link,))
    positions, wxyz = np.array([goals[0].position]), np.array([goals[0].wxyz])
    # a start outside the limits: the answer is clipped into them, as the general path does it
    outside = q.copy()
    outside[0] = robot.upper[0] + 0.5
    general = _entry._solve(robot, goals, outside, options, time.perf_counter())
    for result in (solve(robot, goals, outside, options), prepared.solve(positions, wxyz, outside)):
        assert np.all(result.joints <= robot.upper) and np.all(result.joints >= robot.lower)
        np.testing.assert_array_equal(result.joints, general.joints)
    # unreachable: the general path's closest pose and reason
    far = [IKTarget(link, (3.0, 0.0, 0.5), goals[0].wxyz)]
    assert _frame.solve_frame(robot, far, q, options, time.perf_counter()) is None
    for result in (solve(robot, far, q, options), prepared.solve(np.array([[3.0, 0.0, 0.5]]), wxyz, q)):
        assert not result.converged and result.reason in ("out of reach", "blocked by a joint limit")
        assert np.all(np.isfinite(result.joints))
    # refused numbers, with the general path's words
    bad = positions.copy()
    bad[0, 2] = np.nan
    with pytest.raises(KinemaError, match="not finite"):
        prepared.solve(bad, wxyz, q)
    with pytest.raises(KinemaError, match="not finite"):
        solve(robot, [IKTarget(link, (0.1, float("nan"), 0.2), goals[0].wxyz)], q, options)
    with pytest.raises(KinemaError, match="zero length"):
        prepared.solve(positions, np.zeros((1, 4)), q)
    with pytest.raises(KinemaError, match="refusing targets farther"):
        prepared.solve(np.array([[2e4, 0.0, 0.0]]), wxyz, q)
    nan_start = q.copy()
    nan_start[3] = np.nan
    with pytest.raises(KinemaError, match="not finite"):
        solve(robot, goals, nan_start, options)
    with pytest.raises(KinemaError, match="start configuration has shape"):
        prepared.solve(positions, wxyz, q[:-1])
    assert _kernel.FRAME_MAX_DISTANCE_SQUARED == MAX_TARGET_DISTANCE_M ** 2


@pytest.mark.parametrize("name, link", [("robosuite_iiwa", "right_hand"), ("ur3", "tool0"), ("kinova", "j2s6s200_end_effector")])
def test_a_cold_solve_in_one_call_answers_as_the_general_path_to_the_bit(robots, name, link):
    """Cold from mid-limits: the one call runs the general path's first batch of seeds (the start
    first, then the fixed random seeds, up to the first that converges) and gives its answer, bit
    for bit; a target that batch cannot reach goes to the general path's further batches."""
    robot = robots(name)
    options = SolveOptions(backend="numpy", cold=True)
    prepared = prepare(robot, [link], options)
    rng = np.random.default_rng(23)
    start = robot.mid_configuration()
    answered = 0
    for q in robot.random_configurations(40, rng):
        goals = goals_at(robot, q, (link,))
        one_call = _frame.solve_frame(robot, goals, start, options, time.perf_counter())
        general = _entry._solve(robot, goals, start, options, time.perf_counter())
        through = [solve(robot, goals, start, options),
                   prepared.solve(np.array([goals[0].position]), np.array([goals[0].wxyz]), start)]
        for result in through + ([one_call] if one_call is not None else []):
            np.testing.assert_array_equal(result.joints, general.joints)
            assert (result.iterations, result.position_error, result.converged) == (general.iterations,
                                                                                    general.position_error, general.converged)
            assert result.converged and np.all(result.joints >= robot.lower) and np.all(result.joints <= robot.upper)
        answered += one_call is not None
    assert answered >= 36, answered


def test_held_joints_given_as_a_plain_set_are_read_on_every_solve(robots):
    """A plain set of held joints can change in place under one options object: the one-call path
    (which keeps what it built per options object) leaves it to the general path, so the joint
    held after the change stays at its start value (to the bit), and the first solve moved it."""
    robot = robots("ur3")
    q = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    held = set()
    options = SolveOptions(backend="numpy", held_joints=held)
    goal = goals_at(robot, q + 0.05, ("tool0",))
    first = solve(robot, goal, q, options)
    assert first.converged and abs(first.joints[0] - q[0]) > 1e-3
    held.add(robot.actuated_joint_names[0])
    second = solve(robot, goal, q, options)
    assert second.joints[0] == q[0], (second.joints[0], q[0])
