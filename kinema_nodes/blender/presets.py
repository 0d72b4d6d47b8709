"""blender.presets"""

from __future__ import annotations

import os
from pathlib import Path
import bpy
from .. import evaluator
from ..core.presets import (
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
from ..core.graph.registry import NODES, kind_of
from .edit import set_mode, add_control_bone, key_target_link, rig_tree


PRESET_DIR_ENV = "KINEMA_NODES_PRESET_DIR"


SHIPPED_PRESETS = Path(__file__).resolve().parents[1] / "presets"


#: Preset node kind -> node type (from the node registry).
NODE_TYPES = {entry.kind: entry.bl_idname for entry in NODES if entry.in_spec}


#: Spec params whose node property has another name.
PARAM_PROPERTIES = {("ik_target", "link"): "link_name"}


#: Node columns when a preset is laid out (x by kind).
COLUMNS = {"robot": -500, "link_switch": -500, "ik_target": -220, "solver": 80, "swivel": 330, "configuration": 580, "bake": 830}


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
            except PresetError as exc:
                import warnings

                from ..core.presets import PresetWarning

                warnings.warn(f"skipped preset {path}: {exc}", PresetWarning, stacklevel=2)
                continue
            seen.add(path.name)
    return found


def preset_path(name_or_path: str | Path) -> Path:
    """A preset by display name, file name or path."""
    path = Path(name_or_path)
    if path.suffix == ".json" and path.is_file():
        return path
    return find_preset(str(name_or_path), preset_folders())


def robot_node_of(tree, rig):
    from .groups import all_nodes

    if tree is None:
        return None
    return next((n for n in all_nodes(tree) if kind_of(n) == "robot" and n.rig == rig), None)


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
    return sorted({n.rig.name for n in all_nodes(tree) if kind_of(n) == "robot" and n.rig is not None and n.rig != rig})


def _clear_tree(context, rig, tree) -> list:
    """Empty the rig's tree for a preset: remove its nodes and the control bones its targets
    made on the rig. Returns the role overrides of its Robot node, to carry over."""
    overrides = []
    robot = robot_node_of(tree, rig)
    if robot is not None:
        overrides = [(item.role, item.link) for item in robot.role_overrides]
    bones = [n.control_bone for n in tree.nodes
             if kind_of(n) == "ik_target" and n.control_object == rig and n.control_bone in rig.data.bones]
    tree.nodes.clear()
    if tree.animation_data is not None:
        tree.animation_data_clear()
    if bones:
        previous = set_mode(context, rig, "EDIT")
        try:
            for name in bones:
                bone = rig.data.edit_bones.get(name)
                if bone is not None:
                    rig.data.edit_bones.remove(bone)
        finally:
            set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")
    return overrides


def build_tree(context, rig, plan: BoundPreset, backend: str | None = None):
    """Build `plan` as the rig's tree (replacing what was there). Returns the tree.

    A transaction: the new tree is built aside, with its own control bones, and swapped in
    only when it is whole. If anything fails part-way, the new tree and the bones it made are
    removed and the rig keeps its old tree, untouched (a `PresetError` says what failed)."""
    from ..core.errors import KinemaError
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    old = rig_tree(rig)
    overrides = []
    old_robot = robot_node_of(old, rig) if old is not None else None
    if old_robot is not None:
        overrides = [(item.role, item.link) for item in old_robot.role_overrides]
    name = old.name if old is not None else f"Kinema {rig.name}"
    tree = bpy.data.node_groups.new(f"{name} (new)", "KinemaNodeTree")
    made_bones: list[str] = []
    try:
        live = _fill_tree(context, rig, robot, plan, tree, overrides, backend, made_bones)
    except Exception as exc:
        bpy.data.node_groups.remove(tree)
        _remove_bones(context, rig, made_bones)
        if isinstance(exc, KinemaError):
            raise
        raise PresetError(f"preset '{plan.preset.name}' could not be built on '{rig.name}' "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]}). Nothing was changed.") from None
    if old is not None:
        _clear_tree(context, rig, old)
        bpy.data.node_groups.remove(old)
    tree.name = name
    tree.use_fake_user = True
    rig.kinema_tree = tree
    _tidy_bone_names(rig, tree, made_bones)
    for node_name, value in live.items():
        tree.nodes[node_name].live = value
    evaluator.mark_dirty(tree)
    return tree


def _remove_bones(context, rig, names: list[str]) -> None:
    if not names:
        return
    previous = set_mode(context, rig, "EDIT")
    try:
        for bone_name in names:
            bone = rig.data.edit_bones.get(bone_name)
            if bone is not None:
                rig.data.edit_bones.remove(bone)
    finally:
        set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")


def _tidy_bone_names(rig, tree, names: list[str]) -> None:
    """Control bones made while the old tree's were still there got a '.001' suffix; give them
    their plain name back now that the old ones are gone."""
    for bone_name in names:
        plain = bone_name.rsplit(".", 1)[0] if bone_name.rsplit(".", 1)[-1].isdigit() else bone_name
        bone = rig.data.bones.get(bone_name)
        if bone is None or plain == bone_name or plain in rig.data.bones:
            continue
        bone.name = plain
        for node in tree.nodes:
            if kind_of(node) == "ik_target" and node.control_bone == bone_name:
                node.control_bone = plain


def _fill_tree(context, rig, robot, plan: BoundPreset, tree, overrides, backend, made_bones: list[str]) -> dict:
    """Every node, control bone, link and key of `plan` into the empty `tree`. Returns
    {solver: live} to switch on once the tree is in place."""
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
        made_bones.append(target.control_bone)
    for link in plan.spec.links:
        tree.links.new(made[link.from_node].outputs[link.from_socket], made[link.to_node].inputs[link.to_socket])
    for name, keys in plan.link_keys.items():
        target = made[name]
        for frame, link in keys:
            key_target_link(target, robot, link, frame)
        _show_keyed_value(target, context.scene.frame_current)
    _hold_swivel(plan, made, rig, robot)
    return live


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
    from ..core.graph.program import link_switch

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
            return link_switch(source)(frame)
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
        from ..core.stages.swivel import has_spare_joint, swivel_angle
    except ImportError:  # the elbow swivel is not built in this version
        return
    spec = plan.spec
    for node in spec.of_kind("swivel"):
        if "swivel_angle" in plan.values.get(node.name, {}) or not hasattr(made[node.name], "swivel_angle"):
            continue
        solver = next((link.from_node for link in spec.inputs(node.name, "Solution")), None)
        targets = [spec.node(link.from_node) for link in spec.inputs(solver, "Targets")] if solver else []
        held = robot.held_joints(bool(spec.node(solver).get("hold_prismatic", True)) if solver else True)
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
        if kind_of(target) == "ik_target" and target.control_bone:
            for link in target.outputs["Target"].links:
                if kind_of(link.to_node) == "solver":
                    return target, link.to_node
    raise PresetError(f"tree '{tree.name}' has no IK Target with a control feeding a Solver")


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
    from ..core.roles import resolve_roles
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
