"""A fresh interpreter that imports this add-on under the dotted name this process knows it by,
for one-off builds (the numba kernel's first compile, a PyRoki program's first trace) that must
not hold this process's GIL while Blender answers drags.

In Blender an extension is `bl_ext.<repository>.kinema_nodes`; its compiled caches name the
modules they were built from, so the child must import the package by that same name, the
parents made as bare packages over their folders (`IMPORT_AS_HERE`, the first lines of a
child's script: argv[1] is the package's folder, argv[2] its dotted name).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Leaves `name` (the package's dotted name) importable, and `importlib` imported.
IMPORT_AS_HERE = """
import importlib, sys, types
from pathlib import Path
folder, name = Path(sys.argv[1]), sys.argv[2]
parts = name.split(".")
for depth in range(1, len(parts)):
    parent = ".".join(parts[:depth])
    module = types.ModuleType(parent)
    module.__path__ = [str(folder.parents[len(parts) - depth - 1])]
    sys.modules[parent] = module
if len(parts) == 1:
    sys.path.insert(0, str(folder.parent))
"""

_PACKAGE = Path(__file__).parent.parent  # as this process found it (not resolved): numba keys its cache on the path
_NAME = __name__.rsplit(".", 2)[0]  # this module is <name>.core.child_process


def child_command(script: str) -> list[str] | None:
    """The command that runs `script` (after `IMPORT_AS_HERE`) in a fresh interpreter, or None
    when this process has no interpreter to start (an embedded Python without one)."""
    if not sys.executable or not os.path.isfile(sys.executable):
        return None
    return [sys.executable, "-c", IMPORT_AS_HERE + script, str(_PACKAGE), _NAME]


def child_environment() -> dict[str, str]:
    """This process's environment, with its import path (Blender's own folders included)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env
