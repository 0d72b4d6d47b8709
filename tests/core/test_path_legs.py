"""core/path_legs.py (path_legs and path_frames), the maths behind `bake --path`: each leg's time from
the README's rule, approach and retract along the tool's Z, and a frame's pose from its time
alone. Pure NumPy (no robot needed: these are tool poses); tolerances are float64 round-off."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import path_legs, paths


def _pose(position, angle_about_x=0.0):
    pose = np.eye(4)
    c, s = np.cos(angle_about_x), np.sin(angle_about_x)
    pose[:3, :3] = [[1, 0, 0], [0, c, -s], [0, s, c]]
    pose[:3, 3] = position
    return pose


def test_leg_times_follow_length_over_cruise_speed_and_turns_take_their_angle_at_the_turn_speed():
    a, b, c = _pose([0.4, 0, 0.3]), _pose([0.4, 0.2, 0.3]), _pose([0.4, 0.2, 0.3], np.pi / 2)
    d = _pose([0.4, 0.2, 0.5], np.pi / 2)
    legs = path_legs.path_legs([a, b, c, d], ["LINEAR", "LINEAR", "CIRCULAR"], [None, None, [0.4, 0.3, 0.4]], speed=0.1, ramp=0.2)
    assert legs[0].seconds == pytest.approx(0.2 / (0.8 * 0.1))
    assert legs[1].seconds == pytest.approx((np.pi / 2) / (np.pi / 2) / 0.8)  # only a turn: 90° at 90°/s
    assert legs[2].seconds == pytest.approx(np.pi * 0.1 / (0.8 * 0.1))  # a half circle of radius 0.1


def test_approach_and_retract_run_along_the_tool_z_axis():
    start, end = _pose([0.4, 0, 0.3], 0.4), _pose([0.4, 0.2, 0.3], 0.4)
    legs = path_legs.path_legs([start, end], ["LINEAR"], [None], speed=0.1, ramp=0.1, approach=0.05, retract=0.03)
    assert len(legs) == 3
    z = start[:3, 2]
    np.testing.assert_allclose(legs[0].start[:3, 3], start[:3, 3] - 0.05 * z, atol=1e-15)
    np.testing.assert_allclose(legs[0].end, start, atol=1e-15)
    np.testing.assert_allclose(legs[-1].end[:3, 3], end[:3, 3] - 0.03 * end[:3, 2], atol=1e-15)
    np.testing.assert_allclose(legs[-1].end[:3, :3], end[:3, :3], atol=1e-15)


def test_frames_run_from_the_first_frame_to_the_path_end_and_hold_the_end_pose():
    start, end = _pose([0.4, 0, 0.3]), _pose([0.4, 0.1, 0.3])
    legs = path_legs.path_legs([start, end], ["LINEAR"], [None], speed=0.1, ramp=0.0)  # 1 s
    frames, poses = path_legs.path_frames(legs, fps=10.0, first_frame=5)
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
        (leg,) = path_legs.path_legs([a, b], [move], [via], speed=0.1, ramp=0.25)
        for u in np.linspace(0.0, 1.0, 23):
            want = paths.move_pose("LINEAR" if move == "JOINT" else move, a, b, u, 0.25, via)
            np.testing.assert_array_equal(leg.pose(u), want)


def test_a_blended_path_file_rounds_its_inner_points_at_the_set_speed_and_stops_at_its_ends():
    """`"blend"` in a path file: the square's inner corners are rounded within the radius (never
    through the corner, never farther than the radius), the tool never stops there, runs at the
    set speed away from the blends (1e-9 relative), and still stops at the approach's end and the
    last point (the ends' poses exactly)."""
    square = [_pose(p) for p in ([0.4, 0.0, 0.3], [0.4, 0.1, 0.3], [0.5, 0.1, 0.3], [0.5, 0.0, 0.3])]
    speed, blend, fps = 0.05, 0.01, 240.0
    legs = path_legs.path_legs(square, ["LINEAR"] * 3, [None] * 3, speed=speed, ramp=0.2, approach=0.02, blend=blend)
    assert [leg.blend for leg in legs] == [0.0, blend, blend, 0.0]  # the approach's end is a stop
    assert legs[1].seconds == pytest.approx(0.1 / ((1 - 0.1) * speed))  # a ramp at one end only
    assert legs[2].seconds == pytest.approx(0.1 / speed)  # none at either
    frames, poses = path_legs.path_frames(legs, fps)
    points = np.array([p[:3, 3] for p in poses])
    ends = np.cumsum([leg.seconds for leg in legs])
    for corner, at in ((square[1], ends[1]), (square[2], ends[2])):
        near = np.linalg.norm(points - corner[:3, 3], axis=1)
        assert 1e-4 < near.min() <= blend + 1e-12  # rounded: near the corner, not through it
        window = np.abs(np.arange(len(points)) / fps - at) < blend / speed
        assert near[window].max() <= blend + 1e-12
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1) * fps
    t = np.arange(len(points) - 1) / fps
    inner = (t > ends[0] + 0.2 * legs[1].seconds + 1e-9) & (t < ends[-2] - 1e-9)
    assert steps[inner].min() > 0.5 * speed  # no stop at a blended point
    cruise = inner & (np.abs(t - ends[1]) > blend / speed + 1 / fps) & (np.abs(t - ends[2]) > blend / speed + 1 / fps)
    np.testing.assert_allclose(steps[cruise], speed, rtol=1e-9)
    np.testing.assert_allclose(poses[-1], legs[-1].end, atol=1e-12)
    at_start = int(round(ends[0] * fps))
    assert np.linalg.norm(points[at_start] - square[0][:3, 3]) < speed / fps  # the approach ends on the first point


def test_without_a_blend_path_frames_are_as_before():
    square = [_pose(p) for p in ([0.4, 0.0, 0.3], [0.4, 0.1, 0.3], [0.5, 0.1, 0.3])]
    legs = path_legs.path_legs(square, ["LINEAR", "CIRCULAR"], [None, [0.47, 0.13, 0.3]], speed=0.05, ramp=0.2)
    assert all(leg.blend == 0.0 and leg.ramp == leg.ramp_out == 0.2 for leg in legs)
    _, poses = path_legs.path_frames(legs, 24.0)
    ends = np.cumsum([leg.seconds for leg in legs])
    for k, pose in enumerate(poses):
        t = min(k / 24.0, ends[-1])
        i = int(min(np.searchsorted(ends, t, side="right"), len(legs) - 1))
        u = (t - (ends[i] - legs[i].seconds)) / legs[i].seconds
        want = paths.move_pose(legs[i].move, legs[i].start, legs[i].end, u, 0.2, legs[i].via)
        np.testing.assert_allclose(pose, want, atol=1e-12)
