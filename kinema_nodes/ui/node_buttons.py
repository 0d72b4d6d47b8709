"""The buttons drawn on nodes: Key Configuration (Configuration Select), Switch Target Bone
(IK Target) and the rows of a Link Switch.

A node only describes itself (nodes/: properties, sockets, its spec); what its buttons do to the
rig and its keys is here, calling the node's own module or blender/edit.py.
"""

import bpy

from . import ReportingOperator, RigOperator
from ..blender.edit import key_configuration_index


class _NodeButton(ReportingOperator):
    """A button on a node: one undo step, on the node named `node` in the editor's tree."""

    node: bpy.props.StringProperty(name="Node")

    def node_here(self, context, what: str | None = None):
        """The node, or None; with `what` (its kind in words) a missing node is a ValueError."""
        tree = getattr(context.space_data, "edit_tree", None) or getattr(context, "node_tree", None)
        node = tree.nodes.get(self.node) if tree else None
        if node is None and what:
            raise ValueError(f"no {what} node '{self.node}' here")
        return node


class KINEMA_OT_key_configuration_index(_NodeButton, bpy.types.Operator):
    """Keyframe the configuration index at this frame, stepped (never passing through the ones between)"""

    bl_idname = "kinema.key_configuration_index"
    bl_label = "Key Configuration"

    def execute(self, context):
        return self.reported(lambda: key_configuration_index(self.node_here(context, "Configuration Select"),
                                                             context.scene.frame_current))


class KINEMA_OT_switch_target_bone(RigOperator, bpy.types.Operator):
    """Aim the IK target at another bone; the control snaps onto it so the arm does not jump"""

    bl_idname = "kinema.switch_target_bone"
    bl_label = "Switch Target Bone"
    bl_property = "link"

    target: bpy.props.StringProperty(name="Target", description="IK Target node (default: the rig's first)")
    link: bpy.props.StringProperty(name="Link", description="Bone to aim at")
    key: bpy.props.EnumProperty(name="Key", items=[("AUTO", "Auto", "Key when the choice is already keyed"),
                                                   ("KEY", "Key", "Key the choice at this frame (stepped)"),
                                                   ("NO", "Don't Key", "Set the choice without a key")], default="AUTO")

    def execute(self, context):
        from ..blender.edit import active_rig, rig_tree, target_nodes
        from ..blender.edit import switch_target_link

        rig = active_rig(context)
        tree = rig_tree(rig)
        targets = target_nodes(tree, rig) if tree else []
        target = tree.nodes.get(self.target) if (tree and self.target) else (targets[0] if targets else None)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        key = {"AUTO": None, "KEY": True, "NO": False}[self.key]
        return self.reported(lambda: f"Solving to '{switch_target_link(context, rig, target, self.link, key)}'")


class KINEMA_OT_link_switch_row(_NodeButton, bpy.types.Operator):
    """Add a row to a Link Switch node, or remove one"""

    bl_idname = "kinema.link_switch_row"
    bl_label = "Link Switch Row"

    index: bpy.props.IntProperty(default=-1, description="Row to remove; -1 adds a row")

    def execute(self, context):
        node = self.node_here(context)
        if node is None:
            return {"CANCELLED"}
        if self.index < 0:
            last = node.ranges[-1].start + 1 if len(node.ranges) else float(context.scene.frame_current)
            node.add_range(last, "")
        elif self.index < len(node.ranges):
            node.ranges.remove(self.index)
            node.mark_dirty()
        return {"FINISHED"}


CLASSES = (KINEMA_OT_key_configuration_index, KINEMA_OT_switch_target_bone, KINEMA_OT_link_switch_row)
