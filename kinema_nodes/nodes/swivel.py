"""Elbow Swivel node: swings the elbow round the shoulder-to-wrist line while the tool holds."""

import bpy

from ..tree import _dirty
from .solution_node import SolutionNode


class KinemaSwivelNode(SolutionNode, bpy.types.Node):
    """Swings the elbow around the shoulder-to-wrist line while the tool holds its pose"""

    bl_idname = "KinemaSwivelNode"
    bl_label = "Elbow Swivel"
    bl_icon = "DRIVER_ROTATIONAL_DIFFERENCE"
    kind = "swivel"
    frame_settings = ("swivel_angle",)

    swivel_angle: bpy.props.FloatProperty(name="Swivel", subtype="ANGLE", update=_dirty)


CLASSES = (KinemaSwivelNode,)
