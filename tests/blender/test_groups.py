"""Node groups in Kinema trees, in real Blender with real robots (NumPy solver): making a group,
using it twice and editing it once, nesting, errors inside a group, save and reload, saving a
group as a preset (and as an asset).

Tolerances as in test_live_ik: a link reaches its control within 1e-5 m / 1e-5 rad.
"""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import rotation_angle_between
from rig_helpers import import_rig, pose_and_update, robot_of, settle

ARM6 = [0.3, -1.2, 1.4, -0.8, 1.2, 0.3]


def _matrix(array):
    from mathutils import Matrix

    return Matrix(np.asarray(array, dtype=float).tolist())


def _link_in_world(rig, link):
    return np.array(rig.matrix_world, dtype=float) @ np.array(rig.pose.bones[link].matrix, dtype=float)


def _assert_at(rig, link, goal_world, tolerance=1e-5):
    pose = _link_in_world(rig, link)
    assert np.abs(pose[:3, 3] - goal_world[:3, 3]).max() < tolerance, (rig.name, link, pose[:3, 3], goal_world[:3, 3])
    assert rotation_angle_between(pose, goal_world) < tolerance


def _solver(tree, rig, backend="NUMPY"):
    solver = tree.nodes.new("KinemaSolverNode")
    solver.backend = backend
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    return solver


def _two_arms_sharing_one_group(bpy):
    """Two arm6 rigs in one tree (both at the origin); each aims through a Group node using the
    same group, whose IK Target follows one empty."""
    from kinema_nodes.blender.groups import add_group_node, group_nodes

    first, second = import_rig(bpy, "arm6", active=True), import_rig(bpy, "arm6", active=True)
    for rig in (first, second):
        pose_and_update(bpy, rig, ARM6)
    goal = bpy.data.objects.new("Goal", None)
    bpy.context.scene.collection.objects.link(goal)
    tree = bpy.data.node_groups.new("Two arms", "KinemaNodeTree")
    tree.use_fake_user = True
    robots, solvers = [], []
    for rig in (first, second):
        robot = tree.nodes.new("KinemaRobotNode")
        robot.rig = rig
        robots.append(robot)
        solvers.append(_solver(tree, rig))
    target = tree.nodes.new("KinemaIKTargetNode")
    target.control_object = goal
    tree.links.new(robots[0].outputs["Robot"], target.inputs["Robot"])
    tree.links.new(target.outputs["Target"], solvers[0].inputs["Targets"])
    group_a = group_nodes(tree, [target], name="Aim")
    group_b = add_group_node(tree, group_a.node_tree)
    tree.links.new(robots[1].outputs["Robot"], group_b.inputs["Robot"])
    tree.links.new(group_b.outputs["Target"], solvers[1].inputs["Targets"])
    return tree, (first, second), (group_a, group_b), solvers, goal


def _goal_for(bpy, goal, rig, link, q):
    """Put the goal object at `link`'s pose of `rig` for configuration q (world)."""
    goal.matrix_world = rig.matrix_world @ _matrix(link_pose(robot_of(rig), np.asarray(q, dtype=float), link))
    bpy.context.view_layer.update()


def test_making_a_group_keeps_the_graph_and_its_behaviour(blender):
    from kinema_nodes import evaluator
    from kinema_nodes.blender.groups import group_nodes
    from kinema_nodes.blender.edit import add_ik_target

    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    pose_and_update(bpy, rig, ARM6)
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    before = evaluator.snapshot(tree)
    group = group_nodes(tree, [target, solver], name="Reach")
    assert [s.name for s in group.inputs] == ["Robot"] and [s.name for s in group.outputs] == []
    assert {n.bl_idname for n in group.node_tree.nodes} == {"KinemaIKTargetNode", "KinemaSolverNode", "NodeGroupInput", "NodeGroupOutput"}
    after = evaluator.snapshot(tree)
    prefix = f"{group.name}/"
    assert sorted(n.name for n in after.nodes) == sorted(n.name if n.kind == "robot" else prefix + n.name for n in before.nodes)
    assert len(after.links) == len(before.links)
    inner_target = group.node_tree.nodes["IK Target"]
    bone = rig.pose.bones[inner_target.control_bone]
    bone.location = (0.04, -0.03, 0.02)
    settle(bpy)
    inner_solver = group.node_tree.nodes["Solver"]
    assert inner_solver.summary.startswith("converged"), inner_solver.summary
    _assert_at(rig, "tool_tcp", _link_in_world(rig, inner_target.control_bone))


def test_a_group_used_twice_and_edited_once_changes_both(blender):
    bpy = blender
    _, rigs, groups, solvers, goal = _two_arms_sharing_one_group(bpy)
    q = np.array(ARM6) + 0.1
    _goal_for(bpy, goal, rigs[0], "tool_tcp", q)
    settle(bpy)
    for rig, solver in zip(rigs, solvers):
        assert solver.summary.startswith("converged"), solver.summary
        assert solver.solving_to == "tool_tcp"
        _assert_at(rig, "tool_tcp", np.array(goal.matrix_world))

    groups[0].node_tree.nodes["IK Target"].link_name = "wrist_3_link"  # one edit, inside the group
    _goal_for(bpy, goal, rigs[0], "wrist_3_link", q - 0.05)
    settle(bpy)
    for rig, solver in zip(rigs, solvers):  # both users changed
        assert solver.summary.startswith("converged"), solver.summary
        assert solver.solving_to == "wrist_3_link"
        _assert_at(rig, "wrist_3_link", np.array(goal.matrix_world))


def test_groups_nest_and_flatten_to_one_graph(blender):
    from kinema_nodes import evaluator
    from kinema_nodes.blender.groups import group_nodes

    bpy = blender
    tree, rigs, groups, solvers, goal = _two_arms_sharing_one_group(bpy)
    inner_name = groups[0].name
    outer = group_nodes(tree, [groups[0], solvers[0]], name="Aim and solve")
    spec = evaluator.snapshot(tree)
    names = {n.name for n in spec.nodes}
    assert f"{outer.name}/{inner_name}/IK Target" in names and f"{outer.name}/Solver" in names
    _goal_for(bpy, goal, rigs[0], "tool_tcp", np.array(ARM6) - 0.1)
    settle(bpy)
    inner_solver = outer.node_tree.nodes["Solver"]
    assert inner_solver.summary.startswith("converged"), inner_solver.summary
    _assert_at(rigs[0], "tool_tcp", np.array(goal.matrix_world))


def test_an_error_inside_a_group_shows_on_the_group_node_and_nothing_raises(blender):
    from kinema_nodes import evaluator

    bpy = blender
    tree, _, groups, _, goal = _two_arms_sharing_one_group(bpy)
    bpy.data.objects.remove(goal)
    settle(bpy)
    for group in groups:
        assert "IK Target: control 'Goal' no longer exists" in group.kinema_error
    assert evaluator.run_tree(tree, force=True) == []  # the graph does not run, and says why
    groups[1].node_tree = None
    groups[1].node_tree = tree  # a group that contains itself is refused, not followed
    evaluator.mark_dirty(tree)
    evaluator.run_tree(tree, force=True)
    assert groups[1].node_tree is None or "contains itself" in groups[1].kinema_error
    assert "no group" in groups[1].kinema_error or "contains itself" in groups[1].kinema_error


def test_a_group_tree_never_runs_on_its_own(blender):
    from kinema_nodes import evaluator

    bpy = blender
    _, _, groups, _, _ = _two_arms_sharing_one_group(bpy)
    group_tree = groups[0].node_tree
    assert evaluator.snapshot(group_tree).nodes == ()
    settle(bpy)
    assert group_tree.nodes["IK Target"].kinema_error == ""


def test_groups_survive_save_and_reload(blender, tmp_path):
    from kinema_nodes import evaluator

    bpy = blender
    _, rigs, _, _, goal = _two_arms_sharing_one_group(bpy)
    _goal_for(bpy, goal, rigs[0], "tool_tcp", np.array(ARM6) + 0.08)
    settle(bpy)
    rig_names = [rig.name for rig in rigs]
    path = str(tmp_path / "groups.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    tree = bpy.data.node_groups["Two arms"]
    group_nodes = [n for n in tree.nodes if n.bl_idname == "KinemaGroupNode"]
    assert len(group_nodes) == 2 and group_nodes[0].node_tree == group_nodes[1].node_tree
    assert [s.name for s in group_nodes[1].inputs] == ["Robot"] and group_nodes[1].inputs["Robot"].links
    goal = bpy.data.objects["Goal"]
    results = evaluator.run_tree(tree, force=True)
    assert len(results) == 2 and all(r.summary.startswith("converged") for r in results)
    for rig in (bpy.data.objects[name] for name in rig_names):
        _assert_at(rig, "tool_tcp", np.array(goal.matrix_world))


def test_a_group_saved_as_a_preset_applies_to_another_robot_and_is_an_asset(blender, tmp_path, monkeypatch):
    """A group holding an IK Target (aimed at the arm6's elbow) and its Solver, saved as a
    preset: its Robot input becomes the preset's Robot node; on arm7 the elbow role is link4."""
    from kinema_nodes.blender.groups import group_nodes
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.presets import apply_preset, save_tree_as_preset

    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path))
    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    pose_and_update(bpy, rig, ARM6)
    tree, target, solver = add_ik_target(bpy.context, rig, "forearm_link", backend="NUMPY")
    group = group_nodes(tree, [target, solver], name="Aim the elbow")
    path = save_tree_as_preset(group.node_tree, rig, "Aim the elbow", mark_asset=True)
    assert group.node_tree.asset_data is not None  # shows in the Asset Browser (this file's assets)
    assert '"role": "elbow"' in path.read_text()

    arm7 = import_rig(bpy, "arm7", active=True)
    start = np.array([0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0])
    pose_and_update(bpy, arm7, start)
    applied = apply_preset(bpy.context, arm7, "Aim the elbow", backend="NUMPY")
    (target,) = [n for n in applied.nodes if n.bl_idname == "KinemaIKTargetNode"]
    (solver,) = [n for n in applied.nodes if n.bl_idname == "KinemaSolverNode"]
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    assert target.link_name == "link4" and target.control_bone in arm7.data.bones
    moved = start + np.array([0.1, -0.1, 0.1, 0.1, 0.0, 0.0, 0.0, 0.0])
    arm7.pose.bones[target.control_bone].matrix = _matrix(link_pose(robot_of(arm7), moved, "link4"))
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    _assert_at(arm7, "link4", _link_in_world(arm7, target.control_bone))


def test_a_preset_refuses_to_replace_a_tree_that_drives_other_rigs_too(blender):
    from kinema_nodes.core.presets import PresetError
    from kinema_nodes.blender.presets import apply_preset

    bpy = blender
    tree, rigs, _, _, _ = _two_arms_sharing_one_group(bpy)
    rigs[0].kinema_tree = tree
    count = len(tree.nodes)
    try:
        apply_preset(bpy.context, rigs[0], "Reach with the tool")
    except PresetError as error:
        assert f"also drives {rigs[1].name}" in str(error) and "Nothing was changed" in str(error)
    else:
        raise AssertionError("the shared tree was replaced")
    assert len(tree.nodes) == count


def test_ungrouping_restores_the_same_graph(blender):
    from kinema_nodes import evaluator
    from kinema_nodes.blender.groups import group_nodes, ungroup
    from kinema_nodes.blender.edit import add_ik_target

    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    before = evaluator.snapshot(tree)
    group = group_nodes(tree, [target, solver], name="Reach")
    restored = ungroup(tree, group)
    assert sorted(n.name for n in restored) == ["IK Target", "Solver"]
    after = evaluator.snapshot(tree)
    assert sorted(after.nodes, key=lambda n: n.name) == sorted(before.nodes, key=lambda n: n.name)
    assert set(after.links) == set(before.links)


def test_ctrl_g_makes_a_group_in_the_kinema_editor(blender):
    bpy = blender
    keymap = bpy.context.window_manager.keyconfigs.addon.keymaps["Node Editor"]
    items = [item for item in keymap.keymap_items if item.idname == "kinema.group_make"]
    assert len(items) == 1 and items[0].type == "G" and items[0].ctrl and not items[0].shift
    from kinema_nodes.tree import CATEGORIES

    assert ("KINEMA_MT_add_group", "Group", ("KinemaGroupNode",)) in CATEGORIES
