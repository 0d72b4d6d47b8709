"""Keep NumPy's OpenBLAS on one thread while a solve runs.

The solver's linear systems are tiny (7x7 for an arm). OpenBLAS still hands its LU
factorisation to a worker thread, and on a busy machine (Blender drawing, other jobs) waiting
for that thread costs up to tens of milliseconds per call: measured here, `np.linalg.solve`
on a 7x7 went from 3 us to 20 ms on average under load. One thread has no such stalls. The
setting is restored after each solve, so the rest of the process keeps its BLAS threads.
Where NumPy is not linked to OpenBLAS this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

import numpy as np

_controls: tuple | None = None
_looked = False


def _find_controls():
    folder = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    candidates = sorted(folder.glob("libopenblas*")) if folder.is_dir() else []
    for path in candidates:
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        for suffix in ("64_", ""):
            get = getattr(library, f"openblas_get_num_threads{suffix}", None)
            set_ = getattr(library, f"openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype = ctypes.c_int
                set_.argtypes = [ctypes.c_int]
                return get, set_
    return None


@contextlib.contextmanager
def single_threaded_blas():
    global _controls, _looked
    if not _looked:
        _looked = True
        try:
            _controls = _find_controls()
        except Exception:  # noqa: BLE001 - any failure just means: leave BLAS alone
            _controls = None
    if _controls is None:
        yield
        return
    get, set_ = _controls
    previous = get()
    if previous <= 1:
        yield
        return
    set_(1)
    try:
        yield
    finally:
        set_(previous)
