"""Collision-aware IK benchmark (issue 14): a table-top cell (a table, a post, a shelf), self + 3 obstacles.

    .venv/bin/python bench/bench_collisions.py --n 200 --track-n 200

Per robot: N targets, each the tool pose of a random configuration that FCL (bench/fcl_check.py,
python-fcl on the URDF's own collision meshes) finds clear of the cell and of itself by at least
5 mm, so a collision-free answer exists. Every answer, with and without avoidance, is judged by
FCL, not by the solver's capsules.

- Without avoidance (cold, NumPy solver): the share of answers in collision, the baseline.
- With avoidance (self + world, margin 5 mm, cold): the share converged within 1e-5 m / 1e-5 rad
  and free per FCL, answers converged but colliding per FCL (must be 0), the median time.
- Tracking: a smooth path of collision-free configurations (steps of <= 0.03 rad), each frame
  seeded from the previous answer, with avoidance; the median time per frame.

Writes its section of bench/RESULTS.md (between the collisions markers) and prints it.
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

from fcl_check import FclChecker  # noqa: E402
from results_file import write_section  # noqa: E402

from kinema_nodes.core.model.kinematics import link_pose  # noqa: E402
from kinema_nodes.core.model.loading import load_robot  # noqa: E402
from kinema_nodes.core.model.rotations import matrix_to_quaternion  # noqa: E402
from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, solve  # noqa: E402
from kinema_nodes.core.collision import Avoid, Box, Capsule, World  # noqa: E402

ROBOTS = ("panda", "ur5", "kinova")
MARGIN = 0.005


def cell(reach: float) -> World:
    """The table-top cell, scaled to the arm's reach: a table whose top is the base's plane,
    in front; a post beside it; a shelf on the other side at shoulder height."""
    s = reach / 0.85
    return World((Box((0.5 * s, 1.0 * s, 0.04), (0.55 * s, 0.0, -0.02, 1.0, 0.0, 0.0, 0.0), "table"),
                  Capsule((0.3 * s, 0.4 * s, 0.0), (0.3 * s, 0.4 * s, 0.8 * s), 0.03, "post"),
                  Box((0.3 * s, 0.25 * s, 0.02), (0.45 * s, -0.4 * s, 0.45 * s, 1.0, 0.0, 0.0, 0.0), "shelf")))


def reach_of(robot, link) -> float:
    rng = np.random.default_rng(0)
    q = robot.random_configurations(300, rng)
    return float(np.percentile(np.linalg.norm(link_pose(robot, q, link)[:, :3, 3], axis=1), 90))


def goal_of(robot, link, q) -> IKTarget:
    pose = link_pose(robot, q, link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))


def free_targets(robot, checker, n, rng, link):
    found, tried = [], 0
    while len(found) < n and tried < 60 * n:
        q = robot.random_configurations(1, rng)[0]
        tried += 1
        if link_pose(robot, q, link)[2, 3] < 0.02:  # under the table's plane: not a table-top goal
            continue
        if checker.free(q, MARGIN):
            found.append(q)
    return found, tried


def free_path(robot, checker, start, frames, rng, step=0.03):
    path = [start]
    q = start
    direction = rng.normal(size=robot.dof)
    while len(path) < frames:
        direction = 0.9 * direction + 0.1 * rng.normal(size=robot.dof)
        candidate = np.clip(q + step * direction / np.max(np.abs(direction)), robot.lower, robot.upper)
        if checker.free(candidate, MARGIN):
            q = candidate
            path.append(q)
        else:
            direction = -direction
    return path


def run_robot(name, n, track_n, seed):
    robot = load_robot(name)
    link = robot.tool_point
    held = robot.held_joints()
    world = cell(reach_of(robot, link))
    checker = FclChecker(robot, world)
    rng = np.random.default_rng(seed)
    targets, tried = free_targets(robot, checker, n, rng, link)
    avoid = Avoid(True, world, MARGIN)
    start = robot.mid_configuration()
    plain_options = SolveOptions(backend="numpy", cold=True, held_joints=held)
    avoid_options = SolveOptions(backend="numpy", cold=True, held_joints=held, avoid=avoid)
    solve(robot, goal_of(robot, link, targets[0]), start, avoid_options)  # model, kernel, caches
    row = {"robot": name, "n": len(targets), "tried": tried, "self_pairs": None}
    plain_colliding = plain_converged = 0
    ok = converged_colliding = converged = 0
    ms = []
    reasons: dict[str, int] = {}
    for q in targets:
        goal = goal_of(robot, link, q)
        plain = solve(robot, goal, start, plain_options)
        plain_converged += plain.converged
        plain_colliding += not checker.free(plain.joints)
        result = solve(robot, goal, start, avoid_options)
        ms.append(result.ms)
        free = checker.free(result.joints)
        converged += result.converged
        if result.converged and not free:
            converged_colliding += 1
        if result.converged and free and result.position_error <= 1e-5 and result.rotation_error <= 1e-5:
            ok += 1
        if not result.converged:
            key = result.reason.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
    path = free_path(robot, checker, targets[0], track_n, rng)
    track_options = SolveOptions(backend="numpy", held_joints=held, avoid=avoid)
    current = path[0]
    track_ms, track_ok, track_bad = [], 0, 0
    for q in path[1:]:
        result = solve(robot, goal_of(robot, link, q), current, track_options)
        track_ms.append(result.ms)
        free = checker.free(result.joints)
        track_ok += result.converged and free
        track_bad += result.converged and not free
        current = result.joints
    from kinema_nodes.core.collision import collision_model

    model = collision_model(robot)
    row.update(self_pairs=len(model.self_pairs), capsules=len(model.links), pairs_from=os.path.basename(model.allowed_source),
               plain_colliding=plain_colliding / len(targets), plain_converged=plain_converged / len(targets),
               ok=ok / len(targets), converged_colliding=converged_colliding, converged=converged / len(targets),
               cold_median_ms=float(np.median(ms)), cold_p95_ms=float(np.percentile(ms, 95)), reasons=reasons,
               track_n=len(path) - 1, track_ok=track_ok / max(len(path) - 1, 1), track_bad=track_bad,
               track_median_ms=float(np.median(track_ms)), track_p95_ms=float(np.percentile(track_ms, 95)))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--track-n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--robots", nargs="*", default=list(ROBOTS))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--from-json", action="store_true", help="rewrite the section from bench/last_collisions_run.json")
    args = parser.parse_args()
    import json

    last = ROOT / "bench" / "last_collisions_run.json"
    if args.from_json:
        saved = json.loads(last.read_text())
        args = argparse.Namespace(**saved["args"])
        rows, load_before, load_after = saved["rows"], saved["load_before"], saved["load_after"]
        args.no_write, args.from_json = False, True
    else:
        kernel_status(wait=True)
        load_before = os.getloadavg()
        rows = []
        for name in args.robots:
            t = time.time()
            row = run_robot(name, args.n, args.track_n, args.seed)
            row["seconds"] = time.time() - t
            rows.append(row)
            print(row, flush=True)
        load_after = os.getloadavg()
    lines = [
        "## Collision-aware IK (issue 14, `bench/bench_collisions.py`)",
        "",
        f"Command: `.venv/bin/python bench/bench_collisions.py --n {args.n} --track-n {args.track_n}` "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with other work; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after). N = {args.n} targets per robot"
        + (" (the issue asks for 1,000; fewer while the machine is shared)" if args.n < 1000 else " (the issue's 1,000)")
        + ". Scene: a table (top in the base's plane), a post and a shelf, "
        "scaled to the arm's reach; self + 3 obstacles, margin 5 mm; NumPy solver, cold solves seeded from mid-limits. "
        "Each target is the tool pose of a random configuration FCL finds >= 5 mm clear (so a free answer exists); "
        "every answer is judged by FCL (python-fcl on the URDF's collision meshes), not by the solver's capsules.",
        "",
        "| robot | capsules / self pairs (pairs from) | without avoidance: in collision (converged) | with: converged to 1e-5 and free per FCL "
        "| converged but colliding | cold median / p95 ms | tracking: ok, median / p95 ms | not converged, why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        why = ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items(), key=lambda kv: -kv[1])) or "-"
        lines.append(
            f"| {r['robot']} | {r['capsules']} / {r['self_pairs']} ({r['pairs_from']}) | {r['plain_colliding'] * 100:.1f} % "
            f"({r['plain_converged'] * 100:.0f} %) | {r['ok'] * 100:.1f} % | {r['converged_colliding']} "
            f"| {r['cold_median_ms']:.1f} / {r['cold_p95_ms']:.1f} | {r['track_ok'] * 100:.1f} % of {r['track_n']}, "
            f"{r['track_median_ms']:.2f} / {r['track_p95_ms']:.2f} | {why} |")
    lines += ["", "Targets (issue 14): >= 99 % converged and free, 0 converged-but-colliding, cold median <= 3 ms, "
              "tracking median <= 0.5 ms, on each robot:", ""]
    for r in rows:
        checks = [("converged and free >= 99 %", r["ok"] >= 0.99), ("0 converged but colliding", r["converged_colliding"] == 0),
                  ("cold median <= 3 ms", r["cold_median_ms"] <= 3.0), ("tracking median <= 0.5 ms", r["track_median_ms"] <= 0.5)]
        met = [name for name, ok in checks if ok]
        missed = [name for name, ok in checks if not ok]
        lines.append(f"- {r['robot']}: met {', '.join(met) or 'none'}" + (f"; NOT met: {', '.join(missed)}" if missed else ""))
    lines += [
        "",
        "How to read it: a solve under avoidance runs the plain solve first and measures its answer (capsules, then "
        "the links' convex pieces for pairs near contact); most answers are already clear, so the medians are the plain "
        "solve plus one clearance check. Where the plain answer collides, a cold solve tries other branches with the "
        "plain solver from random seeds, then the collision-aware descent, until an answer converges clear or the "
        "stage's time is up (4 plain budgets, at most 1 s): hence the p95. A 'blocked by a collision' is a target FCL "
        "finds >= 5 mm clear that the solver did not reach clear in that time; the model is conservative (capsules and "
        "convex pieces always hold the meshes, so no answer is called clear when it is not, and a pose the meshes "
        "clear by a few millimetres can still touch in the model). Timings are wall-clock per solve on a machine shared "
        "with other work (load above), numba kernels warm.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.from_json:
        last.write_text(json.dumps({"args": vars(args), "load_before": load_before, "load_after": load_after, "rows": rows},
                                   indent=1))
    if not args.no_write:
        write_section("collisions", text)


if __name__ == "__main__":
    main()
