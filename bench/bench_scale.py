"""Issue 18 scaling: reach poses/second and shot batches on 1 and 2 local Dask workers.

    .venv/bin/python bench/bench_scale.py [--robot arm6] [--step 0.15] [--orientations 8]
                                          [--shots 20] [--memory-shots 200] [--skip reach,batch,memory,profile]

Prints one JSON object. The machine is shared, so every figure has the load average beside it,
and reach is given per CPU second of the worker processes (what one core does, whatever else
runs) as well as per wall second.

- reach: `kinema-nodes reach ROBOT --step --orientations --workers N --json` (default box: the
  cube around the chain's reach ball). "poses" counts every (cell, orientation) of the map;
  "solved" those the kernel decided (the others fail a reach bound, core/reach.py ReachBounds).
- profile: where a fresh single bake's time goes (bare Python, `import bpy`, the URDF reader's
  imports, the whole bake with its own bake/solve seconds).
- batch: `--shots` ten-frame arm6 shots (--solver numpy) as single `kinema-nodes bake` runs one
  after another, then as one batch on 2 workers (warm interpreters, the default) and with
  --fresh-processes.
- memory: a `--memory-shots` batch on 2 workers with the resident memory of each worker
  process and of its shot server sampled every 0.25 s, from a second after the first shot
  finished (before that the servers are still importing).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

PYTHON = sys.executable


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed(command: list[str]) -> dict:
    """Wall and CPU seconds (children's user + system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command)}: {done.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall": round(wall, 3), "cpu": round(cpu, 3), "stdout": done.stdout}


def kinema(*args) -> dict:
    result = timed([PYTHON, "-m", "kinema_nodes", *args])
    result["json"] = json.loads(result.pop("stdout")) if "--json" in args else None
    return result


def write_shots(folder: Path, count: int) -> Path:
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot("arm6")
    shots = []
    for i in range(count):
        with (folder / f"t{i}.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz"])
            for f in range(10):
                q = robot.mid_configuration() + (0.05 + 0.002 * (i % 50)) * np.sin(np.pi * f / 9)
                pose = link_pose(robot, q, robot.tool_point)
                writer.writerow([f + 1, *pose[:3, 3], *matrix_to_quaternion(pose)])
        shots.append({"name": f"s{i}", "targets": f"t{i}.csv", "out": f"o/s{i}.blend", "joints_out": f"o/s{i}.csv"})
    manifest = folder / "m.json"
    manifest.write_text(json.dumps({"defaults": {"robot": "arm6", "solver": "numpy"}, "shots": shots}))
    return manifest


def bench_reach(args) -> dict:
    out = {}
    for workers in (1, 2):
        start_load = load()
        run = kinema("reach", args.robot, "--step", str(args.step), "--orientations", str(args.orientations),
                     "--workers", str(workers), "--json")
        p = run["json"]
        out[f"{workers}_workers"] = {
            "load_before": start_load, "load_after": load(),
            **{k: p[k] for k in ("cells", "orientations", "poses", "poses_solved", "reached_poses", "solve_seconds", "cpu_seconds", "setup_seconds",
                                 "poses_per_second", "solved_poses_per_second", "poses_per_cpu_second",
                                 "solved_poses_per_cpu_second")}}
    return out


def bench_profile(folder: Path) -> dict:
    manifest = json.loads((folder / "m.json").read_text())
    shot = manifest["shots"][0]
    steps = {"bare python": [PYTHON, "-c", "pass"], "import numpy": [PYTHON, "-c", "import numpy"],
             "import bpy": [PYTHON, "-c", "import bpy"], "import yourdfpy (trimesh, scipy)": [PYTHON, "-c", "import yourdfpy"]}
    out = {"load_before": load()}
    for name, command in steps.items():
        runs = [timed(command) for _ in range(3)]
        out[name] = {"wall": float(np.median([r["wall"] for r in runs])), "cpu": float(np.median([r["cpu"] for r in runs]))}
    runs = [kinema("bake", "arm6", "--targets", str(folder / shot["targets"]), "--out", str(folder / "profile.blend"),
                   "--solver", "numpy", "--json") for _ in range(3)]
    out["whole bake"] = {"wall": float(np.median([r["wall"] for r in runs])), "cpu": float(np.median([r["cpu"] for r in runs])),
                         "bake_seconds (solve and key)": float(np.median([r["json"]["bake_seconds"] for r in runs]))}
    out["load_after"] = load()
    return out


def bench_batch(folder: Path, shots: int) -> dict:
    manifest = folder / "m.json"
    data = json.loads(manifest.read_text())
    out = {"shots": shots, "load_before": load()}
    t0 = time.perf_counter()
    cpu = 0.0
    for shot in data["shots"][:shots]:
        run = kinema("bake", "arm6", "--targets", str(folder / shot["targets"]), "--out", str(folder / f"seq_{shot['name']}.blend"),
                     "--joints-out", str(folder / f"seq_{shot['name']}.csv"), "--solver", "numpy", "--json")
        cpu += run["cpu"]
    out["sequential"] = {"wall": round(time.perf_counter() - t0, 2), "cpu": round(cpu, 2), "load_after": load()}
    sub = folder / "sub.json"
    sub.write_text(json.dumps({**data, "shots": data["shots"][:shots]}))
    for label, extra in (("batch_2_workers_warm", ()), ("batch_2_workers_fresh_processes", ("--fresh-processes",))):
        start_load = load()
        run = kinema("batch", str(sub), "--workers", "2", "--force", "--json", *extra)
        assert run["json"]["done"] == shots, run["json"]
        out[label] = {"wall": run["wall"], "ratio_to_sequential": round(run["wall"] / out["sequential"]["wall"], 3),
                      "load_before": start_load, "load_after": load()}
    same = all((folder / "o" / f"{s['name']}.csv").read_bytes() == (folder / f"seq_{s['name']}.csv").read_bytes()
               for s in data["shots"][:shots])
    out["joint_csvs_byte_identical_to_sequential"] = same
    return out


def bench_memory(folder: Path, shots: int) -> dict:
    import psutil

    sub = folder / "mem.json"
    data = json.loads((folder / "m.json").read_text())
    sub.write_text(json.dumps({**data, "shots": data["shots"][:shots]}))
    batch = subprocess.Popen([PYTHON, "-m", "kinema_nodes", "batch", str(sub), "--workers", "2", "--force", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples: dict[int, list] = {}
    stop = threading.Event()

    outputs = folder / "o"
    for old in outputs.glob("*.blend"):
        old.unlink()  # so the first new output marks the end of the warm-up

    def sample():
        root = psutil.Process(batch.pid)
        t0 = time.perf_counter()
        while not stop.is_set():
            try:
                warm = any(outputs.glob("*.blend"))  # a shot has finished: the servers are up
                for worker in root.children():
                    if "spawn" not in " ".join(worker.cmdline()):
                        continue  # Dask's workers are multiprocessing-spawned
                    server = [c for c in worker.children() if "serve_shots" in " ".join(c.cmdline())]
                    rss = worker.memory_info().rss, sum(s.memory_info().rss for s in server)
                    samples.setdefault(worker.pid, []).append((time.perf_counter() - t0, *rss, warm))
            except psutil.Error:
                pass
            time.sleep(0.25)

    thread = threading.Thread(target=sample, daemon=True)
    start_load = load()
    t0 = time.perf_counter()
    thread.start()
    stdout, _ = batch.communicate()
    stop.set()
    thread.join()
    payload = json.loads(stdout)
    out = {"shots": shots, "done": payload["done"], "wall": round(time.perf_counter() - t0, 1), "load_before": start_load,
           "load_after": load(), "workers": {}}
    mib = 1024 * 1024
    for pid, rows in samples.items():
        rows = np.array(rows)
        rows = rows[(rows[:, 2] > 0) & (rows[:, 3] > 0)][4:]  # from a second after the first finished shot on
        if len(rows) < 20:
            continue
        tenth = len(rows) // 10
        worker_rss, server_rss = rows[:, 1] / mib, rows[:, 2] / mib
        out["workers"][str(pid)] = {
            "samples": len(rows), "seconds_sampled": round(float(rows[-1, 0] - rows[0, 0]), 1),
            "worker_rss_mib_first_tenth": round(float(worker_rss[:tenth].mean()), 1),
            "worker_rss_mib_last_tenth": round(float(worker_rss[-tenth:].mean()), 1),
            "worker_rss_mib_min_max": [round(float(worker_rss.min()), 1), round(float(worker_rss.max()), 1)],
            "server_rss_mib_first_tenth": round(float(server_rss[:tenth].mean()), 1),
            "server_rss_mib_last_tenth": round(float(server_rss[-tenth:].mean()), 1),
            "server_rss_mib_min_max": [round(float(server_rss.min()), 1), round(float(server_rss.max()), 1)],
            "shots_done_by_it": sum(1 for s in payload["shots"] if s.get("worker_pid") == pid)}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--robot", default="arm6")
    parser.add_argument("--step", type=float, default=0.15)
    parser.add_argument("--orientations", type=int, default=8)
    parser.add_argument("--shots", type=int, default=20)
    parser.add_argument("--memory-shots", type=int, default=200)
    parser.add_argument("--skip", default="", help="comma-separated: reach, profile, batch, memory")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    results = {"cores": os.cpu_count(), "load_before": load()}
    if "reach" not in skip:
        results["reach"] = bench_reach(args)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        write_shots(folder, max(args.shots, args.memory_shots))
        if "profile" not in skip:
            results["profile"] = bench_profile(folder)
        if "batch" not in skip:
            results["batch"] = bench_batch(folder, args.shots)
        if "memory" not in skip:
            results["memory"] = bench_memory(folder, args.memory_shots)
    results["load_after"] = load()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
