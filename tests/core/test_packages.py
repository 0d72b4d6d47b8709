"""The package search path and the mesh-folder rule (#16 item 2, #19 item 3).

A ROS workspace laid out here (description package + sibling mesh package, package.xml files),
and the hostile layouts the rule exists for: an ancestor merely called like the package, a
symlink out of a package, ``..`` out of a package, a FIFO as a mesh or as the robot file.
"""

from __future__ import annotations

import os
import shutil

import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.packages import PackageSearchPath, declared_package_names
from kinema_nodes.core.model.loading import load_robot

STL = (
    "solid part\n facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 0.1 0 0\n   vertex 0 0.1 0\n"
    "  endloop\n endfacet\nendsolid part\n"
)


def package(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.xml").write_text(f'<?xml version="1.0"?>\n<package format="3"><name>{name}</name></package>\n')
    return folder


def robot_text(mesh: str) -> str:
    return (
        '<robot name="bot"><link name="base"><visual><geometry>'
        f'<mesh filename="{mesh}"/></geometry></visual></link><link name="arm"/>'
        '<joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'
    )


@pytest.fixture
def workspace(tmp_path):
    """ws/src/bot_description/urdf/bot.urdf using package://bot_meshes/... (a sibling package)."""
    src = tmp_path / "ws" / "src"
    description = package(src / "bot_description", "bot_description")
    meshes = package(src / "bot_meshes", "bot_meshes")
    (meshes / "meshes").mkdir()
    (meshes / "meshes" / "base.stl").write_text(STL)
    (description / "urdf").mkdir()
    urdf = description / "urdf" / "bot.urdf"
    urdf.write_text(robot_text("package://bot_meshes/meshes/base.stl"))
    return src, urdf


def test_a_sibling_package_is_found_from_the_robot_files_folders(workspace):
    src, urdf = workspace
    robot = load_robot(urdf)
    assert [m.path.resolve() for m in robot.meshes] == [(src / "bot_meshes" / "meshes" / "base.stl").resolve()]


def test_ros_package_path_and_ament_prefix_path_and_declared_folders(tmp_path, workspace):
    src, _ = workspace
    elsewhere = tmp_path / "elsewhere" / "bot.urdf"
    elsewhere.parent.mkdir()
    # ROS_PACKAGE_PATH: the workspace's src holds the package two levels down
    search = PackageSearchPath(robot_file=elsewhere, environ={"ROS_PACKAGE_PATH": str(src.parent)})
    assert search.find("bot_meshes") == src / "bot_meshes"
    # AMENT_PREFIX_PATH: PREFIX/share/NAME
    prefix = tmp_path / "install"
    (prefix / "share" / "bot_meshes").mkdir(parents=True)
    search = PackageSearchPath(robot_file=elsewhere, environ={"AMENT_PREFIX_PATH": str(prefix)})
    assert search.find("bot_meshes") == prefix / "share" / "bot_meshes"
    # a declared folder (--package-path, Preferences) holding a folder NAME, no package.xml needed
    plain = tmp_path / "plain" / "bot_meshes"
    plain.mkdir(parents=True)
    search = PackageSearchPath(declared=[plain.parent], robot_file=elsewhere, environ={})
    assert search.find("bot_meshes") == plain
    # nothing declared: not found, and the message says where it looked and how to add a folder
    search = PackageSearchPath(robot_file=elsewhere, environ={})
    assert search.find("bot_meshes") is None
    with pytest.raises(RobotFileError, match="package 'bot_meshes' not found: looked in .*--package-path DIR"):
        search.require("bot_meshes", elsewhere)


def test_package_xml_names_the_package_not_the_folder(tmp_path):
    real = package(tmp_path / "folder_called_x", "franka_description")
    assert declared_package_names(real) == {"franka_description"}
    urdf = real / "urdf" / "r.urdf"
    urdf.parent.mkdir()
    (real / "m.stl").write_text(STL)
    urdf.write_text(robot_text("package://folder_called_x/m.stl"))
    with pytest.raises(RobotFileError, match="package 'folder_called_x' not found"):
        load_robot(urdf)
    urdf.write_text(robot_text("package://franka_description/m.stl"))
    assert len(load_robot(urdf).meshes) == 1
    # declaring the parent folder makes the folder name count (the user said so)
    urdf.write_text(robot_text("package://folder_called_x/m.stl"))
    assert len(load_robot(urdf, package_path=[tmp_path]).meshes) == 1


def test_an_ancestor_merely_named_like_the_package_is_not_trusted(tmp_path):
    """The #19 case: package://tmp/... from a URDF below a folder called tmp (no package.xml)."""
    outside = tmp_path / "tmp"
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "key.stl").write_text(STL)
    urdf = outside / "a" / "b" / "robot.urdf"
    urdf.parent.mkdir(parents=True)
    urdf.write_text(robot_text("package://tmp/secret/key.stl"))
    with pytest.raises(RobotFileError, match="package 'tmp' not found"):
        load_robot(urdf)


def test_dotdot_and_symlinks_out_of_a_package_are_refused(workspace, tmp_path):
    src, urdf = workspace
    secret = tmp_path / "secret.stl"
    secret.write_text(STL)
    urdf.write_text(robot_text("package://bot_meshes/../../../../secret.stl"))
    with pytest.raises(RobotFileError, match=r"outside the robot's folders \(package 'bot_meshes'"):
        load_robot(urdf)
    os.symlink(secret, src / "bot_meshes" / "meshes" / "link.stl")
    urdf.write_text(robot_text("package://bot_meshes/meshes/link.stl"))
    with pytest.raises(RobotFileError, match="outside the robot's folders"):
        load_robot(urdf)


def test_fifos_are_refused_without_blocking(workspace, tmp_path):
    src, urdf = workspace
    fifo = src / "bot_meshes" / "meshes" / "pipe.stl"
    os.mkfifo(fifo)
    urdf.write_text(robot_text("package://bot_meshes/meshes/pipe.stl"))
    with pytest.raises(RobotFileError, match="not a regular file"):
        load_robot(urdf)
    robot_fifo = tmp_path / "robot.urdf"
    os.mkfifo(robot_fifo)
    with pytest.raises(RobotFileError, match="not a regular file"):
        load_robot(robot_fifo)


def test_example_robot_data_is_its_own_package_through_its_ament_index(robots):
    """example-robot-data's package.xml says example_robot_descriptions, its URDFs say
    package://example-robot-data: the ament index beside share/ makes both true."""
    panda = robots("panda")
    folder = panda.path.parents[2]
    assert declared_package_names(folder.parent) >= {"example-robot-data", "example_robot_descriptions"}
    assert len(panda.meshes) > 10


def test_xml_declaration_version_is_not_a_reason_to_refuse(tmp_path):
    """pybullet's URDFs say version="0.0"; entities stay refused exactly as before (#16 item 5)."""
    path = tmp_path / "pybullet.urdf"
    path.write_text('<?xml version="0.0" ?>\n' + robot_text("m.stl").replace("<visual><geometry><mesh filename=\"m.stl\"/></geometry></visual>", ""))
    assert load_robot(path).dof == 1
    path.write_text('<?xml version="0.0" ?><!DOCTYPE robot [<!ENTITY x "y">]><robot name="&x;"><link name="a"/></robot>')
    with pytest.raises(RobotFileError, match="declares XML entities; refused"):
        load_robot(path)


def test_a_crawl_of_a_huge_declared_folder_is_bounded(tmp_path):
    root = tmp_path / "wide"
    for i in range(50):
        (root / f"d{i}" / "e").mkdir(parents=True)
    search = PackageSearchPath(declared=[root], environ={})
    assert search.find("missing") is None
    shutil.rmtree(root)
