"""A carried object in the collision model (#30 item 5), bpy-free, on the Franka Panda of
example-robot-data: which links it may touch, and that its distances stay lower bounds of the
real ones, judged by python-fcl on the box's own triangles and the obstacles as FCL primitives.

Tolerance: our distance is never above FCL's by more than 1e-6 m (both are exact for boxes up to
rounding; ours is a lower bound by construction)."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import collision as C
from kinema_nodes.core.collision.carried import CarriedObject, carried_object, touch_links
from kinema_nodes.core.model.kinematics import link_pose

CUBE = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float) * 0.5
CUBE_FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6], [0, 2, 6],
                       [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def _held_box(robot, size=(0.05, 0.05, 0.15), drop=0.075):
    offset = np.diag([*size, 1.0])
    offset[2, 3] = drop
    return carried_object(robot.tool_point, CUBE, CUBE_FACES, offset, "Box"), offset


def test_the_box_may_touch_the_hand_and_fingers_but_not_the_arm(robots):
    robot = robots("panda")
    touching = touch_links(robot, robot.tool_point)
    assert {"panda_hand", "panda_leftfinger", "panda_rightfinger", robot.tool_point} <= touching
    assert not touching & {"panda_link0", "panda_link1", "panda_link2", "panda_link3", "panda_link4", "panda_link5", "panda_link6"}
    box, _ = _held_box(robot)
    model, _ = C.prepare_pairs(robot, C.Avoid(True, None, 0.0, carried=(box,)))
    base = C.collision_model(robot)
    assert len(model.links) == len(base.links) + len(box.capsules)
    carried_rows = [(i, j) for i, j in model.self_pairs.tolist() if i >= len(base.links)]
    partners = {model.links[j] for _, j in carried_rows}
    assert "panda_link3" in partners and not partners & touching
    assert model.names[-1] == "Box"


def test_the_carried_box_distance_is_a_lower_bound_of_fcl(robots):
    fcl = pytest.importorskip("fcl")
    robot = robots("panda")
    box, offset = _held_box(robot)
    wall = C.Box((0.05, 2.0, 2.0), (0.45, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0), "wall")
    world = C.World((wall,))
    avoid = C.Avoid(False, world, 0.0, carried=(box,))
    model, kin = C.prepare_pairs(robot, avoid)
    wall_fcl = fcl.CollisionObject(fcl.Box(*wall.size), fcl.Transform(np.eye(3), np.array(wall.pose[:3])))
    rows = [k for k, name in enumerate(C.measure_pairs(robot, model, kin, avoid, robot.mid_configuration())[0].names)
            if name[0] == "Box"]
    assert rows
    near = 0
    for q in robot.random_configurations(40, np.random.default_rng(3)):
        pairs, _ = C.measure_pairs(robot, model, kin, avoid, q)
        ours = float(pairs.d[rows].min())
        held = link_pose(robot, q, robot.tool_point) @ offset
        vertices = CUBE @ held[:3, :3].T + held[:3, 3]
        mesh = fcl.BVHModel()
        mesh.beginModel(len(vertices), len(CUBE_FACES))
        mesh.addSubModel(vertices, CUBE_FACES.astype(np.int32))
        mesh.endModel()
        box_fcl = fcl.CollisionObject(mesh, fcl.Transform())
        if fcl.collide(box_fcl, wall_fcl, fcl.CollisionRequest(), fcl.CollisionResult()):
            truth = 0.0
        else:
            truth = fcl.distance(box_fcl, wall_fcl, fcl.DistanceRequest(), fcl.DistanceResult())
        assert ours <= truth + 1e-6, (ours, truth)
        if truth < 0.05:
            near += 1
            assert truth - max(ours, 0.0) < 0.01, (ours, truth)  # near the wall the box is measured as the box, not its capsule
    assert near, "no random pose brought the box near the wall"


def test_on_a_dual_arm_the_other_gripper_is_still_checked(robots):
    """Baxter: what the right gripper carries may touch the right gripper, never pass through the
    left one unseen (a hand-over brings the two together)."""
    robot = robots("baxter")
    right = touch_links(robot, "right_gripper")
    assert "right_gripper_base_link" in right and "r_gripper_l_finger" in right
    assert not {"left_gripper_base_link", "l_gripper_l_finger", "l_gripper_r_finger"} & right
    box, _ = _held_box(robot)
    box = CarriedObject("right_gripper", box.capsules, box.pieces, "Box")
    model, _ = C.prepare_pairs(robot, C.Avoid(True, None, 0.0, carried=(box,)))
    base = len(C.collision_model(robot).links)
    partners = {model.links[j] for i, j in model.self_pairs.tolist() if i >= base}
    assert {"left_gripper_base_link", "l_gripper_l_finger"} & partners
