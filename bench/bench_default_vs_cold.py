"""Misses from `solve`'s default start against `--cold` (#29 item 21), on held-out robots.

Targets are the FK of seeded random in-limit configurations (reachable by construction); each
is solved as `kinema-nodes solve` does (default start, held joints as Add IK Target holds them),
once from the default start and once with `cold`. Prints misses per robot and reasons.

    PYTHONPATH=. python bench/bench_default_vs_cold.py [--n 20] [--solver numpy] robot ...
"""

from __future__ import annotations

import argparse
import collections
import sys

import numpy as np


def run(name, n, seed, solver, verbose=False):
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    from kinema_nodes.core.solve._kernel import kernel_status

    kernel_status(wait=True)  # the compiled kernel, as a session that has run a minute has it
    robot = load_robot(name, check_meshes=False)
    link = robot.tool_point
    held = robot.held_joints(hold_slides=True)
    start = robot.configuration({})
    rng = np.random.default_rng(seed)
    qs = robot.random_configurations(n, rng)
    held_index = [robot.joint_index(j) for j in held]
    qs[:, held_index] = start[held_index]
    out = {}
    for cold in (False, True):
        options = SolveOptions(backend=solver, cold=cold, held_joints=held)
        reasons = collections.Counter()
        for q in qs:
            pose = link_pose(robot, q, link)
            result = solve(robot, IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose))), start, options)
            if not result.converged:
                reasons[result.reason] += 1
                if verbose:
                    print(f"  miss cold={cold}: {result.reason} {result.position_error * 1000:.3f} mm "
                          f"{result.rotation_error:.2e} rad {result.ms:.1f} ms {result.backend} {result.fallback_reason}")
        out[cold] = reasons
    return robot.dof, out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("robots", nargs="+")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solver", default="pyroki")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    for name in args.robots:
        dof, out = run(name, args.n, args.seed, args.solver, args.verbose)
        warm, cold = out[False], out[True]
        print(f"{name:<28} dof {dof:>3}  default misses {sum(warm.values()):>3}/{args.n} {dict(warm)}  "
              f"cold misses {sum(cold.values()):>3}/{args.n} {dict(cold)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
