"""Freedom about the tool axis (core/tool_axis.py) on the Panda, a real 7-axis arm whose last
joint has ±166°: a path whose tool twists 240° about its own axis while moving 20 cm is more
than joint 7 has left from the start pose (about 120°), so with the orientation fixed the preview
finds samples near the limit (and the solver flips branch to get round it); with ±180° of
freedom every sample is reachable, the turn changes by at most the 10° step a sample (continuous),
no joint steps over 0.5 rad, and the tool still sits on the path with its Z axis where the path
puts it (measured with yourdfpy, not our FK; 1e-4 m, 1e-4 rad: the solver's 1e-5 plus slack)."""

from __future__ import annotations

import numpy as np
import pytest

from independent_fk import IndependentFK
from kinema_nodes.core import reach_preview, tool_axis
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.solve import SolveOptions

START = {"panda_joint2": -0.4, "panda_joint4": -2.0, "panda_joint6": 1.7, "panda_joint7": 0.8}


def _twisting_path(robot, twist_deg: float, samples: int = 60):
    q0 = robot.configuration(START, base=robot.mid_configuration())
    p0 = link_pose(robot, q0, robot.tool_point)
    goals = []
    for i in range(samples):
        s = i / (samples - 1)
        goal = tool_axis.turned(p0, np.radians(twist_deg) * s)
        goal[:3, 3] = p0[:3, 3] + [0.0, 0.2 * s, 0.0]
        goals.append(goal)
    return q0, goals


def test_a_twist_the_fixed_orientation_cannot_follow_completes_with_freedom_about_the_tool_axis(robots):
    robot = robots("panda")
    link = robot.tool_point
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True), budget_ms=60_000.0)
    q0, goals = _twisting_path(robot, 240.0)
    fixed = reach_preview.preview(robot, link, goals, q0, options)
    assert reach_preview.counts(fixed)["reachable"] < len(goals), reach_preview.counts(fixed)

    choices = tool_axis.choose_turns(robot, link, goals, q0, options, np.radians(180.0))
    assert [c.verdict for c in choices] == ["reachable"] * len(goals)
    angles = np.array([c.angle for c in choices])
    assert np.all(np.abs(angles) <= np.pi + 1e-9)
    assert np.abs(np.diff(angles)).max() <= np.radians(10.0) + 1e-9  # a step a sample at most (rad)
    joints = np.array([c.joints for c in choices])
    assert np.abs(np.diff(joints, axis=0)).max() <= tool_axis.MAX_JOINT_STEP
    fk = IndependentFK(robot)
    for goal, choice in zip(goals, choices):
        pose = fk.pose(choice.joints, link)
        assert np.linalg.norm(pose[:3, 3] - goal[:3, 3]) <= 1e-4
        assert np.arccos(np.clip(np.dot(pose[:3, 2], goal[:3, 2]), -1, 1)) <= 1e-4  # the tool axis is the path's
        want = tool_axis.turned(goal, choice.angle)
        assert np.arccos(np.clip((np.trace(pose[:3, :3].T @ want[:3, :3]) - 1) / 2, -1, 1)) <= 1e-4


def test_no_freedom_keeps_the_orientation_as_given(robots):
    robot = robots("panda")
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True))
    q0, goals = _twisting_path(robot, 30.0, samples=5)
    choices = tool_axis.choose_turns(robot, robot.tool_point, goals, q0, options, 0.0)
    assert [c.angle for c in choices] == [0.0] * 5


def test_turned_turns_about_the_pose_s_own_z_and_keeps_its_position():
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = q * np.sign(np.linalg.det(q)), [0.3, -0.2, 0.5]
    moved = tool_axis.turned(pose, 0.7)
    np.testing.assert_allclose(moved[:3, 3], pose[:3, 3], atol=1e-15)
    np.testing.assert_allclose(moved[:3, 2], pose[:3, 2], atol=1e-12)
    assert abs(np.dot(moved[:3, 0], pose[:3, 0]) - np.cos(0.7)) < 1e-12


@pytest.mark.slow
def test_held_back_paths_the_fixed_orientation_cannot_complete_are_completed_with_freedom():
    """bench/bench_tool_axis.py's measure, small: 40 seeded paths on the Panda (7 axes), the ones
    the fixed orientation cannot complete (a sample unreachable or near a singularity, or a joint
    step over 0.5 rad) kept; with ±180° about the tool axis at least 80 % of them complete (the
    #30 target), and none of those steps a joint over 0.5 rad. Seed 31: not the bench's seed."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import bench_tool_axis

    row = bench_tool_axis.run("panda", 40, 31)
    assert row["kept"] >= 3, row  # the set is not empty: the fixed orientation does fail on some
    assert row["completed"] >= 0.8 * row["kept"], row
