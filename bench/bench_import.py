"""Benchmark: importing real robots (with their meshes) into Blender as rigs.

Targets (issue 4): Panda with meshes <= 3 s, Talos <= 15 s. Each import starts from an empty
file, so every mesh file is read and built (no sharing with an earlier import). Writes its own
section of bench/RESULTS.md.

A robot is a name (`kinema-nodes robots`) or a path: MJCF robots are robosuite's
(`robosuite_panda`, `robosuite_ur5e`), and `franka_xacro` is robosuite's copy of the Franka
description as xacro (expanded through xacro, meshes from its package folder).

    /work/venv/bin/python bench/bench_import.py [--repeats 3] [--robots panda talos ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

TARGETS = {"panda": 3.0, "talos": 15.0}
START, END = "<!-- bench_import: start -->", "<!-- bench_import: end -->"


def robot_source(name: str):
    """(robot name or path, package folders) for a row of the table."""
    if name != "franka_xacro":
        return name, None
    import importlib.util

    spec = importlib.util.find_spec("robosuite")
    bullet = Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "bullet_data"
    return bullet / "panda_description" / "urdf" / "panda_arm.urdf.xacro", [bullet]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--robots", nargs="*",
                        default=["panda", "talos", "ur5", "g1", "tiago", "franka_xacro", "robosuite_panda", "robosuite_ur5e"])
    parser.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()

    started = time.perf_counter()
    import bpy
    import trimesh

    import kinema_nodes
    from kinema_nodes.blender.build import import_urdf

    kinema_nodes.register()
    setup_s = time.perf_counter() - started

    rows = []
    for name in args.robots:
        times = []
        for _ in range(args.repeats):
            bpy.ops.wm.read_homefile(use_empty=True)
            t0 = time.perf_counter()
            source, folders = robot_source(name)
            obj = import_urdf(bpy.context, source, package_path=folders)
            times.append(time.perf_counter() - t0)
        meshes = [c for c in obj.children if c.type == "MESH"]
        vertices = sum(len(m.vertices) for m in {c.data for c in meshes})
        median = statistics.median(times)
        target = TARGETS.get(name)
        verdict = "" if target is None else ("within" if median <= target else "OVER") + f" {target:g} s target"
        rows.append((name, len(obj.data.bones), len(meshes), vertices, median, min(times), max(times), verdict))
        print(f"{name:8s} bones {len(obj.data.bones):3d}  mesh objects {len(meshes):4d}  vertices {vertices:8d}  "
              f"median {median:.2f} s (min {min(times):.2f}, max {max(times):.2f})  {verdict}", flush=True)

    lines = [
        START,
        "## Robot import into Blender: URDF, xacro, MJCF (`bench/bench_import.py`)",
        "",
        f"Command: `python bench/bench_import.py --repeats {args.repeats} --robots {' '.join(args.robots)}`  ",
        (
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python {platform.python_version()}, "
            f"bpy {bpy.app.version_string}, trimesh {trimesh.__version__}. Each import into an empty file "
            f"(every mesh read and built); median of {args.repeats}. Add-on registration + `import bpy`: {setup_s:.1f} s (not counted)."
        ),
        "",
        "| robot | bones | mesh objects | vertices built | median s | min s | max s | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, bones, objects, vertices, median, low, high, verdict in rows:
        lines.append(f"| {name} | {bones} | {objects} | {vertices} | {median:.2f} | {low:.2f} | {high:.2f} | {verdict} |")
    lines.append(END)
    section = "\n".join(lines)

    results = Path(args.results)
    text = results.read_text() if results.exists() else "# Benchmark results\n"
    if START in text and END in text:
        text = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: section, text, flags=re.DOTALL)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    results.write_text(text)
    print(f"wrote {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
