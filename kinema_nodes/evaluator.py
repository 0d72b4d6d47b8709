"""Runs Kinema node trees: snapshot -> GraphSpec, compile on change, solve each frame, write the rig.

This is the only place a graph runs — for the viewport, the panel, Bake and the CLI alike.
Handlers call `run_all`; property callbacks only `mark_dirty` (never solve), so nothing recurses.
A run after our own write (the depsgraph update it causes) sees unchanged inputs and does
nothing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .core.graph.registry import kind_of
from .core.graph.spec import GraphSpec
from .core.graph.program import FrameInputs, Program, StepResult, compile_program
from .blender.groups import node_by_path
from .tree import TREE_IDNAME

_dirty: set[int] = set()
_compiled: dict[int, tuple[GraphSpec, Program]] = {}
_last_inputs: dict[tuple[int, str], bytes] = {}
_compiled_links: set[tuple] = set()
_readouts: dict[tuple[int, str], dict] = {}  # (robot, links, backend) solved once: the compile is paid
_running = False
#: Users of a group paused over budget: (tree, solver path). A group's Solver node is shared by
#: all its users, so its own `over_budget` flag stands for the plain-tree case only.
_paused: set[tuple[int, str]] = set()


def mark_dirty(tree) -> None:
    """Something in `tree` changed: recompile (if the spec differs) and re-solve on the next run."""
    _dirty.add(tree.as_pointer())


def compiled_program(tree) -> Program | None:
    """The Program `tree` last compiled to (None before its first run): its problems by node."""
    compiled = _compiled.get(tree.as_pointer())
    return None if compiled is None else compiled[1]


def forget_all() -> None:
    """Drop every cache (a new file was loaded)."""
    _dirty.clear()
    _prepared.clear()
    _compiled.clear()
    _last_inputs.clear()
    _readouts.clear()
    _paused.clear()


def reset_caches() -> None:
    """Drop every per-process cache a live session builds, so what runs next sees none of what
    ran before (tests call this before each test): compiled trees and readouts, the rigs'
    robots, group errors and the Configuration-Select node's found sets (Find Solutions' too).
    Compiled solvers stay: they hold nothing about any file, only compile time."""
    from .blender import groups, rig
    from .core.stages.configurations import clear_cache

    forget_all()
    _compiled_links.clear()
    groups.reset_caches()
    rig.reset_caches()
    clear_cache()


def kinema_trees(data=None):
    import bpy

    data = data or bpy.data
    return [tree for tree in data.node_groups if tree.bl_idname == TREE_IDNAME]


# ---- snapshot & compile ----------------------------------------------------------------

def snapshot(tree) -> GraphSpec:
    """The tree as plain data, with every node group it uses flattened in (nodes inside a group
    are named by their path, "Group/IK Target"; see `groups.flatten`). Muted nodes and links
    are left out; links Blender marks invalid (a cycle, a wrong socket type) are kept, so
    validation can say what is wrong with them. A tree used as a group gives an empty spec."""
    from .blender.groups import flatten

    return flatten(tree)


def _robots_of(tree) -> dict:
    from .blender.groups import all_nodes
    from .blender.rig import is_rig, robot_for_rig

    robots = {}
    for node in all_nodes(tree):
        rig = getattr(node, "rig", None) if kind_of(node) == "robot" else None
        if rig is not None and is_rig(rig) and rig.name not in robots:
            try:
                robots[rig.name] = robot_for_rig(rig)
            except Exception as exc:  # a rig whose stored URDF no longer reads: show it on the node
                node.kinema_error = f"cannot read this rig's robot: {exc}"
    return robots


def _set(owner, name: str, value) -> None:
    """Write a property only when it changes (each write tags the data for redraw/update)."""
    if getattr(owner, name) != value:
        setattr(owner, name, value)


def program_for(tree) -> Program:
    """The compiled Program of a tree, recompiled only when its spec changed."""
    key = tree.as_pointer()
    spec = snapshot(tree)
    cached = _compiled.get(key)
    if cached is not None and cached[0] == spec:
        return cached[1]
    program = compile_program(spec, _robots_of(tree))
    _compiled[key] = (spec, program)
    for node in tree.nodes:
        if hasattr(node, "kinema_error"):
            _set(node, "kinema_error", program.node_message(node.name))
    for step in program.steps:
        rig = rig_object(tree, program, step)
        if rig is not None and getattr(rig, "kinema_tree", None) is None:
            rig.kinema_tree = tree  # the rig keeps its tree alive and evaluates the tree's animation
    return program


def _robot_node_of(program: Program, step) -> str | None:
    for node in program.spec.of_kind("robot"):
        if node.get("rig") == step.rig:
            return node.name
    return None


# ---- one frame -------------------------------------------------------------------------

def control_pose(target_node, rig) -> np.ndarray | None:
    """The control's pose in the rig's armature space (= the robot's root frame)."""
    obj = target_node.control_object
    if obj is None:
        return None
    if target_node.control_bone:
        bone = obj.pose.bones.get(target_node.control_bone) if obj.pose else None
        if bone is None:
            return None
        if obj == rig:
            return np.array(bone.matrix, dtype=float)
        world = obj.matrix_world @ bone.matrix
    else:
        world = obj.matrix_world
    return np.array(rig.matrix_world.inverted_safe() @ world, dtype=float)


def frame_inputs(tree, program: Program, step, frame: float) -> FrameInputs:
    from .blender.rig import read_joint_values

    rig = rig_object(tree, program, step)
    controls, links = {}, {}
    for target in step.targets:
        node = node_by_path(tree, target.node)
        controls[target.node] = control_pose(node, rig)
        links[target.node] = node.link_at_frame(step.robot)
    values = {}
    for name in step.passthrough:
        stage = node_by_path(tree, name)
        if hasattr(stage, "frame_values"):
            values[name] = stage.frame_values()
    for target in step.targets:
        if target.link_source is not None:  # a Link Switch's keyed or driven value at this frame
            switch = node_by_path(tree, target.link_source)
            values[target.link_source] = {"value": float(getattr(switch, "value", 0.0))}
    start = read_joint_values(rig, step.robot)
    solver = node_by_path(tree, step.node)
    values[step.node] = {"posture": _posture(solver, step.robot, frame, start)}
    if step.options.avoid is not None and step.options.avoid.world is None:  # obstacles where this frame has them
        from .blender.collisions import world_for
        from .core.errors import KinemaError

        try:
            world = world_for(solver, rig)
        except KinemaError as exc:  # an obstacle that cannot be read: the frame is not solved (program.run_step says why)
            values[step.node]["world_error"] = str(exc)
        else:
            if world is not None:
                values[step.node]["world"] = world
    return FrameInputs(frame, controls, {step.rig: start}, links, values)


def _posture(solver, robot, frame: float, start) -> tuple[float, ...] | None:
    """The posture a redundant arm's spare joints settle toward on this frame. A solver that has
    none yet (a tree wired by hand, a file from before) takes the pose it first solves from."""
    from .nodes.solver import posture_at, record_posture

    if not hasattr(solver, "postures"):
        return None
    if not len(solver.postures):
        record_posture(solver, robot, start)
    return posture_at(solver, robot, frame, start)


def rig_object(tree, program: Program, step):
    return node_by_path(tree, _robot_node_of(program, step)).rig


def _fingerprint(inputs: FrameInputs, program: Program, step) -> bytes:
    parts = [str(id(program)).encode(), repr(sorted(inputs.links.items())).encode(), repr(sorted(inputs.values.items())).encode()]
    parts += [np.asarray(v if v is not None else np.full((4, 4), np.nan)).tobytes() for _, v in sorted(inputs.controls.items())]
    parts += [np.asarray(v).tobytes() for _, v in sorted(inputs.starts.items())]
    return b"|".join(parts)


#: `core.solve.prepare` per (program, links, weights, options less the posture): the live solve
#: checks its link set and options once per compiled Program, then goes from arrays to the
#: kernel and back every frame.
_prepared: dict = {}
_PREPARED_KEPT = 32


_OPTION_FIELDS: tuple[str, ...] = ()


def _live_solve(robot, goals, start, options):
    """`core.solve.solve` for a live frame, through a cached `prepare` (the same answers: the
    prepared path hands anything but a converged warm kernel descent to `solve`)."""
    global _OPTION_FIELDS
    if options.avoid is not None:  # collision avoidance is solve()'s (core/stages/collisions.py), not the prepared kernel's
        return _solve()(robot, goals, start, options)
    if not _OPTION_FIELDS:
        from dataclasses import fields

        _OPTION_FIELDS = tuple(f.name for f in fields(options) if f.name != "posture")
    links = tuple(g.link for g in goals)
    weights = tuple((g.position_weight, g.rotation_weight) for g in goals)
    key = (id(robot), links, weights, tuple(getattr(options, name) for name in _OPTION_FIELDS))
    try:
        prepared = _prepared.get(key)
    except TypeError:  # options that do not hash (an obstacle world): the general path
        return _solve()(robot, goals, start, options)
    if prepared is None:
        from .core.solve import prepare

        if len(_prepared) >= _PREPARED_KEPT:
            _prepared.clear()
        prepared = _prepared[key] = prepare(robot, links, replace(options, posture=None), weights, live=True)
    return prepared.solve([g.position for g in goals], [g.wxyz for g in goals], start, options.posture)


def _solve():
    from .core.solve import solve

    return solve


def run_tree(tree, frame: float | None = None, *, force: bool = False, values: dict | None = None) -> list[StepResult]:
    """Solve every live solver of `tree` for the current state and write the rigs.

    `force` solves even when Live IK is off, paused over budget, or nothing moved (Bake, the
    panel's buttons). `values` adds per-frame values for this run only, by node path (Find
    Solutions asks the Configuration-Select node for its solutions). Never raises for a bad
    graph: the nodes show the errors.
    """
    import bpy

    from .core.errors import KinemaError
    from .blender.rig import write_joint_values

    key = tree.as_pointer()
    was_dirty = key in _dirty
    _dirty.discard(key)
    program = program_for(tree)
    for name in program.blocked:  # a Solver that cannot run shows no result, only why (on itself)
        blocked = node_by_path(tree, name)
        if blocked is not None:
            _readouts.pop((blocked.id_data.as_pointer(), blocked.name), None)
    frame = bpy.context.scene.frame_current if frame is None else frame
    results = []
    for step in program.steps:
        solver = node_by_path(tree, step.node)
        if not force and (not solver.live or solver.over_budget or (key, step.node) in _paused):
            continue
        inputs = frame_inputs(tree, program, step, frame)
        for name, extra in (values or {}).items():
            if name in step.passthrough:
                inputs.values[name] = {**inputs.values.get(name, {}), **extra}
        fingerprint = _fingerprint(inputs, program, step)
        if not force and not was_dirty and _last_inputs.get((key, step.node)) == fingerprint:
            shown = _readouts.get((solver.id_data.as_pointer(), solver.name))
            if shown is not None:  # the same inputs: the last answer is this frame's answer
                shown["frame"] = int(frame)
            continue
        try:
            result = program.run_step(step, inputs, _live_solve)
        except KinemaError as exc:
            result = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
        rig = rig_object(tree, program, step)
        if result.joints is not None:
            written = write_joint_values(rig, step.robot, result.joints)
            inputs.starts[step.rig] = written
        _last_inputs[(key, step.node)] = _fingerprint(inputs, program, step)
        _show_readout(solver, step, result, force, int(frame), tree_key=key)
        results.append(result)
    return results


def readout(solver) -> dict:
    """The last live solve of a Solver node: ms, summary, solving_to, backend_note. Empty when
    that solve was for another frame than the scene's: the readout never shows a result for a
    frame that was not solved."""
    import bpy

    found = _readouts.get((solver.id_data.as_pointer(), solver.name), {})
    if found and found.get("frame") != bpy.context.scene.frame_current:
        return {}
    return found


def readout_of(tree, path: str) -> dict:
    """The last live solve of one user of a Solver: the solver at `path` ("Arm/Solver") in `tree`
    (a group used twice is two instances, each with its own readout and pause)."""
    return dict(_readouts.get((tree.as_pointer(), path), {}), paused=(tree.as_pointer(), path) in _paused)


def resume(tree, path: str) -> None:
    """Resume one user of a Solver paused over budget."""
    _paused.discard((tree.as_pointer(), path))
    mark_dirty(tree)


def _show_readout(solver, step, result: StepResult, force: bool, frame=None, tree_key=None) -> None:
    solve = result.result
    note = f"Using NumPy: {solve.fallback_reason}" if solve is not None and solve.fallback_reason else ""
    shown = {"ms": float(result.ms), "summary": result.summary, "solving_to": ", ".join(result.solved_links),
             "backend_note": note, "frame": frame}
    clearance = getattr(solve, "min_clearance_m", None)
    if clearance is not None and np.isfinite(clearance):
        shown["clearance"] = f"Clearance: {clearance * 1000:.1f} mm" + (" (in collision)" if clearance < 0 else "")
    own = (solver.id_data.as_pointer(), solver.name)
    instance = own if tree_key is None else (tree_key, step.node)
    _readouts[own] = _readouts[instance] = shown
    if solve is None:
        return
    compile_key = (step.robot.fingerprint, result.solved_links, solve.backend)
    first_for_these_links = compile_key not in _compiled_links
    _compiled_links.add(compile_key)
    # The first solve to a set of links may include the one-off compile; it is not a frame cost.
    if not force and not first_for_these_links and result.ms > step.options.budget_ms:
        if instance == own:
            _set(solver, "over_budget", True)
        else:
            _paused.add(instance)


def hold_runs() -> bool:
    """Keep the handlers from running trees (Bake stepping through frames it solves itself).
    Returns True when this call took the hold; pair it with `release_runs`."""
    global _running
    if _running:
        return False
    _running = True
    return True


def release_runs() -> None:
    global _running
    _running = False


def run_all(scene=None, *, force: bool = False) -> None:
    """Run every Kinema tree (the frame-change and depsgraph handlers call this)."""
    global _running
    if _running:
        return
    _running = True
    try:
        frame = scene.frame_current if scene is not None else None
        for tree in kinema_trees():
            run_tree(tree, frame, force=force)
    finally:
        _running = False


def warm_up_tree(tree, *, wait: bool = True) -> float:
    """Compile the solvers a tree needs without solving (the wait-cursor moment). Seconds.
    `wait=False`: start the compiles in the background (the live solve answers on the NumPy
    kernel until they are ready) and return at once."""
    from .core.solve import warm_up

    program = program_for(tree)
    seconds = 0.0
    for step in program.steps:
        if step.backend == "pyroki":
            links = tuple(node_by_path(tree, t.node).link_at_frame(step.robot) for t in step.targets)
            seconds += warm_up(step.robot, links, step.options, wait=wait)
    return seconds
