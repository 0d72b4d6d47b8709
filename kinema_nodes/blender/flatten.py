"""Flattening node groups for the evaluator: a tree and every group it uses as one plain spec.

A group is a Kinema tree with Group Input / Group Output nodes (its interface); a Group node
(`nodes/group.py`) uses it in another tree. Groups nest. The evaluator never runs a group by
itself: `flatten` turns a tree and every group it uses into one plain `GraphSpec` where the
nodes inside a group are named by their path ("Arm/IK Target", "Arm/Wrist/IK Target"), and
the links through Group Input / Group Output / Reroute nodes are joined end to end. Because
the spec is compared on every run, editing a group tree recompiles every tree that uses it.
Flattening keeps each Group node's sockets and each tree's list of groups used in step
(`sync_sockets`, `sync_group_uses`); making and editing groups is `groups.py`'s.

`node_by_path` is the inverse: the bpy node for a flattened name.
"""

from __future__ import annotations

import bpy

from ..core.graph.registry import GROUP_IDNAME, SOCKET_TYPES, TREE_IDNAME
from ..core.graph.spec import GraphSpec, LinkSpec, NodeSpec

SEPARATOR = "/"
#: Deepest nesting we follow; deeper (or a group that contains itself) is an error on the node.
MAX_DEPTH = 16
INTERFACE_NODES = ("NodeGroupInput", "NodeGroupOutput")

#: Errors found while flattening, by (tree pointer, group node name): missing or recursive group.
_flatten_errors: dict[tuple[int, str], str] = {}

def clear_errors() -> None:
    """Forget the group errors found so far (a new file, a test's fresh start)."""
    _flatten_errors.clear()


# ---- what is a group ---------------------------------------------------------------------

def is_group_tree(tree) -> bool:
    """A tree used as a group: it has Group Input / Group Output nodes or interface sockets, or
    a Group node anywhere uses it."""
    if any(node.bl_idname in INTERFACE_NODES for node in tree.nodes):
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


def interface_sockets(tree, in_out: str) -> list:
    return [item for item in tree.interface.items_tree if item.item_type == "SOCKET" and item.in_out == in_out]


def sync_sockets(group_node) -> bool:
    """Give a Group node the sockets of its group's interface (keeping links where a socket
    stays). Returns True when anything changed."""
    tree = group_node.node_tree
    changed = False
    for sockets, in_out in ((group_node.inputs, "INPUT"), (group_node.outputs, "OUTPUT")):
        wanted = interface_sockets(tree, in_out) if tree is not None and tree.bl_idname == TREE_IDNAME else []
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
    if not as_group_root and (kinds & set(INTERFACE_NODES) or _used_as_group(tree)):
        return GraphSpec(())
    if not as_group_root and GROUP_IDNAME not in kinds and "NodeReroute" not in kinds:
        return _plain_snapshot(tree, tree_nodes)  # the common case, kept as cheap as it was
    nodes: list[NodeSpec] = []
    edges: list[tuple] = []
    _expand(tree, "", (tree.as_pointer(),), tree.as_pointer(), nodes, edges)
    if as_group_root:
        robot_inputs = {item.identifier for item in interface_sockets(tree, "INPUT") if item.socket_type == SOCKET_TYPES["Robot"]}
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
    from ..session import compiled_program

    tree = group_node.id_data
    messages = []
    error = _flatten_errors.get((tree.as_pointer(), group_node.name))
    if error:
        messages.append(error)
    program = compiled_program(tree)
    if program is not None:
        prefix = group_node.name + SEPARATOR
        for name, found in program.problems.by_node.items():
            if name.startswith(prefix) and found:
                messages.append(f"{name[len(prefix):]}: {'; '.join(found)}")
    return "; ".join(messages)


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
