"""Plan Between Keys beside its peer, in one run (issue #31's speed and quality targets).

    .venv/bin/python bench/bench_plan_peer.py --problems 100 --quality 10

The peer is the strongest CPU planner installable here: OMPL's RRTConnect as a roboticist sets it
up (MoveIt's shape), over the same capsule checker: OMPL's own DiscreteMotionValidator every
0.005 rad (L2, so no coarser than our dense step), then PathSimplifier.simplifyMax. VAMP
(`vamp-planner`) is the other candidate #31 names; PyPI has only its source, and its build fetches
dependencies from the network and needs Eigen, so it cannot be installed on this machine or on a
user's Blender (0.6.4, tried 2026-12-04).

The same problems as bench/bench_plan.py (same generator and seed), each solved by ours
(`plan_between_keys`: RRTConnect with certified motions, rope shortcutting, dense re-check,
timing) and by the peer, interleaved problem by problem. Success: a path found within the 5 s
budget and clear at every 0.005 rad step by the checker (each sample measured). Times: wall and
CPU (time.process_time) of the whole call; the peer's does not include a dense re-check or the
timing, which ours does.

Quality (#31: path length within 1.3x of the best the same planner finds with 10x the time): on
the first `--quality` problems of each scene, ours is run again with 10 other seeds (10x the
time); the best of the 11 paths is the reference; the table gives ours / best, median and worst.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_plan import FPS, FRAMES, MARGIN, SCENES, problems  # noqa: E402
from results_file import publish  # noqa: E402

from kinema_nodes.core.collision import Avoid  # noqa: E402
from kinema_nodes.core.model.loading import load_robot  # noqa: E402
from kinema_nodes.core.plan import densify, plan_between_keys  # noqa: E402
from kinema_nodes.core.plan.between_keys import (CHECK_STEP, PLANNING_BUDGET_S, _Checker, plan_path,  # noqa: E402
                                                 default_free_joints, segment_seed)
from kinema_nodes.core.shot.limits import limits_for  # noqa: E402


def peer_plan(robot, checker, start, goal, free, seed, resolution=None):
    """OMPL RRTConnect + DiscreteMotionValidator + simplifyMax over `checker`: the path's corners, or
    None. `resolution`: OMPL's state validity checking resolution (a fraction of the space's
    extent); None: our dense step."""
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    ou.setLogLevel(ou.LOG_NONE)
    ou.RNG.setSeed(seed)
    n = len(free)
    space = ob.RealVectorStateSpace(n)
    bounds = ob.RealVectorBounds(n)
    for k, i in enumerate(free):
        bounds.setLow(k, float(robot.lower[i]))
        bounds.setHigh(k, float(robot.upper[i]))
    space.setBounds(bounds)
    setup = og.SimpleSetup(space)
    base = start.copy()

    def configuration(state):
        q = base.copy()
        q[free] = [state[k] for k in range(n)]
        return q

    setup.setStateValidityChecker(lambda state: checker.distance(configuration(state)) >= checker.margin)
    info = setup.getSpaceInformation()
    info.setStateValidityCheckingResolution(CHECK_STEP / space.getMaximumExtent() if resolution is None else resolution)
    ends = []
    for q in (start, goal):
        state = space.allocState()
        for k, i in enumerate(free):
            state[k] = float(q[i])
        ends.append(state)
    setup.setStartAndGoalStates(ends[0], ends[1])
    setup.setPlanner(og.RRTConnect(info))
    setup.solve(PLANNING_BUDGET_S)
    if not setup.haveExactSolutionPath():
        return None
    path = setup.getSolutionPath()
    og.PathSimplifier(info).simplifyMax(path)
    return np.array([configuration(path.getState(k)) for k in range(path.getStateCount())])


#: The planners compared: ours, and OMPL's RRTConnect with its own discrete motion checks at our
#: dense step (None) and at OMPL's default resolution (1 % of the space's extent, about 0.08 rad
#: for the Panda's seven joints: faster, but a motion's samples that far apart can pass a thin board).
PLANNERS = {"ours": None, "RRTConnect, checks every 0.005 rad": None, "RRTConnect, OMPL's default checks": 0.01}


def _memo_checker(robot, avoid):
    checker = _Checker(robot, avoid)
    checker.memo = {}  # as plan_between_keys sets it: measurements kept for the plan
    return checker


def _length(path) -> float:
    return float(np.linalg.norm(np.diff(np.asarray(path, dtype=float), axis=0), axis=1).sum())


def _clear(checker, path) -> bool:
    return path is not None and checker.least(densify(path, CHECK_STEP)) >= checker.margin


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--quality", type=int, default=10, help="problems per scene re-planned with 10 more seeds")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--scenes", nargs="*", default=list(SCENES))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    import ompl

    robot = load_robot("panda")
    limits = limits_for(robot, max_acceleration=10.0, max_jerk=100.0)
    free = default_free_joints(robot)
    load_start = os.getloadavg()[0]
    rows, quality_rows = [], []
    for scene in args.scenes:
        avoid = Avoid(True, SCENES[scene], MARGIN)
        checker = _Checker(robot, avoid)
        pairs = problems(robot, avoid, args.problems, np.random.default_rng(args.seed), checker)
        runs = {name: {"wall": [], "cpu": [], "ok": 0, "length": []} for name in PLANNERS}
        for start, goal in pairs:
            seed = segment_seed(robot, start, goal, free, avoid, FRAMES)
            for name in PLANNERS:
                fresh = _Checker(robot, avoid)  # a peer measures every state itself: no memo of ours
                wall, cpu = time.perf_counter(), time.process_time()
                if name == "ours":
                    plan = plan_between_keys(robot, start, goal, FRAMES, FPS, avoid, limits)
                    path = plan.waypoints if plan.mode == "planned" else None
                else:
                    path = peer_plan(robot, fresh, start, goal, free, seed, PLANNERS[name])
                run = runs[name]
                run["wall"].append(time.perf_counter() - wall)
                run["cpu"].append(time.process_time() - cpu)
                if _clear(checker, path):
                    run["ok"] += 1
                    run["length"].append(_length(path))
        n = max(len(pairs), 1)
        ours_cpu = np.median(runs["ours"]["cpu"])
        for name, run in runs.items():
            wall, cpu = np.array(run["wall"]) * 1e3, np.array(run["cpu"]) * 1e3
            rows.append(f"| {scene} | {name} | {len(pairs)} | {run['ok'] / n * 100:.1f} % | {np.median(wall):.0f} | "
                        f"{np.percentile(wall, 95):.0f} | {np.median(cpu):.0f} | "
                        f"{np.median(run['length']) if run['length'] else float('nan'):.2f} | {np.median(cpu) / 1e3 / ours_cpu:.1f}x |")
            print(rows[-1], flush=True)

        ratios = []
        for start, goal in pairs[: args.quality]:
            seed = segment_seed(robot, start, goal, free, avoid, FRAMES)
            lengths = []
            for extra in range(11):  # ours, then 10 more seeds: 10x the time
                path = plan_path(robot, _memo_checker(robot, avoid), start, goal, free, (seed + extra * 7919) % (2 ** 31 - 1) + 1
                                  if extra else seed)
                if path is not None:
                    lengths.append(_length(path))
            if lengths and math.isfinite(lengths[0]):
                ratios.append(lengths[0] / min(lengths))
        if ratios:
            quality_rows.append(f"| {scene} | {len(ratios)} | {np.median(ratios):.2f} | {max(ratios):.2f} | "
                                f"{sum(r <= 1.3 for r in ratios)} of {len(ratios)} |")
            print(quality_rows[-1], flush=True)
    lines = [
        "## Plan Between Keys beside OMPL's RRTConnect, one run (`bench/bench_plan_peer.py`)",
        "",
        f"Command: `python bench/bench_plan_peer.py --problems {args.problems} --quality {args.quality} --seed {args.seed}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, NumPy {np.__version__}, "
        f"ompl {getattr(ompl, '__version__', '2.0.1')}. Load average (1 min) at start / end: {load_start:.1f} / "
        f"{os.getloadavg()[0]:.1f} (a machine shared with other work: the CPU columns are the fairer ones). Panda, the "
        f"problems of bench_plan.py (same seed), interleaved: ours (`plan_between_keys`, timing and dense re-check "
        f"included) then the peers (RRTConnect + OMPL's DiscreteMotionValidator + simplifyMax, same capsule checker, "
        f"same seed; checks every {CHECK_STEP} rad L2, or at OMPL's default resolution). Planned = a path within the 5 s budget, clear at every 0.005 rad step "
        "(each sample measured). VAMP could not be installed here (source only; its build fetches from the network).",
        "",
        "| scene | planner | problems | planned (clear densely) | median ms | p95 ms | median CPU ms | median length rad | CPU / ours |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Quality: ours against the best of 11 seeds of the same planner (10x the time), path length in joint space:",
        "",
        "| scene | problems | median ours / best | worst ours / best | within 1.3x |",
        "|---|---|---|---|---|",
        *quality_rows,
    ]
    return publish("plan_peer", lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
