"""Collision-aware solves find the free answer that exists (issue #29, item 15).

    .venv/bin/python bench/bench_avoid_box.py --n 200 --write

A 6-axis arm beside a tall box (scaled to the arm's reach). Targets: the tool pose of random
configurations that FCL (bench/fcl_check.py: python-fcl on the robot's own collision meshes,
against the box) finds clear of the box and of the arm itself by the margin, so a free answer
exists. Each is solved with Avoid Collisions (self + the box, margin 5 mm, NumPy; cold, as a
one-off solve is, and warm, as a live frame is) from the middle of the joint ranges, and judged by FCL, never by our capsules:
on target (1e-5 m / 1e-5 rad) and free; converged but colliding (must be 0). A target not
answered free is checked further: do the capsules call the target's own (FCL-free) configuration
colliding (the capsules' conservatism costs that answer), or did the search miss it?

Robots: example-robot-data's Kinova Jaco 2 (6 axes) and robosuite's UR5e (MJCF), which the
collision tests did not use. Writes its section of bench/RESULTS.md (--write) and prints it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fcl_check import FclChecker  # noqa: E402

from kinema_nodes.core.collision import Avoid, Box, World, clearance  # noqa: E402
from kinema_nodes.core.model.kinematics import link_pose  # noqa: E402
from kinema_nodes.core.model.loading import load_robot  # noqa: E402
from kinema_nodes.core.model.rotations import matrix_to_quaternion  # noqa: E402
from kinema_nodes.core.solve import IKTarget, SolveOptions, solve  # noqa: E402

ROBOTS = ("kinova", "robosuite_ur5e")
MARGIN = 0.005
TOLERANCE = 1e-5


def box_world(robot) -> World:
    """A tall box beside the arm (on its +y side), scaled to its reach."""
    rng = np.random.default_rng(0)
    q = robot.random_configurations(300, rng)
    reach = float(np.percentile(np.linalg.norm(link_pose(robot, q, robot.tool_point)[:, :3, 3], axis=1), 90))
    s = reach / 0.85
    return World((Box((0.4 * s, 0.3 * s, 0.9 * s), (0.3 * s, 0.3 * s, 0.45 * s, 1.0, 0.0, 0.0, 0.0), "box"),))


def goal_of(robot, q) -> IKTarget:
    pose = link_pose(robot, q, robot.tool_point)
    return IKTarget(robot.tool_point, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))


def free_targets(robot, checker, n, seed):
    """n configurations FCL finds clear of the box and of the arm by the margin."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < n:
        q = robot.random_configurations(1, rng)[0]
        if link_pose(robot, q, robot.tool_point)[2, 3] > 0.02 and checker.free(q, MARGIN):
            found.append(q)
    return found


def measure(name: str, n: int, seed: int = 0, cold: bool = True) -> dict:
    """Solve n free targets with avoidance from mid-range (`cold`: a one-off solve; else warm, as
    a live frame is); counts judged by FCL."""
    robot = load_robot(name)
    world = box_world(robot)
    checker = FclChecker(robot, world)
    avoid = Avoid(True, world, MARGIN)
    options = SolveOptions(backend="numpy", cold=cold, held_joints=robot.held_joints(), avoid=avoid)
    start = robot.mid_configuration()
    targets = free_targets(robot, checker, n, seed)
    row = {"robot": name, "cold": cold, "n": n, "ok": 0, "converged_colliding": 0, "missed": [], "conservative": 0, "ms": []}
    for q in targets:
        result = solve(robot, goal_of(robot, q), start, options)
        row["ms"].append(result.ms)
        free = checker.free(result.joints)
        on_target = result.position_error <= TOLERANCE and result.rotation_error <= TOLERANCE
        if result.converged and not free:
            row["converged_colliding"] += 1
        if free and on_target and result.converged:
            row["ok"] += 1
            continue
        # the free answer FCL knows of (the target's own configuration): do the capsules call it clear?
        if clearance(robot, q, avoid).min_m < 0:
            row["conservative"] += 1
        row["missed"].append(result.reason)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="write the section of bench/RESULTS.md")
    args = parser.parse_args()
    lines = [f"Command: `.venv/bin/python bench/bench_avoid_box.py --n {args.n} --write`. A tall box beside each arm; targets FCL "
             f"finds >= {MARGIN * 1000:g} mm clear; Avoid Collisions (self + box, margin {MARGIN * 1000:g} mm), NumPy, "
             "cold and warm, from mid-range; judged by FCL on the robot's own meshes.", "",
             "| robot | solve | targets | on target and free by FCL | converged but colliding | not answered free "
             "(of them: the capsules "
             "call the known free answer colliding) | median / p95 ms |", "|---|---|---|---|---|---|---|"]
    for name in ROBOTS:
        for cold in (True, False):
            t0 = time.perf_counter()
            row = measure(name, args.n, args.seed, cold)
            ms = np.array(row["ms"])
            lines.append(f"| {name} | {'cold' if cold else 'warm'} | {row['n']} | {100.0 * row['ok'] / row['n']:.1f} % | "
                         f"{row['converged_colliding']} | {len(row['missed'])} ({row['conservative']}) | "
                         f"{np.median(ms):.1f} / {np.percentile(ms, 95):.1f} |")
            print(name, "cold" if cold else "warm", f"{time.perf_counter() - t0:.0f} s", sorted(set(row["missed"])), flush=True)
    text = "\n".join(lines)
    print(text)
    if args.write:
        from results_file import write_section

        title = "## Avoid Collisions finds the free answer (issue 29 item 15, `bench/bench_avoid_box.py`)"
        write_section("avoid_box", title + "\n\n" + text)


if __name__ == "__main__":
    main()
