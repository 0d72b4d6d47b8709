"""First contact (issue #29, item 10): a control carried by a constraint is followed. The
manual calls controls "constrainable": a control bone with a Child Of constraint on a keyed
Empty must move the arm where the constraint puts it, on every frame, forward, backward, by
jumps and in a bake. Robots: example-robot-data's ur5_limited and ur10_joint_limited_robot
(6 axes), judged by yourdfpy's FK of the robot file.

Reach alone does not catch the reported failure (the arm swung 3.9 rad on the way), so each
scrub, playback and bake here also holds the README's continuity rule: played forward, no joint
steps more than `MAX_STEP` (0.5 rad, the README's figure, with no extra tolerance) between
consecutive frames. Nothing in these shots is near a joint limit, so no step here is one that
limits force (those are flagged instead).
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robot
from rig_helpers import IndependentFK, pose_error

#: Position (m) and rotation (rad) the hand may miss the constrained control by (the rotation is
#: read from float32 bone matrices, whose arccos floors near 5e-4 rad).
POSITION_TOL, ROTATION_TOL = 1e-4, 1e-3
#: The most any joint may move between consecutive frames played forward (rad): the README's
#: "no joint steps more than 0.5 rad between frames" (the Empty moves the control at most
#: 2 cm and 0.05 rad a frame, so a continuous answer steps far less).
MAX_STEP = 0.5
FRAMES = range(1, 11)


def constrained_rig(bpy, name: str):
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    path = example_robot(name)
    assert path is not None, f"example-robot-data robot '{name}' not found"
    assert bpy.ops.kinema.import_urdf(filepath=str(path)) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    q0 = np.array([0.3, -1.2, 1.4, -1.0, -1.3, 0.2])[: len(robot.lower)]
    write_joint_values(rig, robot, q0)
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.add_ik_target(link="tool0") == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    target = next(n for n in tree.nodes if getattr(n, "control_object", None) is not None)
    return rig, robot, target, q0


def carry_with_keyed_empty(bpy, control_obj, bone_name, rig):
    """An Empty keyed along a short path; the control bone follows it through Child Of (set
    inverse taken at frame 1, as a user does with the button)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    scene.frame_set(FRAMES[0])
    empty = bpy.data.objects.new("Carrier", None)
    scene.collection.objects.link(empty)
    for f in FRAMES:
        t = (f - FRAMES[0]) / (FRAMES[-1] - FRAMES[0])
        empty.location = rig.matrix_world @ __import__("mathutils").Vector((0.04 * np.sin(3 * t), -0.05 * t, 0.03 * t))
        empty.rotation_euler = (0.2 * t, 0.0, -0.25 * t)
        empty.keyframe_insert("location", frame=f)
        empty.keyframe_insert("rotation_euler", frame=f)
    scene.frame_set(FRAMES[0])
    bone = control_obj.pose.bones[bone_name]
    constraint = bone.constraints.new("CHILD_OF")
    constraint.target = empty
    # Set Inverse: the bone stays where it is at frame 1, then moves with the Empty.
    bpy.context.view_layer.update()
    constraint.inverse_matrix = empty.matrix_world.inverted()
    scene.frame_set(FRAMES[0])
    return empty


def evaluated_control(bpy, target, rig):
    """The control's pose in the rig's space as Blender evaluates it now (constraints included)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    obj = target.control_object.evaluated_get(depsgraph)
    world = obj.matrix_world @ obj.pose.bones[target.control_bone].matrix if target.control_bone else obj.matrix_world
    return np.array(rig.evaluated_get(depsgraph).matrix_world.inverted_safe() @ world)


def misses(bpy, rig, robot, target, fk, frames, seen=None):
    """(frame, m, rad) the hand misses the control by at each frame visited; `seen` (a list), when
    given, gets each frame's joint values in the order visited."""
    from kinema_nodes.blender.rig import read_joint_values

    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        goal = evaluated_control(bpy, target, rig)
        q = read_joint_values(rig, robot)
        if seen is not None:
            seen.append(q.copy())
        hand = fk.pose(q, "tool0")
        out.append((f, *pose_error(hand, goal)))
    return out


def big_steps(robot, frames, joints) -> list:
    """(frame, joint, rad) for each joint that moved more than MAX_STEP from the frame before."""
    q = np.asarray(joints, dtype=float)
    steps = np.abs(np.diff(q, axis=0))
    return [(frames[i + 1], robot.actuated_joint_names[j], round(float(steps[i, j]), 4))
            for i, j in zip(*np.nonzero(steps > MAX_STEP))]


@pytest.mark.parametrize("name", ["ur5_limited", "ur10_joint_limited_robot"])
def test_a_control_carried_by_child_of_is_followed(blender, name):
    bpy = blender
    rig, robot, target, _ = constrained_rig(bpy, name)
    control = target.control_object
    assert control is not None
    carry_with_keyed_empty(bpy, control, target.control_bone, rig)
    fk = IndependentFK(robot)
    order = [*FRAMES, *reversed(FRAMES), 1, 10, 4, 8, 2, 9]
    seen = []
    bad = [m for m in misses(bpy, rig, robot, target, fk, order, seen) if m[1] > POSITION_TOL or m[2] > ROTATION_TOL]
    assert not bad, f"{name}: frames where the hand missed the constrained control (frame, m, rad): {bad}"
    forward = big_steps(robot, list(FRAMES), seen[: len(FRAMES)])
    assert not forward, f"{name}: joints that stepped over {MAX_STEP} rad between frames played forward: {forward}"


@pytest.mark.parametrize("name", ["ur5_limited", "ur10_joint_limited_robot"])
def test_a_bake_follows_the_constrained_control(blender, name):
    bpy = blender
    from kinema_nodes.blender.rig import read_joint_values

    rig, robot, target, _ = constrained_rig(bpy, name)
    carry_with_keyed_empty(bpy, target.control_object, target.control_bone, rig)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    fk = IndependentFK(robot)
    bad, played = [], []
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        goal = evaluated_control(bpy, target, rig)
        played.append(read_joint_values(rig, robot).copy())
        error = pose_error(fk.pose(played[-1], "tool0"), goal)
        if error[0] > POSITION_TOL or error[1] > ROTATION_TOL:
            bad.append((f, *error))
    assert not bad, f"{name}: baked frames that missed the constrained control (frame, m, rad): {bad}"
    forward = big_steps(robot, list(FRAMES), played)
    assert not forward, f"{name}: baked joints that stepped over {MAX_STEP} rad between frames: {forward}"


def object_control(bpy, rig, target):
    """The target re-pointed, as a user does, at an Empty placed where the control bone is."""
    control = bpy.data.objects.new("Hand Control", None)
    bpy.context.scene.collection.objects.link(control)
    control.matrix_world = rig.matrix_world @ rig.pose.bones[target.control_bone].matrix
    target.control_object, target.control_bone = control, ""
    bpy.context.view_layer.update()
    return control


def carry_object_with_keyed_empty(bpy, control, rig):
    """`carry_with_keyed_empty` for an object control: Child Of with its inverse set at frame 1."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    empty = bpy.data.objects.new("Carrier", None)
    scene.collection.objects.link(empty)
    for f in FRAMES:
        t = (f - FRAMES[0]) / (FRAMES[-1] - FRAMES[0])
        empty.location = (0.08 * np.sin(3 * t), -0.1 * t, 0.06 * t)
        empty.rotation_euler = (0.3 * t, 0.1 * t, -0.4 * t)
        empty.keyframe_insert("location", frame=f)
        empty.keyframe_insert("rotation_euler", frame=f)
    scene.frame_set(FRAMES[0])
    constraint = control.constraints.new("CHILD_OF")
    constraint.target = empty
    bpy.context.view_layer.update()
    constraint.inverse_matrix = empty.matrix_world.inverted()
    scene.frame_set(FRAMES[0])


@pytest.mark.parametrize("backend", ["NUMPY", "PYROKI"])
@pytest.mark.parametrize("name", ["ur5_limited", "ur10_joint_limited_robot"])
def test_an_object_control_carried_by_child_of_is_followed(blender, name, backend):
    bpy = blender
    from kinema_nodes.blender.edit import rig_solver, rig_tree

    rig, robot, target, _ = constrained_rig(bpy, name)
    rig_solver(rig_tree(rig), rig).backend = backend
    control = object_control(bpy, rig, target)
    carry_object_with_keyed_empty(bpy, control, rig)
    fk = IndependentFK(robot)
    order = [*FRAMES, *reversed(FRAMES), 1, 10, 4, 8, 2, 9]
    seen = []
    bad = [m for m in misses(bpy, rig, robot, target, fk, order, seen) if m[1] > POSITION_TOL or m[2] > ROTATION_TOL]
    assert not bad, f"{name}: frames where the hand missed the constrained control (frame, m, rad): {bad}"
    forward = big_steps(robot, list(FRAMES), seen[: len(FRAMES)])
    assert not forward, f"{name}: joints that stepped over {MAX_STEP} rad between frames played forward: {forward}"
