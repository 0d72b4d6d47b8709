"""Node groups in the Kinema editor: Make Group (Ctrl G), Edit Group (Tab) and Ungroup, with
their menu entries and keys. The work is in blender/groups.py (flattening: blender/flatten.py); these are the buttons."""

from __future__ import annotations

import bpy

from . import ReportingOperator
from ..core.graph.registry import GROUP_IDNAME, TREE_IDNAME
from ..nodes.group import KinemaGroupNode, KinemaGroupUse, register_group_uses, unregister_group_uses
from ..blender.groups import group_nodes, ungroup


def _kinema_editor(context) -> bool:
    space = context.space_data
    return getattr(space, "type", "") == "NODE_EDITOR" and getattr(space, "tree_type", "") == TREE_IDNAME \
        and getattr(space, "edit_tree", None) is not None


class _EditorOperator(ReportingOperator):
    """An operator of the Kinema node editor on its open tree, offered when `wants(tree)`."""

    @classmethod
    def poll(cls, context):
        return _kinema_editor(context) and bool(cls.wants(context.space_data.edit_tree))


def _selected(tree) -> list:
    return [n for n in tree.nodes if n.select]


def _active_group(tree):
    node = tree.nodes.active
    return node if node is not None and node.bl_idname == GROUP_IDNAME else None


class KINEMA_OT_group_make(_EditorOperator, bpy.types.Operator):
    """Move the selected nodes into a new node group, used here through a Group node"""

    bl_idname = "kinema.group_make"
    bl_label = "Make Group"
    wants = staticmethod(_selected)

    def execute(self, context):
        tree = context.space_data.edit_tree

        def make():
            node = group_nodes(tree, _selected(tree))
            for other in tree.nodes:
                other.select = False
            node.select = True
            tree.nodes.active = node

        return self.reported(make)


class KINEMA_OT_group_edit(bpy.types.Operator):
    """Open the group this node uses (or, with no group node active, go back up)"""

    bl_idname = "kinema.group_edit"
    bl_label = "Edit Group"

    node: bpy.props.StringProperty(name="Node", description="Group node to open (default: the active node)")

    @classmethod
    def poll(cls, context):
        return _kinema_editor(context)

    def execute(self, context):
        space = context.space_data
        tree = space.edit_tree
        node = tree.nodes.get(self.node) if self.node else tree.nodes.active
        if node is not None and node.bl_idname == GROUP_IDNAME and node.node_tree is not None:
            space.path.append(node.node_tree, node=node)
        elif len(space.path) > 1:
            space.path.pop()
        else:
            return {"PASS_THROUGH"}  # not on a group: leave Tab to Blender
        return {"FINISHED"}


class KINEMA_OT_group_ungroup(_EditorOperator, bpy.types.Operator):
    """Put the active Group node's nodes back into this tree"""

    wants = staticmethod(_active_group)
    bl_idname = "kinema.group_ungroup"
    bl_label = "Ungroup"

    def execute(self, context):
        return self.reported(lambda: ungroup(context.space_data.edit_tree, _active_group(context.space_data.edit_tree)) and None)


def draw_group_menu(self, context):
    if getattr(context.space_data, "tree_type", None) == TREE_IDNAME:
        self.layout.operator("kinema.group_make", icon="NODETREE")
        self.layout.operator("kinema.group_ungroup")


# ---- operators and keymap --------------------------------------------------------------------


CLASSES = (KinemaGroupUse, KinemaGroupNode, KINEMA_OT_group_make, KINEMA_OT_group_edit, KINEMA_OT_group_ungroup)

_keymap_items: list = []


def register():
    register_group_uses()
    keyconfig = bpy.context.window_manager.keyconfigs.addon if bpy.context.window_manager else None
    if keyconfig is not None:
        keymap = keyconfig.keymaps.new(name="Node Editor", space_type="NODE_EDITOR")
        _keymap_items.append((keymap, keymap.keymap_items.new("kinema.group_make", "G", "PRESS", ctrl=True)))
        _keymap_items.append((keymap, keymap.keymap_items.new("kinema.group_edit", "TAB", "PRESS")))
        _keymap_items.append((keymap, keymap.keymap_items.new("kinema.group_ungroup", "G", "PRESS", ctrl=True, alt=True)))
    menu = getattr(bpy.types, "NODE_MT_node", None)
    if menu is not None:
        menu.append(draw_group_menu)


def unregister():
    menu = getattr(bpy.types, "NODE_MT_node", None)
    if menu is not None:
        menu.remove(draw_group_menu)
    for keymap, item in _keymap_items:
        keymap.keymap_items.remove(item)
    _keymap_items.clear()
    unregister_group_uses()
