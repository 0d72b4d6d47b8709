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


CLASSES = (KinemaConfigurationNode,)
