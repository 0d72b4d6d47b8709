"""The compiled PyRoki programs this process holds: one LRU of `CompiledSolver`s by
(robot fingerprint, target links), and the lock that guards it.

The background builds (`_warming`) put programs here and the solves (`_pyroki_backend`) find
them here; both import this module, neither the other's state. The lock guards only the LRU,
never a compile.
"""

from __future__ import annotations

import threading

from ._cache import LRU

_lock = threading.RLock()
_solvers = LRU()


def ready(key):
    """The program for `key` ((fingerprint, links)) when this process holds it, else None."""
    with _lock:
        return _solvers.get(key)


def keep(key, solver) -> None:
    with _lock:
        _solvers.put(key, solver)


def loaded_solver_keys() -> list:
    with _lock:
        return _solvers.keys()


def set_lru_size(capacity: int) -> None:
    _solvers.resize(capacity)


def clear() -> None:
    with _lock:
        _solvers.clear()
