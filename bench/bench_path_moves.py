"""Moves between keys (#30 item 3): how straight, how round and how steady a baked Tool move is.

For each robot and each of `--runs` random set-ups: Import URDF, Add IK Target, Set Up Tool (a
link and an offset), key the control at three frames (random moves of 10-25 cm and a turn), a
Linear segment then a Circular one through a via empty, Bake. The tool centre point is measured
by yourdfpy's FK of the baked joints (tests/independent_fk.py), not by our kinematics.

Reports per robot: the largest distance of a Linear move's frames from its line, the largest
radius error of a Circular move's frames, the largest tool speed error away from the ramps
against the speed the Tool panel reports, and the bake time. Targets (#30): 0.1 mm, 0.1 mm, 1 %.

    python bench/bench_path_moves.py --runs 5 --seed 2026
    python bench/bench_path_moves.py --long 10000     # a path file's preview and bake against a plain keyed bake
    python bench/bench_path_moves.py --trace-preset   # the Trace a curve preset applied and baked on UR5 and Panda
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

ROBOTS = {
    # name, start joints, mounting link, tool offset (m, XYZ Euler rad)
    "ur5": ([0.3, -1.2, 1.4, -1.0, -1.3, 0.2], "wrist_3_link", ((0.0, 0.1, 0.03), (-1.5708, 0.0, 0.0))),
    "panda": ([0.0, -0.4, 0.0, -2.2, 0.0, 1.9, 0.8, 0.02], "panda_link8", ((0.0, 0.0, 0.15), (0.0, 0.0, -0.785))),
}
KEYS = (1, 25, 49)


def one_run(bpy, name: str, rng) -> dict:
    from mathutils import Quaternion, Vector

    from independent_fk import IndependentFK
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.path_moves import tool_of, tool_offset
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values
    from kinema_nodes.blender.tool_setup import tool_segments
    from kinema_nodes.core import paths
    from kinema_nodes.core.model.example_robots import example_robot

    bpy.ops.wm.read_homefile(use_empty=True)
    start, link, (location, rotation) = ROBOTS[name]
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, np.array(start))
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    assert bpy.ops.kinema.set_up_tool(link=link, offset_location=location, offset_rotation=rotation) == {"FINISHED"}
    target = next(n for n in tree.nodes if getattr(n, "control_object", None) is not None)
    tool = tool_of(target)
    bone = rig.pose.bones[target.control_bone]
    home, turn = bone.location.copy(), bone.rotation_quaternion.copy()
    moves = [rng.uniform(-0.02, 0.02, 3)]
    for _ in KEYS[1:]:
        step = rng.normal(size=3)
        moves.append(moves[-1] + step / np.linalg.norm(step) * rng.uniform(0.1, 0.25))
    axis = rng.normal(size=3)
    for key, move in zip(KEYS, moves):
        bone.location = home + Vector(move)
        bone.rotation_quaternion = Quaternion(axis, 0.3 * (key - 1) / 48) @ turn
        bone.keyframe_insert("location", frame=key)
        bone.keyframe_insert("rotation_quaternion", frame=key)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = KEYS[0], KEYS[-1]
    points = {}
    for key in KEYS:
        scene.frame_set(key)
        points[key] = np.array(bone.matrix)[:3, 3]
    p1, p2 = points[KEYS[1]], points[KEYS[2]]
    side = np.cross(p2 - p1, rng.normal(size=3))
    via_point = (p1 + p2) / 2 + rng.uniform(0.2, 0.5) * np.linalg.norm(p2 - p1) * side / np.linalg.norm(side)
    via = bpy.data.objects.new("Via", None)
    scene.collection.objects.link(via)
    via.matrix_world.translation = rig.matrix_world @ Vector(via_point)
    tool.move = "LINEAR"
    tool.add_move(KEYS[1], "CIRCULAR", via)
    scene.frame_set(KEYS[0])
    fps = scene.render.fps / scene.render.fps_base
    segments = tool_segments(target, rig, fps)
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.tool_setup import preview_reach

    clock = time.perf_counter()
    _, samples = preview_reach(bpy.context, rig)
    preview_s = time.perf_counter() - clock
    clock = time.perf_counter()
    (result,) = bake_tree(tree)
    bake_s = time.perf_counter() - clock
    report = result.report
    agree = sum((s.verdict == "unreachable") == (f in report.not_converged)
                and (s.verdict == "near_limit") == (f in report.near_limit and f not in report.not_converged) for f, s in samples)
    fk, offset = IndependentFK(robot), tool_offset(tool)
    tcp = {}
    for f in range(KEYS[0], KEYS[-1] + 1):
        scene.frame_set(f)
        tcp[f] = (fk.pose(read_joint_values(rig, robot), link) @ offset)[:3, 3]
    a, b = points[KEYS[0]], points[KEYS[1]]
    direction = (b - a) / np.linalg.norm(b - a)
    line = max(np.linalg.norm((tcp[f] - a) - np.dot(tcp[f] - a, direction) * direction) for f in range(KEYS[0], KEYS[1] + 1))
    centre, radius, *_ = paths.circle(p1, via_point, p2)
    radius_error = max(abs(np.linalg.norm(tcp[f] - centre) - radius) for f in range(KEYS[1], KEYS[2] + 1))
    speed = 0.0
    for segment in segments:
        first, last = segment["first"], segment["last"]
        span = last - first
        for f in range(int(first), int(last)):
            if (f - first) / span >= tool.ramp and (f + 1 - first) / span <= 1 - tool.ramp:
                speed = max(speed, abs(np.linalg.norm(tcp[f + 1] - tcp[f]) * fps / segment["speed"] - 1))
    return {"reached": result.report.converged == result.report.frames, "line_mm": line * 1e3, "radius_mm": radius_error * 1e3,
            "speed": speed, "bake_s": bake_s, "preview_s": preview_s, "agree": agree, "samples": len(samples),
            "lengths": [s["length"] for s in segments], "radius": radius}


def follow_run(bpy, name: str, rng) -> dict:
    """Follow Path round a Bezier circle (resolution 64) through the tool centre point, Keep."""
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.path_moves import tool_of, tool_offset
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values
    from kinema_nodes.core.model.example_robots import example_robot
    from kinema_nodes.core.model.kinematics import link_pose
    from independent_fk import IndependentFK

    bpy.ops.wm.read_homefile(use_empty=True)
    start, link, (location, rotation) = ROBOTS[name]
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, np.array(start))
    bpy.context.view_layer.update()
    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    assert bpy.ops.kinema.set_up_tool(link=link, offset_location=location, offset_rotation=rotation) == {"FINISHED"}
    target = next(n for n in tree.nodes if getattr(n, "control_object", None) is not None)
    tool = tool_of(target)
    radius, speed, ramp = rng.uniform(0.04, 0.08), 0.1, 0.2
    offset = tool_offset(tool)
    tcp = (link_pose(robot, read_joint_values(rig, robot), link) @ offset)[:3, 3]
    bpy.ops.curve.primitive_bezier_circle_add(radius=radius, location=tuple(tcp - (radius, 0.0, 0.0)))
    curve = bpy.context.active_object
    curve.data.resolution_u = 64
    centre = np.array(curve.matrix_world.translation)
    tool.path, tool.path_speed, tool.ramp, tool.path_start = curve, speed, ramp, 1.0
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    seconds = 2 * np.pi * radius / ((1 - ramp) * speed)
    scene.frame_start, scene.frame_end = 1, int(np.ceil(seconds * fps)) + 2
    scene.frame_set(1)
    clock = time.perf_counter()
    (result,) = bake_tree(tree)
    bake_s = time.perf_counter() - clock
    fk = IndependentFK(robot)
    points = {}
    for f in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(f)
        points[f] = (fk.pose(read_joint_values(rig, robot), link) @ offset)[:3, 3]
    off = max(abs(np.linalg.norm(p[:2] - centre[:2]) - radius) + abs(p[2] - centre[2]) for p in points.values())
    worst = 0.0
    for f in range(scene.frame_start, scene.frame_end):
        u0, u1 = (f - 1) / (seconds * fps), (f - 0) / (seconds * fps)
        if u0 >= ramp and u1 <= 1 - ramp:
            worst = max(worst, abs(np.linalg.norm(points[f + 1] - points[f]) * fps / speed - 1))
    return {"reached": result.report.converged == result.report.frames, "off_mm": off * 1e3, "speed": worst,
            "radius": radius, "frames": len(points), "bake_s": bake_s}


def long_run(frames: int, tmp: Path) -> dict:
    """A path file of `frames` samples on the UR5 (a 15 cm square with a half-circle side, five
    times round, the speed set so the path takes `frames` frames at 24 fps): the reach preview
    of all its samples (core/reach_preview.py, NumPy solver, one core), then `bake --path`'s bake
    of it (bake_track, the control keyed every frame), against a plain keyed bake of as many
    frames (the control keyed at the first and last frame only, 15 cm apart), same solver."""
    from kinema_nodes.cli.bake import bake_track
    from kinema_nodes.cli.csv_files import TargetTrack
    from kinema_nodes.cli.path_file import ReachPreview
    from kinema_nodes.core import path_legs, paths
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot

    robot = load_robot("ur5")
    start = {"shoulder_lift_joint": -1.2, "elbow_joint": 1.5, "wrist_1_joint": -1.9, "wrist_2_joint": -1.57}
    q = robot.configuration(start, base=robot.mid_configuration())
    pose = link_pose(robot, q, robot.tool_point)
    c = pose[:3, 3]
    corners = [c, c + [-0.15, 0, 0], c + [-0.15, 0.15, 0], c + [0, 0.15, 0]]
    poses, moves, vias = [pose], [], []
    for _ in range(5):
        for i, (move, via) in enumerate((("LINEAR", None), ("CIRCULAR", c + [-0.225, 0.075, 0]), ("LINEAR", None), ("LINEAR", None))):
            end = pose.copy()
            end[:3, 3] = corners[(i + 1) % 4]
            poses.append(end)
            moves.append(move)
            vias.append(via)
    fps = 24.0
    length = sum(leg.seconds for leg in path_legs.path_legs(poses, moves, vias, 1.0, 0.1))  # seconds at 1 m/s
    speed = length * fps / (frames - 1) / 0.999999
    clock = time.perf_counter()
    legs = path_legs.path_legs(poses, moves, vias, speed, 0.1)
    numbers, frame_poses = path_legs.path_frames(legs, fps)
    sample_s = time.perf_counter() - clock
    stacked = np.array(frame_poses)
    track = TargetTrack(numbers, stacked[:, :3, 3].copy(), np.array([paths.matrix_quaternion(p[:3, :3]) for p in stacked]), None)

    reach, preview_s, load_s = ReachPreview(track), [], []

    def timed_preview(*given):
        from kinema_nodes.core.solve import kernel_status

        clock = time.perf_counter()
        kernel_status(wait=True)  # what the preview waits for first: the compiled kernel's load, once per process
        load_s.append(time.perf_counter() - clock)
        clock = time.perf_counter()
        reach(*given)
        preview_s.append(time.perf_counter() - clock)

    path_bake = bake_track("ur5", None, track, tmp / "path.blend", solver="numpy", start=start, fps=fps, before_bake=timed_preview)
    counts = reach.payload()["reach"]["counts"]
    report = path_bake.result.report
    agree = sum((sample.verdict == "unreachable") == (int(f) in report.not_converged)
                and (sample.verdict == "near_limit") == (int(f) in report.near_limit and int(f) not in report.not_converged)
                for f, sample in zip(track.frames, reach.samples))
    far = pose.copy()
    far[:3, 3] = c + [-0.15, 0, 0]
    ends = np.array([pose, far])
    plain = TargetTrack(np.array([1, len(numbers)]), ends[:, :3, 3].copy(), np.array([paths.matrix_quaternion(p[:3, :3]) for p in ends]), None)
    plain_bake = bake_track("ur5", None, plain, tmp / "plain.blend", solver="numpy", start=start, fps=fps)
    return {"frames": len(numbers), "speed": speed, "sample_s": sample_s, "path_bake_s": path_bake.seconds,
            "preview_s": preview_s[0], "load_s": load_s[0], "agree": agree, "plain_bake_s": plain_bake.seconds,
            "path_converged": path_bake.result.report.converged, "plain_converged": plain_bake.result.report.converged,
            "counts": counts}


def main_long(frames: int, write: bool, argv) -> int:
    import tempfile

    import bpy

    from results_file import publish

    with tempfile.TemporaryDirectory() as tmp:
        run = long_run(frames, Path(tmp))
    command = " ".join(["python bench/bench_path_moves.py", *(argv if argv is not None else sys.argv[1:])])
    counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in run["counts"].items())
    lines = [
        "## A long path file: preview and bake against a plain keyed bake (`bench/bench_path_moves.py --long`)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, bpy {bpy.app.version_string}, 2 cores shared "
        "with other sessions' tests (times are one run, wall clock). UR5, NumPy solver, 24 fps: a path file's 15 cm square "
        f"with a half-circle side, five times round at {run['speed'] * 1000:.2f} mm/s (ramps 10 %), "
        f"{run['frames']:,} frames; the plain bake keys the control at its first and last frame only (15 cm apart).",
        "",
        "| what | frames | seconds | converged |",
        "|---|---|---|---|",
        f"| path file to per-frame poses (core/path_legs.py) | {run['frames']:,} | {run['sample_s']:.2f} | |",
        f"| reach preview of every sample (`--json`'s verdicts) | {run['frames']:,} | {run['preview_s']:.2f} | {counts} |",
        f"| before it: the wait for the compiled kernel's load (once per process, begun as the rig is built) | | "
        f"{run['load_s']:.2f} | |",
        f"| bake of the path (`bake --path`) | {run['frames']:,} | {run['path_bake_s']:.2f} | {run['path_converged']:,} |",
        f"| plain keyed bake, same length (`bake --targets`, two rows) | {run['frames']:,} | {run['plain_bake_s']:.2f} | "
        f"{run['plain_converged']:,} |",
        "",
        "Targets (#30): preview <= 1 s and bake <= 10 s for 10,000 samples on one core. Here: preview "
        f"{run['preview_s']:.2f} s ({'met' if run['preview_s'] <= 1.0 else 'not met'}), bake {run['path_bake_s']:.2f} s "
        f"({'met' if run['path_bake_s'] <= 10.0 else 'not met'}). Preview verdicts agreeing with the bake's own per-frame "
        f"result (not converged, near a limit): {run['agree']:,} of {run['frames']:,}. The preview solves each sample "
        "from the one before, all of them in one compiled call (`PreparedSolve.solve_many`, `_kernel_maths._sweep`: "
        "the same bits as the bake's prepared solve frame by frame, back in Python only for a frame the general path "
        "must answer), and judges them in one batch. Before: 20.6 s (per-sample FK, Jacobian and the general solve "
        "entry), then 2.16 s (the bake's prepared solve called per sample, its polish in Python, and the kernel's "
        "plain NumPy stand-in while the compiled kernel loaded).",
    ]
    return publish("bench_path_long", lines, write=write)


TRACE_ROBOTS = {"ur5": [0.3, -1.2, 1.4, -1.0, -1.3, 0.2], "panda": [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5]}


def trace_run(bpy, name: str) -> dict:
    """The shipped "Trace a curve" preset through the operators (Import URDF, Apply Preset, Bake
    to Keyframes, NumPy solver) on `name` posed at TRACE_ROBOTS[name]: the baked tool centre
    point (yourdfpy's FK) against the path and the set speed, frames on the bead clear of the ramps."""
    import math

    from independent_fk import IndependentFK
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.path_moves import path_points, tool_offset
    from kinema_nodes.blender.presets import available_presets
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig, write_joint_values
    from kinema_nodes.core import paths
    from kinema_nodes.core.model.example_robots import example_robot

    bpy.ops.wm.read_homefile(use_empty=True)
    assert bpy.ops.kinema.import_urdf(filepath=str(example_robot(name))) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    q = robot.zero_configuration()
    q[: len(TRACE_ROBOTS[name])] = TRACE_ROBOTS[name]
    write_joint_values(rig, robot, np.clip(q, robot.lower, robot.upper))
    bpy.context.view_layer.update()
    start = read_joint_values(rig, robot).copy()
    preset = next(str(path) for path, p in available_presets() if p.name == "Trace a curve")
    assert bpy.ops.kinema.apply_preset(preset=preset) == {"FINISHED"}
    tree = rig_tree(rig)
    tool = next(n for n in tree.nodes if n.bl_idname == "KinemaToolNode")
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    fk, offset = IndependentFK(robot), tool_offset(tool)
    axis = (fk.pose(start, robot.tool_point) @ offset)[:3, 2]
    bead = path_points(tool.path, rig)
    full = paths.with_approach(bead, axis, tool.approach, tool.retract)
    length = float(np.sum(np.linalg.norm(np.diff(full, axis=0), axis=1)))
    bead_length = length - tool.approach - tool.retract
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    seconds = length / ((1 - tool.ramp) * tool.path_speed)
    scene.frame_start, scene.frame_end = 1, int(math.ceil(seconds * fps)) + 2
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = rig
    clock = time.perf_counter()
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    bake_s = time.perf_counter() - clock
    solver.live = False
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    points = {}
    for f in frames:
        scene.frame_set(f)
        points[f] = (fk.pose(read_joint_values(rig, robot), robot.tool_point) @ offset)[:3, 3]
    a, b = full[:-1], full[1:]
    d = b - a
    seg = np.linalg.norm(d, axis=1)

    def along(p):
        t = np.clip(np.einsum("ij,ij->i", p - a, d) / np.maximum(seg ** 2, 1e-300), 0.0, 1.0)
        gaps = np.linalg.norm(a + t[:, None] * d - p, axis=1)
        i = int(np.argmin(gaps))
        return float(np.sum(seg[:i]) + t[i] * seg[i]), float(gaps[i])

    on = {f: along(points[f]) for f in frames}
    u = {f: (f - 1) / (seconds * fps) for f in frames}
    bead_frames = {f for f in frames if tool.approach < on[f][0] < tool.approach + bead_length}
    cruise = [f for f in frames[:-1] if u[f] >= tool.ramp and u[f + 1] <= 1 - tool.ramp and f in bead_frames and f + 1 in bead_frames]
    speed = max(abs(np.linalg.norm(points[f + 1] - points[f]) * fps / tool.path_speed - 1) for f in cruise)
    return {"frames": len(frames), "cruise": len(cruise), "speed": speed, "off_mm": max(g for _, g in on.values()) * 1e3,
            "approach_mm": abs(np.linalg.norm(points[1] - bead[0]) - tool.approach) * 1e3,
            "retract_mm": abs(np.linalg.norm(points[frames[-1]] - bead[-1]) - tool.retract) * 1e3,
            "bead_m": bead_length, "bake_s": bake_s, "joints": len(TRACE_ROBOTS[name])}


def main_trace(write: bool, argv) -> int:
    from kinema_nodes.core.solve import kernel_status

    kernel_status(wait=True)
    import bpy

    import kinema_nodes
    from results_file import publish

    kinema_nodes.register()
    rows = []
    for name in TRACE_ROBOTS:
        run = trace_run(bpy, name)
        rows.append(f"| {name} ({run['joints']} joints) | {run['bead_m'] * 1000:.1f} | {run['frames']} | {run['cruise']} | "
                    f"{100 * run['speed']:.3f} % | {run['off_mm']:.4f} | {run['approach_mm']:.4f} / {run['retract_mm']:.4f} | "
                    f"{run['bake_s']:.2f} |")
    command = " ".join(["python bench/bench_path_moves.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        "## The Trace a curve preset, applied and baked (`bench/bench_path_moves.py --trace-preset`)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, bpy {bpy.app.version_string}. Through the "
        "operators: Import URDF (example-robot-data), pose, Apply Preset \"Trace a curve\" (a Tool at the tool point on "
        "Follow Path: 20 mm/s, ramps 10 %, approach and retract 3 cm along the tool's axis, Keep; a 15 cm S-curve laid "
        "from where the tool is), NumPy solver, Bake to Keyframes over the pass. Tool centre point by yourdfpy's FK of the "
        "baked joints. Speed: frame-to-frame against the set speed, frames on the bead clear of the ramps.",
        "",
        "| robot | bead length (mm) | frames | frames measured | max speed error | max off the path (mm) "
        "| approach / retract error (mm) | bake s |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Target (#30): speed within 1 % of the set speed away from the ends.",
    ]
    return publish("bench_trace_preset", lines, write=write)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS))
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--long", type=int, metavar="FRAMES", help="only the long path file's preview and bake (own section)")
    parser.add_argument("--trace-preset", action="store_true", help="only the Trace a curve preset on UR5 and Panda (own section)")
    args = parser.parse_args(argv)
    if args.trace_preset:
        return main_trace(not args.no_write, argv)
    if args.long:
        return main_long(args.long, not args.no_write, argv)

    from kinema_nodes.core.solve import wait_for_kernel_build

    wait_for_kernel_build()
    import bpy

    import kinema_nodes

    kinema_nodes.register()
    rng = np.random.default_rng(args.seed)
    rows, previews = [], []
    for name in args.robots:
        every = [one_run(bpy, name, rng) for _ in range(args.runs)]
        runs = [r for r in every if r["reached"]]  # a random path may leave the arm's reach: said, not measured
        lengths = [length for run in runs for length in run["lengths"]]
        agree = sum(r["agree"] for r in every), sum(r["samples"] for r in every)
        previews.append(f"| {name} | {args.runs} | {agree[1]} | {agree[0]} ({100 * agree[0] / agree[1]:.1f} %) | "
                        f"{np.median([r['preview_s'] for r in every]):.2f} |")
        rows.append(f"| {name} ({len(ROBOTS[name][0])} joints) | {len(runs)} of {args.runs} | "
                    f"{min(lengths):.2f}-{max(lengths):.2f} m | "
                    f"{min(r['radius'] for r in runs):.2f}-{max(r['radius'] for r in runs):.2f} m | "
                    f"{max(r['line_mm'] for r in runs):.4f} | {max(r['radius_mm'] for r in runs):.4f} | "
                    f"{100 * max(r['speed'] for r in runs):.3f} % | {np.median([r['bake_s'] for r in runs]):.2f} |")
    follow_rows = []
    for name in args.robots:
        every = [follow_run(bpy, name, rng) for _ in range(args.runs)]
        runs = [r for r in every if r["reached"]]
        radii = [r["radius"] for r in runs]
        follow_rows.append(f"| {name} | {len(runs)} of {args.runs} | {min(radii):.3f}-{max(radii):.3f} m "
                           f"| {max(r['off_mm'] for r in runs):.4f} | {100 * max(r['speed'] for r in runs):.3f} % | "
                           f"{np.median([r['bake_s'] for r in runs]):.2f} | "
                           f"{min(r['frames'] for r in runs)}-{max(r['frames'] for r in runs)} |")
    from results_file import publish

    command = " ".join(["python bench/bench_path_moves.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        "## Moves between keys: Linear and Circular Tool moves, baked (`bench/bench_path_moves.py`)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, bpy {bpy.app.version_string}. Each run: a Tool on the "
        "robot's flange at an offset, the control keyed at frames 1, 25, 49 (random moves of 10-25 cm and a turn), "
        "Linear 1-25, Circular 25-49 through a random via empty, ramps 25 % of each segment, NumPy solver, Bake (49 frames). "
        "Tool centre point by yourdfpy's FK of the baked joints. Speed: error against the Tool panel's speed, frames clear of the ramps.",
        "",
        "| robot | runs every frame of which converged (measured) | segment lengths | arc radii | Linear: max off the line (mm) "
        "| Circular: max radius error (mm) "
        "| max speed error | median bake s |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "A run with a frame the solver did not converge on (the random path left the arm's reach or met a joint limit) "
        "is counted, not measured: its frames are not on the path by construction.",
        "",
        "Targets (#30): off the line <= 0.1 mm, radius error <= 0.1 mm, speed within 1 % away from the ends.",
        "",
        "**Preview Reach against the bake**, the same runs (all of them, reached or not): each frame's verdict before the bake "
        "(unreachable, near a limit) against the bake's own per-frame result (not converged, near a limit). Target: 100 %.",
        "",
        "| robot | runs | frames | frames agreeing | median preview s (49 frames) |",
        "|---|---|---|---|---|",
        *previews,
        "",
        "**Follow Path**: a Bezier circle (resolution 64, random radius) through the tool centre point, 0.1 m/s from frame 1, "
        "ramps 20 %, orientation Keep; tool centre point by yourdfpy's FK of the baked joints against the true circle "
        "(the Bezier circle's own departure from a circle, about 3e-4 of the radius, counts against it).",
        "",
        "| robot | runs every frame of which converged | radii | max off the circle (mm) | max speed error | median bake s | frames |",
        "|---|---|---|---|---|---|---|",
        *follow_rows,
    ]
    return publish("bench_path_moves", lines, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
