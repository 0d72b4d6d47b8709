"""Rig presets in Blender: apply a preset to a rig (build its tree), save a rig's tree or a node
group as a preset, and the Presets sub-panel of the IK panel.

The format and the binding of roles live in `core.presets` / `core.roles`; this module only
turns a bound preset into nodes, control bones and keys (and back). Presets are found in the
user's preset folder (`user_preset_folder`, or `$KINEMA_NODES_PRESET_DIR`) and then among the
presets shipped with the extension (`kinema_nodes/presets/`).
"""

from __future__ import annotations


import bpy

from . import SidebarPanel
from .. import evaluator
from ..core.presets import (
    PresetError,
    load_preset,
)
from .ik_panel import KINEMA_PT_inverse_kinematics
from ..blender.edit import active_rig, rig_tree
from ..blender.presets import apply_preset, available_presets, robot_node_of, save_tree_as_preset


# ---- where presets live ------------------------------------------------------------------------


# ---- applying ------------------------------------------------------------------------------


# ---- saving --------------------------------------------------------------------------------


# ---- operators -----------------------------------------------------------------------------

_preset_items_cache: list = []


def _preset_items(self, context):
    # Blender keeps only pointers to these strings: hold them in a module-level list.
    _preset_items_cache[:] = [(str(path), preset.name, preset.description or preset.name)
                              for path, preset in available_presets()] or [("", "(no presets)", "")]
    return _preset_items_cache


class KINEMA_OT_apply_preset(bpy.types.Operator):
    """Build this rig's node tree from a preset: its roles (tool point, wrist, ...) bind to this robot's links"""

    bl_idname = "kinema.apply_preset"
    bl_label = "Apply Preset"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "preset"

    preset: bpy.props.EnumProperty(name="Preset", items=_preset_items)

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def execute(self, context):
        rig = active_rig(context)
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")
        try:
            if not self.preset:
                raise PresetError("no preset chosen")
            tree = apply_preset(context, rig, self.preset)
            evaluator.warm_up_tree(tree, wait=False)  # PyRoki compiles in the background; the NumPy kernel answers meanwhile
        except PresetError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if window is not None:
                window.cursor_modal_restore()
        self.report({"INFO"}, f"applied preset '{load_preset(self.preset).name}'")
        return {"FINISHED"}


class KINEMA_OT_save_preset(bpy.types.Operator):
    """Save this rig's node tree (or the node group open in the editor) as a preset for other robots"""

    bl_idname = "kinema.save_preset"
    bl_label = "Save Preset"
    bl_options = {"REGISTER", "UNDO"}  # Mark as Asset marks the node group in the file

    name: bpy.props.StringProperty(name="Name", default="My preset")
    description: bpy.props.StringProperty(name="Description")
    mark_asset: bpy.props.BoolProperty(name="Mark as Asset", default=True,
                                       description="Also mark a node group as an asset (Asset Browser)")

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and (rig_tree(rig) is not None or _editor_group(context) is not None)

    def invoke(self, context, event):
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        from ..blender.flatten import is_group_tree

        rig = active_rig(context)
        tree = _editor_group(context) or rig_tree(rig)
        try:
            path = save_tree_as_preset(tree, rig, self.name, self.description, mark_asset=self.mark_asset and is_group_tree(tree))
        except PresetError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"saved preset '{self.name}' to {path}")
        return {"FINISHED"}


def _editor_group(context):
    from ..blender.flatten import is_group_tree

    space = context.space_data
    tree = getattr(space, "edit_tree", None) if getattr(space, "type", "") == "NODE_EDITOR" else None
    return tree if tree is not None and tree.bl_idname == "KinemaNodeTree" and is_group_tree(tree) else None


def _robot_node_for(context, name: str):
    space = context.space_data
    tree = getattr(space, "edit_tree", None) if getattr(space, "type", "") == "NODE_EDITOR" else None
    if tree is not None and name in tree.nodes:
        return tree.nodes[name]
    rig = active_rig(context)
    node = robot_node_of(rig_tree(rig), rig) if rig else None
    return node if node is not None and (not name or node.name == name) else None


class KINEMA_OT_role_override_add(bpy.types.Operator):
    """Set a role (tool point, flange, wrist, ...) by hand on this robot"""

    bl_idname = "kinema.role_override_add"
    bl_label = "Set a Role by Hand"
    bl_options = {"REGISTER", "UNDO"}

    node: bpy.props.StringProperty(name="Robot Node")

    def execute(self, context):
        node = _robot_node_for(context, self.node)
        if node is None:
            self.report({"ERROR"}, "no Robot node for this rig: add an IK target or apply a preset first")
            return {"CANCELLED"}
        node.role_overrides.add()
        return {"FINISHED"}


class KINEMA_OT_role_override_remove(bpy.types.Operator):
    """Go back to the inferred link for this role"""

    bl_idname = "kinema.role_override_remove"
    bl_label = "Remove Role Override"
    bl_options = {"REGISTER", "UNDO"}

    node: bpy.props.StringProperty(name="Robot Node")
    index: bpy.props.IntProperty(name="Index")

    def execute(self, context):
        node = _robot_node_for(context, self.node)
        if node is None or not 0 <= self.index < len(node.role_overrides):
            return {"CANCELLED"}
        node.role_overrides.remove(self.index)
        return {"FINISHED"}


class KINEMA_PT_presets(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_presets"
    bl_label = "Presets"
    bl_parent_id = KINEMA_PT_inverse_kinematics.bl_idname
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def draw(self, context):
        from ..nodes.robot import draw_roles

        layout = self.layout
        layout.operator_menu_enum("kinema.apply_preset", "preset", text="Apply Preset", icon="PRESET")
        layout.operator("kinema.save_preset", icon="FILE_TICK")
        rig = active_rig(context)
        node = robot_node_of(rig_tree(rig), rig)
        if node is not None:
            draw_roles(node, layout)
        else:
            _draw_inferred_roles(rig, layout)


def _draw_inferred_roles(rig, layout):
    from ..core.roles import ROLE_LABELS, infer_roles
    from ..blender.rig import robot_for_rig

    box = layout.box()
    box.label(text="Roles (for presets)")
    column = box.column(align=True)
    for role, link in infer_roles(robot_for_rig(rig)).links.items():
        column.label(text=f"{ROLE_LABELS[role]}: {link}")


CLASSES = (
    KINEMA_OT_apply_preset,
    KINEMA_OT_save_preset,
    KINEMA_OT_role_override_add,
    KINEMA_OT_role_override_remove,
    KINEMA_PT_presets,
)
