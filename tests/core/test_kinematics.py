"""FK and Jacobian checked against independent sources: yourdfpy's own FK, finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import yourdfpy

from kinema_nodes.core.model.kinematics import jacobian, link_pose, link_poses
from kinema_nodes.core.model.loading import find_urdf, load_robot
from kinema_nodes.core.model.rotations import rotation_angle_between, rotation_log

FK_ROBOTS = ("panda", "ur5", "kinova", "xarm7", "talos", "g1", "arm7", "rail_arm6")


@pytest.mark.parametrize("name", FK_ROBOTS)
def test_fk_of_every_link_matches_yourdfpy_over_1000_random_configurations(name):
    """Tolerance 1e-9 m in position and 1e-9 rad in rotation, every link, 1,000 configurations."""
    robot = load_robot(name)
    reference = yourdfpy.URDF.load(str(find_urdf(name)), load_meshes=False, build_scene_graph=True)
    assert reference.actuated_joint_names == robot.actuated_joint_names
    configurations = robot.random_configurations(1000, np.random.default_rng(7))
    ours = link_poses(robot, configurations)
    worst_position = worst_rotation = 0.0
    for q, poses in zip(configurations, ours):
        reference.update_cfg(q)
        theirs = np.stack([reference.get_transform(link, robot.root_link) for link in robot.links])
        worst_position = max(worst_position, np.abs(theirs[:, :3, 3] - poses[:, :3, 3]).max())
        worst_rotation = max(worst_rotation, rotation_angle_between(theirs, poses).max())
    assert worst_position < 1e-9
    assert worst_rotation < 1e-9


def test_single_link_fk_equals_all_links_fk(robots):
    robot = robots("talos")
    q = robot.random_configurations(64, np.random.default_rng(1))
    every = link_poses(robot, q)
    for link in ("gripper_left_base_link", "leg_right_6_link", robot.tool_point):
        np.testing.assert_allclose(link_pose(robot, q, link), every[:, robot.links.index(link)], atol=1e-12)
    np.testing.assert_allclose(link_pose(robot, q[0], robot.tool_point), every[0, robot.links.index(robot.tool_point)], atol=1e-12)


def _finite_difference_jacobian(robot, q, link, step=1e-6):
    columns = []
    for k in range(robot.dof):
        plus, minus = q.copy(), q.copy()
        plus[k] += step
        minus[k] -= step
        a, b = link_pose(robot, plus, link), link_pose(robot, minus, link)
        linear = (a[:3, 3] - b[:3, 3]) / (2 * step)
        angular = rotation_log(a[:3, :3] @ b[:3, :3].T) / (2 * step)
        columns.append(np.concatenate([linear, angular]))
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("name, link", [("panda", "panda_hand_tcp"), ("panda", "panda_leftfinger"), ("ur5", "tool0"),
                                        ("talos", "gripper_left_base_link"), ("arm7", "finger_right"), ("rail_arm6", "tool_tcp")])
def test_jacobian_matches_central_finite_differences(robots, name, link):
    """Tolerance 1e-6 (central differences with step 1e-6 are accurate to ~1e-9)."""
    robot = robots(name)
    for q in robot.random_configurations(20, np.random.default_rng(3)):
        np.testing.assert_allclose(jacobian(robot, q, link), _finite_difference_jacobian(robot, q, link), atol=1e-6)


def test_jacobian_is_batched_and_zero_outside_the_chain(robots):
    robot = robots("talos")
    q = robot.random_configurations(8, np.random.default_rng(4))
    batch = jacobian(robot, q, "gripper_left_base_link")
    assert batch.shape == (8, 6, robot.dof)
    np.testing.assert_allclose(batch[5], jacobian(robot, q[5], "gripper_left_base_link"), atol=1e-14)
    outside = [i for i, n in enumerate(robot.actuated_joint_names) if n not in robot.chain_joint_names("gripper_left_base_link")]
    assert outside and np.all(batch[:, :, outside] == 0.0)


def test_mimic_finger_follows_its_source(robots):
    robot = robots("arm7")
    q = robot.configuration({"finger_joint": 0.03})
    hand = link_pose(robot, q, "hand")
    left = np.linalg.inv(hand) @ link_pose(robot, q, "finger_left")
    right = np.linalg.inv(hand) @ link_pose(robot, q, "finger_right")
    np.testing.assert_allclose(left[:3, 3], [0, 0.03, 0.0584], atol=1e-12)
    np.testing.assert_allclose(right[:3, 3], [0, -0.03, 0.0584], atol=1e-12)
