"""What the clearance readout lists (`collision.clearance.summarise`), by its contract, on the
Panda (example-robot-data) beside a table, at 200 random configurations and four margins: the
smallest distance; every named pair (a link pair has several capsule pairs) whose smallest
distance is within the margin, once, with that distance, nearest first; the closest pair alone
when none is within it; the overlapping ones apart. Exact: the same floats, the same names."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core import collision as C
from kinema_nodes.core.collision.clearance import summarise

TABLE = C.World((C.Box((0.6, 1.2, 0.04), (0.5, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0), "table"),), ground=True)


@pytest.mark.parametrize("margin", [0.0, 0.01, 0.05, 0.3])
def test_the_summary_lists_every_pair_within_the_margin_once_nearest_first(robots, margin):
    robot = robots("panda")
    avoid = C.Avoid(True, TABLE, margin)
    model, kin = C.prepare_pairs(robot, avoid)
    rng = np.random.default_rng(33)
    seen_within = seen_none = seen_overlap = 0
    for q in robot.random_configurations(200, rng):
        pairs, _ = C.measure_pairs(robot, model, kin, avoid, q)
        summary = summarise(pairs, avoid)
        smallest: dict[tuple, float] = {}
        for name, distance in zip(pairs.names, pairs.d.tolist()):
            smallest[name] = min(distance, smallest.get(name, np.inf))
        within = sorted(((d, name) for name, d in smallest.items() if d < margin), key=lambda item: item[0])
        assert summary.min_m == float(pairs.d.min())
        if within:
            seen_within += 1
            assert [(a, b) for a, b, _ in summary.pairs] and len(summary.pairs) == len(within)
            assert {(a, b): d for a, b, d in summary.pairs} == {name: d for d, name in within}
            listed = [d for _, _, d in summary.pairs]
            assert listed == sorted(listed)
        else:
            seen_none += 1
            (a, b, d), = summary.pairs
            assert d == summary.min_m and smallest[(a, b)] == d
        assert set(summary.colliding) == {name for d, name in within if d < 0}
        seen_overlap += bool(summary.colliding)
    # both branches met: at 0.3 m every pose has a pair within the margin, at 0 m few overlap
    assert (seen_none > 0 or margin >= 0.3) and (seen_within > 0 or margin == 0.0)
