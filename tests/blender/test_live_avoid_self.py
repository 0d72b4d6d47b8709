"""Avoid Collisions on the robot itself, live, on the fast frame (#33): a Solver that keeps the
robot clear of itself answers its live frames through the same prepared call as a plain step
(no per-frame reading of the tree's inputs, solved before Blender evaluates a keyed frame), and
gives the answer `Program.run_step` gives with `core.solve.solve`. A live PyRoki rig's plain
solves inside the avoiding frame are tracking steps on the compiled kernel, as on its plain
frames, and are counted against the budget like any ordinary frame.

Robot: example-robot-data's Panda, keyed 5 cm over and down, with a margin wider than a gap
between its own links (so the avoiding descent runs, not only the plain solve). Tolerances:
joints 1e-9 rad against the core solve; clearances 1e-9 m.
"""

from __future__ import annotations

import numpy as np
import pytest
from rig_helpers import import_rig, robot_of
from test_animator_workflow import add_target, key_control


#: Wider than the Panda's link2-link5 gap at its import pose (0.204 m): the avoiding descent runs.
MARGIN_MM = 250.0


def _keyed_panda(bpy, backend="NUMPY", margin_mm=0.0):
    """The Panda with its control keyed from the import pose 5 cm over and down (frames 1-9),
    Avoid Collisions (the robot) on with `margin_mm`, Live IK off (frames are solved by hand)."""
    rig = import_rig(bpy, "panda", active=True)
    robot = robot_of(rig)
    tree, target, solver = add_target(bpy, rig, robot.tool_point, backend=backend)
    pose = np.array(rig.pose.bones[target.control_bone].matrix)
    moved = pose.copy()
    moved[:3, 3] += (0.02, 0.05, -0.05)
    key_control(bpy, rig, target, {1: pose, 9: moved})
    solver.avoid_self, solver.margin_mm = True, margin_mm
    return rig, robot, tree, target, solver


def test_avoid_self_on_the_fast_frame_gives_the_core_solve_answer_and_its_clearance(blender):
    """The Panda keyed over 9 frames with a 250 mm margin, frame by frame: the live frame
    (run_tree) runs on the fast frame and gives `Program.run_step`'s answer with `core.solve.solve`
    on the same rig state (1e-9 rad), the same readout line and clearance, and the readout shows
    the clearance; the plain answer (no avoidance) comes within the margin on some frame, so the
    avoiding descent really runs there."""
    from dataclasses import replace

    from kinema_nodes import evaluator
    from kinema_nodes.blender.rig import write_joint_values
    from kinema_nodes.core.collision import measure_pairs, prepare_pairs, summarise
    from kinema_nodes.session import readout

    bpy = blender
    rig, robot, tree, target, solver = _keyed_panda(bpy, margin_mm=MARGIN_MM)
    solver.live = False
    within_margin = 0
    for frame in range(1, 10):
        bpy.context.scene.frame_set(frame)
        program = evaluator.program_for(tree)
        step = program.steps[0]
        inputs = evaluator.frame_inputs(tree, program, step, frame)
        core = program.run_step(step, inputs)
        (live,) = evaluator.run_tree(tree, frame, force=True)
        assert evaluator.fast_frame(tree, step.node) is not None, "Avoid Self must run on the fast frame"
        np.testing.assert_allclose(live.joints, core.joints, rtol=0, atol=1e-9)
        assert live.summary == core.summary and live.converged == core.converged, (frame, live.summary, core.summary)
        assert live.result.min_clearance_m == pytest.approx(core.result.min_clearance_m, abs=1e-9)
        shown = readout(solver)
        assert shown["clearance"] == f"Clearance: {core.result.min_clearance_m * 1000:.1f} mm", shown
        plain = program.run_step(replace(step, options=replace(step.options, avoid=None)), inputs)  # no avoidance
        model, kin = prepare_pairs(robot, step.options.avoid)
        pairs, _ = measure_pairs(robot, model, kin, step.options.avoid, plain.joints)
        within_margin += summarise(pairs, step.options.avoid).min_m < MARGIN_MM / 1000.0
        write_joint_values(rig, robot, live.joints)
        bpy.context.view_layer.update()
    assert within_margin >= 1, "the plain answer always keeps the margin: the avoiding part is not exercised"


def test_a_grasped_object_sends_avoid_self_back_to_the_frame_inputs(blender, monkeypatch):
    """An object the rig holds is kept clear of the robot too, and only the frame's inputs read it:
    on a frame with a grasp the fast frame hands the frame to the general path (which reads the
    grasp), on a frame without one it answers itself (Panda, a cube grasped at frame 5)."""
    from kinema_nodes import evaluator

    bpy = blender
    rig, robot, tree, target, solver = _keyed_panda(bpy)
    solver.live = False
    mesh = bpy.data.meshes.new("cube")
    mesh.from_pydata([(x, y, z) for x in (-0.01, 0.01) for y in (-0.01, 0.01) for z in (-0.01, 0.01)], [],
                     [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)])
    cube = bpy.data.objects.new("Cube", mesh)
    bpy.context.scene.collection.objects.link(cube)
    bpy.context.scene.frame_set(5)
    from mathutils import Matrix

    from kinema_nodes.blender.grasping import link_world

    cube.matrix_world = Matrix(link_world(rig, robot.tool_point).tolist())
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.key_grasp(object_name="Cube") == {"FINISHED"}
    read = []
    real = evaluator.frame_inputs
    monkeypatch.setattr(evaluator, "frame_inputs", lambda *a, **k: read.append(a[3]) or real(*a, **k))
    for frame in (2, 7):
        bpy.context.scene.frame_set(frame)
        (result,) = evaluator.run_tree(tree, frame, force=True)
        assert result.joints is not None and result.result.min_clearance_m is not None, result.summary
    assert read == [7], read  # frame 2: no grasp, the fast frame; frame 7: the grasp, the frame's inputs


def test_a_live_pyroki_rig_avoiding_itself_tracks_on_the_kernel_and_counts_against_its_budget(blender):
    """PyRoki chosen, Avoid Collisions (the robot) on, a keyed Panda: an ordinary live frame says it
    is a tracking step on the compiled kernel, gives the NumPy solver's answer to the bit, and a
    budget no frame can meet pauses live updates after the usual run of slow frames."""
    from kinema_nodes.core.solve import TRACKING_NOTE, kernel_status, wait_for_pyroki
    from kinema_nodes.evaluator import SLOW_FRAMES_TO_PAUSE
    from kinema_nodes.session import readout
    from rig_helpers import joints_of

    bpy = blender
    rig, robot, tree, target, solver = _keyed_panda(bpy, backend="PYROKI")
    wait_for_pyroki()
    kernel_status(wait=True)
    scene = bpy.context.scene
    seen = {}
    for frame in range(1, 6):
        scene.frame_set(frame)
        shown = readout(solver)
        assert shown["summary"].startswith("converged"), shown
        assert TRACKING_NOTE in shown["backend_note"] and "Clearance" in shown["clearance"], shown
        seen[frame] = joints_of(rig)
    solver.backend = "NUMPY"
    scene.frame_set(1)
    for frame in range(2, 6):
        scene.frame_set(frame)
        np.testing.assert_array_equal(joints_of(rig), seen[frame])
    solver.backend = "PYROKI"
    scene.frame_set(6)  # the switch back is a one-off, never counted
    solver.budget_ms = 0.001  # the least it takes: no frame meets it
    for frame in range(2, 2 + SLOW_FRAMES_TO_PAUSE):  # keyed frames, each a new goal
        assert not solver.over_budget, frame
        scene.frame_set(frame)
    assert solver.over_budget
