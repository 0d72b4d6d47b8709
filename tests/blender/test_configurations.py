"""Find Solutions and ◀ ▶ in real Blender, through the tree's Configuration-Select node, and the
`configs` command. The search itself (against the UR5's closed form) is tested in
tests/core/test_find_configurations.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from kinema_nodes.core.stages.configurations import same_branch
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions

NUMPY = SolveOptions(backend="numpy")


def _target(robot, q, link):
    pose = link_pose(robot, np.asarray(q, dtype=float), link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))), pose


# ---- in Blender ---------------------------------------------------------------------------

def _rig_with_target(bpy, name, q, link=None):
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    rig = import_urdf(bpy.context, name)
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, np.asarray(q, dtype=float))
    bpy.context.view_layer.update()
    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, link, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    bpy.context.view_layer.update()
    return rig, robot, tree, target, solver


def _state(rig, tree):
    """Everything but the joint values: control bones, node settings, keys."""
    from kinema_nodes.blender.rig import actuated_channels

    joint_bones = {c.bone for c in actuated_channels(robot_of(rig))}
    bones = {b.name: (tuple(b.location), tuple(b.rotation_quaternion), tuple(b.rotation_euler), tuple(b.scale))
             for b in rig.pose.bones if b.name not in joint_bones}
    nodes = {n.name: (n.bl_idname, getattr(n, "link_name", None), getattr(n, "link_index", None)) for n in tree.nodes}
    return bones, nodes, rig.animation_data, len(tree.links), tuple(rig.location), tuple(rig.rotation_euler)


def robot_of(rig):
    from kinema_nodes.blender.rig import robot_for_rig

    return robot_for_rig(rig)


def _reaches(rig, robot, target, q, tolerance=1e-5):
    """q puts the target's link on its control (yourdfpy-independent: our FK against the
    control's pose as Blender evaluates it), within limits."""
    from kinema_nodes import evaluator

    pose = evaluator.control_pose(target, rig)
    reached = link_pose(robot, q, target.link_name)
    rotation = np.linalg.norm(pose[:3, :3] - reached[:3, :3])
    assert np.linalg.norm(pose[:3, 3] - reached[:3, 3]) <= tolerance and rotation <= 2 * tolerance
    assert np.all(q >= robot.lower - 1e-6) and np.all(q <= robot.upper + 1e-6)  # read back from float32 bones


def test_find_solutions_and_the_arrows_run_through_the_configuration_node(blender):
    """Find Solutions wires a Configuration-Select node after the Solver and sets its index to
    the pose the arm has (nothing moves); ◀ ▶ step that index, and the evaluator writes the
    joints as on any frame: each step is a different branch that reaches the control, nothing
    but the joints and the node's index changes, nothing is keyed, a frame change keeps it."""
    from kinema_nodes.blender.edit import configuration_node
    from kinema_nodes.blender.rig import read_joint_values

    bpy = blender
    q = [0.4, -1.1, 1.3, -0.9, 1.2, 0.3]
    rig, robot, tree, target, solver = _rig_with_target(bpy, "arm6", q)
    assert configuration_node(tree, solver) is None
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    assert node is not None and [link.to_node for link in solver.outputs["Solution"].links] == [node]
    assert node.solutions_found == 8 and node.configuration_index == node.solution_you_had >= 1
    assert f"configuration {node.configuration_index} of 8" in solver.summary, solver.summary
    assert np.abs(read_joint_values(rig, robot) - np.array(q)).max() < 1e-4  # the pose you had
    before = _state(rig, tree)
    visited = [read_joint_values(rig, robot)]
    for step in (1, 1, -1, 1, 1, 1, 1, 1, 1, 1):
        expected = (node.configuration_index - 1 + step) % 8 + 1
        assert bpy.ops.kinema.step_configuration(step=step) == {"FINISHED"}
        assert node.configuration_index == expected
        bpy.context.view_layer.update()
        bpy.context.view_layer.update()
        written = read_joint_values(rig, robot)
        _reaches(rig, robot, target, written)
        assert f"configuration {expected} of 8" in solver.summary, solver.summary
        assert _state(rig, tree) == before
        visited.append(written)
    assert node.configuration_index == node.solution_you_had  # eight steps on: round to the start
    branches = []
    for v in visited:
        if not any(same_branch(robot, v, b) for b in branches):
            branches.append(v)
    assert len(branches) == 8
    assert rig.animation_data is None and tree.animation_data is None  # nothing keyed
    assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    chosen = read_joint_values(rig, robot)
    bpy.context.scene.frame_set(7)  # the evaluator, not the button, holds the pose
    assert np.abs(read_joint_values(rig, robot) - chosen).max() < 1e-6


def test_find_solutions_is_the_tree_s_solve_not_its_own(blender):
    """With the Solver Off nothing solves, so Find Solutions says so instead of searching on its
    own; after an Elbow Swivel the Configuration-Select node goes after the swivel, and the
    solutions it finds all have the swivel the ring asks for."""
    from kinema_nodes.blender.edit import add_elbow_swivel, configuration_node
    from kinema_nodes.blender.rig import read_joint_values
    from kinema_nodes import evaluator
    from kinema_nodes.core.stages.swivel import set_swivel, swivel_angle

    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "arm7", [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.02], "flange")
    solver.backend = "OFF"
    with pytest.raises(RuntimeError, match="Solver did not run: solver off"):
        bpy.ops.kinema.find_solutions()
    solver.backend = "NUMPY"
    swivel, _ = add_elbow_swivel(bpy.context, rig)
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    assert [link.to_node for link in solver.outputs["Solution"].links] == [swivel]
    assert [link.to_node for link in swivel.outputs["Solution"].links] == [node]
    held = robot.held_joints(solver.hold_prismatic)
    wanted = swivel.swivel_angle
    assert node.solutions_found >= 2
    goal = IKTarget("flange", tuple(evaluator.control_pose(target, rig)[:3, 3]),
                    tuple(matrix_to_quaternion(evaluator.control_pose(target, rig)[:3, :3])))
    at_swivel = 0
    for _ in range(node.solutions_found):
        assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
        q = read_joint_values(rig, robot)
        _reaches(rig, robot, target, q)
        if abs((swivel_angle(robot, "flange", q, held) - wanted + np.pi) % (2 * np.pi) - np.pi) <= 2e-3:
            at_swivel += 1
        else:  # the end of a family that cannot swing to the ring's angle: Elbow Swivel itself cannot either
            assert set_swivel(robot, [goal], q, wanted, SolveOptions(backend="numpy", held_joints=held), "flange").saturated
    assert at_swivel >= 1  # the pose the arm had is at the ring's swivel


def test_the_arrows_before_find_solutions_say_so(blender):
    bpy = blender
    _rig_with_target(bpy, "arm6", [0.4, -1.1, 1.3, -0.9, 1.2, 0.3])
    with pytest.raises(RuntimeError, match="Find Solutions first"):
        bpy.ops.kinema.step_configuration(step=1)


def test_configuration_node_index_picks_the_same_branch_on_every_frame(blender):
    from kinema_nodes.core.stages.configurations import clear_cache
    from kinema_nodes.blender.rig import read_joint_values

    bpy = blender
    clear_cache()
    q = [0.4, -1.1, 1.3, -0.9, 1.2, 0.3]
    rig, robot, tree, _target, solver = _rig_with_target(bpy, "arm6", q)
    node = tree.nodes.new("KinemaConfigurationNode")
    tree.links.new(solver.outputs["Solution"], node.inputs["Solution"])
    node.configuration_index = 3
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    chosen = read_joint_values(rig, robot)
    assert "configuration 3 of 8" in solver.summary, solver.summary
    assert not same_branch(robot, chosen, np.array(q))
    for frame in (5, 2, 9):
        bpy.context.scene.frame_set(frame)
        assert np.abs(read_joint_values(rig, robot) - chosen).max() < 1e-5
    node.configuration_index = 0
    bpy.context.view_layer.update()
    assert "configuration 0" in solver.summary


# ---- the CLI ------------------------------------------------------------------------------

_KERNEL_CACHED = []


def _cli(*args):
    """`kinema-nodes configs ...` in a fresh process. Once per session the compiled kernel is built
    into the cache folder first, in a process of its own: `configs --render` waits for a kernel
    build before it loads Blender, and on a machine that never built it (a fresh
    CI leg, two workers compiling at once) that build alone took most of the 300 s given below."""
    import subprocess

    if not _KERNEL_CACHED:
        build = subprocess.run([sys.executable, "-c", "from kinema_nodes.core.solve import kernel_status; "
                                "print(kernel_status(wait=True))"], capture_output=True, text=True, timeout=1200, check=False)
        assert build.returncode == 0, build.stderr
        _KERNEL_CACHED.append(build.stdout)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", "configs", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_cli_configs_lists_every_configuration_as_json_and_renders_a_contact_sheet(robots, tmp_path):
    import json

    from PIL import Image

    robot = robots("arm6")
    q = np.array([0.4, -1.1, 1.3, -0.9, 1.2, 0.3])
    target, _ = _target(robot, q, "tool_tcp")
    current = [f"{n}={float(v)!r}" for n, v in zip(robot.actuated_joint_names, q)]
    picture = tmp_path / "sheet.png"
    run = _cli("arm6", "--link", "tool_tcp", "--target", *(repr(float(v)) for v in (*target.position, *target.wxyz)),
               "--start", *current, "--json", "--render", str(picture))
    assert run.returncode == 0, run.stderr
    payload = json.loads(run.stdout)
    configurations = payload["configurations"]
    assert len(configurations) == 8 and configurations[0]["current"] and sum(c["current"] for c in configurations) == 1
    for c in configurations:
        assert set(c["joints"]) == set(robot.actuated_joint_names)
        assert c["position_error"] <= 1e-5 and c["rotation_error"] <= 1e-5
    with Image.open(picture) as sheet:
        assert sheet.size[0] >= 4 * 300 and sheet.size[1] >= 2 * 250  # 8 tiles, 4 per row


def test_cli_configs_errors_are_one_line(tmp_path):
    run = _cli("arm6", "--link", "no_such_link", "--target", "0.5", "0", "0.5", "1", "0", "0", "0")
    assert run.returncode != 0 and len(run.stderr.strip().splitlines()) == 1 and "no_such_link" in run.stderr
    run = _cli("arm6", "--target", "0.5", "0", "0.5", "1", "0", "0", "0", "--render", str(tmp_path / "x.jpg"))
    assert run.returncode != 0 and ".png" in run.stderr


def test_a_keyed_configuration_index_steps_on_its_keyed_frames(blender):
    from kinema_nodes.core.stages.configurations import clear_cache
    from kinema_nodes.blender.edit import key_configuration_index
    from kinema_nodes.blender.rig import read_joint_values

    bpy = blender
    clear_cache()
    q = [0.4, -1.1, 1.3, -0.9, 1.2, 0.3]
    rig, robot, tree, _target, solver = _rig_with_target(bpy, "arm6", q)
    node = tree.nodes.new("KinemaConfigurationNode")
    tree.links.new(solver.outputs["Solution"], node.inputs["Solution"])
    key_configuration_index(node, 1, index=2)
    key_configuration_index(node, 10, index=5)
    scene = bpy.context.scene
    poses = {}
    for frame in range(1, 15):
        scene.frame_set(frame)
        expected = 5 if frame >= 10 else 2
        assert node.configuration_index == expected
        assert f"configuration {expected} of 8" in solver.summary, (frame, solver.summary)
        poses.setdefault(expected, []).append(read_joint_values(rig, robot))
    for same in poses.values():
        assert max(np.abs(p - same[0]).max() for p in same) < 1e-5
    assert not same_branch(robot, poses[2][0], poses[5][0])
