"""Collapsible sections of the IK panel: Configuration, Elbow Swivel and Target Bone hand-off.

Front ends over the rig's node tree and `core`: Find Solutions asks the tree's Configuration-Select
node (wired in after the Solver if missing) for every distinct way to reach the control, and
◀ ▶ step its index; the evaluator writes the joints (nothing is keyed: key them with Key
All); Add Elbow Swivel makes a ring control on the
shoulder-to-wrist line and wires a Swivel node after the Solver; Switch Target Bone aims the
target elsewhere and snaps the control so nothing jumps.
"""

from __future__ import annotations

import bpy

from . import RigOperator, SidebarPanel
from ..blender.edit import active_rig, rig_solver, rig_tree, target_nodes
from ..blender.edit import configuration_node, first_target, add_elbow_swivel, find_solutions, step_configuration, swivel_nodes

PANEL = "KINEMA_PT_inverse_kinematics"


class _NeedsTarget:
    """Only for a rig with an IK target: the sections' buttons and panels."""

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and first_target(rig) is not None


# ---- operators -------------------------------------------------------------------------

class _SectionOperator(_NeedsTarget, RigOperator):
    pass


class KINEMA_OT_find_solutions(_SectionOperator, bpy.types.Operator):
    """Find every distinct way the arm can reach the target now (step through them with the arrows)"""

    bl_idname = "kinema.find_solutions"
    bl_label = "Find Solutions"

    def execute(self, context):
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")

        def find():
            count = find_solutions(context, active_rig(context))["count"]
            return f"{count} configuration{'s' if count != 1 else ''} reach the target" if count else "no configuration reaches the target"

        try:
            return self.reported(find)
        finally:
            if window is not None:
                window.cursor_modal_restore()


class KINEMA_OT_step_configuration(_SectionOperator, bpy.types.Operator):
    """Apply the next (or previous) configuration (the Configuration Select index; nothing is keyed: key the joints with Key All)"""

    bl_idname = "kinema.step_configuration"
    bl_label = "Step Configuration"

    step: bpy.props.IntProperty(name="Step", default=1)

    def execute(self, context):
        return self.reported(lambda: step_configuration(active_rig(context), self.step))


class KINEMA_OT_add_elbow_swivel(_SectionOperator, bpy.types.Operator):
    """Put a ring on the shoulder-to-wrist line: turn it and the elbow swings while the tool holds"""

    bl_idname = "kinema.add_elbow_swivel"
    bl_label = "Add Elbow Swivel"

    def execute(self, context):
        return self.reported(lambda: f"Elbow swivel ring '{add_elbow_swivel(context, active_rig(context))[1]}'")


# ---- panels ----------------------------------------------------------------------------

class _Section(_NeedsTarget, SidebarPanel):
    bl_parent_id = PANEL
    bl_options = {"DEFAULT_CLOSED"}  # noqa: RUF012 -- Blender reads a set

class KINEMA_PT_ik_configuration(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_configuration"
    bl_label = "Configuration"

    def draw(self, context):
        layout = self.layout
        rig = active_rig(context)
        row = layout.row(align=True)
        row.operator("kinema.find_solutions", icon="VIEWZOOM")
        tree = rig_tree(rig)
        node = configuration_node(tree, rig_solver(tree, rig))
        if node is None or node.solutions_found < 0:
            layout.label(text="The other ways the arm can reach this pose")
            return
        if not node.solutions_found:
            layout.label(text="No configuration reaches the target", icon="INFO")
            return
        index = min(node.configuration_index, node.solutions_found)  # a keyed index past the end shows the last
        row = layout.row(align=True)
        row.operator("kinema.step_configuration", text="", icon="TRIA_LEFT").step = -1
        label = f"{index} of {node.solutions_found}" if index > 0 else f"the solver's own of {node.solutions_found}"
        if index and index == node.solution_you_had:
            label += " (the pose you had)"
        row.label(text=label)
        row.operator("kinema.step_configuration", text="", icon="TRIA_RIGHT").step = 1
        layout.label(text="Nothing is keyed: key the joints with Key All", icon="INFO")


def _spare_joint(rig) -> bool:
    from ..core.stages.swivel import has_spare_joint
    from ..blender.rig import robot_for_rig

    target = first_target(rig)
    robot = robot_for_rig(rig)
    solver = rig_solver(target.id_data, rig)
    held = robot.held_joints(solver.hold_prismatic)
    from ..core.errors import KinemaError

    try:
        return has_spare_joint(robot, target.link_at_frame(robot), held)
    except KinemaError:
        return False


class KINEMA_PT_ik_elbow_swivel(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_elbow_swivel"
    bl_label = "Elbow Swivel"

    @classmethod
    def poll(cls, context):
        return super().poll(context) and _spare_joint(active_rig(context))

    def draw(self, context):
        layout = self.layout
        rig = active_rig(context)
        tree = rig_tree(rig)
        nodes = swivel_nodes(tree)
        if not nodes:
            layout.operator("kinema.add_elbow_swivel", icon="MESH_CIRCLE")
            return
        node = nodes[0]
        ring = node.ring()
        if ring is not None:
            layout.prop(ring, "rotation_euler", index=1, text="Swivel")
        else:
            layout.prop(node, "swivel_angle")
        solver = rig_solver(tree, rig)
        note = next((part for part in solver.summary.split("; ") if part.startswith("swivel")), "")
        if note:
            box = layout.row()
            box.alert = "saturated" in note
            box.label(text=note, icon="ERROR" if "saturated" in note else "DRIVER_ROTATIONAL_DIFFERENCE")


class KINEMA_PT_ik_target_bone(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_target_bone"
    bl_label = "Hand-off"

    def draw(self, context):
        rig = active_rig(context)
        layout = self.layout
        tree = rig_tree(rig)
        solver = rig_solver(tree, rig)
        if solver.solving_to and solver.backend != "OFF":
            layout.label(text=f"Solving to '{solver.solving_to}'", icon="BONE_DATA")
        for target in target_nodes(tree, rig):
            layout.operator_menu_enum("kinema.switch_target_link_menu", "link", text="Switch Target Bone…").target = target.name


def _link_items(self, context):
    from ..blender.rig import robot_for_rig

    rig = active_rig(context)
    if rig is None:
        return []
    robot = robot_for_rig(rig)
    return [(name, name, f"Aim at '{name}'") for name in robot.links if robot.chain_joint_names(name)]


class KINEMA_OT_switch_target_link_menu(_SectionOperator, bpy.types.Operator):
    """Aim the IK target at another bone; the control snaps onto it so nothing jumps (keyed if the choice is keyed)"""

    bl_idname = "kinema.switch_target_link_menu"
    bl_label = "Switch Target Bone"

    target: bpy.props.StringProperty()
    link: bpy.props.EnumProperty(name="Bone", items=_link_items)

    def execute(self, context):
        return bpy.ops.kinema.switch_target_bone(target=self.target, link=self.link)


CLASSES = (
    KINEMA_OT_find_solutions,
    KINEMA_OT_step_configuration,
    KINEMA_OT_add_elbow_swivel,
    KINEMA_OT_switch_target_link_menu,
    KINEMA_PT_ik_configuration,
    KINEMA_PT_ik_elbow_swivel,
    KINEMA_PT_ik_target_bone,
)
