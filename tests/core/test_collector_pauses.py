"""Background loads never hand a drag the garbage collector's full pass (#29 item 1).

Measured before: loading JAX and a PyRoki program in the background set off full (generation
2) collections of Blender's whole heap, 15-120 ms each, and one landed on a drag in about every
first minute (bench/bench_first_minutes.py, one 100-125 ms drag in 50). Here a fresh process
loads the compiled kernel, then a PyRoki program, and counts the full collections that ran
while each loaded: none may, the collector must be back as it was found, and what the load made
must be frozen (out of the collector's walk). Without `core.collector` JAX's import alone sets
off several.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import gc, json, sys
    full = []
    gc.callbacks.append(lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None)
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import _kernel, _warming
    out = {}
    robot = load_robot("arm6")
    gc.collect()
    before, frozen = len(full), gc.get_freeze_count()
    _kernel._compiled(wait=True)
    out["kernel"] = {"status": _kernel.kernel_status()[0], "full_collections": len(full) - before,
                     "enabled": gc.isenabled(), "frozen_more": gc.get_freeze_count() > frozen}
    gc.disable()  # a script that turned the collector off keeps it off
    before, frozen = len(full), gc.get_freeze_count()
    _warming.pyroki_state(robot, ("tool_tcp",))
    assert _warming.wait_for_builds(timeout=600)
    state, _ = _warming.pyroki_state(robot, ("tool_tcp",))
    out["pyroki"] = {"state": state, "full_collections": len(full) - before, "enabled": gc.isenabled(),
                     "frozen_more": gc.get_freeze_count() > frozen, "jax_loaded": "jax" in sys.modules}
    print(json.dumps(out))
""")


@pytest.mark.jax
def test_background_loads_run_no_full_collection_and_leave_the_collector_as_found():
    pytest.importorskip("numba")
    pytest.importorskip("pyroki")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    kernel, pyroki = out["kernel"], out["pyroki"]
    assert kernel["status"] == "numba", out
    assert kernel == {"status": "numba", "full_collections": 0, "enabled": True, "frozen_more": True}, out
    assert pyroki["state"] == "ready" and pyroki["jax_loaded"], out
    assert pyroki["full_collections"] == 0 and pyroki["enabled"] is False and pyroki["frozen_more"], out
