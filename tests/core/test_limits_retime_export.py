"""Limits, retime and exports on real robots (UR10 and Unitree Z1 from example-robot-data),
each checked against something that is not the code under test: finite differences written
out here, yourdfpy's FK, MuJoCo's FK, and each format's own reader (rosbags, csv, json, numpy)."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.shot.export import (read_ros2, trajectory_for, write_csv, write_json, write_mujoco, write_ros2)
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.shot.retime import retime
from kinema_nodes.core.shot.limits import Limits, check_limits, derivatives, limits_for

FPS = 24.0


def smooth_path(robot, frames: int, amplitude: float = 0.4, turns: float = 1.0, seed: int = 3) -> np.ndarray:
    """A smooth joint path inside the limits: a few slow sine waves around mid-range."""
    rng = np.random.default_rng(seed)
    s = np.linspace(0.0, 1.0, frames)[:, None]
    middle = np.clip(robot.mid_configuration(), -1.0, 1.0)
    phase = rng.uniform(0, 2 * np.pi, robot.dof)
    return middle + amplitude * np.sin(2 * np.pi * turns * s + phase) * np.where(robot.is_prismatic, 0.01, 1.0)


# ---- limits -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ur10", "z1"])
def test_one_frame_too_fast_is_flagged_on_that_joint_and_that_frame_only(robots, name):
    robot = robots(name)
    frames = np.arange(1, 121)
    q = smooth_path(robot, len(frames), amplitude=0.3)
    limits = limits_for(robot)
    assert not check_limits(frames, q, limits, FPS).violations["velocity"], "the clean path must pass"
    joint, at = 2, 60  # the step into frame index 60 (frame 61) is too far
    too_far = 1.5 * robot.velocity_limits[joint] / FPS
    q[at:, joint] += too_far
    report = check_limits(frames, q, limits, FPS)
    velocity = report.violations["velocity"]
    assert [(v.joint, v.frames) for v in velocity] == [(robot.actuated_joint_names[joint], [int(frames[at])])]
    assert velocity[0].worst > velocity[0].limit == pytest.approx(robot.velocity_limits[joint])


def test_margin_scales_every_limit_and_zero_means_none(robots):
    robot = robots("ur10")
    limits = limits_for(robot, max_acceleration=10.0, max_jerk=100.0, jerk={"wrist_3_joint": 0}, margin_percent=20)
    assert np.allclose(limits.effective("velocity"), 0.8 * robot.velocity_limits)
    assert np.allclose(limits.effective("acceleration"), 8.0)
    assert np.isinf(limits.effective("jerk")[-1]) and np.allclose(limits.effective("jerk")[:-1], 80.0)
    frames = np.arange(40)
    q = np.zeros((40, robot.dof))
    q[:, 0] = 0.9 * robot.velocity_limits[0] / FPS * frames  # 90 % of the URDF speed: over 80 %
    report = check_limits(frames, q, limits, FPS)
    assert [v.joint for v in report.violations["velocity"]] == ["shoulder_pan_joint"]
    assert report.violations["velocity"][0].frames == list(range(1, 40))
    assert check_limits(frames, q, limits_for(robot, margin_percent=5), FPS).flagged is False
    for bad in (-1, 100, float("nan")):
        with pytest.raises(KinemaError):
            limits_for(robot, margin_percent=bad)
    with pytest.raises(KinemaError, match="unknown joint"):
        limits_for(robot, acceleration={"no_such_joint": 1.0})


def test_derivatives_are_exact_for_polynomials_up_to_the_ends():
    """Consistent at the ends: a straight line has its speed on every frame, a parabola its
    acceleration, a cubic its jerk — first and last frames included."""
    t = np.arange(30) / FPS
    d = derivatives(np.column_stack([2.0 * t, 3.0 * t ** 2, 5.0 * t ** 3]), FPS)
    assert np.allclose(d.velocity[:, 0], 2.0)
    assert np.allclose(d.acceleration[:, 1], 6.0)
    assert np.allclose(d.jerk[:, 2], 30.0)
    assert np.allclose(d.acceleration[:, 0], 0.0) and np.allclose(d.jerk[:, 1], 0.0, atol=1e-6)


# ---- retime -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ur10", "z1"])
def test_retimed_path_stays_within_the_limits_by_our_own_finite_differences(robots, name):
    robot = robots(name)
    frames = np.arange(1, 241).astype(float)
    moving = smooth_path(robot, len(frames) - 29, amplitude=0.8, turns=1.5)
    q = np.concatenate([moving[:101], np.repeat(moving[100:101], 29, axis=0), moving[101:]])  # a hold: no path, no time
    limits = limits_for(robot, max_acceleration=4.0, margin_percent=10)
    result = retime(frames, q, limits, FPS)
    out = result.joints
    # our own differences, not toppra's: speed of each step and change of speed at each frame
    speed = np.abs(np.diff(out, axis=0)) * FPS
    acceleration = np.abs(out[2:] - 2 * out[1:-1] + out[:-2]) * FPS ** 2
    assert np.all(speed <= limits.effective("velocity") * 1.001)
    assert np.all(acceleration <= limits.effective("acceleration") * 1.001)
    # tight: something hits a limit (time-optimal), not merely slow
    assert max((speed / limits.effective("velocity")).max(), (acceleration / limits.effective("acceleration")).max()) > 0.95
    # the same path: same ends, source frames in order, and each sample on the original path
    assert np.allclose(out[0], q[0]) and np.allclose(out[-1], q[-1])
    assert np.all(np.diff(result.source_frames) >= -1e-9)
    on_path = np.array([np.interp(result.source_frames, frames, q[:, j]) for j in range(robot.dof)]).T
    assert np.abs(out - on_path).max() < 2e-3  # spline through the frames vs straight segments between them
    assert result.duration_s >= result.optimal_duration_s - 1e-12
    assert result.duration_s - result.optimal_duration_s <= 1.0 / FPS + 1e-2 * result.optimal_duration_s


def test_retime_stops_where_the_path_turns_back_and_stays_on_it(robots):
    """Out and back along one line: a spline across the turn would overshoot it."""
    robot = robots("ur10")
    frames = np.arange(120.0)
    direction = np.linspace(1.0, 0.3, robot.dof)
    q = 0.6 * np.sin(np.pi * frames / 119.0)[:, None] * direction
    result = retime(frames, q, limits_for(robot, max_acceleration=6.0), FPS)
    reach = np.abs(result.joints / direction).max()
    assert reach <= 0.6 + 1e-9  # never past the turning point
    on_path = np.array([np.interp(result.source_frames, frames, q[:, j]) for j in range(robot.dof)]).T
    assert np.abs(result.joints - on_path).max() < 1e-3
    acceleration = np.abs(np.diff(result.joints, n=2, axis=0)) * FPS ** 2
    assert np.all(acceleration <= 6.0 * 1.001)


def test_retime_refuses_without_acceleration_limits_and_on_a_still_path(robots):
    robot = robots("ur10")
    q = smooth_path(robot, 50)
    with pytest.raises(KinemaError, match="acceleration"):
        retime(np.arange(50.0), q, limits_for(robot), FPS)
    with pytest.raises(KinemaError, match="does not move"):
        retime(np.arange(50.0), np.repeat(q[:1], 50, axis=0), limits_for(robot, max_acceleration=5.0), FPS)


# ---- exports ----------------------------------------------------------------------------------

def _yourdfpy(robot):
    import yourdfpy

    return yourdfpy.URDF.load(str(robot.path), build_scene_graph=True, load_meshes=False)


@pytest.fixture
def ur10_trajectory(robots):
    robot = robots("ur10")
    frames = np.arange(10, 70)
    q = smooth_path(robot, len(frames))
    limits = limits_for(robot, max_acceleration=8.0)
    report = check_limits(frames, q, limits, FPS)
    return robot, trajectory_for(robot, robot.path.read_text(), frames, q, FPS, limits, report)


def test_csv_replayed_through_yourdfpy_reproduces_the_tool_path(ur10_trajectory, tmp_path):
    robot, trajectory = ur10_trajectory
    out = write_csv(tmp_path / "shot.csv", trajectory)
    with out.open() as handle:
        comment = handle.readline()
        rows = list(csv.reader(handle))
    assert comment.startswith("# robot: ur10; fps: 24;") and "rad" in comment
    assert rows[0] == ["time_s", *robot.actuated_joint_names]
    table = np.array(rows[1:], dtype=float)
    assert np.allclose(table[:, 0], (np.arange(60)) / FPS)
    urdf = _yourdfpy(robot)
    tool = robot.tool_point
    for row, q in zip(table, trajectory.joints):
        urdf.update_cfg(dict(zip(rows[0][1:], row[1:])))
        theirs = urdf.get_transform(tool, urdf.base_link)
        ours = link_pose(robot, q, tool)
        assert np.abs(theirs[:3, 3] - ours[:3, 3]).max() < 1e-6


def test_json_carries_names_units_rate_limits_and_the_urdf_hash(ur10_trajectory, tmp_path):
    import hashlib

    robot, trajectory = ur10_trajectory
    data = json.loads(write_json(tmp_path / "shot.json", trajectory, velocities=True).read_text())
    assert data["robot"] == "ur10" and data["fps"] == FPS
    assert data["urdf_sha256"] == hashlib.sha256(robot.path.read_bytes()).hexdigest()
    assert data["joint_names"] == robot.actuated_joint_names
    assert set(data["units"].values()) == {"rad"}
    assert data["limits_checked"] is True and data["limits"]["acceleration"]["checked"] is True
    assert data["limits"]["jerk"]["checked"] is False
    assert np.allclose(data["positions"], trajectory.joints)
    assert np.allclose(np.array(data["velocities"])[1:], np.diff(trajectory.joints, axis=0) * FPS)


def test_rosbag2_read_back_with_rosbags_holds_the_same_positions_and_stamps(ur10_trajectory, tmp_path):
    robot, trajectory = ur10_trajectory
    bag, yaml_path = write_ros2(tmp_path / "shot_bag", trajectory, topic="/arm/joint_trajectory")
    messages = read_ros2(bag, "/arm/joint_trajectory")
    assert len(messages) == 1
    message = messages[0]
    assert list(message.joint_names) == robot.actuated_joint_names
    positions = np.array([p.positions for p in message.points])
    stamps = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in message.points])
    assert np.array_equal(positions, trajectory.joints)
    assert np.abs(stamps - trajectory.times).max() < 1e-9
    from ruamel.yaml import YAML

    document = YAML(typ="safe").load(yaml_path.read_text())
    assert document["joint_names"] == robot.actuated_joint_names
    assert np.array_equal(np.array([p["positions"] for p in document["points"]]), trajectory.joints)
    # the bag's bytes are exactly what rosbags itself serialises for the same message
    from kinema_nodes.core.shot.export import joint_trajectory_cdr, joint_trajectory_message

    for frame_id in ("", "ba", "base"):  # header lengths that shift the points' alignment
        for velocities in (True, False):
            store, reference = joint_trajectory_message(trajectory, velocities, frame_id)
            assert joint_trajectory_cdr(trajectory, velocities, frame_id) == store.serialize_cdr(
                reference, "trajectory_msgs/msg/JointTrajectory"), (frame_id, velocities)
    # a second export replaces the bag whole, when told to (--force)
    write_ros2(tmp_path / "shot_bag", trajectory, topic="/arm/joint_trajectory", force=True)
    assert len(read_ros2(bag, "/arm/joint_trajectory")) == 1
    with pytest.raises(KinemaError, match="topic"):
        write_ros2(tmp_path / "other", trajectory, topic="no slash")
    assert not (tmp_path / "other").exists()


def mjcf_from_urdf(robot, folder, extra_body: bool = True):
    """A MuJoCo model of the robot, compiled from its URDF by MuJoCo itself (meshes left out),
    with a free-floating box before it so the arm's qpos does not start at 0."""
    import mujoco

    text = robot.path.read_text()
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", text, flags=re.S)
    text = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler fusestatic="false"/></mujoco>', text, count=1)
    model = mujoco.MjModel.from_xml_string(text)
    path = folder / f"{robot.name}.xml"
    mujoco.mj_saveLastXML(str(path), model)
    if extra_body:
        xml = path.read_text().replace(
            "<worldbody>", '<worldbody><body name="box" pos="1 1 0"><freejoint name="box_free"/>'
            '<geom type="box" size=".1 .1 .1"/></body>', 1)
        path.write_text(xml)
    return path


def test_mujoco_qpos_follows_the_models_joint_order_and_mujoco_fk_agrees(ur10_trajectory, tmp_path):
    import mujoco

    robot, trajectory = ur10_trajectory
    model_path = mjcf_from_urdf(robot, tmp_path)
    out, _ = write_mujoco(tmp_path / "shot.npz", trajectory, model_path)
    data = np.load(out)
    assert data["qpos"].shape == (60, 13)  # 7 for the free box, then the arm
    names = list(data["joint_names"])
    assert names[0] == "box_free" and names[1:] == robot.actuated_joint_names
    assert list(data["qpos_address"]) == [0, 7, 8, 9, 10, 11, 12]
    model = mujoco.MjModel.from_xml_path(str(model_path))
    state = mujoco.MjData(model)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "wrist_3_link")
    for qpos, q in zip(data["qpos"], trajectory.joints):
        state.qpos[:] = qpos
        mujoco.mj_kinematics(model, state)
        ours = link_pose(robot, q, "wrist_3_link")
        assert np.abs(state.xpos[body] - ours[:3, 3]).max() < 1e-6
    with pytest.raises(KinemaError, match="none of its joints"):
        other = tmp_path / "other.xml"
        other.write_text('<mujoco><worldbody><body><joint name="x"/><geom size=".1"/></body></worldbody></mujoco>')
        write_mujoco(tmp_path / "other.npz", trajectory, other)
    assert not (tmp_path / "other.npz").exists()


def test_trajectory_refuses_nan_and_empty(robots):
    robot = robots("ur10")
    q = np.zeros((3, robot.dof))
    q[1, 2] = np.nan
    with pytest.raises(KinemaError, match="non-finite"):
        trajectory_for(robot, "", np.arange(3), q, FPS)
    with pytest.raises(KinemaError, match="no frames"):
        trajectory_for(robot, "", np.arange(0), np.zeros((0, robot.dof)), FPS)
    with pytest.raises(KinemaError):
        Limits(("a",), np.array([1.0]), np.array([-1.0]), np.array([np.inf]))
