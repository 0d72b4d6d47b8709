"""`kinema-nodes bake --check-limits/--retime` and `kinema-nodes export` as a pipeline runs them:
fresh processes, files on disk, a UR10 from example-robot-data, and each output read back by
something independent (yourdfpy FK, rosbags, MuJoCo, json, numpy)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion

FPS = 24.0
START = np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0])


def _kinema(*args):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *map(str, args)], capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.fixture(scope="module")
def shot(tmp_path_factory, robots):
    """One bake of a UR10 tool path, checked and retimed; the files it wrote."""
    robot = robots("ur10")
    folder = tmp_path_factory.mktemp("shot")
    targets = folder / "targets.csv"
    with targets.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz"])
        for i in range(48):
            q = START + np.array([0.8, 0.3, -0.4, 0.3, 0.4, 0.5]) * np.sin(np.pi * i / 47)
            pose = link_pose(robot, q, "tool0")
            writer.writerow([i + 1, *pose[:3, 3], *matrix_to_quaternion(pose)])
    files = {name: folder / name for name in ("shot.blend", "retimed.blend", "joints.csv", "limits.png")}
    result = _kinema("bake", "ur10", "--targets", targets, "--out", files["shot.blend"], "--solver", "numpy",
                     "--start", *(f"{n}={v}" for n, v in zip(robot.actuated_joint_names, START)),
                     "--joints-out", files["joints.csv"], "--check-limits", "--max-acc", 3, "--max-jerk", 40,
                     "--margin", 10, "--retime", files["retimed.blend"], "--limits-report", files["limits.png"], "--json")
    assert result.returncode == 0, result.stderr
    return robot, folder, files, json.loads(result.stdout)


def test_bake_json_has_the_violation_lists_and_the_retimed_timing(shot):
    _, _, files, payload = shot
    for key in ("velocity_violations", "acceleration_violations", "jerk_violations"):
        assert payload[key] == [], key
    assert payload["limits"]["margin_percent"] == 10 and payload["limits"]["acceleration"]["checked"]
    retime = payload["retime"]
    assert retime["shortest_executable_s"] <= retime["duration_s"] <= retime["shortest_executable_s"] + 1 / FPS + 1e-9
    assert files["retimed.blend"].is_file() and files["limits.png"].read_bytes()[:4] == b"\x89PNG"


def test_bake_with_a_wide_margin_flags_velocity_and_exits_3(shot, tmp_path):
    robot, folder, _, _ = shot
    result = _kinema("bake", "ur10", "--targets", folder / "targets.csv", "--out", tmp_path / "tight.blend", "--solver", "numpy",
                     "--start", *(f"{n}={v}" for n, v in zip(robot.actuated_joint_names, START)),
                     "--check-limits", "--margin", 95, "--json")
    assert result.returncode == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["velocity_violations"] and payload["status"] == "flagged"
    for violation in payload["velocity_violations"]:
        assert set(violation) == {"joint", "worst", "limit", "frames"}
        assert violation["worst"] > violation["limit"]


def test_exported_csv_replayed_through_yourdfpy_reproduces_the_baked_tool_path(shot, tmp_path):
    import yourdfpy

    robot, _, files, _ = shot
    out = tmp_path / "shot.csv"
    result = _kinema("export", files["shot.blend"], "--format", "csv", "--out", out, "--json")
    assert result.returncode == 0, result.stderr
    with files["joints.csv"].open() as handle:  # what the bake solved, written by the bake itself
        baked = np.array(list(csv.reader(handle))[1:], dtype=float)[:, 1:]
    with out.open() as handle:
        assert handle.readline().startswith("# robot: ur10; fps: 24;")
        rows = list(csv.reader(handle))
    assert rows[0] == ["time_s", *robot.actuated_joint_names]
    table = np.array(rows[1:], dtype=float)
    assert np.allclose(table[:, 0], np.arange(48) / FPS)
    urdf = yourdfpy.URDF.load(str(robot.path), build_scene_graph=True, load_meshes=False)
    worst = 0.0
    for row, q in zip(table, baked):
        urdf.update_cfg(dict(zip(rows[0][1:], row[1:])))
        theirs = urdf.get_transform("tool0", urdf.base_link)[:3, 3]
        worst = max(worst, float(np.abs(theirs - link_pose(robot, q, "tool0")[:3, 3]).max()))
    assert worst < 1e-6, worst


def test_exported_rosbag2_read_back_with_rosbags_holds_the_positions_and_stamps(shot, tmp_path):
    from kinema_nodes.core.shot.export import read_ros2

    robot, _, files, _ = shot
    csv_out, bag = tmp_path / "shot.csv", tmp_path / "shot_bag"
    assert _kinema("export", files["shot.blend"], "--format", "csv", "--out", csv_out, "--frames", "5:40").returncode == 0
    result = _kinema("export", files["shot.blend"], "--format", "ros2", "--out", bag, "--topic", "/ur10/trajectory",
                     "--frames", "5:40")
    assert result.returncode == 0, result.stderr
    expected = np.loadtxt(csv_out, delimiter=",", skiprows=2)
    (message,) = read_ros2(bag, "/ur10/trajectory")
    assert list(message.joint_names) == robot.actuated_joint_names
    assert np.array_equal(np.array([p.positions for p in message.points]), expected[:, 1:])
    stamps = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in message.points])
    assert np.abs(stamps - expected[:, 0]).max() < 1e-9 and len(stamps) == 36
    assert (tmp_path / "shot_bag.yaml").read_text().startswith("header:")


def test_exported_json_and_mujoco_qpos(shot, tmp_path):
    import mujoco

    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("core_exports", Path(__file__).parents[1] / "core" / "test_limits_retime_export.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    mjcf_from_urdf = helpers.mjcf_from_urdf

    robot, _, files, _ = shot
    out = tmp_path / "shot.json"
    assert _kinema("export", files["shot.blend"], "--format", "json", "--out", out, "--velocities", "--max-acc", 3).returncode == 0
    data = json.loads(out.read_text())
    assert data["joint_names"] == robot.actuated_joint_names and data["fps"] == FPS
    assert data["limits_checked"] and data["limits"]["acceleration"]["checked"] and not data["limits"]["jerk"]["checked"]
    assert len(data["positions"]) == len(data["velocities"]) == 48
    model = mjcf_from_urdf(robot, tmp_path)
    npz = tmp_path / "shot.npz"
    result = _kinema("export", files["retimed.blend"], "--format", "mujoco", "--model", model, "--out", npz)
    assert result.returncode == 0, result.stderr
    arrays = np.load(npz)
    assert list(arrays["joint_names"][1:]) == robot.actuated_joint_names
    model_loaded = mujoco.MjModel.from_xml_path(str(model))
    assert arrays["qpos"].shape[1] == model_loaded.nq
    assert arrays["qpos"].shape[0] == json.loads(_kinema("export", files["retimed.blend"], "--format", "json", "--out",
                                                         tmp_path / "r.json", "--json").stdout)["frames"][1]


@pytest.mark.parametrize("case", ["nothing baked", "frames outside", "unknown rig", "mujoco without model"])
def test_export_errors_are_one_line_exit_2_and_leave_no_file(shot, tmp_path, case):
    _, _, files, _ = shot
    blend = files["shot.blend"]
    extra: list = []
    fmt, out = "csv", tmp_path / "out.csv"
    if case == "nothing baked":
        blend = tmp_path / "robot.blend"
        assert _kinema("import", "ur10", "--out", blend).returncode == 0
    elif case == "frames outside":
        extra = ["--frames", "1:480"]
    elif case == "unknown rig":
        extra = ["--rig", "no_such_rig"]
    else:
        fmt, out = "mujoco", tmp_path / "out.npz"
    result = _kinema("export", blend, "--format", fmt, "--out", out, *extra)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("kinema-nodes: error:")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name != "robot.blend"] == []


def test_bake_refuses_retime_without_an_acceleration_limit_before_baking(shot, tmp_path):
    _, folder, _, _ = shot
    result = _kinema("bake", "ur10", "--targets", folder / "targets.csv", "--out", tmp_path / "s.blend", "--solver", "numpy",
                     "--retime", tmp_path / "r.blend")
    assert result.returncode == 2 and "--max-acc" in result.stderr
    assert list(tmp_path.iterdir()) == []
