"""The collision kernel compiled (or loaded from the disk cache) ahead of its first use.

The solve kernel's build (`core.solve._kernel`: in a child process on a new machine, then in a
background thread) calls `warm_kernel` too, so turning on Avoid Collisions does not stall the
viewport for numba's compile of `_kernel` (5-7 s on a new machine) or its cache load (0.6 s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: The kernel's source file: the solve kernel's "compiled here" mark covers its changes too.
KERNEL_SOURCE = Path(__file__).with_name("_kernel.py")


def warm_kernel() -> None:
    """Compile the numba functions of `_kernel` with the argument types of every real call, by
    measuring a bundled arm against a box it stands in (so the near pairs are refined on the
    hulls too) and the ground, and walking a motion as Plan Between Keys does (its first plan
    would otherwise compile `walk_kernel` on its job's thread, holding the interpreter).
    Nothing happens where numba is missing."""
    from ..model.loading import load_robot
    from . import _kernel
    from .avoid import Avoid
    from .clearance import clearance
    from .distances import PairMeter, prepare_pairs
    from .world import Box, World

    if _kernel.compiled() is None:
        return
    robot = load_robot("arm6")
    world = World((Box((0.2, 0.2, 0.2), (0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0), "warm"),), ground=True)
    avoid = Avoid(world=world)
    q = robot.zero_configuration()
    clearance(robot, q, avoid)
    meter = PairMeter(robot, *prepare_pairs(robot, avoid), avoid)
    rows = len(meter(q)[0])
    meter.walk(q, np.full(robot.dof, 0.05), 4, 0.0, 0.0, np.ones(rows, dtype=bool), np.ones(rows), avoid.margin_m)
