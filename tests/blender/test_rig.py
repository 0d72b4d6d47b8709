"""The rig contract (kinema_nodes.blender.rig) in real Blender: joint values in and out, limits,
channels that key the right F-curves, sliders that stay in sync, data that survives a reload."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kinema_nodes.blender import rig
from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_poses


def _import(bpy, name):
    from kinema_nodes.blender.build import import_urdf

    return import_urdf(bpy.context, name, collision=False)


def _pose(bpy, obj, robot):
    bpy.context.view_layer.update()
    return np.array([np.array(obj.pose.bones[link].matrix) for link in robot.links])


def test_joint_values_round_trip(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    q = robot.random_configurations(5, np.random.default_rng(0))
    for values in q:
        rig.write_joint_values(obj, robot, values)
        np.testing.assert_allclose(rig.read_joint_values(obj, robot), values, atol=1e-6)


def test_write_clamps_to_limits_and_refuses_non_finite(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    beyond = robot.upper + 1.0
    written = rig.write_joint_values(obj, robot, beyond)
    np.testing.assert_allclose(written, robot.upper)
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), robot.upper, atol=1e-6)
    np.testing.assert_allclose(_pose(blender, obj, robot), link_poses(robot, robot.upper), atol=2e-6)
    for bad in (np.nan, np.inf):
        q = robot.zero_configuration()
        q[2] = bad
        with pytest.raises(KinemaError, match="non-finite"):
            rig.write_joint_values(obj, robot, q)
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), robot.upper, atol=1e-6)
    with pytest.raises(KinemaError):
        rig.write_joint_values(obj, robot, np.zeros(robot.dof + 1))


def test_continuous_joints_turn_past_pi(blender, robots):
    robot = robots("tiago")
    obj = _import(blender, "tiago")
    continuous = int(np.flatnonzero(robot.is_continuous)[0])
    q = robot.zero_configuration()
    q[continuous] = 5.0  # beyond pi: a wheel keeps turning
    rig.write_joint_values(obj, robot, q)
    assert rig.read_joint_values(obj, robot)[continuous] == pytest.approx(5.0, abs=1e-6)


def test_each_joint_turns_one_channel_and_the_rest_are_locked(blender, robots):
    robot = robots("ur5")
    obj = _import(blender, "ur5")
    for name in robot.actuated_joint_names:
        bone, data_path, index, scale = rig.joint_channel(robot, name)
        pose_bone = obj.pose.bones[bone]
        assert data_path == "rotation_euler" and abs(scale) == 1.0
        locks = list(pose_bone.lock_rotation)
        assert locks == [i != index for i in range(3)]
        assert all(pose_bone.lock_location) and all(pose_bone.lock_scale)
    bone, data_path, index, scale = rig.joint_channel(robots("panda"), "panda_finger_joint1")
    assert data_path == "location"
    with pytest.raises(KinemaError):
        rig.joint_channel(robot, "no_such_joint")


def test_mimic_joint_follows_its_source(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    q = robot.zero_configuration()
    q[robot.joint_index("panda_finger_joint1")] = 0.03
    rig.write_joint_values(obj, robot, q)
    poses = _pose(blender, obj, robot)
    right = robot.links.index("panda_rightfinger")
    np.testing.assert_allclose(poses[right], link_poses(robot, q)[right], atol=1e-6)
    # the slider moves the source; the driver moves the mimic
    obj.pose.bones["panda_leftfinger"].kinema_millimetres = 10.0
    poses = _pose(blender, obj, robot)
    q[robot.joint_index("panda_finger_joint1")] = 0.01
    np.testing.assert_allclose(poses[right], link_poses(robot, q)[right], atol=1e-6)


def test_sliders_are_views_of_the_bone_channels(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    bones = obj.pose.bones
    bones["panda_link4"].kinema_angle = math.radians(-90.0)
    assert rig.read_joint_values(obj, robot)[robot.joint_index("panda_joint4")] == pytest.approx(-math.pi / 2, abs=1e-6)
    q = robot.mid_configuration()
    rig.write_joint_values(obj, robot, q)
    for name, value in zip(robot.actuated_joint_names, q):
        child = robot.joint_by_name[name].child
        shown = bones[child].kinema_millimetres / 1000.0 if robot.joint_by_name[name].type == "prismatic" else bones[child].kinema_angle
        assert shown == pytest.approx(value, abs=1e-6), name
    bones["panda_link4"].kinema_angle = 1.0  # above panda_joint4's upper limit (-0.07)
    assert bones["panda_link4"].kinema_angle == pytest.approx(robot.joint_by_name["panda_joint4"].upper, abs=1e-6)
    bones["panda_leftfinger"].kinema_millimetres = 500.0
    assert bones["panda_leftfinger"].kinema_millimetres == pytest.approx(40.0, abs=1e-3)


def test_range_slider_spans_exactly_the_joint_limits(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    bones = obj.pose.bones
    for joint_name, bone_name in (("panda_joint4", "panda_link4"), ("panda_finger_joint1", "panda_leftfinger")):
        joint = robot.joint_by_name[joint_name]
        for fraction, expected in ((0.0, joint.lower), (1.0, joint.upper), (0.25, joint.lower + 0.25 * (joint.upper - joint.lower))):
            bones[bone_name].kinema_range = fraction
            assert rig.read_joint_values(obj, robot)[robot.joint_index(joint_name)] == pytest.approx(expected, abs=1e-6)
            assert bones[bone_name].kinema_range == pytest.approx(fraction, abs=1e-5)


def test_key_joint_values_keys_the_channels_of_joint_channel(blender, robots):
    bpy = blender
    robot = robots("panda")
    obj = _import(bpy, "panda")
    rng = np.random.default_rng(5)
    keyed = {}
    for frame in (1, 20):
        q = robot.random_configurations(1, rng)[0]
        rig.write_joint_values(obj, robot, q)
        assert rig.key_joint_values(obj, robot, frame) == robot.dof
        keyed[frame] = q
    from bpy_extras import anim_utils

    action = obj.animation_data.action
    fcurves = anim_utils.action_get_channelbag_for_slot(action, obj.animation_data.action_slot).fcurves
    for name in robot.actuated_joint_names:
        bone, data_path, index, scale = rig.joint_channel(robot, name)
        fcurve = fcurves.find(f'pose.bones["{bone}"].{data_path}', index=index)
        assert fcurve is not None and len(fcurve.keyframe_points) == 2, name
        assert fcurve.evaluate(20) == pytest.approx(scale * keyed[20][robot.joint_index(name)], abs=1e-6)
    rig.write_joint_values(obj, robot, robot.zero_configuration())
    bpy.context.scene.frame_set(1)
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), keyed[1], atol=1e-6)
    np.testing.assert_allclose(_pose(bpy, obj, robot), link_poses(robot, keyed[1]), atol=2e-6)


def test_key_all_and_reset_operators(blender, robots):
    bpy = blender
    robot = robots("ur5")
    obj = _import(bpy, "ur5")
    q = robot.random_configurations(1, np.random.default_rng(6))[0]
    rig.write_joint_values(obj, robot, q)
    bpy.context.scene.frame_set(7)
    assert bpy.ops.kinema.key_all_joints("EXEC_DEFAULT") == {"FINISHED"}
    assert bpy.ops.kinema.reset_joints("EXEC_DEFAULT") == {"FINISHED"}
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), robot.zero_configuration(), atol=1e-7)
    bpy.context.scene.frame_set(7)
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), q, atol=1e-6)


def test_rig_data_survives_save_and_reload(blender, tmp_path, robots):
    bpy = blender
    robot = robots("panda")
    obj = _import(bpy, "panda")
    name = obj.name
    path = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True)
    rig.reset_caches()
    bpy.ops.wm.open_mainfile(filepath=str(path))
    obj = bpy.data.objects[name]
    assert rig.is_rig(obj)
    assert obj.data.kinema.tool_point == robot.tool_point == rig.tool_point(obj)
    assert rig.robot_for_rig(obj).fingerprint == robot.fingerprint == obj.data.kinema.fingerprint
    joint4 = obj.data.bones["panda_link4"].kinema
    assert (joint4.joint, joint4.joint_type, joint4.actuated) == ("panda_joint4", "revolute", True)
    assert joint4.lower == pytest.approx(robot.joint_by_name["panda_joint4"].lower, abs=1e-6)
    assert tuple(joint4.axis) == pytest.approx(tuple(robot.joint_by_name["panda_joint4"].axis))
    finger2 = obj.data.bones["panda_rightfinger"].kinema
    assert finger2.mimic_joint == "panda_finger_joint1" and not finger2.actuated
    constraint = obj.pose.bones["panda_link4"].constraints[0]
    assert constraint.type == "LIMIT_ROTATION" and constraint.owner_space == "LOCAL"


def test_bone_collections_and_tool_point(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    collections = obj.data.collections_all
    root = collections["Kinema"]
    assert {c.name for c in root.children} == {"Joints", "Tool Points", "IK"}
    assert not collections["IK"].is_visible and collections["Joints"].is_visible
    assert [b.name for b in collections["Tool Points"].bones] == [robot.tool_point]
    joint_bones = {b.name for b in collections["Joints"].bones}
    assert {robot.joint_by_name[n].child for n in robot.actuated_joint_names} <= joint_bones


SKEW_AXES_URDF = """<robot name="skew">
  <link name="base"><visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
  <link name="turn"><visual><geometry><cylinder radius="0.02" length="0.2"/></geometry></visual></link>
  <link name="slide"><visual><geometry><sphere radius="0.03"/></geometry></visual></link>
  <link name="follower"/>
  <link name="tip"/>
  <joint name="skew_turn" type="revolute"><parent link="base"/><child link="turn"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.5"/><axis xyz="1 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="skew_slide" type="prismatic"><parent link="turn"/><child link="slide"/>
    <origin xyz="0 0 0.2" rpy="0 0.4 0"/><axis xyz="0 1 1"/><limit lower="-0.1" upper="0.3" effort="1" velocity="1"/></joint>
  <joint name="skew_mimic" type="revolute"><parent link="slide"/><child link="follower"/>
    <origin xyz="0.05 0 0" rpy="0 0 0"/><axis xyz="0 -1 2"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
    <mimic joint="skew_turn" multiplier="-0.5" offset="0.2"/></joint>
  <joint name="tip_joint" type="revolute"><parent link="follower"/><child link="tip"/>
    <origin xyz="0 0.1 0" rpy="0.1 0.2 0.3"/><axis xyz="0 0 -1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def test_axes_off_the_coordinate_axes_still_move_exactly(blender, tmp_path):
    from kinema_nodes.core.model.loading import load_robot

    path = tmp_path / "skew.urdf"
    path.write_text(SKEW_AXES_URDF)
    robot = load_robot(path)
    obj = _import(blender, str(path))
    assert rig.joint_channel(robot, "skew_turn")[1] == "rotation_axis_angle"
    assert rig.joint_channel(robot, "skew_slide")[1] == '["kinema_slide"]'
    assert rig.joint_channel(robot, "tip_joint")[1:] == ("rotation_euler", 2, -1.0)
    # A registered pose-bone property driving the same bone's location was a dependency cycle,
    # after which a pose lagged its write (0.12 m on the 10th of these): none may lag now.
    for seed in (8, 0):
        for q in robot.random_configurations(20, np.random.default_rng(seed)):
            rig.write_joint_values(obj, robot, q)
            np.testing.assert_allclose(rig.read_joint_values(obj, robot), q, atol=1e-6)
            np.testing.assert_allclose(_pose(blender, obj, robot), link_poses(robot, q), atol=2e-6)
    keyed = robot.random_configurations(2, np.random.default_rng(3))
    for frame, q in zip((3, 9), keyed):
        rig.write_joint_values(obj, robot, q)
        assert rig.key_joint_values(obj, robot, frame) == robot.dof
    for frame, q in zip((3, 9), keyed):  # the keys play back through the drivers
        blender.context.scene.frame_set(frame)
        np.testing.assert_allclose(rig.read_joint_values(obj, robot), q, atol=1e-6)
        np.testing.assert_allclose(_pose(blender, obj, robot), link_poses(robot, q), atol=2e-6)


@pytest.mark.parametrize("met_by", ["loading the file", "the first read"])
def test_a_rig_from_before_the_slide_fix_is_moved_onto_the_custom_property(blender, tmp_path, met_by):
    """Rigs imported before the fix kept a skew slide in the registered `kinema_slide` property
    (drivers and keys pointing there); loading the file moves them, value and keys included, and
    so does the first read of a rig no load met (appended, or open when the add-on was enabled)."""
    from kinema_nodes.blender.animation import fcurves, pose_bone_path
    from kinema_nodes.blender.handlers import on_load
    from kinema_nodes.core.model.loading import load_robot

    path = tmp_path / "skew.urdf"
    path.write_text(SKEW_AXES_URDF)
    robot = load_robot(path)
    obj = _import(blender, str(path))
    bone = rig.joint_channel(robot, "skew_slide")[0]
    q = robot.random_configurations(1, np.random.default_rng(4))[0]
    rig.write_joint_values(obj, robot, q)
    rig.key_joint_values(obj, robot, 1)
    # Turn it into the old layout: value, keys and drivers on the registered property.
    pose_bone = obj.pose.bones[bone]
    value = pose_bone[rig.SLIDE_KEY]
    del pose_bone[rig.SLIDE_KEY]
    pose_bone.kinema_slide = value  # bpy 4.5 keeps registered and custom properties in one store, 5.x apart
    pose_bone.bone.kinema.data_path = rig.OLD_SLIDE
    new_path, old_path = pose_bone_path(bone, rig.SLIDE), pose_bone_path(bone, rig.OLD_SLIDE)
    for curve in fcurves(obj):
        if curve.data_path == new_path:
            curve.data_path = old_path
    for driver in obj.animation_data.drivers:
        for variable in driver.driver.variables:
            for target in variable.targets:
                if target.data_path == new_path:
                    target.data_path = old_path
    if met_by == "loading the file":
        on_load()
    else:
        rig._LAYOUTS.clear()  # a rig never read in this session (an appended one is new to the cache)
        np.testing.assert_allclose(rig.read_joint_values(obj, robot), q, atol=1e-6)
    assert pose_bone.bone.kinema.data_path == rig.SLIDE
    assert any(curve.data_path == new_path for curve in fcurves(obj))
    assert not any(curve.data_path == old_path for curve in fcurves(obj))
    np.testing.assert_allclose(rig.read_joint_values(obj, robot), q, atol=1e-6)
    blender.context.scene.frame_set(1)
    np.testing.assert_allclose(_pose(blender, obj, robot), link_poses(robot, q), atol=2e-6)
    assert rig.upgrade_slides(obj) == 0  # a current rig is left alone
