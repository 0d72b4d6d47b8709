"""Soak: scrub many frames with live IK and keyed target hand-offs; memory must stay flat (the
solver LRU is bounded) and frames must not get slower.

The arm6 rig's tool control is keyed along a smooth reachable loop; the IK Target's link is keyed
(stepped) to hand the goal between three links every 40 frames, so the solver cycles through
several compiled chains. Reports time and peak RSS per block of frames.

    python bench/bench_soak.py [--frames 20000] [--solver numpy|pyroki]
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import time

import numpy as np
from results_file import write_section

SECTION = "bench_soak"
LINKS = ("tool_tcp", "wrist_2_link", "forearm_link")


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--solver", choices=("numpy", "pyroki"), default="numpy")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    import bpy
    from mathutils import Matrix

    import kinema_nodes
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.solve._compiled_store import _solvers
    from kinema_nodes.blender.edit import add_ik_target, key_target_link
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = import_urdf(bpy.context, "arm6")
    robot = robot_for_rig(rig)
    start = np.array([0.2, -1.2, 1.2, -0.5, 0.5, 0.0])
    write_joint_values(rig, robot, start)
    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, None, backend=args.solver.upper())
    solver.use_own_budget, solver.budget_ms = True, 1e6
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 240
    bone = rig.pose.bones[target.control_bone]
    # One 240-frame loop, cycled: the control's keys repeat (Cycles modifier), the link keys too.
    for i, frame in enumerate(range(1, 241, 20)):
        q = start + 0.25 * np.sin(2 * np.pi * i / 12) * np.array([1.0, 0.4, -0.4, 0.6, 1.0, 1.0])
        bone.matrix = Matrix(link_pose(robot, q, robot.tool_point).tolist())
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)
    for k, frame in enumerate(range(1, 241, 40)):
        key_target_link(target, robot, LINKS[k % len(LINKS)], frame)
    from kinema_nodes.blender.animation import fcurves

    for fcurve in [*fcurves(rig), *fcurves(tree)]:
        fcurve.modifiers.new("CYCLES")

    blocks = []
    t_block, handoffs, links_seen = time.perf_counter(), 0, set()
    last_link = None
    for frame in range(1, args.frames + 1):
        scene.frame_set(frame)
        link = solver.solving_to
        links_seen.add(link)
        if link != last_link:
            handoffs += 1
            last_link = link
        if frame % args.block == 0:
            now = time.perf_counter()
            blocks.append((frame, (now - t_block) / args.block * 1000.0, rss_mb(), len(_solvers)))
            t_block = now
    per_frame = [b[1] for b in blocks]
    memory = [b[2] for b in blocks]

    import jax

    lines = [
        "## Soak: live IK with hand-offs (`bench/bench_soak.py`)",
        "",
        f"Command: `python bench/bench_soak.py --frames {args.frames} --solver {args.solver}`  ",
        f"Machine: {platform.machine()}, 2 cores; Python {platform.python_version()}, bpy {bpy.app.version_string}, jax {jax.__version__}. "
        f"arm6, control keyed on a 240-frame loop (cycled), Target Bone keyed stepped among {', '.join(LINKS)} every 40 frames; "
        f"{args.frames} `frame_set` calls; {handoffs} hand-offs; links solved: {', '.join(sorted(links_seen))}.",
        "",
        "| frames so far | ms per frame (block) | RSS MB | compiled PyRoki solvers held |",
        "|---|---|---|---|",
        *[f"| {frame} | {ms:.3f} | {mb:.1f} | {held} |" for frame, ms, mb, held in blocks],
        "",
        f"First block {per_frame[0]:.3f} ms/frame, last {per_frame[-1]:.3f} (median {statistics.median(per_frame):.3f}); "
        f"RSS first {memory[0]:.1f} MB, last {memory[-1]:.1f} MB, growth {memory[-1] - memory[0]:+.1f} MB after the first block.",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_write:
        write_section(f"{SECTION}_{args.solver}", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
