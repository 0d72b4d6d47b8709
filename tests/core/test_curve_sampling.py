"""A Bezier curve sampled by chordal and angular tolerances (core/curve_sampling.py): every chord
within the chordal tolerance of the curve (the curve measured at 20,000 points a segment between
the chord's ends, by the Bernstein form written here), two chords in a row turning by at most the
angular tolerance (1e-9 rad), yet not needlessly dense (the worst chord uses more than a tenth of
the tolerance); a sharp corner of the curve, where no sampling meets the angle, still ends."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.curve_sampling import sample_bezier, spline_segments

S_CURVE = np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 0.0], [0.3, -0.2, 0.05], [0.4, 0.0, 0.0]])


def _truth(segment, t):
    t = np.asarray(t)[:, None]
    p0, p1, p2, p3 = segment
    return (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3


def _worst_chord(segment, points) -> float:
    dense_t = np.linspace(0.0, 1.0, 20_001)
    dense = _truth(segment, dense_t)
    nearest = [int(np.argmin(np.linalg.norm(dense - p, axis=1))) for p in points]
    worst = 0.0
    for (i, j), a, b in zip(zip(nearest, nearest[1:]), points, points[1:]):
        stretch = dense[i + 1:j] - a
        if len(stretch):
            s = np.clip(stretch @ (b - a) / float((b - a) @ (b - a)), 0.0, 1.0)
            worst = max(worst, float(np.linalg.norm(stretch - s[:, None] * (b - a), axis=1).max()))
    return worst


def _turns(points):
    units = np.diff(points, axis=0)
    units /= np.linalg.norm(units, axis=1)[:, None]
    return np.arccos(np.clip(np.sum(units[:-1] * units[1:], axis=1), -1.0, 1.0))


@pytest.mark.parametrize("chordal", [1e-3, 1e-4, 1e-5])
def test_every_chord_is_within_the_chordal_tolerance_and_not_needlessly_dense(chordal):
    points = sample_bezier([S_CURVE], chordal, 0.0)
    worst = _worst_chord(S_CURVE, points)
    assert chordal / 10 < worst <= chordal, (chordal, worst)
    np.testing.assert_allclose(points[[0, -1]], S_CURVE[[0, 3]], atol=1e-15)


@pytest.mark.parametrize("degrees", [5.0, 1.0])
def test_two_chords_in_a_row_turn_by_at_most_the_angular_tolerance(degrees):
    points = sample_bezier([S_CURVE], 0.0, np.radians(degrees))
    turns = _turns(points)
    assert turns.max() <= np.radians(degrees) + 1e-9
    assert turns.max() > np.radians(degrees) / 10


def test_a_sharp_corner_ends_the_splitting_and_the_smooth_parts_keep_the_angle():
    points = np.array([[0.0, 0.0, 0.0], [0.2, 0.0, 0.0], [0.2, 0.2, 0.0]])
    handles_left = points + [[-0.05, 0.0, 0.0], [-0.05, 0.02, 0.0], [0.0, -0.05, 0.0]]
    handles_right = points + [[0.05, 0.03, 0.0], [0.02, 0.05, 0.0], [0.0, 0.05, 0.0]]  # the middle point's handles are not in line
    segments = spline_segments(points, handles_left, handles_right, cyclic=False)
    sampled = sample_bezier(segments, 1e-4, np.radians(2.0))
    corner = int(np.argmin(np.linalg.norm(sampled - points[1], axis=1)))
    assert np.linalg.norm(sampled[corner] - points[1]) < 1e-12
    turns = _turns(sampled)
    away = np.r_[turns[:corner - 1], turns[corner:]]  # every turn but the corner's own
    assert away.max() <= np.radians(2.0) + 1e-9
    assert turns[corner - 1] > np.radians(20.0)  # the corner stays a corner
    assert len(sampled) < 5_000


def test_a_cyclic_spline_closes_back_to_its_first_point():
    points = np.array([[0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [-0.1, 0.0, 0.0], [0.0, -0.1, 0.0]])
    k = 0.1 * 0.5523  # handles of a circle of 10 cm from four cubic arcs
    tangent = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])
    segments = spline_segments(points, points - k * tangent, points + k * tangent, cyclic=True)
    sampled = sample_bezier(segments, 1e-5, 0.0)
    np.testing.assert_allclose(sampled[-1], sampled[0], atol=1e-15)
    assert np.abs(np.linalg.norm(sampled, axis=1) - 0.1).max() < 1e-3  # on the circle (as near as four cubic arcs are)
