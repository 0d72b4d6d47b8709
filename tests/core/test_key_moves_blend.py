"""A blend radius at the keys (#30 item 3): the tool rounds the corner at a key between two
Linear or Circular moves instead of stopping, as a robot program's blend radius (zone) does.

Pure maths, checked by its promises, not by a copy of the formula:
- no blend: the same pose as core/paths.py's move, every frame (to 1e-12);
- a blend keeps the key frames where they are and the tool within the radius of a blended key
  over the whole window (to 1e-12 m), enters and leaves the window at the blend radius or less;
- outside the windows a Linear segment stays on its line (1e-12 m) at one constant speed (1e-9);
- position and velocity are continuous across the window's edges (finite differences, 1e-6 m/frame);
- the tool never stops at a blended key (its speed stays above half the slower segment's);
- the corner is cut by |v_out - v_in| tau / 4 for two straight segments (1e-12 m).
Then a real solve on example-robot-data's UR5 follows the blended path (tool point by yourdfpy).
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import paths
from kinema_nodes.core.key_moves import KeyedMoves, progress

RAMP = 0.25


def _turn(axis, angle):
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return paths.quaternion_matrix((np.cos(angle / 2), *(np.sin(angle / 2) * axis)))


def _pose(position, rotation=np.eye(3)):
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rotation, position
    return pose


KEY_FRAMES = (1.0, 25.0, 49.0, 61.0)
KEY_POSES = [
    _pose((0.40, -0.20, 0.30), _turn((0, 1, 0), 2.0)),
    _pose((0.50, 0.05, 0.30), _turn((0, 1, 0), 2.3)),
    _pose((0.45, 0.20, 0.45), _turn((1, 0, 1), -2.5)),
    _pose((0.35, 0.25, 0.40), _turn((1, 0, 1), -2.2)),
]
VIA = np.array([0.52, 0.15, 0.36])  # the second segment is an arc through it


def _moves(blend, moves=("LINEAR", "CIRCULAR", "LINEAR")):
    vias = [None, VIA, None]
    return KeyedMoves(KEY_FRAMES, moves, vias, RAMP, blend, lambda i: KEY_POSES[i])


def _frames(step=0.05):
    return np.arange(KEY_FRAMES[0], KEY_FRAMES[-1], step)


def test_progress_with_two_ramps_is_paths_progress_when_they_are_equal_and_runs_through_an_unramped_end():
    for u in np.linspace(0, 1, 101):
        assert progress(u, RAMP, RAMP) == pytest.approx(paths.progress(u, RAMP), abs=1e-12)
    u = np.linspace(0, 1, 4001)
    s = np.array([progress(x, RAMP, 0.0) for x in u])
    assert s[0] == 0.0 and s[-1] == pytest.approx(1.0, abs=1e-12)
    speed = np.diff(s) / np.diff(u)
    assert speed[-1] == pytest.approx(1 / (1 - RAMP / 2), rel=1e-6)  # no stop at the end without a ramp


def test_without_a_blend_every_frame_is_the_segment_move_of_paths():
    moves = _moves(0.0)
    for frame in _frames(0.25):
        i = paths.segment_of(KEY_FRAMES, frame)
        u = (frame - KEY_FRAMES[i]) / (KEY_FRAMES[i + 1] - KEY_FRAMES[i])
        want = paths.move_pose(moves.moves[i], KEY_POSES[i], KEY_POSES[i + 1], u, RAMP, moves.vias[i])
        assert np.max(np.abs(moves.pose(frame) - want)) < 1e-12, frame


def test_a_blend_stays_within_its_radius_and_the_keys_stay_on_their_frames():
    blend = 0.03
    moves = _moves(blend)
    assert moves.blended(1) and moves.blended(2) and not moves.blended(0) and not moves.blended(3)
    for key in (1, 2):
        tau = moves.tau(key)
        assert tau > 0
        at = KEY_FRAMES[key]
        window = np.linspace(at - tau, at + tau, 401)
        far = max(np.linalg.norm(moves.pose(f)[:3, 3] - KEY_POSES[key][:3, 3]) for f in window)
        assert far <= blend + 1e-12, f"key {key}: {far * 1e3:.3f} mm from it in a {blend * 1e3} mm blend"
        ends = [np.linalg.norm(moves.pose(f)[:3, 3] - KEY_POSES[key][:3, 3]) for f in (at - tau, at + tau - 1e-9)]
        assert max(ends) <= blend + 1e-9 and max(ends) >= blend * 0.999  # the window opens at the radius
    # unblended keys are still where the animator put them
    assert np.max(np.abs(moves.pose(KEY_FRAMES[0]) - KEY_POSES[0])) < 1e-12


def test_outside_the_windows_a_linear_segment_is_straight_at_one_speed():
    moves = _moves(0.03)
    a, b = KEY_POSES[0][:3, 3], KEY_POSES[1][:3, 3]
    direction = (b - a) / np.linalg.norm(b - a)
    span = KEY_FRAMES[1] - KEY_FRAMES[0]
    frames = np.arange(KEY_FRAMES[0] + RAMP * span + 0.01, KEY_FRAMES[1] - moves.tau(1), 0.1)
    points = np.array([moves.pose(f)[:3, 3] for f in frames])
    off = np.linalg.norm((points - a) - np.outer((points - a) @ direction, direction), axis=1)
    assert off.max() < 1e-12
    speeds = np.linalg.norm(np.diff(points, axis=0), axis=1) / 0.1
    assert np.allclose(speeds, moves.speed(0), rtol=1e-9)
    # the blended end has no ramp, so the cruise is length / ((1 - ramp / 2) span)
    assert moves.speed(0) == pytest.approx(np.linalg.norm(b - a) / ((1 - RAMP / 2) * span), rel=1e-12)


def test_the_blend_is_smooth_never_stops_and_cuts_the_corner_by_the_parabola():
    moves = _moves(0.03, moves=("LINEAR", "LINEAR", "LINEAR"))
    h = 1e-4
    for key in (1, 2):
        tau, at = moves.tau(key), KEY_FRAMES[key]
        for edge in (at - tau, at + tau):
            before = (moves.pose(edge - h)[:3, 3] - moves.pose(edge - 2 * h)[:3, 3]) / h
            after = (moves.pose(edge + 2 * h)[:3, 3] - moves.pose(edge + h)[:3, 3]) / h
            assert np.linalg.norm(after - before) < 1e-6, f"velocity jumps at the edge of key {key}'s blend"
            gap = np.linalg.norm(moves.pose(edge + 1e-9)[:3, 3] - moves.pose(edge - 1e-9)[:3, 3])
            assert gap < 1e-8
        window = np.linspace(at - tau, at + tau, 201)
        points = np.array([moves.pose(f)[:3, 3] for f in window])
        speed = np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(window)
        assert speed.min() > 0.5 * min(moves.speed(key - 1), moves.speed(key))
        v_in = (KEY_POSES[key][:3, 3] - KEY_POSES[key - 1][:3, 3]) / np.linalg.norm(KEY_POSES[key][:3, 3] - KEY_POSES[key - 1][:3, 3]) * moves.speed(key - 1)
        v_out = (KEY_POSES[key + 1][:3, 3] - KEY_POSES[key][:3, 3]) / np.linalg.norm(KEY_POSES[key + 1][:3, 3] - KEY_POSES[key][:3, 3]) * moves.speed(key)
        cut = np.linalg.norm(moves.pose(at)[:3, 3] - KEY_POSES[key][:3, 3])
        assert cut == pytest.approx(np.linalg.norm(v_out - v_in) * tau / 4, abs=1e-12)
        assert cut > 0


def test_joint_segments_and_the_ends_stop_as_before():
    moves = _moves(0.03, moves=("LINEAR", "JOINT", "LINEAR"))
    assert not moves.blended(1) and not moves.blended(2)
    assert moves.pose(30.0) is None  # a Joint segment: the control's own animation
    assert np.max(np.abs(moves.pose(KEY_FRAMES[1] - 1e-9) - KEY_POSES[1])) < 1e-6  # stops at the key
    assert moves.pose(KEY_FRAMES[-1]) is None and moves.pose(0.0) is None


def test_a_tiny_segment_caps_the_window_at_half_its_cruise():
    frames = (1.0, 25.0, 27.0, 51.0)
    poses = [_pose((0.4, 0.0, 0.3)), _pose((0.5, 0.0, 0.3)), _pose((0.5, 0.02, 0.3)), _pose((0.5, 0.12, 0.3))]
    moves = KeyedMoves(frames, ("LINEAR",) * 3, [None] * 3, RAMP, 0.05, lambda i: poses[i])
    assert moves.tau(1) <= 1.0 + 1e-12 and moves.tau(2) <= 1.0 + 1e-12  # half of the 2-frame segment each
    points = np.array([moves.pose(f)[:3, 3] for f in np.arange(1.0, 51.0, 0.01)])
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    assert steps.max() < 0.01 * max(m for m in (moves.speed(i) for i in range(3))) * 1.01 + 1e-12  # no jumps


def test_a_real_arm_follows_a_blended_corner(robots):
    """UR5 of example-robot-data, solved at every frame through a blended corner: the tool point
    (yourdfpy's FK) within 2e-5 m of the blended pose at every frame, and the corner cut."""
    from independent_fk import IndependentFK, pose_error

    from kinema_nodes.core.graph.program import pose_to_target
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

    robot = robots("ur5")
    fk = IndependentFK(robot)
    link = "wrist_3_link"
    current = np.array([0.3, -1.2, 1.4, -1.0, -1.3, 0.2])
    home = fk.pose(current, link)
    poses = [home.copy() for _ in range(3)]
    poses[1][:3, 3] += (0.0, -0.15, 0.05)
    poses[2][:3, 3] += (0.10, -0.15, 0.12)
    moves = KeyedMoves((1.0, 25.0, 49.0), ("LINEAR", "LINEAR"), [None, None], RAMP, 0.02, lambda i: poses[i])
    options = SolveOptions(backend="numpy", max_iterations=200, budget_ms=2000.0)
    worst = 0.0
    for frame in np.arange(1.0, 49.0, 1.0):
        goal = moves.pose(frame)
        position, wxyz = pose_to_target(goal)
        result = solve(robot, [IKTarget(link, tuple(position), tuple(wxyz))], current, options)
        assert result.converged, f"frame {frame}: {result.reason}"
        current = np.asarray(result.joints)
        worst = max(worst, *pose_error(goal, fk.pose(current, link)))
    assert worst < 2e-5, f"{worst:.2e} off the blended path"
    assert np.linalg.norm(moves.pose(25.0)[:3, 3] - poses[1][:3, 3]) > 1e-3  # the corner is cut
