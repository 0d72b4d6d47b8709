"""The shipped "Dual-arm hand-over" preset (#30 item 7) applied by role, through the operators,
to two dual-arm robots of example-robot-data: Baxter and PR2. As a user does it: Import URDF,
pose the arms, Apply Preset, put the object at the left hand, choose it on both Grasp nodes, Key
Grasp on each, play.

The preset keys each hand 45 % of the way toward the other by frame 20 (held to 28; the hands
then 10 % of their first distance apart), the left hand holds the object from frame 1, the right
takes it over at frame 24, and both hands go back to where they started by frame 45.

Its Left and Right Gripper nodes (hands by role) keep the left gripper closed until the
hand-over and open it from frame 24 to 26, and close the right one from 22 to 24.

Measured: every frame converges; at frame 20 the hands are 10 % of their first distance apart
(1e-4 m: the solver's tolerance on each); the object rides on the left hand to frame 23 and on
the right from 24 (its pose relative to the holder constant to 1e-6), with no jump at the hand-
over (1e-6 m); at frame 45 the right hand is back where it started (1e-4 m), holding it; each
hand's finger joints sit at the keyed value's open-closed blend (core.gripper.set_gripper;
1e-6), within their limits, and the other hand's fingers are not moved by it.
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from rig_helpers import pose_and_update, robot_of

ROBOTS = {
    "baxter": "baxter_description/urdf/baxter.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",
}
MEET, HAND_OVER, END = 20, 24, 45


@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path / "user_presets"))


def _start(robot):
    """Every joint a little off the middle of its range (a fixed draw), the gripper joints at
    zero, all within 5 % of the range from a limit."""
    rng = np.random.default_rng(3)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    q = robot.mid_configuration() + rng.uniform(-0.1, 0.1, robot.dof) * (upper - lower)
    for i, name in enumerate(robot.actuated_joint_names):
        if name in robot.held_joints():
            q[i] = np.clip(0.0, robot.lower[i], robot.upper[i])
    return np.clip(q, robot.lower + 0.05 * (upper - lower), robot.upper - 0.05 * (upper - lower))


def _world(obj):
    return np.array(obj.matrix_world, dtype=float)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_dual_arm_hand_over_applies_by_role_and_passes_the_object(blender, presets_folder, name):
    from mathutils import Matrix

    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.grasping import link_world
    from kinema_nodes.blender.presets import available_presets
    from kinema_nodes.core.roles import infer_roles

    bpy = blender
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robots_folder() / ROBOTS[name])) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_of(rig)
    pose_and_update(bpy, rig, _start(robot))
    roles = infer_roles(robot).links
    left, right = roles["left_hand"], roles["right_hand"]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, END
    scene.frame_set(1)
    left_0, right_0 = link_world(rig, left), link_world(rig, right)
    preset = next(str(path) for path, p in available_presets() if p.name == "Dual-arm hand-over")
    assert bpy.ops.kinema.apply_preset(preset=preset) == {"FINISHED"}
    tree = rig_tree(rig)
    nodes = {n.name: n for n in tree.nodes}
    solver = nodes["Solver"]
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0  # a loaded test machine must not pause live IK
    assert (nodes["Left Hand"].link_name, nodes["Right Hand"].link_name) == (left, right)  # bound by role
    assert (nodes["Left Grasp"].link_name, nodes["Right Grasp"].link_name) == (left, right)

    bpy.ops.mesh.primitive_cube_add(size=0.04)
    box = bpy.context.active_object
    box.name = "Box"
    held = np.eye(4)
    held[2, 3] = 0.02
    box.matrix_world = Matrix((left_0 @ held).tolist())
    bpy.context.view_layer.objects.active = rig
    for grasp in (nodes["Left Grasp"], nodes["Right Grasp"]):
        grasp.carried = box
        assert bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name) == {"FINISHED"}

    from kinema_nodes.blender.rig import read_joint_values
    from kinema_nodes.core.gripper import gripper_hand, gripper_hands, set_gripper

    fingers = dict(gripper_hands(robot))
    left_fingers, right_fingers = fingers[gripper_hand(robot, left)], fingers[gripper_hand(robot, right)]
    keyed = {"left": {1: 1.0, 24: 1.0, 26: 0.0, END: 0.0}, "right": {1: 0.0, 22: 0.0, 24: 1.0, END: 1.0}}
    hands, boxes = {}, {}
    for frame in range(1, END + 1):
        scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (name, frame, solver.summary)
        hands[frame] = (link_world(rig, left), link_world(rig, right))
        boxes[frame] = _world(box)
        q = read_joint_values(rig, robot)
        for side, link, joints in (("left", left, left_fingers), ("right", right, right_fingers)):
            if frame in keyed[side]:  # a keyed frame: the value is the key's
                want = set_gripper(robot, q, keyed[side][frame], link)
                for joint in joints:
                    i = robot.joint_index(joint)
                    assert abs(q[i] - want[i]) <= 1e-6, (name, side, frame, joint, q[i], want[i])
                    assert robot.lower[i] - 1e-9 <= q[i] <= robot.upper[i] + 1e-9
    for joint in left_fingers:  # closed, then open: the fingers moved
        i = robot.joint_index(joint)
        closed, opened = (set_gripper(robot, np.zeros(robot.dof), v, left)[i] for v in (1.0, 0.0))
        assert abs(closed - opened) > 1e-3, (name, joint, closed, opened)
    first = np.linalg.norm(right_0[:3, 3] - left_0[:3, 3])
    assert first > 0.1, first
    apart = np.linalg.norm(hands[MEET][1][:3, 3] - hands[MEET][0][:3, 3])
    assert abs(apart - 0.1 * first) <= 1e-4, (name, apart, first)  # 45 % of the way each
    on_left = np.linalg.inv(hands[1][0]) @ boxes[1]
    for frame in range(1, HAND_OVER):
        assert np.abs(np.linalg.inv(hands[frame][0]) @ boxes[frame] - on_left).max() <= 1e-6, (name, frame)
    assert np.abs(boxes[HAND_OVER] - hands[HAND_OVER][0] @ on_left).max() <= 1e-6  # no jump at the hand-over
    on_right = np.linalg.inv(hands[HAND_OVER][1]) @ boxes[HAND_OVER]
    for frame in range(HAND_OVER, END + 1):
        assert np.abs(np.linalg.inv(hands[frame][1]) @ boxes[frame] - on_right).max() <= 1e-6, (name, frame)
    assert np.linalg.norm(hands[END][1][:3, 3] - right_0[:3, 3]) <= 1e-4  # back where it started, holding it
    assert np.linalg.norm(boxes[END][:3, 3] - boxes[HAND_OVER][:3, 3]) > 0.5 * 0.45 * first  # carried away by the right


@pytest.mark.parametrize("value, problem", [
    ({"toward": "Nobody", "share": 0.5}, "not another IK Target"),
    ({"toward": "Left Hand", "share": 0.5}, "not another IK Target"),  # itself
    ({"toward": "Right Hand", "share": 1.5}, "\"share\": 0..1"),
    ({"toward": "Right Hand"}, "\"share\": 0..1"),
])
def test_a_hand_keyed_toward_no_other_control_is_refused_in_one_line(tmp_path, value, problem):
    import json
    from pathlib import Path

    import kinema_nodes
    from kinema_nodes.core.presets import PresetError, load_preset

    shipped = Path(kinema_nodes.__file__).parent / "presets" / "dual_arm_hand_over.json"
    data = json.loads(shipped.read_text())
    next(n for n in data["nodes"] if n["name"] == "Left Hand")["keys"]["control"][1][1] = value
    file = tmp_path / "absurd.json"
    file.write_text(json.dumps(data))
    with pytest.raises(PresetError) as caught:
        load_preset(file)
    message = str(caught.value)
    assert message.startswith(str(file)) and problem in message and "\n" not in message, message
