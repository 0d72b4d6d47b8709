"""Obstacle fits (core/model/obstacle_shapes.py): a mesh's box, sphere, capsule or convex pieces
always hold the mesh, placed by any matrix (rotation, non-uniform scale, reflection).

Independent checks: trimesh's own primitives (`trimesh.creation.box/capsule/icosphere`, their
`contains` ray test) and python-fcl distances between the mesh and the placed primitive.
Tolerance: 1e-9 m on containment (float64 throughout), 1e-6 relative on sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.collision.obstacle_shapes import SHAPES, fit_local, fit_obstacle, placed_pieces
from kinema_nodes.core.model.rotations import quaternion_to_matrix
from kinema_nodes.core.collision import Box, Capsule, MeshObstacle, Sphere


def table() -> trimesh.Trimesh:
    """A table of a top and four legs, as five separate parts of one mesh."""
    parts = [trimesh.creation.box((1.0, 0.6, 0.04), transform=trimesh.transformations.translation_matrix((0, 0, 0.72)))]
    for x in (-0.45, 0.45):
        for y in (-0.25, 0.25):
            parts.append(trimesh.creation.box((0.04, 0.04, 0.7), transform=trimesh.transformations.translation_matrix((x, y, 0.35))))
    return trimesh.util.concatenate(parts)


def matrices():
    rng = np.random.default_rng(7)
    out = [np.eye(4)]
    for _ in range(3):
        rotation = trimesh.transformations.random_rotation_matrix(rng.random(3))
        scale = np.diag([*rng.uniform(0.5, 2.0, 3), 1.0])
        shift = trimesh.transformations.translation_matrix(rng.uniform(-1, 1, 3))
        out.append(shift @ rotation @ scale)
    reflection = np.diag([-1.0, 1.0, 1.0, 1.0])
    out.append(reflection)
    return out


def as_trimesh(primitive) -> trimesh.Trimesh:
    """The placed primitive as trimesh's own solid (sections fine enough to hold to 1e-3 of r)."""
    if isinstance(primitive, Box):
        transform = np.eye(4)
        transform[:3, :3] = quaternion_to_matrix(np.array(primitive.pose[3:]))
        transform[:3, 3] = primitive.pose[:3]
        return trimesh.creation.box(primitive.size, transform=transform)
    if isinstance(primitive, Sphere):
        return trimesh.creation.icosphere(4, primitive.radius * 1.01).apply_translation(primitive.center)
    a, b = np.array(primitive.a), np.array(primitive.b)
    height = float(np.linalg.norm(b - a))
    capsule = trimesh.creation.capsule(height=height, radius=primitive.radius * 1.01, count=[32, 32])
    axis = (b - a) / height if height > 0 else np.array([0.0, 0.0, 1.0])
    capsule.apply_transform(trimesh.geometry.align_vectors([0, 0, 1], axis))
    return capsule.apply_translation((a + b) / 2)


def outside(points: np.ndarray, primitive) -> np.ndarray:
    """Distance (m) of each point outside the primitive (0 inside), by its own formula."""
    if isinstance(primitive, Box):
        local = (points - np.array(primitive.pose[:3])) @ quaternion_to_matrix(np.array(primitive.pose[3:]))
        return np.linalg.norm(np.maximum(np.abs(local) - np.array(primitive.size) / 2, 0.0), axis=1)
    if isinstance(primitive, Sphere):
        return np.maximum(np.linalg.norm(points - primitive.center, axis=1) - primitive.radius, 0.0)
    a, b = np.array(primitive.a), np.array(primitive.b)
    ab = b - a
    t = np.clip((points - a) @ ab / max(ab @ ab, 1e-300), 0, 1)
    return np.maximum(np.linalg.norm(points - (a + t[:, None] * ab), axis=1) - primitive.radius, 0.0)


@pytest.mark.parametrize("shape", ["box", "sphere", "capsule"])
@pytest.mark.parametrize("mesh_name", ["bunny-like blob", "cylinder", "table"])
def test_every_fit_holds_every_vertex_under_any_matrix(shape, mesh_name):
    if mesh_name == "table":
        mesh = table()
    elif mesh_name == "cylinder":
        mesh = trimesh.creation.cylinder(0.1, 0.8, sections=24)
    else:
        mesh = trimesh.creation.icosphere(2, 0.3)
        mesh.vertices *= [1.0, 0.6, 0.4]
        mesh.vertices += 0.05 * np.sin(7 * mesh.vertices)
    for matrix in matrices():
        placed = fit_obstacle(mesh.vertices, matrix, shape, mesh.faces, name="thing")
        world = trimesh.transform_points(mesh.vertices, matrix)
        # each vertex is inside the primitive of its own part
        covered = np.min([outside(world, p) for p in placed], axis=0)
        assert covered.max() <= 1e-9, (shape, mesh_name, covered.max())
        # and trimesh's own solids agree (ray containment on its own triangulation)
        inside = np.zeros(len(world), dtype=bool)
        for primitive in placed:
            inside |= as_trimesh(primitive).contains(world) | (outside(world, primitive) <= 1e-9)
        assert inside.all()


def test_auto_picks_the_tight_primitive_and_splits_a_table_into_its_parts():
    box = trimesh.creation.box((0.4, 0.2, 0.1))
    (fit,) = fit_local(box.vertices, "auto", box.faces)
    assert fit.shape == "box" and np.allclose(sorted(fit.half_extents), [0.05, 0.1, 0.2])
    sphere = trimesh.creation.icosphere(3, 0.3)
    (fit,) = fit_local(sphere.vertices, "auto", sphere.faces)
    assert fit.shape == "sphere" and fit.radius == pytest.approx(0.3, rel=1e-6)
    rod = trimesh.creation.cylinder(0.05, 1.0, sections=32)
    (fit,) = fit_local(rod.vertices, "auto", rod.faces)
    assert fit.shape == "capsule" and fit.radius == pytest.approx(0.05, rel=1e-6)
    fits = fit_local(table().vertices, "auto", table().faces)
    assert [f.shape for f in fits] == ["box"] * 5
    assert sum(f.volume for f in fits) == pytest.approx(1.0 * 0.6 * 0.04 + 4 * 0.04 * 0.04 * 0.7, rel=1e-6)
    # without faces the table is one box, with the space under the top filled
    (one,) = fit_local(table().vertices, "auto")
    assert one.volume > 10 * sum(f.volume for f in fits)


def test_convex_pieces_hold_their_parts_and_their_capsules_hold_the_hulls_by_fcl():
    import fcl

    mesh = table()
    matrix = matrices()[2]
    (fit,) = fit_local(mesh.vertices, "convex", mesh.faces)
    assert len(fit.pieces) == 5
    (obstacle,) = fit_obstacle(mesh.vertices, matrix, "convex", mesh.faces, name="table")
    assert isinstance(obstacle, MeshObstacle) and obstacle.name == "table" and obstacle.capsules
    hulls = placed_pieces(fit, matrix)
    world = trimesh.transform_points(mesh.vertices, matrix)
    total = trimesh.util.concatenate([trimesh.Trimesh(v, f) for v, f in hulls])
    assert total.is_volume or all(trimesh.Trimesh(v, f).is_volume for v, f in hulls)
    assert all(np.abs(trimesh.Trimesh(v, f).volume) > 0 for v, f in hulls)
    # FCL: every vertex of the table is inside some hull (distance 0 to a point-sized sphere)
    for vertex in world[::7]:
        point = fcl.CollisionObject(fcl.Sphere(1e-6), fcl.Transform(vertex))
        touching = False
        for vertices, faces in hulls:
            model = fcl.BVHModel()
            model.beginModel(len(vertices), len(faces))
            model.addSubModel(vertices, faces.astype(np.int32))
            model.endModel()
            hull = fcl.CollisionObject(model, fcl.Transform())
            if fcl.collide(point, hull, fcl.CollisionRequest(), fcl.CollisionResult()) or \
                    fcl.distance(point, hull, fcl.DistanceRequest(), fcl.DistanceResult()) <= 1e-5:
                touching = True
                break
        assert touching
    # the solver's capsules hold every hull vertex
    capsules = [Capsule(a, b, r) for a, b, r in obstacle.capsules]
    covered = np.min([outside(np.concatenate([v for v, _ in hulls]), c) for c in capsules], axis=0)
    assert covered.max() <= 1e-9


def test_a_flat_plane_is_a_thin_box_not_nothing():
    plane = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=float)
    (fit,) = fit_local(plane, "auto", [[0, 1, 2], [0, 2, 3]])
    assert fit.shape == "box" and min(fit.half_extents) > 0
    (fit,) = fit_local(plane, "convex", [[0, 1, 2], [0, 2, 3]])
    assert fit.pieces and fit.volume > 0


@pytest.mark.parametrize("vertices, faces, message", [
    ([], None, "no vertices"),
    ([[0, 0, float("nan")]], None, "not finite"),
    ([[0, 0]], None, r"\(N, 3\)"),
    ([["a", 0, 0]], None, "must be numbers"),
    ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 7]], "vertex the mesh does not have"),
])
def test_bad_meshes_are_refused_in_one_line(vertices, faces, message):
    with pytest.raises(KinemaError, match=message):
        fit_local(vertices, "auto", faces, what="obstacle 'Crate'")


def test_an_unknown_shape_or_a_broken_matrix_is_refused():
    cube = trimesh.creation.box((1, 1, 1))
    with pytest.raises(KinemaError, match="unknown shape 'cone'"):
        fit_local(cube.vertices, "cone")
    assert "auto" in SHAPES
    with pytest.raises(KinemaError, match="not a finite 4x4"):
        fit_obstacle(cube.vertices, np.full((4, 4), np.nan), "box")
