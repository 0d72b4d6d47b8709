"""Solver node: solves its IK Targets jointly and writes the joints to the rig."""

import bpy

from ..blender.postures import BEFORE_ANY_KEY
from ..core.defaults import DEFAULT_SOLVE_BUDGET_MS
from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed

BACKEND_ITEMS = [
    ("PYROKI", "PyRoki", "JAX Levenberg-Marquardt on PyRoki's kinematics: a batch of seeds in one compiled call (float32, "
     "polished in float64), and a bake's frames as one scan. Compiles once per robot and target links (seconds the first "
     "time, then from the disk cache). Pick it for cold solves far from the current pose. Live, an ordinary tracking "
     "step (the control moved a little, the last answer's branch still converges) is answered by the NumPy kernel's "
     "one compiled call, as on NumPy; PyRoki answers the frames that need restarts or a branch change, and bakes"),
    ("NUMPY", "NumPy", "Compiled Levenberg-Marquardt kernel in float64 (numba; plain NumPy where numba is missing). It "
     "compiles once per machine, not per robot or bone, so a new robot solves at once. The fastest for live IK, bakes "
     "and big rigs. Joint limits, held and multi-turn joints, posture, weights"),
    ("OFF", "Off", "Leave the target in place but stop it driving the rig"),
]


#: How core's program words a step of a Solver that is Off (core/graph/program.py).
SOLVER_OFF = "solver off:"


class KinemaPosture(bpy.types.PropertyGroup):
    """A pose the spare joints settle toward from `frame` on (see core/solve/_posture.py; read and
    written by blender/postures.py)."""

    frame: bpy.props.FloatProperty(name="Frame", default=BEFORE_ANY_KEY)
    joints: bpy.props.StringProperty(name="Joints", description="JSON object: joint name -> value (rad or m)")


class KinemaSolverNode(KinemaTreeNode, bpy.types.Node):
    """Solves one or more IK Targets jointly (dual arm, hands and feet) and writes the rig"""

    kind = "solver"

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
    # Readout of the last live solve. Read-only views of the live session (session.py): writing them into
    # the tree every frame would make Blender re-evaluate the tree and the rig a second time.
    last_solve_ms: bpy.props.FloatProperty(name="Last solve (ms)", get=lambda self: _readout(self, "ms", 0.0))
    summary: bpy.props.StringProperty(name="Summary", get=lambda self: _readout(self, "summary", ""))
    solving_to: bpy.props.StringProperty(name="Solving To", get=lambda self: _readout(self, "solving_to", ""))
    backend_note: bpy.props.StringProperty(name="Backend Note", get=lambda self: _readout(self, "backend_note", ""))
    clearance_text: bpy.props.StringProperty(name="Clearance", get=lambda self: _readout(self, "clearance", ""),
                                             description="The last solve's smallest distance to what the robot avoids")
    over_budget: bpy.props.BoolProperty(name="Over Budget", description="Live updates paused: the last solve took longer than the budget")
    # Avoid collisions (issue #14): the robot against itself and against the Obstacles collection.
    avoid_self: bpy.props.BoolProperty(name="Self", default=False, update=property_changed,
                                       description="Keep the robot's links apart (pairs that touch at rest or are adjacent are skipped)")
    avoid_world: bpy.props.BoolProperty(name="World", default=True, update=property_changed,
                                        description="Keep the robot clear of the meshes in the Obstacles collection (and the ground plane)")
    margin_mm: bpy.props.FloatProperty(name="Margin (mm)", default=5.0, min=0.0, max=1000.0, precision=1, update=property_changed,
                                       description="Clearance kept between the robot and what it avoids, in millimetres")
    ground: bpy.props.BoolProperty(name="Ground Plane", default=False, update=property_changed,
                                   description="Keep the robot above the scene's ground (world Z = 0)")
    plan_between_keys: bpy.props.BoolProperty(
        name="Plan Between Keys", default=False, update=property_changed,
        description="Between two keys of the control, move along a collision-free joint path planned in the background "
                    "(timed to the keys' frames) where the per-frame answers would collide; applies with Avoid Collisions")
    plan_text: bpy.props.StringProperty(name="Planning", get=lambda self: _plan_readout(self),
                                        description="Plan Between Keys: segments planned, pending and flagged")
    postures: bpy.props.CollectionProperty(type=KinemaPosture, name="Postures",
                                           description="Where the spare joints of a redundant arm settle: the pose at Add IK "
                                                       "Target, and the pose at each keyed hand-off from its frame on")

    def draw_buttons(self, context, layout):
        layout.prop(self, "backend", text="")
        layout.prop(self, "live")
        draw_avoid(self, layout)
        draw_readout(self, layout)
        self.draw_messages(layout)

    def draw_buttons_ext(self, context, layout):
        self.draw_buttons(context, layout)
        for name in ("position_tolerance", "rotation_tolerance", "max_iterations", "use_own_budget", "budget_ms", "hold_prismatic"):
            layout.prop(self, name)

    @property
    def obstacles(self):
        """The Obstacles socket's collection (None: none chosen, or a Solver from before the socket)."""
        socket = self.inputs.get("Obstacles")
        return getattr(socket, "default_value", None) if socket is not None else None

    @obstacles.setter
    def obstacles(self, collection) -> None:
        socket = self.inputs.get("Obstacles") or self.inputs.new("NodeSocketCollection", "Obstacles")
        socket.default_value = collection
        property_changed(self, None)

    def avoids_world(self) -> bool:
        """World avoidance is on and there is something to avoid (a collection or the ground)."""
        return self.avoid_world and (self.obstacles is not None or self.ground)

    def avoids_anything(self) -> bool:
        return self.avoid_self or self.avoids_world()

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
            # the node's own settings, as the user set them (a preset keeps them); the compiler
            # decides what is avoided (core/graph/program.py: compiled_avoid)
            avoid_self=self.avoid_self, avoid_world=self.avoid_world, margin_mm=self.margin_mm, ground=self.ground,
            obstacles=self.obstacles.name if self.obstacles is not None else "", plan_between_keys=self.plan_between_keys,
        )


def _plan_readout(node) -> str:
    from ..blender.plan_between_keys import plan_readout

    return plan_readout(node)


def _readout(node, key, default):
    from ..session import readout

    return readout(node).get(key, default)


def draw_avoid(solver, layout, *, with_collection: bool = False) -> None:
    """The "Avoid collisions" settings: self and world toggles, the margin in millimetres, the
    ground plane; `with_collection` draws the Obstacles collection too (the node shows it on its
    socket)."""
    column = layout.column(align=True)
    row = column.row(align=True)
    row.prop(solver, "avoid_self", toggle=True)
    row.prop(solver, "avoid_world", toggle=True)
    socket = solver.inputs.get("Obstacles")
    if with_collection and socket is not None:
        column.prop(socket, "default_value", text="Obstacles")
    column.prop(solver, "margin_mm")
    column.prop(solver, "ground")
    column.prop(solver, "plan_between_keys", toggle=True)
    if solver.plan_between_keys and solver.plan_text:
        text = solver.plan_text
        column.label(text=text, icon="TIME" if text.startswith("Planning") else "ERROR" if ": " in text else "CHECKMARK")


def draw_readout(solver, layout):
    """'Last solve: N ms', the convergence summary and "Solving to '<link>'" (red when paused)."""
    column = layout.column(align=True)
    if solver.over_budget:
        column.alert = True
        column.label(text="Over budget; live updates paused", icon="ERROR")
        column.operator("kinema.resume_live", text="Resume", icon="PLAY")
    if solver.backend == "OFF":  # nothing is solved: no time, no link, whatever the last solve said
        column.label(text="Solver off: the rig follows its FK sliders", icon="PAUSE")
    elif solver.summary and not solver.summary.startswith(SOLVER_OFF):  # (a readout from before the switch back is stale)
        column.label(text=f"Last solve: {solver.last_solve_ms:.1f} ms")
        column.label(text=solver.summary)
        if solver.solving_to:
            column.label(text=f"Solving to '{solver.solving_to}'")
    if solver.backend_note:
        column.label(text=solver.backend_note, icon="INFO")


CLASSES = (KinemaPosture, KinemaSolverNode)
