"""Configuration-Select node: picks one of the distinct ways the arm can reach the pose."""

import bpy

from ..tree import property_changed
from .solution_node import SolutionNode


class KinemaConfigurationNode(SolutionNode, bpy.types.Node):
    """Chooses among the distinct ways the arm can reach the pose"""

    kind = "configuration"
    frame_settings = ("configuration_index",)

    configuration_index: bpy.props.IntProperty(
        name="Configuration", min=0, update=property_changed,
        description="0: the solver's own answer (nearest where the arm was). 1, 2, ...: the distinct configurations "
                    "ordered from the robot's home pose, the same branch on every frame. Key it with Key Configuration "
                    "(stepped) or drive it to change configuration on purpose")
    # What the last Find Solutions (or ◀ ▶) found for the pose then: shown, never solved from.
    solutions_found: bpy.props.IntProperty(
        name="Solutions Found", default=-1, options={"HIDDEN"},  # noqa: RUF012 -- Blender reads a set
        description="How many configurations the last Find Solutions found (-1: not searched yet)")
    solution_you_had: bpy.props.IntProperty(
        name="Solution You Had", default=0, options={"HIDDEN"},  # noqa: RUF012 -- Blender reads a set
        description="Which of them was the solver's own answer when it searched (0: none)")

    def draw_buttons(self, context, layout):
        row = layout.row(align=True)
        row.prop(self, "configuration_index")
        row.operator("kinema.key_configuration_index", text="", icon="KEY_HLT").node = self.name
        if self.solutions_found >= 0:
            layout.label(text=f"{self.solutions_found} found by Find Solutions")
        self.draw_messages(layout)


CLASSES = (KinemaConfigurationNode,)
