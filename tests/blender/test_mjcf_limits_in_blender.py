"""Missing limits are "no limit", not zero, in Blender (#29 item 16), driven as a user drives it.

An MJCF joint carries no speed limit unless a velocity actuator gives one. The core tests
(tests/core/test_mjcf_first_contact.py) cover the bake, the core limits check and the limits
dict; these cover the add-on's own operators and panel on two robosuite MJCF robots without
velocity actuators (Tiago, a mobile manipulator, and Spot Arm), imported with Import URDF/MJCF:

- Add IK Target, the control keyed at frames 1 and 40 a 1 cm move apart, Bake to Keyframes:
  every frame converges and none is flagged "too fast" (the bake's stored report, and the
  "Kinema: <why>" markers it puts on the timeline);
- Check Limits (`kinema.check_limits`): "within every limit checked", nothing in the velocity
  rows of its table, velocity not among the kinds it checked;
- Export Robot Trajectory (`kinema.export_trajectory`, JSON): the file's limits say velocity is
  not checked and every joint's velocity limit is null (the format's "no limit": `Limits.to_dict`
  writes None where a limit is infinite), never 0; no "limits exceeded" in the report line;
- the Bake sub-panel (drawn on `recording_layout`, the suite's one allowed stand-in for a
  window's layout): all 40 frames converged, no "too fast" line (other flags may stand: Spot
  Arm imports with joints near their limits and is flagged "near a limit", rightly), the
  limits box "within every limit checked", and no velocity row ("<joint> (vel)") or limit
  drawn as 0.

No panel draws a joint's velocity limit itself (the Joints panel shows position limits, the
Robot Limits box the acceleration and jerk settings and the last check's violations): a zero
velocity limit could only show through the violations it causes, which is what is asserted.

Tolerances: none needed. The move is 1 cm over 39 frames at the scene's 24 fps (about 6 mm/s),
far below any real joint's speed limit; a limit of 0 (or any tiny one) flags every frame the
arm moves. Reports are read from what Blender prints for an operator run from Python.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from recording_layout import draw_panel
from rig_helpers import robot_of

ROBOTS = ["tiago", "spot_arm"]
FIRST, LAST = 1, 40
MOVE_M = 0.01


def baked_small_move(bpy, name: str):
    """Import, Add IK Target, key the control at FIRST and LAST (MOVE_M up in the world), Bake.
    Returns (rig, robot, bake result, what the bake printed)."""
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.rig import robot_for_rig
    from kinema_nodes.core.model.loading import find_urdf

    import mathutils

    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_start, scene.frame_end = FIRST, LAST
    scene.frame_set(FIRST)
    assert bpy.ops.kinema.import_urdf(filepath=str(find_urdf(f"robosuite_{name}"))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    target = next(n for n in tree.nodes if getattr(n, "control_object", None) is not None)
    control = target.control_object
    bpy.context.view_layer.update()
    if target.control_bone:
        bone = control.pose.bones[target.control_bone]
        bone.keyframe_insert("location", frame=FIRST)
        world = control.matrix_world @ bone.matrix
        world.translation += mathutils.Vector((0.0, 0.0, MOVE_M))
        bone.matrix = control.matrix_world.inverted() @ world
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=LAST)
    else:
        control.keyframe_insert("location", frame=FIRST)
        control.location.z += MOVE_M
        control.keyframe_insert("location", frame=LAST)
    scene.frame_set(FIRST)
    bpy.context.view_layer.objects.active = rig
    return rig, robot, tree


def printed_reports(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith(prefix)]


@pytest.mark.parametrize("name", ROBOTS)
def test_bake_check_limits_export_and_panel_say_no_velocity_limit(blender, name, tmp_path, capfd):
    bpy = blender
    from kinema_nodes.blender import baking
    from kinema_nodes.ui.bake_panel import KINEMA_PT_bake

    rig, robot, tree = baked_small_move(bpy, name)
    capfd.readouterr()
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    bake_out = capfd.readouterr()
    bake_text = bake_out.out + bake_out.err

    # the bake: every frame solved, the control moved the arm, and no frame "too fast"
    (report,) = baking.bake_node_of(tree).report().values()
    assert report["frames"] == LAST - FIRST + 1 and report["converged"] == report["frames"], report
    fast = report.get("too_fast") or {}
    assert not fast, f"{name}: {len(fast)} frames flagged too fast by the bake, e.g. {sorted(fast.items())[:2]}"
    assert "exported" not in bake_text and f"{report['converged']}/{report['frames']} frames converged" in bake_text
    markers = [m.name for m in bpy.context.scene.timeline_markers]
    assert not [m for m in markers if "too fast" in m], markers  # the bake's "Kinema: <why>" markers

    # Check Limits: nothing flagged, velocity not checked, no velocity row in the table
    capfd.readouterr()
    assert bpy.ops.kinema.check_limits(rig=rig.name) == {"FINISHED"}
    check_out = capfd.readouterr()
    check_text = check_out.out + check_out.err
    assert "within every limit checked" in check_text, check_text
    assert "velocity" not in check_text.lower(), check_text
    last = json.loads(rig.data.kinema_limits.last_check)
    assert last["checked"]["velocity"] is False, last
    assert not [row for row in last["table"] if row["kind"] == "velocity"], last["table"]
    assert not [m.name for m in bpy.context.scene.timeline_markers if "velocity" in m.name], \
        [m.name for m in bpy.context.scene.timeline_markers]

    # Export Robot Trajectory (JSON): velocity limits null ("no limit"), never 0; no warning
    out = tmp_path / f"{name}.json"
    capfd.readouterr()
    assert bpy.ops.kinema.export_trajectory(filepath=str(out), format="json") == {"FINISHED"}
    export_out = capfd.readouterr()
    export_text = export_out.out + export_out.err
    assert "exported 40 frames" in export_text, export_text
    assert "limits exceeded" not in export_text, export_text
    data = json.loads(out.read_text())
    velocity = data["limits"]["velocity"]
    assert velocity["checked"] is False, velocity
    assert set(velocity["per_joint"]) == set(robot.actuated_joint_names)
    assert all(v is None for v in velocity["per_joint"].values()), velocity["per_joint"]
    assert data["limits_checked"] is True and data["violations"]["velocity_violations"] == [], data["violations"]
    positions = np.array(data["positions"])
    assert positions.shape == (LAST - FIRST + 1, robot.dof)
    assert np.abs(positions[-1] - positions[0]).max() > 1e-4, "the 1 cm move did not move the arm"

    # the Bake panel: no "too fast", within every limit, no velocity row, no limit drawn as 0
    texts = draw_panel(KINEMA_PT_bake).texts()
    assert any(t.endswith(f"{LAST - FIRST + 1}/{LAST - FIRST + 1} frames converged") for t in texts), texts
    assert not [t for t in texts if "too fast" in t], texts
    assert f"Frames {FIRST}–{LAST}: within every limit checked" in texts, texts
    assert not [t for t in texts if t.endswith("(vel)")], texts
    assert not [t for t in texts if re.fullmatch(r"0(\.0*)? (rad|m)/s", t)], texts


@pytest.mark.parametrize(("name", "warned"), [("robosuite_aloha", True), ("robosuite_kinova3", False)])
def test_an_mjcf_read_in_degrees_that_looks_like_radians_is_imported_with_a_warning_saying_what_to_change(
        blender, capfd, name, warned):
    """robosuite-models' ALOHA has its `<compiler angle="radian">` commented out, so MuJoCo (and
    so Kinema) reads its ranges as degrees: every hinge within +-3.14 degrees, an arm that can
    hardly move. Both import buttons (Import URDF/MJCF, Import Robot by name) finish, keep
    MuJoCo's reading, and report a warning that says what to add to the file; a file in radians
    (Kinova3) imports with its plain info line."""
    bpy = blender
    from kinema_nodes.core.model.loading import find_urdf

    for run in (lambda: bpy.ops.kinema.import_urdf(filepath=str(find_urdf(name))),
                lambda: bpy.ops.kinema.import_robot_by_name(robot=name)):
        capfd.readouterr()
        assert run() == {"FINISHED"}
        printed = capfd.readouterr().out
        lines = [line for line in printed.splitlines() if "Imported '" in line]
        assert len(lines) == 1, printed
        assert lines[0].startswith("Warning: " if warned else "Info: "), lines
        assert ('<compiler angle="radian"/>' in lines[0]) == warned, lines
        rig = bpy.context.view_layer.objects.active
        robot = robot_of(rig)
        assert (np.abs(np.concatenate([robot.lower, robot.upper])).max() < np.radians(3.2)) == warned
