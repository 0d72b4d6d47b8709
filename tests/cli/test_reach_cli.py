"""`kinema-nodes reach` end to end on a real 2-worker Dask LocalCluster (arm6, a coarse grid)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import quaternion_to_matrix
from kinema_nodes.core.reach import load_map

pytest.importorskip("distributed")


def _kinema(*args):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, timeout=600, check=False)


def test_reach_on_two_workers_writes_a_map_whose_witnesses_reach_and_a_picture(tmp_path, robots):
    result = _kinema("reach", "arm6", "--box", "-0.9", "-0.9", "-0.3", "0.9", "0.9", "0.9", "--step", "0.3",
                     "--orientations", "6", "--workers", "2", "--out", str(tmp_path / "m.npz"), "--render", str(tmp_path / "m.png"),
                     "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["workers"] == 2 and payload["poses"] == 6 * 6 * 4 * 6
    reach_map = load_map(tmp_path / "m.npz")
    robot = robots("arm6")
    assert reach_map.reached.sum() == payload["reached_poses"] > 0
    for c, o in zip(*np.nonzero(reach_map.reached)):
        pose = link_pose(robot, reach_map.witness[c, o], reach_map.link)
        assert np.linalg.norm(pose[:3, 3] - reach_map.centres[c]) < 1e-5
        assert np.abs(pose[:3, :3] - quaternion_to_matrix(reach_map.orientations[o])).max() < 1e-5
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, message", [
    (["--out", "m.txt"], "--out 'm.txt' must end in .npz"),
    (["--step", "0"], "--step must be a positive number"),
    (["--orientations", "0"], "--orientations must be at least 1"),
    (["--link", "nope"], "nope"),
])
def test_bad_reach_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = _kinema("reach", "arm6", "--workers", "1", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.strip().count("\n") == 0
