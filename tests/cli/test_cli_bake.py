"""`kinema-nodes bake` and `demo` as a pipeline runs them: fresh processes, files on disk.

The round trip: for each frame, forward kinematics of the written joint values reaches the CSV's
target (1e-4 m / 1e-4 rad: the solver's 1e-5 tolerance plus float32 keys on the control), and
the saved .blend, opened in another process, plays the same joint values (1e-6, float32 keys).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between


def _kinema(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, timeout=600,
                          check=False, cwd=cwd)


def _write_csv(path, rows, with_link):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz", *(["link"] if with_link else [])])
        for row in rows:
            writer.writerow(row)


def _panda_track(robot, frames=40):
    """Reachable targets: FK of a smooth joint path; the first half for panda_link8, the second
    handed off to the tool point (panda_hand_tcp)."""
    start = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.7, 0.8, 0.02])
    rows = []
    for i in range(frames):
        s = i / (frames - 1)
        q = start + np.array([0.5, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5, 0.0]) * np.sin(np.pi * s)
        link = "panda_link8" if i < frames // 2 else "panda_hand_tcp"
        pose = link_pose(robot, q, link)
        rows.append([i + 1, *pose[:3, 3], *matrix_to_quaternion(pose), link])
    return rows


def test_bake_round_trip_reaches_every_target_and_the_blend_plays_the_same_motion(tmp_path, robots):
    robot = robots("panda")
    rows = _panda_track(robot)
    targets, out = tmp_path / "targets.csv", tmp_path / "shot.blend"
    joints_out, report = tmp_path / "joints.csv", tmp_path / "report.png"
    _write_csv(targets, rows, with_link=True)
    result = _kinema("bake", "panda", "--link", "panda_link8", "--targets", str(targets), "--out", str(out),
                     "--joints-out", str(joints_out), "--report", str(report), "--solver", "numpy",
                     "--start", "panda_joint4=-2.0", "panda_joint6=1.7", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    for key in ("frames", "converged", "max_position_error", "max_rotation_error", "flagged", "seconds"):
        assert key in payload, key
    assert payload["frames"] == 40 and payload["converged"] == 40, payload
    assert payload["max_position_error"] < 1e-4 and payload["max_rotation_error"] < 1e-4
    assert report.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    with joints_out.open() as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["frame", *robot.actuated_joint_names]
    values = np.array([[float(v) for v in row] for row in table[1:]])
    assert values[:, 0].tolist() == list(range(1, 41))
    assert np.all(np.isfinite(values))
    for row, joints in zip(rows, values[:, 1:]):
        pose = link_pose(robot, joints, row[8])
        target = np.eye(4)
        from kinema_nodes.core.model.rotations import quaternion_to_matrix

        target[:3, :3], target[:3, 3] = quaternion_to_matrix(np.array(row[4:8])), row[1:4]
        assert np.abs(pose[:3, 3] - target[:3, 3]).max() < 1e-4, row[0]
        assert rotation_angle_between(pose, target) < 1e-4, row[0]

    played = subprocess.run(
        [sys.executable, "-c", (
            "import bpy, json, kinema_nodes; kinema_nodes.register();"
            f"bpy.ops.wm.open_mainfile(filepath={str(out)!r});"
            "from kinema_nodes.blender import rig; obj = bpy.data.objects['panda']; robot = rig.robot_for_rig(obj); values = []\n"
            "for frame in range(1, 41):\n"
            "    bpy.context.scene.frame_set(frame); values.append(rig.read_joint_values(obj, robot).tolist())\n"
            "print(json.dumps(values), flush=True)\n"
            "import os; os._exit(0)  # bpy 4.5 can hang in its own shutdown"
        )],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert played.returncode == 0, played.stderr
    playback = np.array(json.loads(played.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(playback, values[:, 1:], atol=1e-6)


def test_an_unreachable_stretch_is_flagged_in_the_summary(tmp_path, robots):
    robot = robots("arm6")
    near = link_pose(robot, np.array([0.2, -1.2, 1.2, -0.5, 0.5, 0.0]), robot.tool_point)
    quaternion = matrix_to_quaternion(near)
    rows = []
    for frame in range(1, 21):
        position = near[:3, 3] + (np.array([4.0, 0, 0]) if 8 <= frame <= 12 else 0.0)
        rows.append([frame, *position, *quaternion])
    targets, joints_out = tmp_path / "targets.csv", tmp_path / "joints.csv"
    _write_csv(targets, rows, with_link=False)
    result = _kinema("bake", "arm6", "--targets", str(targets), "--out", str(tmp_path / "a.blend"), "--joints-out",
                     str(joints_out), "--solver", "numpy", "--start", "shoulder_lift_joint=-1.2", "elbow_joint=1.2", "--json")
    assert result.returncode == 3, result.stderr  # ran, but frames did not converge (#12.9)
    payload = json.loads(result.stdout)
    assert payload["status"] == "not_converged"
    assert set(range(8, 13)) <= set(payload["flagged"]) and payload["converged"] <= 15
    assert "nan" not in joints_out.read_text().lower()


def test_demo_writes_the_blend_the_report_and_a_rendered_frame(tmp_path):
    result = _kinema("demo", "--out", str(tmp_path / "demo"), "--solver", "numpy", "--resolution", "160x120", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["converged"] == payload["frames"] > 100
    from pathlib import Path

    for key in ("report", "render"):
        assert Path(payload[key]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", key
    assert Path(payload["out"]).stat().st_size > 0
    assert Path(payload["joints_out"]).read_text().startswith("frame,joint1,")
    assert set(payload["keyed_joints"]) == {f"joint{i}" for i in range(1, 8)}


@pytest.mark.parametrize(
    "content, extra, words",
    [
        ("frame,x,y,z\n1,0,0,0\n", (), "lacks column(s) qw, qx, qy, qz"),
        ("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,0.5,1,0,0,0\n1,0.3,0,0.5,1,0,0,0\n", (), "frame 1 appears twice"),
        ("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,abc,1,0,0,0\n", (), "line 2, column z: 'abc' is not a number"),
        ("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,0.5,0,0,0,0\n", (), "zero length"),
        ("frame,x,y,z,qw,qx,qy,qz,link\n1,0.3,0,0.5,1,0,0,0,no_such_link\n", (), "no_such_link"),
        ("frame,x,y,z,qw,qx,qy,qz\n1,0.3,0,0.5,1,0,0,0\n", ("--link", "nope"), "nope"),
    ],
)
def test_bad_targets_are_one_line_errors(tmp_path, content, extra, words):
    targets = tmp_path / "t.csv"
    targets.write_text(content)
    result = _kinema("bake", "arm6", "--targets", str(targets), "--out", str(tmp_path / "x.blend"), "--solver", "numpy", *extra)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
    assert result.stdout == ""


def test_bake_with_a_preset_builds_the_graph_from_the_preset(tmp_path, robots):
    """`--preset` uses a shipped preset instead of the default Robot -> IK Target -> Solver."""
    robot = robots("arm6")
    start = np.array([0.2, -1.2, 1.2, -0.5, 0.5, 0.0])
    rows = []
    for i in range(12):
        q = start + 0.2 * np.sin(np.pi * i / 11) * np.array([1.0, 0.5, -0.5, 0.5, 1.0, 1.0])
        pose = link_pose(robot, q, robot.tool_point)
        rows.append([i + 1, *pose[:3, 3], *matrix_to_quaternion(pose)])
    targets, out = tmp_path / "targets.csv", tmp_path / "shot.blend"
    _write_csv(targets, rows, with_link=False)
    result = _kinema("bake", "arm6", "--targets", str(targets), "--out", str(out), "--solver", "numpy",
                     "--preset", "reach with the tool", "--start", *[f"{n}={v}" for n, v in zip(robot.actuated_joint_names, start)],
                     "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["frames"] == 12 and payload["converged"] == 12, payload
    bad = _kinema("bake", "arm6", "--targets", str(targets), "--out", str(out), "--preset", "no such preset")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "preset" in bad.stderr
