"""A COLLADA mesh whose material is broken still gives its triangles (the `anymal_kinova` import).

example-robot-data's ANYmal foot (`anymal_b_simple_description/meshes/foot/anymal_foot.dae`,
used by `anymal_b_simple_anymal` and `anymal_kinova`) binds a material whose texture sampler
names a surface the file never declares. pycollada skips that material, trimesh then dropped the
whole mesh node binding it, and the import stopped with "mesh ... has no triangles". The mesh
path was never the problem: the folder rule is untouched.

Judged against the file itself: the triangle count is the sum of its three ``<triangles
count=...>`` (81 + 4484 + 39), and the vertices are the file's positions placed by its node's
matrix (a uniform 9.99987e-4 scale), compared as bounding boxes within 1e-7 m (pycollada reads the
positions as float32: about 3e-8 m at the foot's 0.36 m).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robot, example_robots_folder
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.meshes import load_mesh


def foot_file():
    folder = example_robots_folder()
    if folder is None:
        pytest.skip("example-robot-data is not installed")
    return folder / "anymal_b_simple_description" / "meshes" / "foot" / "anymal_foot.dae"


def test_anymal_foot_gives_every_triangle_its_file_holds():
    path = foot_file()
    text = path.read_text()
    counts = [int(c) for c in re.findall(r'<triangles material="[^"]*" count="(\d+)"', text)]
    assert counts == [81, 4484, 39]
    positions = np.array(re.search(r'mesh-positions-array" count="\d+">([^<]*)<', text).group(1).split(), dtype=float)
    scale = 9.99987e-4  # the node's matrix: a uniform scale, no rotation or offset
    assert "<matrix sid=\"transform\">9.99987e-4 0 0 0 0 9.99987e-4 0 0 0 0 9.99987e-4 0 0 0 0 1</matrix>" in text
    expected = positions.reshape(-1, 3) * scale

    mesh = load_mesh(path)
    assert len(mesh.faces) == sum(counts)
    assert np.abs(mesh.vertices.min(axis=0) - expected.min(axis=0)).max() < 1e-7
    assert np.abs(mesh.vertices.max(axis=0) - expected.max(axis=0)).max() < 1e-7
    assert len(mesh.materials) == 2  # the two materials that load keep their colours; the broken one is grey


def test_every_mesh_of_anymal_kinova_loads():
    path = example_robot("anymal_kinova")
    if path is None:
        pytest.skip("example-robot-data is not installed")
    robot = load_robot(path, check_meshes=True)
    feet = [m for m in robot.mesh_files() if m.path.name == "anymal_foot.dae"]
    assert len(feet) >= 4
    for ref in {m.path: m for m in robot.mesh_files()}.values():
        assert len(load_mesh(ref.path, ref.scale).faces) > 0, ref.path
