"""Bake node: solves every frame of a range and keys the joints."""

import bpy

from ..tree import _dirty
from .solution_node import SolutionNode


class KinemaBakeNode(SolutionNode, bpy.types.Node):
    """Solves every frame of a range and keys the joints"""

    bl_idname = "KinemaBakeNode"
    bl_label = "Bake"
    bl_icon = "KEYFRAME"
    kind = "bake"
    settings = ("frame_start", "frame_end")
    has_output = False

    frame_start: bpy.props.IntProperty(name="Start", default=1, update=_dirty)
    frame_end: bpy.props.IntProperty(name="End", default=250, update=_dirty)


CLASSES = (KinemaBakeNode,)
