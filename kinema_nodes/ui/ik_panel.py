"""The Inverse Kinematics panel (sidebar, Kinema tab) and its operators.

The panel is a front end: every button builds or edits the rig's node tree (Robot -> IK
Target -> Solver), and the evaluator does the solving — there is no second engine here.
"""

from __future__ import annotations

import bpy

from . import RigOperator, SidebarPanel
from .. import evaluator
from ..blender.edit import active_rig, add_ik_target, key_target_link, remove_ik_target, rig_solver, rig_tree, snap_to_tool, solver_nodes, target_nodes


# ---- finding the rig's tree and nodes ----------------------------------------------------


# ---- operators ---------------------------------------------------------------------------

class KINEMA_OT_add_ik_target(RigOperator, bpy.types.Operator):
    """Add a control at the tool point and let the solver drive the arm from it"""

    bl_idname = "kinema.add_ik_target"
    bl_label = "Add IK Target"

    link: bpy.props.StringProperty(name="Link", description="Link to aim at (default: the tool point)")

    def execute(self, context):
        from ..core.errors import KinemaError

        rig = active_rig(context)
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")
        wm = context.window_manager
        wm.progress_begin(0, 2)
        try:
            tree, target, solver = add_ik_target(context, rig, self.link or None)
            wm.progress_update(1)
            # PyRoki's one-off compile starts in the background; the NumPy kernel answers meanwhile
            evaluator.warm_up_tree(tree, wait=False)
            wm.progress_update(2)
        except KinemaError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
            if window is not None:
                window.cursor_modal_restore()
        self.report({"INFO"}, f"IK target on '{target.link_name}'")
        return {"FINISHED"}


class _TargetOperator(RigOperator):
    target: bpy.props.StringProperty(name="Target", description="IK Target node (default: the rig's first)")

    def target_node(self, context):
        rig = active_rig(context)
        tree = rig_tree(rig)
        if tree is None:
            return None
        targets = target_nodes(tree, rig)
        if self.target:
            return next((t for t in targets if t.name == self.target), None)
        return targets[0] if targets else None

    def on_target(self, context, work) -> set[str]:
        """`reported(work(target))` on the operator's IK Target; an error when the rig has none."""
        target = self.target_node(context)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        return self.reported(lambda: work(target))


class KINEMA_OT_snap_to_tool(_TargetOperator, bpy.types.Operator):
    """Jump the IK target back onto the tool's current position"""

    bl_idname = "kinema.snap_to_tool"
    bl_label = "Snap to Tool"

    def execute(self, context):
        return self.on_target(context, lambda target: snap_to_tool(active_rig(context), target))


class KINEMA_OT_remove_ik_target(_TargetOperator, bpy.types.Operator):
    """Remove the IK target, returning the rig to plain FK"""

    bl_idname = "kinema.remove_ik_target"
    bl_label = "Remove IK Target"

    def execute(self, context):
        return self.on_target(context, lambda target: remove_ik_target(context, active_rig(context), target))


class KINEMA_OT_resume_live(RigOperator, bpy.types.Operator):
    """Resume live updates after a solve went over budget"""

    bl_idname = "kinema.resume_live"
    bl_label = "Resume Live IK"

    @classmethod
    def poll(cls, context):
        return True

    def execute(self, context):
        trees = [rig_tree(active_rig(context))] if active_rig(context) else evaluator.kinema_trees()
        for tree in trees:
            if tree is None:
                continue
            for solver in solver_nodes(tree):
                solver.over_budget = False
            evaluator.mark_dirty(tree)
            evaluator.run_tree(tree)
        return {"FINISHED"}


class KINEMA_OT_key_target_bone(_TargetOperator, bpy.types.Operator):
    """Keyframe which bone the target aims at, stepped (never passing through the links between)"""

    bl_idname = "kinema.key_target_bone"
    bl_label = "Key Target Bone"

    def execute(self, context):
        from ..blender.rig import robot_for_rig

        target = self.target_node(context)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        robot = robot_for_rig(active_rig(context))
        # The choice in force at this frame (a keyed hand-off included), never the un-keyed
        # Target Bone: keying that here would silently undo the hand-off.
        link = target.link_at_frame(robot, context.scene.frame_current)
        key_target_link(target, robot, link, context.scene.frame_current)
        self.report({"INFO"}, f"Keyed Target Bone '{link}' at frame {context.scene.frame_current}")
        return {"FINISHED"}


# ---- the panel ---------------------------------------------------------------------------

def target_bone_label(target, robot, frame: float | None = None) -> str:
    """What the Target Bone field shows: the link in force at the frame (a keyed choice, a Link
    Switch, else Target Bone, else the tool point), as the solver sees it."""
    from ..core.errors import KinemaError

    try:
        return target.link_at_frame(robot, frame)
    except KinemaError:
        return target.link_name or "Tool point"


class KINEMA_PT_inverse_kinematics(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_inverse_kinematics"
    bl_label = "Inverse Kinematics"

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def draw(self, context):
        from ..nodes.solver import draw_readout

        layout = self.layout
        rig = active_rig(context)
        tree = rig_tree(rig)
        targets = target_nodes(tree, rig)
        if not targets:
            layout.operator("kinema.add_ik_target", icon="CON_KINEMATIC")
            return
        solver = rig_solver(tree, rig)
        from ..blender.rig import robot_for_rig

        robot = robot_for_rig(rig)
        row = layout.row(align=True)
        row.prop(solver, "live", text="Live IK", toggle=True)
        row.prop(solver, "backend", text="")
        for target in targets:
            box = layout.box()
            row = box.row(align=True)
            row.label(text="Target Bone")
            # Switching snaps the control onto the new link, so the arm does not jump.
            row.operator_menu_enum("kinema.switch_target_link_menu", "link", text=target_bone_label(target, robot)).target = target.name
            row = box.row(align=True)
            row.operator("kinema.key_target_bone", icon="KEY_HLT").target = target.name
            row.operator("kinema.snap_to_tool", icon="SNAP_ON").target = target.name
            row.operator("kinema.remove_ik_target", text="", icon="X").target = target.name
            if target.kinema_error:
                box.label(text=target.kinema_error, icon="ERROR")
        layout.operator("kinema.add_ik_target", text="Add IK Target", icon="ADD")
        draw_readout(solver, layout)
        if solver.kinema_error:
            layout.label(text=solver.kinema_error, icon="ERROR")


CLASSES = (
    KINEMA_OT_add_ik_target,
    KINEMA_OT_snap_to_tool,
    KINEMA_OT_remove_ik_target,
    KINEMA_OT_resume_live,
    KINEMA_OT_key_target_bone,
    KINEMA_PT_inverse_kinematics,
)
