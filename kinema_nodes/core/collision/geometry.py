"""Signed distances between the primitives: segment to segment (capsules, spheres) and segment to
box, in NumPy over many pairs at once (`_kernel.py` holds the same formulas as scalar loops)."""

from __future__ import annotations

import math

import numpy as np


def segment_closest(p1, q1, p2, q2):
    """Closest points of segments p1q1 and p2q2 (arrays (..., 3), broadcast): (s, t, c1, c2)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = np.einsum("...i,...i->...", d1, d1)
    e = np.einsum("...i,...i->...", d2, d2)
    f = np.einsum("...i,...i->...", d2, r)
    c = np.einsum("...i,...i->...", d1, r)
    b = np.einsum("...i,...i->...", d1, d2)
    eps = 1e-14
    denom = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(denom > eps * np.maximum(a * e, eps), np.clip((b * f - c * e) / np.where(denom > 0, denom, 1.0), 0, 1), 0.0)
        s = np.where(a <= eps, 0.0, s)
        # a point for the second segment (a sphere): the first one's point nearest it
        s = np.where((e <= eps) & (a > eps), np.clip(-c / np.where(a > eps, a, 1.0), 0.0, 1.0), s)
        t = np.where(e <= eps, 0.0, (b * s + f) / np.where(e > eps, e, 1.0))
        # t outside [0, 1]: clamp and recompute s
        t_clamped = np.clip(t, 0.0, 1.0)
        s_re = np.where(a <= eps, 0.0, np.clip((b * t_clamped - c) / np.where(a > eps, a, 1.0), 0.0, 1.0))
        s = np.where((t < 0) | (t > 1), s_re, s)
        t = t_clamped
    c1 = p1 + s[..., None] * d1
    c2 = p2 + t[..., None] * d2
    return s, t, c1, c2


def capsule_pair_distances(a1, b1, r1, a2, b2, r2) -> np.ndarray:
    """Signed distances between capsules (broadcast over leading axes)."""
    _, _, c1, c2 = segment_closest(a1, b1, a2, b2)
    return np.linalg.norm(c1 - c2, axis=-1) - r1 - r2


def _local_sdf(local, half):
    """Signed distance of points in a box's own frame (..., 3) to the box of half sizes `half`."""
    q = np.abs(local) - half
    outside = np.maximum(q, 0.0)
    return np.sqrt(np.sum(outside * outside, axis=-1)) + np.minimum(np.max(q, axis=-1), 0.0)


#: Segment-to-box: samples along the segment, then golden-section steps in the best bracket.
_BOX_SAMPLES = 9
_BOX_REFINE = 14
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _segment_box(a, b, rot, centre, half):
    """Closest point of segments to boxes. A box's signed distance is convex, so along a segment
    it has one minimum: bracketed from samples, then narrowed by golden-section steps (P pairs
    at once, in each box's own frame). Returns (point on the segment, its signed distance to the
    box, the outward unit normal there)."""
    a_l = np.einsum("pji,pj->pi", rot, a - centre)
    ab_l = np.einsum("pji,pj->pi", rot, b - a)
    ts = np.linspace(0.0, 1.0, _BOX_SAMPLES)
    samples = _local_sdf(a_l[:, None] + ts[None, :, None] * ab_l[:, None], half[:, None])
    k = np.argmin(samples, axis=1)
    step = 1.0 / (_BOX_SAMPLES - 1)
    lo = np.maximum(k * step - step, 0.0)
    hi = np.minimum(k * step + step, 1.0)
    x1 = hi - _GOLDEN * (hi - lo)
    x2 = lo + _GOLDEN * (hi - lo)
    f1 = _local_sdf(a_l + x1[:, None] * ab_l, half)
    f2 = _local_sdf(a_l + x2[:, None] * ab_l, half)
    for _ in range(_BOX_REFINE):
        left = f1 < f2
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        x2n = np.where(left, x1, lo + _GOLDEN * (hi - lo))
        x1n = np.where(left, hi - _GOLDEN * (hi - lo), x2)
        moved = np.where(left, x1n, x2n)
        fm = _local_sdf(a_l + moved[:, None] * ab_l, half)
        f1, f2 = np.where(left, fm, f2), np.where(left, f1, fm)
        x1, x2 = x1n, x2n
    t = 0.5 * (lo + hi)
    local = a_l + t[:, None] * ab_l
    d = _local_sdf(local, half)
    best = samples[np.arange(len(a)), k]
    use_sample = best < d  # a flat minimum the narrowing cannot improve on
    t = np.where(use_sample, k * step, t)
    local = a_l + t[:, None] * ab_l
    q = np.abs(local) - half
    outside = np.maximum(q, 0.0)
    out_norm = np.sqrt(np.sum(outside * outside, axis=-1))
    d = out_norm + np.minimum(np.max(q, axis=-1), 0.0)
    sign = np.where(local >= 0, 1.0, -1.0)
    grad = sign * outside / np.maximum(out_norm, 1e-300)[:, None]
    inner = out_norm <= 0
    if inner.any():
        face = np.argmax(q[inner], axis=-1)
        g = np.zeros((int(inner.sum()), 3))
        g[np.arange(len(g)), face] = sign[inner][np.arange(len(g)), face]
        grad[inner] = g
    return a + t[:, None] * (b - a), d, np.einsum("pij,pj->pi", rot, grad)

