"""The posture slide of redundant arms (core/solve/_posture.py), on 7-axis arms from
example-robot-data the rest of the suite does not use (Baxter, TIAGo Pro).

Checked independently: the tool pose by yourdfpy's FK, and optimality by finite differences
(a self-motion either way, found by yourdfpy's numerical Jacobian, moves the arm farther from
the posture). Tolerances: agreement between paths 1e-6 rad; tool on target 1e-5 m / rad.
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

ARMS = {
    "baxter": ("baxter_description/urdf/baxter.urdf", "right_gripper_base_link"),
    "tiago_pro": ("tiago_pro_description/robots/tiago_pro.urdf", "arm_left_tool_link"),
}


@pytest.fixture(scope="module", params=sorted(ARMS))
def arm(request):
    folder = example_robots_folder()
    if folder is None:
        pytest.fail("example-robot-data is not installed (README: the test dependencies)")
    relative, link = ARMS[request.param]
    robot = load_robot(str(folder / relative))
    lower = np.where(np.isfinite(robot.lower), robot.lower, -3.0)
    upper = np.where(np.isfinite(robot.upper), robot.upper, 3.0)
    home = np.clip(np.where(robot.is_prismatic, lower, lower + 0.4 * (upper - lower)), robot.lower, robot.upper)
    return robot, link, home, folder / relative


def target_at(robot, link, q):
    pose = link_pose(robot, q, link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3])))


def path(robot, link, home, count=24):
    moving = np.array([name in robot.chain_joint_names(link) and not robot.is_prismatic[i]
                       for i, name in enumerate(robot.actuated_joint_names)])
    phase = np.random.default_rng(3).random(robot.dof) * 6.0
    return [np.clip(np.where(moving, home + 0.25 * np.sin(t + phase), home), robot.lower, robot.upper)
            for t in np.linspace(0.0, 2.0, count)]


def test_forward_and_backward_reach_the_same_pose_and_without_a_posture_they_do_not(arm):
    robot, link, home, _ = arm
    configurations = path(robot, link, home)
    targets = [target_at(robot, link, q) for q in configurations]
    held = robot.held_joints(True)
    worst = {}
    for posture in (tuple(home), None):
        options = SolveOptions(backend="numpy", held_joints=held, posture=posture)
        forward, q = [], configurations[0]
        for target in targets:
            result = solve(robot, target, q, options)
            assert result.converged
            forward.append(result.joints)
            q = result.joints
        backward = [None] * len(targets)
        for i in range(len(targets) - 1, -1, -1):
            result = solve(robot, targets[i], q, options)
            backward[i] = q = result.joints
        worst[posture is not None] = max(float(np.abs(a - b).max()) for a, b in zip(forward, backward))
    assert worst[True] < 1e-6, worst
    assert worst[False] > 1e-4, worst  # the path dependence this removes is real on this arm


def test_the_settled_pose_is_on_target_by_yourdfpy_and_nearest_the_posture_along_its_family(arm):
    import yourdfpy

    robot, link, home, urdf_path = arm
    reference = yourdfpy.URDF.load(str(urdf_path), build_scene_graph=True, load_meshes=False)
    held = robot.held_joints(True)
    goal = path(robot, link, home)[9]
    target = target_at(robot, link, goal)
    settled = solve(robot, target, goal, SolveOptions(backend="numpy", held_joints=held, posture=tuple(home)))
    assert settled.converged
    q = settled.joints

    def fk(values):
        reference.update_cfg(dict(zip(robot.actuated_joint_names, values)))
        return reference.get_transform(link, reference.base_link)

    pose = fk(q)
    wanted = link_pose(robot, goal, link)
    assert np.abs(pose[:3, 3] - wanted[:3, 3]).max() < 1e-5
    assert np.arccos(np.clip((np.trace(pose[:3, :3].T @ wanted[:3, :3]) - 1) / 2, -1, 1)) < 1e-5

    # The self-motion direction by central differences of yourdfpy's FK over the chain joints.
    chain = [robot.joint_index(n) for n in robot.chain_joint_names(link) if n not in held]
    h = 1e-6
    columns = []
    for i in chain:
        plus, minus = q.copy(), q.copy()
        plus[i] += h
        minus[i] -= h
        a, b = fk(plus), fk(minus)
        linear = (a[:3, 3] - b[:3, 3]) / (2 * h)
        skew = (a[:3, :3] - b[:3, :3]) / (2 * h) @ pose[:3, :3].T
        columns.append(np.concatenate([linear, [skew[2, 1], skew[0, 2], skew[1, 0]]]))
    null = np.linalg.svd(np.array(columns).T)[2][-1]
    distance = float(np.sum((q - home)[chain] ** 2))
    plain = SolveOptions(backend="numpy", held_joints=held)
    for sign in (1.0, -1.0):
        moved = q.copy()
        moved[chain] += sign * 0.02 * null
        other = solve(robot, target, moved, plain)  # back onto the family, near the moved pose
        assert other.converged
        assert float(np.sum((other.joints - home)[chain] ** 2)) > distance - 1e-9
