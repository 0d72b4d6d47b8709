"""MJCF robots on first contact (#29 items 16 and 20), on robosuite models the suite did not use
for these items (Tiago, Spot Arm, Baxter, GR1), with poses judged by MuJoCo's `mj_kinematics`.

- 16: an MJCF joint has no speed limit unless a velocity actuator gives one. Without one, a
  1 cm move over 40 frames bakes with nothing flagged "too fast", Check Limits checks no
  velocity and the export's limits say none; with velocity actuators, their control range over
  their gear is the limit, and the bake and Check Limits flag the same frames.
- 20: joint equalities that chain (a joint following one that follows another) load, each
  resolved to its root joint with the multipliers and offsets composed, and FK matches MuJoCo
  with the equalities satisfied.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.shot.limits import check_limits, limits_for

mujoco = pytest.importorskip("mujoco")


def robosuite_robot(name: str) -> Path:
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "robots" / name / "robot.xml"


def _link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def edited_copy(tmp_path: Path, name: str, edit) -> Path:
    """robosuite's `name` model with `edit(text)` applied, in a copy of its folder (meshes are
    read only from inside a robot's folders)."""
    source = robosuite_robot(name)
    folder = tmp_path / name
    shutil.copytree(source.parent, folder, copy_function=_link_or_copy)
    path = folder / "robot.xml"
    path.unlink()
    path.write_text(edit(source.read_text()))
    return path


# ---- 16: missing limits are "no limit" -------------------------------------------------------

def kinema(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("name", ["tiago", "spot_arm"])
def test_an_mjcf_robot_without_speed_limits_bakes_a_small_move_with_nothing_flagged(name, tmp_path):
    path = robosuite_robot(name)
    robot = load_robot(path)
    assert np.all(np.isinf(robot.velocity_limits))
    assert all(j.velocity == np.inf for j in robot.joints if j.is_movable)
    assert 'velocity="0"' not in robot.urdf_text
    info = json.loads(kinema("info", str(path), "--json").stdout)
    assert all(j["velocity"] is None for j in info["joints"] if j["type"] != "fixed")

    # the tool point where the bake starts (each joint mid-range), moved 1 cm over 40 frames
    start = robot.mid_configuration()
    pose = link_pose(robot, start, robot.tool_point)
    targets = tmp_path / "targets.csv"
    with targets.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frame", "x", "y", "z", "qw", "qx", "qy", "qz"])
        for frame in (1, 40):
            shift = np.array([0.0, 0.0, 0.01 * (frame - 1) / 39])
            writer.writerow([frame, *(pose[:3, 3] + shift), *matrix_to_quaternion(pose)])
    joints_out = tmp_path / "joints.csv"
    result = kinema("bake", str(path), "--targets", str(targets), "--out", str(tmp_path / "shot.blend"),
                    "--joints-out", str(joints_out), "--solver", "numpy", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["status"] == "ok" and payload["frames"] == 40 and not payload["flagged"], payload

    # Check Limits on the same motion: no velocity to check, nothing flagged; the export says none
    rows = np.loadtxt(joints_out, delimiter=",", skiprows=1, ndmin=2)
    limits = limits_for(robot)
    assert not limits.checked("velocity")
    assert all(v is None for v in limits.to_dict()["velocity"]["per_joint"].values())
    assert not check_limits(rows[:, 0], rows[:, 1:1 + robot.dof], limits, fps=24.0).flagged


def with_velocity_servos(text: str, speeds: dict[str, tuple[float, float]]) -> str:
    """The model with a velocity actuator (target speed range, gear) on each named joint."""
    servos = "".join(f'<velocity joint="{joint}" kv="10" ctrlrange="-{speed} {speed}" gear="{gear}"/>'
                     for joint, (speed, gear) in speeds.items())
    return text.replace("</mujoco>", f"<actuator>{servos}</actuator></mujoco>")


@pytest.mark.parametrize("name, speeds", [
    ("spot_arm", {"arm_sh0": (2.0, 1.0), "arm_el0": (3.0, 2.0), "arm_wr1": (4.0, 0.5)}),
    ("tiago", {"torso_lift_joint": (0.07, 1.0), "arm_right_4_joint": (2.0, 4.0)}),
])
def test_velocity_actuators_give_the_speed_limit_and_bake_and_check_limits_agree(name, speeds, tmp_path):
    from kinema_nodes.core.shot.bake import BakeSolution, check_bake

    robot = load_robot(edited_copy(tmp_path, name, lambda text: with_velocity_servos(text, speeds)))
    expected = {joint: speed / gear for joint, (speed, gear) in speeds.items()}
    for joint in robot.actuated_joints:
        assert joint.velocity == pytest.approx(expected.get(joint.name, np.inf), rel=1e-12)

    # each servoed joint moves at 1.5x its limit over frames 10-12 (24 fps); all else still
    fps, count = 24.0, 20
    q = np.tile(robot.mid_configuration(), (count, 1))
    fast = [robot.joint_index(joint) for joint in speeds]
    for k in range(10, 13):
        q[k:, fast] += 1.5 * np.array([expected[robot.actuated_joint_names[i]] for i in fast]) / fps
    frames = np.arange(1, count + 1, dtype=float)
    solution = BakeSolution(
        robot=robot, frames=frames, joints=q, converged=np.ones(count, bool), position_error=np.zeros(count),
        rotation_error=np.zeros(count), links=[(robot.tool_point,)] * count, active=np.ones((count, robot.dof), bool),
        targets=np.tile(np.eye(4), (count, 1, 1, 1)), summaries=[""] * count, milliseconds=np.zeros(count))
    baked = check_bake(solution, fps=fps)
    checked = check_limits(frames, q, limits_for(robot), fps=fps)
    assert sorted(baked.too_fast) == [11, 12, 13]
    assert all(set(baked.too_fast[f]) == set(speeds) for f in baked.too_fast)
    velocity = {int(f) for v in checked.violations["velocity"] for f in v.frames}
    assert velocity == {11, 12, 13}
    assert {v.joint for v in checked.violations["velocity"]} == set(speeds)


# ---- 20: chains of joint couplings ----------------------------------------------------------

def with_couplings(text: str, couplings: list[tuple[str, str, float, float]]) -> str:
    """The model with `<equality><joint joint1 joint2 polycoef="offset multiplier 0 0 0">` each."""
    rows = "".join(f'<joint joint1="{a}" joint2="{b}" polycoef="{offset} {multiplier} 0 0 0"/>'
                   for a, b, offset, multiplier in couplings)
    return text.replace("</mujoco>", f"<equality>{rows}</equality></mujoco>")


CHAINS = {
    # the humanoid: head pitch follows head roll, which follows head yaw, which follows the waist's yaw
    "gr1": [("head_pitch", "head_roll", 0.1, 0.5), ("head_roll", "head_yaw", -0.05, -2.0),
            ("head_yaw", "torso_waist_yaw", 0.0, 0.3)],
    # the mobile manipulator, links written follower-first and leader-first
    "tiago": [("arm_left_3_joint", "arm_left_2_joint", 0.2, -1.0), ("head_2_joint", "head_1_joint", 0.0, 0.5),
              ("arm_left_2_joint", "arm_left_1_joint", -0.1, 0.7), ("head_1_joint", "arm_left_1_joint", 0.05, 1.0)],
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chained_joint_couplings_load_as_mimics_of_the_root_joint_and_match_mujoco(name, tmp_path):
    path = edited_copy(tmp_path, name, lambda text: with_couplings(text, CHAINS[name]))
    robot = load_robot(path)
    followers = {a for a, *_ in CHAINS[name]}
    leaders = {b for _, b, *_ in CHAINS[name]}
    roots = leaders - followers
    for joint in followers:
        mimic = robot.joint_by_name[joint].mimic
        assert mimic is not None and mimic.joint in roots and robot.joint_by_name[mimic.joint].is_actuated
        assert joint not in robot.actuated_joint_names

    # MuJoCo's judgement: with the followers where our mimics put them, every equality holds
    # (efc_pos of the equality rows: their violation) and every body sits where our FK says.
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(29)
    worst_equality = worst_pose = 0.0
    for _ in range(20):
        q = rng.uniform(np.maximum(robot.lower, -2.0), np.minimum(robot.upper, 2.0))
        values = dict(zip(robot.actuated_joint_names, q))
        data.qpos[:] = model.qpos0
        for joint in robot.joints:
            if joint.is_movable:
                mimic = joint.mimic
                value = values[joint.name] if mimic is None else mimic.offset + mimic.multiplier * values[mimic.joint]
                address = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)]
                data.qpos[address] = model.qpos0[address] + value
        mujoco.mj_forward(model, data)
        rows = data.efc_type[: data.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY
        assert rows.sum() == len(CHAINS[name])
        worst_equality = max(worst_equality, float(np.abs(data.efc_pos[: data.nefc][rows]).max()))
        for b in range(1, model.nbody):
            link = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
            ours = link_pose(robot, q, link)
            rotation = np.empty(9)
            mujoco.mju_quat2Mat(rotation, data.xquat[b])
            theirs_root = np.eye(4)
            theirs_root[:3, :3], theirs_root[:3, 3] = rotation.reshape(3, 3), data.xpos[b]
            worst_pose = max(worst_pose, float(np.abs(ours - theirs_root).max()))
    assert worst_equality <= 1e-12
    assert worst_pose <= 1e-9


_TWO_HINGES = """<mujoco model="two_hinges">{compiler}
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 0 1" range="{low} {high}"/>
      <geom type="capsule" size="0.02" fromto="0 0 0 0.2 0 0"/>
      <body name="lower" pos="0.2 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="{low} {high}"/>
        <geom type="capsule" size="0.02" fromto="0 0 0 0.2 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize(("compiler", "low", "high", "noted"), [
    ("", -3.14, 3.14, True),  # radians written, no angle unit: MuJoCo reads +-3.14 degrees
    ('\n  <compiler angle="radian"/>', -3.14, 3.14, False),
    ("", -90, 90, False),  # degrees, meant as degrees
])
def test_an_mjcf_whose_ranges_look_like_radians_read_as_degrees_says_what_to_change(compiler, low, high, noted, tmp_path):
    """MuJoCo reads angles in degrees unless `<compiler angle="radian"/>` says otherwise; a file
    written in radians without it imports with every hinge within +-3.14 degrees, an arm that
    can hardly move. The import keeps MuJoCo's reading (the ranges are as MuJoCo compiles them)
    and its notes say what to change; a file in radians or in real degrees gets no such note.
    And robosuite-models' ALOHA (its compiler line commented out) gets the note."""
    from kinema_nodes.core.model.mjcf import urdf_from_mjcf

    path = tmp_path / "two_hinges.xml"
    path.write_text(_TWO_HINGES.format(compiler=compiler, low=low, high=high))
    robot = load_robot(path)
    expected = np.radians([low, high]) if not compiler else np.array([low, high])
    np.testing.assert_allclose([robot.lower[0], robot.upper[0]], expected, rtol=0, atol=1e-12)
    notes = [note for note in urdf_from_mjcf(path)[1] if '<compiler angle="radian"/>' in note]
    assert bool(notes) == noted, notes
    if noted:
        from kinema_nodes.core.model.mjcf import ATTENTION

        assert notes[0].startswith(ATTENTION) and "±3.14°" in notes[0], notes  # the import reports it as a warning
    from kinema_nodes.core.model.loading import find_urdf

    aloha = [note for note in urdf_from_mjcf(find_urdf("robosuite_aloha"))[1] if '<compiler angle="radian"/>' in note]
    assert len(aloha) == 1, aloha
