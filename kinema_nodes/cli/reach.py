"""`kinema-nodes reach`: a reachability map of one link over a grid, on a Dask cluster.

The grid's cells are cut into contiguous chunks (neighbouring cells seed each other) of about
equal work (the poses the reach bounds leave to the kernel), and each
chunk is one task (core.reach.reach_chunk); with no --scheduler a local cluster of one
single-threaded process per core runs them. The reach bounds (core.reach.reach_bounds) are
searched once here and sent with every chunk. The map (.npz) holds the index per cell and a
witness configuration per reached (cell, orientation); --render draws slices through it.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..core.errors import KinemaError
from .batch import add_cluster_arguments, need_dask, open_client
from .common import emit

#: Chunks per worker: enough to balance cells near the arm (slow) against empty ones (free).
CHUNKS_PER_WORKER = 4


def add_arguments_reach(parser):
    """Reachability map of a link over a grid x orientations spread over SO(3), on a Dask cluster."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link to place (default: the tool point)")
    parser.add_argument("--box", type=float, nargs=6, metavar=("X0", "Y0", "Z0", "X1", "Y1", "Z1"),
                        help="the region, metres in the robot's root frame (default: a cube holding all the chain can reach)")
    parser.add_argument("--step", type=float, default=0.1, metavar="M", help="cell size, metres (default 0.1)")
    parser.add_argument("--orientations", type=int, default=32, metavar="N",
                        help="orientations per cell, spread evenly over SO(3) (super-Fibonacci; default 32)")
    parser.add_argument("--seeds", type=int, default=8, metavar="S", help="random starts for a pose no solved or tried neighbour tells anything about (default 8; "
                             "2 where one does, 3 more beside a solved pose)")
    parser.add_argument("--out", metavar="MAP.npz", help="save the map: index per cell, witness configuration per reached pose")
    parser.add_argument("--render", metavar="MAP.png", help="picture: slices through the map coloured by index")
    add_cluster_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_reach(args) -> int:
    from ..core.files import check_output_path
    from ..core.model.loading import load_robot
    from ..core.reach import (MAX_ORIENTATIONS, assemble, check_pose_count, check_seeds, chunks, default_box, grid_cells, grid_shape,
                              reach_bounds, reach_chunk, render_slices, super_fibonacci)

    started = time.perf_counter()
    check_seeds(args.seeds)  # the caps before the robot is read or anything allocated
    if args.orientations < 1:
        raise KinemaError(f"--orientations must be at least 1, got {args.orientations}")
    if args.orientations > MAX_ORIENTATIONS:
        raise KinemaError(f"--orientations {args.orientations} is more than {MAX_ORIENTATIONS:,}")
    for option, value, suffix in (("--out", args.out, ".npz"), ("--render", args.render, ".png")):
        if value:
            if not value.lower().endswith(suffix):
                raise KinemaError(f"{option} '{value}' must end in {suffix}")
            check_output_path(value, option)
    robot = load_robot(args.urdf, check_meshes=False)
    link = robot.check_link(args.link or robot.tool_point)
    if not (math.isfinite(args.step) and args.step > 0):
        raise KinemaError(f"--step must be a positive number of metres, got {args.step}")
    box = np.array(args.box) if args.box else default_box(robot, link, args.step)
    _, shape = grid_shape(box, args.step)
    check_pose_count(math.prod(shape), args.orientations, robot.dof)
    centres, shape = grid_cells(box, args.step)
    orientations = super_fibonacci(args.orientations)
    poses = len(centres) * len(orientations)
    need_dask()
    from distributed import as_completed

    from .bake import TerminalProgress

    with open_client(args) as client:  # a --scheduler that does not answer is refused before the search below
        bounds = reach_bounds(robot, link)  # searched once here, not once per worker
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        work = None
        if bounds is not None:
            from ..core.model.rotations import quaternion_to_matrix

            rotations = np.array([quaternion_to_matrix(q) for q in orientations])
            work = bounds.poses_in(centres, rotations).sum(axis=1)
        parts = chunks(len(centres), workers * CHUNKS_PER_WORKER, work)
        robot_ref = args.urdf
        orientations_future = client.scatter(orientations, broadcast=True)
        futures = [client.submit(reach_chunk, robot_ref, link, centres[part], part, orientations_future, args.seeds,
                                 bounds=bounds, retries=1, pure=False) for part in parts]
        progress = TerminalProgress(f"{poses} poses")
        results, done = [], 0
        solve_started = time.perf_counter()
        for future in as_completed(futures):
            results.append(future.result())
            done += 1
            progress(done, len(futures))
        solve_seconds = time.perf_counter() - solve_started
    reach_map = assemble(robot, link, centres, shape, args.step, orientations, results)
    if args.out:
        reach_map.save(args.out)
    if args.render:
        render_slices(reach_map, args.render)
    index = reach_map.index
    payload = {
        "robot": robot.name, "link": link, "cells": len(centres), "shape": list(shape), "step": args.step,
        "box": [float(v) for v in box], "orientations": len(orientations), "poses": poses,
        "reached_poses": int(reach_map.reached.sum()), "reachable_cells": int((index > 0).sum()),
        "mean_index_reachable": float(index[index > 0].mean()) if (index > 0).any() else 0.0,
        "poses_solved": int(sum(r.poses for r in results)),
        "cpu_seconds": round(sum(r.cpu_seconds for r in results), 3),
        "setup_seconds": round(sum(r.setup_seconds for r in results), 3),
        "poses_per_cpu_second": round(poses / max(sum(r.cpu_seconds for r in results), 1e-9), 1),
        "solved_poses_per_cpu_second": round(sum(r.poses for r in results) / max(sum(r.cpu_seconds for r in results), 1e-9), 1),
        "workers": workers, "solve_seconds": round(solve_seconds, 3),
        "poses_per_second": round(poses / solve_seconds, 1) if solve_seconds > 0 else None,
        "solved_poses_per_second": round(sum(r.poses for r in results) / solve_seconds, 1) if solve_seconds > 0 else None,
        "seconds": round(time.perf_counter() - started, 3), "out": args.out, "render": args.render,
    }
    lines = [f"{robot.name} {link}: {len(centres)} cells x {len(orientations)} orientations = {poses} poses on {workers} "
             f"worker{'s' if workers > 1 else ''} in {solve_seconds:.2f} s ({payload['poses_per_second']} poses/s)",
             f"{payload['reachable_cells']} cells reachable at some orientation, {payload['reached_poses']} poses reached"]
    if args.out:
        lines.append(f"map saved to {args.out}")
    if args.render:
        lines.append(f"picture {args.render}")
    emit(args, payload, lines)
    return 0
