"""The gripper value's mapping (core/gripper.py, #30 item 6) on three robots of
example-robot-data: the Panda's finger slide (mimic finger), the Z1's and SO-101's revolute
jaws. Exact arithmetic on the URDF limits: checked to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.gripper import gripper_configuration, gripper_ends, gripper_hands, gripper_value
from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.loading import load_robot

ROBOTS = {  # file: (gripper joint, open, closed)
    "panda": ("panda_finger_joint1", 0.04, 0.0),
    "z1_description/urdf/z1.urdf": ("jointGripper", -1.5707, 0.0),
    "so_arm_description/urdf/so101.urdf": ("gripper", 1.74533, -0.174533),
}


@pytest.mark.parametrize("path", sorted(ROBOTS))
def test_zero_is_open_one_is_closed_and_values_stay_within_limits(path):
    robot = load_robot(path if path == "panda" else str(example_robots_folder() / path))
    joint, opened, closed = ROBOTS[path]
    assert gripper_ends(robot) == {joint: pytest.approx((opened, closed), abs=1e-12)}
    i = robot.joint_index(joint)
    q = robot.mid_configuration()
    for value, expected in ((0.0, opened), (1.0, closed), (0.5, 0.5 * (opened + closed)), (1.7, closed), (-2.0, opened),
                            (float("nan"), opened)):
        out = gripper_configuration(robot, value, q)
        assert abs(out[i] - expected) <= 1e-12, value
        assert robot.lower[i] <= out[i] <= robot.upper[i]
        others = np.arange(robot.dof) != i
        assert np.array_equal(out[others], q[others])  # only the gripper moves
    assert abs(gripper_value(robot, gripper_configuration(robot, 0.3, q)) - 0.3) <= 1e-12


def test_a_robot_without_a_gripper_has_no_value():
    robot = load_robot("ur5")
    assert gripper_ends(robot) == {}
    assert gripper_value(robot, robot.mid_configuration()) is None


@pytest.mark.parametrize("path, hands", [
    ("baxter_description/urdf/baxter.urdf", ["l_gripper_l_finger_joint", "r_gripper_l_finger_joint"]),
    ("talos_data/robots/talos_reduced.urdf", ["gripper_left_joint", "gripper_right_joint"]),
])
def test_a_dual_arm_has_one_value_per_gripper(path, hands):
    """Baxter (finger slides) and TALOS (revolute grippers): left and right each get their own value."""
    robot = load_robot(str(example_robots_folder() / path))
    found = gripper_hands(robot)
    assert [names for _, names in found] == [[h] for h in hands]
    q = robot.mid_configuration()
    out = gripper_configuration(robot, [1.0, 0.25], q)
    ends = gripper_ends(robot)
    for name, t in zip(hands, (1.0, 0.25)):
        opened, closed = ends[name]
        assert abs(out[robot.joint_index(name)] - (opened + t * (closed - opened))) <= 1e-12


@pytest.mark.parametrize("path, link, hand", [
    ("baxter_description/urdf/baxter.urdf", "left_gripper", "left_gripper_base_link"),  # the left_hand role's link
    ("pr2_description/urdf/pr2.urdf", "r_gripper_tool_frame", "r_gripper_palm_link"),  # the right_hand role's link
    ("pr2_description/urdf/pr2.urdf", "r_gripper_palm_link", "r_gripper_palm_link"),  # a hand is its own
    ("pr2_description/urdf/pr2.urdf", "base_link", "base_link"),  # nothing hangs above it: left as it is
    ("pr2_description/urdf/pr2.urdf", "", ""),  # every gripper
])
def test_a_link_below_a_gripper_names_that_gripper(path, link, hand):
    """A preset names a Gripper's hand by role (the hand's tool frame); the gripper it means is
    the one whose hand is that link or its nearest ancestor, and setting it moves only that
    gripper's fingers."""
    from kinema_nodes.core.gripper import gripper_hand, set_gripper

    robot = load_robot(str(example_robots_folder() / path), check_meshes=False)
    assert gripper_hand(robot, link) == hand
    if hand and hand != "base_link":
        q = robot.mid_configuration()
        closed = set_gripper(robot, q, 1.0, link)
        moved = {robot.actuated_joint_names[i] for i in np.flatnonzero(np.abs(closed - q) > 1e-9)}
        assert moved and moved <= set(dict(gripper_hands(robot))[hand]) | {
            j.name for j in robot.joints if j.mimic and j.mimic.joint in dict(gripper_hands(robot))[hand]}
