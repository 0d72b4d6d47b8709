"""MJCF robots (#16 item 3), checked against MuJoCo's own forward kinematics.

- robosuite's Panda, Sawyer, IIWA, UR5e, Jaco and Kinova3 and robosuite-models' YuMi, ALOHA,
  PR2, Z1, ARX5 and ViperX (real MJCF with meshes): every body's pose from our FK matches
  `mj_kinematics` (data.xpos / data.xquat) within 1e-9 over 1,000 random configurations each
  (the YuMi has bodies turned by pitch pi/2 to 1e-12, where roll-pitch-yaw is ill-conditioned:
  it was 1.1e-5 rad off until the conversion read roll and pitch after yaw);
- MJCF that MuJoCo itself writes (`mj_saveLastXML`) from example-robot-data URDFs: our FK
  matches MuJoCo's on the written file within 1e-9, and yourdfpy's FK of the source URDF
  within 1e-5 — the bound of MuJoCo's XML writer, which rounds numbers to about 7 digits (the
  in-memory model compiled from the URDF agrees with yourdfpy to 1e-12, asserted too);
- mesh placement: the vertices we place match MuJoCo's compiled (re-centred) mesh vertices;
- equality couplings become mimic joints; ball joints and compiler errors are one line.
"""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.kinematics import link_poses
from kinema_nodes.core.model.loading import find_urdf, load_robot
from independent_fk import shell_inertia_model

mujoco = pytest.importorskip("mujoco")

ROBOSUITE_ROBOTS = ["panda", "sawyer", "iiwa", "ur5e", "jaco", "kinova3"]
URDF_ROBOTS = ["ur5", "z1", "panda", "so101", "kinova", "xarm7"]


def robosuite_robot(name: str) -> Path:
    spec = importlib.util.find_spec("robosuite")
    if spec is None:
        pytest.skip("robosuite is not installed (a test dependency)")
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "robots" / name / "robot.xml"


def mujoco_body_poses(model, robot, q_batch: np.ndarray) -> np.ndarray:
    """(B, nbody, 4, 4) world poses from mj_kinematics, with our joint values put in qpos."""
    data = mujoco.MjData(model)
    obj = mujoco.mjtObj.mjOBJ_JOINT
    address = {j.name: int(model.jnt_qposadr[mujoco.mj_name2id(model, obj, j.name)]) for j in robot.joints if j.is_movable}
    out = np.empty((len(q_batch), model.nbody, 4, 4))
    rotation = np.empty(9)
    for i, q in enumerate(q_batch):
        data.qpos[:] = model.qpos0
        values = dict(zip(robot.actuated_joint_names, q))
        for joint in robot.joints:
            if not joint.is_movable:
                continue
            value = values[joint.name] if joint.mimic is None else joint.mimic.offset + joint.mimic.multiplier * values[joint.mimic.joint]
            data.qpos[address[joint.name]] = model.qpos0[address[joint.name]] + value
        mujoco.mj_kinematics(model, data)
        for b in range(model.nbody):
            mujoco.mju_quat2Mat(rotation, data.xquat[b])
            out[i, b] = np.eye(4)
            out[i, b, :3, :3] = rotation.reshape(3, 3)
            out[i, b, :3, 3] = data.xpos[b]
    return out


def worst_body_error(model, robot, n: int, seed: int) -> float:
    q = robot.random_configurations(n, np.random.default_rng(seed))
    ours = link_poses(robot, q)
    theirs = mujoco_body_poses(model, robot, q)
    root = robot.links.index(robot.root_link)
    root_body = 0 if robot.root_link == "world" else mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.root_link)
    worst = 0.0
    for b in range(1, model.nbody):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        if name not in robot.links:
            continue
        # ours are in the root link's frame; MuJoCo's in the world's
        expected = np.linalg.inv(theirs[:, root_body]) @ theirs[:, b]
        got = np.linalg.inv(ours[:, root]) @ ours[:, robot.links.index(name)]
        worst = max(worst, float(np.abs(got - expected).max()))
    return worst



TINY_MESH_MJCF = """<mujoco model="tiny">
  <asset><mesh name="chip" vertex="0 0 0  0.001 0 0  0 0.001 0  0 0 0.000001"/></asset>
  <worldbody>
    <body name="base">
      <geom type="box" size="0.05 0.05 0.05"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="j1" type="hinge" axis="0 0 1" range="-1 1"/>
        <geom type="mesh" mesh="chip"/>
        <body name="tip" pos="0.2 0 0" quat="0.9 0.1 0.3 0.2">
          <joint name="j2" type="hinge" axis="0 1 0" range="-1 1"/><geom type="sphere" size="0.01"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_a_model_mujoco_refuses_for_a_too_light_mesh_loads_with_shell_inertia(tmp_path):
    """MuJoCo refuses a moving body whose only mesh has almost no volume (its mass and inertia);
    the reader compiles it again with shell inertia (what MuJoCo advises), which changes masses
    only: the kinematics match MuJoCo's own FK of that compile within 1e-9."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_MESH_MJCF)
    with pytest.raises(ValueError, match="mass and inertia"):
        mujoco.MjModel.from_xml_path(str(path))
    robot = load_robot(path)
    assert robot.actuated_joint_names == ["j1", "j2"]
    assert worst_body_error(shell_inertia_model(path), robot, 200, seed=3) <= 1e-9


@pytest.mark.parametrize("name", ROBOSUITE_ROBOTS)
def test_robosuite_robot_fk_matches_mujoco_within_1e_9(name):
    path = robosuite_robot(name)
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except ValueError:  # robosuite 1.5.1's Sawyer (the newest on Python 3.13 with numpy 2): "mesh volume is too small"
        model = shell_inertia_model(path)
    robot = load_robot(path)
    bodies = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, model.nbody)]
    assert set(bodies) <= set(robot.links)
    hinges = sum(1 for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE)
    assert robot.dof == hinges >= 6
    assert len(robot.meshes) > 5 and all(m.path.is_file() for m in robot.meshes)
    assert worst_body_error(model, robot, 1000, seed=len(name)) <= 1e-9


MODEL_PACK_ROBOTS = ["yumi", "aloha", "pr2", "z1", "arx5", "vx300s"]


@pytest.mark.parametrize("name", MODEL_PACK_ROBOTS)
def test_robosuite_model_pack_robot_fk_matches_mujoco_within_1e_9(name):
    path = find_urdf(f"robosuite_{name}")
    model = mujoco.MjModel.from_xml_path(str(path))
    robot = load_robot(path)
    assert worst_body_error(model, robot, 1000, seed=len(name)) <= 1e-9


def test_roll_pitch_yaw_is_exact_to_rounding_at_gimbal_lock():
    """A rotation by pitch pi/2 (to 1e-3 .. 1e-13) and any roll and yaw comes back from the
    origin the converted URDF writes to 1e-14 (entries of the rotation matrix)."""
    from kinema_nodes.core.model.mjcf import _rpy

    def matrix(roll, pitch, yaw):
        cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
        rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
        ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
        rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
        return rz @ ry @ rx

    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(2000):
        pitch = rng.choice([-1, 1]) * (np.pi / 2 - 10.0 ** rng.uniform(-13, -3))
        r = matrix(rng.uniform(-np.pi, np.pi), pitch, rng.uniform(-np.pi, np.pi))
        worst = max(worst, float(np.abs(matrix(*_rpy(r)) - r).max()))
    assert worst <= 1e-14, worst


def test_mesh_vertices_sit_where_mujoco_puts_them():
    from scipy.spatial import cKDTree

    from kinema_nodes.core.model.meshes import load_mesh_arrays

    path = robosuite_robot("ur5e")
    robot = load_robot(path)
    model = mujoco.MjModel.from_xml_path(str(path))
    checked = 0
    rotation = np.empty(9)
    for link in robot.urdf.robot.links:
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link.name)
        if body < 0:
            continue
        geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
        visual = [g for g in geoms if model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0]
        ordered = visual + [g for g in geoms if g not in visual]
        elements = [e for e in link.visuals + link.collisions if e.geometry.mesh is not None]
        for element, g in zip(elements, ordered):
            v, _ = load_mesh_arrays(element.geometry.mesh.filename, element.geometry.mesh.scale)
            placed = v @ element.origin[:3, :3].T + element.origin[:3, 3]
            mesh = model.geom_dataid[g]
            compiled = model.mesh_vert[model.mesh_vertadr[mesh]: model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]]
            mujoco.mju_quat2Mat(rotation, model.geom_quat[g])
            theirs = compiled @ rotation.reshape(3, 3).T + model.geom_pos[g]
            # MuJoCo stores vertices as float32: 1e-6 m is their rounding on a 1 m part
            assert cKDTree(theirs).query(placed)[0].max() <= 1e-6
            checked += 1
    assert checked >= 10


def urdf_without_geometry(name: str, tmp_path: Path) -> Path:
    """The example-robot-data URDF without its meshes (MuJoCo's URDF reader cannot follow
    package://), with fixed links kept as bodies."""
    text = find_urdf(name).read_text()
    text = re.sub(r"<(visual|collision)\b.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"(<robot\b[^>]*>)", r'\1<mujoco><compiler fusestatic="false" discardvisual="false"/></mujoco>', text, count=1)
    path = tmp_path / f"{name}.urdf"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", URDF_ROBOTS)
def test_mjcf_written_by_mujoco_from_a_urdf_matches_both_mujoco_and_yourdfpy(name, tmp_path):
    import yourdfpy

    urdf = urdf_without_geometry(name, tmp_path)
    compiled = mujoco.MjModel.from_xml_path(str(urdf))
    mjcf = tmp_path / f"{name}.xml"
    mujoco.mj_saveLastXML(str(mjcf), compiled)
    robot = load_robot(mjcf)
    written = mujoco.MjModel.from_xml_path(str(mjcf))
    assert worst_body_error(written, robot, 1000, seed=7) <= 1e-9

    source = yourdfpy.URDF.load(str(urdf), build_scene_graph=True, load_meshes=False)
    links = [link for link in robot.links if link in source.link_map]
    assert len(links) >= len(source.link_map) - 1  # MuJoCo drops a massless world link
    base = source.base_link if source.base_link in robot.links else links[0]
    q_batch = robot.random_configurations(100, np.random.default_rng(3))
    ours = link_poses(robot, q_batch)
    in_memory = mujoco_body_poses(compiled, robot, q_batch)
    worst_file = worst_memory = 0.0
    for q, poses, memory in zip(q_batch, ours, in_memory):
        values = dict(zip(robot.actuated_joint_names, q))
        source.update_cfg({k: v for k, v in values.items() if k in source.actuated_joint_names})
        base_pose = poses[robot.links.index(base)]
        base_body = mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, base)
        for link in links:
            expected = source.get_transform(link, base)
            got = np.linalg.inv(base_pose) @ poses[robot.links.index(link)]
            worst_file = max(worst_file, float(np.abs(got - expected).max()))
            body = mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, link)
            memory_pose = np.linalg.inv(memory[base_body]) @ memory[body]
            worst_memory = max(worst_memory, float(np.abs(memory_pose - expected).max()))
    assert worst_memory <= 1e-9  # MuJoCo's own reading of the URDF, before its writer rounds
    assert worst_file <= 1e-5


def write(tmp_path: Path, body: str, name: str = "m.xml") -> Path:
    path = tmp_path / name
    path.write_text(f'<mujoco model="t"><worldbody>{body}</worldbody></mujoco>')
    return path


def test_free_root_is_the_base_slides_ranges_fixed_bodies_sites_and_equality_mimics(tmp_path):
    path = tmp_path / "gripper.xml"
    path.write_text(
        '<mujoco model="gripper"><compiler angle="degree" autolimits="true"/><worldbody>'
        '<body name="base" pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1" rgba="1 0 0 1" contype="0" conaffinity="0"/>'
        '<body name="wrist" pos="0 0 .2"><joint name="turn" type="hinge" axis="0 0 1" range="-90 90" pos=".05 0 0"/>'
        '<geom type="cylinder" size=".03 .05"/><site name="grip_site" pos="0 0 .1"/>'
        '<body name="left" pos="0 .02 .1"><joint name="left_slide" type="slide" axis="0 1 0" range="0 .04"/><geom type="sphere" size=".01"/></body>'
        '<body name="right" pos="0 -.02 .1"><joint name="right_slide" type="slide" axis="0 -1 0" range="0 .04"/><geom type="sphere" size=".01"/></body>'
        '<body name="camera_mount" pos="0 0 .05"/>'
        "</body></body></worldbody>"
        '<equality><joint joint1="right_slide" joint2="left_slide" polycoef="0 1 0 0 0"/></equality></mujoco>'
    )
    robot = load_robot(path)
    assert robot.root_link == "base"
    assert robot.actuated_joint_names == ["turn", "left_slide"]
    right = robot.joint_by_name["right_slide"]
    assert right.mimic is not None and right.mimic.joint == "left_slide" and right.mimic.multiplier == 1.0
    turn = robot.joint_by_name["turn"]
    assert turn.type == "revolute" and np.allclose([turn.lower, turn.upper], np.radians([-90, 90]), atol=1e-12)
    assert robot.joint_by_name["left_slide"].type == "prismatic" and robot.joint_by_name["left_slide"].upper == pytest.approx(0.04)
    assert "grip_site" in robot.links and "camera_mount" in robot.links
    assert robot.joint_of_child["camera_mount"].type == "fixed"
    assert any("free joint of body 'base' taken as the base" in note for note in robot.notes)
    model = mujoco.MjModel.from_xml_path(str(path))
    assert worst_body_error(model, robot, 200, seed=1) <= 1e-12
    colours = [v.material.color.rgba for v in robot.urdf.robot.links[0].visuals if v.material is not None]
    assert colours and np.allclose(colours[0], [1, 0, 0, 1])


BAD_MJCF = {
    "ball_joint": ('<body name="b"><joint name="shoulder" type="ball"/><geom size=".1"/></body>',
                   "body 'b' has a ball joint 'shoulder'; ball joints are refused"),
    "compiler_rejects": ('<body name="b"><joint type="hinge" range="1 0" limited="true"/><geom size=".1"/></body>',
                         "MuJoCo's compiler refused it: "),
    "unknown_element": ('<body name="b"><gizmo/></body>', "MuJoCo's compiler refused it: "),
    "free_joint_below_the_top": ('<body name="a"><geom size=".1"/><body name="b"><freejoint/><geom size=".1"/></body></body>',
                                 "free joint"),
}


@pytest.mark.parametrize("case", sorted(BAD_MJCF))
def test_bad_mjcf_is_one_line_naming_the_file(case, tmp_path):
    body, fragment = BAD_MJCF[case]
    path = write(tmp_path, body)
    with pytest.raises(RobotFileError) as caught:
        load_robot(path)
    message = str(caught.value)
    assert fragment in message and str(path) in message and "\n" not in message, message
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(path)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr


def test_mjcf_mesh_outside_the_robots_folders_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    obj = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
    (outside / "part.obj").write_text(obj)
    robot_dir = tmp_path / "a" / "b" / "c"
    robot_dir.mkdir(parents=True)
    path = robot_dir / "m.xml"
    path.write_text(
        f'<mujoco model="t"><asset><mesh name="p" file="{outside / "part.obj"}"/></asset><worldbody>'
        '<body name="b"><joint type="hinge" range="-1 1"/><geom type="mesh" mesh="p"/></body></worldbody></mujoco>'
    )
    with pytest.raises(RobotFileError, match="outside the robot's folders"):
        load_robot(path)


def test_the_urdf_a_rig_stores_stands_alone(tmp_path):
    from kinema_nodes.core.model.loading import robot_from_urdf_text

    path = robosuite_robot("iiwa")
    robot = load_robot(path)
    again = robot_from_urdf_text(robot.urdf_text, path)
    q = robot.random_configurations(20, np.random.default_rng(0))
    np.testing.assert_array_equal(link_poses(again, q), link_poses(robot, q))
    assert io.StringIO(robot.urdf_text).readline().startswith("<?xml")
