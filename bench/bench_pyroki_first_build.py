"""PyRoki's first build on a new machine, and what a drag answered meanwhile costs.

Each case runs in a fresh process with an empty Kinema cache folder (a machine that never ran
PyRoki). It starts the background build of ur5's program for tool0, as Add IK Target does,
and times tracking solves on the NumPy backend while the build runs (the live path answers on
it until PyRoki is ready); the numba kernel is off (KINEMA_NO_NUMBA), so every solve is Python
that needs the GIL, which is what a build held in this process takes from it:

- **child** (today): the trace, export and XLA compile run in a child process
  (`_pyroki_child`), and this process loads what it left;
- **in-process** (before): the child declined, the build runs in this process's worker thread.

    python bench/bench_pyroki_first_build.py [--robot ur5] [--link tool0] [--drags 20000] [--no-write]
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

SECTION = "bench_pyroki_first_build"


def one(route: str, name: str, link: str, drags: int) -> dict:
    import numpy as np

    from kinema_nodes.core import solve as S
    from kinema_nodes.core.model import kinematics, rotations
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import _warming

    child_s, child_ended = [], []
    if route == "in-process":
        _warming.build_in_child = lambda robot, links, meanwhile=None: "declined by the benchmark"
    else:
        in_child = _warming.build_in_child

        def timed(robot, links, meanwhile=None):
            begun = time.perf_counter()
            try:
                return in_child(robot, links, meanwhile)
            finally:
                child_s.append(time.perf_counter() - begun)
                child_ended.append(time.perf_counter())

        _warming.build_in_child = timed
    robot = load_robot(name, check_meshes=False)
    q0 = robot.mid_configuration()
    options = S.SolveOptions(backend="numpy", budget_ms=5000)
    pose = kinematics.link_pose(robot, q0, link)
    S.solve(robot, S.IKTarget(link=link, position=tuple(pose[:3, 3]),
                              wxyz=tuple(rotations.matrix_to_quaternion(pose[:3, :3]))), q0, options)  # imports paid
    started = time.perf_counter()
    _warming.pyroki_state(robot, (link,))  # the background build, as Add IK Target starts it
    times, when, q, index = [], [], q0.copy(), 0
    while _warming.building() and len(times) < drags:
        index += 1
        pose = kinematics.link_pose(robot, q0 + 0.002 * (index % 50), link)
        target = S.IKTarget(link=link, position=tuple(pose[:3, 3]), wxyz=tuple(rotations.matrix_to_quaternion(pose[:3, :3])))
        begun = time.perf_counter()
        q = S.solve(robot, target, q, options).joints
        times.append((time.perf_counter() - begun) * 1000.0)
        when.append(begun)
        time.sleep(0.01)  # a drag is an event among others, not a busy loop
    _warming.wait_for_builds()
    ready_s = time.perf_counter() - started
    state, solver = _warming.pyroki_state(robot, (link,))
    begun = time.perf_counter()
    first = S.solve(robot, S.IKTarget(link=link, position=tuple(pose[:3, 3]),
                                      wxyz=tuple(rotations.matrix_to_quaternion(pose[:3, :3]))), q0,
                    S.SolveOptions(backend="pyroki"))
    first_ms = (time.perf_counter() - begun) * 1000.0
    after = [t for t, w in zip(times, when) if child_ended and w >= child_ended[0]]
    return {"route": route, "built": getattr(solver, "build_route", state), "drags": len(times),
            "median_ms": float(np.median(times)) if times else None, "p99_ms": float(np.percentile(times, 99)) if times else None,
            "worst_ms": max(times) if times else None, "worst_loading_ms": max(after) if after else None,
            "ready_s": ready_s, "child_s": child_s[0] if child_s else None, "first_pyroki_ms": first_ms,
            "first_backend": first.backend}


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="ur5")
    parser.add_argument("--link", default="tool0")
    parser.add_argument("--drags", type=int, default=20000)
    parser.add_argument("--routes", default="child,in-process")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.one:
        print("FIRST-BUILD " + json.dumps(one(args.one, args.robot, args.link, args.drags)), flush=True)
        os._exit(0)
    load_before = os.getloadavg()
    rows = []
    for route in args.routes.split(","):
        env = dict(os.environ, KINEMA_CACHE_DIR=tempfile.mkdtemp(prefix="kinema-first-build-"), KINEMA_NO_NUMBA="1")
        done = subprocess.run([sys.executable, __file__, "--one", route, "--robot", args.robot, "--link", args.link,
                               "--drags", str(args.drags)], capture_output=True, text=True, timeout=1800, env=env)
        line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST-BUILD ")), None)
        rows.append(json.loads(line[len("FIRST-BUILD "):]) if line else {"route": route, "error": done.stderr[-300:]})
        print(json.dumps(rows[-1]), file=sys.stderr)
    load_after = os.getloadavg()
    import jax

    lines = [
        "## PyRoki's first build on a new machine (`bench/bench_pyroki_first_build.py`)",
        "",
        f"Command: `python bench/bench_pyroki_first_build.py --robot {args.robot} --link {args.link} --drags {args.drags}`; "
        f"load average before {', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, JAX {jax.__version__}. "
        "Each route in a fresh process with an empty cache folder and the numba kernel off; tracking solves on the "
        "NumPy backend (wall ms, 10 ms apart) while the background build runs, then the first PyRoki solve. "
        "\"of which the child\": the child process's share of the build; the rest is this process loading what it left.",
        "",
        "| route | built | solves during the build | median ms | p99 ms | worst ms | worst ms once the child was done | "
        "build ready (s) | of which the child (s) | first PyRoki solve (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['route']} | failed: {' '.join(row['error'].split())[:120]} |||||||||")
            continue
        lines.append(f"| {row['route']} | {row['built']} | {row['drags']} | {row['median_ms']:.1f} | {row['p99_ms']:.1f} | "
                     f"{row['worst_ms']:.1f} | {_or_dash(row['worst_loading_ms'])} | "
                     f"{row['ready_s']:.1f} | {_or_dash(row['child_s'])} | "
                     f"{row['first_pyroki_ms']:.0f} |")
    from results_file import publish

    return publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
