"""Plan Between Keys (issue #31) on the real Panda (example-robot-data): a keyed move whose straight
joint-space path goes through a box is planned round it, and the path the robot plays is clear on
the real meshes, checked with python-fcl (tests/blender/mesh_check.py), never with our capsules.

Tolerances: the plan keeps a 10 mm margin by the capsule model, checked every `CHECK_STEP`
(0.005 rad) of joint motion; between two such samples a point 1 m from a joint axis moves at most
5 mm, so FCL must find at least 5 mm at every sample here (10 between frames, and the frames).
Bit for bit: np.array_equal, no tolerance.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.collision import Avoid, Box, World, collision_model
from kinema_nodes.core.plan import plan_between_keys
from kinema_nodes.core.shot.limits import check_limits, limits_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "blender"))
from mesh_check import RobotMeshes, mesh_distance  # noqa: E402

pytest.importorskip("ompl", reason="Plan Between Keys needs OMPL (the test extra installs it)")

pytestmark = pytest.mark.core

MARGIN = 0.01
FCL_FLOOR = 0.005
FPS = 24.0
#: Arm out to the left and to the right at hand height 0.38 m: the straight line swings the hand
#: through (0.70, 0, 0.38), inside the box below.
START = np.array([-1.2, 0.5, 0.0, -1.5, 0.0, 2.0, 0.8, 0.02])
GOAL = np.array([1.2, 0.5, 0.0, -1.5, 0.0, 2.0, 0.8, 0.02])
BOX = Box((0.3, 0.3, 0.4), (0.65, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0), "box")


@pytest.fixture(scope="module")
def panda(robots):
    return robots("panda")


@pytest.fixture(scope="module")
def avoid():
    return Avoid(True, World((BOX,)), MARGIN)


@pytest.fixture(scope="module")
def limits(panda):
    return limits_for(panda, max_acceleration=10.0, max_jerk=100.0)


@pytest.fixture(scope="module")
def planned(panda, avoid, limits):
    return plan_between_keys(panda, START, GOAL, 73, FPS, avoid, limits)


def _between_frames(joints: np.ndarray, samples: int = 10) -> np.ndarray:
    """The frames and `samples` configurations evenly between each two (the bake keys LINEAR)."""
    t = np.arange(samples + 1)[:, None] / (samples + 1)
    rows = [a + (b - a) * t for a, b in zip(joints[:-1], joints[1:])]
    return np.concatenate(rows + [joints[-1:]])


def _fcl_box():
    import fcl

    return fcl.CollisionObject(fcl.Box(*BOX.size), fcl.Transform(np.eye(3), np.array(BOX.pose[:3])))


def test_the_straight_path_goes_through_the_box_by_fcl(panda):
    meshes = RobotMeshes(panda)
    straight = START + (GOAL - START) * np.linspace(0, 1, 25)[:, None]
    assert min(mesh_distance(meshes, q, [_fcl_box()])[0] for q in straight) == 0.0


def test_a_move_through_a_box_is_planned_round_it_and_clear_on_the_meshes(panda, planned):
    import fcl

    assert planned.mode == "planned", planned.flag
    assert planned.joints.shape == (73, panda.dof)
    assert np.array_equal(planned.joints[0], START) and np.array_equal(planned.joints[-1], GOAL)
    assert planned.least_clearance_m >= MARGIN
    assert planned.path_length_rad > np.linalg.norm(GOAL - START) - 1e-9
    meshes = RobotMeshes(panda)
    box = _fcl_box()
    model = collision_model(panda)
    checked = {tuple(sorted((model.links[i], model.links[j]))) for i, j in model.self_pairs.tolist()}
    worst = np.inf
    for q in _between_frames(planned.joints):
        distance, link = mesh_distance(meshes, q, [box])
        assert distance >= FCL_FLOOR, f"{link} within {distance * 1000:.1f} mm of the box"
        worst = min(worst, distance)
        objects = meshes.objects(q)
        for a_link, a in objects:
            for b_link, b in objects:
                if a_link < b_link and (a_link, b_link) in checked:
                    assert not fcl.collide(a, b, fcl.CollisionRequest(), fcl.CollisionResult()), (a_link, b_link)
    assert worst < 0.5  # it went round the box, not far away


def test_the_same_inputs_give_the_same_plan_bit_for_bit(panda, avoid, limits, planned):
    again = plan_between_keys(panda, START.copy(), GOAL.copy(), 73, FPS, avoid, limits)
    assert np.array_equal(again.joints, planned.joints)
    assert np.array_equal(again.waypoints, planned.waypoints)


def test_a_clear_segment_is_left_untouched(panda, avoid, limits):
    goal = START + np.r_[0.3, 0, 0, 0, 0, 0, 0, 0]
    keyed = START + (goal - START) * np.linspace(0, 1, 24)[:, None] ** 2  # the animator's ease-in
    plan = plan_between_keys(panda, START, goal, 24, FPS, avoid, limits, per_frame=keyed)
    assert plan.mode == "per-frame"
    assert plan.joints is keyed or np.array_equal(plan.joints, keyed)
    assert plan.flag == ""


def test_the_plan_fills_the_frames_within_the_limits(panda, planned, limits):
    assert planned.flag == ""
    report = check_limits(np.arange(len(planned.joints)), planned.joints, limits, FPS)
    assert not report.flagged, report.table()


def test_a_too_short_segment_is_flagged_with_its_shortest_duration(panda, avoid, limits, planned):
    short = plan_between_keys(panda, START, GOAL, 13, FPS, avoid, limits)
    assert short.mode == "planned"
    assert short.shortest_duration_s is not None and short.shortest_duration_s > 12 / FPS
    assert "too few frames" in short.flag
    # never silently sped up: the frames still end on the keys, and the check flags the speed
    assert np.array_equal(short.joints[-1], GOAL) and len(short.joints) == 13
    assert check_limits(np.arange(13), short.joints, limits, FPS).flagged
    # the shortest duration is enough: the same path timed over that many frames passes
    from kinema_nodes.core.plan import time_path

    frames = int(np.ceil(short.shortest_duration_s * FPS - 1e-9)) + 1
    joints, _ = time_path(short.waypoints, frames, FPS, limits)
    assert not check_limits(np.arange(frames), joints, limits, FPS).flagged


def test_a_plan_made_after_another_is_still_the_same_bit_for_bit(panda, avoid, limits, planned):
    """The seed comes from the segment, not from how many plans ran before it in the process."""
    plan_between_keys(panda, START, GOAL * 0.9, 30, FPS, avoid, limits)
    again = plan_between_keys(panda, START, GOAL, 73, FPS, avoid, limits)
    assert np.array_equal(again.joints, planned.joints)


def test_a_shot_plans_only_its_colliding_segment_and_keeps_every_key(panda, avoid, limits, planned):
    from kinema_nodes.core.plan import plan_shot

    clear_goal = START + np.r_[0.3, 0, 0, 0, 0, 0, 0, 0]
    first = START + (clear_goal - START) * np.linspace(0, 1, 11)[:, None]  # frames 1..11, clear
    second = clear_goal + (GOAL - clear_goal) * np.linspace(0, 1, 73)[:, None]  # frames 11..83, through the box
    joints = np.concatenate([first, second[1:]])
    frames = np.arange(1, len(joints) + 1)
    shot = plan_shot(panda, frames, joints, [1, 11, 83], FPS, avoid, limits)
    modes = [(a, b, p.mode) for a, b, p in shot.segments]
    assert modes == [(1, 11, "per-frame"), (11, 83, "planned")]
    assert np.array_equal(shot.joints[:11], joints[:11])
    for key in (0, 10, 82):
        assert np.array_equal(shot.joints[key], joints[key])
    assert not np.array_equal(shot.joints[11:82], joints[11:82])


# --- fewer checks: a measured clearance certifies the samples near it (core/plan/certify.py) ---

from kinema_nodes.core.collision.distances import measure_pairs  # noqa: E402
from kinema_nodes.core.plan import densify  # noqa: E402
from kinema_nodes.core.plan.between_keys import CHECK_STEP  # noqa: E402
from kinema_nodes.core.plan.certify import Certifier  # noqa: E402

#: A plate 10 mm thick standing across the hand's sweep from START to GOAL (joint 1 alone turns),
#: far from both ends: only samples in the middle of the motion can find it.
PLATE = Box((0.4, 0.01, 0.3), (0.7, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0), "plate")


def test_the_lean_distances_are_measure_pairs_own_rows(panda, avoid):
    certifier = Certifier(panda, avoid)
    rng = np.random.default_rng(7)
    for q in panda.random_configurations(20, rng):
        pairs, _ = measure_pairs(panda, certifier.model, certifier.kin, avoid, q)
        assert np.array_equal(certifier.distances(q), pairs.d)


def test_the_displacement_weights_bound_how_fast_every_capsule_distance_changes(panda, avoid):
    """|c(q + dq) - c(q)| <= weights @ |dq| for every row's capsule distance c, for motions large and small."""
    certifier = Certifier(panda, avoid)
    rng = np.random.default_rng(11)
    for q in panda.random_configurations(40, rng):
        for scale in (0.02, 0.3):
            step = np.zeros(panda.dof)
            step[:7] = rng.normal(0.0, scale, 7)
            other = np.clip(q + step, panda.lower, panda.upper)
            (rows, before), (_, after) = certifier.measure(q), certifier.measure(other)
            assert np.all(rows >= before)  # the rows' distances never below the capsules' own
            bound = certifier.weights @ np.abs(other - q)
            finite = np.isfinite(before) & np.isfinite(after)
            assert np.all(np.abs(after - before)[finite] <= bound[finite] + 1e-9)


def test_a_motion_certified_by_clearance_is_clear_at_every_dense_sample(panda, avoid):
    """Away from the box, a few measurements certify the motion; measuring every sample agrees."""
    certifier = Certifier(panda, avoid)
    a = START.copy()
    b = START + np.r_[-0.6, -0.3, 0.2, 0.3, 0.2, -0.3, 0.4, 0.0]
    samples = densify(np.stack([a, b]), CHECK_STEP)
    certifier.measured = 0
    clear, least = certifier.walk(a, b, CHECK_STEP)
    assert clear and least >= MARGIN
    assert certifier.measured < len(samples) / 5
    assert min(certifier.distance(q) for q in samples) >= MARGIN


def test_a_narrow_obstacle_between_two_clear_states_is_not_skipped(panda):
    avoid = Avoid(True, World((PLATE,)), MARGIN)
    certifier = Certifier(panda, avoid)
    assert certifier.distance(START) > 0.2 and certifier.distance(GOAL) > 0.2
    samples = densify(np.stack([START, GOAL]), CHECK_STEP)
    assert min(certifier.distance(q) for q in samples) < 0.0  # the hand goes through the plate
    certifier.measured = 0
    clear, least = certifier.walk(START, GOAL, CHECK_STEP)
    assert not clear and least < MARGIN
    assert certifier.measured < len(samples)
    # and the coarser step the planner uses still finds a 10 mm plate
    assert not certifier.walk(START, GOAL, 4 * CHECK_STEP)[0]


def test_walk_answers_as_measuring_every_sample_does(panda, avoid):
    """On these motions (the proof is about the geometry, not the checker's search; see certify.py)."""
    certifier = Certifier(panda, avoid)
    rng = np.random.default_rng(5)
    answers = []
    for _ in range(12):
        a = START + np.r_[rng.normal(0.0, 0.6, 7), 0.0]
        b = a + np.r_[rng.normal(0.0, 0.5, 7), 0.0]
        a, b = np.clip(a, panda.lower, panda.upper), np.clip(b, panda.lower, panda.upper)
        dense = min(certifier.distance(q) for q in densify(np.stack([a, b]), CHECK_STEP))
        clear, _ = certifier.walk(a, b, CHECK_STEP)
        assert clear == (dense >= MARGIN)
        answers.append(clear)
    assert True in answers and False in answers  # both kinds of motion were tried


SHELF = World((Box((0.3, 0.8, 0.02), (0.6, 0.0, 0.25, 1.0, 0.0, 0.0, 0.0), "lower board"),
               Box((0.3, 0.8, 0.02), (0.6, 0.0, 0.55, 1.0, 0.0, 0.0, 0.0), "upper board"),
               Box((0.02, 0.8, 0.8), (0.75, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0), "back")), ground=True)


def test_the_compiled_walk_answers_as_the_python_loop(panda):
    """One compiled call per motion (far box rows by their lower bound) against the loop that
    measures sample by sample with every row exact: the same verdict on every motion."""
    avoid = Avoid(True, SHELF, MARGIN)
    compiled, loop = Certifier(panda, avoid), Certifier(panda, avoid)
    loop._meter.walk = lambda *args: None  # the Python loop, where numba is missing
    assert compiled._meter.walk(START, GOAL - START, 10, 1.0, 1.0, np.zeros(1, bool), np.zeros(1), MARGIN) is not None or \
        pytest.skip("numba is not available")
    rng = np.random.default_rng(3)
    verdicts = []
    for a in panda.random_configurations(60, rng):
        b = np.clip(a + np.r_[rng.normal(0.0, 0.8, 7), 0.0], panda.lower, panda.upper)
        (clear, least), (loop_clear, loop_least) = compiled.walk(a, b, CHECK_STEP), loop.walk(a, b, CHECK_STEP)
        assert clear == loop_clear
        assert least >= min(loop_least, 0.15) - 1e-12 or not clear  # a far row's bound stays beyond WALK_FAR
        verdicts.append(clear)
    assert True in verdicts and False in verdicts


def test_a_far_box_row_s_bound_is_never_above_its_distance(panda):
    from kinema_nodes.core.collision import _kernel

    rng = np.random.default_rng(9)
    rot = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    centre, half = np.array([0.3, -0.2, 0.5]), np.array([0.2, 0.05, 0.4])
    point, normal = np.empty(3), np.empty(3)
    for _ in range(500):
        a = centre + rng.normal(0.0, 0.6, 3)
        b = a + rng.normal(0.0, 0.3, 3)
        exact = _kernel._segment_box(a, b, rot, centre, half, point, normal)
        assert _kernel._box_bound(a, b, rot, centre, half) <= exact + 1e-12


def test_a_long_first_path_is_planned_again_and_the_shortest_kept(panda, avoid):
    from kinema_nodes.core.plan import between_keys

    start, goal = START.copy(), GOAL.copy()
    free = between_keys.default_free_joints(panda)
    seed = between_keys.segment_seed(panda, start, goal, free, avoid, 24)

    def plan(tries):
        checker = between_keys._Checker(panda, avoid)
        checker.memo = {}
        saved = between_keys.PLAN_TRIES
        between_keys.PLAN_TRIES = tries
        try:
            return between_keys.plan_path(panda, checker, start, goal, free, seed)
        finally:
            between_keys.PLAN_TRIES = saved

    first, best = plan(1), plan(between_keys.PLAN_TRIES)
    length = lambda path: float(np.linalg.norm(np.diff(path[:, free], axis=0), axis=1).sum())  # noqa: E731
    straight = float(np.linalg.norm(goal[free] - start[free]))
    assert length(first) > between_keys.RETRY_ABOVE * straight  # the first path goes the long way round the box here
    assert length(best) < length(first)
    assert np.array_equal(best, plan(between_keys.PLAN_TRIES))  # the same tries, bit for bit


def test_the_planned_path_is_clear_at_every_dense_sample_measured(panda, avoid, planned):
    certifier = Certifier(panda, avoid)
    assert min(certifier.distance(q) for q in densify(planned.waypoints, CHECK_STEP)) >= MARGIN
    assert min(certifier.distance(q) for q in densify(planned.joints, CHECK_STEP)) >= MARGIN


def test_keyed_in_betweens_that_collide_take_the_straight_line_when_it_is_clear(panda, avoid, limits):
    goal = START + np.r_[0.3, 0, 0, 0, 0, 0, 0, 0]
    keyed = START + (goal - START) * np.linspace(0, 1, 24)[:, None]
    keyed[8:16, 0] = 0.0  # the in-betweens swing the hand into the box
    certifier = Certifier(panda, avoid)
    assert certifier.distance(keyed[12]) < MARGIN
    plan = plan_between_keys(panda, START, goal, 24, FPS, avoid, limits, per_frame=keyed)
    assert plan.mode == "planned", plan.flag
    assert np.array_equal(plan.waypoints, np.stack([START, goal]))
    assert plan.least_clearance_m >= MARGIN
    assert min(certifier.distance(q) for q in densify(plan.joints, CHECK_STEP)) >= MARGIN


def test_the_kernel_warming_compiles_the_walk_a_plan_uses(panda, avoid, limits):
    """`warming.warm_kernel` (run by the solve kernel's build, in its child process or background
    thread) compiles `walk_kernel` for the argument types a plan passes, so a first plan in
    Blender never compiles it on its job's thread."""
    from kinema_nodes.core.collision import _kernel
    from kinema_nodes.core.collision.warming import warm_kernel

    warm_kernel()
    walk = _kernel.compiled_walk()
    if walk is None:
        pytest.skip("numba is not available")
    compiled = len(walk.signatures)
    assert compiled >= 1
    plan = plan_between_keys(panda, START, GOAL, 24, FPS, Avoid(True, SHELF, MARGIN), limits)
    assert plan.mode in ("planned", "per-frame")
    assert len(walk.signatures) == compiled
