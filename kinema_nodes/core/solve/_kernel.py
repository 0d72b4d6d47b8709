"""The compiled Levenberg-Marquardt kernel, built and chosen: the maths (`_kernel_maths`) as
numba compiles it, or as plain Python over NumPy while numba is missing or still compiling.

The first ask starts numba's build in a background thread (seconds to a minute on a machine
that never compiled it; later processes load numba's disk cache from the Kinema cache folder
in about half a second). Meanwhile the NumPy form answers, with the same loop code. This
module holds that build's thread and state, the wait for it (`wait_for_kernel_build`, also at
interpreter exit), the cache folder, and the calls that pick a form (`solve_rows`,
`frame_form`, `plain_numpy`). The names other modules read of the maths are re-exported here.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import types

import numpy as np

from . import _kernel_maths as maths
from ._kernel_maths import (BRANCH_JUMP, FRAME_DONE, FRAME_MAX_DISTANCE_SQUARED, MAX_DAMPING, MAX_STEP, STALL_WINDOW, KernelChain,
                            _buffers, _evaluate, _solve_rows, _workspace, frame_floats, posture_columns, workspace_size)

__all__ = [
    "BRANCH_JUMP", "FRAME_DONE", "FRAME_MAX_DISTANCE_SQUARED", "MAX_DAMPING", "MAX_STEP", "STALL_WINDOW",
    "KernelChain", "_evaluate", "_solve_rows", "_workspace", "frame_floats", "frame_form",
    "kernel_building", "kernel_status", "kernel_summary", "numba_cache_dir", "plain_numpy", "posture_columns", "solve_rows",
    "wait_for_kernel_build", "workspace_size",
]


# ---- building the two forms --------------------------------------------------------------------

_LEAVES = ("workspace_size", "_workspace", "_forward", "_tip", "_rotation_error", "_swivel_angle", "_wrap", "_add_column", "_evaluate", "_normal",
           "_cholesky", "_damped_solve", "_min_norm", "_converged", "_forward_one", "_evaluate_one", "_damped_solve_one",
           "_descend_one", "_descend", "_family_error", "_toward",
           "_return_to_family", "_settle", "_solve_rows", "_unpack", "_packed_rows", "_frame")
#: Leaves numba splices into their callers: a call of a compiled function takes a reference
#: (an atomic count increment and decrement) on every array it is handed, and these run per
#: joint or per evaluation, where the counting was a fifth of a tracking frame.
_INLINED = ("_forward", "_tip", "_rotation_error", "_add_column", "_forward_one")
_lock = threading.Lock()
_numpy_form: types.FunctionType | None = None
_numba_form = None
_frame_form = None  # the numba build of `_frame`
_numba_reason: str | None = "the compiled kernel is still compiling (the NumPy form serves meanwhile)"
_state = "untried"  # -> "compiling" -> "ready" | "failed"
_numba_leaves: dict | None = None
_thread: threading.Thread | None = None


def _plain():
    """`_solve_rows` as plain Python over the NumPy leaves (same loop code, other globals)."""
    global _numpy_form
    if _numpy_form is None:
        namespace = dict(vars(maths))
        namespace.update(_evaluate=maths._evaluate_np, _normal=maths._normal_np, _damped_solve=maths._damped_solve_np,
                         _min_norm=maths._min_norm_np, SINGLE_CHAIN_FORM=False)
        for name in ("_converged", "_descend", "_return_to_family", "_settle", "_solve_rows"):
            original = getattr(maths, name)
            namespace[name] = types.FunctionType(original.__code__, namespace, name, original.__defaults__)
        _numpy_form = namespace["_solve_rows"]
    return _numpy_form


def numba_cache_dir() -> str:
    from ._cache import cache_root

    return str(cache_root() / "numba")


def _example_chain() -> tuple:
    """A one-joint chain with the argument types of every real call, to compile (or load
    from numba's disk cache) the one signature the kernel is ever called with."""
    i1, f = np.zeros(1, dtype=np.int64), np.zeros(1)
    eye = np.eye(3)[None]
    return (np.array([-1], dtype=np.int64), i1.copy(), np.array([[0.0, 0.0, 1.0]]), eye.copy(), np.zeros((1, 3)), i1.copy(),
            np.ones(1), f.copy(), i1.copy(), i1.copy(), eye.copy(), np.zeros((1, 3)), np.ones((1, 1), dtype=np.bool_),
            np.zeros(0, dtype=np.int64), np.zeros((0, 3, 3)), np.zeros((0, 3)), np.zeros((0, 1), dtype=np.bool_), i1.copy(),
            np.full(1, -1.0), np.ones(1))


def _build_numba() -> None:
    global _numba_form, _numba_reason, _state
    try:
        if os.environ.get("KINEMA_NO_NUMBA"):
            raise ImportError("KINEMA_NO_NUMBA is set")
        os.environ.setdefault("NUMBA_CACHE_DIR", numba_cache_dir())
        import numba

        if not getattr(numba.config, "CACHE_DIR", ""):
            numba.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]
        namespace = dict(vars(maths))  # numba's disk cache keys on the maths module's file
        for name in _LEAVES:  # callees first, so each sees its jitted callees in `namespace`
            original = getattr(maths, name)
            clone = types.FunctionType(original.__code__, namespace, name, original.__defaults__)
            clone.__module__ = original.__module__
            clone.__qualname__ = original.__qualname__
            inline = "always" if name in _INLINED else "never"
            namespace[name] = numba.njit(cache=True, nogil=True, inline=inline)(clone)
        run = namespace["_packed_rows"]
        ints, floats = _buffers(_example_chain())
        targets = np.zeros((1, 1, 14))
        targets[0, 0, 3:12] = np.eye(3).ravel()
        targets[0, 0, 12:] = 1.0
        run(ints, floats, np.zeros((1, 1)), np.zeros(1, dtype=np.int64), targets, np.zeros(1),
            np.array([1e-5, 1e-5, 2.0, STALL_WINDOW, 0.0]), np.zeros(2), np.empty((1, 1)), np.empty((1, 1, 2)),
            np.empty((1, 4)))
        frame = namespace["_frame"]
        buffer, _, _ = frame_floats(_ExampleChain(ints, floats), 1e-5, 1e-5, 2, np.ones((1, 2)), np.full(1, -1.0), np.ones(1),
                                    np.zeros(1))
        frame(ints, buffer, np.zeros(1), np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]), np.empty(1))
        global _numba_leaves, _frame_form
        _numba_leaves = namespace  # the jitted leaves (the posture slide evaluates with `_evaluate`)
        _frame_form = frame
        _numba_form, _numba_reason, _state = run, None, "ready"
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken numba: the NumPy form serves
        _numba_form, _state = None, "failed"
        _numba_reason = f"numba could not be used ({type(exc).__name__}: {exc})"


def _compiled(wait: bool = False):
    """The numba build of `_solve_rows`, or None while it is not ready. The first ask starts
    the build in a thread: on a machine that never compiled the kernel that takes seconds, and
    meanwhile the NumPy form gives the same answers; later processes load numba's cache from
    the Kinema cache folder in a fraction of a second. `wait` blocks until the build is done."""
    global _state, _thread
    if _state == "ready":
        return _numba_form
    if _state == "failed":
        return None
    with _lock:
        if _state == "untried":
            _state = "compiling"
            _thread = threading.Thread(target=_build_numba, name="kinema-kernel-compile", daemon=True)
            _thread.start()
            atexit.register(wait_for_kernel_build)
    if wait and _thread is not None:
        _thread.join()
    return _numba_form if _state == "ready" else None


def kernel_building() -> bool:
    """True while the compiled kernel's build thread is running."""
    return _state == "compiling"


class _ExampleChain:
    """What `frame_floats` reads of a KernelChain, for the one-joint example chain."""

    def __init__(self, ints, floats):
        self.ints, self.floats, self.free = ints, floats, np.zeros(1, dtype=np.int64)


def frame_form():
    """The compiled `_frame` when it is ready (and not forced off by `plain_numpy`), else None."""
    if _state == "ready":
        return None if _force_plain else _frame_form
    return None if _force_plain else (_frame_form if _compiled() is not None else None)


def kernel_status(wait: bool = False) -> tuple[str, str | None]:
    """("numba", None) when the compiled kernel runs here, else ("numpy", why). `wait`: block
    until a build in progress has finished (benchmarks, tests, a warm-up)."""
    return ("numba", None) if _compiled(wait) is not None else ("numpy", _numba_reason)


def kernel_summary() -> str:
    """One line on the compiled kernel for the UI, without starting a build."""
    if _state == "ready" and not _force_plain:
        return "IK kernel: compiled (numba), once per machine and shared by every robot"
    if _state == "compiling":
        return "IK kernel: compiling (the first time on this machine; plain NumPy answers meanwhile)"
    if _state == "failed":
        return f"IK kernel: plain NumPy ({_numba_reason})"
    return "IK kernel: compiled on the first solve, once per machine (not per robot)"


def wait_for_kernel_build() -> None:
    """Block while a numba build that an earlier solve started is still running. Call it before
    importing Blender's module in a process that may have solved already. Loading bpy while the build
    thread imports numba deadlocks (seen with gdb on bpy 5.3): bpy's USD library, initialising under
    the dynamic loader's lock, gives up the GIL and waits to take it back, while the build thread
    holds the GIL and waits on that loader lock to open one of numba's extension modules.
    `kinema_nodes.blender` and `register()` call this before they load bpy.

    It also runs at interpreter exit (registered when a build starts): a daemon thread stopped
    inside LLVM's compile aborts the process ("terminate called ... exception not rethrown",
    exit code -6) after its work succeeded, so a script could not tell success from failure;
    waiting leaves the build cached for every later process. Only the first process on a machine
    (seconds to a minute of compile) can wait there."""
    if _state == "compiling":
        _compiled(wait=True)


_force_plain = False


@contextlib.contextmanager
def plain_numpy():
    """Run every kernel call inside on the plain NumPy form, numba or not (tests, benchmarks)."""
    global _force_plain
    previous, _force_plain = _force_plain, True
    try:
        yield
    finally:
        _force_plain = previous


_NO_POSTURE = np.zeros(0)


def solve_rows(chain: KernelChain, seeds, problem_of, tpos, trot, twt, wanted, tol_p, tol_r, max_iterations,
               stall_window=STALL_WINDOW, stop_at_first=False, compiled: bool | None = None, packed=None, posture=None,
               settled_out=None):
    """Run the kernel (`_solve_rows`); `compiled=None` takes numba when it is ready, False
    forces the plain NumPy form. `packed` (P, T, 14): the targets as the compiled kernel reads
    them, when the caller has them so already. `posture` (2k, `posture_columns`): settle each
    converged row toward it; `settled_out` (S,) bool receives whether it did. Returns (q (S,n),
    errors (S,T,2), swivel (S,), iterations (S,), converged (S,))."""
    count = seeds.shape[0]
    posture = _NO_POSTURE if posture is None else posture
    settled = np.zeros(count, dtype=np.bool_) if settled_out is None else settled_out
    q = np.empty_like(seeds)
    errors = np.empty((count, chain.targets, 2))
    if compiled is None and _force_plain:
        compiled = False
    run = _compiled(wait=bool(compiled)) if compiled is not False else None
    if compiled and run is None:
        raise RuntimeError(_numba_reason or "numba is not available")
    if run is not None:
        if packed is None:
            packed = np.empty((tpos.shape[0], chain.targets, 14))
            packed[..., :3] = tpos
            packed[..., 3:12] = trot.reshape(tpos.shape[0], chain.targets, 9)
            packed[..., 12:] = twt
        stats = np.empty((count, 4))
        settings = np.array([tol_p, tol_r, max_iterations, stall_window, 1.0 if stop_at_first else 0.0], dtype=float)
        run(chain.ints, chain.floats, seeds, problem_of, packed, wanted, settings, posture, q, errors, stats)
        settled[:] = stats[:, 3] > 0.5
        return q, errors, stats[:, 0], stats[:, 1].astype(np.int64), stats[:, 2] > 0.5
    swivel = np.zeros(count)
    iterations = np.zeros(count, dtype=np.int64)
    converged = np.zeros(count, dtype=np.bool_)
    _plain()(chain.plain_data, chain.ints, chain.floats, seeds, problem_of, tpos, trot, twt, wanted, float(tol_p), float(tol_r), int(max_iterations),
             int(stall_window), bool(stop_at_first), posture, q, errors, swivel, iterations, converged, settled)
    return q, errors, swivel, iterations, converged
