"""Startup cost of the signed compiled-kernel cache (issue #32, item 3): how long a new process
takes to have the compiled IK kernel ready from a warm numba cache, with this tree's signed cache
against another tree (e.g. one from before the change), and the HMAC over every cache file.

    .venv/bin/python bench/bench_signed_cache.py [OTHER_TREE] [--runs 5]

Each tree gets its own empty cache folder; the first process compiles (not timed as a load),
then `--runs` processes load. Numbers go in bench/RESULTS.md by hand ("signed caches").
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOAD = ("import time, json\nt = time.perf_counter()\nfrom kinema_nodes.core.solve import _kernel\n"
        "status = _kernel.kernel_status(wait=True)[0]\nprint(json.dumps([status, time.perf_counter() - t]))")


def loads(tree: Path, runs: int) -> tuple[float, list[float], Path]:
    cache = Path(tempfile.mkdtemp(prefix="kinema-bench-signed-"))
    env = dict(os.environ, KINEMA_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(cache / "numba"), PYTHONPATH=str(tree))
    times = []
    for _ in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, env=env, check=True)
        status, seconds = json.loads(out.stdout.splitlines()[-1])
        assert status == "numba", out.stderr
        times.append(seconds)
    return times[0], times[1:], cache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", nargs="?", help="another source tree to compare with")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    for name, tree in [("this tree (signed)", here)] + ([("other tree", Path(args.other))] if args.other else []):
        compile_s, times, cache = loads(tree, args.runs)
        print(f"{name}: compile {compile_s:.1f} s; warm loads median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} runs)")
        files = [p for p in (cache / "numba-signed").rglob("*") if p.is_file()]
        data = [p.read_bytes() for p in files]
        key = os.urandom(32)
        started = time.perf_counter()
        for blob in data:
            hmac.new(key, blob, hashlib.sha256).digest()
        print(f"  {len(files)} numba cache files, {sum(map(len, data)) / 1e6:.1f} MB; HMAC over all of them "
              f"{(time.perf_counter() - started) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
