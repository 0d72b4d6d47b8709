"""The Gripper value (#30 item 6) in real Blender, on two robots of example-robot-data (not the
bundled ones): the Franka Panda (a prismatic finger slide with a mimic finger) and the Unitree
Z1 (a revolute jaw). Moved as the panel slider moves it, keyed, and held while IK drags the arm.

Tolerances: the rig stores joint channels in float32, so a mapped joint value is checked to
1e-6 (rad or m); a link reaches its control within 1e-5 m (as test_gripper_held).
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from rig_helpers import import_rig, joints_of, robot_of, set_joints, settle

ROBOTS = {
    # name: (file, gripper joint, its (open, closed) values from the URDF's limits)
    "panda": ("panda", "panda_finger_joint1", (0.04, 0.0)),
    "z1": ("z1_description/urdf/z1.urdf", "jointGripper", (-1.5707, 0.0)),
}


def _import(bpy, name):
    path = ROBOTS[name][0]
    return import_rig(bpy, path if name == "panda" else str(example_robots_folder() / path), active=True)


def _mapped(name, value):
    opened, closed = ROBOTS[name][2]
    return opened + value * (closed - opened)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_the_slider_maps_zero_to_open_and_one_to_closed_within_limits(blender, name):
    from kinema_nodes.core.gripper import gripper_ends

    bpy = blender
    rig = _import(bpy, name)
    robot = robot_of(rig)
    joint = ROBOTS[name][1]
    assert gripper_ends(robot) == {joint: pytest.approx(ROBOTS[name][2])}
    i = robot.joint_index(joint)
    for value in (0.0, 0.25, 0.5, 1.0):
        rig.kinema_gripper[0] = value  # what the panel slider does
        settle(bpy)
        q = joints_of(rig)
        assert abs(q[i] - _mapped(name, value)) <= 1e-6
        assert robot.lower[i] - 1e-6 <= q[i] <= robot.upper[i] + 1e-6  # float32 channels
    if name == "panda":  # the mimic finger follows its source
        mimic = next(j for j in robot.joints if j.mimic and j.mimic.joint == joint)
        rig.kinema_gripper[0] = 0.5
        settle(bpy)
        from kinema_nodes.core.model.kinematics import link_pose

        left, right = (link_pose(robot, joints_of(rig), link)[:3, 3] for link in ("panda_leftfinger", "panda_rightfinger"))
        assert mimic.name == "panda_finger_joint2"
        assert abs(np.linalg.norm(left - right) - 2 * _mapped(name, 0.5)) <= 1e-5


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_a_keyed_gripper_value_plays_and_the_solver_holds_it_during_a_drag(blender, name):
    from mathutils import Matrix

    from kinema_nodes.blender.edit import add_ik_target

    bpy = blender
    rig = _import(bpy, name)
    robot = robot_of(rig)
    i = robot.joint_index(ROBOTS[name][1])
    start = np.clip(robot.mid_configuration() + 0.2, robot.lower, robot.upper)
    set_joints(rig, start)
    settle(bpy)
    _, target, solver = add_ik_target(bpy.context, rig, None, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    scene = bpy.context.scene
    rig.kinema_gripper[0] = 0.0
    rig.keyframe_insert("kinema_gripper", index=0, frame=1)
    rig.kinema_gripper[0] = 1.0
    rig.keyframe_insert("kinema_gripper", index=0, frame=11)
    for frame in (11, 6, 1, 6):  # scrubbing both ways
        scene.frame_set(frame)
        settle(bpy)
        assert abs(joints_of(rig)[i] - _mapped(name, rig.kinema_gripper[0])) <= 1e-6, frame
    assert 0.0 < rig.kinema_gripper[0] < 1.0  # frame 6 lies between the keys
    held = _mapped(name, rig.kinema_gripper[0])
    for step in ((0.02, -0.015, 0.015), (0.0, 0.01, -0.02)):
        bone = rig.pose.bones[target.control_bone]
        matrix = np.array(bone.matrix, dtype=float)
        matrix[:3, 3] += step
        bone.matrix = Matrix(matrix.tolist())
        settle(bpy)
        assert solver.summary.startswith("converged"), solver.summary
        assert abs(joints_of(rig)[i] - held) <= 1e-6
        reached = np.array(rig.pose.bones[target.link_name].matrix, dtype=float)
        assert np.abs(reached[:3, 3] - matrix[:3, 3]).max() < 1e-5


def test_a_dual_arm_keys_each_gripper_on_its_own(blender):
    """Baxter (example-robot-data): left closed, right a quarter closed, each to 1e-6."""
    from kinema_nodes.core.gripper import gripper_ends, gripper_hands

    bpy = blender
    rig = import_rig(bpy, str(example_robots_folder() / "baxter_description/urdf/baxter.urdf"), active=True)
    robot = robot_of(rig)
    hands = gripper_hands(robot)
    assert len(hands) == 2
    rig.kinema_gripper[0], rig.kinema_gripper[1] = 1.0, 0.25
    settle(bpy)
    q, ends = joints_of(rig), gripper_ends(robot)
    for (_, (name,)), t in zip(hands, (1.0, 0.25)):
        opened, closed = ends[name]
        assert abs(q[robot.joint_index(name)] - (opened + t * (closed - opened))) <= 1e-6
