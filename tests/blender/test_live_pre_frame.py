"""The live frame solved before Blender evaluates it (#33): `frame_change_pre` reads a keyed
control's pose from its F-curves (`blender/keyed_controls.py`) and solves there, so the write
rides the frame's one evaluation. Real Blender, example-robot-data's Panda as Add IK Target
makes it (the control a bone parented to the rig's root).

- the predicted control pose is Blender's evaluated pose bit for bit (location, rotation, scale keyed);
- scrubbing forward, backward and by jumps gives the same joints and the same evaluated tool
  pose, to the bit, as the route that solves after the evaluation, and frame_change_post only
  checks what frame_change_pre solved;
- a control whose pose comes from anything else (a constraint, a keyed parent, an Empty) takes
  the post route, with the same answers.
"""

from __future__ import annotations

import numpy as np
import pytest

from rig_helpers import import_rig, joints_of, robot_of, set_joints

FRAMES = list(range(1, 41)) + list(range(40, 0, -1)) + [25, 3, 33, 33, 12, 40, 1]


def _panda_with_keyed_control(bpy, *, scale=False):
    from mathutils import Euler

    from kinema_nodes.blender.edit import add_ik_target

    rig = import_rig(bpy, "panda", active=True)
    tree, target, solver = add_ik_target(bpy.context, rig, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0  # a loaded test machine never pauses it
    bpy.context.view_layer.update()
    bone = rig.pose.bones[target.control_bone]
    base, base_rotation = bone.location.copy(), bone.rotation_quaternion.copy()
    base.z += 0.05  # the loop in reach (bench_live --plain's "5 cm in")
    for i, frame in enumerate(range(1, 42, 8)):
        a = 0.7 * i
        bone.location = base + type(base)((0.03 * np.cos(a), 0.03 * np.sin(a), 0.03 * np.sin(2 * a)))
        bone.rotation_quaternion = base_rotation @ Euler((0.1 * np.sin(a), 0.1 * np.cos(a), 0.0)).to_quaternion()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)
        if scale:
            bone.scale = (1.0 + 0.1 * np.sin(a), 1.0, 1.0 - 0.05 * np.cos(a))
            bone.keyframe_insert("scale", frame=frame)
    bpy.context.scene.frame_set(1)
    return rig, tree, target, solver


def _recorded_checks(monkeypatch) -> list:
    """A list that grows by frame_change_post's check of each pre-route frame: True where what the
    pre route assumed held after Blender's evaluation."""
    from kinema_nodes import evaluator

    holds = []
    check = evaluator._pre_frame_holds
    monkeypatch.setattr(evaluator, "_pre_frame_holds", lambda scene: holds.append(check(scene)) or holds[-1])
    return holds


def _played_panda(bpy, last: int):
    """`_panda_with_keyed_control`, its keyed loop played once to `last`: (rig, target, scene, control bone)."""
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    for frame in range(1, last + 1):
        scene.frame_set(frame)
    return rig, target, scene, rig.pose.bones[target.control_bone]


def _scrub_both_routes(bpy, rig, target, monkeypatch, frames=FRAMES):
    """{route: [(joints, tool pose, control pose) per frame]}, each route from the same start,
    and how often frame_change_post found frame_change_pre's answer standing."""
    from kinema_nodes import evaluator

    holds = _recorded_checks(monkeypatch)
    start = joints_of(rig).copy()
    seen = {}
    for pre in (True, False):
        monkeypatch.setattr(evaluator, "SOLVE_BEFORE_EVALUATION", pre)
        set_joints(rig, start)
        bpy.context.scene.frame_set(frames[0] + 1)
        set_joints(rig, start)
        out = []
        for frame in frames:
            bpy.context.scene.frame_set(frame)
            bones = rig.pose.bones
            control = (bones[target.control_bone].matrix if target.control_bone
                       else rig.matrix_world.inverted() @ target.control_object.matrix_world)
            out.append((joints_of(rig), np.array(bones[target.link_name].matrix), np.array(control)))
        seen[pre] = out
    return seen, holds


def _assert_same(seen):
    for (q_pre, tool_pre, control_pre), (q_post, tool_post, control_post) in zip(seen[True], seen[False]):
        assert np.array_equal(q_pre, q_post), np.abs(q_pre - q_post).max()
        assert np.array_equal(tool_pre, tool_post) and np.array_equal(control_pre, control_post)


@pytest.mark.parametrize("scale", [False, True])
def test_the_predicted_control_pose_is_blenders_evaluated_pose_to_the_bit(blender, scale):
    from kinema_nodes.blender.keyed_controls import keyed_control
    from kinema_nodes.blender.rig import live_rig
    from kinema_nodes.session import SESSION

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy, scale=scale)
    solver.live = False
    io = live_rig(rig, robot_of(rig), rig.pose.bones)
    keyed = keyed_control(rig, target.control_bone, io.written, SESSION.generation)
    assert keyed is not None
    for frame in (1, 2, 5, 9, 17, 23, 30, 41, 44):
        predicted = keyed.pose(float(frame))
        bpy.context.scene.frame_set(frame)
        evaluated = np.array(rig.pose.bones[target.control_bone].matrix, dtype=np.float32).T.ravel()
        assert np.array_equal(np.array(predicted, dtype=np.float32), evaluated), frame


def test_a_controls_poses_outlive_an_edit_elsewhere_but_not_an_edit_to_its_keys(blender, monkeypatch):
    """A new generation builds the control's KeyedControl again. After an edit elsewhere (another
    object moved) it is the one before, with the poses it worked out; after an edit to one of its
    keys (its value, its interpolation, a curve modifier added or set) it is a new one, and the prediction
    still holds on every frame (frame_change_post's check)."""
    from kinema_nodes.blender.keyed_controls import keyed_control
    from kinema_nodes.blender.rig import live_rig
    from kinema_nodes.session import SESSION

    bpy = blender
    rig, target, scene, bone = _played_panda(bpy, 40)
    written = live_rig(rig, robot_of(rig), rig.pose.bones).written

    def keyed():
        return keyed_control(rig, target.control_bone, written, SESSION.generation)

    before = keyed()
    assert before is not None and len(before.poses) >= 40
    other = bpy.data.objects.new("elsewhere", None)
    scene.collection.objects.link(other)
    bpy.context.view_layer.update()
    assert keyed() is before
    from kinema_nodes.blender.animation import fcurves

    curve = next(c for c in fcurves(rig) if c.data_path == f'pose.bones["{target.control_bone}"].location'
                 and c.array_index == 0)
    holds = _recorded_checks(monkeypatch)
    for edit in (lambda: setattr(curve.keyframe_points[2].co, "y", curve.keyframe_points[2].co.y + 0.01),
                 lambda: setattr(curve.keyframe_points[1], "interpolation", "LINEAR"),
                 lambda: curve.modifiers.new("NOISE"),
                 lambda: setattr(curve.modifiers[0], "strength", 2.0)):
        edit()
        curve.update()
        bpy.context.view_layer.update()
        now = keyed()
        assert now is not before and (now is None or not now.poses)
        before = now
        for frame in range(1, 41):
            scene.frame_set(frame)
    assert len(holds) >= 80 and all(holds[:80]), holds


def test_the_pre_evaluation_route_gives_the_post_route_pose_scrubbing_both_ways(blender, monkeypatch):
    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    seen, holds = _scrub_both_routes(bpy, rig, target, monkeypatch)
    _assert_same(seen)
    # the pre route answered every frame: frame_change_post only checked it
    assert len(holds) >= len(FRAMES) and all(holds), holds
    assert solver.summary.startswith("converged"), solver.summary
    # a frame is its inputs: forward and backward agree (the warm start moves the answer within the tolerance only)
    forward = {frame: seen[True][i][0] for i, frame in enumerate(FRAMES[:40])}
    backward = {frame: seen[True][40 + i][0] for i, frame in enumerate(FRAMES[40:80])}
    assert max(float(np.abs(forward[f] - backward[f]).max()) for f in forward) < 1e-4
    # and the tool is on the control
    for q, tool, control in seen[True]:
        assert np.abs(tool[:3, 3] - control[:3, 3]).max() < 1e-5


def _constrained(bpy, rig, target):
    constraint = rig.pose.bones[target.control_bone].constraints.new("LIMIT_LOCATION")
    constraint.use_max_z, constraint.max_z, constraint.owner_space = True, 10.0, "POSE"  # holds nothing back, but it could


def _keyed_parent(bpy, rig, target):
    parent = rig.pose.bones[target.control_bone].parent
    assert parent is not None and parent.parent is None  # Add IK Target parents the control to the rig's root
    parent.keyframe_insert("location", frame=1)


def _empty_control(bpy, rig, target):
    empty = bpy.data.objects.new("Goal", None)
    bpy.context.scene.collection.objects.link(empty)
    bpy.context.view_layer.update()
    empty.matrix_world = rig.matrix_world @ rig.pose.bones[target.control_bone].matrix
    for frame in (1, 41):
        empty.keyframe_insert("location", frame=frame)
        empty.location.z -= 0.04
    target.control_object, target.control_bone = empty, ""


@pytest.mark.parametrize("change", [_constrained, _keyed_parent, _empty_control], ids=["constrained", "keyed parent", "empty"])
def test_a_control_moved_by_anything_but_its_own_keys_takes_the_post_route(blender, monkeypatch, change):
    from kinema_nodes import evaluator
    from kinema_nodes.blender.keyed_controls import keyed_control
    from kinema_nodes.blender.rig import live_rig
    from kinema_nodes.session import SESSION

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    change(bpy, rig, target)
    bpy.context.view_layer.update()
    if target.control_bone:
        io = live_rig(rig, robot_of(rig), rig.pose.bones)
        assert keyed_control(rig, target.control_bone, io.written, SESSION.generation) is None
    solved_before = []
    run = evaluator.FastFrame.run

    def counted(self, *args, pre=False, **kwargs):
        result = run(self, *args, pre=pre, **kwargs)
        if pre:
            solved_before.append(result)
        return result

    monkeypatch.setattr(evaluator.FastFrame, "run", counted)
    frames = FRAMES[:20] + FRAMES[60:]
    seen, holds = _scrub_both_routes(bpy, rig, target, monkeypatch, frames)
    _assert_same(seen)
    assert solved_before and all(result is False for result in solved_before)  # left to frame_change_post
    assert not any(holds)
    assert solver.summary.startswith("converged"), solver.summary


def test_a_curve_a_script_removes_between_two_frames_is_never_read(blender):
    """A script may remove a control's F-curve and step a frame with no depsgraph update between
    (no new generation): the pre route reads its curves afresh and leaves that frame to the post
    route, which follows the control where the evaluation puts it."""
    from bpy_extras import anim_utils

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    for frame in range(1, 12):
        bpy.context.scene.frame_set(frame)
    anim = rig.animation_data
    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)
    curve = next(c for c in bag.fcurves if c.data_path.endswith(".location") and c.array_index == 2)
    bag.fcurves.remove(curve)
    rig.pose.bones[target.control_bone].location.z += 0.01  # where the control now stays on z
    for frame in (12, 13, 30):
        bpy.context.scene.frame_set(frame)
        bones = rig.pose.bones
        assert solver.summary.startswith("converged"), solver.summary
        assert np.abs(np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]).max() < 1e-5


def test_a_looped_playback_answers_frames_it_has_met_from_memory(blender, kernel_calls):
    """Playing the same frames again (a looped playback) runs the kernel for none of them but the
    loop's first, whose start is new: the rig holds float32 values, which repeat to the bit from the
    second loop on, and the live rig's frame call remembers each answer by its exact inputs
    (core/solve/_frame.py). The joints are the second loop's, to the bit, and the tool follows."""
    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    calls = kernel_calls
    loops = []
    for _ in range(3):
        ran = len(calls)
        seen = []
        for frame in range(1, 41):
            bpy.context.scene.frame_set(frame)
            seen.append(joints_of(rig))
        loops.append((len(calls) - ran, seen))
    assert loops[0][0] >= 39, "the first loop solves its frames"
    assert loops[2][0] <= 2, loops[2][0]
    for second, third in zip(loops[1][1], loops[2][1]):
        assert np.array_equal(second, third)
    bones = rig.pose.bones
    assert solver.summary.startswith("converged"), solver.summary
    gap = np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]
    assert np.abs(gap).max() < 1e-5


def _solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=0.0):
    """`evaluator.solve_ahead` turn after turn until no frame is left (as the idle timer calls
    it); returns the kernel calls each turn ran."""
    from kinema_nodes import evaluator

    turns = []
    for _ in range(200):
        ran = len(kernel_calls)
        more = evaluator.solve_ahead(bpy.context.scene, slice_ms)
        turns.append(len(kernel_calls) - ran)
        if not more:
            return turns
    raise AssertionError("solving ahead never ends")


def _ahead_then_from_nothing(bpy, kernel_calls, idle_at: int, elsewhere: int, frames):
    """A 40-frame keyed Panda looped twice, then at frame `idle_at`: the idle turns until done
    (the rig, its readout and the frame must be left as they were), `frames` played, then the
    same `frames` with nothing remembered, entered at `idle_at` again from `elsewhere` (the
    answer it gave before: the same inputs). Returns (the turns' kernel calls, [(kernel calls,
    joints per frame)] after solving ahead and from nothing, rig, target, solver)."""
    from kinema_nodes.session import forget_answers

    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    for frame in list(range(1, 41)) * 2:  # a loop first: each frame then entered as every loop enters it
        scene.frame_set(frame)
    scene.frame_set(idle_at)
    held, summary = joints_of(rig), solver.summary
    forget_answers()
    turns = _solve_ahead_to_the_end(bpy, kernel_calls)
    assert np.array_equal(joints_of(rig), held) and solver.summary == summary and scene.frame_current == idle_at
    passes = []
    for ahead in (True, False):
        if not ahead:
            forget_answers()
            scene.frame_set(elsewhere)
            scene.frame_set(idle_at)
            assert np.array_equal(joints_of(rig), held)
        ran, seen = len(kernel_calls), []
        for frame in frames:
            scene.frame_set(frame)
            seen.append(joints_of(rig))
        passes.append((len(kernel_calls) - ran, seen))
    return turns, passes, rig, target, solver


def _same_answers_and_on_target(passes, rig, target, solver, count: int) -> None:
    """No kernel call after solving ahead, one a frame from nothing, the same joints to the bit,
    and the tool on its control (1e-5 m) at the end."""
    (ahead_calls, ahead_seen), (plain_calls, plain_seen) = passes
    assert ahead_calls == 0 and plain_calls >= count, (ahead_calls, plain_calls)
    for a, b in zip(ahead_seen, plain_seen):
        assert np.array_equal(a, b)
    bones = rig.pose.bones
    gap = np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]
    assert np.abs(gap).max() < 1e-5 and solver.summary.startswith("converged"), solver.summary


def test_frames_solved_ahead_while_idle_play_back_from_memory_with_the_answers_of_a_first_playback(blender, kernel_calls):
    """Idle at frame 1, the live rig solves the frames a playback will show (`solve_ahead`, a
    frame a turn with no time slice), each from what the frame before leaves the rig holding:
    the rig, its readout and the frame are left as they were. The playback then runs the kernel
    for none of its frames, and its joints are, to the bit, those of the same playback with
    nothing solved ahead (which runs the kernel every frame)."""
    turns, passes, rig, target, solver = _ahead_then_from_nothing(blender, kernel_calls, 1, 40, range(2, 41))
    assert len(turns) == 40 and max(turns) == 1, turns  # one frame a turn: frames 2..40 and the loop back to 1
    _same_answers_and_on_target(passes, rig, target, solver, 39)


def test_a_scrub_back_after_idle_plays_from_memory_with_the_answers_of_a_first_scrub_back(blender, kernel_calls):
    """Idle at the last frame, the live rig solves the frames a playback will show (wrapping to
    the first), then those a scrub back to the first frame will show, each from what the frame
    after it leaves the rig holding. Scrubbing back then runs the kernel for none of its frames,
    and its joints are, to the bit, those of the same scrub back with nothing solved ahead
    (which runs the kernel every frame)."""
    turns, passes, rig, target, solver = _ahead_then_from_nothing(blender, kernel_calls, 40, 1, range(39, 0, -1))
    # one frame a turn: the playback's 1..40 (wrapping from 40), then the scrub back's 39..1
    assert len(turns) == 40 + 39 and max(turns) == 1, turns
    _same_answers_and_on_target(passes, rig, target, solver, 39)


def test_idle_turns_between_frames_stepped_forward_carry_on_from_where_the_chains_stand(blender, kernel_calls, monkeypatch):
    """Frames stepped forward one at a time (the arrow key) with idle turns between: each turn
    finds the rig showing what the playback's chain found for the new frame, so it carries on
    from where that chain stands instead of walking it again from the frame shown: once it is
    done (the first turn, with a slice long enough), the turns after each step take no step of
    it, and the steps run no kernel call; the scrub back's chain starts from each new frame, so
    a scrub back from the last one plays from memory too. Another range starts them again."""
    from kinema_nodes import evaluator
    from kinema_nodes.blender import handlers
    from kinema_nodes.session import forget_answers

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    for frame in list(range(1, 41)) * 2:
        scene.frame_set(frame)
    scene.frame_set(20)
    forget_answers()
    monkeypatch.setattr(handlers, "AHEAD_SLICE_MS", 10_000.0)
    steps = []  # the playback's chain's steps (the scrub back's are not counted)
    one = evaluator.FastFrame._ahead_one
    monkeypatch.setattr(evaluator.FastFrame, "_ahead_one", lambda self, chain, *args: (
        chain.direction > 0 and steps.append(1)) or one(self, chain, *args))
    rig.update_tag()
    bpy.context.view_layer.update()
    handlers.solve_ahead_tick()  # the turn right after an edit waits
    per_turn, in_steps = [], 0
    for frame in range(20, 41):
        if frame > 20:
            ran = len(kernel_calls)
            scene.frame_set(frame)
            in_steps += len(kernel_calls) - ran
        done = len(steps)
        handlers.solve_ahead_tick()
        per_turn.append(len(steps) - done)
    assert per_turn[0] == 40 and sum(per_turn[1:]) == 0, per_turn  # 21..40, 1..20 ahead
    assert in_steps == 0, "the steps run no kernel call"
    ran = len(kernel_calls)
    for frame in range(39, 0, -1):
        scene.frame_set(frame)
    assert len(kernel_calls) == ran, "a scrub back from the last step plays from memory"
    scene.frame_end = 30
    done = len(steps)
    handlers.solve_ahead_tick()
    assert len(steps) > done, "another range starts the chains again"


def test_the_rig_holding_other_values_at_the_frame_solving_ahead_stands_on_starts_the_chains_again(blender, kernel_calls):
    """A playback stopped and returned to the frame it started from (Esc) can leave the rig
    there holding an answer whose last bits differ from the one the chains started from (the
    answer of a robot whose slide leaves it start-dependent in float32; here a joint nudged
    1e-4 rad with no depsgraph update, as a frame change writes). The next idle turns solve
    both chains again from what the rig holds, so the scrub back after them plays from memory;
    started from the old values it would run the kernel at its first frame. Once solved,
    nothing is left: the playback's chain wrapping back onto this frame does not restart it."""
    from kinema_nodes.session import SESSION

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    for frame in range(1, 41):
        scene.frame_set(frame)
    scene.frame_set(20)
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) > 0
    assert _solve_ahead_to_the_end(bpy, kernel_calls) == [0]
    generation = SESSION.generation
    nudged = joints_of(rig)
    nudged[0] += 1e-4
    set_joints(rig, nudged)
    assert SESSION.generation == generation, "no edit: the chains' place alone must notice"
    # frames 21 and 19 from the nudged rig (the frames after each meet their remembered inputs again)
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) >= 2
    assert _solve_ahead_to_the_end(bpy, kernel_calls) == [0], "solved once, nothing is left"
    ran = len(kernel_calls)
    for frame in range(19, 0, -1):
        scene.frame_set(frame)
    assert len(kernel_calls) == ran, "the scrub back from the nudged rig plays from memory"


def test_solving_ahead_waits_while_a_solver_compiles_in_the_background(blender, kernel_calls, monkeypatch):
    """While a solver compiles in the background (PyRoki's program after a switch or a first
    import) the live frame is answered by the fallback; frames solved ahead then would be the
    fallback's, not what the playback after the compile meets. The idle turns solve nothing
    until the compile is over, then the chains as ever."""
    from kinema_nodes import evaluator

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    scene.frame_set(20)
    monkeypatch.setattr(evaluator, "_compiling_in_background", lambda: True)
    assert _solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0) == [0]
    monkeypatch.setattr(evaluator, "_compiling_in_background", lambda: False)
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) >= 39


def test_solving_ahead_waits_for_idle_starts_again_after_an_edit_and_leaves_other_controls_alone(blender, kernel_calls):
    """The idle timer's turn solves nothing in the turn after an edit (a drag going on), then
    solves; an edited key starts the frames ahead again from the edit; a control a constraint
    moves (the post route's) is not solved ahead at all."""
    import bpy as bpy_module

    from kinema_nodes.blender import handlers

    bpy = blender
    assert bpy_module.app.timers.is_registered(handlers.solve_ahead_tick)
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 30
    ran = len(kernel_calls)
    bpy.context.view_layer.update()
    assert handlers.solve_ahead_tick() == handlers.AHEAD_EVERY_S
    assert len(kernel_calls) == ran, "the turn after an edit is not idle yet"
    handlers.solve_ahead_tick()
    assert len(kernel_calls) > ran
    _solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)
    assert _solve_ahead_to_the_end(bpy, kernel_calls) == [0], "nothing is left once every frame is solved"
    from kinema_nodes.blender.animation import fcurves

    path = f'pose.bones["{target.control_bone}"].location'
    curve = next(c for c in fcurves(rig) if c.data_path == path and c.array_index == 2)
    curve.keyframe_points[1].co.y += 0.01
    curve.update()
    bpy.context.view_layer.update()
    # the frames the edit moved (their control, or their start) are solved again; the others'
    # exact inputs are met before
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) >= 8
    ran = len(kernel_calls)
    for frame in range(2, 31):
        scene.frame_set(frame)
    assert len(kernel_calls) == ran, "the edited shot plays back from memory"
    _constrained(bpy, rig, target)
    bpy.context.view_layer.update()
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) == 0


def test_solving_ahead_is_bounded_by_its_frame_count(blender, kernel_calls, monkeypatch):
    """A shot longer than `AHEAD_FRAMES` is solved ahead that far and no further, and behind the
    current frame `AHEAD_BACK_FRAMES` and no further (the memory both fill stays within the
    frames a live rig remembers)."""
    from kinema_nodes import evaluator
    from kinema_nodes.core.solve import _frame
    from kinema_nodes.session import forget_answers

    assert evaluator.AHEAD_FRAMES <= _frame.REMEMBERED // 2
    assert evaluator.AHEAD_FRAMES + evaluator.AHEAD_BACK_FRAMES <= 3 * _frame.REMEMBERED // 4
    bpy = blender
    monkeypatch.setattr(evaluator, "AHEAD_FRAMES", 12)
    monkeypatch.setattr(evaluator, "AHEAD_BACK_FRAMES", 7)
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 100_000
    bpy.context.view_layer.update()
    forget_answers()
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) == 12  # at the first frame: nothing behind
    scene.frame_set(30)  # among the keys (every frame's goal its own): 31..42 ahead, 29..23 behind
    bpy.context.view_layer.update()
    forget_answers()
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) == 12 + 7


def test_a_duplicated_renamed_rig_keyed_its_own_way_is_solved_ahead_beside_the_original(blender, kernel_calls):
    """Shift+D on a keyed live rig, the copy renamed, moved 1 m and its control keyed along another
    loop: the idle turns solve both shots (their own trees, one memory where their inputs agree),
    and playing both runs no kernel call, each tool on its own control (1e-5 m), the two rigs
    apart."""
    from kinema_nodes.session import forget_answers

    from kinema_nodes.blender.edit import rig_solver, rig_tree

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    for other in bpy.context.selected_objects:
        other.select_set(False)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.object.duplicate(linked=False) == {"FINISHED"}
    copy = bpy.context.view_layer.objects.active
    assert copy is not rig
    copy.name, copy.location.x = "panda_copy", copy.location.x + 1.0
    bpy.context.view_layer.update()
    copy_tree = rig_tree(copy)
    copy_target = next(n for n in copy_tree.nodes if n.bl_idname == "KinemaIKTargetNode")
    copy_solver = rig_solver(copy_tree, copy)
    assert copy_tree != tree and copy_target.control_object == copy
    bone = copy.pose.bones[copy_target.control_bone]
    for frame in (9, 25):  # two of the original's keys moved on the copy's own action
        scene.frame_set(frame)
        bone.location.y += 0.02
        bone.keyframe_insert("location", frame=frame)
    for frame in list(range(1, 41)) * 2:
        scene.frame_set(frame)
    scene.frame_set(1)
    forget_answers()
    assert sum(_solve_ahead_to_the_end(bpy, kernel_calls, slice_ms=1000.0)) >= 40
    ran, apart = len(kernel_calls), []
    for frame in range(2, 41):
        scene.frame_set(frame)
        for each, aim in ((rig, target), (copy, copy_target)):
            bones = each.pose.bones
            gap = np.array(bones[aim.link_name].matrix)[:3, 3] - np.array(bones[aim.control_bone].matrix)[:3, 3]
            assert np.abs(gap).max() < 1e-5, (each.name, frame)
        apart.append(not np.array_equal(joints_of(rig), joints_of(copy)))
    assert len(kernel_calls) == ran
    assert any(apart) and solver.summary.startswith("converged") and copy_solver.summary.startswith("converged")


def test_keys_a_script_edits_with_no_update_are_predicted_again_after_one_frame(blender, monkeypatch):
    """keyframe_insert by a script, then frame changes with no depsgraph update between: nothing
    moves the generation, so the pre route's prediction is stale. frame_change_post's check sees
    it once, the control is built again from its F-curves, and from the next frame the check
    holds (one solve a frame, not two); the joints are the post route's all along."""
    rig, target, scene, bone = _played_panda(blender, 40)
    scene.frame_set(9)
    bone.location.y += 0.02
    bone.keyframe_insert("location", frame=9)
    holds = _recorded_checks(monkeypatch)
    gaps = []
    for frame in range(2, 9):
        scene.frame_set(frame)
        bones = rig.pose.bones
        gaps.append(np.abs(np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]).max())
    assert holds.count(False) <= 2 and all(holds[2:]), holds
    assert max(gaps) < 1e-5


def test_keys_a_script_edits_now_and_then_leave_the_control_to_the_post_route_for_a_while_not_for_good(blender, monkeypatch):
    """Two key edits by a script with no depsgraph update between (one generation) make two
    misses: the control is then left to the post route for `LEFT_FOR` frames and predicted
    again after (a script never makes the edit that would otherwise bring the pre route back);
    the joints are the post route's all along."""
    from kinema_nodes.blender import keyed_controls

    rig, target, scene, bone = _played_panda(blender, 41)
    holds = _recorded_checks(monkeypatch)
    gaps = []
    for edit in (9, 25):
        scene.frame_set(edit)
        bone.location.y += 0.02
        bone.keyframe_insert("location", frame=edit)
        for frame in range(edit - 7, edit):
            scene.frame_set(frame)
    assert holds.count(False) >= 2 and not any(holds[-5:]), holds  # a miss each edit, then the post route
    holds.clear()
    for i in range(2 * keyed_controls.LEFT_FOR):
        scene.frame_set(1 + i % 41)
        bones = rig.pose.bones
        gaps.append(np.abs(np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]).max())
    assert all(holds[keyed_controls.LEFT_FOR:]), holds
    assert max(gaps) < 1e-5


@pytest.fixture
def solves(monkeypatch):
    """A list that grows by one each time a live rig's prepared solve is asked for an answer."""
    from kinema_nodes.core.solve._entry import PreparedSolve

    calls = []
    solve = PreparedSolve.solve

    def counted(self, *args, **kwargs):
        calls.append(1)
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(PreparedSolve, "solve", counted)
    return calls


def test_a_looped_playback_replays_the_frames_it_kept_with_the_joints_the_solve_gives(blender, kernel_calls, solves, monkeypatch):
    """From the second loop on, with nothing changed, each frame is replayed from what the pre
    route kept at that frame (`KeptFrame`): no control pose, posture or solve is worked out
    again (#33). The joints are, to the bit, those of the same loop with nothing kept (every frame
    asked of the prepared solve), and the tool is on the control."""
    from kinema_nodes import evaluator

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    loops = []
    for kept in (True, True, True, False):
        if not kept:
            monkeypatch.setattr(evaluator.FastFrame, "_kept_frames", lambda self: {})
        asked = len(solves)
        seen = []
        for frame in range(1, 41):
            scene.frame_set(frame)
            seen.append(joints_of(rig))
        loops.append((len(solves) - asked, seen))
    assert loops[0][0] >= 39, "the first loop solves its frames"
    assert loops[2][0] == 0, f"the third loop asked the solve {loops[2][0]} times"
    assert loops[3][0] == 40
    for replayed, solved in zip(loops[2][1], loops[3][1]):
        assert np.array_equal(replayed, solved), np.abs(replayed - solved).max()
    bones = rig.pose.bones
    assert solver.summary.startswith("converged"), solver.summary
    gap = np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]
    assert np.abs(gap).max() < 1e-5


def test_frames_kept_outlive_an_edit_where_the_keys_still_give_their_controls_poses(blender, kernel_calls, solves, monkeypatch):
    """Any depsgraph update is a new generation (another object moved, a selection). The frames a
    loop kept are replayed after one where the keys still pose the control as they were solved
    for (each checked once), and solved where an edited key moved it; the joints are, to the bit,
    those of the same loop with nothing kept."""
    from kinema_nodes import evaluator
    from kinema_nodes.session import SESSION

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene

    def play():
        asked, seen = len(solves), []
        for frame in range(1, 41):
            scene.frame_set(frame)
            seen.append(joints_of(rig).copy())
        return len(solves) - asked, seen

    play()
    play()
    generation = SESSION.generation
    other = bpy.data.objects.new("elsewhere", None)
    scene.collection.objects.link(other)
    bpy.context.view_layer.update()
    other.location.x += 1.0
    bpy.context.view_layer.update()
    assert SESSION.generation != generation, "the edits above are new generations"
    asked, unrelated = play()
    assert asked == 0, f"after an edit that moves no key, the loop asked the solve {asked} times"

    bone = rig.pose.bones[target.control_bone]
    scene.frame_set(17)
    bone.location.y += 0.01
    bone.keyframe_insert("location", frame=17)
    bpy.context.view_layer.update()
    asked, edited = play()
    assert 8 <= asked, "the frames the moved key changes are solved"
    scene.frame_set(40)  # where each loop ended: the next starts from the same channels
    monkeypatch.setattr(evaluator.FastFrame, "_kept_frames", lambda self: {})
    _, solved = play()
    for replayed, fresh in zip(edited, solved):
        assert np.array_equal(replayed, fresh), np.abs(replayed - fresh).max()
    assert solver.summary.startswith("converged"), solver.summary


def test_a_link_or_posture_a_script_sets_between_frames_is_solved_not_replayed(blender, kernel_calls, solves):
    """A script may set a target's link index, or the Solver's posture, between two frames with no
    depsgraph update (no new generation): the frame kept from before is not replayed, the frame
    is solved for the new link (the readout says so, the link meets the control) and the new
    posture (the spare joint moves)."""
    import json

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    robot = robot_of(rig)
    def play(last):  # a loop's frames 1..last; the joints at each
        seen = {}
        for frame in range(1, last + 1):
            scene.frame_set(frame)
            seen[frame] = joints_of(rig).copy()
        return seen

    play(40)
    looped = play(40)
    play(19)
    asked = len(solves)
    scene.frame_set(20)
    assert len(solves) == asked, "the loop's frame is replayed"
    assert np.array_equal(joints_of(rig), looped[20])

    other = "panda_link8"
    target.link_index = robot.links.index(other) + 1
    asked = len(solves)
    scene.frame_set(21)
    assert len(solves) > asked
    assert solver.solving_to == other, solver.solving_to
    bones = rig.pose.bones
    assert np.abs(np.array(bones[other].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]).max() < 1e-5

    target.link_index = 0
    play(40)
    looped = play(40)
    play(29)
    posture = json.loads(solver.postures[0].joints)
    posture["panda_joint3"] = posture["panda_joint3"] + 0.5
    solver.postures[0].joints = json.dumps(posture)
    asked = len(solves)
    scene.frame_set(30)
    assert len(solves) > asked
    joint = robot.joint_index("panda_joint3")
    assert abs(joints_of(rig)[joint] - looped[30][joint]) > 1e-3
    gap = np.array(bones[target.link_name].matrix)[:3, 3] - np.array(bones[target.control_bone].matrix)[:3, 3]
    assert np.abs(gap).max() < 1e-5


def test_what_a_live_rig_keeps_is_bounded_and_goes_with_an_edit(blender, kernel_calls, monkeypatch):
    """The frames kept for replay are at most KEPT_FRAMES (emptied when full, then kept again), and
    none is kept past forgotten answers or an edit to the Solver (its options: a new fast frame)."""
    from kinema_nodes import evaluator
    from kinema_nodes.session import forget_answers

    bpy = blender
    rig, tree, target, solver = _panda_with_keyed_control(bpy)
    scene = bpy.context.scene
    monkeypatch.setattr(evaluator, "KEPT_FRAMES", 16)
    sizes = []
    for frame in range(1, 41):
        scene.frame_set(frame)
        sizes.append(len(evaluator.fast_frame(tree, solver.name).kept))
    assert max(sizes) == 16 and sizes[-1] < 16, sizes
    forget_answers()
    scene.frame_set(1)
    assert len(evaluator.fast_frame(tree, solver.name).kept) == 1
    solver.budget_ms = 9_000.0  # an edit
    bpy.context.view_layer.update()
    scene.frame_set(2)
    assert len(evaluator.fast_frame(tree, solver.name).kept) <= 1
