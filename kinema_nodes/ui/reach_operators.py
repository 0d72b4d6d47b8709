"""File ▸ Import ▸ Kinema Reachability Map: a `kinema-nodes reach` map as a point cloud coloured
by index. Thin: blender/reach.py builds it, core/reach.py reads it."""

from __future__ import annotations

import bpy
from bpy_extras.io_utils import ImportHelper

from ..core.errors import KinemaError


class KINEMA_OT_import_reach_map(bpy.types.Operator, ImportHelper):
    """Import a reachability map (.npz from kinema-nodes reach) as points coloured by reachability index"""

    bl_idname = "kinema.import_reach_map"
    bl_label = "Import Reachability Map"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 -- Blender reads a set

    filename_ext = ".npz"
    filter_glob: bpy.props.StringProperty(default="*.npz", options={"HIDDEN"})
    include_unreachable: bpy.props.BoolProperty(name="Unreachable Cells", default=False,
                                                description="also add a point for cells no orientation reaches (index 0)")
    parent_to_rig: bpy.props.BoolProperty(name="Parent to Active Rig", default=True,
                                          description="the map is in the robot's root frame: follow the active armature")

    def execute(self, context):
        from ..blender.reach import import_reach_map

        active = context.active_object
        parent = active if self.parent_to_rig and active is not None and active.type == "ARMATURE" else None
        try:
            obj = import_reach_map(context, bpy.path.abspath(self.filepath), self.include_unreachable, parent=parent)
        except KinemaError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"imported {len(obj.data.vertices)} cells as '{obj.name}'")
        return {"FINISHED"}


def _menu(self, context):
    self.layout.operator(KINEMA_OT_import_reach_map.bl_idname, text="Kinema Reachability Map (.npz)")


CLASSES = (KINEMA_OT_import_reach_map,)


def register() -> None:
    bpy.types.TOPBAR_MT_file_import.append(_menu)


def unregister() -> None:
    bpy.types.TOPBAR_MT_file_import.remove(_menu)
