"""How far a target link can possibly be from its chain's first moving joint.

Why: a control dragged far out of reach used to send every frame through random restarts until
the budget ran out ("did not converge: over budget"), pausing live updates. A goal that no
configuration can reach needs one descent from where the arm is (it stretches toward the goal
and stops short) and a readout that says how far short, not a search. Rotations keep lengths,
so the tip lies within the sum of the chain's link lengths (the folded origins' translations
after the first moving joint, plus the tip's) and the travel of its slides from that joint's
centre: a sound bound, for any joint values, limits or none.
"""

from __future__ import annotations

import numpy as np


def reach_of(chain) -> tuple[np.ndarray, float]:
    """(centre (3,), radius) of the ball every pose of `chain`'s tip lies in (`_chain.TargetChain`)."""
    if chain.count == 0:
        return chain.tip[:3, 3].copy(), 0.0
    centre = chain.origins[0][:3, 3].copy()
    lengths = float(np.sum(np.linalg.norm(chain.origins[1:, :3, 3], axis=1))) + float(np.linalg.norm(chain.tip[:3, 3]))
    return centre, lengths


def slide_travel(chain, lower: np.ndarray, upper: np.ndarray) -> float:
    """The most the chain's slides can add to the radius: each slide's largest |value| (times its
    mimic multiplier, plus its offset), from the robot's limits (`lower`, `upper` per actuated joint)."""
    if not chain.has_prismatic:
        return 0.0
    travel = 0.0
    for source, multiplier, offset, prismatic in zip(chain.sources, chain.multipliers, chain.offsets, chain.prismatic):
        if prismatic:
            ends = np.array([lower[source], upper[source]]) * multiplier + offset
            travel += float(np.max(np.abs(ends)))
    return travel


def short_of_reach(problem, positions: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """How far (m) the farthest target lies beyond every pose its chain can take: 0.0 when each is
    within its ball (reachable or not for other reasons), inf for a target a slide without limits
    could carry anywhere never (such a chain is never said out of reach: 0.0)."""
    short = 0.0
    for chain, position in zip(problem.chains, positions):
        centre, radius = reach_of(chain)
        travel = slide_travel(chain, lower, upper)
        if not np.isfinite(travel):
            continue
        beyond = float(np.linalg.norm(np.asarray(position, dtype=float) - centre)) - radius - travel
        short = max(short, beyond)
    return short
