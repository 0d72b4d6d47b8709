"""`kinema-nodes batch`: many shots, one `kinema-nodes bake` process each, spread over Dask.

Each shot is its own process, forked by default from one warm interpreter per worker
(`serve_shots`): a 10-frame shot spends ~90 % of a fresh process in imports (Blender's module,
trimesh and SciPy under the URDF reader) and a fraction of a second importing the robot, baking
and saving, so forking from a copy that has done only the imports removes most of the cost,
while each shot still starts from an untouched Blender (nothing is loaded, built or solved
before the fork; the child reads the empty file again as a fresh bake does). `--fresh-processes`
starts a brand-new Python per shot instead.

With no --scheduler, a local Dask cluster (one single-threaded worker process per core, or
--workers N) runs on this machine; --scheduler points the same run at a real cluster (Slurm,
PBS, Kubernetes through dask-jobqueue / dask-kubernetes; README "Shot batches"). A worker that
dies mid-shot has its shot run once more elsewhere; a shot whose outputs are newer than its
inputs is skipped unless --force. Dask is imported only here (the `scale` extra).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time

from ..core.shot.batch import is_fresh, read_manifest, run_shot, shot_summary
from ..core.errors import KinemaError
from .common import emit

#: Times a shot may be on a worker that dies before it is given up (one retry).
ALLOWED_WORKER_DEATHS = 1


def need_dask():
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError:
        raise KinemaError("batch and reach need Dask: pip install 'dask[distributed]' (or kinema-nodes[scale])") from None
    return distributed


#: Seconds a --scheduler has to answer as a Dask scheduler before the command gives up (exit 2).
SCHEDULER_TIMEOUT_S = 20.0


def add_cluster_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786); default: a local cluster")
    group.add_argument("--workers", type=int, metavar="N", help="local cluster size (default: one worker per core)")
    parser.add_argument("--scheduler-timeout", type=float, default=SCHEDULER_TIMEOUT_S, metavar="S",
                        help=f"give up when --scheduler has not answered as a Dask scheduler within S seconds "
                             f"(default {SCHEDULER_TIMEOUT_S:g}; exit 2)")


def ask_scheduler(address: str, timeout: float) -> dict:
    """Ask `address` who it is (Dask's `identity`), the whole exchange bounded by `timeout`:
    connecting, the handshake and the answer. Returns the scheduler's identity, or raises one
    line.

    Dask's own `Client(timeout=)` bounds the connection only: a socket that accepts and never
    speaks, or an HTTP server (whose reply Dask reads as a frame length of exabytes), kept the
    command waiting forever or ended it in a MemoryError. So the address is asked first, in an
    event loop of its own under `asyncio.wait_for`, and only a real scheduler gets a Client."""
    import asyncio

    from distributed.comm import connect

    where = f"--scheduler '{address}'"

    async def identity():
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        answer = asyncio.run(asyncio.wait_for(identity(), timeout))
    except TimeoutError:  # asyncio.TimeoutError is TimeoutError from Python 3.11
        raise KinemaError(f"{where}: no Dask scheduler answered within {timeout:g} s (--scheduler-timeout)") from None
    except ValueError as exc:  # an unknown scheme, a malformed address
        raise KinemaError(f"{where}: not a Dask address ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise KinemaError(f"{where}: cannot connect ({message})") from None
    except Exception as exc:  # noqa: BLE001 - whatever a stranger's reply does to Dask's reader (MemoryError included)
        raise KinemaError(f"{where}: answered, but not as a Dask scheduler ({type(exc).__name__})") from None
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        kind = answer.get("type") if isinstance(answer, dict) else type(answer).__name__
        raise KinemaError(f"{where}: answered as {kind!s:.40}, not as a Dask scheduler")
    return answer


class open_client:
    """A Dask client on --scheduler, or on a local cluster of single-threaded worker processes."""

    def __init__(self, args):
        distributed = need_dask()
        import dask

        self.cluster = None
        workers = getattr(args, "workers", None)
        if workers is not None and workers < 1:
            raise KinemaError(f"--workers must be at least 1, got {workers}")
        dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_WORKER_DEATHS,
                         "distributed.logging.distributed": "error"})
        timeout = getattr(args, "scheduler_timeout", SCHEDULER_TIMEOUT_S)
        if not (math.isfinite(timeout) and 0 < timeout <= 3600):
            raise KinemaError(f"--scheduler-timeout must be a number of seconds in 0 .. 3600, got {timeout}")
        if args.scheduler:
            ask_scheduler(args.scheduler, timeout)
            try:
                self.client = distributed.Client(args.scheduler, timeout=f"{timeout}s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise KinemaError(f"--scheduler '{args.scheduler}': cannot connect ({str(exc).splitlines()[0] if str(exc) else exc!r})") from None
        else:
            self.cluster = distributed.LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                                    processes=True, dashboard_address=None, silence_logs=50)
            self.client = distributed.Client(self.cluster)

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def add_arguments_batch(parser):
    """Bake many shots from a JSON manifest, one process per shot, on a Dask cluster (local by default)."""
    parser.add_argument("manifest", metavar="MANIFEST.json",
                        help="a list of shots (robot, targets, out; optionally link, joints_out, report, preset, solver, "
                             "start, fps, speed_limit, limits), paths relative to the manifest")
    add_cluster_arguments(parser)
    parser.add_argument("--force", action="store_true", help="bake every shot, even those whose outputs are newer than their inputs")
    parser.add_argument("--fresh-processes", action="store_true",
                        help="start every shot as a brand-new Python process (slower); by default each worker forks its "
                             "shots from one warm interpreter that has imported Blender and nothing else")
    parser.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="give up on one shot after S seconds (default 3600)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_batch(args) -> int:
    started = time.perf_counter()
    shots = read_manifest(args.manifest)
    need_dask()
    todo = [shot for shot in shots if args.force or not is_fresh(shot)]
    summaries = {shot.name: shot_summary(shot, None, skipped=True) for shot in shots if shot not in todo}
    if todo:
        from .bake import TerminalProgress
        from distributed import as_completed

        progress = TerminalProgress(f"{len(todo)} shots")
        with open_client(args) as client:
            futures = {}
            for shot in todo:
                future = client.submit(run_shot, shot.bake_arguments(), args.timeout, not args.fresh_processes, shot.name,
                                       key=f"shot-{shot.name}-{id(shot)}", retries=1, pure=False)
                futures[future] = shot
            done = 0
            for future in as_completed(futures):
                shot = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # KilledWorker after the retry, or the task itself failed
                    result = {"rc": 1, "payload": None, "error": f"{type(exc).__name__}: {exc}".splitlines()[0], "pid": None}
                summaries[shot.name] = shot_summary(shot, result)
                done += 1
                progress(done, len(todo))
    ordered = [summaries[shot.name] for shot in shots]
    counts = {status: sum(1 for s in ordered if s["status"] == status) for status in ("ok", "flagged", "not_converged", "failed", "skipped")}
    payload = {"shots": ordered, "done": counts["ok"] + counts["flagged"] + counts["not_converged"], **counts,
               "seconds": round(time.perf_counter() - started, 3),
               "status": "ok" if counts["flagged"] + counts["not_converged"] + counts["failed"] == 0 else "flagged"}
    lines = []
    for s in ordered:
        if s["status"] == "skipped":
            lines.append(f"{s['name']}: skipped (outputs newer than inputs; --force bakes it)")
        elif s["status"] == "failed":
            lines.append(f"{s['name']}: FAILED: {s['error']}")
        else:
            lines.append(f"{s['name']}: {s['status']}, {s['converged']}/{s['frames']} converged, {s['flagged']} flagged")
    lines.append(f"{payload['done']} done ({counts['ok']} ok, {counts['flagged'] + counts['not_converged']} flagged), "
                 f"{counts['failed']} failed, {counts['skipped']} skipped in {payload['seconds']:.1f} s")
    emit(args, payload, lines)
    return 0 if payload["status"] == "ok" else 3


# ---- the warm shot server -------------------------------------------------------------------------

def _warm_up() -> None:
    """What every shot would import first: Blender's module with the add-on registered and an
    empty file, and the robot import's libraries. Nothing is loaded, built or solved, so every
    shot forked from here starts from the state a fresh `kinema-nodes bake` has after its
    imports. (The solver kernel is not loaded here: a fresh bake loads it at its first solve,
    and a shot must do exactly what a single bake does.)"""
    from .headless import headless_blender

    headless_blender()
    import yourdfpy  # noqa: F401 - trimesh and scipy come with it: most of a small shot's start-up

    from . import bake, export  # noqa: F401
    from ..blender import baking, build, edit, rig  # noqa: F401


def _shot_child(arguments: list[str], out_fd: int, err_fd: int) -> None:  # pragma: no cover - runs in the forked child
    from ..core.shot.batch import die_with_parent
    from .main import main

    die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's clean-up handler is not the shot's
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    code = 1
    try:
        code = main(arguments)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve_shots() -> None:  # pragma: no cover - a subprocess of a batch worker; tested through `kinema-nodes batch`
    """A batch worker's warm interpreter: warm up once, then for each request line on stdin
    ({"arguments": [...], "timeout": S, "label": NAME}) fork a child that runs `kinema-nodes
    ARGUMENTS` and answer one line ({"rc", "stdout", "stderr"}) on the original stdout. Each
    child is a fresh copy of the warm state (fork), so no shot sees another's scene."""
    import contextlib
    import secrets
    import tempfile

    from ..core.shot.batch import die_with_parent

    die_with_parent(signal.SIGTERM)  # not SIGKILL: the server removes its own files first
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # anything printed outside a child must not corrupt the answers
    try:
        _warm_up()
    except Exception as exc:  # noqa: BLE001 - the worker falls back to fresh processes and says nothing more
        answers.write(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        answers.flush()
        return
    answers.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    answers.flush()
    # A shot's stdout and stderr go to a pair of files in a folder of this server's own, removed
    # by their exact names once read, and the folder with them when the server ends. Nothing is
    # ever swept up by a name pattern: a pattern in the shared temporary folder can match a
    # user's file. (A server killed mid-shot leaves its folder; the system's temporary-file
    # cleaning takes it.)
    # The name is fixed before the folder is made, inside the `try`, so a SIGTERM at any bytecode
    # (the test sends one the moment "ready" is read) finds the name the `finally` removes.
    folder = os.path.join(tempfile.gettempdir(), f"kinema-shots-{os.getpid()}-{secrets.token_hex(6)}")
    current: list[str] = []  # the pair of the shot running now
    try:
        os.mkdir(folder, 0o700)
        _answer_requests(answers, folder, current)
    finally:
        for path in current:
            with contextlib.suppress(OSError):
                os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # empty by now; a folder that is not empty is left as it is


def _answer_requests(answers, folder: str, current: list[str]) -> None:  # pragma: no cover - runs in `serve_shots`
    for count, line in enumerate(sys.stdin):
        request = json.loads(line)
        label = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(request.get("label", "shot")))[:60]
        paths = [os.path.join(folder, f"kinema-shot-{label}-{count}.{kind}") for kind in ("out", "err")]
        current[:] = paths
        fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600) for p in paths]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _shot_child(request["arguments"], *fds)
        timeout = request.get("timeout")
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        rc = None
        while rc is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
            elif deadline is not None and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                rc = "timeout"
            else:
                time.sleep(0.005)
        texts = []
        for fd, path in zip(fds, paths):
            os.lseek(fd, 0, os.SEEK_SET)
            with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read())
            os.unlink(path)
        current.clear()
        answers.write(json.dumps({"rc": rc, "stdout": texts[0], "stderr": texts[1]}) + "\n")
        answers.flush()
