"""The kernel's first compile on a machine runs in a child process (issue #29, item 1).

numba's compile holds the GIL for long stretches; in Blender's process a drag answered on the
NumPy form meanwhile stalled behind it (up to 133 ms instead of 39 on arm6). So the first
compile runs in a separate interpreter that fills the signed disk cache, and this process only
loads it; the collision kernel is warmed the same way, so turning on Avoid Collisions does not
compile it on Blender's main thread. Checked through numba's own counters: the loading process
has a cache hit and no miss on each entry point, i.e. it compiled nothing itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FIRST_ASK = '''
import json, sys
from kinema_nodes.core.solve import _kernel
if len(sys.argv) > 1:
    _kernel.CHILD_BUILD_SECONDS = float(sys.argv[1])
status = _kernel.kernel_status(wait=True)
from kinema_nodes.core.collision import _kernel as collisions
loaded = [_kernel._numba_leaves["_packed_rows"], collisions._compiled, collisions._compiled_refine]
print(json.dumps({"status": status[0], "route": _kernel.build_route,
                  "hits": [sum(f.stats.cache_hits.values()) for f in loaded],
                  "misses": [sum(f.stats.cache_misses.values()) for f in loaded]}))
'''


def _ask(folder: Path, *argv: str) -> dict:
    env = dict(os.environ, KINEMA_CACHE_DIR=str(folder), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)
    result = subprocess.run([sys.executable, "-c", FIRST_ASK, *argv], capture_output=True, text=True, timeout=900,
                            env=env, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kinema-nodes" not in result.stderr, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_the_first_compile_runs_in_a_child_and_this_process_only_loads(tmp_path):
    pytest.importorskip("numba")
    folder = tmp_path / "cache"
    first = _ask(folder)
    # the solve kernel and the collision kernel's two functions, each loaded from the child's cache
    assert first == {"status": "numba", "route": "child", "hits": [1, 1, 1], "misses": [0, 0, 0]}
    assert len(list((folder / "numba-signed").glob("kernel-*.ready"))) == 1
    again = _ask(folder)  # the mark is there: no child, the cache loads here
    assert again == {"status": "numba", "route": "cache", "hits": [1, 1, 1], "misses": [0, 0, 0]}


@pytest.mark.slow
def test_a_child_that_runs_past_its_bound_is_stopped_and_this_process_compiles(tmp_path):
    pytest.importorskip("numba")
    folder = tmp_path / "cache"
    late = _ask(folder, "0.05")
    assert late["status"] == "numba" and late["route"] == "cache"
    assert late["misses"] == [1, 1, 1]  # compiled here, after the child was stopped
    assert len(list((folder / "numba-signed").glob("kernel-*.ready"))) == 1


LEAVE_EARLY = '''
import time
from kinema_nodes.core.solve import _kernel
_kernel._compiled()  # the first ask: the build thread starts the child's compile
for _ in range(12000):  # 120 s at most for the child to start
    if _kernel._phase == "child":
        break
    time.sleep(0.01)
print("phase", _kernel._phase)
'''


def test_a_script_that_ends_during_the_child_compile_does_not_wait_and_the_child_finishes_alone(tmp_path):
    """A script ending during the first compile used to wait for it (a minute, ten under load);
    the compile needs nothing from the script, so the script ends and the child fills the cache
    and writes the ready mark alone."""
    pytest.importorskip("numba")
    folder = tmp_path / "cache"
    env = dict(os.environ, KINEMA_CACHE_DIR=str(folder), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)
    left = subprocess.run([sys.executable, "-c", LEAVE_EARLY], capture_output=True, text=True, timeout=900, env=env,
                          cwd=ROOT, check=False)
    assert left.returncode == 0 and left.stdout.split() == ["phase", "child"], left.stderr[-3000:]
    marks = folder / "numba-signed"
    assert not list(marks.glob("kernel-*.ready"))  # the script did not wait: the child (tens of seconds) still compiles
    for _ in range(1800):  # the child's own bound is 600 s; 900 s here
        if list(marks.glob("kernel-*.ready")):
            break
        time.sleep(0.5)
    assert len(list(marks.glob("kernel-*.ready"))) == 1
    assert _ask(folder) == {"status": "numba", "route": "cache", "hits": [1, 1, 1], "misses": [0, 0, 0]}
