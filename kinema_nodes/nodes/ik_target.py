"""IK Target node: a control (pose bone or any object) and the link to aim at it."""

import bpy

from ..core.graph import NodeSpec
from ..tree import KinemaTreeNode, _dirty

TOOL_POINT = "Tool point"


def _control_changed(self, context):
    self.control_name = self.control_object.name if self.control_object else ""
    _dirty(self, context)


class KinemaIKTargetNode(KinemaTreeNode, bpy.types.Node):
    """Aims a link of the robot at a control: a pose bone or any object"""

    bl_idname = "KinemaIKTargetNode"
    bl_label = "IK Target"
    bl_icon = "CON_KINEMATIC"

    control_object: bpy.props.PointerProperty(name="Control", type=bpy.types.Object, update=_control_changed,
                                              description="The object (or armature, with a bone) that the link reaches for")
    control_bone: bpy.props.StringProperty(name="Bone", update=_dirty, description="Pose bone of the control object, if it is an armature")
    control_name: bpy.props.StringProperty(name="Control Name", description="Name of the control when it was chosen, to say which one went missing")
    link_name: bpy.props.StringProperty(name="Target Bone", update=_dirty,
                                        description="Link (bone) to aim; empty means the robot's tool point")
    link_index: bpy.props.IntProperty(name="Target Bone Index", min=0,
                                      description="Keyable choice of link: 0 is Target Bone, k is the k-th link of the robot. "
                                                  "Key it with Key Target Bone so it steps")
    position_weight: bpy.props.FloatProperty(name="Position Weight", default=1.0, min=0.0, update=_dirty)
    rotation_weight: bpy.props.FloatProperty(name="Rotation Weight", default=1.0, min=0.0, update=_dirty)

    def init(self, context):
        self.inputs.new("KinemaRobotSocket", "Robot")
        self.inputs.new("KinemaLinkSocket", "Link")
        self.outputs.new("KinemaTargetSocket", "Target")

    def draw_buttons(self, context, layout):
        layout.prop(self, "control_object", text="")
        if self.control_object and self.control_object.type == "ARMATURE":
            layout.prop_search(self, "control_bone", self.control_object.pose, "bones", text="")
        rig = self.robot_rig()
        if rig is not None:
            layout.prop_search(self, "link_name", rig.data, "bones", text="Link")
        else:
            layout.prop(self, "link_name", text="Link")
        layout.prop(self, "position_weight")
        layout.prop(self, "rotation_weight")
        self.draw_messages(layout)

    def robot_rig(self):
        for link in self.inputs["Robot"].links:
            rig = getattr(link.from_node, "rig", None)
            if rig is not None:
                return rig
        return None

    def control_exists(self) -> bool:
        obj = self.control_object
        if obj is None:
            return False
        if self.control_bone:
            return obj.pose is not None and self.control_bone in obj.pose.bones
        return True

    def control_label(self) -> str:
        name = self.control_object.name if self.control_object else self.control_name
        return f"{name}:{self.control_bone}" if name and self.control_bone else name

    def link_at_frame(self, robot) -> str:
        """The link this target aims at now: the keyed index if set, else Target Bone, else the tool point."""
        index = self.link_index
        if 0 < index <= len(robot.links):
            return robot.links[index - 1]
        return self.link_name or robot.tool_point

    def to_spec(self) -> NodeSpec:
        return NodeSpec.make(
            self.name, "ik_target", control=self.control_label(), control_exists=self.control_exists(),
            link=self.link_name, position_weight=self.position_weight, rotation_weight=self.rotation_weight,
        )


CLASSES = (KinemaIKTargetNode,)
