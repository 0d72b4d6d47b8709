"""When a PyRoki program finishes compiling in the background (core/solve/_warming.py), solve
the live trees again on Blender's main thread, so the rig and the Solver's readout go from the
NumPy kernel's stand-in answer to PyRoki's without waiting for the user to move something.

The worker thread only sets a flag (no bpy call off the main thread); a timer registered here,
on the main thread, reads it. `bpy.app.timers` never fire in the bpy module (no event loop),
so nothing depends on this: the next frame or edit picks PyRoki up anyway."""

from __future__ import annotations

import threading

import bpy

from .. import evaluator

#: Seconds between looks at the flag (a look is one Event check).
POLL_S = 0.5

_built = threading.Event()


def _heard(_key, _ok) -> None:
    """From the worker thread: remember that a build finished (ready or failed)."""
    _built.set()


def _after_build():
    if _built.is_set():
        _built.clear()
        try:
            for tree in evaluator.kinema_trees():
                evaluator.mark_dirty(tree)
            evaluator.run_all(bpy.context.scene)
            for window in bpy.context.window_manager.windows:
                for area in window.screen.areas:
                    area.tag_redraw()
        except Exception:  # noqa: BLE001, S110 - a redraw nicety must never stop the timer
            pass
    return POLL_S


CLASSES = ()


def register():
    from ..core.solve import on_pyroki_built

    on_pyroki_built(_heard)
    if not bpy.app.timers.is_registered(_after_build):
        bpy.app.timers.register(_after_build, first_interval=POLL_S, persistent=True)


def unregister():
    from ..core.solve import stop_on_pyroki_built

    stop_on_pyroki_built(_heard)
    if bpy.app.timers.is_registered(_after_build):
        bpy.app.timers.unregister(_after_build)
