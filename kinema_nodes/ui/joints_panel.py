"""The Kinema sidebar tab of the 3D viewport: the robot, and a slider per joint.

The sliders are views of the bone channels (`PoseBone.kinema_angle` / `kinema_millimetres`
read and write the channel the joint lives on), so moving a slider poses the rig, and keys,
solvers and undo all show up on the slider with nothing to keep in sync.
"""

import math

import bpy

from . import SidebarPanel
from ..blender import rig


def _limits_text(settings) -> str:
    if settings.joint_type == "continuous" or not (math.isfinite(settings.lower) and math.isfinite(settings.upper)):
        return "no limits"
    if settings.joint_type == "prismatic":
        return f"{settings.lower * 1000:.0f} .. {settings.upper * 1000:.0f} mm"
    return f"{math.degrees(settings.lower):.0f} .. {math.degrees(settings.upper):.0f}°"


class KINEMA_PT_robot(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_robot"
    bl_label = "Robot"

    def draw(self, context):
        layout = self.layout
        layout.operator("kinema.import_urdf", icon="IMPORT")
        obj = context.active_object
        if rig.is_rig(obj):
            settings = obj.data.kinema
            column = layout.column(align=True)
            column.label(text=f"Robot: {settings.robot_name}", icon="ARMATURE_DATA")
            column.label(text=f"Tool point: {settings.tool_point}", icon="EMPTY_ARROWS")


class KINEMA_PT_joints(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_joints"
    bl_label = "Joints"

    @classmethod
    def poll(cls, context):
        return rig.is_rig(context.active_object)

    def draw(self, context):
        layout = self.layout
        obj = context.active_object
        row = layout.row(align=True)
        row.operator("kinema.key_all_joints", icon="KEYINGSET")
        row.operator("kinema.reset_joints", icon="LOOP_BACK")
        column = layout.column(align=True)
        bones = obj.pose.bones
        for bone in obj.data.bones:  # parents before children: the arm reads base to tip
            settings = bone.kinema
            if not settings.actuated:
                continue
            pose_bone = bones[bone.name]
            prop = "kinema_millimetres" if settings.joint_type == "prismatic" else "kinema_angle"
            row = column.row(align=True)
            split = row.split(factor=0.4, align=True)
            split.label(text=settings.joint)
            split = split.split(factor=0.5, align=True)
            split.prop(pose_bone, prop, text="")
            # a slider spanning exactly the joint's limits, labelled with them
            split.prop(pose_bone, "kinema_range", text=_limits_text(settings), slider=True)


CLASSES = (KINEMA_PT_robot, KINEMA_PT_joints)
