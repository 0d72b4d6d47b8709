"""Shared shape of the nodes that take a Solution: Swivel, Configuration-Select, Bake."""

from ..core.graph.spec import NodeSpec
from ..core.graph.program import PASSTHROUGH_NOTE, stage_function
from ..tree import KinemaTreeNode


class SolutionNode(KinemaTreeNode):
    """A node after the solver. `settings` are structural (in the spec); `frame_settings` are
    read every frame (keyable, drivable) and handed to the node's stage as `values`."""

    settings: tuple[str, ...] = ()
    frame_settings: tuple[str, ...] = ()

    def init(self, context):
        super().init(context)
        if self.kind in PASSTHROUGH_NOTE and stage_function(self.kind) is None:
            self.kinema_note = PASSTHROUGH_NOTE[self.kind]

    def draw_buttons(self, context, layout):
        for name in (*self.settings, *self.frame_settings):
            layout.prop(self, name)
        self.draw_messages(layout)

    def frame_values(self) -> dict:
        return {name: getattr(self, name) for name in self.frame_settings}

    def to_spec(self) -> NodeSpec:
        return NodeSpec.make(self.name, self.kind, **{name: getattr(self, name) for name in self.settings})
