"""The kernels' first compile on a new machine, and what a drag meanwhile costs.

Each case runs in a fresh process with an empty Kinema cache folder (a machine that never ran
Kinema). It starts the compiled kernel's build and times tracking solves on arm6 while the build
runs (the NumPy form answers them), then the first collision measurement once the build is done:

- **child** (today): the first compile runs in a child process (`_kernel._compile_in_child`),
  this process only loads the cache, and the collision kernel is warmed with it;
- **in-process** (before): the compile runs in this process's background thread
  (`_compile_in_child` replaced by one that declines), the collision kernel not warmed.

    python bench/bench_first_compile.py [--drags 200] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SECTION = "bench_first_compile"


def one(route: str, drags: int) -> dict:
    import numpy as np

    from kinema_nodes.core import solve as S
    from kinema_nodes.core.model import kinematics, rotations
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import _kernel

    if route == "in-process":
        _kernel._compile_in_child = lambda: False
        _kernel._warm_collisions = lambda: None
    robot = load_robot("arm6")
    q0 = robot.zero_configuration() + 0.2
    started = time.perf_counter()
    _kernel._compiled()  # the build starts, as the first solve starts it
    times, q, index = [], q0.copy(), 0
    while _kernel.kernel_building() and len(times) < drags:
        index += 1
        pose = kinematics.link_pose(robot, q0 + 0.002 * (index % 50), robot.tool_point)
        target = S.IKTarget(link=robot.tool_point, position=tuple(pose[:3, 3]),
                            wxyz=tuple(rotations.matrix_to_quaternion(pose[:3, :3])))
        begun = time.perf_counter()
        q = S.solve(robot, target, q, S.SolveOptions(backend="numpy", budget_ms=5000)).joints
        times.append((time.perf_counter() - begun) * 1000.0)
    S.kernel_status(wait=True)
    ready_s = time.perf_counter() - started
    from kinema_nodes.core.collision import Avoid, clearance

    begun = time.perf_counter()
    clearance(robot, q0, Avoid())
    first_clearance_ms = (time.perf_counter() - begun) * 1000.0
    return {"route": route, "drags": len(times), "median_ms": float(np.median(times)) if times else None,
            "p99_ms": float(np.percentile(times, 99)) if times else None, "worst_ms": max(times) if times else None,
            "ready_s": ready_s, "first_clearance_ms": first_clearance_ms, "built": _kernel.build_route}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drags", type=int, default=200)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.one:
        print("FIRST-COMPILE " + json.dumps(one(args.one, args.drags)), flush=True)
        return 0
    load_before = os.getloadavg()
    rows = []
    for route in ("child", "in-process"):
        env = dict(os.environ, KINEMA_CACHE_DIR=tempfile.mkdtemp(prefix="kinema-first-compile-"))
        env.pop("NUMBA_CACHE_DIR", None)
        done = subprocess.run([sys.executable, __file__, "--one", route, "--drags", str(args.drags)], capture_output=True,
                              text=True, timeout=1800, env=env)
        line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST-COMPILE ")), None)
        rows.append(json.loads(line[len("FIRST-COMPILE "):]) if line else {"route": route, "error": done.stderr[-300:]})
        print(json.dumps(rows[-1]), file=sys.stderr)
    load_after = os.getloadavg()
    import numba

    lines = [
        "## The kernels' first compile on a new machine (`bench/bench_first_compile.py`)",
        "",
        f"Command: `python bench/bench_first_compile.py --drags {args.drags}`; load average before "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, numba {numba.__version__}. "
        "Each route in a fresh process with an empty cache folder; arm6 tracking solves (wall ms) while the build runs, "
        "then the first collision measurement (Avoid Collisions' first frame) once it is done.",
        "",
        "| route | solves during the build | median ms | p99 ms | worst ms | build ready (s) | first clearance (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['route']} | failed: {' '.join(row['error'].split())[:120]} ||||||")
            continue
        lines.append(f"| {row['route']} | {row['drags']} | {row['median_ms']:.1f} | {row['p99_ms']:.1f} | {row['worst_ms']:.1f} | "
                     f"{row['ready_s']:.1f} | {row['first_clearance_ms']:.0f} |")
    from results_file import publish

    return publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
