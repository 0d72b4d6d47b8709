"""Swivel, Configuration-Select and Bake nodes: sockets and settings now; they pass the
solution through (and say so) until their behaviour lands."""

import bpy

from ..core.graph import NodeSpec
from ..core.program import PASSTHROUGH_NOTE
from ..tree import KinemaTreeNode, _dirty


class _SolutionNode(KinemaTreeNode):
    kind = ""

    def init(self, context):
        self.inputs.new("KinemaSolutionSocket", "Solution")
        if self.kind != "bake":
            self.outputs.new("KinemaSolutionSocket", "Solution")
        self.kinema_note = PASSTHROUGH_NOTE[self.kind]

    def draw_buttons(self, context, layout):
        for name in self.settings:
            layout.prop(self, name)
        self.draw_messages(layout)

    def to_spec(self) -> NodeSpec:
        return NodeSpec.make(self.name, self.kind, **{name: getattr(self, name) for name in self.settings})


class KinemaSwivelNode(_SolutionNode, bpy.types.Node):
    """Swings the elbow around the shoulder-to-wrist line while the tool holds its pose"""

    bl_idname = "KinemaSwivelNode"
    bl_label = "Elbow Swivel"
    bl_icon = "DRIVER_ROTATIONAL_DIFFERENCE"
    kind = "swivel"
    settings = ("swivel_angle",)

    swivel_angle: bpy.props.FloatProperty(name="Swivel", subtype="ANGLE", update=_dirty)


class KinemaConfigurationNode(_SolutionNode, bpy.types.Node):
    """Chooses among the distinct ways the arm can reach the pose"""

    bl_idname = "KinemaConfigurationNode"
    bl_label = "Configuration Select"
    bl_icon = "MOD_ARRAY"
    kind = "configuration"
    settings = ("configuration_index",)

    configuration_index: bpy.props.IntProperty(name="Configuration", min=0, update=_dirty)


class KinemaBakeNode(_SolutionNode, bpy.types.Node):
    """Solves every frame of a range and keys the joints"""

    bl_idname = "KinemaBakeNode"
    bl_label = "Bake"
    bl_icon = "KEYFRAME"
    kind = "bake"
    settings = ("frame_start", "frame_end")

    frame_start: bpy.props.IntProperty(name="Start", default=1, update=_dirty)
    frame_end: bpy.props.IntProperty(name="End", default=250, update=_dirty)


CLASSES = (KinemaSwivelNode, KinemaConfigurationNode, KinemaBakeNode)
