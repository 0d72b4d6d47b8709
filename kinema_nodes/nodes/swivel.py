"""Elbow Swivel node: swings the elbow round the shoulder-to-wrist line while the tool holds.

The angle comes from the node's own Swivel property, or, when a ring control is set (Add
Elbow Swivel makes one), from the ring bone's rotation about its own Y axis (the
shoulder-to-wrist line), so the user turns the ring in the viewport and keys it like any
rotation. Reading the ring here (not through a driver) keeps the evaluator the one place
that runs the graph.
"""

import bpy

from ..tree import property_changed
from .solution_node import SolutionNode


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


class KinemaSwivelNode(SolutionNode, bpy.types.Node):
    """Swings the elbow around the shoulder-to-wrist line while the tool holds its pose"""

    kind = "swivel"
    frame_settings = ("swivel_angle",)

    swivel_angle: bpy.props.FloatProperty(
        name="Swivel", subtype="ANGLE", update=property_changed,
        description="Angle of the elbow about the shoulder-to-wrist line; 0 is the elbow up (toward the robot's +Z)")
    ring_object: bpy.props.PointerProperty(name="Ring", type=bpy.types.Object, poll=_is_armature, update=property_changed,
                                           description="Armature holding the ring control (its Y rotation is the angle)")
    ring_bone: bpy.props.StringProperty(name="Ring Bone", update=property_changed)

    def ring(self):
        obj = self.ring_object
        if obj is None or not self.ring_bone or obj.pose is None:
            return None
        return obj.pose.bones.get(self.ring_bone)

    def angle(self) -> float:
        ring = self.ring()
        if ring is not None:
            return float(ring.rotation_euler[1])
        return float(self.swivel_angle)

    def frame_values(self) -> dict:
        return {"swivel_angle": self.angle()}

    def draw_buttons(self, context, layout):
        if self.ring() is not None:
            layout.label(text=f"Ring: {self.ring_bone}", icon="MESH_CIRCLE")
        else:
            layout.prop(self, "swivel_angle")
        layout.prop(self, "ring_object", text="")
        if self.ring_object is not None:
            layout.prop_search(self, "ring_bone", self.ring_object.pose, "bones", text="")
        self.draw_messages(layout)


CLASSES = (KinemaSwivelNode,)
