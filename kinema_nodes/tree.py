"""The Kinema node editor: its tree type, socket types and Add menu."""

import bpy
from bl_ui import node_add_menu

from .core.graph.registry import (BUILTIN_SOCKET_TYPES, BY_IDNAME, BY_KIND, CATEGORIES as MENU_CATEGORIES, SOCKET_TYPES, TREE_IDNAME,
                                  in_category)


class KinemaNodeTree(bpy.types.NodeTree):
    """Robot IK as a graph: Robot, IK Target, Solver, Swivel, Configuration-Select and Bake nodes"""

    bl_idname = TREE_IDNAME
    bl_label = "Kinema Nodes"
    bl_icon = "CON_KINEMATIC"

    def update(self):
        from .session import mark_dirty

        mark_dirty(self)


class _Socket:
    """A socket that only carries a connection; its colour says what flows through it."""

    color = (0.6, 0.6, 0.6, 1.0)

    def draw(self, context, layout, node, text):
        layout.label(text=text)

    @classmethod
    def draw_color_simple(cls):
        return cls.color


def _socket(socket_type: str, doc: str, color: tuple) -> type:
    """The Blender socket class of one socket type of the node registry."""
    idname = SOCKET_TYPES[socket_type]
    return type(idname, (_Socket, bpy.types.NodeSocket), {"__doc__": doc, "bl_idname": idname, "bl_label": socket_type, "color": color})


SOCKETS = (
    _socket("Robot", "A robot: the rig and its kinematics", (0.95, 0.55, 0.15, 1.0)),
    _socket("Target", "An IK goal: a control and the link aimed at it", (0.25, 0.75, 0.95, 1.0)),
    _socket("Solution", "Joint values that reach the targets", (0.45, 0.85, 0.35, 1.0)),
    _socket("Link", "The name of a link (bone) to aim at; connect a Link Switch to choose it procedurally", (0.85, 0.4, 0.85, 1.0)),
)


def rig_wired_into(node):
    """The rig of the Robot node wired into `node`'s Robot input, or None (IK Target, Grasp)."""
    for link in node.inputs["Robot"].links:
        rig = getattr(link.from_node, "rig", None)
        if rig is not None:
            return rig
    return None


class KinemaTreeNode:
    """Mix-in for every Kinema node: only in Kinema trees; shows its error; returns a spec.

    A node class names its `kind`; its Blender name, label, icon and sockets come from the
    node registry (core/graph/registry.py)."""

    kind = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        entry = BY_KIND.get(cls.kind)
        if entry is not None:
            cls.bl_idname, cls.bl_label, cls.bl_icon = entry.bl_idname, entry.label, entry.icon

    kinema_error: bpy.props.StringProperty(name="Error", description="Why this node cannot run")
    kinema_note: bpy.props.StringProperty(name="Note", description="What this node does for now")

    @classmethod
    def poll(cls, tree):
        return tree.bl_idname == TREE_IDNAME

    def init(self, context):
        self.add_sockets()

    def draw_messages(self, layout):
        if self.kinema_error:
            layout.label(text=self.kinema_error, icon="ERROR")
        if self.kinema_note:
            layout.label(text=self.kinema_note, icon="INFO")

    def add_sockets(self) -> None:
        """The node's sockets, as the node registry lists them for its kind."""
        entry = BY_IDNAME[self.bl_idname]
        for name, socket_type in entry.inputs:
            if socket_type in BUILTIN_SOCKET_TYPES:  # Blender's own socket: no multi-input flag
                self.inputs.new(SOCKET_TYPES[socket_type], name)
                continue
            self.inputs.new(SOCKET_TYPES[socket_type], name, use_multi_input=name in entry.multi_input)
        for name, socket_type in entry.outputs:
            self.outputs.new(SOCKET_TYPES[socket_type], name)

    def mark_dirty(self, context=None):
        from .session import mark_dirty

        mark_dirty(self.id_data)


def property_changed(self, context):
    """Property update callback: only marks the tree for recompiling (never solves here)."""
    from .session import mark_dirty

    mark_dirty(self.id_data)


#: The Add menu: (menu bl_idname, label, node types), read from the node registry.
CATEGORIES = tuple((idname, label, in_category(label)) for idname, label in MENU_CATEGORIES)


def _category_menu(idname, label, node_types):
    def draw(self, context):
        for node_type in node_types:
            if bpy.types.Node.bl_rna_get_subclass_py(node_type) is not None:
                node_add_menu.add_node_type(self.layout, node_type)

    return type(idname, (bpy.types.Menu,), {"bl_idname": idname, "bl_label": label, "draw": draw})


MENUS = tuple(_category_menu(*category) for category in CATEGORIES)


def draw_add_menu(self, context):
    if getattr(context.space_data, "tree_type", None) != TREE_IDNAME:
        return
    for idname, _, _ in CATEGORIES:
        self.layout.menu(idname)


CLASSES = (KinemaNodeTree, *SOCKETS, *MENUS)


def _is_kinema_tree(self, tree):
    return tree.bl_idname == TREE_IDNAME


def register():
    bpy.types.NODE_MT_add.append(draw_add_menu)
    # The rig points at its tree: keeps the tree saved with the file, and makes the depsgraph
    # evaluate the tree's animation (keyed Target Bone, configuration index) each frame.
    bpy.types.Object.kinema_tree = bpy.props.PointerProperty(
        name="Kinema Tree", type=bpy.types.NodeTree, poll=_is_kinema_tree, description="The Kinema node tree that drives this rig",
        override={"LIBRARY_OVERRIDABLE"},  # a linked rig's override gets a tree of its own (blender/edit.py: own_tree)
    )


def unregister():
    del bpy.types.Object.kinema_tree
    bpy.types.NODE_MT_add.remove(draw_add_menu)
