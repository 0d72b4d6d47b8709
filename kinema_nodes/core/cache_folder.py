"""Where Kinema's compiled code lives on disk, per user: the solver's and the collision kernel's
numba builds, PyRoki's exports. One folder for every compiler, so neither `solve/` nor
`collision/` has to ask the other where it is.

$KINEMA_CACHE_DIR, else $XDG_CACHE_HOME/kinema_nodes, else ~/.cache/kinema_nodes; tests point
KINEMA_CACHE_DIR at a temporary folder so they never share state by accident.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("KINEMA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "kinema_nodes"


def signed_folder(compiler: str) -> Path:
    """The folder for one compiler's signed entries (`core.cache_trust`): "numba" or "jax".

    Named apart from the unsigned `numba/` and `jax/` folders that installs before cache signing
    wrote, so an upgrade starts an empty folder (one silent rebuild) instead of meeting, and
    warning about, every old unsigned entry; those old folders are never read."""
    return cache_root() / f"{compiler}-signed"
