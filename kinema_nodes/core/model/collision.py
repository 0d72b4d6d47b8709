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
computes from the real meshes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import RobotFileError
from .robot import RobotModel

#: A pair that touches in at least this share of random poses is never checked ("always in collision").
ALWAYS_SHARE = 0.95
#: Random poses sampled for the "always in collision" pairs.
RANDOM_POSES = 400
#: Most capsules per link (slabs along its main axis).
MAX_PIECES = 3
#: More pieces only when they cut the wrapped volume by at least this share.
PIECE_GAIN = 0.2
#: Largest SRDF read.
MAX_SRDF_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class CollisionModel:
    """Capsules in their links' frames and the self-collision pairs to check.

    `a`, `b` (C, 3) are capsule end points in the frame of link `link_of[c]`, `radius` (C,).
    `self_pairs` (P, 2) index capsules of links that may collide; `allowed` is the set of link
    pairs (sorted names) never checked, and `allowed_source` says where it came from."""

    links: tuple[str, ...]  # the link of each capsule (C,)
    a: np.ndarray
    b: np.ndarray
    radius: np.ndarray
    self_pairs: np.ndarray
    allowed: frozenset
    allowed_source: str  # "computed" or the SRDF's path
    moving: np.ndarray  # (C,) bool: the capsule's link is moved by some joint
    geometry_source: dict  # link -> "collision" | "visual"
    #: Convex pieces of the links' geometry (each piece's hull vertices in its link's frame, one
    #: piece after another: piece p is hull_local[piece_start[p]:piece_start[p + 1]]; link l's
    #: pieces are link_pieces[l] .. link_pieces[l + 1] - 1, in `robot.links` order; none for a link
    #: without geometry or with sphere geometry): the solver tightens near pairs with them.
    hull_local: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    piece_start: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    link_pieces: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @property
    def link_set(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.links))


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
    from .meshes import load_mesh_arrays

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


#: A mesh is cut into up to this many pieces (its triangles grouped by where they lie) ...
MAX_MESH_PIECES = 4
#: ... when their hulls hold it at most this share of its one hull's volume (an L-shaped link).
PIECES_BELOW = 0.8


def convex_pieces(vertices: np.ndarray, faces: np.ndarray) -> list[np.ndarray]:
    """A mesh as the hull vertices of one to `MAX_MESH_PIECES` groups of its triangles (grouped in
    equal lengths along its main axis). Every triangle lies whole in its group's hull, so the pieces hold the
    mesh's surface; a concave part (an elbow housing on a tube) is wrapped tighter than by one hull."""
    from scipy.spatial import ConvexHull, QhullError

    whole = _hull_points(vertices)
    try:
        volume = ConvexHull(whole).volume
    except (QhullError, ValueError):
        return [whole]
    if len(faces) < 8 or volume <= 0:
        return [whole]
    centroids = vertices[faces].mean(axis=1)
    centre = centroids.mean(axis=0)
    _, _, vt = np.linalg.svd(centroids - centre, full_matrices=False)
    t = (centroids - centre) @ vt[0]
    best, best_volume = [whole], volume
    for count in range(2, MAX_MESH_PIECES + 1):
        edges = np.linspace(t.min(), t.max(), count + 1)[1:-1]
        group = np.searchsorted(edges, t)
        pieces, total = [], 0.0
        for g in range(count):
            corners = vertices[faces[group == g]].reshape(-1, 3)
            if not len(corners):
                continue
            piece = _hull_points(corners)
            try:
                total += ConvexHull(piece).volume
            except (QhullError, ValueError):
                pass
            pieces.append(piece)
        if total < PIECES_BELOW * best_volume:
            best, best_volume = pieces, total
    return best


def _hull_points(points: np.ndarray) -> np.ndarray:
    from scipy.spatial import ConvexHull, QhullError

    points = np.unique(np.asarray(points, dtype=float), axis=0)
    if len(points) < 5:
        return points
    try:
        return points[ConvexHull(points).vertices]
    except (QhullError, ValueError):  # flat or degenerate: every point still bounds it
        return points


def _capsule_for(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A capsule holding every point: its axis the points' main direction, its end points
    pulled in as far as coverage allows, its radius the largest distance to the segment."""
    centre = points.mean(axis=0)
    if len(points) == 1:
        return centre, centre, 0.0
    _, _, vt = np.linalg.svd(points - centre, full_matrices=False)
    axis = vt[0]
    t = (points - centre) @ axis
    radial = np.linalg.norm((points - centre) - t[:, None] * axis, axis=1)
    r = float(radial.max())
    slack = np.sqrt(np.maximum(r * r - radial * radial, 0.0))
    hi = float(np.max(t - slack))
    lo = float(np.min(t + slack))
    if lo > hi:
        lo = hi = 0.5 * (lo + hi)
    a, b = centre + lo * axis, centre + hi * axis
    r = float(np.max(_point_segment_distance(points, a, b)))
    return a, b, r


def _point_segment_distance(points, a, b) -> np.ndarray:
    ab = b - a
    length2 = float(ab @ ab)
    t = np.zeros(len(points)) if length2 < 1e-18 else np.clip((points - a) @ ab / length2, 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * ab), axis=1)


def _slab_points(points: np.ndarray, axis: np.ndarray, cuts: list[float]) -> list[np.ndarray]:
    """The convex hull of `points` cut into slabs by planes normal to `axis` at `cuts`: each
    slab's points are the hull vertices inside it plus where the hull's edges cross its planes,
    so each slab's own hull is exactly the hull's slice (nothing between slabs is lost)."""
    from scipy.spatial import ConvexHull, QhullError

    try:
        hull = ConvexHull(points)
        edges = np.unique(np.sort(np.concatenate([hull.simplices[:, [0, 1]], hull.simplices[:, [1, 2]],
                                                  hull.simplices[:, [0, 2]]]), axis=1), axis=0)
    except (QhullError, ValueError):
        return [points]
    t = points @ axis
    bounds = [-np.inf, *cuts, np.inf]
    crossings = []
    for cut in cuts:
        ta, tb = t[edges[:, 0]], t[edges[:, 1]]
        crossing = (ta - cut) * (tb - cut) < 0
        e = edges[crossing]
        s = (cut - t[e[:, 0]]) / (t[e[:, 1]] - t[e[:, 0]])
        crossings.append(points[e[:, 0]] + s[:, None] * (points[e[:, 1]] - points[e[:, 0]]))
    slabs = []
    for i in range(len(bounds) - 1):
        inside = points[(t >= bounds[i]) & (t <= bounds[i + 1])]
        extra = [crossings[i - 1]] if i > 0 else []
        if i < len(cuts):
            extra.append(crossings[i])
        slab = np.concatenate([inside, *extra]) if extra else inside
        if len(slab):
            slabs.append(slab)
    return slabs


def _volume(capsules) -> float:
    return sum(math.pi * r * r * float(np.linalg.norm(b - a)) + 4.0 / 3.0 * math.pi * r ** 3 for a, b, r in capsules)


def fit_capsules(points: np.ndarray, max_pieces: int = MAX_PIECES) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """One to `max_pieces` capsules covering the convex hull of `points`: more only when they
    wrap it at least `PIECE_GAIN` tighter (by volume)."""
    points = _hull_points(points)
    best = [_capsule_for(points)]
    if len(points) < 8 or max_pieces < 2:
        return best
    centre = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - centre, full_matrices=False)
    axis = vt[0]
    t = points @ axis
    lo, hi = float(t.min()), float(t.max())
    for pieces in range(2, max_pieces + 1):
        cuts = [lo + (hi - lo) * k / pieces for k in range(1, pieces)]
        slabs = _slab_points(points, axis, cuts)
        candidate = [_capsule_for(s) for s in slabs]
        if _volume(candidate) < (1.0 - PIECE_GAIN) * _volume(best):
            best = candidate
    return best


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
    pairs = []
    for i in range(len(links)):
        for j in range(i + 1, len(links)):
            if links[i] == links[j] or _pair(links[i], links[j]) in allowed:
                continue
            if not (moving[i] or moving[j]):
                continue
            pairs.append((i, j))
    return CollisionModel(tuple(links), a, b, radius, np.array(pairs, dtype=np.int64).reshape(-1, 2), frozenset(allowed), where,
                          moving, source, (np.concatenate(hulls) if hulls else np.zeros((0, 3))).reshape(-1, 3),
                          np.array(piece_start, dtype=np.int64), np.array(link_pieces, dtype=np.int64))


def _pair(x: str, y: str) -> tuple[str, str]:
    return (x, y) if x <= y else (y, x)


def _moved_links(robot: RobotModel) -> set[str]:
    moved = set()
    for joint in robot.joints:  # tree order
        if joint.is_movable or joint.parent in moved:
            moved.add(joint.child)
    return moved


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
    from ..stages.collisions import capsule_pair_distances, world_capsules

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


def _srdf_path(robot: RobotModel, srdf) -> Path | None:
    if srdf is not None:
        path = Path(srdf)
        if not path.is_file():
            raise RobotFileError(path, "SRDF not found (or not a file)")
        return path
    if robot.path is not None:
        path = Path(robot.path)
        stem = path.name.split(".")[0]
        # beside the URDF, or in the ROS package layout (pkg/urdf/NAME.urdf, pkg/srdf/NAME.srdf)
        for candidate in (path.with_name(stem + ".srdf"), path.parent.parent / "srdf" / (stem + ".srdf")):
            if candidate.is_file():
                return candidate
    return None


def read_srdf_pairs(path: str | Path, robot: RobotModel) -> set[tuple[str, str]]:
    """The `<disable_collisions link1= link2=>` pairs of an SRDF, with the same hardening as a
    URDF (size, no DOCTYPE or entities); unknown links are refused with the file named."""
    from .xml_reading import parse_xml, read_xml_file

    path = Path(path)
    root = parse_xml(read_xml_file(path, MAX_SRDF_BYTES, "SRDF"), path, "SRDF")
    pairs = set()
    known = set(robot.links)
    for element in root.iter("disable_collisions"):
        x, y = element.get("link1"), element.get("link2")
        if not x or not y:
            raise RobotFileError(path, "SRDF <disable_collisions> needs link1 and link2")
        for name in (x, y):
            if name not in known:
                raise RobotFileError(path, f"SRDF <disable_collisions> names link '{name}', which robot '{robot.name}' does not have")
        pairs.add(_pair(x, y))
    return pairs
