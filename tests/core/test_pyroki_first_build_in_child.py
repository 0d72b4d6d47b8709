"""PyRoki's first build on a machine runs in a child process (issue #29, item 1).

Tracing PyRoki holds the GIL for seconds; in Blender's process, drags answered on the NumPy
kernel meanwhile stalled behind it (worst drags of 60-1050 ms on a new machine). So the
background build (the one Add IK Target starts) has a separate interpreter trace, export and
compile the program into the signed cache folder, and this process only loads it: PyRoki is
never traced here (`_build_function` is counted) and XLA compiles nothing here (JAX's own
monitoring events: every compile this process asks for is a persistent-cache hit, none a miss).
A child that fails, or runs past its bound, is said in one line and the program is built here
as before; either way the answers are the same to 1e-9.

Each case runs in a fresh process with an empty cache folder (a new machine), the numba kernel
off (it plays no part in a PyRoki build, and its own first compile would take a minute).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

FIRST_BUILD = '''
import json, sys
import numpy as np
import jax.monitoring
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import _pyroki_child, _pyroki_program, _warming
mode = sys.argv[1]
if mode == "broken":
    _pyroki_child.CHILD_SCRIPT = "import sys; print('kinema-nodes-child: made to fail', file=sys.stderr); sys.exit(4)"
elif mode == "late":
    _pyroki_child.CHILD_BUILD_SECONDS = 0.05
traced = []
trace = _pyroki_program._build_function
_pyroki_program._build_function = lambda *a: traced.append(1) or trace(*a)
events = []
jax.monitoring.register_event_listener(lambda name, **_: events.append(name))
robot = load_robot("ur5", check_meshes=False)
links = ("tool0",)
assert _warming.pyroki_state(robot, links)[0] == "compiling"  # the background build, as Add IK Target starts it
assert _warming.wait_for_builds(900)
state, solver = _warming.pyroki_state(robot, links)
rng = np.random.default_rng(7)
start = np.clip(np.array([0.3, -1.2, 1.4, -1.6, -1.3, 0.4]), robot.lower, robot.upper)
layout = solver.layout
free = layout.free_mask(np.arange(robot.dof))
answers, errors = [], []
for i in range(4):
    goal = link_pose(robot, start + rng.uniform(-0.3, 0.3, robot.dof), "tool0")
    seeds = layout.make_seeds(start, free, 0, near_start=True)
    x, err, _, ok = solver(start, seeds, goal[None, :3, 3], matrix_to_quaternion(goal)[None], np.ones((1, 2)), free,
                           (1e-4, 1e-4), 100, False)
    answers.append(x.tolist())
    errors.append(float(err.max()) if ok else 1.0)
print(json.dumps({"state": state, "route": solver.build_route, "traced": len(traced),
                  "cache_hits": events.count("/jax/compilation_cache/cache_hits"),
                  "cache_misses": events.count("/jax/compilation_cache/cache_misses"),
                  "answers": answers, "errors": errors}))
'''


def _first_build(folder: Path, mode: str) -> tuple[dict, str]:
    env = dict(os.environ, KINEMA_CACHE_DIR=str(folder), KINEMA_NO_NUMBA="1", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", FIRST_BUILD, mode], capture_output=True, text=True, timeout=1200,
                            env=env, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1]), result.stderr


@pytest.fixture(scope="module")
def by_child(tmp_path_factory):
    pytest.importorskip("pyroki")
    return _first_build(tmp_path_factory.mktemp("new-machine"), "child")


def test_the_first_build_runs_in_a_child_and_this_process_only_loads_it(by_child):
    found, said = by_child
    assert "kinema-nodes" not in said, said[-2000:]
    assert found["state"] == "ready" and found["route"] == "child"
    assert found["traced"] == 0  # PyRoki was never traced here
    assert found["cache_hits"] >= 1 and found["cache_misses"] == 0  # nor anything compiled by XLA here
    assert max(found["errors"]) <= 1e-4  # each of the four answers converged (float32 program)


def test_a_broken_child_is_said_in_one_line_and_the_program_is_built_here_with_the_same_answers(by_child, tmp_path):
    found, said = _first_build(tmp_path / "cache", "broken")
    lines = [line for line in said.splitlines() if "kinema-nodes" in line]
    assert lines == ["kinema-nodes: PyRoki's first build for 'ur5' could not run in a child process (it exited with code 4 "
                     "(made to fail)); building it here, where drags may stall meanwhile"], said[-2000:]
    assert found["state"] == "ready" and found["route"] == "here" and found["traced"] == 1
    assert found["cache_misses"] >= 1
    np.testing.assert_allclose(found["answers"], by_child[0]["answers"], rtol=0, atol=1e-9)


@pytest.mark.slow
def test_a_child_past_its_bound_is_stopped_and_the_program_is_built_here(by_child, tmp_path):
    found, said = _first_build(tmp_path / "cache", "late")
    assert "could not run in a child process (it ran past 0.05 s)" in said, said[-2000:]
    assert found["state"] == "ready" and found["route"] == "here" and found["traced"] == 1
    np.testing.assert_allclose(found["answers"], by_child[0]["answers"], rtol=0, atol=1e-9)
