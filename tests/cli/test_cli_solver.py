"""`kinema-nodes solve` and `kinema-nodes bench` as scripts call them: a subprocess, JSON on
stdout, one-line errors with a non-zero exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion

SOLVE_KEYS = {"joints", "converged", "reason", "position_error", "rotation_error", "iterations", "ms"}
BENCH_KEYS = {"n", "success_rate", "success_rate_practical", "median_ms", "p95_ms", "p99_ms", "max_ms", "first_call_s"}


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory):
    return os.environ.get("KINEMA_TEST_CACHE_DIR") or str(tmp_path_factory.mktemp("kinema_cli_cache"))


def kinema(cache_folder, *args):
    env = dict(os.environ, KINEMA_CACHE_DIR=cache_folder)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], check=False, capture_output=True, text=True, env=env, timeout=600)


def target_args(robot, q, link):
    pose = link_pose(robot, q, link)
    return [f"{v:.12g}" for v in (*pose[:3, 3], *matrix_to_quaternion(pose))]


@pytest.mark.parametrize("solver", ["numpy", "pyroki"])
def test_solve_prints_the_documented_json(robots, cache_folder, solver):
    robot = robots("arm6")
    q = robot.configuration({"shoulder_lift_joint": -1.1, "elbow_joint": 1.2, "wrist_2_joint": -1.4, "wrist_3_joint": 0.5})
    start = ["shoulder_lift_joint=-1.0", "elbow_joint=1.1", "wrist_2_joint=-1.5", "wrist_3_joint=0.4"]
    done = kinema(cache_folder, "solve", "arm6", "--link", "tool_tcp", "--target", *target_args(robot, q, "tool_tcp"),
                  "--start", *start, "--solver", solver, "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert SOLVE_KEYS <= set(payload)
    assert payload["converged"] is True and payload["reason"] == "converged"
    assert payload["backend"] == solver
    assert list(payload["joints"]) == robot.actuated_joint_names
    np.testing.assert_allclose(list(payload["joints"].values()), q, atol=1e-4)


def test_solve_unreachable_target_reports_not_converged(cache_folder):
    done = kinema(cache_folder, "solve", "arm6", "--target", "3", "0", "0.5", "1", "0", "0", "0", "--solver", "numpy", "--json")
    assert done.returncode == 3, done.stderr  # ran, did not converge (#12.9)
    payload = json.loads(done.stdout)
    assert payload["converged"] is False
    assert payload["reason"] in ("out of reach", "blocked by a joint limit", "over budget")
    assert all(np.isfinite(v) for v in payload["joints"].values())


@pytest.mark.parametrize(
    "target, message",
    [
        (["nan", "0", "0.5", "1", "0", "0", "0"], "not finite"),
        (["0.3", "0", "0.5", "0", "0", "0", "0"], "zero length"),
        (["1e12", "0", "0.5", "1", "0", "0", "0"], "refusing targets farther"),
    ],
)
def test_solve_refuses_bad_targets_with_one_line(cache_folder, target, message):
    done = kinema(cache_folder, "solve", "arm6", "--target", *target, "--solver", "numpy", "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_solve_human_text_and_held_joint(cache_folder):
    done = kinema(cache_folder, "solve", "rail_arm6", "--target", "0.5", "0.2", "0.4", "0", "1", "0", "0",
                  "--start", "rail_joint=0.25", "--hold", "rail_joint", "--solver", "numpy")
    assert done.returncode == 0, done.stderr
    assert "rail_joint" in done.stdout and "0.250000" in done.stdout


@pytest.mark.parametrize("mode", ["cold", "tracking"])
def test_bench_prints_the_documented_json(cache_folder, mode):
    done = kinema(cache_folder, "bench", "ur5", "--link", "tool0", "--n", "30", "--seed", "3", "--solver", "numpy", "--mode", mode, "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert BENCH_KEYS <= set(payload)
    assert payload["n"] == 30 and payload["mode"] == mode and payload["backend"] == "numpy"
    assert 0.0 <= payload["success_rate"] <= payload["success_rate_practical"] <= 1.0
    assert payload["median_ms"] <= payload["p95_ms"] <= payload["p99_ms"] <= payload["max_ms"]


def test_bench_refuses_a_bad_link(cache_folder):
    done = kinema(cache_folder, "bench", "ur5", "--link", "nope", "--n", "5", "--solver", "numpy", "--json")
    assert done.returncode == 2
    assert "unknown link 'nope'" in done.stderr
