"""A carried object joins the robot's collision model for Avoid Collisions (#30 item 5), in real
Blender on the Franka Panda of example-robot-data, through the add-on's own buttons.

The shot: an IK target keyed to lead the tool (pointing down) 0.5 m sideways at 0.4 m height; a
20 cm stick hangs from the tool point, grasped with Key Grasp at frame 1; a 4 cm bar lies across
the path 15 cm below the tool, where the stick's lower half passes but the hand (12 cm above it)
does not. Bar and stick are both in the Solver's Obstacles collection: a carried object is no
obstacle to the robot that carries it, only to the others.

- Without the grasp, the same move passes: every frame converges, the robot's meshes clear the
  bar, and the stick, where the tool would hold it, goes through the bar (FCL finds them touching)
  on some frame: so the test below can fail.
- With the grasp, every frame keeps the stick the margin away from the bar, judged by FCL on the
  stick's and the bar's own triangles (and on the robot's URDF meshes); the frames whose target
  would put the stick in the bar stop short and say the stick is what stopped them; Bake keys
  what playback showed (1e-6 rad).

Tolerance: the margin is kept to 0.9 of it (`_avoiding.KEPT`: the descent settles a hair inside
it), i.e. 4.5 mm under 5 mm, less 1e-5 m for the float32 pose bones the carried pose is read from.
"""

from __future__ import annotations

import numpy as np
import pytest
from mesh_check import RobotMeshes, mesh_distance, obstacle_object
from rig_helpers import import_rig, joints_of, robot_of
from test_animator_workflow import add_target, key_control

FRAMES = 21
MARGIN_MM = 5.0
#: Tool height (m), the stick's size (m) and the bar's height (m) under the tool.
TOOL_Z, STICK, BAR_Z = 0.4, (0.04, 0.04, 0.2), 0.25


def _tool_pose(y: float) -> np.ndarray:
    """The tool point at (0.5, y, TOOL_Z), its z axis pointing down."""
    return np.array([[1.0, 0.0, 0.0, 0.5], [0.0, -1.0, 0.0, y], [0.0, 0.0, -1.0, TOOL_Z], [0.0, 0.0, 0.0, 1.0]])


def _stick_offset() -> np.ndarray:
    """The stick in the tool point's frame: hanging from it, along its z axis, scale included."""
    offset = np.diag([*STICK, 1.0])
    offset[2, 3] = STICK[2] / 2.0
    return offset


def _cube(bpy, name, matrix, collection):
    from mathutils import Matrix

    bpy.ops.mesh.primitive_cube_add(size=1.0)
    obj = bpy.context.active_object
    obj.name = name
    obj.matrix_world = Matrix(np.asarray(matrix).tolist())
    for other in list(obj.users_collection):
        other.objects.unlink(obj)
    collection.objects.link(obj)
    return obj


def _shot(bpy, grasp: bool):
    """The rig, its solver (Avoid Collisions on, self included), the stick and the bar."""
    from kinema_nodes.blender.grasping import link_world

    rig = import_rig(bpy, "panda", active=True)
    robot = robot_of(rig)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    tree, target, solver = add_target(bpy, rig, robot.tool_point)
    key_control(bpy, rig, target, {1: _tool_pose(-0.25), FRAMES: _tool_pose(0.25)})
    scene.frame_set(1)
    assert solver.summary.startswith("converged"), solver.summary
    obstacles = bpy.data.collections.new("Obstacles")
    scene.collection.children.link(obstacles)
    stick = _cube(bpy, "Stick", link_world(rig, robot.tool_point) @ _stick_offset(), obstacles)
    bar = np.diag([0.4, 0.04, 0.04, 1.0])
    bar[:3, 3] = (0.5, 0.0, BAR_Z)
    bar = _cube(bpy, "Bar", bar, obstacles)
    bpy.context.view_layer.objects.active = rig
    if grasp:
        assert bpy.ops.kinema.key_grasp(object_name="Stick") == {"FINISHED"}
    else:
        obstacles.objects.unlink(stick)  # the stick left on the floor is not in the way
        scene.collection.objects.link(stick)
    solver.obstacles = obstacles
    solver.avoid_self = True
    solver.margin_mm = MARGIN_MM
    return rig, robot, solver, stick, bar


def _fcl(obj, matrix=None):
    """An object's own triangles, placed at `matrix` (its world pose by default), as FCL sees them."""
    matrix = np.array(obj.matrix_world if matrix is None else matrix, dtype=float)
    vertices = np.array([matrix[:3, :3] @ np.array(v.co) + matrix[:3, 3] for v in obj.data.vertices])
    obj.data.calc_loop_triangles()
    return obstacle_object(vertices, np.array([t.vertices[:] for t in obj.data.loop_triangles]))


def _distance(a, b) -> float:
    import fcl

    if fcl.collide(a, b, fcl.CollisionRequest(), fcl.CollisionResult()):
        return 0.0
    return float(fcl.distance(a, b, fcl.DistanceRequest(), fcl.DistanceResult()))


def test_without_the_grasp_the_move_passes_and_would_drag_the_stick_through_the_bar(blender):
    pytest.importorskip("fcl")
    from kinema_nodes.blender.grasping import link_world

    bpy = blender
    rig, robot, solver, stick, bar = _shot(bpy, grasp=False)
    meshes = RobotMeshes(robot)
    margin = MARGIN_MM / 1000.0
    through = []
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        distance, link = mesh_distance(meshes, joints_of(rig), [_fcl(bar)])
        assert distance >= 0.9 * margin, (frame, distance, link)
        held_there = link_world(rig, robot.tool_point) @ _stick_offset()
        if _distance(_fcl(stick, held_there), _fcl(bar)) == 0.0:
            through.append(frame)
    assert through, "the move never takes the stick through the bar: the test below would prove nothing"


def test_a_carried_stick_keeps_the_margin_from_the_bar(blender):
    pytest.importorskip("fcl")
    bpy = blender
    rig, robot, solver, stick, bar = _shot(bpy, grasp=True)
    meshes = RobotMeshes(robot)
    margin = MARGIN_MM / 1000.0
    stopped = []
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        clear = _distance(_fcl(stick), _fcl(bar))
        assert clear >= 0.9 * margin - 1e-5, (frame, clear, solver.summary)
        distance, link = mesh_distance(meshes, joints_of(rig), [_fcl(bar)])
        assert distance >= 0.9 * margin - 1e-5, (frame, distance, link)
        if not solver.summary.startswith("converged"):
            assert "Stick" in solver.summary, (frame, solver.summary)
            stopped.append(frame)
    assert stopped, "no frame was stopped by the stick"
    for frame in (1, FRAMES):  # the ends, clear of the bar, are reached
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)

    # Bake keys what playback showed: the carried stick is in the bake's collision model too.
    from kinema_nodes.blender.baking import bake_tree

    frames = list(range(1, FRAMES + 1))
    played = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        played[frame] = joints_of(rig)
    solver.live = False
    (baked,) = bake_tree(rig.kinema_tree, 1, FRAMES)
    np.testing.assert_allclose(baked.solution.joints, np.array([played[f] for f in frames]), atol=1e-6)
    assert not baked.report.in_collision


def test_the_gripper_may_touch_what_it_grasps_and_the_arm_keeps_clear_of_it(blender):
    """A box in the Obstacles collection, held by the Panda's closed fingers (Close on the Object)
    and released at frame 6, the tool then backing up 10 cm with the fingers still closed until
    frame 8: the fingers touch the released box, and that is allowed (every frame converges); the
    arm's other links keep the 5 mm margin from it (FCL, 0.9 of it less 1e-5 m)."""
    pytest.importorskip("fcl")
    from kinema_nodes.blender.grasping import link_world
    from kinema_nodes.blender.rig import write_joint_values
    from kinema_nodes.core.collision.carried import touch_links
    from kinema_nodes.core.graph.registry import bl_idname

    bpy = blender
    rig = import_rig(bpy, "panda", active=True)
    robot = robot_of(rig)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    tree, target, solver = add_target(bpy, rig, robot.tool_point)
    lifted = _tool_pose(0.0)
    lifted[2, 3] += 0.1
    key_control(bpy, rig, target, {1: _tool_pose(0.0), 6: _tool_pose(0.0), 12: lifted})
    q = joints_of(rig)
    q[robot.joint_index("panda_finger_joint1")] = robot.upper[robot.joint_index("panda_finger_joint1")]
    write_joint_values(rig, robot, q)
    scene.frame_set(1)
    obstacles = bpy.data.collections.new("Obstacles")
    scene.collection.children.link(obstacles)
    box = _cube(bpy, "Box", link_world(rig, robot.tool_point) @ np.diag([0.03, 0.03, 0.03, 1.0]), obstacles)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.key_grasp(object_name="Box") == {"FINISHED"}
    gripper = tree.nodes.new(bl_idname("gripper"))
    tree.links.new(solver.outputs["Solution"], gripper.inputs["Solution"])
    gripper.close_on_object = True
    for frame, value in ((1, 1.0), (8, 1.0), (10, 0.0)):
        gripper.gripper_value = value
        gripper.keyframe_insert("gripper_value", frame=frame)
    scene.frame_set(6)
    assert bpy.ops.kinema.key_release(object_name="Box") == {"FINISHED"}
    solver.obstacles = obstacles
    solver.margin_mm = MARGIN_MM
    meshes = RobotMeshes(robot)
    others = set(robot.links) - touch_links(robot, robot.tool_point)
    margin = MARGIN_MM / 1000.0
    finger = robot.joint_index("panda_finger_joint1")
    for frame in range(1, 13):
        scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        q = joints_of(rig)
        if frame in (6, 7, 8):  # released, fingers still closed on it
            assert q[finger] < robot.upper[finger] - 0.01, (frame, q[finger])
        distance, link = mesh_distance(meshes, q, [_fcl(box)], links=others)
        assert distance >= 0.9 * margin - 1e-5, (frame, distance, link)


def test_plan_between_keys_carries_the_stick_round_the_bar(blender):
    """#31 Show, "a carried object is avoided", in Blender: the same shot with the stick grasped,
    Plan Between Keys on and a 10 mm margin. The keyed move (frames 1 -> 21) would drag the stick
    through the bar, so the segment is planned; on every frame of the played plan FCL finds the
    stick's own triangles (where the grasp puts it) and the Panda's URDF meshes at least 5 mm from
    the bar (the module doc of tests/blender/test_plan_between_keys_in_blender.py: 10 mm kept by
    the capsules every 0.005 rad, half of it for the step), less 1e-5 m for the float32 pose bones."""
    pytest.importorskip("fcl")
    pytest.importorskip("ompl")
    from kinema_nodes.blender.plan_between_keys import shot_plans
    from kinema_nodes.blender.plan_jobs import finish_plans

    bpy = blender
    rig, robot, solver, stick, bar = _shot(bpy, grasp=True)
    solver.margin_mm = 10.0
    solver.plan_between_keys = True
    scene = bpy.context.scene
    scene.frame_set(1)
    finish_plans()
    (segment,) = shot_plans(solver.id_data, solver.name).segments
    assert segment.plan.mode == "planned", segment.plan.to_dict()
    meshes = RobotMeshes(robot)
    floor = 0.005 - 1e-5
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        played = float(np.max(np.abs(joints_of(rig) - segment.plan.joints[frame - 1])))
        assert played < 2.4e-7, f"frame {frame}: {played} rad from the plan"  # the plan plays (one float32 step)
        clear = _distance(_fcl(stick), _fcl(bar))
        assert clear >= floor, f"frame {frame}: the stick within {clear * 1000:.2f} mm of the bar"
        distance, link = mesh_distance(meshes, joints_of(rig), [_fcl(bar)])
        assert distance >= floor, f"frame {frame}: {link} within {distance * 1000:.2f} mm of the bar"
