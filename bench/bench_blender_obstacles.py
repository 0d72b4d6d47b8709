"""Obstacles from a Blender collection (#14): what reading the world costs a live frame.

The joint-limited UR10 of example-robot-data with live IK (NumPy backend) on its tool, a
position-only control. Measures, per call, in one process:

- `frame_inputs` of the Solver step with no obstacle collection (the plain live path: collision
  code is never reached) and with one;
- `world_for` (the obstacles as primitives in the robot's root frame) for 1, 10 and 50 mesh
  objects (cubes and 482-vertex UV spheres), still and all moving every frame (keyed), and with
  50, one of them edited (its vertices scaled) before each call;
- a whole live frame (`frame_set`) with the tool control still and a crate keyed across the
  forearm, so each frame re-solves with avoidance (collide's solve, NumPy backend).

Writes its section of bench/RESULTS.md ("Obstacles from a Blender collection").

    python bench/bench_blender_obstacles.py [--samples 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from results_file import write_section

SECTION = "bench_blender_obstacles"
UR_HOME = [0.3, -1.2, 1.4, -1.6, -1.5, 0.2]


def median_ms(function, samples: int) -> tuple[float, float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1000), float(np.percentile(times, 95) * 1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from kinema_nodes.core.solve import wait_for_kernel_build

    wait_for_kernel_build()
    import bpy

    import kinema_nodes
    from kinema_nodes import evaluator
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.collisions import world_for
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values
    from kinema_nodes.core.model.example_robots import example_robots_folder

    kinema_nodes.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = import_urdf(bpy.context, example_robots_folder() / "ur_description/urdf/ur10_joint_limited_robot.urdf", collision=False)
    robot = robot_for_rig(rig)
    write_joint_values(rig, robot, np.array(UR_HOME))
    bpy.context.view_layer.update()
    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, "tool0", backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 500.0
    target.rotation_weight = 0.0
    bpy.context.scene.frame_set(1)

    def step_inputs():
        program = evaluator.program_for(tree)
        step = program.steps[0]
        return lambda: evaluator.frame_inputs(tree, program, step, 1)

    rows = []
    plain = median_ms(step_inputs(), args.samples)
    rows.append(("frame_inputs, no obstacle collection", *plain))

    collection = bpy.data.collections.new("Obstacles")
    bpy.context.scene.collection.children.link(collection)
    bpy.ops.mesh.primitive_cube_add(size=0.12, location=(0.46, -0.5, 0.64))
    crate = bpy.context.active_object
    crate.keyframe_insert("location", frame=1)
    crate.location = (0.46, 0.9, 0.64)
    crate.keyframe_insert("location", frame=12)
    collection.objects.link(crate)
    solver.obstacles = collection
    rows.append(("frame_inputs, 1 obstacle (a keyed cube)", *median_ms(step_inputs(), args.samples)))

    solver.live = False  # frame changes below only move the obstacles; what is timed runs by hand
    for count in (1, 10, 50):
        while len(collection.objects) < count:
            index = len(collection.objects)
            bpy.ops.mesh.primitive_uv_sphere_add(radius=0.05, location=(2.0 + 0.2 * index, 2.0, 0.5))
            ball = bpy.context.active_object
            ball.keyframe_insert("location", frame=1)
            ball.location.z = 1.5
            ball.keyframe_insert("location", frame=12)
            collection.objects.link(ball)
        bpy.context.scene.frame_set(5)
        still = median_ms(lambda: world_for(solver, rig), args.samples)
        rows.append((f"world_for, {count} mesh objects, still", *still))
        times = []
        for sample in range(args.samples):
            bpy.context.scene.frame_set(1 + sample % 12)  # every object keyed: all of them moved
            start = time.perf_counter()
            world_for(solver, rig)
            times.append(time.perf_counter() - start)
        rows.append((f"world_for, {count} mesh objects, all moved since the last call",
                     float(np.median(times) * 1000), float(np.percentile(times, 95) * 1000)))
    edited = collection.objects[-1].data
    shape = np.empty(len(edited.vertices) * 3, dtype=np.float32)
    edited.vertices.foreach_get("co", shape)
    times = []
    for sample in range(args.samples):
        edited.vertices.foreach_set("co", shape * (1.0 + 0.001 * (sample + 1)))  # new vertices every call: refitted
        edited.update()
        start = time.perf_counter()
        world_for(solver, rig)
        times.append(time.perf_counter() - start)
    edited.vertices.foreach_set("co", shape)
    edited.update()
    rows.append(("world_for, 50 mesh objects, one edited since the last call (read and refitted)",
                 float(np.median(times) * 1000), float(np.percentile(times, 95) * 1000)))
    for obj in list(collection.objects):
        if obj != crate:
            collection.objects.unlink(obj)

    def solved_frames(obstacles):
        solver.obstacles = obstacles
        times = []
        for sample in range(args.samples):
            write_joint_values(rig, robot, np.array(UR_HOME))
            bpy.context.scene.frame_set(1 + sample % 12)
            start = time.perf_counter()
            evaluator.run_tree(tree, force=True)  # frame inputs, the solve, writing the rig
            times.append(time.perf_counter() - start)
        return float(np.median(times) * 1000), float(np.percentile(times, 95) * 1000)

    rows.append(("a live frame's run_tree, no obstacle collection (plain solve)", *solved_frames(None)))
    rows.append(("a live frame's run_tree, the crate keyed across the forearm (avoiding solve)", *solved_frames(collection)))

    load = os.getloadavg()
    lines = [
        "## Obstacles from a Blender collection (`bench/bench_blender_obstacles.py`)",
        "",
        f"Command: `.venv/bin/python bench/bench_blender_obstacles.py --samples {args.samples}`.",
        "",
        f"UR10 (joint-limited, example-robot-data), NumPy backend, position-only tool target; {args.samples} samples; "
        f"Python {platform.python_version()}, bpy {bpy.app.version_string}, {os.cpu_count()} cores, "
        f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} during the run (a shared machine).",
        "",
        "| what | median ms | p95 ms |",
        "|---|---|---|",
        *[f"| {what} | {median:.3f} | {p95:.3f} |" for what, median, p95 in rows],
    ]
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_write:
        write_section(SECTION, markdown, Path(__file__).resolve().parent / "RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
