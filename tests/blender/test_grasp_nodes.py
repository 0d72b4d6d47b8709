"""Grasp and Gripper as nodes in the tree (#30 items 5 and 6), in real Blender, built as a user
builds them: Import URDF, Add IK Target, add the node from the registry, wire it, key it.

Robots from example-robot-data (not the bundled ones): the Franka Panda (7 axes, prismatic
fingers, one a mimic) and the Unitree Z1 (6 axes, one revolute jaw).

Tolerances: gripper joints within 1e-6 (rad or m; pose bones store float32) of the value's blend
and never past their limits by more than that; the carried object's world pose continuous to 1e-6 m (and 1e-6 in
each rotation-matrix entry) at both switches, as for the buttons (test_grasp.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from rig_helpers import import_rig, joints_of, robot_of
from test_animator_workflow import add_target, key_control

ROBOTS = {"panda": "panda", "z1": "z1_description/urdf/z1.urdf"}
END = 24


def _rig_with_target(bpy, name):
    rig = import_rig(bpy, ROBOTS[name] if name == "panda" else str(example_robots_folder() / ROBOTS[name]), active=True)
    robot = robot_of(rig)
    tree, target, solver = add_target(bpy, rig, robot.tool_point)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, END
    return rig, robot, tree, target, solver


def _new_node(tree, kind):
    from kinema_nodes.core.graph.registry import bl_idname

    return tree.nodes.new(bl_idname(kind))


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_a_keyed_gripper_node_sets_the_held_gripper_joints_within_limits(blender, name):
    from kinema_nodes.core.gripper import gripper_ends

    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, name)
    gripper = _new_node(tree, "gripper")
    tree.links.new(solver.outputs["Solution"], gripper.inputs["Solution"])
    gripper.gripper_value = 0.0
    gripper.keyframe_insert("gripper_value", frame=1)
    gripper.gripper_value = 1.0
    gripper.keyframe_insert("gripper_value", frame=END)
    ends = gripper_ends(robot)
    assert ends, f"{name}: no gripper found"
    curve = tree.animation_data.action.fcurves if hasattr(tree.animation_data.action, "fcurves") else None
    seen = []
    for frame in range(1, END + 1):
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        value = float(gripper.gripper_value)
        if curve is not None:
            assert abs(value - curve[0].evaluate(frame)) < 1e-6
        q = joints_of(rig)
        for joint, (opened, closed) in ends.items():
            i = robot.joint_index(joint)
            assert robot.lower[i] - 1e-6 <= q[i] <= robot.upper[i] + 1e-6, (frame, joint, q[i])  # float32 pose bones
            assert abs(q[i] - (opened + value * (closed - opened))) <= 1e-6, (frame, joint, q[i], value)
        seen.append(value)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and 0.0 < seen[END // 2] < 1.0  # the key moved it across the range
    bpy.context.scene.frame_set(END)
    closed = joints_of(rig)
    bpy.context.scene.frame_set(END)  # solved again from where it is: the solver holds the fingers
    assert float(np.abs(joints_of(rig) - closed).max()) <= 1e-6


def test_a_gripper_node_naming_no_hand_of_the_robot_says_so(blender):
    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "panda")
    gripper = _new_node(tree, "gripper")
    tree.links.new(solver.outputs["Solution"], gripper.inputs["Solution"])
    gripper.hand = "panda_link3"
    bpy.context.scene.frame_set(2)
    assert "holds no gripper" in solver.summary, solver.summary


def _world(obj):
    return np.array(obj.matrix_world, dtype=float)


def test_a_grasp_node_carries_the_object_from_its_grasp_frame_to_its_release_frame(blender):
    """A Tool on the Panda's hand wired into the Grasp node's Link: the hand carries a box from
    frame 8 to frame 18, with no jump at either switch; keyed again, it replaces its own events."""
    from mathutils import Matrix

    from kinema_nodes.blender.grasping import link_world

    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "panda")
    down = np.array([[1.0, 0.0, 0.0, 0.45], [0.0, -1.0, 0.0, -0.2], [0.0, 0.0, -1.0, 0.35], [0.0, 0.0, 0.0, 1.0]])
    there = down.copy()
    there[:3, 3] = (0.35, 0.3, 0.5)
    key_control(bpy, rig, target, {1: down, END: there})
    scene = bpy.context.scene
    scene.frame_set(8)
    bpy.ops.mesh.primitive_cube_add(size=0.04)
    box = bpy.context.active_object
    box.name = "Box"
    box.matrix_world = Matrix((link_world(rig, robot.tool_point) @ np.diag([1.0, 1.0, 1.0, 1.0])).tolist())
    rest = _world(box)
    bpy.context.view_layer.objects.active = rig

    robot_node = next(n for n in tree.nodes if n.bl_idname == "KinemaRobotNode")
    tool = _new_node(tree, "tool")
    tool.link_name = "panda_hand"
    grasp = _new_node(tree, "grasp")
    tree.links.new(robot_node.outputs["Robot"], grasp.inputs["Robot"])
    tree.links.new(tool.outputs["Link"], grasp.inputs["Link"])
    grasp.carried, grasp.grasp_frame, grasp.release_frame = box, 8, 18
    assert bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name) == {"FINISHED"}
    assert [(e.frame, e.kind, e.link) for e in box.kinema_grasps] == [(8, "GRASP", "panda_hand"), (18, "RELEASE", "")]
    assert scene.frame_current == 8  # keying visits the frames and comes back
    scene.frame_set(7)
    assert np.abs(_world(box) - rest).max() <= 1e-6  # before the grasp it waits where it was
    scene.frame_set(8)
    assert np.abs(_world(box) - rest).max() <= 1e-6  # no jump at the grasp
    scene.frame_set(17)
    before = _world(box)
    offset = np.linalg.inv(link_world(rig, "panda_hand")) @ before
    scene.frame_set(12)
    assert np.abs(np.linalg.inv(link_world(rig, "panda_hand")) @ _world(box) - offset).max() <= 1e-6  # rigid on the hand
    scene.frame_set(18)
    carried = link_world(rig, "panda_hand") @ offset
    assert np.abs(_world(box) - carried).max() <= 1e-6  # no jump at the release
    assert np.abs(carried[:3, 3] - rest[:3, 3]).max() > 0.05  # and it did travel
    scene.frame_set(END)
    assert np.abs(_world(box) - carried).max() <= 1e-6  # released, it stays where it was put

    grasp.release_frame = 20
    assert bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name) == {"FINISHED"}
    assert [(e.frame, e.kind) for e in box.kinema_grasps] == [(8, "GRASP"), (20, "RELEASE")]
    scene.frame_set(7)
    assert np.abs(_world(box) - rest).max() <= 1e-6  # keyed again from where it was before any grasp


def test_a_grasp_node_without_its_object_says_what_is_missing(blender):
    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "panda")
    grasp = _new_node(tree, "grasp")
    with pytest.raises(RuntimeError, match="choose the object and connect a Robot node"):
        bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name)


def test_a_gripper_node_wins_over_the_panel_slider(blender):
    """A rig whose slider was moved, then given a Gripper node: the node's value is what every
    frame shows (the slider, applied after the solve, would undo it)."""
    from kinema_nodes.core.gripper import gripper_ends

    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "panda")
    rig.kinema_gripper[0] = 1.0  # the slider: closed
    gripper = _new_node(tree, "gripper")
    tree.links.new(solver.outputs["Solution"], gripper.inputs["Solution"])
    gripper.gripper_value = 0.25
    for frame in (2, 3):
        bpy.context.scene.frame_set(frame)
        for joint, (opened, closed) in gripper_ends(robot).items():
            assert abs(joints_of(rig)[robot.joint_index(joint)] - (opened + 0.25 * (closed - opened))) <= 1e-6, (frame, joint)


def test_two_grasp_nodes_hand_an_object_over_from_one_robot_to_another(blender):
    """A Panda's Grasp node takes a box at frame 4 (Release left at 0: never), a Z1's Grasp node
    takes it over at frame 14, each in its own rig's tree, both arms moving the whole time: the
    box is continuous at both switches (1e-6), rides on the Panda's hand in between and on the
    Z1's after, whatever the Panda does then."""
    from mathutils import Matrix

    from kinema_nodes.blender.grasping import link_world

    bpy = blender
    scene = bpy.context.scene
    rigs = {}
    for name, place in (("panda", (0.0, 0.0, 0.0)), ("z1", (0.8, 0.0, 0.0))):
        rig, robot, tree, target, solver = _rig_with_target(bpy, name)
        rig.location = place
        bpy.context.view_layer.update()
        start = np.array(rig.pose.bones[target.control_bone].matrix, dtype=float)
        later = start.copy()
        later[:3, 3] += (0.0, 0.06, -0.04) if name == "panda" else (0.0, -0.05, 0.04)
        key_control(bpy, rig, target, {1: start, END: later})
        rigs[name] = (rig, robot, tree)
    scene.frame_set(4)
    panda, panda_robot, panda_tree = rigs["panda"]
    z1, z1_robot, z1_tree = rigs["z1"]
    bpy.ops.mesh.primitive_cube_add(size=0.03)
    box = bpy.context.active_object
    box.name = "Box"
    box.matrix_world = Matrix(link_world(panda, panda_robot.tool_point).tolist())
    rest = _world(box)
    for (rig, robot, tree), frame in ((rigs["panda"], 4), (rigs["z1"], 14)):
        robot_node = next(n for n in tree.nodes if n.bl_idname == "KinemaRobotNode")
        grasp = _new_node(tree, "grasp")
        tree.links.new(robot_node.outputs["Robot"], grasp.inputs["Robot"])
        grasp.carried, grasp.grasp_frame, grasp.release_frame = box, frame, 0
        bpy.context.view_layer.objects.active = rig
        assert bpy.ops.kinema.key_grasp_node(tree=tree.name, node=grasp.name) == {"FINISHED"}
    assert [(e.frame, e.holder.name) for e in sorted(box.kinema_grasps, key=lambda e: e.frame)] == [(4, panda.name), (14, z1.name)]

    scene.frame_set(4)
    assert np.abs(_world(box) - rest).max() <= 1e-6  # no jump at the first grasp
    scene.frame_set(13)
    on_panda = np.linalg.inv(link_world(panda, panda_robot.tool_point)) @ _world(box)
    assert np.abs(on_panda - np.eye(4)).max() <= 1e-6  # carried by the Panda's tool point
    scene.frame_set(14)
    carried = link_world(panda, panda_robot.tool_point)  # where the Panda has it at 14 is where the Z1 takes it
    assert np.abs(_world(box) - carried).max() <= 1e-6  # no jump at the hand-over
    offset = np.linalg.inv(link_world(z1, z1_robot.tool_point)) @ _world(box)
    for frame in (18, END):
        scene.frame_set(frame)
        assert np.abs(np.linalg.inv(link_world(z1, z1_robot.tool_point)) @ _world(box) - offset).max() <= 1e-6, frame
        assert np.abs(_world(box) - link_world(panda, panda_robot.tool_point)).max() > 1e-3  # the Panda no longer holds it


def _finger_contact(robot, q, box_fcl, fingers) -> bool:
    """Whether the robot's finger meshes at q touch the box (FCL on the URDF's collision meshes)."""
    import fcl
    from mesh_check import RobotMeshes

    for link, part in RobotMeshes(robot).objects(q):
        if link in fingers and fcl.collide(part, box_fcl, fcl.CollisionRequest(), fcl.CollisionResult()):
            return True
    return False


@pytest.mark.parametrize("close_on_object", [True, False])
def test_a_gripper_closing_on_the_grasped_box_stops_at_its_sides(blender, close_on_object):
    """The Panda grasps a 3 cm box between its open fingers (Key Grasp), and a Gripper node keyed
    closed (1) with Close on the Object stops the fingers at the box's sides: judged by FCL on the
    fingers' URDF collision meshes and the box's own triangles, 0.1 mm more open they do not
    touch it, 1 mm more closed they do. Without it, the fingers close into the box."""
    pytest.importorskip("fcl")
    from mathutils import Matrix

    from kinema_nodes.blender.grasping import link_world
    from mesh_check import obstacle_object

    bpy = blender
    rig, robot, tree, target, solver = _rig_with_target(bpy, "panda")
    joint = robot.joint_index("panda_finger_joint1")
    q = joints_of(rig)
    q[joint] = robot.upper[joint]  # open
    from kinema_nodes.blender.rig import write_joint_values

    write_joint_values(rig, robot, q)
    bpy.context.scene.frame_set(1)
    bpy.ops.mesh.primitive_cube_add(size=0.03)
    box = bpy.context.active_object
    box.name = "Box"
    box.matrix_world = Matrix(link_world(rig, robot.tool_point).tolist())
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.key_grasp(object_name="Box") == {"FINISHED"}
    gripper = _new_node(tree, "gripper")
    tree.links.new(solver.outputs["Solution"], gripper.inputs["Solution"])
    gripper.close_on_object = close_on_object
    gripper.gripper_value = 1.0
    bpy.context.scene.frame_set(2)
    q = joints_of(rig)
    world_to_root = np.linalg.inv(np.array(rig.matrix_world, dtype=float))
    matrix = world_to_root @ _world(box)
    vertices = np.array([matrix[:3, :3] @ np.array(v.co) + matrix[:3, 3] for v in box.data.vertices])
    box.data.calc_loop_triangles()
    box_fcl = obstacle_object(vertices, np.array([t.vertices[:] for t in box.data.loop_triangles]))
    fingers = {"panda_leftfinger", "panda_rightfinger"}
    if not close_on_object:
        assert q[joint] == pytest.approx(robot.lower[joint], abs=1e-6)
        assert _finger_contact(robot, q, box_fcl, fingers)  # closed into the box: what the option prevents
        return
    assert "stopped on the object" in solver.summary, solver.summary
    assert robot.lower[joint] + 0.005 < q[joint] < robot.upper[joint] - 0.005, q[joint]  # stopped on the way
    wider, narrower = q.copy(), q.copy()
    wider[joint] += 1e-4
    narrower[joint] -= 1e-3
    assert not _finger_contact(robot, wider, box_fcl, fingers)
    assert _finger_contact(robot, narrower, box_fcl, fingers)
