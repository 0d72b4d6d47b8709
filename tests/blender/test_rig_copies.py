"""Copies and renames of a rig with IK (#29 items 7 and 8), in real Blender on real robots.

A copy of a rig (Shift+D, Alt+D, Append, Link with a library override) gets its own tree,
control and readout: driving one never moves the other, and Add IK Target on the copy builds on
the copy's tree. A renamed control bone, link bone, rig object or tree is followed, as Blender's
own IK constraint follows a renamed bone: the rig still solves and says it converged.

Every test runs on two robots from the installed packages: example-robot-data's ur5_limited
(URDF) and robosuite's Kinova3 (MJCF). Poses are judged by the robot file's own FK (rig_helpers.IndependentFK: yourdfpy,
MuJoCo), built before any rename, with the file's link names. Tolerances: a reached pose 1e-5 m
and 1e-5 rad (tests/blender/test_robot_zoo.py's); "never moves" is bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from rig_helpers import IndependentFK, joints_of, pose_error, robot_of, walk

ROBOTS = ("ur5_limited", "robosuite_kinova3")
REACHED_M, REACHED_RAD = 1e-5, 1e-5


def _rig(bpy, name):
    """A robot imported through File > Import > Robot, with an IK target on its tool point (the
    NumPy solver; a loaded 2-core machine must not trip the live budget, tested elsewhere)."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.core.model.loading import find_urdf

    assert bpy.ops.kinema.import_urdf(filepath=str(find_urdf(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    _, _, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    _settle(bpy)
    return rig


def _settle(bpy):
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()


def _parts(rig):
    """(tree, solver, this rig's first target) of the rig's tree."""
    from kinema_nodes.blender.edit import rig_solver, rig_tree, target_nodes

    tree = rig_tree(rig)
    targets = target_nodes(tree, rig)
    assert targets, f"{rig.name}'s tree {tree.name} has no target of its own"
    return tree, rig_solver(tree, rig), targets[0]


def _summary(rig) -> str:
    from kinema_nodes.session import readout_of

    tree, solver, _ = _parts(rig)
    return readout_of(tree, solver.name).get("summary", "")


def _step(robot, link, q, seed, step=0.08):
    """A small step from q: a pose the arm reaches from where it is (rig_helpers.walk)."""
    return walk(robot, link, q, 1, step, seed)[0]


def _drive(bpy, rig, fk, link, seed, bone=None):
    """Drag the rig's control (its first target's, or `bone`) to a reachable pose of `link` (by
    the file's link name) and check the tool lands on it and the readout says converged."""
    from mathutils import Matrix

    _, _, target = _parts(rig)
    q = _step(fk.robot, link, joints_of(rig), seed)
    goal = fk.pose(q, link)
    rig.pose.bones[bone or target.control_bone].matrix = Matrix(goal.tolist())
    _settle(bpy)
    position, angle = pose_error(fk.pose(joints_of(rig), link), goal)
    assert position <= REACHED_M and angle <= REACHED_RAD, (rig.name, position, angle, _summary(rig))
    assert _summary(rig).startswith("converged"), _summary(rig)


def _select_only(bpy, obj):
    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def _assert_own(rig):
    """The rig's tree drives it alone: its Robot node, its target's control."""
    tree, solver, target = _parts(rig)
    robots = [n for n in tree.nodes if n.bl_idname == "KinemaRobotNode"]
    assert [n.rig for n in robots] == [rig]
    assert target.control_object == rig and target.control_bone in rig.pose.bones
    assert solver.kinema_error == "" and target.kinema_error == ""
    return tree


def _duplicate(bpy, rig, linked):
    _select_only(bpy, rig)
    assert bpy.ops.object.duplicate(linked=linked) == {"FINISHED"}
    copy = bpy.context.view_layer.objects.active
    assert copy is not rig
    return copy


@pytest.mark.parametrize("linked", [False, True], ids=["shift_d", "alt_d"])
@pytest.mark.parametrize("name", ROBOTS)
def test_a_duplicate_has_its_own_tree_control_and_readout(blender, name, linked):
    bpy = blender
    rig = _rig(bpy, name)
    fk = IndependentFK(robot_of(rig))
    link = _parts(rig)[2].link_name
    copy = _duplicate(bpy, rig, linked)
    assert (copy.data == rig.data) is linked
    tree, copy_tree = _assert_own(rig), _assert_own(copy)
    assert copy_tree != tree and len([t for t in bpy.data.node_groups if t.bl_idname == "KinemaNodeTree"]) == 2

    here = joints_of(rig)
    _drive(bpy, copy, fk, link, seed=1)
    assert np.array_equal(joints_of(rig), here), "driving the copy moved the original"
    there = joints_of(copy)
    _drive(bpy, rig, fk, link, seed=2)
    assert np.array_equal(joints_of(copy), there), "driving the original moved the copy"
    # each readout is its own rig's: the copy's still shows the copy's solve
    assert _summary(copy).startswith("converged") and _summary(rig).startswith("converged")
    from kinema_nodes.session import readout_of

    assert readout_of(tree, _parts(rig)[1].name) is not readout_of(copy_tree, _parts(copy)[1].name)


@pytest.mark.parametrize("name", ROBOTS)
def test_add_ik_target_on_a_copy_builds_on_the_copy_s_tree_and_the_original_keeps_solving(blender, name):
    bpy = blender
    rig = _rig(bpy, name)
    robot = robot_of(rig)
    fk = IndependentFK(robot)
    tool = _parts(rig)[2].link_name
    elbow = robot.joint_by_name[robot.chain_joint_names(tool)[2]].child  # a link mid-arm
    copy = _duplicate(bpy, rig, linked=False)
    assert bpy.ops.kinema.add_ik_target(link=elbow) == {"FINISHED"}
    from kinema_nodes.blender.edit import target_nodes

    tree, copy_tree = _assert_own(rig), _assert_own(copy)
    assert [t.link_name for t in target_nodes(tree)] == [tool]
    assert sorted(t.link_name for t in target_nodes(copy_tree)) == sorted([tool, elbow])
    assert all(t.control_object == copy for t in target_nodes(copy_tree))

    # the copy's two controls to poses of one configuration: both reached
    from mathutils import Matrix

    q = _step(robot, tool, joints_of(copy), seed=5)
    here = joints_of(rig)
    for target in target_nodes(copy_tree):
        copy.pose.bones[target.control_bone].matrix = Matrix(fk.pose(q, target.link_name).tolist())
    _settle(bpy)
    for link in (tool, elbow):
        position, angle = pose_error(fk.pose(joints_of(copy), link), fk.pose(q, link))
        assert position <= REACHED_M and angle <= REACHED_RAD, (link, position, angle, _summary(copy))
    assert _summary(copy).startswith("converged"), _summary(copy)
    assert np.array_equal(joints_of(rig), here)
    _drive(bpy, rig, fk, tool, seed=6)
    assert _parts(rig)[1].kinema_error == "" and "different robots" not in _summary(rig)


@pytest.mark.parametrize("name", ROBOTS)
def test_undoing_a_duplicate_leaves_the_original_working(blender, name):
    """The bpy module has no window, so ed.undo cannot run here: what a memfile undo leaves is
    made by hand (the copy, its armature and its tree gone) and the undo handler called."""
    bpy = blender
    from kinema_nodes.blender import handlers

    rig = _rig(bpy, name)
    fk = IndependentFK(robot_of(rig))
    link = _parts(rig)[2].link_name
    tree = _parts(rig)[0]
    copy = _duplicate(bpy, rig, linked=False)
    _drive(bpy, copy, fk, link, seed=1)
    copy_tree, armature = _parts(copy)[0], copy.data
    bpy.data.objects.remove(copy)
    bpy.data.armatures.remove(armature)
    bpy.data.node_groups.remove(copy_tree)
    handlers.on_undo()
    _settle(bpy)
    assert _parts(rig)[0] == tree and _assert_own(rig) == tree
    _drive(bpy, rig, fk, link, seed=2)
    _drive(bpy, rig, fk, link, seed=3)


def _save_rig(bpy, rig, path) -> str:
    """Save the file; returns the name of the collection the importer put the rig in (what a
    Link of the whole robot brings in)."""
    assert bpy.ops.wm.save_as_mainfile(filepath=str(path)) == {"FINISHED"}
    return rig.users_collection[0].name


@pytest.mark.parametrize("name", ROBOTS)
def test_an_appended_rig_solves_live_and_apart_from_a_second_append(blender, tmp_path, name):
    bpy = blender
    rig = _rig(bpy, name)
    fk = IndependentFK(robot_of(rig))
    name, link = rig.name, _parts(rig)[2].link_name  # from here, `name` is the rig object's
    path = tmp_path / "rig.blend"
    _save_rig(bpy, rig, path)

    bpy.ops.wm.read_homefile(use_empty=True)
    folder = str(path / "Object") + "/"
    assert bpy.ops.wm.append(filepath=folder + name, directory=folder, filename=name) == {"FINISHED"}
    appended = bpy.data.objects[name]
    _settle(bpy)
    _assert_own(appended)
    _drive(bpy, appended, fk, link, seed=1)

    with bpy.data.libraries.load(str(path), link=False) as (_, into):
        into.objects = [name]
    second = into.objects[0]
    bpy.context.scene.collection.objects.link(second)
    _settle(bpy)
    assert second is not appended and _assert_own(second) != _assert_own(appended)
    here = joints_of(appended)
    _drive(bpy, second, fk, link, seed=2)
    assert np.array_equal(joints_of(appended), here)
    _drive(bpy, appended, fk, link, seed=3)


@pytest.mark.parametrize("how", ["override_create", "override_hierarchy_create"])
@pytest.mark.parametrize("name", ROBOTS)
def test_a_linked_rig_with_a_library_override_solves_live(blender, tmp_path, how, name):
    bpy = blender
    rig = _rig(bpy, name)
    fk = IndependentFK(robot_of(rig))
    name, link = rig.name, _parts(rig)[2].link_name  # from here, `name` is the rig object's
    path = tmp_path / "rig.blend"
    collection_name = _save_rig(bpy, rig, path)

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    if how == "override_create":
        with bpy.data.libraries.load(str(path), link=True) as (_, into):
            into.objects = [name]
        linked = into.objects[0]
        scene.collection.objects.link(linked)
        override = linked.override_create(remap_local_usages=True)
    else:
        with bpy.data.libraries.load(str(path), link=True) as (_, into):
            into.collections = [collection_name]
        instance = bpy.data.objects.new("Robot", None)
        instance.instance_type, instance.instance_collection = "COLLECTION", into.collections[0]
        scene.collection.objects.link(instance)
        collection = into.collections[0].override_hierarchy_create(scene, bpy.context.view_layer, do_fully_editable=True)
        bpy.data.objects.remove(instance)
        override = collection.objects[name]
    _settle(bpy)
    assert override.library is None and override.override_library is not None
    tree = _assert_own(override)
    assert tree.library is None  # a linked tree cannot be written: the override drives a local copy
    _drive(bpy, override, fk, link, seed=1)
    _drive(bpy, override, fk, link, seed=2)
    # saved and opened again, the override keeps its own tree
    shot = tmp_path / "shot.blend"
    assert bpy.ops.wm.save_as_mainfile(filepath=str(shot)) == {"FINISHED"}
    assert bpy.ops.wm.open_mainfile(filepath=str(shot)) == {"FINISHED"}
    override = next(obj for obj in bpy.data.objects if obj.name == name and obj.override_library is not None)
    _settle(bpy)
    assert _assert_own(override).library is None
    _drive(bpy, override, fk, link, seed=3)


@pytest.mark.parametrize("name", ROBOTS)
def test_renamed_control_link_rig_and_tree_are_followed(blender, name):
    bpy = blender
    rig = _rig(bpy, name)
    robot = robot_of(rig)
    fk = IndependentFK(robot)  # the file's own names: the rig's renames never reach it
    tree, solver, target = _parts(rig)
    tool = target.link_name

    rig.data.bones[target.control_bone].name = "Hand Control"
    _settle(bpy)
    assert target.control_bone == "Hand Control" and target.kinema_error == ""
    _drive(bpy, rig, fk, tool, seed=1)

    middle = robot.joint_by_name[robot.chain_joint_names(tool)[2]].child
    renames = {tool: "Tip", middle: "Elbow", robot.root_link: "Floor"}
    for old, new in renames.items():
        rig.data.bones[old].name = new
    _settle(bpy)
    assert target.link_name == "Tip" and target.kinema_error == "" and solver.kinema_error == ""
    renamed = robot_of(rig)
    assert set(renames.values()) <= set(renamed.links) and not set(renames) & set(renamed.links)
    assert renamed.actuated_joint_names == robot.actuated_joint_names
    _drive(bpy, rig, fk, tool, seed=2)
    _drive(bpy, rig, fk, tool, seed=3)

    rig.name = "Renamed Rig"
    _settle(bpy)
    _drive(bpy, rig, fk, tool, seed=4)
    tree.name = "Renamed Tree"
    _settle(bpy)
    _drive(bpy, rig, fk, tool, seed=5)
    assert target.kinema_error == "" and solver.kinema_error == ""


@pytest.mark.parametrize("name", ROBOTS)
def test_a_rename_on_an_armature_two_rigs_share_is_followed_by_both_trees(blender, name):
    """Alt+D shares the armature: one rename renames the bone on both rigs, and both trees follow."""
    bpy = blender
    rig = _rig(bpy, name)
    fk = IndependentFK(robot_of(rig))
    tool = _parts(rig)[2].link_name
    copy = _duplicate(bpy, rig, linked=True)
    _settle(bpy)
    rig.data.bones[_parts(rig)[2].control_bone].name = "Shared Control"
    rig.data.bones[tool].name = "Shared Tip"
    _settle(bpy)
    for each in (rig, copy):
        _, solver, target = _parts(each)
        assert (target.control_bone, target.link_name) == ("Shared Control", "Shared Tip")
        assert solver.kinema_error == "" and target.kinema_error == ""
    here = joints_of(rig)
    _drive(bpy, copy, fk, tool, seed=1)
    assert np.array_equal(joints_of(rig), here)
    _drive(bpy, rig, fk, tool, seed=2)
