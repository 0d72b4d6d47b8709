"""IK solvers: one interface, a PyRoki (JAX) backend and a NumPy backend.

`solve` is the only entry point the rest of the product uses; `warm_up` compiles ahead of the
first solve; `solve_trajectory` solves many frames seeded from each other (bake).
JAX and PyRoki are imported only when the PyRoki backend first runs.
"""

from ._api import pyroki_available, solve, solve_trajectory, warm_up
from ._cache import DEFAULT_LRU_SIZE, cache_root
from ._types import MAX_TARGET_DISTANCE_M, REASONS, IKTarget, SolveOptions, SolveResult

__all__ = [
    "DEFAULT_LRU_SIZE",
    "MAX_TARGET_DISTANCE_M",
    "REASONS",
    "IKTarget",
    "SolveOptions",
    "SolveResult",
    "cache_root",
    "pyroki_available",
    "solve",
    "solve_trajectory",
    "warm_up",
]
