"""Solving ahead while Blender is idle, on robots the live-memory tests never used (#33).

Per robot, in a fresh file: import it (File ▸ Import ▸ Robot), Add IK Target with the default
solver (PyRoki, once its background build is ready), key the control along a loop of ±3 cm (and
±0.1 rad) every 10 frames over `--frames` frames, play the loop twice (the rig as a looped playback
leaves it), then from frame 1:
- a first playback with nothing remembered (`forget`): the kernel's frame calls, restart batches,
  CPU ms per frame_set;
- the same playback after the idle timer's turns (`evaluator.solve_ahead` until done, timed apart:
  the idle time it takes): its kernel calls (0 where every frame was solved ahead), CPU ms per
  frame_set, and how many frames' joints equal the first playback's to the bit;
- then from the last frame, a scrub back to frame 1 with nothing remembered, and the same scrub
  back after the idle turns (which solve the playback's frames, then the scrub back's): kernel
  calls, CPU ms per frame_set, frames equal to the bit.
Writes its section of bench/RESULTS.md.

    python bench/bench_solve_ahead.py [--robots a,b,...] [--frames 120] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from robot_zoo_robots import robot_file  # noqa: E402

SECTION = "bench_solve_ahead"
#: Robots the live-memory tests never played (they use the Panda, robosuite's iiwa and the UR3).
ROBOTS = ("robosuite_jaco", "xarm7", "so100", "rtb_puma560", "robosuite_kinova3", "z1")


def one(bpy, name: str, frames: int) -> dict:
    import numpy as np
    from mathutils import Euler

    from kinema_nodes import evaluator
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig
    from kinema_nodes.core.solve import _kernel, restart_count, wait_for_pyroki
    from kinema_nodes.session import forget_answers

    bpy.ops.wm.read_homefile(use_empty=True)
    path, packages = robot_file(name)
    bpy.ops.kinema.import_urdf(filepath=path, package_path=packages)
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    bpy.ops.kinema.add_ik_target()
    tree = rig_tree(rig)
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    target = next(n for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode")
    wait_for_pyroki()
    bone = rig.pose.bones[target.control_bone]
    base, base_rotation = bone.location.copy(), bone.rotation_quaternion.copy()
    for i, frame in enumerate(range(1, frames + 2, 10)):
        a = 0.7 * i
        bone.location = base + type(base)((0.03 * np.cos(a), 0.03 * np.sin(a), 0.03 * np.sin(2 * a)))
        bone.rotation_quaternion = base_rotation @ Euler((0.1 * np.sin(a), 0.1 * np.cos(a), 0.0)).to_quaternion()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    for frame in list(range(1, frames + 1)) * 2:
        scene.frame_set(frame)
    calls = []
    run = _kernel.frame_form()

    def counted(*args):
        calls.append(1)
        return run(*args)

    _kernel._frame_form = counted

    def playback(order=None):
        before, batches, cpu, seen = len(calls), restart_count(), [], []
        for frame in order or range(2, frames + 1):
            c0 = time.thread_time()
            scene.frame_set(frame)
            cpu.append((time.thread_time() - c0) * 1000.0)
            seen.append(read_joint_values(rig, robot))
        return len(calls) - before, restart_count() - batches, statistics.median(cpu), seen

    try:
        scene.frame_set(1)
        start = read_joint_values(rig, robot)
        forget_answers()
        first = playback()
        forget_answers()
        scene.frame_set(frames)
        scene.frame_set(1)
        same_start = bool(np.array_equal(read_joint_values(rig, robot), start))
        c0 = time.perf_counter()
        turns = 1
        while evaluator.solve_ahead(scene, 4.0):
            turns += 1
        ahead_ms = (time.perf_counter() - c0) * 1000.0
        after = playback()
        back = range(frames - 1, 0, -1)
        end = read_joint_values(rig, robot)
        forget_answers()
        first_back = playback(back)
        forget_answers()
        scene.frame_set(1)
        scene.frame_set(frames)
        same_end = bool(np.array_equal(read_joint_values(rig, robot), end))
        c0 = time.perf_counter()
        while evaluator.solve_ahead(scene, 4.0):
            pass
        back_ms = (time.perf_counter() - c0) * 1000.0
        after_back = playback(back)
    finally:
        _kernel._frame_form = run
    equal = sum(bool(np.array_equal(a, b)) for a, b in zip(first[3], after[3]))
    equal_back = sum(bool(np.array_equal(a, b)) for a, b in zip(first_back[3], after_back[3]))
    summary = evaluator.readout_of(tree, solver.name).get("summary") or solver.summary
    return {"robot": name, "dof": robot.dof, "backend": solver.backend, "first_calls": first[0],
            "first_batches": first[1], "first_ms": first[2], "ahead_ms": ahead_ms, "turns": turns,
            "after_calls": after[0], "after_batches": after[1], "after_ms": after[2], "equal": equal,
            "frames": frames - 1, "same_start": same_start, "summary": summary.split(" (")[0],
            "back_first_calls": first_back[0], "back_first_ms": first_back[2], "back_ahead_ms": back_ms,
            "back_calls": after_back[0], "back_ms": after_back[2], "equal_back": equal_back, "same_end": same_end}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    import bpy

    import kinema_nodes
    from kinema_nodes.core.solve import kernel_status

    kernel_status(wait=True)
    kinema_nodes.register()
    lines = [
        "## Solving ahead while idle, on robots the live-memory tests never played (#33): `bench/bench_solve_ahead.py`",
        "",
        f"Command: `python bench/bench_solve_ahead.py --frames {args.frames}`; Blender {bpy.app.version_string}, "
        f"Python {platform.python_version()}. Per robot: import, Add IK Target (default solver), the control keyed "
        "along a ±3 cm / ±0.1 rad loop every 10 frames, the loop played twice, then frames 2.. played from frame 1 "
        "with nothing remembered (first playback) and again after the idle timer's turns (`solve_ahead`, 4 ms a "
        "turn, until done); then from the last frame a scrub back to frame 1, with nothing remembered and again "
        "after the idle turns (which solve the playback's frames, then the scrub back's). Kernel calls = the "
        "compiled frame call's runs during the playback or scrub; CPU ms = median thread CPU per frame_set; same "
        "bits = frames whose joints equal the first playback's (scrub's) exactly.",
        "",
        "| robot | dof | solver | first playback: kernel calls / restart batches / ms | solving ahead: ms (turns) | "
        "after it: kernel calls / restart batches / ms | same bits | first scrub back: kernel calls / ms | "
        "solving ahead and behind: ms | scrub back after it: kernel calls / ms | same bits | last readout |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    failed = 0
    for name in args.robots.split(","):
        try:
            r = one(bpy, name, args.frames)
        except Exception as exc:  # noqa: BLE001 -- one robot's failure is its row, the others still run
            failed += 1
            row = f"| {name} | | | failed: {type(exc).__name__}: {exc} | | | | | | | | |"
        else:
            row = (f"| {r['robot']} | {r['dof']} | {r['backend']} | {r['first_calls']} / {r['first_batches']} / "
                   f"{r['first_ms']:.3f} | {r['ahead_ms']:.1f} ({r['turns']}) | {r['after_calls']} / {r['after_batches']} / "
                   f"{r['after_ms']:.3f} | {r['equal']}/{r['frames']}{'' if r['same_start'] else ' (frame 1 differed)'} | "
                   f"{r['back_first_calls']} / {r['back_first_ms']:.3f} | {r['back_ahead_ms']:.1f} | {r['back_calls']} / "
                   f"{r['back_ms']:.3f} | {r['equal_back']}/{r['frames']}{'' if r['same_end'] else ' (last frame differed)'} | "
                   f"{r['summary']} |")
        print(row, flush=True)
        lines.append(row)
    lines += ["", f"Load average before {load_before}, after {', '.join(f'{v:.2f}' for v in os.getloadavg())}."]
    from results_file import publish

    publish(SECTION, lines, write=not args.no_write)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
