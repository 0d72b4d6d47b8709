"""Hostile and malformed robots: each is refused with one line naming the file and the problem.

The corpus is generated here (clearer than a folder of opaque files): truncated and junk
files, wrong types, huge numbers, deep and wide trees, entity bombs and outside entities,
mesh paths that escape the robot's folders, and meshes that are folders, empty, junk, or have
no triangles. URDF cases go through `load_robot` (and a sample through the CLI); mesh content
cases through `core.meshes.load_mesh_arrays`; a sample through Blender's import operator,
which must leave nothing behind.

The rule for mesh paths (see `core.model.mesh_paths.robot_folders` and `core.model.packages`): a
mesh must lie, after `..` and symlinks are followed, inside the URDF's folder or its parent, the
ROS package (package.xml) holding the URDF, or the package a `package://NAME` names, where a
folder is package NAME only if it really is one (never because it happens to be called NAME).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.meshes import check_robot_meshes, load_mesh_arrays
from kinema_nodes.core.model.file_checks import MAX_LINKS
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.mesh_paths import robot_folders

LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'
GOOD_STL = (
    "solid part\n"
    " facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 0.1 0 0\n   vertex 0 0.1 0\n  endloop\n endfacet\n"
    "endsolid part\n"
)


def urdf(body: str = "", link_a: str = "", name: str = "hostile") -> str:
    """Two links and a revolute joint; `link_a` goes inside link 'a', `body` after the joint."""
    return (
        f'<?xml version="1.0"?><robot name="{name}"><link name="a">{link_a}</link><link name="b"/>'
        f'<joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>{LIMIT}</joint>{body}</robot>'
    )


def visual(filename: str, scale: str = "") -> str:
    scale_attribute = f' scale="{scale}"' if scale else ""
    return f'<visual><geometry><mesh filename="{filename}"{scale_attribute}/></geometry></visual>'


def chain(links: int) -> str:
    names = "".join(f'<link name="l{i}"/>' for i in range(links))
    joints = "".join(
        f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
        f'<origin xyz="0 0 0.01"/><axis xyz="0 0 1"/>{LIMIT}</joint>'
        for i in range(links - 1)
    )
    return f'<?xml version="1.0"?><robot name="chain">{names}{joints}</robot>'


def billion_laughs() -> str:
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
    )
    return f'<?xml version="1.0"?><!DOCTYPE robot [{entities}]><robot name="&lol9;"><link name="a"/></robot>'


def quadratic_blowup() -> str:
    return f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "{"x" * 50000}">]><robot name="r">' + "<link name='&a;'/>" * 100 + "</robot>"


# ---- the URDF corpus: name -> (write files into a robot folder, return the URDF path; message fragment) ----

def text_case(text: str | bytes):
    def write(folder: Path) -> Path:
        path = folder / "robot.urdf"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    return write


def with_files(text: str, files: dict[str, bytes | str | None], urdf_at: str = "robot.urdf"):
    """Write `files` (None: a folder) into the robot folder, and the URDF at `urdf_at`."""

    def write(folder: Path) -> Path:
        for relative, content in files.items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                target.mkdir(exist_ok=True)
            else:
                target.write_bytes(content if isinstance(content, bytes) else content.encode())
        path = folder / urdf_at
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def symlink_case(folder: Path) -> Path:
    (folder / "meshes").mkdir()
    os.symlink("/etc/passwd", folder / "meshes" / "link.stl")
    path = folder / "robot.urdf"
    path.write_text(urdf(link_a=visual("meshes/link.stl")))
    return path


GOOD = urdf()
URDF_CASES = {
    # truncated, empty, junk
    "empty_file": (text_case(b""), "not valid XML"),
    "whitespace_only": (text_case(b"   \n\t  \n"), "not valid XML"),
    "truncated_in_a_tag": (text_case(GOOD[: len(GOOD) // 2]), "not valid XML"),
    "truncated_before_end_tag": (text_case(GOOD[: GOOD.rindex("</robot>")]), "not valid XML"),
    "binary_junk": (text_case(np.random.default_rng(1).bytes(4096)), "not valid XML"),
    "png_as_urdf": (text_case(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4), "not valid XML"),
    "nul_bytes_inside": (text_case(GOOD.replace('name="b"', 'name="b\x00"').encode()), "not valid XML"),
    "not_a_robot_root": (text_case('<?xml version="1.0"?><html><body/></html>'), "expected <robot>"),
    "nested_50000_deep": (text_case("<robot name='r'>" + "<link>" * 50000 + "</link>" * 50000 + "</robot>"), "not valid XML"),
    # wrong types
    "origin_words": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<origin xyz="left up forward"/><axis xyz="0 0 1"/>')), "is not a list of numbers"),
    "origin_two_numbers": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<origin xyz="1 2"/><axis xyz="0 0 1"/>')), "needs 3 numbers, has 2"),
    "rpy_four_numbers": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<origin rpy="0 0 0 1"/><axis xyz="0 0 1"/>')), "needs 3 numbers, has 4"),
    "axis_four_numbers": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 1 0"/>')), "needs 3 numbers, has 4"),
    "limit_is_a_word": (text_case(urdf().replace('lower="-1"', 'lower="low"')), "is not a list of numbers"),
    "limit_two_numbers": (text_case(urdf().replace('upper="1"', 'upper="1 2"')), "needs 1 numbers, has 2"),
    "joint_without_type": (text_case(urdf().replace(' type="revolute"', "")), "unknown type 'None'"),
    "robot_without_name": (text_case(urdf().replace('robot name="hostile"', "robot")), "<robot> has no name"),
    "link_without_name": (text_case(urdf().replace('<link name="b"/>', '<link name="b"/><link/>')), "has no name"),
    "mesh_scale_a_word": (text_case(urdf(link_a=visual("m.stl", scale="big"))), "is not a list of numbers"),
    "mimic_of_a_fixed_joint": (text_case(urdf(body='<link name="c"/><joint name="f" type="fixed"><parent link="b"/><child link="c"/></joint>'
                                               '<link name="d"/><joint name="m" type="revolute"><parent link="c"/><child link="d"/>'
                                               f'<axis xyz="0 0 1"/>{LIMIT}<mimic joint="f"/></joint>')), "mimics 'f', which is not an actuated joint"),
    # huge numbers
    "origin_1e308": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<origin xyz="1e308 0 0"/><axis xyz="0 0 1"/>')), "has a value beyond"),
    "origin_overflows_to_inf": (text_case(urdf().replace('<axis xyz="0 0 1"/>', '<origin xyz="1e400 0 0"/><axis xyz="0 0 1"/>')), "contains NaN or inf"),
    "limit_1e300": (text_case(urdf().replace('upper="1"', 'upper="1e300"')), "has a value beyond"),
    "number_of_100000_digits": (text_case(urdf().replace('upper="1"', f'upper="{"9" * 100000}"')), "characters long; not a list of numbers"),
    "mesh_scale_1e30": (with_files(urdf(link_a=visual("m.stl", scale="1e30 1e30 1e30")), {"m.stl": GOOD_STL}), "has a value beyond"),
    "box_size_inf": (text_case(urdf(link_a='<visual><geometry><box size="1 inf 1"/></geometry></visual>')), "contains NaN or inf"),
    # size and amplification
    "chain_of_10000_links": (text_case(chain(10_000)), f"refusing robots with more than {MAX_LINKS}"),
    "file_over_32_MB": (text_case(urdf(body="<!--" + "x" * (33 * 1024 * 1024) + "-->")), "refusing URDFs over"),
    "billion_laughs": (text_case(billion_laughs()), "declares XML entities; refused"),
    "quadratic_blowup": (text_case(quadratic_blowup()), "declares XML entities; refused"),
    "external_entity_xxe": (text_case('<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                                      '<robot name="&x;"><link name="a"/></robot>'), "declares XML entities; refused"),
    "parameter_entity": (text_case('<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>'
                                   '<robot name="r"><link name="a"/></robot>'), "declares XML entities; refused"),
    "external_dtd": (text_case('<?xml version="1.0"?><!DOCTYPE robot SYSTEM "file:///etc/passwd"><robot name="r"><link name="a"/></robot>'), "has a DOCTYPE; refused"),
    # mesh paths escaping the robot's folders
    "package_dotdot_to_etc_passwd": (text_case(urdf(link_a=visual("package://../../../../../../../../etc/passwd"))), "outside the robot's folders"),
    "package_named_etc": (text_case(urdf(link_a=visual("package://etc/passwd"))), "package 'etc' not found"),
    "package_triple_slash_etc": (text_case(urdf(link_a=visual("package:///etc/passwd"))), "package 'etc' not found"),
    "package_climbs_out_of_itself": (with_files(urdf(link_a=visual("package://bot/../../../../../../../../etc/passwd")), {"bot/package.xml": "<package/>"},
                                                urdf_at="bot/urdf/robot.urdf"), "outside the robot's folders"),
    "absolute_path_outside": (text_case(urdf(link_a=visual("/etc/passwd"))), "outside the robot's folders"),
    "file_url_outside": (text_case(urdf(link_a=visual("file:///etc/passwd"))), "outside the robot's folders"),
    "relative_dotdot_outside": (text_case(urdf(link_a=visual("../" * 30 + "etc/passwd"))), "outside the robot's folders"),
    "sibling_folder_outside": (with_files(urdf(link_a=visual("../../secret/key.stl")), {"secret/key.stl": GOOD_STL}, urdf_at="robot/urdf/robot.urdf"),
                               "outside the robot's folders"),
    "symlink_to_etc_passwd": (symlink_case, "outside the robot's folders"),
    "mesh_filename_empty": (text_case(urdf(link_a=visual(""))), "has no filename"),
    "mesh_filename_very_long": (text_case(urdf(link_a=visual("m" * 5000 + ".stl"))), "not a usable path"),
    # mesh files that cannot be meshes (checked when the URDF is loaded)
    "mesh_is_a_folder": (with_files(urdf(link_a=visual("meshes/part.stl")), {"meshes/part.stl": None}), "is a folder, not a mesh file"),
    "mesh_zero_bytes": (with_files(urdf(link_a=visual("part.stl")), {"part.stl": b""}), "is empty (0 bytes)"),
    "mesh_unknown_format": (with_files(urdf(link_a=visual("part.exe")), {"part.exe": b"MZ\x90\x00"}), "which is not read"),
    "mesh_is_the_urdf_itself": (text_case(urdf(link_a=visual("robot.urdf"))), "which is not read"),
}


@pytest.fixture
def hostile(tmp_path, request):
    write, fragment = URDF_CASES[request.param]
    folder = tmp_path / "robot_folder"
    folder.mkdir()
    return write(folder), fragment


@pytest.mark.parametrize("hostile", sorted(URDF_CASES), indirect=True)
def test_hostile_urdf_is_refused_with_one_line_naming_file_and_problem(hostile):
    path, fragment = hostile
    with pytest.raises(KinemaError) as caught:
        load_robot(path)
    message = str(caught.value)
    assert fragment in message, message[:500]
    assert str(path) in message
    assert "\n" not in message
    assert len(message) < 2000


CLI_SAMPLE = ("billion_laughs", "package_dotdot_to_etc_passwd", "chain_of_10000_links", "mesh_zero_bytes", "binary_junk", "external_dtd")


@pytest.mark.parametrize("hostile", CLI_SAMPLE, indirect=True)
def test_cli_refuses_hostile_urdf_in_one_line(hostile):
    path, fragment = hostile
    result = subprocess.run([sys.executable, "-m", "kinema_nodes", "info", str(path)], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr[-2000:]


def test_corpus_has_at_least_thirty_cases():
    assert len(URDF_CASES) + len(MESH_CASES) >= 30


# ---- long and wide trees that are allowed: no recursion limit, no quadratic blow-up -------------

def test_longest_allowed_chain_loads_and_computes_forward_kinematics(tmp_path):
    path = tmp_path / "chain.urdf"
    path.write_text(chain(MAX_LINKS))
    robot = load_robot(path)
    assert robot.dof == MAX_LINKS - 1
    assert robot.tool_point == f"l{MAX_LINKS - 1}"
    pose = link_pose(robot, robot.zero_configuration(), robot.tool_point)
    assert pose[2, 3] == pytest.approx(0.01 * (MAX_LINKS - 1))
    assert len(robot.chain(robot.tool_point)) == MAX_LINKS - 1


def test_widest_allowed_tree_loads(tmp_path):
    links = "".join(f'<link name="l{i}"/>' for i in range(MAX_LINKS))
    joints = "".join(
        f'<joint name="j{i}" type="revolute"><parent link="l0"/><child link="l{i}"/><axis xyz="0 0 1"/>{LIMIT}</joint>' for i in range(1, MAX_LINKS)
    )
    path = tmp_path / "wide.urdf"
    path.write_text(f'<robot name="wide">{links}{joints}</robot>')
    robot = load_robot(path)
    assert robot.root_link == "l0" and len(robot.leaf_links) == MAX_LINKS - 1


# ---- the mesh-path rule lets real layouts through -----------------------------------------------

def test_meshes_beside_the_urdf_folder_and_in_its_package_are_allowed(tmp_path):
    package = tmp_path / "ws" / "src" / "bot_description"
    (package / "meshes").mkdir(parents=True)
    (package / "package.xml").write_text("<package/>")
    (package / "meshes" / "part.stl").write_text(GOOD_STL)
    (package / "urdf" / "xacro_out").mkdir(parents=True)
    path = package / "urdf" / "xacro_out" / "robot.urdf"
    text = urdf(link_a=visual("package://bot_description/meshes/part.stl") + visual("../../meshes/part.stl")
                + visual(f"file://{package}/meshes/part.stl"))
    path.write_text(text)
    robot = load_robot(path)
    assert len(robot.meshes) == 3
    assert package in robot_folders(path, ["bot_description"])


def test_real_robot_meshes_all_load_as_triangles(robots):
    robot = robots("panda")
    assert check_robot_meshes(robot) >= 10


# ---- mesh contents: name -> (file name, bytes, message fragment) ------------------------------------

def binary_stl(triangles: np.ndarray, claimed: int | None = None) -> bytes:
    count = len(triangles) if claimed is None else claimed
    body = b"".join(struct.pack("<12fH", *([0.0, 0.0, 1.0] + list(t.ravel())), 0) for t in triangles)
    return b"\0" * 80 + struct.pack("<I", count) + body


TRIANGLE = np.array([[[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0]]], dtype=np.float32)
DAE_HEAD = '<?xml version="1.0"?>'
MESH_CASES = {
    "stl_without_facets": ("empty.stl", "solid nothing\nendsolid nothing\n", "has no triangles"),
    "stl_binary_junk": ("junk.stl", np.random.default_rng(7).bytes(3000), "has no triangles"),
    "stl_claims_a_billion_triangles": ("liar.stl", binary_stl(TRIANGLE, claimed=1_000_000_000), "has no triangles"),
    "stl_with_nan_vertex": ("nan.stl", binary_stl(np.array([[[0, 0, 0], [np.nan, 0, 0], [0, 1, 0]]], dtype=np.float32)), "NaN or inf"),
    "stl_far_away": ("far.stl", binary_stl(TRIANGLE * 1e9), "refusing meshes beyond"),
    "obj_vertices_only": ("points.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\n", "has no triangles"),
    "obj_face_points_nowhere": ("bad.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99\n", "could not be read"),
    "obj_text_junk": ("junk.obj", "this is not\na mesh at all\n" * 20, "has no triangles"),
    "dae_billion_laughs": ("bomb.dae", DAE_HEAD + '<!DOCTYPE c [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><COLLADA>&b;</COLLADA>',
                           "declares a DOCTYPE or XML entities; refused"),
    "dae_xxe": ("xxe.dae", DAE_HEAD + '<!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><COLLADA>&x;</COLLADA>',
                "declares a DOCTYPE or XML entities; refused"),
    "dae_truncated": ("cut.dae", DAE_HEAD + '<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1"><library_geometries><geome',
                      "could not be read"),
    "dae_binary_junk": ("junk.dae", np.random.default_rng(3).bytes(5000), "could not be read"),
    "ply_lies_about_vertex_count": ("liar.ply", ("ply\nformat ascii 1.0\nelement vertex 1000000\nproperty float x\nproperty float y\nproperty float z\n"
                                    "element face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"), "has no triangles"),
    "mesh_zero_bytes": ("zero.stl", b"", "is empty (0 bytes)"),
    "mesh_unknown_format": ("part.step", "ISO-10303-21;", "which is not read"),
}


@pytest.mark.parametrize("case", sorted(MESH_CASES))
def test_hostile_mesh_is_refused_with_one_line(tmp_path, case):
    name, content, fragment = MESH_CASES[case]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(KinemaError) as caught:
        load_mesh_arrays(path, source=tmp_path / "robot.urdf", filename=f"package://bot/{name}")
    message = str(caught.value)
    assert fragment in message, message[:500]
    assert "\n" not in message and str(tmp_path / "robot.urdf") in message


def test_mesh_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "part.stl").mkdir()
    with pytest.raises(KinemaError, match="is a folder, not a mesh file"):
        load_mesh_arrays(tmp_path / "part.stl")


def test_good_mesh_loads_as_scaled_triangles(tmp_path):
    path = tmp_path / "part.stl"
    path.write_text(GOOD_STL)
    vertices, faces = load_mesh_arrays(path, scale=(2.0, 2.0, 2.0))
    assert faces.shape == (1, 3) and vertices.shape == (3, 3)
    assert np.max(vertices) == pytest.approx(0.2)


# ---- in Blender: a refused import leaves nothing behind -------------------------------------------

BLENDER_SAMPLE = {
    "escaping_mesh": ("package_dotdot_to_etc_passwd", None),
    "entity_bomb": ("billion_laughs", None),
    "mesh_without_triangles": (None, ("empty.stl", "solid nothing\nendsolid nothing\n")),
    "junk_mesh": (None, ("junk.stl", np.random.default_rng(7).bytes(3000))),
}


@pytest.mark.parametrize("case", sorted(BLENDER_SAMPLE))
def test_refused_import_leaves_nothing_half_made_in_blender(blender, tmp_path, case):
    bpy = blender
    if not hasattr(bpy.ops.kinema, "import_urdf"):
        pytest.skip("the add-on has no kinema.import_urdf operator yet")
    urdf_case, mesh = BLENDER_SAMPLE[case]
    if urdf_case:
        path = URDF_CASES[urdf_case][0](tmp_path)
    else:
        name, content = mesh
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        path = tmp_path / "robot.urdf"
        path.write_text(urdf(link_a=visual(name)))
    before = {kind: len(getattr(bpy.data, kind)) for kind in ("objects", "meshes", "armatures", "materials", "collections", "node_groups")}
    with pytest.raises(RuntimeError) as caught:  # the operator reports the error, which bpy raises as RuntimeError
        bpy.ops.kinema.import_urdf(filepath=str(path))
    assert str(path) in str(caught.value)
    after = {kind: len(getattr(bpy.data, kind)) for kind in before}
    assert after == before
