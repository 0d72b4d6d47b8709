"""A PyRoki program's first build, run in a child process, so this one only loads it from disk.

Tracing PyRoki and exporting the program is Python that holds the GIL for seconds; in
Blender's process a drag answered meanwhile on the NumPy kernel stalled behind it (worst drags
of 60-1050 ms on a new machine, bench/bench_first_minutes.py --new-machine). So the background
build (`_warming`) asks a separate interpreter to trace, export and compile the program into
the cache folder (the export file and a JAX persistent cache entry, both signed with this
install's key, which the child reads from the same folder); this process then loads both, which
costs little of the GIL. Any failure (no interpreter, no trusted key, a timeout, an error in the
child) returns the reason, and the build runs here as it always could.

The robot reaches the child as the URDF text it was built from (`RobotModel.urdf_text`: a
xacro's expansion, an MJCF's conversion, a rig's stored copy), piped on stdin, so a robot that
exists only inside a .blend builds too; the child checks that the text gives the same
kinematic fingerprint, the key the export file is found by.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable

#: The most one build may take in its own process before this one builds it instead.
CHILD_BUILD_SECONDS = 300.0

#: Run in a fresh interpreter at a lower priority where the system has one, the package imported
#: under this process's dotted name (`core.child_process`); stdin a JSON object (the URDF text,
#: its path, the fingerprint, the links).
CHILD_SCRIPT = """
import json, os
if hasattr(os, "nice"):
    os.nice(10)  # a background build: the drags in the process that asked come first
asked = json.loads(sys.stdin.buffer.read())
loading = importlib.import_module(name + ".core.model.loading")
program = importlib.import_module(name + ".core.solve._pyroki_program")
robot = loading.robot_from_urdf_text(asked["urdf"], asked["path"])
if robot.fingerprint != asked["fingerprint"]:
    print(f"kinema-nodes-child: the URDF text gives fingerprint {robot.fingerprint}, not {asked['fingerprint']}",
          file=sys.stderr)
    sys.exit(3)
program.CompiledSolver(robot, tuple(asked["links"])).compile()
sys.exit(0)
"""


def build_in_child(robot, links: tuple[str, ...], meanwhile: Callable[[], object] | None = None) -> str | None:
    """Build the program for (robot, links) into the cache folder in a child interpreter.
    None when it did; else why not, in one line (the caller then builds it here). `meanwhile`
    runs here while the child builds (JAX's own import, which loading the program needs)."""
    from ..cache_trust import install_key
    from ..child_process import child_command, child_environment
    from ..errors import say

    command = child_command(CHILD_SCRIPT)
    if command is None:
        return "no Python interpreter to run it in"
    if not robot.urdf_text:
        return "the robot has no URDF text to hand over"
    if install_key() is None:  # made here first, so the child signs with the key this process trusts
        return "the cache folder has no trusted key to hand the build over through"
    asked = json.dumps({"urdf": robot.urdf_text, "path": str(robot.path or robot.name), "fingerprint": robot.fingerprint,
                        "links": list(links)}).encode()
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env=child_environment())
    except OSError as exc:
        return f"it could not be started ({type(exc).__name__}: {exc})"
    started = time.monotonic()
    try:
        with contextlib.suppress(BrokenPipeError):  # a child that died at once: its exit code says why
            child.stdin.write(asked)
        child.stdin.close()
        child.stdin = None  # handed over: `communicate` below only reads what the child says
        if meanwhile is not None:
            meanwhile()
        _, said = child.communicate(timeout=max(0.0, CHILD_BUILD_SECONDS - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return f"it ran past {CHILD_BUILD_SECONDS:g} s"
    except BaseException:  # `meanwhile` failed, or the process is stopping: no child left behind
        child.kill()
        child.communicate()
        raise
    lines = said.decode(errors="replace").splitlines()
    for line in lines:
        if line.startswith("kinema-nodes:"):  # the cache's own notes (a foreign entry rebuilt), said here
            say(line)
    if child.returncode == 0:
        return None
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    last = last.removeprefix("kinema-nodes-child: ")
    return f"it exited with code {child.returncode}" + (f" ({last[:200]})" if last else "")
