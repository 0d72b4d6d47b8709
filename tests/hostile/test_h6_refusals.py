"""Class 6: internal errors become refusals: joint values that overflow FK, a joint whose lower
limit equals its upper when the report is drawn, /dev/zero and FIFOs as inputs (a FIFO must
never block), a CSV in the wrong encoding or with a BOM, a frame beyond Blender's range.
"""

from __future__ import annotations

import os

import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose, link_poses
from kinema_nodes.core.model.meshes import load_mesh
from kinema_nodes.core.model.loading import load_robot

from corpus import assert_cli_refusal, assert_one_line, run_cli

# The loader caps limits, origins, axes and mimic multipliers at 1e6, but a continuous joint
# has no limit: a mimic of it (multiplier 1e6) turns a value of 1e308 into inf, and cos(inf)
# into NaN.
MIMIC_OF_CONTINUOUS = (
    '<?xml version="1.0"?><robot name="mimic"><link name="a"/><link name="b"/><link name="c"/>'
    '<joint name="spin" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>'
    '<joint name="follow" type="continuous"><parent link="b"/><child link="c"/><origin xyz="0.1 0 0"/><axis xyz="0 0 1"/>'
    '<mimic joint="spin" multiplier="1e6"/></joint></robot>'
)
TARGETS = "frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n2,0.4,0.12,0.4,0,1,0,0\n"


@pytest.mark.parametrize("value", ["1e308", "-1.7e308"])
def test_fk_overflow_is_exit_2(tmp_path, value):
    path = tmp_path / "robot.urdf"
    path.write_text(MIMIC_OF_CONTINUOUS)
    result = run_cli("fk", path, "--link", "c", "--joints", f"spin={value}")
    assert_cli_refusal(result, "overflows")


def test_fk_overflow_through_the_api(tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(MIMIC_OF_CONTINUOUS)
    robot = load_robot(path)
    q = robot.configuration({"spin": 1e308})
    for call in (lambda: link_pose(robot, q, "c"), lambda: link_poses(robot, q)):
        with pytest.raises(KinemaError) as caught:
            call()
        assert_one_line(caught.value, "overflows")


def test_fk_at_large_but_finite_values_is_accepted(tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(MIMIC_OF_CONTINUOUS)
    robot = load_robot(path)
    pose = link_pose(robot, robot.configuration({"spin": 1e290}), "c")
    assert abs(pose[0, 3]) <= 0.1 + 1e-12 and abs(pose[1, 3]) <= 0.1 + 1e-12


@pytest.mark.parametrize("argument", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_device_as_robot_is_exit_2(argument):
    assert_cli_refusal(run_cli("info", argument, timeout=60), "not a regular file")


def test_fifo_as_robot_is_exit_2_and_never_blocks(tmp_path):
    fifo = tmp_path / "robot.urdf"
    os.mkfifo(fifo)
    assert_cli_refusal(run_cli("info", fifo, timeout=60), "not a regular file")


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_fifo_or_device_as_mesh_is_refused(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "part.stl"
        os.mkfifo(path)
    else:
        path = "/dev/zero"
    with pytest.raises(KinemaError) as caught:
        load_mesh(path)
    assert_one_line(caught.value, "not a regular file")


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_fifo_or_device_as_targets_is_exit_2(tmp_path, kind):
    if kind == "fifo":
        targets = tmp_path / "targets.csv"
        os.mkfifo(targets)
    else:
        targets = "/dev/zero"
    result = run_cli("bake", "arm6", "--targets", targets, "--out", tmp_path / "out.blend", "--solver", "numpy", timeout=60)
    assert_cli_refusal(result, "regular file")
    assert not (tmp_path / "out.blend").exists()


def test_csv_with_bom_is_accepted(tmp_path):
    from kinema_nodes.cli.csv_files import read_targets_csv

    path = tmp_path / "targets.csv"
    path.write_bytes(b"\xef\xbb\xbf" + TARGETS.encode())
    track = read_targets_csv(path)
    assert track.frames.tolist() == [1, 2]


def test_csv_in_latin1_names_line_and_column(tmp_path):
    from kinema_nodes.cli.csv_files import read_targets_csv

    path = tmp_path / "targets.csv"
    path.write_bytes("frame,x,y,z,qw,qx,qy,qz,link\n1,0.4,0.1,0.4,0,1,0,0,gr\u00fcn\n".encode("latin-1"))
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "line 2", "link", "utf-8")


def test_csv_in_utf16_is_refused(tmp_path):
    from kinema_nodes.cli.csv_files import read_targets_csv

    path = tmp_path / "targets.csv"
    path.write_bytes(TARGETS.encode("utf-16"))
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "targets.csv")


@pytest.mark.parametrize("frame", ["1048575", "-1048575", "1e20"])
def test_frame_beyond_blenders_range_is_refused(tmp_path, frame):
    from kinema_nodes.cli.csv_files import read_targets_csv

    path = tmp_path / "targets.csv"
    path.write_text(f"frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n{frame},0.4,0.1,0.4,0,1,0,0\n")
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    assert_one_line(caught.value, "line 3", "frame")


LOCKED = (
    '<?xml version="1.0"?><robot name="locked"><link name="base"/><link name="l1"/><link name="l2"/><link name="tool"/>'
    '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>'
    '<limit lower="-3" upper="3" effort="1" velocity="10"/></joint>'
    '<joint name="locked" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>'
    '<limit lower="0.3" upper="0.3" effort="1" velocity="10"/></joint>'
    '<joint name="j3" type="revolute"><parent link="l2"/><child link="tool"/><origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>'
    '<limit lower="-3" upper="3" effort="1" velocity="10"/></joint></robot>'
)


def test_report_with_a_locked_joint_is_drawn(tmp_path):
    """A joint whose lower limit equals its upper: the report picture is drawn (no division by
    zero), and the bake ends as a bake does (0 or 3)."""
    urdf = tmp_path / "locked.urdf"
    urdf.write_text(LOCKED)
    targets = tmp_path / "targets.csv"
    targets.write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.2,0.0,0.3,1,0,0,0\n2,0.2,0.02,0.3,1,0,0,0\n")
    report = tmp_path / "report.png"
    result = run_cli("bake", urdf, "--link", "tool", "--targets", targets, "--out", tmp_path / "out.blend",
                     "--report", report, "--solver", "numpy")
    assert result.returncode in (0, 3), result.stderr[-1500:]
    assert "Traceback" not in result.stderr
    from PIL import Image

    with Image.open(report) as picture:
        assert picture.size[0] == 1000 and picture.size[1] > 100
