"""Animation inside node groups (#20 item 1) and a group used twice (#20 item 2), in real
Blender, on robots the group tests had not used: UR10 and Unitree Z1 (example-robot-data) and
the Sawyer arm robosuite ships (seven axes, for the swivel).

Each setup keys the control along reachable FK poses and adds one kind of animation on a node:
a keyed Target Bone hand-off (tool point -> wrist at frame 10), a keyed Elbow Swivel sweep, or
a Link Switch whose Value is driven (a driver on `frame`). The joint values of every frame must
be the same (1e-7 rad; the rig stores float32 and every pass starts from the same pose) played
plain, after Make Group, after Ungroup, and grouped after save and reload.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from rig_helpers import joints_of, robot_of

FRAMES = range(1, 21)
HAND_OFF = 10


def sawyer_path() -> str:
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency"
    folder = Path(next(iter(spec.submodule_search_locations)))
    return str(folder / "models" / "assets" / "bullet_data" / "sawyer_description" / "urdf" / "sawyer_arm.urdf")


ROBOTS = {"ur10": "ur10", "z1": "z1", "sawyer": None, "xarm7": "xarm7"}


def _import(bpy, name):
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(bpy.context, ROBOTS[name] or sawyer_path())
    bpy.context.view_layer.objects.active = rig
    return rig


def _matrix(array):
    from mathutils import Matrix

    return Matrix(np.asarray(array, dtype=float).tolist())


def _path(robot, start, frame):
    """A smooth reachable path of configurations (arm joints only; held joints stay)."""
    q = start.copy()
    free = ~np.isin(robot.actuated_joint_names, list(robot.held_joints()))
    q[free] += 0.25 * np.sin(0.15 * frame + np.arange(robot.dof))[free] * 0.5
    return np.clip(q, robot.lower, robot.upper)


def _start(robot):
    rng = np.random.default_rng(11)
    q = np.clip(robot.mid_configuration() + rng.uniform(-0.4, 0.4, robot.dof), robot.lower, robot.upper)
    held = np.isin(robot.actuated_joint_names, list(robot.held_joints()))
    q[held] = robot.zero_configuration()[held]
    return q


def _build(bpy, name, kind):
    """A rig and a tree animated by `kind` ("hand-off", "swivel", "driven switch")."""
    from kinema_nodes.blender.edit import add_ik_target, key_target_link
    from kinema_nodes.blender.rig import write_joint_values
    from kinema_nodes.core.roles import infer_roles

    rig = _import(bpy, name)
    robot = robot_of(rig)
    start = _start(robot)
    write_joint_values(rig, robot, start)
    bpy.context.scene.frame_set(1)
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    tool, wrist = robot.tool_point, infer_roles(robot).links["wrist"]
    handing_off = kind in ("hand-off", "driven switch")
    bone = rig.pose.bones[target.control_bone]
    for frame in FRAMES:
        link = wrist if handing_off and frame >= HAND_OFF else tool
        bone.matrix = _matrix(link_pose(robot, _path(robot, start, frame), link))
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)
    if kind == "hand-off":
        key_target_link(target, robot, tool, 1)
        key_target_link(target, robot, wrist, HAND_OFF)
    elif kind == "driven switch":
        switch = tree.nodes.new("KinemaLinkSwitchNode")
        switch.mode = "VALUE"
        switch.add_range(0.0, tool)
        switch.add_range(1.0, wrist)
        tree.links.new(switch.outputs["Link"], target.inputs["Link"])
        driver = switch.driver_add("value").driver
        driver.type = "SCRIPTED"
        driver.expression = f"min(max(frame - {HAND_OFF - 1}, 0), 1)"
    elif kind == "swivel":
        from kinema_nodes.core.stages.swivel import swivel_angle

        swivel = tree.nodes.new("KinemaSwivelNode")
        tree.links.new(solver.outputs["Solution"], swivel.inputs["Solution"])
        angle = float(swivel_angle(robot, tool, start, robot.held_joints()))
        for frame, value in ((1, angle), (20, angle + 0.3)):
            swivel.swivel_angle = value
            swivel.keyframe_insert("swivel_angle", frame=frame)
    return rig, tree, start


def _play(bpy, rig, start):
    """Joint values of every frame, played forward from the same pose."""
    from kinema_nodes.blender.rig import write_joint_values

    write_joint_values(rig, robot_of(rig), start)
    bpy.context.scene.frame_set(1)
    frames = []
    for frame in FRAMES:
        bpy.context.scene.frame_set(frame)
        frames.append(joints_of(rig))
    return np.array(frames)


def _not_robot(tree):
    return [n for n in tree.nodes if n.bl_idname != "KinemaRobotNode"]


CASES = [("hand-off", "ur10"), ("hand-off", "z1"), ("driven switch", "ur10"), ("driven switch", "sawyer"),
         ("swivel", "sawyer"), ("swivel", "xarm7")]


@pytest.mark.parametrize("kind, name", CASES)
def test_animation_survives_make_group_ungroup_and_reload(blender, tmp_path, kind, name):
    from kinema_nodes.blender.groups import group_nodes, ungroup

    bpy = blender
    rig, tree, start = _build(bpy, name, kind)
    rig_name, tree_name = rig.name, tree.name
    plain = _play(bpy, rig, start)
    moved = np.abs(plain[-1] - plain[0]).max()
    assert moved > 0.05, moved  # the animation does something

    group = group_nodes(tree, _not_robot(tree), name="Animated")
    inner = group.node_tree
    assert tree.animation_data is None or not any(d.data_path.startswith("nodes[") for d in tree.animation_data.drivers)
    grouped = _play(bpy, rig, start)
    np.testing.assert_allclose(grouped, plain, atol=1e-7, rtol=0)

    ungroup(tree, group)
    ungrouped = _play(bpy, rig, start)
    np.testing.assert_allclose(ungrouped, plain, atol=1e-7, rtol=0)

    group_nodes(tree, _not_robot(tree), name="Animated again")
    path = str(tmp_path / "animated.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects[rig_name]
    assert any(n.bl_idname == "KinemaGroupNode" for n in bpy.data.node_groups[tree_name].nodes)
    reloaded = _play(bpy, rig, start)
    np.testing.assert_allclose(reloaded, plain, atol=1e-7, rtol=0)
    assert inner is not None


def test_keys_put_on_a_node_inside_a_group_evaluate_for_every_user(blender):
    """A Link Switch inside a group, keyed there (never outside), used by two UR10 rigs' trees:
    both hand over from the tool point to the wrist at the keyed frame."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.groups import add_group_node, group_nodes
    from kinema_nodes.core.roles import infer_roles

    bpy = blender
    rigs, solvers, targets = [], [], []
    for _ in range(2):
        rig = _import(bpy, "ur10")
        _, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
        solver.use_own_budget, solver.budget_ms = True, 10_000.0
        rigs.append(rig)
        solvers.append(solver)
        targets.append(target)
    robot = robot_of(rigs[0])
    wrist = infer_roles(robot).links["wrist"]
    first_tree = rigs[0].kinema_tree
    switch = first_tree.nodes.new("KinemaLinkSwitchNode")
    switch.mode = "VALUE"
    switch.add_range(0.0, robot.tool_point)
    switch.add_range(1.0, wrist)
    first_tree.links.new(switch.outputs["Link"], targets[0].inputs["Link"])
    group = group_nodes(first_tree, [switch], name="Chooser")
    inner = next(n for n in group.node_tree.nodes if n.bl_idname == "KinemaLinkSwitchNode")
    for frame, value in ((1, 0.0), (10, 1.0)):
        inner.value = value
        inner.keyframe_insert("value", frame=frame)
    second_tree = rigs[1].kinema_tree
    user = add_group_node(second_tree, group.node_tree)
    second_tree.links.new(user.outputs["Link"], targets[1].inputs["Link"])
    for frame, expected in ((1, robot.tool_point), (9, robot.tool_point), (10, wrist), (14, wrist)):
        bpy.context.scene.frame_set(frame)
        assert (inner.value < 1.0) == (frame < 10), inner.value  # the keyed value, evaluated inside the group
        for solver in solvers:
            assert solver.solving_to == expected, (frame, solver.solving_to)


class _RecordingLayout:
    def __init__(self):
        self.labels = []

    def label(self, text="", icon="NONE"):
        self.labels.append(text)


@pytest.mark.parametrize("name", ["ur10", "z1", "sawyer"])
def test_a_group_used_twice_is_two_instances(blender, name):
    """One group holding an IK Target and its Solver, used by two rigs of one robot (one 5 m
    away, out of reach): each user has its own readout, and its own pause over budget and resume."""
    from kinema_nodes import evaluator
    from kinema_nodes.blender.groups import add_group_node, group_nodes
    from kinema_nodes.blender.rig import write_joint_values

    bpy = blender
    rigs = [_import(bpy, name), _import(bpy, name)]
    rigs[1].location = (5.0, 0.0, 0.0)
    robot = robot_of(rigs[0])
    # Bent, away from limits and singularities.
    start = np.array([0.3, -1.2, 1.4, -0.8, 1.2, 0.3]) if name == "ur10" else _start(robot)
    for rig in rigs:
        write_joint_values(rig, robot, start)
    bpy.context.view_layer.update()
    goal = bpy.data.objects.new("Goal", None)
    bpy.context.scene.collection.objects.link(goal)
    goal.matrix_world = _matrix(link_pose(robot, start, robot.tool_point))
    tree = bpy.data.node_groups.new("Two users", "KinemaNodeTree")
    tree.use_fake_user = True
    robot_nodes = []
    for rig in rigs:
        node = tree.nodes.new("KinemaRobotNode")
        node.rig = rig
        robot_nodes.append(node)
    target = tree.nodes.new("KinemaIKTargetNode")
    target.control_object = goal
    solver = tree.nodes.new("KinemaSolverNode")
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    tree.links.new(robot_nodes[0].outputs["Robot"], target.inputs["Robot"])
    tree.links.new(target.outputs["Target"], solver.inputs["Targets"])
    first = group_nodes(tree, [target, solver], name="Reach")
    second = add_group_node(tree, first.node_tree)
    tree.links.new(robot_nodes[1].outputs["Robot"], second.inputs["Robot"])
    paths = [f"{first.name}/Solver", f"{second.name}/Solver"]

    def move(dx):
        goal.location.x += dx
        bpy.context.view_layer.update()
        bpy.context.view_layer.update()

    move(0.01)
    near, far = (evaluator.readout_of(tree, path) for path in paths)
    assert near["summary"].startswith("converged"), near
    assert far["summary"].startswith("did not converge"), far  # 5 m away
    for group_node, expected in ((first, "Solver: converged"), (second, "Solver: did not converge")):
        layout = _RecordingLayout()  # Blender's own layout needs a window; this records label()
        group_node.draw_readouts(layout)
        assert any(text.startswith(expected) for text in layout.labels), layout.labels
    from kinema_nodes.core.solve import kernel_status
    from kinema_nodes.evaluator import SLOW_FRAMES_TO_PAUSE

    kernel_status(wait=True)  # frames answered while the kernel compiles in the background are not counted
    inner_solver = first.node_tree.nodes["Solver"]
    inner_solver.budget_ms = 1e-6  # every solve is now over budget
    for _ in range(SLOW_FRAMES_TO_PAUSE):  # live updates pause after that many slow frames in a row (#29)
        move(0.01)
    assert all(evaluator.readout_of(tree, path)["paused"] for path in paths)
    assert not inner_solver.over_budget  # the shared node is not the instance
    evaluator.resume(tree, paths[0])
    paused_pose = joints_of(rigs[1])
    before = joints_of(rigs[0])
    move(0.02)
    assert np.abs(joints_of(rigs[0]) - before).max() > 1e-4  # the resumed user solved again
    assert np.array_equal(joints_of(rigs[1]), paused_pose)  # the other stayed paused
    for _ in range(SLOW_FRAMES_TO_PAUSE - 1):
        move(0.01)
    assert evaluator.readout_of(tree, paths[0])["paused"] and evaluator.readout_of(tree, paths[1])["paused"]


@pytest.mark.parametrize("kind, name", [("hand-off", "ur10"), ("hand-off", "z1"), ("swivel", "sawyer"),
                                        ("driven switch", "ur10"), ("driven switch", "sawyer")])
def test_bake_reads_the_animation_inside_a_group(blender, kind, name):
    """Bake to Keyframes through a grouped tree solves each frame with the keyed choice, driven
    Link Switch value and swivel of that frame: it equals the plain tree's playback (1e-6 rad)."""
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.groups import group_nodes
    from kinema_nodes.blender.rig import write_joint_values

    bpy = blender
    rig, tree, start = _build(bpy, name, kind)
    plain = _play(bpy, rig, start)
    group_nodes(tree, _not_robot(tree), name="Animated")
    write_joint_values(rig, robot_of(rig), start)
    bpy.context.scene.frame_set(1)
    results = bake_tree(tree, FRAMES[0], FRAMES[-1])
    assert results is not None and len(results) == 1
    np.testing.assert_allclose(results[0].solution.joints, plain, atol=1e-6, rtol=0)


def test_keys_on_a_node_whose_name_has_quotes_move_with_make_group_and_ungroup(blender):
    """A node named with a double quote and a backslash keeps its keys through Make Group and
    Ungroup: its F-curve path is quoted as Blender quotes it, so the name cannot end the string."""
    from kinema_nodes.blender.animation import node_fcurve
    from kinema_nodes.blender.groups import group_nodes, ungroup
    from kinema_nodes.core.graph.registry import TREE_IDNAME

    bpy = blender
    tree = bpy.data.node_groups.new('Quoted "tree"', TREE_IDNAME)
    swivel = tree.nodes.new("KinemaSwivelNode")
    swivel.name = 'Swivel "A" \\ B'
    name = swivel.name
    for frame, value in ((1, 0.25), (20, 1.25)):
        swivel.swivel_angle = value
        swivel.keyframe_insert("swivel_angle", frame=frame)
    fcurve = node_fcurve(swivel, "swivel_angle")
    assert fcurve is not None and len(fcurve.keyframe_points) == 2

    group = group_nodes(tree, [swivel], name="Quoted")
    inner = group.node_tree.nodes[name]
    moved = node_fcurve(inner, "swivel_angle")
    assert moved is not None, "the key did not move into the group"
    assert [tuple(p.co) for p in moved.keyframe_points] == [(1.0, 0.25), (20.0, 1.25)]
    assert node_fcurve(inner, "swivel_angle").evaluate(10.5) == pytest.approx(0.75, abs=1e-6)

    ungroup(tree, group)
    back = node_fcurve(tree.nodes[name], "swivel_angle")
    assert back is not None
    assert [tuple(p.co) for p in back.keyframe_points] == [(1.0, 0.25), (20.0, 1.25)]
