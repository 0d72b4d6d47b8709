"""The hot part of `distances.measure_pairs` as scalar loops for numba: forward kinematics of every
link, then every checked pair's signed distance, closest points and normal, in the same order
and by the same formulas (segment to segment; segment to box by samples then golden-section
steps; ground plane) as the NumPy form, so both give the same answers.

Compiled on first use in the calling thread, unless `warming.warm_kernel` has run first: the solve kernel's build
(`core.solve._kernel`, in its child process on a new machine, then in its background thread,
which `core.solve.wait_for_kernel_build` keeps clear of Blender's module loading) warms this one
too, so turning on Avoid Collisions does not stall the viewport for numba's compile (5-7 s on a
new machine) or its cache load (0.6 s). Cached on disk in the Kinema cache folder
(`core.cache_folder.signed_folder("numba")`); where numba is missing or `KINEMA_NO_NUMBA` is set, the NumPy
form serves.
"""

from __future__ import annotations

import math
import os

import numpy as np

SAMPLES = 9
REFINE = 14
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _fk(q, steps_i, steps_f, link_count, root, poses, origins, axes):
    for k in range(4):
        for m in range(4):
            poses[root, k, m] = 1.0 if k == m else 0.0
    pose = np.empty((4, 4))
    for s in range(steps_i.shape[0]):
        parent, child, kind, source, movable = steps_i[s, 0], steps_i[s, 1], steps_i[s, 2], steps_i[s, 3], steps_i[s, 4]
        for k in range(4):
            for m in range(4):
                acc = 0.0
                for n in range(4):
                    acc += poses[parent, k, n] * steps_f[s, 4 * n + m]
                pose[k, m] = acc
        if kind != 0:
            x, y, z = steps_f[s, 16], steps_f[s, 17], steps_f[s, 18]
            for k in range(3):
                origins[movable, k] = pose[k, 3]
                axes[movable, k] = pose[k, 0] * x + pose[k, 1] * y + pose[k, 2] * z
            value = q[source] * steps_f[s, 19] + steps_f[s, 20]
            if kind == 1:
                sn, c = math.sin(value), math.cos(value)
                t = 1.0 - c
                r00, r01, r02 = c + x * x * t, x * y * t - z * sn, x * z * t + y * sn
                r10, r11, r12 = y * x * t + z * sn, c + y * y * t, y * z * t - x * sn
                r20, r21, r22 = z * x * t - y * sn, z * y * t + x * sn, c + z * z * t
                for k in range(3):
                    a0, a1, a2 = pose[k, 0], pose[k, 1], pose[k, 2]
                    pose[k, 0] = a0 * r00 + a1 * r10 + a2 * r20
                    pose[k, 1] = a0 * r01 + a1 * r11 + a2 * r21
                    pose[k, 2] = a0 * r02 + a1 * r12 + a2 * r22
            else:
                for k in range(3):
                    pose[k, 3] += (pose[k, 0] * x + pose[k, 1] * y + pose[k, 2] * z) * value
        for k in range(4):
            for m in range(4):
                poses[child, k, m] = pose[k, m]


def _closest(p1, q1, p2, q2, out1, out2):
    """Segment-to-segment closest points, the NumPy form's formula (`segment_closest`); in scalars
    (an array expression allocates, and this runs for every pair of every measurement)."""
    d10, d11, d12 = q1[0] - p1[0], q1[1] - p1[1], q1[2] - p1[2]
    d20, d21, d22 = q2[0] - p2[0], q2[1] - p2[1], q2[2] - p2[2]
    r0, r1, r2 = p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2]
    a = d10 * d10 + d11 * d11 + d12 * d12
    e = d20 * d20 + d21 * d21 + d22 * d22
    f = d20 * r0 + d21 * r1 + d22 * r2
    c = d10 * r0 + d11 * r1 + d12 * r2
    b = d10 * d20 + d11 * d21 + d12 * d22
    eps = 1e-14
    denom = a * e - b * b
    if denom > eps * max(a * e, eps):
        s = min(max((b * f - c * e) / denom, 0.0), 1.0)
    else:
        s = 0.0
    if a <= eps:
        s = 0.0
    elif e <= eps:  # the second segment is a point (a sphere): the first one's point nearest it
        s = min(max(-c / a, 0.0), 1.0)
    t = (b * s + f) / e if e > eps else 0.0
    if t < 0.0 or t > 1.0:
        t = min(max(t, 0.0), 1.0)
        s = 0.0 if a <= eps else min(max((b * t - c) / a, 0.0), 1.0)
    out1[0], out1[1], out1[2] = p1[0] + s * d10, p1[1] + s * d11, p1[2] + s * d12
    out2[0], out2[1], out2[2] = p2[0] + t * d20, p2[1] + t * d21, p2[2] + t * d22


def _sdf(lx, ly, lz, hx, hy, hz):
    qx, qy, qz = abs(lx) - hx, abs(ly) - hy, abs(lz) - hz
    ox, oy, oz = max(qx, 0.0), max(qy, 0.0), max(qz, 0.0)
    return math.sqrt(ox * ox + oy * oy + oz * oz) + min(max(qx, max(qy, qz)), 0.0)


def _segment_box(a, b, rot, centre, half, point, normal):
    """Returns the signed distance; fills the segment point and the outward normal (world)."""
    # the segment in the box's frame, in scalars (no array allocated per pair)
    al0 = al1 = al2 = abl0 = abl1 = abl2 = 0.0
    for m in range(3):
        am, bm = a[m] - centre[m], b[m] - a[m]
        al0 += rot[m, 0] * am
        al1 += rot[m, 1] * am
        al2 += rot[m, 2] * am
        abl0 += rot[m, 0] * bm
        abl1 += rot[m, 1] * bm
        abl2 += rot[m, 2] * bm
    hx, hy, hz = half[0], half[1], half[2]
    step = 1.0 / (SAMPLES - 1)
    kbest = 0
    fbest = np.inf
    for i in range(SAMPLES):
        t = i * step
        f = _sdf(al0 + t * abl0, al1 + t * abl1, al2 + t * abl2, hx, hy, hz)
        if f < fbest:
            fbest = f
            kbest = i
    lo = max(kbest * step - step, 0.0)
    hi = min(kbest * step + step, 1.0)
    x1 = hi - GOLDEN * (hi - lo)
    x2 = lo + GOLDEN * (hi - lo)
    f1 = _sdf(al0 + x1 * abl0, al1 + x1 * abl1, al2 + x1 * abl2, hx, hy, hz)
    f2 = _sdf(al0 + x2 * abl0, al1 + x2 * abl1, al2 + x2 * abl2, hx, hy, hz)
    for _ in range(REFINE):
        if f1 < f2:
            hi = x2
            x2n = x1
            x1n = hi - GOLDEN * (hi - lo)
            moved = x1n
        else:
            lo = x1
            x1n = x2
            x2n = lo + GOLDEN * (hi - lo)
            moved = x2n
        fm = _sdf(al0 + moved * abl0, al1 + moved * abl1, al2 + moved * abl2, hx, hy, hz)
        if f1 < f2:
            f2 = f1
            f1 = fm
        else:
            f1 = f2
            f2 = fm
        x1, x2 = x1n, x2n
    t = 0.5 * (lo + hi)
    d = _sdf(al0 + t * abl0, al1 + t * abl1, al2 + t * abl2, hx, hy, hz)
    if fbest < d:
        t = kbest * step
    lx, ly, lz = al0 + t * abl0, al1 + t * abl1, al2 + t * abl2
    qx, qy, qz = abs(lx) - hx, abs(ly) - hy, abs(lz) - hz
    ox, oy, oz = max(qx, 0.0), max(qy, 0.0), max(qz, 0.0)
    norm = math.sqrt(ox * ox + oy * oy + oz * oz)
    d = norm + min(max(qx, max(qy, qz)), 0.0)
    sx = 1.0 if lx >= 0 else -1.0
    sy = 1.0 if ly >= 0 else -1.0
    sz = 1.0 if lz >= 0 else -1.0
    if norm > 0:
        gx, gy, gz = sx * ox / norm, sy * oy / norm, sz * oz / norm
    else:
        gx = gy = gz = 0.0
        if qx >= qy and qx >= qz:
            gx = sx
        elif qy >= qz:
            gy = sy
        else:
            gz = sz
    for k in range(3):
        point[k] = a[k] + t * (b[k] - a[k])
        normal[k] = rot[k, 0] * gx + rot[k, 1] * gy + rot[k, 2] * gz
    return d


def _box_bound(a, b, rot, centre, half):
    """A lower bound of the segment a-b's signed distance to the box: its midpoint's, less half its
    length (the box's signed distance changes no faster than the point moves)."""
    l0 = l1 = l2 = 0.0
    for m in range(3):
        cm = 0.5 * (a[m] + b[m]) - centre[m]
        l0 += rot[m, 0] * cm
        l1 += rot[m, 1] * cm
        l2 += rot[m, 2] * cm
    e0, e1, e2 = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    return _sdf(l0, l1, l2, half[0], half[1], half[2]) - 0.5 * math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)


def _unit(gap, length, out):
    if length > 1e-12:
        for k in range(3):
            out[k] = gap[k] / length
    else:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 1.0


def _above_ground(lowest, point_a, point_b, normal):
    """A pair with the ground: the robot's lowest point, the ground point under it, normal up."""
    for k in range(3):
        point_a[k] = lowest[k]
        point_b[k] = lowest[k] if k < 2 else 0.0
        normal[k] = 1.0 if k == 2 else 0.0


def _capsule_gap(a0, a1, b0, b1, radii, gap, point_a, point_b, normal):
    """The signed gap between two capsules (segments a0-a1 and b0-b1, radii summed), their
    nearest axis points and the unit normal from b to a."""
    _closest(a0, a1, b0, b1, point_a, point_b)
    for k in range(3):
        gap[k] = point_a[k] - point_b[k]
    length = math.sqrt(gap[0] * gap[0] + gap[1] * gap[1] + gap[2] * gap[2])
    _unit(gap, length, normal)
    return length - radii


def pairs_kernel(q, steps_i, steps_f, link_count, root, cap_link, cap_a, cap_b, cap_r, self_pairs, moving, world_a, world_b,
                 world_r, box_rot, box_centre, box_half, ground, far, d, point_a, point_b, normal, origins, axes, poses):
    """Fills d (N,), point_a, point_b, normal (N, 3), origins and axes (M, 3) and the link poses
    (L, 4, 4) in the NumPy form's pair order: self pairs, moving capsules x world capsules,
    moving capsules x boxes, ground. A capsule-box row whose cheap lower bound (`_box_bound`)
    is above `far` gets that bound, without points or normal (inf: every row exact)."""
    _fk(q, steps_i, steps_f, link_count, root, poses, origins, axes)
    count = cap_link.shape[0]
    wa = np.empty((count, 3))
    wb = np.empty((count, 3))
    for c in range(count):
        link = cap_link[c]
        for k in range(3):
            acc_a = poses[link, k, 3]
            acc_b = poses[link, k, 3]
            for m in range(3):
                acc_a += poses[link, k, m] * cap_a[c, m]
                acc_b += poses[link, k, m] * cap_b[c, m]
            wa[c, k] = acc_a
            wb[c, k] = acc_b
    gap = np.empty(3)
    row = 0
    for p in range(self_pairs.shape[0]):
        i, j = self_pairs[p, 0], self_pairs[p, 1]
        d[row] = _capsule_gap(wa[i], wb[i], wa[j], wb[j], cap_r[i] + cap_r[j], gap, point_a[row], point_b[row], normal[row])
        row += 1
    for mi in range(moving.shape[0]):
        i = moving[mi]
        for w in range(world_r.shape[0]):
            d[row] = _capsule_gap(wa[i], wb[i], world_a[w], world_b[w], cap_r[i] + world_r[w], gap, point_a[row], point_b[row],
                                  normal[row])
            row += 1
    for mi in range(moving.shape[0]):
        i = moving[mi]
        for w in range(box_half.shape[0]):
            if far < np.inf:
                bound = _box_bound(wa[i], wb[i], box_rot[w], box_centre[w], box_half[w]) - cap_r[i]
                if bound > far:
                    d[row] = bound
                    row += 1
                    continue
            sdf = _segment_box(wa[i], wb[i], box_rot[w], box_centre[w], box_half[w], point_a[row], normal[row])
            d[row] = sdf - cap_r[i]
            for k in range(3):
                point_b[row, k] = point_a[row, k] - normal[row, k] * sdf
            row += 1
    if ground:
        for mi in range(moving.shape[0]):
            i = moving[mi]
            lower = wa[i] if wa[i, 2] <= wb[i, 2] else wb[i]
            d[row] = min(wa[i, 2], wb[i, 2]) - cap_r[i]
            _above_ground(lower, point_a[row], point_b[row], normal[row])
            row += 1


HULL_ITERATIONS = 16


def _separation(a_pts, a_count, b_pts, b_count, b_radius, nx, ny, nz, out):
    """Gap along unit n (from A to B) between the point hulls A and B (+ B's radius): a lower
    bound of their signed distance for every n. Fills out = (gap, A's support index, B's)."""
    best_a = -np.inf
    ia = 0
    for i in range(a_count):
        v = a_pts[i, 0] * nx + a_pts[i, 1] * ny + a_pts[i, 2] * nz
        if v > best_a:
            best_a = v
            ia = i
    best_b = np.inf
    jb = 0
    for j in range(b_count):
        v = b_pts[j, 0] * nx + b_pts[j, 1] * ny + b_pts[j, 2] * nz
        if v < best_b:
            best_b = v
            jb = j
    out[0] = best_b - b_radius - best_a
    out[1] = ia
    out[2] = jb


def _place(poses, link, hull_local, start, count, out):
    for i in range(count):
        for k in range(3):
            out[i, k] = (poses[link, k, 0] * hull_local[start + i, 0] + poses[link, k, 1] * hull_local[start + i, 1]
                         + poses[link, k, 2] * hull_local[start + i, 2] + poses[link, k, 3])


def _hull_gap(a_pts, a_count, b_pts, b_count, b_radius, nx, ny, nz, witness_a, witness_b, direction):
    """The largest gap between the point hulls A and B (+ B's radius) over the unit directions
    tried: n (from A to B), then those of a few Frank-Wolfe steps on the hulls' distance. Each
    gap is a lower bound of the hulls' signed distance. Returns it; fills the support points
    and the direction it was found along."""
    out = np.empty(3)
    _separation(a_pts, a_count, b_pts, b_count, b_radius, nx, ny, nz, out)
    best, best_ia, best_jb = out[0], int(out[1]), int(out[2])
    bx, by, bz = nx, ny, nz
    x = np.zeros(3)
    y = np.zeros(3)
    for i in range(a_count):
        for k in range(3):
            x[k] += a_pts[i, k] / a_count
    for j in range(b_count):
        for k in range(3):
            y[k] += b_pts[j, k] / b_count
    for _ in range(HULL_ITERATIONS):
        vx, vy, vz = y[0] - x[0], y[1] - x[1], y[2] - x[2]
        length = math.sqrt(vx * vx + vy * vy + vz * vz)
        if length < 1e-12:
            break
        nx, ny, nz = vx / length, vy / length, vz / length
        _separation(a_pts, a_count, b_pts, b_count, b_radius, nx, ny, nz, out)
        if out[0] > best:
            best, best_ia, best_jb = out[0], int(out[1]), int(out[2])
            bx, by, bz = nx, ny, nz
        ia, jb = int(out[1]), int(out[2])
        dxx, dxy, dxz = a_pts[ia, 0] - x[0], a_pts[ia, 1] - x[1], a_pts[ia, 2] - x[2]
        dyx, dyy, dyz = b_pts[jb, 0] - y[0], b_pts[jb, 1] - y[1], b_pts[jb, 2] - y[2]
        ex, ey, ez = dxx - dyx, dxy - dyy, dxz - dyz
        denom = ex * ex + ey * ey + ez * ez
        if denom < 1e-18:
            break
        gamma = min(max((vx * ex + vy * ey + vz * ez) / denom, 0.0), 1.0)
        x[0] += gamma * dxx
        x[1] += gamma * dxy
        x[2] += gamma * dxz
        y[0] += gamma * dyx
        y[1] += gamma * dyy
        y[2] += gamma * dyz
    direction[0], direction[1], direction[2] = bx, by, bz
    for k in range(3):
        witness_a[k] = a_pts[best_ia, k]
        witness_b[k] = b_pts[best_jb, k] - b_radius * direction[k]
    return best


def hull_refine(poses, hull_local, piece_start, link_pieces, row_link_a, row_link_b, row_set, set_points, set_start,
                set_radius, within, d, point_a, point_b, normal):
    """Tighten the rows closer than `within`: the gap between the two links' convex pieces (or a
    link's pieces and an obstacle's points + radius), the smallest over pairs of pieces of the
    largest gap over the directions `_hull_gap` tries. Each is a lower bound of the meshes'
    distance, as the capsules' distance is: a row keeps the larger of the two, with the gap's
    support points and direction, where the gap separates the pieces (an overlap keeps the
    capsules' depth, whose gradient pushes the pair apart consistently)."""
    size = max(hull_local.shape[0], set_points.shape[0], 1)
    a_pts = np.empty((size, 3))
    b_pts = np.empty((size, 3))
    wa = np.empty(3)
    wb = np.empty(3)
    wn = np.empty(3)
    best_a = np.empty(3)
    best_b = np.empty(3)
    best_n = np.empty(3)
    for row in range(d.shape[0]):
        if d[row] >= within or row_set[row] == -1:
            continue
        la = row_link_a[row]
        pa0, pa1 = link_pieces[la], link_pieces[la + 1]
        if pa1 == pa0:
            continue
        if row_set[row] == -2:  # the ground: the pieces' lowest point, exactly
            low_z = np.inf
            for p in range(pa0, pa1):
                count = piece_start[p + 1] - piece_start[p]
                _place(poses, la, hull_local, piece_start[p], count, a_pts)
                for i in range(count):
                    if a_pts[i, 2] < low_z:
                        low_z = a_pts[i, 2]
                        for k in range(3):
                            best_a[k] = a_pts[i, k]
            if low_z > d[row]:
                d[row] = low_z
                _above_ground(best_a, point_a[row], point_b[row], normal[row])
            continue
        nx, ny, nz = -normal[row, 0], -normal[row, 1], -normal[row, 2]
        gap = np.inf
        for p in range(pa0, pa1):
            a_count = piece_start[p + 1] - piece_start[p]
            _place(poses, la, hull_local, piece_start[p], a_count, a_pts)
            if row_set[row] == -3:  # another link's pieces
                lb = row_link_b[row]
                pb0, pb1 = link_pieces[lb], link_pieces[lb + 1]
                if pb1 == pb0:
                    gap = -np.inf
                    break
                for pb in range(pb0, pb1):
                    b_count = piece_start[pb + 1] - piece_start[pb]
                    _place(poses, lb, hull_local, piece_start[pb], b_count, b_pts)
                    g = _hull_gap(a_pts, a_count, b_pts, b_count, 0.0, nx, ny, nz, wa, wb, wn)
                    if g < gap:
                        gap = g
                        for k in range(3):
                            best_a[k], best_b[k], best_n[k] = wa[k], wb[k], wn[k]
            else:
                w = row_set[row]
                b0 = set_start[w]
                b_count = set_start[w + 1] - b0
                for j in range(b_count):
                    for k in range(3):
                        b_pts[j, k] = set_points[b0 + j, k]
                g = _hull_gap(a_pts, a_count, b_pts, b_count, set_radius[w], nx, ny, nz, wa, wb, wn)
                if g < gap:
                    gap = g
                    for k in range(3):
                        best_a[k], best_b[k], best_n[k] = wa[k], wb[k], wn[k]
        if gap >= 0.0 and gap > d[row] and gap < np.inf:
            d[row] = gap
            for k in range(3):
                point_a[row, k] = best_a[k]
                point_b[row, k] = best_b[k]
                normal[row, k] = -best_n[k]


def walk_kernel(qa, delta, count, reach_a, reach_b, moving, inverse, margin, touching, refine, within, far, stack,
                steps_i, steps_f, link_count, root, cap_link, cap_a, cap_b, cap_r, self_pairs, moving_caps, world_a, world_b,
                world_r, box_rot, box_centre, box_half, ground, d, point_a, point_b, normal, origins, axes, poses,
                hull_local, piece_start, link_pieces, row_link_a, row_link_b, row_set, set_points, set_start, set_radius):
    """`certify.Certifier.walk`'s loop in one call: the samples k / count of the motion qa + delta,
    the first left uncovered in the middle of each gap measured next (`pairs_kernel`, then
    `hull_refine` when a row is within `within`, then the `touching` rows as +inf), each measured
    sample covering those within (d - margin) * inverse of it on the `moving` rows (a box row
    beyond `far` by its lower bound: it proves less, soundly). `reach_a`,
    `reach_b`: the ends' reach in samples. Returns (clear by the margin, the least distance
    measured, the number measured), as the Python loop does, sample for sample."""
    least = np.inf
    measured = 0
    q = np.empty(qa.shape[0])
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0.0, reach_a, count, reach_b
    top = 1
    while top > 0:
        top -= 1
        k0, r0, k1, r1 = int(stack[top, 0]), stack[top, 1], int(stack[top, 2]), stack[top, 3]
        lo = k0 + int(math.floor(r0)) + 1
        hi = k1 - int(math.floor(r1)) - 1
        if lo > hi:
            continue
        k = (lo + hi) // 2
        t = k / count
        for j in range(q.shape[0]):
            q[j] = qa[j] + delta[j] * t
        pairs_kernel(q, steps_i, steps_f, link_count, root, cap_link, cap_a, cap_b, cap_r, self_pairs, moving_caps, world_a,
                     world_b, world_r, box_rot, box_centre, box_half, ground, far, d, point_a, point_b, normal, origins, axes,
                     poses)
        measured += 1
        low = np.inf
        for row in range(d.shape[0]):
            if d[row] < low:
                low = d[row]
        if refine and low < within:
            hull_refine(poses, hull_local, piece_start, link_pieces, row_link_a, row_link_b, row_set, set_points, set_start,
                        set_radius, within, d, point_a, point_b, normal)
        low = np.inf
        reach = np.inf
        for row in range(d.shape[0]):
            if touching[row]:
                d[row] = np.inf
            low = min(low, d[row])
            if moving[row]:
                reach = min(reach, (d[row] - margin) * inverse[row])
        if d.shape[0]:
            least = min(least, low)
            if low < margin:
                return False, least, measured
        r = min(max(0.0, reach) * count, count + 1.0)
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = k, r, k1, r1
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = k0, r0, k, r
        top += 2
    return True, least, measured


_compiled = None
_compiled_refine = None
_compiled_walk = None
_reason = "not built yet"


def compiled():
    """The numba form of `pairs_kernel`, or None (and `reason()` says why)."""
    global _compiled, _compiled_refine, _compiled_walk, _reason
    if _compiled is not None or _reason != "not built yet":
        return _compiled
    try:
        if os.environ.get("KINEMA_NO_NUMBA"):
            raise ImportError("KINEMA_NO_NUMBA is set")
        import numba  # noqa: F401 - an ImportError here means the NumPy form serves
        from ..numba_cache import njit as signed_njit  # signed disk cache: a planted pickle is never loaded

        namespace = dict(globals())
        import types

        for name in ("_fk", "_closest", "_sdf", "_segment_box", "_box_bound", "_unit", "_above_ground", "_capsule_gap", "pairs_kernel", "_separation", "_place", "_hull_gap",
                     "hull_refine", "walk_kernel"):
            original = globals()[name]
            clone = types.FunctionType(original.__code__, namespace, name, original.__defaults__)
            clone.__module__ = __name__
            clone.__qualname__ = original.__qualname__
            namespace[name] = signed_njit(clone, nogil=True)
        _compiled, _compiled_refine, _reason = namespace["pairs_kernel"], namespace["hull_refine"], None
        _compiled_walk = namespace["walk_kernel"]
    except Exception as exc:  # noqa: BLE001 - no numba, or a broken one: the NumPy form serves
        _compiled, _reason = None, f"numba could not be used ({type(exc).__name__}: {exc})"
    return _compiled


def compiled_refine():
    """The numba form of `hull_refine` (None where `compiled()` is None)."""
    compiled()
    return _compiled_refine


def compiled_walk():
    """The numba form of `walk_kernel` (None where `compiled()` is None)."""
    compiled()
    return _compiled_walk


def reason() -> str | None:
    return _reason
