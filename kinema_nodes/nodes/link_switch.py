"""Link Switch node: picks the link an IK Target aims at, by frame ranges or by a driven value.

Wire its Link output into an IK Target's Link input. Each row is (from, link): the last row
whose "from" is at or below the current frame (mode Frame) or the node's Value (mode Value,
which can be keyed or driven) wins, so the choice steps and never passes through the links
in between.
"""

import bpy

from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed

MODE_ITEMS = [
    ("FRAME", "Frame", "Each row starts at a frame"),
    ("VALUE", "Value", "Each row starts at a value of the node's Value (key or drive it)"),
]


class KinemaLinkRange(bpy.types.PropertyGroup):
    start: bpy.props.FloatProperty(name="From", default=1.0, update=property_changed, description="First frame (or value) of this row")
    link: bpy.props.StringProperty(name="Link", update=property_changed, description="Link (bone) to aim at from here on")


class KinemaLinkSwitchNode(KinemaTreeNode, bpy.types.Node):
    """Chooses which link an IK Target aims at, by frame ranges or by a driven value"""

    kind = "link_switch"

    mode: bpy.props.EnumProperty(name="By", items=MODE_ITEMS, default="FRAME", update=property_changed)
    value: bpy.props.FloatProperty(name="Value", update=property_changed, description="Drive or key this to choose a row (mode Value)")
    ranges: bpy.props.CollectionProperty(type=KinemaLinkRange)

    def add_range(self, start: float, link: str):
        row = self.ranges.add()
        row.start, row.link = float(start), link
        self.mark_dirty()
        return row

    def draw_buttons(self, context, layout):
        layout.prop(self, "mode", expand=True)
        if self.mode == "VALUE":
            layout.prop(self, "value")
        for index, row in enumerate(self.ranges):
            line = layout.row(align=True)
            line.prop(row, "start", text="")
            line.prop(row, "link", text="")
            op = line.operator("kinema.link_switch_row", text="", icon="X")
            op.node, op.index = self.name, index
        op = layout.operator("kinema.link_switch_row", text="Add Row", icon="ADD")
        op.node, op.index = self.name, -1
        self.draw_messages(layout)

    def link_at(self, frame: float) -> str | None:
        """The link chosen at `frame` (the same rule the compiled program uses)."""
        from ..core.graph.program import link_switch

        return link_switch(self.to_spec())(frame)

    def to_spec(self) -> NodeSpec:
        # The Value is part of the spec: a driven change recompiles (cheap; solver compiles are cached).
        return NodeSpec.make(self.name, "link_switch", mode=self.mode.lower(), value=float(self.value),
                             ranges=tuple((float(r.start), r.link) for r in self.ranges if r.link))


CLASSES = (KinemaLinkRange, KinemaLinkSwitchNode)
