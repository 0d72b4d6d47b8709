"""xacro robots (#16 item 1), checked against xacro's own command and against xacrodoc.

Real xacro files: example-robot-data's hector quadrotor and robosuite's copy of the Franka
description (``bullet_data/panda_description``), whose package.xml names it
``franka_description`` while its xacro says ``package://panda_description``. A ROS workspace
laid out here: a description package whose xacro takes arguments, includes a macro file
through ``$(find ...)`` and puts meshes from a sibling mesh package (real Franka meshes).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.packages import PackageSearchPath
from kinema_nodes.core.model.loading import load_robot, robot_from_urdf_text
from kinema_nodes.core.model.xacro import expand_xacro

pytest.importorskip("xacro")
XACRO_CLI = Path(sys.executable).with_name("xacro")


def robosuite_bullet_data() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("robosuite")
    if spec is None:
        pytest.skip("robosuite is not installed (a test dependency)")
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "bullet_data"


def real_xacro_files() -> list[Path]:
    files = []
    folder = example_robots_folder()
    if folder is not None:
        files.append(folder / "hector_description" / "robots" / "quadrotor_base.urdf.xacro")
    try:
        bullet = robosuite_bullet_data()
    except pytest.skip.Exception:
        return files
    files += [bullet / "panda_description" / "urdf" / name for name in ("panda_arm.urdf.xacro", "hand.urdf.xacro")]
    return files


def yourdfpy_fk(text: str, q: dict[str, float]) -> dict[str, np.ndarray]:
    import io

    import yourdfpy

    urdf = yourdfpy.URDF.load(io.BytesIO(text.encode()), build_scene_graph=True, load_meshes=False)
    urdf.update_cfg(q)
    return {link: urdf.get_transform(link, urdf.base_link) for link in urdf.link_map}


@pytest.mark.parametrize("path", real_xacro_files(), ids=lambda p: p.name)
def test_expansion_matches_xacros_own_command_byte_for_byte(path):
    if not XACRO_CLI.exists():
        pytest.skip("the xacro command is not installed beside this Python")
    ours, _ = expand_xacro(path, {}, PackageSearchPath(robot_file=path))
    theirs = subprocess.run([str(XACRO_CLI), str(path)], capture_output=True, text=True, check=True).stdout
    assert ours == theirs


def test_franka_xacro_loads_with_its_meshes_once_its_folder_is_declared():
    bullet = robosuite_bullet_data()
    path = bullet / "panda_description" / "urdf" / "panda_arm.urdf.xacro"
    # package://panda_description names a folder whose package.xml says franka_description
    with pytest.raises(RobotFileError, match="package 'panda_description' not found.*--package-path"):
        load_robot(path)
    robot = load_robot(path, package_path=[bullet])
    assert robot.dof == 7 and len(robot.meshes) == 16
    assert all(m.path.resolve().is_relative_to((bullet / "panda_description").resolve()) for m in robot.meshes)


@pytest.fixture
def workspace(tmp_path):
    """ws/src/{arm_description, arm_meshes}: xacro with arguments, $(find) includes, sibling meshes."""
    bullet = robosuite_bullet_data()
    src = tmp_path / "ws" / "src"
    description = src / "arm_description"
    meshes = src / "arm_meshes"
    for folder, name in ((description, "arm_description"), (meshes, "arm_meshes")):
        (folder).mkdir(parents=True)
        (folder / "package.xml").write_text(f'<?xml version="1.0"?>\n<package format="2"><name>{name}</name></package>\n')
    shutil.copytree(bullet / "panda_description" / "meshes" / "visual", meshes / "meshes")
    (description / "urdf").mkdir()
    (description / "urdf" / "link.xacro").write_text(
        '<?xml version="1.0"?>\n<robot xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
        '  <xacro:macro name="arm_link" params="prefix index parent xyz rpy">\n'
        '    <link name="${prefix}link${index}"><visual><geometry>'
        '<mesh filename="package://arm_meshes/meshes/link${index}.dae"/></geometry></visual></link>\n'
        '    <joint name="${prefix}joint${index}" type="revolute"><parent link="${parent}"/><child link="${prefix}link${index}"/>'
        '<origin xyz="${xyz}" rpy="${rpy}"/><axis xyz="0 0 1"/><limit lower="${-2.8}" upper="${2.8}" effort="87" velocity="2.1"/></joint>\n'
        "  </xacro:macro>\n</robot>\n"
    )
    (description / "urdf" / "arm.urdf.xacro").write_text(
        '<?xml version="1.0"?>\n<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="arm">\n'
        '  <xacro:arg name="prefix" default=""/>\n'
        '  <xacro:arg name="reach" default="0.316"/>\n'
        '  <xacro:property name="prefix" value="$(arg prefix)"/>\n'
        '  <xacro:include filename="$(find arm_description)/urdf/link.xacro"/>\n'
        '  <link name="${prefix}link0"><visual><geometry><mesh filename="file://$(find arm_meshes)/meshes/link0.dae"/></geometry></visual></link>\n'
        '  <xacro:arm_link prefix="${prefix}" index="1" parent="${prefix}link0" xyz="0 0 0.333" rpy="0 0 0"/>\n'
        '  <xacro:arm_link prefix="${prefix}" index="2" parent="${prefix}link1" xyz="0 0 0" rpy="${-pi/2} 0 0"/>\n'
        '  <xacro:arm_link prefix="${prefix}" index="3" parent="${prefix}link2" xyz="0 ${-$(arg reach)} 0" rpy="${pi/2} 0 0"/>\n'
        '  <xacro:arm_link prefix="${prefix}" index="4" parent="${prefix}link3" xyz="0.0825 0 0" rpy="${pi/2} 0 0"/>\n'
        "</robot>\n"
    )
    return src, description / "urdf" / "arm.urdf.xacro"


def test_workspace_xacro_matches_xacrodoc_fk_and_finds_the_sibling_mesh_package(workspace):
    xacrodoc = pytest.importorskip("xacrodoc")
    from xacrodoc import packages as xacrodoc_packages

    src, path = workspace
    robot = load_robot(path, xacro_args={"prefix": "left_", "reach": "0.4"})
    assert robot.links[:2] == ["left_link0", "left_link1"] and robot.dof == 4
    assert {m.path.resolve().parent for m in robot.meshes} == {(src / "arm_meshes" / "meshes").resolve()}

    xacrodoc_packages.reset()
    xacrodoc_packages.look_in([str(src)])
    theirs = xacrodoc.XacroDoc.from_file(str(path), subargs={"prefix": "left_", "reach": "0.4"}, resolve_packages=False).to_urdf_string()
    rng = np.random.default_rng(16)
    for q in robot.random_configurations(50, rng):
        values = dict(zip(robot.actuated_joint_names, q))
        a, b = yourdfpy_fk(robot.urdf_text, values), yourdfpy_fk(theirs, values)
        assert a.keys() == b.keys()
        assert max(np.abs(a[k] - b[k]).max() for k in a) <= 1e-12


def test_the_expanded_urdf_stands_alone_without_the_workspace(workspace, tmp_path):
    src, path = workspace
    robot = load_robot(path)
    q = robot.mid_configuration() + 0.3
    from kinema_nodes.core.model.kinematics import link_poses

    expected = link_poses(robot, q)
    shutil.rmtree(src)
    again = robot_from_urdf_text(robot.urdf_text, path)
    assert again.links == robot.links
    np.testing.assert_allclose(link_poses(again, q), expected, rtol=0, atol=0)


BAD_XACRO = {
    "missing_argument": (
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r"><link name="$(arg side)_base"/></robot>',
        "xacro argument 'side' has no value and no default; give it as side:=VALUE (--xacro-arg",
    ),
    "missing_package": (
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">'
        '<xacro:include filename="$(find no_such_description)/urdf/x.xacro"/><link name="a"/></robot>',
        "package 'no_such_description' not found",
    ),
    "macro_loop": (
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">'
        '<xacro:macro name="loop"><xacro:loop/></xacro:macro><xacro:loop/><link name="a"/></robot>',
        "xacro macro loop",
    ),
    "include_loop": (
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r"><xacro:include filename="bad.urdf.xacro"/></robot>',
        "xacro macro loop",
    ),
    "not_xml": ("<robot name=", "xacro could not expand it"),
}


@pytest.mark.parametrize("case", sorted(BAD_XACRO))
def test_bad_xacro_is_one_line_naming_the_file(case, tmp_path):
    text, fragment = BAD_XACRO[case]
    path = tmp_path / "bad.urdf.xacro"
    path.write_text(text)
    with pytest.raises(RobotFileError) as caught:
        load_robot(path)
    message = str(caught.value)
    assert fragment in message and str(path) in message and "\n" not in message, message
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(path)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr


def test_cli_xacro_arg_and_package_path(workspace):
    import json

    _, path = workspace
    result = subprocess.run(
        [sys.executable, "-m", "kinema_nodes", "info", str(path), "--xacro-arg", "prefix:=right_", "--json"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["links"][0] == "right_link0" and info["meshes"] == 5
    bad = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(path), "--xacro-arg", "prefix"], capture_output=True, text=True)
    assert bad.returncode == 2 and "is not NAME:=VALUE" in bad.stderr


def test_a_urdf_with_xacro_left_in_it_says_how_to_go_on(tmp_path):
    """#16: left-over $(optenv ...) gets an accurate error and a way forward; as .urdf.xacro it loads."""
    text = ('<robot name="r"><link name="a"><visual><geometry><box size="$(optenv KINEMA_TEST_UNSET_BOX 0.1 0.2 0.3)"/>'
            "</geometry></visual></link></robot>")
    path = tmp_path / "left_over.urdf"
    path.write_text(text)
    with pytest.raises(RobotFileError, match=r"is not a list of numbers; the file still has xacro in it .*name it \.urdf\.xacro"):
        load_robot(path)
    expanded = tmp_path / "left_over.urdf.xacro"
    expanded.write_text(text)
    robot = load_robot(expanded)
    assert robot.source_format == "xacro"
    assert list(robot.urdf.robot.links[0].visuals[0].geometry.box.size) == [0.1, 0.2, 0.3]
