"""Grasp node: a link (or a Tool) of the robot takes hold of an object at one frame and lets it
go at another (#30 item 5), as a part of the tree a preset can carry.

It is the Key Grasp / Key Release buttons written down once: its Key Grasp button visits the
grasp frame and the release frame and keys the same events on the object's grasp track
(blender/grasping.py, `core.grasp`), tagged as this node's, so keying again replaces them and the
buttons' own events stay. From then on the object is carried by the track: continuous at both
switches, where it was put after the release, in the robot's collision model while carried. Keying
reads the arm where each frame puts it, so key again after changing the arm's animation.

The link: a Tool (or Link Switch) wired into Link, else the Link field, else the robot's tool point.

A hand-over: the first robot's Grasp node with Release 0 (never), the second's grasping the same
object at the hand-over frame; the later grasp takes it, where the first one has it then. (A
release and a grasp keyed on one frame replace each other: the track holds one event a frame.)
"""

import bpy

from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed, rig_wired_into


class KinemaGraspNode(KinemaTreeNode, bpy.types.Node):
    """A link of the robot (or a Tool) carries an object from the Grasp frame to the Release frame"""

    kind = "grasp"

    carried: bpy.props.PointerProperty(name="Object", type=bpy.types.Object, update=property_changed,
                                       description="The object the robot carries")
    link_name: bpy.props.StringProperty(name="Link", update=property_changed,
                                        description="The link that carries it (default: a Tool wired in, else the tool point)")
    grasp_frame: bpy.props.IntProperty(name="Grasp", default=1, update=property_changed,
                                       description="The frame the link takes hold of the object, where it is then")
    release_frame: bpy.props.IntProperty(name="Release", default=0, update=property_changed,
                                         description="The frame it lets go, leaving it where it was put (0: never)")

    def robot_rig(self):
        return rig_wired_into(self)

    def holding_link(self, frame: float) -> str | None:
        """The link that carries the object at `frame`: a wired Tool's or Link Switch's, else the
        Link field (None: the robot's tool point)."""
        for link in self.inputs["Link"].links:
            chooser = getattr(link.from_node, "link_at", None)
            if chooser is not None and chooser(frame):
                return chooser(frame)
        return self.link_name or None

    def source(self) -> str:
        """The tag this node's events carry on the object's grasp track."""
        return f"{self.id_data.name}/{self.name}"

    def draw_buttons(self, context, layout):
        layout.prop(self, "carried")
        if not self.inputs["Link"].links:
            rig = self.robot_rig()
            if rig is not None:
                layout.prop_search(self, "link_name", rig.data, "bones", text="Link")
            else:
                layout.prop(self, "link_name")
        row = layout.row(align=True)
        row.prop(self, "grasp_frame")
        row.prop(self, "release_frame")
        op = layout.operator("kinema.key_grasp_node", icon="PINNED")
        op.tree, op.node = self.id_data.name, self.name
        self.draw_messages(layout)

    def to_spec(self) -> NodeSpec:
        # The object is one shot's, not the setup's: a preset carries the link (as a role) and the frames.
        return NodeSpec.make(self.name, "grasp", link=self.link_name, grasp_frame=int(self.grasp_frame),
                             release_frame=int(self.release_frame))


CLASSES = (KinemaGraspNode,)
