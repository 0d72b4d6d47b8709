"""Plan Between Keys benchmark (issue #31): MotionBenchMaker-like scenes for the Panda, N problems each.

    .venv/bin/python bench/bench_plan.py --problems 100 --fcl 5

A problem is a start and a goal configuration of the 7 arm joints (fingers held), each clear of
the scene and of the robot by the 10 mm margin (capsule model), whose straight joint-space path
collides by the planner's own check (`Certifier.path_clear`), so the segment has to be planned (a
clear one would be left per-frame and not measured). Drawn from a seeded generator, so every run poses the same problems.

Per scene: the share planned (mode "planned": a path found by RRTConnect, simplified, densely
re-checked), the median and 95th-percentile planning time of a segment (`SegmentPlan.planning_s`:
the straight-path check, RRTConnect, the simplifier and the dense re-check, wall clock, one
core) and the median CPU time of the whole call (time.process_time), the median path length in joint space, and for the first `--fcl` planned problems the
played frames (49 at 24 fps) and 10 samples between each two checked with FCL on the URDF's meshes
(bench/fcl_check.py), counted if any sample comes within 5 mm or touches.

Writes its section of bench/RESULTS.md (between the plan markers) and prints it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_file import publish  # noqa: E402

from kinema_nodes.core.collision import Avoid, Box, World  # noqa: E402
from kinema_nodes.core.model.loading import load_robot  # noqa: E402
from kinema_nodes.core.plan import plan_between_keys  # noqa: E402
from kinema_nodes.core.plan.between_keys import CHECK_STEP, PLANNING_BUDGET_S  # noqa: E402
from kinema_nodes.core.shot.limits import limits_for  # noqa: E402

MARGIN = 0.01
#: Where configurations are drawn, for a robot whose joint limits take in poses no path joins:
#: the UR5's joints turn +-2 pi, so a start with the shoulder lifted past the vertical one way and
#: a goal past it the other cannot be joined without the upper arm sweeping through the floor (the
#: problem is not feasible). Its draws keep the joints within +-pi and the upper arm above the
#: shoulder's horizontal (shoulder_lift in [-pi, 0]), one connected region, as UR's own "limited"
#: description does for the first.
SAMPLED = {"ur5": (np.array([-np.pi, -np.pi, -np.pi, -np.pi, -np.pi, -np.pi]), np.array([np.pi, 0.0, np.pi, np.pi, np.pi, np.pi]))}
TITLES = {"panda": "Panda", "ur5": "UR5 (6 axes)", "baxter": "Baxter (dual arm, 14 arm joints planned together)"}
FPS = 24.0
FRAMES = 49


def _box(size, centre, name):
    return Box(tuple(size), (*centre, 1.0, 0.0, 0.0, 0.0), name)


SCENES = {
    "table": World((_box((0.6, 1.2, 0.04), (0.55, 0.0, 0.2), "table top"),
                    _box((0.1, 0.1, 0.35), (0.55, 0.0, 0.4), "post on the table")), ground=True),
    "shelf": World((_box((0.3, 0.8, 0.02), (0.6, 0.0, 0.25), "lower board"), _box((0.3, 0.8, 0.02), (0.6, 0.0, 0.55), "upper board"),
                    _box((0.3, 0.02, 0.8), (0.6, -0.4, 0.4), "left side"), _box((0.3, 0.02, 0.8), (0.6, 0.4, 0.4), "right side"),
                    _box((0.02, 0.8, 0.8), (0.75, 0.0, 0.4), "back")), ground=True),
    "box under a bar": World((_box((0.25, 0.25, 0.3), (0.5, 0.0, 0.15), "box"),
                              _box((0.05, 1.2, 0.05), (0.5, 0.0, 0.7), "bar")), ground=True),
}


def problems(robot, avoid: Avoid, count: int, rng: np.random.Generator, checker) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` (start, goal) pairs: both clear by the margin, the straight path between them not.
    The joints a plan may move (`default_free_joints`: the revolute ones) are drawn at random; the
    others (fingers) stay at their mid values."""
    from kinema_nodes.core.plan.between_keys import default_free_joints

    rest = np.clip(robot.mid_configuration(), robot.lower, robot.upper)
    free = default_free_joints(robot)
    held = np.setdiff1d(np.arange(robot.dof), free)
    if robot.name == "panda":  # the runs in RESULTS.md before --robot: fingers at 0.02, the same problems
        rest[held] = 0.02
    box = SAMPLED.get(robot.name)
    valid = []
    while len(valid) < 6 * count:
        q = robot.random_configurations(1, rng)[0] if box is None else rng.uniform(box[0], box[1])
        q[held] = rest[held]
        if checker.distance(q) >= MARGIN:
            valid.append(q)
    out = []
    for _ in range(200 * count):
        i, j = rng.choice(len(valid), 2, replace=False)
        start, goal = valid[i], valid[j]
        # the planner's own check of the straight path (every sample measured or proven clear by a
        # measured one's clearance): a pair it finds clear needs no plan, whatever a sample's hull search says
        if not checker.path_clear(np.stack([start, goal]), CHECK_STEP)[0]:
            out.append((start, goal))
            if len(out) == count:
                break
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--fcl", type=int, default=5, help="planned problems per scene checked with FCL (10 samples between frames)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--scenes", nargs="*", default=list(SCENES))
    parser.add_argument("--robot", default="panda", help="panda (7 axes), ur5 (6 axes) or baxter (two 7-axis arms)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    from kinema_nodes.core.plan.between_keys import _Checker

    robot = load_robot(args.robot)
    limits = limits_for(robot, max_acceleration=10.0, max_jerk=100.0)
    import ompl

    load_start = os.getloadavg()[0]
    rows = []
    for scene in args.scenes:
        avoid = Avoid(True, SCENES[scene], MARGIN)
        checker = _Checker(robot, avoid)
        rng = np.random.default_rng(args.seed)
        pairs = problems(robot, avoid, args.problems, rng, checker)
        times, lengths, planned, flagged, fcl_checked, fcl_bad = [], [], 0, 0, 0, 0
        fcl = None
        started = time.perf_counter()
        cpu = []
        for start, goal in pairs:
            cpu_start = time.process_time()
            plan = plan_between_keys(robot, start, goal, FRAMES, FPS, avoid, limits)
            cpu.append(time.process_time() - cpu_start)
            times.append(plan.planning_s)
            if plan.mode == "planned":
                planned += 1
                lengths.append(plan.path_length_rad)
                flagged += bool(plan.flag)
                if fcl_checked < args.fcl:
                    if fcl is None:
                        from fcl_check import FclChecker

                        fcl = FclChecker(robot, SCENES[scene])
                    t = np.arange(11)[:, None] / 11
                    q = plan.joints
                    dense = np.concatenate([a + (b - a) * t for a, b in zip(q[:-1], q[1:])] + [q[-1:]])
                    fcl_checked += 1
                    fcl_bad += not all(fcl.free(sample, margin=0.005) for sample in dense)
        wall = time.perf_counter() - started
        ms = np.array(times) * 1000
        rows.append(f"| {scene} | {len(pairs)} | {planned / max(len(pairs), 1) * 100:.1f} % | {np.median(ms):.0f} | "
                    f"{np.percentile(ms, 95):.0f} | {np.median(cpu) * 1000:.0f} | {np.median(lengths) if lengths else float('nan'):.2f} | {flagged} | "
                    f"{fcl_bad} of {fcl_checked} | {wall:.0f} |")
        print(rows[-1], flush=True)
    lines = [
        f"## Plan Between Keys: {TITLES.get(args.robot, args.robot)}, OMPL RRTConnect over the capsule checker (`bench/bench_plan.py`)",
        "",
        f"Command: `python bench/bench_plan.py --problems {args.problems} --fcl {args.fcl} --seed {args.seed}"
        f"{'' if args.robot == 'panda' else ' --robot ' + args.robot}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python {platform.python_version()}, "
        f"NumPy {np.__version__}, ompl {getattr(ompl, '__version__', '2.0.1')}. Load average (1 min) at start / end: "
        f"{load_start:.1f} / {os.getloadavg()[0]:.1f} (a machine shared with other work). Each problem: start and goal clear "
        f"by {MARGIN * 1000:g} mm, the straight joint path between them not; {FRAMES} frames at {FPS:g} fps, limits: URDF velocity, "
        f"10 rad/s², 100 rad/s³; planning budget {PLANNING_BUDGET_S:g} s. Planning time is the whole segment (straight-path check, "
        "RRTConnect, reduceVertices + ropeShortcutPath + reduceVertices, dense re-check of the path and of the chords across its "
        "corners), wall clock, one thread. Every motion is checked every 0.005 rad, each sample measured or proven clear by a "
        "measured sample's clearance (core/plan/certify.py), a motion's samples in one compiled call (far box rows by a cheap "
        "lower bound); a path longer than 1.2x the straight line is planned again from up to 5 more seeds, the shortest kept. "
        "\"median ms\" is SegmentPlan.planning_s (wall clock, so it grows with the machine's load); \"median CPU ms\" is the "
        "process's CPU time over the whole plan_between_keys call (the set-up before the clock starts included), which the "
        "load inflates far less.",
        "",
        "| scene | problems | planned | median ms | p95 ms | median CPU ms | median length rad | flagged too short | FCL within 5 mm | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    return publish("plan" if args.robot == "panda" else f"plan_{args.robot}", lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
