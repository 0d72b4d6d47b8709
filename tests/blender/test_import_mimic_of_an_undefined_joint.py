"""example-robot-data's alex_psyonic_hands, whose finger joints mimic joints the file does not
define (tests/core/test_mimic_of_an_undefined_joint.py), through both import buttons as a user
meets it: each finishes and reports a warning naming the first such joint and how many more;
the joint has a value of its own on the rig; Add IK Target and a few drags reach the goal
(1e-5 m, 1e-5 rad), and the rig's stored URDF reads back as the same robot."""

from __future__ import annotations

import numpy as np

from rig_helpers import joints_of, robot_of, set_joints, walk


def test_a_robot_whose_mimics_name_undefined_joints_imports_with_a_warning_and_solves(blender, capfd):
    bpy = blender
    from mathutils import Matrix

    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import find_urdf

    name = "alex_psyonic_hands"
    for run in (lambda: bpy.ops.kinema.import_urdf(filepath=str(find_urdf(name))),
                lambda: bpy.ops.kinema.import_robot_by_name(robot=name)):
        capfd.readouterr()
        assert run() == {"FINISHED"}
        lines = [line for line in capfd.readouterr().out.splitlines() if "Imported '" in line]
        assert len(lines) == 1 and lines[0].startswith("Warning: "), lines
        assert "joint 'Left_index_q2' mimics joint 'index_q1', which is not defined: it moves on its own" in lines[0]
        assert "(7 more: `kinema-nodes info FILE` lists every note)" in lines[0]
    rig = bpy.context.view_layer.objects.active
    robot = robot_of(rig)  # read back from the URDF the rig keeps
    assert robot.dof == 39 and "Left_index_q2" in robot.actuated_joint_names

    q = joints_of(rig)
    i = robot.joint_index("Left_index_q2")
    q[i] = 0.5 * (robot.lower[i] + robot.upper[i]) + 0.1
    set_joints(rig, q)
    assert abs(joints_of(rig)[i] - q[i]) <= 1e-6

    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    from kinema_nodes.blender.edit import rig_tree

    target = next(n for n in rig_tree(rig).nodes if n.bl_idname == "KinemaIKTargetNode")
    link, bone = target.link_name, target.control_bone
    for goal_q in walk(robot, link, joints_of(rig), 4, 0.05, seed=2):
        goal = link_pose(robot, goal_q, link)
        rig.pose.bones[bone].matrix = Matrix(goal.tolist())
        bpy.context.view_layer.update()
        bpy.context.view_layer.update()
        reached = link_pose(robot, joints_of(rig), link)
        assert np.abs(reached[:3, 3] - goal[:3, 3]).max() <= 1e-5
        angle = np.arccos(np.clip((np.trace(reached[:3, :3].T @ goal[:3, :3]) - 1) / 2, -1, 1))
        assert angle <= 1e-5
