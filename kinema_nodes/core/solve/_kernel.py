"""The compiled Levenberg-Marquardt kernel, built and chosen: the maths (`_kernel_maths`) as
numba compiles it, or as plain Python over NumPy while numba is missing or still compiling.

The first ask starts numba's build in a background thread. On a machine that never compiled
it, that thread has a child process compile it into the disk cache (seconds to a minute, and
the compile never holds this process's GIL), then loads it; later processes load numba's disk
cache from the Kinema cache folder in about half a second. Meanwhile the NumPy form answers,
with the same loop code. This
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
    "sweep_form",
    "wait_for_kernel_build", "workspace_size",
]


# ---- building the two forms --------------------------------------------------------------------

_LEAVES = ("workspace_size", "_workspace", "_forward", "_tip", "_rotation_error", "_swivel_angle", "_wrap", "_add_column", "_evaluate", "_normal",
           "_cholesky", "_damped_solve", "_min_norm", "_converged", "_forward_one", "_evaluate_one", "_damped_solve_one",
           "_descend_one", "_descend", "_family_error", "_toward",
           "_return_to_family", "_settle", "_settle_by_inputs", "_solve_rows", "_unpack", "_packed_rows", "_frame", "_sweep")
#: Leaves numba splices into their callers: a call of a compiled function takes a reference
#: (an atomic count increment and decrement) on every array it is handed, and these run per
#: joint or per evaluation, where the counting was a fifth of a tracking frame.
_INLINED = ("_forward", "_tip", "_rotation_error", "_add_column", "_forward_one")
_lock = threading.Lock()
_numpy_form: types.FunctionType | None = None
_numba_form = None
_frame_form = None  # the numba build of `_frame`
_sweep_form = None  # the numba build of `_sweep` (many frames in one call)
_numba_reason: str | None = "the compiled kernel is still compiling (the NumPy form serves meanwhile)"
_state = "untried"  # -> "compiling" -> "ready" | "failed"
_numba_leaves: dict | None = None
_thread: threading.Thread | None = None
#: "child" while the build thread only waits on the child process; "exiting" once interpreter
#: exit has chosen not to wait for it (the thread then stops before it loads anything).
_phase = "here"


def _plain():
    """`_solve_rows` as plain Python over the NumPy leaves (same loop code, other globals)."""
    global _numpy_form
    if _numpy_form is None:
        namespace = dict(vars(maths))
        namespace.update(_evaluate=maths._evaluate_np, _normal=maths._normal_np, _damped_solve=maths._damped_solve_np,
                         _min_norm=maths._min_norm_np, SINGLE_CHAIN_FORM=False)
        for name in ("_converged", "_descend", "_return_to_family", "_settle", "_settle_by_inputs", "_solve_rows"):
            original = getattr(maths, name)
            namespace[name] = types.FunctionType(original.__code__, namespace, name, original.__defaults__)
        _numpy_form = namespace["_solve_rows"]
    return _numpy_form


def numba_cache_dir() -> str:
    from ..cache_folder import signed_folder

    return str(signed_folder("numba"))


def _example_chain() -> tuple:
    """A one-joint chain with the argument types of every real call, to compile (or load
    from numba's disk cache) the one signature the kernel is ever called with."""
    i1, f = np.zeros(1, dtype=np.int64), np.zeros(1)
    eye = np.eye(3)[None]
    return (np.array([-1], dtype=np.int64), i1.copy(), np.array([[0.0, 0.0, 1.0]]), eye.copy(), np.zeros((1, 3)), i1.copy(),
            np.ones(1), f.copy(), i1.copy(), i1.copy(), eye.copy(), np.zeros((1, 3)), np.ones((1, 1), dtype=np.bool_),
            np.zeros(0, dtype=np.int64), np.zeros((0, 3, 3)), np.zeros((0, 3)), np.zeros((0, 1), dtype=np.bool_), i1.copy(),
            np.full(1, -1.0), np.ones(1))


#: How the kernel came to be ready in this process: "cache" (loaded, or compiled, here) or
#: "child" (compiled by a separate process first, then loaded here from the disk cache).
build_route: str | None = None
#: The most one first compile may take in its own process before this one compiles it instead.
CHILD_BUILD_SECONDS = 600.0


def _build_numba() -> None:
    global build_route
    from ..collector import without_collector_pauses

    route = "child" if not _ready_mark().is_file() and _compile_in_child() else "cache"
    global _phase
    with _lock:
        if _phase == "exiting":  # the interpreter is ending and left the compile to the child
            return
        _phase = "here"
    with without_collector_pauses():  # numba's and LLVM's imports: no full collection lands on a drag
        _load_numba()
        if _state == "ready":
            build_route = route
            _warm_collisions()
            _mark_ready()


def _warm_collisions() -> None:
    """The collision kernel too, here, so Avoid Collisions' first frame does not compile it."""
    from ..collision.warming import warm_kernel

    with contextlib.suppress(Exception):  # a warm-up only: the first real call compiles it as before
        warm_kernel()


def _ready_mark():
    """A file in the signed numba folder saying these kernels' sources (the solver's and the
    collision kernel's) were compiled there by this Python and numba. Absent (a new machine, an upgrade), the first compile runs in a child
    process. Present, this process loads the cache itself; a stale or planted mark costs only
    that (an in-process compile, as before the child existed)."""
    import hashlib
    import sys
    from importlib import metadata
    from pathlib import Path

    try:
        version = metadata.version("numba")  # without importing it: that is the compile's work
    except metadata.PackageNotFoundError:
        version = "none"
    from ..collision.warming import KERNEL_SOURCE

    stamp = f"{sys.version}|{version}"
    for source in (Path(maths.__file__), KERNEL_SOURCE):
        stamp += f"|{source.resolve()}|{source.stat().st_size}|{source.stat().st_mtime_ns}"
    return Path(numba_cache_dir()) / f"kernel-{hashlib.sha256(stamp.encode()).hexdigest()[:20]}.ready"


def _mark_ready() -> None:
    with contextlib.suppress(OSError):
        mark = _ready_mark()
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()


#: Run by `_compile_in_child` in a fresh interpreter, the package imported under this process's
#: dotted name (`core.child_process`): numba's cache names the kernels' module, and this process
#: must find it by that name.
_CHILD = """
import signal
if hasattr(signal, "alarm"):  # its own bound, kept when the process that started it has gone
    signal.alarm(max(1, int(float(sys.argv[3]))))
kernel = importlib.import_module(name + ".core.solve._kernel")
kernel._load_numba()
if kernel._state == "ready":
    kernel._warm_collisions()
    kernel._mark_ready()
sys.exit(0 if kernel._state == "ready" else 1)
"""


def _compile_in_child() -> bool:
    """Compile the kernel into the disk cache in a separate Python process; True when it did.

    numba's compile holds this process's GIL for long stretches (a drag answered on the NumPy
    form meanwhile took up to 133 ms instead of 39, measured on arm6), so the first compile on
    a machine runs where it cannot stall Blender: a child interpreter with this one's import
    path and environment (the same cache folder and key), bounded by CHILD_BUILD_SECONDS. This
    process then only loads the cache. Any failure (no interpreter to run, a timeout, an error
    in the child) returns False, and the compile runs here as it always could.

    The child outlives this process if it must: an interpreter that exits meanwhile does not
    wait (`_wait_at_exit`), and the child finishes the cache and its ready mark alone, within
    its own bound (SIGALRM where there is one), its notes going to an unnamed file, not to a
    pipe nobody reads."""
    import subprocess
    import tempfile

    from ..cache_trust import install_key
    from ..child_process import child_command, child_environment

    command = child_command(_CHILD)
    if os.environ.get("KINEMA_NO_NUMBA") or command is None:
        return False
    if install_key() is None:  # no disk cache to hand the build over through
        return False
    global _phase
    try:
        notes = tempfile.TemporaryFile()
        child = subprocess.Popen([*command, str(CHILD_BUILD_SECONDS)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=notes, env=child_environment())
    except OSError:
        return False
    with _lock:
        if _phase != "exiting":
            _phase = "child"
    try:
        child.wait(timeout=CHILD_BUILD_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        return False
    from ..errors import say

    with notes:
        notes.seek(0)
        said = notes.read()
    for line in said.decode(errors="replace").splitlines():
        if line.startswith("kinema-nodes:"):  # the cache's own notes (a foreign entry rebuilt), said here
            say(line)
    return child.returncode == 0


def _load_numba() -> None:
    global _numba_form, _numba_reason, _state
    try:
        if os.environ.get("KINEMA_NO_NUMBA"):
            raise ImportError("KINEMA_NO_NUMBA is set")
        import numba  # noqa: F401 - an ImportError here means the NumPy form serves
        from ..numba_cache import njit as signed_njit  # signed disk cache: a planted pickle is never loaded

        namespace = dict(vars(maths))  # numba's disk cache keys on the maths module's file
        for name in _LEAVES:  # callees first, so each sees its jitted callees in `namespace`
            original = getattr(maths, name)
            clone = types.FunctionType(original.__code__, namespace, name, original.__defaults__)
            clone.__module__ = original.__module__
            clone.__qualname__ = original.__qualname__
            inline = "always" if name in _INLINED else "never"
            namespace[name] = signed_njit(clone, nogil=True, inline=inline)
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
        sweep = namespace["_sweep"]
        sweep(ints, buffer, np.zeros(1), np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0, 0.0]]), 4, 0, np.empty((1, 1)))
        global _numba_leaves, _frame_form, _sweep_form
        _numba_leaves = namespace  # the jitted leaves (the posture slide evaluates with `_evaluate`)
        _frame_form = frame
        _sweep_form = sweep
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
            atexit.register(_wait_at_exit)
    if wait and _thread is not None:
        _thread.join()
    return _numba_form if _state == "ready" else None


def kernel_building() -> bool:
    """True while the compiled kernel's build thread is running (its last part, the collision
    kernel's warm-up, runs after the solve kernel is ready and still counts)."""
    return _state == "compiling" or (_thread is not None and _thread.is_alive())


class _ExampleChain:
    """What `frame_floats` reads of a KernelChain, for the one-joint example chain."""

    def __init__(self, ints, floats):
        self.ints, self.floats, self.free = ints, floats, np.zeros(1, dtype=np.int64)


def frame_form():
    """The compiled `_frame` when it is ready (and not forced off by `plain_numpy`), else None."""
    if _state == "ready":
        return None if _force_plain else _frame_form
    return None if _force_plain else (_frame_form if _compiled() is not None else None)


def sweep_form():
    """The compiled `_sweep` when it is ready (and not forced off by `plain_numpy`), else None:
    it has no plain form, since its point is to stay out of the interpreter between frames."""
    return None if frame_form() is None else _sweep_form


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

    It also runs at interpreter exit (registered when a build starts, through `_wait_at_exit`):
    a daemon thread stopped inside LLVM's compile or numba's load aborts the process
    ("terminate called ... exception not rethrown", exit code -6) after its work succeeded, so
    a script could not tell success from failure. At exit it waits only for work in this
    process (the load, or a compile here when the child could not run); a compile in the child
    process goes on alone."""
    thread = _thread
    if thread is not None and thread.is_alive():
        thread.join()


def _wait_at_exit() -> None:
    """`wait_for_kernel_build` at interpreter exit, except while the build is only a child
    process compiling: that needs nothing from this process, so a script ends when it is done
    (the child finishes the cache alone), and the thread, told so, loads nothing afterwards."""
    global _phase
    with _lock:
        if _phase == "child":
            _phase = "exiting"
            return
    wait_for_kernel_build()


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


def _one_signature(array: np.ndarray) -> np.ndarray:
    """`array` as the compiled kernel's one signature takes it: C-contiguous and writable. numba
    types a read-only or strided array as another signature and compiles the whole kernel again,
    in the caller's thread: 43 s on this machine, the first Find Solutions on a fresh machine
    (a one-row `np.broadcast_to` view is C-contiguous but read-only)."""
    return array if array.flags.c_contiguous and array.flags.writeable else np.array(array, order="C")


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
        seeds, problem_of, packed = _one_signature(seeds), _one_signature(problem_of), _one_signature(packed)
        wanted, posture = _one_signature(wanted), _one_signature(posture)
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
