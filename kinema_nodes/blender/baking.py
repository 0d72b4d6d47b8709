"""Bake a Kinema tree's solvers to keyframes: the glue between Blender and `core.shot.bake`.

A bake runs in three phases, and only the last one touches the rig's animation:

1. gather — `scene.frame_set` on every frame of the range and read the evaluator's
   `FrameInputs` (controls, keyed target link, stage values). frame_set is what makes every
   way of animating a control correct (keys, constraints, parents, drivers, a keyed hand-off);
   measured at ~0.33 ms a frame for a Panda rig, so evaluating F-curves by hand would save
   little and get constraints wrong. Live IK is paused meanwhile so frame_set does not solve.
2. solve — `core.shot.bake.solve_frames`: the evaluator's Program, frame after frame, warm-started;
   then, for a Solver with Plan Between Keys, each key segment's plan (cached, or planned now in a
   worker thread while the job yields: `plan_jobs.plan_bake`) replaces its frames, as playback shows them.
3. write — keys for every joint active anywhere in the range, in bulk (`keyframe_points.add` +
   `foreach_set`) into the rig's action (Blender 5 slotted actions; 4.5's too), replacing keys
   inside the range and leaving the rest; timeline markers on flagged frames.

`BakeJob.steps()` is a generator that does one frame's work per step, so the panel's modal
operator can show progress and stop on Esc, and a test can cancel headless (bpy has no event
loop). A cancel before the write phase leaves the action, the markers and the pose as they were.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import evaluator
from ..core.shot.bake import (BATCH_CHUNK, BakeReport, BakeSolution, batch_reason, check_bake, segment_rows, solve_frames,
                              solve_frames_batched)
from ..core.errors import KinemaError
from .animation import pose_bone_path
from ..core.graph.registry import kind_of

MARKER_PREFIX = "Kinema: "
#: Frames solved between two yields of `BakeJob.steps()` (progress and Esc granularity).
SOLVE_SLICE = 25
#: Shortest range solved as a batch (a JAX scan over frames). The scan is compiled once per
#: chain (seconds, then cached on disk); below this, frame-by-frame solves cost less than that.
BATCH_MIN_FRAMES = 500


@dataclass
class RigBake:
    """One solver step's bake: the rig it keyed, the solved frames and what the checks found."""

    rig: object
    solver: str
    solution: BakeSolution
    report: BakeReport
    keyed_joints: list[str]


def bake_node_of(tree):
    return next((n for n in tree.nodes if kind_of(n) == "bake" and not n.mute), None)


def scene_fps(scene) -> float:
    return scene.render.fps / (scene.render.fps_base or 1.0)


class BakeJob:
    """One bake of `tree` over frames `frame_start..frame_end` (inclusive)."""

    def __init__(self, tree, frame_start: int, frame_end: int, *, scene=None, fps: float | None = None,
                 speed_limit: float = 1.0, markers: bool = True, batch: bool = True,
                 batch_min_frames: int = BATCH_MIN_FRAMES, avoid=None):
        import bpy

        if frame_end < frame_start:
            raise KinemaError(f"bake range {frame_start}..{frame_end} is empty (the end is before the start)")
        self.tree = tree
        self.scene = scene or bpy.context.scene
        self.frames = list(range(int(frame_start), int(frame_end) + 1))
        self.fps = float(fps) if fps else scene_fps(self.scene)
        self.speed_limit = float(speed_limit)  # fraction of the URDF velocity limits
        self.markers = markers
        self.results: list[RigBake] = []
        self.cancelled = False
        self.finished = False
        self._restore: dict | None = None
        self._solver_count = 1
        self.seconds: dict[str, float] = {}  # time per phase: gather, solve, check, write
        self.batch = batch  # PyRoki solves a chunk of frames per call (a JAX scan) where it can
        self.batch_min_frames = batch_min_frames
        self.notes: list[str] = []
        #: Per Solver with Plan Between Keys: its key segments (`core.plan.key_segments.ShotSegment`), each with its plan.
        self.segments: dict[str, list] = {}
        #: A `core.collision.Avoid` for every Solver of the tree instead of its own settings
        #: (the command line's --avoid/--obstacles/--margin/--srdf: the file's primitives as they are).
        self.avoid = avoid

    @property
    def total(self) -> int:
        """Units of work `steps()` yields: gather each frame, solve each frame of each solver,
        then the write (one)."""
        return len(self.frames) * (1 + self._solver_count) + 1

    # ---- state kept aside while gathering ---------------------------------------------------

    def _pause_live(self) -> None:
        solvers = [n for n in self.tree.nodes if kind_of(n) == "solver"]
        self._restore = {"frame": self.scene.frame_current, "subframe": self.scene.frame_subframe,
                         "live": {n.name: n.live for n in solvers}}
        for node in solvers:
            if node.live:
                node.live = False
        # With no other live tree in the file, the frame handlers have nothing to do while we
        # step through frames; their per-frame snapshot costs more than the frame itself, so
        # hold them off (the evaluator's own re-entry guard) until the frame is put back.
        others_live = any(n.live for t in evaluator.kinema_trees() if t != self.tree
                          for n in t.nodes if kind_of(n) == "solver")
        self._restore["handlers_held"] = not others_live and evaluator.hold_runs()

    def _resume(self) -> None:
        if self._restore is None:
            return
        restore, self._restore = self._restore, None
        if restore.get("handlers_held"):
            evaluator.release_runs()
        for name, live in restore["live"].items():
            node = self.tree.nodes.get(name)
            if node is not None and node.live != live:
                node.live = live
        self.scene.frame_set(restore["frame"], subframe=restore["subframe"])

    def cancel(self) -> None:
        """Stop: nothing has been written; put the frame and Live IK back as they were."""
        self.cancelled = True
        self._resume()

    # ---- the work -----------------------------------------------------------------------------

    def steps(self):
        """Do the bake, yielding the number of units done after each (see `total`)."""
        program = evaluator.program_for(self.tree)
        if not program.ok:
            node = next((name for name, messages in program.problems.by_node.items() if messages), None)
            where = f" ('{node}': {program.problems.message(node)})" if node else ""
            raise KinemaError(f"tree '{self.tree.name}' has problems; fix them before baking{where}")
        if not program.steps:
            raise KinemaError(f"tree '{self.tree.name}' has no solver with a robot and a target to bake")
        self._pause_live()
        try:
            program = evaluator.program_for(self.tree)  # live flags are part of the spec
            steps = list(program.steps)
            if self.avoid is not None:
                from dataclasses import replace

                steps = [replace(step, options=replace(step.options, avoid=self.avoid)) for step in steps]
            self._solver_count = len(steps)
            inputs = {step.node: [] for step in steps}
            starts = {}
            done = 0
            clock = time.perf_counter()
            for frame in self.frames:
                self.scene.frame_set(frame)
                for step in steps:
                    frame_input = evaluator.frame_inputs(self.tree, program, step, frame)
                    starts.setdefault(step.node, frame_input.starts[step.rig])
                    inputs[step.node].append(frame_input)
                done += 1
                yield done
            self.seconds["gather"] = time.perf_counter() - clock
            clock = time.perf_counter()
            from ..core.solve import kernel_building, kernel_status

            kernel_status()  # a bake solves on the compiled kernel (once it is built: seconds to a
            while kernel_building():  # minute, the first time on a machine), never partly on the
                time.sleep(0.05)  # plain NumPy form, whose last bits differ: the same shot bakes
                yield done  # the same keys whenever it is baked (and the UI stays live meanwhile)
            self.seconds["kernel"] = time.perf_counter() - clock
            clock = time.perf_counter()
            solutions = {}
            for step in steps:
                parts, current = [], starts[step.node]
                frame_inputs = inputs[step.node]
                batch = (self.batch and len(frame_inputs) >= self.batch_min_frames
                         and batch_reason(program, step, frame_inputs) is None)
                first = 0
                while first < len(frame_inputs):
                    size = BATCH_CHUNK if batch else SOLVE_SLICE
                    chunk = frame_inputs[first:first + size]
                    part = None
                    if batch:
                        try:
                            part = solve_frames_batched(program, step, chunk, current)
                        except Exception as exc:  # noqa: BLE001 -- a JAX failure costs speed, never the bake
                            self.notes.append(f"solved frame by frame: the batch failed ({type(exc).__name__}: {exc})")
                            batch = False
                            continue
                    if part is None:
                        part = solve_frames(program, step, chunk, current)
                    parts.append(part)
                    current = part.joints[-1]
                    first += len(chunk)
                    done += len(part.frames)
                    yield done
                solutions[step.node] = _join(parts)
            self.seconds["solve"] = time.perf_counter() - clock
            clock = time.perf_counter()
            for step in steps:  # Plan Between Keys: the plans playback shows, cached or planned now
                if step.plan_between_keys:
                    from .plan_jobs import plan_bake

                    planning = plan_bake(self.tree, program, step, inputs[step.node], solutions[step.node], self.fps)
                    while True:
                        try:
                            next(planning)
                        except StopIteration as stop:
                            solutions[step.node], self.segments[step.node] = stop.value
                            break
                        time.sleep(0.01)  # a worker thread plans; the UI stays live meanwhile
                        yield done
            self.seconds["plan"] = time.perf_counter() - clock
            clock = time.perf_counter()
            limits_of = {}
            for step in steps:
                solution = solutions[step.node]
                limits = limits_of.setdefault(step.robot.fingerprint, step.robot.velocity_limits * self.speed_limit)
                report = check_bake(solution, fps=self.fps, velocity_limits=limits,
                                    segments=segment_rows((g.first, g.last, g.plan) for g in self.segments.get(step.node, ())))
                rig = evaluator.rig_object(self.tree, program, step)
                keyed = [n for n, k in zip(step.robot.actuated_joint_names, solution.keyed) if k]
                self.results.append(RigBake(rig, step.node, solution, report, keyed))
        except BaseException:
            self._resume()
            raise
        self.seconds["check"] = time.perf_counter() - clock
        clock = time.perf_counter()
        # From here on nothing can be cancelled: write everything, then put the frame back.
        try:
            for result in self.results:
                write_joint_keys(result.rig, result.solution.robot, result.solution.frames, result.solution.joints,
                                 result.solution.keyed)
            if self.markers:
                mark_flagged_frames(self.scene, self.frames[0], self.frames[-1], [r.report for r in self.results])
        finally:
            self._resume()
        self.seconds["write"] = time.perf_counter() - clock
        self.finished = True
        yield self.total

    def run(self, *, progress=None, should_cancel=None) -> list[RigBake] | None:
        """Run to the end (or until `should_cancel()` is true: then None and nothing written).
        `progress(done, total)` is called after each unit of work."""
        for done in self.steps():
            if progress is not None:
                progress(done, self.total)
            if not self.finished and should_cancel is not None and should_cancel():
                self.cancel()
                return None
        return self.results


def _join(parts: list[BakeSolution]) -> BakeSolution:
    first = parts[0]
    joined = {name: np.concatenate([getattr(p, name) for p in parts]) for name in
              ("frames", "joints", "converged", "position_error", "rotation_error", "active", "targets", "milliseconds")}
    return BakeSolution(first.robot, links=[link for p in parts for link in p.links],
                        summaries=[s for p in parts for s in p.summaries], backends=set().union(*(p.backends for p in parts)),
                        scanned=sum(p.scanned for p in parts), avoid=[a for p in parts for a in p.avoid],
                        **joined)


def bake_tree(tree, frame_start: int | None = None, frame_end: int | None = None, *, progress=None,
              should_cancel=None, **options) -> list[RigBake] | None:
    """Bake `tree` (range: its Bake node's, else the scene's). None if cancelled."""
    import bpy

    scene = options.pop("scene", None) or bpy.context.scene
    node = bake_node_of(tree)
    if frame_start is None:
        frame_start = node.frame_start if node else scene.frame_start
    if frame_end is None:
        frame_end = node.frame_end if node else scene.frame_end
    if node is not None and "speed_limit" not in options:
        options["speed_limit"] = node.speed_limit / 100.0
    job = BakeJob(tree, frame_start, frame_end, scene=scene, **options)
    results = job.run(progress=progress, should_cancel=should_cancel)
    if results is not None and node is not None:
        store_report(node, results)
    return results


# ---- writing keys -------------------------------------------------------------------------------

def channelbag(obj):
    """The F-curve collection of `obj`'s action for its slot (made as needed): Blender 4.4+ slotted
    actions, or a legacy action's own `fcurves`."""
    import bpy

    animation = obj.animation_data or obj.animation_data_create()
    action = animation.action
    if action is None:
        action = bpy.data.actions.new(f"{obj.name}Action")
        animation.action = action
    if not hasattr(animation, "action_slot"):  # before slotted actions
        return action
    slot = animation.action_slot
    if slot is None:
        slot = next((s for s in action.slots if s.target_id_type == "OBJECT"), None) or action.slots.new(id_type="OBJECT", name=obj.name)
        animation.action_slot = slot
    from bpy_extras import anim_utils

    ensure = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    if ensure is None:
        return action
    return ensure(action, slot)


def ensure_fcurve(bag, data_path: str, index: int, group: str):
    fcurve = bag.fcurves.find(data_path, index=index)
    if fcurve is not None:
        return fcurve
    for keywords in ({"group_name": group}, {"action_group": group}, {}):  # 5.x channelbag, legacy action, 4.4
        try:
            fcurve = bag.fcurves.new(data_path, index=index, **keywords)
            break
        except TypeError:
            continue
    if fcurve.group is None and hasattr(bag, "groups"):
        fcurve.group = bag.groups.get(group) or bag.groups.new(group)
    return fcurve


def write_keys(fcurve, frames: np.ndarray, values: np.ndarray, interpolation: str = "LINEAR") -> None:
    """Replace `fcurve`'s keys within [frames.min(), frames.max()] by (frames, values), in bulk;
    keys outside the range stay exactly as they were.

    The one place keys are written: NaN or inf (or a value float32 cannot hold) never reaches
    an F-curve; such a call is refused before the curve is touched."""
    frames = np.asarray(frames, dtype=float)
    values = np.asarray(values, dtype=float)
    if frames.shape != values.shape or not len(frames):
        raise KinemaError(f"keys for '{fcurve.data_path}': {len(frames)} frames and {len(values)} values")
    with np.errstate(over="ignore"):
        finite = np.isfinite(frames.astype(np.float32)) & np.isfinite(values.astype(np.float32))
    if not finite.all():
        first = int(np.flatnonzero(~finite)[0])
        raise KinemaError(f"refusing to key '{fcurve.data_path}' [{fcurve.array_index}]: value {values[first]!r} on frame "
                          f"{frames[first]!r} is not a finite number Blender can store")
    points = fcurve.keyframe_points
    low, high = float(frames.min()) - 0.5, float(frames.max()) + 0.5
    if len(points):
        old = np.empty(2 * len(points), dtype=np.float32)
        points.foreach_get("co", old)
        inside = np.flatnonzero((old[0::2] > low) & (old[0::2] < high))
        for i in inside[::-1]:
            points.remove(points[int(i)], fast=True)
    kept = len(points)
    points.add(len(frames))
    co = np.empty(2 * len(points), dtype=np.float32)
    points.foreach_get("co", co)
    new = np.empty((len(frames), 2), dtype=np.float32)
    new[:, 0], new[:, 1] = frames, values
    co[2 * kept:] = new.ravel()
    points.foreach_set("co", co)
    for name in ("handle_left", "handle_right"):  # new points' handles on the point; update() recalculates
        handles = np.empty(2 * len(points), dtype=np.float32)
        points.foreach_get(name, handles)
        handles[2 * kept:] = new.ravel()
        points.foreach_set(name, handles)
    modes = np.empty(len(points), dtype=np.int32)
    points.foreach_get("interpolation", modes)
    modes[kept:] = _interpolation_value(points, kept, interpolation)
    points.foreach_set("interpolation", modes)
    fcurve.update()


def _interpolation_value(points, index: int, name: str) -> int:
    """The enum's integer for foreach_set: set it on one new point by name and read it back."""
    points[index].interpolation = name
    value = np.empty(len(points), dtype=np.int32)
    points.foreach_get("interpolation", value)
    return int(value[index])


def write_joint_keys(obj, robot, frames, joints, keyed) -> int:
    """Key the actuated joints marked in `keyed` on `obj` at `frames` (values (F, n)); returns keys written."""
    from .rig import SLIDE, actuated_channels

    frames = np.asarray(frames, dtype=float)
    joints = np.asarray(joints, dtype=float)
    if not np.all(np.isfinite(joints)):
        raise KinemaError("refusing to key non-finite joint values")
    bag = channelbag(obj)
    written = 0
    for i, channel in enumerate(actuated_channels(robot)):
        if not keyed[i]:
            continue
        index = 0 if channel.data_path == SLIDE else channel.index
        fcurve = ensure_fcurve(bag, pose_bone_path(channel.bone, channel.data_path), index, channel.bone)
        write_keys(fcurve, frames, channel.scale * np.clip(joints[:, i], robot.lower[i], robot.upper[i]))
        written += len(frames)
    obj.update_tag()
    return written


# ---- markers and the report the panel shows ---------------------------------------------------------

def mark_flagged_frames(scene, frame_start: int, frame_end: int, reports: list[BakeReport]) -> int:
    """Markers named "Kinema: <why>" at the first frame of each run of flagged frames; earlier
    Kinema markers in the range are replaced. Returns the number of markers."""
    markers = scene.timeline_markers
    for marker in [m for m in markers if m.name.startswith(MARKER_PREFIX) and frame_start <= m.frame <= frame_end]:
        markers.remove(marker)
    reasons: dict[int, list[str]] = {}
    for report in reports:
        for frame in report.flagged:
            words = [w.split(":")[0] for w in report.reasons(frame)]
            reasons.setdefault(frame, [])
            reasons[frame] += [w for w in words if w not in reasons[frame]]
    count = 0
    previous_frame, previous_words = None, None
    for frame in sorted(reasons):
        words = reasons[frame]
        if previous_frame is not None and frame == previous_frame + 1 and words == previous_words:
            previous_frame = frame
            continue
        markers.new(MARKER_PREFIX + ", ".join(words), frame=frame)
        count += 1
        previous_frame, previous_words = frame, words
    return count


def store_report(node, results: list[RigBake]) -> None:
    """Keep the last bake's report on the Bake node, for the panel."""
    import json

    node.last_report = json.dumps({r.rig.name: r.report.to_dict() for r in results})


def frame_ranges(frames: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> "1–3, 7, 9–10"."""
    parts = []
    for frame in sorted(frames):
        if parts and frame == parts[-1][1] + 1:
            parts[-1][1] = frame
        else:
            parts.append([frame, frame])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in parts)
