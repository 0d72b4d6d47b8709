"""`kinema-nodes import` as a pipeline runs it: a fresh process, one JSON object on stdout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _run(*args: str):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", "import", *args], capture_output=True, text=True, timeout=300, check=False)


def test_import_saves_a_posed_rig_and_renders_it(tmp_path):
    out, picture = tmp_path / "arm.blend", tmp_path / "arm.png"
    result = _run("arm6", "--out", str(out), "--render", str(picture), "--resolution", "160x120",
                  "--joints", "shoulder_pan_joint=0.5", "elbow_joint=9", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["out"] == str(out.resolve()) and out.stat().st_size > 0
    assert payload["render"] == str(picture.resolve())
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert payload["joints"]["shoulder_pan_joint"] == pytest.approx(0.5)
    assert payload["clamped"] == ["elbow_joint"]
    assert payload["bones"] == 10 and payload["mesh_objects"] > 0

    check = subprocess.run(
        [sys.executable, "-c", (
            "import bpy, json, sys, kinema_nodes; kinema_nodes.register();"
            f"bpy.ops.wm.open_mainfile(filepath={str(out)!r});"
            "from kinema_nodes.blender import rig; obj = bpy.data.objects['arm6'];"
            "print(json.dumps(dict(zip(rig.robot_for_rig(obj).actuated_joint_names, rig.read_joint_values(obj, rig.robot_for_rig(obj)).tolist()))), flush=True);"
            "import os; os._exit(0)  # bpy 4.5 can hang in its own shutdown"
        )],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert check.returncode == 0, check.stderr
    saved = json.loads(check.stdout.strip().splitlines()[-1])
    assert saved["shoulder_pan_joint"] == pytest.approx(0.5, abs=1e-6)
    assert saved["elbow_joint"] == pytest.approx(payload["joints"]["elbow_joint"], abs=1e-6)


@pytest.mark.parametrize(
    "args, words",
    [
        (("no_such_robot.urdf", "--out", "x.blend"), "file not found"),
        (("arm6", "--out", "x.blend", "--joints", "nope=1"), "unknown joint 'nope'"),
        (("arm6", "--out", "x.blend", "--joints", "elbow_joint=abc"), "not a number"),
        (("arm6", "--out", "x.txt"), "must end in .blend"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(tmp_path, args, words):
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "import", *args], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    assert result.returncode == 2
    assert words in result.stderr and result.stderr.count("\n") == 1
    assert result.stdout == ""
