"""Fewer collision checks per plan: a measured clearance certifies the configurations near it.

At a configuration where every checked pair is clear by its distance d, a motion that moves no
point of either body of a pair by more than d - margin (together) keeps that pair clear by the
margin (a distance between two rigid bodies changes by at most how far their points move). Along
a straight joint-space motion q(t) = qa + t (qb - qa), a point on link l moves at most

    sum_m |dq_m| R[m, l] per unit t,

where m runs over the movable joints between the pair's two links (joints above both move them
together and change nothing between them), dq_m is that joint's change along the motion, and
R[m, l] bounds the distance from joint m's axis to any point of link l at any configuration: the
lengths of the joint offsets from m down to l, the travel of any slide on the way, and the
farthest point of l's capsules and convex pieces from its origin (a prismatic joint moves every
point below it by exactly its change: R = 1). This is the bound of conservative advancement
(Schwarzer, Saha and Latombe 2005), configuration independent, so it holds along the whole motion.

`Certifier.walk` checks the samples of a motion (every `step` of the largest joint change, as a
dense check does) but measures only those no measured sample's clearance already proves: each
measured sample covers the samples within its reach, and the first sample left uncovered in the
middle of a gap is measured next (bisection order, so a collision in the middle is found early).
Every sample is either measured or proven clear by the margin, with far fewer measurements where
the robot is far from everything.

What the reach proves: a row's distance is the capsules' distance, or near an obstacle the
larger convex pieces' distance (`_kernel.hull_refine`); both are lower bounds of the distance
between the link's geometry and the other body, and that true distance changes no faster than the
points move. So a sample within a measured sample's reach is clear by the margin on the geometry
itself. It would pass the checker too, except where the checker's own search there would report
less than the true distance (the pieces' search is a lower bound, not exact): such a sample is
still clear, and the dense check (every sample of the planned path) rests on the same proof.
`Certifier.measure` also returns the capsule rows alone, which change exactly as fast as the
points move (tests check the weights against them).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..collision.distances import PairMeter, pair_layout, prepare_pairs

if TYPE_CHECKING:
    from ..collision.avoid import Avoid
    from ..model.robot import RobotModel


def displacement_weights(robot: RobotModel, avoid: Avoid) -> np.ndarray:
    """(P, dof): for each pair row `measure_pairs` reports, how far (m) the pair's two bodies can
    approach each other per unit change of each joint value, anywhere in the joint space
    (`c = weights @ |dq|` bounds the change of that row's distance along a straight motion dq)."""
    model, kin = prepare_pairs(robot, avoid)
    links = len(robot.links)
    movable = kin.movable_count
    # chain[m, l]: the longest distance from joint m's axis (its child frame's origin) to link l's origin
    chain = np.zeros((movable, links))
    lower, upper = np.asarray(robot.lower, dtype=float), np.asarray(robot.upper, dtype=float)
    for parent, child, origin, axis, kind, source, multiplier, offset, m in kin.steps:
        add = float(np.linalg.norm(np.asarray(origin)[:3, 3]))
        if kind == 2:
            travel = max(abs(lower[source] * multiplier + offset), abs(upper[source] * multiplier + offset))
            add += (travel if math.isfinite(travel) else math.inf) * float(np.linalg.norm(axis))
        chain[:, child] = chain[:, parent] + add
        if kind == 1:
            chain[m, child] = 0.0
    # extent[l]: the farthest point of link l's geometry (capsules, convex pieces) from its origin
    extent = np.zeros(links)
    for c, link in enumerate(kin.capsule_link.tolist()):
        far = max(float(np.linalg.norm(model.a[c])), float(np.linalg.norm(model.b[c]))) + float(model.radius[c])
        extent[link] = max(extent[link], far)
    pieces = np.asarray(model.link_pieces)
    starts = np.asarray(model.piece_start)
    for link in range(min(links, len(pieces) - 1)):
        first, last = int(pieces[link]), int(pieces[link + 1])
        if last > first:
            vertices = model.hull_local[int(starts[first]):int(starts[last])]
            if len(vertices):
                extent[link] = max(extent[link], float(np.linalg.norm(vertices, axis=1).max()))
    with np.errstate(invalid="ignore"):
        reach = np.where(kin.prismatic[:, None], 1.0, chain + extent[None, :])  # (M, links)
    cap_a, cap_b, _, _, _ = pair_layout(model, kin, avoid)
    link_a = kin.capsule_link[cap_a]
    link_b = np.where(cap_b >= 0, kin.capsule_link[np.maximum(cap_b, 0)], -1)
    moves_a = kin.ancestor[link_a]  # (P, M)
    moves_b = np.where((link_b >= 0)[:, None], kin.ancestor[np.maximum(link_b, 0)], False)
    weights_m = (np.where(moves_a & ~moves_b, reach[:, link_a].T, 0.0)
                 + np.where(moves_b & ~moves_a, reach[:, np.maximum(link_b, 0)].T, 0.0))
    weights = np.zeros((len(cap_a), robot.dof))
    for m, (source, multiplier) in enumerate(zip(kin.sources.tolist(), kin.multipliers.tolist())):
        if multiplier:
            weights[:, source] += weights_m[:, m] * abs(multiplier)
    return weights


class Certifier:
    """The robot's pair distances for one `Avoid`, with the displacement weights that turn a
    measured clearance into a stretch of motion proven clear. `measured` counts measurements."""

    def __init__(self, robot: RobotModel, avoid: Avoid):
        self.robot, self.avoid = robot, avoid
        self.model, self.kin = prepare_pairs(robot, avoid)
        self.margin = float(avoid.margin_m)
        cache = robot.cache("plan_displacement_weights")
        key = (avoid.self_, avoid.world, avoid.srdf, avoid.carried)
        weights = cache.get(key)
        if weights is None:
            if len(cache) > 16:
                cache.clear()
            weights = cache[key] = displacement_weights(robot, avoid)
        self.weights = weights
        self.measured = 0
        self._meter = PairMeter(robot, self.model, self.kin, avoid)
        #: configuration bytes -> distances, when a caller keeps them (a plan: the dense check walks
        #: the planner's own edges again, sample for sample, and finds them measured)
        self.memo: dict | None = None
        #: (qa bytes, qb bytes, step) -> `_walk`'s answer, while there is a `memo`
        self.motions: dict = {}

    def distances(self, q: np.ndarray) -> np.ndarray:
        """Every checked pair's distance at q (P,), touching pairs as +inf: `measure_pairs`'s
        rows, by the same kernels, without building its `Pairs` (a plan measures thousands)."""
        return self.measure(q)[0]

    def measure(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' distances as `distances` gives them, the rows' capsule distances alone, never
        above the first). Kept in `memo` when there is one."""
        if self.memo is not None:
            key = np.asarray(q, dtype=float).tobytes()
            got = self.memo.get(key)
            if got is None:
                got = self.memo[key] = self._measure(q)
            return got
        return self._measure(q)

    def _measure(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.measured += 1
        return self._meter(q)

    def distance(self, q: np.ndarray) -> float:
        d = self.distances(q)
        return float(d.min()) if len(d) else math.inf

    def walk(self, qa: np.ndarray, qb: np.ndarray, step: float, da: tuple | None = None,
             db: tuple | None = None) -> tuple[bool, float]:
        """`_walk`, kept per motion in `motions` when there is a `memo` (a plan's dense check walks
        the planner's own edges again)."""
        if self.memo is None:
            return self._walk(qa, qb, step, da, db)
        qa, qb = np.asarray(qa, dtype=float), np.asarray(qb, dtype=float)
        key = (qa.tobytes(), qb.tobytes(), float(step))
        got = self.motions.get(key)
        if got is None:
            got = self.motions[key] = self._walk(qa, qb, step, da, db)
        return got

    def _walk(self, qa: np.ndarray, qb: np.ndarray, step: float, da: tuple | None = None,
              db: tuple | None = None) -> tuple[bool, float]:
        """Whether every sample of the straight motion qa -> qb (both ends included, `count` =
        ceil(largest joint change / step) equal steps, as `densify` samples it) is clear by the
        margin, each measured or proven by a measured one's clearance; and the least distance
        measured (inf if none was). `da`, `db`: the ends' `measure` when already made.

        A sample left unmeasured is within the reach of a measured one's distances: clear by the
        margin on the geometry those distances bound (the module's docstring)."""
        measure = self.measure
        delta = np.asarray(qb, dtype=float) - np.asarray(qa, dtype=float)
        count = max(1, int(math.ceil(float(np.max(np.abs(delta), initial=0.0)) / step)))
        change = np.abs(delta)
        moved = change > 0
        # only the joints that move (a slide with no travel limit weighs inf: inf * 0 must not be nan)
        # not `@`: on a dual arm's ~1,500 rows OpenBLAS wakes its threads for this product, which
        # spin on the other cores (a Baxter plan took 1.6x the wall time, 1.8x the CPU)
        rate = np.einsum("ij,j->i", self.weights[:, moved], change[moved])
        moving = rate > 0
        if not moving.any():  # nothing moves any pair closer: the ends say it all
            moving = None
        else:
            inverse = 1.0 / rate[moving]
        margin = self.margin

        def reach(d: np.ndarray) -> float:
            if moving is None or not len(d):
                return math.inf
            return max(0.0, _reach(d, margin, moving, inverse))

        least = math.inf
        ends = []
        for got, q in ((da, qa), (db, qb)):
            d = (measure(np.asarray(q, dtype=float)) if got is None else got)[0]
            if len(d):
                low = float(d.min())
                least = min(least, low)
                if low < self.margin:
                    return False, least
            ends.append(min(reach(d) * count, count + 1.0))  # in samples
        if moving is not None:  # the loop below in one compiled call, where numba is
            inverse_rows = np.zeros(len(rate))
            inverse_rows[moving] = inverse
            got = self._meter.walk(qa, delta, count, ends[0], ends[1], moving, inverse_rows, margin)
            if got is not None:
                clear, low, measured = got
                self.measured += measured
                return clear, min(least, low)
        # gaps: (first sample index, its reach in samples, last sample index, its reach)
        stack = [(0, ends[0], count, ends[1])]
        while stack:
            k0, r0, k1, r1 = stack.pop()
            lo = k0 + int(math.floor(r0)) + 1  # the first sample k0's reach leaves uncovered
            hi = k1 - int(math.floor(r1)) - 1
            if lo > hi:
                continue
            k = (lo + hi) // 2
            d = measure(qa + delta * (k / count))[0]
            if len(d):
                low = float(d.min())
                least = min(least, low)
                if low < self.margin:
                    return False, least
            r = min(reach(d) * count, count + 1.0)
            stack.append((k, r, k1, r1))
            stack.append((k0, r0, k, r))
        return True, least

    def path_clear(self, waypoints: np.ndarray, step: float) -> tuple[bool, float]:
        """`walk` along each piece of the polyline (each corner measured once): whether every
        sample is clear by the margin, and the least distance measured."""
        waypoints = np.asarray(waypoints, dtype=float)
        ends = self.measure(waypoints[0])
        least = float(ends[0].min()) if len(ends[0]) else math.inf
        if least < self.margin:
            return False, least
        for a, b in zip(waypoints[:-1], waypoints[1:]):
            db = self.measure(b)
            clear, low = self.walk(a, b, step, da=ends, db=db)
            least = min(least, low)
            if not clear:
                return False, least
            ends = db
        return True, least


def _reach(d: np.ndarray, margin: float, moving: np.ndarray, inverse: np.ndarray) -> float:
    """min over the rows that move of (d - margin) / rate, `inverse` being 1 / rate on those rows."""
    return float(np.min((d[moving] - margin) * inverse))
