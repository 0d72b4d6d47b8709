"""Plan Between Keys with a carried object (#31 Show: "a carried object is avoided"), bpy-free, on
the real Panda (example-robot-data): the hand carries a 20 cm bar hanging below it (a Grasp's
`CarriedObject`, core/collision/carried.py) over a low box. The arm alone passes the box with
10 cm to spare, so without the bar the segment is left per-frame; with the bar the straight path
drives it through the box, so the segment is planned, and the played path is clear on the real
geometry: python-fcl on the bar as a box at the hand's pose and on the URDF's meshes
(tests/blender/mesh_check.py), never our capsules.

Tolerances: as tests/core/test_plan_between_keys.py: the plan keeps a 10 mm margin by the capsule
model at every 0.005 rad, so FCL must find at least 5 mm at the frames and 10 samples between each two.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.collision import Avoid, Box, World
from kinema_nodes.core.collision.carried import carried_object
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.plan import plan_between_keys
from kinema_nodes.core.shot.limits import limits_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "blender"))
from mesh_check import RobotMeshes, mesh_distance  # noqa: E402

pytest.importorskip("ompl", reason="Plan Between Keys needs OMPL (the test extra installs it)")

pytestmark = pytest.mark.core

MARGIN, FCL_FLOOR, FPS, FRAMES = 0.01, 0.005, 24.0, 73
START = np.array([-1.2, 0.5, 0.0, -1.5, 0.0, 2.0, 0.8, 0.02])
GOAL = np.array([1.2, 0.5, 0.0, -1.5, 0.0, 2.0, 0.8, 0.02])
BOX = Box((0.3, 0.3, 0.15), (0.65, 0.0, 0.075, 1.0, 0.0, 0.0, 0.0), "low box")
BAR = (0.03, 0.03, 0.2)  # along the tool's Z, from the tool point outward (down, here)
CUBE = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float) * 0.5
CUBE_FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6], [0, 2, 6],
                       [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def _bar_offset():
    offset = np.diag([*BAR, 1.0])
    offset[2, 3] = BAR[2] / 2
    return offset


def _between_frames(joints, samples=10):
    t = np.arange(samples + 1)[:, None] / (samples + 1)
    return np.concatenate([a + (b - a) * t for a, b in zip(joints[:-1], joints[1:])] + [joints[-1:]])


def _fcl_box():
    import fcl

    return fcl.CollisionObject(fcl.Box(*BOX.size), fcl.Transform(np.eye(3), np.array(BOX.pose[:3])))


def _bar_distance(robot, q, box):
    import fcl

    pose = link_pose(robot, q, robot.tool_point)
    centre = pose @ np.array([0.0, 0.0, BAR[2] / 2, 1.0])
    bar = fcl.CollisionObject(fcl.Box(*BAR), fcl.Transform(pose[:3, :3], centre[:3]))
    if fcl.collide(bar, box, fcl.CollisionRequest(), fcl.CollisionResult()):
        return 0.0
    return float(fcl.distance(bar, box, fcl.DistanceRequest(), fcl.DistanceResult()))


def test_a_carried_bar_is_planned_round_the_box_the_arm_alone_passes(robots):
    panda = robots("panda")
    limits = limits_for(panda, max_acceleration=10.0, max_jerk=100.0)
    world = World((BOX,))
    box = _fcl_box()
    straight = START + (GOAL - START) * np.linspace(0, 1, 49)[:, None]
    assert min(_bar_distance(panda, q, box) for q in straight) == 0.0  # by FCL: the keyed path drives the bar through

    alone = plan_between_keys(panda, START, GOAL, FRAMES, FPS, Avoid(True, world, MARGIN), limits)
    assert alone.mode == "per-frame", alone.flag  # nothing to plan without the bar

    bar = carried_object(panda.tool_point, CUBE, CUBE_FACES, _bar_offset(), "bar")
    carrying = Avoid(True, world, MARGIN, carried=(bar,))
    planned = plan_between_keys(panda, START, GOAL, FRAMES, FPS, carrying, limits)
    assert planned.mode == "planned", planned.flag
    assert np.array_equal(planned.joints[0], START) and np.array_equal(planned.joints[-1], GOAL)
    meshes = RobotMeshes(panda)
    worst_bar = np.inf
    for q in _between_frames(planned.joints):
        worst_bar = min(worst_bar, _bar_distance(panda, q, box))
        distance, link = mesh_distance(meshes, q, [box])
        assert distance >= FCL_FLOOR, f"{link} within {distance * 1000:.1f} mm of the box"
    assert worst_bar >= FCL_FLOOR, f"the carried bar came within {worst_bar * 1000:.1f} mm of the box"
    again = plan_between_keys(panda, START, GOAL, FRAMES, FPS, carrying, limits)
    assert np.array_equal(again.joints, planned.joints)  # the same inputs, the same plan
