"""Solver node: solves its IK Targets jointly and writes the joints to the rig."""

import bpy

from ..core.defaults import DEFAULT_SOLVE_BUDGET_MS
from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed

BACKEND_ITEMS = [
    ("PYROKI", "PyRoki", "The real solver: joint limits, singularities, multi-turn joints"),
    ("NUMPY", "NumPy", "Lightweight fallback: starts instantly; useful on huge rigs or without PyRoki"),
    ("OFF", "Off", "Leave the target in place but stop it driving the rig"),
]


class KinemaSolverNode(KinemaTreeNode, bpy.types.Node):
    """Solves one or more IK Targets jointly (dual arm, hands and feet) and writes the rig"""

    bl_idname = "KinemaSolverNode"
    bl_label = "Solver"
    bl_icon = "SETTINGS"

    backend: bpy.props.EnumProperty(name="Solver", items=BACKEND_ITEMS, default="PYROKI", update=property_changed)
    live: bpy.props.BoolProperty(name="Live IK", default=True, update=property_changed, description="Solve continuously as the target moves")
    position_tolerance: bpy.props.FloatProperty(name="Position Tolerance", default=1e-5, min=1e-9, precision=6, unit="LENGTH", update=property_changed)
    rotation_tolerance: bpy.props.FloatProperty(name="Rotation Tolerance", default=1e-5, min=1e-9, precision=6, update=property_changed,
                                                description="Radians")
    max_iterations: bpy.props.IntProperty(name="Iterations", default=100, min=1, max=10000, update=property_changed)
    use_own_budget: bpy.props.BoolProperty(name="Own Budget", default=False, update=property_changed,
                                           description="Use this node's budget instead of the one in Preferences")
    budget_ms: bpy.props.FloatProperty(name="Budget (ms)", default=DEFAULT_SOLVE_BUDGET_MS, min=0.001, update=property_changed)
    hold_prismatic: bpy.props.BoolProperty(name="Hold Slides", default=True, update=property_changed,
                                           description="Prismatic joints (finger slides, rails) keep their values; move them by hand")
    # Readout of the last live solve. Read-only views of the evaluator's memory: writing them into
    # the tree every frame would make Blender re-evaluate the tree and the rig a second time.
    last_solve_ms: bpy.props.FloatProperty(name="Last solve (ms)", get=lambda self: _readout(self, "ms", 0.0))
    summary: bpy.props.StringProperty(name="Summary", get=lambda self: _readout(self, "summary", ""))
    solving_to: bpy.props.StringProperty(name="Solving To", get=lambda self: _readout(self, "solving_to", ""))
    backend_note: bpy.props.StringProperty(name="Backend Note", get=lambda self: _readout(self, "backend_note", ""))
    over_budget: bpy.props.BoolProperty(name="Over Budget", description="Live updates paused: the last solve took longer than the budget")

    def init(self, context):
        self.inputs.new("KinemaTargetSocket", "Targets", use_multi_input=True)
        self.outputs.new("KinemaSolutionSocket", "Solution")

    def draw_buttons(self, context, layout):
        layout.prop(self, "backend", text="")
        layout.prop(self, "live")
        draw_readout(self, layout)
        self.draw_messages(layout)

    def draw_buttons_ext(self, context, layout):
        self.draw_buttons(context, layout)
        for name in ("position_tolerance", "rotation_tolerance", "max_iterations", "use_own_budget", "budget_ms", "hold_prismatic"):
            layout.prop(self, name)

    def effective_budget_ms(self) -> float:
        if self.use_own_budget:
            return self.budget_ms
        from ..ui.preferences import preferences

        prefs = preferences()
        return prefs.solve_budget_ms if prefs else DEFAULT_SOLVE_BUDGET_MS

    def to_spec(self) -> NodeSpec:
        return NodeSpec.make(
            self.name, "solver", backend=self.backend.lower(), live=self.live,
            position_tolerance=self.position_tolerance, rotation_tolerance=self.rotation_tolerance,
            max_iterations=self.max_iterations, budget_ms=self.effective_budget_ms(), hold_prismatic=self.hold_prismatic,
        )


def _readout(node, key, default):
    from ..evaluator import readout

    return readout(node).get(key, default)


def draw_readout(solver, layout):
    """'Last solve: N ms', the convergence summary and "Solving to '<link>'" (red when paused)."""
    column = layout.column(align=True)
    if solver.over_budget:
        column.alert = True
        column.label(text="Over budget; live updates paused", icon="ERROR")
        column.operator("kinema.resume_live", text="Resume", icon="PLAY")
    if solver.summary:
        column.label(text=f"Last solve: {solver.last_solve_ms:.1f} ms")
        column.label(text=solver.summary)
    if solver.solving_to:
        column.label(text=f"Solving to '{solver.solving_to}'")
    if solver.backend_note:
        column.label(text=solver.backend_note, icon="INFO")


CLASSES = (KinemaSolverNode,)
