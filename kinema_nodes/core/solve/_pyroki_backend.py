"""The PyRoki backend: solving with the compiled PyRoki program (`_pyroki_program`), one frame
(`solve_pyroki`) or many as one JAX scan per chunk (`scan_frames`).

A program is asked for through `solver_for`, which waits for it: built here, or the background
build (`_warming`) joined. The programs this process holds live in `_compiled_store`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ._compiled_store import clear, loaded_solver_keys, set_lru_size
from ._pyroki_program import CompiledSolver, Layout, export_path, jax_available, jax_present, pyroki_available
from ._warming import forget_failures
from ._warming import solver_for as built

if TYPE_CHECKING:
    from ..model.robot import RobotModel
    from ._chain import ChainProblem
    from ._types import SolveOptions, TargetArrays

__all__ = [
    "SCAN_CHUNK", "CompiledSolver", "Layout", "clear_solvers", "export_path", "jax_available", "jax_present",
    "loaded_solver_keys", "pyroki_available", "scan_frames", "set_lru_size", "solve_pyroki", "solver_for", "warm_up_pyroki",
]


def solver_for(robot: RobotModel, links: tuple[str, ...]) -> CompiledSolver:
    """The compiled program, waiting for it (built here, or a background build joined: one
    build per key, see `_warming`)."""
    return built(robot, links)


def clear_solvers() -> None:
    """Drop every compiled program this process holds, and the memory of failed builds."""
    clear()
    forget_failures()


def solve_pyroki(robot: RobotModel, problem: ChainProblem, start: np.ndarray, targets: TargetArrays, options: SolveOptions,
                 t0: float):
    """Same contract as `solve_numpy`: (q, errors-unused, iterations, converged, over_budget)."""
    solver = solver_for(robot, targets.links)
    solver.compile()
    layout = solver.layout
    free = layout.free_mask(problem.free)
    tolerances = (options.position_tolerance, options.rotation_tolerance)
    # A first solve may have compiled above: that is not time the solve itself spent.
    deadline = max(t0, time.perf_counter()) + options.budget_ms / 1000.0
    total = 0
    best = None
    attempt = 0
    while True:
        seeds = layout.make_seeds(start, free, attempt, near_start=not options.cold)
        x, errors, iterations, ok = solver(
            start, seeds, targets.positions, targets.wxyz, targets.weights, free, tolerances, options.max_iterations, options.cold
        )
        total += iterations
        q = start.copy()
        q[layout.chain] = x
        cost = float(np.sum((errors * targets.weights) ** 2))
        if best is None or cost < best[0]:
            best = (cost, q)
        if ok:
            return q, total, True, False
        attempt += 1
        over = time.perf_counter() > deadline
        if over or not options.cold:
            return best[1], total, False, over


def warm_up_pyroki(robot: RobotModel, links: tuple[str, ...]) -> CompiledSolver:
    solver = solver_for(robot, links)
    solver.compile()
    return solver


# ---- many frames in one call: a JAX scan over frames (solve_many) -----------------------------

#: Frames per scan call. Fixed, so one compiled scan serves every run of a chain (the last
#: chunk is padded); between chunks the caller can report progress and be cancelled.
SCAN_CHUNK = 256


def _scan_of(compiled: CompiledSolver, robot):
    """A jitted `lax.scan` over frames around the compiled program of one chain. The carry is
    the configuration in float32 (what the rig holds), so each frame starts where live IK
    would: from the previous frame's answer as the rig stores it."""
    scan = getattr(compiled, "_scan", None)
    if scan is not None:
        return scan
    import jax
    import jax.numpy as jnp

    layout = compiled.layout
    call = compiled._call
    chain = jnp.asarray(layout.chain)
    lower = jnp.asarray(np.where(layout.turns, 0.0, layout.lower), dtype=jnp.float32)
    upper = jnp.asarray(np.where(layout.turns, 0.0, layout.upper), dtype=jnp.float32)
    slides = jnp.asarray(layout.slides)  # seeded at the start value
    fractions = jnp.asarray(layout.seed_fractions[0], dtype=jnp.float32)
    continuous = jnp.asarray(layout.turns)
    limit_lower = jnp.asarray(layout.lower, dtype=jnp.float32)  # -inf for a continuous joint
    limit_upper = jnp.asarray(layout.upper, dtype=jnp.float32)

    def run(base, positions, wxyz, weights, free, tolerances, max_iterations):
        def body(base, frame):
            position, rotation, weight = frame
            chain_start = base[chain]
            low = jnp.where(continuous, chain_start - jnp.pi, lower)
            high = jnp.where(continuous, chain_start + jnp.pi, upper)
            seeds = jnp.where((free > 0) & ~slides, low + fractions * (high - low), chain_start)
            seeds = seeds.at[0].set(chain_start)
            vector = jnp.concatenate([base, seeds.reshape(-1), position.reshape(-1), rotation.reshape(-1), weight.reshape(-1),
                                      free, tolerances, jnp.stack([max_iterations, jnp.float32(0.0)])]).astype(jnp.float32)
            out = call(vector)
            x = out[:layout.k]
            delta = x - chain_start
            turned = chain_start + jnp.mod(delta + jnp.pi, 2 * jnp.pi) - jnp.pi
            x = jnp.where(continuous & (turned >= limit_lower) & (turned <= limit_upper), turned, x)
            base = base.at[chain].set(x)
            return base, (base, out[-2])

        return jax.lax.scan(body, base, (positions, wxyz, weights))[1]

    compiled._scan = jax.jit(run)
    return compiled._scan


def scan_frames(robot: RobotModel, problem: ChainProblem, start: np.ndarray, positions: np.ndarray, wxyz: np.ndarray,
                weights: np.ndarray, options: SolveOptions):
    """Raw answers for up to SCAN_CHUNK frames aiming at `problem.links`, each frame seeded from
    the one before (float32): ((F, n) configurations, (F,) iterations). No contract applied:
    `solve_many` does that frame by frame, exactly as `solve` does."""
    compiled = solver_for(robot, problem.links)
    compiled.compile()
    layout = compiled.layout
    free = layout.free_mask(problem.free)
    scan = _scan_of(compiled, robot)
    count = len(positions)
    rows = np.arange(SCAN_CHUNK).clip(max=count - 1)
    tolerances = np.array([options.position_tolerance, options.rotation_tolerance], dtype=np.float32)
    bases, iterations = scan(np.asarray(start, dtype=np.float32), positions[rows].astype(np.float32),
                             wxyz[rows].astype(np.float32), weights[rows].astype(np.float32), free, tolerances,
                             np.float32(options.max_iterations))
    return np.asarray(bases)[:count].astype(float), np.asarray(iterations)[:count].astype(int)
