"""`kinema-nodes batch` on a real Dask LocalCluster of 2 worker processes, tiny arm6 shots.

The fault test kills (SIGKILL) the Dask worker process that is running one shot's bake, while
the bake runs: Dask gives the shot to a fresh worker once, and the batch still finishes it.
The identity tests compare the batch's joint CSVs byte for byte with single `bake` runs (4
shots in the default run, the issue's 20 under the slow mark) for shots forked from the
workers' warm interpreters; the rerun in the fault test runs its shot with `--fresh-processes`.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.shot.batch import is_fresh, read_manifest
from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion

psutil = pytest.importorskip("psutil")
pytest.importorskip("distributed")


def _kinema(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, timeout=600,
                          check=False, cwd=cwd)


def _track(path, robots, phase, frames=10):
    robot = robots("arm6")
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz"])
        for i in range(frames):
            q = robot.mid_configuration() + (0.05 + 0.05 * phase) * np.sin(np.pi * i / (frames - 1))  # starts at the rest pose
            pose = link_pose(robot, q, robot.tool_point)
            writer.writerow([i + 1, *pose[:3, 3], *matrix_to_quaternion(pose)])


def _manifest(folder, shots):
    path = folder / "manifest.json"
    path.write_text(json.dumps({"defaults": {"robot": "arm6", "solver": "numpy"}, "shots": shots}))
    return path


def _bake_of(process, marker: str) -> bool:
    """Is this the bake of the shot `marker`? A fresh process names its targets on its command
    line; a shot forked from a warm interpreter holds its output file kinema-shot-NAME-... open."""
    cmdline = process.info.get("cmdline") or []
    if "bake" in cmdline and any(marker in part for part in cmdline):
        return True
    try:
        return any(f"kinema-shot-{Path(marker).stem}-" in f.path for f in process.open_files())
    except psutil.Error:
        return False


def _kill_worker_running(batch_pid: int, marker: str, killed: list, stop: threading.Event):
    """Watch for the bake of the shot `marker`; SIGKILL the Dask worker above it (the ancestor
    whose parent is the batch command)."""
    while not stop.is_set():
        for process in psutil.process_iter(["cmdline"]):
            if process.pid == batch_pid or not _bake_of(process, marker):
                continue
            try:
                worker = process.parent()
                while worker is not None and worker.ppid() != batch_pid:
                    worker = worker.parent()
                if worker is None:
                    continue
                killed.append(worker.pid)
                os.kill(worker.pid, signal.SIGKILL)
            except (psutil.Error, OSError):
                continue
            return
        time.sleep(0.02)


def test_four_shots_on_two_workers_one_fails_with_its_message_one_worker_killed_and_retried(tmp_path, robots):
    for i in range(3):
        _track(tmp_path / f"t{i}.csv", robots, phase=0.3 * i)
    (tmp_path / "bad.csv").write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,0.3,1,0,0,0\n2,abc,0,0.3,1,0,0,0\n")
    (tmp_path / "victim.csv").write_bytes((tmp_path / "t2.csv").read_bytes())
    manifest = _manifest(tmp_path, [
        {"name": "a", "targets": "t0.csv", "out": "out/a.blend", "joints_out": "out/a.csv"},
        {"name": "b", "targets": "t1.csv", "out": "out/b.blend"},
        {"name": "bad", "targets": "bad.csv", "out": "out/bad.blend"},
        {"name": "victim", "targets": "victim.csv", "out": "out/victim.blend", "joints_out": "out/victim.csv"},
    ])
    killed, stop = [], threading.Event()
    batch = subprocess.Popen([sys.executable, "-m", "kinema_nodes", "batch", str(manifest), "--workers", "2", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = threading.Thread(target=_kill_worker_running, args=(batch.pid, str(tmp_path / "victim.csv"), killed, stop), daemon=True)
    watcher.start()
    try:
        stdout, stderr = batch.communicate(timeout=600)
    finally:
        stop.set()
        watcher.join(5)
    assert batch.returncode == 3, stderr
    payload = json.loads(stdout)
    shots = {s["name"]: s for s in payload["shots"]}
    assert shots["bad"]["status"] == "failed"
    assert shots["bad"]["error"] == f"targets '{tmp_path / 'bad.csv'}' line 3, column x: 'abc' is not a number"
    assert killed, "the watcher never saw the victim's bake running"
    assert shots["victim"]["status"] == "ok", shots["victim"]
    assert shots["victim"]["worker_pid"] not in killed  # finished by another (fresh) worker
    assert shots["victim"]["converged"] == 10
    for name in ("a", "b"):
        assert shots[name]["status"] == "ok" and shots[name]["converged"] == 10
        assert shots[name]["warm"] is True  # forked from the worker's warm interpreter
    assert (payload["done"], payload["failed"]) == (3, 1)
    assert not (tmp_path / "out" / "bad.blend").exists()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temporary left behind

    again = _kinema("batch", str(manifest), "--workers", "2", "--json", "--fresh-processes")
    rerun = {s["name"]: s for s in json.loads(again.stdout)["shots"]}
    assert {name: s["status"] for name, s in rerun.items()} == {"a": "skipped", "b": "skipped", "bad": "failed", "victim": "skipped"}
    assert rerun["bad"]["warm"] is False and rerun["bad"]["error"] == shots["bad"]["error"]  # the same line from a fresh process
    shot_b = next(s for s in read_manifest(manifest) if s.name == "b")
    assert is_fresh(shot_b)
    later = (tmp_path / "out" / "b.blend").stat().st_mtime_ns + 10_000_000
    os.utime(tmp_path / "t1.csv", ns=(later, later))  # an input newer than its output: baked again
    assert not is_fresh(shot_b)


def _same_csvs_as_single_bakes(tmp_path, robots, count: int, *options):
    shots = []
    for i in range(count):
        _track(tmp_path / f"t{i}.csv", robots, phase=0.4 * (i % 5) + 0.01 * i)
        shots.append({"name": f"s{i}", "targets": f"t{i}.csv", "out": f"batch/s{i}.blend", "joints_out": f"batch/s{i}.csv"})
    result = _kinema("batch", str(_manifest(tmp_path, shots)), "--workers", "2", "--json", *options)
    assert result.returncode == 0, result.stderr
    assert {s["warm"] for s in json.loads(result.stdout)["shots"]} == {"--fresh-processes" not in options}
    singles = []
    for i in range(count):  # two single bakes at a time: each its own fresh `kinema-nodes bake`
        singles.append(subprocess.Popen(
            [sys.executable, "-m", "kinema_nodes", "bake", "arm6", "--targets", str(tmp_path / f"t{i}.csv"),
             "--out", str(tmp_path / f"single{i}.blend"), "--joints-out", str(tmp_path / f"single{i}.csv"), "--solver", "numpy"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        if len(singles) >= 2 or i == count - 1:
            for single in singles:
                assert single.wait(timeout=600) == 0, single.stderr.read()
            singles = []
    for i in range(count):
        assert (tmp_path / "batch" / f"s{i}.csv").read_bytes() == (tmp_path / f"single{i}.csv").read_bytes(), i


def test_a_batch_writes_the_same_joint_csvs_as_single_bakes(tmp_path, robots):
    _same_csvs_as_single_bakes(tmp_path, robots, 4)


@pytest.mark.slow
def test_a_batch_of_20_shots_writes_the_same_joint_csvs_as_20_single_bakes(tmp_path, robots):
    _same_csvs_as_single_bakes(tmp_path, robots, 20)


@pytest.mark.parametrize("manifest, message", [
    ("[]", "must hold a non-empty list of shots"),
    ('[{"robot": "arm6", "out": "a.blend"}]', "shot 1: needs 'targets'"),
    ('[{"robot": "arm6", "targets": "nope.csv", "out": "a.blend"}]', "shot 1: targets 'nope.csv' not found"),
    ('[{"robot": "arm6", "targets": "t.csv", "out": "a.blend", "colour": 1}]', "shot 1: unknown key 'colour'"),
    ('[{"robot": "arm6", "targets": "t.csv", "out": "a.txt"}]', "must end in .blend"),
    ('[{"robot": "arm6", "targets": "t.csv", "out": "a.blend", "fps": -1}]', "fps must be a positive number"),
    ('[{"robot": "arm6", "targets": "t.csv", "out": "a.blend"}, {"robot": "arm6", "targets": "t.csv", "out": "a.blend"}]',
     "both write"),
    ("{not json", "is not valid JSON"),
    ('[{"robot": "arm6", "targets": "t.csv", "out": "a.blend"}, {"robot": "arm6", "targets": "t.csv", "out": "b/a.blend"}]',
     "two shots are named 'a'"),
])
def test_a_bad_manifest_is_one_line_and_nothing_runs(tmp_path, manifest, message):
    (tmp_path / "t.csv").write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,0.3,1,0,0,0\n")
    path = tmp_path / "m.json"
    path.write_text(manifest)
    with pytest.raises(KinemaError, match=message.replace("(", r"\(").replace(".", r"\.")):
        read_manifest(path)


def test_the_cli_says_a_bad_manifest_in_one_line_with_exit_2(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('[{"robot": "arm6", "out": "a.blend"}]')
    result = _kinema("batch", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "needs 'targets'" in result.stderr
