"""`kinema-nodes info` and `fk`, run as a user would (a subprocess), checked against yourdfpy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import yourdfpy

from kinema_nodes.core.model.loading import find_urdf


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, timeout=120)


def test_info_json_lists_joints_links_and_tool_point():
    result = run("info", "arm7", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["tool_point"] == "flange"  # never a finger while a flange or hand exists (#12)
    assert info["links"][0] == "link0" and "flange" in info["links"]
    joints = {j["name"]: j for j in info["joints"]}
    assert joints["joint4"]["type"] == "revolute" and joints["joint4"]["axis"] == [0.0, 0.0, 1.0]
    assert abs(joints["joint4"]["lower"] + 3.0718) < 1e-12 and abs(joints["joint4"]["upper"] + 0.0698) < 1e-12
    assert joints["finger_joint"]["type"] == "prismatic"
    assert joints["finger_joint_mimic"]["mimic"]["joint"] == "finger_joint"


def test_info_shows_continuous_joints_without_limits():
    info = json.loads(run("info", "arm6", "--json").stdout)
    wrist = next(j for j in info["joints"] if j["name"] == "wrist_3_joint")
    assert wrist["type"] == "continuous" and wrist["lower"] is None and wrist["upper"] is None
    text = run("info", "arm6").stdout
    assert "continuous (no limits)" in text and "tool point: tool_tcp" in text


def test_fk_json_matches_yourdfpy():
    values = {"panda_joint1": 0.3, "panda_joint2": -0.5, "panda_joint4": -2.0, "panda_joint6": 1.5, "panda_finger_joint1": 0.02}
    result = run("fk", "panda", "--link", "panda_hand_tcp", "--json", "--joints", *[f"{k}={v}" for k, v in values.items()])
    assert result.returncode == 0, result.stderr
    fk = json.loads(result.stdout)
    reference = yourdfpy.URDF.load(str(find_urdf("panda")), load_meshes=False)
    reference.update_cfg(values)
    expected = reference.get_transform("panda_hand_tcp", "panda_link0")
    np.testing.assert_allclose(fk["matrix"], expected, atol=1e-12)
    np.testing.assert_allclose(fk["position"], expected[:3, 3], atol=1e-12)
    w, x, y, z = fk["quaternion"]
    assert abs(w * w + x * x + y * y + z * z - 1) < 1e-12
    from kinema_nodes.core.model.rotations import quaternion_to_matrix

    np.testing.assert_allclose(quaternion_to_matrix(fk["quaternion"]), expected[:3, :3], atol=1e-12)


def test_fk_unknown_joint_and_link_list_the_valid_names():
    bad_joint = run("fk", "arm6", "--joints", "elbow=1")
    assert bad_joint.returncode != 0 and bad_joint.stderr.count("\n") == 1
    assert "unknown joint 'elbow'" in bad_joint.stderr and "elbow_joint" in bad_joint.stderr
    bad_link = run("fk", "arm6", "--link", "gripper")
    assert bad_link.returncode != 0 and "valid links: world, base_link" in bad_link.stderr
    bad_value = run("fk", "arm6", "--joints", "elbow_joint=abc")
    assert bad_value.returncode != 0 and "'abc' is not a number" in bad_value.stderr


def test_console_script_is_installed():
    exe = shutil.which("kinema-nodes") or str(__import__("pathlib").Path(sys.executable).with_name("kinema-nodes"))
    result = subprocess.run([exe, "info", "rail_arm6"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "rail_joint" in result.stdout
