"""core/paths.path_legs and path_frames, the maths behind `bake --path`: each leg's time from
the README's rule, approach and retract along the tool's Z, and a frame's pose from its time
alone. Pure NumPy (no robot needed: these are tool poses); tolerances are float64 round-off."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import paths


def _pose(position, angle_about_x=0.0):
    pose = np.eye(4)
    c, s = np.cos(angle_about_x), np.sin(angle_about_x)
    pose[:3, :3] = [[1, 0, 0], [0, c, -s], [0, s, c]]
    pose[:3, 3] = position
    return pose


def test_leg_times_follow_length_over_cruise_speed_and_turns_take_their_angle_at_the_turn_speed():
    a, b, c = _pose([0.4, 0, 0.3]), _pose([0.4, 0.2, 0.3]), _pose([0.4, 0.2, 0.3], np.pi / 2)
    d = _pose([0.4, 0.2, 0.5], np.pi / 2)
    legs = paths.path_legs([a, b, c, d], ["LINEAR", "LINEAR", "CIRCULAR"], [None, None, [0.4, 0.3, 0.4]], speed=0.1, ramp=0.2)
    assert legs[0].seconds == pytest.approx(0.2 / (0.8 * 0.1))
    assert legs[1].seconds == pytest.approx((np.pi / 2) / (np.pi / 2) / 0.8)  # only a turn: 90° at 90°/s
    assert legs[2].seconds == pytest.approx(np.pi * 0.1 / (0.8 * 0.1))  # a half circle of radius 0.1


def test_approach_and_retract_run_along_the_tool_z_axis():
    start, end = _pose([0.4, 0, 0.3], 0.4), _pose([0.4, 0.2, 0.3], 0.4)
    legs = paths.path_legs([start, end], ["LINEAR"], [None], speed=0.1, ramp=0.1, approach=0.05, retract=0.03)
    assert len(legs) == 3
    z = start[:3, 2]
    np.testing.assert_allclose(legs[0].start[:3, 3], start[:3, 3] - 0.05 * z, atol=1e-15)
    np.testing.assert_allclose(legs[0].end, start, atol=1e-15)
    np.testing.assert_allclose(legs[-1].end[:3, 3], end[:3, 3] - 0.03 * end[:3, 2], atol=1e-15)
    np.testing.assert_allclose(legs[-1].end[:3, :3], end[:3, :3], atol=1e-15)


def test_frames_run_from_the_first_frame_to_the_path_end_and_hold_the_end_pose():
    start, end = _pose([0.4, 0, 0.3]), _pose([0.4, 0.1, 0.3])
    legs = paths.path_legs([start, end], ["LINEAR"], [None], speed=0.1, ramp=0.0)  # 1 s
    frames, poses = paths.path_frames(legs, fps=10.0, first_frame=5)
    assert frames.tolist() == list(range(5, 16))
    np.testing.assert_allclose(poses[0], start, atol=1e-15)
    np.testing.assert_allclose(poses[-1], end, atol=1e-12)
    steps = np.linalg.norm(np.diff([p[:3, 3] for p in poses], axis=0), axis=1)
    np.testing.assert_allclose(steps, 0.01, atol=1e-12)  # no ramp: 0.1 m/s at 10 fps


def test_a_leg_s_pose_is_move_pose_s_for_every_move():
    """PathLeg.pose works out the ends' rotations and the circle once per leg; its poses are
    move_pose's (a Joint leg: the Linear one), exactly."""
    a, b = _pose([0.4, 0.0, 0.3], 0.2), _pose([0.5, 0.1, 0.35], -0.7)
    for move, via in (("LINEAR", None), ("CIRCULAR", [0.47, 0.02, 0.4]), ("JOINT", None)):
        (leg,) = paths.path_legs([a, b], [move], [via], speed=0.1, ramp=0.25)
        for u in np.linspace(0.0, 1.0, 23):
            want = paths.move_pose("LINEAR" if move == "JOINT" else move, a, b, u, 0.25, via)
            np.testing.assert_array_equal(leg.pose(u), want)
