"""Class 5: caps on work. PyRoki's compile grows with the robot, so a robot over
MAX_PYROKI_LINKS links or a chain over MAX_PYROKI_CHAIN joints is solved by NumPy with a
message; the model build (and `info`) is linear in the number of links; CSV size, rows,
field length, frames and the budget are capped, each refusal one line.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.solve import IKTarget, SolveOptions, solve, warm_up
from kinema_nodes.core.solve._entry import MAX_PYROKI_CHAIN, MAX_PYROKI_LINKS

from corpus import assert_cli_refusal, assert_one_line, run_cli

LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def snake(links: int, branch_every: int = 0) -> str:
    """A chain of `links` links (revolute joints, 1 cm apart); with `branch_every`, a short
    side link hangs off every n-th link (a wide tree, not only a deep one)."""
    parts = ['<?xml version="1.0"?><robot name="snake"><link name="l0"/>']
    for i in range(1, links):
        parts.append(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
                     f'<origin xyz="0 0 0.01"/><axis xyz="0 {i % 2} {1 - i % 2}"/>{LIMIT}</joint>')
        if branch_every and i % branch_every == 0:
            parts.append(f'<link name="s{i}"/><joint name="k{i}" type="fixed"><parent link="l{i}"/><child link="s{i}"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


@pytest.fixture(scope="module")
def long_chain(tmp_path_factory):
    path = tmp_path_factory.mktemp("snake") / f"snake{MAX_PYROKI_CHAIN + 36}.urdf"
    path.write_text(snake(MAX_PYROKI_CHAIN + 36))
    return load_robot(path)


@pytest.fixture(scope="module")
def many_links(tmp_path_factory):
    path = tmp_path_factory.mktemp("snake") / "wide.urdf"
    path.write_text(snake(40, branch_every=1).replace("</robot>", "".join(
        f'<link name="x{i}"/><joint name="x{i}" type="fixed"><parent link="l0"/><child link="x{i}"/></joint>'
        for i in range(MAX_PYROKI_LINKS)) + "</robot>"))
    return load_robot(path)


def _target(robot, link):
    pose = link_pose(robot, robot.mid_configuration() + 0.01, link)
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    return IKTarget(link, pose[:3, 3], matrix_to_quaternion(pose))


def test_long_chain_falls_back_to_numpy_with_a_message(long_chain):
    tip = long_chain.links[-1]
    result = solve(long_chain, _target(long_chain, tip), long_chain.mid_configuration(), SolveOptions(backend="pyroki", budget_ms=200.0))
    assert result.backend == "numpy"
    assert "chain" in result.fallback_reason and str(MAX_PYROKI_CHAIN) in result.fallback_reason


def test_short_target_on_a_long_robot_keeps_the_chain_rule(long_chain):
    """A target low on the same robot has a short chain: the chain cap does not apply to it
    (the robot is under the link cap), so the answer is not the cap's fallback."""
    result = solve(long_chain, _target(long_chain, "l5"), long_chain.mid_configuration(), SolveOptions(backend="pyroki", budget_ms=200.0))
    assert "chain has" not in (result.fallback_reason or "")


def test_robot_with_many_links_falls_back_to_numpy(many_links):
    result = solve(many_links, _target(many_links, "l39"), many_links.mid_configuration(), SolveOptions(backend="pyroki", budget_ms=200.0))
    assert result.backend == "numpy" and "links" in result.fallback_reason


def test_warm_up_of_a_robot_over_the_cap_compiles_nothing(many_links):
    before = set(sys.modules)
    assert warm_up(many_links, ["l39"], SolveOptions(backend="pyroki")) >= 0.0
    assert not any(name.startswith("pyroki") for name in set(sys.modules) - before)


def test_batched_bake_reason_names_the_cap(many_links):
    from kinema_nodes.core.solve._entry import pyroki_size_reason

    assert "links" in pyroki_size_reason(many_links)
    assert "chain" in pyroki_size_reason(load_robot("arm6"), MAX_PYROKI_CHAIN + 1)
    assert pyroki_size_reason(load_robot("arm6"), 6) is None


def _calls_to_build(path) -> int:
    """Python function calls made by `load_robot` + `info`'s summary: a count, not a time."""
    from kinema_nodes.cli.info import robot_info

    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        robot_info(load_robot(path))
    finally:
        sys.setprofile(None)
    return calls


def test_model_build_and_info_are_linear_in_links(tmp_path):
    small, large = tmp_path / "s.urdf", tmp_path / "l.urdf"
    small.write_text(snake(400))
    large.write_text(snake(1600))
    _calls_to_build(small)  # imports and caches warmed
    ratio = _calls_to_build(large) / _calls_to_build(small)
    assert ratio < 4.0 * 1.25, f"4x the links took {ratio:.1f}x the calls (quadratic would be ~16x)"


def test_info_on_2000_links_answers(tmp_path):
    path = tmp_path / "snake2000.urdf"
    path.write_text(snake(2000))
    result = run_cli("info", path, "--json", timeout=120)
    assert result.returncode == 0, result.stderr[-800:]
    assert '"dof": 1999' in result.stdout


# ---- CSV and budget caps (the `cli` helper's csv_files; asserted here as the issue states them)

def _csv(tmp_path, rows):
    path = tmp_path / "targets.csv"
    path.write_text("frame,x,y,z,qw,qx,qy,qz\n" + "".join(rows))
    return path


def test_csv_over_the_size_cap_is_refused_without_reading(tmp_path):
    from kinema_nodes.cli.csv_files import MAX_CSV_BYTES, read_targets_csv

    path = tmp_path / "targets.csv"
    with open(path, "wb") as handle:
        handle.write(b"frame,x,y,z,qw,qx,qy,qz\n")
        handle.truncate(MAX_CSV_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "targets.csv", "mib")


@pytest.mark.slow  # writes and parses a million rows (~12 s)
def test_csv_over_the_row_cap_is_refused(tmp_path):
    from kinema_nodes.cli import csv_files

    rows = [f"{i},0.4,0.1,0.4,1,0,0,0\n" for i in range(1, csv_files.MAX_CSV_ROWS + 2)]
    path = _csv(tmp_path, rows)
    with pytest.raises(KinemaError) as caught:
        csv_files.read_targets_csv(path)
    assert_one_line(caught.value, "targets.csv", "rows")


def test_csv_field_over_the_length_cap_is_refused(tmp_path):
    from kinema_nodes.cli.csv_files import MAX_FIELD_CHARS, read_targets_csv

    path = _csv(tmp_path, [f"1,0.4,0.1,0.4,1,0,0,{'0' * (MAX_FIELD_CHARS + 10)}\n"])
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "line 2", "qz")


def test_bake_over_the_frame_cap_is_refused(tmp_path):
    from kinema_nodes.cli.csv_files import MAX_BAKE_FRAMES, read_targets_csv

    path = _csv(tmp_path, ["1,0.4,0.1,0.4,1,0,0,0\n", f"{MAX_BAKE_FRAMES + 10},0.4,0.1,0.4,1,0,0,0\n"])
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "frames")


@pytest.mark.parametrize("budget", ["nan", "inf", "-1", "0", "1e9"])
def test_budget_must_be_finite_and_capped(budget):
    result = run_cli("solve", "arm6", "--solver", "numpy", "--budget-ms", budget, "--target", "0.4", "0.1", "0.4", "0", "1", "0", "0")
    assert_cli_refusal(result, "--budget-ms")


def test_budget_option_in_python_is_refused_when_not_finite(robots):
    robot = robots("arm6")
    with pytest.raises(KinemaError) as caught:
        solve(robot, _target(robot, robot.tool_point), robot.mid_configuration(), SolveOptions(backend="numpy", budget_ms=float("nan")))
    assert_one_line(caught.value, "budget")


def test_numpy_answers_on_the_long_chain(long_chain):
    """The fallback is a real solve: NumPy reaches a pose near the start on the 100-joint chain."""
    tip = long_chain.links[-1]
    result = solve(long_chain, _target(long_chain, tip), long_chain.mid_configuration(), SolveOptions(backend="numpy", budget_ms=3000.0))
    reached = link_pose(long_chain, result.joints, tip)
    goal = link_pose(long_chain, long_chain.mid_configuration() + 0.01, tip)
    assert result.converged and np.allclose(reached[:3, 3], goal[:3, 3], atol=1e-4)
