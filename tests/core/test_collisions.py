"""Collision-aware IK (issue #14), checked against FCL on the URDFs' real collision meshes.

The solver sees capsules; bench/fcl_check.py builds python-fcl objects from the URDF's own
<collision> elements (meshes as BVHs of their triangles) and the obstacles as FCL primitives,
and every answer below is judged by it: "free" means `fcl.collide` finds no checked pair touching.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError, RobotFileError
from kinema_nodes.core.collision import collision_model, distances, fit_capsules, read_srdf_pairs
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, solve
from kinema_nodes.core import collision as C

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from fcl_check import FclChecker  # noqa: E402

pytest.importorskip("fcl")

WALL = C.World((C.Box((0.05, 2.0, 2.0), (0.45, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0), "wall"),))
TABLE = C.World((C.Box((0.5, 1.2, 0.04), (0.65, 0.0, 0.25, 1.0, 0.0, 0.0, 0.0), "table"),), ground=True)
CELL = C.World((C.Box((0.6, 1.2, 0.04), (0.6, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0), "table"),
                C.Capsule((0.45, 0.45, 0.1), (0.45, 0.45, 0.9), 0.04, "post"),
                C.Box((0.3, 0.5, 0.02), (0.0, -0.6, 0.55, 1.0, 0.0, 0.0, 0.0), "shelf")))


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    """The plain solve's compiled kernel built first, so no answer depends on a build running."""
    kernel_status(wait=True)


_checkers: dict = {}


def checker(robot, world=None, self_check=True) -> FclChecker:
    key = (id(robot), world, self_check)
    if key not in _checkers:
        _checkers[key] = FclChecker(robot, world, self_check)
    return _checkers[key]


@pytest.mark.parametrize("name", ["panda", "ur5", "baxter"])
def test_capsules_hold_the_meshes(robots, name):
    """The capsules are conservative: on random poses their clearance is never above FCL's
    smallest mesh distance (1e-6 m), and every pair FCL finds touching, the capsules find too."""
    robot = robots(name)
    avoid = C.Avoid(True, CELL, 0.0)
    fcl_check = checker(robot, CELL)
    rng = np.random.default_rng(4)
    for q in robot.random_configurations(25, rng):
        smallest, touching = fcl_check.check(q)
        found = C.clearance(robot, q, avoid)
        assert found.min_m <= smallest + 1e-6, (name, found.min_m, smallest)
        if touching:
            assert found.colliding, (name, touching)


def test_the_two_forms_agree(robots):
    """The numba kernel and the NumPy form give the same distances to 1e-12 (and the same
    points and normals where no hull was measured; on a hull's flat face the two may pick
    different, equally far vertices)."""
    robot = robots("panda")
    avoid = C.Avoid(True, C.World(CELL.obstacles + (C.Sphere((0.3, 0.3, 0.3), 0.05, "ball"),), ground=True), 0.005)
    model, kin = C.prepare_pairs(robot, avoid)
    rng = np.random.default_rng(2)
    try:
        for q in robot.random_configurations(20, rng):
            fast, _ = C.measure_pairs(robot, model, kin, avoid, q)
            distances.FORCE_NUMPY = True
            plain, _ = C.measure_pairs(robot, model, kin, avoid, q)
            distances.FORCE_NUMPY = False
            assert fast.names == plain.names
            assert np.max(np.abs(fast.d - plain.d)) < 1e-12
            far = fast.d >= avoid.margin_m + distances.REFINE_WITHIN
            for field in ("point_a", "point_b", "normal"):
                assert np.max(np.abs(getattr(fast, field) - getattr(plain, field))[far], initial=0.0) < 1e-12
    finally:
        distances.FORCE_NUMPY = False


def test_distance_gradients_match_finite_differences(robots, monkeypatch):
    """The capsule distances' gradients (the hull gaps, measured near contact, are switched off
    here: along a hull's flat face the gap has kinks)."""
    monkeypatch.setattr(distances, "REFINE_WITHIN", -1.0)
    robot = robots("ur5")
    avoid = C.Avoid(True, CELL, 0.0)
    model, kin = C.prepare_pairs(robot, avoid)
    rng = np.random.default_rng(8)
    for q in robot.random_configurations(4, rng):
        pairs, (origins, axes) = C.measure_pairs(robot, model, kin, avoid, q)
        outside = pairs.d > 1e-3  # inside a box the distance has kinks
        grad = kin.gradient(pairs.cap_a, pairs.point_a, pairs.normal, origins, axes)
        own = pairs.cap_b >= 0
        grad[own] -= kin.gradient(pairs.cap_b[own], pairs.point_b[own], pairs.normal[own], origins, axes)
        numeric = np.zeros_like(grad)
        for k in range(robot.dof):
            e = np.zeros(robot.dof)
            e[k] = 1e-6
            numeric[:, k] = (C.measure_pairs(robot, model, kin, avoid, q + e)[0].d - C.measure_pairs(robot, model, kin, avoid, q - e)[0].d) / 2e-6
        assert np.max(np.abs(numeric - grad)[outside]) < 1e-5


def test_goal_behind_a_wall_stops_short_with_the_wall_named(robots):
    robot = robots("panda")
    goal = IKTarget(robot.tool_point, (0.65, 0.0, 0.4), (0.0, 1.0, 0.0, 0.0))
    start = robot.zero_configuration()
    fcl_check = checker(robot, WALL)
    plain = solve(robot, goal, start, SolveOptions(backend="numpy"))
    assert plain.converged and fcl_check.check(plain.joints)[1], "the plain solve reaches through the wall"
    result = solve(robot, goal, start, SolveOptions(backend="numpy", avoid=C.Avoid(True, WALL, 0.005)))
    assert not result.converged
    assert result.reason.startswith("blocked by a collision: link ") and result.reason.endswith(" vs obstacle wall"), result.reason
    assert result.position_error > 0.05
    assert result.colliding == () and result.min_clearance_m >= 0
    assert fcl_check.free(result.joints)


def test_tabletop_reach_goes_over_the_table_not_through_it(robots):
    """From a start beside the table, the plain solve's answer has the elbow (link4) in the
    table per FCL; the avoiding solve reaches the same pose to 1e-5 with everything clear."""
    robot = robots("panda")
    start = np.array([1.4509, 0.2625, 0.6795, -1.5511, 2.6931, 0.8369, 1.0953, 0.0222])
    goal = IKTarget(robot.tool_point, (0.6614, 0.0486, 0.2945), (-0.39162, -0.42732, 0.78369, -0.22332))
    fcl_check = checker(robot, TABLE)
    assert fcl_check.free(start)
    plain = solve(robot, goal, start, SolveOptions(backend="numpy"))
    assert plain.converged
    assert any(b == "table" for _, b, _ in fcl_check.check(plain.joints)[1])
    result = solve(robot, goal, start, SolveOptions(backend="numpy", avoid=C.Avoid(True, TABLE, 0.005), budget_ms=1000))
    assert result.converged, result.reason
    assert result.position_error <= 1e-5 and result.rotation_error <= 1e-5
    assert fcl_check.free(result.joints)
    # over it: every link of the arm above the table's top or beside it, none under it
    tip = link_pose(robot, result.joints, robot.tool_point)[:3, 3]
    assert tip[2] > 0.27


def test_dual_arm_self_collision(robots):
    """Baxter's two grippers sent to one point in front of its chest: the plain solve puts one
    gripper into the other (per FCL); the self-avoiding solve keeps them apart (FCL finds no
    pair touching), stops short, and names the pair of links that stopped it."""
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = robots("baxter")
    start = robot.zero_configuration()
    goals = [IKTarget(side, (0.9, 0.0, 0.2), tuple(matrix_to_quaternion(link_pose(robot, start, side))), 1.0, 0.0)
             for side in ("right_gripper", "left_gripper")]
    fcl_check = checker(robot)
    assert fcl_check.free(start)
    held = robot.held_joints()
    plain = solve(robot, goals, start, SolveOptions(backend="numpy", held_joints=held))
    touching = fcl_check.check(plain.joints)[1]
    assert any(a.startswith("r_") and b.startswith("l_") or a.startswith("l_") and b.startswith("r_") for a, b, _ in touching), touching
    result = solve(robot, goals, start, SolveOptions(backend="numpy", held_joints=held, avoid=C.Avoid(True, None, 0.005)))
    assert not result.converged and result.colliding == ()
    assert result.reason.startswith("blocked by a collision: link ") and "obstacle" not in result.reason, result.reason
    a, b = result.reason.split(": link ", 1)[1].split(" vs ")
    assert a in robot.links and b in robot.links
    assert fcl_check.free(result.joints)


def test_converged_answers_never_collide(robots):
    """UR5 in the cell: goals from FK of random poses; whatever each solve says, an answer
    reported converged is clear per FCL and per its own clearance."""
    robot = robots("ur5")
    fcl_check = checker(robot, CELL)
    avoid = C.Avoid(True, CELL, 0.005)
    rng = np.random.default_rng(12)
    converged = 0
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    for q in robot.random_configurations(12, rng):
        pose = link_pose(robot, q, robot.tool_point)
        goal = IKTarget(robot.tool_point, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))
        result = solve(robot, goal, robot.zero_configuration(), SolveOptions(backend="numpy", cold=True, avoid=avoid, budget_ms=1000))
        if result.converged:
            converged += 1
            assert result.colliding == () and result.min_clearance_m >= 0
            assert fcl_check.free(result.joints)
        else:
            assert result.reason != "converged"
    assert converged >= 3


def test_options_refuse_bad_avoid(robots):
    robot = robots("ur5")
    goal = IKTarget(robot.tool_point, (0.4, 0.1, 0.4), (1.0, 0.0, 0.0, 0.0))
    for bad in (C.Avoid(True, None, -0.001), C.Avoid(True, None, float("nan")), "all"):
        with pytest.raises(KinemaError):
            solve(robot, goal, robot.zero_configuration(), SolveOptions(backend="numpy", avoid=bad))


# ---- the collision model ---------------------------------------------------------------------

def test_allowed_pairs_skip_adjacent_and_resting_links(robots):
    robot = robots("ur5")
    model = collision_model(robot)
    assert model.allowed_source == "computed"
    for joint in robot.joints:
        if joint.parent in model.link_set and joint.child in model.link_set:
            assert tuple(sorted((joint.parent, joint.child))) in model.allowed
    checked = {tuple(sorted((model.links[i], model.links[j]))) for i, j in model.self_pairs}
    assert ("base_link", "wrist_3_link") in checked or ("base_link", "wrist_2_link") in checked
    assert not checked & model.allowed


def test_srdf_beside_the_urdf_replaces_the_pairs(robots, tmp_path):
    robot = robots("panda")
    model = collision_model(robot)
    assert model.allowed_source.endswith("panda.srdf")  # example-robot-data's MoveIt SRDF (srdf/ beside urdf/)
    assert ("panda_hand", "panda_link6") in model.allowed  # "Never" in the SRDF
    srdf = tmp_path / "mine.srdf"
    srdf.write_text('<robot name="panda"><disable_collisions link1="panda_link1" link2="panda_link2"/></robot>')
    mine = collision_model(robot, srdf)
    assert mine.allowed_source == str(srdf)
    assert ("panda_link1", "panda_link2") in mine.allowed and ("panda_hand", "panda_link6") not in mine.allowed
    bad = tmp_path / "bad.srdf"
    bad.write_text('<robot><disable_collisions link1="panda_link1" link2="no_such_link"/></robot>')
    with pytest.raises(RobotFileError, match="no_such_link"):
        read_srdf_pairs(bad, robot)
    hostile = tmp_path / "hostile.srdf"
    hostile.write_text('<!DOCTYPE r [<!ENTITY e "x">]><robot>&e;</robot>')
    with pytest.raises(RobotFileError, match="DOCTYPE"):
        read_srdf_pairs(hostile, robot)


def test_fitted_capsules_hold_every_point():
    rng = np.random.default_rng(0)
    for shape in (np.array([0.4, 0.05, 0.05]), np.array([0.1, 0.3, 0.02]), np.array([0.1, 0.1, 0.1])):
        points = rng.uniform(-1, 1, (300, 3)) * shape
        points[:50, 0] += 0.5 * shape[0] * (points[:50, 1] > 0)  # a bent part
        capsules = fit_capsules(points)
        inside = np.zeros(len(points), dtype=bool)
        for a, b, r in capsules:
            ab = b - a
            t = np.clip((points - a) @ ab / max(ab @ ab, 1e-18), 0, 1)
            inside |= np.linalg.norm(points - (a + t[:, None] * ab), axis=1) <= r + 1e-12
        assert inside.all()


# ---- obstacle files -------------------------------------------------------------------------------

def write(tmp_path, items, name="obstacles.json") -> Path:
    path = tmp_path / name
    path.write_text(items if isinstance(items, str) else json.dumps(items))
    return path


def test_obstacle_file_round_trip(tmp_path):
    import trimesh

    trimesh.creation.box(extents=(0.2, 0.1, 0.3)).export(tmp_path / "crate.stl")
    path = write(tmp_path, [
        {"box": {"size": [1, 0.5, 0.04], "pose": [0.5, 0, 0.2, 1, 0, 0, 0]}, "name": "table"},
        {"sphere": {"center": [0.3, 0.2, 0.5], "radius": 0.05}},
        {"capsule": {"a": [0, 0.5, 0], "b": [0, 0.5, 1], "radius": 0.04}, "name": "post"},
        {"mesh": "crate.stl", "pose": [0.4, -0.3, 0.3, 0.7071068, 0, 0, 0.7071068]},
        {"ground": True},
    ])
    world = C.load_obstacles(path)
    assert world.names == ("table", "sphere 2", "post", "mesh 4") and world.ground
    mesh = world.obstacles[3]
    corners = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.05, 0.05) for z in (-0.15, 0.15)])
    from kinema_nodes.core.model.rotations import quaternion_to_matrix

    rotation = quaternion_to_matrix(np.array([0.7071068, 0, 0, 0.7071068]))
    placed = corners @ rotation.T + np.array([0.4, -0.3, 0.3])
    for point in placed:
        assert min(np.linalg.norm(point - (np.array(a) + np.clip((point - a) @ (np.array(b) - a) / max(np.sum((np.array(b) - a) ** 2), 1e-18), 0, 1) * (np.array(b) - a))) - r
                   for a, b, r in mesh.capsules) <= 1e-6  # the file's quaternion is normalised on reading


HOSTILE = {
    "unknown primitive": ([{"cone": {"radius": 1}}], "unknown primitive 'cone'"),
    "negative size": ([{"box": {"size": [1, -0.5, 0.04]}}], "size -0.5 is negative"),
    "zero radius": ([{"sphere": {"center": [0, 0, 0], "radius": 0}}], "radius is zero"),
    "NaN": ('[{"sphere": {"center": [0, NaN, 0], "radius": 0.1}}]', "not valid JSON"),
    "huge number": ('[{"sphere": {"center": [0, 1e400, 0], "radius": 0.1}}]', "inf"),
    "string number": ([{"sphere": {"center": [0, "1", 0], "radius": 0.1}}], "must be numbers"),
    "zero quaternion": ([{"box": {"size": [1, 1, 1], "pose": [0, 0, 0, 0, 0, 0, 0]}}], "zero length"),
    "missing mesh": ([{"mesh": "nowhere.stl"}], "not found"),
    "mesh outside the folder": ([{"mesh": "../outside.stl"}], "outside the obstacle file's folder"),
    "absolute mesh path": ([{"mesh": "/etc/passwd"}], "outside the obstacle file's folder"),
    "junk mesh": ([{"mesh": "junk.stl"}], "mesh 'junk.stl' has no triangles"),
    "entity mesh": ([{"mesh": "bomb.dae"}], "DOCTYPE"),
    "not a list": ({"box": {"size": [1, 1, 1]}}, "needs a list"),
    "two primitives": ([{"box": {"size": [1, 1, 1]}, "sphere": {"center": [0, 0, 0], "radius": 1}}], "exactly one"),
    "unknown field": ([{"box": {"size": [1, 1, 1], "colour": "red"}}], "unknown 'colour'"),
    "deep nesting": ("[" * 100000 + "]" * 100000, "nested too deeply"),
    "not JSON": ("box 1 1 1", "not valid JSON"),
    "duplicate name": ([{"box": {"size": [1, 1, 1]}, "name": "a"}, {"box": {"size": [1, 1, 1]}, "name": "a"}], "taken"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_obstacle_files(tmp_path, case):
    items, words = HOSTILE[case]
    folder = tmp_path / "cell"
    folder.mkdir()
    (tmp_path / "outside.stl").write_bytes(b"solid x\nendsolid x\n")
    (folder / "junk.stl").write_bytes(b"\x00\x01 not a mesh at all" * 10)
    (folder / "bomb.dae").write_text('<?xml version="1.0"?><!DOCTYPE c [<!ENTITY a "aaaa">]><COLLADA>&a;</COLLADA>')
    path = write(folder, items)
    with pytest.raises(C.ObstacleFileError) as caught:
        C.load_obstacles(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and words in message, message


def test_symlinked_mesh_leading_out_is_refused(tmp_path):
    import trimesh

    outside = tmp_path / "outside.stl"
    trimesh.creation.box().export(outside)
    folder = tmp_path / "cell"
    folder.mkdir()
    (folder / "link.stl").symlink_to(outside)
    with pytest.raises(C.ObstacleFileError, match="outside the obstacle file's folder"):
        C.load_obstacles(write(folder, [{"mesh": "link.stl"}]))


def test_clearance_names_the_pairs(robots):
    robot = robots("panda")
    world = C.World((C.Sphere((0.3, 0.0, 0.6), 0.1, "ball"),))
    q = robot.zero_configuration()
    found = C.clearance(robot, q, C.Avoid(False, world, 0.0))
    assert found.pairs and all(b == "ball" for _, b, _ in found.pairs)
    assert math.isclose(found.min_m, min(d for _, _, d in found.pairs))
    assert found.describe(found.pairs[0]).endswith("vs obstacle ball")


def test_every_entry_point_avoids(robots):
    """solve_many (the bake's frame-by-frame path) and prepare(...).solve (live IK) take the
    avoiding solve too, and agree in verdict and reason. (Until #29 item 14 the avoiding descent
    stopped on the clock, and a loaded machine gave the entry points different reasons; it is
    bounded by iterations now.)"""
    from kinema_nodes.core.solve import prepare, solve_many

    robot = robots("panda")
    options = SolveOptions(backend="numpy", avoid=C.Avoid(True, WALL, 0.005))
    goals = [IKTarget(robot.tool_point, (0.55 + 0.05 * k, 0.0, 0.4), (0.0, 1.0, 0.0, 0.0)) for k in range(3)]
    start = robot.zero_configuration()
    many = solve_many(robot, goals, start, options)
    current = start
    for goal, result in zip(goals, many):
        alone = solve(robot, goal, current, options)
        assert result.min_clearance_m is not None and result.min_clearance_m >= 0
        assert result.converged == alone.converged and result.reason.split(":")[0] == alone.reason.split(":")[0]
        current = result.joints
    prepared = prepare(robot, [robot.tool_point], options)
    answer = prepared.solve([goals[0].position], [goals[0].wxyz], start)
    assert answer.min_clearance_m is not None and answer.reason.split(":")[0] == many[0].reason.split(":")[0]


def test_segment_distances_match_brute_force():
    """Segment to segment (a capsule's core), points included (a sphere is a segment of zero
    length, on either side), against a dense sampling of both segments: never above it."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        p1, q1, p2, q2 = rng.normal(size=(4, 3))
        if rng.random() < 0.3:
            q1 = p1.copy()
        if rng.random() < 0.3:
            q2 = p2.copy()
        ts = np.linspace(0, 1, 801)
        brute = np.min(np.linalg.norm((p1 + ts[:, None] * (q1 - p1))[:, None] - (p2 + ts[:, None] * (q2 - p2))[None], axis=2))
        found = C.capsule_pair_distances(p1, q1, 0.0, p2, q2, 0.0)
        assert found <= brute + 1e-12 and found >= brute - 2e-3 * (np.linalg.norm(q1 - p1) + np.linalg.norm(q2 - p2))


@pytest.mark.slow
def test_humanoid_hands_crossing_never_interpenetrate(robots):
    """TALOS's two hands cross in front of its chest over 8 frames (solve_many, arms only): the
    plain solve puts a hand into the other arm on later frames (per FCL); with self-avoidance
    no frame has any pair touching per FCL, and the frames past the crossing stop short, named."""
    robot = robots("talos")
    start = robot.zero_configuration()
    left, right = "gripper_left_base_link", "gripper_right_base_link"
    height = link_pose(robot, start, left)[2, 3] + 0.3
    held = robot.held_joints() | frozenset(n for n in robot.actuated_joint_names if "arm" not in n)
    frames = [[IKTarget(left, (0.35, 0.25 * (1 - 2 * s), height), (1.0, 0.0, 0.0, 0.0), 1.0, 0.0),
               IKTarget(right, (0.35, -0.25 * (1 - 2 * s), height), (1.0, 0.0, 0.0, 0.0), 1.0, 0.0)]
              for s in np.linspace(0, 1, 8)]
    fcl_check = checker(robot)
    from kinema_nodes.core.solve import solve_many

    plain = solve_many(robot, frames, start, SolveOptions(backend="numpy", held_joints=held))
    assert any(fcl_check.check(r.joints)[1] for r in plain)
    avoided = solve_many(robot, frames, start, SolveOptions(backend="numpy", held_joints=held, avoid=C.Avoid(True, None, 0.005)))
    for result in avoided:
        assert fcl_check.free(result.joints) and result.colliding == ()
        assert result.converged or result.reason.startswith("blocked by a collision: link ")
    assert avoided[0].converged and not avoided[-1].converged
