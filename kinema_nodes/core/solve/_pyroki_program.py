"""The PyRoki program: Levenberg-Marquardt in JAX over PyRoki's forward kinematics, built and
kept as an export file (`CompiledSolver`). Solving with it is `_pyroki_backend`; building it in
the background is `_warming`; the programs this process holds are `_compiled_store`.

One program per (robot, target links) solves a small batch of seeds at once: seed 0 is the
start configuration (warm start, so the arm stays on its branch), the others are random
configurations within limits. In a warm solve the start seed wins whenever it converges; in
a cold solve the first seed to converge stops the loop. Every input has a fixed shape, so a
new target value, tolerance, held-joint set or iteration cap never retraces.

Compiled programs are kept three ways: in memory (an LRU, `_compiled_store`), as JAX export files per robot
fingerprint and link set (so a new process skips tracing PyRoki altogether), and in JAX's
persistent compilation cache (so it also skips XLA compilation).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np

from ..cache_folder import signed_folder
from ._cache import cache_root
from ._chain import seed_window

#: Bump when the program's inputs, outputs or algorithm change: old export files are rebuilt.
FORMAT_VERSION = 10
_MAGIC = b"KINEMA-IK-EXPORT\n"

_configured = False
_availability: tuple[bool, str | None] | None = None


def _import_reason(exc: BaseException, what: str) -> str:
    return f"{what} could not be imported ({type(exc).__name__}: {exc})"


def jax_available() -> tuple[bool, str | None]:
    try:
        import jax  # noqa: F401
        import jaxlie  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install raising anything
        return False, _import_reason(exc, "JAX")
    return True, None


def jax_present() -> bool:
    """JAX and jaxlie are installed (or already imported), found without importing them: the
    live path leaves the import (~0.5-1 s) to the background build."""
    import importlib.util
    import sys

    if "jax" in sys.modules and "jaxlie" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("jax") is not None and importlib.util.find_spec("jaxlie") is not None
    except (ImportError, ValueError):
        return False


def pyroki_available() -> tuple[bool, str | None]:
    """(True, None) when JAX and PyRoki import; else (False, why). Cached after the first ask."""
    global _availability
    if _availability is None:
        ok, reason = jax_available()
        if ok:
            try:
                import pyroki  # noqa: F401
            except Exception as exc:  # noqa: BLE001 - same: any failure to import is a reason to fall back
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
        _signed_jax_cache(signed_folder("jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _register_lapack()
    _configured = True


class _SignedJaxCache:
    """JAX's file cache of compiled XLA executables (native code, run when loaded), with every
    entry signed by the install's key (`core.cache_trust`) over its cache key and bytes: an
    entry this install did not write is deleted and compiled again, never deserialised."""

    def __init__(self, inner, suffix: str):
        self.inner, self.suffix = inner, suffix

    def get(self, key: str):
        from ..cache_trust import discard, is_regular, note_untrusted, unsign

        path = Path(self.inner.path) / f"{key}{self.suffix}"
        if os.path.lexists(path) and not is_regular(path):
            discard(path)  # a FIFO or device would hang JAX's read
            note_untrusted("the compiled JAX cache entry", path)
            return None
        data = self.inner.get(key)
        if data is None:
            return None
        content = unsign(key, data)
        if content is None:
            discard(path)
            note_untrusted("the compiled JAX cache entry", path)
        return content

    def put(self, key: str, value: bytes) -> None:
        from ..cache_trust import sign

        signed = sign(key, value)
        if signed is not None:
            self.inner.put(key, signed)


def _signed_jax_cache(folder: Path) -> None:
    """Point JAX's persistent compilation cache at `folder`, signed (`_SignedJaxCache`). Without
    a trusted key, or where JAX's cache internals differ, JAX gets no persistent cache: a
    compile per process costs time, an unsigned executable could run anything."""
    from ..cache_trust import install_key

    if install_key() is None:
        return
    try:
        from jax._src import compilation_cache as cc
        from jax._src import lru_cache

        with cc._cache_initialized_mutex:
            if cc._cache is not None or cc._cache_initialized:
                return  # JAX already holds a cache (the user's own folder): left alone
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            inner = lru_cache.LRUCache(str(folder), max_size=-1)
            cc._cache = _SignedJaxCache(inner, lru_cache._CACHE_SUFFIX)
            cc._cache_initialized = True
    except (ImportError, AttributeError, OSError, RuntimeError):
        return  # no persistent cache: only speed is lost
    import jax

    jax.config.update("jax_compilation_cache_dir", str(folder))


def _register_lapack() -> None:
    """Register jaxlib's LAPACK kernels. JAX does it lazily when it lowers a linear solve;
    a program loaded from an export file is never lowered, and calling it without the
    kernels registered crashes the process."""
    try:
        from jax._src.lib import lapack

        lapack._lapack.initialize()
    except Exception:  # noqa: BLE001 - a private jaxlib path moved: register by lowering instead
        import jax
        import jax.numpy as jnp

        jax.jit(jnp.linalg.solve).lower(jnp.eye(2), jnp.ones(2)).compile()  # lowering registers them


def seed_count(chain_dof: int) -> int:
    """Seeds per program: more for small arms (cheap, raises cold success), fewer for long
    humanoid chains where every seed costs a full Jacobian."""
    return 8 if chain_dof <= 10 else 4


SEED_BLOCKS = 16
#: How far (rad or m, per joint) the near-start seeds of a warm solve stray from the start.
NUDGE = 0.4
#: Iterations over which a seed's cost must halve, or it stops (same rule as the NumPy backend).
STALL_WINDOW = 10
#: PyRoki FK is unrolled up to this many joints. Unrolling compiled ~50 % slower and ran no
#: faster in our measurements (Panda, 2 cores), so it is off.
UNROLL_FK_MAX_JOINTS = 0
SEED_TABLE_SEED = 20240917


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
        #: joints seeded within half a turn of the start and unwrapped toward it (`turns_freely`)
        self.turns = robot.turns_freely[self.chain]
        self.slides = robot.slides_freely[self.chain]  # seeded at the start value
        self.targets = len(links)
        # One flat float32 input and output: a JAX call pays per argument and per result.
        t = self.targets
        self.input_sizes = (robot.dof, self.seeds * self.k, 3 * t, 4 * t, 2 * t, self.k, 2, 1, 1)
        self.input_size = int(sum(self.input_sizes))
        # Random seeds as fractions of each joint's range, drawn once: cold solves are
        # reproducible and drawing costs nothing per call.
        self.seed_fractions = np.random.default_rng(SEED_TABLE_SEED).random((SEED_BLOCKS, self.seeds, self.k))
        self._free_masks: dict[bytes, np.ndarray] = {}
        key = json.dumps([FORMAT_VERSION, robot.fingerprint, list(links), self.seeds], separators=(",", ":"))
        self.key_text = key
        self.digest = hashlib.sha256(key.encode()).hexdigest()[:20]

    def free_mask(self, free_joints: np.ndarray) -> np.ndarray:
        """1.0 for chain variables the solver may move (given the problem's free joints)."""
        key = free_joints.tobytes()
        mask = self._free_masks.get(key)
        if mask is None:
            mask = self._free_masks[key] = np.isin(self.chain, free_joints).astype(np.float32)
        return mask

    def make_seeds(self, start: np.ndarray, free: np.ndarray, attempt: int, near_start: bool = False) -> np.ndarray:
        """Seeds within limits (a joint that turns freely: start +- pi); held joints keep the start;
        on the first attempt seed 0 is the start itself. `near_start` (warm solves): half
        the seeds are small nudges of the start, so when the start's own descent stalls (a
        singularity, a limit) a solution on the same branch is found before a far one."""
        chain_start = start[self.chain]
        lower, upper = seed_window(self.lower, self.upper, self.turns, self.slides, chain_start)
        fractions = self.seed_fractions[attempt % SEED_BLOCKS]
        seeds = lower + fractions * (upper - lower)
        if near_start:
            half = self.seeds // 2
            nudged = chain_start + (fractions[:half] - 0.5) * (2 * NUDGE)
            seeds[:half] = np.clip(nudged, lower, upper)
        seeds = np.where(free > 0, seeds, chain_start)
        if attempt == 0:
            seeds[0] = chain_start
        return seeds

    def pack(self, base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold) -> np.ndarray:
        return np.concatenate([
            base, seeds.reshape(-1), positions.reshape(-1), wxyz.reshape(-1), weights.reshape(-1), free, tolerances,
            (float(max_iterations), 1.0 if cold else 0.0),
        ]).astype(np.float32)


#: The speed PyRoki is told for a joint without one (it refuses such joints; the solver never
#: reads PyRoki's speed limits, and "no limit" stays no limit everywhere else).
_NO_SPEED_LIMIT = 1.0e9


def _quiet_pyroki() -> None:
    """PyRoki's parser logs a DEBUG line through loguru for each joint without an origin (three
    on robosuite's UR5e), printed in Blender's console on every build: its messages, and only
    its, are turned off."""
    try:
        from loguru import logger
    except ImportError:  # a PyRoki that no longer logs through loguru
        return
    logger.disable("pyroki")


def _pyroki_robot(robot):
    """PyRoki's Robot for our RobotModel. A shallow copy of the yourdfpy object gets the base
    link yourdfpy leaves unset when loaded without a scene graph (PyRoki's sort needs it), and
    copies of the movable joints that have no speed limit (an MJCF's, a continuous joint without
    ``<limit>``) get `_NO_SPEED_LIMIT`, since PyRoki's parser refuses them; a joint whose mimic
    names a joint the file does not define gets no mimic (ours moves on its own: `loading`)."""
    import pyroki
    import yourdfpy

    _quiet_pyroki()
    urdf = copy.copy(robot.urdf)
    if getattr(urdf, "_base_link", None) is None:
        urdf._base_link = robot.root_link
    given = {}
    for name, joint in urdf.joint_map.items():
        if joint.type != "fixed" and (joint.limit is None or joint.limit.velocity is None):
            limit = copy.copy(joint.limit) if joint.limit is not None else yourdfpy.Limit()
            limit.velocity = _NO_SPEED_LIMIT
            given[name] = copy.copy(joint)
            given[name].limit = limit
        if joint.type == "revolute" and (joint.limit is None or joint.limit.lower is None or joint.limit.upper is None):
            # a revolute joint without limits (a wheel) turns freely, as our model reads it: PyRoki refuses it as revolute
            given.setdefault(name, copy.copy(joint)).type = "continuous"
    ours = {joint.name: joint for joint in robot.joints}
    freed = [name for name, joint in urdf.joint_map.items()
             if joint.mimic is not None and name in ours and ours[name].mimic is None]
    for name in freed:  # a mimic of a joint the file does not define: ours moves on its own (`loading`)
        given.setdefault(name, copy.copy(urdf.joint_map[name])).mimic = None
    if given:
        urdf._joint_map = {name: given.get(name, joint) for name, joint in urdf.joint_map.items()}
        urdf._actuated_joints = [given.get(joint.name, joint) for joint in urdf._actuated_joints]
    if freed:
        urdf._actuated_joints = [joint for joint in urdf._joint_map.values() if joint.mimic is None and joint.type != "fixed"]
    try:
        return pyroki.Robot.from_urdf(urdf)
    except ValueError as exc:
        if "Topological sort failed" not in str(exc):
            raise
    # A joint that follows one of its own descendants (a coupling MuJoCo compiles, e.g. a
    # telescoping arm whose outer stage follows the inner one): PyRoki's sort waits for the
    # followed joint before the follower, and the follower's subtree before the followed, so
    # it never finishes. PyRoki's forward kinematics reads every mimic value straight from the
    # actuated configuration, so only parents need to come first: the tree order does.
    return _from_urdf_in_tree_order(pyroki, urdf)


_SORT_LOCK = threading.Lock()


def _from_urdf_in_tree_order(pyroki, urdf):
    """`pyroki.Robot.from_urdf` with joints ordered parent-first only, ignoring mimic
    dependencies (which PyRoki's parser also demands, though its kinematics do not need them).
    PyRoki's parser calls its sort by class name, so the sort is swapped for the call; the
    order it is swapped for is valid for every robot, so a concurrent parse loses nothing."""
    from pyroki._robot_urdf_parser import RobotURDFParser

    joints = list(urdf.joint_map.values())
    by_child = {joint.child: joint.parent for joint in joints}
    done = {link for link in (urdf.base_link,) if link is not None}
    order: list[int] = []
    pending = list(range(len(joints)))
    while pending:
        ready = [i for i in pending if by_child[joints[i].child] in done or by_child[joints[i].child] not in by_child]
        if not ready:
            raise ValueError(f"joints {[joints[i].name for i in pending][:8]} hang from no link of the tree")
        for i in ready:
            order.append(i)
            done.add(joints[i].child)
        pending = [i for i in pending if i not in set(ready)]

    with _SORT_LOCK:
        original = RobotURDFParser.__dict__["_topologically_sort_joints"]
        RobotURDFParser._topologically_sort_joints = staticmethod(lambda _urdf: tuple(order))
        try:
            return pyroki.Robot.from_urdf(urdf)
        finally:
            RobotURDFParser._topologically_sort_joints = original


def _jacobian_tables(pk, robot, layout: Layout, to_pyroki: np.ndarray):
    """Static tables for the analytic Jacobian: per target, PyRoki's index of the joint that
    places the link, the moving joints above it, their local twists, and a matrix mapping
    their columns onto the chain variables (mimic multipliers included)."""
    parents = pk.joints.parent_indices
    twists = np.asarray(pk.joints.twists, dtype=float)
    actuated = pk.joints.actuated_indices
    mimic_source = pk.joints.mimic_act_indices
    multipliers = np.asarray(pk.joints.mimic_multiplier, dtype=float)
    variable_of_ours = {int(j): v for v, j in enumerate(layout.chain)}
    tables = []
    for link in layout.links:
        tip = pk.links.parent_joint_indices[pk.links.names.index(link)]
        joints = []
        j = tip
        while j != -1:
            source = mimic_source[j] if mimic_source[j] != -1 else actuated[j]
            if source != -1 and np.any(twists[j] != 0):
                joints.append((j, int(to_pyroki[source]), multipliers[j]))
            j = parents[j]
        joints.reverse()
        selector = np.zeros((len(joints), layout.k))
        for row, (_, ours, multiplier) in enumerate(joints):
            selector[row, variable_of_ours[ours]] += multiplier
        indices = np.array([j for j, _, _ in joints], dtype=int)
        tables.append((tip, indices, twists[indices], selector))
    return tables


def _spd_solve(matrix, vector):
    """Solve a small symmetric positive definite system (damped normal equations) by
    Gauss-Jordan elimination, unrolled. XLA fuses it into a few kernels; jnp.linalg.solve
    would call LAPACK through jaxlib, whose OpenBLAS threads stall on a busy machine."""
    import jax.numpy as jnp

    size = matrix.shape[-1]
    augmented = jnp.concatenate([matrix, vector[:, None]], axis=1)
    for i in range(size):
        row = augmented[i] / augmented[i, i]
        augmented = augmented - augmented[:, i:i + 1] * row[None, :]
        augmented = augmented.at[i].set(row)
    return augmented[:, size]


def _build_function(robot, layout: Layout):
    """The pure JAX function for `layout` (traced once, then exported).

    Kinematics come from PyRoki (`Robot._forward_kinematics_joints`: the world pose of every
    joint frame in one pass); the Jacobian is the geometric one assembled from those poses
    and PyRoki's joint twists, which costs one FK instead of one per joint (autodiff)."""
    import jax
    import jax.numpy as jnp
    import jaxlie

    pk = _pyroki_robot(robot)
    our_index = {name: i for i, name in enumerate(robot.actuated_joint_names)}
    try:
        to_pyroki = np.array([our_index[name] for name in pk.joints.actuated_names], dtype=int)
    except KeyError as exc:
        raise RuntimeError(f"PyRoki's joint list differs from ours ({exc})") from None
    if len(to_pyroki) != robot.dof:
        raise RuntimeError(f"PyRoki sees {len(to_pyroki)} actuated joints, we see {robot.dof}")
    tables = _jacobian_tables(pk, robot, layout, to_pyroki)
    chain = jnp.asarray(layout.chain)
    lower = jnp.asarray(layout.lower, dtype=jnp.float32)
    upper = jnp.asarray(layout.upper, dtype=jnp.float32)
    unroll = pk.joints.num_joints <= UNROLL_FK_MAX_JOINTS

    def evaluate(x, base, positions, wxyz, weights):
        """Weighted residual (6T,), its Jacobian d residual / dx (6T, k), errors (T, 2)."""
        q = base.at[chain].set(x)
        joint_poses = pk._forward_kinematics_joints(q[to_pyroki], unroll)
        residuals, jacobians, errors = [], [], []
        for t, (tip, indices, twists, selector) in enumerate(tables):
            pose = jaxlie.SE3(joint_poses[tip])
            tip_position = joint_poses[tip, 4:]
            rotation_error = (jaxlie.SO3(wxyz[t]) @ pose.rotation().inverse()).log()
            position_error = positions[t] - tip_position
            frames = joint_poses[indices]
            rotations = jaxlie.SO3(frames[:, :4]).as_matrix()
            linear = jnp.einsum("mij,mj->mi", rotations, twists[:, :3])
            angular = jnp.einsum("mij,mj->mi", rotations, twists[:, 3:])
            linear = linear + jnp.cross(angular, tip_position - frames[:, 4:])
            columns = jnp.concatenate([linear * weights[t, 0], angular * weights[t, 1]], axis=-1).T  # (6, m)
            jacobians.append(-(columns @ selector))
            residuals.append(jnp.concatenate([position_error * weights[t, 0], rotation_error * weights[t, 1]]))
            errors.append(jnp.stack([jnp.linalg.norm(position_error), jnp.linalg.norm(rotation_error)]))
        return jnp.concatenate(residuals), jnp.concatenate(jacobians, axis=0), jnp.stack(errors)

    def solve(base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold):
        """base (n,) start configuration; seeds (S, k) chain values, seeds[0] = the start's;
        free (k,) 1/0. Returns the chosen seed's chain values, its errors (T, 2), the
        iterations run and whether it converged."""
        ok_weights = weights > 0

        def converged(errors):
            return jnp.all((errors <= tolerances) | ~ok_weights, axis=(-2, -1))

        def cost_of(errors):
            return jnp.sum((errors * weights) ** 2, axis=(-2, -1))

        def one_step(x, flat, jac, errors, cost, damping, done):
            jac = jac * free
            eye = jnp.eye(x.shape[0], dtype=x.dtype)
            step = _spd_solve(jac.T @ jac + damping * eye, -(jac.T @ flat))
            blocked = ((x <= lower) & (step < 0)) | ((x >= upper) & (step > 0))
            keep = (1.0 - blocked.astype(x.dtype)) * free
            jac2 = jac * keep
            step2 = _spd_solve(jac2.T @ jac2 + damping * eye, -(jac2.T @ flat)) * keep
            step = jnp.where(jnp.any(blocked), step2, step * free)
            biggest = jnp.max(jnp.abs(step))
            step = step * jnp.minimum(1.0, 0.6 / jnp.maximum(biggest, 1e-12))
            x_new = jnp.clip(x + step, lower, upper)
            flat_new, jac_new, errors_new = evaluate(x_new, base, positions, wxyz, weights)
            cost_new = cost_of(errors_new)
            better = (cost_new < cost) & ~done
            def pick(new, old):
                return jnp.where(better, new, old)

            damping = jnp.where(done, damping, jnp.where(better, jnp.maximum(damping * 0.2, 1e-10), jnp.minimum(damping * 10.0, 1e6)))
            x, flat, jac, errors, cost = pick(x_new, x), pick(flat_new, flat), pick(jac_new, jac), pick(errors_new, errors), pick(cost_new, cost)
            done = done | converged(errors) | (damping >= 1e6)
            return x, flat, jac, errors, cost, damping, done

        # One loop for both modes, so the program (and its compile time) stays small. Warm:
        # only seed 0 (the start) is active; the other seeds join when it gives up without
        # converging. Cold: every seed is active from the first iteration.
        x0 = jnp.clip(seeds, lower, upper)
        flat0, jac0, errors0 = jax.vmap(evaluate, in_axes=(0, None, None, None, None))(x0, base, positions, wxyz, weights)
        cost0 = cost_of(errors0)
        damping0 = jnp.full(x0.shape[0], 1e-3, dtype=x0.dtype)
        first_only = jnp.arange(x0.shape[0]) == 0
        active0 = cold | first_only
        state = (x0, flat0, jac0, errors0, cost0, damping0, converged(errors0), cost0, active0, jnp.int32(0))

        def keep_going(state):
            errors, done, active, iteration = state[3], state[6], state[8], state[9]
            ok = converged(errors) & active
            # Warm: once the start's descent gave up, let every seed finish, so the answer is
            # the converged one nearest the start, not merely the first to converge.
            warm_finished = ok[0]
            finished = jnp.where(cold, jnp.any(ok), warm_finished) | jnp.all(done)
            return ~finished & (iteration < max_iterations)

        def body(state):
            x, flat, jac, errors, cost, damping, done, checkpoint, active, iteration = state
            frozen = done | ~active
            x, flat, jac, errors, cost, damping, done = jax.vmap(one_step)(x, flat, jac, errors, cost, damping, frozen)
            done = done & active
            # A seed whose cost has not halved in STALL_WINDOW iterations gives up (an
            # unreachable target must not spin to max_iterations every frame).
            at_checkpoint = (iteration + 1) % STALL_WINDOW == 0
            done = done | (active & at_checkpoint & (cost > 0.5 * checkpoint) & (cost > 1e-12))
            checkpoint = jnp.where(at_checkpoint, cost, checkpoint)
            # Warm: the start's descent gave up without converging -> bring in the other seeds.
            active = active | (done[0] & ~converged(errors)[0])
            return x, flat, jac, errors, cost, damping, done, checkpoint, active, iteration + 1

        x, _, _, errors, cost, _, _, _, active, iteration = jax.lax.while_loop(keep_going, body, state)
        ok = converged(errors) & active
        distance = jnp.sum((x - base[chain]) ** 2, axis=-1)
        nearest = jnp.argmin(jnp.where(ok, distance, jnp.inf))
        # Warm: the start's own descent wins whenever it converged (no branch flips).
        best = jnp.where(jnp.any(ok), jnp.where(~cold & ok[0], 0, nearest), jnp.argmin(jnp.where(active, cost, jnp.inf)))
        return x[best], errors[best], iteration, ok[best]

    sizes = layout.input_sizes
    offsets = np.concatenate([[0], np.cumsum(sizes)])

    def packed(vector):
        part = [vector[offsets[i]:offsets[i + 1]] for i in range(len(sizes))]
        t = layout.targets
        x, errors, iterations, ok = solve(
            part[0], part[1].reshape(layout.seeds, layout.k), part[2].reshape(t, 3), part[3].reshape(t, 4), part[4].reshape(t, 2),
            part[5], part[6], part[7][0].astype(jnp.int32), part[8][0] > 0.5,
        )
        return jnp.concatenate([x, errors.reshape(-1), iterations.astype(jnp.float32)[None], ok.astype(jnp.float32)[None]])

    return packed


def _argument_specs(layout: Layout):
    import jax
    import jax.numpy as jnp

    return (jax.ShapeDtypeStruct((layout.input_size,), jnp.float32),)


def export_path(layout: Layout) -> Path:
    return cache_root() / "exports" / f"{layout.robot.fingerprint}-{layout.digest}.jaxexport"


def _header(layout: Layout) -> bytes:
    """What an export was made for. "hash" names the keyed hash (HMAC, `core.cache_trust`): an
    export from before signing carries a plain SHA-256 under another header, so it is stale and
    rebuilt quietly, not reported as damaged after an upgrade."""
    import jax

    return json.dumps({"key": layout.key_text, "jax": jax.__version__, "hash": "hmac-sha256"}).encode() + b"\n"


def _load_export(layout: Layout):
    """The exported program from disk, or None when missing, stale or corrupt (then the file
    is removed so it gets rebuilt; a corrupt one is reported once). The content hash is
    checked before deserialising, so a bit-flipped payload never reaches JAX."""
    from jax import export

    from ._cache import discard, read_entry

    path = export_path(layout)
    payload = read_entry(path, _MAGIC, _header(layout))
    if payload is None:
        return None
    try:
        return export.deserialize(bytearray(payload))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is rebuilt, never fatal
        discard(path, f"{type(exc).__name__} while reading it")
        return None


def _save_export(layout: Layout, exported) -> None:
    from ._cache import write_entry

    write_entry(export_path(layout), _MAGIC, _header(layout), bytes(exported.serialize()))


class CompiledSolver:
    """A compiled program for one (robot, links), called with NumPy arrays."""

    def __init__(self, robot, links: tuple[str, ...]):
        import jax
        from jax import export

        configure_jax()
        self.layout = layout = Layout(robot, links)
        exported = _load_export(layout)
        self.from_disk = exported is not None
        #: How the program came to be: "disk" (an export file an earlier build left), "here"
        #: (traced and exported in this process) or "child" (`_pyroki_child` built it, this loaded it).
        self.build_route = "disk" if self.from_disk else "here"
        if exported is None:
            function = _build_function(robot, layout)
            exported = export.export(jax.jit(function))(*_argument_specs(layout))
            _save_export(layout, exported)
        self._call = jax.jit(exported.call)
        self._compiled = False

    def compile(self) -> None:
        """Compile now (from the persistent cache when it has this program), by running it
        once on zeros with no iterations, so the jit's fast dispatch path is ready."""
        if not self._compiled:
            np.asarray(self._call(np.zeros(self.layout.input_size, dtype=np.float32)))
            self._compiled = True

    def __call__(self, base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold):
        self.compile()
        layout = self.layout
        out = np.asarray(self._call(layout.pack(base, seeds, positions, wxyz, weights, free, tolerances, max_iterations, cold)))
        k, t = layout.k, layout.targets
        return out[:k].astype(float), out[k:k + 2 * t].reshape(t, 2).astype(float), int(out[-2]), bool(out[-1] > 0.5)
