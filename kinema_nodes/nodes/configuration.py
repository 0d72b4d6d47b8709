"""Configuration-Select node: picks one of the distinct ways the arm can reach the pose."""

import bpy

from ..tree import property_changed
from .solution_node import SolutionNode


class KinemaConfigurationNode(SolutionNode, bpy.types.Node):
    """Chooses among the distinct ways the arm can reach the pose"""

    kind = "configuration"
    bl_icon = "MOD_ARRAY"
    frame_settings = ("configuration_index",)

    configuration_index: bpy.props.IntProperty(
        name="Configuration", min=0, update=property_changed,
        description="0: the solver's own answer (nearest where the arm was). 1, 2, ...: the distinct configurations "
                    "ordered from the robot's home pose, the same branch on every frame. Key it with Key Configuration "
                    "(stepped) or drive it to change configuration on purpose")

    def draw_buttons(self, context, layout):
        row = layout.row(align=True)
        row.prop(self, "configuration_index")
        row.operator("kinema.key_configuration_index", text="", icon="KEY_HLT").node = self.name
        self.draw_messages(layout)


def key_configuration_index(node, frame: float, index: int | None = None) -> None:
    """Key the node's configuration index at `frame`, stepped (CONSTANT): a change of index
    never passes through the configurations in between."""
    from ..blender.animation import key_stepped

    if index is not None:
        node.configuration_index = index
    key_stepped(node, "configuration_index", frame)
    node.mark_dirty()


class KINEMA_OT_key_configuration_index(bpy.types.Operator):
    """Keyframe the configuration index at this frame, stepped (never passing through the ones between)"""

    bl_idname = "kinema.key_configuration_index"
    bl_label = "Key Configuration"
    bl_options = {"REGISTER", "UNDO"}

    node: bpy.props.StringProperty(name="Node")

    def execute(self, context):
        tree = getattr(context.space_data, "edit_tree", None) or getattr(context, "node_tree", None)
        node = tree.nodes.get(self.node) if tree else None
        if node is None:
            self.report({"ERROR"}, f"no Configuration Select node '{self.node}' here")
            return {"CANCELLED"}
        key_configuration_index(node, context.scene.frame_current)
        return {"FINISHED"}


CLASSES = (KinemaConfigurationNode, KINEMA_OT_key_configuration_index)
