"""The robot's collision model: a few capsules per link, and the link pairs never checked.

A distance between two meshes costs a mesh-distance library call; a distance between two
capsules is a segment-to-segment formula, cheap enough to run inside every solver iteration
(PyRoki's `RobotCollision` makes the same trade). Each link's capsules are fitted to its URDF
`<collision>` geometry (its `<visual>` geometry where it has none), conservatively: every vertex
of the geometry's convex hull lies inside a capsule, so capsules that do not touch means meshes
that do not touch. A long or bent link gets up to three capsules (its hull cut into slabs along
its main axis) when that wraps it noticeably tighter than one.

Self-collision skips the pairs MoveIt's setup assistant calls "disabled collisions": adjacent
links (parent and child, looking through links without geometry), pairs that touch at the rest
pose, and pairs that touch in nearly every random pose. An SRDF next to the URDF (same stem,
``.srdf``; or ``srdf/NAME.srdf`` beside the ``urdf/`` folder, the ROS package layout) or one given
explicitly supplies the pairs instead (its `<disable_collisions>`, which MoveIt's setup assistant
computes from the real meshes). Either way, two links that no joint moves apart (rigid with each
other) are never a pair: their distance never changes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import RobotFileError
from .capsule_fit import _hull_points, convex_pieces, fit_capsules
from .collision_model import CollisionModel
from .srdf import _pair, _srdf_path, read_srdf_pairs

if TYPE_CHECKING:
    from ..model.robot import RobotModel

#: A pair that touches in at least this share of random poses is never checked ("always in collision").
ALWAYS_SHARE = 0.95
#: Random poses sampled for the "always in collision" pairs.
RANDOM_POSES = 400


def collision_model(robot: RobotModel, srdf: str | Path | None = None) -> CollisionModel:
    """The robot's CollisionModel, cached with the robot (one per SRDF choice)."""
    cache = robot.cache("collision_model")
    key = None if srdf is None else str(srdf)
    model = cache.get(key)
    if model is None:
        model = cache[key] = _build(robot, srdf)
    return model


# ---- geometry -----------------------------------------------------------------------------

def _origin(element) -> np.ndarray:
    origin = getattr(element, "origin", None)
    return np.eye(4) if origin is None else np.asarray(origin, dtype=float)


def _primitive_points(geometry) -> np.ndarray | None:
    """Points whose convex hull is the primitive (a cylinder by two 32-gons: inscribed, so
    the polygon's radius is stretched to circumscribe the circle)."""
    if geometry.box is not None:
        half = np.asarray(geometry.box.size, dtype=float) / 2
        corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
        return corners * half
    if geometry.cylinder is not None:
        r = float(geometry.cylinder.radius) / math.cos(math.pi / 32)
        h = float(geometry.cylinder.length) / 2
        t = np.linspace(0, 2 * math.pi, 32, endpoint=False)
        ring = np.stack([r * np.cos(t), r * np.sin(t)], -1)
        return np.concatenate([np.c_[ring, np.full(32, -h)], np.c_[ring, np.full(32, h)]])
    if geometry.sphere is not None:
        r = float(geometry.sphere.radius)
        return np.array([[0.0, 0.0, 0.0]]), r
    return None


def link_geometry(robot: RobotModel, link: str) -> tuple[list[np.ndarray], list[tuple[np.ndarray, float]], str | None]:
    """(point clouds in the link frame, spheres (centre, radius), "collision"/"visual"/None)."""
    from ..model.meshes import load_mesh_arrays

    ylink = robot.urdf.link_map.get(link) if robot.urdf is not None else None
    if ylink is None:
        return [], [], None
    for role, elements in (("collision", ylink.collisions), ("visual", ylink.visuals)):
        clouds, spheres = [], []
        for element in elements or ():
            geometry = element.geometry
            if geometry is None:
                continue
            origin = _origin(element)
            if geometry.mesh is not None:
                ref = next((m for m in robot.mesh_files() if m.link == link and m.role == role
                            and m.filename == geometry.mesh.filename), None)
                if ref is None:
                    raise RobotFileError(robot.path or robot.name, f"link '{link}' {role} mesh '{geometry.mesh.filename}' "
                                                                   "could not be found for its collision model")
                vertices, faces = load_mesh_arrays(ref.path, ref.scale, source=robot.path or ref.path, filename=ref.filename)
                for points in convex_pieces(vertices, faces):
                    clouds.append(points @ origin[:3, :3].T + origin[:3, 3])
                continue
            else:
                got = _primitive_points(geometry)
                if got is None:
                    continue
                if isinstance(got, tuple):
                    centre, r = got
                    spheres.append((origin[:3, :3] @ centre[0] + origin[:3, 3], r))
                    continue
                points = got
            clouds.append(points @ origin[:3, :3].T + origin[:3, 3])
        if clouds or spheres:
            return clouds, spheres, role
    return [], [], None


# ---- the model ------------------------------------------------------------------------------

def _build(robot: RobotModel, srdf) -> CollisionModel:
    links, a, b, radius, source = [], [], [], [], {}
    hulls, piece_start, link_pieces = [], [0], [0]
    for link in robot.links:
        clouds, spheres, role = link_geometry(robot, link)
        for cloud in (clouds if not spheres else ()):  # a sphere has no point hull: such a link stays capsules only
            hull = _hull_points(cloud)
            hulls.append(hull)
            piece_start.append(piece_start[-1] + len(hull))
        link_pieces.append(len(piece_start) - 1)
        if role is None:
            continue
        source[link] = role
        for points in clouds:
            for ca, cb, cr in fit_capsules(points):
                links.append(link)
                a.append(ca)
                b.append(cb)
                radius.append(cr)
        for centre, r in spheres:
            links.append(link)
            a.append(centre)
            b.append(centre)
            radius.append(r)
    a = np.array(a, dtype=float).reshape(-1, 3)
    b = np.array(b, dtype=float).reshape(-1, 3)
    radius = np.array(radius, dtype=float)
    moved = _moved_links(robot)
    moving = np.array([link in moved for link in links], dtype=bool)
    partial = CollisionModel(tuple(links), a, b, radius, np.zeros((0, 2), dtype=np.int64), frozenset(), "computed", moving,
                             source)
    srdf_path = _srdf_path(robot, srdf)
    if srdf_path is not None:
        # The SRDF's pairs were computed on the meshes; the capsules are fatter, so a pair they
        # make touch at the rest pose is skipped too (else the rest pose itself would collide).
        allowed, where = read_srdf_pairs(srdf_path, robot) | _computed_allowed(robot, partial, rest_only=True), str(srdf_path)
    else:
        allowed, where = _computed_allowed(robot, partial), "computed"
    body = {link: _rigid_body(robot, link) for link in set(links)}
    allowed = allowed | {_pair(x, y) for x in body for y in body if x < y and body[x] == body[y]}
    pairs = []
    for i in range(len(links)):
        for j in range(i + 1, len(links)):
            if links[i] == links[j] or _pair(links[i], links[j]) in allowed:
                continue
            pairs.append((i, j))
    return CollisionModel(tuple(links), a, b, radius, np.array(pairs, dtype=np.int64).reshape(-1, 2), frozenset(allowed), where,
                          moving, source, (np.concatenate(hulls) if hulls else np.zeros((0, 3))).reshape(-1, 3),
                          np.array(piece_start, dtype=np.int64), np.array(link_pieces, dtype=np.int64))


def _moved_links(robot: RobotModel) -> set[str]:
    moved = set()
    for joint in robot.joints:  # tree order
        if joint.is_movable or joint.parent in moved:
            moved.add(joint.child)
    return moved


def _rigid_body(robot: RobotModel, link: str) -> str:
    """The link that heads the rigid body `link` belongs to: the child of the nearest movable joint
    above it (the root for links fixed to the base). Two links with the same head never move
    relative to each other, so a pair of them is never checked (MoveIt's setup assistant disables
    such pairs as "never in collision"): a hand's accelerometer 5 mm from its gripper base would
    otherwise sit inside every margin above 5 mm at every pose (Baxter)."""
    while True:
        joint = robot.joint_of_child.get(link)
        if joint is None or joint.is_movable:
            return link
        link = joint.parent


def _adjacent(robot: RobotModel, with_geometry: set[str]) -> set[tuple[str, str]]:
    """Parent-child pairs, looking through links without geometry (a flange frame between
    the wrist and the hand leaves the wrist and the hand adjacent)."""
    pairs = set()
    for link in with_geometry:
        parent = link
        while True:
            joint = robot.joint_of_child.get(parent)
            if joint is None:
                break
            parent = joint.parent
            if parent in with_geometry:
                pairs.add(_pair(link, parent))
                break
    return pairs


def _computed_allowed(robot: RobotModel, model: CollisionModel, rest_only: bool = False) -> set[tuple[str, str]]:
    """Adjacent pairs, pairs whose capsules touch at the rest pose, and pairs touching in at
    least `ALWAYS_SHARE` of `RANDOM_POSES` random poses. `rest_only`: just the pairs touching at rest."""
    from .geometry import capsule_pair_distances
    from .kinematics import world_capsules

    with_geometry = set(model.links)
    allowed = set() if rest_only else _adjacent(robot, with_geometry)
    count = len(model.links)
    if count < 2:
        return allowed
    i, j = np.triu_indices(count, 1)
    keep = np.array([model.links[x] != model.links[y] for x, y in zip(i, j)], dtype=bool)
    i, j = i[keep], j[keep]
    rest = robot.configuration({}) if hasattr(robot, "configuration") else robot.zero_configuration()
    rest = np.clip(rest, robot.lower, robot.upper)
    rng = np.random.default_rng(0)
    q = rest[None] if rest_only else np.concatenate([rest[None], robot.random_configurations(RANDOM_POSES, rng)])
    ca, cb = world_capsules(robot, model, q)  # (B, C, 3)
    d = capsule_pair_distances(ca[:, i], cb[:, i], model.radius[i], ca[:, j], cb[:, j], model.radius[j])  # (B, P)
    touching = d <= 0.0
    link_touch: dict[tuple[str, str], list[np.ndarray]] = {}
    for k, (x, y) in enumerate(zip(i, j)):
        link_touch.setdefault(_pair(model.links[x], model.links[y]), []).append(touching[:, k])
    for pair, columns in link_touch.items():
        any_touch = np.any(np.stack(columns), axis=0)
        if any_touch[0] or (not rest_only and float(any_touch[1:].mean()) >= ALWAYS_SHARE):
            allowed.add(pair)
    return allowed
