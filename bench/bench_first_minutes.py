"""A new user's first minutes on robots nobody here chose, through the add-on's operators.

Per robot, in a fresh process of its own (as a user opening Blender): import the robot (File ▸
Import ▸ Robot), Add IK Target, then 50 drags of the control as a hand makes them (1-3 cm steps
to poses the arm can reach, one 3 m out of reach and straight back), with the default solver and
the default budget, then Find Solutions. Reports the time from Add IK Target to the first live
answer, the worst drag, the drag 3 m out of reach (it must stop short within the budget and say
"out of reach"), how many drags paused live updates (the target is 0), how many reachable
drags stopped short, and Find Solutions' peak memory (tracemalloc: NumPy's arrays included).
Writes its section of bench/RESULTS.md.

    python bench/bench_first_minutes.py [--robots a,b,...] [--drags 50] [--new-machine] [--no-write]

--new-machine gives each robot's process an empty Kinema cache folder, as on a machine that
never ran Kinema: the compiled kernels and PyRoki compile while the drags run (its own section).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from robot_zoo_robots import ZOO, robot_file  # noqa: E402 -- the zoo test's robots, one list

SECTION = "bench_first_minutes"
#: The robot zoo (tests/robot_zoo_robots.py: #29's robots from packages the test extra installs)
#: and anymal_kinova, a legged robot with an arm measured here since the first run.
ROBOTS = (*ZOO, "anymal_kinova")


def one(name: str, drags: int) -> dict:
    """The first minutes on one robot, in this process."""
    import tracemalloc

    import bpy
    import numpy as np
    from mathutils import Matrix

    import kinema_nodes
    from kinema_nodes import evaluator
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig
    from kinema_nodes.core.model.kinematics import link_pose
    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    out: dict = {"robot": name}
    started = time.perf_counter()
    path, packages = robot_file(name)
    bpy.ops.kinema.import_urdf(filepath=path, package_path=packages)
    out["import_s"] = time.perf_counter() - started
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    started = time.perf_counter()
    bpy.ops.kinema.add_ik_target()
    tree = rig_tree(rig)
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    target = next(n for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode")
    bone = rig.pose.bones[target.control_bone]
    link = target.link_name
    out.update(dof=robot.dof, link=link, backend=solver.backend)
    moving = set(robot.chain_joint_names(link)) - set(robot.held_joints(True))
    free = np.array([joint in moving for joint in robot.actuated_joint_names], dtype=float)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    rng = np.random.default_rng(0)

    def drag(pose) -> float:
        begun = time.perf_counter()
        bone.matrix = Matrix(pose.tolist())
        bpy.context.view_layer.update()
        bpy.context.view_layer.update()
        spent = (time.perf_counter() - begun) * 1000.0
        out.setdefault("drags_ms", []).append(round(spent, 2))
        return spent

    def paused() -> bool:
        return bool(solver.over_budget or evaluator.readout_of(tree, solver.name).get("paused"))

    q = read_joint_values(rig, robot)
    first = link_pose(robot, q, link)
    first[:3, 3] += (0.01, 0.0, 0.0)
    drag(first)
    out["add_target_to_first_answer_s"] = time.perf_counter() - started
    worst, pauses, short = 0.0, 0, 0
    for index in range(drags):
        if index == drags // 2:
            far = link_pose(robot, q, link)
            far[:3, 3] += (3.0, 0.0, 0.0)
            out["out_of_reach_drag_ms"] = drag(far)
            out["out_of_reach_said"] = evaluator.readout_of(tree, solver.name).get("summary", "")
            worst = max(worst, out["out_of_reach_drag_ms"])
            pauses += paused()
            if paused():
                bpy.ops.kinema.resume_live()
        wanted = np.clip(q + free * rng.uniform(-0.08, 0.08, robot.dof), lower, upper)
        goal = link_pose(robot, wanted, link)
        worst = max(worst, drag(goal))
        if paused():
            pauses += 1
            bpy.ops.kinema.resume_live()
        q = read_joint_values(rig, robot)
        if np.linalg.norm(link_pose(robot, q, link)[:3, 3] - goal[:3, 3]) > 1e-4:
            short += 1
    out.update(worst_drag_ms=worst, pauses=pauses, reachable_drags_short=short)
    tracemalloc.start()
    started = time.perf_counter()
    bpy.ops.kinema.find_solutions()
    out["find_solutions_s"] = time.perf_counter() - started
    out["find_solutions_peak_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--drags", type=int, default=50)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--new-machine", action="store_true", help="an empty cache folder per robot")
    args = parser.parse_args()
    if args.one:
        print("FIRST-MINUTES " + json.dumps(one(args.one, args.drags)))
        sys.stdout.flush()
        os._exit(0)  # as the command line does: no wait for background compiles
    load_before = os.getloadavg()
    rows = []
    import tempfile

    for name in args.robots.split(","):
        env = dict(os.environ)
        if args.new_machine:
            env["KINEMA_CACHE_DIR"] = tempfile.mkdtemp(prefix="kinema-new-machine-")
        done = subprocess.run([sys.executable, __file__, "--one", name, "--drags", str(args.drags)], capture_output=True,
                              text=True, timeout=900, env=env)
        line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST-MINUTES ")), None)
        if line is None:
            rows.append({"robot": name, "error": (done.stderr.strip().splitlines() or ["no output"])[-1][:160]})
        else:
            rows.append(json.loads(line[len("FIRST-MINUTES "):]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    load_after = os.getloadavg()
    import bpy

    new = " --new-machine" if args.new_machine else ""
    lines = [
        "## First minutes on robots nobody here chose (`bench/bench_first_minutes.py" + new + "`)",
        "",
        ("On a new machine: each robot's process starts with an empty Kinema cache folder, so the compiled kernels "
         "and PyRoki compile while the drags run.\n\n" if new else "") +
        f"Command: `python bench/bench_first_minutes.py --drags {args.drags}{new}`; load average before "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, bpy "
        f"{bpy.app.version_string}. Each robot in a fresh process, through the operators, default solver and budget; "
        f"{args.drags} drags (1-3 cm, one 3 m out of reach and back). Pauses must be 0.",
        "",
        "| robot | joints | tool point | solver | Add IK Target → first answer (s) | worst drag (ms) | 3 m out of reach (ms) | "
        "pauses | reachable drags short | Find Solutions (s) | its peak memory (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['robot']} | failed: {row['error']} ||||||||||")
            continue
        lines.append(f"| {row['robot']} | {row['dof']} | {row['link']} | {row['backend']} | "
                     f"{row['add_target_to_first_answer_s']:.2f} | {row['worst_drag_ms']:.1f} | "
                     f"{row['out_of_reach_drag_ms']:.1f}{'' if 'out of reach' in row['out_of_reach_said'] else ' (not said out of reach)'} | "
                     f"{row['pauses']} | "
                     f"{row['reachable_drags_short']} | {row['find_solutions_s']:.2f} | {row['find_solutions_peak_mb']:.1f} |")
    from results_file import publish

    return publish(SECTION + ("_new_machine" if args.new_machine else ""), lines, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
