"""The node registry: every node kind, once, with what the rest of the product needs to know.

Validation (spec.py), the compiler's stages (program.py), the Blender node classes (nodes/),
the Add menu (tree.py), presets (blender/presets.py) and the property tests all read this
table, so a node's Blender name, its sockets and its behaviour after the solver are written in
one place. Adding a node means one module in `nodes/` (its properties and `to_spec()`) and one
line here.

Plain data: no Blender here; `module` and `stage` are names the Blender side and the compiler
import lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Socket type -> the Blender socket class's bl_idname (tree.py defines the classes).
SOCKET_TYPES = {
    "Robot": "KinemaRobotSocket",
    "Target": "KinemaTargetSocket",
    "Solution": "KinemaSolutionSocket",
    "Link": "KinemaLinkSocket",
    "Collection": "NodeSocketCollection",  # Blender's own: a collection picker on the node, as in Geometry Nodes
}

#: Socket types Blender itself defines (tree.py makes classes only for the others).
BUILTIN_SOCKET_TYPES = frozenset(t for t, idname in SOCKET_TYPES.items() if idname.startswith("NodeSocket"))

#: The Add menu's sub-menus, in order: (menu bl_idname, label).
CATEGORIES = (
    ("KINEMA_MT_add_input", "Input"),
    ("KINEMA_MT_add_solve", "Solve"),
    ("KINEMA_MT_add_output", "Output"),
    ("KINEMA_MT_add_group", "Group"),
)


@dataclass(frozen=True)
class NodeKind:
    """One node kind. Sockets are (name, socket type); the name is the identifier links use."""

    kind: str  # the NodeSpec kind ("solver")
    bl_idname: str  # the Blender node class ("KinemaSolverNode")
    label: str  # what the user reads in the Add menu and on the node
    category: str  # the Add menu's sub-menu (a label of CATEGORIES)
    module: str  # the module in kinema_nodes/nodes/ that defines the node
    inputs: tuple[tuple[str, str], ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()
    multi_input: tuple[str, ...] = ()  # input sockets that take many links
    stage: str | None = None  # module in core/stages with apply_stage (nodes after the solver)
    in_spec: bool = True  # False: flattened away before validation (the Group node)
    icon: str = "NODE"  # the node's Blender icon


NODES = (
    NodeKind("robot", "KinemaRobotNode", "Robot", "Input", "robot", outputs=(("Robot", "Robot"),), icon="ARMATURE_DATA"),
    NodeKind("ik_target", "KinemaIKTargetNode", "IK Target", "Input", "ik_target",
             inputs=(("Robot", "Robot"), ("Link", "Link")), outputs=(("Target", "Target"),), icon="CON_KINEMATIC"),
    NodeKind("link_switch", "KinemaLinkSwitchNode", "Link Switch", "Input", "link_switch", outputs=(("Link", "Link"),), icon="LINKED"),
    NodeKind("tool", "KinemaToolNode", "Tool", "Input", "tool", outputs=(("Link", "Link"),), icon="TOOL_SETTINGS"),
    NodeKind("solver", "KinemaSolverNode", "Solver", "Solve", "solver",
             inputs=(("Targets", "Target"), ("Obstacles", "Collection")), outputs=(("Solution", "Solution"),),
             multi_input=("Targets",), icon="SETTINGS"),
    NodeKind("swivel", "KinemaSwivelNode", "Elbow Swivel", "Solve", "swivel",
             inputs=(("Solution", "Solution"),), outputs=(("Solution", "Solution"),), stage="swivel", icon="DRIVER_ROTATIONAL_DIFFERENCE"),
    NodeKind("configuration", "KinemaConfigurationNode", "Configuration Select", "Solve", "configuration",
             inputs=(("Solution", "Solution"),), outputs=(("Solution", "Solution"),), stage="configurations", icon="MOD_ARRAY"),
    NodeKind("gripper", "KinemaGripperNode", "Gripper", "Solve", "gripper",
             inputs=(("Solution", "Solution"),), outputs=(("Solution", "Solution"),), stage="gripper", icon="HAND"),
    NodeKind("grasp", "KinemaGraspNode", "Grasp", "Output", "grasp", inputs=(("Robot", "Robot"), ("Link", "Link")), icon="PINNED"),
    NodeKind("bake", "KinemaBakeNode", "Bake", "Output", "bake", inputs=(("Solution", "Solution"),), icon="KEYFRAME"),
    NodeKind("group", "KinemaGroupNode", "Group", "Group", "group", in_spec=False, icon="NODETREE"),
)

BY_KIND = {n.kind: n for n in NODES}
BY_IDNAME = {n.bl_idname: n for n in NODES}

#: The Blender node tree type of a Kinema tree (tree.py defines the class).
TREE_IDNAME = "KinemaNodeTree"
#: The Group node's Blender type: a node that uses another Kinema tree (blender/flatten.py flattens it away).
GROUP_IDNAME = BY_KIND["group"].bl_idname

#: The kinds a GraphSpec may hold (the Group node is flattened away by the snapshot).
SPEC_KINDS = tuple(n.kind for n in NODES if n.in_spec)

#: Kinds that take a Solution from a solver and pass it on (or bake it).
SOLUTION_KINDS = tuple(n.kind for n in NODES if ("Solution", "Solution") in n.inputs)


def bl_idname(kind: str) -> str:
    """The Blender node type of a kind: `tree.nodes.new(bl_idname("solver"))`."""
    return BY_KIND[kind].bl_idname


def kind_of(node) -> str | None:
    """The kind of a Blender node (or anything with a `bl_idname`), None for foreign nodes."""
    entry = BY_IDNAME.get(getattr(node, "bl_idname", None))
    return entry.kind if entry else None


def socket_feeds() -> dict[str, str]:
    """Output socket name -> the input socket name it may feed (the same socket type)."""
    feeds = {}
    for node in NODES:
        for name, socket_type in node.outputs:
            targets = {n for entry in NODES for n, t in entry.inputs if t == socket_type}
            if len(targets) == 1:
                feeds[name] = targets.pop()
    return feeds


def in_category(label: str) -> tuple[str, ...]:
    """The Blender node types of one Add-menu sub-menu, in registry order."""
    return tuple(n.bl_idname for n in NODES if n.category == label)
