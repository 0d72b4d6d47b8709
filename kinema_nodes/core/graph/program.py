"""GraphSpec -> Program: ordered solver steps, compiled once and run every frame.

Compiling resolves everything structural (which robot, which targets, which solver options,
what follows the solver). Running takes only what changes per frame (`FrameInputs`) and
returns joint values per rig, never NaN, with the readout the panel shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from .registry import BY_KIND
from .spec import GraphSpec, NodeSpec, Problems, downstream_chain, rig_of_target, validate
from ..model.robot import RobotModel
from ..model.rotations import matrix_to_quaternion

if TYPE_CHECKING:  # the solvers import JAX lazily; the graph only names their types
    from ..solve import IKTarget, SolveOptions, SolveResult

BACKENDS = ("pyroki", "numpy", "off")

PASSTHROUGH_NOTE = {
    "swivel": "passes the solution through (elbow swivel is not built yet)",
    "configuration": "passes the solution through (configuration select is not built yet)",
    "bake": "passes the solution through; bake from the panel or the CLI",
}


@dataclass(frozen=True)
class TargetStep:
    node: str
    link: str  # the link this target aims at unless a per-frame choice or a Link input says otherwise
    link_source: str | None  # node whose Link output feeds this target
    position_weight: float
    rotation_weight: float


@dataclass
class SolverStep:
    node: str
    rig: str
    robot: RobotModel
    targets: tuple[TargetStep, ...]
    backend: str
    options: SolveOptions
    after_solver: tuple[str, ...]  # the stage nodes that follow the solver, in order
    hold_prismatic: bool
    #: Plan Between Keys (issue #31): on, and something to avoid (it applies with Avoid Collisions)
    plan_between_keys: bool = False


@dataclass
class FrameInputs:
    """What changes each frame. Poses are 4x4 in the robot's root frame (armature space)."""

    frame: float
    controls: dict[str, np.ndarray]
    starts: dict[str, np.ndarray]
    links: dict[str, str] = field(default_factory=dict)  # per-frame link choice per target node
    values: dict[str, dict] = field(default_factory=dict)  # per-frame settings per node (swivel angle, configuration index)


@dataclass
class StepResult:
    node: str
    rig: str
    joints: np.ndarray | None  # None: nothing to write (solver off, or no valid input)
    solved_links: tuple[str, ...]
    summary: str
    ms: float = 0.0
    converged: bool = False
    result: SolveResult | None = None  # when a solve ran
    reports: dict = field(default_factory=dict)  # per stage node, what it reported (Configuration-Select: its solutions)


def summarise(result) -> str:
    """The readout line: "converged, 0.002 mm" or "did not converge: out of reach"."""
    if result.converged:
        return f"converged, {result.position_error * 1000:.3f} mm"
    return f"did not converge: {result.reason} ({result.position_error * 1000:.2f} mm, {np.degrees(result.rotation_error):.2f}°)"


def pose_to_target(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 4x4 control pose -> (position, wxyz), ignoring any scale on the control."""
    pose = np.asarray(pose, dtype=float)
    if pose.shape == (4, 4):
        wxyz = single_quaternion(pose[:3, :3].tolist())
        if wxyz is not None:
            return pose[:3, 3].copy(), np.array(wxyz)
    rotation = pose[:3, :3] / np.linalg.norm(pose[:3, :3], axis=0, keepdims=True)
    return pose[:3, 3].copy(), matrix_to_quaternion(rotation)


def bone_goal(flat: list) -> tuple | None:
    """(position, wxyz) of a bone's pose given as 16 floats column after column (what the live
    frame reads or predicts), or None for one with no usable rotation or position (a zero column,
    a non-finite entry)."""
    wxyz = single_quaternion((flat[0::4], flat[1::4], flat[2::4]))
    position = (flat[12], flat[13], flat[14])
    if wxyz is None or not math.isfinite(position[0] + position[1] + position[2]):  # inf - inf is nan too
        return None
    return position, wxyz


def single_quaternion(m: list) -> tuple[float, ...] | None:
    """`matrix_to_quaternion` of one 3x3 (columns scaled to unit length first) in plain floats:
    every live frame and bake frame converts its controls, and NumPy's batched form costs tens of
    microseconds on one matrix. None for a matrix it cannot take (a zero column, a non-finite
    entry): the batched form then gives its NaN for the caller's finite check."""
    # Written out (no comprehensions, no generators): the live frame calls this inside Blender's
    # frame change, where each Python frame it opens costs microseconds. Same arithmetic, in
    # the same order, as the loops it replaces.
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = m[0][:3], m[1][:3], m[2][:3]
    n0 = math.sqrt(a00 ** 2 + a10 ** 2 + a20 ** 2)
    n1 = math.sqrt(a01 ** 2 + a11 ** 2 + a21 ** 2)
    n2 = math.sqrt(a02 ** 2 + a12 ** 2 + a22 ** 2)
    if not (0.0 < n0 < math.inf and 0.0 < n1 < math.inf and 0.0 < n2 < math.inf):
        return None
    r00, r01, r02 = a00 / n0, a01 / n1, a02 / n2
    r10, r11, r12 = a10 / n0, a11 / n1, a12 / n2
    r20, r21, r22 = a20 / n0, a21 / n1, a22 / n2
    trace = r00 + r11 + r22
    best, top = 0, trace  # the first largest of (trace, r00, r11, r22)
    if r00 > top:
        best, top = 1, r00
    if r11 > top:
        best, top = 2, r11
    if r22 > top:
        best = 3
    if best == 0:
        w, x, y, z = 1 + trace, r21 - r12, r02 - r20, r10 - r01
    elif best == 1:
        w, x, y, z = r21 - r12, 1 + r00 - r11 - r22, r01 + r10, r02 + r20
    elif best == 2:
        w, x, y, z = r02 - r20, r01 + r10, 1 - r00 + r11 - r22, r12 + r21
    else:
        w, x, y, z = r10 - r01, r02 + r20, r12 + r21, 1 - r00 - r11 + r22
    biggest = max(abs(w), abs(x), abs(y), abs(z))
    if not 0.0 < biggest < math.inf:
        return None
    w, x, y, z = w / biggest, x / biggest, y / biggest, z / biggest
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    sign = -1.0 if w < 0 else 1.0
    return (sign * w / norm, sign * x / norm, sign * y / norm, sign * z / norm)


class Program:
    """A compiled graph. `run` solves each solver step for one frame."""

    def __init__(self, spec: GraphSpec, steps: list[SolverStep], problems: Problems, link_switches: dict[str, object],
                 loose: frozenset[str] = frozenset(), blocked: dict[str, str] | None = None):
        self.spec = spec
        self.steps = steps
        self.problems = problems
        self.link_switches = link_switches
        self.loose = loose  # nodes that feed no Solver: ignored, with a warning on them
        self.blocked = blocked or {}  # Solver -> why it cannot run (a problem on it or on a node it needs)

    @property
    def ok(self) -> bool:
        """True when every Solver can run (problems on loose nodes do not count)."""
        return not self.blocked and not any(messages for name, messages in self.problems.by_node.items() if name not in self.loose)

    def node_message(self, name: str) -> str:
        """What a node shows: its problems; for a loose node that it is ignored; for a Solver
        that cannot run, why."""
        parts = []
        if name in self.loose:
            parts.append(LOOSE_NOTE)
        own = self.problems.message(name)
        if own:
            parts.append(own)
        reason = self.blocked.get(name)
        if reason and reason != f"cannot run: {own}":
            parts.append(reason)
        return "; ".join(parts)

    def resolve_link(self, target: TargetStep, inputs: FrameInputs) -> str:
        if target.link_source is not None:
            choose = self.link_switches.get(target.link_source)
            value = (inputs.values.get(target.link_source) or {}).get("value")
            chosen = choose(inputs.frame, value) if choose else None
            if chosen:
                return chosen
        return inputs.links.get(target.node) or target.link

    def run(self, inputs: FrameInputs, solve: Callable | None = None) -> list[StepResult]:
        """Solve every step that can run for one frame (a Solver that cannot has no step).
        `solve` defaults to `core.solve.solve`."""
        if solve is None:
            from ..solve import solve
        results = []
        for step in self.steps:
            results.append(self.run_step(step, inputs, solve))
        return results

    def run_step(self, step: SolverStep, inputs: FrameInputs, solve: Callable | None = None) -> StepResult:
        """Solve one solver step for one frame; `joints` is None when nothing should be written."""
        from ..solve import IKTarget

        if solve is None:
            from ..solve import solve

        robot = step.robot
        links = tuple(self.resolve_link(t, inputs) for t in step.targets)
        start = inputs.starts.get(step.rig)
        if start is None or not np.all(np.isfinite(start)):
            start = robot.zero_configuration()
        if step.backend == "off":
            return StepResult(step.node, step.rig, None, links, "solver off: the rig follows its FK sliders")
        world_error = (inputs.values.get(step.node) or {}).get("world_error")
        if world_error:  # solving without an obstacle the user asked to avoid would go through it
            return StepResult(step.node, step.rig, None, links, f"cannot solve: {world_error}")
        goals = []
        for target, link in zip(step.targets, links):
            if link not in robot.links:
                return StepResult(step.node, step.rig, None, links, f"target '{target.node}' aims at '{link}', which this robot does not have")
            pose = inputs.controls.get(target.node)
            if pose is None or not np.all(np.isfinite(pose)):
                return StepResult(step.node, step.rig, None, links, f"control of '{target.node}' has no usable pose")
            position, wxyz = pose_to_target(pose)
            goals.append(IKTarget(link, tuple(position), tuple(wxyz), target.position_weight, target.rotation_weight))
        held = frozenset(step.options.held_joints) | robot.held_joints(step.hold_prismatic)
        posture = (inputs.values.get(step.node) or {}).get("posture")
        if posture is not None and (len(posture) != robot.dof or not np.all(np.isfinite(posture))):
            posture = None
        options = _with(step.options, backend=step.backend, held_joints=held,
                        posture=None if posture is None else tuple(float(v) for v in posture), avoid=frame_avoid(step, inputs))
        result = solve(robot, goals, start, options)
        joints = np.asarray(result.joints, dtype=float)
        summary = summarise(result)
        reports = {}
        for name in step.after_solver:
            stage = stage_function(self.spec.node(name).kind)
            if stage is None:
                continue
            # A stage picks its own member of the family (the swivel angle, a configuration): the
            # posture must not slide it back.
            stage_input = StageInput(robot, goals, _with(options, posture=None), start, joints, result, self.spec.node(name),
                                     inputs.values.get(name, {}), solve)
            joints, note, *report = stage(stage_input)
            if report:
                reports[name] = report[0]
            joints = np.asarray(joints, dtype=float)
            if note:
                summary = f"{summary}; {note}"
        if not np.all(np.isfinite(joints)):
            return StepResult(step.node, step.rig, None, links, "solver returned non-finite values; rig left unchanged", result.ms)
        return StepResult(step.node, step.rig, joints, links, summary, result.ms, result.converged, result, reports)


@dataclass
class StageInput:
    """What a node after the solver (swivel, configuration select) gets for one frame."""

    robot: RobotModel
    goals: list[IKTarget]  # the targets just solved
    options: SolveOptions  # the options used
    start: np.ndarray  # where the arm was before this frame
    joints: np.ndarray  # the solution so far
    result: SolveResult
    node: NodeSpec  # the stage node (its structural params)
    values: dict  # the stage node's per-frame values (e.g. swivel_angle, configuration_index)
    solve: Callable  # core.solve.solve, for stages that re-solve


def stage_function(kind: str) -> Callable | None:
    """The behaviour of a node after the solver, or None while it only passes through: the
    `apply_stage(StageInput) -> (joints, note)` of the core/stages module the registry names
    (imported on first use: stages pull in the solvers). A stage may add a third item, a report
    the run keeps in `StepResult.reports` (Configuration-Select: the solutions it chose from)."""
    import importlib

    entry = BY_KIND.get(kind)
    if entry is None or entry.stage is None:
        return None
    module = importlib.import_module(f"..stages.{entry.stage}", __package__)
    return getattr(module, "apply_stage", None)


def compiled_avoid(solver):
    """The Solver's collision settings as a `core.collision.Avoid` without a world (the
    world is each frame's: `frame_avoid`), or None when it avoids nothing, so a Solver without
    collisions never imports or runs any of it."""
    avoid_self = bool(solver.get("avoid_self", False))
    # World avoidance needs something to avoid: an obstacle collection or the ground plane.
    avoid_world = bool(solver.get("avoid_world", False)) and bool(solver.get("obstacles") or solver.get("ground"))
    if not (avoid_self or avoid_world):
        return None
    from ..collision import Avoid

    return Avoid(self_=avoid_self, world=None, margin_m=float(solver.get("margin_mm", 0.0)) / 1000.0)


def frame_avoid(step: SolverStep, inputs: FrameInputs):
    """What this frame's solve keeps clear of: the compiled settings with the frame's obstacle
    world (`FrameInputs.values[solver]["world"]`, read where the frame is: Blender or a file)
    and the objects a grasp holds on it (`["carried"]`, `core.collision.CarriedObject`s), and the
    (link, obstacle) pairs allowed to touch (`["touching"]`: a gripper and what it grasps).
    None when there is nothing to avoid on this frame."""
    avoid = step.options.avoid
    if avoid is None:
        return None
    values = inputs.values.get(step.node) or {}
    world, carried, touching = values.get("world"), values.get("carried"), values.get("touching")
    if world is not None or carried or touching:
        from dataclasses import replace

        avoid = replace(avoid, world=world if world is not None else avoid.world, carried=tuple(carried or ()),
                        touching=frozenset(touching or ()))
    if not avoid.self_ and avoid.world is None:
        return None
    return avoid


def _with(options, **changes):
    from dataclasses import replace

    return replace(options, **changes)


def compile_program(spec: GraphSpec, robots: dict[str, RobotModel]) -> Program:
    """Check and compile a spec. `robots` maps rig names (Robot nodes' `rig`) to their models."""
    from ..solve import SolveOptions

    problems = validate(spec)
    for node in spec.of_kind("robot"):
        rig = node.get("rig")
        if rig and rig not in robots and not problems.by_node.get(node.name):
            problems.add(node.name, f"'{rig}' is not an imported robot rig")
    link_switches = {n.name: link_switch(n) for n in spec.of_kind("link_switch")}
    link_switches.update({n.name: tool_link(n) for n in spec.of_kind("tool")})
    steps: list[SolverStep] = []
    for solver in spec.of_kind("solver"):
        targets: list[TargetStep] = []
        rig = None
        for link in spec.inputs(solver.name, "Targets"):
            node = spec.node(link.from_node)
            if node.kind != "ik_target":
                problems.add(solver.name, f"'{node.name}' is not an IK Target")
                continue
            rig = rig_of_target(spec, node.name)
            robot = robots.get(rig) if rig else None
            if robot is None:
                continue
            sources = spec.inputs(node.name, "Link")
            link_name = node.get("link") or robot.tool_point
            if link_name not in robot.links:
                problems.add(node.name, f"link '{link_name}' is not a link of robot '{rig}'")
            tool = spec.node(sources[0].from_node) if sources else None
            if tool is not None and tool.kind == "tool" and tool.get("link") and tool.get("link") not in robot.links:
                problems.add(tool.name, f"link '{tool.get('link')}' is not a link of robot '{rig}'")
            targets.append(TargetStep(node.name, link_name, sources[0].from_node if sources else None,
                                      float(node.get("position_weight", 1.0)), float(node.get("rotation_weight", 1.0))))
        if rig is None or rig not in robots or not targets:
            continue
        backend = str(solver.get("backend", "pyroki")).lower()
        if backend not in BACKENDS:
            problems.add(solver.name, f"unknown solver '{backend}' (choose PyRoki, NumPy or Off)")
            continue
        options = SolveOptions(
            backend=backend if backend != "off" else "numpy",
            position_tolerance=float(solver.get("position_tolerance", 1e-5)),
            rotation_tolerance=float(solver.get("rotation_tolerance", 1e-5)),
            max_iterations=int(solver.get("max_iterations", 100)),
            budget_ms=float(solver.get("budget_ms", 33.0)),
            avoid=compiled_avoid(solver),
        )
        steps.append(SolverStep(solver.name, rig, robots[rig], tuple(targets), backend, options,
                                tuple(downstream_chain(spec, solver.name)), bool(solver.get("hold_prismatic", True)),
                                bool(solver.get("plan_between_keys", False)) and options.avoid is not None))
    groups = solver_groups(spec)
    loose = frozenset(n.name for n in spec.nodes) - frozenset().union(*groups.values())
    blocked = {}
    for solver, members in groups.items():
        faults = [(name, problems.message(name)) for name in sorted(members, key=lambda n: n != solver) if problems.message(name)]
        if faults:
            name, message = faults[0]
            blocked[solver] = f"cannot run: {message}" if name == solver else f"cannot run: '{name}': {message}"
        elif not any(step.node == solver for step in steps):
            blocked[solver] = "cannot run: no IK Target with a robot and a control feeds it"
    steps = [step for step in steps if step.node not in blocked]
    return Program(spec, steps, problems, link_switches, loose, blocked)


#: What a node that feeds no Solver shows.
LOOSE_NOTE = "ignored: feeds no Solver"


def solver_groups(spec: GraphSpec) -> dict[str, set[str]]:
    """Per Solver, the nodes it runs with: itself, everything upstream of it (targets, robots,
    link switches) and everything its Solution flows into (swivel, configuration, bake). A node
    in no group feeds no Solver; a problem inside a group stops that Solver only."""
    upstream: dict[str, set[str]] = {}
    downstream: dict[str, set[str]] = {}
    for link in spec.links:
        upstream.setdefault(link.to_node, set()).add(link.from_node)
        downstream.setdefault(link.from_node, set()).add(link.to_node)
    names = {n.name: n.kind for n in spec.nodes}
    groups = {}
    for solver in spec.of_kind("solver"):
        members = {solver.name}
        for edges in (upstream, downstream):
            frontier = [solver.name]
            while frontier:
                for neighbour in edges.get(frontier.pop(), ()):
                    if neighbour in names and neighbour not in members and (edges is upstream or names[neighbour] != "solver"):
                        members.add(neighbour)
                        frontier.append(neighbour)
        groups[solver.name] = members
    return groups


def link_switch(node) -> Callable[..., str | None]:
    """A Link Switch node: `ranges` is ((first, link), ...); the last range started wins.
    `mode` "frame" (default) compares the frame; "value" compares the node's `value`, keyed or
    driven. The frame's own value comes in `FrameInputs.values[node]["value"]` (a bake gathers
    every frame before it solves, so the value compiled into the spec is only the fallback)."""
    ranges = sorted(tuple(r) for r in (node.get("ranges") or ()))
    by_value = str(node.get("mode", "frame")).lower() == "value"
    compiled_value = float(node.get("value", 0.0))

    def choose(frame: float, value: float | None = None) -> str | None:
        at = (compiled_value if value is None else value) if by_value else frame
        chosen = None
        for first, link in ranges:
            if at >= first:
                chosen = link
        return chosen

    return choose


def tool_link(node) -> Callable[..., str | None]:
    """A Tool node's Link output: the link it is mounted on at every frame (None: the IK Target's
    own choice). Its offset is applied to the control's pose where the frame is read
    (blender/path_moves.py), so the solver aims the link itself."""
    link = node.get("link") or None

    def choose(frame: float, value: float | None = None) -> str | None:
        return link

    return choose
