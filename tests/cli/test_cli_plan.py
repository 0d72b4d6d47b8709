"""`kinema-nodes bake --plan --obstacles` as scripts call it (issue #31): the tool is keyed from one
side of a box to the other at a height the box stands above, so the per-frame answers cannot
pass it; the segment is planned, its JSON row says so with its length, clearance, planning time
and flag, and the joints written (what the .blend keys) are clear on the URDF's meshes by FCL at
every frame and 10 samples between frames.

Tolerance: the plan keeps 10 mm by the capsules every 0.005 rad of joint motion, so FCL must find
at least 5 mm (what one such step can move a point 1 m from a joint axis)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

pytest.importorskip("fcl")
pytest.importorskip("ompl")

pytestmark = pytest.mark.cli

BOX = [{"box": {"size": [0.15, 0.15, 0.3], "pose": [0.4, 0, 0.15, 1, 0, 0, 0]}, "name": "box"}]


def kinema(cache_folder, *args):
    env = dict(os.environ, KINEMA_CACHE_DIR=cache_folder)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *map(str, args)], check=False, capture_output=True, text=True,
                          env=env, timeout=900)


@pytest.mark.slow  # a Blender bake of 49 frames with the NumPy solver: about 80 s on one core
def test_bake_plan_goes_round_the_box_and_reports_the_segment(robots, tmp_path):
    from fcl_check import FclChecker

    from kinema_nodes.core.collision import load_obstacles

    obstacles = tmp_path / "box.json"
    obstacles.write_text(json.dumps(BOX))
    track = tmp_path / "track.csv"
    track.write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.4,-0.4,0.25,0,1,0,0\n49,0.4,0.4,0.25,0,1,0,0\n")
    joints_csv = tmp_path / "joints.csv"
    run = kinema(os.environ.get("KINEMA_TEST_CACHE_DIR") or str(tmp_path / "cache"), "bake", "panda", "--targets", track,
                 "--out", tmp_path / "shot.blend", "--solver", "numpy", "--obstacles", obstacles, "--collision-margin", 10,
                 "--plan", "--max-acc", 10, "--max-jerk", 100, "--joints-out", joints_csv, "--json")
    assert run.returncode in (0, 3), run.stderr[-2000:]
    payload = json.loads(run.stdout)
    (segment,) = payload["segments"]
    assert segment["first_frame"] == 1 and segment["last_frame"] == 49
    assert segment["mode"] == "planned", segment
    assert segment["least_clearance_m"] >= 0.01
    assert segment["path_length_rad"] > 0 and segment["planning_s"] > 0
    assert segment["flag"] is None and segment["shortest_duration_s"] is None
    # the report counts the 49 frames as planned, not by their per-frame solve through the box
    assert payload["checks"]["not_converged"] == [] and payload["status"] in ("ok", "flagged"), payload["checks"]

    robot = robots("panda")
    with open(joints_csv) as handle:
        rows = list(csv.DictReader(handle))
    q = np.array([[float(row[name]) for name in robot.actuated_joint_names] for row in rows])
    assert len(q) == 49
    checker = FclChecker(robot, load_obstacles(obstacles))
    t = np.arange(11)[:, None] / 11
    dense = np.concatenate([a + (b - a) * t for a, b in zip(q[:-1], q[1:])] + [q[-1:]])
    for k, sample in enumerate(dense):
        assert checker.free(sample, margin=0.005), f"sample {k} (frame {1 + k / 11:.2f})"
