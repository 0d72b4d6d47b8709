"""Reachability maps checked against independent sources.

- every witness configuration, put through yourdfpy's FK, reaches its (cell, orientation) within
  1e-5 m / 1e-5 rad and lies within the joint limits;
- on UR5 (example-robot-data), cells no orientation reaches lie outside the closed form's
  workspace (bench/ur_analytic.py, Hawkins 2013), and the map agrees with the closed form on
  >= 99 % of the (cell, orientation) pairs;
- the reach bounds (core/reach.py ReachBounds, poses decided out without a solve) never rule
  out a pose the UR5 closed form reaches, and do rule out most of those it does not;
- `solve_poses`, the kernel over many poses, on xArm7: every converged pose checked by yourdfpy,
  a start that is already the answer stops its pose at once, NaN starts are skipped, the plain
  NumPy form agrees with the compiled one, bad numbers are one KinemaError;
- the orientations are spread over SO(3) (no two closer than a bound a random set breaks).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion, quaternion_to_matrix
from kinema_nodes.core.reach import (assemble, chunks, grid_cells, load_map, reach_ball, reach_bounds, reach_chunk,
                                     render_slices, super_fibonacci)
from kinema_nodes.core.solve import problem_for, solve_poses

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ur_analytic import A2, A3, D1, D4, D5, D6, UrOracle  # noqa: E402

yourdfpy = pytest.importorskip("yourdfpy")


def _map(robot, link, box, step, orientations):
    centres, shape = grid_cells(box, step)
    wxyz = super_fibonacci(orientations)
    part = reach_chunk(robot, link, centres, np.arange(len(centres)), wxyz)
    return assemble(robot, link, centres, shape, step, wxyz, [part])


def _rotation_angle(a, b):
    cos = (np.trace(a.T @ b) - 1.0) / 2.0
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


def _check_witnesses_with_yourdfpy(robot, reach_map):
    urdf = yourdfpy.URDF.load(str(robot.path), load_meshes=False, build_scene_graph=True)
    rotations = [quaternion_to_matrix(q) for q in reach_map.orientations]
    checked = 0
    for c, o in zip(*np.nonzero(reach_map.reached)):
        q = reach_map.witness[c, o]
        assert np.isfinite(q).all()
        assert (q >= robot.lower - 1e-12).all() and (q <= robot.upper + 1e-12).all()
        urdf.update_cfg(dict(zip(reach_map.joint_names, q)))
        pose = urdf.get_transform(reach_map.link, urdf.base_link)
        assert np.linalg.norm(pose[:3, 3] - reach_map.centres[c]) < 1e-5
        assert _rotation_angle(pose[:3, :3], rotations[o]) < 1e-5
        checked += 1
    assert not np.isfinite(reach_map.witness[~reach_map.reached]).any()
    return checked


def test_super_fibonacci_orientations_are_unit_and_spread_over_so3():
    q = super_fibonacci(64)
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-12)
    gram = np.abs(q @ q.T)
    np.fill_diagonal(gram, 0.0)
    nearest = 2 * np.degrees(np.arccos(np.clip(gram.max(axis=1), -1, 1)))  # rotation angle to the nearest other
    # 64 random rotations typically have a pair within ~10 deg; the spiral keeps every pair apart
    assert nearest.min() > 20.0


def test_every_arm6_witness_reaches_its_pose_by_yourdfpy_fk(robots):
    robot = robots("arm6")
    reach_map = _map(robot, robot.tool_point, [-0.9, -0.9, -0.5, 0.9, 0.9, 1.1], 0.3, 8)
    assert _check_witnesses_with_yourdfpy(robot, reach_map) > 50
    assert 0 < reach_map.index.max() <= 1.0


@pytest.fixture(scope="module")
def ur5_map(robots):
    robot = robots("ur5")
    return robot, _map(robot, "tool0", [-1.05, -1.05, -0.9, 1.05, 1.05, 1.2], 0.15, 12)


def _ur5_flange_reach(oracle):
    """The closed form's reach from the shoulder: the link lengths plus the wrist offsets (the
    sum bounds every flange position) and the tool0 offset from the DH flange."""
    return abs(A2) + abs(A3) + D4 + D5 + D6 + float(np.linalg.norm(oracle.tool[:3, 3]))


def test_ur5_cells_no_orientation_reaches_are_outside_the_closed_form_workspace(ur5_map):
    """Inside |a2| + |a3| of the shoulder (the link lengths; the sum of the link lengths minus the
    wrist offsets) the closed form reaches every point at some orientation, so an index-0 cell
    there would be a miss; beyond the sum of all lengths and offsets nothing can be reached."""
    robot, reach_map = ur5_map
    oracle = UrOracle(robot, "tool0")
    shoulder = (oracle.base @ np.array([0.0, 0.0, D1, 1.0]))[:3]
    distance = np.linalg.norm(reach_map.centres - shoulder, axis=1)
    assert not reach_map.reached[distance > _ur5_flange_reach(oracle)].any()  # nothing claimed beyond the links
    unreached = reach_map.index == 0
    assert unreached.any() and (~unreached).any()
    assert distance[unreached].min() > abs(A2) + abs(A3), distance[unreached].min()


def _closed_form_reaches(robot, reach_map, cells):
    """(len(cells), N) bool: the closed form has a branch within the limits."""
    oracle = UrOracle(robot, "tool0")
    out = np.zeros((len(cells), len(reach_map.orientations)), dtype=bool)
    for row, c in enumerate(cells):
        for o, wxyz in enumerate(reach_map.orientations):
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = quaternion_to_matrix(wxyz), reach_map.centres[c]
            out[row, o] = any((q >= robot.lower).all() and (q <= robot.upper).all() for q in oracle.solutions(pose))
    return out


@pytest.fixture(scope="module")
def ur5_closed_form(ur5_map):
    """400 sampled cells of the UR5 map and, per orientation, whether the closed form reaches them."""
    robot, reach_map = ur5_map
    cells = np.random.default_rng(7).choice(len(reach_map.centres), size=min(400, len(reach_map.centres)), replace=False)
    return cells, _closed_form_reaches(robot, reach_map, cells)


def test_ur5_map_agrees_with_the_closed_form_on_99_percent_of_poses(ur5_map, ur5_closed_form):
    robot, reach_map = ur5_map
    cells, closed = ur5_closed_form
    agree = closed == reach_map.reached[cells]
    assert agree.mean() >= 0.99, f"{agree.sum()}/{agree.size}"
    assert not (reach_map.reached[cells] & ~closed).any()  # a witness is a solution: never a pose the closed form denies


def test_ur5_reach_bounds_never_rule_out_a_pose_the_closed_form_reaches(ur5_map, ur5_closed_form):
    robot, reach_map = ur5_map
    bounds = reach_bounds(robot, "tool0")
    rotations = np.array([quaternion_to_matrix(q) for q in reach_map.orientations])
    cells, closed = ur5_closed_form
    passes = bounds.poses_in(reach_map.centres[cells], rotations)
    assert closed.any() and not (closed & ~passes).any()
    assert (~passes[~closed]).mean() > 0.8  # most poses out are decided without a solve
    # the searched radii are within the triangle bound and not far under the closed form's reach
    assert bounds.radius <= reach_ball(robot, "tool0")[1]
    assert bounds.radius > _ur5_flange_reach(UrOracle(robot, "tool0")) - 0.25


def test_solve_poses_on_xarm7_many_poses_in_few_kernel_calls(robots):
    robot = robots("xarm7")
    link = robot.tool_point
    urdf = yourdfpy.URDF.load(str(robot.path), load_meshes=False, build_scene_graph=True)
    problem = problem_for(robot, (link,), frozenset())
    rng = np.random.default_rng(3)
    answers = robot.random_configurations(300, rng)
    poses = link_pose(robot, answers, link)
    seeds = robot.random_configurations(4, np.random.default_rng(4))
    starts = np.repeat(seeds[None], 300, axis=0)
    starts[:100, 0] = answers[:100]  # already the answer: done at once
    starts[100:200, 0] = np.nan  # no such start: skipped
    sol = solve_poses(problem, poses[:, :3, 3], poses[:, :3, :3], starts, position_tolerance=1e-6, rotation_tolerance=1e-6)
    assert sol.converged[:100].all() and (sol.starts_run[:100] == 1).all() and (sol.iterations[:100] == 0).all()
    assert (sol.starts_run[100:200] <= 3).all()
    assert sol.converged.mean() > 0.9
    for q, pose in zip(sol.q[sol.converged], poses[sol.converged]):
        assert (q >= robot.lower - 1e-12).all() and (q <= robot.upper + 1e-12).all()
        urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
        found = urdf.get_transform(link, urdf.base_link)
        assert np.linalg.norm(found[:3, 3] - pose[:3, 3]) < 1e-5 and _rotation_angle(found[:3, :3], pose[:3, :3]) < 1e-5
    plain = solve_poses(problem, poses[200:204, :3, 3], poses[200:204, :3, :3], starts[200:204], position_tolerance=1e-6,
                        rotation_tolerance=1e-6, compiled=False)
    assert np.array_equal(plain.converged, sol.converged[200:204]) and np.allclose(plain.q, sol.q[200:204], atol=1e-8)


def _with_nan(array):
    array = array.copy()
    array[0, 1] = np.nan
    return array


@pytest.mark.parametrize("change, message", [
    (lambda p, r, s: (_with_nan(p), r, s), "NaN or infinite"),
    (lambda p, r, s: (p, r * 2.0, s), "not a rotation matrix"),
    (lambda p, r, s: (p, r, s[:, :3]), "starts"),
    (lambda p, r, s: (p + 2e4, r, s), "more than"),
])
def test_solve_poses_refuses_bad_numbers_in_one_line(robots, change, message):
    robot = robots("xarm7")
    problem = problem_for(robot, (robot.tool_point,), frozenset())
    poses = link_pose(robot, robot.random_configurations(3, np.random.default_rng(1)), robot.tool_point)
    positions, rotations, starts = change(poses[:, :3, 3].copy(), poses[:, :3, :3].copy(), robot.mid_configuration()[None])
    with pytest.raises(KinemaError, match=message):
        solve_poses(problem, positions, rotations, starts)


def test_the_map_file_and_picture_round_trip(tmp_path, robots):
    robot = robots("arm6")
    reach_map = _map(robot, robot.tool_point, [-0.6, -0.6, 0.0, 0.6, 0.6, 0.6], 0.3, 4)
    reach_map.save(tmp_path / "m.npz")
    again = load_map(tmp_path / "m.npz")
    assert np.array_equal(again.reached, reach_map.reached)
    assert np.array_equal(np.isnan(again.witness), np.isnan(reach_map.witness))
    assert np.allclose(again.index, reach_map.index)
    render_slices(reach_map, tmp_path / "m.png")
    from PIL import Image

    assert Image.open(tmp_path / "m.png").size[0] > 100
    centre, radius = reach_ball(robot, robot.tool_point)
    assert radius > 0.8
    assert np.allclose(matrix_to_quaternion(quaternion_to_matrix(reach_map.orientations[0])) ** 2,
                       reach_map.orientations[0] ** 2, atol=1e-9)


def test_chunks_are_contiguous_cover_every_cell_and_share_the_work():
    work = np.zeros(1000)
    work[400:600] = 12  # the cells the bounds leave to solve
    parts = chunks(1000, 8, work)
    assert np.array_equal(np.concatenate(parts), np.arange(1000))
    shares = [work[p].sum() for p in parts]
    assert max(shares) - min(shares) <= 2 * 12 + 1  # equal to a cell or two, where equal cell counts give 0 .. 1500
    assert [len(p) for p in chunks(10, 3)] == [4, 3, 3]
