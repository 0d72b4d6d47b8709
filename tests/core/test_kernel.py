"""The compiled LM kernel (core/solve/_kernel.py) on real robots.

- The numba build is the code we read: the same functions run un-jitted give the same bits.
- Without numba the NumPy form (same loop, vectorised leaves) gives the same answers within
  1e-9 through `solve`, cold and warm, on Panda, UR5, Kinova, xArm7 and the two arms of a PR2
  at once (continuous wrist joints, a held torso slide).
- Its Jacobian is the derivative of its own FK (finite differences), mimic fingers included.
- The contract of `solve` holds with numba present and with numba blocked, measured with
  yourdfpy's FK, and both processes answer the same (1e-9; 1e-7 with the posture slide).
- The posture slide runs inside the kernel call: numba, plain NumPy and `prepare` agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.solve import (IKTarget, SolveOptions, check_targets, descend_batch, kernel_status, prepare, problem_for,
                                     solve)
from kinema_nodes.core.solve import _kernel
from kinema_nodes.core.solve._numpy_backend import kernel_chain

CASES = {
    "panda": ("panda_hand",),
    "ur5": ("tool0",),
    "kinova": ("j2s6s200_end_effector",),
    "xarm7": ("link_eef",),
    "pr2": ("r_gripper_tool_frame", "l_gripper_tool_frame"),
}


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    """numba is a main dependency: the compiled kernel must be here (built once per machine)."""
    status = kernel_status(wait=True)
    assert status == ("numba", None), status


def goals_at(robot, q, links) -> list[IKTarget]:
    goals = []
    for link in links:
        pose = link_pose(robot, q, link)
        goals.append(IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose))))
    return goals


def test_the_numba_build_is_the_code_we_read(robots):
    """numba compiles the kernel's own functions; run by the interpreter they give the same
    bits (no fast-math), on converged and stalled descents and with the swivel equation."""
    robot = robots("xarm7")
    links = ("link_eef",)
    problem = problem_for(robot, links, frozenset())
    from kinema_nodes.core.stages.swivel import swivel_links

    rng = np.random.default_rng(11)
    arrays = check_targets(robot, goals_at(robot, robot.random_configurations(1, rng)[0], links))
    seeds = robot.random_configurations(5, rng)
    swivel = swivel_links(robot, "link_eef")
    posture = _kernel.posture_columns(kernel_chain(problem), robot.random_configurations(1, rng)[0])
    for swivel_args in ({}, {"swivel_links": swivel, "swivel": 0.7}, {"posture": posture}):
        settled = np.zeros(len(seeds), dtype=np.bool_)
        compiled = descend_batch(problem, seeds, arrays, 1e-5, 1e-5, 60, compiled=True, settled_out=settled, **swivel_args)
        chain = kernel_chain(problem, swivel_args.get("swivel_links"))
        out = (np.empty_like(seeds), np.empty((len(seeds), 1, 2)), np.zeros(len(seeds)), np.zeros(len(seeds), dtype=np.int64),
               np.zeros(len(seeds), dtype=np.bool_), np.zeros(len(seeds), dtype=np.bool_))
        wanted = np.full(len(seeds), swivel_args.get("swivel", 0.0))
        _kernel._solve_rows(chain.data, chain.ints, chain.floats, seeds, np.zeros(len(seeds), dtype=np.int64), arrays.positions[None],
                            arrays.rotations[None], arrays.weights[None], wanted, 1e-5, 1e-5, 60, _kernel.STALL_WINDOW, False,
                            swivel_args.get("posture", np.zeros(0)), *out)
        np.testing.assert_array_equal(out[0], compiled[0])
        np.testing.assert_array_equal(out[3], compiled[3])
        np.testing.assert_array_equal(out[5], settled)
        assert compiled[3].max() > 1  # real descents, not a no-op
        if "posture" in swivel_args:
            assert settled[compiled[4]].all() and settled.any()  # every converged row slid toward the posture


@pytest.mark.parametrize("name", sorted(CASES))
def test_numba_and_plain_numpy_give_the_same_answers(robots, name):
    """`solve` on the numba kernel and on the plain NumPy form: the same joints within 1e-9,
    cold from mid-limits and warm from a nearby start. (PR2 cold, 14 joints for two hands, is
    left out: its unconverged restarts end wherever their stalled descents stop.)"""
    robot = robots(name)
    links = CASES[name]
    held = frozenset(robot.held_joints(True))
    held_index = [robot.joint_index(n) for n in held]
    rng = np.random.default_rng(5)
    modes = ("warm",) if name == "pr2" else ("cold", "warm")
    compared = 0
    for q in robot.random_configurations(8, rng):
        goals = goals_at(robot, q, links)
        for mode in modes:
            start = robot.mid_configuration() if mode == "cold" else np.clip(q + 0.05 * rng.standard_normal(robot.dof),
                                                                                 robot.lower, robot.upper)
            start[held_index] = q[held_index]  # held joints where the target was made: it stays reachable
            options = SolveOptions(backend="numpy", cold=mode == "cold", held_joints=held, budget_ms=5000)
            fast = solve(robot, goals, start, options)
            with _kernel.plain_numpy():
                plain = solve(robot, goals, start, options)
            assert fast.converged and plain.converged, (mode, fast, plain)
            np.testing.assert_allclose(fast.joints, plain.joints, rtol=0, atol=1e-9)
            assert abs(fast.position_error - plain.position_error) <= 1e-9
            compared += 1
    assert compared == 8 * len(modes)


@pytest.mark.parametrize("name, link", [("panda", "panda_rightfinger"), ("pr2", "l_gripper_tool_frame")])
def test_kernel_jacobian_is_the_derivative_of_its_forward_kinematics(robots, name, link):
    """Central differences of the kernel's own residual against its Jacobian (revolute,
    prismatic and mimic joints: the Panda's right finger follows the left one), and its FK
    against core.model.kinematics."""
    robot = robots(name)
    problem = problem_for(robot, (link,), frozenset())
    chain = kernel_chain(problem)
    rng = np.random.default_rng(2)
    q = robot.random_configurations(1, rng)[0]
    # at the target the rotation error's derivative is exactly minus the angular velocity
    arrays = check_targets(robot, goals_at(robot, q, (link,)))
    k = len(problem.free)

    def evaluate(x):
        errors, r, jac = np.empty((1, 2)), np.empty(6), np.empty((6, k))
        _kernel._evaluate(chain.data, x, arrays.positions[0][None], arrays.rotations[0][None], arrays.weights[0][None], 0.0,
                          errors, r, jac, _kernel._workspace(np.empty(_kernel.workspace_size(len(chain.parent))), len(chain.parent)))
        return errors, r, jac

    errors, r, jac = evaluate(q)
    far = robot.random_configurations(1, rng)[0]
    reference, _, _ = problem.residual(far[None], arrays.rotations, arrays.positions, with_jacobian=False)
    np.testing.assert_allclose(evaluate(far)[0], reference[0], atol=1e-12)
    h = 1e-6
    numeric = np.empty((6, k))
    for c, joint in enumerate(problem.free):
        up, down = q.copy(), q.copy()
        up[joint] += h
        down[joint] -= h
        numeric[:, c] = -(evaluate(up)[1] - evaluate(down)[1]) / (2 * h)  # residual = target - current
    np.testing.assert_allclose(jac, numeric, atol=1e-6)


def test_the_compiled_kernel_lives_in_the_kinema_cache_folder():
    from kinema_nodes.core.cache_folder import signed_folder

    folder = signed_folder("numba")
    assert any(folder.rglob("*.nbi")), f"no numba cache index under {folder}"


CONTRACT_SCRIPT = textwrap.dedent("""
    import json, sys
    if sys.argv[1] == "blocked":
        sys.modules["numba"] = None  # `import numba` now raises ImportError
    import numpy as np
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.rotations import matrix_to_quaternion
    from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, solve

    out = {"status": list(kernel_status(wait=True))}
    kinova = load_robot("kinova")
    link = "j2s6s200_end_effector"
    rng = np.random.default_rng(7)
    rows = []
    for q in kinova.random_configurations(6, rng):
        pose = link_pose(kinova, q, link)
        target = IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))
        start = q + rng.uniform(-0.2, 0.2, kinova.dof)
        start[0] += 4 * np.pi  # a multi-turn joint two turns away: the answer stays near the start
        result = solve(kinova, target, start, SolveOptions(backend="numpy", budget_ms=60_000))
        rows.append({"start": start.tolist(), "target": [target.position, target.wxyz], "joints": result.joints.tolist(),
                     "converged": result.converged, "errors": [result.position_error, result.rotation_error],
                     "backend": result.backend})
    out["kinova"] = rows
    panda = load_robot("panda")
    start = panda.mid_configuration()
    far = IKTarget("panda_hand", (3.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0))
    # a budget no run reaches, so both processes stop where the algorithm stops, not where the clock does
    result = solve(panda, far, start, SolveOptions(backend="numpy", held_joints=frozenset({"panda_joint1"}), budget_ms=60_000))
    out["unreachable"] = {"start": start.tolist(), "joints": result.joints.tolist(), "converged": result.converged,
                          "reason": result.reason, "errors": [result.position_error, result.rotation_error]}
    xarm = load_robot("xarm7")  # redundant: the posture slide runs in the kernel (or its NumPy form)
    posture = tuple(xarm.mid_configuration())
    rows = []
    for q in xarm.random_configurations(3, rng):
        pose = link_pose(xarm, q, "link_eef")
        target = IKTarget("link_eef", tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))
        result = solve(xarm, target, q + 0.05, SolveOptions(backend="numpy", budget_ms=60_000, posture=posture))
        rows.append({"joints": result.joints.tolist(), "converged": result.converged,
                     "errors": [result.position_error, result.rotation_error]})
    out["posture"] = rows
    print(json.dumps(out))
""")


def _run_contract(mode: str) -> dict:
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", CONTRACT_SCRIPT, mode], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_solve_contract_holds_with_numba_and_with_numba_blocked(robots):
    """Limits, multi-turn unwrap, held joints to the bit, float64 errors (yourdfpy's FK), no
    NaN for an unreachable target; numba present and numba blocked answer the same to 1e-9."""
    import yourdfpy

    with_numba, blocked = _run_contract("present"), _run_contract("blocked")
    assert with_numba["status"] == ["numba", None]
    assert blocked["status"][0] == "numpy" and "numba could not be used" in blocked["status"][1]
    kinova = robots("kinova")
    link = "j2s6s200_end_effector"
    urdf = yourdfpy.URDF.load(str(kinova.path), load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)
    continuous = kinova.is_continuous
    assert continuous[0]
    for run in (with_numba, blocked):
        for row in run["kinova"]:
            q, start = np.array(row["joints"]), np.array(row["start"])
            assert row["converged"] and row["backend"] == "numpy"
            assert np.all(np.isfinite(q)) and np.all(q >= kinova.lower) and np.all(q <= kinova.upper)
            # the multi-turn joint is unwrapped to the value nearest the start (two turns up)
            assert abs(q[0] - start[0]) <= np.pi + 1e-9
            urdf.update_cfg(dict(zip(kinova.actuated_joint_names, q)))
            pose = urdf.get_transform(link, urdf.base_link)
            position, wxyz = row["target"]
            assert np.linalg.norm(pose[:3, 3] - np.array(position)) <= 1e-5 + 1e-9
            assert row["errors"][0] == pytest.approx(float(np.linalg.norm(pose[:3, 3] - np.array(position))), abs=1e-9)
        far = run["unreachable"]
        q, start = np.array(far["joints"]), np.array(far["start"])
        assert not far["converged"] and far["reason"] in ("out of reach", "blocked by a joint limit")
        assert np.all(np.isfinite(q)) and np.isfinite(far["errors"]).all()
        assert q[0] == start[0]  # held: to the bit
    for a, b in zip(with_numba["kinova"], blocked["kinova"]):
        np.testing.assert_allclose(a["joints"], b["joints"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(with_numba["unreachable"]["joints"], blocked["unreachable"]["joints"], rtol=0, atol=1e-9)
    xarm = robots("xarm7")
    for a, b in zip(with_numba["posture"], blocked["posture"]):
        for row in (a, b):
            q = np.array(row["joints"])
            assert row["converged"] and max(row["errors"]) <= 1e-5, row
            assert np.all(np.isfinite(q)) and np.all(q >= xarm.lower) and np.all(q <= xarm.upper)
        # the slide stops once no joint moves 1e-8 in a step; the two forms round differently on the way
        np.testing.assert_allclose(a["joints"], b["joints"], rtol=0, atol=1e-7)


@pytest.mark.parametrize("name", ["panda", "pr2"])
def test_a_prepared_solve_answers_as_solve_does(robots, name):
    """`prepare(...).solve(positions, wxyz, start)` (checks done once, arrays to the kernel and
    back) gives `solve`'s answer along a tracked path, two hands at once on the PR2, and
    refuses bad numbers with `solve`'s message."""
    robot = robots(name)
    links = CASES[name]
    held = frozenset(robot.held_joints(True))
    options = SolveOptions(backend="numpy", held_joints=held, budget_ms=5000)
    prepared = prepare(robot, links, options)
    rng = np.random.default_rng(9)
    q = robot.random_configurations(1, rng)[0]
    current = q.copy()
    for step in range(20):
        q = np.clip(q + 0.01 * rng.standard_normal(robot.dof), robot.lower, robot.upper)
        q[[robot.joint_index(n) for n in held]] = current[[robot.joint_index(n) for n in held]]
        goals = goals_at(robot, q, links)
        positions = np.array([g.position for g in goals])
        wxyz = np.array([g.wxyz for g in goals])
        fast = prepared.solve(positions, wxyz, current)
        general = solve(robot, goals, current, options)
        assert fast.converged and general.converged
        np.testing.assert_allclose(fast.joints, general.joints, rtol=0, atol=1e-9)
        assert fast.position_error == pytest.approx(general.position_error, abs=1e-9)
        current = fast.joints
    bad = positions.copy()
    bad[0, 1] = np.nan
    with pytest.raises(KinemaError, match="not finite"):
        prepared.solve(bad, wxyz, current)


@pytest.mark.parametrize("name", ["panda", "xarm7"])
def test_the_posture_slide_answers_alike_on_numba_plain_numpy_and_prepare(robots, name):
    """A redundant 7-joint arm with a posture along a tracked path: the slide runs inside the
    kernel call, and `solve` on numba, `solve` on the plain NumPy form and `prepare(...).solve`
    with the frame's posture give the same joints (1e-9 between numba paths, 1e-7 against the
    plain form: the slide stops once no joint moves 1e-8 in a step, and the two forms round
    differently on the way)."""
    robot = robots(name)
    links = CASES[name]
    held = frozenset(robot.held_joints(True))
    rng = np.random.default_rng(21)
    q = robot.random_configurations(1, rng)[0]
    posture = np.clip(q + 0.3 * rng.standard_normal(robot.dof), robot.lower, robot.upper)
    options = SolveOptions(backend="numpy", held_joints=held, budget_ms=5000, posture=tuple(posture))
    prepared = prepare(robot, links, SolveOptions(backend="numpy", held_joints=held, budget_ms=5000))
    current = q.copy()
    moved = 0.0
    for step in range(12):
        q = np.clip(q + 0.02 * rng.standard_normal(robot.dof), robot.lower, robot.upper)
        goals = goals_at(robot, q, links)
        general = solve(robot, goals, current, options)
        fast = prepared.solve(np.array([g.position for g in goals]), np.array([g.wxyz for g in goals]), current, posture)
        with _kernel.plain_numpy():
            plain = solve(robot, goals, current, options)
        assert general.converged and fast.converged and plain.converged
        np.testing.assert_allclose(fast.joints, general.joints, rtol=0, atol=1e-9)
        np.testing.assert_allclose(plain.joints, general.joints, rtol=0, atol=1e-7)
        # without the posture the warm descent stops elsewhere along the family
        free = solve(robot, goals, current, replace(options, posture=None))
        moved = max(moved, float(np.abs(free.joints - general.joints).max()))
        current = general.joints
    assert moved > 1e-3, moved


def test_a_warm_pyroki_solve_is_one_jitted_call_and_one_host_transfer(robots):
    """The PyRoki backend's single solve: one call of its compiled program per warm solve that
    converges (the inputs packed into one float32 vector, the answer back as one), never a
    retrace for a new target, and the float64 contract after it on the kernel, not in JAX.
    Counted on the real compiled program (a counting pass-through around its call)."""
    from kinema_nodes.core.solve._pyroki_backend import solver_for

    robot = robots("ur5")
    link = "tool0"
    options = SolveOptions(backend="pyroki", budget_ms=60_000)
    rng = np.random.default_rng(4)
    q = robot.random_configurations(1, rng)[0]
    first = solve(robot, goals_at(robot, q, (link,)), q, options)  # compiles (or loads) the program
    assert first.backend == "pyroki", first.fallback_reason
    compiled = solver_for(robot, (link,))
    real = compiled._call
    calls = []

    def counted(vector):
        calls.append(type(vector))
        return real(vector)

    compiled._call = counted
    try:
        current = first.joints
        for _ in range(8):
            q = np.clip(q + 0.01 * rng.standard_normal(robot.dof), robot.lower, robot.upper)
            before = len(calls)
            result = solve(robot, goals_at(robot, q, (link,)), current, options)
            assert result.converged and result.backend == "pyroki"
            assert len(calls) - before == 1, "a warm converged PyRoki solve is one call of its compiled program"
            current = result.joints
    finally:
        compiled._call = real
    assert all(kind is np.ndarray for kind in calls)  # one host vector in (one transfer), no device round trips between
    assert real._cache_size() == 1  # one trace for every target: the jit never retraced
