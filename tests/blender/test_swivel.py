"""Elbow swivel: the tool holds while the elbow swings; limits saturate the angle and say so."""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between
from kinema_nodes.core.solve import IKTarget, SolveOptions
from kinema_nodes.core.stages.swivel import has_spare_joint, set_swivel, swivel_angle, swivel_geometry, wrap

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


def test_elbow_swivel_ring_swings_the_elbow_in_blender_while_the_tool_holds(blender):
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.edit import add_elbow_swivel
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values

    bpy = blender
    rig = import_urdf(bpy.context, "arm7")
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, ARM7_START)
    bpy.context.view_layer.update()
    bpy.context.view_layer.objects.active = rig
    _tree, target, solver = add_ik_target(bpy.context, rig, "flange", backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    bpy.context.view_layer.update()
    before = read_joint_values(rig, robot)
    _node, ring = add_elbow_swivel(bpy.context, rig)
    assert ring in [b.name for b in rig.data.collections_all["IK"].bones]
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    assert np.abs(read_joint_values(rig, robot) - before).max() < 1e-4  # adding the ring moves nothing
    control = np.array(rig.pose.bones[target.control_bone].matrix, dtype=float)
    start_angle = rig.pose.bones[ring].rotation_euler[1]
    rig.pose.bones[ring].rotation_euler[1] = start_angle + np.radians(30)
    rig.pose.bones[ring].keyframe_insert("rotation_euler", index=1, frame=1)
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    q = read_joint_values(rig, robot)
    tool = np.array(rig.pose.bones["flange"].matrix, dtype=float)
    assert np.abs(tool[:3, 3] - control[:3, 3]).max() < 1e-5
    assert rotation_angle_between(tool, control) < 1e-5
    assert abs(wrap(swivel_angle(robot, "flange", q, HELD) - (start_angle + np.radians(30)))) < 1e-3
    assert np.abs(q - before).max() > 0.05
    assert "swivel" in solver.summary and "saturated" not in solver.summary, solver.summary
    # the ring sits on the shoulder-to-wrist line of the swung arm
    geometry = swivel_geometry(robot, "flange", q, HELD)
    ring_matrix = np.array(rig.pose.bones[ring].matrix, dtype=float)
    assert np.abs(ring_matrix[:3, 3] - geometry["shoulder"]).max() < 1e-4
    assert np.dot(ring_matrix[:3, 1], geometry["axis"]) > 0.9999
