"""Long loads without the garbage collector's pauses landing on a drag (issue #29, item 1).

Loading JAX and a PyRoki program, or numba and the compiled kernel, allocates hundreds of
thousands of objects. Python's collector answers with full (generation 2) collections, each
walking every object in Blender's process: 15-120 ms, measured on the first-minutes bench,
growing with the heap. A collection stops every thread, so one that starts in the background
loader lands on whatever drag is running (one 100-125 ms drag in 50, at random, on
tiago_no_hand and ur3_gripper).

So a load runs with automatic collection off, and when it ends what it left is frozen
(`gc.freeze`: moved out of the collector's generations, as long-lived servers do after their
imports): the modules, programs and compiled code it made live for the session anyway, and
later full collections walk only what the session makes after. Cost: cyclic garbage the load
itself left is never freed (small: imports make few cycles). The collector's state is restored
as it was found (a script that turned it off keeps it off). Overlapping loads share one
disable: the collector comes back when the last one ends.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_loads = 0
_was_enabled = True


@contextmanager
def without_collector_pauses():
    """Run a long load with automatic collection off; freeze what it made when the last ends."""
    global _loads, _was_enabled
    with _lock:
        if _loads == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _loads += 1
    try:
        yield
    finally:
        with _lock:
            _loads -= 1
            if _loads == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()
