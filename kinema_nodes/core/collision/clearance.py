"""How clear a configuration is: the smallest distance, the closest pairs and the overlapping ones,
and the words a solve stopped by a collision reports."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import KinemaError
from .avoid import Avoid, check_avoid
from .distances import Pairs, measure_pairs, prepare_pairs
from .world import GROUND

if TYPE_CHECKING:
    from ..model.robot import RobotModel


@dataclass(frozen=True)
class Clearance:
    """The smallest distance (m, negative when something overlaps), the closest pairs
    (name_a, name_b, distance) nearest first (every pair within the margin, at least the
    closest), and the pairs that overlap (name_a, name_b). An obstacle is named as in its file."""

    min_m: float
    pairs: tuple = ()
    colliding: tuple = ()
    obstacles: frozenset = frozenset()  # which second names are obstacles (not links)

    def describe(self, pair) -> str:
        a, b = pair[0], pair[1]
        return f"link {a} vs obstacle {b}" if b in self.obstacles else f"link {a} vs {b}"


def collision_reason(pair, obstacles=frozenset()) -> str:
    """The readout for a solve a collision stopped: "blocked by a collision: link A vs B"."""
    a, b = pair[0], pair[1]
    what = f"link {a} vs obstacle {b}" if b in obstacles else f"link {a} vs {b}"
    return f"blocked by a collision: {what}"


def _obstacle_names(avoid: Avoid) -> frozenset:
    names = set(avoid.world.names) if avoid.world is not None else set()
    if avoid.world is not None and avoid.world.ground:
        names.add(GROUND)
    return frozenset(names)


def summarise(pairs: Pairs, avoid: Avoid) -> Clearance:
    """The `Clearance` of measured pairs: one entry per named pair within the margin (a link pair
    has several capsule pairs: its smallest distance), nearest first, or the closest pair alone
    when none is within it; the overlapping ones apart. Only the rows within the margin are
    sorted: a live frame with Avoid Collisions on summarises hundreds of far pairs every frame."""
    obstacles = _obstacle_names(avoid)
    d = pairs.d
    if not len(d):
        return Clearance(math.inf, (), (), obstacles)
    closest = int(np.argmin(d))
    within = np.flatnonzero(d < avoid.margin_m)
    best: dict[tuple, float] = {}
    for k in within[np.argsort(d[within], kind="stable")].tolist():
        best.setdefault(pairs.names[k], float(d[k]))
    listed = [(a, b, distance) for (a, b), distance in best.items()] or [(*pairs.names[closest], float(d[closest]))]
    colliding = tuple((a, b) for a, b, distance in listed if distance < 0)
    return Clearance(float(d[closest]), tuple(listed), colliding, obstacles)


def clearance(robot: RobotModel, q: np.ndarray, avoid: Avoid) -> Clearance:
    """The clearance of configuration q (n,) from what `avoid` names, by the capsule model."""
    check_avoid(avoid)
    q = np.asarray(q, dtype=float)
    if q.shape != (robot.dof,) or not np.all(np.isfinite(q)):
        raise KinemaError(f"clearance needs {robot.dof} finite joint values (robot '{robot.name}')")
    model, kin = prepare_pairs(robot, avoid)
    pairs, _ = measure_pairs(robot, model, kin, avoid, q)
    return summarise(pairs, avoid)
