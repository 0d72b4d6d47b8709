"""Configuration-Select node: picks one of the distinct ways the arm can reach the pose."""

import bpy

from ..tree import _dirty
from .solution_node import SolutionNode


class KinemaConfigurationNode(SolutionNode, bpy.types.Node):
    """Chooses among the distinct ways the arm can reach the pose"""

    bl_idname = "KinemaConfigurationNode"
    bl_label = "Configuration Select"
    bl_icon = "MOD_ARRAY"
    kind = "configuration"
    frame_settings = ("configuration_index",)

    configuration_index: bpy.props.IntProperty(
        name="Configuration", min=0, update=_dirty,
        description="0: the solver's own answer (nearest where the arm was). 1, 2, ...: the distinct configurations "
                    "ordered from the robot's home pose, the same branch on every frame. Key it (stepped) or drive it "
                    "to change configuration on purpose")


CLASSES = (KinemaConfigurationNode,)
