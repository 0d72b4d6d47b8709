"""Plan Between Keys' jobs (issue #31): read, solve and plan a Solver's shot in the background,
and the bake's side (`plan_bake`), which keys the same plans.

A live frame that finds its shot changed leaves a request (`plan_between_keys.REQUESTS`); a
timer here turns it into a job and advances each job a slice per tick (`TICK_S`): reading the
frames (`READ_SLICE` a tick, the user's frame put back each time), solving them frame by frame (a few frames a tick), then planning each segment
not cached yet in a worker thread, the tick only looking whether it is done. Where a plan lands
the live frame is shown again. The bpy module fires no timers: `finish_plans()` runs the jobs
to their end there (scripts, tests, the command line).
"""

from __future__ import annotations

import inspect
import time

import numpy as np

from .. import evaluator
from ..core.plan.key_segments import ShotPlans, key_segments
from .plan_between_keys import (
    ERRORS,
    JOBS,
    REQUESTS,
    SHOTS,
    control_key_frames,
    plan_pending,
    scene_fps,
    shot_range,
    shot_segments,
)

#: Seconds of work a timer tick does before handing the UI back, and seconds between ticks.
TICK_S = 0.02
POLL_S = 0.05
#: Frames solved between two yields of a job.
SOLVE_SLICE = 10
#: Frames read (`scene.frame_set`, ~0.3 ms each for a Panda rig) between two yields of a job.
READ_SLICE = 50
#: Jobs still reading their frames: they wait while the animation plays.
READING: set = set()


def _wait_for_kernel():
    from ..core.solve import kernel_building, kernel_status

    kernel_status()  # the per-frame answers on the compiled kernel, as the bake solves them
    while kernel_building():
        yield "planning"


def _live_job(tree, solver_path: str, signature: bytes):
    """Read, solve and plan one Solver's shot (a generator: the timer or `finish_plans` advances it)."""
    import bpy

    from ..core.shot.bake import solve_frames
    from .rig_limits import rig_limits

    key = (tree.as_pointer(), solver_path)
    scene = bpy.context.scene
    program = evaluator.program_for(tree)
    step = next((s for s in program.steps if s.node == solver_path), None)
    shot = ShotPlans(signature)
    SHOTS[key] = shot
    if step is None or not step.plan_between_keys:
        shot.gathered = True
        return
    first, last = shot_range(tree, scene)
    key_frames = control_key_frames(tree, step)
    pairs = key_segments(key_frames, first, last)
    if not pairs:
        shot.gathered = True
        return
    frames = list(range(pairs[0][0], pairs[-1][1] + 1))
    fps = scene_fps(scene)
    rig = evaluator.rig_object(tree, program, step)
    limits = rig_limits(rig, step.robot)
    inputs = []
    READING.add(key)
    try:
        for start in range(0, len(frames), READ_SLICE):
            # frame_set must not solve (the frames are read, not shown), and the frame the user
            # sees is put back before the tick ends
            held = evaluator.hold_runs()
            restore = (scene.frame_current, scene.frame_subframe)
            try:
                for frame in frames[start:start + READ_SLICE]:
                    scene.frame_set(frame)
                    inputs.append(evaluator.frame_inputs(tree, program, step, frame))
            finally:
                scene.frame_set(restore[0], subframe=restore[1])
                if held:
                    evaluator.release_runs()
            if start + READ_SLICE < len(frames):
                yield "reading"
    finally:
        READING.discard(key)
    shot.segments = shot_segments(program, step, inputs, frames, key_frames, limits, fps)
    if all(s.plan is not None and s.plan.mode != "planned" for s in shot.segments):
        shot.gathered = True
        return
    # cached plans play meanwhile; the solve below checks they still start and end at the keys
    yield "read"
    yield from _wait_for_kernel()
    current, parts = inputs[0].starts[step.rig], []
    for start in range(0, len(inputs), SOLVE_SLICE):
        part = solve_frames(program, step, inputs[start:start + SOLVE_SLICE], current)
        parts.append(part.joints)
        current = part.joints[-1]
        yield "solving"
    shot.gathered = True
    yield from plan_pending(step, shot.segments, frames, inputs, np.concatenate(parts), limits, fps)


def plan_bake(tree, program, step, inputs, solution, fps: float):
    """Bake's side (a generator returning the solution to key): the bake's frames and per-frame
    answers, each segment's plan from the cache or planned now (yielding while it plans), the
    planned segments' frames replaced by their plans; and the segments, each with its plan."""
    from dataclasses import replace

    from .rig_limits import rig_limits

    rig = evaluator.rig_object(tree, program, step)
    limits = rig_limits(rig, step.robot)
    frames = [int(round(f)) for f in solution.frames]
    segments = shot_segments(program, step, inputs, frames, control_key_frames(tree, step), limits, fps)
    yield from plan_pending(step, segments, frames, inputs, solution.joints, limits, fps)
    joints = np.array(solution.joints, dtype=float)
    index = {f: k for k, f in enumerate(frames)}
    for segment in segments:
        if segment.plan.mode == "planned":
            joints[index[segment.first]:index[segment.last] + 1] = segment.plan.joints
    # a joint the plan moves is keyed on the frames it moves it (`BakeSolution.keyed` follows `active`)
    return replace(solution, joints=joints, active=np.asarray(solution.active, dtype=bool) | (joints != solution.joints)), segments


def _advance(key, budget_s: float) -> bool:
    """Run one job until it waits on a thread, ends or spends `budget_s`; True when it ended."""
    signature, job = JOBS[key]
    started = time.perf_counter()
    while True:
        try:
            state = next(job)
        except StopIteration:
            if JOBS.get(key, (None, None))[1] is job:
                del JOBS[key]
            return True
        except Exception as exc:  # noqa: BLE001 -- a job that cannot read its shot says why on the Solver
            ERRORS[key] = str(exc)
            if JOBS.get(key, (None, None))[1] is job:
                del JOBS[key]
            return True
        if state == "planning" or time.perf_counter() - started > budget_s:
            return False


def finish_plans(timeout_s: float = 600.0) -> None:
    """Run every queued job to its end (scripts, tests and headless sessions: no timers fire there)."""
    deadline = time.perf_counter() + timeout_s
    start_requested()
    while JOBS:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"Plan Between Keys: {len(JOBS)} shots still planning after {timeout_s:g} s")
        waiting = not any(_advance(key, TICK_S) for key in list(JOBS))
        if waiting:
            time.sleep(0.005)


def start_requested() -> None:
    """Turn each request a live frame left into a job (a newer request replaces an older job)."""
    for key, signature in list(REQUESTS.items()):
        del REQUESTS[key]
        tree = next((t for t in evaluator.kinema_trees() if t.as_pointer() == key[0]), None)
        if tree is None:
            continue
        queued = JOBS.get(key)
        if queued is None or queued[0] != signature:
            JOBS[key] = (signature, _live_job(tree, key[1], signature))


def animation_playing(bpy) -> bool:
    """Whether any window plays the animation (timers leave the frames to it)."""
    return any(getattr(window.screen, "is_animation_playing", False) for window in bpy.context.window_manager.windows)


def tick():
    """The persistent timer (main thread): start what was requested, advance each job a little,
    and where plans landed, show the current frame again. A job that has yet to read its frames
    waits while the animation plays (reading steps through the frames)."""
    import bpy

    if not REQUESTS and not JOBS:  # the common case: one look at two dicts
        return POLL_S
    try:
        start_requested()
        before = {key: shot.done for key, shot in SHOTS.items()}
        playing = animation_playing(bpy)
        for key in list(JOBS):
            if playing and (key in READING or inspect.getgeneratorstate(JOBS[key][1]) == inspect.GEN_CREATED):
                continue
            _advance(key, TICK_S)
        if any(shot.done != before.get(key, -1) for key, shot in SHOTS.items()):
            for tree in evaluator.kinema_trees():
                evaluator.mark_dirty(tree)
            evaluator.run_all(bpy.context.scene)
        for window in bpy.context.window_manager.windows:  # the readout's progress
            for area in window.screen.areas:
                area.tag_redraw()
    except Exception:  # noqa: BLE001, S110 -- the timer must never stop; a job's own error is on its Solver
        pass
    return POLL_S


CLASSES = ()


def register() -> None:
    import bpy

    if not bpy.app.timers.is_registered(tick):
        bpy.app.timers.register(tick, first_interval=POLL_S, persistent=True)


def unregister() -> None:
    import bpy

    if bpy.app.timers.is_registered(tick):
        bpy.app.timers.unregister(tick)
