"""Plan Between Keys in the scenes #31 names (Show: "a keyed move over a table goes over it, not
through it; a reach into a shelf enters through the opening; a dual-arm pass keeps the arms
apart"), bpy-free, on real robots of example-robot-data: the Panda over bench/bench_plan.py's
table (a top with a post on it) and into its shelf (two boards, two sides, a back), and Baxter
with both arms moving where the straight joint path crosses them.

Every check is on the real geometry with python-fcl: the URDF's meshes (tests/blender/mesh_check.py)
against the scene's boxes as FCL boxes, or one arm's meshes against the other's; never our capsules.
Each test first shows, by FCL, that the keyed (straight joint-space) path collides, so it can fail.

Tolerances: the plan keeps a 10 mm margin by the capsules every 0.005 rad (the module doc of
tests/core/test_plan_between_keys.py), so FCL must find at least 5 mm at the frames and at 10
samples between each two. The keys' joints are IK answers rounded to 1e-3 rad, each clear by the margin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.collision import Avoid
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.plan import plan_between_keys
from kinema_nodes.core.shot.limits import limits_for

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "blender"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_plan import SCENES  # noqa: E402
from mesh_check import RobotMeshes, mesh_distance  # noqa: E402

pytest.importorskip("ompl", reason="Plan Between Keys needs OMPL (the test extra installs it)")
fcl = pytest.importorskip("fcl")

pytestmark = pytest.mark.core

MARGIN, FCL_FLOOR, FPS, FRAMES = 0.01, 0.005, 24.0, 121

#: The Panda's tool pointing down at (0.55, -0.3, 0.32) and at (0.55, 0.3, 0.32): either side of
#: the post on the table, 10 cm above the table top.
TABLE_KEYS = ([-0.255, 0.251, -0.269, -1.769, 0.073, 2.01, 0.238, 0.02], [0.344, 0.246, 0.17, -1.769, -0.046, 2.012, 1.315, 0.02])
#: Pointing down at (0.3, 0, 0.7), above and in front of the shelf; then pointing into it (+x) at
#: (0.55, 0, 0.42), 10 cm inside the opening, between the boards.
SHELF_KEYS = ([-1.465, -0.806, 0.543, -1.506, 0.52, 0.848, 0.078, 0.02], [-1.279, -1.031, 1.25, -2.543, 2.897, 2.407, 1.939, 0.02])
#: Baxter's two arms (head and grippers as at rest): the straight path between these drives the
#: right gripper's finger through the left wrist (a seeded search of random clear pairs).
BAXTER_KEYS = ([0.0, 0.91, -0.32, 0.711, 0.942, 0.635, 0.658, 1.421, 0.222, -0.643, 1.216, 2.171, 0.422, 0.07, 2.831, 0.01, 0.01],
               [0.0, 0.311, 0.504, 0.857, 1.466, 2.779, 1.447, 2.275, -1.092, -0.123, -2.478, 0.768, 0.966, -1.348, 2.262, 0.01, 0.01])


def _boxes(scene):
    return [fcl.CollisionObject(fcl.Box(*box.size), fcl.Transform(np.eye(3), np.array(box.pose[:3]))) for box in SCENES[scene].obstacles]


def _dense(joints, samples=10):
    t = np.arange(samples + 1)[:, None] / (samples + 1)
    return np.concatenate([a + (b - a) * t for a, b in zip(joints[:-1], joints[1:])] + [joints[-1:]])


def _straight(start, goal):
    return np.asarray(start) + (np.asarray(goal) - np.asarray(start)) * np.linspace(0, 1, 49)[:, None]


def _plan(robot, keys, world):
    limits = limits_for(robot, max_acceleration=10.0, max_jerk=100.0)
    plan = plan_between_keys(robot, np.array(keys[0]), np.array(keys[1]), FRAMES, FPS, Avoid(True, world, MARGIN), limits)
    assert plan.mode == "planned", plan.to_dict()
    assert not plan.flag, plan.flag
    return plan


def _scene_clearance(meshes, joints, boxes):
    worst, where = np.inf, ""
    for q in joints:
        distance, link = mesh_distance(meshes, q, boxes)
        if distance < worst:
            worst, where = distance, link
    return worst, where


def test_a_keyed_move_over_a_table_goes_over_it_not_through_it(robots):
    panda = robots("panda")
    meshes, boxes = RobotMeshes(panda), _boxes("table")
    assert _scene_clearance(meshes, _straight(*TABLE_KEYS), boxes)[0] == 0.0  # the keyed path hits the post
    plan = _plan(panda, TABLE_KEYS, SCENES["table"])
    dense = _dense(plan.joints)
    worst, link = _scene_clearance(meshes, dense, boxes)
    assert worst >= FCL_FLOOR, f"{link} within {worst * 1000:.1f} mm of the table"
    top = SCENES["table"].obstacles[0]
    top_z = top.pose[2] + top.size[2] / 2
    lowest = min(link_pose(panda, q, panda.tool_point)[2, 3] for q in dense)
    assert lowest > top_z, f"the tool went {(top_z - lowest) * 1000:.0f} mm below the table top"  # over, not under


def test_a_reach_into_a_shelf_enters_through_the_opening(robots):
    panda = robots("panda")
    meshes, boxes = RobotMeshes(panda), _boxes("shelf")
    assert _scene_clearance(meshes, _straight(*SHELF_KEYS), boxes)[0] == 0.0  # the keyed path goes through a board
    plan = _plan(panda, SHELF_KEYS, SCENES["shelf"])
    dense = _dense(plan.joints)
    worst, link = _scene_clearance(meshes, dense, boxes)
    assert worst >= FCL_FLOOR, f"{link} within {worst * 1000:.1f} mm of the shelf"
    lower, upper, left, right, back = SCENES["shelf"].obstacles
    front = lower.pose[0] - lower.size[0] / 2  # the boards' front edge (x)
    y_in = right.pose[1] - right.size[1] / 2
    z_low, z_high = lower.pose[2] + lower.size[2] / 2, upper.pose[2] - upper.size[2] / 2

    def inside(p):
        return p[0] > front and abs(p[1]) < y_in and z_low < p[2] < z_high

    tool = np.array([link_pose(panda, q, panda.tool_point)[:3, 3] for q in dense])
    assert inside(tool[-1]) and not inside(tool[0])
    first = next(k for k in range(len(tool)) if inside(tool[k]))
    a, b = tool[first - 1], tool[first]
    crossing = a + (b - a) * (front - a[0]) / (b[0] - a[0])  # where the tool crosses the shelf's front plane
    assert abs(crossing[1]) < y_in and z_low < crossing[2] < z_high, f"entered at {np.round(crossing, 3)}, not through the opening"


def test_a_dual_arm_pass_keeps_the_arms_apart(robots):
    baxter = robots("baxter")
    meshes = RobotMeshes(baxter)

    def arms_apart(q) -> float:
        parts = meshes.objects(q)
        left = [o for name, o in parts if name.startswith(("left_", "l_gripper"))]
        right = [o for name, o in parts if name.startswith(("right_", "r_gripper"))]
        worst = np.inf
        for a in left:
            for b in right:
                if fcl.collide(a, b, fcl.CollisionRequest(), fcl.CollisionResult()):
                    return 0.0
                worst = min(worst, fcl.distance(a, b, fcl.DistanceRequest(), fcl.DistanceResult()))
        return float(worst)

    assert min(arms_apart(q) for q in _straight(*BAXTER_KEYS)) == 0.0  # the keyed path crosses the arms
    plan = _plan(baxter, BAXTER_KEYS, None)
    worst = min(arms_apart(q) for q in _dense(plan.joints))
    assert worst >= FCL_FLOOR, f"the arms came within {worst * 1000:.1f} mm"
