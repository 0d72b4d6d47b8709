"""Making and editing node groups in Kinema trees: group selected nodes, ungroup, add a Group
node, and carry the keys and drivers of nodes moved in or out of a group with them.

What a group is and how the evaluator runs it (flattened into its user's spec) is `flatten.py`'s.
"""

from __future__ import annotations

import bpy

from ..core.graph.registry import GROUP_IDNAME, TREE_IDNAME
from .animation import node_path, unquoted_prefix
from ..session import mark_dirty
from .flatten import INTERFACE_NODES, sync_group_uses, sync_sockets

def _link_ends(node, socket, interface: str, outside: dict, copies: dict) -> list | None:
    """Where one end of a link inside a group lands once the group is ungrouped: the outside
    sockets of a Group Input/Output socket, the copy of a node, or None (nothing to link)."""
    if node.bl_idname == interface:
        return outside.get(socket.identifier, [])
    if node.name in copies:
        return [(copies[node.name], socket.identifier)]
    return None


# ---- making groups ---------------------------------------------------------------------------

_NODE_BASE = set(bpy.types.Node.bl_rna.properties.keys()) - {"label", "width", "hide", "mute", "use_custom_color", "color"}


def copy_node_settings(source, target) -> None:
    """Copy a node's own settings (its properties, not its links or place in the tree)."""
    for prop in source.bl_rna.properties:
        name = prop.identifier
        if name in _NODE_BASE or prop.is_readonly or name == "rna_type":
            continue
        if prop.type == "COLLECTION":
            continue
        try:
            setattr(target, name, getattr(source, name))
        except (AttributeError, TypeError, ValueError):
            pass
    for prop in source.bl_rna.properties:  # collections of settings (e.g. role overrides)
        if prop.type == "COLLECTION" and prop.identifier not in _NODE_BASE and hasattr(getattr(target, prop.identifier, None), "add"):
            items, copies = getattr(source, prop.identifier), getattr(target, prop.identifier)
            copies.clear()
            for item in items:
                copy = copies.add()
                for sub in item.bl_rna.properties:
                    if not sub.is_readonly and sub.identifier != "rna_type":
                        setattr(copy, sub.identifier, getattr(item, sub.identifier))


def _socket(sockets, identifier: str):
    return next(s for s in sockets if s.identifier == identifier)


def group_nodes(tree, nodes, name: str = "Kinema Group", strip_prefix: str = ""):
    """Move `nodes` of `tree` into a new group tree and put a Group node in their place.

    Links that crossed the selection become the group's inputs (one per outside socket that
    fed it) and outputs (one per inside socket that fed the outside); keys and drivers move
    with their nodes. Inside the group a node's name loses `strip_prefix` (a preset rebuilding
    "Arm/IK Target" as "IK Target" in group "Arm"). Returns the Group node.
    """
    nodes = [n for n in nodes if n.bl_idname not in INTERFACE_NODES]
    if not nodes:
        raise ValueError("select the nodes to group")
    chosen = {n.name for n in nodes}
    group = bpy.data.node_groups.new(name, TREE_IDNAME)
    group.use_fake_user = True
    copies = {}
    for node in nodes:
        copy = group.nodes.new(node.bl_idname)
        copy_node_settings(node, copy)
        copy.name = node.name[len(strip_prefix):] if strip_prefix and node.name.startswith(strip_prefix) else node.name
        copy.location = node.location.copy()
        if copy.bl_idname == GROUP_IDNAME:
            sync_sockets(copy)
        copies[node.name] = copy
    xs = [n.location.x for n in nodes]
    ys = [n.location.y for n in nodes]
    group_in = group.nodes.new("NodeGroupInput")
    group_in.location = (min(xs) - 250, sum(ys) / len(ys))
    group_out = group.nodes.new("NodeGroupOutput")
    group_out.location = (max(xs) + 250, sum(ys) / len(ys))

    inputs: dict[tuple[str, str], str] = {}  # outside source socket -> interface identifier
    outputs: dict[tuple[str, str], str] = {}  # inside source socket -> interface identifier
    outer_in, outer_out = [], []  # links to make outside, by names (the originals are removed)
    for link in list(tree.links):
        inside_from, inside_to = link.from_node.name in chosen, link.to_node.name in chosen
        if inside_from and inside_to:
            group.links.new(_socket(copies[link.from_node.name].outputs, link.from_socket.identifier),
                            _socket(copies[link.to_node.name].inputs, link.to_socket.identifier))
        elif inside_to:
            key = (link.from_node.name, link.from_socket.identifier)
            if key not in inputs:
                item = group.interface.new_socket(link.to_socket.name, in_out="INPUT", socket_type=link.to_socket.bl_idname)
                inputs[key] = item.identifier
                outer_in.append((key, item.identifier))
            group.links.new(_socket(group_in.outputs, inputs[key]), _socket(copies[link.to_node.name].inputs, link.to_socket.identifier))
        elif inside_from:
            key = (link.from_node.name, link.from_socket.identifier)
            if key not in outputs:
                item = group.interface.new_socket(link.from_socket.name, in_out="OUTPUT", socket_type=link.from_socket.bl_idname)
                outputs[key] = item.identifier
                group.links.new(_socket(copies[link.from_node.name].outputs, link.from_socket.identifier), _socket(group_out.inputs, item.identifier))
            outer_out.append((outputs[key], link.to_node.name, link.to_socket.identifier))

    move_animation(tree, group, {name: copy.name for name, copy in copies.items()}, remove=True)
    for node in nodes:
        tree.nodes.remove(node)
    group_node = tree.nodes.new(GROUP_IDNAME)
    group_node.node_tree = group
    group_node.location = (sum(xs) / len(xs), sum(ys) / len(ys))
    sync_sockets(group_node)
    for (from_name, from_id), identifier in outer_in:
        tree.links.new(_socket(tree.nodes[from_name].outputs, from_id), _socket(group_node.inputs, identifier))
    for identifier, to_name, to_id in outer_out:
        tree.links.new(_socket(group_node.outputs, identifier), _socket(tree.nodes[to_name].inputs, to_id))
    sync_group_uses(tree)
    mark_dirty(tree)
    return group_node


def ungroup(tree, group_node) -> list:
    """Put a Group node's nodes back into `tree` (the group tree itself is kept for its other
    users), joining the links that went through its inputs and outputs. Returns the new nodes."""
    group = group_node.node_tree
    if group is None:
        raise ValueError("this Group node has no group to ungroup")
    incoming: dict[str, list[tuple[str, str]]] = {}
    outgoing: dict[str, list[tuple[str, str]]] = {}
    for link in tree.links:
        if link.to_node == group_node:
            incoming.setdefault(link.to_socket.identifier, []).append((link.from_node.name, link.from_socket.identifier))
        if link.from_node == group_node:
            outgoing.setdefault(link.from_socket.identifier, []).append((link.to_node.name, link.to_socket.identifier))
    offset = group_node.location.copy()
    copies = {}
    for node in group.nodes:
        if node.bl_idname in INTERFACE_NODES:
            continue
        copy = tree.nodes.new(node.bl_idname)
        copy_node_settings(node, copy)
        copy.name = node.name  # Blender keeps names unique: a clash gets ".001"
        copy.location = node.location + offset
        if copy.bl_idname == GROUP_IDNAME:
            sync_sockets(copy)
        copies[node.name] = copy.name
    others = [n for t in bpy.data.node_groups if t.bl_idname == TREE_IDNAME for n in t.nodes
              if n.bl_idname == GROUP_IDNAME and n.node_tree == group and n != group_node]
    # The group keeps its keys for its other users; a group no one else uses gives them back.
    move_animation(group, tree, copies, remove=not others)
    tree.nodes.remove(group_node)
    for link in group.links:
        sources = _link_ends(link.from_node, link.from_socket, "NodeGroupInput", incoming, copies)
        targets = _link_ends(link.to_node, link.to_socket, "NodeGroupOutput", outgoing, copies)
        if sources is None or targets is None:
            continue
        for from_name, from_id in sources:
            for to_name, to_id in targets:
                tree.links.new(_socket(tree.nodes[from_name].outputs, from_id), _socket(tree.nodes[to_name].inputs, to_id))
    sync_group_uses(tree)
    mark_dirty(tree)
    return [tree.nodes[name] for name in copies.values()]


def add_group_node(tree, group):
    """A Group node in `tree` that uses `group`, with its sockets."""
    node = tree.nodes.new(GROUP_IDNAME)
    node.node_tree = group
    sync_sockets(node)
    sync_group_uses(tree)
    mark_dirty(tree)
    return node


def _fcurve_owner(id_data, create: bool):
    """The collection holding `id_data`'s action F-curves (a Blender 5 channelbag, or 4.5's
    `Action.fcurves`), made when `create`; None when there is none."""
    animation = id_data.animation_data
    if animation is None or animation.action is None:
        return None
    action = animation.action
    if hasattr(action, "fcurves") and not getattr(action, "is_action_layered", False):
        return action.fcurves
    from bpy_extras import anim_utils

    if create and hasattr(anim_utils, "action_ensure_channelbag_for_slot"):
        if animation.action_slot is None:
            return None
        return anim_utils.action_ensure_channelbag_for_slot(action, animation.action_slot).fcurves
    channelbag = anim_utils.action_get_channelbag_for_slot(action, animation.action_slot)
    return channelbag.fcurves if channelbag else None


def _node_of_path(path: str, names) -> tuple[str, str] | None:
    """('node name', 'rest of the path') for an F-curve path ``nodes["NAME"].rest`` naming one of
    `names` (the rest keeps its leading ``.`` or ``[``)."""
    found = unquoted_prefix(path, "nodes")
    return found if found is not None and found[0] in names else None


def _copy_points(source, target) -> None:
    points = target.keyframe_points
    while len(points):
        points.remove(points[0], fast=True)
    points.add(len(source.keyframe_points))
    for old, new in zip(source.keyframe_points, points):
        for attribute in ("co", "handle_left", "handle_right"):
            setattr(new, attribute, getattr(old, attribute))
        for attribute in ("interpolation", "easing", "handle_left_type", "handle_right_type", "back", "amplitude", "period"):
            if hasattr(old, attribute):
                setattr(new, attribute, getattr(old, attribute))
    target.extrapolation = source.extrapolation
    target.mute = source.mute
    target.update()


def _copy_driver(source, target) -> None:
    old, new = source.driver, target.driver
    new.type = old.type
    new.expression = old.expression
    new.use_self = old.use_self
    while len(new.variables):
        new.variables.remove(new.variables[0])
    for variable in old.variables:
        copy = new.variables.new()
        copy.name, copy.type = variable.name, variable.type
        for source_target, copy_target in zip(variable.targets, copy.targets):
            if variable.type == "SINGLE_PROP":
                copy_target.id_type = source_target.id_type
            for attribute in ("id", "data_path", "bone_target", "transform_type", "transform_space", "rotation_mode"):
                try:
                    setattr(copy_target, attribute, getattr(source_target, attribute))
                except (AttributeError, TypeError):
                    pass
    if len(source.keyframe_points):
        while len(target.modifiers):
            target.modifiers.remove(target.modifiers[0])
        _copy_points(source, target)


def move_animation(source_tree, target_tree, names: dict[str, str], remove: bool = True) -> int:
    """Give the nodes `names` (source node name -> its copy's name in `target_tree`) their keys
    and drivers in `target_tree`, re-pathed to the copies; with `remove`, the source's go.
    Returns how many F-curves and drivers moved."""
    moved = 0
    data = source_tree.animation_data
    if data is None:
        return 0
    keyed = []
    owner = _fcurve_owner(source_tree, create=False)
    for fcurve in list(owner) if owner is not None else []:
        found = _node_of_path(fcurve.data_path, names)
        if found is not None:
            keyed.append((fcurve, node_path(names[found[0]], found[1])))
    for fcurve, path in keyed:
        first = fcurve.keyframe_points[0].co[0] if len(fcurve.keyframe_points) else 1.0
        copy = _new_fcurve(target_tree, path, fcurve.array_index, first)
        if copy is None:
            continue
        _copy_points(fcurve, copy)
        moved += 1
        if remove:
            owner.remove(fcurve)
    for driver in list(data.drivers):
        found = _node_of_path(driver.data_path, names)
        if found is None:
            continue
        path = node_path(names[found[0]], found[1])
        try:
            copy = target_tree.driver_add(path, driver.array_index)
        except TypeError:
            copy = target_tree.driver_add(path)
        _copy_driver(driver, copy)
        moved += 1
        if remove:
            data.drivers.remove(driver)
    return moved


def _new_fcurve(tree, path: str, index: int, frame: float):
    """An F-curve for `path` in `tree`'s action (made through a key, so Blender sets up the action
    and its slot the same way on 4.5 and 5.x)."""
    for attempt in (index, -1):
        try:
            tree.keyframe_insert(path, index=attempt, frame=frame)
            break
        except (TypeError, RuntimeError):
            continue
    else:
        return None
    owner = _fcurve_owner(tree, create=True)
    if owner is None:
        return None
    return next((f for f in owner if f.data_path == path and f.array_index == max(index, 0)), None) \
        or next((f for f in owner if f.data_path == path), None)
