"""Obstacles from mesh vertices: the box, sphere, capsule or convex pieces that stand for a mesh.

The solver's collision costs (`distances.py`) measure distances to primitives, which
are cheap; an animator's obstacle is an arbitrary mesh. A mesh is fitted once in its own frame
(`fit_local`), and each frame only the fit is moved by the object's matrix (`place`), so an
animated obstacle costs a matrix product a frame, not a new fit.

Every fit *contains* the mesh: a box, sphere or capsule is never smaller than what it stands
for, so a pose clear of the fit is clear of the mesh (it may be a little more cautious than
needed). Under a non-uniform scale a sphere or capsule grows by the largest scale.

Numbers only (numpy; qhull through scipy for convex hulls, as trimesh's own hulls use): the Blender side reads the vertices and the
object's matrix and calls these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import KinemaError

#: What a mesh may be approximated by: name -> (label, what it does), the words the UI shows.
SHAPES = {
    "auto": ("Auto", "The primitive of least volume (box, sphere or capsule), or convex pieces when none comes near the mesh"),
    "box": ("Box", "The tightest box around each part of the mesh"),
    "sphere": ("Sphere", "A sphere around each part of the mesh"),
    "capsule": ("Capsule", "A capsule along each part's longest direction"),
    "convex": ("Convex Pieces", "The convex hull of each connected part of the mesh"),
}
#: In "auto", a primitive is kept while its volume is at most this many times the hull's.
AUTO_VOLUME_RATIO = 2.0
#: The thinnest box side (metres): a flat plane of a mesh still blocks what passes through it.
MIN_THICKNESS = 1.0e-3
#: Largest vertex count fitted (a convex hull of more is slow and never needed for an obstacle).
MAX_VERTICES = 2_000_000


@dataclass(frozen=True)
class LocalFit:
    """A fit in the mesh's own frame. `shape` says which fields hold it:
    box: `center`, `axes` (3x3, columns), `half_extents`; sphere: `center`, `radius`;
    capsule: `a`, `b`, `radius`; convex: `pieces`, one (vertices, faces) hull per piece, and
    `capsules`, the (a, b, r) that wrap those hulls for the solver (`capsule_fit.fit_capsules`)."""

    shape: str
    center: tuple[float, ...] = (0.0, 0.0, 0.0)
    axes: tuple[tuple[float, ...], ...] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    half_extents: tuple[float, ...] = (0.0, 0.0, 0.0)
    a: tuple[float, ...] = (0.0, 0.0, 0.0)
    b: tuple[float, ...] = (0.0, 0.0, 0.0)
    radius: float = 0.0
    pieces: tuple = ()
    capsules: tuple = ()

    @property
    def volume(self) -> float:
        if self.shape == "box":
            return float(np.prod(2.0 * np.asarray(self.half_extents)))
        if self.shape == "sphere":
            return 4.0 / 3.0 * np.pi * self.radius ** 3
        if self.shape == "capsule":
            length = float(np.linalg.norm(np.subtract(self.b, self.a)))
            return np.pi * self.radius ** 2 * length + 4.0 / 3.0 * np.pi * self.radius ** 3
        return float(sum(_hull_volume(v, f) for v, f in self.pieces))


def check_vertices(vertices, what: str = "obstacle") -> np.ndarray:
    """(N, 3) finite floats, at least one vertex; one clear line otherwise."""
    try:
        points = np.asarray(vertices, dtype=float)
    except (TypeError, ValueError):
        raise KinemaError(f"{what}: vertices must be numbers") from None
    if points.size == 0:
        raise KinemaError(f"{what}: the mesh has no vertices")
    if points.ndim != 2 or points.shape[1] != 3:
        raise KinemaError(f"{what}: vertices must be (N, 3), got shape {points.shape}")
    if len(points) > MAX_VERTICES:
        raise KinemaError(f"{what}: {len(points)} vertices is more than {MAX_VERTICES} (decimate it)")
    if not np.all(np.isfinite(points)):
        raise KinemaError(f"{what}: a vertex is not finite (NaN or inf)")
    return points


# ---- fitting in the mesh's own frame ---------------------------------------------------------

def fit_box(points: np.ndarray) -> LocalFit:
    """The smaller of the axis-aligned box and the box along the principal axes."""
    best = None
    for axes in (np.eye(3), _principal_axes(points)):
        local = points @ axes
        low, high = local.min(axis=0), local.max(axis=0)
        half = np.maximum((high - low) / 2.0, MIN_THICKNESS / 2.0)
        center = axes @ ((low + high) / 2.0)
        fit = LocalFit("box", center=tuple(center), axes=tuple(map(tuple, axes)), half_extents=tuple(half))
        if best is None or fit.volume < best.volume - 1e-15:
            best = fit
    return best


def fit_sphere(points: np.ndarray) -> LocalFit:
    """The smaller of the sphere about the box centre through the farthest vertex and Ritter's
    bounding sphere; both hold every vertex."""
    center = (points.min(axis=0) + points.max(axis=0)) / 2.0
    radius = float(np.sqrt(((points - center) ** 2).sum(axis=1).max()))
    shrunk_center, shrunk = _ritter(points)
    if shrunk < radius:
        center, radius = shrunk_center, shrunk
    return LocalFit("sphere", center=tuple(center), radius=max(radius, MIN_THICKNESS / 2.0))


def fit_capsule(points: np.ndarray) -> LocalFit:
    """Along the principal axis: the radius holds every vertex off the axis, and the segment is
    shortened at both ends as far as the radius still holds every vertex."""
    axis = _principal_axes(points)[:, 0]
    mean = points.mean(axis=0)
    along = (points - mean) @ axis
    off = points - mean - np.outer(along, axis)
    radius = max(float(np.sqrt((off ** 2).sum(axis=1).max())), MIN_THICKNESS / 2.0)
    low, high = float(along.min()), float(along.max())
    # A vertex at `along = t`, `off = d` is inside when the segment reaches t - sqrt(r^2 - d^2).
    reach = np.sqrt(np.maximum(radius ** 2 - (off ** 2).sum(axis=1), 0.0))
    start = min(float((along + reach).min()), (low + high) / 2.0)
    end = max(float((along - reach).max()), start)
    a, b = mean + start * axis, mean + end * axis
    fit = LocalFit("capsule", a=tuple(a), b=tuple(b), radius=radius)
    return _grown_to_hold(fit, points)


def fit_convex(points: np.ndarray, components: list[np.ndarray] | None = None) -> LocalFit:
    """One convex hull per piece (connected part of the mesh); a piece too flat for a hull
    becomes its box's eight corners."""
    from .capsule_fit import fit_capsules

    pieces = tuple(_hull(piece) for piece in components or [points])
    capsules = tuple((tuple(map(float, a)), tuple(map(float, b)), float(r)) for vertices, _ in pieces
                     for a, b, r in fit_capsules(vertices))
    return LocalFit("convex", pieces=pieces, capsules=capsules)


def fit_local(vertices, shape: str = "auto", faces=None, *, what: str = "obstacle") -> list[LocalFit]:
    """The fits standing for a mesh, in the mesh's own frame: one per connected part where
    `faces` (or edges: any (M, k) vertex index array) say how the vertices connect, so a table
    made of a top and four legs is five boxes, not one box with the space under it filled."""
    if shape not in SHAPES:
        raise KinemaError(f"{what}: unknown shape '{shape}' (choose {', '.join(SHAPES)})")
    points = check_vertices(vertices, what)
    components = connected_parts(points, faces) if faces is not None else [points]
    if shape == "convex":
        return [fit_convex(points, components)]
    return [_fit_one(part, shape) for part in components]


def _fit_one(points: np.ndarray, shape: str) -> LocalFit:
    if shape == "box":
        return fit_box(points)
    if shape == "sphere":
        return fit_sphere(points)
    if shape == "capsule":
        return fit_capsule(points)
    candidates = [fit_box(points), fit_sphere(points), fit_capsule(points)]
    best = min(candidates, key=lambda fit: fit.volume)
    if best.volume <= AUTO_VOLUME_RATIO * MIN_THICKNESS ** 3:
        return best
    try:
        hull = fit_convex(points)
    except KinemaError:  # no qhull here (SciPy missing): the primitive, which still holds the mesh
        return best
    if best.volume > AUTO_VOLUME_RATIO * hull.volume:
        return hull
    return best


def connected_parts(points: np.ndarray, faces) -> list[np.ndarray]:
    """The vertices of each connected part, joined by `faces` (or edges); vertices in no face
    are left out (loose vertices of a mesh are not a surface)."""
    try:
        index = np.asarray(faces, dtype=np.int64)
    except (TypeError, ValueError):
        raise KinemaError("obstacle: faces must be vertex indices") from None
    if index.ndim != 2 or index.shape[1] < 2 or not len(index):
        return [points]
    if index.min() < 0 or index.max() >= len(points):
        raise KinemaError("obstacle: a face names a vertex the mesh does not have")
    label = np.arange(len(points))
    a = index[:, 0].repeat(index.shape[1] - 1)
    b = index[:, 1:].ravel()
    while True:
        low = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, low)
        np.minimum.at(label, b, low)
        label = label[label]  # pointer jumping: each vertex straight to its part's smallest index
        if np.array_equal(label, before):
            break
    used = np.zeros(len(points), dtype=bool)
    used[index.ravel()] = True
    parts = [points[(label == part) & used] for part in np.unique(label[used])]
    return parts or [points]


# ---- placing a fit in the robot's root frame --------------------------------------------------

def place(fit: LocalFit, matrix, name: str = ""):
    """The collide primitive(s) of `fit` moved by `matrix` (4x4, mesh frame -> robot root frame):
    a list of `world` Box / Sphere / Capsule / MeshObstacle. Convex pieces
    become one MeshObstacle holding the capsules that wrap them (what the solver measures)."""
    from .world import Box, Capsule, MeshObstacle, Sphere

    m = np.asarray(matrix, dtype=float)
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise KinemaError(f"obstacle '{name}': its matrix is not a finite 4x4")
    linear, offset = m[:3, :3], m[:3, 3]
    largest = float(np.linalg.svd(linear, compute_uv=False)[0])
    if fit.shape == "sphere":
        return [Sphere(_floats(linear @ fit.center + offset), fit.radius * largest, name or "sphere")]
    if fit.shape == "capsule":
        return [Capsule(_floats(linear @ fit.a + offset), _floats(linear @ fit.b + offset), fit.radius * largest,
                                   name or "capsule")]
    if fit.shape == "box":
        axes = np.asarray(fit.axes, dtype=float)
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * fit.half_extents
        placed = (corners @ axes.T + fit.center) @ linear.T + offset
        frame = _orthonormal(linear @ axes)
        local = (placed - placed.mean(axis=0)) @ frame
        low, high = local.min(axis=0), local.max(axis=0)
        center = placed.mean(axis=0) + frame @ ((low + high) / 2.0)
        from ..model.rotations import matrix_to_quaternion

        wxyz = matrix_to_quaternion(frame)
        size = np.maximum(high - low, MIN_THICKNESS)
        return [Box(_floats(size), _floats((*center, *wxyz)), name or "box")]
    capsules = tuple((_floats(linear @ a + offset), _floats(linear @ b + offset), r * largest) for a, b, r in fit.capsules)
    pose = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    return [MeshObstacle(f"convex pieces of '{name}'", pose, name or "mesh", (1.0, 1.0, 1.0), capsules)]


def placed_pieces(fit: LocalFit, matrix) -> list[tuple[np.ndarray, np.ndarray]]:
    """A convex fit's hulls moved by `matrix` (for a mesh-distance check or a picture)."""
    m = np.asarray(matrix, dtype=float)
    return [(vertices @ m[:3, :3].T + m[:3, 3], faces) for vertices, faces in fit.pieces]


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def fit_obstacle(vertices, matrix, shape: str = "auto", faces=None, name: str = "obstacle"):
    """`place` of every `fit_local` piece: a mesh given in its own frame and its matrix."""
    return [primitive for fit in fit_local(vertices, shape, faces, what=f"obstacle '{name}'")
            for primitive in place(fit, matrix, name)]


# ---- helpers -----------------------------------------------------------------------------------

def _principal_axes(points: np.ndarray) -> np.ndarray:
    """Columns: the principal directions of the vertices, longest first (a right-handed frame)."""
    centred = points - points.mean(axis=0)
    if len(points) < 2 or not np.any(centred):
        return np.eye(3)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axes = np.eye(3)
    axes[:, : vt.shape[0]] = vt.T
    axes = _orthonormal(axes)
    return axes


def _orthonormal(columns: np.ndarray) -> np.ndarray:
    """The nearest right-handed rotation to three columns (Gram-Schmidt, degenerate columns
    replaced), so a reflected or squashed frame still gives a valid box orientation."""
    out = np.zeros((3, 3))
    for i in range(3):
        v = np.array(columns[:, i], dtype=float)
        for j in range(i):
            v -= out[:, j] * (out[:, j] @ v)
        norm = np.linalg.norm(v)
        if norm < 1e-12:
            for candidate in np.eye(3):
                v = candidate - sum(out[:, j] * (out[:, j] @ candidate) for j in range(i))
                norm = np.linalg.norm(v)
                if norm > 1e-6:
                    break
        out[:, i] = v / norm
    if np.linalg.det(out) < 0:
        out[:, 2] = -out[:, 2]
    return out


def _ritter(points: np.ndarray) -> tuple[np.ndarray, float]:
    first = points[0]
    far = points[int(((points - first) ** 2).sum(axis=1).argmax())]
    other = points[int(((points - far) ** 2).sum(axis=1).argmax())]
    center = (far + other) / 2.0
    radius = float(np.linalg.norm(other - far)) / 2.0
    for _ in range(len(points)):
        distances = np.sqrt(((points - center) ** 2).sum(axis=1))
        outlier = int(distances.argmax())
        if distances[outlier] <= radius * (1.0 + 1e-12):
            break
        grown = (radius + distances[outlier]) / 2.0
        center = center + (distances[outlier] - grown) / distances[outlier] * (points[outlier] - center)
        radius = grown
    radius = max(radius, float(np.sqrt(((points - center) ** 2).sum(axis=1).max())))
    return center, radius


def _grown_to_hold(fit: LocalFit, points: np.ndarray) -> LocalFit:
    """A capsule's radius raised, if rounding left a vertex outside it."""
    distance = _segment_distance(points, np.asarray(fit.a), np.asarray(fit.b)).max()
    if distance <= fit.radius:
        return fit
    return LocalFit("capsule", a=fit.a, b=fit.b, radius=float(distance))


def _segment_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    length2 = float(ab @ ab)
    t = np.zeros(len(points)) if length2 < 1e-24 else np.clip((points - a) @ ab / length2, 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * ab), axis=1)


def _hull(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, triangles) of the convex hull (qhull, as trimesh's own hull uses); a flat or
    tiny piece: the hull of its box's corners."""
    try:
        from scipy.spatial import ConvexHull, QhullError
    except ImportError:
        raise KinemaError("convex pieces need SciPy (its qhull): pip install scipy, or choose Box, Sphere or Capsule") from None

    try:
        hull = ConvexHull(points)
        if hull.volume > 1e-15:
            return _compact(points, hull.simplices)
    except (QhullError, ValueError):  # flat input; the box below stands in for it
        pass
    box = fit_box(points)
    axes = np.asarray(box.axes)
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * box.half_extents
    corners = corners @ axes.T + box.center
    return _compact(corners, ConvexHull(corners).simplices)


def _compact(points: np.ndarray, simplices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Only the hull's own vertices, the triangles renumbered to them and turned to face
    outward (qhull leaves their order as it found them)."""
    used, faces = np.unique(simplices, return_inverse=True)
    vertices = np.asarray(points[used], dtype=float)
    faces = faces.reshape(-1, 3).astype(np.int64)
    corners = vertices[faces]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    inward = np.einsum("ij,ij->i", normals, corners[:, 0] - vertices.mean(axis=0)) < 0
    faces[inward] = faces[inward][:, [0, 2, 1]]
    return vertices, faces


def _hull_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Volume of a closed triangle mesh (divergence theorem)."""
    v = np.asarray(vertices, dtype=float)[np.asarray(faces)]
    return abs(float(np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum())) / 6.0
