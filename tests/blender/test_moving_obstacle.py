"""Avoid Collisions with a keyed moving obstacle (issue #29, item 14), in real Blender.

A crate keyed to slide through a 7-axis arm's elbow while the tool holds still. The README's
rule holds with avoidance too: a frame's pose depends only on that frame's inputs, so scrubbing
forward, backward, a second loop and jumping to a frame give the same pose, and Bake keys what playback showed; no
joint steps more than 0.5 rad between frames unless the bake flags the frame (the crate passing
through the elbow's place forces the elbow from one side of it to the other once); every frame
keeps the margin, judged by FCL on the robot's own meshes against the crate's own triangles.

Robots: robosuite's KUKA iiwa and Kinova Gen3 (7 axes, MJCF), which no other collision test uses.
Tolerances: the same pose by different paths 1e-6 rad (pose bones store float32; the solves
agree to ~2e-8 in double precision); the margin is kept to 0.9 of it (`_avoiding.KEPT`: the
descent settles a hair inside it), i.e. 0.5 mm under a 5 mm margin.
"""

from __future__ import annotations

import numpy as np
import pytest
from mesh_check import RobotMeshes, mesh_distance, obstacle_object
from rig_helpers import joints_of, robot_of, scrub
from test_animator_workflow import add_target, pose_rig
from test_first_contact_panel import robosuite_robot

#: robosuite folder: (a bent pose inside the limits, the link at the elbow the crate slides through)
ROBOTS = {
    "iiwa": ((0.0, 0.6, 0.0, -1.4, 0.0, 0.8, 0.0), "link_4"),
    "kinova3": ((0.0, 0.6, 0.0, 1.8, 0.0, 0.8, 1.57), "forearm_link"),
}
FRAMES = 24
MARGIN_MM = 5.0


def crossing_scene(bpy, name, backend="NUMPY"):
    """The arm bent at `ROBOTS[name]`, an IK target on its hand holding still there, and a 12 cm
    crate keyed to slide 1 m along y through the elbow, in the solver's Obstacles collection."""
    from kinema_nodes.core.model.kinematics import link_pose

    home, elbow_link = ROBOTS[name]
    assert bpy.ops.kinema.import_urdf(filepath=str(robosuite_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_of(rig)
    pose_rig(bpy, rig, home)
    tree, target, solver = add_target(bpy, rig, robot.tool_point, backend)
    elbow = link_pose(robot, np.array(home), elbow_link)[:3, 3]
    bpy.ops.mesh.primitive_cube_add(size=0.12, location=(elbow[0], elbow[1] - 0.5, elbow[2]))
    crate = bpy.context.active_object
    crate.name = "Crate"
    crate.keyframe_insert("location", frame=1)
    crate.location = (elbow[0], elbow[1] + 0.5, elbow[2])
    crate.keyframe_insert("location", frame=FRAMES)
    collection = bpy.data.collections.new("Obstacles")
    bpy.context.scene.collection.children.link(collection)
    collection.objects.link(crate)
    solver.obstacles = collection
    solver.margin_mm = MARGIN_MM
    bpy.context.view_layer.objects.active = rig
    return rig, tree, solver, crate


def crate_in_fcl(bpy, rig, crate):
    matrix = np.array(rig.matrix_world.inverted() @ crate.matrix_world)
    vertices = np.array([matrix[:3, :3] @ np.array(v.co) + matrix[:3, 3] for v in crate.data.vertices])
    crate.data.calc_loop_triangles()
    faces = np.array([t.vertices[:] for t in crate.data.loop_triangles])
    return obstacle_object(vertices, faces)


@pytest.mark.parametrize("backend", ["NUMPY", "PYROKI"])
@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_a_crate_sliding_through_the_elbow_gives_the_same_pose_forward_backward_looped_and_baked(blender, name, backend):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.core.solve import wait_for_pyroki

    rig, tree, solver, crate = crossing_scene(bpy, name, backend)
    wait_for_pyroki()  # the compile Add IK Target started: every frame below is PyRoki's, not the kernel's meanwhile
    robot = robot_of(rig)
    frames = list(range(1, FRAMES + 1))
    forward = scrub(bpy, rig, solver, frames)
    backward = scrub(bpy, rig, solver, frames[::-1])
    again = scrub(bpy, rig, solver, frames)
    for other in (backward, again):
        worst = max(float(np.abs(forward[f] - other[f]).max()) for f in frames)
        assert worst < 1e-6, worst
    for source, frame in ((1, 13), (FRAMES, 11), (6, 20), (20, 6)):  # jumped to, across the crate's crossing
        bpy.context.scene.frame_set(source)
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        assert float(np.abs(joints_of(rig) - forward[frame]).max()) < 1e-6, (source, frame)

    solver.live = False
    (baked,) = bake_tree(tree, 1, FRAMES)
    report = baked.report
    assert report.converged == FRAMES and not report.in_collision
    np.testing.assert_allclose(baked.solution.joints, np.array([forward[f] for f in frames]), atol=1e-6)

    # The elbow goes round the crate; a step over 0.5 rad only where the bake flags it, and only once.
    steps = {f + 1: float(np.abs(forward[f + 1] - forward[f]).max()) for f in frames[:-1]}
    jumps = [f for f, step in steps.items() if step > 0.5]
    assert set(jumps) <= set(report.flips), (steps, report.flips)
    assert len(jumps) <= 1, steps
    assert max(float(np.abs(forward[f] - forward[1]).max()) for f in frames) > 0.1  # the crate did move the arm

    # Clearance by FCL on the robot's meshes against the crate's own triangles, every frame.
    meshes = RobotMeshes(robot)
    margin = MARGIN_MM / 1000.0
    for f, ours in zip(frames, report.clearance):
        bpy.context.scene.frame_set(f)
        distance, link = mesh_distance(meshes, forward[f], [crate_in_fcl(bpy, rig, crate)])
        assert distance >= 0.9 * margin, (f, distance, link)
        assert ours <= distance + 1e-6  # our capsules hold the meshes
