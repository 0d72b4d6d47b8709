"""The PyRoki backend: Levenberg-Marquardt in JAX over PyRoki's forward kinematics.

One program per (robot, target links) solves a small batch of seeds at once: seed 0 is the
start configuration (warm start, so the arm stays on its branch), the others are random
configurations within limits. In a warm solve the start seed wins whenever it converges; in
a cold solve the first seed to converge stops the loop. Every input has a fixed shape, so a
new target value, tolerance, held-joint set or iteration cap never retraces.

Compiled programs are kept three ways: in memory (an LRU), as JAX export files per robot
fingerprint and link set (so a new process skips tracing PyRoki altogether), and in JAX's
persistent compilation cache (so it also skips XLA compilation).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from ._cache import LRU, cache_root

#: Bump when the program's inputs, outputs or algorithm change: old export files are rebuilt.
FORMAT_VERSION = 3
_MAGIC = b"KINEMA-IK-EXPORT\n"

_lock = threading.RLock()
_solvers = LRU()
_configured = False
_availability: tuple[bool, str | None] | None = None


def _import_reason(exc: BaseException, what: str) -> str:
    return f"{what} could not be imported ({type(exc).__name__}: {exc})"


def jax_available() -> tuple[bool, str | None]:
    try:
        import jax  # noqa: F401
        import jaxlie  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising anything
        return False, _import_reason(exc, "JAX")
    return True, None


def pyroki_available() -> tuple[bool, str | None]:
    """(True, None) when JAX and PyRoki import; else (False, why). Cached after the first ask."""
    global _availability
    if _availability is None:
        ok, reason = jax_available()
        if ok:
            try:
                import pyroki  # noqa: F401
            except Exception as exc:
                ok, reason = False, _import_reason(exc, "PyRoki")
        _availability = (ok, reason)
    return _availability


def configure_jax() -> None:
    """Point JAX's persistent compilation cache at our folder, caching even small programs
    (the default 1 s threshold silently skips an IK program). A cache folder the user already
    configured is left alone."""
    global _configured
    if _configured:
        return
    import jax

    if not jax.config.jax_compilation_cache_dir:
        folder = cache_root() / "jax"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", str(folder))
        except OSError:
            pass  # an unwritable cache only costs speed
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _register_lapack()
    _configured = True


def _register_lapack() -> None:
    """Register jaxlib's LAPACK kernels. JAX does it lazily when it lowers a linear solve;
    a program loaded from an export file is never lowered, and calling it without the
    kernels registered crashes the process."""
    try:
        from jax._src.lib import lapack

        lapack._lapack.initialize()
    except Exception:
        import jax
        import jax.numpy as jnp

        jax.jit(jnp.linalg.solve).lower(jnp.eye(2), jnp.ones(2)).compile()  # lowering registers them


def seed_count(chain_dof: int) -> int:
    """Seeds per program: more for small arms (cheap, raises cold success), fewer for long
    humanoid chains where every seed costs a full Jacobian."""
    return 8 if chain_dof <= 10 else 4


class Layout:
    """Static facts about one (robot, links) problem, computed without JAX."""

    def __init__(self, robot, links: tuple[str, ...]):
        self.robot = robot
        self.links = links
        chain = sorted({robot.joint_index(n) for link in links for n in robot.chain_joint_names(link)})
        self.chain = np.array(chain, dtype=int)
        self.k = len(chain)
        self.seeds = seed_count(self.k)
        self.lower = robot.lower[self.chain]
        self.upper = robot.upper[self.chain]
        key = json.dumps([FORMAT_VERSION, robot.fingerprint, list(links), self.seeds], separators=(",", ":"))
        self.key_text = key
        self.digest = hashlib.sha256(key.encode()).hexdigest()[:20]


def _pyroki_robot(robot):
    """PyRoki's Robot for our RobotModel. A shallow copy of the yourdfpy object gets the base
    link yourdfpy leaves unset when loaded without a scene graph (PyRoki's sort needs it)."""
    import pyroki

    urdf = copy.copy(robot.urdf)
    if getattr(urdf, "_base_link", None) is None:
        urdf._base_link = robot.root_link
    return pyroki.Robot.from_urdf(urdf)


def _build_function(robot, layout: Layout):
    """The pure JAX function for `layout` (traced once, then exported)."""
    import jax
    import jax.numpy as jnp
    import jaxlie

    pk = _pyroki_robot(robot)
    our_index = {name: i for i, name in enumerate(robot.actuated_joint_names)}
    try:
        to_pyroki = np.array([our_index[name] for name in pk.joints.actuated_names], dtype=int)
        link_rows = np.array([pk.links.names.index(link) for link in layout.links], dtype=int)
    except (KeyError, ValueError) as exc:
        raise RuntimeError(f"PyRoki's joint or link list differs from ours ({exc})") from None
    if len(to_pyroki) != robot.dof:
        raise RuntimeError(f"PyRoki sees {len(to_pyroki)} actuated joints, we see {robot.dof}")
    chain = jnp.asarray(layout.chain)
    lower = jnp.asarray(layout.lower, dtype=jnp.float32)
    upper = jnp.asarray(layout.upper, dtype=jnp.float32)
    unroll = layout.k <= 10

    def residual(x, base, positions, wxyz, weights):
        q = base.at[chain].set(x)
        poses = pk.forward_kinematics(q[to_pyroki], unroll_fk=unroll)[link_rows]
        current = jaxlie.SE3(poses)
        rotation_error = (jaxlie.SO3(wxyz) @ current.rotation().inverse()).log()
        position_error = positions - poses[:, 4:]
        stacked = jnp.concatenate([position_error * weights[:, :1], rotation_error * weights[:, 1:]], axis=-1)
        errors = jnp.stack([jnp.linalg.norm(position_error, axis=-1), jnp.linalg.norm(rotation_error, axis=-1)], axis=-1)
        flat = stacked.reshape(-1)
        return flat, (flat, errors)

    def evaluate(x, base, positions, wxyz, weights):
        jac, (flat, errors) = jax.jacfwd(residual, has_aux=True)(x, base, positions, wxyz, weights)
        return flat, jac, errors

    def solve(base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold):
        """base (n,) start configuration; seeds (S, k) chain values; free (k,) 1/0."""
        ok_weights = weights > 0

        def converged(errors):
            return jnp.all((errors <= tolerances) | ~ok_weights, axis=(-2, -1))

        def cost_of(errors):
            return jnp.sum((errors * weights) ** 2, axis=(-2, -1))

        def one_step(x, flat, jac, errors, cost, damping, done):
            jac = jac * free
            jtj = jac.T @ jac
            g = -(jac.T @ flat)
            eye = jnp.eye(x.shape[0], dtype=x.dtype)
            step = jnp.linalg.solve(jtj + damping * eye, g)
            blocked = ((x <= lower) & (step < 0)) | ((x >= upper) & (step > 0))
            keep = (1.0 - blocked.astype(x.dtype)) * free
            jac2 = jac * keep
            step2 = jnp.linalg.solve(jac2.T @ jac2 + damping * eye, -(jac2.T @ flat)) * keep
            step = jnp.where(jnp.any(blocked), step2, step * free)
            biggest = jnp.max(jnp.abs(step))
            step = step * jnp.minimum(1.0, 0.6 / jnp.maximum(biggest, 1e-12))
            x_new = jnp.clip(x + step, lower, upper)
            flat_new, jac_new, errors_new = evaluate(x_new, base, positions, wxyz, weights)
            cost_new = cost_of(errors_new)
            better = (cost_new < cost) & ~done
            pick = lambda new, old: jnp.where(better, new, old)  # noqa: E731
            damping = jnp.where(better, jnp.maximum(damping * 0.2, 1e-10), jnp.minimum(damping * 10.0, 1e6))
            x, flat, jac, errors, cost = pick(x_new, x), pick(flat_new, flat), pick(jac_new, jac), pick(errors_new, errors), pick(cost_new, cost)
            done = done | converged(errors) | (damping >= 1e6)
            return x, flat, jac, errors, cost, damping, done

        x0 = jnp.clip(seeds, lower, upper)
        flat0, jac0, errors0 = jax.vmap(evaluate, in_axes=(0, None, None, None, None))(x0, base, positions, wxyz, weights)
        cost0 = cost_of(errors0)
        damping0 = jnp.full(seeds.shape[0], 1e-3, dtype=x0.dtype)
        done0 = converged(errors0)

        def finished(state):
            _, _, _, errors, _, _, done, iteration = state
            ok = converged(errors)
            warm_finished = ok[0] | (done[0] & jnp.any(ok))
            return jnp.where(cold, jnp.any(ok), warm_finished) | jnp.all(done) | (iteration >= max_iterations)

        def body(state):
            *arrays, iteration = state
            arrays = jax.vmap(one_step)(*arrays)
            return (*arrays, iteration + 1)

        state = (x0, flat0, jac0, errors0, cost0, damping0, done0, jnp.int32(0))
        state = jax.lax.while_loop(lambda s: ~finished(s), body, state)
        x, _, _, errors, cost, _, _, iteration = state
        ok = converged(errors)
        start_x = base[chain]
        distance = jnp.sum((x - start_x) ** 2, axis=-1)
        # Warm: the start seed if it converged; else the converged seed nearest the start;
        # else the lowest cost. Cold: the converged seed nearest the start.
        score = jnp.where(ok, distance, 1e30 + cost)
        score = jnp.where(~cold & ok[0], jnp.where(jnp.arange(score.shape[0]) == 0, -1.0, score), score)
        best = jnp.argmin(score)
        return x[best], errors[best], iteration, ok[best]

    return solve


def _argument_specs(robot, layout: Layout, target_count: int):
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32
    return (
        jax.ShapeDtypeStruct((robot.dof,), f32),
        jax.ShapeDtypeStruct((layout.seeds, layout.k), f32),
        jax.ShapeDtypeStruct((target_count, 3), f32),
        jax.ShapeDtypeStruct((target_count, 4), f32),
        jax.ShapeDtypeStruct((target_count, 2), f32),
        jax.ShapeDtypeStruct((layout.k,), f32),
        jax.ShapeDtypeStruct((2,), f32),
        jax.ShapeDtypeStruct((), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )


def export_path(layout: Layout) -> Path:
    return cache_root() / "exports" / f"{layout.robot.fingerprint}-{layout.digest}.jaxexport"


def _header(layout: Layout) -> bytes:
    import jax

    return json.dumps({"key": layout.key_text, "jax": jax.__version__}).encode() + b"\n"


def _load_export(layout: Layout):
    """The exported program from disk, or None when missing, stale or unreadable (then the
    file is removed so it gets rebuilt)."""
    from jax import export

    path = export_path(layout)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("not a Kinema export")
        header_end = data.index(b"\n", len(_MAGIC)) + 1
        if data[len(_MAGIC):header_end] != _header(layout):
            raise ValueError("made for another robot, link set or JAX version")
        return export.deserialize(bytearray(data[header_end:]))
    except Exception:
        try:
            path.unlink()
        except OSError:
            pass
        return None


def _save_export(layout: Layout, exported) -> None:
    path = export_path(layout)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(_MAGIC + _header(layout) + bytes(exported.serialize()))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache folder only costs the next session a compile


class CompiledSolver:
    """A compiled program for one (robot, links), called with NumPy arrays."""

    def __init__(self, robot, links: tuple[str, ...]):
        import jax
        from jax import export

        configure_jax()
        self.layout = layout = Layout(robot, links)
        exported = _load_export(layout)
        self.from_disk = exported is not None
        if exported is None:
            function = _build_function(robot, layout)
            exported = export.export(jax.jit(function))(*_argument_specs(robot, layout, len(links)))
            _save_export(layout, exported)
        self._call = jax.jit(exported.call)
        self._compiled = False

    def compile(self) -> None:
        """Compile now (from the persistent cache when it has this program)."""
        if not self._compiled:
            specs = _argument_specs(self.layout.robot, self.layout, len(self.layout.links))
            self._call = self._call.lower(*specs).compile()
            self._compiled = True

    def __call__(self, base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold):
        self.compile()
        f32 = np.float32
        out = self._call(
            base.astype(f32), seeds.astype(f32), positions.astype(f32), wxyz.astype(f32), weights.astype(f32),
            free.astype(f32), tolerances.astype(f32), np.int32(max_iterations), np.bool_(cold),
        )
        x, errors, iterations, ok = (np.asarray(a) for a in out)
        return x.astype(float), errors.astype(float), int(iterations), bool(ok)


def solver_for(robot, links: tuple[str, ...]) -> CompiledSolver:
    key = (robot.fingerprint, links)
    with _lock:
        return _solvers.get_or_build(key, lambda: CompiledSolver(robot, links))


def loaded_solver_keys() -> list:
    return _solvers.keys()


def set_lru_size(capacity: int) -> None:
    _solvers.resize(capacity)


def clear_solvers() -> None:
    _solvers.clear()


def make_seeds(layout: Layout, start: np.ndarray, rng: np.random.Generator, free: np.ndarray, include_start: bool = True) -> np.ndarray:
    """Random chain values within limits for the free joints; held joints keep the start."""
    lower = np.where(np.isfinite(layout.lower), layout.lower, start[layout.chain] - np.pi)
    upper = np.where(np.isfinite(layout.upper), layout.upper, start[layout.chain] + np.pi)
    seeds = rng.uniform(lower, upper, size=(layout.seeds, layout.k))
    seeds[:, free == 0] = start[layout.chain][free == 0]
    if include_start:
        seeds[0] = start[layout.chain]
    return seeds


def solve_pyroki(robot, problem, start: np.ndarray, targets, options, t0: float):
    """Same contract as `solve_numpy`: (q, errors-unused, iterations, converged, over_budget)."""
    solver = solver_for(robot, targets.links)
    layout = solver.layout
    free = np.isin(layout.chain, problem.free).astype(float)
    tolerances = np.array([options.position_tolerance, options.rotation_tolerance])
    rng = np.random.default_rng(layout.k * 7919 + 17)
    deadline = t0 + options.budget_ms / 1000.0
    total = 0
    best = None
    attempt = 0
    while True:
        seeds = make_seeds(layout, start, rng, free, include_start=attempt == 0)
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


def warm_up_pyroki(robot, links: tuple[str, ...]) -> CompiledSolver:
    solver = solver_for(robot, links)
    solver.compile()
    return solver
