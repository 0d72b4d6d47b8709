"""Capsules that hold a point cloud: one to three along its main axis (a long or bent link, a mesh
obstacle), and a mesh cut into convex pieces that wrap it tighter than its one hull."""

from __future__ import annotations

import math

import numpy as np

#: Most capsules per link (slabs along its main axis).
MAX_PIECES = 3
#: More pieces only when they cut the wrapped volume by at least this share.
PIECE_GAIN = 0.2


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

