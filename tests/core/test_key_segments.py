"""Plan Between Keys' live bookkeeping (issue #31, core/plan/key_segments.py): a shot's key
segments, the key a segment's plan is cached under, and what a frame shows. No Blender, no
planner: the plans here are made by hand. Every comparison is exact except the in-between
frame (1e-12: one multiply-add)."""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.collision import Box, World
from kinema_nodes.core.plan import SegmentPlan
from kinema_nodes.core.plan.key_segments import ShotPlans, ShotSegment, key_segments, segment_key
from kinema_nodes.core.shot.limits import limits_for


def test_segments_join_consecutive_keys_inside_the_range_only():
    assert key_segments([1, 49, 61.0, 65, 200], 1, 100) == [(1, 49), (49, 61), (61, 65)]
    assert key_segments([10.4, 20], 1, 100) == [(10, 20)]
    assert key_segments([5], 1, 100) == []
    assert key_segments([5, 5.0, 9], 6, 100) == []  # one key in range: no segment


def test_a_segment_key_changes_with_each_input_and_only_with_them(robots):
    robot = robots("panda")
    controls = np.tile(np.eye(4), (12, 1, 1, 1))
    world = World((Box((0.15, 0.15, 0.3), (0.4, 0.0, 0.15, 1.0, 0.0, 0.0, 0.0)),))
    limits = limits_for(robot, max_acceleration=10.0, max_jerk=100.0)
    args = (robot.fingerprint, 1, 12, controls, [world] * 12, "margin 10", limits, 24.0)
    key = segment_key(*args)
    assert segment_key(*args) == key
    moved = controls.copy()
    moved[5, 0, 2, 3] += 1e-9
    moved_world = World((Box((0.15, 0.15, 0.3), (0.4, 0.01, 0.15, 1.0, 0.0, 0.0, 0.0)),))
    for changed in ((robot.fingerprint, 1, 12, moved, [world] * 12, "margin 10", limits, 24.0),
                    (robot.fingerprint, 1, 12, controls, [world] * 11 + [moved_world], "margin 10", limits, 24.0),
                    (robot.fingerprint, 1, 12, controls, [world] * 12, "margin 11", limits, 24.0),
                    (robot.fingerprint, 1, 12, controls, [world] * 12, "margin 10", limits_for(robot), 24.0),
                    (robot.fingerprint, 1, 12, controls, [world] * 12, "margin 10", limits, 30.0),
                    (robot.fingerprint, 2, 13, controls, [world] * 12, "margin 10", limits, 24.0)):
        assert segment_key(*changed) != key


def test_a_planned_segment_shows_its_joints_a_per_frame_one_shows_nothing_and_the_readout_counts_and_flags():
    planned = np.arange(5 * 2, dtype=float).reshape(5, 2) / 7.0
    shot = ShotPlans(b"sig", [ShotSegment(1, 5, "a"), ShotSegment(5, 9, "b")])
    assert shot.readout() == "Planning: reading the keys"
    shot.gathered = True
    assert shot.readout() == "Planning 1/2 segments"
    assert shot.joints_at(3) is None  # not planned yet: the per-frame IK answers
    shot.segments[0].plan = SegmentPlan(planned, "planned", 1.0, 0.02, 0.1, "too few frames: needs 1.500 s", 1.5)
    shot.segments[1].plan = SegmentPlan(np.zeros((5, 2)), "per-frame", 0.0, 0.05, 0.0)
    assert np.array_equal(shot.joints_at(1), planned[0]) and np.array_equal(shot.joints_at(5), planned[4])
    assert np.allclose(shot.joints_at(2.25), planned[1] + 0.25 * (planned[2] - planned[1]), atol=1e-12, rtol=0)
    assert shot.joints_at(7) is None and shot.joints_at(0) is None
    assert shot.readout() == "1 of 2 segments planned; frames 1-5: too few frames: needs 1.500 s"
    assert shot.flags() == ["frames 1-5: too few frames: needs 1.500 s"]


def test_keys_moved_tells_a_branch_change_at_a_key_from_the_solves_last_bits():
    """A planned segment is played as cached while its ends are within 1e-4 rad of the keys'
    per-frame answers; beyond, at either end, it is planned again. Per-frame and failed segments
    never are (they are the per-frame path itself)."""
    from kinema_nodes.core.plan import SegmentPlan
    from kinema_nodes.core.plan.key_segments import KEY_TOLERANCE_RAD, keys_moved

    joints = np.linspace([0.0, 0.5, -1.0], [1.0, -0.5, 0.0], 9)
    plan = SegmentPlan(joints, "planned", 1.0, 0.02, 0.01)
    assert not keys_moved(plan, joints[0] + 1e-9, joints[-1] - 1e-9)
    assert not keys_moved(plan, joints[0] + 0.9 * KEY_TOLERANCE_RAD, joints[-1])
    assert keys_moved(plan, joints[0] + [0.0, 0.0, 1.1 * KEY_TOLERANCE_RAD], joints[-1])
    assert keys_moved(plan, joints[0], joints[-1] + [0.3, 0.0, 0.0])  # the other elbow at the next key
    assert not keys_moved(SegmentPlan(joints, "per-frame", 1.0, 0.02, 0.0), joints[0] + 1.0, joints[-1])
