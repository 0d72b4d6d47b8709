"""Class 3: the mesh-folder rule (mesh path resolution is the `robots` helper's; these cases
assert the issue's outcome). `package://NAME/...` resolves only to a folder that really is
package NAME (a package.xml naming it, or a folder on the package search path); an ancestor
folder that merely happens to be called NAME is not trusted; symlinks out of the roots and
FIFOs or devices as meshes are refused.
"""

from __future__ import annotations

import os

import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.loading import load_robot

from corpus import GOOD_STL, assert_one_line, mesh_visual, two_link_urdf


def _package(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.xml").write_text(f"<package format=\"2\"><name>{name}</name><version>1.0.0</version></package>")


@pytest.mark.parametrize("name", ["tmp", "home", "opt", "mnt"])
def test_ancestor_folder_named_like_the_package_is_not_trusted(tmp_path, name):
    outside = tmp_path / name
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "part.stl").write_text(GOOD_STL)
    robot_folder = outside / "deep" / "robots" / "bot" / "urdf"
    robot_folder.mkdir(parents=True)
    urdf = robot_folder / "bot.urdf"
    urdf.write_text(two_link_urdf(link_a=mesh_visual(f"package://{name}/secret/part.stl")))
    with pytest.raises(KinemaError) as caught:
        load_robot(urdf)
    assert_one_line(caught.value, name)


def test_real_package_is_trusted(tmp_path):
    package = tmp_path / "my_robot_description"
    _package(package, "my_robot_description")
    (package / "meshes").mkdir()
    (package / "meshes" / "part.stl").write_text(GOOD_STL)
    (package / "urdf").mkdir()
    urdf = package / "urdf" / "bot.urdf"
    urdf.write_text(two_link_urdf(link_a=mesh_visual("package://my_robot_description/meshes/part.stl")))
    robot = load_robot(urdf)
    assert [m.path.name for m in robot.meshes] == ["part.stl"]


def test_symlink_out_of_the_package_is_refused(tmp_path):
    package = tmp_path / "bot_description"
    _package(package, "bot_description")
    (package / "meshes").mkdir()
    secret = tmp_path / "elsewhere" / "part.stl"
    secret.parent.mkdir()
    secret.write_text(GOOD_STL)
    os.symlink(secret, package / "meshes" / "part.stl")
    urdf = package / "bot.urdf"
    urdf.write_text(two_link_urdf(link_a=mesh_visual("package://bot_description/meshes/part.stl")))
    with pytest.raises(KinemaError) as caught:
        load_robot(urdf)
    assert_one_line(caught.value, "part.stl")


def test_fifo_mesh_in_the_package_is_refused_without_blocking(tmp_path):
    package = tmp_path / "bot_description"
    _package(package, "bot_description")
    (package / "meshes").mkdir()
    os.mkfifo(package / "meshes" / "part.stl")
    urdf = package / "bot.urdf"
    urdf.write_text(two_link_urdf(link_a=mesh_visual("package://bot_description/meshes/part.stl")))
    with pytest.raises(KinemaError) as caught:
        load_robot(urdf)
    assert_one_line(caught.value, "not a regular file")
