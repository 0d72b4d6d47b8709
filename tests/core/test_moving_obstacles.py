"""Obstacles that move during a segment (issue #31 item 3, core/plan/moving_obstacles.py): which
frames see a different world, the conservative union of them, and the timed check of a path
against each frame's obstacles, on a real Panda (the capsule model). No planning here: the
Blender test plans round a keyed slider (tests/blender/test_plan_between_keys_in_blender.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.collision import Avoid, Box, World
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.plan.moving_obstacles import obstacles_move, swept_avoid, timed_clear

pytestmark = pytest.mark.core

MARGIN = 0.01
BIG = Box((0.3, 0.3, 0.4), (0.65, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0), "box")


def slider_at(position):
    return Box((0.08, 0.08, 0.08), (*position, 1.0, 0.0, 0.0, 0.0), "slider")


def test_a_world_that_differs_on_some_frame_moves_and_its_union_holds_every_pose_once():
    still = Avoid(True, World((BIG, slider_at((0.0, 0.0, 1.5)))), MARGIN)
    moved = Avoid(True, World((BIG, slider_at((0.3, 0.0, 1.5)))), MARGIN)
    assert not obstacles_move([still, still, still])
    assert obstacles_move([still, moved, still])
    union = swept_avoid([still, moved, still, None])
    assert union.world.obstacles == (BIG, slider_at((0.0, 0.0, 1.5)), slider_at((0.3, 0.0, 1.5)))
    assert union.world.names == ("box", "slider", "slider") and union.margin_m == MARGIN


def test_the_timed_check_finds_a_slider_only_on_the_frame_it_is_there(robots):
    panda = robots("panda")
    q = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 2.1, 0.8, 0.02])
    joints = np.stack([q + [0.02 * k, 0, 0, 0, 0, 0, 0, 0] for k in range(9)])
    tool = link_pose(panda, joints[4], panda.tool_point)[:3, 3]
    away = Avoid(True, World((slider_at(tool + (0.0, 0.0, 0.6)),)), MARGIN)
    there = Avoid(True, World((slider_at(tool),)), MARGIN)
    clear, least = timed_clear(panda, joints, [away] * 9)
    assert clear and least > MARGIN
    clear, least = timed_clear(panda, joints, [away] * 4 + [there] + [away] * 4)
    assert not clear and least < MARGIN
    # what the first key alone sees (the old check) is clear: only the frame-by-frame check finds it
    assert timed_clear(panda, joints, [away] * 9)[0]
