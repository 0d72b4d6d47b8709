"""The shipped "Pick and place" preset (#30 item 7) applied by role to two robots of
example-robot-data, as a user does: pose the arm, Apply Preset, put the object at the tool point
at the grasp frame, choose it on the Grasp node, Key Grasp, play.

The Franka Panda (7 axes, prismatic fingers) and the Unitree Z1 (6 axes, one revolute jaw): on
both, the control is keyed through approach (8 cm up), grasp (frame 20), carry (15 cm along +Y,
8 cm up), place (frame 60) and retract; the gripper closes at 20 and opens at 62; the object is
carried from 20 and put down at 60, 15 cm along +Y of where it was picked.

Tolerances: the tool reaches each keyed control to the solver's tolerance (1e-5 m, 1e-5 rad); the
object is put down 15 cm along +Y to 1e-4 m (the tool's rotation error at the two frames times the
object's lever arm of a few cm); it stays put after the release to 1e-6 m; gripper joints match
the keyed value's blend to 1e-6 (float32 pose bones).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from rig_helpers import import_rig, joints_of, pose_and_update, robot_of

#: robot -> (file, a start pose away from singularities and limits, tool point above its workspace)
ROBOTS = {
    "panda": ("panda", [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5]),
    "z1": ("z1_description/urdf/z1.urdf", [0.2, 1.2, -1.2, -0.3, 0.1, 0.2]),
}
GRASP, RELEASE, END = 20, 60, 75
CARRY = np.array([0.0, 0.15, 0.0])


@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path / "user_presets"))


def _world(obj):
    return np.array(obj.matrix_world, dtype=float)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_pick_and_place_applies_by_role_and_carries_the_object_to_its_place(blender, presets_folder, name):
    from mathutils import Matrix

    from kinema_nodes.blender.grasping import link_world
    from kinema_nodes.blender.presets import apply_preset
    from kinema_nodes.core.gripper import gripper_ends

    bpy = blender
    path, start = ROBOTS[name]
    rig = import_rig(bpy, path if name == "panda" else str(example_robots_folder() / path), active=True)
    robot = robot_of(rig)
    q = robot.zero_configuration()
    q[: len(start)] = start
    pose_and_update(bpy, rig, np.clip(q, robot.lower, robot.upper))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, END
    tree = apply_preset(bpy.context, rig, "Pick and place", backend="NUMPY")
    nodes = {n.bl_idname: n for n in tree.nodes}
    target, solver = nodes["KinemaIKTargetNode"], nodes["KinemaSolverNode"]
    gripper, grasp = nodes["KinemaGripperNode"], nodes["KinemaGraspNode"]
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    assert target.link_name == robot.tool_point and grasp.link_name == robot.tool_point  # bound by role
    assert (grasp.grasp_frame, grasp.release_frame) == (GRASP, RELEASE)

    scene.frame_set(GRASP)
    assert solver.summary.startswith("converged"), solver.summary
    pick = link_world(rig, robot.tool_point)
    bpy.ops.mesh.primitive_cube_add(size=0.03)
    box = bpy.context.active_object
    box.name = "Box"
    held = np.eye(4)
    held[2, 3] = 0.015  # just past the tool point, along its axis
    box.matrix_world = Matrix((pick @ held).tolist())
    picked = _world(box)
    bpy.context.view_layer.objects.active = rig
    grasp.carried = box
    assert bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name) == {"FINISHED"}

    ends = gripper_ends(robot)
    assert ends
    for frame in range(1, END + 1):
        scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (name, frame, solver.summary)
        joints = joints_of(rig)
        for joint, (opened, closed) in ends.items():
            value = float(gripper.gripper_value)
            assert abs(joints[robot.joint_index(joint)] - (opened + value * (closed - opened))) <= 1e-6, (frame, joint)
        if frame < 18 or frame > 62:
            assert gripper.gripper_value == pytest.approx(0.0, abs=1e-6), frame  # open to approach and after the place
        if GRASP <= frame <= RELEASE:
            assert gripper.gripper_value == pytest.approx(1.0, abs=1e-6), frame  # closed while carrying
    scene.frame_set(1)
    assert link_world(rig, robot.tool_point)[2, 3] - pick[2, 3] == pytest.approx(0.08, abs=1e-4)  # the approach is above
    assert np.abs(_world(box) - picked).max() <= 1e-6  # waits where it was until the grasp
    scene.frame_set(RELEASE)
    placed = _world(box)
    assert np.abs(placed[:3, 3] - (picked[:3, 3] + CARRY)).max() <= 1e-4, placed[:3, 3] - picked[:3, 3]
    scene.frame_set(END)
    assert np.abs(_world(box) - placed).max() <= 1e-6  # put down, it stays
    assert link_world(rig, robot.tool_point)[2, 3] - placed[2, 3] > 0.05  # and the tool has backed away up


@pytest.mark.parametrize("node, key, rows, problem", [
    ("Tool", "control", [[1, [0.0, 0.0, 5.0]]], "within 1 m"),
    ("Tool", "control", [[1, [0.0, 0.0]]], "[frame, [dx, dy, dz]]"),
    ("Gripper", "gripper_value", [[1, 2.0]], "[frame, 0..1]"),
    ("Gripper", "control", [[1, [0.0, 0.0, 0.0]]], "belongs on a node of kind ik_target"),
])
def test_a_pick_and_place_preset_with_absurd_motion_keys_is_refused_in_one_line(tmp_path, node, key, rows, problem):
    import json

    import kinema_nodes
    from kinema_nodes.core.presets import PresetError, load_preset

    shipped = Path(kinema_nodes.__file__).parent / "presets" / "pick_and_place.json"
    data = json.loads(shipped.read_text())
    entry = next(n for n in data["nodes"] if n["name"] == node)
    entry.setdefault("keys", {})[key] = rows
    path = tmp_path / "absurd.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PresetError) as caught:
        load_preset(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message, message


def test_a_gripper_node_saved_with_its_hand_binds_it_as_a_link_reference(blender, presets_folder):
    """A Gripper node naming the Panda's hand is saved as a link reference, as every link in a
    preset is (the role it fills, or its name where no role describes it: the Panda's hand), and
    binds back to that link when applied."""
    from kinema_nodes.blender.presets import apply_preset, save_tree_as_preset
    from kinema_nodes.core.presets import load_preset
    from kinema_nodes.core.roles import resolve_roles

    bpy = blender
    rig = import_rig(bpy, "panda", active=True)
    tree = apply_preset(bpy.context, rig, "Pick and place", backend="NUMPY")
    gripper = next(n for n in tree.nodes if n.bl_idname == "KinemaGripperNode")
    gripper.hand = "panda_hand"
    role = resolve_roles(robot_of(rig)).role_of("panda_hand")
    path = save_tree_as_preset(tree, rig, "Pick with the hand")
    saved = next(n for n in load_preset(path).nodes if n["kind"] == "gripper")
    assert saved["params"]["hand"] == ({"role": role} if role else {"link": "panda_hand"})
    again = apply_preset(bpy.context, rig, "Pick with the hand", backend="NUMPY")
    assert next(n for n in again.nodes if n.bl_idname == "KinemaGripperNode").hand == "panda_hand"
