"""Limits on the timeline, Retime and File ▸ Export in real Blender, on a UR10 rig from
example-robot-data whose joint curves are keyed the way a bake keys them (one LINEAR key per
frame per joint, through `baking.write_joint_keys`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError

FPS = 24


def _baked_rig(bpy, frames: int = 96, too_fast_at: int | None = None):
    from kinema_nodes.blender.baking import write_joint_keys
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import robot_for_rig

    rig = import_urdf(bpy.context, "ur10")
    robot = robot_for_rig(rig)
    numbers = np.arange(1, frames + 1, dtype=float)
    s = np.linspace(0, 1, frames)[:, None]
    q = np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0]) + np.array([0.8, 0.3, -0.4, 0.3, 0.4, 0.5]) * np.sin(np.pi * s)
    if too_fast_at is not None:  # the step into frame `too_fast_at` covers 1.5x what the elbow may in a frame
        q[too_fast_at - 1:, 2] += 1.5 * robot.velocity_limits[2] / FPS
    write_joint_keys(rig, robot, numbers, q, np.ones(robot.dof, dtype=bool))
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, frames
    return rig, robot, numbers, q


def test_a_planted_violation_is_marked_on_that_frame_and_tabled_for_that_joint_only(blender):
    from kinema_nodes.blender.limits import MARKER_PREFIX, check_rig, last_check

    rig, robot, numbers, q = _baked_rig(blender, too_fast_at=40)
    before = q.copy()
    report, played = check_rig(rig, blender.context.scene)
    assert np.abs(played - before).max() < 1e-6  # float32 keys; the check read what the action plays
    assert [(v.joint, v.frames) for v in report.violations["velocity"]] == [("elbow_joint", [40])]
    markers = [(m.name, m.frame) for m in blender.context.scene.timeline_markers if m.name.startswith(MARKER_PREFIX)]
    assert markers == [(MARKER_PREFIX + "velocity elbow_joint", 40)]
    table = last_check(rig)["table"]
    assert [(row["kind"], row["joint"], row["frames"]) for row in table] == [("velocity", "elbow_joint", [40])]
    assert table[0]["worst"] > table[0]["limit"]
    # the check only flags: the keys are as they were
    from kinema_nodes.blender.limits import baked_joints

    assert np.array_equal(baked_joints(rig, robot)[1], played)


def test_rig_settings_set_acceleration_and_jerk_limits_and_the_margin(blender):
    from kinema_nodes.blender.limits import check_rig

    rig, robot, _, _ = _baked_rig(blender)
    settings = rig.data.kinema_limits
    report, _ = check_rig(rig, blender.context.scene)
    assert not report.flagged
    settings.max_acceleration = 0.5  # rad/s² for every joint: this shot goes over it
    item = settings.joints.add()
    item.joint, item.max_acceleration = "wrist_3_joint", 100.0  # ... except this one
    report, _ = check_rig(rig, blender.context.scene)
    over = {v.joint for v in report.violations["acceleration"]}
    assert over and "wrist_3_joint" not in over
    settings.max_acceleration, settings.margin = 0.0, 60.0
    report, _ = check_rig(rig, blender.context.scene)
    assert np.allclose(report.limits.effective("velocity"), 0.4 * robot.velocity_limits)


def test_retime_writes_a_copy_and_never_touches_the_original(blender):
    from kinema_nodes.blender.limits import RETIMED_SUFFIX, baked_joints, retime_rig

    rig, robot, numbers, q = _baked_rig(blender)
    rig.data.kinema_limits.max_acceleration = 2.0
    original = rig.animation_data.action
    original_name = original.name
    before = baked_joints(rig, robot)[1]
    result, action = retime_rig(rig, blender.context.scene)
    assert action.name == original_name + RETIMED_SUFFIX and action != original
    assert rig.animation_data.action == action
    assert original.use_fake_user  # kept in the file
    rig.animation_data.action = original
    assert np.array_equal(baked_joints(rig, robot)[1], before)
    rig.animation_data.action = action
    frames, after = baked_joints(rig, robot)
    assert len(frames) == result.frame_count == blender.context.scene.frame_end - blender.context.scene.frame_start + 1
    speed = np.abs(np.diff(after, axis=0)) * FPS
    acceleration = np.abs(np.diff(after, n=2, axis=0)) * FPS ** 2
    assert np.all(speed <= robot.velocity_limits * 1.001)
    assert np.all(acceleration <= 2.0 * 1.001 + 1e-3)  # float32 keys: 1e-7 rad x 24² ~ 1e-4
    assert result.optimal_duration_s <= result.duration_s
    # the table and the markers now describe the retimed motion: nothing over velocity or acceleration
    from kinema_nodes.blender.limits import MARKER_PREFIX, last_check

    assert not [row for row in last_check(rig)["table"] if row["kind"] in ("velocity", "acceleration")]
    assert not [m for m in blender.context.scene.timeline_markers
                if m.name.startswith(MARKER_PREFIX + "velocity") or m.name.startswith(MARKER_PREFIX + "acceleration")]


def test_export_refuses_nothing_baked_a_range_outside_and_an_unknown_rig_leaving_no_file(blender, tmp_path):
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.limits import find_rig, parse_frames, rig_trajectory

    import_urdf(blender.context, "ur10")
    with pytest.raises(KinemaError, match="nothing baked"):
        rig_trajectory(find_rig(None), blender.context.scene)
    with pytest.raises(KinemaError, match="unknown rig"):
        find_rig("no such rig")
    import_urdf(blender.context, "z1")
    with pytest.raises(KinemaError, match="several rigs"):
        find_rig(None)
    blender.ops.wm.read_homefile(use_empty=True)
    rig, *_ = _baked_rig(blender)
    with pytest.raises(KinemaError, match="outside the baked range"):
        rig_trajectory(rig, blender.context.scene, parse_frames("50:200"))
    out = tmp_path / "shot.csv"
    assert blender.ops.kinema.export_trajectory(filepath=str(out), format="csv", use_scene_range=False) == {"FINISHED"}
    assert out.read_text().startswith("# robot: ur10")
    blender.context.scene.frame_end = 500
    with pytest.raises(RuntimeError):  # the operator reports the error; bpy raises it from a script
        blender.ops.kinema.export_trajectory(filepath=str(tmp_path / "bad.csv"), format="csv", use_scene_range=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.csv"]


class RecordingLayout:
    """Stands in for a panel's layout: records what draw() puts in it."""

    def __init__(self, log=None):
        self.log = [] if log is None else log

    def __getattr__(self, name):
        if name in ("row", "column", "box", "grid_flow", "split"):
            return lambda *a, **k: RecordingLayout(self.log)

        def record(*args, **kwargs):
            self.log.append((name, args, kwargs))
            return type("Properties", (), {})()

        return record


def test_the_bake_section_shows_the_per_joint_table(blender):
    from kinema_nodes.blender.limits import check_rig
    from kinema_nodes.ui.export_operators import draw_limits

    rig, *_ = _baked_rig(blender, too_fast_at=30)
    check_rig(rig, blender.context.scene)
    layout = RecordingLayout()
    draw_limits(layout, rig)
    labels = [kwargs.get("text", "") for name, _, kwargs in layout.log if name == "label"]
    assert "Joint" in labels and "Worst" in labels and "Limit" in labels and "Frames" in labels
    assert "elbow_joint (vel)" in labels and "30" in labels
    operators = [args[0] for name, args, _ in layout.log if name == "operator"]
    assert "kinema.check_limits" in operators and "kinema.retime" in operators
    assert json.loads(rig.data.kinema_limits.last_check)["fps"] == FPS


def test_bake_to_keyframes_checks_the_limits_of_what_it_baked(blender):
    """The panel's Bake runs the limits check afterwards: a joint over a tight acceleration limit
    is in the table and on the timeline, and the baked keys are the bake's own."""
    import math

    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.edit import add_ik_target, ensure_bake_node
    from kinema_nodes.blender.limits import MARKER_PREFIX, last_check

    rig = import_urdf(blender.context, "ur10")
    blender.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(blender.context, rig, "tool0", backend="NUMPY")
    solver.live = False
    bone = rig.pose.bones[target.control_bone]
    for frame, dx in ((1, 0.0), (12, 0.15)):
        bone.location = (dx, 0.0, 0.0)
        bone.keyframe_insert("location", frame=frame)
    node = ensure_bake_node(tree, blender.context.scene)
    node.frame_start, node.frame_end = 1, 12
    rig.data.kinema_limits.max_acceleration = 1e-3
    assert blender.ops.kinema.bake(tree=tree.name) == {"FINISHED"}
    table = last_check(rig)["table"]
    assert table and all(row["kind"] == "acceleration" and math.isfinite(row["worst"]) for row in table)
    assert any(m.name.startswith(MARKER_PREFIX + "acceleration") for m in blender.context.scene.timeline_markers)


def test_file_export_menu_has_an_entry_per_format(blender):
    from kinema_nodes.ui import export_operators

    menu = type("Menu", (), {"layout": RecordingLayout()})()
    export_operators._menu(menu, blender.context)
    entries = [(args[0], kwargs.get("text")) for name, args, kwargs in menu.layout.log if name == "operator"]
    assert [text for _, text in entries] == ["Robot Trajectory: CSV", "Robot Trajectory: JSON",
                                             "Robot Trajectory: ROS 2 JointTrajectory", "Robot Trajectory: MuJoCo qpos"]
    assert {idname for idname, _ in entries} == {"kinema.export_trajectory"}
    assert export_operators._menu in blender.types.TOPBAR_MT_file_export._dyn_ui_initialize()
