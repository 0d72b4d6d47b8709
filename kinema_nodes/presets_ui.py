"""Rig presets in Blender: apply a preset to a rig (build its tree), save a rig's tree or a node
group as a preset, and the Presets sub-panel of the IK panel.

The format and the binding of roles live in `core.presets` / `core.roles`; this module only
turns a bound preset into nodes, control bones and keys (and back). Presets are found in the
user's preset folder (`user_preset_folder`, or `$KINEMA_NODES_PRESET_DIR`) and then among the
presets shipped with the extension (`kinema_nodes/presets/`).
"""

from __future__ import annotations

import os
from pathlib import Path

import bpy

from . import evaluator
from .core.presets import (
    BoundPreset,
    Preset,
    PresetError,
    bind,
    describe_unbound,
    file_name,
    find_preset,
    load_preset,
    make_preset,
    save_preset,
)
from .ik_panel import KINEMA_PT_inverse_kinematics, _set_mode, active_rig, add_control_bone, key_target_link, rig_tree

PRESET_DIR_ENV = "KINEMA_NODES_PRESET_DIR"
SHIPPED_PRESETS = Path(__file__).resolve().parent / "presets"

#: Preset node kind -> node type.
NODE_TYPES = {
    "robot": "KinemaRobotNode", "ik_target": "KinemaIKTargetNode", "solver": "KinemaSolverNode",
    "swivel": "KinemaSwivelNode", "configuration": "KinemaConfigurationNode", "bake": "KinemaBakeNode",
    "link_switch": "KinemaLinkSwitchNode",
}
#: Spec params whose node property has another name.
PARAM_PROPERTIES = {("ik_target", "link"): "link_name"}
#: Node columns when a preset is laid out (x by kind).
COLUMNS = {"robot": -500, "link_switch": -500, "ik_target": -220, "solver": 80, "swivel": 330, "configuration": 580, "bake": 830}


# ---- where presets live ------------------------------------------------------------------------

def user_preset_folder() -> Path:
    """Where Save Preset writes: `$KINEMA_NODES_PRESET_DIR`, else Blender's user presets folder."""
    override = os.environ.get(PRESET_DIR_ENV)
    if override:
        folder = Path(override)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return Path(bpy.utils.user_resource("SCRIPTS", path="presets/kinema_nodes", create=True))


def preset_folders() -> list[Path]:
    return [user_preset_folder(), SHIPPED_PRESETS]


def available_presets() -> list[tuple[Path, Preset]]:
    """Every readable preset, the user's first; a user preset hides a shipped one of the same file name."""
    found, seen = [], set()
    for folder in preset_folders():
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if path.name in seen:
                continue
            try:
                found.append((path, load_preset(path)))
            except PresetError:
                continue
            seen.add(path.name)
    return found


def preset_path(name_or_path: str | Path) -> Path:
    """A preset by display name, file name or path."""
    path = Path(name_or_path)
    if path.suffix == ".json" and path.is_file():
        return path
    return find_preset(str(name_or_path), preset_folders())


# ---- applying ------------------------------------------------------------------------------

def robot_node_of(tree, rig):
    from .groups import all_nodes

    if tree is None:
        return None
    return next((n for n in all_nodes(tree) if n.bl_idname == "KinemaRobotNode" and n.rig == rig), None)


def role_overrides(rig) -> dict[str, str]:
    """Roles set by hand on the Robot node of the rig's tree."""
    node = robot_node_of(rig_tree(rig), rig)
    return node.role_override_map() if node is not None else {}


def bind_to_rig(preset: Preset, rig) -> BoundPreset:
    """Bind `preset` to `rig` (roles inferred, the Robot node's overrides on top), or raise
    PresetError saying which roles could not bind. Changes nothing."""
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    plan, unbound = bind(preset, robot, role_overrides(rig))
    if plan is None:
        raise PresetError(describe_unbound(preset, rig.name, unbound))
    missing = sorted({NODE_TYPES[n.kind] for n in plan.spec.nodes}
                     - {t for t in NODE_TYPES.values() if bpy.types.Node.bl_rna_get_subclass_py(t) is not None})
    if missing:
        raise PresetError(f"preset '{preset.name}' needs node type(s) {', '.join(missing)}, which this version of "
                          "Kinema Nodes does not have. Nothing was changed.")
    others = _other_rigs(rig_tree(rig), rig)
    if others:
        raise PresetError(f"the tree '{rig.kinema_tree.name}' of '{rig.name}' also drives {', '.join(others)}; a preset "
                          "replaces a rig's whole tree, so give this rig a tree of its own first. Nothing was changed.")
    return plan


def _other_rigs(tree, rig) -> list[str]:
    from .groups import all_nodes

    if tree is None:
        return []
    return sorted({n.rig.name for n in all_nodes(tree) if n.bl_idname == "KinemaRobotNode" and n.rig is not None and n.rig != rig})


def _clear_tree(context, rig, tree) -> list:
    """Empty the rig's tree for a preset: remove its nodes and the control bones its targets
    made on the rig. Returns the role overrides of its Robot node, to carry over."""
    overrides = []
    robot = robot_node_of(tree, rig)
    if robot is not None:
        overrides = [(item.role, item.link) for item in robot.role_overrides]
    bones = [n.control_bone for n in tree.nodes
             if n.bl_idname == "KinemaIKTargetNode" and n.control_object == rig and n.control_bone in rig.data.bones]
    tree.nodes.clear()
    if tree.animation_data is not None:
        tree.animation_data_clear()
    if bones:
        previous = _set_mode(context, rig, "EDIT")
        try:
            for name in bones:
                bone = rig.data.edit_bones.get(name)
                if bone is not None:
                    rig.data.edit_bones.remove(bone)
        finally:
            _set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")
    return overrides


def build_tree(context, rig, plan: BoundPreset, backend: str | None = None):
    """Build `plan` into the rig's tree (replacing what was there). Returns the tree."""
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    tree = rig_tree(rig)
    overrides = []
    if tree is None:
        tree = bpy.data.node_groups.new(f"Kinema {rig.name}", "KinemaNodeTree")
        tree.use_fake_user = True
        rig.kinema_tree = tree
    else:
        overrides = _clear_tree(context, rig, tree)
    made = {}
    rows: dict[str, int] = {}
    live = {}
    for spec in plan.spec.nodes:
        node = tree.nodes.new(NODE_TYPES[spec.kind])
        node.name = spec.name
        row = rows.get(spec.kind, 0)
        rows[spec.kind] = row + 1
        node.location = (COLUMNS.get(spec.kind, 0), -220 * row)
        for key, value in spec.params:
            prop = PARAM_PROPERTIES.get((spec.kind, key), key)
            if spec.kind == "solver" and key == "backend":
                value = backend or value
            if spec.kind == "solver" and key == "live":
                live[node.name] = bool(value)
                value = False  # nothing solves a half-built tree; switched on at the end
            _set_setting(node, prop, value)
        if spec.kind == "solver":
            live.setdefault(node.name, True)
            node.live = False
            if backend:
                node.backend = backend.upper()
        for key, value in plan.values.get(spec.name, {}).items():
            if hasattr(node, key):
                setattr(node, key, value)
        if spec.kind == "robot":
            node.rig = rig
            for role, link in overrides:
                item = node.role_overrides.add()
                item.role, item.link = role, link
        made[spec.name] = node
    for name in plan.controls:
        target = made[name]
        link = _link_now(plan, name, context.scene.frame_current) or target.link_name or robot.tool_point
        target.control_object = rig
        target.control_bone = add_control_bone(context, rig, robot, link)
    for link in plan.spec.links:
        tree.links.new(made[link.from_node].outputs[link.from_socket], made[link.to_node].inputs[link.to_socket])
    for name, keys in plan.link_keys.items():
        target = made[name]
        for frame, link in keys:
            key_target_link(target, robot, link, frame)
        _show_keyed_value(target, context.scene.frame_current)
    _hold_swivel(plan, made, rig, robot)
    for name, value in live.items():
        made[name].live = value
    evaluator.mark_dirty(tree)
    return tree


def _set_setting(node, prop: str, value) -> None:
    """A spec param onto a node property: enums are upper case in Blender, lower in specs; a
    collection of rows (a Link Switch's ranges) is rebuilt row by row."""
    rna = node.bl_rna.properties.get(prop)
    if rna is None:
        return
    if rna.type == "ENUM" and isinstance(value, str):
        value = value.upper()
    if rna.type == "COLLECTION":
        rows = getattr(node, prop)
        rows.clear()
        fields = [p.identifier for p in rna.fixed_type.properties if p.identifier not in ("rna_type", "name")]
        for values in value:
            row = rows.add()
            for field, item in zip(fields, values):
                setattr(row, field, item)
        return
    setattr(node, prop, tuple(value) if isinstance(value, list) else value)


def _link_now(plan: BoundPreset, target: str, frame: float) -> str | None:
    """The link a target of the plan aims at on `frame` (its keys, or a Link Switch feeding it),
    so its control bone is made where that link is."""
    from .core.program import _link_switch

    keys = plan.link_keys.get(target)
    if keys:
        chosen = keys[0][1]
        for first, link in sorted(keys):
            if frame >= first:
                chosen = link
        return chosen
    for link in plan.spec.inputs(target, "Link"):
        source = plan.spec.node(link.from_node)
        if source.kind == "link_switch":
            return _link_switch(source)(frame)
    return None


def _show_keyed_value(target, frame: float) -> None:
    """After keying, the property holds the last key written; show the one for this frame."""
    from .animation import node_fcurve

    fcurve = node_fcurve(target, "link_index")
    if fcurve is not None:
        target.link_index = round(fcurve.evaluate(frame))


def _hold_swivel(plan: BoundPreset, made: dict, rig, robot) -> None:
    """An Elbow Swivel whose preset gives no angle starts at the arm's current swivel, so
    applying a preset does not move the arm."""
    from .rig import read_joint_values

    try:
        from .core.swivel import has_spare_joint, swivel_angle
    except ImportError:  # the elbow swivel is not built in this version
        return
    spec = plan.spec
    for node in spec.of_kind("swivel"):
        if "swivel_angle" in plan.values.get(node.name, {}) or not hasattr(made[node.name], "swivel_angle"):
            continue
        solver = next((link.from_node for link in spec.inputs(node.name, "Solution")), None)
        targets = [spec.node(link.from_node) for link in spec.inputs(solver, "Targets")] if solver else []
        held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p)
        for target in targets:
            link = target.get("link") or robot.tool_point
            if has_spare_joint(robot, link, held):
                made[node.name].swivel_angle = float(swivel_angle(robot, link, read_joint_values(rig, robot), held))
                break


def apply_preset(context, rig, name_or_path: str | Path, backend: str | None = None):
    """Build the rig's tree from a preset (by name, file name or path); returns the tree.

    The rig's existing tree is replaced (its control bones removed; roles set by hand kept).
    Raises PresetError, changing nothing, when the preset cannot be read or its roles cannot
    all bind to this rig. `backend` ("NUMPY", "PYROKI", "OFF") overrides the preset's solver.
    """
    preset = load_preset(preset_path(name_or_path))
    plan = bind_to_rig(preset, rig)
    return build_tree(context, rig, plan, backend)


def preset_driver(tree):
    """(IK Target, Solver) that a single keyed track drives in a tree built from a preset (the
    CLI's `bake --preset`): the first IK Target with a control bone, and the solver it feeds."""
    from .groups import all_nodes

    for target in all_nodes(tree):
        if target.bl_idname == "KinemaIKTargetNode" and target.control_bone:
            for link in target.outputs["Target"].links:
                if link.to_node.bl_idname == "KinemaSolverNode":
                    return target, link.to_node
    raise PresetError(f"tree '{tree.name}' has no IK Target with a control feeding a Solver")


# ---- saving --------------------------------------------------------------------------------

def _link_keys(node, robot) -> list[tuple[float, str]]:
    from .animation import node_fcurve

    fcurve = node_fcurve(node, "link_index")
    if fcurve is None:
        return []
    keys = []
    for point in fcurve.keyframe_points:
        index = round(point.co[1])
        link = robot.links[index - 1] if 0 < index <= len(robot.links) else (node.link_name or robot.tool_point)
        keys.append((float(point.co[0]), link))
    return keys


def preset_from_tree(tree, rig, name: str, description: str = "") -> Preset:
    """A preset from a rig's tree (or from a node group: its Robot inputs become one Robot
    node), with every link written as the role it fills on `rig`."""
    from .core.roles import resolve_roles
    from .groups import flatten, is_group_tree, node_by_path
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    spec = flatten(tree, as_group_root=is_group_tree(tree))
    if not spec.nodes:
        raise PresetError(f"tree '{tree.name}' has no nodes to save")
    values, link_keys = {}, {}
    for node_spec in spec.nodes:
        node = node_by_path(tree, node_spec.name)
        if node is None:
            continue
        if hasattr(node, "frame_values") and node.frame_values():
            values[node_spec.name] = node.frame_values()
        if node_spec.kind == "ik_target":
            keys = _link_keys(node, robot)
            if keys:
                link_keys[node_spec.name] = keys
    binding = resolve_roles(robot, role_overrides(rig))
    return make_preset(spec, binding, name, description, values=values, link_keys=link_keys)


def save_tree_as_preset(tree, rig, name: str, description: str = "", folder: Path | None = None,
                        mark_asset: bool = False) -> Path:
    """Save `tree` (driving `rig`) as a preset file in the user's preset folder. A node group
    can also be marked as an asset, so it shows in the Asset Browser."""
    preset = preset_from_tree(tree, rig, name, description)
    path = save_preset(preset, (folder or user_preset_folder()) / file_name(name))
    if mark_asset:
        tree.asset_mark()
        if tree.asset_data is not None:
            tree.asset_data.description = description or preset.name
    return path


# ---- operators -----------------------------------------------------------------------------

_preset_items_cache: list = []


def _preset_items(self, context):
    # Blender keeps only pointers to these strings: hold them in a module-level list.
    _preset_items_cache[:] = [(str(path), preset.name, preset.description or preset.name)
                              for path, preset in available_presets()] or [("", "(no presets)", "")]
    return _preset_items_cache


class KINEMA_OT_apply_preset(bpy.types.Operator):
    """Build this rig's node tree from a preset: its roles (tool point, wrist, ...) bind to this robot's links"""

    bl_idname = "kinema.apply_preset"
    bl_label = "Apply Preset"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "preset"

    preset: bpy.props.EnumProperty(name="Preset", items=_preset_items)

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def execute(self, context):
        rig = active_rig(context)
        window = context.window
        if window is not None:
            window.cursor_modal_set("WAIT")
        try:
            if not self.preset:
                raise PresetError("no preset chosen")
            tree = apply_preset(context, rig, self.preset)
            seconds = evaluator.warm_up_tree(tree)
        except PresetError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if window is not None:
                window.cursor_modal_restore()
        self.report({"INFO"}, f"applied preset '{load_preset(self.preset).name}' (solver ready in {seconds:.1f} s)")
        return {"FINISHED"}


class KINEMA_OT_save_preset(bpy.types.Operator):
    """Save this rig's node tree (or the node group open in the editor) as a preset for other robots"""

    bl_idname = "kinema.save_preset"
    bl_label = "Save Preset"

    name: bpy.props.StringProperty(name="Name", default="My preset")
    description: bpy.props.StringProperty(name="Description")
    mark_asset: bpy.props.BoolProperty(name="Mark as Asset", default=True,
                                       description="Also mark a node group as an asset (Asset Browser)")

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and (rig_tree(rig) is not None or _editor_group(context) is not None)

    def invoke(self, context, event):
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        from .groups import is_group_tree

        rig = active_rig(context)
        tree = _editor_group(context) or rig_tree(rig)
        try:
            path = save_tree_as_preset(tree, rig, self.name, self.description, mark_asset=self.mark_asset and is_group_tree(tree))
        except PresetError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"saved preset '{self.name}' to {path}")
        return {"FINISHED"}


def _editor_group(context):
    from .groups import is_group_tree

    space = context.space_data
    tree = getattr(space, "edit_tree", None) if getattr(space, "type", "") == "NODE_EDITOR" else None
    return tree if tree is not None and tree.bl_idname == "KinemaNodeTree" and is_group_tree(tree) else None


def _robot_node_for(context, name: str):
    space = context.space_data
    tree = getattr(space, "edit_tree", None) if getattr(space, "type", "") == "NODE_EDITOR" else None
    if tree is not None and name in tree.nodes:
        return tree.nodes[name]
    rig = active_rig(context)
    node = robot_node_of(rig_tree(rig), rig) if rig else None
    return node if node is not None and (not name or node.name == name) else None


class KINEMA_OT_role_override_add(bpy.types.Operator):
    """Set a role (tool point, flange, wrist, ...) by hand on this robot"""

    bl_idname = "kinema.role_override_add"
    bl_label = "Set a Role by Hand"
    bl_options = {"REGISTER", "UNDO"}

    node: bpy.props.StringProperty(name="Robot Node")

    def execute(self, context):
        node = _robot_node_for(context, self.node)
        if node is None:
            self.report({"ERROR"}, "no Robot node for this rig: add an IK target or apply a preset first")
            return {"CANCELLED"}
        node.role_overrides.add()
        return {"FINISHED"}


class KINEMA_OT_role_override_remove(bpy.types.Operator):
    """Go back to the inferred link for this role"""

    bl_idname = "kinema.role_override_remove"
    bl_label = "Remove Role Override"
    bl_options = {"REGISTER", "UNDO"}

    node: bpy.props.StringProperty(name="Robot Node")
    index: bpy.props.IntProperty(name="Index")

    def execute(self, context):
        node = _robot_node_for(context, self.node)
        if node is None or not 0 <= self.index < len(node.role_overrides):
            return {"CANCELLED"}
        node.role_overrides.remove(self.index)
        return {"FINISHED"}


class KINEMA_PT_presets(bpy.types.Panel):
    bl_idname = "KINEMA_PT_presets"
    bl_label = "Presets"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Kinema"
    bl_parent_id = KINEMA_PT_inverse_kinematics.bl_idname
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        return active_rig(context) is not None

    def draw(self, context):
        from .nodes.robot import draw_roles

        layout = self.layout
        layout.operator_menu_enum("kinema.apply_preset", "preset", text="Apply Preset", icon="PRESET")
        layout.operator("kinema.save_preset", icon="FILE_TICK")
        rig = active_rig(context)
        node = robot_node_of(rig_tree(rig), rig)
        if node is not None:
            draw_roles(node, layout)
        else:
            _draw_inferred_roles(rig, layout)


def _draw_inferred_roles(rig, layout):
    from .core.roles import ROLE_LABELS, infer_roles
    from .rig import robot_for_rig

    box = layout.box()
    box.label(text="Roles (for presets)")
    column = box.column(align=True)
    for role, link in infer_roles(robot_for_rig(rig)).links.items():
        column.label(text=f"{ROLE_LABELS[role]}: {link}")


CLASSES = (
    KINEMA_OT_apply_preset,
    KINEMA_OT_save_preset,
    KINEMA_OT_role_override_add,
    KINEMA_OT_role_override_remove,
    KINEMA_PT_presets,
)
