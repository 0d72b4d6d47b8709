"""PyRoki builds and solves robots where a joint follows one of its own descendants (#29 item 17,
"Topological sort failed").

MJCF joint equalities become mimic joints, each resolved to its root joint. When that root sits
below the follower in the tree (a telescoping stage that follows the inner stage it carries, or
a chain of couplings that ends further down the arm), PyRoki's parser waited for the followed
joint before the follower, and for the follower's subtree before the followed, and failed with
"Topological sort failed"; every solve then fell back to NumPy.

No model among the ones installed here (robosuite, robosuite_models, dm_control,
gymnasium-robotics, metaworld: 160 MJCF files scanned) has that structure, so it is built from
real robots by adding the coupling to their files: robosuite's Panda (joint2 follows joint4, one
coupling) and robosuite's KUKA iiwa (joint_2 follows joint_4, which follows joint_6: a chain,
resolved to joint_6). MuJoCo compiles both as they are.

Each answer is PyRoki's (no fallback, a solver built afresh in an empty cache folder) and is
judged by MuJoCo's own `mj_kinematics` on the edited file, every joint (the followers too) set
in qpos: within 1e-5 m and 1e-5 rad (the solver's tolerance).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between

pytest.importorskip("pyroki")
mujoco = pytest.importorskip("mujoco")

#: robosuite robot -> (equality elements added, follower, the root joint it ends on)
COUPLED = {
    "panda": ('<joint joint1="joint2" joint2="joint4" polycoef="0.1 -0.5 0 0 0"/>', "joint2", "joint4"),
    "iiwa": ('<joint joint1="joint_2" joint2="joint_4" polycoef="0 0.5 0 0 0"/>'
             '<joint joint1="joint_4" joint2="joint_6" polycoef="0 -0.8 0 0 0"/>', "joint_2", "joint_6"),
}


def coupled_model(name: str, folder: Path) -> Path:
    """robosuite's `name` MJCF with `COUPLED[name]`'s equalities, written to `folder` with its
    meshes beside it (linked where the file system allows, else copied)."""
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    source = Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "robots" / name / "robot.xml"
    shutil.copytree(source.parent, folder / name, copy_function=_link_or_copy)
    text = source.read_text()
    assert text.count("</mujoco>") == 1
    text = text.replace("</mujoco>", f"<equality>{COUPLED[name][0]}</equality></mujoco>")
    path = folder / name / f"{name}_coupled.xml"
    path.write_text(text)
    return path


def _link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def mujoco_tool_pose(path: Path, robot, q: np.ndarray, link: str) -> np.ndarray:
    """`link`'s pose by MuJoCo with every movable joint (followers by their couplings) in qpos."""
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    values = dict(zip(robot.actuated_joint_names, q))
    for joint in robot.joints:
        if joint.mimic is not None:
            values[joint.name] = joint.mimic.multiplier * values[joint.mimic.joint] + joint.mimic.offset
    data.qpos[:] = model.qpos0
    for joint_name, value in values.items():
        address = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint_name)]
        data.qpos[address] = model.qpos0[address] + value
    mujoco.mj_kinematics(model, data)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link)
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = data.xmat[body].reshape(3, 3), data.xpos[body]
    return pose


@pytest.mark.parametrize("name", sorted(COUPLED))
def test_pyroki_solves_a_robot_whose_joint_follows_its_descendant(name, tmp_path, monkeypatch):
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve
    from kinema_nodes.core.solve._pyroki_program import _pyroki_robot

    monkeypatch.setenv("KINEMA_CACHE_DIR", str(tmp_path / "cache"))  # this robot's solver is built now
    path = coupled_model(name, tmp_path)
    robot = load_robot(path)
    _, follower, root = COUPLED[name]
    assert robot.joint_by_name[follower].mimic.joint == root
    # the structure: the followed joint is below its follower
    assert follower in {j.name for j in robot.chain(robot.joint_by_name[root].child)}
    assert _pyroki_robot(robot).joints.num_actuated_joints == robot.dof

    link = robot.tool_point
    start = robot.mid_configuration()
    goal_q = start.copy()
    for index, joint_name in enumerate(robot.actuated_joint_names):
        if joint_name in robot.chain_joint_names(link) and joint_name not in robot.held_joints():
            goal_q[index] = np.clip(goal_q[index] + (0.45 if index % 2 else -0.4), robot.lower[index], robot.upper[index])
    goal = mujoco_tool_pose(path, robot, goal_q, link)
    assert np.abs(goal - link_pose(robot, goal_q, link)).max() < 1e-9  # our FK agrees with MuJoCo's on the coupled file
    away = float(np.linalg.norm(mujoco_tool_pose(path, robot, start, link)[:3, 3] - goal[:3, 3]))
    print(f"{name}: the goal is {away:.3f} m from the start")
    assert away > 0.05

    result = solve(robot, IKTarget(link, tuple(goal[:3, 3]), tuple(matrix_to_quaternion(goal)), 1.0, 1.0),
                   start, SolveOptions(backend="pyroki", held_joints=robot.held_joints()))
    assert result.backend == "pyroki" and not result.fallback_reason, result.fallback_reason
    assert result.converged, result.reason
    reached = mujoco_tool_pose(path, robot, result.joints, link)
    position_error = float(np.linalg.norm(reached[:3, 3] - goal[:3, 3]))
    rotation_error = float(rotation_angle_between(reached[:3, :3], goal[:3, :3]))
    print(f"{name}: {position_error:.3g} m, {rotation_error:.3g} rad from the goal by MuJoCo's FK")
    assert position_error <= 1e-5 and rotation_error <= 1e-5
