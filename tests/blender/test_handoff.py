"""Target-link hand-off, Link Switch, rails and fingers, in real Blender with real robots."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.graph.spec import GraphSpec, LinkSpec, NodeSpec
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.graph.program import FrameInputs, compile_program
from kinema_nodes.core.model.rotations import rotation_angle_between
from rig_helpers import import_rig, joints_of, robot_of, set_joints, settle

ARM6_START = [0.2, -1.2, 1.2, -0.5, 0.5, 0.0]


def _add_target(bpy, rig, link=None):
    from kinema_nodes.blender.edit import add_ik_target

    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, link, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    return tree, target, solver


def _reaches(rig, target, link, tolerance=1e-5):
    control = np.array(rig.pose.bones[target.control_bone].matrix, dtype=float)
    tool = np.array(rig.pose.bones[link].matrix, dtype=float)
    return np.abs(tool[:3, 3] - control[:3, 3]).max() < tolerance and rotation_angle_between(tool, control) < tolerance


def test_keyed_hand_off_to_joint_3_and_back_steps_on_the_keyed_frames_only(blender):
    from kinema_nodes.blender.edit import switch_target_link

    bpy = blender
    rig = import_rig(bpy, "arm6")
    set_joints(rig, ARM6_START)
    settle(bpy)
    _tree, target, solver = _add_target(bpy, rig)
    robot = robot_of(rig)
    joint_3_link = robot.joint_by_name[robot.actuated_joint_names[2]].child  # forearm_link
    scene = bpy.context.scene
    keys = {1: robot.tool_point, 10: joint_3_link, 20: robot.tool_point}
    for frame, link in keys.items():
        scene.frame_set(frame)
        switch_target_link(bpy.context, rig, target, link, key=True)
        settle(bpy)
    seen = {}
    for frame in list(range(1, 26)) + list(range(25, 0, -1)):
        scene.frame_set(frame)
        expected = joint_3_link if 10 <= frame < 20 else robot.tool_point
        assert solver.solving_to == expected, (frame, solver.solving_to)
        seen.setdefault(solver.solving_to, set()).add(frame)
    assert set(seen) == {robot.tool_point, joint_3_link}  # no frame solved a link never asked for
    assert seen[joint_3_link] == set(range(10, 20))


def test_switching_the_target_bone_snaps_the_control_so_nothing_jumps(blender):
    from kinema_nodes.blender.edit import switch_target_link

    bpy = blender
    rig = import_rig(bpy, "arm6")
    set_joints(rig, ARM6_START)
    settle(bpy)
    _tree, target, solver = _add_target(bpy, rig)
    before = joints_of(rig)
    switch_target_link(bpy.context, rig, target, "wrist_2_link", key=False)
    settle(bpy)
    assert solver.solving_to == "wrist_2_link"
    assert np.abs(joints_of(rig) - before).max() < 1e-6
    assert _reaches(rig, target, "wrist_2_link")


def test_link_switch_node_picks_the_link_by_frame_range_and_by_a_driven_value(blender):
    bpy = blender
    rig = import_rig(bpy, "arm6")
    set_joints(rig, ARM6_START)
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    switch = tree.nodes.new("KinemaLinkSwitchNode")
    switch.add_range(1, "tool_tcp")
    switch.add_range(5, "wrist_1_link")
    tree.links.new(switch.outputs["Link"], target.inputs["Link"])
    scene = bpy.context.scene
    for frame in range(1, 9):
        scene.frame_set(frame)
        assert solver.solving_to == ("wrist_1_link" if frame >= 5 else "tool_tcp"), frame
    switch.mode = "VALUE"
    switch.value = 0.0
    scene.frame_set(8)
    settle(bpy)
    assert solver.solving_to == "tool_tcp"
    switch.value = 7.0
    settle(bpy)
    assert solver.solving_to == "wrist_1_link"


def test_link_switch_by_value_in_core(robots):
    robot = robots("arm6")
    spec = GraphSpec(
        (NodeSpec.make("Robot", "robot", rig="arm"), NodeSpec.make("Target", "ik_target", control="c", control_exists=True),
         NodeSpec.make("Solver", "solver", backend="numpy"),
         NodeSpec.make("Switch", "link_switch", mode="value", value=2.5, ranges=((0.0, "tool_tcp"), (2.0, "wrist_2_link")))),
        (LinkSpec("Robot", "Robot", "Target", "Robot"), LinkSpec("Target", "Target", "Solver", "Targets"),
         LinkSpec("Switch", "Link", "Target", "Link")),
    )
    program = compile_program(spec, {"arm": robot})
    assert program.ok
    q = np.array(ARM6_START)
    (result,) = program.run(FrameInputs(100, {"Target": link_pose(robot, q, "wrist_2_link")}, {"arm": q}))
    assert result.solved_links == ("wrist_2_link",) and result.converged


def test_rail_is_held_by_hand_and_the_arm_reaches_from_where_it_is(blender):
    from kinema_nodes.blender.rig import set_joint_value

    bpy = blender
    rig = import_rig(bpy, "rail_arm6")
    robot = robot_of(rig)
    set_joints(rig, [0.5, *ARM6_START])
    settle(bpy)
    _tree, target, solver = _add_target(bpy, rig)
    rail = robot.joint_index("rail_joint")
    # drag the rail: the arm's base moves and the arm reaches back to the unchanged control
    set_joint_value(rig, robot, "rail_joint", 0.7)
    by_hand = joints_of(rig)[rail]  # as the rig stores it (float32)
    assert abs(by_hand - 0.7) < 1e-6
    settle(bpy)
    assert joints_of(rig)[rail] == by_hand
    assert solver.summary.startswith("converged"), solver.summary
    assert _reaches(rig, target, robot.tool_point)
    # move the control: the solver never touches the rail
    rig.pose.bones[target.control_bone].location = (0.03, -0.02, 0.04)
    settle(bpy)
    assert joints_of(rig)[rail] == by_hand
    assert _reaches(rig, target, robot.tool_point)


def test_aiming_at_the_flange_takes_the_finger_out_of_the_chain(blender):
    bpy = blender
    rig = import_rig(bpy, "arm7")
    robot = robot_of(rig)
    assert "finger_joint" in robot.chain_joint_names("fingertip_tcp")  # the file's tcp is on a finger...
    assert robot.tool_point == "flange"  # ...so the default tool point is the flange (#12)
    assert "finger_joint" not in robot.chain_joint_names("flange")
    set_joints(rig, [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.025])
    settle(bpy)
    _tree, target, solver = _add_target(bpy, rig, "flange")
    solver.hold_prismatic = False  # even with slides free, the finger is not in the flange's chain
    rig.pose.bones[target.control_bone].location = (0.04, 0.03, -0.02)
    settle(bpy)
    finger = robot.joint_index("finger_joint")
    assert solver.solving_to == "flange" and solver.summary.startswith("converged"), solver.summary
    assert abs(joints_of(rig)[finger] - 0.025) < 1e-7
    assert _reaches(rig, target, "flange")


def test_panel_operators_run_through_bpy_ops(blender):
    """The buttons of the Configuration, Elbow Swivel and Hand-off sections, as Blender calls them."""
    from kinema_nodes.blender.edit import configuration_node, swivel_nodes

    bpy = blender
    rig = import_rig(bpy, "arm7")
    set_joints(rig, [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig, "flange")
    settle(bpy)
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    count = configuration_node(tree, solver).solutions_found
    assert count >= 2
    before = joints_of(rig)
    assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    settle(bpy)
    assert np.abs(joints_of(rig) - before).max() > 1e-3
    assert bpy.ops.kinema.add_elbow_swivel() == {"FINISHED"}
    assert len(swivel_nodes(tree)) == 1
    assert bpy.ops.kinema.switch_target_bone(target=target.name, link="link7") == {"FINISHED"}
    settle(bpy)
    assert solver.solving_to == "link7" and target.link_name == "link7"
    assert _reaches(rig, target, "link7")


def test_elbow_swivel_refuses_an_arm_without_a_spare_joint(blender):
    from kinema_nodes.blender.edit import add_elbow_swivel

    bpy = blender
    rig = import_rig(bpy, "arm6")
    set_joints(rig, ARM6_START)
    settle(bpy)
    _add_target(bpy, rig)
    with pytest.raises(ValueError, match="no spare joint"):
        add_elbow_swivel(bpy.context, rig)
    with pytest.raises(RuntimeError, match="no spare joint"):  # the operator reports it as an error
        bpy.ops.kinema.add_elbow_swivel()
