"""PyRoki compiles in the background for the live path (#13: first solve after Add IK Target).

A live `prepare(..., live=True)` on a robot and link set PyRoki has not compiled answers at once
on the NumPy kernel (converged, backend "numpy", the reason naming the compile) while the
program compiles in a worker thread; a bake or CLI `solve` asking for PyRoki waits for that
same build (one build per key) and answers on PyRoki; once the program is ready the live path
answers on PyRoki, warm-started from the kernel's last answer, on the same branch.

Real PyRoki and a robot no other test compiles (example-robot-data's `ur5_gripper`), its export
file removed first so an earlier run's cannot skip the trace (JAX's own compilation cache may
still shorten the XLA step: that only makes the test faster, the first frames are answered in
milliseconds either way). Answers are checked with yourdfpy's FK.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, prepare, pyroki_available, solve
from kinema_nodes.core.solve import _warming
from kinema_nodes.core.solve._entry import BRANCH_JUMP

ROBOT, LINK = "ur5_gripper", "tool0"
TOL = 1e-5


@pytest.fixture
def not_compiled(robots):
    """This robot's export file removed, so PyRoki has to trace and export it again (the
    first-time compile). The numba kernel's cache stays: the kernel is compiled once per machine."""
    from kinema_nodes.core.solve._pyroki_backend import Layout, clear_solvers, export_path

    robot = robots(ROBOT)
    clear_solvers()
    export_path(Layout(robot, (LINK,))).unlink(missing_ok=True)
    return robot


def _yourdfpy_error(robot, q, link, position, wxyz) -> float:
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(robot.path), load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)
    urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
    pose = urdf.get_transform(link, urdf.base_link)
    from kinema_nodes.core.model.rotations import quaternion_to_matrix, rotation_angle_between

    wanted = np.eye(4)
    wanted[:3, :3] = quaternion_to_matrix(np.asarray(wxyz, dtype=float))
    return max(float(np.linalg.norm(pose[:3, 3] - np.asarray(position))), float(rotation_angle_between(pose, wanted)))


def test_live_answers_on_the_kernel_while_pyroki_compiles_then_on_pyroki_without_a_jump(not_compiled):
    ok, reason = pyroki_available()
    assert ok, reason
    robot = not_compiled
    key = (robot.fingerprint, (LINK,))
    finished = []
    listener = lambda built, ok: finished.append((built, ok))  # noqa: E731
    _warming.add_listener(listener)
    try:
        # A smooth path on one branch (elbow and wrist away from their singularities).
        base = np.clip(np.array([0.3, -1.2, 1.4, -1.6, -1.3, 0.4]), robot.lower, robot.upper)
        path = [base + np.array([0.01, -0.008, 0.012, 0.006, -0.01, 0.015]) * i for i in range(40)]
        goals = [link_pose(robot, q, LINK) for q in path]
        positions = [g[None, :3, 3] for g in goals]
        wxyz = [matrix_to_quaternion(g)[None] for g in goals]

        prepared = prepare(robot, [LINK], SolveOptions(backend="pyroki"), live=True)
        assert _warming.pyroki_state(robot, (LINK,))[0] == "compiling"  # the build was started, not waited for
        current = path[0].copy()
        for i in range(3):  # the first frames: the NumPy kernel, at once
            result = prepared.solve(positions[i], wxyz[i], current)
            assert result.converged and result.backend == "numpy", (result.reason, result.backend)
            assert "PyRoki is compiling for this robot" in (result.fallback_reason or "")
            assert "the NumPy kernel answers meanwhile" in result.fallback_reason
            assert _yourdfpy_error(robot, result.joints, LINK, positions[i][0], wxyz[i][0]) <= TOL + 1e-9
            current = result.joints
        assert not finished, "the compile finished within three kernel frames: the test no longer sees the fallback"

        # A bake / CLI solve asking for PyRoki waits: it joins the build in flight (one build per key).
        target = IKTarget(LINK, tuple(positions[3][0]), tuple(wxyz[3][0]))
        waited = solve(robot, target, current, SolveOptions(backend="pyroki"))
        assert waited.backend == "pyroki" and waited.fallback_reason is None and waited.converged
        assert _yourdfpy_error(robot, waited.joints, LINK, positions[3][0], wxyz[3][0]) <= TOL + 1e-9
        assert [k for k, _ in finished] == [key] and finished[0][1], finished

        # PyRoki ready: an ordinary tracking step is answered by the same compiled frame call as
        # NumPy (#33), and says so; PyRoki answers only the frames that call misses.
        from kinema_nodes.core.solve._entry import TRACKING_NOTE

        previous = current
        for i in range(3, len(path)):
            result = prepared.solve(positions[i], wxyz[i], previous)
            assert result.backend == "numpy" and result.fallback_reason == TRACKING_NOTE and result.converged, (i, result.reason)
            jump = float(np.max(np.abs(result.joints - previous)))
            assert jump <= BRANCH_JUMP, f"frame {i}: a joint moved {jump:.3f} rad after PyRoki became ready"
            np.testing.assert_allclose(result.joints, path[i], atol=1e-3)  # the path's own branch
            expected = solve(robot, IKTarget(LINK, tuple(positions[i][0]), tuple(wxyz[i][0])), previous,
                             SolveOptions(backend="numpy"))
            np.testing.assert_allclose(result.joints, expected.joints, rtol=0, atol=1e-9)  # NumPy's `solve`, to 1e-9
            previous = result.joints
        assert _yourdfpy_error(robot, previous, LINK, positions[-1][0], wxyz[-1][0]) <= TOL + 1e-9
        assert [k for k, _ in finished] == [key]  # still the one build

        # The compiled program dropped from memory (the LRU of compiled solvers does this): a
        # tracking step still answers at once on the kernel, nothing rebuilt on this thread.
        from kinema_nodes.core.solve._pyroki_backend import clear_solvers

        clear_solvers()
        result = prepared.solve(positions[-1], wxyz[-1], previous)
        assert result.converged and result.backend == "numpy" and result.fallback_reason == TRACKING_NOTE
        assert float(np.max(np.abs(result.joints - previous))) <= 1e-4
    finally:
        _warming.remove_listener(listener)


FAILING_BUILD = r"""
import sys
sys.modules["pyroki"] = None  # JAX present, PyRoki not importable: the background build fails
from kinema_nodes.core.solve import _pyroki_child
_pyroki_child.CHILD_SCRIPT = "import sys; sys.exit(2)"  # nor in the child process the first build would run in
import numpy as np
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, prepare, solve, wait_for_pyroki
robot = load_robot("ur5_gripper", check_meshes=False)
q = np.clip(np.array([0.3, -1.2, 1.4, -1.6, -1.3, 0.4]), robot.lower, robot.upper)
pose = link_pose(robot, q, "tool0")
p, w = pose[None, :3, 3], matrix_to_quaternion(pose)[None]
live = prepare(robot, ["tool0"], SolveOptions(backend="pyroki"), live=True)
rows = [live.solve(p, w, q)]
assert wait_for_pyroki(300)
rows.append(live.solve(p, w, q))
rows.append(prepare(robot, ["tool0"], SolveOptions(backend="pyroki"), live=True).solve(p, w, q))
rows.append(solve(robot, IKTarget("tool0", tuple(p[0]), tuple(w[0])), q, SolveOptions(backend="pyroki")))
for r in rows:
    print(r.backend, r.converged, "|", r.fallback_reason)
"""


def test_a_failed_background_build_is_said_once_and_numpy_keeps_answering(tmp_path):
    """PyRoki made unimportable in a fresh process (a fresh cache folder: no export file to load
    instead): the build fails in the worker thread, is said once on stderr, and every later ask,
    live or a bake's waiting solve, gets the same reason at once while NumPy answers."""
    import subprocess
    import sys

    env = dict(os.environ, KINEMA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", FAILING_BUILD], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines()]
    assert len(rows) == 4, done.stdout
    assert all(head == "numpy True" for head, _ in rows), rows
    assert "PyRoki" in rows[0][1]  # compiling, or (if the thread was quick) the failure
    for _, reason in rows[1:]:
        assert reason.startswith("PyRoki could not be imported (") and "pyroki" in reason, reason
    assert done.stderr.count("PyRoki could not be imported") == 1, done.stderr[-3000:]


def test_a_failure_with_many_lines_is_said_in_one_line():
    """JAX's and XLA's errors often run over several lines; the Solver's readout and stderr get one."""
    from kinema_nodes.core.solve._warming import failure_reason

    said = failure_reason(RuntimeError("XLA compilation failed\n  in module jit_solve\n" + "x" * 1000))
    assert "\n" not in said and len(said) <= 350, said
    assert said.startswith("PyRoki failed (RuntimeError: XLA compilation failed in module jit_solve x"), said
    assert failure_reason(ModuleNotFoundError("No module named 'jax'")) == (
        "PyRoki could not be imported (ModuleNotFoundError: No module named 'jax')")
