"""Plan Between Keys in Blender (issue #31): the Solver's option, through the panel's operators,
on a real Panda and a real box obstacle (a Blender cube made an obstacle by Obstacles from
Selection).

The control is keyed at frames 1, 49, 61 and 65 (24 fps): 1 -> 49 carries the tool across the
box at a height the box stands above, so the per-frame answers cannot pass it; 49 -> 61 lifts the
tool on the far side, clear of everything; 61 -> 65 crosses back low over the box in five frames,
far fewer than the Panda's velocity limits allow. Checked: the first segment is planned and goes
round the box (FCL on the URDF's meshes against the cube's own triangles, every frame and 10
samples between frames); scrubbing shows the plan's joints, the same bits every time; the bake
(bpy.ops.kinema.bake) keys exactly those; the clear segment is left to the per-frame IK; the short
one is flagged with its shortest duration in the Solver's readout; moving the last key re-plans
only the last segment.

Tolerances: the plan keeps 10 mm by the capsules every 0.005 rad of joint motion, so FCL must
find at least 5 mm (what one such step can move a point 1 m from a joint axis); every comparison
of joints is exact."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rig_helpers import import_rig, joints_of, robot_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

pytest.importorskip("fcl")
pytest.importorskip("ompl")

DOWN = np.diag([1.0, -1.0, -1.0])  # the tool pointing down (wxyz 0, 1, 0, 0)
KEYS = {1: (0.4, -0.4, 0.25), 49: (0.4, 0.4, 0.25), 61: (0.4, 0.4, 0.40), 65: (0.4, -0.4, 0.15)}


def pose(position):
    matrix = np.eye(4)
    matrix[:3, :3] = DOWN
    matrix[:3, 3] = position
    return matrix


def key_control(bpy, rig, target, keys):
    from mathutils import Matrix

    bone = rig.pose.bones[target.control_bone]
    for frame, position in keys.items():
        bone.matrix = Matrix(pose(position).tolist())
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)


def panda_over_a_box(bpy):
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.rig import write_joint_values

    rig = import_rig(bpy, "panda", active=True)
    robot = robot_of(rig)
    write_joint_values(rig, robot, robot.mid_configuration())
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_start, scene.frame_end = 1, 65
    tree, target, solver = add_ik_target(bpy.context, rig, robot.tool_point, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 60_000.0
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.4, 0.0, 0.15))
    box = bpy.context.active_object
    box.name, box.scale = "Box", (0.15, 0.15, 0.3)
    bpy.context.view_layer.update()
    bpy.context.view_layer.objects.active = rig
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj == box)
    assert bpy.ops.kinema.obstacles_from_selection() == {"FINISHED"}
    solver.margin_mm = 10.0
    key_control(bpy, rig, target, KEYS)
    return rig, robot, tree, target, solver, box


def scrub(bpy, rig, frames):
    seen = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        seen[frame] = joints_of(rig)
    return seen


def box_triangles(bpy, rig, box):
    matrix = np.array(rig.matrix_world.inverted() @ box.matrix_world)
    vertices = np.array([matrix[:3, :3] @ np.array(v.co) + matrix[:3, 3] for v in box.data.vertices])
    box.data.calc_loop_triangles()
    return vertices, np.array([t.vertices[:] for t in box.data.loop_triangles])


@pytest.mark.slow  # about 25 s on one core: Avoid Collisions solves 65 frames three times (the plans' job, the bake, the re-plan)
def test_plan_between_keys_goes_round_the_box_plays_and_bakes_the_same_plan_and_replans_only_what_changed(blender):
    bpy = blender
    from mesh_check import RobotMeshes, mesh_distance, obstacle_object

    from kinema_nodes.blender.plan_between_keys import shot_plans
    from kinema_nodes.blender.plan_jobs import finish_plans
    from kinema_nodes.ui.collisions_panel import KINEMA_PT_ik_avoid_collisions
    from recording_layout import draw_panel

    rig, robot, tree, target, solver, box = panda_over_a_box(bpy)
    solver.plan_between_keys = True
    layout = draw_panel(KINEMA_PT_ik_avoid_collisions)  # the panel's toggle is the node's own property
    assert ("plan_between_keys", "KinemaSolverNode") in {(c[2], getattr(c[1], "bl_idname", "")) for c in layout.calls
                                                        if c[0] == "prop"}

    bpy.context.scene.frame_set(1)  # a live frame finds no plans yet and asks for them
    assert solver.plan_text.startswith("Planning")
    finish_plans()
    shot = shot_plans(tree, solver.name)
    assert [(s.first, s.last) for s in shot.segments] == [(1, 49), (49, 61), (61, 65)]
    over, clear, short = (s.plan for s in shot.segments)
    assert over.mode == "planned" and not over.flag, over.to_dict()
    assert clear.mode == "per-frame", clear.to_dict()
    assert short.mode == "planned" and short.shortest_duration_s > 4 / 24, short.to_dict()
    assert "too few frames" in short.flag and f"frames 61-65: {short.flag}" in solver.plan_text

    # scrubbing shows the plan, the same bits forward and backward (the clear segment's frames are
    # per-frame IK, warm-started from the frame before: not compared)
    frames = list(range(1, 66))
    planned_frames = [*range(1, 50), *range(61, 66)]
    first = scrub(bpy, rig, frames)
    again = scrub(bpy, rig, frames[::-1])
    for frame in planned_frames:
        assert np.array_equal(first[frame], again[frame]), frame
    for frame in range(1, 50):
        assert np.allclose(first[frame], over.joints[frame - 1], atol=1e-6), frame  # pose bones hold float32
    bpy.context.scene.frame_set(25)
    assert solver.summary == "planned between keys"
    bpy.context.scene.frame_set(55)
    assert solver.summary != "planned between keys"  # the clear segment: the per-frame IK, untouched

    # round the box, not through it: FCL on the URDF's meshes against the cube's own triangles
    meshes = RobotMeshes(robot)
    cube = [obstacle_object(*box_triangles(bpy, rig, box))]
    t = np.arange(11)[:, None] / 11
    dense = np.concatenate([a + (b - a) * t for a, b in zip(over.joints[:-1], over.joints[1:])] + [over.joints[-1:]])
    least = min(mesh_distance(meshes, q, cube)[0] for q in dense)
    assert least >= 0.005, least
    from kinema_nodes.core.model.kinematics import link_pose

    # halfway, the keyed control is inside the box; the planned tool is not
    assert np.all(np.abs(np.array(KEYS[1]) / 2 + np.array(KEYS[49]) / 2 - (0.4, 0.0, 0.15)) < (0.075, 0.075, 0.15))
    tool = np.array([link_pose(robot, q, robot.tool_point)[:3, 3] for q in over.joints])
    outside = np.max(np.abs(tool - (0.4, 0.0, 0.15)) - (0.075, 0.075, 0.15), axis=1)
    assert outside.min() > 0.005, outside.min()

    # the bake keys exactly what playback shows (the plans from the cache, the keyed values read back as the live ones)
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    solver.live = False
    keyed = scrub(bpy, rig, frames)
    for frame in planned_frames:
        assert np.array_equal(keyed[frame], first[frame]), frame
    solver.live = True

    # moving the last key re-plans the last segment only
    key_control(bpy, rig, target, {65: (0.4, -0.4, 0.17)})
    bpy.context.scene.frame_set(30)
    finish_plans()
    moved = shot_plans(tree, solver.name)
    assert moved.segments[0].plan is over and moved.segments[1].plan is clear
    assert moved.segments[2].plan is not short and moved.segments[2].key != shot.segments[2].key


def test_a_clear_shot_is_left_to_the_per_frame_ik_live_and_in_the_bake(blender):
    """Keys whose in-betweens keep clear of the box: the one segment stays per-frame, and the live
    frames and the bake are what they are with the option off."""
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.plan_between_keys import shot_plans
    from kinema_nodes.blender.plan_jobs import finish_plans
    from kinema_nodes.blender.rig import write_joint_values

    rig, robot, tree, target, solver, box = panda_over_a_box(bpy)
    rig.animation_data_clear()  # this shot's own keys instead
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 9
    key_control(bpy, rig, target, {1: (0.4, 0.3, 0.4), 9: (0.3, 0.4, 0.45)})
    start = robot.mid_configuration()

    def shot():
        write_joint_values(rig, robot, start)
        bpy.context.view_layer.update()
        return scrub(bpy, rig, range(1, 10))

    plain = shot()
    plain_bake = bake_tree(tree, 1, 9)[0].solution.joints
    solver.plan_between_keys = True
    bpy.context.scene.frame_set(1)
    finish_plans()
    (segment,) = shot_plans(tree, solver.name).segments
    assert (segment.first, segment.last, segment.plan.mode) == (1, 9, "per-frame")
    assert solver.plan_text == "0 of 1 segments planned"
    live = shot()
    # the per-frame IK, as with the option off: each frame warm-started from the rig as it is, so
    # equal to the solver's own repeatability (1e-6 rad, as tests/blender/test_animator_workflow.py's bake against playback)
    for frame in range(1, 10):
        np.testing.assert_allclose(live[frame], plain[frame], atol=1e-6, rtol=0, err_msg=str(frame))
    assert solver.summary.startswith("converged")
    np.testing.assert_allclose(bake_tree(tree, 1, 9)[0].solution.joints, plain_bake, atol=1e-6, rtol=0)


def test_a_segment_too_short_for_the_limits_is_flagged_with_its_shortest_duration_and_baked_as_played(blender):
    """Five frames to cross low over the box: planned, timed to the five frames, flagged in the
    Solver's readout with the shortest duration the Panda's velocity limits allow; the bake keys
    the frames scrubbing shows, bit for bit."""
    bpy = blender
    from kinema_nodes.blender.plan_between_keys import shot_plans

    rig, robot, tree, target, solver, box = panda_over_a_box(bpy)
    rig.animation_data_clear()  # this shot's own keys instead
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 5
    key_control(bpy, rig, target, {1: KEYS[61], 5: KEYS[65]})
    solver.plan_between_keys = True
    bpy.context.scene.frame_set(1)
    assert solver.plan_text == "Planning: reading the keys"
    from kinema_nodes.blender import plan_jobs

    for _ in range(6000):  # the UI's timer, called as Blender would (the bpy module fires none)
        plan_jobs.tick()
        if not plan_jobs.JOBS and not plan_jobs.REQUESTS:
            break
        time.sleep(0.01)
    (segment,) = shot_plans(tree, solver.name).segments
    plan = segment.plan
    assert plan.mode == "planned" and len(plan.joints) == 5
    shortest = plan.shortest_duration_s
    assert shortest > 4 / 24
    assert f"needs at least {shortest:.3f} s" in plan.flag and "the keys leave 0.167 s (5 frames)" in plan.flag
    assert solver.plan_text == f"1 of 1 segments planned; frames 1-5: {plan.flag}"
    from recording_layout import draw_node, draw_panel

    from kinema_nodes.ui.collisions_panel import KINEMA_PT_ik_avoid_collisions

    for layout in (draw_panel(KINEMA_PT_ik_avoid_collisions), draw_node(solver)):  # the toggle and the readout, both places
        assert "plan_between_keys" in {c[2] for c in layout.calls if c[0] == "prop"}
        assert ("label", solver.plan_text, "ERROR") in layout.calls
    played = scrub(bpy, rig, range(1, 6))
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    solver.live = False
    keyed = scrub(bpy, rig, range(1, 6))
    for frame in range(1, 6):
        assert np.array_equal(keyed[frame], played[frame]), frame


def test_a_cached_plan_that_no_longer_meets_the_keys_is_planned_again_so_the_bake_never_jumps_at_a_key(blender, tmp_path):
    """A segment's plan is cached by its inputs, not by the keys' per-frame answers, so an edit
    before the segment can make IK take another branch at its first key with the plan still
    cached. Forced here: the cached plan is swapped for one 0.05 rad off on every joint (what a plan
    from the other branch looks like at the keys). The bake finds its ends off the per-frame
    answers by more than `KEY_TOLERANCE_RAD` (1e-4 rad), plans the segment again, and keys frames
    whose keys are the per-frame answers within that tolerance."""
    bpy = blender
    from dataclasses import replace

    from kinema_nodes.blender.baking import BakeJob, bake_tree
    from kinema_nodes.blender.rig import write_joint_values
    from kinema_nodes.core.plan.key_segments import KEY_TOLERANCE_RAD, SEGMENT_PLANS

    rig, robot, tree, target, solver, box = panda_over_a_box(bpy)
    rig.animation_data_clear()
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 5
    key_control(bpy, rig, target, {1: KEYS[61], 5: KEYS[65]})
    start = robot.mid_configuration()
    write_joint_values(rig, robot, start)
    bpy.context.view_layer.update()
    per_frame = bake_tree(tree, 1, 5)[0].solution.joints
    solver.plan_between_keys = True

    def bake():
        write_joint_values(rig, robot, start)
        bpy.context.view_layer.update()
        job = BakeJob(tree, 1, 5)
        (result,) = job.run()
        (segment,) = job.segments[solver.name]
        results.append(result)
        return result.solution.joints, segment

    results = []

    baked, segment = bake()
    assert segment.plan.mode == "planned"
    for k in (0, -1):
        np.testing.assert_allclose(baked[k], per_frame[k], atol=KEY_TOLERANCE_RAD, rtol=0)
    stale = replace(segment.plan, joints=segment.plan.joints + 0.05)
    SEGMENT_PLANS.put(segment.key, stale)
    again, replanned = bake()
    assert replanned.key == segment.key and replanned.plan is not stale and replanned.plan.mode == "planned"
    assert SEGMENT_PLANS.get(segment.key) is replanned.plan  # the cache holds the plan that meets the keys
    for k in (0, -1):  # no jump at either key
        assert np.max(np.abs(again[k] - per_frame[k])) <= KEY_TOLERANCE_RAD, (k, again[k] - per_frame[k])

    # the bake report counts the five frames as planned, not by their per-frame solve, and has
    # the segment's row with its least clearance; the report picture draws it
    report = results[-1].report
    assert report.planned == [1, 2, 3, 4, 5] and report.not_converged == [] and report.converged == 0
    (row,) = report.segments
    assert row == {"first": 1, "last": 5, "mode": "planned", "least_clearance_m": replanned.plan.least_clearance_m,
                   "flag": replanned.plan.flag}
    from kinema_nodes.core.shot.bake import BakeReport

    assert BakeReport.from_dict(report.to_dict()) == report
    from kinema_nodes.cli.report import draw_report, segment_lines

    assert segment_lines(report) == [f"frames 1–5: planned, least clearance {row['least_clearance_m'] * 1000:.1f} mm; "
                                     f"{row['flag']}"]
    from PIL import Image

    path = draw_report(tmp_path / "report.png", robot, results[-1], "planned")
    with Image.open(path) as image:
        assert image.size[0] == 1000 and image.size[1] > 200
    # the Bake node's panel: the frames counted as planned, and the segment's row
    from types import SimpleNamespace

    from recording_layout import RecordingLayout

    from kinema_nodes.nodes.bake import draw_report as draw_panel_report

    layout = RecordingLayout()
    draw_panel_report(SimpleNamespace(report=lambda: {"Panda": report.to_dict()}), layout)
    labels = [c[1:] for c in layout.calls if c[0] == "label"]
    assert ("Panda: 0/5 frames converged, 5 planned", "CHECKMARK") in labels, labels
    assert (f"Frames 1–5 planned, least clearance {row['least_clearance_m'] * 1000:.1f} mm", "IPO_EASE_IN_OUT") in labels


@pytest.mark.slow  # about 40 s on one core: the segment is planned twice (before and after the slider is keyed)
def test_a_keyed_box_that_slides_into_the_path_is_avoided_at_the_time_it_is_there(blender):
    """Issue #31 item 3. One segment, 1 -> 49, over the big box. A small 8 cm cube (the slider)
    first stands well aside; the segment is planned. Then the slider is keyed to slide in, 30 cm
    along x, to where that plan's tool is on frame 25, and out again by frame 49. Planned against
    the obstacles at the first key only, the old plan would meet it there (checked: FCL finds it
    inside the cube); the re-plan is checked against each frame's obstacles, rejected, and planned
    round the slider swept over the segment. Checked: on every frame of the played plan, FCL on
    the Panda's meshes keeps at least 5 mm from both boxes as they are on that frame (tolerance
    as the module doc: a 10 mm margin, half of it for the check's step)."""
    bpy = blender
    from mesh_check import RobotMeshes, mesh_distance, obstacle_object

    from kinema_nodes.blender.plan_between_keys import shot_plans
    from kinema_nodes.blender.plan_jobs import finish_plans
    from kinema_nodes.core.model.kinematics import link_pose

    rig, robot, tree, target, solver, box = panda_over_a_box(bpy)
    rig.animation_data_clear()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 49
    key_control(bpy, rig, target, {1: KEYS[1], 49: KEYS[49]})
    bpy.ops.mesh.primitive_cube_add(size=0.08, location=(0.4, 0.0, 1.2))  # out of the way, above everything
    slider = bpy.context.active_object
    slider.name = "Slider"
    bpy.context.view_layer.objects.active = rig
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj == slider)
    assert bpy.ops.kinema.obstacles_from_selection() == {"FINISHED"}
    solver.plan_between_keys = True
    scene.frame_set(1)
    finish_plans()
    (before,) = shot_plans(tree, solver.name).segments
    assert before.plan.mode == "planned", before.plan.to_dict()
    where = link_pose(robot, before.plan.joints[24], robot.tool_point)[:3, 3]
    world = np.array(rig.matrix_world)
    where = world[:3, :3] @ where + world[:3, 3]
    aside = where + (0.3, 0.0, 0.0)
    for frame, location in ((1, aside), (25, where), (49, aside)):
        slider.location = location
        slider.keyframe_insert("location", frame=frame)

    meshes = RobotMeshes(robot)

    def obstacles_on(frame):
        solver.live = False
        scene.frame_set(frame)
        solver.live = True
        return [obstacle_object(*box_triangles(bpy, rig, b)) for b in (box, slider)]

    on_25 = obstacles_on(25)
    assert mesh_distance(meshes, before.plan.joints[24], on_25[1:])[0] < 0.005  # the old plan meets the slider

    scene.frame_set(1)
    finish_plans()
    (after,) = shot_plans(tree, solver.name).segments
    assert after.key != before.key and after.plan.mode == "planned", after.plan.to_dict()
    least = min(mesh_distance(meshes, after.plan.joints[frame - 1], obstacles_on(frame))[0] for frame in range(1, 50))
    assert least >= 0.005, least
