"""Live IK in the viewport: cost per frame_set while scrubbing, against Blender's own IK constraint.

Scrubs N frames of the Panda (example-robot-data, with meshes) whose tool control is keyframed
along a smooth reachable path, with live IK (NumPy and PyRoki backends), and the same 7-bone
chain driven by Blender's Inverse Kinematics constraint, in one process. Reports per-frame
cost, the solver's own time, the evaluator's overhead beyond the solve, and the time to
re-compile the graph after an edit. Writes its section of bench/RESULTS.md.

    python bench/bench_live.py [--frames 500]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np
from results_file import write_section

SECTION = "bench_live"

def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def keyframe_path(bpy, rig, robot, bone_name, link, frames, rng):
    """Key the control at FK poses of a smooth random joint path (every key reachable)."""
    from mathutils import Matrix

    from kinema_nodes.core.model.kinematics import link_pose

    start = robot.mid_configuration()
    start[robot.joint_index("panda_joint4")] = -1.8
    start[robot.joint_index("panda_joint6")] = 1.6
    bone = rig.pose.bones[bone_name]
    keys = np.linspace(1, frames, 6)
    q = start.copy()
    for frame in keys:
        bone.matrix = Matrix(link_pose(robot, q, link).tolist())
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)
        step = rng.uniform(-0.25, 0.25, robot.dof)
        step[~np.isin(robot.actuated_joint_names, robot.chain_joint_names(link))] = 0
        q = np.clip(q + step, robot.lower + 0.1, robot.upper - 0.1)
    return start


def scrub(bpy, frames):
    times = []
    for frame in range(1, frames + 1):
        t0 = time.perf_counter()
        bpy.context.scene.frame_set(frame)
        times.append((time.perf_counter() - t0) * 1000.0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    import bpy

    import kinema_nodes
    from kinema_nodes import evaluator
    from kinema_nodes.blender.edit import add_ik_target, target_nodes
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    rng = np.random.default_rng(args.seed)
    rig = import_urdf(bpy.context, "panda")
    robot = robot_for_rig(rig)
    link = "panda_hand_tcp"
    bpy.context.view_layer.objects.active = rig
    rows = {}
    tree = None
    for backend in ("NUMPY", "PYROKI"):
        if tree is None:
            tree, target, solver = add_ik_target(bpy.context, rig, link, backend=backend)
            start = keyframe_path(bpy, rig, robot, target.control_bone, link, args.frames, rng)
        solver.backend = backend
        solver.use_own_budget, solver.budget_ms = True, 1e6
        solver.over_budget = False
        write_joint_values(rig, robot, start)
        evaluator.warm_up_tree(tree)
        scrub(bpy, 20)  # warm-up pass
        solve_ms = []
        frame_ms = []
        for frame in range(1, args.frames + 1):
            t0 = time.perf_counter()
            bpy.context.scene.frame_set(frame)
            frame_ms.append((time.perf_counter() - t0) * 1000.0)
            solve_ms.append(solver.last_solve_ms)
        converged = solver.summary
        rows[backend] = (frame_ms, solve_ms, converged)

    # Re-compiling after an edit (solver compilation cached).
    compile_ms = []
    for i in range(20):
        solver.position_tolerance = 1e-5 * (1 + (i % 2))
        t0 = time.perf_counter()
        evaluator.program_for(tree)
        compile_ms.append((time.perf_counter() - t0) * 1000.0)
    snapshot_ms = []
    for _ in range(200):
        t0 = time.perf_counter()
        evaluator.program_for(tree)
        snapshot_ms.append((time.perf_counter() - t0) * 1000.0)

    # Baseline: the same scrub with the solver off (animation + depsgraph only).
    solver.backend = "OFF"
    scrub(bpy, 20)
    off_ms = scrub(bpy, args.frames)

    # Blender's own IK constraint on the same 7-bone chain, Kinema switched off.
    solver.live = False
    control = target_nodes(tree)[0].control_bone
    constraint = rig.pose.bones["panda_link7"].constraints.new("IK")
    constraint.target = rig
    constraint.subtarget = control
    constraint.chain_count = 7
    constraint.use_tail = False
    scrub(bpy, 20)
    blender_ik_ms = scrub(bpy, args.frames)
    rig.pose.bones["panda_link7"].constraints.remove(constraint)
    scrub(bpy, 5)
    no_ik_ms = scrub(bpy, args.frames)

    import jax

    med = statistics.median
    lines = [
        "## Live IK while scrubbing (`bench/bench_live.py`)",
        "",
        f"Command: `python bench/bench_live.py --frames {args.frames}`  ",
        f"Machine: {platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores; Python {platform.python_version()}, "
        f"bpy {bpy.app.version_string}, jax {jax.__version__}; seed {args.seed}. Panda from example-robot-data with meshes; the "
        f"tool control (`{link}`, 7-joint chain) keyed at 6 reachable poses over {args.frames} frames; one `frame_set` per frame.",
        "",
        "| what | median ms/frame | p95 | max | solver median ms | overhead beyond solve (median) |",
        "|---|---|---|---|---|---|",
    ]
    base = med(off_ms)
    for backend, (frame_ms, solve_ms, summary) in rows.items():
        overhead = med(np.array(frame_ms) - np.array(solve_ms)) - base
        lines.append(f"| Kinema live IK, {backend} | {med(frame_ms):.3f} | {percentile(frame_ms, 95):.3f} | {max(frame_ms):.3f} | "
                     f"{med(solve_ms):.3f} | {overhead:.3f} (last: {summary}) |")
    lines += [
        f"| Blender IK constraint, same chain | {med(blender_ik_ms):.3f} | {percentile(blender_ik_ms, 95):.3f} | {max(blender_ik_ms):.3f} | — | — |",
        f"| no IK at all (animation only) | {med(no_ik_ms):.3f} | {percentile(no_ik_ms, 95):.3f} | {max(no_ik_ms):.3f} | — | — |",
        f"| Kinema solver Off (evaluator + animation) | {base:.3f} | {percentile(off_ms, 95):.3f} | {max(off_ms):.3f} | — | — |",
        "",
        f"Ratios to Blender's IK constraint (per frame_set): NumPy {med(rows['NUMPY'][0]) / med(blender_ik_ms):.2f}×, "
        f"PyRoki {med(rows['PYROKI'][0]) / med(blender_ik_ms):.2f}×.  ",
        f"Re-compiling the graph after an edit: median {med(compile_ms):.3f} ms, max {max(compile_ms):.3f} ms; "
        f"snapshot + compare when nothing changed: median {med(snapshot_ms):.3f} ms.  ",
        "Overhead beyond solve = frame_set time − the solver's own time − the same frame_set with the solver Off.",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_write:
        write_section(SECTION, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
