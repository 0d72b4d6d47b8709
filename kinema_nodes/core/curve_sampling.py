"""A Bezier curve sampled into a tool path by chordal and angular tolerances, as Visual Components
does: each chord deviates from the curve by at most the chordal tolerance, and the directions of
two chords in a row differ by at most the angular tolerance.

Why not the curve's resolution: a fixed number of points per segment is too coarse on a tight
bend (the tool cuts the corner) and needlessly dense on a straight run; a tolerance says what
the shot needs, whatever the curve's size. Pure NumPy: the control points come from Blender
(blender/path_moves.py), already in the robot's root frame (a Bezier curve moved by an affine
map is the same curve moved, so its control points may be mapped before sampling).
"""

from __future__ import annotations

import numpy as np

#: Interior points of a chord's stretch of curve at which its deviation is measured.
CHECKS = 15
#: A stretch shorter than this (m) is not split again: at a sharp corner of the curve the angle
#: between chords cannot be made small, so the split stops there.
SHORTEST = 1e-6
#: The most points a sampled path may have.
MOST_POINTS = 200_000


def bezier_points(segment: np.ndarray, t) -> np.ndarray:
    """Points of one cubic segment (4 control points, 3D) at parameters `t`."""
    t = np.asarray(t, dtype=float)[:, None]
    p0, p1, p2, p3 = np.asarray(segment, dtype=float)
    u = 1.0 - t
    return u ** 3 * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t ** 3 * p3


def _deviation(segment: np.ndarray, t0: float, t1: float) -> float:
    """The largest distance of the curve between t0 and t1 from the chord joining its ends."""
    ts = np.linspace(t0, t1, CHECKS + 2)
    points = bezier_points(segment, ts)
    a, b = points[0], points[-1]
    chord = b - a
    length2 = float(chord @ chord)
    inner = points[1:-1] - a
    if length2 <= 0.0:
        return float(np.linalg.norm(inner, axis=1).max())
    s = np.clip(inner @ chord / length2, 0.0, 1.0)
    return float(np.linalg.norm(inner - s[:, None] * chord, axis=1).max())


def _angles(points: np.ndarray) -> np.ndarray:
    """The angle (rad) between each chord's direction and the next's."""
    steps = np.diff(points, axis=0)
    lengths = np.linalg.norm(steps, axis=1)
    units = steps / np.where(lengths > 0, lengths, 1.0)[:, None]
    return np.arccos(np.clip(np.sum(units[:-1] * units[1:], axis=1), -1.0, 1.0))


def sample_bezier(segments, chordal: float, angular: float) -> np.ndarray:
    """Points along cubic Bezier segments (each 4 control points, end to end) such that every
    chord stays within `chordal` (m; 0: no limit) of the curve and two chords in a row turn by at
    most `angular` (rad; 0: no limit), except across a sharp corner of the curve itself.
    Each segment starts as 4 stretches; a stretch that breaks a tolerance is halved, until none do."""
    segments = [np.asarray(s, dtype=float).reshape(4, 3) for s in segments]
    if not segments:
        raise ValueError("a curve needs at least one segment")
    params = [list(np.linspace(0.0, 1.0, 5)) for _ in segments]
    while True:
        points, owner = [], []  # owner: (segment, stretch index) of the chord that starts at each point
        for k, (segment, ts) in enumerate(zip(segments, params)):
            found = bezier_points(segment, ts)
            start = 0 if k == 0 else 1  # a segment's first point is the one before's last
            points.extend(found[start:])
            owner.extend((k, i) for i in range(len(ts) - 1))
        points = np.array(points)
        split = set()
        for k, (segment, ts) in enumerate(zip(segments, params)):
            for i in range(len(ts) - 1):
                if chordal > 0.0 and _deviation(segment, ts[i], ts[i + 1]) > chordal:
                    split.add((k, i))
        if angular > 0.0:
            for c in np.flatnonzero(_angles(points) > angular):
                split.update((owner[c], owner[c + 1]))
        split = {(k, i) for k, i in split
                 if np.linalg.norm(np.subtract(*bezier_points(segments[k], params[k][i:i + 2]))) > SHORTEST}
        if not split or len(points) + len(split) > MOST_POINTS:
            return points
        for k in range(len(segments)):
            ts = params[k]
            mids = [0.5 * (ts[i] + ts[i + 1]) for i in range(len(ts) - 1) if (k, i) in split]
            params[k] = sorted(ts + mids)


def spline_segments(points, left_handles, right_handles, cyclic: bool) -> list[np.ndarray]:
    """The cubic segments of a Bezier spline from its points and handles (Blender's layout: a
    segment runs from point i, by its right handle and point i+1's left handle, to point i+1;
    a cyclic spline closes from the last point back to the first)."""
    points, left, right = (np.asarray(a, dtype=float).reshape(-1, 3) for a in (points, left_handles, right_handles))
    count = len(points)
    ends = [(i, i + 1) for i in range(count - 1)] + ([(count - 1, 0)] if cyclic and count > 1 else [])
    return [np.array([points[a], right[a], left[b], points[b]]) for a, b in ends]
