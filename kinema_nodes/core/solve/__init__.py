"""IK solvers: one interface, a PyRoki (JAX) backend and a NumPy backend.

`solve` is the only entry point the rest of the product uses; `warm_up` compiles ahead of the
first solve; `solve_many` solves many frames seeded from each other under the same contract
(the bake; PyRoki runs them as one scan per chunk), `solve_trajectory` is its plain loop.
JAX and PyRoki are imported only when the PyRoki backend first runs. With `SolveOptions.avoid`
(a `core.collision.Avoid`) `solve` keeps clear of the robot itself and obstacles (`_avoiding.py`,
measuring with `core.collision`'s public names).

Siblings use only the names below. Stages that add their own term to the solve (core/stages:
the elbow swivel) build on `problem_for` / `TargetChain` (the cached fast FK and Jacobian of the
target chains) and `check_targets` (the one target check), and run the solver's own LM kernel with
`descend_batch` (one descent per seed, optionally with the swivel equation), or over many poses at once with `solve_poses` (reachability maps);
`kernel_status` says whether that kernel is numba-compiled here; `on_pyroki_built` hears when a PyRoki
program the live path started compiling in the background is ready (`wait_for_pyroki` waits for them); `run_benchmark` is the BENCHMARKS.md
protocol, shared by `kinema-nodes bench` and bench/bench_ik.py.
"""

from ._entry import PreparedSolve, batch_unavailable, prepare, pyroki_available, solve, solve_many, solve_trajectory, warm_up
from ._bench import run_benchmark
from ._cache import DEFAULT_LRU_SIZE, cache_root
from ._chain import TargetChain, problem_for
from ._entry import TRACKING_NOTE
from ._kernel import kernel_building, kernel_status, kernel_summary, wait_for_kernel_build
from ._numpy_backend import descend_batch, restart_count
from ._poses import PoseSolutions, solve_poses
from ._types import MAX_TARGET_DISTANCE_M, REASONS, IKTarget, SolveOptions, SolveResult, check_start, check_targets, converged
from ._warming import add_listener as on_pyroki_built, remove_listener as stop_on_pyroki_built, wait_for_builds as wait_for_pyroki
from ._warming import building as _pyroki_building


def compiling_in_background() -> bool:
    """True while a solver compiles in a background thread here (a PyRoki program, or the NumPy
    kernel's first build): a live frame answered meanwhile shares the interpreter with it, so its
    time is not the rig's (the live budget does not count it)."""
    return _pyroki_building() or kernel_building()


__all__ = [
    "DEFAULT_LRU_SIZE",
    "restart_count",
    "MAX_TARGET_DISTANCE_M",
    "PoseSolutions",
    "PreparedSolve",
    "REASONS",
    "IKTarget",
    "SolveOptions",
    "SolveResult",
    "TargetChain",
    "batch_unavailable",
    "cache_root",
    "check_start",
    "check_targets",
    "compiling_in_background",
    "converged",
    "descend_batch",
    "kernel_building",
    "kernel_status",
    "TRACKING_NOTE",
    "kernel_summary",
    "on_pyroki_built",
    "stop_on_pyroki_built",
    "wait_for_pyroki",
    "wait_for_kernel_build",
    "prepare",
    "problem_for",
    "pyroki_available",
    "run_benchmark",
    "solve",
    "solve_many",
    "solve_poses",
    "solve_trajectory",
    "warm_up",
]
