"""Collapsible sections of the IK panel: Configuration, Elbow Swivel and Target Bone hand-off.

Front ends over the rig's node tree and `core`: Find Solutions asks `core.configurations`
for every distinct way to reach the control and ◀ ▶ write one of them to the joints (only
the joint values: key them with Key All); Add Elbow Swivel makes a ring control on the
shoulder-to-wrist line and wires a Swivel node after the Solver; Switch Target Bone aims the
target elsewhere and snaps the control so nothing jumps.
"""

from __future__ import annotations

import bpy
import numpy as np

from . import evaluator
from .ik_panel import _ik_collection, _set_mode, active_rig, rig_tree, solver_nodes, target_nodes

PANEL = "KINEMA_PT_inverse_kinematics"
RING_SHAPE = "Kinema Swivel Ring"

#: Found configurations per rig name: {"configurations": [...], "index": int, "link": str}.
#: UI state only (not saved with the file): Find Solutions again after reopening.
_found: dict[str, dict] = {}


def _first_target(rig):
    targets = target_nodes(rig_tree(rig), rig)
    return targets[0] if targets else None


def _goals_and_options(rig, target, robot):
    """The IK goals the solver sees for the rig's targets now, and matching options."""
    from .core.program import pose_to_target
    from .core.solvers import IKTarget, SolveOptions

    tree = rig_tree(rig)
    goals = []
    for node in target_nodes(tree, rig):
        pose = evaluator.control_pose(node, rig)
        if pose is None:
            continue
        position, wxyz = pose_to_target(pose)
        goals.append(IKTarget(node.link_at_frame(robot), tuple(position), tuple(wxyz), node.position_weight, node.rotation_weight))
    solver = solver_nodes(tree)[0]
    held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p) if solver.hold_prismatic else frozenset()
    options = SolveOptions(backend="numpy", position_tolerance=max(solver.position_tolerance, 1e-6),
                           rotation_tolerance=max(solver.rotation_tolerance, 1e-6), held_joints=held)
    return goals, options


def find_solutions(context, rig) -> dict:
    """What Find Solutions does: every distinct configuration for the rig's targets now."""
    from .core.configurations import find_configurations
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    target = _first_target(rig)
    if target is None:
        raise ValueError("this rig has no IK target")
    goals, options = _goals_and_options(rig, target, robot)
    current = read_joint_values(rig, robot)
    configurations = find_configurations(robot, goals, current, options, hold_prismatic=False)
    index = next((i for i, c in enumerate(configurations) if c.current), 0)
    state = {"configurations": configurations, "index": index, "link": goals[0].link if goals else ""}
    _found[rig.name] = state
    return state


def step_configuration(rig, step: int) -> int:
    """◀ ▶: apply the next (or previous) found configuration by writing joint values only."""
    from .core.configurations import step_index
    from .rig import robot_for_rig, write_joint_values

    state = _found.get(rig.name)
    if not state or not state["configurations"]:
        raise ValueError("click Find Solutions first")
    index = step_index(len(state["configurations"]), state["index"], step)
    write_joint_values(rig, robot_for_rig(rig), state["configurations"][index].joints)
    state["index"] = index
    return index


# ---- Elbow Swivel ----------------------------------------------------------------------

def _ring_shape():
    """A unit circle in the bone's XZ plane (round its Y axis), shared by every ring."""
    shape = bpy.data.objects.get(RING_SHAPE)
    if shape is not None:
        return shape
    angles = np.linspace(0, 2 * np.pi, 48, endpoint=False)
    vertices = [(float(np.cos(a)), 0.0, float(np.sin(a))) for a in angles]
    edges = [(i, (i + 1) % len(vertices)) for i in range(len(vertices))]
    mesh = bpy.data.meshes.new(RING_SHAPE)
    mesh.from_pydata(vertices, edges, [])
    return bpy.data.objects.new(RING_SHAPE, mesh)


def swivel_nodes(tree):
    return [n for n in tree.nodes if n.bl_idname == "KinemaSwivelNode"] if tree else []


def add_elbow_swivel(context, rig, target=None):
    """What Add Elbow Swivel does: a ring bone on the shoulder-to-wrist line (in Kinema/IK,
    parented to the rig's root, kept on the line by constraints as the arm moves) whose Y
    rotation is the swivel angle, set to the arm's current angle so nothing moves, and a Swivel
    node wired after the Solver. Returns (node, bone name)."""
    from .core.swivel import has_spare_joint, swivel_geometry
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    target = target or _first_target(rig)
    if target is None:
        raise ValueError("add an IK target first")
    tree = target.id_data
    solver = solver_nodes(tree)[0]
    held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p) if solver.hold_prismatic else frozenset()
    link = target.link_at_frame(robot)
    if not has_spare_joint(robot, link, held):
        raise ValueError(f"the chain to '{link}' has no spare joint: its elbow cannot swing")
    geometry = swivel_geometry(robot, link, read_joint_values(rig, robot), held)
    shoulder, axis, angle = geometry["shoulder"], geometry["axis"], float(geometry["angle"])
    from .core.swivel import _reference

    reference, _ = _reference(axis[None])
    length = 0.5 * float(np.linalg.norm(geometry["wrist"] - shoulder))
    previous = _set_mode(context, rig, "EDIT")
    try:
        bones = rig.data.edit_bones
        bone = bones.new("IK_swivel")
        name = bone.name
        bone.head = tuple(shoulder)
        bone.tail = tuple(shoulder + axis * length)
        bone.align_roll(tuple(np.cross(reference[0], axis)))  # bone X = the swivel's zero direction
        bone.parent = bones.get(robot.root_link)
        bone.use_deform = False
        _ik_collection(rig.data).assign(bone)
    finally:
        _set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")
    ring = rig.pose.bones[name]
    ring.rotation_mode = "XYZ"
    ring.lock_location = (True, True, True)
    ring.lock_rotation = (True, False, True)
    ring.lock_scale = (True, True, True)
    ring.rotation_euler = (0.0, angle, 0.0)
    ring.custom_shape = _ring_shape()
    # Keep the ring on the shoulder-to-wrist line as the arm moves (display only: the angle is
    # read from the ring's own Y rotation, which these constraints leave alone).
    from .core.swivel import swivel_links

    shoulder_link, _, wrist_link = swivel_links(robot, link, held)
    follow = ring.constraints.new("COPY_LOCATION")
    follow.target, follow.subtarget = rig, shoulder_link
    aim = ring.constraints.new("DAMPED_TRACK")
    aim.target, aim.subtarget, aim.track_axis = rig, wrist_link, "TRACK_Y"
    node = next(iter(swivel_nodes(tree)), None)
    if node is None:
        node = tree.nodes.new("KinemaSwivelNode")
        node.location = (solver.location.x + 250, solver.location.y)
        followers = [(link.to_node, link.to_socket) for link in solver.outputs["Solution"].links]
        for to_node, to_socket in followers:
            tree.links.new(node.outputs["Solution"], to_socket)
        tree.links.new(solver.outputs["Solution"], node.inputs["Solution"])
    node.swivel_angle = angle
    node.ring_object = rig
    node.ring_bone = name
    evaluator.mark_dirty(tree)
    return node, name


# ---- operators -------------------------------------------------------------------------

class _SectionOperator:
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and _first_target(rig) is not None


class KINEMA_OT_find_solutions(_SectionOperator, bpy.types.Operator):
    """Find every distinct way the arm can reach the target now (step through them with the arrows)"""

    bl_idname = "kinema.find_solutions"
    bl_label = "Find Solutions"

    def execute(self, context):
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")
        try:
            state = find_solutions(context, active_rig(context))
        except ValueError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if window is not None:
                window.cursor_modal_restore()
        count = len(state["configurations"])
        self.report({"INFO"}, f"{count} configuration{'s' if count != 1 else ''} reach the target" if count
                    else "no configuration reaches the target")
        return {"FINISHED"}


class KINEMA_OT_step_configuration(_SectionOperator, bpy.types.Operator):
    """Apply the next (or previous) configuration: writes joint values only; key them with Key All"""

    bl_idname = "kinema.step_configuration"
    bl_label = "Step Configuration"

    step: bpy.props.IntProperty(name="Step", default=1)

    def execute(self, context):
        try:
            step_configuration(active_rig(context), self.step)
        except ValueError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        return {"FINISHED"}


class KINEMA_OT_add_elbow_swivel(_SectionOperator, bpy.types.Operator):
    """Put a ring on the shoulder-to-wrist line: turn it and the elbow swings while the tool holds"""

    bl_idname = "kinema.add_elbow_swivel"
    bl_label = "Add Elbow Swivel"

    def execute(self, context):
        from .core.errors import KinemaError

        try:
            _node, bone = add_elbow_swivel(context, active_rig(context))
        except (ValueError, KinemaError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Elbow swivel ring '{bone}'")
        return {"FINISHED"}


# ---- panels ----------------------------------------------------------------------------

class _Section:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Kinema"
    bl_parent_id = PANEL
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and _first_target(rig) is not None


class KINEMA_PT_ik_configuration(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_configuration"
    bl_label = "Configuration"

    def draw(self, context):
        layout = self.layout
        rig = active_rig(context)
        row = layout.row(align=True)
        row.operator("kinema.find_solutions", icon="VIEWZOOM")
        state = _found.get(rig.name)
        if not state:
            layout.label(text="The other ways the arm can reach this pose")
            return
        configurations = state["configurations"]
        if not configurations:
            layout.label(text="No configuration reaches the target", icon="INFO")
            return
        index = state["index"]
        row = layout.row(align=True)
        row.operator("kinema.step_configuration", text="", icon="TRIA_LEFT").step = -1
        label = f"{index + 1} of {len(configurations)}"
        if configurations[index].current:
            label += " (the pose you had)"
        row.label(text=label)
        row.operator("kinema.step_configuration", text="", icon="TRIA_RIGHT").step = 1
        layout.label(text="Writes joint values only: key them with Key All", icon="INFO")


def _spare_joint(rig) -> bool:
    from .core.swivel import has_spare_joint
    from .rig import robot_for_rig

    target = _first_target(rig)
    robot = robot_for_rig(rig)
    solver = solver_nodes(target.id_data)[0]
    held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p) if solver.hold_prismatic else frozenset()
    from .core.errors import KinemaError

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
        solver = solver_nodes(tree)[0]
        note = next((part for part in solver.summary.split("; ") if part.startswith("swivel")), "")
        if note:
            box = layout.row()
            box.alert = "saturated" in note
            box.label(text=note, icon="ERROR" if "saturated" in note else "DRIVER_ROTATIONAL_DIFFERENCE")


class KINEMA_PT_ik_target_bone(_Section, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_target_bone"
    bl_label = "Hand-off"

    def draw(self, context):
        layout = self.layout
        rig = active_rig(context)
        tree = rig_tree(rig)
        solver = solver_nodes(tree)[0]
        if solver.solving_to:
            layout.label(text=f"Solving to '{solver.solving_to}'", icon="BONE_DATA")
        for target in target_nodes(tree, rig):
            layout.operator_menu_enum("kinema.switch_target_link_menu", "link", text="Switch Target Bone…").target = target.name


def _link_items(self, context):
    from .rig import robot_for_rig

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
