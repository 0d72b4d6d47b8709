"""Freedom about the tool axis (#30 target): on held-back paths that the fixed orientation cannot
complete, how many does turning the tool about its own axis complete?

Paths are made on a real robot from a seeded generator (make_path): the tool's poses, samples
about 5 mm apart (as a Follow Path's turn profile samples), along a 10-30 cm joint motion that
is reachable throughout, each turned about the tool's own Z by a twist running between two
random angles in ±180° (a blade whose curve turns, a torch whose seam twists): so some turn
within ±180° completes every path, and a miss is the chooser's. Each path is solved as the bake does, sample after
sample from the one before, with the orientation as given (core/tool_axis.choose_turns, range
0); a path counts as failed when a sample does not converge, is near a singularity (the reach
preview's wrist and elbow margins, core/reach_preview.py), or a joint steps over 0.5 rad between
samples. Only the failed ones are kept (the held-back set: this seed was not used to set the turn
step, reach or scoring), and each is solved again with ±180° of freedom about the tool axis
(choose_turns as the Follow Path node calls it: 5° steps, two a sample, 10° at the first). A path
is completed when every sample converges, none is near a singularity, and no joint steps over
0.5 rad. Target (#30): at least 80 % completed.

    python bench/bench_tool_axis.py --robots panda ur5_limited --paths 150 --seed 30
    python bench/bench_tool_axis.py --circle     # the time a Follow Path's turn profile takes (its first frame)
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MAX_STEP = 0.5
SPACING = 0.005


def make_path(robot, rng, judge) -> tuple[np.ndarray, list[np.ndarray]]:
    """(start joints, the path's tool poses in the root frame about 5 mm apart): the tool's poses
    along a joint motion that is reachable throughout (every sample judged reachable, away from
    limits and singularities, by the reach preview's rules), each then turned about the tool's own
    Z by a twist that runs from one random angle in ±180° to another. So a turn within ±180° that
    completes the path exists (the twist undone): a path left uncompleted is the chooser's miss."""
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.tool_axis import turned

    lower, upper = robot.lower, robot.upper
    finite = np.isfinite(lower) & np.isfinite(upper)
    middle = np.where(finite, (lower + upper) / 2, 0.0)
    half = np.where(finite, (upper - lower) / 2, np.pi)
    while True:
        qa = robot.configuration({}, base=middle + 0.6 * half * rng.uniform(-1, 1, size=len(middle)))
        qb = np.clip(qa + rng.uniform(-0.6, 0.6, size=len(qa)), lower, upper)
        a, b = link_pose(robot, qa, robot.tool_point), link_pose(robot, qb, robot.tool_point)
        length = float(np.linalg.norm(b[:3, 3] - a[:3, 3]))
        if not 0.10 <= length <= 0.30:
            continue
        count = int(np.ceil(length / SPACING)) + 1
        motion = [qa + s * (qb - qa) for s in np.linspace(0.0, 1.0, count)]
        if all(judge(q, True)[0] == "reachable" for q in motion):
            break
    twist = np.radians(rng.uniform(-180.0, 180.0, size=2))
    goals = [turned(link_pose(robot, q, robot.tool_point), -(twist[0] + s * (twist[1] - twist[0])))
             for q, s in zip(motion, np.linspace(0.0, 1.0, count))]
    return qa, goals


def judged(robot, goals, start, options, turn_range: float) -> dict:
    from kinema_nodes.core import tool_axis

    choices = tool_axis.choose_turns(robot, robot.tool_point, goals, start, options, turn_range, step=np.radians(5.0), reach=2,
                                     first_step=np.radians(10.0))
    joints = np.array([c.joints for c in choices])
    verdicts = [c.verdict for c in choices]
    step = float(np.abs(np.diff(joints, axis=0)).max()) if len(joints) > 1 else 0.0
    bad = sum(v in ("unreachable", "near_singularity") for v in verdicts)
    return {"complete": bad == 0 and step <= MAX_STEP, "bad": bad, "near_limit": verdicts.count("near_limit"),
            "step": step, "turns": np.degrees([c.angle for c in choices])}


def run(name: str, paths: int, seed: int) -> dict:
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions

    robot = load_robot(name)
    from kinema_nodes.core.reach_preview import Judge

    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True))
    judge = Judge(robot, robot.tool_point, frozenset(options.held_joints))
    rng = np.random.default_rng(seed)
    kept, done, steps, spent, samples, by_verdict = 0, 0, [], 0.0, 0, 0
    for _ in range(paths):
        start, goals = make_path(robot, rng, judge)
        fixed = judged(robot, goals, start, options, 0.0)
        if fixed["complete"]:
            continue
        kept += 1
        by_verdict += fixed["bad"] > 0
        clock = time.perf_counter()
        free = judged(robot, goals, start, options, np.pi)
        spent += time.perf_counter() - clock
        samples += len(goals)
        steps.append(free["step"])
        done += free["complete"]
        print(f"  {name}: {len(goals)} samples; fixed: {fixed['bad']} bad, step {fixed['step']:.2f} rad; "
              f"free: {free['bad']} bad, {free['near_limit']} near a limit, step {free['step']:.2f} rad, "
              f"turn {free['turns'].min():.0f}..{free['turns'].max():.0f}° -> {'completed' if free['complete'] else 'NOT completed'}",
              flush=True)
    return {"robot": name, "generated": paths, "kept": kept, "completed": done, "by_verdict": by_verdict,
            "largest_step": max(steps) if steps else 0.0, "ms_per_sample": 1000 * spent / max(samples, 1)}


def circle_profile() -> None:
    """The turn profile of a Follow Path (Tangent) round a 5 cm circle about the Panda's downward
    tool axis, as the Blender test bakes it: what its first frame waits for once."""
    from kinema_nodes.core import paths, tool_axis
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions

    robot = load_robot("panda")
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True))
    q = robot.configuration({"panda_joint2": -0.4, "panda_joint4": -2.2, "panda_joint6": 1.9, "panda_joint7": 0.8},
                            base=robot.mid_configuration())
    tcp = link_pose(robot, q, robot.tool_point)
    angles = np.linspace(0.0, 2 * np.pi, 49)
    points = tcp[:3, 3] + 0.05 * np.c_[np.cos(angles) - 1.0, np.sin(angles), 0 * angles]
    path = paths.PolylinePath(points)
    for _ in range(2):
        clock = time.perf_counter()
        distances, turns = tool_axis.turn_profile(robot, robot.tool_point, path, tcp[:3, :3], "TANGENT",
                                                  robot.mid_configuration(), options, np.pi)
        spent = time.perf_counter() - clock
    print(f"panda, 5 cm circle (Tangent), {len(distances)} samples: {spent:.2f} s "
          f"({1000 * spent / len(distances):.0f} ms a sample), turn {np.degrees(turns.min()):.0f}..{np.degrees(turns.max()):.0f}°")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "ur5"])
    parser.add_argument("--paths", type=int, default=40, help="paths generated per robot (the failed ones are kept)")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--circle", action="store_true", help="time one Follow Path turn profile instead")
    args = parser.parse_args()
    if args.circle:
        circle_profile()
        return
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, seed {args.seed}")
    rows = [run(name, args.paths, args.seed) for name in args.robots]
    print("| robot | paths made | fixed orientation failed (held back) | of which unreachable or singular (the rest: a joint step > 0.5 rad) "
          "| completed with ±180° | share | largest joint step (completed or not) | ms per sample (free) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        share = r["completed"] / r["kept"] if r["kept"] else float("nan")
        print(f"| {r['robot']} | {r['generated']} | {r['kept']} | {r['by_verdict']} | {r['completed']} | {100 * share:.0f} % | "
              f"{r['largest_step']:.2f} rad | {r['ms_per_sample']:.0f} |")
    kept, done = sum(r["kept"] for r in rows), sum(r["completed"] for r in rows)
    print(f"all: {done}/{kept} = {100 * done / max(kept, 1):.0f} % (target >= 80 %)")


if __name__ == "__main__":
    main()
