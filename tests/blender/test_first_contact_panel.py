"""First contact (issue #29, items 6, 9 and 23): the Preferences exist where Blender looks for
them, every operator that edits data can be undone, and the readout and limit words say what
they mean. Robots: robosuite's Kinova Jaco (7 axes) and Spot arm (6 axes), MJCF models no
other test here uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from recording_layout import draw_node, draw_panel

ROOT = Path(__file__).resolve().parents[2]

#: (robosuite folder, the link the IK target aims at)
ROBOTS = {"jaco": "right_hand", "spot_arm": "right_hand"}


def robosuite_robot(name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec("robosuite")
    if spec is None:
        pytest.fail("robosuite is not installed: install the test dependencies (README)")
    path = Path(spec.submodule_search_locations[0]) / "models" / "assets" / "robots" / name / "robot.xml"
    assert path.is_file(), path
    return path


def rig_with_target(bpy, name: str):
    """The robot imported as a user does (Import URDF/MJCF), posed inside its limits, with an
    IK target on its hand."""
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    assert bpy.ops.kinema.import_urdf(filepath=str(robosuite_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -3.0)
    upper = np.where(np.isfinite(robot.upper), robot.upper, 3.0)
    write_joint_values(rig, robot, lower + 0.4 * (upper - lower))
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.add_ik_target(link=ROBOTS[name]) == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    return rig, robot, tree, solver


# ---- 6. Preferences exist ------------------------------------------------------------------

#: In a fresh process, the add-on enabled the way Blender enables one (addon_utils, by module
#: name); its preferences looked up the way Blender draws them (preferences.addons[module]).
PREFERENCES_SCRIPT = textwrap.dedent(
    r'''
    import json, sys
    import bpy, addon_utils
    from kinema_nodes.core.solve import wait_for_kernel_build

    wait_for_kernel_build()
    report = {"enabled": addon_utils.enable("kinema_nodes", default_set=True, handle_error=None) is not None}
    addon = bpy.context.preferences.addons.get("kinema_nodes")
    prefs = addon.preferences if addon is not None else None
    report["found"] = prefs is not None
    if prefs is not None:
        report["default_budget_ms"] = prefs.solve_budget_ms
        prefs.solve_budget_ms = 250.0
        budgets = {}
        for path, link in json.loads(sys.argv[1]):
            bpy.ops.wm.read_homefile(use_empty=True)
            bpy.ops.kinema.import_urdf(filepath=path)
            from kinema_nodes.core.solve import _kernel

            report.setdefault("kernel_after_import", []).append(_kernel._state)
            bpy.ops.kinema.add_ik_target(link=link)
            from kinema_nodes.blender.edit import active_rig, rig_solver, rig_tree

            rig = active_rig(bpy.context)
            solver = rig_solver(rig_tree(rig), rig)
            budgets[path] = [solver.effective_budget_ms(), solver.to_spec().get("budget_ms")]
        report["budgets"] = budgets
        # the budget changed with live frames running: the next frame's program has the new one
        from kinema_nodes.session import compiled_program

        scene = bpy.context.scene
        scene.frame_set(2)
        followed = [compiled_program(rig_tree(rig)).steps[0].options.budget_ms]
        prefs.solve_budget_ms = 90.0
        scene.frame_set(3)
        followed.append(compiled_program(rig_tree(rig)).steps[0].options.budget_ms)
        report["budget_followed"] = followed
        # Solve Ahead While Idle: on by default; off, the idle timer's turns never solve ahead
        from kinema_nodes import evaluator
        from kinema_nodes.blender import handlers

        report["solve_ahead_default"] = prefs.solve_ahead
        asked, solve_ahead = [], evaluator.solve_ahead
        evaluator.solve_ahead = lambda *args: asked.append(1) or solve_ahead(*args)
        for on in (False, True):
            prefs.solve_ahead = on
            before = len(asked)
            for _ in range(3):
                handlers.solve_ahead_tick()
            report[f"solve_ahead_turns_{'on' if on else 'off'}"] = len(asked) - before
    print("REPORT " + json.dumps(report), flush=True)
    # bpy 4.5's module can hang at process exit after read_homefile (its delayed-close thread
    # still waits on a condition variable that the exit handlers destroy); the report is out
    import os

    os._exit(0)
    '''
)


def test_the_preferences_are_where_blender_looks_for_them():
    robots = [[str(robosuite_robot(name)), link] for name, link in ROBOTS.items()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", PREFERENCES_SCRIPT, json.dumps(robots)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    line = next((line for line in done.stdout.splitlines() if line.startswith("REPORT ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(line[len("REPORT "):])
    assert report["enabled"] and report["found"], report
    assert report["default_budget_ms"] == pytest.approx(33.0)
    # File > Import > Robot starts loading the compiled kernel, so no drag answers on plain NumPy
    # while it loads (2.5 s beside a first drag on a 2-core machine; a 3 m drag then took 0.7 s)
    assert report["kernel_after_import"][0] in ("compiling", "ready"), report
    # the budget raised in Preferences is the one each robot's Solver solves under
    assert set(report["budgets"]) == {path for path, _ in robots}
    for effective, in_spec in report["budgets"].values():
        assert effective == pytest.approx(250.0) and in_spec == pytest.approx(250.0)
    assert report["budget_followed"] == [pytest.approx(250.0), pytest.approx(90.0)], report["budget_followed"]
    assert report["solve_ahead_default"] is True
    assert report["solve_ahead_turns_off"] == 0 and report["solve_ahead_turns_on"] >= 1, report


def test_the_preferences_class_is_named_after_the_add_on_module(blender):
    import kinema_nodes
    from kinema_nodes.ui.preferences import KinemaPreferences

    # Blender finds an add-on's preferences by its module name, whatever folder defines them
    assert KinemaPreferences.bl_idname == kinema_nodes.__name__


# ---- 9. Every operator that edits data declares UNDO ------------------------------------------

#: Kinema operators that edit nothing in the file, so there is nothing to undo. Each says why.
EDITS_NOTHING = {
    "kinema.export_trajectory": "writes files outside Blender; the scene and the rig are only read",
    "kinema.group_edit": "opens (or closes) a node group in the editor: a view, not data",
}


def kinema_operator_classes():
    import bpy

    def walk(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    return {cls.bl_idname: cls for cls in walk(bpy.types.Operator)
            if getattr(cls, "bl_idname", "").startswith("kinema.") and cls.is_registered}


def test_every_operator_that_edits_data_declares_undo(blender):
    classes = kinema_operator_classes()
    assert len(classes) >= 25  # every one the add-on registers, not a few
    assert set(EDITS_NOTHING) <= set(classes), "an operator listed as editing nothing is gone: update the list"
    for idname, cls in sorted(classes.items()):
        options = set(getattr(cls, "bl_options", set()))
        if idname in EDITS_NOTHING:
            assert "UNDO" not in options, f"{idname} is listed as editing nothing but declares UNDO"
            continue
        assert "UNDO" in options, f"{idname} edits data: its bl_options need 'UNDO' (or list it in EDITS_NOTHING with why)"
        assert "REGISTER" in options, f"{idname}: UNDO needs REGISTER too"


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_check_limits_edits_data_so_it_is_one_undo_step(blender, name):
    """Check Limits writes timeline markers and its table on the rig: data, so its click must be
    an undo step (Blender's undo itself needs a window, which the bpy module has none of)."""
    bpy = blender
    rig, robot, tree, solver = rig_with_target(bpy, name)
    solver.backend = "OFF"
    from kinema_nodes.blender.rig import write_joint_values

    scene = bpy.context.scene
    lower = np.where(np.isfinite(robot.lower), robot.lower, -3.0)
    upper = np.where(np.isfinite(robot.upper), robot.upper, 3.0)
    for frame, fraction in ((1, 0.2), (5, 0.8), (9, 0.2)):  # most of the range, there and back in 8 frames
        scene.frame_set(frame)
        write_joint_values(rig, robot, lower + fraction * (upper - lower))
        assert bpy.ops.kinema.key_all_joints() == {"FINISHED"}
    scene.frame_start, scene.frame_end = 1, 9
    settings = rig.data.kinema_limits
    settings.max_acceleration, settings.max_jerk = 1.0, 1.0
    assert bpy.ops.kinema.check_limits() == {"FINISHED"}
    assert json.loads(settings.last_check)["table"], "a move over the whole range in two frames breaks a limit"
    assert any(m.name.startswith("Kinema limit") for m in scene.timeline_markers)
    assert "UNDO" in kinema_operator_classes()["kinema.check_limits"].bl_options


# ---- 23. The readout and the limits say what they mean -----------------------------------------

def readout_texts(bpy, solver) -> list[str]:
    """What the IK panel, its Hand-off section and the Solver node say."""
    from kinema_nodes.ui.ik_panel import KINEMA_PT_inverse_kinematics
    from kinema_nodes.ui.ik_sections import KINEMA_PT_ik_target_bone

    panel = draw_panel(KINEMA_PT_inverse_kinematics).texts()
    hand_off = draw_panel(KINEMA_PT_ik_target_bone).texts()
    node = draw_node(solver).texts()
    return panel + hand_off + node


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_the_readout_with_the_solver_off_and_back(blender, name):
    from kinema_nodes import evaluator

    bpy = blender
    rig, robot, tree, solver = rig_with_target(bpy, name)
    evaluator.run_tree(tree, force=True)
    texts = readout_texts(bpy, solver)
    assert any(t.startswith("Last solve: ") for t in texts), texts
    assert any(t.startswith("Solving to '") for t in texts), texts

    solver.backend = "OFF"
    evaluator.run_tree(tree, force=True)
    texts = readout_texts(bpy, solver)
    assert "Solver off: the rig follows its FK sliders" in texts, texts
    assert not any(t.startswith(("Last solve", "Solving to", "solver off")) for t in texts), texts

    solver.backend = "NUMPY"  # back on, before the next solve: nothing stale from the Off
    texts = readout_texts(bpy, solver)
    assert not any("solver off" in t.lower() or t.startswith("Last solve: 0.0 ms") for t in texts), texts
    evaluator.run_tree(tree, force=True)
    texts = readout_texts(bpy, solver)
    assert any(t.startswith("Last solve: ") for t in texts) and any(t.startswith("Solving to '") for t in texts), texts


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_key_target_bone_is_a_named_button(blender, name):
    bpy = blender
    rig_with_target(bpy, name)
    from kinema_nodes.ui.ik_panel import KINEMA_PT_inverse_kinematics

    layout = draw_panel(KINEMA_PT_inverse_kinematics)
    keyed = [call for call in layout.calls if call[0] == "operator" and call[1] == "kinema.key_target_bone"]
    assert keyed and all(call[2].get("text", None) != "" for call in keyed), keyed


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_the_limits_table_says_rad_and_names_its_fields(blender, name):
    from kinema_nodes.ui.export_operators import draw_limits, limit_unit
    from recording_layout import RecordingLayout

    bpy = blender
    rig, robot, tree, solver = rig_with_target(bpy, name)
    joint = robot.actuated_joint_names[0]
    rig.data.kinema_limits.last_check = json.dumps({"fps": 24, "frames": [1, 3], "checked": {},
                                                    "table": [{"kind": "acceleration", "joint": joint, "worst": 203.0,
                                                               "limit": 10.0, "frames": [2]}]})
    layout = RecordingLayout()
    draw_limits(layout, rig)
    texts = layout.texts()
    assert "Acc" not in texts and "Max Acceleration" in texts, texts
    assert "203 rad/s²" in texts and "10 rad/s²" in texts, texts
    assert limit_unit(robot, joint, "jerk") == "rad/s³"


def test_a_build_estimate_under_a_second_is_not_about_0_s():
    from kinema_nodes.core.solve._warming import about

    assert about(0.2) == "under a second"
    assert about(0.0) == "under a second"
    assert about(11.6) == "about 12 s"
