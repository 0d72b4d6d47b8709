"""IK Target node: a control (pose bone or any object) and the link to aim at it."""

import bpy

from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed, rig_wired_into

TOOL_POINT = "Tool point"


def _control_changed(self, context):
    self.control_name = self.control_object.name if self.control_object else ""
    property_changed(self, context)


class KinemaIKTargetNode(KinemaTreeNode, bpy.types.Node):
    """Aims a link of the robot at a control: a pose bone or any object"""

    kind = "ik_target"

    control_object: bpy.props.PointerProperty(name="Control", type=bpy.types.Object, update=_control_changed,
                                              description="The object (or armature, with a bone) that the link reaches for")
    control_bone: bpy.props.StringProperty(name="Bone", update=property_changed, description="Pose bone of the control object, if it is an armature")
    control_key: bpy.props.StringProperty(
        name="Control Key", description="The key its control bone carries (Bone.kinema.control): found again when renamed")
    control_name: bpy.props.StringProperty(name="Control Name", description="Name of the control when it was chosen, to say which one went missing")
    link_name: bpy.props.StringProperty(name="Target Bone", update=property_changed,
                                        description="Link (bone) to aim; empty means the robot's tool point")
    link_index: bpy.props.IntProperty(name="Target Bone Index", min=0,
                                      description="Keyable choice of link: 0 is Target Bone, k is the k-th link of the robot. "
                                                  "Key it with Key Target Bone so it steps")
    position_weight: bpy.props.FloatProperty(name="Position Weight", default=1.0, min=0.0, update=property_changed)
    rotation_weight: bpy.props.FloatProperty(name="Rotation Weight", default=1.0, min=0.0, update=property_changed)

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
        return rig_wired_into(self)

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

    def link_at_frame(self, robot, frame: float | None = None) -> str:
        """The link this target aims at now: a Link Switch wired into Link, else the keyed index
        if set, else Target Bone, else the tool point. (The switch is asked here too so that the
        evaluator sees the choice change with the frame and solves again.)"""
        switched = self.switched_link(frame)
        if switched and switched in robot.links:
            return switched
        return self.link_for_index(robot, self.keyed_link_index(frame))

    def link_for_index(self, robot, index: int) -> str:
        """The link a Target Bone index picks (1-based; 0 or out of range: Target Bone by name,
        else the tool point)."""
        if 0 < index <= len(robot.links):
            return robot.links[index - 1]
        return self.link_name or robot.tool_point

    def keyed_link_index(self, frame: float | None = None) -> int:
        """The link index in force at `frame` (default: the scene's): read from its stepped keys
        when it is keyed, so the answer never lags the frame (or is the un-keyed value)."""
        from ..blender.animation import node_fcurve

        fcurve = node_fcurve(self, "link_index") if self.id_data.animation_data else None
        if fcurve is None or not len(fcurve.keyframe_points):
            return self.link_index
        if frame is None:
            frame = bpy.context.scene.frame_current
        return max(0, int(round(fcurve.evaluate(frame))))

    def switched_link(self, frame: float | None = None) -> str | None:
        """The link chosen by a Link Switch node wired into the Link input, if any."""
        for link in self.inputs["Link"].links:
            chooser = getattr(link.from_node, "link_at", None)
            if chooser is not None and not link.is_muted and not link.from_node.mute:
                if frame is None:
                    frame = bpy.context.scene.frame_current
                return chooser(frame)
        return None

    def to_spec(self) -> NodeSpec:
        return NodeSpec.make(
            self.name, "ik_target", control=self.control_label(), control_exists=self.control_exists(),
            link=self.link_name, position_weight=self.position_weight, rotation_weight=self.rotation_weight,
        )


CLASSES = (KinemaIKTargetNode,)
