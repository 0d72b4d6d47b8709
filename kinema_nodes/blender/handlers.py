"""Frame-change and depsgraph handlers: run the Kinema trees. Persistent, so they survive
file loads; they do nothing but call the evaluator (and tell the session what changed). A timer
lets live rigs solve ahead while Blender is idle (`solve_ahead_tick`)."""

import bpy
from bpy.app.handlers import persistent

from .. import evaluator
from ..session import SESSION, changed_outside


@persistent
def on_frame_change_pre(scene, depsgraph=None):
    evaluator.run_pre(scene)


@persistent
def on_frame_change(scene, depsgraph=None):
    evaluator.run_all(scene)


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    changed_outside()
    _adopt_new_copies()
    evaluator.run_all(scene)


def _adopt_new_copies() -> None:
    """A rig copied (Shift+D, Alt+D, Append, Link) gets its own tree; looked for only when the
    number of objects changed, which a live frame never does."""
    count = len(bpy.data.objects)
    if count != SESSION.objects_seen and not SESSION.running:
        SESSION.objects_seen = count
        from .edit import adopt_copies

        adopt_copies()


@persistent
def on_undo(*_args):
    changed_outside()
    SESSION.objects_seen = None


@persistent
def on_load(*_args):
    evaluator.forget_all()
    from .rig import upgrade_slides

    for obj in bpy.data.objects:
        if obj.type == "ARMATURE" and obj.data.kinema.urdf_text:
            upgrade_slides(obj)


#: How often the idle timer looks (s: a turn after an edit waits for the next look), how soon it
#: comes back while frames are left (s), and how long one turn may take (ms): a turn is shorter
#: than a redraw, and at most a fifth of the idle main thread.
AHEAD_EVERY_S, AHEAD_AGAIN_S, AHEAD_SLICE_MS = 0.1, 0.02, 4.0


def solve_ahead_tick():
    """The persistent timer (main thread; the bpy module fires none): while no window plays the
    animation and no render runs, each live rig solves the frames a playback from the current
    frame, then a scrub back from it, will show (`evaluator.solve_ahead`), a slice at a time;
    never with Preferences' *Solve Ahead While Idle* off. Not between a playback's frames: there
    a turn made the next frame_set dearer (0.155-0.26 ms against 0.121 with no turn, Panda
    plain scene) than the kernel call it saved."""
    from .plan_jobs import animation_playing

    try:
        if not evaluator.solve_ahead_wanted() or animation_playing(bpy) or bpy.app.is_job_running("RENDER"):
            return AHEAD_EVERY_S
        if SESSION.idle_generation != SESSION.generation:  # edited in the last turn (a drag goes on): not idle yet
            SESSION.idle_generation = SESSION.generation
            return AHEAD_EVERY_S
        if evaluator.solve_ahead(bpy.context.scene, AHEAD_SLICE_MS):
            return AHEAD_AGAIN_S
    except Exception:  # noqa: BLE001, S110 -- the timer must never stop; the next frame solves as ever
        pass
    return AHEAD_EVERY_S


HANDLERS = (
    (bpy.app.handlers.undo_post, on_undo),
    (bpy.app.handlers.redo_post, on_undo),
    (bpy.app.handlers.frame_change_pre, on_frame_change_pre),
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.load_post, on_load),
)

CLASSES = ()


def register():
    for handler_list, function in HANDLERS:
        if function not in handler_list:
            handler_list.append(function)
    if not bpy.app.timers.is_registered(solve_ahead_tick):
        bpy.app.timers.register(solve_ahead_tick, first_interval=AHEAD_EVERY_S, persistent=True)


def unregister():
    for handler_list, function in HANDLERS:
        while function in handler_list:
            handler_list.remove(function)
    if bpy.app.timers.is_registered(solve_ahead_tick):
        bpy.app.timers.unregister(solve_ahead_tick)
