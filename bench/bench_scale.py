"""Issue 18 scaling, small runs: reach poses/second and a shot batch on 1 and 2 local Dask workers.

    .venv/bin/python bench/bench_scale.py [--step 0.15] [--orientations 8] [--shots 6]

Prints one JSON object (and the load average). Reach counts every (cell, orientation) of the
box and, separately, those actually solved (cells beyond the chain's reach ball are skipped).
The batch bakes `--shots` copies of a 10-frame arm6 shot with --solver numpy; `sequential` is
the same shots as single `kinema-nodes bake` runs one after another.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def kinema(*args):
    done = subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        raise SystemExit(done.stderr)
    return json.loads(done.stdout) if "--json" in args else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", type=float, default=0.15)
    parser.add_argument("--orientations", type=int, default=8)
    parser.add_argument("--shots", type=int, default=6)
    args = parser.parse_args()
    results = {"load_before": os.getloadavg(), "cores": os.cpu_count()}
    for workers in (1, 2):
        payload = kinema("reach", "arm6", "--step", str(args.step), "--orientations", str(args.orientations),
                         "--workers", str(workers), "--json")
        results[f"reach_{workers}_workers"] = {k: payload[k] for k in ("poses", "poses_solved", "solve_seconds", "poses_per_second",
                                                                       "solved_poses_per_second")}
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.robot import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot("arm6")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        shots = []
        for i in range(args.shots):
            with (folder / f"t{i}.csv").open("w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz"])
                for f in range(10):
                    q = robot.mid_configuration() + (0.05 + 0.01 * i) * np.sin(np.pi * f / 9)
                    pose = link_pose(robot, q, robot.tool_point)
                    writer.writerow([f + 1, *pose[:3, 3], *matrix_to_quaternion(pose)])
            shots.append({"name": f"s{i}", "targets": f"t{i}.csv", "out": f"o/s{i}.blend"})
        (folder / "m.json").write_text(json.dumps({"defaults": {"robot": "arm6", "solver": "numpy"}, "shots": shots}))
        t0 = time.perf_counter()
        for i in range(args.shots):
            kinema("bake", "arm6", "--targets", str(folder / f"t{i}.csv"), "--out", str(folder / f"seq{i}.blend"), "--solver", "numpy")
        results["batch_sequential_seconds"] = round(time.perf_counter() - t0, 2)
        for workers in (1, 2):
            t0 = time.perf_counter()
            payload = kinema("batch", str(folder / "m.json"), "--workers", str(workers), "--force", "--json")
            results[f"batch_{workers}_workers_seconds"] = round(time.perf_counter() - t0, 2)
            assert payload["done"] == args.shots, payload
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
