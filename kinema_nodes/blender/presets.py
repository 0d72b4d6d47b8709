"""Presets on a rig: build the node tree, control bones and keyed hand-offs a preset describes
(bound to this robot's roles), and save a rig's tree back as a preset.

`core.presets` reads, checks and writes preset files without Blender; this module is the
Blender half the Presets panel, the CLI (`bake --preset`) and the tests call."""

from __future__ import annotations

import os
from pathlib import Path

import bpy
import numpy as np
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
from ..core.model.rotations import wrap_angle
from .edit import add_control_bone, key_target_link, remove_edit_bones, rig_tree


PRESET_DIR_ENV = "KINEMA_NODES_PRESET_DIR"


SHIPPED_PRESETS = Path(__file__).resolve().parents[1] / "presets"


#: Preset node kind -> node type (from the node registry).
NODE_TYPES = {entry.kind: entry.bl_idname for entry in NODES if entry.in_spec}


#: Spec params whose node property has another name.
PARAM_PROPERTIES = {("ik_target", "link"): "link_name", ("tool", "link"): "link_name", ("grasp", "link"): "link_name"}


#: Node columns when a preset is laid out (x by kind).
COLUMNS = {"robot": -500, "link_switch": -500, "tool": -500, "ik_target": -220, "grasp": -220, "solver": 80, "swivel": 330,
           "configuration": 580, "gripper": 580, "bake": 830}


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
    from .flatten import all_nodes

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
    from .flatten import all_nodes

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
        remove_edit_bones(context, rig, bones)
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
    made_objects: list = []
    try:
        live = _fill_tree(context, rig, robot, plan, tree, overrides, backend, made_bones, made_objects)
    except Exception as exc:
        bpy.data.node_groups.remove(tree)
        _remove_bones(context, rig, made_bones)
        for obj in made_objects:
            data = obj.data
            bpy.data.objects.remove(obj)
            if data is not None and data.users == 0:
                bpy.data.curves.remove(data)
        if isinstance(exc, KinemaError):
            raise
        raise PresetError(f"preset '{plan.preset.name}' could not be built on '{rig.name}' "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]}). Nothing was changed.") from None
    if old is not None:
        laid_before = _preset_paths(old)
        _clear_tree(context, rig, old)
        bpy.data.node_groups.remove(old)
        _remove_unused_paths(laid_before)
    tree.name = name
    tree.use_fake_user = True
    rig.kinema_tree = tree
    _tidy_bone_names(rig, tree, made_bones)
    from .flatten import node_by_path

    for node_name, value in live.items():
        node_by_path(tree, node_name).live = value
    evaluator.mark_dirty(tree)
    return tree


def _remove_bones(context, rig, names: list[str]) -> None:
    if names:
        remove_edit_bones(context, rig, names)


def _tidy_bone_names(rig, tree, names: list[str]) -> None:
    """Control bones made while the old tree's were still there got a '.001' suffix; give them
    their plain name back now that the old ones are gone."""
    for bone_name in names:
        plain = bone_name.rsplit(".", 1)[0] if bone_name.rsplit(".", 1)[-1].isdigit() else bone_name
        bone = rig.data.bones.get(bone_name)
        if bone is None or plain == bone_name or plain in rig.data.bones:
            continue
        bone.name = plain
        from .flatten import all_nodes

        for node in all_nodes(tree):
            if kind_of(node) == "ik_target" and node.control_bone == bone_name:
                node.control_bone = plain


def _fill_tree(context, rig, robot, plan: BoundPreset, tree, overrides, backend, made_bones: list[str],
               made_objects: list | None = None) -> dict:
    """Every node, control bone, link, key and Tool path of `plan` into the empty `tree`.
    Returns {solver: live} to switch on once the tree is in place. The bones and objects it
    makes are added to `made_bones` and `made_objects` (removed by the caller if it fails)."""
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
    if any(spec.kind == "tool" for spec in plan.spec.nodes):
        from .tool_setup import snap_control_to_tool

        for name in plan.controls:  # a Tool's centre point, not its link, starts on the control: nothing moves
            snap_control_to_tool(rig, made[name])
    _lay_paths(context, rig, robot, plan, made, made_objects if made_objects is not None else [])
    for name, keys in plan.link_keys.items():
        target = made[name]
        for frame, link in keys:
            key_target_link(target, robot, link, frame)
        _show_keyed_value(target, context.scene.frame_current)
    _hold_swivel(plan, made, rig, robot)
    _key_hand_offs(context, plan, made, rig, robot)
    _key_motion(plan, made, rig)
    live = _rebuild_groups(tree, plan, live)
    return live


#: The custom property on a curve a preset laid for a Tool's path (the preset's name).
PRESET_PATH_PROPERTY = "kinema_preset_path"


def _preset_paths(tree) -> list:
    """The curves a preset laid (`PRESET_PATH_PROPERTY`) that `tree`'s Tools follow."""
    return [node.path for node in tree.nodes
            if getattr(node, "path", None) is not None and PRESET_PATH_PROPERTY in node.path]


def _remove_unused_paths(objects) -> None:
    """Remove the preset-laid curves no Kinema tree follows any more (a preset applied again
    replaces the tree that followed them); a curve of the user's own is never touched."""
    followed = {node.path.name for tree in bpy.data.node_groups if tree.bl_idname == "KinemaNodeTree"
                for node in tree.nodes if getattr(node, "path", None) is not None}
    for obj in {o.name: o for o in objects}.values():
        if obj.name in followed:
            continue
        data = obj.data
        bpy.data.objects.remove(obj)
        if data is not None and data.users == 0:
            bpy.data.curves.remove(data)


def _lay_paths(context, rig, robot, plan: BoundPreset, made: dict, made_objects: list) -> None:
    """Each Tool's path of the preset (`BoundPreset.paths`): a Bezier curve with automatic
    handles through the points, made the Tool's Follow Path. It is laid where the arm is now: its
    origin (the path's start, its axes the robot's root frame, so moving or turning the curve
    object moves the bead) is the tool centre point, or with an approach (Keep) that far ahead
    along the tool's Z axis, so the approach starts where the tool is and applying moves nothing."""
    from ..core.model.kinematics import link_pose
    from mathutils import Matrix

    from .path_moves import tool_offset
    from .rig import read_joint_values

    joints = read_joint_values(rig, robot)
    for name, points in plan.paths.items():
        tool = made[name]
        centre = link_pose(robot, joints, tool.link_name or robot.tool_point) @ tool_offset(tool)
        curve = bpy.data.curves.new(f"{plan.preset.name} {name} path", "CURVE")
        curve.dimensions = "3D"
        curve.resolution_u = 32  # the tool runs the evaluated polyline: fine enough that its corners cost no speed
        spline = curve.splines.new("BEZIER")
        spline.bezier_points.add(len(points) - 1)
        for point, offset in zip(spline.bezier_points, points):
            point.co = offset
        for point in spline.bezier_points:  # with every point in place, so each handle sees both neighbours
            point.handle_left_type = point.handle_right_type = "AUTO"
        obj = bpy.data.objects.new(curve.name, curve)
        made_objects.append(obj)
        obj[PRESET_PATH_PROPERTY] = plan.preset.name
        (rig.users_collection[0] if rig.users_collection else context.scene.collection).objects.link(obj)
        origin = np.eye(4)
        origin[:3, 3] = centre[:3, 3]
        if tool.path_orientation == "KEEP" and tool.approach > 0:  # as blender/path_moves.py comes in: along the tool's Z
            origin[:3, 3] += tool.approach * centre[:3, 2] / np.linalg.norm(centre[:3, 2])
        obj.matrix_world = rig.matrix_world @ Matrix(origin.tolist())
        tool.path = obj


def _key_motion(plan: BoundPreset, made: dict, rig) -> None:
    """The preset's keyed motion (`core.presets.MOTION_KEYS`): control bones keyed at offsets
    (root frame) from where they were made, or part of the way toward another control, orientation
    kept; Gripper values keyed."""
    from mathutils import Matrix

    made_at = {name: np.array(rig.pose.bones[node.control_bone].matrix, dtype=float) for name, node in made.items()
               if getattr(node, "control_bone", "") and node.control_bone in rig.pose.bones}
    for name, motion in plan.motion_keys.items():
        node = made[name]
        if "control" in motion and node.control_bone:
            bone = rig.pose.bones[node.control_bone]
            for frame, offset in motion["control"]:
                pose = made_at[name].copy()
                if isinstance(offset, dict):  # part of the way toward another control, where it was made
                    pose[:3, 3] += float(offset["share"]) * (made_at[offset["toward"]][:3, 3] - pose[:3, 3])
                else:
                    pose[:3, 3] += np.asarray(offset, dtype=float)
                bone.matrix = Matrix(pose.tolist())
                bone.keyframe_insert("location", frame=frame)
                bone.keyframe_insert("rotation_quaternion" if bone.rotation_mode == "QUATERNION" else "rotation_euler", frame=frame)
            bone.matrix = Matrix(made_at[name].tolist())
        for frame, value in motion.get("gripper_value", ()):
            node.gripper_value = float(value)
            node.keyframe_insert("gripper_value", frame=frame)


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
        values = plan.values.get(node.name, {})
        if "swivel_angle" in values or not hasattr(made[node.name], "swivel_angle"):
            continue  # an absolute angle (presets from before offsets) is set as it is
        current = arm_swivel(spec, node.name, robot, read_joint_values(rig, robot), has_spare_joint, swivel_angle)
        if current is not None:
            made[node.name].swivel_angle = current + float(values.get("swivel_offset", 0.0))


def arm_swivel(spec, swivel_node: str, robot, joints, has_spare_joint=None, swivel_angle=None) -> float | None:
    """The swivel angle of the arm a Swivel node turns (the first target of the Solver feeding
    it whose arm has a spare joint), for `joints`; None when there is none."""
    if has_spare_joint is None:
        from ..core.stages.swivel import has_spare_joint, swivel_angle
    solver = next((link.from_node for link in spec.inputs(swivel_node, "Solution")), None)
    if solver is None or spec.node(solver).kind != "solver":
        return None
    held = robot.held_joints(bool(spec.node(solver).get("hold_prismatic", True)))
    for link in spec.inputs(solver, "Targets"):
        aimed = spec.node(link.from_node).get("link") or robot.tool_point
        if aimed in robot.links and has_spare_joint(robot, aimed, held):
            return float(swivel_angle(robot, aimed, joints, held))
    return None


def _hand_offs(plan: BoundPreset, target: str) -> list[tuple[float, str, str]]:
    """(frame, link before, link from then on) of each hand-off of a target: its keyed link
    choice, or a Link Switch by frame feeding it."""
    from ..core.graph.program import link_switch

    rows = sorted(plan.link_keys.get(target, ()))
    if not rows:
        for link in plan.spec.inputs(target, "Link"):
            source = plan.spec.node(link.from_node)
            if source.kind == "link_switch" and source.get("mode", "frame") == "frame":
                choose = link_switch(source)
                rows = [(float(first), choose(float(first))) for first, _ in sorted(source.get("ranges") or ())]
    return [(frame, before, after) for (_, before), (frame, after) in zip(rows, rows[1:]) if before != after]


def _key_hand_offs(context, plan: BoundPreset, made: dict, rig, robot) -> None:
    """At each hand-off of a target with a control, key the control on the link handed from
    (the frame before) and on the link handed to (the frame of the switch), both where they are
    now: a preset applied and played moves continuously, never pulling the new link onto the
    old one's pose (and the solve after the switch settles toward this pose)."""
    from ..core.model.kinematics import link_pose
    from mathutils import Matrix

    from .rig import read_joint_values

    def _matrix(array):
        return Matrix([list(row) for row in array])

    joints = read_joint_values(rig, robot)
    for name in plan.controls:
        target = made[name]
        bone = rig.pose.bones.get(target.control_bone)
        hand_offs = _hand_offs(plan, name)
        if bone is None or not hand_offs:
            continue
        rotation = "rotation_quaternion" if bone.rotation_mode == "QUATERNION" else "rotation_euler"
        for frame, before, after in hand_offs:
            for at, link in ((frame - 1, before), (frame, after)):
                bone.matrix = _matrix(link_pose(robot, joints, link))
                bone.keyframe_insert("location", frame=at)
                bone.keyframe_insert(rotation, frame=at)
            try:
                from .edit import keep_pose_as_posture
            except ImportError:
                continue
            keep_pose_as_posture(rig, target, frame)
        now = _link_now(plan, name, context.scene.frame_current) or target.link_name or robot.tool_point
        bone.matrix = _matrix(link_pose(robot, joints, now))


def _interface(group) -> list[tuple]:
    return [(item.name, getattr(item, "in_out", ""), getattr(item, "socket_type", "")) for item in group.interface.items_tree]


def _rebuild_groups(tree, plan: BoundPreset, live: dict) -> dict:
    """Put the preset's node groups back (innermost first): the nodes named "<path>/..." move
    into a group tree and a Group node named <path> takes their place. Two groups of one tree
    become two users of one group. Returns `live` with its solvers' paths unchanged."""
    from .groups import group_nodes

    made_trees: dict[str, object] = {}
    for group in sorted(plan.groups, key=lambda g: -g["node"].count("/")):
        prefix = group["node"] + "/"
        inner = [n for n in tree.nodes if n.name.startswith(prefix) and "/" not in n.name[len(prefix):]]
        if not inner:
            continue
        node = group_nodes(tree, inner, name=group["tree"], strip_prefix=prefix)
        node.name = group["node"]
        first = made_trees.get(group["tree"])
        if first is None:
            made_trees[group["tree"]] = node.node_tree
        elif _interface(first) == _interface(node.node_tree):
            duplicate = node.node_tree
            node.node_tree = first
            bpy.data.node_groups.remove(duplicate)
    return live


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
    from .flatten import all_nodes

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
    from .flatten import flatten, is_group_tree, node_by_path
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    spec = flatten(tree, as_group_root=is_group_tree(tree))
    if not spec.nodes:
        raise PresetError(f"tree '{tree.name}' has no nodes to save")
    values, link_keys, paths = {}, {}, {}
    from .rig import read_joint_values

    joints = read_joint_values(rig, robot)
    for node_spec in spec.nodes:
        node = node_by_path(tree, node_spec.name)
        if node is None:
            continue
        if hasattr(node, "frame_values") and node.frame_values():
            values[node_spec.name] = dict(node.frame_values())
            current = arm_swivel(spec, node_spec.name, robot, joints) if node_spec.kind == "swivel" else None
            if current is not None and "swivel_angle" in values[node_spec.name]:
                # Relative to the arm's own swivel: saved unchanged, re-applied, nothing moves.
                offset = wrap_angle(values[node_spec.name].pop("swivel_angle") - current)
                values[node_spec.name]["swivel_offset"] = float(f"{offset:.7g}")
        if node_spec.kind == "ik_target":
            keys = _link_keys(node, robot)
            if keys:
                link_keys[node_spec.name] = keys
        if node_spec.kind == "tool" and getattr(node, "path", None) is not None:
            from .path_moves import path_points

            points = path_points(node.path, rig, node.chordal_tolerance, node.angular_tolerance)  # as the tool runs it, root frame
            paths[node_spec.name] = (points - points[0]).tolist()
    binding = resolve_roles(robot, role_overrides(rig))
    return make_preset(spec, binding, name, description, values=values, link_keys=link_keys, groups=_groups_of(tree),
                       paths=paths)


def _groups_of(tree, prefix: str = "", depth: int = 0) -> list[dict]:
    """{"node": path, "tree": group name} for every Group node of `tree` and of its groups."""
    from ..core.graph.registry import GROUP_IDNAME
    from .flatten import MAX_DEPTH

    found = []
    for node in tree.nodes:
        inner = node.node_tree if node.bl_idname == GROUP_IDNAME else None
        if inner is None or depth > MAX_DEPTH:
            continue
        found.append({"node": prefix + node.name, "tree": inner.name})
        found.extend(_groups_of(inner, f"{prefix}{node.name}/", depth + 1))
    return found


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
