"""Elbow swivel: the tool holds while the elbow swings; limits saturate the angle and say so."""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.kinematics import link_pose
from kinema_nodes.core.rotations import matrix_to_quaternion, rotation_angle_between
from kinema_nodes.core.solvers import IKTarget, SolveOptions
from kinema_nodes.core.swivel import has_spare_joint, set_swivel, swivel_angle, swivel_geometry, wrap

ARM7_START = np.array([0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0])
HELD = frozenset({"finger_joint"})
OPTIONS = SolveOptions(backend="numpy", held_joints=HELD)


def _target(robot, q, link="flange"):
    pose = link_pose(robot, q, link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))), pose


def test_only_arms_with_a_spare_joint_swivel(robots):
    assert has_spare_joint(robots("arm7"), "flange", HELD)
    assert has_spare_joint(robots("panda"), "panda_link8")
    assert not has_spare_joint(robots("arm6"), "tool_tcp")
    assert not has_spare_joint(robots("rail_arm6"), "tool_tcp", frozenset({"rail_joint"}))


def test_swivel_holds_the_tool_and_moves_the_elbow(robots):
    robot = robots("arm7")
    target, pose = _target(robot, ARM7_START)
    start_angle = swivel_angle(robot, "flange", ARM7_START, HELD)
    elbow_before = swivel_geometry(robot, "flange", ARM7_START, HELD)["elbow"]
    for turn in (np.radians(20), np.radians(-25), np.radians(60)):
        result = set_swivel(robot, [target], ARM7_START, start_angle + turn, OPTIONS)
        reached = link_pose(robot, result.joints, "flange")
        assert np.abs(reached[:3, 3] - pose[:3, 3]).max() <= 1e-5
        assert rotation_angle_between(reached, pose) <= 1e-5
        assert not result.saturated, result.note
        assert abs(wrap(result.angle - (start_angle + turn))) < 1e-3
        elbow = swivel_geometry(robot, "flange", result.joints, HELD)["elbow"]
        assert np.linalg.norm(elbow - elbow_before) > 0.01
        assert result.joints[-1] == ARM7_START[-1]  # the finger is not in the chain
        assert np.all(result.joints >= robot.lower) and np.all(result.joints <= robot.upper)


def test_swivel_saturates_at_a_joint_limit_and_says_so(robots):
    robot = robots("arm7")
    target, pose = _target(robot, ARM7_START)
    start_angle = swivel_angle(robot, "flange", ARM7_START, HELD)
    result = set_swivel(robot, [target], ARM7_START, start_angle + np.pi, OPTIONS)
    assert result.saturated and "saturated" in result.note and "limit" in result.note
    reached = link_pose(robot, result.joints, "flange")
    assert np.abs(reached[:3, 3] - pose[:3, 3]).max() <= 1e-5  # the tool still holds
    assert rotation_angle_between(reached, pose) <= 1e-5
