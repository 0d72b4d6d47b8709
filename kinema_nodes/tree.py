"""The Kinema node editor: its tree type and socket types."""

import bpy


class KinemaNodeTree(bpy.types.NodeTree):
    """A graph of Robot, IK Target, Solver, Swivel, Configuration-Select and Bake nodes."""

    bl_idname = "KinemaNodeTree"
    bl_label = "Kinema Nodes"
    bl_icon = "CON_KINEMATIC"


CLASSES = (KinemaNodeTree,)
