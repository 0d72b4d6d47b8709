"""Grippers are held in the panel, the nodes and the command line alike (#12 item 1), in real
Blender on two robots new to this item: the Unitree Z1 and the SO-101 of example-robot-data,
whose default tool point used to be the moving jaw (and, on the Z1, whose jaw counted as the
spare joint that offered Elbow Swivel).

Tolerances: a link reaches its control within 1e-5 m / 1e-5 rad (as test_live_ik); a held
joint keeps its value to float32 (the rig stores float32): 1e-6 rad.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between
from rig_helpers import robot_of, settle

ROBOTS = {
    "z1": ("z1_description/urdf/z1.urdf", "gripperStator", "gripperMover", "jointGripper", -0.8),
    "so101": ("so_arm_description/urdf/so101.urdf", "gripper_frame_link", "moving_jaw_so101_v1_link", "gripper", 0.6),
}


def _import(bpy, name):
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(bpy.context, str(example_robots_folder() / ROBOTS[name][0]))
    bpy.context.view_layer.objects.active = rig
    return rig


def _start(robot, jaw_joint, jaw_value):
    q = np.clip(robot.mid_configuration() + 0.2, robot.lower, robot.upper)
    q[robot.joint_index(jaw_joint)] = jaw_value
    return q


def _bone(rig, name):
    return np.array(rig.pose.bones[name].matrix, dtype=float)


@pytest.mark.parametrize("name", sorted(ROBOTS))
@pytest.mark.parametrize("aim", ["tool point", "jaw"])
def test_add_ik_target_moves_the_arm_and_never_the_jaw(blender, name, aim):
    """Add IK Target (at the new default tool point, and at the jaw link the old rule chose),
    move the control 3 cm: the link follows, and the jaw joint does not move."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.rig import read_joint_values, write_joint_values
    from kinema_nodes.core.roles import arm_joints
    from kinema_nodes.ui.ik_sections import _spare_joint

    bpy = blender
    _, tool_point, jaw, jaw_joint, jaw_value = ROBOTS[name]
    rig = _import(bpy, name)
    robot = robot_of(rig)
    assert robot.tool_point == tool_point
    start = _start(robot, jaw_joint, jaw_value)
    write_joint_values(rig, robot, start)
    settle(bpy)
    link = None if aim == "tool point" else jaw
    _, target, solver = add_ik_target(bpy.context, rig, link, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    solver.rotation_tolerance = 1e-5
    five_axis = len(arm_joints(robot)) < 6
    target.rotation_weight = 0.0 if five_axis else 1.0  # a 5-axis arm cannot reach every orientation
    assert target.link_name == (tool_point if link is None else jaw)
    assert not _spare_joint(rig)  # no Elbow Swivel: the arm without its jaw has no spare joint
    bone = rig.pose.bones[target.control_bone]
    held_value = read_joint_values(rig, robot)[robot.joint_index(jaw_joint)]
    for step in ((0.02, -0.015, 0.015), (0.0, 0.01, -0.02)):
        matrix = _bone(rig, target.control_bone)
        matrix[:3, 3] += step
        from mathutils import Matrix

        bone.matrix = Matrix(matrix.tolist())
        settle(bpy)
        assert solver.summary.startswith("converged"), (name, aim, solver.summary)
        q = read_joint_values(rig, robot)
        assert abs(q[robot.joint_index(jaw_joint)] - held_value) <= 1e-6
        reached, control = _bone(rig, target.link_name), _bone(rig, target.control_bone)
        assert np.abs(reached[:3, 3] - control[:3, 3]).max() < 1e-5
        if not five_axis:
            assert rotation_angle_between(reached, control) < 1e-5


def test_kinema_nodes_solve_holds_the_joints_add_ik_target_holds(blender):
    """`kinema-nodes solve` to the Z1's jaw link: the jaw keeps its start value, and the JSON's
    `held` is the set the Solver node that Add IK Target made holds."""
    from kinema_nodes.blender.edit import add_ik_target

    bpy = blender
    path, _, jaw, jaw_joint, jaw_value = ROBOTS["z1"]
    rig = _import(bpy, "z1")
    robot = robot_of(rig)
    _, _, solver = add_ik_target(bpy.context, rig, jaw, backend="NUMPY")
    panel_held = sorted(robot.held_joints(solver.hold_prismatic))
    start = _start(robot, jaw_joint, jaw_value)
    goal = link_pose(robot, start, jaw)
    goal[:3, 3] += (0.02, -0.015, 0.015)
    target = [float(v) for v in (*goal[:3, 3], *matrix_to_quaternion(goal))]  # plain floats: numpy 2 reprs are not numbers
    starts = [f"{n}={v!r}" for n, v in zip(robot.actuated_joint_names, start.tolist())]
    urdf = str(example_robots_folder() / path)
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "solve", urdf, "--link", jaw, "--solver", "numpy", "--json",
                             "--target", *map(repr, target), "--start", *starts], capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 3), result.stderr
    payload = json.loads(result.stdout)
    assert payload["held"] == panel_held == [jaw_joint]
    assert payload["joints"][jaw_joint] == jaw_value
