"""File ▸ Import ▸ Kinema Reachability Map: a `kinema-nodes reach` map as a point cloud coloured
by index. Thin: blender/reach.py builds it, core/reach.py reads it."""

from __future__ import annotations

import bpy
from bpy_extras.io_utils import ImportHelper

from . import ReportingOperator, file_filter


class KINEMA_OT_import_reach_map(ReportingOperator, bpy.types.Operator, ImportHelper):
    """Import a reachability map (.npz from kinema-nodes reach) as points coloured by reachability index"""

    bl_idname = "kinema.import_reach_map"
    bl_label = "Import Reachability Map"
    filename_ext = ".npz"
    filter_glob: file_filter("*.npz")
    include_unreachable: bpy.props.BoolProperty(name="Unreachable Cells", default=False,
                                                description="also add a point for cells no orientation reaches (index 0)")
    parent_to_rig: bpy.props.BoolProperty(name="Parent to Active Rig", default=True,
                                          description="the map is in the robot's root frame: follow the active armature")

    def execute(self, context):
        from ..blender.reach import import_reach_map

        active = context.active_object
        parent = active if self.parent_to_rig and active is not None and active.type == "ARMATURE" else None

        def work():
            obj = import_reach_map(context, bpy.path.abspath(self.filepath), self.include_unreachable, parent=parent)
            return f"imported {len(obj.data.vertices)} cells as '{obj.name}'"

        return self.reported(work)


def _menu(self, context):
    self.layout.operator(KINEMA_OT_import_reach_map.bl_idname, text="Kinema Reachability Map (.npz)")


CLASSES = (KINEMA_OT_import_reach_map,)


def register() -> None:
    bpy.types.TOPBAR_MT_file_import.append(_menu)


def unregister() -> None:
    bpy.types.TOPBAR_MT_file_import.remove(_menu)
