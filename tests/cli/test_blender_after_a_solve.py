"""Loading Blender's module in a process that has solved already (`configs --render`, a script).

A solve starts the compiled kernel's build in a thread, and that thread imports numba. Loading
bpy at the same moment deadlocked: gdb on the py313 CI leg's hung `configs --render` showed the
main thread inside `dlopen(bpy)`, where USD's initialiser waits for the GIL, and the build
thread holding the GIL while it waits on the loader's lock to open an extension of numba's
(it hung 1 run in 2 here). These tests record, at the moment `import bpy` starts, whether that
thread is still alive: it must not be, whichever way Blender is reached (if it is, the import
is refused there, so a regression fails at once instead of hanging)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

WATCH = """
import json, sys
from kinema_nodes.core.solve import _kernel

seen = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "bpy" and not seen:
            thread = _kernel._thread
            seen.append({"state": _kernel._state, "thread_alive": bool(thread is not None and thread.is_alive())})
            if seen[0]["thread_alive"]:  # refused, so the test fails at once instead of hanging
                print(json.dumps({"started": started, "seen": seen}))
                sys.stdout.flush()
                raise ImportError("bpy asked for while the kernel thread runs")
        return None

sys.meta_path.insert(0, Watch())
started = None
_kernel._compiled()  # what the first solve does: the build (or the cache load) starts in its thread
started = _kernel._state
"""

WAYS = {
    "a blender module": "import kinema_nodes.blender.build",
    "register()": "import kinema_nodes; kinema_nodes.register()",
    "the CLI's headless Blender": "from kinema_nodes.cli.headless import headless_blender; headless_blender()",
}


@pytest.mark.parametrize("way", list(WAYS))
def test_blender_loads_only_after_the_kernel_thread_has_finished(way):
    pytest.importorskip("numba")
    # os._exit as the CLI ends: bpy 4.5 can hang in its own shutdown at process exit (cli/main.py)
    code = WATCH + WAYS[way] + "\nprint(json.dumps({'started': started, 'seen': seen}), flush=True)\nimport os\nos._exit(0)\n"
    env = {k: v for k, v in os.environ.items() if k != "KINEMA_NO_NUMBA"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, check=False)
    report = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else None
    assert report is not None and report["seen"] and not report["seen"][0]["thread_alive"], (report, run.stderr[-2000:])
    assert run.returncode == 0, run.stderr[-2000:]
    assert report["started"] == "compiling", report  # the thread was running when Blender was asked for
    assert len(report["seen"]) == 1, report  # bpy was imported, and from this process
    assert report["seen"][0] == {"state": "ready", "thread_alive": False}, report
