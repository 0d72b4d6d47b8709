"""Class 4: bombs behind containers, and the mesh loader's hardening (core.model.meshes).

A .dae that is really a zip, XML in UTF-16 or UTF-32, DOCTYPEs the byte-level check missed,
header counts no file of that size holds, material files that are devices: each is refused
with one line before anything large is read or inflated. Good meshes are accepted with their
per-part colours.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile

import numpy as np
import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.meshes import MAX_UNPACKED_BYTES, load_mesh

from corpus import GOOD_STL, TRIANGLE, assert_one_line, collada

RED, BLUE = "1 0 0 1", "0 0 1 1"
GOOD_DAE = collada([("red", RED, *TRIANGLE), ("blue", BLUE, [v + 0.5 for v in TRIANGLE[0]], TRIANGLE[1])])
ENTITY_DOCTYPE = '<!DOCTYPE COLLADA [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _zip_bomb(path, unpacked: int) -> None:
    """A real zip whose one member inflates to `unpacked` bytes of zeros (a few hundred KB on disk)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("model.dae", "w", force_zip64=True) as member:
            block = b"\0" * (1 << 20)
            for _ in range(unpacked // len(block) + 1):
                member.write(block)


def _binary_stl(triangles: np.ndarray) -> bytes:
    triangles = np.asarray(triangles, dtype="<f4").reshape(-1, 3, 3)
    body = b"".join(struct.pack("<3f", 0, 0, 1) + t.tobytes() + b"\0\0" for t in triangles)
    return b"\0" * 80 + struct.pack("<I", len(triangles)) + body


REFUSED = {
    # containers and encodings
    "dae_zip_with_doctype_member": ("zipped.dae", _zip({"model.dae": collada([("a", RED, *TRIANGLE)], doctype=ENTITY_DOCTYPE).encode()}),
                                    "declares a doctype"),
    "dae_zip_too_many_members": ("many.dae", _zip({f"part{i}.txt": b"x" for i in range(300)}, zipfile.ZIP_STORED), "refusing more than"),
    "dae_zip_without_collada": ("empty_zip.dae", _zip({"readme.txt": b"hello"}), "no collada document"),
    "dae_zip_broken": ("broken.dae", b"PK\x03\x04" + os.urandom(2000), "broken zip"),
    "dae_utf16le_doctype": ("u16le.dae", collada([("a", RED, *TRIANGLE)], encoding="UTF-16", doctype=ENTITY_DOCTYPE).encode("utf-16"),
                            "declares a doctype"),
    "dae_utf16be_doctype": ("u16be.dae", b"\xfe\xff" + collada([("a", RED, *TRIANGLE)], encoding="UTF-16BE",
                                                              doctype=ENTITY_DOCTYPE).encode("utf-16-be"), "declares a doctype"),
    "dae_utf16_no_bom_doctype": ("u16nobom.dae", collada([("a", RED, *TRIANGLE)], encoding="UTF-16LE",
                                                         doctype=ENTITY_DOCTYPE).encode("utf-16-le"), "doctype"),
    "dae_utf32_doctype": ("u32.dae", collada([("a", RED, *TRIANGLE)], encoding="UTF-32", doctype=ENTITY_DOCTYPE).encode("utf-32"),
                          "xml"),
    "dae_external_dtd": ("ext.dae", collada([("a", RED, *TRIANGLE)], doctype='<!DOCTYPE COLLADA SYSTEM "http://example.invalid/c.dtd">').encode(),
                         "declares a doctype"),
    "dae_parameter_entity": ("pe.dae", collada([("a", RED, *TRIANGLE)], doctype='<!DOCTYPE C [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>').encode(),
                             "doctype"),
    "dae_doctype_after_comment": ("comment.dae", collada([("a", RED, *TRIANGLE)], doctype="<!-- hi --><!DOCTYPE COLLADA>").encode(),
                                  "declares a doctype"),
    "dae_declared_latin1_doctype": ("latin1.dae", collada([("a", RED, *TRIANGLE)], encoding="ISO-8859-1", doctype=ENTITY_DOCTYPE).encode("latin-1"),
                                    "declares a doctype"),
    "dae_not_xml": ("junk.dae", os.urandom(3000), "could not be read"),
    # header counts no file that size holds
    "ply_claims_1e12_vertices": ("liar.ply", b"ply\nformat binary_little_endian 1.0\nelement vertex 1000000000000\nproperty float x\n"
                                 b"property float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                                 + b"\0" * 64, "claims"),
    "off_claims_1e12_faces": ("liar.off", b"OFF\n3 1000000000000 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "claims"),
    # side files
    "obj_mtllib_dev_zero": ("zero.obj", b"mtllib /dev/zero\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n", "not a regular file"),
    # geometry
    "obj_face_index_out_of_range": ("faces.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99\n", "could not be read"),
    "stl_vertex_1e9_m": ("far.stl", _binary_stl(np.array(TRIANGLE[0]).reshape(1, 3, 3) * 1e9), "refusing meshes beyond"),
    "stl_nan_vertex": ("nan.stl", _binary_stl([[0, 0, 0], [np.nan, 0, 0], [0, 1, 0]]), "nan or inf"),
    "stl_inf_vertex": ("inf.stl", _binary_stl([[0, 0, 0], [np.inf, 0, 0], [0, 1, 0]]), "nan or inf"),
    "dae_nan_transform": ("nanpose.dae", collada([("a", RED, *TRIANGLE)], matrix="1 0 0 nan 0 1 0 0 0 0 1 0 0 0 0 1").encode(),
                          "transform"),
    "dae_projective_transform": ("proj.dae", collada([("a", RED, *TRIANGLE)], matrix="1 0 0 0 0 1 0 0 0 0 1 0 0 0 0.5 1").encode(),
                                 "projective"),
    "dae_collapsing_transform": ("flat.dae", collada([("a", RED, *TRIANGLE)], matrix="0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1").encode(),
                                 "collapses"),
    "dae_faces_beyond_vertices": ("idx.dae", collada([("a", RED, TRIANGLE[0], [0, 1, 7])]).encode(), "point at vertices"),
    "empty_file": ("empty.stl", b"", "empty"),
    "unknown_format": ("part.3ds", b"\0" * 100, "not read"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_hostile_mesh_is_one_line(tmp_path, case):
    name, data, fragment = REFUSED[case]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(RobotFileError) as caught:
        load_mesh(path, source=tmp_path / "robot.urdf", filename=f"meshes/{name}")
    assert_one_line(caught.value, "robot.urdf", name, fragment)


@pytest.mark.slow
def test_zip_bomb_behind_dae_is_refused_before_inflating(tmp_path):
    """A 270 MB inflation in a ~270 KB .dae: refused from the zip's directory alone."""
    path = tmp_path / "bomb.dae"
    _zip_bomb(path, MAX_UNPACKED_BYTES + (8 << 20))
    assert path.stat().st_size < 2_000_000
    with pytest.raises(RobotFileError) as caught:
        load_mesh(path)
    assert_one_line(caught.value, "unpacks to", "refusing more than")


def test_small_zip_bomb_size_is_read_from_directory(tmp_path):
    """The cap is decided on the declared sizes: a zip declaring more than the cap in one
    member is refused without inflating (a zip64 member of 300 MB, stored sparse here)."""
    path = tmp_path / "declared.dae"
    data = bytearray(_zip({"model.dae": b"<COLLADA/>"}, zipfile.ZIP_STORED))
    # patch the central directory's uncompressed size of the one member to 300 MB
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = struct.pack("<I", 300 * 1024 * 1024)
    path.write_bytes(bytes(data))
    with pytest.raises(RobotFileError) as caught:
        load_mesh(path)
    assert_one_line(caught.value, "unpacks to")


@pytest.mark.parametrize("scale, fragment", [
    ((0.0, 1.0, 1.0), "non-zero"),
    ((float("nan"), 1.0, 1.0), "finite"),
    ((1.0, float("inf"), 1.0), "finite"),
    ((1e39, 1e39, 1e39), "float32"),
    ((1e-35, 1.0, 1.0), "float32"),
    ((1e30, 1e30, 1e30), "refusing meshes beyond"),  # float32 overflow after scale: refused, never zeroed by Blender
])
def test_bad_scale_is_one_line(tmp_path, scale, fragment):
    path = tmp_path / "part.stl"
    path.write_text(GOOD_STL)
    with pytest.raises(RobotFileError) as caught:
        load_mesh(path, scale)
    assert_one_line(caught.value, "part.stl", fragment)


def test_good_dae_keeps_a_colour_per_part(tmp_path):
    path = tmp_path / "two.dae"
    path.write_text(GOOD_DAE)
    mesh = load_mesh(path)
    assert len(mesh.faces) == 2 and len(mesh.materials) == 2
    colours = sorted(tuple(round(c, 6) for c in rgba) for _, rgba in mesh.materials)
    assert colours == [(0.0, 0.0, 1.0, 1.0), (1.0, 0.0, 0.0, 1.0)]
    assert sorted(set(mesh.face_material.tolist())) == [0, 1]
    assert np.allclose(mesh.vertices.max(axis=0), [0.6, 0.6, 0.5])


def test_good_dae_in_utf16_is_read_or_refused_in_one_line(tmp_path):
    """UTF-16 COLLADA without a DOCTYPE is judged on the decoded text: lxml decodes it, so no
    DOCTYPE refusal; pycollada then reads it or the read fails as one line."""
    path = tmp_path / "u16.dae"
    path.write_bytes(collada([("a", RED, *TRIANGLE)], encoding="UTF-16").encode("utf-16"))
    try:
        mesh = load_mesh(path)
    except RobotFileError as error:
        message = assert_one_line(error, "u16.dae")
        assert "doctype" not in message.lower()
    else:
        assert len(mesh.faces) == 1


def test_zipped_good_dae_is_accepted(tmp_path):
    path = tmp_path / "zipped.dae"
    path.write_bytes(_zip({"model.dae": GOOD_DAE.encode()}))
    mesh = load_mesh(path)
    assert len(mesh.faces) == 2


def test_stl_scale_is_applied_and_corners_merged(tmp_path):
    path = tmp_path / "part.stl"
    path.write_bytes(_binary_stl(np.array([[[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[1, 0, 0], [1, 1, 0], [0, 1, 0]]])))
    mesh = load_mesh(path, (2.0, 3.0, 1.0))
    assert len(mesh.faces) == 2 and len(mesh.vertices) == 4
    assert np.allclose(mesh.vertices.max(axis=0), [2.0, 3.0, 0.0])
