"""Gripper node: one keyable value, 0 open .. 1 closed, for the robot's gripper (#30 item 6).

After the solver, on the Solution chain as the Elbow Swivel is: its stage (core/stages/gripper.py)
sets the gripper joints from the value with the blend the Grasp panel's slider uses
(`core.gripper`), within their limits, mimic fingers following. The solver holds those joints,
so the IK never undoes it, and the Bake node keys them with the arm. Hand: the link a gripper
hangs from (a dual arm has one per arm); empty, every gripper takes the value. Close on the
Object: the fingers stop where they meet what the robot carries on that frame (a Grasp's object).
"""

import bpy

from ..tree import property_changed
from .solution_node import SolutionNode


class KinemaGripperNode(SolutionNode, bpy.types.Node):
    """Opens and closes the robot's gripper: 0 open, 1 closed (key it); the solver holds the fingers where this puts them"""

    kind = "gripper"
    settings = ("hand", "close_on_object")
    frame_settings = ("gripper_value",)

    gripper_value: bpy.props.FloatProperty(name="Gripper", default=0.0, min=0.0, max=1.0, subtype="FACTOR", update=property_changed,
                                           description="How closed the gripper is: 0 open, 1 closed (keyable)")
    hand: bpy.props.StringProperty(name="Hand", update=property_changed,
                                   description="The link the gripper hangs from (empty: every gripper of the robot)")

    close_on_object: bpy.props.BoolProperty(name="Close on the Object", default=False, update=property_changed,
                                            description="Stop closing where the fingers meet the object the robot carries "
                                                        "(its collision shape), instead of passing into it")

    def draw_buttons(self, context, layout):
        layout.prop(self, "gripper_value", slider=True)
        layout.prop(self, "hand")
        layout.prop(self, "close_on_object")
        self.draw_messages(layout)


CLASSES = (KinemaGripperNode,)
