"""The Bones panel of the user manual: every joint bone gets a radio button, and clicking one
re-roots the chain there (the target aims at that bone; the control snaps onto it so the arm
does not jump). It sits beside the Target Bone dropdown of the IK panel and does the same
thing through the same operator, one click per bone.
"""

from __future__ import annotations

import bpy

from . import SidebarPanel
from ..blender.edit import active_rig, first_target, rig_tree, target_nodes

PANEL = "KINEMA_PT_inverse_kinematics"


def joint_bones(robot) -> list[str]:
    """The joint bones, root to tip: each link a movable joint places. (The panel adds the tool
    point when a fixed joint hangs it from one of them.)"""
    placed = {joint.child for joint in robot.joints if joint.is_movable}
    return [link for link in robot.links if link in placed and robot.chain_joint_names(link)]


class KINEMA_PT_ik_bones(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_bones"
    bl_label = "Bones"
    bl_parent_id = PANEL
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and first_target(rig) is not None

    def draw(self, context):
        from ..blender.rig import robot_for_rig
        from .ik_panel import target_bone_label

        layout = self.layout
        rig = active_rig(context)
        robot = robot_for_rig(rig)
        targets = target_nodes(rig_tree(rig), rig)
        bones = joint_bones(robot)
        for target in targets:
            column = layout.column(align=True)
            if len(targets) > 1:
                column.label(text=target.name, icon="CON_KINEMATIC")
            aimed = target_bone_label(target, robot)
            choices = bones if robot.tool_point in bones else [robot.tool_point, *bones]
            for bone in choices:
                chosen = bone == aimed
                text = f"{bone} (tool point)" if bone == robot.tool_point else bone
                button = column.operator("kinema.switch_target_bone", text=text, depress=chosen,
                                         icon="RADIOBUT_ON" if chosen else "RADIOBUT_OFF")
                button.target = target.name
                button.link = bone
            if aimed not in choices:
                column.label(text=f"Aiming at '{aimed}'", icon="BONE_DATA")


CLASSES = (KINEMA_PT_ik_bones,)
