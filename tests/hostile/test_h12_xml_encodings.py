"""Class 12: every XML Kinema reads, in every encoding (issue #32 item 4).

URDF, SRDF, MJCF, a xacro file and a file it includes all go through one reader
(`core.model.xml_reading`), whose DOCTYPE and entity rule is judged on the decoded text. Each
of them is tried with an internal entity, a parameter entity naming an outside file and an
external DTD, written in UTF-8 (with and without a byte-order mark), UTF-16 and UTF-32 (LE and
BE, with and without a byte-order mark) and a declared Latin-1: every one is refused in one
line. A good document in UTF-16 is still read; an SRDF that is a FIFO is refused without
blocking.
"""

from __future__ import annotations

import os
import threading

import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.collision import read_srdf_pairs
from kinema_nodes.core.model.loading import load_robot, robot_from_urdf_text
from kinema_nodes.core.model.xml_reading import check_no_doctype, xml_encoding

from corpus import assert_one_line, two_link_urdf

ENCODINGS = {
    # name: (codec, byte-order mark, encoding declared in the XML declaration)
    "utf8": ("utf-8", b"", "UTF-8"),
    "utf8_bom": ("utf-8", b"\xef\xbb\xbf", "UTF-8"),
    "utf16_bom": ("utf-16-le", b"\xff\xfe", "UTF-16"),
    "utf16be_bom": ("utf-16-be", b"\xfe\xff", "UTF-16"),
    "utf16le_no_bom": ("utf-16-le", b"", "UTF-16LE"),
    "utf16be_no_bom": ("utf-16-be", b"", "UTF-16BE"),
    "utf16le_no_bom_no_declaration": ("utf-16-le", b"", None),
    "utf32_bom": ("utf-32-le", b"\xff\xfe\x00\x00", "UTF-32"),
    "utf32be_bom": ("utf-32-be", b"\x00\x00\xfe\xff", "UTF-32"),
    "utf32le_no_bom": ("utf-32-le", b"", "UTF-32LE"),
    "latin1_declared": ("latin-1", b"", "ISO-8859-1"),
}
DOCTYPES = {
    "internal_entity": '<!DOCTYPE {root} [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>',
    "parameter_entity": '<!DOCTYPE {root} [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>',
    "external_dtd": '<!DOCTYPE {root} SYSTEM "file:///etc/passwd">',
}
SRDF = '<robot name="hostile"><disable_collisions link1="a" link2="b" reason="Adjacent"/></robot>'
MJCF = '<mujoco model="m"><worldbody><body name="b"><joint name="j" type="hinge"/><geom size="0.1"/></body></worldbody></mujoco>'
XACRO = '<robot name="hostile" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="a"/></robot>'


def encoded(body: str, encoding: str, doctype: str = "") -> bytes:
    codec, bom, declared = ENCODINGS[encoding]
    root = body[1:].split()[0].rstrip(">")
    declaration = "" if declared is None else f'<?xml version="1.0" encoding="{declared}"?>'
    return bom + (declaration + doctype.format(root=root) + body).encode(codec)


def _doctype_refusal(message: str) -> None:
    assert "has a doctype" in message.lower() or "declares xml entities" in message.lower(), message


CASES = [(e, d) for e in ENCODINGS for d in DOCTYPES]


@pytest.mark.parametrize("encoding, doctype", CASES)
def test_urdf_doctype_in_any_encoding_is_refused(tmp_path, encoding, doctype):
    path = tmp_path / "robot.urdf"
    path.write_bytes(encoded(two_link_urdf().split("?>", 1)[1], encoding, DOCTYPES[doctype]))
    with pytest.raises(RobotFileError) as caught:
        load_robot(path)
    _doctype_refusal(assert_one_line(caught.value, "robot.urdf", "refused"))


@pytest.mark.parametrize("encoding, doctype", CASES)
def test_srdf_doctype_in_any_encoding_is_refused(tmp_path, encoding, doctype):
    robot = robot_from_urdf_text(two_link_urdf(), tmp_path / "robot.urdf")
    path = tmp_path / "robot.srdf"
    path.write_bytes(encoded(SRDF, encoding, DOCTYPES[doctype]))
    with pytest.raises(RobotFileError) as caught:
        read_srdf_pairs(path, robot)
    _doctype_refusal(assert_one_line(caught.value, "robot.srdf", "refused"))


@pytest.mark.parametrize("encoding, doctype", CASES)
def test_xacro_and_its_include_doctype_in_any_encoding_is_refused(tmp_path, encoding, doctype):
    pytest.importorskip("xacro")
    top = tmp_path / "robot.urdf.xacro"
    top.write_bytes(encoded(XACRO, encoding, DOCTYPES[doctype]))
    with pytest.raises(RobotFileError) as caught:
        load_robot(top, check_meshes=False)
    _doctype_refusal(assert_one_line(caught.value, "robot.urdf.xacro", "refused"))
    part = tmp_path / "part.xacro"
    part.write_bytes(encoded(XACRO, encoding, DOCTYPES[doctype]))
    top.write_text(XACRO.replace("</robot>", '<xacro:include filename="part.xacro"/></robot>'))
    with pytest.raises(RobotFileError) as caught:
        load_robot(top, check_meshes=False)
    _doctype_refusal(assert_one_line(caught.value, "robot.urdf.xacro", "part.xacro", "refused"))


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_mjcf_doctype_in_any_encoding_is_refused(tmp_path, encoding):
    pytest.importorskip("mujoco")
    path = tmp_path / "model.xml"
    path.write_bytes(encoded(MJCF, encoding, DOCTYPES["internal_entity"]))
    with pytest.raises(RobotFileError) as caught:
        load_robot(path, check_meshes=False)
    _doctype_refusal(assert_one_line(caught.value, "model.xml", "refused"))


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_the_encoding_is_found_as_xml_says(encoding):
    codec, _, _ = ENCODINGS[encoding]
    found = xml_encoding(encoded(SRDF, encoding))
    assert found.replace("_", "-").lower().removesuffix("-le") in (codec, codec.removesuffix("-le"), "iso-8859-1")
    check_no_doctype(encoded(SRDF, encoding), "x.srdf")  # no DOCTYPE: accepted


@pytest.mark.parametrize("encoding", ["utf8_bom", "utf16_bom", "utf16be_bom"])
def test_a_good_urdf_in_utf16_or_with_a_bom_is_read(tmp_path, encoding):
    path = tmp_path / "robot.urdf"
    path.write_bytes(encoded(two_link_urdf().split("?>", 1)[1], encoding))
    robot = load_robot(path)
    assert robot.links == ["a", "b"] and [j.name for j in robot.joints] == ["j"]


def test_declared_utf16_over_single_byte_text_is_refused(tmp_path):
    with pytest.raises(RobotFileError) as caught:
        check_no_doctype(b'<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE r []><robot/>', tmp_path / "x.urdf", "URDF")
    assert_one_line(caught.value, "x.urdf", "not written in it")


def test_srdf_fifo_is_refused_without_blocking(tmp_path):
    robot = robot_from_urdf_text(two_link_urdf(), tmp_path / "robot.urdf")
    fifo = tmp_path / "robot.srdf"
    os.mkfifo(fifo)
    done: dict = {}

    def work():
        try:
            read_srdf_pairs(fifo, robot)
        except RobotFileError as error:
            done["error"] = error

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "reading a FIFO SRDF blocked"
    assert_one_line(done["error"], "robot.srdf", "not a regular file")
