"""Presets that play as applied and survive their own round trip (#20 items 3, 5, 6), in real
Blender (NumPy solver), on robots the preset tests had not used: UR10, Unitree Z1, SO-101,
Baxter, PR2, TIAGo (no hand), iCub and simple_humanoid from example-robot-data, and the Sawyer
arm robosuite ships.

"Plays as applied": every shipped preset, applied and played over its frame range with nothing
touched, converges on every frame (never "out of reach": its controls were made where their
links are), and no joint steps more than twice the largest step of its neighbouring frames
(plus 1e-6 rad of float32 noise).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.presets import PresetError
from rig_helpers import joints_of, pose_and_update, robot_of

EXAMPLE = {
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "so101": "so_arm_description/urdf/so101.urdf",
    "baxter": "baxter_description/urdf/baxter.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",
    "tiago": "tiago_description/robots/tiago_no_hand.urdf",
    "icub": "icub_description/robots/icub_reduced.urdf",
    "simple_humanoid": "simple_humanoid_description/urdf/simple_humanoid.urdf",
}


def _urdf(name: str) -> str:
    if name == "sawyer":
        spec = importlib.util.find_spec("robosuite")
        assert spec is not None, "robosuite is a test dependency"
        folder = Path(next(iter(spec.submodule_search_locations)))
        return str(folder / "models" / "assets" / "bullet_data" / "sawyer_description" / "urdf" / "sawyer_arm.urdf")
    return str(example_robots_folder() / EXAMPLE[name])


@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    folder = tmp_path / "user_presets"
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(folder))
    return folder


def _import(bpy, name):
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(bpy.context, _urdf(name))
    bpy.context.view_layer.objects.active = rig
    return rig


def _start(robot, seed=3):
    """A bent, in-limits pose: each arm joint a little off the middle of its range."""
    from kinema_nodes.core.roles import arm_joints

    rng = np.random.default_rng(seed)
    q = robot.mid_configuration()
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    q += rng.uniform(-0.15, 0.15, robot.dof) * (upper - lower)
    arm = {j.name for j in arm_joints(robot)}
    for i, name in enumerate(robot.actuated_joint_names):
        if name in robot.held_joints() or (name not in arm and "leg" not in name.lower()):
            q[i] = np.clip(0.0, robot.lower[i], robot.upper[i])
    return np.clip(q, robot.lower + 0.05 * (upper - lower), robot.upper - 0.05 * (upper - lower))


def _apply(bpy, rig, name):
    from kinema_nodes.blender.flatten import all_nodes
    from kinema_nodes.blender.presets import apply_preset

    bpy.context.view_layer.objects.active = rig
    tree = apply_preset(bpy.context, rig, name, backend="NUMPY")
    for solver in (n for n in all_nodes(tree) if n.bl_idname == "KinemaSolverNode"):
        solver.use_own_budget, solver.budget_ms = True, 10_000.0
    return tree


def _solvers(tree):
    from kinema_nodes.blender.flatten import all_nodes

    return [n for n in all_nodes(tree) if n.bl_idname == "KinemaSolverNode"]


def _assert_no_pop(frames):
    """No joint steps more than twice the largest step of its neighbouring frames."""
    steps = np.abs(np.diff(frames, axis=0))  # steps[k]: frame k -> k+1
    for k in range(len(steps)):
        neighbours = [steps[j] for j in (k - 1, k + 1) if 0 <= j < len(steps)]
        allowed = 2.0 * np.max(neighbours, axis=0) + 1e-6
        assert np.all(steps[k] <= allowed), (k + 1, steps[k].max(), allowed.min())


PLAYS = [
    ("Reach with the tool", "ur10"), ("Reach with the tool", "z1"),
    ("7-DoF arm with elbow swivel", "sawyer"), ("7-DoF arm with elbow swivel", "tiago"),
    ("Arm on a rail", "tiago"), ("Arm on a rail", "pr2"),
    ("Dual arm", "baxter"), ("Dual arm", "pr2"),
    ("Hand-off between two links", "ur10"), ("Hand-off between two links", "sawyer"), ("Hand-off between two links", "z1"),
    ("Whole-body reach for a humanoid", "simple_humanoid"), ("Whole-body reach for a humanoid", "icub"),
]


@pytest.mark.parametrize("preset, name", PLAYS)
def test_every_shipped_preset_plays_as_applied(blender, presets_folder, preset, name):
    bpy = blender
    rig = _import(bpy, name)
    robot = robot_of(rig)
    start = _start(robot)
    pose_and_update(bpy, rig, start)
    bpy.context.scene.frame_set(1)
    tree = _apply(bpy, rig, preset)
    last = 60 if preset.startswith("Hand-off") else 20
    frames, summaries = [], []
    for frame in range(1, last + 1):
        bpy.context.scene.frame_set(frame)
        frames.append(joints_of(rig))
        summaries.append([(s.name, s.summary) for s in _solvers(tree)])
    for frame, found in enumerate(summaries, start=1):
        for solver, summary in found:
            assert "out of reach" not in summary and summary.startswith("converged"), (preset, name, frame, solver, summary)
    _assert_no_pop(np.array(frames))
    assert np.abs(np.array(frames) - start).max() < 0.05  # applied and played: the arm stays where it was


def test_hand_off_preset_keys_the_control_on_each_link_at_the_switch(blender, presets_folder):
    """The control sits on the tool point until frame 49 and on the wrist from frame 50: the
    wrist is never pulled onto the tool's pose (that was the 2-3.4 rad jump)."""
    from kinema_nodes.core.roles import infer_roles

    bpy = blender
    rig = _import(bpy, "ur10")
    robot = robot_of(rig)
    start = _start(robot)
    pose_and_update(bpy, rig, start)
    tree = _apply(bpy, rig, "Hand-off between two links")
    (target,) = [n for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode"]
    wrist = infer_roles(robot).links["wrist"]
    for frame, link in ((49, robot.tool_point), (50, wrist)):
        bpy.context.scene.frame_set(frame)
        control = np.array(rig.pose.bones[target.control_bone].matrix, dtype=float)
        assert np.abs(control[:3, 3] - link_pose(robot, start, link)[:3, 3]).max() < 1e-5, (frame, link)


# ---- presets keep groups and the swivel ------------------------------------------------------

@pytest.mark.parametrize("source, other", [("sawyer", "tiago"), ("tiago", "baxter")])
def test_a_swivel_preset_saved_unchanged_and_reapplied_moves_nothing(blender, presets_folder, source, other):
    from kinema_nodes.blender.presets import save_tree_as_preset

    bpy = blender
    rig = _import(bpy, source)
    pose_and_update(bpy, rig, _start(robot_of(rig), seed=4))
    tree = _apply(bpy, rig, "7-DoF arm with elbow swivel")
    path = save_tree_as_preset(tree, rig, "Saved swivel")
    (swivel,) = [n for n in json.loads(path.read_text())["nodes"] if n["kind"] == "swivel"]
    assert abs(swivel["values"]["swivel_offset"]) < 1e-6 and "swivel_angle" not in swivel["values"]
    arm = _import(bpy, other)
    start = _start(robot_of(arm), seed=9)
    pose_and_update(bpy, arm, start)
    _apply(bpy, arm, "Saved swivel")
    for frame in (1, 2, 3):
        bpy.context.scene.frame_set(frame)
        assert np.abs(joints_of(arm) - start).max() <= 1e-5, (other, np.abs(joints_of(arm) - start).max())


@pytest.mark.parametrize("source, other", [("ur10", "z1"), ("z1", "so101")])
def test_a_group_saved_in_a_preset_is_applied_as_a_group(blender, presets_folder, source, other):
    """Add IK Target, Make Group of the target and its solver, Save Preset: the file lists the
    group, and applying it on another robot builds the Group node and its group tree again
    (not nodes named "Group/IK Target"); the tool then follows its control."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.groups import group_nodes
    from kinema_nodes.blender.presets import save_tree_as_preset

    bpy = blender
    rig = _import(bpy, source)
    pose_and_update(bpy, rig, _start(robot_of(rig)))
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    group = group_nodes(tree, [target, solver], name="Reach group")
    path = save_tree_as_preset(tree, rig, "Grouped reach")
    data = json.loads(path.read_text())
    assert data["groups"] == [{"node": group.name, "tree": "Reach group"}]
    arm = _import(bpy, other)
    robot = robot_of(arm)
    start = _start(robot)
    pose_and_update(bpy, arm, start)
    applied = _apply(bpy, arm, "Grouped reach")
    (user,) = [n for n in applied.nodes if n.bl_idname == "KinemaGroupNode"]
    assert user.name == group.name and user.node_tree.name.startswith("Reach group")
    assert sorted(n.name for n in user.node_tree.nodes if n.bl_idname.startswith("Kinema")) == ["IK Target", "Solver"]
    assert not any("/" in n.name for n in applied.nodes)
    inner_target = user.node_tree.nodes["IK Target"]
    inner_solver = user.node_tree.nodes["Solver"]
    assert inner_solver.live and inner_target.control_bone in arm.data.bones
    bone = arm.pose.bones[inner_target.control_bone]
    from kinema_nodes.core.roles import arm_joints

    five_axis = len(arm_joints(robot)) < 6
    inner_target.rotation_weight = 0.0 if five_axis else 1.0
    bone.location = (0.01, -0.01, 0.01)
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    assert inner_solver.summary.startswith("converged"), inner_solver.summary
    tool = np.array(arm.pose.bones[inner_target.link_name].matrix)
    assert np.abs(tool[:3, 3] - np.array(bone.matrix)[:3, 3]).max() < 1e-5


# ---- messages that help ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ur10", "z1", "so101"])
def test_the_seven_joint_refusal_says_what_would_work(blender, presets_folder, name):
    """The Z1 has seven revolute joints, one of them its jaw: the arm has six, and the message
    says so; no message suggests setting a role by hand, which cannot add a joint."""
    from kinema_nodes.blender.presets import apply_preset

    bpy = blender
    rig = _import(bpy, name)
    with pytest.raises(PresetError) as error:
        apply_preset(bpy.context, rig, "7-DoF arm with elbow swivel")
    message = str(error.value)
    have = 5 if name == "so101" else 6
    assert f"needs an arm with 7 revolute joints; '{robot_of(rig).name}' has {have}" in message
    assert "Apply it to an arm with 7 revolute joints" in message and "'Reach with the tool'" in message
    assert "by hand" not in message and "Nothing was changed" in message and "\n" not in message
    assert rig.kinema_tree is None


@pytest.mark.parametrize("source, other", [("ur10", "z1"), ("z1", "sawyer")])
def test_a_group_used_twice_in_a_preset_is_one_group_with_two_users(blender, presets_folder, source, other):
    """Two Group nodes using one group tree, saved and applied on another robot: one group tree
    with two users again, and the same graph once flattened."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.groups import add_group_node, group_nodes
    from kinema_nodes.blender.presets import save_tree_as_preset

    bpy = blender
    rig = _import(bpy, source)
    pose_and_update(bpy, rig, _start(robot_of(rig)))
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    first = group_nodes(tree, [target], name="Aim")
    second = add_group_node(tree, first.node_tree)
    robot_node = next(n for n in tree.nodes if n.bl_idname == "KinemaRobotNode")
    tree.links.new(robot_node.outputs["Robot"], second.inputs["Robot"])
    tree.links.new(second.outputs["Target"], solver.inputs["Targets"])
    data = json.loads(save_tree_as_preset(tree, rig, "Aim twice").read_text())
    assert sorted(g["tree"] for g in data["groups"]) == ["Aim", "Aim"]
    arm = _import(bpy, other)
    start = _start(robot_of(arm))
    pose_and_update(bpy, arm, start)
    applied = _apply(bpy, arm, "Aim twice")
    users = [n for n in applied.nodes if n.bl_idname == "KinemaGroupNode"]
    assert len(users) == 2 and users[0].node_tree == users[1].node_tree
    (solver,) = [n for n in applied.nodes if n.bl_idname == "KinemaSolverNode"]
    assert len(solver.inputs["Targets"].links) == 2
    from kinema_nodes import evaluator

    names = lambda spec: sorted((n.name, n.kind) for n in spec.nodes)  # noqa: E731
    assert names(evaluator.snapshot(applied)) == names(evaluator.snapshot(tree))  # the same graph, flattened
