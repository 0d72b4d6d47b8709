"""Tool and moves between keys in Blender (#30 items 1 and 3), driven as a user does: Import URDF,
Add IK Target, Set Up Tool (link + offset), key the control at three frames, choose Linear for
the first segment and Circular through a via empty for the second, scrub both ways, Bake.

Robots: example-robot-data's UR5 (6 axes) and Panda (7 axes and a held finger), not bundled.
Judge: yourdfpy's FK of the rig's joints (tests/independent_fk.py), the offset applied to the
mounting link. Tolerances: the tool point is on the line within 0.1 mm, on the circle within
0.1 mm of its radius, its speed away from the ramps within 1 % of the speed the Tool panel
reports; scrubbing either way and baking agree to one float32 step of a joint (2.4e-7 rad).
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import paths
from kinema_nodes.core.model.example_robots import example_robot
from rig_helpers import IndependentFK, pose_error

SAME_ANSWER = 2.4e-7
KEYS = (1, 25, 49)
CASES = {
    # robot, start joints, mounting link, tool offset (m, XYZ Euler rad), move of the control (m) per key, the side the via point is on
    "ur5": ([0.3, -1.2, 1.4, -1.0, -1.3, 0.2], "wrist_3_link", ((0.0, 0.1, 0.03), (-1.5708, 0.0, 0.0)),
            ((0.01, 0.0, -0.01), (0.0, -0.2, 0.05), (0.08, -0.2, 0.15)), (1.0, 0.0, 0.0)),
    "panda": ([0.0, -0.4, 0.0, -2.2, 0.0, 1.9, 0.8, 0.02], "panda_link8", ((0.0, 0.0, 0.15), (0.0, 0.0, -0.785)),
              ((0.01, 0.0, -0.01), (0.05, 0.2, 0.0), (0.05, 0.2, 0.15)), (0.0, 1.0, 0.0)),
}


def _traced_rig(bpy, name):
    from mathutils import Quaternion, Vector

    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.path_moves import tool_of
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values

    start, link, (location, rotation), moves, via_side = CASES[name]
    path = example_robot(name)
    assert path is not None, f"example-robot-data robot '{name}' not found"
    assert bpy.ops.kinema.import_urdf(filepath=str(path)) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, np.array(start))
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    before = read_joint_values(rig, robot).copy()
    assert bpy.ops.kinema.set_up_tool(link=link, offset_location=location, offset_rotation=rotation) == {"FINISHED"}
    bpy.context.view_layer.update()
    target = next(n for n in tree.nodes if getattr(n, "control_object", None) is not None)
    tool = tool_of(target)
    assert tool is not None and tool.link_name == link
    # the control moved onto the tool centre point: the arm stays where it was
    assert np.max(np.abs(read_joint_values(rig, robot) - before)) < 1e-5
    bone = rig.pose.bones[target.control_bone]
    home, turn = bone.location.copy(), bone.rotation_quaternion.copy()
    for key, move in zip(KEYS, moves):
        bone.location = home + Vector(move)
        bone.rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.3 * (key - 1) / 48) @ turn
        bone.keyframe_insert("location", frame=key)
        bone.keyframe_insert("rotation_quaternion", frame=key)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = KEYS[0], KEYS[-1]
    via = bpy.data.objects.new("Via", None)
    scene.collection.objects.link(via)
    p1, p2 = (_control_at(bpy, rig, target, key) for key in KEYS[1:])
    side = np.cross(p2 - p1, via_side)
    via_point = (p1 + p2) / 2 + 0.4 * np.linalg.norm(p2 - p1) * side / np.linalg.norm(side)  # an arc of about 100 degrees
    via.matrix_world.translation = rig.matrix_world @ Vector(via_point)
    tool.move = "LINEAR"
    tool.add_move(KEYS[1], "CIRCULAR", via)
    scene.frame_set(KEYS[0])
    return rig, robot, target, tool, solver, via


def _tool_points(robot, tool, joints_by_frame):
    fk = IndependentFK(robot)
    from kinema_nodes.blender.path_moves import tool_offset

    offset = tool_offset(tool)
    return {f: fk.pose(q, tool.link_name) @ offset for f, q in joints_by_frame.items()}


def _control_at(bpy, rig, target, frame):
    """The control's position (rig space) at `frame`."""
    bpy.context.scene.frame_set(frame)
    return np.array(rig.pose.bones[target.control_bone].matrix)[:3, 3]


def _key_points(bpy, rig, target):
    return {key: _control_at(bpy, rig, target, key) for key in KEYS}


def _scrub_both_ways_and_bake(bpy, rig, robot, solver, frames):
    """(played, baked): the joints on each frame scrubbed forward then back (every frame converged;
    both visits within SAME_ANSWER), and after Bake. Both checked here: scrubbing and baking agree."""
    from kinema_nodes.blender.rig import read_joint_values

    played = {}
    for f in [*frames, *reversed(frames)]:
        bpy.context.scene.frame_set(f)
        assert solver.summary.startswith("converged"), (f, solver.summary)
        played.setdefault(f, []).append(read_joint_values(rig, robot).copy())
    spread = max(float(np.max(np.ptp(np.array(qs), axis=0))) for qs in played.values())
    assert spread <= SAME_ANSWER, f"scrubbing forward and back differ by {spread} rad"
    bpy.context.scene.frame_set(frames[0])
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    baked = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        baked[f] = read_joint_values(rig, robot).copy()
    gap = max(float(np.max(np.abs(baked[f] - played[f][0]))) for f in frames)
    assert gap <= SAME_ANSWER, f"bake differs from playback by {gap} rad"
    return played, baked


@pytest.mark.parametrize("name", sorted(CASES))
def test_linear_and_circular_moves_bake_straight_round_and_at_constant_speed(blender, name):
    bpy = blender
    from kinema_nodes.blender.tool_setup import tool_segments

    rig, robot, target, tool, solver, via = _traced_rig(bpy, name)
    keys = _key_points(bpy, rig, target)
    frames = range(KEYS[0], KEYS[-1] + 1)
    bpy.context.scene.frame_set(KEYS[0])
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    found = tool_segments(target, rig, fps)
    assert [s["move"] for s in found] == ["LINEAR", "CIRCULAR"]
    _, baked = _scrub_both_ways_and_bake(bpy, rig, robot, solver, frames)

    points = {f: p[:3, 3] for f, p in _tool_points(robot, tool, baked).items()}
    for key in KEYS:  # the keys stay where the animator put them
        assert np.linalg.norm(points[key] - keys[key]) < 2e-5

    a, b = keys[KEYS[0]], keys[KEYS[1]]
    direction = (b - a) / np.linalg.norm(b - a)
    linear = [f for f in frames if KEYS[0] <= f <= KEYS[1]]
    deviation = max(np.linalg.norm((points[f] - a) - np.dot(points[f] - a, direction) * direction) for f in linear)
    assert deviation <= 1e-4, f"{deviation * 1e3:.4f} mm off the line"

    via_point = np.array(rig.matrix_world.inverted() @ via.matrix_world.translation)
    centre, radius, _, _, _ = paths.circle(keys[KEYS[1]], via_point, keys[KEYS[2]])
    arc = [f for f in frames if KEYS[1] <= f <= KEYS[2]]
    radius_error = max(abs(np.linalg.norm(points[f] - centre) - radius) for f in arc)
    assert radius_error <= 1e-4, f"radius error {radius_error * 1e3:.4f} mm"

    for segment in found:  # the speed the panel reports, away from the ramps
        first, last = segment["first"], segment["last"]
        span = last - first
        cruise = [f for f in range(int(first), int(last)) if (f - first) / span >= tool.ramp and (f + 1 - first) / span <= 1 - tool.ramp]
        speeds = [np.linalg.norm(points[f + 1] - points[f]) * fps for f in cruise]
        assert len(speeds) >= 10
        worst = max(abs(s / segment["speed"] - 1) for s in speeds)
        assert worst <= 0.01, f"{segment['move']}: speed off by {worst:.2%}"


def test_tool_offset_is_where_the_ik_aims(blender):
    """A Joint move (the control's own animation): the tool centre point, not the link, is on the
    control, at every frame, position and orientation."""
    bpy = blender
    from kinema_nodes.blender.rig import read_joint_values

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.move = "JOINT"
    tool.moves.clear()
    for f in (1, 13, 30, 49):
        bpy.context.scene.frame_set(f)
        assert solver.summary.startswith("converged"), (f, solver.summary)
        tcp = _tool_points(robot, tool, {f: read_joint_values(rig, robot)})[f]
        control = np.array(rig.pose.bones[target.control_bone].matrix)
        position = pose_error(tcp, control)[0]
        assert position < 2e-5 and _small_angle(tcp, control) < 2e-5, (f, position, _small_angle(tcp, control))


def _small_angle(a, b) -> float:
    """The angle between two rotations near each other, from the skew part of aᵀb: arccos of the
    trace loses half the digits of a float32 matrix (a pose bone's) at small angles."""
    r = a[:3, :3].T @ b[:3, :3]
    return float(np.arcsin(min(1.0, np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / 2)))


def test_a_tool_saved_in_a_preset_mounts_on_the_flange_of_another_arm(blender, tmp_path, monkeypatch):
    """Set Up Tool on the Panda's flange, saved as a preset (the link as its role, never its name),
    applied to a UR5: the Tool sits on the UR5's flange at the same offset, applying moves nothing,
    and moving the control moves the tool centre point onto it."""
    bpy = blender
    from mathutils import Vector

    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.path_moves import tool_of
    from kinema_nodes.blender.presets import apply_preset, save_tree_as_preset
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values

    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path))
    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "panda")
    path = save_tree_as_preset(rig_tree(rig), rig, "Tool on the flange")
    text = path.read_text()
    assert '"kind": "tool"' in text and '"flange"' in text
    assert not any(f'"{link}"' in text for link in robot.links)  # roles, not the Panda's links

    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot("ur5"))) == {"FINISHED"}
    ur5 = bpy.context.view_layer.objects.active
    ur5_robot = robot_for_rig(ur5)
    write_joint_values(ur5, ur5_robot, np.array(CASES["ur5"][0]))
    bpy.context.view_layer.update()
    start = read_joint_values(ur5, ur5_robot).copy()
    tree = apply_preset(bpy.context, ur5, "Tool on the flange", backend="NUMPY")
    ur5_solver = rig_solver(tree, ur5)
    ur5_solver.use_own_budget, ur5_solver.budget_ms = True, 10_000.0
    ur5_target = next(n for n in tree.nodes if getattr(n, "control_object", None) == ur5)
    ur5_tool = tool_of(ur5_target)
    assert ur5_tool is not None and ur5_tool.link_name == "tool0"
    assert tuple(ur5_tool.offset_location) == pytest.approx(tuple(tool.offset_location), abs=1e-7)
    assert tuple(ur5_tool.offset_rotation) == pytest.approx(tuple(tool.offset_rotation), abs=1e-7)
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    assert np.abs(read_joint_values(ur5, ur5_robot) - start).max() <= 1e-5  # applying moved nothing
    bone = ur5.pose.bones[ur5_target.control_bone]
    bone.location = bone.location + Vector((0.03, -0.02, 0.04))
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    assert ur5_solver.summary.startswith("converged"), ur5_solver.summary
    tcp = _tool_points(ur5_robot, ur5_tool, {0: read_joint_values(ur5, ur5_robot)})[0]
    control = np.array(bone.matrix)
    assert pose_error(tcp, control)[0] < 2e-5 and _small_angle(tcp, control) < 2e-5


def test_follow_path_runs_the_tool_round_a_curve_at_the_set_speed(blender):
    """Follow Path on the UR5: a Bezier circle (radius 6 cm, resolution 64) as the Tool's path at
    0.15 m/s from frame 1, the control giving the orientation (Keep). Baked: the tool centre
    point is within 0.1 mm of the circle, at 0.15 m/s within 1 % away from the ramps, turned as
    the control is, and scrubbing back gives the same joints."""
    bpy = blender
    from kinema_nodes.blender.rig import read_joint_values
    from kinema_nodes.core import paths as core_paths

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.move, radius, speed, ramp = "JOINT", 0.06, 0.15, 0.2
    tool.moves.clear()
    scene = bpy.context.scene
    scene.frame_set(1)
    start = _tool_points(robot, tool, {1: read_joint_values(rig, robot)})[1][:3, 3]
    bpy.ops.curve.primitive_bezier_circle_add(radius=radius, location=tuple(start - (radius, 0.0, 0.0)))
    curve = bpy.context.active_object
    curve.data.resolution_u = 64
    centre = np.array(curve.matrix_world.translation)
    tool.path, tool.path_speed, tool.ramp, tool.path_start = curve, speed, ramp, 1.0
    fps = scene.render.fps / scene.render.fps_base
    seconds = 2 * np.pi * radius / ((1 - ramp) * speed)
    scene.frame_start, scene.frame_end = 1, int(np.ceil(seconds * fps)) + 2
    frames = range(scene.frame_start, scene.frame_end + 1)
    played = {}
    for f in [*frames, *reversed(frames)]:
        scene.frame_set(f)
        assert solver.summary.startswith("converged"), (f, solver.summary)
        played.setdefault(f, []).append(read_joint_values(rig, robot).copy())
    spread = max(float(np.max(np.ptp(np.array(qs), axis=0))) for qs in played.values())
    assert spread <= SAME_ANSWER, f"scrubbing forward and back differ by {spread} rad"
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    baked, controls = {}, {}
    for f in frames:
        scene.frame_set(f)
        baked[f] = read_joint_values(rig, robot).copy()
        controls[f] = np.array(rig.pose.bones[target.control_bone].matrix)
    poses = _tool_points(robot, tool, baked)
    points = {f: p[:3, 3] for f, p in poses.items()}
    off_circle = max(abs(np.linalg.norm(points[f][:2] - centre[:2]) - radius) + abs(points[f][2] - centre[2]) for f in frames)
    assert off_circle <= 1e-4, f"{off_circle * 1e3:.4f} mm off the circle"
    assert np.linalg.norm(points[frames[-1]] - points[1]) < 1e-4  # round and back to the start
    u = {f: (f - 1) / (seconds * fps) for f in frames}
    cruise = [f for f in frames[:-1] if u[f] >= ramp and u[f + 1] <= 1 - ramp]
    worst = max(abs(np.linalg.norm(points[f + 1] - points[f]) * fps / speed - 1) for f in cruise)
    assert len(cruise) >= 30 and worst <= 0.01, f"speed off by {worst:.2%}"
    turned = max(_small_angle(poses[f], controls[f]) for f in frames)
    assert turned < 2e-5, f"{turned} rad from the control's orientation"  # Keep: the control's (keyed) orientation
    assert core_paths.PATH_ORIENTATIONS == ("KEEP", "TANGENT")


def test_reach_preview_agrees_with_the_bake_frame_by_frame(blender):
    """Preview Reach on the UR5 before baking, a Linear move whose second key is 1.5 m out (past
    the arm's reach, about 0.85 m): every frame's verdict agrees with what the bake then finds on
    that frame — unreachable where the bake did not converge, near a limit where it flags one —
    and the preview mesh carries one coloured point per frame."""
    bpy = blender
    from mathutils import Vector

    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.tool_setup import preview_reach

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.moves.clear()
    bone = rig.pose.bones[target.control_bone]
    scene = bpy.context.scene
    scene.frame_set(KEYS[1])
    bone.location = bone.location + Vector((0.0, 1.5, 0.0))  # 1.5 m in any direction is out of reach
    bone.keyframe_insert("location", frame=KEYS[1])
    scene.frame_set(KEYS[0])
    bpy.context.view_layer.update()
    obj, samples = preview_reach(bpy.context, rig)
    verdicts = {f: s.verdict for f, s in samples}
    assert "reachable" in verdicts.values() and "unreachable" in verdicts.values()
    assert len(obj.data.vertices) == len(samples) == KEYS[-1] - KEYS[0] + 1
    colours = np.empty(4 * len(samples), dtype=np.float32)
    obj.data.attributes["reach_color"].data.foreach_get("color", colours)
    colours = colours.reshape(-1, 4)
    out = KEYS[1] - KEYS[0]  # the key out of reach
    assert verdicts[KEYS[1]] == "unreachable" and verdicts[KEYS[0]] == "reachable"
    assert colours[out, 0] > 0.8 > colours[out, 1] and colours[0, 1] > 0.7 > colours[0, 0]  # red out there, green at the start
    (result,) = bake_tree(rig_tree(rig))
    report = result.report
    unreachable = sorted(f for f, v in verdicts.items() if v == "unreachable")
    assert unreachable == sorted(report.not_converged)
    near = sorted(f for f, v in verdicts.items() if v == "near_limit")
    assert near == sorted(f for f in report.near_limit if f not in report.not_converged)


def test_follow_path_approaches_and_retracts_along_the_tool_axis(blender):
    """Approach 5 cm and Retract 3 cm on a Follow Path (Keep) on the Panda: the baked tool centre
    point starts 5 cm back along the tool's Z axis from the path's start, runs in along that axis,
    and ends 3 cm back from the path's end, within 0.1 mm."""
    bpy = blender
    from kinema_nodes.blender.rig import read_joint_values

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "panda")
    tool.moves.clear()
    target.control_object.animation_data_clear()  # an unkeyed control: one orientation throughout
    scene = bpy.context.scene
    scene.frame_set(1)
    tcp = _tool_points(robot, tool, {1: read_joint_values(rig, robot)})[1]
    bpy.ops.curve.primitive_bezier_curve_add(location=tuple(tcp[:3, 3]))
    curve = bpy.context.active_object
    curve.scale = (0.05, 0.05, 0.05)  # a 10 cm S from the tool centre point
    bpy.context.view_layer.update()
    tool.path, tool.path_speed, tool.ramp, tool.approach, tool.retract = curve, 0.1, 0.2, 0.05, 0.03
    scene.frame_start, scene.frame_end = 1, 80
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    baked = {}
    for f in range(1, 81):
        scene.frame_set(f)
        assert solver.summary.startswith("converged"), (f, solver.summary)
        baked[f] = read_joint_values(rig, robot).copy()
    points = {f: p[:3, 3] for f, p in _tool_points(robot, tool, baked).items()}
    control = np.array(rig.pose.bones[target.control_bone].matrix)
    axis = control[:3, 2] / np.linalg.norm(control[:3, 2])
    spline = curve.data.splines[0].bezier_points
    first = np.array(curve.matrix_world @ spline[0].co)
    last = np.array(curve.matrix_world @ spline[-1].co)
    assert np.linalg.norm(points[1] - (first - 0.05 * axis)) < 1e-4
    assert np.linalg.norm(points[80] - (last - 0.03 * axis)) < 1e-4
    inward = []  # the frames from the first until the tool reaches the path: the approach
    for f in range(1, 81):
        if np.dot(points[f] - first, axis) >= -1e-4:
            break
        inward.append(f)
    assert inward and all(np.linalg.norm(np.cross(points[f] - first, axis)) < 1e-4 for f in inward)  # on the tool's axis


def test_a_linear_move_between_keys_of_an_empty(blender):
    """The control may be any object: an Empty parented to a turned, moved parent, keyed at two
    frames (Euler rotation), drives a Linear move on the UR5 — straight within 0.1 mm, the
    parent's transform kept."""
    bpy = blender
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.rig import read_joint_values

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.moves.clear()
    scene = bpy.context.scene
    scene.frame_set(1)
    tcp = np.array(rig.pose.bones[target.control_bone].matrix)  # the control sits on the tool centre point
    parent = bpy.data.objects.new("Holder", None)
    parent.location, parent.rotation_euler = (0.02, -0.01, 0.03), (0.2, 0.0, 0.4)
    empty = bpy.data.objects.new("Hand", None)
    for obj in (parent, empty):
        scene.collection.objects.link(obj)
    empty.parent = parent
    bpy.context.view_layer.update()
    from mathutils import Matrix, Vector

    empty.matrix_world = rig.matrix_world @ Matrix(tcp.tolist())
    empty.keyframe_insert("location", frame=1)
    empty.keyframe_insert("rotation_euler", frame=1)
    empty.location = empty.location + Vector((0.05, 0.12, -0.06))
    empty.rotation_euler.z += 0.3
    empty.keyframe_insert("location", frame=25)
    empty.keyframe_insert("rotation_euler", frame=25)
    target.control_object, target.control_bone = empty, ""
    tool.move = "LINEAR"
    scene.frame_start, scene.frame_end = 1, 25
    ends = {}
    for f in (1, 25):
        scene.frame_set(f)
        ends[f] = np.array(rig.matrix_world.inverted() @ empty.matrix_world)[:3, 3]
    joints = {}
    for f in range(1, 26):
        scene.frame_set(f)
        assert solver.summary.startswith("converged"), (f, solver.summary)
        joints[f] = read_joint_values(rig, robot).copy()
    points = {f: p[:3, 3] for f, p in _tool_points(robot, tool, joints).items()}
    a, b = ends[1], ends[25]
    direction = (b - a) / np.linalg.norm(b - a)
    assert np.linalg.norm(points[1] - a) < 2e-5 and np.linalg.norm(points[25] - b) < 2e-5
    deviation = max(np.linalg.norm((p - a) - np.dot(p - a, direction) * direction) for p in points.values())
    assert deviation <= 1e-4, f"{deviation * 1e3:.4f} mm off the line"
    cruise = paths.cruise_speed(np.linalg.norm(b - a), 24, tool.ramp)  # per frame: the keys' own ease would not hold it
    steps = [np.linalg.norm(points[f + 1] - points[f]) for f in range(1, 25) if (f - 1) / 24 >= tool.ramp and f / 24 <= 1 - tool.ramp]
    assert len(steps) >= 10 and max(abs(s / cruise - 1) for s in steps) <= 0.01
    assert rig_tree(rig) is target.id_data


def test_follow_path_along_a_mesh_edge_loop_whose_vertices_are_out_of_order(blender):
    """A mesh square (4 cm sides) whose vertex numbers do not follow its edges, as the Tool's path
    on the UR5: the baked tool centre point stays on the square's edges within 0.1 mm (never on
    a diagonal) and travels its perimeter."""
    bpy = blender
    from kinema_nodes.blender.rig import read_joint_values

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.moves.clear()
    target.control_object.animation_data_clear()
    scene = bpy.context.scene
    scene.frame_set(1)
    corner = _tool_points(robot, tool, {1: read_joint_values(rig, robot)})[1][:3, 3]
    square = np.array([(0, 0, 0), (0.04, 0.04, 0), (0.04, 0, 0), (0, 0.04, 0)])  # loop order: 0, 2, 1, 3
    mesh = bpy.data.meshes.new("Square")
    mesh.from_pydata([tuple(p) for p in square], [(0, 2), (2, 1), (1, 3), (3, 0)], [])
    obj = bpy.data.objects.new("Square", mesh)
    scene.collection.objects.link(obj)
    obj.location = tuple(corner)
    bpy.context.view_layer.update()
    tool.path, tool.path_speed, tool.ramp = obj, 0.1, 0.2
    scene.frame_start, scene.frame_end = 1, 52  # 0.16 m at 0.1 m/s with 20 % ramps: 2 s, 48 frames
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    joints = {}
    for f in range(1, 53):
        scene.frame_set(f)
        joints[f] = read_joint_values(rig, robot).copy()
    points = [p[:3, 3] - corner for p in _tool_points(robot, tool, joints).values()]
    corners = square[[0, 2, 1, 3, 0]]

    def off_square(p):
        return min(np.linalg.norm(np.cross(p - a, (b - a) / np.linalg.norm(b - a))) if 0 <= np.dot(p - a, b - a) <= np.dot(b - a, b - a)
                   else min(np.linalg.norm(p - a), np.linalg.norm(p - b)) for a, b in zip(corners, corners[1:]))

    assert max(off_square(p) for p in points) <= 1e-4
    travelled = sum(np.linalg.norm(b - a) for a, b in zip(points, points[1:]))
    assert travelled == pytest.approx(0.16, rel=0.02)  # round the square (cutting a corner between frames)


def test_the_tool_panel_and_node_draw_against_the_real_rna(blender):
    """The Tool section and the Tool node draw (recording layout, checked against Blender's RNA):
    with moves between keys the section lists each segment, its move, length and speed; with a
    path it shows the path's settings instead."""
    bpy = blender
    from recording_layout import draw_node, draw_panel

    from kinema_nodes.ui.tool_panel import KINEMA_PT_ik_tool

    rig, robot, target, tool, solver, via = _traced_rig(bpy, "ur5")
    bpy.context.view_layer.objects.active = rig
    layout = draw_panel(KINEMA_PT_ik_tool)
    assert layout is not None
    labels = [call[1] for call in layout.calls if call[0] == "label"]
    segments = [text for text in labels if "m/s" in text]
    assert len(segments) == 2 and segments[0].startswith("1-25: Linear") and segments[1].startswith("25-49: Circular"), labels
    operators = [call[1] for call in layout.calls if call[0] == "operator"]
    assert {"kinema.set_up_tool", "kinema.preview_reach"} <= set(operators)
    draw_node(tool)
    bpy.ops.curve.primitive_bezier_circle_add(radius=0.05)
    tool.path = bpy.context.active_object
    bpy.context.view_layer.objects.active = rig
    drawn = [call[2] for call in draw_panel(KINEMA_PT_ik_tool).calls if call[0] == "prop"]
    assert "path_speed" in drawn and "move" not in drawn
    assert {"chordal_tolerance", "angular_tolerance", "turn_about_axis", "turn_range"} <= set(drawn)
    draw_node(tool)


def _bake_frames(bpy, rig, robot, solver, frames):
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.rig import read_joint_values

    (result,) = bake_tree(rig_tree(rig))
    baked = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        baked[f] = read_joint_values(rig, robot).copy()
    return result.report, baked


@pytest.mark.slow
def test_follow_path_turning_about_the_tool_axis_completes_a_circle_the_fixed_orientation_cannot(blender):
    """Follow Path (Tangent) round a 5 cm circle about the Panda's downward tool axis: the blade
    turns a whole turn about that axis, more than joint 7's 332° allow, so baked with the
    orientation as given some frames fail to converge, land near a limit or jump over 0.5 rad.
    With Turn About Axis (±180°) on the Tool node, every frame converges away from the limits, no
    joint steps over 0.5 rad between frames, and the tool centre point is on the path with its Z
    axis the path's (yourdfpy FK; 0.1 mm, 1e-3 rad), only turned about it."""
    bpy = blender
    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "panda")
    tool.moves.clear()
    target.control_object.animation_data_clear()
    scene = bpy.context.scene
    scene.frame_set(1)
    control = np.array(rig.pose.bones[target.control_bone].matrix)
    assert control[2, 2] < -0.95  # the tool points down: the circle's axis is the tool's
    bpy.ops.curve.primitive_bezier_circle_add(radius=0.05, location=tuple(control[:3, 3] - [0.05, 0.0, 0.0]))
    curve = bpy.context.active_object
    bpy.context.view_layer.update()
    tool.path, tool.path_speed, tool.ramp, tool.path_orientation = curve, 0.2, 0.1, "TANGENT"
    frames = range(1, 42)  # 0.314 m at 0.2 m/s with 10 % ramps: 1.75 s, 42 frames at 24 fps
    scene.frame_start, scene.frame_end = frames[0], frames[-1]
    bpy.context.view_layer.objects.active = rig

    report, fixed = _bake_frames(bpy, rig, robot, solver, frames)
    steps = np.abs(np.diff([fixed[f] for f in frames], axis=0)).max()
    assert report.not_converged or report.near_limit or steps > 0.5, (report.not_converged, report.near_limit, steps)

    tool.turn_about_axis, tool.turn_range = True, np.pi
    report, free = _bake_frames(bpy, rig, robot, solver, frames)
    assert not report.not_converged and not report.near_limit, (report.not_converged, report.near_limit)
    joints = np.array([free[f] for f in frames])
    assert np.abs(np.diff(joints, axis=0)).max() <= 0.5
    from kinema_nodes.blender.path_moves import follow_path_pose

    for f, pose in _tool_points(robot, tool, free).items():
        want = follow_path_pose(tool, rig, control, f)  # the path's pose at f, not turned
        assert np.linalg.norm(pose[:3, 3] - want[:3, 3]) < 1e-4, f
        assert np.arccos(np.clip(np.dot(pose[:3, 2], want[:3, 2]), -1.0, 1.0)) < 1e-3, f


def _dense_curve(curve, rig, resolution: int = 4000) -> np.ndarray:
    """The curve's true points (rig space), `resolution` per segment: the cubic Bernstein form of
    each segment of the Blender spline, in float64, written here (not the add-on's code), from
    the control points and handles Blender holds. (Blender's interpolate_bezier steps by forward
    differences in float32, which drift by 1e-5 m over 4,000 steps: too coarse a yardstick.)"""
    to_rig = np.array(rig.matrix_world.inverted() @ curve.matrix_world, dtype=float)
    spline = curve.data.splines[0]
    points = list(spline.bezier_points)
    pairs = list(zip(points, points[1:])) + ([(points[-1], points[0])] if spline.use_cyclic_u else [])
    t = np.linspace(0.0, 1.0, resolution + 1)[:-1, None]
    found = []
    for a, b in pairs:
        p0, p1, p2, p3 = (to_rig[:3, :3] @ np.array(tuple(v)) + to_rig[:3, 3] for v in (a.co, a.handle_right, b.handle_left, b.co))
        found.extend((1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3)
    last = pairs[-1][1].co
    found.append(to_rig[:3, :3] @ np.array(tuple(last)) + to_rig[:3, 3])
    return np.array(found)


def _off_polyline(points: np.ndarray, p: np.ndarray) -> float:
    """How far `p` is from the polyline through `points`."""
    a, b = points[:-1], points[1:]
    s = np.clip(np.einsum("ij,ij->i", p - a, b - a) / np.einsum("ij,ij->i", b - a, b - a), 0.0, 1.0)
    return float(np.linalg.norm(a + s[:, None] * (b - a) - p, axis=1).min())


def test_follow_path_samples_a_bezier_curve_by_chordal_and_angular_tolerances(blender):
    """Chordal and Angular on the Tool (Follow Path) sample a real Blender Bezier curve (the S
    primitive, turned, scaled to 30 cm and moved) so that every chord stays within the chordal
    tolerance of the curve, measured against the curve at 4,000 points a segment (the curve
    between each chord's ends; 1 µm slack for that yardstick's own steps),
    and two chords in a row turn by at most the angular tolerance (1e-9 rad). The tool runs on
    those chords: its position at each frame lies on them (1e-9 m)."""
    bpy = blender
    from kinema_nodes.blender.path_moves import follow_path_pose, path_points

    rig, robot, target, tool, solver, _ = _traced_rig(bpy, "ur5")
    tool.moves.clear()
    bpy.ops.curve.primitive_bezier_curve_add(location=(0.35, 0.1, 0.4), rotation=(0.3, -0.5, 0.8))
    curve = bpy.context.active_object
    curve.scale = (0.15, 0.15, 0.15)
    bpy.context.view_layer.update()
    tool.path = curve
    truth = _dense_curve(curve, rig)
    plain = path_points(curve, rig)
    assert len(plain) == curve.data.resolution_u + 1  # no tolerance: the curve's own resolution, as before
    for chordal, angular in ((1e-4, 0.0), (0.0, np.radians(2.0)), (2e-5, np.radians(1.0))):
        tool.chordal_tolerance, tool.angular_tolerance = chordal, angular
        points = path_points(tool.path, rig, tool.chordal_tolerance, tool.angular_tolerance)
        nearest = [int(np.argmin(np.linalg.norm(truth - p, axis=1))) for p in points]
        assert np.all(np.diff(nearest) >= 0) and nearest[0] == 0 and nearest[-1] == len(truth) - 1
        assert max(_off_polyline(truth[max(i - 1, 0):i + 2], p) for i, p in zip(nearest, points)) < 1e-6  # on the curve
        worst = 0.0
        for (i, j), a, b in zip(zip(nearest, nearest[1:]), points, points[1:]):
            stretch = truth[i + 1:j] - a  # the truth's points strictly between the chord's ends
            if not len(stretch):
                continue
            s = np.clip(stretch @ (b - a) / max(float((b - a) @ (b - a)), 1e-30), 0.0, 1.0)
            worst = max(worst, float(np.linalg.norm(stretch - s[:, None] * (b - a), axis=1).max()))
        steps = np.diff(points, axis=0)
        units = steps / np.linalg.norm(steps, axis=1)[:, None]
        turns = np.arccos(np.clip(np.sum(units[:-1] * units[1:], axis=1), -1.0, 1.0))
        if chordal:
            assert worst <= chordal + 1e-6, (chordal, worst)
        if angular:
            assert turns.max() <= angular + 1e-9, (angular, np.degrees(turns.max()))
        control = np.array(rig.pose.bones[target.control_bone].matrix)
        for frame in range(1, 60, 7):
            assert _off_polyline(points, follow_path_pose(tool, rig, control, frame)[:3, 3]) < 1e-9


def test_a_blend_radius_rounds_the_key_between_a_linear_and_a_circular_move(blender):
    """#30 item 3's blend radius, as a user sets it: the UR5's Linear-then-Circular keys, Blend
    Radius 15 mm on the Tool. The tool (yourdfpy's FK of the baked joints) does not stop at the
    middle key: it passes within 15 mm of it (not through it), every frame of the blend within
    15 mm; away from the blend the line stays within 0.1 mm and the arc within 0.1 mm of its
    radius; the first and last keys are reached (2e-5 m); scrubbing and baking agree (2.4e-7 rad)."""
    bpy = blender
    from kinema_nodes.blender.path_moves import ControlKeys, keyed_moves
    from kinema_nodes.blender.tool_setup import tool_segments

    rig, robot, target, tool, solver, via = _traced_rig(bpy, "ur5")
    keys = _key_points(bpy, rig, target)
    blend = 0.015
    tool.blend_radius = blend
    frames = range(KEYS[0], KEYS[-1] + 1)
    _, baked = _scrub_both_ways_and_bake(bpy, rig, robot, solver, frames)

    points = {f: p[:3, 3] for f, p in _tool_points(robot, tool, baked).items()}
    for key in (KEYS[0], KEYS[-1]):
        assert np.linalg.norm(points[key] - keys[key]) < 2e-5
    middle = keys[KEYS[1]]
    cut = np.linalg.norm(points[KEYS[1]] - middle)
    assert 1e-4 < cut <= blend + 2e-5, f"the middle key passed at {cut * 1e3:.3f} mm"

    bpy.context.scene.frame_set(KEYS[1])
    pose = np.array(rig.pose.bones[target.control_bone].matrix)
    tau = keyed_moves(tool, ControlKeys(target), rig, pose, KEYS[1]).tau(1)
    assert tau > 1.0  # a window of a few frames
    window = [f for f in frames if abs(f - KEYS[1]) < tau]
    assert max(np.linalg.norm(points[f] - middle) for f in window) <= blend + 2e-5
    steps = [np.linalg.norm(points[f + 1] - points[f]) for f in range(KEYS[1] - 2, KEYS[1] + 2)]
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    slowest = min(s["speed"] for s in tool_segments(target, rig, fps)) / fps
    assert min(steps) > 0.5 * slowest, "the tool stopped at a blended key"

    a = keys[KEYS[0]]
    direction = (middle - a) / np.linalg.norm(middle - a)
    line = [f for f in frames if KEYS[0] <= f <= KEYS[1] - tau]
    deviation = max(np.linalg.norm((points[f] - a) - np.dot(points[f] - a, direction) * direction) for f in line)
    assert deviation <= 1e-4, f"{deviation * 1e3:.4f} mm off the line"
    via_point = np.array(rig.matrix_world.inverted() @ via.matrix_world.translation)
    centre, radius, _, _, _ = paths.circle(middle, via_point, keys[KEYS[2]])
    arc = [f for f in frames if KEYS[1] + tau <= f <= KEYS[2]]
    radius_error = max(abs(np.linalg.norm(points[f] - centre) - radius) for f in arc)
    assert radius_error <= 1e-4, f"radius error {radius_error * 1e3:.4f} mm"


def test_exports_name_the_tool(blender, tmp_path):
    """#30 item 1, "exports name it": after Set Up Tool and Bake, Export Trajectory's CSV, JSON and
    ROS 2 YAML name the Tool, its link and its offset, read back by each format's own reader
    (csv, json, yaml); the offset to 1e-9 of what the Tool node holds."""
    import csv
    import json

    import yaml

    bpy = blender
    from kinema_nodes.blender.path_moves import tool_offset
    from kinema_nodes.core.paths import matrix_quaternion

    rig, robot, target, tool, solver, via = _traced_rig(bpy, "ur5")
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    offset = tool_offset(tool)
    want_xyz, want_wxyz = offset[:3, 3], matrix_quaternion(offset[:3, :3])

    def same(entry):
        assert entry["link"] == "wrist_3_link" and entry["name"] == tool.name
        assert np.allclose(entry["offset_xyz"], want_xyz, atol=1e-9)
        assert np.allclose(entry["offset_wxyz"], want_wxyz, atol=1e-9) or np.allclose(entry["offset_wxyz"], -want_wxyz, atol=1e-9)

    out = tmp_path / "shot.json"
    assert bpy.ops.kinema.export_trajectory(filepath=str(out), format="json") == {"FINISHED"}
    (entry,) = json.loads(out.read_text())["tools"]
    same(entry)

    out = tmp_path / "shot.csv"
    assert bpy.ops.kinema.export_trajectory(filepath=str(out), format="csv") == {"FINISHED"}
    with open(out, newline="") as handle:
        comment = next(csv.reader(handle))
    line = ",".join(comment)
    assert f"tool: {tool.name} on wrist_3_link at (" in line, line
    numbers = [float(v) for v in line.split(" at (")[1].split(")")[0].split(",")]
    assert np.allclose(numbers, want_xyz, atol=1e-6)  # the comment's 6 significant figures

    out = tmp_path / "shot.yaml"
    assert bpy.ops.kinema.export_trajectory(filepath=str(out), format="ros2", replace_bag=True) == {"FINISHED"}
    yaml_file = next(p for p in tmp_path.iterdir() if p.suffix == ".yaml")
    text = yaml_file.read_text()
    assert text.startswith(f"# tool: {tool.name} on wrist_3_link")
    assert yaml.safe_load(text)["joint_names"] == list(robot.actuated_joint_names)  # still the message
