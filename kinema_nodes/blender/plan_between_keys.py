"""Plan Between Keys in Blender (issue #31): the Solver's option, live and in the bake.

With the option on (and Avoid Collisions on), each segment between two consecutive keys of the
control is planned by `core.plan.plan_between_keys`, from the per-frame answer at one key to the
answer at the next, with the per-frame answers between them as the path it keeps when that path
is clear. Live, a job reads the shot's frames (`scene.frame_set` on each, the live runs held, as
Bake gathers them), solves them frame by frame like the bake, then plans each segment whose
plan is not cached yet in a worker thread; a timer advances the job a slice at a time, so the UI
never waits on it, and the Solver's readout says "Planning 2/5 segments". Plans are cached under
their segment's inputs (`core.plan.key_segments.segment_key`), so a frame inside a planned segment
shows the plan's joints on every scrub, the bake keys the same ones, and an edit re-plans only the
segments whose inputs it changed. A cached plan whose ends are no longer the keys' per-frame
answers (IK took another branch at a key) is planned again (`key_segments.keys_moved`), and a
segment whose obstacles move is checked against each frame's (`core.plan.moving_obstacles`).

The live check that the shot is unchanged (`shot_signature`) reads what can change the plans
without evaluating any frame: the controls' and obstacles' F-curves, the obstacles' placement and
vertices, the Solver's settings, the limits, the frame range and rate. `bpy.app.timers` never fire
in the bpy module (no event loop): scripts and tests call `finish_plans()`; a bake waits for its
plans itself.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from ..core.plan.key_segments import SEGMENT_PLANS, ShotPlans, ShotSegment, key_segments, keys_moved, segment_key

#: Solver settings that do not change a plan (Live IK is switched off and on by Bake itself).
NOT_IN_PLAN = ("live", "budget_ms")

SHOTS: dict[tuple[int, str], ShotPlans] = {}  # (tree pointer, solver path) -> its shot's plans
#: The same key -> the signature a live frame found changed: a job (blender/plan_jobs.py) re-plans it
REQUESTS: dict[tuple[int, str], bytes] = {}
JOBS: dict[tuple[int, str], tuple[bytes, object]] = {}  # the same key -> (signature, the job's generator)
ERRORS: dict[tuple[int, str], str] = {}  # a job that stopped with an error: why


def reset_caches() -> None:
    """Forget every live shot and job (a new file, a test's fresh start); cached plans stay, as
    compiled solvers do: they hold only their inputs' hash."""
    SHOTS.clear()
    REQUESTS.clear()
    JOBS.clear()
    ERRORS.clear()


# ---- what the shot is made of --------------------------------------------------------------------

def _fcurves(obj):
    animation = obj.animation_data if obj is not None else None
    action = animation.action if animation is not None else None
    if action is None:
        return []
    slot = getattr(animation, "action_slot", None)
    if slot is not None:
        from bpy_extras import anim_utils

        bag = anim_utils.action_get_channelbag_for_slot(action, slot)
        return list(bag.fcurves) if bag is not None else []
    return list(action.fcurves)


def control_fcurves(target_node) -> list:
    """The F-curves that move an IK Target's control: its bone's, or the control object's own."""
    obj = target_node.control_object
    bone = target_node.control_bone
    if bone:
        prefix = f'pose.bones["{bone}"].'
        return [c for c in _fcurves(obj) if c.data_path.startswith(prefix)]
    return [c for c in _fcurves(obj) if not c.data_path.startswith("pose.bones")]


def control_key_frames(tree, step) -> list[float]:
    """The frames the step's controls are keyed on (every F-curve of every control, together)."""
    from .flatten import node_by_path

    frames: set[float] = set()
    for target in step.targets:
        for curve in control_fcurves(node_by_path(tree, target.node)):
            co = np.empty(2 * len(curve.keyframe_points), dtype=np.float32)
            curve.keyframe_points.foreach_get("co", co)
            frames.update(float(f) for f in co[0::2])
    return sorted(frames)


def _curve_bytes(curves) -> list[bytes]:
    parts = []
    for curve in curves:
        points = curve.keyframe_points
        parts.append(f"{curve.data_path}[{curve.array_index}]{curve.mute}".encode())
        for name in ("co", "handle_left", "handle_right"):
            values = np.empty(2 * len(points), dtype=np.float32)
            points.foreach_get(name, values)
            parts.append(values.tobytes())
        modes = np.empty(len(points), dtype=np.int32)
        points.foreach_get("interpolation", modes)
        parts.append(modes.tobytes())
    return parts


def scene_fps(scene) -> float:
    return scene.render.fps / (scene.render.fps_base or 1.0)


def shot_range(tree, scene) -> tuple[int, int]:
    """The frames a shot spans: its Bake node's range, else the scene's (what Bake to Keyframes bakes)."""
    from ..core.graph.registry import kind_of

    node = next((n for n in tree.nodes if kind_of(n) == "bake" and not n.mute), None)
    return (int(node.frame_start), int(node.frame_end)) if node is not None else (int(scene.frame_start), int(scene.frame_end))


def _settings(program, step) -> str:
    node = next((n for n in program.spec.nodes if n.name == step.node), None)
    params = () if node is None else tuple((k, v) for k, v in node.params if k not in NOT_IN_PLAN)
    return repr((params, repr(step.options.avoid)))


def shot_signature(tree, program, step, rig, scene) -> bytes:
    """What the step's plans depend on, read without evaluating a frame (module doc)."""
    from .collisions import obstacle_objects
    from .flatten import node_by_path

    solver = node_by_path(tree, step.node)
    h = hashlib.sha256()
    h.update(repr((_settings(program, step), shot_range(tree, scene), scene_fps(scene))).encode())
    h.update(np.array(rig.matrix_world, dtype=float).tobytes())
    settings = getattr(rig.data, "kinema_limits", None)
    if settings is not None:
        h.update(repr((settings.margin, settings.max_acceleration, settings.max_jerk,
                       [(j.joint, j.max_acceleration, j.max_jerk) for j in settings.joints])).encode())
    for target in step.targets:
        node = node_by_path(tree, target.node)
        h.update(repr((target.node, getattr(node.control_object, "name", None), node.control_bone)).encode())
        for part in _curve_bytes(control_fcurves(node)):
            h.update(part)
    for obj in obstacle_objects(getattr(solver, "obstacles", None)) if solver.avoids_world() else ():
        h.update(obj.name.encode())
        curves = _fcurves(obj)
        if curves:
            for part in _curve_bytes(curves):
                h.update(part)
        elif not len(getattr(obj, "kinema_grasps", ())):  # a grasped object's pose comes from its grasp track (below)
            h.update(np.array(obj.matrix_world, dtype=float).tobytes())
        vertices = np.empty(3 * len(obj.data.vertices), dtype=np.float32)
        obj.data.vertices.foreach_get("co", vertices)
        h.update(vertices.tobytes())
        h.update(getattr(obj, "kinema_collision_shape", "").encode())
    for obj in scene.objects:  # grasp tracks: what the rig carries, and when, is an obstacle of the plan too
        events = getattr(obj, "kinema_grasps", ())
        if len(events):
            h.update(obj.name.encode())
            h.update(repr([(e.frame, e.kind, e.holder.name if e.holder else "", e.link, tuple(e.matrix)) for e in events]).encode())
            h.update(repr(tuple(obj.kinema_grasp_rest)).encode())
    return h.digest()


def _segment_key(program, step, inputs, first: int, last: int, limits, fps: float) -> str:
    """`segment_key` of frames first..last from their gathered `FrameInputs` (`inputs[0]` is frame `first`)."""
    names = sorted(t.node for t in step.targets)
    controls = np.array([[np.full((4, 4), np.nan) if i.controls.get(n) is None else i.controls[n] for n in names]
                         for i in inputs])
    worlds = [(i.values.get(step.node) or {}).get("world") for i in inputs]
    carried = [(i.values.get(step.node) or {}).get("carried") or () for i in inputs]  # what a grasp holds, frame by frame
    links = repr([sorted(i.links.items()) for i in inputs]) + repr(carried)
    return segment_key(step.robot.fingerprint, first, last, controls, worlds, _settings(program, step) + links, limits, fps)


# ---- planning ------------------------------------------------------------------------------------

def shot_segments(program, step, inputs, frames, key_frames, limits, fps) -> list[ShotSegment]:
    """The segments between `key_frames` over the gathered `frames`, each with its key and its
    cached plan (None: still to plan)."""
    out = []
    index = {int(f): k for k, f in enumerate(frames)}
    for first, last in key_segments(key_frames, int(frames[0]), int(frames[-1])):
        key = _segment_key(program, step, inputs[index[first]:index[last] + 1], first, last, limits, fps)
        out.append(ShotSegment(first, last, key, SEGMENT_PLANS.get(key)))
    return out


def plan_pending(step, segments: list[ShotSegment], frames, inputs, joints, limits, fps):
    """Plan each segment not cached yet, or whose cached plan no longer starts and ends at the
    keys' per-frame answers in `joints` (`keys_moved`: IK took another branch at a key), one at a
    time in a worker thread; yields while it plans."""
    from ..core.graph.program import frame_avoid
    from ..core.plan import SegmentPlan
    from ..core.plan.moving_obstacles import plan_between_moving_keys

    index = {int(f): k for k, f in enumerate(frames)}
    for segment in segments:
        a, b = index[segment.first], index[segment.last]
        per_frame = np.array(joints[a:b + 1], dtype=float)
        if segment.plan is None:
            segment.plan = SEGMENT_PLANS.get(segment.key)
        if segment.plan is not None and not keys_moved(segment.plan, per_frame[0], per_frame[-1]):
            continue
        segment.plan = None
        avoids = [frame_avoid(step, i) for i in inputs[a:b + 1]]
        if all(avoid is None for avoid in avoids):  # nothing to avoid on any frame: the per-frame path stands
            segment.plan = SegmentPlan(per_frame, "per-frame", 0.0, float("inf"), 0.0)
            SEGMENT_PLANS.put(segment.key, segment.plan)
            continue
        outcome: list = []

        def work(per_frame=per_frame, avoids=avoids, outcome=outcome):
            try:
                # checked against each frame's obstacles where they move (core/plan/moving_obstacles.py)
                outcome.append(plan_between_moving_keys(step.robot, per_frame[0], per_frame[-1], fps, avoids, limits,
                                                        per_frame=per_frame))
            except Exception as exc:  # noqa: BLE001 -- a segment that cannot be planned is flagged, never the shot lost
                outcome.append(SegmentPlan(per_frame, "failed", 0.0, float("nan"), 0.0, f"cannot plan: {exc}"))

        worker = threading.Thread(target=work, name=f"plan {segment.first}-{segment.last}", daemon=True)
        worker.start()
        while worker.is_alive():
            yield "planning"
        segment.plan = outcome[0]
        SEGMENT_PLANS.put(segment.key, segment.plan)
        yield "planned"


# ---- live ------------------------------------------------------------------------------------------

def planned_joints(tree, program, step, rig, frame: float) -> np.ndarray | None:
    """The plan's configuration at `frame` for this live step, or None (per-frame IK answers):
    the option is off, the frame is in no planned segment, or the shot changed since it was
    planned (a job to re-plan it is queued; its unchanged segments come back from the cache)."""
    import bpy

    if not step.plan_between_keys:
        return None
    key = (tree.as_pointer(), step.node)
    signature = shot_signature(tree, program, step, rig, bpy.context.scene)
    shot = SHOTS.get(key)
    if shot is None or shot.signature != signature:
        queued = JOBS.get(key)
        if queued is None or queued[0] != signature:
            REQUESTS[key] = signature
            ERRORS.pop(key, None)
        return None
    return shot.joints_at(frame)


def plan_readout(solver) -> str:
    """The Solver's planning line: pending, planned and flagged segments (empty when off)."""
    if not getattr(solver, "plan_between_keys", False):
        return ""
    if not solver.avoids_anything():
        return "Nothing to plan round: switch Self or World on"
    key = (solver.id_data.as_pointer(), solver.name)
    if key in ERRORS:
        return f"Planning stopped: {ERRORS[key]}"
    shot = SHOTS.get(key)
    if key in REQUESTS or (key in JOBS and (shot is None or shot.signature != JOBS[key][0])):
        return "Planning: reading the keys"
    return "" if shot is None else shot.readout()


def shot_plans(tree, solver_path: str) -> ShotPlans | None:
    """The live shot of a Solver (its segments and their plans), or None before its first job."""
    return SHOTS.get((tree.as_pointer(), solver_path))


