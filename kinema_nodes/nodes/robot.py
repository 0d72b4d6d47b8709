"""Robot node: the rig (armature) the graph drives."""

import bpy

from ..core.graph import NodeSpec
from ..tree import KinemaTreeNode, _dirty


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


class KinemaRobotNode(KinemaTreeNode, bpy.types.Node):
    """The robot rig this graph drives"""

    bl_idname = "KinemaRobotNode"
    bl_label = "Robot"
    bl_icon = "ARMATURE_DATA"

    rig: bpy.props.PointerProperty(name="Rig", type=bpy.types.Object, poll=_is_armature, update=_dirty,
                                   description="The armature made by Import URDF")

    def init(self, context):
        self.outputs.new("KinemaRobotSocket", "Robot")

    def draw_buttons(self, context, layout):
        layout.prop(self, "rig", text="")
        self.draw_messages(layout)

    def to_spec(self) -> NodeSpec:
        from ..rig import is_rig

        rig = self.rig
        return NodeSpec.make(self.name, "robot", rig=rig.name if rig else "", rig_is_armature=bool(rig) and is_rig(rig))


CLASSES = (KinemaRobotNode,)
