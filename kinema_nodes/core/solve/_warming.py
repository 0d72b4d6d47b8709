"""PyRoki programs compiled in the background, so a live session never waits for JAX.

A PyRoki program is compiled once per (robot, target links): 6-15 s on a small machine the
first time, ~1-2 s from the export file and JAX cache a later session left. The live path
(`prepare(..., live=True)`) must not wait for that: it asks `pyroki_state`, which starts the
build in a worker thread and answers at once; until the program is ready the compiled NumPy
kernel solves, and the result says so (`fallback_reason`). A bake or a CLI solve asks for the
program through `solver_for`, which waits: their answers come from the backend asked for.

One build per key runs, whoever asked first: a waiting caller joins a build in flight (or
takes over one still queued) instead of starting a second. The worker thread runs its queue one
build at a time (two JAX compiles at once on a small machine only slow each other); a caller
that takes over a queued build compiles it on its own thread, beside the worker's. A build that
failed is remembered: it is said once on stderr, and every later ask gets the same exception
at once, so the NumPy fallback keeps answering without paying a failed trace every frame.

Listeners (`add_listener`) hear of each finished build, from the worker thread; the Blender
side uses this to re-run the live trees on its main thread. Nothing here imports bpy.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..collector import without_collector_pauses
from ._compiled_store import keep, loaded_solver_keys, ready
from ._pyroki_child import build_in_child
from ._pyroki_program import CompiledSolver, Layout, configure_jax, export_path, jax_available

if TYPE_CHECKING:
    from ..model.robot import RobotModel

#: Seconds a build is said to take before this machine has timed one (a fresh compile, and a
#: load from the export file and JAX cache).
GUESS_FRESH_S = 10.0
GUESS_FROM_DISK_S = 2.0

_guard = threading.Lock()
_builds: dict[tuple, "_Build"] = {}  # in flight (queued or running) or failed; ready ones live in `_compiled_store`
_queue: list["_Build"] = []
_worker: threading.Thread | None = None
_listeners: list[Callable[[tuple, bool], None]] = []
_timings: dict[str, float] = {}
_timings_loaded = False
_exiting = False
#: The interpreter's GIL switch interval while a build runs in the worker. Tracing PyRoki is
#: Python that holds the GIL; each time Blender's main thread gives the GIL up (an import, a
#: file read, a C call) it would wait the default 5 ms to get it back, and a Target Bone switch
#: gives it up dozens of times. 0.5 ms keeps a frame at its usual cost; restored after.
BUILD_SWITCH_INTERVAL_S = 0.0005
_SWITCH_INTERVAL_S = sys.getswitchinterval()  # the process's own, read once


class _Build:
    def __init__(self, robot, links: tuple[str, ...]):
        self.robot = robot
        self.links = links
        self.key = (robot.fingerprint, links)
        self.state = "queued"  # -> "running" -> done (removed from _builds) or "failed"
        self.error: BaseException | None = None
        self.solver = None  # the program once built: its waiters take it even if the LRU dropped it since
        self.done = threading.Event()
        self.from_disk = _export_exists(robot, links)


def _export_exists(robot, links) -> bool:
    try:
        return export_path(Layout(robot, links)).is_file()
    except Exception:  # noqa: BLE001 - only chooses the wording of a message
        return False


def _timings_file():
    from ._cache import cache_root

    return cache_root() / "pyroki_build_seconds.json"


def _load_timings() -> None:
    global _timings_loaded
    if _timings_loaded:
        return
    _timings_loaded = True
    try:
        _timings.update({k: float(v) for k, v in json.loads(_timings_file().read_text()).items()})
    except (OSError, ValueError, TypeError, AttributeError):
        pass


def _record(kind: str, seconds: float) -> None:
    from ..files import OutputError, write_bytes

    _timings[kind] = seconds
    try:
        _timings_file().parent.mkdir(parents=True, exist_ok=True)
        write_bytes(_timings_file(), json.dumps(_timings).encode(), "solver build timings")
    except (OSError, OutputError):
        pass  # only the estimate in a message is lost


def estimate_s(from_disk: bool) -> float:
    """How long a build is expected to take: the last one of its kind on this machine."""
    _load_timings()
    kind = "from_disk" if from_disk else "fresh"
    return _timings.get(kind, GUESS_FROM_DISK_S if from_disk else GUESS_FRESH_S)


def about(seconds: float) -> str:
    """An estimate in words: "about 12 s", or "under a second" (never "about 0 s")."""
    return f"about {seconds:.0f} s" if seconds >= 0.5 else "under a second"


def compiling_reason(build: _Build) -> str:
    """What the live path says while the NumPy kernel stands in."""
    others = any(key[0] == build.key[0] and key != build.key for key in loaded_solver_keys())
    what = f"'{', '.join(build.links)}'" if others else "this robot"
    took = about(estimate_s(build.from_disk))
    doing = (f"loading its compiled program for {what} ({took})" if build.from_disk
             else f"compiling for {what} (first time, {took})")
    return f"PyRoki is {doing}; the NumPy kernel answers meanwhile"


def failure_reason(error: BaseException) -> str:
    """The words `solve` uses for a PyRoki that cannot run (the same for a remembered failure):
    one line, however many lines the error has (JAX's and XLA's often have several)."""
    said = " ".join(str(error).split())
    said = said if len(said) <= 300 else said[:297] + "..."
    if isinstance(error, ImportError):
        return f"PyRoki could not be imported ({type(error).__name__}: {said})"
    return f"PyRoki failed ({type(error).__name__}: {said})"


def add_listener(callback: Callable[[tuple, bool], None]) -> None:
    """`callback((fingerprint, links), ok)` after each build, from the worker thread."""
    if callback not in _listeners:
        _listeners.append(callback)


def remove_listener(callback) -> None:
    if callback in _listeners:
        _listeners.remove(callback)


def pyroki_state(robot: RobotModel, links: tuple[str, ...]) -> tuple[str, object]:
    """Never waits. ("ready", solver), ("compiling", build: its `compiling_reason`), or
    ("failed", exception). Starts the build in the worker thread when none is in flight."""
    key = (robot.fingerprint, links)
    solver = ready(key)
    if solver is not None:
        return "ready", solver
    global _worker
    with _guard:
        build = _builds.get(key)
        if build is None:
            solver = ready(key)  # finished between the two looks
            if solver is not None:
                return "ready", solver
            build = _builds[key] = _Build(robot, links)
            _queue.append(build)
            if _worker is None or not _worker.is_alive():
                # Not a daemon: a process that exits mid-compile waits for that one build (only
                # the queue is dropped, `_drop_queue`); a daemon thread killed inside XLA aborts it.
                _worker = threading.Thread(target=_work, name="kinema-pyroki-compile")
                _worker.start()
        if build.state == "failed":
            return "failed", build.error
        return "compiling", build


def solver_for(robot: RobotModel, links: tuple[str, ...]) -> CompiledSolver:
    """The compiled program for (robot, links), waiting for it: built here, or the build in
    flight joined. Raises the build's exception (the same one each time, once failed)."""
    key = (robot.fingerprint, links)
    solver = ready(key)
    if solver is not None:
        return solver
    with _guard:
        build = _builds.get(key)
        claim = False
        if build is None:
            solver = ready(key)
            if solver is not None:
                return solver
            build = _builds[key] = _Build(robot, links)
            claim = True
        elif build.state == "queued":  # nobody is on it yet: build it here rather than wait in line
            _queue.remove(build)
            claim = True
        if claim:
            build.state = "running"
    if claim:
        _run(build)
    else:
        build.done.wait()
    if build.state == "failed":
        raise build.error.with_traceback(None)
    return build.solver


def _work() -> None:
    global _worker
    # restored to the interval the process had before any build: reading it here could read the
    # one a worker that is just finishing set, and keep that for good
    sys.setswitchinterval(min(_SWITCH_INTERVAL_S, BUILD_SWITCH_INTERVAL_S))
    try:
        while True:
            with _guard:
                if not _queue:
                    _worker = None
                    return
                build = _queue.pop(0)
                build.state = "running"
            _run(build, in_child=True)
    finally:
        sys.setswitchinterval(_SWITCH_INTERVAL_S)


def _run(build: _Build, in_child: bool = False) -> None:
    """Build the program. `in_child` (the background worker, while drags may be answered): a
    first build runs in a child process (`_pyroki_child`) and this one loads what it left; a
    caller that waits for the program builds it here, which is quicker."""
    from ._cache import note

    t0 = time.perf_counter()
    ok = False
    try:
        child_built = False
        if in_child and not build.from_disk and not _exiting:
            why_not = build_in_child(build.robot, build.links, meanwhile=_import_jax)
            child_built = why_not is None
            if not child_built:
                note(f"PyRoki's first build for '{build.robot.name}' could not run in a child process ({why_not}); "
                     "building it here, where drags may stall meanwhile")
        with without_collector_pauses():
            solver = CompiledSolver(build.robot, build.links)
            if child_built and solver.from_disk:
                solver.build_route = "child"
            solver.compile()
            # A program loaded from its export file never imported jaxlie; `solve` asks for it
            # (`jax_available`) on its first PyRoki frame, and that import (~0.25 s) would land on a drag.
            jax_available()
        keep(build.key, solver)
        build.solver = solver
        _record("from_disk" if solver.build_route == "disk" else "fresh", time.perf_counter() - t0)
        with _guard:
            _builds.pop(build.key, None)
            build.state = "ready"
        ok = True
    except Exception as exc:  # noqa: BLE001 - any failure is remembered and answered by NumPy
        with _guard:
            build.error = exc
            build.state = "failed"
        if not _exiting:  # a build cut short by the process exiting is no news
            note(f"{failure_reason(exc)} for '{build.robot.name}' -> {', '.join(build.links)}; "
                 "the NumPy solver answers instead")
    except BaseException:  # Ctrl-C in a caller that was building: not a failure to remember
        with _guard:
            _builds.pop(build.key, None)
            build.error = RuntimeError("the build was interrupted")
            build.state = "failed"
        raise
    finally:
        build.done.set()
    for listener in list(_listeners):
        try:
            listener(build.key, ok)
        except Exception:  # noqa: BLE001, S110 - a listener's failure must not stop the worker
            pass


def _import_jax() -> None:
    """JAX's import, run while a child builds rather than after it. Only the import goes without
    the collector: what the session makes while the child runs is not frozen with it."""
    with without_collector_pauses():
        configure_jax()


def _drop_queue() -> None:
    """At exit: builds not started yet are dropped, so the process waits for one build at most."""
    global _exiting
    _exiting = True
    with _guard:
        for build in _queue:
            _builds.pop(build.key, None)
            build.error = RuntimeError("the process exited before this build started")
            build.state = "failed"
            build.done.set()
        _queue.clear()


try:  # runs before the interpreter joins non-daemon threads (what concurrent.futures uses)
    threading._register_atexit(_drop_queue)
except AttributeError:  # noqa: S110 - an interpreter without it waits for the whole queue
    pass


def forget_failures() -> None:
    """Try failed builds again on the next ask (the compiled-solver cache was cleared)."""
    with _guard:
        for key in [k for k, b in _builds.items() if b.state == "failed"]:
            del _builds[key]


def wait_for_builds(timeout: float | None = None) -> bool:
    """Wait for every build in flight (tests, and a process about to exit). True when none is left."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _guard:
            pending = [b for b in _builds.values() if b.state in ("queued", "running")]
        if not pending:
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        pending[0].done.wait(left)


def building() -> bool:
    """True while a PyRoki program is queued or being built in the background."""
    with _guard:
        return any(build.state in ("queued", "running") for build in _builds.values())
