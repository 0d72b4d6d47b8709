"""Runs Kinema node trees: snapshot -> GraphSpec, compile on change, solve each frame, write the rig.

This is the only place a graph runs — for the viewport, the panel, Bake and the CLI alike.
Handlers call `run_all`; property callbacks only `mark_dirty` (never solve), so nothing recurses.
A run after our own write (the depsgraph update it causes) sees unchanged inputs and does
nothing. What runs remember between frames (compiled programs, fast frames, last inputs,
readouts) is kept in one place, `session.SESSION`; this module holds no state of its own.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple
from dataclasses import replace

import numpy as np

from .blender.carried import carried_by
from .blender.flatten import SEPARATOR, node_by_path
from .blender.keyed_controls import keyed_control, mispredicted
from .blender.keyed_controls import reset_caches as reset_keyed_controls
from .blender.path_moves import tool_goal
from .blender.postures import frame_posture, whole_posture
from .blender.rig import live_rig
from .core.errors import KinemaError
from .core.graph.program import FrameInputs, Program, StepResult, bone_goal, compile_program, pose_to_target, summarise
from .core.graph.registry import GROUP_IDNAME, TREE_IDNAME, kind_of
from .core.graph.spec import GraphSpec
from .core.lru import LRU
from .core.solve import TRACKING_NOTE
from .session import PREPARED_KEPT, SESSION, TreeState, changed_outside, compiled_program, mark_dirty, readout, readout_of, resume

#: What nodes and panels also reach through the evaluator; the state itself is session.py's.
__all__ = ("changed_outside", "compiled_program", "mark_dirty", "readout", "readout_of", "resume")


def forget_all() -> None:
    """Drop every cache (a new file was loaded)."""
    from .blender import plan_between_keys, postures

    SESSION.clear()
    postures.clear_cache()
    plan_between_keys.reset_caches()
    reset_keyed_controls()  # keyed by the rig's address, which the new file's objects may reuse


def reset_caches() -> None:
    """Drop every per-process cache a live session builds, so what runs next sees none of what
    ran before (tests call this before each test): compiled trees and readouts, the rigs'
    robots, group errors, carried objects' fits, parsed postures and the Configuration-Select node's found sets (Find
    Solutions' too). Compiled solvers stay: they hold nothing about any file, only compile time."""
    from .blender import carried, flatten, rig
    from .core.stages.configurations import clear_cache

    forget_all()
    SESSION.compiled_links.clear()
    flatten.clear_errors()
    rig.reset_caches()
    carried.reset_caches()
    clear_cache()


def kinema_trees(data=None):
    import bpy

    data = data or bpy.data
    return [tree for tree in data.node_groups if tree.bl_idname == TREE_IDNAME]


# ---- snapshot & compile ----------------------------------------------------------------

def snapshot(tree) -> GraphSpec:
    """The tree as plain data, with every node group it uses flattened in (nodes inside a group
    are named by their path, "Group/IK Target"; see `blender/flatten.py`). Muted nodes and links
    are left out; links Blender marks invalid (a cycle, a wrong socket type) are kept, so
    validation can say what is wrong with them. A tree used as a group gives an empty spec."""
    from .blender.flatten import flatten

    return flatten(tree)


def _robots_of(tree) -> dict:
    from .blender.flatten import all_nodes
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
    state = SESSION.tree(tree.as_pointer())
    spec = snapshot(tree)
    if state.program is not None and state.spec == spec:
        return state.program
    program = compile_program(spec, _robots_of(tree))
    state.compiled(spec, program)
    for node in tree.nodes:
        if hasattr(node, "kinema_error"):
            _set(node, "kinema_error", program.node_message(node.name))
    for step in program.steps:
        rig = rig_object(tree, program, step)
        if rig is not None and getattr(rig, "kinema_tree", None) is None:
            rig.kinema_tree = tree  # the rig keeps its tree alive and evaluates the tree's animation
    return program


def _current_program(tree, state: TreeState, was_dirty: bool) -> tuple[Program, dict | None]:
    """(`program_for(tree)`, each step's rig by solver path or None), without the snapshot while
    nothing can have changed the spec: the tree was not marked dirty, nothing was reported
    changed outside it (`changed_outside`: the Preferences' solve budget, which a solver without its
    own budget puts in the spec, says so when it changes), it has no keys or drivers (an animated
    setting changes the spec with no callback), no groups (an edit inside a group marks the group's
    tree, not this one), and each step's rig is still there under its name (the rigs found then
    come back with the program: the frame needs them too)."""
    checked = state.checked
    if (state.program is not None and not was_dirty and checked is not None and checked[0] == SESSION.generation and checked[1]
            and tree.animation_data is None):
        program, rigs = state.program, {}
        for step in program.steps:
            rig = _rig_still(tree, state, program, step)
            if rig is None:
                break
            rigs[step.node] = rig
        else:
            return program, rigs
    from .blender.renames import follow_renames

    follow_renames(tree)
    program = program_for(tree)
    plain = tree.animation_data is None and not any(
        node.bl_idname in (GROUP_IDNAME, "NodeReroute") for node in tree.nodes)
    state.checked = (SESSION.generation, plain)
    return program, None


def _rig_still(tree, state: TreeState, program: Program, step):
    """The step's rig if it is still there under the name the program was compiled with (a rig
    removed or renamed by a script reports nothing until the next depsgraph update), else None."""
    node = node_by_path(tree, _robot_node_of(state, program, step) or "")
    rig = getattr(node, "rig", None)
    return rig if rig is not None and rig.name == step.rig else None


def solve_ahead_wanted() -> bool:
    """Preferences' *Solve Ahead While Idle* (on where the add-on has no preferences: the bpy module)."""
    from .ui.preferences import preferences

    return getattr(preferences(), "solve_ahead", True)


def _robot_node_of(state: TreeState | None, program: Program, step) -> str | None:
    """The Robot node a step's rig comes from (bound once per compile: every frame asks)."""
    found = state.robot_nodes if state is not None and state.program is program else {}
    if step.node not in found:
        found[step.node] = next((node.name for node in program.spec.of_kind("robot") if node.get("rig") == step.rig), None)
    return found[step.node]


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
        controls[target.node] = tool_goal(node, rig, control_pose(node, rig), frame, step)  # a Tool's move, offset and turn, if one feeds it
        links[target.node] = node.link_at_frame(step.robot)
    values = {}
    for name in step.after_solver:
        stage = node_by_path(tree, name)
        if hasattr(stage, "frame_values"):
            values[name] = stage.frame_values()
            if getattr(stage, "close_on_object", False):  # a Gripper node stopping on what the rig carries
                from .blender.carried import carried_objects

                values[name]["carried"] = carried_objects(rig, frame)
    for target in step.targets:
        if target.link_source is not None:  # a Link Switch's keyed or driven value at this frame
            switch = node_by_path(tree, target.link_source)
            values[target.link_source] = {"value": float(getattr(switch, "value", 0.0))}
    start = read_joint_values(rig, step.robot)
    solver = node_by_path(tree, step.node)
    values[step.node] = {"posture": frame_posture(solver, step.robot, frame, start)}
    if step.options.avoid is not None and step.options.avoid.world is None:  # obstacles where this frame has them
        from .blender.collisions import world_for

        try:
            world = world_for(solver, rig, frame=frame)
        except KinemaError as exc:  # an obstacle that cannot be read: the frame is not solved (program.run_step says why)
            values[step.node]["world_error"] = str(exc)
        else:
            if world is not None:
                values[step.node]["world"] = world
                from .blender.carried import touching_pairs

                touching = touching_pairs(rig, step.robot)
                if touching:
                    values[step.node]["touching"] = touching
    if step.options.avoid is not None:  # what a grasp holds on this frame moves with its link, and is kept clear too
        from .blender.carried import carried_objects

        carried = carried_objects(rig, frame)
        if carried:
            values[step.node]["carried"] = carried
    return FrameInputs(frame, controls, {step.rig: start}, links, values)


def rig_object(tree, program: Program, step):
    return node_by_path(tree, _robot_node_of(SESSION.trees.get(tree.as_pointer()), program, step)).rig


def _fingerprint(inputs: FrameInputs, program: Program, step) -> bytes:
    parts = [str(id(program)).encode(), repr(sorted(inputs.links.items())).encode(), repr(sorted(inputs.values.items())).encode()]
    parts += [np.asarray(v if v is not None else np.full((4, 4), np.nan)).tobytes() for _, v in sorted(inputs.controls.items())]
    parts += [np.asarray(v).tobytes() for _, v in sorted(inputs.starts.items())]
    return b"|".join(parts)


def live_solve(robot, goals, start, options):
    """`core.solve.solve` for a live frame, through a cached `prepare` (the same answers: the
    prepared path hands anything but a converged warm kernel descent to `solve`)."""
    avoid = options.avoid
    if avoid is not None and (avoid.world is not None or avoid.carried):
        # a world or carried objects are this frame's: solve()'s own avoiding path (core/solve/_avoiding.py)
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
             _results: bool = True, _pre: bool = False) -> list[StepResult]:
    """Solve every live solver of `tree` for the current state and write the rigs.

    `force` solves even when Live IK is off, paused over budget, or nothing moved (Bake, the
    panel's buttons). `values` adds per-frame values for this run only, by node path (Find
    Solutions asks the Configuration-Select node for its solutions). Never raises for a bad
    graph: the nodes show the errors. (`_results=False`: run_all, which keeps none, leaves the
    fast frames' StepResults unmade.)
    """
    state = SESSION.tree(tree.as_pointer())
    was_dirty = state.dirty
    if was_dirty:
        state.dirty = False
    program, rigs = _current_program(tree, state, was_dirty)
    for name in program.blocked:  # a Solver that cannot run shows no result, only why (on itself)
        blocked = node_by_path(tree, name)
        if blocked is not None:
            own = SESSION.trees.get(blocked.id_data.as_pointer())
            if own is not None:
                own.readouts.pop(blocked.name, None)
    if frame is None:
        import bpy

        frame = bpy.context.scene.frame_current
    results, complete = [], True
    for step in program.steps:
        solver = node_by_path(tree, step.node)
        if not force and (not solver.live or solver.over_budget or step.node in state.paused):
            continue
        try:
            rig = rigs[step.node] if rigs is not None else rig_object(tree, program, step)
            if _pre:  # before Blender evaluates the frame: only what the fast frame can answer from F-curves
                fast = _fast_frame(tree, state, program, step, was_dirty) if step.backend != "off" else None
                result = False if fast is None else fast.run(tree, state, step, solver, rig, frame, False, was_dirty, False, pre=True)
                if result is False:  # left to frame_change_post
                    complete = False
                    continue
            else:
                result = _run_step(tree, state, program, step, solver, rig, frame, force, was_dirty, values, _results)
        except KinemaError as exc:  # the rig itself refused (a bone gone, a value it cannot hold): this step only
            result = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
            state.last_inputs.pop(step.node, None)
            _show_readout(solver, step, result, force, int(frame), state)
            complete = False
        if result is not None and result is not True:
            results.append(result)
    if _pre:  # whether every live step was answered; a mark it consumed stays for those that were not
        if was_dirty and not complete:
            state.dirty = True
        return complete
    return results


def _run_step(tree, state: TreeState, program, step, solver, rig, frame, force, was_dirty, values, want=True):
    """One live step of `run_tree`: its StepResult (True when solved and not `want`ed), or None
    when nothing moved since its last frame. A plain step answers through its fast frame; any
    other step, or a frame the fast frame hands back, through `Program.run_step`."""
    if step.backend == "off" and not force and values is None and _still_off(tree, state, program, step, was_dirty, frame):
        return None
    if step.plan_between_keys and values is None:
        planned = _planned_frame(tree, state, program, step, solver, rig, frame, force)
        if planned is not None:
            return planned
    fast = _fast_frame(tree, state, program, step, was_dirty) if values is None else None
    if fast is not None:
        result = fast.run(tree, state, step, solver, rig, frame, force, was_dirty, want)
        if result is not False:
            return result
    from .blender.rig import write_joint_values

    inputs = frame_inputs(tree, program, step, frame)
    for name, extra in (values or {}).items():
        if name in step.after_solver:
            inputs.values[name] = {**inputs.values.get(name, {}), **extra}
    fingerprint = _fingerprint(inputs, program, step)
    if not force and not was_dirty and state.last_inputs.get(step.node) == fingerprint:
        shown = _own_readout(solver)
        if shown is not None:  # the same inputs: the last answer is this frame's answer
            shown["frame"] = int(frame)
        return None
    try:
        result = program.run_step(step, inputs, live_solve)
    except KinemaError as exc:
        result = StepResult(step.node, step.rig, None, (), f"cannot solve: {exc}")
    if result.joints is not None:
        written = write_joint_values(rig, step.robot, result.joints)
        inputs.starts[step.rig] = written
    state.last_inputs[step.node] = _fingerprint(inputs, program, step)
    _show_readout(solver, step, result, force, int(frame), state)
    if step.backend == "off":
        state.off_shown[step.node] = (program, SESSION.generation)
    return result


def _planned_frame(tree, state: TreeState, program, step, solver, rig, frame, force) -> StepResult | None:
    """A frame inside a segment Plan Between Keys planned shows the plan's joints, not a solve
    (blender/plan_between_keys.py); None: this frame is solved as ever."""
    from .blender.plan_between_keys import planned_joints
    from .blender.rig import write_joint_values

    joints = planned_joints(tree, program, step, rig, frame)
    if joints is None:
        return None
    written = write_joint_values(rig, step.robot, joints)
    state.last_inputs.pop(step.node, None)  # the next frame outside the plan solves again
    result = StepResult(step.node, step.rig, written, (), "planned between keys", converged=True)
    _show_readout(solver, step, result, force, int(frame), state)
    return result


def _own_readout(solver) -> dict | None:
    """The readout a Solver node itself shows (in its own tree's state: a group's tree for a
    Solver inside a group)."""
    own = SESSION.trees.get(solver.id_data.as_pointer())
    return None if own is None else own.readouts.get(solver.name)


def _still_off(tree, state: TreeState, program: Program, step, was_dirty: bool, frame) -> bool:
    """A Solver set to Off solves nothing and writes nothing; its readout (the links it would
    solve to) can change only with an edit, a keyed tree or a Link Switch. Without those, a
    frame after the one that showed it does nothing but say which frame it is, instead of
    reading every control and the rig for a result that is thrown away."""
    if was_dirty or state.off_shown.get(step.node) != (program, SESSION.generation) or tree.animation_data is not None:
        return False
    if any(t.link_source for t in step.targets):
        return False
    shown = state.readouts.get(step.node)
    if shown is None:
        return False
    shown["frame"] = int(frame)
    return True


# ---- the fast frame ------------------------------------------------------------------------
#
# Every live frame of a plain step (targets straight into a Solver: nothing after it, nothing to
# avoid but the robot itself, no Link Switch) goes from the controls and the rig to the prepared
# solve (the kernel's, or the avoiding solve's for Avoid Collisions on the robot) and back
# with what does not change per frame done once per compiled step: the options, held joints and
# weights, the prepared solve per link set, a fingerprint of plain tuples. The answer is the one
# `Program.run_step` gives (tests/blender/test_live_ik.py checks it); anything unusual on a frame
# (a control without a pose, a link the robot lacks, a rig showing a non-finite value, an object
# a grasp holds while avoiding) takes the general path, which says why.


class FastFrame:
    """What a plain step's live frame needs that does not change per frame (see above). Made
    again after anything could have changed it (`_fast_frame`); `run` solves one frame."""

    __slots__ = ("targets", "options", "weights", "prepared", "links", "serial", "kept", "kept_at")

    def __init__(self, targets, options, weights, links):
        self.targets, self.options, self.weights = targets, options, weights
        self.prepared, self.links = LRU(PREPARED_KEPT), links
        self.serial = SESSION.next_serial()  # in fingerprints: unlike id(), never reused by a later step
        #: (frame, the channels the rig held before it) -> its KeptFrame, good until answers are
        #: forgotten or a prediction misses (`kept_at`: `SESSION.kept_epoch`); across an edit, each
        #: is checked against the keys once (`run`)
        self.kept, self.kept_at = {}, None

    def same_as(self, other) -> bool:
        return other is not None and (self.targets, self.options, self.weights, self.links) == (
            other.targets, other.options, other.weights, other.links)

    def run(self, tree, state: TreeState, step, solver, rig, frame, force: bool, was_dirty: bool, want: bool = True,
            pre: bool = False):
        """One frame: its StepResult (True when solved and not `want`ed), None when nothing moved
        since the last frame, or False: this frame takes the general path. `pre`: Blender has not
        evaluated this frame yet (`frame_change_pre`); each control's pose comes from its own
        F-curves (`blender/keyed_controls.py`), and False leaves the frame to the post route."""
        if rig is None:
            return False
        robot = step.robot
        bones = rig.pose.bones
        io = live_rig(rig, robot, bones)
        if io is None:
            return False
        nodes = tree.nodes
        static = tree.animation_data is None  # read each frame: a script may key the tree between frames
        if self.options.avoid is not None and carried_by(rig, frame):
            return False  # what a grasp holds is kept clear too: frame_inputs reads it (the general path)
        kept = found = None
        if pre:
            if not static:
                return False  # the tree's keyed settings are not evaluated for this frame yet
            start = io.read(bones)
            held = io.held.tobytes()
            if not force and not was_dirty:
                t0 = time.perf_counter()
                kept = self._kept_frames()
                found = kept.get((frame, held))
                if found is not None and (found.io is not io or not self._still(found.fingerprint, nodes, robot, solver,
                                                                               frame, start)):
                    found = None
                if found is not None and found.generation == SESSION.generation:
                    return self._replay(found, state, step, solver, rig, bones, frame, held, want, t0)
            keyed = self._keyed(nodes, rig, io, robot, frame)
            if keyed is None:
                return False
            links, poses, goals, controls = keyed
            if found is not None and (links, poses, controls) == (found.fingerprint[1], found.fingerprint[3], found.controls):
                # kept before an edit (any depsgraph update: a selection, another object moved, a key),
                # and the keys still give the controls the poses it was solved for
                found = kept[(frame, held)] = found._replace(generation=SESSION.generation)
                return self._replay(found, state, step, solver, rig, bones, frame, held, want, t0)
        else:
            poses, links, controls, goals = [], [], [], []
            matrices = False
            for name in self.targets:
                node = nodes.get(name)
                if node is None:
                    return False
                bone = node.control_bone
                if bone and node.control_object == rig:  # the default: a bone of the rig, read with the rig's matrices
                    if not matrices:
                        io.read_matrices(bones)
                        matrices = True
                    flat = io.control_flat(bone)
                    if flat is None:
                        return False
                    poses.append(flat)
                else:
                    goal = _control_goal(node, rig)
                    if goal is None:
                        return False
                    poses.append(goal)
                links.append(node.link_for_index(robot, node.link_index) if static else node.link_at_frame(robot))
            links = tuple(links)
        if not pre:
            start = io.read(bones)
            held = io.held.tobytes()
        if not math.isfinite(sum(start.tolist())) or not self.links.issuperset(links):  # float32 channels: no overflow
            return False
        posture = whole_posture(solver, robot, frame, start)
        path = step.node
        fingerprint = (self.serial, links, posture, poses)
        if not force and not was_dirty and _met_again(state, path, fingerprint, held, frame, pre, rig, io, controls):
            return None
        if not pre:  # the goals, made only for a frame that is solved
            goals = []
            for pose in poses:
                goal = bone_goal(pose) if type(pose) is list else pose  # a bone's pose, or an object's goal
                if goal is None:
                    return False
                goals.append(goal)
        positions, rotations = _goal_arrays(goals)
        try:  # a link set `prepare` refuses (one no joint moves, two targets on one link) is said, as run_step says it
            prepared = self._prepared(robot, links)
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
            if pre:
                return False  # said by the post route, from the evaluated frame
            state.last_inputs[path] = (fingerprint, held)
            _show_readout(solver, step, refused, force, int(frame), state)
            return refused
        written = io.write(rig, bones, joints)
        if kept is not None and prepared.repeatable:
            kept[(frame, held)] = KeptFrame(io, controls, fingerprint, solved, joints, io.channel.copy(), written,
                                            SESSION.generation)
        return _written(state, step, solver, rig, io, controls, fingerprint, solved, joints, written, force, frame, want, pre)

    def _kept_frames(self) -> dict:
        """The frames kept (KeptFrame), emptied after forgotten answers or a missed prediction
        (`SESSION.kept_epoch`), or when full."""
        if self.kept_at != SESSION.kept_epoch or len(self.kept) >= KEPT_FRAMES:
            self.kept, self.kept_at = {}, SESSION.kept_epoch
        return self.kept

    def _still(self, fingerprint, nodes, robot, solver, frame, start) -> bool:
        """Whether the links and the posture a kept frame was solved for are this frame's: a script
        may set a target's link index or a posture between two frames with no depsgraph update
        (no new generation); everything else a kept frame assumed moves the generation or is
        checked after Blender's evaluation (`_pre_frame_holds`)."""
        links = fingerprint[1]
        for name, link in zip(self.targets, links):
            node = nodes.get(name)
            if node is None or node.link_for_index(robot, node.link_index) != link:
                return False
        return whole_posture(solver, robot, frame, start) == fingerprint[2]

    def _replay(self, found: KeptFrame, state: TreeState, step, solver, rig, bones, frame, held: bytes, want: bool,
                t0: float):
        """`run`'s pre route at a frame kept there: the rig written as then, without working out the
        control's pose, the posture or the solve again (#33: a looped playback, a scrub back, a
        first playback after the idle turns)."""
        if _met_again(state, step.node, found.fingerprint, held, frame, True, rig, found.io, found.controls):
            return None
        found.io.put(rig, bones, found.channel, found.written)
        found.solved.ms = (time.perf_counter() - t0) * 1000.0
        return _written(state, step, solver, rig, found.io, found.controls, found.fingerprint, found.solved, found.joints,
                        found.written, False, frame, want, True)

    def _keyed(self, nodes, rig, io, robot, frame):
        """(links, poses, goals, control bone indices) of a frame whose every control is a bone of
        the rig posed by its own F-curves alone (`keyed_control`: known before Blender evaluates
        the frame), in a tree with no keys; None for any other frame."""
        poses, links, controls, goals = [], [], [], []
        for name in self.targets:
            node = nodes.get(name)
            if node is None:
                return None
            bone = node.control_bone
            if not bone or node.control_object != rig:
                return None
            keyed = keyed_control(rig, bone, io.written, SESSION.generation)
            known = None if keyed is None else keyed.goal(frame)  # made once a frame
            if known is None:
                return None
            poses.append(known[0])
            goals.append(known[1:])
            controls.append(io.index[bone])
            links.append(node.link_for_index(robot, node.link_index))
        return tuple(links), poses, goals, controls

    def _prepared(self, robot, links):
        """The live rig's prepared solve for these links (one per link set this frame has met)."""
        prepared = self.prepared.get(links)
        if prepared is None:
            prepared = self.prepared.put(links, _prepared_solve(robot, links, self.options, self.weights))
        return prepared

    def ahead(self, tree, state: TreeState, step, solver, rig, span: tuple, deadline: float) -> bool:
        """Solve, until `deadline` (perf_counter s; one frame at least), the next frames a playback
        from the current one will show, then those a scrub back from it will show, into the live
        rig's memory of answers (core/solve/_frame.py): each from the channels the frame before
        it in that order leaves the rig holding, as the playback's or the scrub's own frames will
        be (`LiveRig.holding`), so each of those frames finds its exact inputs remembered and
        solves nothing. Only frames the pre route answers (every control a keyed bone of the
        rig, `_keyed`); the rig, the readout and the budget are left alone. `span`: (current
        frame, first, last frame played: a playback wraps from last to first; a scrub back stops
        at the first). An `Ahead` per Solver keeps the place of both, started again after any edit
        (the generation), another range, a frame the rig did not reach along the playback's
        chain, or the rig holding other values at the frame the chains started from (a playback
        stopped and returned to its first frame, where the answer's last bits depend on the frame
        it came from); a frame that moved along it (stepping forward) keeps the playback's chain
        going from where it stands and starts the scrub back's from the new frame. Returns True
        while frames are left."""
        robot, bones = step.robot, rig.pose.bones
        io = live_rig(rig, robot, bones)
        if io is None or tree.animation_data is not None:
            return False
        now, first, last = span
        where = (self.serial, SESSION.generation, first, last)
        ahead = state.ahead.get(step.node)
        io.read(bones)
        shown = io.held.tobytes()
        if ahead is not None and ahead.where == where and ahead.now != now and ahead.playback.trail.get(now) == shown:
            ahead.back_from(now, io.held.copy())  # the rig shows what the playback's chain found here
        if ahead is None or ahead.where != where or ahead.now != now or ahead.origin != shown:
            ahead = state.ahead[step.node] = Ahead(where, now, io.held.copy(), first, last)
        clock, solved = time.perf_counter, False
        for chain in (ahead.playback, ahead.back):
            while chain.left > 0 and not (solved and clock() >= deadline):  # one frame at least: each turn moves on
                self._ahead_one(chain, tree.nodes, rig, io, robot, solver)
                solved = True
        return ahead.left()

    def _ahead_one(self, chain: Chain, nodes, rig, io, robot, solver) -> None:
        """The next frame of a solving-ahead chain (`ahead`), its answer remembered; a frame the
        pre route would not answer (another route: the frames after it start from its answer) or
        that is refused ends the chain."""
        frame = chain.next_frame()
        keyed = self._keyed(nodes, rig, io, robot, frame)
        start = io.start(chain.held)
        if keyed is None or not self.links.issuperset(keyed[0]) or not math.isfinite(sum(start.tolist())) or (
                self.options.avoid is not None and carried_by(rig, frame)):
            chain.left = 0
            return
        links, poses, goals, controls = keyed
        try:
            prepared = self._prepared(robot, links)
            posture = whole_posture(solver, robot, frame, start)
            solved = prepared.solve(*_goal_arrays(goals), start, posture)
            joints = np.asarray(solved.joints, dtype=float)
            held = io.holding(joints).copy()
        except KinemaError:
            chain.left = 0
            return
        if prepared.repeatable:  # the frame a playback or scrub back meets next replays it (`_replay`)
            self._kept_frames()[(frame, chain.held.tobytes())] = KeptFrame(
                io, controls, (self.serial, links, posture, poses), solved, joints, held, held.tobytes(), SESSION.generation)
        chain.moved_to(frame, held)


class KeptFrame(NamedTuple):
    """What the pre route solved and wrote at a frame (`FastFrame.kept`, by the frame and the
    channels the rig held before it), for `FastFrame._replay`. Only an answer the same inputs give
    again (`PreparedSolve.repeatable`). A target's link and the posture are read again each time
    (`FastFrame._still`: a script may set them with no new generation); after a new generation the
    controls' poses at the frame are worked out from the keys once and compared (an edit to the
    tree, the solver or the robot makes a new FastFrame, with nothing kept); a misprediction
    Blender's evaluation shows (`_pre_frame_holds`) or forgotten answers bump `SESSION.kept_epoch`,
    which empties them all."""

    io: object  # the LiveRig it was written through
    controls: list  # the control bones' indices (the post check's)
    fingerprint: tuple  # (fast frame serial, links, posture, control poses)
    solved: object  # the SolveResult
    joints: np.ndarray
    channel: np.ndarray  # what `LiveRig.holding` made of the joints
    written: bytes  # channel's bytes
    generation: int  # the last generation its control poses were the keys' (`run` checks them once after an edit)


def _met_again(state: TreeState, path: str, fingerprint: tuple, held: bytes, frame, pre: bool, rig, io, controls) -> bool:
    """Whether the step at `path` meets the inputs of its last frame again (the rig holding what
    that frame wrote): its last answer is this frame's, the readout says which frame, and the pre
    route's check is queued."""
    last = state.last_inputs.get(path)
    if type(last) is not tuple or last[0] != fingerprint or last[1] != held:
        return False
    shown = state.readouts.get(path)  # a plain step: the Solver's own readout
    if shown is not None:
        shown["frame"] = int(frame)
    if pre:
        SESSION.pre.checks.append((rig, io, controls, fingerprint[3], held))
    return True


def _written(state: TreeState, step, solver, rig, io, controls, fingerprint: tuple, solved, joints, written: bytes, force: bool,
             frame, want: bool, pre: bool):
    """A fast frame written: its inputs remembered, the pre route's check queued, the readout
    shown; `FastFrame.run`'s result."""
    links, poses = fingerprint[1], fingerprint[3]
    state.last_inputs[step.node] = (fingerprint, written)
    if pre:
        SESSION.pre.checks.append((rig, io, controls, poses, written))
    _show_fast(solver, step, solved, links, force, int(frame), state)
    if not want:
        return True
    return StepResult(step.node, step.rig, joints, links, summarise(solved), solved.ms, solved.converged, solved)


class Chain:
    """One chain of frames solved ahead (`FastFrame.ahead`): from `frame`, the rig holding `held`
    after it, `left` frames more, one way: a playback's (`direction` 1, wrapping from `last` to
    `first`) or a scrub back's (-1, stopping at `first`). `trail`, a playback's only: what the
    chain leaves the rig holding at each frame it solved."""

    __slots__ = ("direction", "frame", "held", "left", "first", "last", "trail")

    def __init__(self, direction: int, frame: int, held: np.ndarray, left: int, first: int, last: int, trail=None):
        self.direction, self.frame, self.held, self.left = direction, frame, held, left
        self.first, self.last, self.trail = first, last, trail

    def next_frame(self) -> int:
        if self.direction < 0:
            return self.frame - 1
        return self.frame + 1 if self.first <= self.frame + 1 <= self.last else self.first

    def moved_to(self, frame: int, held: np.ndarray) -> None:
        """The chain solved `frame`, which leaves the rig holding `held`."""
        if self.trail is not None:
            self.trail[frame] = held.tobytes()
        self.frame, self.held, self.left = frame, held, self.left - 1


class Ahead:
    """Where a Solver's frames solved ahead stand (`FastFrame.ahead`; `TreeState.ahead`): made
    for `where` (fast frame, generation, first and last frame), standing at frame `now` with the
    rig holding `origin` (bytes); two `Chain`s: the playback's, then the scrub back's."""

    __slots__ = ("where", "now", "origin", "playback", "back")

    def __init__(self, where: tuple, now: int, held: np.ndarray, first: int, last: int):
        self.where = where
        self.playback = Chain(1, now, held, min(AHEAD_FRAMES, last - first + 1), first, last, {now: held.tobytes()})
        self.back_from(now, held)

    def back_from(self, now: int, held: np.ndarray) -> None:
        """Stand at frame `now`, the rig holding `held`: the scrub back's chain starts from it."""
        first = self.playback.first
        self.now, self.origin = now, held.tobytes()
        self.back = Chain(-1, now, held, max(0, min(AHEAD_BACK_FRAMES, now - first)), first, self.playback.last)

    def left(self) -> bool:
        """Whether either chain has frames left."""
        return self.playback.left > 0 or self.back.left > 0


def _goal_arrays(goals) -> tuple:
    """(positions, wxyz) of a frame's goals as the prepared solve takes them: one keyed
    control's goal is kept as its (1, 3) and (1, 4) arrays already."""
    if len(goals) == 1 and len(goals[0]) == 4:
        return goals[0][2], goals[0][3]
    return [g[0] for g in goals], [g[1] for g in goals]


def fast_frame(tree, path: str) -> FastFrame | None:
    """The fast frame the Solver at `path` of `tree` last ran with (None: its frames take the
    general path, or it has not run)."""
    state = SESSION.trees.get(tree.as_pointer())
    memo = state.fast.get(path) if state is not None else None
    return None if memo is None else memo[2]


def _fast_frame(tree, state: TreeState, program: Program, step, was_dirty: bool) -> FastFrame | None:
    """The step's fast frame, made again after anything could have changed it. One made again
    equal to the last is the last (its serial too): every depsgraph update bumps the generation,
    our own write brings one, and a new serial there would solve and write again, for ever."""
    memo = state.fast.get(step.node)
    if memo is None or memo[0] is not program or memo[1] != SESSION.generation or was_dirty:
        fast = _make_fast_frame(tree, step)
        if memo is not None and memo[0] is program and not was_dirty and fast is not None and fast.same_as(memo[2]):
            fast = memo[2]
        memo = state.fast[step.node] = (program, SESSION.generation, fast)
    return memo[2]


def _make_fast_frame(tree, step) -> FastFrame | None:
    avoid = step.options.avoid
    if step.after_solver or step.backend == "off":
        return None
    if avoid is not None:  # the robot itself only: a world is each frame's (frame_inputs reads it)
        solver = tree.nodes.get(step.node)
        if not avoid.self_ or solver is None or solver.avoids_world():
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
    options = replace(step.options, backend=step.backend, held_joints=held, posture=None)
    weights = tuple((t.position_weight, t.rotation_weight) for t in step.targets)
    return FastFrame(tuple(t.node for t in step.targets), options, weights, frozenset(robot.links))


def _control_goal(node, rig):
    """(position, wxyz, what the fingerprint keeps) of a target's control that is not a bone of
    the rig (an object, or a bone of another armature): `pose_to_target` of `control_pose`, or
    None when the control has no usable pose (the general path says why)."""
    pose = control_pose(node, rig)
    if pose is None or not np.isfinite(pose).all():
        return None
    position, wxyz = pose_to_target(pose)
    if not (np.isfinite(position).all() and np.isfinite(wxyz).all()):
        return None
    return tuple(position.tolist()), tuple(wxyz.tolist()), pose.tobytes()


def _prepared_solve(robot, links, options, weights):
    """The `live_solve` cache's PreparedSolve for these links (one object for both paths)."""
    if not SESSION.option_fields:
        from dataclasses import fields

        SESSION.option_fields = tuple(f.name for f in fields(options) if f.name != "posture")
    key = (id(robot), links, weights, tuple(getattr(options, name) for name in SESSION.option_fields))
    prepared = SESSION.prepared.get(key)
    if prepared is None:
        from .core.solve import prepare

        prepared = SESSION.prepared.put(key, prepare(robot, links, options, weights, live=True))
    return prepared


def _show_readout(solver, step, result: StepResult, force: bool, frame, state: TreeState) -> None:
    """Show a step's result on its Solver node and on this user's instance of it (the same one
    unless the Solver is inside a group)."""
    solve = result.result
    note = f"Using NumPy: {solve.fallback_reason}" if solve is not None and solve.fallback_reason else ""
    shown = {"ms": float(result.ms), "summary": result.summary, "solving_to": ", ".join(result.solved_links),
             "backend_note": note, "frame": frame}
    _show_clearance(shown, getattr(solve, "min_clearance_m", None))
    SESSION.tree(solver.id_data.as_pointer()).readouts[solver.name] = state.readouts[step.node] = shown
    if solve is not None:
        _check_budget(solver, step, result.solved_links, solve.backend, result.ms, force, state, solve.fallback_reason)


def _show_clearance(shown: dict, clearance) -> None:
    """The readout's clearance line, for a solve that measured one (Avoid Collisions)."""
    if clearance is not None and math.isfinite(clearance):
        shown["clearance"] = f"Clearance: {clearance * 1000:.1f} mm" + (" (in collision)" if clearance < 0 else "")


#: Live updates pause only after this many ordinary frames in a row over budget: one slow frame
#: (a garbage collection, another program holding the core, a hard pose) is not a slow rig, and
#: the pause is for rigs whose ordinary solves are too slow (the manual's "Over budget").
SLOW_FRAMES_TO_PAUSE = 3


def _check_budget(solver, step, links: tuple, backend: str, ms: float, force: bool, state: TreeState,
                  fallback: str | None = None) -> None:
    """Count a live solve against its budget, pausing live updates after SLOW_FRAMES_TO_PAUSE
    ordinary frames in a row over it. A one-off cost is never counted: the first solve to a set of
    links on a backend (a compile, a new Target Bone, a switched solver), a frame answered while a
    solver compiles in the background (PyRoki's build or the NumPy kernel's: they share the
    interpreter with the frame), one answered by a fallback (its `fallback` reason), and the first
    after this Solver was switched to another solver or Target Bone (the compile may have been paid
    elsewhere, but not this Solver's first call to it). A live PyRoki tracking step the kernel
    answered (`TRACKING_NOTE`) is no fallback: an ordinary frame, counted like one."""
    compile_key = (step.robot.fingerprint, links, backend)
    one_off = compile_key not in SESSION.compiled_links
    if one_off:
        SESSION.compiled_links.add(compile_key)
    asked = (step.backend, links)  # the solver and links this Solver was asked for: a switch of either is a one-off
    if state.asked.get(step.node) != asked:
        state.asked[step.node] = asked
        one_off = True
    if force:
        return
    # under budget first: an ordinary frame then skips the background-compile poll (#33: it cost
    # as much as the kernel's solve, every frame)
    fell_back = bool(fallback) and fallback != TRACKING_NOTE
    if ms <= step.options.budget_ms or one_off or fell_back or _compiling_in_background():
        state.slow_frames.pop(step.node, None)
        return
    slow = state.slow_frames[step.node] = state.slow_frames.get(step.node, 0) + 1
    if slow < SLOW_FRAMES_TO_PAUSE:
        return
    state.slow_frames.pop(step.node, None)
    if solver.name == step.node and SESSION.trees.get(solver.id_data.as_pointer()) is state:
        _set(solver, "over_budget", True)
    else:  # one user of a group's Solver: that node is shared by every user
        state.paused.add(step.node)


def _compiling_in_background() -> bool:
    from .core.solve import compiling_in_background

    return compiling_in_background()


def _show_fast(solver, step, solved, links: tuple, force: bool, frame: int, state: TreeState) -> None:
    """`_show_readout` of a fast frame's solve, its summary left to the first reader
    (`session.readout`)."""
    note = f"Using NumPy: {solved.fallback_reason}" if solved.fallback_reason else ""
    shown = state.readouts[step.node] = {"ms": solved.ms, "summary": None, "solved": solved, "solving_to": ", ".join(links),
                                         "backend_note": note, "frame": frame}
    _show_clearance(shown, solved.min_clearance_m)  # Avoid Collisions on the robot itself
    _check_budget(solver, step, links, solved.backend, solved.ms, force, state, solved.fallback_reason)  # never in a group


def hold_runs() -> bool:
    """Keep the handlers from running trees (Bake stepping through frames it solves itself).
    Returns True when this call took the hold; pair it with `release_runs`."""
    if SESSION.running:
        return False
    SESSION.running = True
    return True


def release_runs() -> None:
    SESSION.running = False


def run_all(scene=None, *, force: bool = False) -> None:
    """Run every Kinema tree (the frame-change and depsgraph handlers call this)."""
    if SESSION.running:
        return
    if SESSION.pre.key is not None and not force and scene is not None and _pre_frame_holds(scene):
        return  # frame_change_post after run_pre answered this frame
    SESSION.running = True
    try:
        frame = scene.frame_current if scene is not None else None
        for tree in kinema_trees():
            run_tree(tree, frame, force=force, _results=False)
    finally:
        SESSION.running = False


#: Whether live frames solve in `frame_change_pre` where they can (`run_pre`); off, every frame
#: solves after Blender's evaluation (the tests compare the two routes).
SOLVE_BEFORE_EVALUATION = True


def run_pre(scene) -> None:
    """Before Blender evaluates a new frame (`frame_change_pre`): solve and write each plain step
    whose controls' poses come only from their own F-curves (`blender/keyed_controls.py`), so the
    write rides the frame's one evaluation. `run_all` in `frame_change_post` then finds those
    steps' inputs unchanged (it solves again, as ever, where they are not) and runs the rest."""
    pre = SESSION.pre
    pre.key, pre.complete, pre.checks = None, False, []
    if SESSION.running or not SOLVE_BEFORE_EVALUATION or scene is None or scene.frame_subframe != 0.0:
        return
    SESSION.running = True
    try:
        import bpy

        frame = scene.frame_current
        trees = kinema_trees()
        complete = True
        for tree in trees:
            if tree.animation_data is not None:  # a keyed tree's settings are not evaluated for this frame yet
                complete = False
                continue
            complete = run_tree(tree, frame, _results=False, _pre=True) and complete
        pre.key = (frame, SESSION.generation, len(bpy.data.node_groups), tuple(t.as_pointer() for t in trees))
        pre.complete = complete
    finally:
        SESSION.running = False


#: The most frames a live rig's fast frame keeps (KeptFrame): a playback's and a scrub back's
#: solved ahead (AHEAD_FRAMES + AHEAD_BACK_FRAMES) fit, with room for the frames played between.
KEPT_FRAMES = 2048

#: The most frames a live rig solves ahead of the current one for a playback, and behind it for a
#: scrub back (`solve_ahead`): together well within the frame answers it remembers
#: (core/solve/_frame.py REMEMBERED), a playback's loop back included.
AHEAD_FRAMES, AHEAD_BACK_FRAMES = 1000, 500


def solve_ahead(scene, slice_ms: float) -> bool:
    """While Blender is idle (blender/handlers.py's timer): let each live plain step solve the
    frames a playback from the current frame, then a scrub back from it, will show
    (`FastFrame.ahead`), for at most about `slice_ms` (a frame already begun finishes: one
    frame's solve is bounded by its budget), so that a first playback or scrub back after an
    edit answers from memory, as a looped one does (#33). Returns True while frames are left.
    Nothing while a solver compiles in the background: its frames are answered meanwhile by the
    fallback, not by the route the playback after the compile takes (a first playback after idle
    then solved every frame again: example-robot-data's Kinova and UR10 on PyRoki), and the
    compile shares the interpreter."""
    if SESSION.running or not SOLVE_BEFORE_EVALUATION or scene is None or _compiling_in_background():
        return False
    deadline = time.perf_counter() + slice_ms / 1000.0
    if scene.use_preview_range:
        first, last = scene.frame_preview_start, scene.frame_preview_end
    else:
        first, last = scene.frame_start, scene.frame_end
    span = (scene.frame_current, first, last)
    more = False
    SESSION.running = True
    try:
        for tree in kinema_trees():
            state = SESSION.trees.get(tree.as_pointer())
            program = None if state is None else state.program
            # only a program the last run compiled since the last edit: the next frame compiles, or
            # follows renames, first (nothing is changed from a timer)
            if (program is None or state.dirty or tree.animation_data is not None or state.checked is None
                    or state.checked[0] != SESSION.generation):
                continue
            for step in program.steps:
                solver = node_by_path(tree, step.node)
                if solver is None or step.backend == "off" or not solver.live or solver.over_budget or step.node in state.paused:
                    continue
                rig = _rig_still(tree, state, program, step)
                fast = _fast_frame(tree, state, program, step, False)
                if rig is not None and fast is not None:
                    more = fast.ahead(tree, state, step, solver, rig, span, deadline) or more
    except (KinemaError, ReferenceError):  # a rig or bone gone in between: the next frame says why
        return False
    finally:
        SESSION.running = False
    return more


def _pre_frame_holds(scene) -> bool:
    """Whether `run_pre` answered every live step of every tree for this frame and what it
    assumed holds after Blender's evaluation: nothing was edited since (the generation, no tree
    marked dirty, the same trees, each rig's bone count), each control's evaluated pose is the
    one it solved for, and each rig holds what it wrote. Anything else: `run_all` runs every tree
    as ever (and solves again where the inputs differ)."""
    import bpy

    pre = SESSION.pre
    key, pre.key = pre.key, None  # one frame_change_post per run_pre
    if not pre.complete or key is None or key[:2] != (scene.frame_current, SESSION.generation):
        return False
    if key[2] != len(bpy.data.node_groups) or any(SESSION.trees[tree].dirty for tree in key[3] if tree in SESSION.trees):
        return False
    try:
        for rig, io, controls, poses, written in pre.checks:
            bones = rig.pose.bones
            # a bone added or removed in between (a rename moves nothing: what follows reads by place)
            if len(bones) != len(io.names):
                return False
            io.read_matrices(bones)
            matrices = io.matrices
            for i, pose in zip(controls, poses):
                if matrices[16 * i:16 * i + 16].tolist() != pose:
                    mispredicted(rig, io.names[i], SESSION.generation)
                    SESSION.kept_epoch += 1  # what the pre route kept assumed the prediction
                    return False
            if not io.holds(bones, written):
                SESSION.kept_epoch += 1
                return False
    except ReferenceError:  # a rig removed in between
        return False
    return True


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
