"""Benchmark: check limits, export and retime a long baked shot (issue 15).

A 10,000-frame shot of the xArm7 (7 joints, example-robot-data) keyed the way a bake keys it
(one LINEAR key per frame per joint, `baking.write_joint_keys`), at 24 fps, in real Blender:

- check: `blender.limits.check_rig` — read the joint curves on every frame, velocity /
  acceleration / jerk against their limits, timeline markers, the panel's table (target <= 1 s);
- export: `rig_trajectory` + `core.shot.export.export`, per format (csv, json, ros2 bag + YAML,
  mujoco .npz for a MuJoCo model compiled from the same URDF) (target <= 1 s each);
- retime: `core.shot.retime.retime` (TOPP-RA), and writing the retimed copy of the action (target <= 5 s).

Each is timed `--repeat` times; the table shows the median and the slowest. Also one
`kinema-nodes export` in a fresh process (bpy start-up included), for scale.
Writes its own section of bench/RESULTS.md.

    .venv/bin/python bench/bench_export.py [--frames 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from results_file import write_section

SECTION = "bench_export"
ROBOT = "xarm7"
FPS = 24


def _load() -> float:
    return os.getloadavg()[0]


def smooth_path(robot, frames: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = np.linspace(0.0, 1.0, frames)[:, None]
    middle = np.clip(robot.mid_configuration(), -1.0, 1.0)
    q = middle.copy()
    for turns in (3, 7, 13):  # slow sines: within the velocity limits at 24 fps, some acceleration to check
        q = q + 0.25 * np.sin(2 * np.pi * turns * s + rng.uniform(0, 2 * np.pi, robot.dof))
    return np.clip(q, robot.lower, robot.upper)


def timed(function, repeat: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return float(np.median(times)), float(max(times)), result


def mjcf_model(robot, folder: Path) -> Path:
    import mujoco

    text = robot.path.read_text()
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", text, flags=re.S)
    text = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler fusestatic="false"/></mujoco>', text, count=1)
    model = mujoco.MjModel.from_xml_string(text)
    path = folder / f"{ROBOT}.xml"
    mujoco.mj_saveLastXML(str(path), model)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    load_start = _load()

    import bpy

    import kinema_nodes
    from kinema_nodes.blender.baking import write_joint_keys
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.limits import check_rig, retime_rig, rig_trajectory
    from kinema_nodes.blender.rig import robot_for_rig
    from kinema_nodes.core.shot.export import export
    from kinema_nodes.core.shot.retime import retime
    from kinema_nodes.core.shot.limits import check_limits

    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = import_urdf(bpy.context, ROBOT)
    robot = robot_for_rig(rig)
    frames = np.arange(1, args.frames + 1, dtype=float)
    q = smooth_path(robot, args.frames)
    write_joint_keys(rig, robot, frames, q, np.ones(robot.dof, dtype=bool))
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, args.frames
    settings = rig.data.kinema_limits
    settings.max_acceleration, settings.max_jerk, settings.margin = 0.02, 0.004, 10.0  # tight: frames to flag and mark

    rows = []
    median, slowest, (report, _) = timed(lambda: check_rig(rig, scene), args.repeat)
    counts = {k: len(v) for k, v in report.violations.items()}
    rows.append(("check in Blender (read curves, check, markers, table)", median, slowest, 1.0,
                 f"{counts['velocity']}/{counts['acceleration']}/{counts['jerk']} joints over v/a/j, "
                 f"{len(scene.timeline_markers)} markers"))
    limits = report.limits
    median, slowest, _ = timed(lambda: check_limits(frames, q, limits, FPS), args.repeat)
    rows.append(("check, core only (arrays in)", median, slowest, 1.0, ""))

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        model = mjcf_model(robot, folder)
        outs = {"csv": folder / "shot.csv", "json": folder / "shot.json", "ros2": folder / "shot_bag",
                "mujoco": folder / "shot.npz"}
        sizes = {}
        for fmt, out in outs.items():
            def run(fmt=fmt, out=out):
                return export(rig_trajectory(rig, scene), fmt, out, model=str(model), velocities=(fmt == "json"))

            median, slowest, paths = timed(run, args.repeat)
            size = sum(sum(f.stat().st_size for f in p.rglob("*")) if p.is_dir() else p.stat().st_size for p in paths)
            sizes[fmt] = size
            rows.append((f"export {fmt} (from the rig: read, check, write)", median, slowest, 1.0, f"{size / 1e6:.1f} MB"))

        median, slowest, result = timed(lambda: retime(frames, q, limits, FPS), args.repeat)
        rows.append(("retime, core (TOPP-RA + sampling + own check)", median, slowest, 5.0,
                     f"{result.original_duration_s:.1f} s -> {result.optimal_duration_s:.1f} s shortest, "
                     f"{result.frame_count} frames"))
        original = rig.animation_data.action

        def retime_in_blender():
            rig.animation_data.action = original
            return retime_rig(rig, scene)

        median, slowest, _ = timed(retime_in_blender, 1)
        rows.append(("retime in Blender (read, retime, write the retimed copy)", median, slowest, 5.0, "once"))

        blend = folder / "shot.blend"
        rig.animation_data.action = original
        scene.frame_start, scene.frame_end = 1, args.frames
        bpy.ops.wm.save_as_mainfile(filepath=str(blend))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kinema_nodes", "export", str(blend), "--format", "csv", "--out",
                               str(folder / "cli.csv")], capture_output=True, text=True, check=False)
        cli_seconds = time.perf_counter() - started
    load_end = _load()

    lines = [
        "## Limits, export and retime of a long shot (`bench/bench_export.py`)",
        "",
        f"Command: `.venv/bin/python bench/bench_export.py --frames {args.frames} --repeat {args.repeat}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python {platform.python_version()}, "
        f"bpy {bpy.app.version_string}, numpy {np.__version__}. {ROBOT} ({robot.dof} joints) from example-robot-data, "
        f"{args.frames} frames keyed as a bake keys them, {FPS} fps; limits: URDF velocity, 0.02 rad/s², 0.004 rad/s³ (tight, so that there are violations to mark), margin 10 %. "
        f"Median and slowest of {args.repeat} runs (retime in Blender: one run). "
        f"Load average (1 min) at start / end: {load_start:.1f} / {load_end:.1f}.",
        "",
        "| what | median s | slowest s | target s | verdict | notes |",
        "|---|---|---|---|---|---|",
    ]
    for what, median, slowest, target, note in rows:
        verdict = "within" if slowest <= target else "OVER"
        lines.append(f"| {what} | {median:.3f} | {slowest:.3f} | ≤ {target:g} | {verdict} | {note} |")
    lines += ["", f"`kinema-nodes export shot.blend --format csv` in a fresh process (importing bpy, opening the file "
                  f"included): {cli_seconds:.2f} s, exit {done.returncode}."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
