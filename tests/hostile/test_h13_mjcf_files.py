"""Class 13: MJCF includes, meshes and textures obey the robot's folder rule (issue #32 items 2, 7).

MuJoCo's compiler reads what a model names, from wherever it points. Before the compile, the
include tree is walked (`core.model.mjcf_files`): an include, mesh, texture or height field
outside the robot's folders (absolute, through ``..``, through ``meshdir``/``texturedir``/
``assetdir``, or through a symlink) is refused in one line naming the element; a FIFO or device
is refused without blocking; an included file gets the DOCTYPE rule in any encoding. A model
whose includes and meshes lie inside its folders still loads.
"""

from __future__ import annotations

import os
import struct

import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.loading import load_robot

from corpus import GOOD_STL, assert_cli_refusal, assert_one_line, run_cli, within

pytest.importorskip("mujoco")

SECRET = "CANARY-SECRET-MJCF"
HANG_LIMIT = 60
_CORNERS = [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0), (0, 0, 0.1)]
#: A tetrahedron as binary STL (MuJoCo reads binary STL only, and wants four vertices or more).
BINARY_STL = b"\0" * 80 + struct.pack("<I", 4) + b"".join(
    struct.pack("<12f", 0, 0, 0, *_CORNERS[a], *_CORNERS[b], *_CORNERS[c]) + b"\0\0"
    for a, b, c in ((0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)))
BODY = '<body name="b"><joint name="j" type="hinge" range="-1 1"/><geom size="0.1"/></body>'


def _model(inside: str = "", assets: str = "", compiler: str = "") -> str:
    return (f'<mujoco model="m">{compiler}<asset>{assets}</asset>{inside}'
            f'<worldbody>{BODY}</worldbody></mujoco>')


@pytest.fixture
def place(tmp_path):
    robot = tmp_path / "ws" / "robot" / "mjcf"
    robot.mkdir(parents=True)
    (robot.parent / "meshes").mkdir()
    (robot.parent / "meshes" / "part.stl").write_bytes(BINARY_STL)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.xml").write_text(f'<mujoco model="{SECRET}"><worldbody/></mujoco>')
    (outside / "canary.stl").write_text(GOOD_STL.replace("part", SECRET))
    (outside / "canary.png").write_bytes(b"\x89PNG" + SECRET.encode())
    return robot, outside


def _load(path, limit: float = HANG_LIMIT):
    return within(limit, "loading", lambda: load_robot(path, check_meshes=False))


def _refused(path, *fragments) -> str:
    robot, error = _load(path)
    assert robot is None, "accepted"
    assert isinstance(error, RobotFileError), repr(error)
    message = assert_one_line(error, path.name, *fragments)
    assert SECRET not in message
    return message


def _cases(robot, outside) -> dict[str, tuple[str, str]]:
    return {
        "include_absolute": (_model(inside=f'<include file="{outside / "canary.xml"}"/>'), "<include>"),
        "include_dotdot": (_model(inside='<include file="../../../outside/canary.xml"/>'), "<include>"),
        "mesh_absolute": (_model(assets=f'<mesh name="m" file="{outside / "canary.stl"}"/>'), "<mesh file>"),
        "mesh_dotdot": (_model(assets='<mesh name="m" file="../../../outside/canary.stl"/>'), "<mesh file>"),
        "mesh_through_meshdir": (_model(assets='<mesh name="m" file="canary.stl"/>',
                                        compiler='<compiler meshdir="../../../outside"/>'), "<mesh file>"),
        "mesh_through_assetdir": (_model(assets='<mesh name="m" file="canary.stl"/>',
                                         compiler=f'<compiler assetdir="{outside}"/>'), "<mesh file>"),
        "texture_outside": (_model(assets=f'<texture name="t" type="2d" file="{outside / "canary.png"}"/>'), "<texture file>"),
        "cube_texture_side_outside": (_model(assets=f'<texture name="t" type="cube" fileup="{outside / "canary.png"}"/>'),
                                      "<texture fileup>"),
        "hfield_etc_passwd": (_model(assets='<hfield name="h" file="/etc/passwd"/>'), "<hfield file>"),
    }


@pytest.mark.parametrize("case", ["include_absolute", "include_dotdot", "mesh_absolute", "mesh_dotdot", "mesh_through_meshdir",
                                  "mesh_through_assetdir", "texture_outside", "cube_texture_side_outside", "hfield_etc_passwd"])
def test_file_outside_the_robots_folders_is_refused_before_mujoco_reads_it(place, case):
    robot, outside = place
    text, fragment = _cases(robot, outside)[case]
    path = robot / "model.xml"
    path.write_text(text)
    _refused(path, fragment, "outside the robot's folders")


def test_include_of_an_include_outside_is_refused(place):
    robot, outside = place
    (robot / "parts.xml").write_text(f'<mujoco><include file="{outside / "canary.xml"}"/></mujoco>')
    path = robot / "model.xml"
    path.write_text(_model(inside='<include file="parts.xml"/>'))
    _refused(path, "<include>", "outside the robot's folders")


def test_symlinked_mesh_out_of_the_folder_is_refused(place):
    robot, outside = place
    (robot.parent / "meshes" / "link.stl").symlink_to(outside / "canary.stl")
    path = robot / "model.xml"
    path.write_text(_model(assets='<mesh name="m" file="../meshes/link.stl"/>'))
    _refused(path, "<mesh file>", "outside the robot's folders")


@pytest.mark.parametrize("what", ["include", "mesh"])
def test_fifo_include_or_mesh_is_refused_without_blocking(place, what):
    robot, _ = place
    fifo = robot / ("parts.xml" if what == "include" else "part.stl")
    os.mkfifo(fifo)
    path = robot / "model.xml"
    path.write_text(_model(inside='<include file="parts.xml"/>') if what == "include"
                    else _model(assets='<mesh name="m" file="part.stl"/>'))
    _refused(path, "not a regular file")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_included_file_with_a_doctype_in_any_encoding_is_refused(place, encoding):
    robot, _ = place
    declared = encoding.upper().removesuffix("-LE") + ("LE" if encoding.endswith("-le") else "")
    (robot / "parts.xml").write_bytes(
        f'<?xml version="1.0" encoding="{declared}"?><!DOCTYPE mujoco [<!ENTITY a "aaaa">]><mujoco/>'.encode(encoding))
    path = robot / "model.xml"
    path.write_text(_model(inside='<include file="parts.xml"/>'))
    message = _refused(path, "parts.xml")
    assert "declares xml entities" in message.lower()


def test_model_with_include_and_mesh_inside_its_folders_loads(place):
    robot, _ = place
    (robot / "parts.xml").write_text('<mujoco><asset><mesh name="part" file="part.stl"/></asset></mujoco>')
    path = robot / "model.xml"
    path.write_text(_model(inside='<include file="parts.xml"/>', compiler='<compiler meshdir="../meshes"/>').replace(
        '<geom size="0.1"/>', '<geom type="mesh" mesh="part"/>'))
    loaded, error = _load(path)
    assert error is None, error
    assert [j.name for j in loaded.joints if j.type != "fixed"] == ["j"]


@pytest.mark.parametrize("case", ["include_dotdot", "mesh_through_meshdir"])
def test_cli_refusal_is_exit_2_and_one_line(place, case):
    robot, outside = place
    text, fragment = _cases(robot, outside)[case]
    path = robot / "model.xml"
    path.write_text(text)
    result = run_cli("info", path, timeout=120)
    assert_cli_refusal(result, "model.xml", fragment, "outside the robot's folders")
    assert SECRET not in result.stdout + result.stderr
