"""PyRoki solves robots whose joints have no speed limit (#29 item 17): robosuite's Kinova Gen3
MJCF (four continuous joints; MJCF gives no speed limits at all) and example-robot-data's
TIAGo++ (``tiago_dual``: eight continuous joints without ``<limit>``). PyRoki's parser refused
both ("has no velocity limits") and every solve fell back to NumPy.

Each solver is built afresh (an empty cache folder), each answer is PyRoki's (no fallback) and
is judged by the robot's own FK: MuJoCo's `mj_kinematics` for the MJCF, yourdfpy for the URDF.
Tolerance: the solver's 1e-5 m / 1e-5 rad, checked at 2e-5.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from independent_fk import mujoco_pose

from kinema_nodes.core.model.example_robots import example_robot
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between

pytest.importorskip("pyroki")


def kinova3_mjcf() -> Path:
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "robots" / "kinova3" / "robot.xml"


def mujoco_fk(robot, q: np.ndarray, link: str) -> np.ndarray:
    pytest.importorskip("mujoco")
    return mujoco_pose(robot.path, robot, q, link)


def yourdfpy_fk(robot, q: np.ndarray, link: str) -> np.ndarray:
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(robot.path), build_scene_graph=True, load_meshes=False)
    urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
    return np.asarray(urdf.get_transform(link, robot.root_link), dtype=float)


def robot_and_fk(name: str):
    if name == "kinova3":
        return load_robot(kinova3_mjcf()), mujoco_fk
    path = example_robot(name)
    if path is None:
        pytest.skip("example-robot-data is not installed")
    return load_robot(path), yourdfpy_fk


@pytest.mark.parametrize("name", ["kinova3", "tiago_dual"])
def test_pyroki_solves_a_robot_whose_continuous_joints_have_no_speed_limit(name, tmp_path, monkeypatch):
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

    monkeypatch.setenv("KINEMA_CACHE_DIR", str(tmp_path))  # PyRoki builds this robot's solver now, not from a cached export

    robot, own_fk = robot_and_fk(name)
    unlimited = [j for j in robot.actuated_joints if j.type == "continuous" and j.velocity == np.inf]
    assert len(unlimited) >= 4
    arm = robot.chain_joint_names(robot.tool_point)
    assert any(robot.joint_by_name[n].type == "continuous" for n in arm) or name == "tiago_dual"

    start = robot.mid_configuration()
    goal_q = start.copy()
    moved = [robot.joint_index(n) for n in arm if n not in robot.held_joints()]
    goal_q[moved] = np.clip(goal_q[moved] + 0.3, robot.lower[moved], robot.upper[moved])
    goal = own_fk(robot, goal_q, robot.tool_point)
    assert np.abs(goal - link_pose(robot, goal_q, robot.tool_point)).max() < 1e-9
    result = solve(robot, IKTarget(robot.tool_point, tuple(goal[:3, 3]), tuple(matrix_to_quaternion(goal)), 1.0, 1.0),
                   start, SolveOptions(backend="pyroki", held_joints=robot.held_joints()))
    assert result.backend == "pyroki" and not result.fallback_reason, result.fallback_reason
    assert result.converged, result.reason
    reached = own_fk(robot, result.joints, robot.tool_point)
    assert np.abs(reached[:3, 3] - goal[:3, 3]).max() < 2e-5
    assert rotation_angle_between(reached[:3, :3], goal[:3, :3]) < 2e-5
