"""Moves between keys and the Tool's offset (#30 items 1 and 3), in core: the path maths
(core/paths.py) and a real solve of each frame on a 6-axis arm (UR5) and a 7-axis arm (Panda)
of example-robot-data, the tool point measured by yourdfpy's own FK of the solved joints.

Tolerances: a Linear move stays within 0.1 mm of its line; a Circular move's radius error is at
most 0.1 mm; the tool's speed away from the ramps is within 1 % of `cruise_speed`; the Tool's
offset is where the IK aims, to the solver's 1e-5 m / 1e-5 rad (checked at 2e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
from independent_fk import IndependentFK, pose_error

from kinema_nodes.core import paths
from kinema_nodes.core.graph.program import pose_to_target
from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

RAMP = 0.25
FRAMES = 49  # key at frame 0 and at frame 48: 48 frame steps


def _rotation(axis, angle):
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    half = angle / 2
    return paths.quaternion_matrix((np.cos(half), *(np.sin(half) * axis)))


def _pose(position, rotation):
    pose = np.eye(4)
    pose[:3, :3] = rotation
    pose[:3, 3] = position
    return pose


def test_progress_is_a_trapezoid_that_stops_at_both_keys():
    u = np.linspace(0, 1, 2001)
    s = np.array([paths.progress(x, RAMP) for x in u])
    assert s[0] == 0.0 and abs(s[-1] - 1.0) < 1e-12
    assert np.all(np.diff(s) >= 0)
    speed = np.diff(s) / np.diff(u)
    middle = (u[1:] > RAMP + 1e-3) & (u[:-1] < 1 - RAMP - 1e-3)
    assert np.allclose(speed[middle], 1 / (1 - RAMP), rtol=1e-9)
    assert speed[0] < 0.01 and speed[-1] < 0.01  # starts and stops (no jump in speed at a key)
    assert paths.progress(0.3, 0.0) == pytest.approx(0.3)  # no ramp: constant speed key to key


def test_linear_pose_is_on_the_line_with_the_shortest_arc_orientation():
    start = _pose((0.4, -0.2, 0.3), _rotation((0, 1, 0), 2.0))
    end = _pose((0.5, 0.25, 0.45), _rotation((1, 0, 1), -2.5))
    direction = (end[:3, 3] - start[:3, 3]) / np.linalg.norm(end[:3, 3] - start[:3, 3])
    angle_total = pose_error(start, end)[1]
    for u in np.linspace(0, 1, 17):
        pose = paths.linear_pose(start, end, u, RAMP)
        offset = pose[:3, 3] - start[:3, 3]
        assert np.linalg.norm(offset - np.dot(offset, direction) * direction) < 1e-12
        s = paths.progress(u, RAMP)
        # on the shortest arc: the angle from the start is s of the whole, and the rest is the remainder
        assert pose_error(start, pose)[1] == pytest.approx(s * angle_total, abs=1e-9)
        assert pose_error(pose, end)[1] == pytest.approx((1 - s) * angle_total, abs=1e-9)
    assert np.allclose(paths.linear_pose(start, end, 1.0, RAMP), _pose(end[:3, 3], end[:3, :3]), atol=1e-12)


def test_circle_through_three_points():
    centre, radius = np.array([0.5, 0.1, 0.4]), 0.12
    e1, e2 = np.array([1.0, 0, 0]), np.array([0, 0.6, 0.8])
    point = lambda t: centre + radius * (np.cos(t) * e1 + np.sin(t) * e2)  # noqa: E731
    found = paths.circle(point(0.3), point(1.9), point(4.0))
    assert found is not None
    c, r, _, _, sweep = found
    assert np.allclose(c, centre, atol=1e-12) and r == pytest.approx(radius, abs=1e-12)
    assert sweep == pytest.approx(3.7, abs=1e-12)  # through the via point: the long way round here
    assert paths.circle((0, 0, 0), (1, 1, 1), (2, 2, 2)) is None  # on one line: no circle
    start, end = _pose(point(0.3), np.eye(3)), _pose(point(4.0), np.eye(3))
    for u in np.linspace(0, 1, 11):
        p = paths.circular_pose(start, end, point(1.9), u, RAMP)[:3, 3]
        assert abs(np.linalg.norm(p - centre) - radius) < 1e-12
        assert abs(np.dot(p - centre, np.cross(e1, e2))) < 1e-12


def test_segment_of_keys():
    keys = [1, 10, 30]
    assert paths.segment_of(keys, 0) is None and paths.segment_of(keys, 30) is None
    assert paths.segment_of(keys, 1) == 0 and paths.segment_of(keys, 9.5) == 0 and paths.segment_of(keys, 10) == 1


def test_tool_offset_link_goal_round_trip():
    offset = paths.tool_offset((0.01, -0.02, 0.15), paths.matrix_quaternion(_rotation((1, 2, 3), 0.7)))
    control = _pose((0.3, 0.2, 0.5), _rotation((0, 0, 1), 1.0))
    assert np.allclose(paths.link_goal(control, offset) @ offset, control, atol=1e-12)


# ---- real robots: solve each frame, measure the tool point with the robot's own FK --------------

CASES = {
    # robot, link, tool offset from it, start and end of the move (root frame), via point
    "ur5": ("wrist_3_link", ((0.0, 0.12, 0.02), (0.7071068, -0.7071068, 0.0, 0.0)),
            ((0.45, -0.15, 0.35), (0.45, 0.2, 0.5)), (0.5, 0.05, 0.5)),
    "panda": ("panda_link8", ((0.0, 0.0, 0.16), (0.9238795, 0.0, 0.0, -0.3826834)),
              ((0.45, -0.2, 0.35), (0.5, 0.15, 0.45)), (0.55, 0.0, 0.5)),
}


def _solve_move(robot, link, offset, move, start, end, via):
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True), max_iterations=200, budget_ms=2000.0)
    current = robot.zero_configuration()
    poses, joints = [], []
    for frame in range(FRAMES):
        tool = paths.move_pose(move, start, end, frame / (FRAMES - 1), RAMP, via)
        position, wxyz = pose_to_target(paths.link_goal(tool, offset))
        result = solve(robot, [IKTarget(link, tuple(position), tuple(wxyz))], current, options)
        assert result.converged, f"frame {frame}: {result.reason}"
        current = np.asarray(result.joints)
        poses.append(tool)
        joints.append(current)
    return poses, joints


def _measured_tool_points(robot, link, offset, joints):
    fk = IndependentFK(robot)
    return [fk.pose(q, link) @ offset for q in joints]


def _start_end(robot_name):
    _, _, (a, b), _ = CASES[robot_name]
    start = _pose(a, _rotation((1, 0, 0), np.pi) @ _rotation((0, 0, 1), 0.3))
    end = _pose(b, _rotation((1, 0, 0), np.pi) @ _rotation((0, 1, 0), 0.4))
    return start, end


def _cruise_frames():
    u = np.arange(FRAMES) / (FRAMES - 1)
    return [i for i in range(FRAMES - 1) if u[i] >= RAMP and u[i + 1] <= 1 - RAMP]


@pytest.mark.parametrize("name", sorted(CASES))
def test_linear_move_on_a_real_arm_is_straight_at_constant_speed(robots, name):
    robot = robots(name)
    link, (location, wxyz), _, _ = CASES[name]
    offset = paths.tool_offset(location, wxyz)
    start, end = _start_end(name)
    wanted, joints = _solve_move(robot, link, offset, "LINEAR", start, end, None)
    measured = _measured_tool_points(robot, link, offset, joints)
    for want, got in zip(wanted, measured):  # the Tool's offset is where the IK aims
        position, angle = pose_error(want, got)
        assert position < 2e-5 and angle < 2e-5
    a, b = start[:3, 3], end[:3, 3]
    direction = (b - a) / np.linalg.norm(b - a)
    deviation = max(np.linalg.norm((p[:3, 3] - a) - np.dot(p[:3, 3] - a, direction) * direction) for p in measured)
    assert deviation <= 1e-4, f"{deviation * 1e3:.4f} mm off the line"
    cruise = paths.cruise_speed(np.linalg.norm(b - a), FRAMES - 1, RAMP)  # metres per frame
    speeds = [np.linalg.norm(measured[i + 1][:3, 3] - measured[i][:3, 3]) for i in _cruise_frames()]
    assert len(speeds) >= 20
    assert max(abs(s / cruise - 1) for s in speeds) <= 0.01


@pytest.mark.parametrize("name", sorted(CASES))
def test_circular_move_on_a_real_arm_keeps_its_radius(robots, name):
    robot = robots(name)
    link, (location, wxyz), _, via = CASES[name]
    offset = paths.tool_offset(location, wxyz)
    start, end = _start_end(name)
    _, joints = _solve_move(robot, link, offset, "CIRCULAR", start, end, via)
    measured = _measured_tool_points(robot, link, offset, joints)
    centre, radius, _, _, sweep = paths.circle(start[:3, 3], via, end[:3, 3])
    error = max(abs(np.linalg.norm(p[:3, 3] - centre) - radius) for p in measured)
    assert error <= 1e-4, f"radius error {error * 1e3:.4f} mm"
    assert np.linalg.norm(measured[-1][:3, 3] - end[:3, 3]) < 2e-5
    assert min(np.linalg.norm(p[:3, 3] - np.asarray(via)) for p in measured) < radius * sweep / (FRAMES - 1)  # passes the via point
    cruise = paths.cruise_speed(radius * sweep, FRAMES - 1, RAMP)
    speeds = [np.linalg.norm(measured[i + 1][:3, 3] - measured[i][:3, 3]) for i in _cruise_frames()]
    assert max(abs(s / cruise - 1) for s in speeds) <= 0.01  # chords of a short arc: 0.05 % shorter at most


# ---- Follow Path -------------------------------------------------------------------------------

def _circle_points(radius, count, centre=(0.5, 0.0, 0.3)):
    t = np.linspace(0, 2 * np.pi, count + 1)
    return np.stack([centre[0] + radius * np.cos(t), centre[1] + radius * np.sin(t), np.full_like(t, centre[2])], axis=1)


def test_follow_path_runs_at_the_set_speed_between_ramps_and_stays_on_the_path():
    radius, fps, speed, ramp = 0.1, 24.0, 0.05, 0.2
    path = paths.PolylinePath(_circle_points(radius, 256))
    assert path.length == pytest.approx(2 * np.pi * radius, rel=1e-4)  # 256 chords of a circle
    seconds = path.length / ((1 - ramp) * speed)
    frames = np.arange(0, int(np.ceil(seconds * fps)) + 2)
    d = np.array([paths.path_distance(path.length, "SPEED", f, 0, fps, speed, ramp) for f in frames])
    assert d[0] == 0.0 and d[-1] == pytest.approx(path.length)
    points = np.array([path.at(x)[0] for x in d])
    sagitta = radius * (1 - np.cos(np.pi / 256))
    assert np.max(np.abs(np.linalg.norm(points[:, :2] - (0.5, 0.0), axis=1) - radius)) <= sagitta + 1e-12
    u = frames / (seconds * fps)
    cruise = [i for i in range(len(frames) - 1) if u[i] >= ramp and u[i + 1] <= 1 - ramp]
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1) * fps
    assert max(abs(steps[i] / speed - 1) for i in cruise) < 1e-3  # chords across a sample point: 1e-4 shorter at most
    assert paths.path_distance(path.length, "PROGRESS", 7, 0, fps, speed, ramp, 0.25) == pytest.approx(path.length / 4)


def test_follow_path_tangent_orientation_turns_with_the_path_and_keep_does_not():
    path = paths.PolylinePath(_circle_points(0.1, 256))
    base = _rotation((1, 0, 0), np.pi)
    for distance in np.linspace(0, path.length, 9):
        kept = paths.follow_pose(path, distance, base, "KEEP")
        assert np.allclose(kept[:3, :3], base, atol=1e-12)
        turned = paths.follow_pose(path, distance, base, "TANGENT")
        angle = distance / 0.1  # a quarter of the way round: a quarter turn about the circle's axis
        expected = _rotation((0, 0, 1), angle) @ base
        assert pose_error(turned, _pose(turned[:3, 3], expected))[1] < 2 * np.pi / 256 + 1e-9  # within one chord's turn
    # continuous: neighbouring distances turn by little
    a = paths.follow_pose(path, 0.2, base, "TANGENT")
    b = paths.follow_pose(path, 0.2 + 1e-4, base, "TANGENT")
    assert pose_error(a, b)[1] < 2e-3


def test_approach_and_retract_along_the_tool_axis():
    points = _circle_points(0.1, 16)[:5]
    axis = np.array([0.0, 0.0, 2.0])  # any length: the tool's Z
    both = paths.with_approach(points, axis, 0.05, 0.03)
    assert np.allclose(both[0], points[0] - (0, 0, 0.05)) and np.allclose(both[-1], points[-1] - (0, 0, 0.03))
    assert np.array_equal(both[1:-1], points)
    assert np.array_equal(paths.with_approach(points, axis, 0.0, 0.0), points)


def test_edge_loop_order_follows_the_edges_not_the_vertex_numbers():
    assert paths.edge_loop_order(4, [(2, 0), (3, 1), (0, 3)]) == [1, 3, 0, 2]  # an open chain, from its lower end
    assert paths.edge_loop_order(4, [(0, 2), (2, 1), (1, 3), (3, 0)]) == [0, 2, 1, 3, 0]  # a loop, closed
    with pytest.raises(ValueError, match="branch"):
        paths.edge_loop_order(4, [(0, 1), (0, 2), (0, 3)])
    with pytest.raises(ValueError, match="pieces"):
        paths.edge_loop_order(4, [(0, 1), (2, 3)])
