"""The robot model: joints, limits, chains, the tool point rule, mesh paths."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.errors import UnknownNameError
from kinema_nodes.core.model.example_robots import bundled_robots
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.mesh_paths import resolve_mesh_path


def test_bundled_robots_are_the_three_promised_arms():
    assert set(bundled_robots()) == {"arm6", "arm7", "rail_arm6"}
    arm6, arm7, rail = (load_robot(n) for n in ("arm6", "arm7", "rail_arm6"))
    assert arm6.dof == 6
    assert arm7.dof == 8 and arm7.chain_joint_names("flange") == [f"joint{i}" for i in range(1, 8)]
    assert load_robot("arm7").joint_by_name["finger_joint"].type == "prismatic"
    assert rail.dof == 7 and rail.joint_by_name["rail_joint"].type == "prismatic"
    assert rail.chain_joint_names(rail.tool_point)[0] == "rail_joint"


def test_joint_types_and_limits_of_a_real_robot(robots):
    panda = robots("panda")
    assert panda.joint_by_name["panda_joint1"].type == "revolute"
    assert panda.joint_by_name["panda_finger_joint1"].type == "prismatic"
    assert panda.joint_by_name["panda_finger_joint2"].mimic.joint == "panda_finger_joint1"
    assert "panda_finger_joint2" not in panda.actuated_joint_names
    np.testing.assert_allclose(panda.lower[:7], [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])


def test_continuous_joints_have_no_limits(robots):
    arm6 = robots("arm6")
    i = arm6.joint_index("wrist_3_joint")
    assert arm6.is_continuous[i] and arm6.lower[i] == -np.inf and arm6.upper[i] == np.inf


def test_chain_runs_from_root_to_link(robots):
    ur5 = robots("ur5")
    chain = ur5.chain("tool0")
    assert chain[0].parent == ur5.root_link and chain[-1].child == "tool0"
    assert ur5.chain_joint_names("tool0") == [j.name for j in chain if j.is_actuated]
    assert ur5.chain(ur5.root_link) == []


@pytest.mark.parametrize("name, expected", [("panda", "panda_hand_tcp"), ("ur5", "tool0"), ("arm6", "tool_tcp"),
                                            ("arm7", "flange"), ("rail_arm6", "tool_tcp")])
def test_default_tool_point_rule(robots, name, expected):
    assert robots(name).tool_point == expected


def test_tool_point_falls_back_to_the_tip_of_the_longest_chain(tmp_path):
    urdf = tmp_path / "plain.urdf"
    urdf.write_text("""<robot name="plain"><link name="a"/><link name="b"/><link name="c"/><link name="d"/>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j3" type="fixed"><parent link="a"/><child link="d"/></joint></robot>""")
    assert load_robot(urdf).tool_point == "c"


def test_unknown_names_list_the_valid_ones(robots):
    ur5 = robots("ur5")
    with pytest.raises(UnknownNameError, match="valid joints: shoulder_pan_joint"):
        ur5.configuration({"elbow": 1.0})
    with pytest.raises(UnknownNameError, match="valid links: .*tool0"):
        ur5.chain("hand")


def test_package_and_relative_mesh_paths_resolve_against_the_urdf_folder_and_its_parents(tmp_path):
    mesh = tmp_path / "my_robot" / "meshes" / "part.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_bytes(b"solid x\nendsolid x\n")
    (tmp_path / "my_robot" / "package.xml").write_text("<package><name>my_robot</name></package>")
    urdf_dir = tmp_path / "my_robot" / "urdf"
    urdf_dir.mkdir()
    assert resolve_mesh_path("package://my_robot/meshes/part.stl", urdf_dir) == mesh
    assert resolve_mesh_path("../meshes/part.stl", urdf_dir).resolve() == mesh
    assert resolve_mesh_path("meshes/part.stl", urdf_dir) == mesh
    assert resolve_mesh_path("package://other/meshes/nothing.stl", urdf_dir) is None


def test_real_robot_meshes_all_resolve(robots):
    panda = robots("panda")
    assert len(panda.meshes) > 10 and all(m.path.is_file() for m in panda.meshes)


def test_fingerprint_changes_with_kinematics(tmp_path, robots):
    text = (load_robot("arm6").path).read_text()
    changed = tmp_path / "arm6.urdf"
    changed.write_text(text.replace('xyz="0 0 0.089159"', 'xyz="0 0 0.09"'))
    assert load_robot(changed).fingerprint != robots("arm6").fingerprint
    same = tmp_path / "same.urdf"
    same.write_text(text)
    assert load_robot(same).fingerprint == robots("arm6").fingerprint
