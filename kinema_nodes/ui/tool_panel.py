"""The Tool section of the Inverse Kinematics panel: Set Up Tool, the Tool node's settings and each
segment's move and tool speed; and the rows of the Tool node's moves.

Thin: the buttons call blender/tool_setup.py; the numbers come from there (and path_moves.py).
"""

import bpy

from . import RigOperator
from .ik_sections import _Section
from .node_buttons import _NodeButton
from ..blender.edit import active_rig, rig_tree, target_nodes
from ..nodes.tool import draw_path_sampling


def _first_target(rig):
    tree = rig_tree(rig)
    targets = target_nodes(tree, rig) if tree is not None else []
    return targets[0] if targets else None


class KINEMA_OT_set_up_tool(RigOperator, bpy.types.Operator):
    """Mount a tool centre point on a link at an offset; the IK target then places that point, and the control moves onto it"""

    bl_idname = "kinema.set_up_tool"
    bl_label = "Set Up Tool"

    link: bpy.props.StringProperty(name="Link", description="The link the tool is mounted on (default: the tool point)")
    offset_location: bpy.props.FloatVectorProperty(name="Offset", size=3, subtype="TRANSLATION", unit="LENGTH")
    offset_rotation: bpy.props.FloatVectorProperty(name="Rotation", size=3, subtype="EULER", unit="ROTATION")

    def invoke(self, context, event):
        from ..blender.path_moves import tool_of

        target = _first_target(active_rig(context))
        tool = tool_of(target) if target is not None else None
        if tool is not None:  # start from the tool there is
            self.link, self.offset_location, self.offset_rotation = tool.link_name, tool.offset_location, tool.offset_rotation
        return context.window_manager.invoke_props_dialog(self)

    def draw(self, context):
        rig = active_rig(context)
        self.layout.prop_search(self, "link", rig.data, "bones")
        self.layout.prop(self, "offset_location")
        self.layout.prop(self, "offset_rotation")

    def act(self, context, rig):
        from ..blender.tool_setup import set_up_tool

        tool = set_up_tool(rig, self.link, self.offset_location, self.offset_rotation)
        return f"Tool on '{tool.link_name}'"


class KINEMA_OT_tool_move_row(_NodeButton, bpy.types.Operator):
    """Add a move row to a Tool node (the segment from a key), or remove one"""

    bl_idname = "kinema.tool_move_row"
    bl_label = "Tool Move Row"

    index: bpy.props.IntProperty(default=-1, description="Row to remove; -1 adds a row at the current frame")

    def execute(self, context):
        node = self.node_here(context)
        if node is None:
            return {"CANCELLED"}
        if self.index < 0:
            node.add_move(context.scene.frame_current, "LINEAR")
        elif self.index < len(node.moves):
            node.moves.remove(self.index)
            node.mark_dirty()
        return {"FINISHED"}


class KINEMA_OT_preview_reach(RigOperator, bpy.types.Operator):
    """Judge each frame of the tool's path before baking: reachable, near a singularity, near a joint limit, unreachable"""

    bl_idname = "kinema.preview_reach"
    bl_label = "Preview Reach"

    wrist_margin: bpy.props.FloatProperty(name="Wrist Margin", default=10.0, min=0.0, max=90.0, description="Degrees from a straight wrist")
    elbow_margin: bpy.props.FloatProperty(name="Elbow Margin", default=10.0, min=0.0, max=90.0, description="Degrees from a straight elbow")

    def act(self, context, rig):
        from ..blender.tool_setup import preview_reach
        from ..core.reach_preview import counts

        _, samples = preview_reach(context, rig, wrist_margin_deg=self.wrist_margin, elbow_margin_deg=self.elbow_margin)
        found = counts([s for _, s in samples])
        return ", ".join(f"{n} {verdict.replace('_', ' ')}" for verdict, n in found.items() if n)


class KINEMA_PT_ik_tool(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_tool"
    bl_label = "Tool"

    def draw(self, context):
        from ..blender.path_moves import tool_of
        from ..blender.tool_setup import tool_segments

        layout = self.layout
        rig = active_rig(context)
        target = _first_target(rig)
        tool = tool_of(target) if target is not None else None
        layout.operator("kinema.set_up_tool", icon="TOOL_SETTINGS")
        if tool is None:
            layout.label(text="The IK target places the link itself")
            return
        layout.label(text=f"On '{tool.link_name}'")
        layout.operator("kinema.preview_reach", icon="HIDE_OFF")
        layout.prop(tool, "path")
        if tool.path is not None:  # Follow Path: the control gives only the orientation
            layout.prop(tool, "path_timing", expand=True)
            layout.prop(tool, "path_speed" if tool.path_timing == "SPEED" else "path_progress")
            layout.prop(tool, "path_orientation", expand=True)
            draw_path_sampling(layout, tool)
            return
        layout.prop(tool, "move")
        layout.prop(tool, "via")
        layout.prop(tool, "ramp")
        layout.prop(tool, "blend_radius")
        fps = context.scene.render.fps / context.scene.render.fps_base
        for segment in tool_segments(target, rig, fps):
            speed = "" if segment["speed"] is None else f", {segment['speed']:.3f} m/s"
            layout.label(text=f"{segment['first']:g}-{segment['last']:g}: {segment['move'].title()}, {segment['length']:.3f} m{speed}")


CLASSES = (KINEMA_OT_set_up_tool, KINEMA_OT_tool_move_row, KINEMA_OT_preview_reach, KINEMA_PT_ik_tool)
