"""Benchmark: Find Solutions and the Elbow Swivel (issue 6).

- UR5 (example-robot-data `ur5`, link `tool0`): N random reachable poses (FK of joint vectors
  drawn uniformly within limits, fixed seed). Oracle: the published closed form (Hawkins
  2013, `bench/ur_analytic.py`), its branches clipped into limits and merged by our own
  "same branch" rule. Recall = every oracle branch found (within DISTINCT_RAD = 0.05 rad, modulo 2 pi on
  multi-turn joints); duplicates = two found configurations matching one oracle branch;
  spurious = a found configuration matching no oracle branch. Targets (issue 13): recall
  100 %, no duplicates, none spurious, median <= 10 ms.
- Panda (`panda`, link `panda_link8`, the flange: seven arm joints): M random reachable poses;
  distinct branches found per pose. Target (issue 13): >= 4 in >= 95 % of poses, median
  <= 10 ms. `--panda-wide K` also searches the first K poses about eight times as widely (400
  seeds a round, 8 rounds): what the same definition of "distinct" allows there, whatever the
  time. `--panda-independent K`: for the first K poses where fewer than 4 were found, an
  independent search (scipy's bounded least_squares on the tool pose and the swivel equation,
  `--independent-seeds` random seeds within the limits) counts the branches at the current
  swivel, and says how many of them Find Solutions missed.
- Swivel sweep on the Panda: from K random poses, the swivel set from its start angle through
  +360 deg in 1 deg steps, each step seeded from the one before. Tool error on every step;
  elbow step = change of the reached swivel angle between steps (where neither step saturated)
  and the largest single joint change. Targets: tool within 1e-5 m / 1e-5 rad, no elbow step
  over 5 deg wherever limits allow.

    .venv/bin/python bench/bench_configs.py [--ur5 300] [--panda 200] [--panda-wide 40] [--sweeps 5]
        [--panda-independent 0] [--independent-seeds 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

START, END = "<!-- bench_configs: start -->", "<!-- bench_configs: end -->"


def _target(robot, q, link):
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.rotations import matrix_to_quaternion
    from kinema_nodes.core.solve import IKTarget

    pose = link_pose(robot, q, link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))), pose


def _warm_up(robot, link, options) -> None:
    """One untimed search (its own pose), so no one-off compile of a kernel variant is timed."""
    from kinema_nodes.core.stages.configurations import find_configurations

    q = robot.random_configurations(1, np.random.default_rng(12345))[0]
    find_configurations(robot, [_target(robot, q, link)[0]], q, options)


def bench_ur5(n: int, seed: int) -> dict:
    from ur_analytic import UrOracle

    from kinema_nodes.core.stages.configurations import find_configurations, same_branch
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions

    robot = load_robot("ur5")
    oracle = UrOracle(robot, "tool0")
    rng = np.random.default_rng(seed)
    options = SolveOptions(backend="numpy")
    times, cpu, complete, duplicates, spurious, branches, found_counts = [], [], 0, 0, 0, [], []
    _warm_up(robot, "tool0", options)
    for i, q in enumerate(robot.random_configurations(n, rng)):
        target, pose = _target(robot, q, "tool0")
        t0, c0 = time.perf_counter(), time.process_time()
        found = find_configurations(robot, [target], q, options)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        truth = []
        for s in oracle.solutions(pose):
            s = np.clip(s, robot.lower, robot.upper)
            if not any(same_branch(robot, s, u) for u in truth):
                truth.append(s)
        matches = [[j for j, t in enumerate(truth) if same_branch(robot, c.joints, t)] for c in found]
        hit = {j for m in matches for j in m}
        complete += len(hit) == len(truth)
        taken = [m[0] for m in matches if m]
        duplicates += len(taken) - len(set(taken))
        spurious += sum(1 for m in matches if not m)
        branches.append(len(truth))
        found_counts.append(len(found))
        if (i + 1) % 100 == 0:
            print(f"ur5 {i + 1}/{n}: recall {complete / (i + 1):.3f}, median {np.median(times) * 1000:.0f} ms", flush=True)
    ms = np.array(times) * 1000
    return {"n": n, "recall": complete / n, "duplicates": duplicates, "spurious": spurious, "median_ms": float(np.median(ms)),
            "p95_ms": float(np.percentile(ms, 95)), "cpu_median_ms": float(np.median(cpu) * 1000), "branches_mean": float(np.mean(branches)), "found_mean": float(np.mean(found_counts))}


def bench_panda(n: int, seed: int, wide: int = 0) -> dict:
    from kinema_nodes.core.stages.configurations import find_configurations
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions

    robot = load_robot("panda")
    rng = np.random.default_rng(seed)
    options = SolveOptions(backend="numpy")
    times, cpu, counts, wide_counts = [], [], [], []
    _warm_up(robot, "panda_link8", options)
    for i, q in enumerate(robot.random_configurations(n, rng)):
        target, _ = _target(robot, q, "panda_link8")
        t0, c0 = time.perf_counter(), time.process_time()
        found = find_configurations(robot, [target], q, options)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        counts.append(len(found))
        if i < wide:
            wide_counts.append(len(find_configurations(robot, [target], q, options, seeds_per_round=400, max_rounds=8)))
        if (i + 1) % 50 == 0:
            print(f"panda {i + 1}/{n}: >=4 in {np.mean(np.array(counts) >= 4):.3f}, median {np.median(times) * 1000:.0f} ms", flush=True)
    ms = np.array(times) * 1000
    counts = np.array(counts)
    return {"n": n, "at_least_4": float(np.mean(counts >= 4)), "median_count": float(np.median(counts)),
            "count_histogram": {int(k): int(v) for k, v in zip(*np.unique(counts, return_counts=True))},
            "median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)), "cpu_median_ms": float(np.median(cpu) * 1000),
            "wide": len(wide_counts), "wide_at_least_4": float(np.mean(np.array(wide_counts) >= 4)) if wide_counts else None,
            "default_at_least_4_on_wide": float(np.mean(counts[:len(wide_counts)] >= 4)) if wide_counts else None}


def bench_independent(n: int, seed: int, poses: int, seeds: int) -> dict:
    """Branches at the current swivel by an independent solver (scipy least_squares, trust region
    within the limits, finite-difference Jacobian) from `seeds` random seeds, on the first
    `poses` of bench_panda's n poses where Find Solutions found fewer than 4."""
    from scipy.optimize import least_squares
    from scipy.spatial.transform import Rotation

    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions
    from kinema_nodes.core.stages.configurations import find_configurations, same_branch
    from kinema_nodes.core.stages.swivel import swivel_angle

    robot = load_robot("panda")
    link = "panda_link8"
    held = robot.held_joints(hold_slides=True)
    arm = [i for i, name in enumerate(robot.actuated_joint_names) if name not in held]
    lower, upper = robot.lower[arm], robot.upper[arm]
    draw = np.random.default_rng(99)
    wrap = lambda a: (a + np.pi) % (2 * np.pi) - np.pi  # noqa: E731
    rows = []
    for q in robot.random_configurations(n, np.random.default_rng(seed)):
        if len(rows) >= poses:
            break
        target, pose = _target(robot, q, link)
        found = find_configurations(robot, [target], q, SolveOptions(backend="numpy"))
        if len(found) >= 4:
            continue
        reference = float(swivel_angle(robot, link, q, held))
        at_swivel = [c.joints for c in found if abs(wrap(swivel_angle(robot, link, c.joints, held) - reference)) <= 1e-3]

        def residual(x):
            full = q.copy()
            full[arm] = x
            reached = link_pose(robot, full, link)
            turn = Rotation.from_matrix(pose[:3, :3].T @ reached[:3, :3]).as_rotvec()
            return np.concatenate([reached[:3, 3] - pose[:3, 3], turn, [0.1 * wrap(swivel_angle(robot, link, full, held) - reference)]])

        branches = []
        for start in draw.uniform(lower, upper, size=(seeds, len(arm))):
            fit = least_squares(residual, start, bounds=(lower, upper), xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200)
            if np.linalg.norm(fit.fun[:3]) <= 1e-6 and np.linalg.norm(fit.fun[3:6]) <= 1e-6 and abs(fit.fun[6]) <= 1e-4:
                full = q.copy()
                full[arm] = fit.x
                if not any(same_branch(robot, full, other) for other in branches):
                    branches.append(full)
        missed = sum(1 for b in branches if not any(same_branch(robot, b, f) for f in at_swivel))
        rows.append((len(found), len(at_swivel), len(branches), missed))
        print(f"independent: found {len(found)} ({len(at_swivel)} at the swivel), scipy {len(branches)} at the swivel, "
              f"{missed} missed", flush=True)
    rows = np.array(rows, dtype=int).reshape(-1, 4)
    return {"poses": len(rows), "seeds": seeds, "at_swivel_found": rows[:, 1].tolist(), "at_swivel_scipy": rows[:, 2].tolist(),
            "missed": int(rows[:, 3].sum())}


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_sweep(sweeps: int, seed: int) -> dict:
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import SolveOptions
    from kinema_nodes.core.stages.swivel import set_swivel, swivel_angle, wrap

    robot = load_robot("panda")
    link = "panda_link8"
    held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p)
    options = SolveOptions(backend="numpy", held_joints=held)
    rng = np.random.default_rng(seed)
    worst_position = worst_rotation = 0.0
    elbow_steps, joint_steps, saturated, jumps, times, free_range = [], [], 0, 0, [], []
    for q0 in robot.random_configurations(sweeps, rng):
        target, _ = _target(robot, q0, link)
        start = float(swivel_angle(robot, link, q0, held))
        q, previous, previous_saturated, reached = q0, start, False, []
        for step in range(361):
            t0 = time.perf_counter()
            result = set_swivel(robot, [target], q, start + np.radians(step), options, link)
            times.append(time.perf_counter() - t0)
            worst_position = max(worst_position, result.position_error)
            worst_rotation = max(worst_rotation, result.rotation_error)
            saturated += result.saturated
            if step and not result.saturated and not previous_saturated:
                elbow_steps.append(abs(float(wrap(result.angle - previous))))
                joint_steps.append(float(np.max(np.abs(result.joints - q))))
            elif step and abs(float(wrap(result.angle - previous))) > np.radians(5):
                jumps += 1
            if not result.saturated:
                reached.append(step)
            q, previous, previous_saturated = result.joints, result.angle, result.saturated
        free_range.append(len(reached))
    ms = np.array(times) * 1000
    return {"sweeps": sweeps, "steps": sweeps * 361, "max_position_error": worst_position, "max_rotation_error": worst_rotation,
            "max_elbow_step_deg": float(np.degrees(max(elbow_steps))) if elbow_steps else None,
            "max_joint_step_deg": float(np.degrees(max(joint_steps))) if joint_steps else None,
            "saturated_steps": int(saturated), "jumps_at_saturation": int(jumps),
            "reachable_degrees": free_range, "median_ms": float(np.median(ms))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ur5", type=int, default=300)
    parser.add_argument("--panda", type=int, default=200)
    parser.add_argument("--panda-wide", type=int, default=40)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--panda-independent", type=int, default=0)
    parser.add_argument("--independent-seeds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()
    from kinema_nodes.core.solve import kernel_status

    kernel = kernel_status(wait=True)  # measure the compiled kernel, not its plain stand-in during a build
    load_start, uptime_start = os.getloadavg()[0], _uptime()
    print("kernel:", kernel, uptime_start)

    ur5 = bench_ur5(args.ur5, args.seed) if args.ur5 else None
    panda = bench_panda(args.panda, args.seed, args.panda_wide) if args.panda else None
    sweep = bench_sweep(args.sweeps, args.seed) if args.sweeps else None
    independent = (bench_independent(args.panda, args.seed, args.panda_independent, args.independent_seeds)
                   if args.panda and args.panda_independent else None)
    uptime_end = _uptime()
    print(ur5, panda, sweep, independent, uptime_end, sep="\n")

    def verdict(ok: bool) -> str:
        return "meets target" if ok else "MISSES target"

    lines = [
        START,
        "## Several ways to reach: Find Solutions and Elbow Swivel (`bench/bench_configs.py`)",
        "",
        (f"Command: `python bench/bench_configs.py --ur5 {args.ur5} --panda {args.panda} --panda-wide {args.panda_wide} "
         f"--sweeps {args.sweeps} --seed {args.seed}"
         + (f" --panda-independent {args.panda_independent} --independent-seeds {args.independent_seeds}" if independent else "")
         + "`  "),
        (f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python {platform.python_version()}, "
         f"NumPy {np.__version__}. Search on the compiled kernel (`kernel_status`: {kernel[0]}). Wall time per call, on a "
         f"machine shared with other work (load average at the start / end: {load_start:.1f} / {os.getloadavg()[0]:.1f}); "
         "CPU time (process time) per call beside it."),
        f"`uptime` at the start: `{uptime_start}`; at the end: `{uptime_end}`.",
        "",
    ]
    if ur5:
        lines += [
            (f"**UR5** (`ur5`, `tool0`), {ur5['n']} random reachable poses, oracle: Hawkins 2013 closed form "
             f"(mean {ur5['branches_mean']:.2f} in-limit branches per pose, mean {ur5['found_mean']:.2f} found)."),
            "",
            "| recall (every branch found) | duplicates | spurious | median ms | p95 ms | median CPU ms |",
            "|---|---|---|---|---|---|",
            (f"| {ur5['recall'] * 100:.1f} % ({verdict(ur5['recall'] >= 1.0)} 100 %) | {ur5['duplicates']} | {ur5['spurious']} | "
             f"{ur5['median_ms']:.1f} ({verdict(ur5['median_ms'] <= 10)} 10) | {ur5['p95_ms']:.0f} | {ur5['cpu_median_ms']:.1f} |"),
            "",
        ]
    if panda:
        lines += [
            (f"**Panda** (`panda`, `panda_link8`, 7 arm joints), {panda['n']} random reachable poses; branches compared at the "
             "current elbow swivel (see `core/stages/configurations.py`)."),
            "",
            "| >= 4 distinct branches | median count | counts (branches: poses) | median ms | p95 ms | median CPU ms |",
            "|---|---|---|---|---|---|",
            (f"| {panda['at_least_4'] * 100:.1f} % ({verdict(panda['at_least_4'] >= 0.95)} 95 %) | {panda['median_count']:.0f} | "
             f"{', '.join(f'{k}: {v}' for k, v in panda['count_histogram'].items())} | "
             f"{panda['median_ms']:.1f} ({verdict(panda['median_ms'] <= 10)} 10) | {panda['p95_ms']:.0f} | {panda['cpu_median_ms']:.1f} |"),
            "",
        ]
        if panda["wide"]:
            lines += [
                (f"The first {panda['wide']} poses searched about eight times as widely (400 seeds a round, 8 rounds): >= 4 "
                 f"distinct branches in {panda['wide_at_least_4'] * 100:.1f} % of them (the default search: "
                 f"{panda['default_at_least_4_on_wide'] * 100:.1f} % of the same poses): what this definition of distinct "
                 "(at the current elbow swivel) allows there."),
                "",
            ]
        if independent:
            lines += [
                (f"Independent check (scipy `least_squares` within the limits, tool pose and swivel equation, "
                 f"{independent['seeds']} random seeds a pose) on the first {independent['poses']} poses where fewer than 4 "
                 f"were found: branches at the current swivel, Find Solutions / scipy: "
                 f"{', '.join(f'{a}/{b}' for a, b in zip(independent['at_swivel_found'], independent['at_swivel_scipy']))}; "
                 f"branches scipy found that Find Solutions missed: {independent['missed']}."),
                "",
            ]
    if sweep:
        ok_tool = sweep["max_position_error"] <= 1e-5 and sweep["max_rotation_error"] <= 1e-5
        ok_step = sweep["max_elbow_step_deg"] is not None and sweep["max_elbow_step_deg"] <= 5
        lines += [
            (f"**Swivel sweep** on the Panda: {sweep['sweeps']} random poses x 361 steps (0 to 360 deg, 1 deg each, each "
             "seeded from the step before)."),
            "",
            ("| max tool error | max elbow step (unsaturated) | max joint step | saturated steps | jumps where a limit ends the swing | "
             "reachable degrees per sweep | median ms per step |"),
            "|---|---|---|---|---|---|---|",
            (f"| {sweep['max_position_error']:.1e} m, {sweep['max_rotation_error']:.1e} rad ({verdict(ok_tool)}) | "
             f"{sweep['max_elbow_step_deg']:.2f} deg ({verdict(ok_step)} 5 deg) | {sweep['max_joint_step_deg']:.2f} deg | "
             f"{sweep['saturated_steps']} of {sweep['steps']} | {sweep['jumps_at_saturation']} | "
             f"{', '.join(map(str, sweep['reachable_degrees']))} | {sweep['median_ms']:.1f} |"),
            "",
        ]
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
