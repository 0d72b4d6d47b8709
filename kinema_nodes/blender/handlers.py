"""Frame-change and depsgraph handlers: run the Kinema trees. Persistent, so they survive
file loads; they do nothing but call the evaluator (and tell the session what changed)."""

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


def unregister():
    for handler_list, function in HANDLERS:
        while function in handler_list:
            handler_list.remove(function)
