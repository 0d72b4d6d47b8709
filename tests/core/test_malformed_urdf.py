"""Malformed input: each case is refused with one line naming the file and the problem.

Checked through the real CLI (exit code non-zero, one line on stderr, no traceback) and
through the core API (a KinemaError, nothing else).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.loading import load_robot

LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def _robot(joints: str, links: str = '<link name="a"/><link name="b"/>') -> str:
    return f'<?xml version="1.0"?><robot name="bad">{links}{joints}</robot>'


def _joint(extra: str = f'<axis xyz="0 0 1"/>{LIMIT}', kind: str = "revolute", parent: str = "a", child: str = "b", name: str = "j") -> str:
    return f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>{extra}</joint>'


BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + ']><robot name="&lol9;"><link name="a"/></robot>'
)

CASES = {
    "not_xml": ("this is not XML <robot", "not valid XML"),
    "missing_child_link": (_robot(_joint(child="nowhere")), "child link 'nowhere', which is not defined"),
    "missing_parent_link": (_robot(_joint(parent="nowhere")), "parent link 'nowhere', which is not defined"),
    "kinematic_loop": (
        _robot(_joint(name="j1") + _joint(name="j2", parent="b", child="c"), '<link name="a"/><link name="b"/><link name="c"/>')
        .replace('<child link="c"/>', '<child link="b"/>'),
        "kinematic loop",
    ),
    "cycle_without_root": (_robot(_joint(name="j1") + _joint(name="j2", parent="b", child="a")), "kinematic loop"),
    "unknown_joint_type": (_robot(_joint(kind="spherical")), "unknown type 'spherical'"),
    "revolute_without_limits": (_robot(_joint(extra='<axis xyz="0 0 1"/>')), "revolute joint 'j' has no <limit>"),
    "nan_in_origin": (_robot(_joint(extra=f'<origin xyz="0 nan 0"/><axis xyz="0 0 1"/>{LIMIT}')), "<origin> contains NaN or inf"),
    "inf_in_origin": (_robot(_joint(extra=f'<origin xyz="0 0 0" rpy="inf 0 0"/><axis xyz="0 0 1"/>{LIMIT}')), "<origin> contains NaN or inf"),
    "zero_axis": (_robot(_joint(extra=f'<axis xyz="0 0 0"/>{LIMIT}')), "zero <axis>"),
    "entity_bomb": (BOMB, "declares XML entities; refused"),
    "missing_mesh_file": (
        _robot(_joint(), '<link name="a"><visual><geometry><mesh filename="package://gone/meshes/arm.stl"/></geometry></visual></link><link name="b"/>'),
        "mesh 'package://gone/meshes/arm.stl' not found",
    ),
    "root_is_not_robot": ('<?xml version="1.0"?><sdf/>', "expected <robot>"),
    "limits_reversed": (_robot(_joint(extra='<axis xyz="0 0 1"/><limit lower="1" upper="-1" effort="1" velocity="1"/>')), "lower limit 1.0 above upper limit -1.0"),
}


@pytest.fixture
def bad_file(tmp_path, request):
    text, _ = CASES[request.param]
    path = tmp_path / f"{request.param}.urdf"
    path.write_text(text)
    return path, request.param


@pytest.mark.parametrize("bad_file", sorted(CASES), indirect=True)
def test_core_refuses_with_a_message_naming_file_and_problem(bad_file):
    path, case = bad_file
    with pytest.raises(KinemaError) as caught:
        load_robot(path)
    message = str(caught.value)
    assert str(path) in message and CASES[case][1] in message
    assert "\n" not in message


@pytest.mark.parametrize("bad_file", sorted(CASES), indirect=True)
def test_cli_prints_one_line_and_exits_non_zero(bad_file):
    path, case = bad_file
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(path) in lines[0] and CASES[case][1] in lines[0]


def test_missing_file_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(tmp_path / "nothing.urdf")], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and result.stderr.count("\n") == 1 and "file not found" in result.stderr
