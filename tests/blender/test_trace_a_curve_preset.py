"""The shipped "Trace a curve" preset (#30 item 7: a weld or glue bead at constant speed) applied
by role, through the operators, to two real arms of example-robot-data: the UR5 (6 axes) and the
Franka Panda (7 axes). As a user does it: Import URDF, pose the arm, Apply Preset, set the frame
range to the pass, Bake to Keyframes.

The preset wires a Tool (at the tool point, Follow Path at 20 mm/s, ramps 10 %, approach and
retract 3 cm, orientation kept) into an IK Target, and lays its path: a 15 cm S-curve from the
tool centre point along the root frame's +X. Measured on the baked joints by yourdfpy's FK
(tests/independent_fk.py), not by our kinematics:

- the tool centre point's speed, frame to frame, within 1 % of the set speed on the bead away
  from the ends (the ramps, and the turns from the approach onto the bead and off it to the
  retract, where a frame's chord cuts the corner);
- every baked frame on the path (approach, bead, retract) to 0.1 mm;
- the approach and the retract: the first frame 3 cm back along the tool's axis from the bead's
  start (where the tool was when the preset was applied: applying it moves nothing), the last
  3 cm back from its end, to 0.1 mm;
- the tool's orientation kept to 1e-4 rad.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robot
from rig_helpers import IndependentFK, joints_of, pose_and_update, robot_of

#: robot -> a start pose away from singularities and limits (the bead runs 15 cm along +X from the tool point)
ROBOTS = {
    "ur5": [0.3, -1.2, 1.4, -1.0, -1.3, 0.2],
    "panda": [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5],
}
SPEED, RAMP, APPROACH, RETRACT, BEAD = 0.02, 0.1, 0.03, 0.03, 0.15


@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path / "user_presets"))


def _along(points: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """(distance along the polyline `points` of the point on it nearest `p`, how far `p` is from it)."""
    a, b = points[:-1], points[1:]
    d = b - a
    lengths = np.linalg.norm(d, axis=1)
    t = np.clip(np.einsum("ij,ij->i", p - a, d) / np.maximum(lengths ** 2, 1e-300), 0.0, 1.0)
    nearest = a + t[:, None] * d
    gaps = np.linalg.norm(nearest - p, axis=1)
    i = int(np.argmin(gaps))
    return float(np.sum(lengths[:i]) + t[i] * lengths[i]), float(gaps[i])


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_trace_a_curve_applies_by_role_and_bakes_the_bead_at_its_speed(blender, presets_folder, name):
    from kinema_nodes.blender.path_moves import path_points, tool_offset
    from kinema_nodes.blender.presets import PRESET_PATH_PROPERTY, available_presets
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.core import paths

    bpy = blender
    bpy.ops.wm.read_homefile(use_empty=True)
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_of(rig)
    q = robot.zero_configuration()
    q[: len(ROBOTS[name])] = ROBOTS[name]
    pose_and_update(bpy, rig, np.clip(q, robot.lower, robot.upper))
    before = joints_of(rig).copy()
    preset = next(str(path) for path, p in available_presets() if p.name == "Trace a curve")
    assert bpy.ops.kinema.apply_preset(preset=preset) == {"FINISHED"}
    bpy.context.view_layer.update()
    assert np.abs(joints_of(rig) - before).max() < 1e-5  # applying it moves nothing
    tree = rig_tree(rig)
    nodes = {n.bl_idname: n for n in tree.nodes}
    tool, target, solver = nodes["KinemaToolNode"], nodes["KinemaIKTargetNode"], nodes["KinemaSolverNode"]
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0  # a loaded test machine must not pause live IK
    assert tool.link_name == robot.tool_point and target.link_name == robot.tool_point  # bound by role
    assert tool.path is not None and tool.path.type == "CURVE" and tool.path[PRESET_PATH_PROPERTY] == "Trace a curve"
    assert (tool.path_timing, tool.path_orientation) == ("SPEED", "KEEP")
    assert (tool.path_speed, tool.ramp, tool.approach, tool.retract) == pytest.approx((SPEED, RAMP, APPROACH, RETRACT))

    fk = IndependentFK(robot)
    offset = tool_offset(tool)
    start_pose = fk.pose(before, robot.tool_point) @ offset
    bead = path_points(tool.path, rig)  # the curve's evaluated points, root frame
    axis = start_pose[:3, 2]
    assert np.linalg.norm(bead[0] - (start_pose[:3, 3] + APPROACH * axis)) < 1e-6  # the approach starts at the tool
    assert np.linalg.norm(bead[-1] - bead[0] - (BEAD, 0.0, 0.0)) < 1e-6
    full = paths.with_approach(bead, axis, APPROACH, RETRACT)
    length = float(np.sum(np.linalg.norm(np.diff(full, axis=0), axis=1)))
    bead_length = length - APPROACH - RETRACT
    assert BEAD < bead_length < 1.2 * BEAD  # an S, a little longer than its 15 cm chord

    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    seconds = length / ((1 - RAMP) * SPEED)
    scene.frame_start, scene.frame_end = 1, int(math.ceil(seconds * fps)) + 2
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    solver.live = False  # the keys play as baked
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    poses = {}
    for frame in frames:
        scene.frame_set(frame)
        poses[frame] = fk.pose(joints_of(rig), robot.tool_point) @ offset
    points = {f: p[:3, 3] for f, p in poses.items()}

    on_path = {f: _along(full, points[f]) for f in frames}
    worst_gap = max(gap for _, gap in on_path.values())
    assert worst_gap <= 1e-4, f"{name}: a baked frame {worst_gap * 1e3:.3f} mm off the path"
    assert np.linalg.norm(points[1] - (bead[0] - APPROACH * axis)) <= 1e-4  # starts 3 cm back along the tool axis
    assert np.linalg.norm(points[frames[-1]] - (bead[-1] - RETRACT * axis)) <= 1e-4  # ends 3 cm back from the end
    turned = max(np.linalg.norm(poses[f][:3, :3] - start_pose[:3, :3]) for f in frames)
    assert turned <= 1e-4, f"{name}: the tool turned {turned:.2e}"

    u = {f: (f - 1) / (seconds * fps) for f in frames}
    on_bead = {f for f in frames if APPROACH < on_path[f][0] < APPROACH + bead_length}
    cruise = [f for f in frames[:-1] if u[f] >= RAMP and u[f + 1] <= 1 - RAMP and f in on_bead and f + 1 in on_bead]
    errors = [abs(np.linalg.norm(points[f + 1] - points[f]) * fps / SPEED - 1) for f in cruise]
    assert len(cruise) >= 0.6 * len(frames), (len(cruise), len(frames))
    assert max(errors) <= 0.01, f"{name}: tool speed off by {max(errors):.3%} on the bead"


def test_a_traced_path_saved_as_a_preset_is_laid_again_where_the_tool_is(blender, presets_folder):
    """Save Preset on a tree with a Tool path keeps the path (its evaluated points from its start,
    root frame); applied again on a rig posed elsewhere, the curve is laid from that rig's tool
    centre point (plus the approach along the tool's axis), the same shape to 1e-6 m."""
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.path_moves import path_points
    from kinema_nodes.blender.presets import apply_preset, save_tree_as_preset
    from kinema_nodes.core.presets import load_preset

    bpy = blender
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot("ur5"))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_of(rig)
    pose_and_update(bpy, rig, np.array(ROBOTS["ur5"]))
    tree = apply_preset(bpy.context, rig, "Trace a curve", backend="NUMPY")
    tool = next(n for n in tree.nodes if n.bl_idname == "KinemaToolNode")
    laid = path_points(tool.path, rig)
    first_curve = tool.path.name
    saved = save_tree_as_preset(rig_tree(rig), rig, "My bead")
    entry = next(n for n in load_preset(saved).nodes if n["kind"] == "tool")
    assert len(entry["path"]) == len(laid) and entry["params"]["link"] == {"role": "tool_point"}
    for solver in (n for n in tree.nodes if n.bl_idname == "KinemaSolverNode"):
        solver.live = False  # the arm posed by hand, not held by the first tree's control
    moved = np.array(ROBOTS["ur5"]) + 0.1
    pose_and_update(bpy, rig, moved)
    moved = joints_of(rig)  # as the rig holds them (float32)
    again = apply_preset(bpy.context, rig, "My bead", backend="NUMPY")
    tool = next(n for n in again.nodes if n.bl_idname == "KinemaToolNode")
    relaid = path_points(tool.path, rig)
    centre = IndependentFK(robot).pose(moved, robot.tool_point)
    assert np.linalg.norm(relaid[0] - (centre[:3, 3] + APPROACH * centre[:3, 2])) < 1e-6
    assert len(relaid) > len(laid)  # a Bezier through every saved point, evaluated at its resolution again
    shape = relaid - relaid[0]
    assert max(_along(shape, p)[1] for p in laid - laid[0]) < 1e-6
    assert first_curve not in bpy.data.objects  # the first preset's curve went with the tree that followed it
    assert tool.path.name in bpy.data.objects


@pytest.mark.parametrize("path, problem", [
    ([[0.0, 0.0, 0.0]], "a list of 2 to"),
    ([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]], "within 1 m"),
    ([[0.0, 0.0, 0.0], [0.1, 0.0]], "[dx, dy, dz]"),
    ("a curve", "a list of 2 to"),
])
def test_a_tool_path_in_a_preset_that_is_not_points_is_refused_in_one_line(tmp_path, path, problem):
    import json
    from pathlib import Path

    import kinema_nodes
    from kinema_nodes.core.presets import PresetError, load_preset

    shipped = Path(kinema_nodes.__file__).parent / "presets" / "trace_a_curve.json"
    data = json.loads(shipped.read_text())
    next(n for n in data["nodes"] if n["kind"] == "tool")["path"] = path
    file = tmp_path / "absurd.json"
    file.write_text(json.dumps(data))
    with pytest.raises(PresetError) as caught:
        load_preset(file)
    message = str(caught.value)
    assert message.startswith(str(file)) and problem in message and "\n" not in message, message
    data = json.loads(shipped.read_text())
    next(n for n in data["nodes"] if n["kind"] == "ik_target")["path"] = [[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]]
    file.write_text(json.dumps(data))
    with pytest.raises(PresetError, match="'path' belongs on a node of kind tool"):
        load_preset(file)
