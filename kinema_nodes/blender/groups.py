"""Node groups in Kinema trees: flattening for the evaluator, and making and editing groups.

A group is a Kinema tree with Group Input / Group Output nodes (its interface); a Group node
(`nodes/group.py`) uses it in another tree. Groups nest. The evaluator never runs a group by
itself: `flatten` turns a tree and every group it uses into one plain `GraphSpec` where the
nodes inside a group are named by their path ("Arm/IK Target", "Arm/Wrist/IK Target"), and
the links through Group Input / Group Output / Reroute nodes are joined end to end. Because
the spec is compared on every run, editing a group tree recompiles every tree that uses it.

`node_by_path` is the inverse: the bpy node for a flattened name.
"""

from __future__ import annotations

import bpy

from ..core.graph.registry import SOCKET_TYPES
from ..core.graph.spec import GraphSpec, LinkSpec, NodeSpec
from ..nodes.group import GROUP_IDNAME
from ..tree import TREE_IDNAME
from .animation import node_path, unquoted_prefix

SEPARATOR = "/"
#: Deepest nesting we follow; deeper (or a group that contains itself) is an error on the node.
MAX_DEPTH = 16
_INTERFACE_NODES = ("NodeGroupInput", "NodeGroupOutput")

#: Errors found while flattening, by (tree pointer, group node name): missing or recursive group.
_flatten_errors: dict[tuple[int, str], str] = {}


def _link_ends(node, socket, interface: str, outside: dict, copies: dict) -> list | None:
    """Where one end of a link inside a group lands once the group is ungrouped: the outside
    sockets of a Group Input/Output socket, the copy of a node, or None (nothing to link)."""
    if node.bl_idname == interface:
        return outside.get(socket.identifier, [])
    if node.name in copies:
        return [(copies[node.name], socket.identifier)]
    return None


def reset_caches() -> None:
    _flatten_errors.clear()


# ---- what is a group ---------------------------------------------------------------------

def is_group_tree(tree) -> bool:
    """A tree used as a group: it has Group Input / Group Output nodes or interface sockets, or
    a Group node anywhere uses it."""
    if any(node.bl_idname in _INTERFACE_NODES for node in tree.nodes):
        return True
    if any(item.item_type == "SOCKET" for item in tree.interface.items_tree):
        return True
    return _used_as_group(tree)


def _used_as_group(tree) -> bool:
    return any(
        other.bl_idname == TREE_IDNAME and other != tree
        and any(node.bl_idname == GROUP_IDNAME and node.node_tree == tree for node in other.nodes)
        for other in bpy.data.node_groups
    )


def _interface_sockets(tree, in_out: str) -> list:
    return [item for item in tree.interface.items_tree if item.item_type == "SOCKET" and item.in_out == in_out]


def sync_sockets(group_node) -> bool:
    """Give a Group node the sockets of its group's interface (keeping links where a socket
    stays). Returns True when anything changed."""
    tree = group_node.node_tree
    changed = False
    for sockets, in_out in ((group_node.inputs, "INPUT"), (group_node.outputs, "OUTPUT")):
        wanted = _interface_sockets(tree, in_out) if tree is not None and tree.bl_idname == TREE_IDNAME else []
        have = [(s.identifier, s.bl_idname, s.name) for s in sockets]
        if have == [(w.identifier, w.socket_type, w.name) for w in wanted]:
            continue
        changed = True
        wanted_ids = {w.identifier: w for w in wanted}
        for socket in list(sockets):
            item = wanted_ids.get(socket.identifier)
            if item is None or item.socket_type != socket.bl_idname:
                sockets.remove(socket)
        for index, item in enumerate(wanted):
            socket = next((s for s in sockets if s.identifier == item.identifier), None)
            if socket is None:
                multi = in_out == "INPUT" and item.socket_type == SOCKET_TYPES["Target"]
                kwargs = {"use_multi_input": True} if multi else {}
                socket = sockets.new(item.socket_type, item.name, identifier=item.identifier, **kwargs)
            socket.name = item.name
            current = list(sockets).index(socket)
            if current != index:
                sockets.move(current, index)
    return changed


# ---- flattening ---------------------------------------------------------------------------

def _endpoint(node, socket, prefix: str, side: str):
    """A link end: ("node", name, socket) for a real node, else a pass-through key."""
    kind = node.bl_idname
    if kind == "NodeGroupInput":
        return ("group_in", prefix, socket.identifier) if side == "from" else None
    if kind == "NodeGroupOutput":
        return ("group_out", prefix, socket.identifier) if side == "to" else None
    if kind == GROUP_IDNAME:
        inner = f"{prefix}{node.name}{SEPARATOR}"
        return ("group_out", inner, socket.identifier) if side == "from" else ("group_in", inner, socket.identifier)
    if kind == "NodeReroute":
        return ("reroute", f"{prefix}{node.name}", "")
    return ("node", f"{prefix}{node.name}", socket.name)


def _expand(tree, prefix: str, stack: tuple, owner_key, nodes: list, edges: list) -> None:
    for node in tree.nodes:
        if node.mute:
            continue
        if node.bl_idname == GROUP_IDNAME:
            key = (owner_key, prefix + node.name)
            inner = node.node_tree
            error = ""
            if inner is None:
                error = "no group: choose the node group this node uses"
            elif inner.bl_idname != TREE_IDNAME:
                error = f"'{inner.name}' is not a Kinema node tree"
            elif inner.as_pointer() in stack or len(stack) > MAX_DEPTH:
                error = f"group '{inner.name}' contains itself"
            if error:
                _flatten_errors[key] = error
                # A node of no known kind: validation refuses to run the graph, on this node.
                nodes.append(NodeSpec.make(prefix + node.name, "group", error=error))
                continue
            _flatten_errors.pop(key, None)
            sync_sockets(node)  # the interface may have changed since the node last updated
            sync_group_uses(inner)
            _expand(inner, f"{prefix}{node.name}{SEPARATOR}", (*stack, inner.as_pointer()), owner_key, nodes, edges)
        elif hasattr(node, "to_spec"):
            spec = node.to_spec()
            nodes.append(NodeSpec(prefix + spec.name, spec.kind, spec.params) if prefix else spec)
    for link in tree.links:
        if link.is_muted or link.from_node.mute or link.to_node.mute:
            continue
        source = _endpoint(link.from_node, link.from_socket, prefix, "from")
        target = _endpoint(link.to_node, link.to_socket, prefix, "to")
        if source is not None and target is not None:
            edges.append((source, target))


def flatten(tree, *, as_group_root: bool = False) -> GraphSpec:
    """`tree` and every group it uses as one plain GraphSpec (see module doc).

    A tree that is itself a group gives an empty spec: it only runs inside its users. With
    `as_group_root` a group is flattened as if it were a whole graph (to save it as a preset):
    its Robot inputs come from one Robot node named "Robot"; its other inputs stay unconnected.
    """
    tree_nodes = tree.nodes[:]
    kinds = {node.bl_idname for node in tree_nodes}
    sync_group_uses(tree)  # a group chosen in the UI, or a file from before: its keys evaluate too
    if not as_group_root and (kinds & set(_INTERFACE_NODES) or _used_as_group(tree)):
        return GraphSpec(())
    if not as_group_root and GROUP_IDNAME not in kinds and "NodeReroute" not in kinds:
        return _plain_snapshot(tree, tree_nodes)  # the common case, kept as cheap as it was
    nodes: list[NodeSpec] = []
    edges: list[tuple] = []
    _expand(tree, "", (tree.as_pointer(),), tree.as_pointer(), nodes, edges)
    if as_group_root:
        robot_inputs = {item.identifier for item in _interface_sockets(tree, "INPUT") if item.socket_type == SOCKET_TYPES["Robot"]}
        if robot_inputs:
            robot = "Robot"
            while any(n.name == robot for n in nodes):
                robot += "+"
            nodes.append(NodeSpec.make(robot, "robot"))
            edges = [(("node", robot, "Robot") if s[0] == "group_in" and s[1] == "" and s[2] in robot_inputs else s, t)
                     for s, t in edges]
    names = {n.name for n in nodes}
    onward: dict[tuple, list[tuple]] = {}
    for source, target in edges:
        if source[0] != "node":
            onward.setdefault(source, []).append(target)
    links: list[LinkSpec] = []
    for source, target in edges:
        if source[0] != "node":
            continue
        for end in _real_ends(target, onward, set()):
            link = LinkSpec(source[1], source[2], end[1], end[2])
            if source[1] in names and end[1] in names and link not in links:
                links.append(link)
    return GraphSpec(tuple(nodes), tuple(links))


def _plain_snapshot(tree, tree_nodes) -> GraphSpec:
    """A tree without groups or reroutes: its nodes and the links between them, as they are."""
    nodes = tuple(node.to_spec() for node in tree_nodes if hasattr(node, "to_spec") and not node.mute)
    names = {n.name for n in nodes}
    links = tuple(
        LinkSpec(link.from_node.name, link.from_socket.name, link.to_node.name, link.to_socket.name)
        for link in tree.links
        if not link.is_muted and link.from_node.name in names and link.to_node.name in names
    )
    return GraphSpec(nodes, links)


def _real_ends(end: tuple, onward: dict, seen: set) -> list[tuple]:
    if end[0] == "node":
        return [end]
    if end in seen:
        return []
    seen.add(end)
    found = []
    for nxt in onward.get(end, ()):
        found.extend(_real_ends(nxt, onward, seen))
    return found


def node_by_path(tree, name: str):
    """The bpy node for a flattened node name ("Group/Inner/IK Target"), or None."""
    node = tree.nodes.get(name)
    if node is not None:
        return node
    for group in tree.nodes:
        if group.bl_idname == GROUP_IDNAME and group.node_tree is not None and name.startswith(group.name + SEPARATOR):
            found = node_by_path(group.node_tree, name[len(group.name) + len(SEPARATOR):])
            if found is not None:
                return found
    return None


def all_nodes(tree, _depth: int = 0):
    """Every node of `tree` and of the groups it uses (each group tree once)."""
    seen = set()

    def walk(current, depth):
        for node in current.nodes:
            yield node
            inner = getattr(node, "node_tree", None) if node.bl_idname == GROUP_IDNAME else None
            if inner is not None and inner.as_pointer() not in seen and depth < MAX_DEPTH:
                seen.add(inner.as_pointer())
                yield from walk(inner, depth + 1)

    return list(walk(tree, _depth))


def group_problems(group_node) -> str:
    """What stops the nodes inside a Group node from running (shown on the Group node)."""
    from .. import evaluator

    tree = group_node.id_data
    messages = []
    error = _flatten_errors.get((tree.as_pointer(), group_node.name))
    if error:
        messages.append(error)
    program = evaluator.compiled_program(tree)
    if program is not None:
        prefix = group_node.name + SEPARATOR
        for name, found in program.problems.by_node.items():
            if name.startswith(prefix) and found:
                messages.append(f"{name[len(prefix):]}: {'; '.join(found)}")
    return "; ".join(messages)


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
    nodes = [n for n in nodes if n.bl_idname not in _INTERFACE_NODES]
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
    _mark(tree)
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
        if node.bl_idname in _INTERFACE_NODES:
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
    _mark(tree)
    return [tree.nodes[name] for name in copies.values()]


def add_group_node(tree, group):
    """A Group node in `tree` that uses `group`, with its sockets."""
    node = tree.nodes.new(GROUP_IDNAME)
    node.node_tree = group
    sync_sockets(node)
    sync_group_uses(tree)
    _mark(tree)
    return node


# ---- animation inside groups ---------------------------------------------------------------

def sync_group_uses(tree) -> bool:
    """Point `tree` at every group tree its Group nodes use (`tree.kinema_groups`).

    Blender's depsgraph evaluates the keys and drivers of a node tree only when something it
    evaluates points at that tree: the rig points at its tree (`Object.kinema_tree`), and this
    makes each tree point on at its groups, so keys and drivers on nodes inside a group are
    evaluated every frame, for every user of the group. Returns True when the list changed."""
    uses = getattr(tree, "kinema_groups", None)
    if uses is None:
        return False
    wanted = []
    for node in tree.nodes:
        inner = node.node_tree if node.bl_idname == GROUP_IDNAME else None
        if inner is not None and inner != tree and inner not in wanted:
            wanted.append(inner)
    if [use.tree for use in uses] == wanted:
        return False
    try:
        uses.clear()
        for inner in wanted:
            uses.add().tree = inner
    except (AttributeError, RuntimeError):  # a context that may not write data (a draw): next run does
        return False
    return True


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


def _mark(tree) -> None:
    from ..evaluator import mark_dirty

    mark_dirty(tree)
