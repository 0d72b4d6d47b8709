"""Runs Kinema node trees: snapshot -> GraphSpec, compile on change, solve each frame, write the rig.

This is the only place a graph runs — for the viewport, the panel, Bake and the CLI alike.
Handlers call `run_all`; property callbacks only `mark_dirty` (never solve), so nothing recurses.
A run after our own write (the depsgraph update it causes) sees unchanged inputs and does
nothing.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import replace

import numpy as np

from .core.graph.registry import kind_of
from .core.graph.spec import GraphSpec
from .core.errors import KinemaError as _KinemaError
from .core.graph.program import FrameInputs, Program, StepResult, compile_program
from .blender.groups import GROUP_IDNAME, SEPARATOR, node_by_path
from .tree import TREE_IDNAME

_dirty: set[int] = set()
_compiled: dict[int, tuple[GraphSpec, Program]] = {}
_last_inputs: dict[tuple[int, str], object] = {}  # the general path's bytes, the lean path's tuple
_compiled_links: set[tuple] = set()
_readouts: dict[tuple[int, str], dict] = {}  # (robot, links, backend) solved once: the compile is paid
_running = False
#: Users of a group paused over budget: (tree, solver path). A group's Solver node is shared by
#: all its users, so its own `over_budget` flag stands for the plain-tree case only.
_paused: set[tuple[int, str]] = set()
#: Bumped by everything that can change a tree's spec without marking it dirty (a depsgraph update
#: outside a frame change: an edit in the UI, a rename; a file load; undo and redo). A tree that is
#: not dirty, not animated and holds no group is not snapshotted again until it moves.
_generation = 0
_validated: dict[int, tuple[int, bool, float | None]] = {}  # tree -> (generation checked at, may skip, budget or None)


def mark_dirty(tree) -> None:
    """Something in `tree` changed: recompile (if the spec differs) and re-solve on the next run."""
    _dirty.add(tree.as_pointer())


def compiled_program(tree) -> Program | None:
    """The Program `tree` last compiled to (None before its first run): its problems by node."""
    compiled = _compiled.get(tree.as_pointer())
    return None if compiled is None else compiled[1]


def changed_outside() -> None:
    """Something a tree's spec reads may have changed without a property callback (an edit the
    depsgraph reported, a file load, undo): the next run of every tree snapshots it again."""
    global _generation
    _generation += 1


def forget_all() -> None:
    """Drop every cache (a new file was loaded)."""
    changed_outside()
    _dirty.clear()
    _validated.clear()
    _leans.clear()
    _off_shown.clear()
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
    _validated.pop(key, None)
    for node in tree.nodes:
        if hasattr(node, "kinema_error"):
            _set(node, "kinema_error", program.node_message(node.name))
    for step in program.steps:
        rig = rig_object(tree, program, step)
        if rig is not None and getattr(rig, "kinema_tree", None) is None:
            rig.kinema_tree = tree  # the rig keeps its tree alive and evaluates the tree's animation
    return program


def _current_program(tree, key: int, was_dirty: bool) -> tuple[Program, dict | None]:
    """(`program_for(tree)`, each step's rig by solver path or None), without the snapshot while
    nothing can have changed the spec: the tree was not marked dirty, nothing was reported
    changed outside it (`changed_outside`), it has no keys or drivers (an animated setting changes
    the spec with no callback), no groups (an edit inside a group marks the group's tree, not this
    one), the Preferences' solve budget, which a solver without its own budget puts in the spec,
    is what it was, and each step's rig is still there under its name (the rigs found then come
    back with the program: the frame needs them too)."""
    cached = _compiled.get(key)
    checked = _validated.get(key)
    if (cached is not None and not was_dirty and checked is not None and checked[0] == _generation and checked[1]
            and tree.animation_data is None and (checked[2] is None or checked[2] == _preferences_budget())):
        program, rigs = cached[1], {}
        for step in program.steps:
            rig = _rig_still(tree, program, step)
            if rig is None:
                break
            rigs[step.node] = rig
        else:
            return program, rigs
    program = program_for(tree)
    plain = tree.animation_data is None and not any(
        node.bl_idname in (GROUP_IDNAME, "NodeReroute") for node in tree.nodes)
    own = all(getattr(node_by_path(tree, step.node), "use_own_budget", False) for step in program.steps)
    _validated[key] = (_generation, plain, None if own else _preferences_budget())
    return program, None


def _rig_still(tree, program: Program, step):
    """The step's rig if it is still there under the name the program was compiled with (a rig
    removed or renamed by a script reports nothing until the next depsgraph update), else None."""
    node = node_by_path(tree, _robot_node_of(program, step) or "")
    rig = getattr(node, "rig", None)
    return rig if rig is not None and rig.name == step.rig else None


def _preferences_budget():
    from .ui.preferences import preferences

    prefs = preferences()
    return getattr(prefs, "solve_budget_ms", None)


def _robot_node_of(program: Program, step) -> str | None:
    """The Robot node a step's rig comes from (looked up once per compiled Program: every frame asks)."""
    found = _ROBOT_NODES.get(program)
    if found is None:
        found = _ROBOT_NODES[program] = {}
    if step.node not in found:
        found[step.node] = next((node.name for node in program.spec.of_kind("robot") if node.get("rig") == step.rig), None)
    return found[step.node]


_ROBOT_NODES = weakref.WeakKeyDictionary()  # Program -> {solver path: its Robot node}


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
    for name in step.after_solver:
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
    if options.avoid is not None:  # collision avoidance is solve()'s (core/stages/collisions.py), not the prepared kernel's
        return _solve()(robot, goals, start, options)
    links = tuple(g.link for g in goals)
    weights = tuple((g.position_weight, g.rotation_weight) for g in goals)
    try:
        prepared = _prepared_solve(robot, links, replace(options, posture=None), weights)
    except TypeError:  # options that do not hash (an obstacle world): the general path
        return _solve()(robot, goals, start, options)
    return prepared.solve([g.position for g in goals], [g.wxyz for g in goals], start, options.posture)


def _solve():
    from .core.solve import solve

    return solve


def run_tree(tree, frame: float | None = None, *, force: bool = False, values: dict | None = None,
             _results: bool = True) -> list[StepResult]:
    """Solve every live solver of `tree` for the current state and write the rigs.

    `force` solves even when Live IK is off, paused over budget, or nothing moved (Bake, the
    panel's buttons). `values` adds per-frame values for this run only, by node path (Find
    Solutions asks the Configuration-Select node for its solutions). Never raises for a bad
    graph: the nodes show the errors. (`_results=False`: run_all, which keeps none, leaves the
    lean frames' StepResults unmade.)
    """
    key = tree.as_pointer()
    was_dirty = key in _dirty
    if was_dirty:
        _dirty.discard(key)
    program, rigs = _current_program(tree, key, was_dirty)
    for name in program.blocked:  # a Solver that cannot run shows no result, only why (on itself)
        blocked = node_by_path(tree, name)
        if blocked is not None:
            _readouts.pop((blocked.id_data.as_pointer(), blocked.name), None)
    if frame is None:
        import bpy

        frame = bpy.context.scene.frame_current
    results = []
    for step in program.steps:
        solver = node_by_path(tree, step.node)
        if not force and (not solver.live or solver.over_budget or (key, step.node) in _paused):
            continue
        try:
            rig = rigs[step.node] if rigs is not None else rig_object(tree, program, step)
            result = _run_step(tree, key, program, step, solver, rig, frame, force, was_dirty, values, _results)
        except _KinemaError as exc:  # the rig itself refused (a bone gone, a value it cannot hold): this step only
            result = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
            _last_inputs.pop((key, step.node), None)
            _show_readout(solver, step, result, force, int(frame), tree_key=key)
        if result is not None and result is not _SOLVED:
            results.append(result)
    return results


def _run_step(tree, key, program, step, solver, rig, frame, force, was_dirty, values, want=True):
    """One live step of `run_tree`: its StepResult, or None when nothing moved since its last frame."""
    if step.backend == "off" and not force and values is None and _still_off(tree, key, program, step, was_dirty, frame):
        return None
    lean = _lean_step(tree, key, program, step, was_dirty) if values is None else None
    if lean is not None:
        result = _run_lean(tree, key, step, solver, rig, lean, frame, force, was_dirty, want)
        if result is not _GENERAL:
            return result
    from .blender.rig import write_joint_values
    from .core.errors import KinemaError

    inputs = frame_inputs(tree, program, step, frame)
    for name, extra in (values or {}).items():
        if name in step.after_solver:
            inputs.values[name] = {**inputs.values.get(name, {}), **extra}
    fingerprint = _fingerprint(inputs, program, step)
    if not force and not was_dirty and _last_inputs.get((key, step.node)) == fingerprint:
        shown = _readouts.get((solver.id_data.as_pointer(), solver.name))
        if shown is not None:  # the same inputs: the last answer is this frame's answer
            shown["frame"] = int(frame)
        return None
    try:
        result = program.run_step(step, inputs, _live_solve)
    except KinemaError as exc:
        result = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
    if result.joints is not None:
        written = write_joint_values(rig, step.robot, result.joints)
        inputs.starts[step.rig] = written
    _last_inputs[(key, step.node)] = _fingerprint(inputs, program, step)
    _show_readout(solver, step, result, force, int(frame), tree_key=key)
    if step.backend == "off":
        _off_shown[(key, step.node)] = (program, _generation)
    return result


_off_shown: dict = {}  # (tree, solver path) -> (program, generation) whose Off readout is shown


def _still_off(tree, key: int, program: Program, step, was_dirty: bool, frame) -> bool:
    """A Solver set to Off solves nothing and writes nothing; its readout (the links it would
    solve to) can change only with an edit, a keyed tree or a Link Switch. Without those, a
    frame after the one that showed it does nothing but say which frame it is, instead of
    reading every control and the rig for a result that is thrown away."""
    if was_dirty or _off_shown.get((key, step.node)) != (program, _generation) or tree.animation_data is not None:
        return False
    if any(t.link_source for t in step.targets):
        return False
    shown = _readouts.get((key, step.node))
    if shown is None:
        return False
    shown["frame"] = int(frame)
    return True


# ---- the lean frame ------------------------------------------------------------------------
#
# Every live frame of a plain step (targets straight into a Solver: nothing after it, nothing to
# avoid, no Link Switch) goes from the controls and the rig to the prepared kernel solve and back
# with what does not change per frame done once per compiled step: the options, held joints and
# weights, the prepared solve per link set, a fingerprint of plain tuples. The answer is the one
# `Program.run_step` gives (tests/blender/test_live_ik.py checks it); anything unusual on a frame
# (a control without a pose, a link the robot lacks, a rig showing a non-finite value) takes
# the general path, which says why.

_GENERAL = object()  # _run_lean: "solve this frame through Program.run_step"
_SOLVED = object()  # _run_lean: "solved and written", for a caller that keeps no StepResult (run_all)
_leans: dict = {}  # (tree, solver path) -> (program, generation, _Lean | None)


class _Lean:
    __slots__ = ("targets", "options", "weights", "prepared", "links", "serial")

    def __init__(self, targets, options, weights, links):
        global _lean_serial
        self.targets, self.options, self.weights = targets, options, weights
        self.prepared, self.links = {}, links
        _lean_serial += 1
        self.serial = _lean_serial  # in fingerprints: unlike id(), never reused by a later step


_lean_serial = 0


def _lean_step(tree, key: int, program: Program, step, was_dirty: bool):
    """The step's _Lean, made again after anything could have changed it. One made again equal
    to the last is the last (its serial too): every depsgraph update bumps the generation, our
    own write brings one, and a new serial there would solve and write again, for ever."""
    memo = _leans.get((key, step.node))
    if memo is None or memo[0] is not program or memo[1] != _generation or was_dirty:
        lean = _make_lean(tree, step)
        if memo is not None and memo[0] is program and not was_dirty and _same_lean(lean, memo[2]):
            lean = memo[2]
        memo = _leans[(key, step.node)] = (program, _generation, lean)
    return memo[2]


def _same_lean(new, old) -> bool:
    if new is None or old is None:
        return False
    return (new.targets, new.options, new.weights, new.links) == (old.targets, old.options, old.weights, old.links)


def _make_lean(tree, step):
    if step.after_solver or step.options.avoid is not None or step.backend == "off":
        return None
    if any(t.link_source for t in step.targets) or any(SEPARATOR in t.node for t in (step, *step.targets)):
        return None
    for target in step.targets:
        node = tree.nodes.get(target.node)
        socket = node.inputs.get("Link") if node is not None else None
        if node is None or not hasattr(node, "link_at_frame") or (socket is not None and socket.is_linked):
            return None
    robot = step.robot
    held = frozenset(step.options.held_joints) | robot.held_joints(step.hold_prismatic)
    options = replace(step.options, backend=step.backend, held_joints=held, posture=None, avoid=None)
    weights = tuple((t.position_weight, t.rotation_weight) for t in step.targets)
    return _Lean(tuple(t.node for t in step.targets), options, weights, frozenset(robot.links))


def _run_lean(tree, key: int, step, solver, rig, lean: _Lean, frame, force: bool, was_dirty: bool, want: bool = True):
    """One frame of a plain step (see above): its StepResult (_SOLVED when not `want`ed), None
    when nothing moved since the last frame, or _GENERAL."""
    global _lean_imports
    if _lean_imports is None:
        from .blender.rig import live_rig
        from .core.errors import KinemaError
        from .core.graph.program import single_quaternion, summarise

        _lean_imports = (live_rig, KinemaError, summarise, single_quaternion)
    live_rig, KinemaError, summarise, single_quaternion = _lean_imports
    if rig is None:
        return _GENERAL
    robot = step.robot
    bones = rig.pose.bones
    io = live_rig(rig, robot, bones)
    if io is None:
        return _GENERAL
    nodes = tree.nodes
    static = tree.animation_data is None  # read each frame: a script may key the tree between frames
    positions, rotations, poses, links = [], [], [], []
    matrices = False
    for name in lean.targets:
        node = nodes.get(name)
        if node is None:
            return _GENERAL
        bone = node.control_bone
        if bone and node.control_object == rig:  # the default: a bone of the rig, read with the rig's matrices
            if not matrices:
                io.read_matrices(bones)
                matrices = True
            found = io.control_rows(bone)
            if found is None:
                return _GENERAL
            flat, rows = found
            wxyz = single_quaternion(rows)
            position = (flat[12], flat[13], flat[14])
            if wxyz is None or not math.isfinite(position[0] + position[1] + position[2]):  # inf - inf is nan too
                return _GENERAL
            pose = flat
        else:
            goal = _lean_goal(node, rig)
            if goal is None:
                return _GENERAL
            position, wxyz, pose = goal
        positions.append(position)
        rotations.append(wxyz)
        poses.append(pose)
        links.append(node.link_for_index(robot, node.link_index) if static else node.link_at_frame(robot))
    links = tuple(links)
    start = io.read(bones)
    if not math.isfinite(sum(start.tolist())) or not lean.links.issuperset(links):  # float32 channels: no overflow
        return _GENERAL
    posture = _lean_posture(solver, robot, frame, start)
    memo = (key, step.node)
    fingerprint = (lean.serial, links, posture, poses)
    if not force and not was_dirty:
        last = _last_inputs.get(memo)
        if type(last) is tuple and last[0] == fingerprint and last[1] == io.held.tobytes():
            shown = _readouts.get((solver.id_data.as_pointer(), solver.name))
            if shown is not None:  # the same inputs: the last answer is this frame's answer
                shown["frame"] = int(frame)
            return None
    try:  # a link set `prepare` refuses (one no joint moves, two targets on one link) is said, as run_step says it
        prepared = lean.prepared.get(links)
        if prepared is None:
            if len(lean.prepared) >= _PREPARED_KEPT:
                lean.prepared.clear()
            prepared = lean.prepared[links] = _prepared_solve(robot, links, lean.options, lean.weights)
        solved = prepared.solve(positions, rotations, start, posture)
    except KinemaError as exc:
        refused = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
    else:
        joints = solved.joints
        if type(joints) is not np.ndarray or joints.dtype != np.float64:
            joints = np.asarray(joints, dtype=float)
        refused = None
        if not math.isfinite(sum(joints.tolist())) and not np.isfinite(joints).all():  # one cheap call for the usual answer
            refused = StepResult(step.node, step.rig, None, links, "solver returned non-finite values; rig left unchanged", solved.ms)
    if refused is not None:  # the rig is left as it is, and the Solver says why
        _last_inputs[memo] = (fingerprint, io.held.tobytes())
        _show_readout(solver, step, refused, force, int(frame), tree_key=key)
        return refused
    _last_inputs[memo] = (fingerprint, io.write(rig, bones, joints))
    _show_lean(solver, step, solved, links, force, int(frame), memo)
    if not want:
        return _SOLVED
    return StepResult(step.node, step.rig, joints, links, summarise(solved), solved.ms, solved.converged, solved)


_lean_imports = None


def _lean_goal(node, rig):
    """(position, wxyz, what the fingerprint keeps) of a target's control that is not a bone of
    the rig (an object, or a bone of another armature): `pose_to_target` of `control_pose`, or
    None when the control has no usable pose (the general path says why)."""
    from .core.graph.program import pose_to_target

    pose = control_pose(node, rig)
    if pose is None or not np.isfinite(pose).all():
        return None
    position, wxyz = pose_to_target(pose)
    if not (np.isfinite(position).all() and np.isfinite(wxyz).all()):
        return None
    return tuple(position.tolist()), tuple(wxyz.tolist()), pose.tobytes()


_POSTURES: dict = {}  # (stored posture text, robot fingerprint) -> the posture when it names every joint, else None


def _lean_posture(solver, robot, frame: float, start):
    """`_posture` (nodes.solver.posture_at), with the posture that names every actuated joint
    (what Add IK Target and every hand-off store) parsed and limited once, not every frame."""
    postures = getattr(solver, "postures", None)
    if postures is None or len(postures) != 1:
        posture = _posture(solver, robot, frame, start)
        return None if posture is None or len(posture) != robot.dof else posture
    text = postures[0].joints
    memo = (text, robot.fingerprint)
    if memo not in _POSTURES:
        posture = _posture(solver, robot, frame, np.full(robot.dof, np.nan))
        if len(_POSTURES) > 64:
            _POSTURES.clear()
        _POSTURES[memo] = posture if posture is not None and len(posture) == robot.dof and np.isfinite(posture).all() else None
    posture = _POSTURES[memo]
    if posture is None:
        posture = _posture(solver, robot, frame, start)
        return None if posture is None or len(posture) != robot.dof else posture
    return posture


def _prepared_solve(robot, links, options, weights):
    """The `_live_solve` cache's PreparedSolve for these links (one object for both paths)."""
    global _OPTION_FIELDS
    if not _OPTION_FIELDS:
        from dataclasses import fields

        _OPTION_FIELDS = tuple(f.name for f in fields(options) if f.name != "posture")
    key = (id(robot), links, weights, tuple(getattr(options, name) for name in _OPTION_FIELDS))
    prepared = _prepared.get(key)
    if prepared is None:
        from .core.solve import prepare

        if len(_prepared) >= _PREPARED_KEPT:
            _prepared.clear()
        prepared = _prepared[key] = prepare(robot, links, options, weights, live=True)
    return prepared


def readout(solver) -> dict:
    """The last live solve of a Solver node: ms, summary, solving_to, backend_note. Empty when
    that solve was for another frame than the scene's: the readout never shows a result for a
    frame that was not solved."""
    import bpy

    found = _readouts.get((solver.id_data.as_pointer(), solver.name), {})
    if found and found.get("frame") != bpy.context.scene.frame_current:
        return {}
    return _worded(found)


def _worded(shown: dict) -> dict:
    """A readout with its summary written out: the lean frame leaves the wording to the first
    reader (most frames are never drawn)."""
    if shown.get("summary") is None and "solved" in shown:
        from .core.graph.program import summarise

        shown["summary"] = summarise(shown.pop("solved"))
    return shown


def readout_of(tree, path: str) -> dict:
    """The last live solve of one user of a Solver: the solver at `path` ("Arm/Solver") in `tree`
    (a group used twice is two instances, each with its own readout and pause)."""
    return dict(_worded(_readouts.get((tree.as_pointer(), path), {})), paused=(tree.as_pointer(), path) in _paused)


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
    if solve is not None:
        _check_budget(solver, step, result.solved_links, solve.backend, result.ms, force, own, instance)


def _check_budget(solver, step, links: tuple, backend: str, ms: float, force: bool, own, instance) -> None:
    """Pause live updates of a solve over its budget. The first solve to a set of links may
    include the one-off compile; it is not a frame cost."""
    compile_key = (step.robot.fingerprint, links, backend)
    if compile_key not in _compiled_links:
        _compiled_links.add(compile_key)
    elif not force and ms > step.options.budget_ms:
        if instance == own:
            _set(solver, "over_budget", True)
        else:
            _paused.add(instance)


def _show_lean(solver, step, solved, links: tuple, force: bool, frame: int, key) -> None:
    """`_show_readout` of a lean frame's solve (no clearance: the lean path avoids nothing),
    its summary left to `_worded`."""
    note = f"Using NumPy: {solved.fallback_reason}" if solved.fallback_reason else ""
    _readouts[key] = {"ms": solved.ms, "summary": None, "solved": solved, "solving_to": ", ".join(links),
                      "backend_note": note, "frame": frame}
    _check_budget(solver, step, links, solved.backend, solved.ms, force, key, key)  # a lean step is never in a group


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
            run_tree(tree, frame, force=force, _results=False)
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
