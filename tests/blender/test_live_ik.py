"""Live IK in real Blender: the evaluator, the IK panel's operations, persistence.

Tolerances: the tool reaches the control within 1e-5 m and 1e-5 rad (pose bones store
float32, ~1e-7 m at arm's length); "unchanged" means 1e-9.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import rotation_angle_between
from rig_helpers import import_rig, joints_of, robot_of, set_joints, settle

README = Path(__file__).resolve().parents[2] / "README.md"


def _add_target(bpy, rig, link=None, backend="NUMPY"):
    from kinema_nodes.blender.edit import add_ik_target

    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, link, backend=backend)
    # A loaded 2-core test machine must not trip the live-update budget (tested on its own below).
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    return tree, target, solver


def _bone_matrix(rig, name):
    return np.array(rig.pose.bones[name].matrix, dtype=float)


def _assert_reaches(rig, target, tolerance=1e-5):
    control = _bone_matrix(rig, target.control_bone)
    tool = _bone_matrix(rig, target.link_name)
    assert np.abs(tool[:3, 3] - control[:3, 3]).max() < tolerance
    assert rotation_angle_between(tool, control) < tolerance


ARM7_START = [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0]


def _keyframe_control_along(bpy, rig, target, configurations, frames):
    """Key the control at the FK poses of `configurations` (so every key is reachable)."""
    from mathutils import Matrix

    robot = robot_of(rig)
    bone = rig.pose.bones[target.control_bone]
    for q, frame in zip(configurations, frames):
        bone.matrix = Matrix(link_pose(robot, np.asarray(q), target.link_name).tolist())
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)


@pytest.mark.parametrize("backend", ["NUMPY", "PYROKI"])
def test_tool_follows_a_keyframed_control_on_every_frame_of_a_scrub(blender, backend):
    bpy = blender
    rig = import_rig(bpy, "arm7")
    set_joints(rig, ARM7_START)
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig, "flange", backend)
    start = np.array(ARM7_START)
    end = start + np.array([0.4, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5, 0.0])
    _keyframe_control_along(bpy, rig, target, [start, end], [1, 24])
    for frame in list(range(1, 25)) + list(range(24, 0, -3)):
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary, solver.backend_note)
        _assert_reaches(rig, target)
    assert solver.summary.startswith("converged") and solver.solving_to == "flange"
    assert solver.kinema_error == "" and target.kinema_error == ""


def test_adding_a_target_leaves_the_pose_unchanged(blender):
    bpy = blender
    rig = import_rig(bpy, "arm7")
    set_joints(rig, ARM7_START)
    settle(bpy)
    before = joints_of(rig)
    tree, target, solver = _add_target(bpy, rig)
    settle(bpy)
    assert np.abs(joints_of(rig) - before).max() <= 1e-9
    assert rig.data.collections_all["IK"].is_visible
    assert target.control_bone in [b.name for b in rig.data.collections_all["IK"].bones]
    assert rig.data.bones[target.control_bone].parent.name == robot_of(rig).root_link
    _assert_reaches(rig, target)


def test_two_rigs_with_two_trees_do_not_disturb_each_other(blender):
    bpy = blender
    first, second = import_rig(bpy, "arm6"), import_rig(bpy, "arm6")
    assert first.name != second.name
    for rig in (first, second):
        set_joints(rig, [0.2, -1.2, 1.2, -0.5, 0.5, 0.0])
    settle(bpy)
    tree_a, target_a, _ = _add_target(bpy, first)
    tree_b, target_b, _ = _add_target(bpy, second)
    assert tree_a != tree_b
    settle(bpy)
    second_before = joints_of(second)
    first.pose.bones[target_a.control_bone].location = (0.05, -0.03, 0.02)
    settle(bpy)
    assert np.abs(joints_of(second) - second_before).max() <= 1e-9
    assert np.abs(joints_of(first) - second_before).max() > 1e-3
    _assert_reaches(first, target_a)


def test_a_tiny_budget_pauses_live_updates_until_resumed(blender):
    bpy = blender
    rig = import_rig(bpy, "arm6")
    set_joints(rig, [0.2, -1.2, 1.2, -0.5, 0.5, 0.0])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    solver.use_own_budget = True
    solver.budget_ms = 0.001
    bone = rig.pose.bones[target.control_bone]
    from kinema_nodes.core.solve import kernel_status, wait_for_pyroki
    from kinema_nodes.evaluator import SLOW_FRAMES_TO_PAUSE

    # frames answered while a solver compiles in the background are not counted: both built first
    wait_for_pyroki()
    kernel_status(wait=True)
    bone.location = (0.02, 0, 0)  # the first solve to a link pays its compile and is not counted
    settle(bpy)
    for step in range(SLOW_FRAMES_TO_PAUSE):  # one slow frame is not a slow rig; several in a row are (#29)
        assert not solver.over_budget
        bone.location = (0.03 + 0.005 * step, 0, 0)
        settle(bpy)
    assert solver.over_budget
    paused_at = joints_of(rig)
    bone.location = (0.06, 0, 0)
    settle(bpy)
    assert np.array_equal(joints_of(rig), paused_at)  # paused: the rig does not follow
    from kinema_nodes.nodes.solver import draw_readout  # the panel's red line
    assert "Over budget; live updates paused" in Path(draw_readout.__code__.co_filename).read_text()
    solver.use_own_budget = False
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.resume_live() == {"FINISHED"}
    settle(bpy)
    assert not solver.over_budget
    _assert_reaches(rig, target)


def test_every_invalid_graph_shows_its_error_on_the_node_and_raises_nothing(blender):
    bpy = blender
    from kinema_nodes import evaluator

    rig = import_rig(bpy, "arm6")
    tree, target, solver = _add_target(bpy, rig)
    settle(bpy)

    lonely = bpy.data.node_groups.new("No robot", "KinemaNodeTree")
    robot_node = lonely.nodes.new("KinemaRobotNode")
    evaluator.run_all(bpy.context.scene)
    assert "no robot" in robot_node.kinema_error

    second_target = tree.nodes.new("KinemaIKTargetNode")
    second_target.control_object = rig
    second_target.control_bone = target.control_bone
    second_solver = tree.nodes.new("KinemaSolverNode")
    tree.links.new(tree.nodes["Robot"].outputs["Robot"], second_target.inputs["Robot"])
    tree.links.new(second_target.outputs["Target"], second_solver.inputs["Targets"])
    evaluator.run_all(bpy.context.scene)
    assert "all write robot" in solver.kinema_error and "all write robot" in second_solver.kinema_error
    tree.nodes.remove(second_solver)
    tree.nodes.remove(second_target)

    swivel, config = tree.nodes.new("KinemaSwivelNode"), tree.nodes.new("KinemaConfigurationNode")
    tree.links.new(solver.outputs["Solution"], swivel.inputs["Solution"])
    tree.links.new(swivel.outputs["Solution"], config.inputs["Solution"])
    tree.links.new(config.outputs["Solution"], swivel.inputs["Solution"])
    evaluator.run_all(bpy.context.scene)
    assert "cycle" in swivel.kinema_error or "cycle" in config.kinema_error
    tree.nodes.remove(swivel)
    tree.nodes.remove(config)

    empty = bpy.data.objects.new("Goal", None)
    bpy.context.scene.collection.objects.link(empty)
    target.control_object, target.control_bone = empty, ""
    evaluator.run_all(bpy.context.scene)
    assert target.kinema_error == ""
    bpy.data.objects.remove(empty)
    settle(bpy)
    assert "control 'Goal' no longer exists" in target.kinema_error
    assert np.all(np.isfinite(joints_of(rig)))


def test_save_and_reload_give_the_same_joint_values_on_every_frame(blender, tmp_path):
    bpy = blender
    rig = import_rig(bpy, "arm7")
    set_joints(rig, ARM7_START)
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig, "flange")
    start = np.array(ARM7_START)
    _keyframe_control_along(bpy, rig, target, [start, start + 0.3, start - 0.2], [1, 10, 20])
    frames = range(1, 21)

    def scrub(rig):
        values = []
        for frame in frames:
            bpy.context.scene.frame_set(frame)
            values.append(joints_of(rig))
        return np.array(values)

    scrub(rig)
    # A redundant arm's live solution depends on where the arm was (warm start), so both scrubs
    # start from the state that is saved: save, scrub, reload, scrub again.
    rig_name, tree_name = rig.name, tree.name
    path = tmp_path / "reach.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    before = scrub(rig)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    rig = bpy.data.objects[rig_name]
    assert rig.kinema_tree is not None and rig.kinema_tree.name == tree_name
    after = scrub(rig)
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_readme_scripting_example_runs(blender):
    text = README.read_text()
    example = re.search(r"<!-- scripting-example -->\s*```python\n(.*?)```", text, re.S)
    assert example, "README has no scripting example"
    namespace: dict = {}
    exec(compile(example.group(1), "README scripting example", "exec"), namespace)
    solver = namespace["solver"]
    assert solver.summary.startswith("converged"), solver.summary


def test_one_solver_with_two_targets_reaches_both_hands_of_a_humanoid(blender):
    """Talos: both grippers aimed at their own controls, solved jointly (torso shared)."""
    bpy = blender
    rig = import_rig(bpy, "talos")
    robot = robot_of(rig)
    q = robot.mid_configuration()
    for side, sign in (("left", 1), ("right", -1)):
        q[robot.joint_index(f"arm_{side}_2_joint")] = 0.3 * sign
        q[robot.joint_index(f"arm_{side}_4_joint")] = -1.2
    set_joints(rig, q)
    settle(bpy)
    tree, left, solver = _add_target(bpy, rig, "gripper_left_base_link")
    _, right, _ = _add_target(bpy, rig, "gripper_right_base_link")
    assert len(solver.inputs["Targets"].links) == 2
    rig.pose.bones[left.control_bone].location = (0.03, 0.02, -0.02)
    rig.pose.bones[right.control_bone].location = (-0.02, 0.03, 0.02)
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    assert solver.solving_to == "gripper_left_base_link, gripper_right_base_link"
    _assert_reaches(rig, left)
    _assert_reaches(rig, right)
    legs = [robot.joint_index(n) for n in robot.actuated_joint_names if n.startswith("leg_")]
    assert np.abs(joints_of(rig)[legs] - q[legs]).max() <= 1e-6  # not in either chain: untouched


def test_the_live_solve_through_prepare_gives_the_core_solve_answer_with_the_frames_posture(blender):
    """The evaluator's every-frame solve (`core.solve.prepare`, checks once per Program, the
    posture slide inside the kernel call) against `core.solve.solve` on the same frame inputs,
    along a keyed scrub of a redundant 7-axis arm (xArm7): the same joints within 1e-9, and the
    posture really moves the spare joint (the answer without it differs)."""
    from dataclasses import replace

    from kinema_nodes import evaluator
    from kinema_nodes.core.solve import solve

    bpy = blender
    rig = import_rig(bpy, "xarm7")
    robot = robot_of(rig)
    start = robot.mid_configuration()
    start[robot.joint_index("joint4")] = 1.2
    set_joints(rig, start)
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig, "link_eef")
    end = np.clip(start + np.array([0.3, -0.2, 0.25, -0.3, 0.2, 0.3, -0.2]), robot.lower, robot.upper)
    _keyframe_control_along(bpy, rig, target, [start, end], [1, 12])
    solver.live = False
    program = evaluator.program_for(tree)
    step = program.steps[0]
    unsettled = 0.0
    for frame in range(1, 13):
        bpy.context.scene.frame_set(frame)
        inputs = evaluator.frame_inputs(tree, program, step, frame)
        assert inputs.values[step.node]["posture"] is not None
        core = program.run_step(step, inputs)
        live = program.run_step(step, inputs, evaluator.live_solve)
        assert core.converged and live.converged, (frame, core.summary, live.summary)
        np.testing.assert_allclose(live.joints, core.joints, rtol=0, atol=1e-9)
        free = solve(robot, [_goal(inputs, step)], inputs.starts[step.rig], replace(_options(step, robot), posture=None))
        unsettled = max(unsettled, float(np.abs(free.joints - core.joints).max()))
        set_joints(rig, live.joints)
    assert unsettled > 1e-4, unsettled


def _goal(inputs, step):
    from kinema_nodes.core.graph.program import pose_to_target
    from kinema_nodes.core.solve import IKTarget

    position, wxyz = pose_to_target(inputs.controls[step.targets[0].node])
    return IKTarget(step.targets[0].link, tuple(position), tuple(wxyz))


def _options(step, robot):
    from dataclasses import replace

    held = frozenset(step.options.held_joints) | robot.held_joints(step.hold_prismatic)
    return replace(step.options, backend=step.backend, held_joints=held)


def test_a_live_frame_on_the_lean_path_gives_the_answer_of_run_step(blender):
    """The evaluator's lean frame (a plain step: targets straight into a Solver) against
    `Program.run_step` on the same rig state, along a keyed scrub of a UR3 (not used elsewhere):
    the same joints within 1e-9 and the same readout, and the lean path is the one that ran."""
    from kinema_nodes import evaluator

    bpy = blender
    rig = import_rig(bpy, "ur3")
    robot = robot_of(rig)
    start = np.clip(np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4]), robot.lower, robot.upper)
    set_joints(rig, start)
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    end = np.clip(start + np.array([0.35, -0.25, 0.3, 0.2, -0.3, 0.25]), robot.lower, robot.upper)
    _keyframe_control_along(bpy, rig, target, [start, end], [1, 10])
    solver.live = False  # the frames below are solved by hand, both ways, from the same rig state
    for frame in range(1, 11):
        bpy.context.scene.frame_set(frame)
        program = evaluator.program_for(tree)
        step = program.steps[0]
        general = program.run_step(step, evaluator.frame_inputs(tree, program, step, frame), evaluator.live_solve)
        (lean,) = evaluator.run_tree(tree, frame, force=True)
        assert evaluator.fast_frame(tree, step.node) is not None
        assert general.converged and lean.converged, (frame, general.summary, lean.summary)
        np.testing.assert_allclose(lean.joints, general.joints, rtol=0, atol=1e-9)
        assert lean.summary == general.summary and lean.solved_links == general.solved_links
        bpy.context.view_layer.update()  # evaluate the write (Live IK is off: no handler solves)
        _assert_reaches(rig, target)


def test_edits_made_by_a_script_between_frames_are_seen_while_the_snapshot_is_skipped(blender):
    """Scrubbing with nothing changed skips the tree snapshot; an edit a script makes between two
    frame_set calls (no depsgraph update in between) still reaches the next frame: a setting
    (its callback marks the tree), a renamed rig, a keyed setting on the tree, a rig removed."""
    from kinema_nodes import evaluator

    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    robot = robot_of(rig)
    q = joints_of(rig)
    _keyframe_control_along(bpy, rig, target, [q, q + 0.2 * np.sign(robot.upper - q)], [1, 20])
    for frame in range(1, 5):
        bpy.context.scene.frame_set(frame)
    from kinema_nodes.session import SESSION

    assert SESSION.trees[tree.as_pointer()].checked[1], "a plain, unanimated tree may skip its snapshot"
    program = evaluator.compiled_program(tree)
    bpy.context.scene.frame_set(5)
    assert evaluator.compiled_program(tree) is program  # nothing changed: the same compiled Program

    solver.position_tolerance = 2e-5
    bpy.context.scene.frame_set(6)
    assert evaluator.compiled_program(tree).steps[0].options.position_tolerance == pytest.approx(2e-5)

    rig.name = "Renamed Arm"
    bpy.context.scene.frame_set(7)
    assert evaluator.compiled_program(tree).steps[0].rig == "Renamed Arm"
    assert solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target)

    target.position_weight = 0.5
    target.keyframe_insert("position_weight", frame=8)
    target.position_weight = 1.0
    target.keyframe_insert("position_weight", frame=10)
    for frame, weight in ((8, 0.5), (10, 1.0)):
        bpy.context.scene.frame_set(frame)
        assert evaluator.compiled_program(tree).steps[0].targets[0].position_weight == pytest.approx(weight)

    tree.animation_data_clear()
    bpy.context.scene.frame_set(11)
    bpy.context.scene.frame_set(12)
    bpy.data.objects.remove(rig)
    assert evaluator.run_tree(tree, 13) == []  # the rig is gone: nothing to solve, and no error


def test_an_edit_elsewhere_does_not_solve_the_rig_again(blender):
    """Every depsgraph update (an edit anywhere: here another object moved) tells the evaluator
    something may have changed. On the lean path, a frame whose inputs are those of the last one
    answers from the last solve: it must not solve and write the rig again (each write is a
    depsgraph pass of the rig too). Counted: rig writes over an unrelated edit and five idle
    updates after the first solve settled, and the lean path is the one that ran. Must be 0."""
    from kinema_nodes import evaluator
    from kinema_nodes.blender import rig as rig_module

    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    for _ in range(3):
        settle(bpy)
    assert evaluator.fast_frame(tree, solver.name) is not None, "the lean path ran"
    writes = []
    original, original_live = rig_module.write_joint_values, rig_module.LiveRig.write

    def counting_write(*args, **kwargs):
        writes.append(1)
        return original(*args, **kwargs)

    def counting_live_write(*args, **kwargs):
        writes.append(1)
        return original_live(*args, **kwargs)

    other = bpy.data.objects.new("Something Else", None)
    bpy.context.scene.collection.objects.link(other)
    rig_module.write_joint_values, rig_module.LiveRig.write = counting_write, counting_live_write
    try:
        other.location.x += 0.1
        for _ in range(6):
            bpy.context.view_layer.update()
    finally:
        rig_module.write_joint_values, rig_module.LiveRig.write = original, original_live
        bpy.data.objects.remove(other)
    assert len(writes) == 0, len(writes)
    assert solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target)


def test_a_link_the_solver_refuses_is_said_on_the_lean_path_too(blender):
    """Target Bone set to the root (a link no joint moves): the Solver says why, as the general
    path does, and run_tree raises nothing (it used to raise the refusal on every frame)."""
    from kinema_nodes import evaluator

    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    robot = robot_of(rig)
    target.link_index = 1  # robot.links[0]: the root
    (result,) = evaluator.run_tree(tree, 1, force=True)
    assert evaluator.fast_frame(tree, solver.name) is not None, "the lean path ran"
    assert result.joints is None and result.summary.startswith(f"cannot solve: link '{robot.links[0]}'"), result.summary


def test_a_target_bone_keyed_by_a_script_between_frames_is_read_from_its_keys(blender):
    """Keys put on the tree between two frame_set calls (no depsgraph update in between): the
    lean path reads the Target Bone from its keys on the next frame, as link_at_frame does. The
    tree is not the rig's kinema_tree here, so nothing else evaluates its animation."""
    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    robot = robot_of(rig)
    for frame in (1, 2, 3):
        bpy.context.scene.frame_set(frame)
    rig.kinema_tree = None
    other = robot.links.index("ee_link") + 1
    target.link_index = 0
    target.keyframe_insert("link_index", frame=1)
    target.link_index = other
    target.keyframe_insert("link_index", frame=10)
    target.link_index = 0
    bpy.context.scene.frame_set(12)
    assert target.link_at_frame(robot) == "ee_link"
    assert solver.solving_to == "ee_link", solver.solving_to


def test_a_rig_that_lost_a_bone_does_not_stop_the_other_trees(blender):
    """A joint bone deleted on one rig: its Solver says why, and the other rig's tree still solves
    in the same run (one refusing rig used to end the run of every tree after it). (A renamed
    bone is followed: tests/blender/test_rig_copies.py.)"""
    from kinema_nodes import evaluator

    bpy = blender
    first, second = import_rig(bpy, "arm6"), import_rig(bpy, "arm6")
    for rig in (first, second):
        set_joints(rig, [0.2, -1.2, 1.2, -0.5, 0.5, 0.0])
    settle(bpy)
    tree_a, target_a, solver_a = _add_target(bpy, first)
    tree_b, target_b, solver_b = _add_target(bpy, second)
    settle(bpy)
    from kinema_nodes.blender.rig import joint_channel

    robot = robot_of(first)
    from kinema_nodes.blender.edit import remove_edit_bones

    remove_edit_bones(bpy.context, first, [joint_channel(robot, robot.actuated_joint_names[2])[0]])
    second.pose.bones[target_b.control_bone].location = (0.05, -0.03, 0.02)
    evaluator.run_all(bpy.context.scene, force=True)
    bpy.context.view_layer.update()
    assert solver_a.summary.startswith("cannot solve") and "renamed" not in solver_a.summary, solver_a.summary
    _assert_reaches(second, target_b)


def test_a_joint_moved_by_a_script_between_frames_is_solved_again_on_the_lean_path(blender):
    """A script turns a joint of the solved rig and sets the same frame again (no depsgraph
    update in between, the control where it was). The lean frame reads the rig each frame: its
    inputs differ from the last frame's, so it solves again and the tool is back on the control
    (a frame that trusted the rig to still hold its last write would leave the arm where the
    script put it, 0.4 rad off). Tolerances as the module's; the joints back on the last answer
    within 1e-3 rad (the same branch, reached from another start)."""
    from kinema_nodes import evaluator
    from kinema_nodes.blender.rig import joint_channel

    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    robot = robot_of(rig)
    _keyframe_control_along(bpy, rig, target, [[0.3, -1.2, 1.4, -1.6, -1.5, 0.4], [0.5, -1.0, 1.2, -1.5, -1.4, 0.6]], [1, 20])
    for frame in range(1, 11):
        bpy.context.scene.frame_set(frame)
    assert evaluator.fast_frame(tree, solver.name) is not None, "the lean path ran"
    _assert_reaches(rig, target)
    solved = joints_of(rig)
    bone, path, index, scale = joint_channel(robot, robot.actuated_joint_names[1])
    getattr(rig.pose.bones[bone], path)[index] += 0.4 * scale
    assert abs(joints_of(rig)[1] - solved[1] - 0.4) < 1e-6, "the script moved the joint"
    bpy.context.scene.frame_set(10)
    _assert_reaches(rig, target)
    # the same branch again: solved from another start, the joints agree to the solver's tolerance, not to 1e-9
    assert np.abs(joints_of(rig) - solved).max() < 1e-3
    assert solver.summary.startswith("converged"), solver.summary


def test_a_solver_set_to_off_leaves_the_rig_to_its_keys_and_reads_nothing_per_frame(blender):
    """Solver Off: the rig plays its own keys, untouched by the solve, and the readout says Off
    with the frame it was shown on. Scrubbing then reads no control and no rig (the general path
    made the same Off result from every control and the rig each frame): counted reads of the
    frame's inputs over ten frames after the first Off frame, must be 0; a change of the solver
    brings the solve back at once (tool on the control within the module's 1e-5)."""
    from kinema_nodes import evaluator

    bpy = blender
    rig = import_rig(bpy, "ur3")
    set_joints(rig, [0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    settle(bpy)
    tree, target, solver = _add_target(bpy, rig)
    _keyframe_control_along(bpy, rig, target, [[0.3, -1.2, 1.4, -1.6, -1.5, 0.4], [0.5, -1.0, 1.2, -1.5, -1.4, 0.6]], [1, 20])
    robot = robot_of(rig)
    keyed = [[0.0, -1.0, 1.0, -1.0, -1.0, 0.0], [0.4, -0.8, 0.6, -1.2, -1.3, 0.5]]
    from kinema_nodes.blender.rig import key_joint_values

    bpy.context.scene.frame_set(1)
    solver.backend = "OFF"
    for q, frame in zip(keyed, (1, 20)):
        set_joints(rig, q)
        key_joint_values(rig, robot, frame)
    bpy.context.scene.frame_set(1)
    settle(bpy)
    reads = []
    original = evaluator.frame_inputs

    def counting(*args, **kwargs):
        reads.append(1)
        return original(*args, **kwargs)

    evaluator.frame_inputs = counting
    try:
        for frame in range(2, 12):
            bpy.context.scene.frame_set(frame)
            # the rig plays its own keys (interpolated between the two keyed poses), not a solve
            played = joints_of(rig)
            assert np.abs(played - keyed[0]).max() > 1e-4 and np.abs(played - keyed[1]).max() > 1e-4
    finally:
        evaluator.frame_inputs = original
    assert len(reads) == 0, len(reads)
    assert solver.summary.startswith("solver off"), solver.summary
    assert evaluator.readout(solver)["frame"] == 11
    q_keys = joints_of(rig)
    solver.backend = "NUMPY"
    settle(bpy)
    assert np.abs(joints_of(rig) - q_keys).max() > 1e-3, "the solve is back"
    _assert_reaches(rig, target)


def test_the_live_write_sets_every_channel_that_changed_and_leaves_the_rest(blender):
    """`LiveRig.write` skips a channel path whose joints did not change (the Panda's finger slides
    while the arm moves), and still writes it when only they change, or both: the rig then shows q
    (as float32) whichever changed."""
    from kinema_nodes.blender.rig import live_rig

    bpy = blender
    rig = import_rig(bpy, "panda")
    robot = robot_of(rig)
    slide = robot.is_prismatic
    assert slide.any() and (~slide).any()
    q = np.clip(np.array(joints_of(rig)), robot.lower, robot.upper)
    for moved in (~slide, slide, np.ones_like(slide)):
        io = live_rig(rig, robot, rig.pose.bones)
        io.read(rig.pose.bones)
        q = np.clip(q + np.where(moved, 0.01, 0.0), robot.lower, robot.upper)
        io.write(rig, rig.pose.bones, q)
        np.testing.assert_array_equal(np.float32(joints_of(rig)), np.float32(q))
