"""Group node: runs another Kinema tree (a node group) as if its nodes were here.

The group's inputs and outputs are the group tree's interface sockets (Group Input / Group
Output nodes inside). The node computes nothing: the evaluator flattens groups into one plain
graph when it compiles (`blender/flatten.py`), so a group costs nothing per frame. Editing the
group tree changes every Group node that uses it.

Registered through `ui/group_operators.py` (with the operators that make and edit groups).
"""

import bpy

from ..core.graph.registry import BY_KIND, GROUP_IDNAME, TREE_IDNAME


class KinemaGroupUse(bpy.types.PropertyGroup):
    """A group tree used by a Group node of this tree (see `flatten.sync_group_uses`)."""

    tree: bpy.props.PointerProperty(type=bpy.types.NodeTree, name="Group")


def register_group_uses() -> None:
    """`NodeTree.kinema_groups`: the group trees a Kinema tree uses, so their animation evaluates."""
    bpy.types.NodeTree.kinema_groups = bpy.props.CollectionProperty(type=KinemaGroupUse, name="Groups Used")


def unregister_group_uses() -> None:
    del bpy.types.NodeTree.kinema_groups


class KinemaGroupNode(bpy.types.NodeCustomGroup):
    """A node group: another Kinema tree used here; edit it once, every user changes"""

    bl_idname = GROUP_IDNAME
    bl_label, bl_icon = BY_KIND["group"].label, BY_KIND["group"].icon

    @classmethod
    def poll(cls, tree):
        return tree.bl_idname == TREE_IDNAME

    def init(self, context):
        self.width = 180

    def update(self):
        from ..blender.flatten import sync_sockets

        sync_sockets(self)

    def draw_buttons(self, context, layout):
        layout.template_ID(self, "node_tree")
        if self.node_tree is not None:
            layout.operator("kinema.group_edit", text="Edit Group", icon="NODETREE").node = self.name
        for line in self.kinema_error.split("; ") if self.kinema_error else ():
            layout.label(text=line, icon="ERROR")
        self.draw_readouts(layout)

    def draw_readouts(self, layout):
        """This user's own readout of each Solver inside the group (a group used twice is two
        instances: the Solver node inside shows the last one that ran)."""
        from ..session import compiled_program, readout_of

        tree = self.id_data
        program = compiled_program(tree)
        prefix = self.name + "/"
        for step in program.steps if program is not None else ():
            if not step.node.startswith(prefix):
                continue
            shown = readout_of(tree, step.node)
            if shown.get("paused"):
                layout.label(text=f"{step.node[len(prefix):]}: Over budget; live updates paused", icon="ERROR")
            elif shown.get("summary"):
                layout.label(text=f"{step.node[len(prefix):]}: {shown['summary']} ({shown.get('ms', 0.0):.1f} ms)")

    def draw_label(self):
        return self.node_tree.name if self.node_tree is not None else "Group"

    # The evaluator writes `kinema_error` on every node after compiling; a group's errors are
    # those of the nodes inside it (named "<group node>/<node>"), read from the compiled
    # program instead of stored, so one edit of the group shows on every user.
    @property
    def kinema_error(self) -> str:
        from ..blender.flatten import group_problems

        return group_problems(self)

    @kinema_error.setter
    def kinema_error(self, value) -> None:
        pass

    kinema_note = ""

    def draw_messages(self, layout):
        if self.kinema_error:
            layout.label(text=self.kinema_error, icon="ERROR")
