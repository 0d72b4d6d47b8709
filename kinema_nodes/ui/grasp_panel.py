"""The Grasp section of the Kinema tab: the Gripper slider, Key Grasp / Key Release and Bake
Grasp (#30 items 5 and 6). Thin: every button calls blender/grasping.py."""

import bpy

from . import RigOperator, SidebarPanel


def _carried(context, name: str):
    """The object named, else the selected object that is not the active robot."""
    if name:
        return bpy.data.objects.get(name)
    rig = context.active_object
    others = [o for o in (context.selected_objects or ()) if o != rig]
    return others[0] if others else None


class KINEMA_OT_key_grasp(RigOperator, bpy.types.Operator):
    """The robot's tool point (or the link named) takes hold of the selected object at this frame, where it is now"""

    bl_idname = "kinema.key_grasp"
    bl_label = "Key Grasp"

    object_name: bpy.props.StringProperty(name="Object", description="The object to carry (default: the selected one)")
    link: bpy.props.StringProperty(name="Link", description="The link that carries it (default: the tool point)")

    def execute(self, context):
        from ..blender.edit import active_rig
        from ..blender.grasping import key_grasp

        return self.reported(lambda: key_grasp(context, _carried(context, self.object_name), active_rig(context), self.link or None))


class KINEMA_OT_key_release(RigOperator, bpy.types.Operator):
    """The carried object lets go at this frame and stays where it was put"""

    bl_idname = "kinema.key_release"
    bl_label = "Key Release"

    object_name: bpy.props.StringProperty(name="Object", description="The carried object (default: the selected one)")

    def execute(self, context):
        from ..blender.grasping import key_release

        return self.reported(lambda: key_release(context, _carried(context, self.object_name)))


class KINEMA_OT_bake_grasp(RigOperator, bpy.types.Operator):
    """Key the carried object's own transform at every frame of the scene, so the shot plays without the add-on"""

    bl_idname = "kinema.bake_grasp"
    bl_label = "Bake Grasp"

    object_name: bpy.props.StringProperty(name="Object", description="The carried object (default: the selected one)")

    def execute(self, context):
        from ..blender.grasping import bake_grasp

        obj = _carried(context, self.object_name)
        return self.reported(lambda: f"{bake_grasp(context, obj)} frames keyed on {obj.name}")


class KINEMA_OT_clear_grasps(RigOperator, bpy.types.Operator):
    """Forget the selected object's grasps and releases; it goes back to where it was before the first grasp"""

    bl_idname = "kinema.clear_grasps"
    bl_label = "Clear Grasps"

    object_name: bpy.props.StringProperty(name="Object", description="The carried object (default: the selected one)")

    def execute(self, context):
        from ..blender.grasping import clear_grasps

        return self.reported(lambda: clear_grasps(_carried(context, self.object_name)))


class KINEMA_OT_key_grasp_node(bpy.types.Operator):
    """Key this Grasp node's grasp and release on its object, where the arm is at those frames (again after changing the arm's animation)"""

    bl_idname = "kinema.key_grasp_node"
    bl_label = "Key Grasp"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 -- Blender reads a set

    tree: bpy.props.StringProperty(name="Tree")
    node: bpy.props.StringProperty(name="Node")

    def execute(self, context):
        from ..blender.grasping import key_grasp_node
        from ..core.errors import KinemaError

        tree = bpy.data.node_groups.get(self.tree)
        node = tree.nodes.get(self.node) if tree is not None else None
        if node is None or getattr(node, "kind", "") != "grasp":
            self.report({"ERROR"}, f"no Grasp node '{self.node}' in '{self.tree}'")
            return {"CANCELLED"}
        try:
            self.report({"INFO"}, key_grasp_node(context, node))
        except KinemaError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        return {"FINISHED"}


class KINEMA_PT_grasp(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_grasp"
    bl_label = "Grasp"
    bl_options = {"DEFAULT_CLOSED"}  # noqa: RUF012 -- Blender reads a set

    @classmethod
    def poll(cls, context):
        from ..blender.edit import active_rig

        return active_rig(context) is not None

    def draw(self, context):
        from ..blender.edit import active_rig

        layout = self.layout
        rig = active_rig(context)
        from ..blender.grasping import MAX_GRIPPERS
        from ..blender.rig import robot_for_rig
        from ..core.gripper import gripper_hands

        hands = gripper_hands(robot_for_rig(rig))[:MAX_GRIPPERS]
        for k, (hand, _) in enumerate(hands):
            layout.prop(rig, "kinema_gripper", index=k, slider=True, text=f"Gripper ({hand})" if len(hands) > 1 else "Gripper")
        if not hands:
            layout.label(text="No gripper found on this robot")
        row = layout.row(align=True)
        row.operator("kinema.key_grasp", icon="PINNED")
        row.operator("kinema.key_release", icon="UNPINNED")
        row = layout.row(align=True)
        row.operator("kinema.bake_grasp", icon="REC")
        row.operator("kinema.clear_grasps", icon="X")
        carried = _carried(context, "")
        if carried is not None:
            column = layout.column(align=True)
            for event in sorted(carried.kinema_grasps, key=lambda e: e.frame):
                who = f"{event.holder.name if event.holder else '?'}: {event.link}" if event.kind == "GRASP" else "released"
                column.label(text=f"{event.frame}: {who}")


CLASSES = (KINEMA_OT_key_grasp, KINEMA_OT_key_release, KINEMA_OT_key_grasp_node, KINEMA_OT_bake_grasp, KINEMA_OT_clear_grasps, KINEMA_PT_grasp)
