"""A revolute joint whose limits are a file's way of writing "no limit" turns like a continuous one.

rtb-data's QUT Frankie (a Panda on a mobile base, xacro) gives its base's yaw limits of
+-999999 rad. Seeds were drawn across the whole range, so an answer found by a restart put the
base hundreds of thousands of radians round (the rig then held -164372.8 rad on one frame and
-199997.2 on the next, each to a float32 step of 0.016 rad), and scrubbing forward and back
showed two windings of the base (rtb_frankie in the robot zoo). A revolute joint whose limits
span more than four turns (`FREE_TURNING_SPAN`) is now seeded within half a turn of its start
and its answers are unwrapped toward the start, on every route: the NumPy restarts, the compiled
frame call, PyRoki's seeds and Find Solutions' seeds (whose answers were already shown on
the turn nearest the current pose). Real multi-turn limits (a UR's +-2 pi) keep their
meaning. The pose is checked by yourdfpy on xacrodoc's expansion (tests/independent_fk.py).

Its base's slide (+-999999 m) likewise is seeded at its start value (`FREE_SLIDING_SPAN`).
The same robot showed a relative package folder (`--package-path xacro`) breaking its xacro
includes; the last test keeps that mended.

Tolerances: a reached pose 1e-5 m and 1e-4 rad (the solve's own tolerances); a free-turning
joint within pi (+1e-9) of its start."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, problem_for, restart_count, solve
from kinema_nodes.core.solve._numpy_backend import random_seeds

TOOL = "frankie_hand"


@pytest.fixture(scope="module")
def frankie():
    spec = importlib.util.find_spec("rtbdata")
    if spec is None:
        pytest.fail("rtb-data is not installed: install the test dependencies (README)")
    folder = Path(list(spec.submodule_search_locations)[0]) / "xacro"
    path = folder / "qut_frankie_description/robots/frankie_arm_hand.urdf.xacro"
    return load_robot(str(path), package_path=[str(folder)]), str(folder)


def _target(robot, q):
    pose = link_pose(robot, q, TOOL)
    return IKTarget(TOOL, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))


def _goal_and_start(robot):
    yaw = robot.joint_index("panda_base_joint1")
    goal = robot.mid_configuration()
    goal[yaw] = 2.5
    start = robot.mid_configuration()
    # an arm far enough from the goal that the descent from the start alone misses: a restart answers
    for i, value in enumerate((0.07, 1.59, -2.06, -0.22, -1.09, 1.58, 1.9), start=1):
        start[robot.joint_index(f"panda_joint{i}")] = value
    return goal, start, yaw


def test_only_limits_of_more_than_four_turns_make_a_joint_turn_freely(frankie, robots):
    robot, _ = frankie
    turning = dict(zip(robot.actuated_joint_names, robot.turns_freely.tolist()))
    assert turning["panda_base_joint1"] is True  # revolute, +-999999 rad
    assert turning["panda_base_joint2"] is False  # prismatic, +-999999 m: a slide has no turn
    assert not any(turning[f"panda_joint{i}"] for i in range(1, 8))
    ur5 = robots("ur5")
    assert np.isclose(ur5.upper - ur5.lower, 4 * np.pi, atol=1e-3).any(), "the UR5's +-2 pi joints"
    assert not ur5.turns_freely.any()


def test_restart_seeds_of_a_free_turning_joint_lie_within_half_a_turn_of_the_start(frankie):
    robot, _ = frankie
    _, start, yaw = _goal_and_start(robot)
    start[yaw] = 0.7
    problem = problem_for(robot, (TOOL,), frozenset())
    for attempt in range(4):
        seeds = random_seeds(problem, start, attempt)
        assert np.all(np.abs(seeds[:, yaw] - 0.7) <= np.pi + 1e-9)
        arm = [robot.joint_index(f"panda_joint{i}") for i in range(1, 8)]
        assert np.all(seeds[:, arm] >= robot.lower[arm]) and np.all(seeds[:, arm] <= robot.upper[arm])


@pytest.mark.parametrize("backend", ["numpy", "pyroki"])
def test_a_restart_turns_the_base_the_short_way(frankie, backend):
    """A solve whose answer comes from a restart (as a far drag's): the old seeds put the base
    at -62841.3 rad on NumPy."""
    if backend == "numpy":
        assert kernel_status(wait=True) == ("numba", None)
    robot, folder = frankie
    goal, start, yaw = _goal_and_start(robot)
    target = _target(robot, goal)
    # the base's slide held, as the add-on holds a rig's slides by default
    options = SolveOptions(backend=backend, budget_ms=5000.0, held_joints=frozenset({"panda_base_joint2"}))
    before = restart_count()
    result = solve(robot, [target], start, options)
    assert result.converged, result.note
    assert backend == "pyroki" or restart_count() > before, "the descent from the start reached it: no restart tried"
    assert abs(result.joints[yaw] - start[yaw]) <= np.pi + 1e-9, result.joints[yaw]
    from independent_fk import IndependentFK, pose_error

    fk = IndependentFK(robot, folder)
    position, angle = pose_error(fk.pose(result.joints, TOOL), fk.pose(goal, TOOL))
    assert position <= 1e-5 and angle <= 1e-4, (position, angle)



def test_a_slide_without_limits_that_matter_is_seeded_at_its_start(frankie):
    """The base's slide (+-999999 m) freed too: seeds drawn across its range put the arm hundreds
    of kilometres from the target, and from this start 65 restart batches found nothing (the
    target is reachable: the goal's own FK). The slide is now seeded at its start value and the
    descent moves it."""
    assert kernel_status(wait=True) == ("numba", None)
    robot, folder = frankie
    goal, start, yaw = _goal_and_start(robot)
    for i, value in enumerate((1.85, 0.65, 1.66, -2.5, 1.75, 0.7, -2.42), start=1):
        start[robot.joint_index(f"panda_joint{i}")] = value
    slide = robot.joint_index("panda_base_joint2")
    assert robot.slides_freely[slide] and robot.slides_freely.sum() == 1
    problem = problem_for(robot, (TOOL,), frozenset())
    assert np.all(random_seeds(problem, start, 1)[:, slide] == start[slide])
    before = restart_count()
    result = solve(robot, [_target(robot, goal)], start, SolveOptions(backend="numpy", budget_ms=5000.0))
    assert result.converged and restart_count() > before, result.note
    from independent_fk import IndependentFK, pose_error

    position, angle = pose_error(IndependentFK(robot, folder).pose(result.joints, TOOL), link_pose(robot, goal, TOOL))
    assert position <= 1e-5 and angle <= 1e-4, (position, angle)

def test_a_relative_package_folder_serves_a_xacro_s_includes(frankie, monkeypatch):
    """`--package-path xacro` given relative to the working folder (found on the way: Frankie's
    `$(find qut_frankie_description)` expanded to the relative folder, which xacro then read
    against the including file's own folder: "No such file or directory: ./xacro/.../robots/xacro/...")."""
    robot, folder = frankie
    monkeypatch.chdir(Path(folder).parent)
    again = load_robot("xacro/qut_frankie_description/robots/frankie_arm_hand.urdf.xacro", package_path=["xacro"])
    assert again.actuated_joint_names == robot.actuated_joint_names
