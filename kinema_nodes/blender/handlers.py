"""Frame-change and depsgraph handlers: run the Kinema trees. Persistent, so they survive
file loads; they do nothing but call the evaluator (and tell the session what changed)."""

import bpy
from bpy.app.handlers import persistent

from .. import evaluator
from ..session import changed_outside


@persistent
def on_frame_change(scene, depsgraph=None):
    evaluator.run_all(scene)


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    changed_outside()
    evaluator.run_all(scene)


@persistent
def on_undo(*_args):
    changed_outside()


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
