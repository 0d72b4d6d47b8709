"""`kinema-nodes batch`: many shots, one `kinema-nodes bake` process each, spread over Dask.

With no --scheduler, a local Dask cluster (one single-threaded worker process per core, or
--workers N) runs on this machine; --scheduler points the same run at a real cluster (Slurm,
PBS, Kubernetes through dask-jobqueue / dask-kubernetes; README "Shot batches"). A worker that
dies mid-shot has its shot run once more elsewhere; a shot whose outputs are newer than its
inputs is skipped unless --force. Dask is imported only here (the `scale` extra).
"""

from __future__ import annotations

import os
import time

from ..core.batch import is_fresh, read_manifest, run_shot, shot_summary
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


def add_cluster_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786); default: a local cluster")
    group.add_argument("--workers", type=int, metavar="N", help="local cluster size (default: one worker per core)")


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
        if args.scheduler:
            try:
                self.client = distributed.Client(args.scheduler, timeout="20s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise KinemaError(f"--scheduler '{args.scheduler}': cannot connect ({exc})") from None
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
                future = client.submit(run_shot, shot.bake_arguments(), args.timeout, key=f"shot-{shot.name}-{id(shot)}",
                                       retries=1, pure=False)
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
