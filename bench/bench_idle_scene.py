"""What the add-on costs a scene that holds no robot: per frame_set and per depsgraph update.

Its frame and depsgraph handlers run in every scene of every file once the add-on is enabled,
so whatever they do per object is a tax on the user's other work. The scene: N empties (no
animation, so a frame_set costs Blender almost nothing); timed in interleaved blocks with the
add-on registered and unregistered in one process, thread CPU time. An "update" moves one empty
and calls view_layer.update(), as a drag does. Writes its section of bench/RESULTS.md.

    python bench/bench_idle_scene.py [--objects 10 100 1000 5000] [--blocks 6]
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
sys.path.insert(0, str(ROOT))  # this checkout's kinema_nodes, not whichever one is installed

from results_file import publish  # noqa: E402

SECTION = "bench_idle_scene"


def _block(bpy, frames: int) -> tuple[float, float]:
    """(ms per frame_set, ms per update) over one block."""
    scene, obj = bpy.context.scene, bpy.data.objects["e0"]
    start = scene.frame_current
    t = time.thread_time()
    for f in range(frames):
        scene.frame_set(start + 1 + f)
    per_frame = (time.thread_time() - t) / frames * 1e3
    t = time.thread_time()
    for i in range(frames):
        obj.location.x = (i % 7) * 1e-3
        bpy.context.view_layer.update()
    return per_frame, (time.thread_time() - t) / frames * 1e3


def measure(bpy, kinema_nodes, count: int, blocks: int, frames: int = 100) -> dict:
    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    for i in range(count):
        bpy.context.scene.collection.objects.link(bpy.data.objects.new(f"e{i}", None))
    bpy.context.scene.frame_end = 10 ** 6
    got = {True: [], False: []}
    kinema_nodes.unregister()
    for _ in range(blocks):
        for enabled in (True, False):
            (kinema_nodes.register if enabled else kinema_nodes.unregister)()
            _block(bpy, 10)  # warm
            got[enabled].append(_block(bpy, frames))
    return {k: tuple(statistics.median(b[i] for b in v) for i in range(2)) for k, v in got.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    import bpy

    import kinema_nodes

    load = os.getloadavg()
    lines = ["## What the add-on costs a scene with no robot (`bench/bench_idle_scene.py`)", "",
             f"Command: `python bench/bench_idle_scene.py --objects {' '.join(map(str, args.objects))} --blocks {args.blocks}`; "
             f"Blender {bpy.app.version_string}, Python {platform.python_version()}; thread CPU ms, medians of {args.blocks} "
             "interleaved blocks of 100 (add-on registered / unregistered). Empties only, no animation; an update "
             "moves one empty and calls view_layer.update().", "",
             "| objects | frame_set, add-on | frame_set, without | update, add-on | update, without | add-on's own per update |",
             "|---|---|---|---|---|---|"]
    for count in args.objects:
        got = measure(bpy, kinema_nodes, count, args.blocks)
        on, off = got[True], got[False]
        lines.append(f"| {count} | {on[0]:.3f} | {off[0]:.3f} | {on[1]:.3f} | {off[1]:.3f} | {on[1] - off[1]:.3f} |")
    lines += ["", f"Load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}."]
    return publish(SECTION, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
