"""The Inverse Kinematics panel (sidebar, Kinema tab) and its operators.

The panel is a front end: every button builds or edits the rig's node tree (Robot -> IK
Target -> Solver), and the evaluator does the solving — there is no second engine here.
"""

from __future__ import annotations

import bpy
import numpy as np

from . import evaluator

IK_COLLECTION = "IK"
KINEMA_COLLECTION = "Kinema"


# ---- finding the rig's tree and nodes ----------------------------------------------------

def active_rig(context):
    from .rig import is_rig

    obj = context.active_object
    return obj if is_rig(obj) else None


def rig_tree(rig):
    return getattr(rig, "kinema_tree", None)


def solver_nodes(tree):
    return [n for n in tree.nodes if n.bl_idname == "KinemaSolverNode"] if tree else []


def target_nodes(tree, rig=None):
    """IK Target nodes of a tree, inside node groups too."""
    from .groups import all_nodes

    nodes = [n for n in all_nodes(tree) if n.bl_idname == "KinemaIKTargetNode"] if tree else []
    if rig is not None:
        nodes = [n for n in nodes if n.robot_rig() == rig]
    return nodes


def _set_mode(context, rig, mode: str) -> str:
    previous = rig.mode
    if context.view_layer.objects.active != rig:
        context.view_layer.objects.active = rig
    rig.select_set(True)
    if rig.mode != mode:
        bpy.ops.object.mode_set(mode=mode)
    return previous


def _ik_collection(armature, visible: bool = True):
    collections = armature.collections_all
    parent = collections.get(KINEMA_COLLECTION) or armature.collections.new(KINEMA_COLLECTION)
    ik = collections.get(IK_COLLECTION) or armature.collections.new(IK_COLLECTION, parent=parent)
    if visible:
        ik.is_visible = True
        parent.is_visible = True
    return ik


def add_control_bone(context, rig, robot, link: str) -> str:
    """A control bone at `link`'s current pose, parented to the rig's root (never into the arm)."""
    from .core.kinematics import link_pose
    from .rig import read_joint_values

    pose = link_pose(robot, read_joint_values(rig, robot), link)
    previous = _set_mode(context, rig, "EDIT")
    try:
        bones = rig.data.edit_bones
        name = f"IK_{link}"
        bone = bones.new(name)
        name = bone.name  # made unique by Blender
        length = max(0.05, 0.5 * max(b.length for b in bones if b.name != name)) if len(bones) > 1 else 0.1
        bone.head = (0.0, 0.0, 0.0)
        bone.tail = (0.0, length, 0.0)
        bone.matrix = _matrix(pose)
        bone.parent = bones.get(robot.root_link)
        bone.use_deform = False
        _ik_collection(rig.data).assign(bone)
    finally:
        _set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")
    pose_bone = rig.pose.bones[name]
    pose_bone.lock_scale = (True, True, True)
    pose_bone.rotation_mode = "QUATERNION"
    return name


def _matrix(array):
    from mathutils import Matrix

    return Matrix(np.asarray(array, dtype=float).tolist())


def ensure_tree(rig):
    """The rig's tree with a Robot node and a Solver node, made if missing."""
    tree = rig_tree(rig)
    if tree is None:
        tree = bpy.data.node_groups.new(f"Kinema {rig.name}", "KinemaNodeTree")
        tree.use_fake_user = True
        rig.kinema_tree = tree
    robot_node = next((n for n in tree.nodes if n.bl_idname == "KinemaRobotNode" and n.rig == rig), None)
    if robot_node is None:
        robot_node = tree.nodes.new("KinemaRobotNode")
        robot_node.rig = rig
        robot_node.location = (-400, 0)
    solver = next(iter(solver_nodes(tree)), None)
    if solver is None:
        solver = tree.nodes.new("KinemaSolverNode")
        solver.location = (200, 0)
        solver.live = True
    return tree, robot_node, solver


def add_ik_target(context, rig, link: str | None = None, backend: str | None = None):
    """What Add IK Target does; returns (tree, target node, solver node). Leaves the pose as it was."""
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    link = robot.check_link(link or robot.tool_point)
    tree, robot_node, solver = ensure_tree(rig)
    if backend:
        solver.backend = backend
    bone = add_control_bone(context, rig, robot, link)
    target = tree.nodes.new("KinemaIKTargetNode")
    target.location = (-100, -200 * len(target_nodes(tree)))
    target.control_object = rig
    target.control_bone = bone
    target.link_name = link
    tree.links.new(robot_node.outputs["Robot"], target.inputs["Robot"])
    tree.links.new(target.outputs["Target"], solver.inputs["Targets"])
    solver.live = True
    evaluator.mark_dirty(tree)
    return tree, target, solver


def snap_to_tool(rig, target) -> None:
    """Put the control back on the link it aims at (the "resynchronise" button)."""
    from .core.kinematics import link_pose
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    pose = link_pose(robot, read_joint_values(rig, robot), target.link_at_frame(robot))
    control = target.control_object
    if control is None:
        return
    if target.control_bone:
        bone = control.pose.bones[target.control_bone]
        if control == rig:
            bone.matrix = _matrix(pose)
        else:
            bone.matrix = control.matrix_world.inverted_safe() @ rig.matrix_world @ _matrix(pose)
    else:
        control.matrix_world = rig.matrix_world @ _matrix(pose)
    evaluator.mark_dirty(target.id_data)


def remove_ik_target(context, rig, target) -> None:
    """✕: remove the target (its node and its control bone); the rig returns to plain FK."""
    tree = target.id_data
    bone = target.control_bone if target.control_object == rig else ""
    tree.nodes.remove(target)
    if bone and bone in rig.data.bones:
        previous = _set_mode(context, rig, "EDIT")
        try:
            edit_bone = rig.data.edit_bones.get(bone)
            if edit_bone is not None:
                rig.data.edit_bones.remove(edit_bone)
        finally:
            _set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")
    if not target_nodes(tree):
        rig.kinema_tree = None
        bpy.data.node_groups.remove(tree)
    else:
        evaluator.mark_dirty(tree)


# ---- operators ---------------------------------------------------------------------------

class _RigOperator:
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None


class KINEMA_OT_add_ik_target(_RigOperator, bpy.types.Operator):
    """Add a control at the tool point and let the solver drive the arm from it"""

    bl_idname = "kinema.add_ik_target"
    bl_label = "Add IK Target"

    link: bpy.props.StringProperty(name="Link", description="Link to aim at (default: the tool point)")

    def execute(self, context):
        from .core.errors import KinemaError

        rig = active_rig(context)
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")
        wm = context.window_manager
        wm.progress_begin(0, 2)
        try:
            tree, target, solver = add_ik_target(context, rig, self.link or None)
            wm.progress_update(1)
            seconds = evaluator.warm_up_tree(tree)  # the one-off compile, paid now, not on the first drag
            wm.progress_update(2)
        except KinemaError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
            if window is not None:
                window.cursor_modal_restore()
        self.report({"INFO"}, f"IK target on '{target.link_name}' (solver ready in {seconds:.1f} s)")
        return {"FINISHED"}


class _TargetOperator(_RigOperator):
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


class KINEMA_OT_snap_to_tool(_TargetOperator, bpy.types.Operator):
    """Jump the IK target back onto the tool's current position"""

    bl_idname = "kinema.snap_to_tool"
    bl_label = "Snap to Tool"

    def execute(self, context):
        target = self.target_node(context)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        snap_to_tool(active_rig(context), target)
        return {"FINISHED"}


class KINEMA_OT_remove_ik_target(_TargetOperator, bpy.types.Operator):
    """Remove the IK target, returning the rig to plain FK"""

    bl_idname = "kinema.remove_ik_target"
    bl_label = "Remove IK Target"

    def execute(self, context):
        target = self.target_node(context)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        remove_ik_target(context, active_rig(context), target)
        return {"FINISHED"}


class KINEMA_OT_resume_live(_RigOperator, bpy.types.Operator):
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
        from .rig import robot_for_rig

        target = self.target_node(context)
        if target is None:
            self.report({"ERROR"}, "this rig has no IK target")
            return {"CANCELLED"}
        robot = robot_for_rig(active_rig(context))
        link = target.link_name or robot.tool_point
        key_target_link(target, robot, link, context.scene.frame_current)
        return {"FINISHED"}


def key_target_link(target, robot, link: str, frame: float) -> None:
    """Key the target's link choice at `frame`, stepped."""
    from .animation import key_stepped

    target.link_index = robot.links.index(robot.check_link(link)) + 1
    key_stepped(target, "link_index", frame)
    evaluator.mark_dirty(target.id_data)


# ---- the panel ---------------------------------------------------------------------------

class KINEMA_PT_inverse_kinematics(bpy.types.Panel):
    bl_idname = "KINEMA_PT_inverse_kinematics"
    bl_label = "Inverse Kinematics"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Kinema"

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def draw(self, context):
        from .nodes.solver import draw_readout

        layout = self.layout
        rig = active_rig(context)
        tree = rig_tree(rig)
        targets = target_nodes(tree, rig)
        if not targets:
            layout.operator("kinema.add_ik_target", icon="CON_KINEMATIC")
            return
        solver = solver_nodes(tree)[0]
        row = layout.row(align=True)
        row.prop(solver, "live", text="Live IK", toggle=True)
        row.prop(solver, "backend", text="")
        for target in targets:
            box = layout.box()
            row = box.row(align=True)
            row.label(text="Target Bone")
            # Switching snaps the control onto the new link, so the arm does not jump.
            row.operator_menu_enum("kinema.switch_target_link_menu", "link", text=target.link_name or "Tool point").target = target.name
            row.operator("kinema.key_target_bone", text="", icon="KEY_HLT").target = target.name
            row = box.row(align=True)
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
