"""Find Solutions' search (core.stages.configurations on the compiled kernel): every distinct
in-limit configuration, against the UR5's closed form (bench/ur_analytic.py, Hawkins 2013),
checked by yourdfpy's FK on a robot with no closed form, and on a redundant arm every
configuration shown at a family's end truly cannot reach the current swivel."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.stages.configurations import find_configurations, nearest_representative, same_branch
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ur_analytic import UrOracle

NUMPY = SolveOptions(backend="numpy")


def _target(robot, q, link):
    pose = link_pose(robot, np.asarray(q, dtype=float), link)
    return IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))), pose


def _distinct(robot, configurations):
    unique = []
    for q in configurations:
        if not any(same_branch(robot, q, other) for other in unique):
            unique.append(q)
    return unique


def _closed_form_branches(robot, oracle, pose):
    return _distinct(robot, [np.clip(s, robot.lower, robot.upper) for s in oracle.solutions(pose)])


@pytest.mark.parametrize("name, flange", [("ur5", "tool0"), ("arm6", "flange")])
def test_find_solutions_recovers_every_closed_form_branch_of_the_ur5(robots, name, flange):
    robot = robots(name)
    oracle = UrOracle(robot, flange)
    rng = np.random.default_rng(11)
    for q in robot.random_configurations(3, rng):
        target, pose = _target(robot, q, flange)
        found = find_configurations(robot, [target], q, NUMPY)
        truth = _distinct(robot, [np.clip(s, robot.lower, robot.upper) for s in oracle.solutions(pose)])
        assert len(truth) >= 2
        for branch in truth:
            assert any(same_branch(robot, branch, c.joints) for c in found), (q, branch)
        # no duplicates, each one reaches, within limits
        for i, a in enumerate(found):
            assert a.position_error <= 1e-5 and a.rotation_error <= 1e-5
            assert np.all(a.joints >= robot.lower - 1e-12) and np.all(a.joints <= robot.upper + 1e-12)
            assert not any(same_branch(robot, a.joints, b.joints) for b in found[:i])
        assert len(found) == len(truth)


def test_configurations_are_ordered_by_distance_and_the_current_one_is_marked(robots):
    robot = robots("ur5")
    q = np.array([0.4, -1.1, 1.3, -0.9, 1.2, 0.3])
    target, _ = _target(robot, q, "tool0")
    found = find_configurations(robot, [target], q, NUMPY)
    assert found[0].current and sum(c.current for c in found) == 1
    assert np.abs(found[0].joints - q).max() <= 1e-12
    distances = [c.distance for c in found]
    assert distances == sorted(distances)


def test_multi_turn_joints_are_compared_modulo_two_pi(robots):
    robot = robots("ur5")
    q = np.array([0.4, -1.1, 1.3, -0.9, 1.2, 0.3])
    turned = q.copy()
    turned[0] += 2 * np.pi - 1e-3
    assert same_branch(robot, q, turned)
    assert np.abs(nearest_representative(robot, turned, q) - q).max() < 2e-3


def test_unreachable_target_has_no_configurations(robots):
    robot = robots("ur5")
    far = IKTarget("tool0", (3.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0))
    assert find_configurations(robot, [far], robot.zero_configuration(), NUMPY, max_rounds=2) == []


def test_redundant_arm_branches_are_compared_at_the_current_swivel(robots):
    from kinema_nodes.core.stages.swivel import swivel_angle

    robot = robots("arm7")
    q = np.array([0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.02])
    target, _ = _target(robot, q, "flange")
    found = find_configurations(robot, [target], q, NUMPY)
    assert len(found) >= 2 and found[0].current
    held = frozenset({"finger_joint"})
    reference = swivel_angle(robot, "flange", q, held)
    for c in found:
        assert c.joints[-1] == q[-1]  # the finger is held
        assert c.position_error <= 1e-5 and c.rotation_error <= 1e-5
    # every other configuration is a different branch, not the current one swung round
    for c in found[1:]:
        assert not same_branch(robot, c.joints, q)
        swung = abs((swivel_angle(robot, "flange", c.joints, held) - reference + np.pi) % (2 * np.pi) - np.pi)
        assert np.isfinite(swung)


def test_a_branch_beside_the_folded_elbow_is_found(robots):
    """The UR5 with its elbow 0.008 rad from its limit, folded back: the elbow flip lands on the
    limit, and only when it first settles with the elbow held (the shoulder and wrist follow)
    does it reach the eighth branch the closed form has there."""
    from kinema_nodes.core.stages import configurations

    robot = robots("ur5")
    q = np.array([-1.083, -0.0787, 3.1339, -3.5774, 0.5518, 6.1293])
    target, pose = _target(robot, q, "tool0")
    truth = _closed_form_branches(robot, UrOracle(robot, "tool0"), pose)
    assert len(truth) == 8
    found = find_configurations(robot, [target], q, NUMPY)
    assert len(found) == 8 and all(any(same_branch(robot, t, c.joints) for c in found) for t in truth)
    configurations.SETTLE_ITERATIONS, settle = 0, configurations.SETTLE_ITERATIONS
    try:  # the flips unsettled: the case this test is about
        assert len(find_configurations(robot, [target], q, NUMPY)) == 7
    finally:
        configurations.SETTLE_ITERATIONS = settle


def test_every_configuration_reaches_by_yourdfpy_on_an_arm_without_a_closed_form(robots):
    """Unitree Z1 (6 arm joints and a gripper): each configuration puts the tool on the target by
    yourdfpy's own FK (1e-5 m, 1e-5 rad), within limits, the gripper held, no two one branch; and
    a search ten times as wide finds no branch the default one missed."""
    import yourdfpy

    robot = robots("z1")
    link = robot.tool_point
    urdf = yourdfpy.URDF.load(str(robot.path), load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)
    rng = np.random.default_rng(5)
    for q in robot.random_configurations(3, rng):
        target, pose = _target(robot, q, link)
        found = find_configurations(robot, [target], q, NUMPY)
        assert found and found[0].current
        for i, c in enumerate(found):
            urdf.update_cfg(dict(zip(robot.actuated_joint_names, c.joints)))
            reached = urdf.get_transform(link, urdf.base_link)
            assert np.linalg.norm(reached[:3, 3] - pose[:3, 3]) <= 1e-5
            angle = np.arccos(np.clip((np.trace(reached[:3, :3].T @ pose[:3, :3]) - 1) / 2, -1, 1))
            assert angle <= 1e-5 + 1e-7
            assert np.all(c.joints >= robot.lower - 1e-12) and np.all(c.joints <= robot.upper + 1e-12)
            assert c.joints[-1] == q[-1]  # the gripper is held
            assert not any(same_branch(robot, c.joints, other.joints) for other in found[:i])
        wide = find_configurations(robot, [target], q, NUMPY, seeds_per_round=160, max_rounds=8, rng_seed=3)
        for c in wide:
            assert any(same_branch(robot, c.joints, other.joints) for other in found), c.joints


def test_a_family_end_is_shown_only_where_the_swivel_truly_cannot_be_reached(robots):
    """xArm7: every configuration either has the current pose's swivel (1e-3 rad) or is the end
    of a family that Elbow Swivel itself (`set_swivel`, its own descent and the solver's
    polish) cannot bring to that swivel; all reach the tool."""
    from kinema_nodes.core.stages.swivel import set_swivel, swivel_angle

    robot = robots("xarm7")
    link = "link_eef"
    held = robot.held_joints(hold_slides=False)
    options = SolveOptions(backend="numpy", held_joints=held)
    rng = np.random.default_rng(9)
    ends = 0
    for q in robot.random_configurations(4, rng):
        target, _ = _target(robot, q, link)
        reference = float(swivel_angle(robot, link, q, held))
        found = find_configurations(robot, [target], q, NUMPY)
        assert len(found) >= 2
        for c in found:
            assert c.position_error <= 1e-5 and c.rotation_error <= 1e-5
            miss = abs((swivel_angle(robot, link, c.joints, held) - reference + np.pi) % (2 * np.pi) - np.pi)
            if miss > 1e-3:
                ends += 1
                assert set_swivel(robot, [target], c.joints, reference, options, link).saturated
    assert ends >= 1  # the case this test is about did occur


def test_a_wrist_beside_its_singularity_is_one_branch_per_closed_form_branch(robots):
    """bench_ur5's pose 115 (seed 2026): the wrist's middle joint at pi - 0.0007. There the
    tool's 1e-5 leaves the joints around the wrist loose by ~0.035 rad, and two answers of one
    closed-form branch came out 0.068 rad apart: shown twice. Polished toward their exact
    solution they meet, so each closed-form branch is found exactly once (0.05 rad)."""
    from kinema_nodes.core.stages import configurations

    robot = robots("ur5")
    q = np.array([-5.280258384723609, 1.3685602302494404, 1.7373797906990625, -0.9131548880757894, 3.1408578774929374,
                  4.273028706027466])
    target, pose = _target(robot, q, "tool0")
    truth = _closed_form_branches(robot, UrOracle(robot, "tool0"), pose)
    assert len(truth) == 8

    def matches(found):
        return sorted(j for c in found for j, t in enumerate(truth) if same_branch(robot, c.joints, t))

    found = find_configurations(robot, [target], q, NUMPY)
    assert matches(found) == list(range(8)) and len(found) == 8
    assert all(c.position_error <= 1e-5 and c.rotation_error <= 1e-5 for c in found)
    configurations.POLISH_ITERATIONS, polish = 0, configurations.POLISH_ITERATIONS
    try:  # unpolished: the duplicates this test is about (a branch shown more than once)
        assert len(find_configurations(robot, [target], q, NUMPY)) > 8
    finally:
        configurations.POLISH_ITERATIONS = polish


@pytest.mark.parametrize("q", [
    # bench seed 7, pose 34: two closed-form branches 0.08 rad apart beside the shoulder singularity
    [0.9348719783696033, -5.7844710644676285, 1.895413357772454, 5.781421652239397, 4.448609191327037, -5.6459491022474895],
    # seed 11, pose 44: the elbow folded to 2.94 rad; its flip moves the shoulder 2.1 rad past +2 pi, or 4.2 rad back
    [5.0578575330838085, 4.654205682990234, 2.9380816513902053, 1.1809730502496096, 2.179053327171845, -1.5924170445533568],
])
def test_a_flip_beside_a_joint_limit_still_reaches_its_branch(robots, q):
    """Flip seeds start each joint of two turns (the UR's +-2 pi) at its value nearest the middle
    of its range: a flip whose short way to the other branch ran into a limit now finds it, in
    every one of 6 random streams (before: 7 and 8 of 12 streams found all 8 on these poses)."""
    robot = robots("ur5")
    q = np.array(q)
    target, pose = _target(robot, q, "tool0")
    truth = _closed_form_branches(robot, UrOracle(robot, "tool0"), pose)
    assert len(truth) == 8
    for k in range(6):
        found = find_configurations(robot, [target], q, NUMPY, rng_seed=k)
        assert all(any(same_branch(robot, t, c.joints) for c in found) for t in truth), k
        assert len(found) == 8
