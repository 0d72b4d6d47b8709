"""What a solve keeps clear of (`SolveOptions.avoid`): the robot itself, a world, a margin."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import KinemaError
from .world import World

#: Largest margin (m): more than this keeps the arm from reaching anything.
MAX_MARGIN_M = 1.0


@dataclass(frozen=True)
class Avoid:
    """What the solver keeps clear of: the robot itself (`self_`), a `world`, and by how much."""

    self_: bool = True
    world: World | None = None
    margin_m: float = 0.0
    #: An SRDF whose <disable_collisions> pairs replace the computed ones (None: the robot's own
    #: .srdf beside its URDF if there is one, else the computed pairs).
    srdf: str | None = None
    #: Objects a grasp holds on this frame (`carried.CarriedObject`): they move with their link
    #: and are kept clear of the world and of the robot's other links.
    carried: tuple = ()
    #: (link, obstacle name) pairs never checked: a gripper may touch the object it grasps, before
    #: the grasp and after the release; the rest of the robot keeps clear of it.
    touching: frozenset = frozenset()


def check_avoid(avoid: Avoid) -> None:
    """Refuses, in one line, an `avoid` option that is not an `Avoid` or whose margin or world is not usable."""
    if not isinstance(avoid, Avoid):
        raise KinemaError(f"solver option avoid must be an Avoid, not {type(avoid).__name__}")
    margin = avoid.margin_m
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or not 0 <= margin <= MAX_MARGIN_M:
        raise KinemaError(f"collision margin must be a number from 0 to {MAX_MARGIN_M * 1000:g} mm, got {margin!r}")
    if avoid.world is not None and not isinstance(avoid.world, World):
        raise KinemaError(f"avoid.world must be a World, not {type(avoid.world).__name__}")

