"""`kinema-nodes solve` and `kinema-nodes bench`: the IK solvers from the command line.

Kept out of cli.py so `info` and `fk` never import the solvers (or JAX).
"""

from __future__ import annotations

import numpy as np

from .common import MAX_BUDGET_MS, emit, finite_number, parse_joint_values, target_pose
from ..core.errors import KinemaError

SOLVERS = ("pyroki", "numpy")


def _add_common(parser) -> None:
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="target link (default: the tool point)")
    parser.add_argument("--solver", choices=SOLVERS, default="pyroki", help="solver backend (default pyroki)")
    parser.add_argument("--hold", nargs="*", default=[], metavar="JOINT", help="joints that keep their start value")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_arguments_solve(parser) -> None:
    """Inverse kinematics: joint values that put a link at a pose (exit 3 when it does not converge)."""
    _add_common(parser)
    parser.add_argument("--target", nargs=7, type=float, required=True, metavar=("X", "Y", "Z", "QW", "QX", "QY", "QZ"),
                        help="target pose in the root frame: position (m) and quaternion (w x y z)")
    parser.add_argument("--start", nargs="*", default=[], metavar="NAME=VALUE", help="start configuration (default: zero, moved inside the limits)")
    parser.add_argument("--cold", action="store_true", help="no useful start: try several seeds")
    parser.add_argument("--budget-ms", type=float, default=None, help=f"time budget per solve, 0 < ms <= {MAX_BUDGET_MS:g} (default 33)")
    parser.add_argument("--move-slides", action="store_true",
                        help="let the solver move prismatic joints (a rail); gripper joints stay held, as in Blender")
    from .obstacles import add_avoid_arguments

    add_avoid_arguments(parser)


def run_solve(args) -> int:
    from ..core.model.loading import load_robot
    from ..core.solve import IKTarget, SolveOptions, solve

    from .obstacles import avoid_from_args, avoid_wanted, clearance_payload

    avoid = avoid_from_args(args)  # a bad obstacle file is refused before the robot loads
    robot = load_robot(args.urdf, check_meshes=avoid_wanted(args))  # the collision model wraps the meshes
    link = robot.check_link(args.link or robot.tool_point)
    start = robot.configuration(parse_joint_values(args.start))
    position, wxyz = target_pose(args.target)
    for name in args.hold:
        robot.joint_index(name)
    # The joints Add IK Target holds (grippers; slides unless --move-slides), plus --hold.
    held = robot.held_joints(hold_slides=not args.move_slides) | frozenset(args.hold)
    options = SolveOptions(backend=args.solver, cold=args.cold, held_joints=held, avoid=avoid)
    if args.budget_ms is not None:
        budget = finite_number(args.budget_ms, "--budget-ms", low=1e-3, high=MAX_BUDGET_MS)
        options = SolveOptions(backend=args.solver, cold=args.cold, held_joints=held, budget_ms=budget, avoid=avoid)
    result = solve(robot, IKTarget(link, position, wxyz), start, options)
    payload = {
        "link": link,
        "joints": dict(zip(robot.actuated_joint_names, (float(v) for v in result.joints))),
        "converged": result.converged,
        "reason": result.reason,
        "position_error": result.position_error,
        "rotation_error": result.rotation_error,
        "iterations": result.iterations,
        "ms": result.ms,
        "backend": result.backend,
        "fallback_reason": result.fallback_reason,
        "held": sorted(held),
    }
    if avoid is not None:
        payload.update(clearance_payload(result))
    summary = (f"{link}: {result.reason}  (position error {result.position_error * 1000:.4f} mm, "
               f"rotation error {np.degrees(result.rotation_error):.5f} deg, {result.iterations} iterations, "
               f"{result.ms:.2f} ms, {result.backend})")
    lines = [summary]
    if result.fallback_reason:
        lines.append(f"note: NumPy solver used: {result.fallback_reason}")
    if avoid is not None:
        clear = payload["min_clearance_m"]
        lines.append(f"clearance {clear * 1000:.2f} mm (margin {avoid.margin_m * 1000:g} mm)" if clear is not None
                     else "clearance: nothing to collide with")
        lines += [f"in collision: {a} vs {b}" for a, b in result.colliding]
    lines += [f"  {name:<28} {value: .6f} {'m' if prismatic else 'rad'}"
              for (name, value), prismatic in zip(payload["joints"].items(), robot.is_prismatic)]
    emit(args, payload, lines)
    return 0 if result.converged else 3


def add_arguments_bench(parser) -> None:
    """Time the solver on random reachable targets and report how often it converges."""
    _add_common(parser)
    parser.add_argument("--n", type=int, default=1000, help="number of targets (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--mode", choices=("cold", "tracking"), default="cold", help="cold: seed from mid-limits; tracking: from the previous frame")


def run_bench(args) -> int:
    from ..core.model.loading import load_robot
    from ..core.solve import run_benchmark

    if args.n < 1:
        raise KinemaError(f"--n must be at least 1, got {args.n}")
    robot = load_robot(args.urdf, check_meshes=False)
    link = robot.check_link(args.link or robot.tool_point)
    for name in args.hold:
        robot.joint_index(name)
    report = run_benchmark(robot, link, n=args.n, seed=args.seed, solver=args.solver, mode=args.mode, held=frozenset(args.hold))
    text = (
        f"{report['robot']} -> {link}, {report['mode']}, {report['backend']}, N={report['n']}, seed {report['seed']}\n"
        f"success {report['success_rate'] * 100:.2f} % (1e-5: within limits, position error <= 1e-5 m and rotation error "
        f"<= 1e-5 rad), {report['success_rate_practical'] * 100:.2f} % (practical: <= 1 mm and <= 0.01 rad)\n"
        f"ms: median {report['median_ms']:.3f}  p95 {report['p95_ms']:.3f}  p99 {report['p99_ms']:.3f}  max {report['max_ms']:.3f}\n"
        f"first call {report['first_call_s']:.2f} s"
    )
    emit(args, report, text)
    return 0
