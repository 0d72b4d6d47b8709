"""The numbers the Blender side only copies (camera framing, bone poses, quaternion keys, angle
wrap) are computed in core; each is checked here against an independent construction."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.camera import frame_points, view_tangents
from kinema_nodes.core.model.bones import bone_channel, bone_local_poses, default_bone_length
from kinema_nodes.core.model.kinematics import link_poses
from kinema_nodes.core.model.rotations import (matrix_to_quaternion, pose_matrices, pose_matrix, quaternion_to_matrix,
                                               same_hemisphere, wrap_angle)


@pytest.mark.parametrize("width, height", [(800, 600), (480, 640)])
def test_the_framed_camera_sees_every_point_and_fills_the_frame(width, height, robots):
    """Points of a real robot (UR10 link origins over random poses) projected through the pinhole
    camera `frame_points` returns: all inside the frame, the widest side within 2 % of its edge."""
    robot = robots("ur10")
    rng = np.random.default_rng(3)
    q = rng.uniform(np.maximum(robot.lower, -3), np.minimum(robot.upper, 3), size=(20, robot.dof))
    points = link_poses(robot, q)[..., :3, 3].reshape(-1, 3)
    tan_x, tan_y = view_tangents(36.0, 50.0, width, height, margin=0.88)
    matrix, clip_start, clip_end = frame_points(points, (1.0, 0.75, 0.55), tan_x, tan_y)
    rotation = matrix[:3, :3]
    assert np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-12) and np.linalg.det(rotation) == pytest.approx(1.0)
    local = (points - matrix[:3, 3]) @ rotation  # camera frame: looks down -z
    depth = -local[:, 2]
    assert np.all(depth > clip_start) and np.all(depth < clip_end)
    u, v = local[:, 0] / depth / tan_x, local[:, 1] / depth / tan_y
    assert np.all(np.abs(u) <= 1 + 1e-6) and np.all(np.abs(v) <= 1 + 1e-6)
    assert max(np.ptp(u), np.ptp(v)) == pytest.approx(2.0, rel=0.02)


def test_bone_local_poses_put_the_bone_where_asked():
    rng = np.random.default_rng(1)
    poses = pose_matrices(rng.normal(size=(5, 3)), rng.normal(size=(5, 4)))
    rest = pose_matrix([0.1, 0.2, 0.3], [0.9, 0.1, -0.3, 0.2])
    assert np.allclose(rest @ bone_local_poses(rest, poses), poses, atol=1e-12)
    parent_rest, parent_pose = pose_matrix([0, 0, 1], [1, 0, 0, 0]), pose_matrix([0.5, 0, 1], [0.7, 0.7, 0, 0])
    local = bone_local_poses(rest, poses, parent_pose, parent_rest)
    # Blender's pose-bone chain: armature pose = parent pose @ inv(parent rest) @ rest @ basis.
    assert np.allclose(parent_pose @ np.linalg.inv(parent_rest) @ rest @ local, poses, atol=1e-12)


def test_default_bone_length_follows_the_robot_size_within_bounds(robots):
    rest = link_poses(robots("ur10"), np.zeros(robots("ur10").dof))
    assert 0.05 <= default_bone_length(rest) <= 0.2
    assert default_bone_length(rest[:1]) == pytest.approx(0.1)


def test_same_hemisphere_keeps_each_rotation_and_never_turns_the_long_way():
    rng = np.random.default_rng(2)
    q = matrix_to_quaternion(quaternion_to_matrix(rng.normal(size=(50, 4))))
    q *= np.where(rng.random(50) < 0.5, -1.0, 1.0)[:, None]
    fixed = same_hemisphere(q)
    assert np.allclose(np.abs(np.sum(fixed * q, axis=1)), 1.0)  # the same rotation, maybe negated
    assert np.all(np.sum(fixed[1:] * fixed[:-1], axis=1) >= 0)


def test_wrap_angle_lands_in_range_and_keeps_the_angle():
    angles = np.array([-10.0, -np.pi, 0.0, 3.0, np.pi, 7.5, 100.0])
    wrapped = wrap_angle(angles)
    assert np.all(wrapped >= -np.pi) and np.all(wrapped < np.pi)
    assert np.allclose(np.cos(wrapped), np.cos(angles)) and np.allclose(np.sin(wrapped), np.sin(angles))


def test_pose_matrices_match_pose_matrix_row_by_row():
    rng = np.random.default_rng(4)
    positions, wxyz = rng.normal(size=(6, 3)), rng.normal(size=(6, 4))
    batch = pose_matrices(positions, wxyz)
    for i in range(6):
        assert np.allclose(batch[i], pose_matrix(positions[i], wxyz[i]), atol=1e-15)


@pytest.mark.parametrize("axis, multiplier, expected", [
    ((0, 0, 1), 1.0, (2, 1.0)), ((0, -1, 0), 2.0, (1, -2.0)), ((-1, 0, 0), -0.5, (0, 0.5)),
    ((0, 0.6, 0.8), 1.5, (None, 1.5)), ((1e-12, 0, 1), 1.0, (None, 1.0)),
])
def test_a_joint_is_keyed_on_the_bone_axis_it_is_aligned_with(axis, multiplier, expected):
    assert bone_channel(axis, multiplier) == expected
