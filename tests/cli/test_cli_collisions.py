"""`kinema-nodes solve --avoid/--obstacles/--margin` as scripts call it: JSON with the clearance,
the blocking pair named, every answer checked by FCL on the URDF's meshes, bad obstacle files
one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

pytest.importorskip("fcl")

WALL = [{"box": {"size": [0.05, 2.0, 2.0], "pose": [0.45, 0, 0.5, 1, 0, 0, 0]}, "name": "wall"}]


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory):
    return os.environ.get("KINEMA_TEST_CACHE_DIR") or str(tmp_path_factory.mktemp("kinema_cli_cache"))


def kinema(cache_folder, *args):
    env = dict(os.environ, KINEMA_CACHE_DIR=cache_folder)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *map(str, args)], check=False, capture_output=True, text=True,
                          env=env, timeout=600)


def fcl_free(robot, obstacles_path, joints: dict) -> bool:
    from fcl_check import FclChecker

    from kinema_nodes.core.collision import load_obstacles

    q = np.array([joints[name] for name in robot.actuated_joint_names])
    return FclChecker(robot, load_obstacles(obstacles_path)).free(q)


def test_goal_behind_a_wall_stops_short_named(robots, cache_folder, tmp_path):
    path = tmp_path / "wall.json"
    path.write_text(json.dumps(WALL))
    run = kinema(cache_folder, "solve", "panda", "--target", 0.65, 0, 0.4, 0, 1, 0, 0, "--solver", "numpy",
                 "--obstacles", path, "--margin", 5, "--json")
    assert run.returncode == 3, run.stderr
    payload = json.loads(run.stdout)
    assert not payload["converged"]
    assert payload["reason"].startswith("blocked by a collision: link ") and payload["reason"].endswith("vs obstacle wall")
    assert payload["colliding"] == [] and payload["min_clearance_m"] >= 0
    assert fcl_free(robots("panda"), path, payload["joints"])


def test_free_goal_converges_with_the_clearance(robots, cache_folder, tmp_path):
    path = tmp_path / "wall.json"
    path.write_text(json.dumps(WALL))
    # a generous budget: the answer, not the machine's load, is under test
    run = kinema(cache_folder, "solve", "panda", "--target", 0.3, 0.2, 0.4, 0, 1, 0, 0, "--solver", "numpy",
                 "--avoid", "all", "--obstacles", path, "--budget-ms", 1000, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    payload = json.loads(run.stdout)
    assert payload["converged"] and payload["reason"] == "converged"
    assert payload["position_error"] <= 1e-5 and payload["rotation_error"] <= 1e-5
    assert payload["min_clearance_m"] >= 0 and payload["colliding"] == []
    assert fcl_free(robots("panda"), path, payload["joints"])
    text = kinema(cache_folder, "solve", "panda", "--target", 0.3, 0.2, 0.4, 0, 1, 0, 0, "--solver", "numpy", "--avoid", "self",
                  "--budget-ms", 1000)
    assert text.returncode == 0 and "clearance " in text.stdout and "(margin 5 mm)" in text.stdout, text.stdout + text.stderr


HOSTILE = {
    "unknown primitive": ('[{"cone": {"radius": 1}}]', "unknown primitive 'cone'"),
    "negative size": ('[{"box": {"size": [1, -0.5, 0.04]}}]', "is negative"),
    "NaN": ('[{"sphere": {"center": [0, NaN, 0], "radius": 0.1}}]', "not valid JSON"),
    "missing mesh": ('[{"mesh": "nowhere.stl"}]', "not found"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_obstacle_files_exit_2(cache_folder, tmp_path, case):
    text, words = HOSTILE[case]
    path = tmp_path / "obstacles.json"
    path.write_text(text)
    run = kinema(cache_folder, "solve", "panda", "--target", 0.3, 0.2, 0.4, 0, 1, 0, 0, "--solver", "numpy", "--obstacles", path)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and words in lines[0], run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["--avoid", "world"], "--avoid world needs --obstacles"),
    (["--avoid", "self", "--margin", "-1"], "--margin must be from 0"),
    (["--margin", "5"], "need --avoid"),
])
def test_bad_avoid_options_exit_2(cache_folder, args, words):
    run = kinema(cache_folder, "solve", "panda", "--target", 0.3, 0.2, 0.4, 0, 1, 0, 0, "--solver", "numpy", *args)
    assert run.returncode == 2 and words in run.stderr, run.stderr


@pytest.mark.slow
def test_bake_with_obstacles_stays_clear(robots, cache_folder, tmp_path):
    """`bake --obstacles`: the wall becomes a Blender object the Solver node avoids; the tool's
    path runs into the wall, so the frames past it stop short (not converged, exit 3), none is
    in collision, and FCL finds every baked frame clear."""
    import csv

    path = tmp_path / "wall.json"
    path.write_text(json.dumps(WALL))
    track = tmp_path / "track.csv"
    track.write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.30,0.0,0.4,0,1,0,0\n6,0.65,0.0,0.4,0,1,0,0\n")
    joints = tmp_path / "joints.csv"
    run = kinema(cache_folder, "bake", "panda", "--targets", track, "--out", tmp_path / "shot.blend", "--solver", "numpy",
                 "--obstacles", path, "--collision-margin", 5, "--joints-out", joints, "--json")
    assert run.returncode == 3, run.stdout[-2000:] + run.stderr[-2000:]
    payload = json.loads(run.stdout)
    assert payload["frames_in_collision"] == [] and payload["min_clearance_m"] >= 0
    assert payload["converged"] < payload["frames"]
    from fcl_check import FclChecker

    from kinema_nodes.core.collision import load_obstacles

    robot = robots("panda")
    checker = FclChecker(robot, load_obstacles(path))
    with open(joints) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == payload["frames"]
    for row in rows:
        q = np.array([float(row[name]) for name in robot.actuated_joint_names])
        assert checker.free(q), row["frame"]

    # the saved .blend shows what the bake avoided, and its Solver avoids it live
    opened = subprocess.run(
        [sys.executable, "-c", (
            "import bpy, json, kinema_nodes; kinema_nodes.register();"
            f"bpy.ops.wm.open_mainfile(filepath={str(tmp_path / 'shot.blend')!r});"
            "(solver,) = [n for t in bpy.data.node_groups for n in t.nodes if n.bl_idname == 'KinemaSolverNode'];"
            "wall = bpy.data.objects['wall'];"
            "print(json.dumps({'collection': solver.obstacles.name if solver.obstacles else None,"
            " 'objects': sorted(o.name for o in solver.obstacles.objects) if solver.obstacles else [],"
            " 'world': solver.avoid_world, 'self': solver.avoid_self, 'margin': solver.margin_mm,"
            " 'shape': wall.kinema_collision_shape, 'dims': list(wall.dimensions), 'at': list(wall.matrix_world.translation)}), flush=True);"
            "import os; os._exit(0)"
        )],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert opened.returncode == 0, opened.stderr[-2000:]
    saved = json.loads(opened.stdout.strip().splitlines()[-1])
    assert saved["collection"] == "Kinema Obstacles" and saved["objects"] == ["wall"]
    assert saved["world"] and saved["self"] and saved["margin"] == pytest.approx(5.0) and saved["shape"] == "BOX"
    assert saved["dims"] == pytest.approx([0.05, 2.0, 2.0], abs=1e-6) and saved["at"] == pytest.approx([0.45, 0, 0.5], abs=1e-6)
