"""#29 item 21: from `solve`'s default start (what `kinema-nodes solve` starts from without
--start), a reachable target is found whenever `--cold` finds it.

Why: the warm solve tried one descent from the start and one batch of restarts, then said
"blocked by a joint limit" or "out of reach" for targets the cold search over the joint ranges
found at once (6 of 270 on nine held-out robots with the NumPy solver, up to 2 in 30 on a 6-axis
arm). A warm miss now searches as `--cold` does. Targets are the FK of seeded in-limit
configurations (reachable by construction), and every converged answer is judged by the robot
file's own reader (MuJoCo for MJCF, yourdfpy for URDF), not by our kinematics.

The default run checks both solvers (NumPy and PyRoki, the add-on's default); where PyRoki's
warm descent stalls, NumPy's restarts answer and the result says so (`fallback_reason`).

The budget is generous here (2 s) so the comparison is about the search, not this machine's load.
"""

from __future__ import annotations

import numpy as np
import pytest
from independent_fk import IndependentFK, pose_error

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, prepare, solve
from kinema_nodes.core.solve._entry import PYROKI_STUCK, SEARCHED_ON_MISS

#: Judged by the independent FK: the solver's tolerance is 1e-5 m / 1e-5 rad; this leaves room
#: for the readers' own float differences (MuJoCo's quaternions, yourdfpy's matrices).
POSITION_TOL = 1e-4
ROTATION_TOL = 1e-4
BUDGET_MS = 2000.0


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    """The compiled kernel, as a session a minute old has it (the plain form is the same maths, slower)."""
    from kinema_nodes.core.solve._kernel import kernel_status

    kernel_status(wait=True)


def _targets(robot, n: int, seed: int):
    """(link, start, held, [(q, IKTarget)]): n targets at the FK of seeded in-limit configurations
    (held joints at their start value, as Add IK Target and the CLI hold them)."""
    link = robot.tool_point
    held = robot.held_joints(hold_slides=True)
    start = robot.configuration({})
    qs = robot.random_configurations(n, np.random.default_rng(seed))
    index = [robot.joint_index(name) for name in held]
    qs[:, index] = start[index]
    found = []
    for q in qs:
        pose = link_pose(robot, q, link)
        found.append((q, IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))))
    return link, start, held, found


def _misses(robot, n, seed, backend, cold):
    """The reasons of the misses among the targets (every converged answer judged by the robot
    file's own reader). With `backend="pyroki"`, PyRoki ran: most answers are its own, and a NumPy
    answer is only one of the fallbacks that say so (a stalled descent, or the search on a miss),
    never PyRoki failing to build or import."""
    link, start, held, targets = _targets(robot, n, seed)
    options = SolveOptions(backend=backend, cold=cold, held_joints=held, budget_ms=BUDGET_MS)
    independent = IndependentFK(robot)
    misses = []
    answered_by_pyroki = 0
    for q, target in targets:
        result = solve(robot, target, start, options)
        if backend == "pyroki":
            answered_by_pyroki += result.backend == "pyroki"
            assert result.backend == "pyroki" or result.fallback_reason in (PYROKI_STUCK, SEARCHED_ON_MISS), \
                result.fallback_reason
        if not result.converged:
            misses.append(result.reason)
            continue
        want = independent.pose(q, link)
        got = independent.pose(result.joints, link)
        position, rotation = pose_error(want, got)
        assert position < POSITION_TOL and rotation < ROTATION_TOL, (target, result.reason, position, rotation)
        assert np.all(result.joints >= robot.lower - 1e-12) and np.all(result.joints <= robot.upper + 1e-12)
    if backend == "pyroki":
        assert answered_by_pyroki > len(targets) // 2, (answered_by_pyroki, len(targets))
    return misses


#: A 6-axis arm (robosuite's UR5e, MJCF) and a 6-axis hobby arm (so100, whose default start
#: missed 2 in 30 "blocked by a joint limit"), both held out of the suite before #29; with the
#: NumPy solver and with PyRoki (the add-on's default; its compiled program is the one on disk
#: in the cache folder, built once per machine: about a second a robot here once built).
@pytest.mark.parametrize("name", ["robosuite_ur5e", "so100"])
@pytest.mark.parametrize("backend", ["numpy", pytest.param("pyroki", marks=pytest.mark.jax)])
def test_default_start_never_loses_to_cold(name, backend):
    if backend == "pyroki":
        pytest.importorskip("pyroki")
    robot = load_robot(name, check_meshes=False)
    cold = _misses(robot, 30, 0, backend, cold=True)
    default = _misses(robot, 30, 0, backend, cold=False)
    assert len(default) <= len(cold), (default, cold)
    if not cold:
        assert default == [], default


def test_live_miss_searches_within_its_share():
    """The live rig's miss path searches too (the ordinary tracking step never does: it converges
    first); a reachable target the warm descent misses converges from the default start."""
    robot = load_robot("robosuite_ur5e", check_meshes=False)
    link, start, held, targets = _targets(robot, 30, 0)
    options = SolveOptions(backend="numpy", held_joints=held, budget_ms=BUDGET_MS)
    prepared = prepare(robot, (link,), options, live=True)
    assert prepared.search_share < 1.0  # the frame keeps room within its budget
    independent = IndependentFK(robot)
    for q, target in targets:
        result = prepared.solve([target.position], [target.wxyz], start)
        assert result.converged, result.reason
        position, rotation = pose_error(independent.pose(q, link), independent.pose(result.joints, link))
        assert position < POSITION_TOL and rotation < ROTATION_TOL


def test_no_search_leaves_the_warm_answer():
    """`search_share=0` is the old warm solve (one descent and one batch of restarts): on the
    UR5e's seeded set it misses at least one target that the default (searching) solve finds,
    so the test above is not passing by luck of the targets."""
    robot = load_robot("robosuite_ur5e", check_meshes=False)
    link, start, held, targets = _targets(robot, 30, 0)
    options = SolveOptions(backend="numpy", held_joints=held, budget_ms=BUDGET_MS)
    plain = [solve(robot, target, start, options, search_share=0.0) for _, target in targets]
    searched = [solve(robot, target, start, options) for _, target in targets]
    assert sum(not r.converged for r in plain) >= 1
    assert all(r.converged for r in searched)
    for before, after in zip(plain, searched):
        if before.converged:  # the search runs only on a miss: a hit is the same answer, bit for bit
            assert np.array_equal(before.joints, after.joints)


def test_pyroki_time_before_a_fallback_is_not_charged():
    """The fallback's deadline is measured from when it starts: what PyRoki spent failing (a
    compile that raised, a stalled descent) before it is added back to the budget."""
    from kinema_nodes.core.solve._entry import _budget_options

    options = SolveOptions(budget_ms=33.0)
    assert _budget_options(options, 10.0, 10.0) is options
    moved = _budget_options(options, 10.5, 10.0)  # PyRoki took 500 ms, then failed
    assert moved.budget_ms == pytest.approx(533.0)
    assert _budget_options(options, 10.0, 10.0, 0.5).budget_ms == pytest.approx(16.5)


@pytest.mark.jax
def test_a_stalled_pyroki_descent_falls_back_to_numpy_and_converges():
    """A real PyRoki failure, no mock: on the so100 hobby arm, PyRoki's warm float32 descent from
    the default start stalls on some of the seeded reachable targets (5 of 30 here; at least one
    is required, so the route is exercised). Each of those is answered by NumPy's restarts,
    converged, with `fallback_reason` saying PyRoki stalled, and is judged by yourdfpy's FK of
    the robot's URDF (tolerance 1e-4 m / 1e-4 rad for the solver's 1e-5, as above), in limits.
    The held joints are untouched."""
    pytest.importorskip("pyroki")
    robot = load_robot("so100", check_meshes=False)
    link, start, held, targets = _targets(robot, 30, 0)
    options = SolveOptions(backend="pyroki", held_joints=held, budget_ms=BUDGET_MS)
    independent = IndependentFK(robot)
    held_index = [robot.joint_index(name) for name in held]
    stalled = 0
    for q, target in targets:
        result = solve(robot, target, start, options)
        if result.backend == "pyroki":
            assert result.converged, result.reason
            continue
        assert result.fallback_reason == PYROKI_STUCK, result.fallback_reason
        stalled += 1
        assert result.backend == "numpy" and result.converged, result.reason
        position, rotation = pose_error(independent.pose(q, link), independent.pose(result.joints, link))
        assert position < POSITION_TOL and rotation < ROTATION_TOL, (position, rotation)
        assert np.all(result.joints >= robot.lower - 1e-12) and np.all(result.joints <= robot.upper + 1e-12)
        np.testing.assert_array_equal(result.joints[held_index], start[held_index])
    assert stalled >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ur3_joint_limited_robot", "robosuite_tiago", "robosuite_jaco", "talos_left_arm",
                                  "tiago_no_hand", "robosuite_spot_arm", "b1_z1"])
@pytest.mark.parametrize("backend", ["numpy", "pyroki"])
def test_default_start_never_loses_to_cold_sweep(name, backend):
    robot = load_robot(name, check_meshes=False)
    cold = _misses(robot, 40, 1, backend, cold=True)
    default = _misses(robot, 40, 1, backend, cold=False)
    assert len(default) <= len(cold), (default, cold)
    if not cold:
        assert default == [], default


@pytest.mark.parametrize("name", ["panda", "tiago_no_hand"])
def test_a_search_that_finds_nothing_runs_a_counted_number_of_batches(name):
    """A cold search is counted, not timed (`cold_batches`), so a frame's answer is the same however
    busy the machine: a goal no seed reaches (the tool turned upside down at the base) runs exactly
    the budget's batches, at most the distinct seed blocks (a 300 ms search on the Panda ran 342
    batches by the clock, 278 of them repeats), and two runs end on the same joints, bit for bit.
    The budget's clock is set far beyond the count here, as on an unloaded machine."""
    from kinema_nodes.core.solve import _numpy_backend as numpy_backend
    from kinema_nodes.core.solve._numpy_backend import cold_batches, restart_count

    robot = load_robot(name, check_meshes=False)
    start = robot.zero_configuration()
    pose = link_pose(robot, start, robot.tool_point)
    target = IKTarget(robot.tool_point, tuple(0.3 * pose[:3, 3]), (0.0, 1.0, 0.0, 0.0))
    assert cold_batches(300.0) == len(numpy_backend._SEED_FRACTIONS) == 64 and cold_batches(16.5) == 16
    runs = []
    for _ in range(2):
        before = restart_count()
        result = solve(robot, target, start, SolveOptions(backend="numpy", cold=True, budget_ms=BUDGET_MS))
        assert not result.converged
        runs.append((restart_count() - before, result.joints))
    assert runs[0][0] == runs[1][0] == 64
    assert np.array_equal(runs[0][1], runs[1][1])
