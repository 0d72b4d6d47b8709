"""`kinema-nodes bake` and `kinema-nodes demo`: the headless main job.

`bake` imports the robot, builds the node tree the panel would (Robot -> IK Target -> Solver ->
Bake) with a control whose animation comes from the CSV, bakes it through the evaluator (the
same `baking.BakeJob` as Bake to Keyframes) with a progress bar on the terminal, turns Live IK
off (the shot no longer needs the solver) and saves the file. `demo` writes such a CSV for a
bundled robot — the tool tracing a figure-eight, then a hand-off to the elbow — and runs it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .common import emit, parse_joint_values
from ..core.errors import KinemaError
from .report import draw_report
from .csv_files import TargetTrack, read_targets_csv, write_joints_csv


# ---- the targets CSV --------------------------------------------------------------------------


# ---- building the scene -------------------------------------------------------------------------

def key_control(bpy, rig, target, track: TargetTrack) -> None:
    """Key the control bone so its armature-space pose is the track's pose on each frame (in bulk)."""
    from ..blender.animation import pose_bone_path
    from ..blender.baking import channelbag, ensure_fcurve, write_keys
    from ..core.model.bones import bone_local_poses
    from ..core.model.rotations import matrix_to_quaternion, pose_matrices, same_hemisphere

    bone = rig.pose.bones[target.control_bone]
    parent = bone.parent
    local = bone_local_poses(np.array(bone.bone.matrix_local, dtype=float), pose_matrices(track.positions, track.wxyz),
                             None if parent is None else np.array(parent.matrix, dtype=float),
                             None if parent is None else np.array(parent.bone.matrix_local, dtype=float))
    quaternions = same_hemisphere(matrix_to_quaternion(local))
    bag = channelbag(rig)
    frames = track.frames.astype(float)
    for index in range(3):
        write_keys(ensure_fcurve(bag, pose_bone_path(bone.name, "location"), index, bone.name), frames, local[:, index, 3])
    for index in range(4):
        write_keys(ensure_fcurve(bag, pose_bone_path(bone.name, "rotation_quaternion"), index, bone.name), frames, quaternions[:, index])
    bone.rotation_mode = "QUATERNION"


def key_links(target, robot, track: TargetTrack, default_link: str) -> None:
    """Key the target's link where the CSV's link column changes (stepped keys)."""
    from ..blender.edit import key_target_link

    if track.links is None:
        return
    previous = None
    for frame, link in zip(track.frames, track.links):
        link = link or default_link
        if link != previous:
            key_target_link(target, robot, robot.check_link(link), int(frame))
            previous = link


class TerminalProgress:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, label: str, stream=None):
        from .common import notes_stream

        self.stream = stream or notes_stream()
        self.label = label
        self.enabled = self.stream.isatty()
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        percent = int(100 * done / total)
        if percent == self.last:
            return
        self.last = percent
        width = 30
        filled = width * done // total
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {percent:3d}%")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


@dataclass
class BakeOutcome:
    rig: object
    tree: object
    result: object  # baking.RigBake
    seconds: float
    blend: Path
    planned: object = None  # core.plan.PlannedShot under --plan


def bake_track(urdf: str, link: str | None, track: TargetTrack, out: str | Path, *, solver: str = "pyroki",
               start: dict[str, float] | None = None, fps: float | None = None, speed_limit: float = 100.0,
               progress=None, preset: str | None = None, avoid=None, before_bake=None,
               plan: dict | None = None) -> BakeOutcome:
    """Everything `bake` does in Blender: import, tree, keyed control, bake, save."""
    from .headless import blender_output_to_stderr, headless_blender, save_blend

    if not str(out).lower().endswith(".blend"):
        raise KinemaError(f"--out '{out}' must end in .blend")
    bpy = headless_blender()
    if solver == "numpy":
        from ..core.solve import kernel_status

        # the compiled kernel loads (from its disk cache) in a thread while the rig is built; the preview waits for it
        kernel_status()
    from ..blender import rig as rig_module
    from ..blender.edit import ensure_bake_node
    from ..blender.baking import bake_tree
    from ..blender.edit import add_ik_target
    from ..blender.build import import_urdf

    with blender_output_to_stderr():
        rig = import_urdf(bpy.context, urdf)
    robot = rig_module.robot_for_rig(rig)
    link = robot.check_link(link or robot.tool_point)
    if track.links is not None:
        for name in {n for n in track.links if n}:
            robot.check_link(name)
    q = robot.configuration(start or {}, base=robot.mid_configuration())
    rig_module.write_joint_values(rig, robot, q)
    scene = bpy.context.scene
    first, last = int(track.frames[0]), int(track.frames[-1])
    scene.frame_start, scene.frame_end = first, last
    if fps:
        scene.render.fps, scene.render.fps_base = max(1, round(fps)), max(1, round(fps)) / fps
    scene.frame_set(first)
    bpy.context.view_layer.objects.active = rig
    if preset:
        from ..blender.presets import apply_preset, preset_driver

        tree = apply_preset(bpy.context, rig, preset, backend=solver.upper())
        target, solver_node = preset_driver(tree)
        link = target.link_name or link
    else:
        tree, target, solver_node = add_ik_target(bpy.context, rig, link, backend=solver.upper())
    solver_node.live = False
    solver_node.use_own_budget, solver_node.budget_ms = True, 60_000.0  # a bake is not a live frame
    if before_bake is not None:  # --path: tool-axis turns and the reach preview, with the bake's own solver settings
        before_bake(tree, target, rig, robot, link)
    key_control(bpy, rig, target, track)
    key_links(target, robot, track, link)
    node = ensure_bake_node(tree, scene)
    node.frame_start, node.frame_end, node.speed_limit = first, last, speed_limit
    started = time.perf_counter()
    # --avoid / --obstacles / --collision-margin reach the bake one way: the file's `Avoid` as it
    # is, for every Solver (BakeJob(avoid=)); the same path a script's bake_tree(avoid=) takes.
    results = bake_tree(tree, first, last, progress=progress, fps=fps, avoid=avoid)
    seconds = time.perf_counter() - started
    planned = None
    if plan is not None:
        planned = plan_keyed_segments(rig, results[0], track, avoid, plan, speed_limit=speed_limit)
    if avoid is not None:  # the saved .blend shows the obstacles, and its live IK avoids them as the bake did
        from ..core.graph.registry import kind_of
        from .obstacles import set_solver_avoid

        set_solver_avoid(bpy, [n for n in tree.nodes if kind_of(n) == "solver"], avoid, rig)
    scene.frame_set(first)
    blend = save_blend(bpy, out)
    return BakeOutcome(rig, tree, results[0], seconds, blend, planned)


def plan_keyed_segments(rig, result, track: TargetTrack, avoid, overrides: dict, speed_limit: float = 1.0):
    """`bake --plan`: each segment between two rows of the targets CSV (the control's keys) through
    `core.plan.plan_shot`, from the baked configuration at one key to the one at the next; planned
    segments are keyed on the rig in place of the per-frame answers, so the saved .blend, the
    joints CSV and playback all show the plan, and the bake's report is made again for what is
    keyed, its planned frames counted as planned (`check_bake(segments=)`). Returns the `PlannedShot`."""
    import dataclasses

    import bpy

    from ..blender.baking import scene_fps, write_joint_keys
    from ..blender.rig_limits import rig_limits
    from ..core.collision import Avoid
    from ..core.plan import plan_shot
    from ..core.shot.bake import check_bake, segment_rows

    solution = result.solution
    robot = solution.robot
    limits = rig_limits(rig, robot, **overrides)
    planned = plan_shot(robot, solution.frames, solution.joints, track.frames, scene_fps(bpy.context.scene),
                        avoid if avoid is not None else Avoid(), limits)
    changed = np.any(planned.joints != solution.joints, axis=0)
    if changed.any():
        keyed = np.array([name in result.keyed_joints for name in robot.actuated_joint_names]) | changed
        write_joint_keys(rig, robot, solution.frames, planned.joints, keyed)
        result.solution = dataclasses.replace(solution, joints=planned.joints)
        result.keyed_joints = [n for n, k in zip(robot.actuated_joint_names, keyed) if k]
    result.report = check_bake(result.solution, fps=scene_fps(bpy.context.scene),
                               velocity_limits=robot.velocity_limits * speed_limit, segments=segment_rows(planned.segments))
    return planned


# ---- the report picture -------------------------------------------------------------------------


# ---- bake ------------------------------------------------------------------------------------

def add_arguments_bake(parser):
    """Bake IK targets (a CSV) or a tool path (a path file) into a .blend: joint keys per frame, checked (exit 3 if flagged)."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link the targets are for (default: the tool point)")
    from .path_file import PATH_FILE_HELP

    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--path", metavar="FILE.json", help=PATH_FILE_HELP)
    given.add_argument("--targets", metavar="FILE.csv",
                        help="frame,x,y,z,qw,qx,qy,qz[,link] per row; poses in the robot's root frame (metres); "
                             "every frame from the first row's to the last row's is baked, between rows the control moves linearly")
    parser.add_argument("--tool-axis-freedom", type=float, default=0.0, metavar="DEG",
                        help="with --path: the tool may turn about its own Z axis within ±DEG, per frame the turn that keeps "
                             "the joints furthest from limits and singularities, continuous along the path (default 0: as given)")
    parser.add_argument("--out", required=True, metavar="FILE.blend", help="where to save the baked Blender file")
    parser.add_argument("--joints-out", metavar="FILE.csv", help="joint values per frame: frame, then one column per joint")
    parser.add_argument("--report", metavar="FILE.png", help="picture: joint values over time against their limits, flagged frames marked")
    parser.add_argument("--solver", choices=("pyroki", "numpy"), default="pyroki", help="IK backend (default pyroki)")
    parser.add_argument("--start", nargs="*", default=[], metavar="NAME=VALUE",
                        help="joint values to start from (default: the middle of each range)")
    parser.add_argument("--fps", type=float, help="frames per second for the speed check (default: the scene's, 24)")
    parser.add_argument("--speed-limit", type=float, default=100.0, metavar="PERCENT",
                        help="flag joints faster than this share of their URDF velocity limit (default 100)")
    parser.add_argument("--preset", metavar="NAME",
                        help="build the rig's graph from a preset (name, file name or .json path) instead of "
                             "Robot -> IK Target -> Solver; --targets keys its first IK Target")
    from .export import add_limit_arguments  # --check-limits, --margin, --max-acc, --max-jerk, --retime

    add_limit_arguments(parser, for_bake=True)
    from .obstacles import add_avoid_arguments

    # --margin is the limits' (PCT) on bake: the collision margin is --collision-margin MM
    add_avoid_arguments(parser, margin_option="--collision-margin", srdf=False)
    parser.set_defaults(margin_option="--collision-margin")
    parser.add_argument("--plan", action="store_true",
                        help="plan between the keys (the CSV's rows): a segment whose per-frame path collides is replaced by "
                             "a collision-free joint path (OMPL RRTConnect) timed to fill its frames, flagged when they are "
                             "too few for the limits (--max-acc, --max-jerk); avoids what --obstacles/--avoid name "
                             "(default: the robot itself)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def need_pillow() -> None:
    """Fail before the bake, not after it, when the report picture cannot be drawn."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise KinemaError("the report picture needs Pillow: pip install pillow") from None


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _check_output(path: str | None, suffix: str, option: str) -> None:
    if path and not str(path).lower().endswith(suffix):
        raise KinemaError(f"{option} '{path}' must end in {suffix}")


def run_bake(args) -> int:
    started = time.perf_counter()
    _check_output(args.out, ".blend", "--out")
    _check_output(args.joints_out, ".csv", "--joints-out")
    _check_output(args.report, ".png", "--report")
    from ..core.files import check_output_path

    refuse_outputs_over_inputs(args)
    for option, value in (("--out", args.out), ("--joints-out", args.joints_out), ("--report", args.report)):
        if value:
            check_output_path(value, option)  # refused now, not after the bake
    if args.fps is not None and not (math.isfinite(args.fps) and args.fps > 0):
        raise KinemaError(f"--fps must be a positive number, got {args.fps}")
    if not (math.isfinite(args.speed_limit) and args.speed_limit > 0):
        raise KinemaError(f"--speed-limit must be a positive percentage, got {args.speed_limit}")
    if args.report:
        need_pillow()
    from .export import bake_limits, check_bake_arguments

    plan_options = None
    if getattr(args, "plan", False):
        from ..core.plan import ompl_available
        from .export import limit_overrides as read_limit_overrides

        if args.path:
            raise KinemaError("--plan plans between the keys of a --targets CSV; a --path file has a pose every frame")
        ready, why = ompl_available()
        if not ready:
            raise KinemaError(why)
        plan_options = read_limit_overrides(args)  # --max-acc / --max-jerk / --margin time the plans too
    limit_overrides = check_bake_arguments(args)
    from .obstacles import avoid_from_args

    avoid = avoid_from_args(args)  # a bad obstacle file is refused before Blender starts
    start = parse_joint_values(args.start)
    from .path_file import ReachPreview, read_path_file, start_rotation, tool_axis_freedom

    reach = None
    if args.path:  # a path file: the tool's pose at every frame from core/paths.py, checked before Blender starts
        track, _ = read_path_file(args.path, start_rotation(args.urdf, args.link, start), args.fps or 24.0)
        reach = ReachPreview(track, tool_axis_freedom(args), args.fps or 24.0)
    else:
        tool_axis_freedom(args)
        track = read_targets_csv(args.targets)
        check_csv_links(args.targets, args.urdf, track)
    outcome = bake_track(args.urdf, args.link, track, args.out, solver=args.solver, start=start, fps=args.fps,
                         speed_limit=args.speed_limit, progress=TerminalProgress("baking"), preset=args.preset, avoid=avoid,
                         before_bake=reach, plan=plan_options)
    payload, text = finish_outputs(outcome, args.joints_out, args.report, started)
    if reach is not None:
        payload.update(reach.payload())
        text = [*text, *reach.lines()]
    if outcome.planned is not None:
        payload["segments"] = outcome.planned.to_dicts()
        for row in payload["segments"]:
            clear = "-" if row["least_clearance_m"] is None else f"{row['least_clearance_m'] * 1000:.1f} mm"
            text.append(f"frames {row['first_frame']}-{row['last_frame']}: {row['mode']}, {row['path_length_rad']:.3f} rad, "
                        f"least clearance {clear}, planned in {row['planning_s'] * 1000:.0f} ms"
                        + (f"; flagged: {row['flag']}" if row["flag"] else ""))
        if (outcome.planned.flagged or any(r["mode"] == "failed" for r in payload["segments"])) and payload["status"] == "ok":
            payload["status"] = "flagged"
    if avoid is not None:
        report = outcome.result.report
        payload["frames_in_collision"] = sorted(int(frame) for frame in report.in_collision)
        payload["min_clearance_m"] = report.min_clearance_m
        payload["in_collision"] = {str(k): v for k, v in report.in_collision.items()}
        clear = report.min_clearance_m
        text = [*text, f"clearance: least {clear * 1000:.2f} mm (margin {avoid.margin_m * 1000:g} mm)" if clear is not None
                else "clearance: nothing measured", *(f"frame {k}: in collision, {', '.join(v)}" for k, v in sorted(report.in_collision.items()))]
    limit_payload, limit_lines, over_limits = bake_limits(args, outcome, limit_overrides)
    payload.update(limit_payload)
    if over_limits and payload.get("status") == "ok":
        payload["status"] = "flagged"
    text = [*text, *limit_lines]
    emit(args, payload, text)
    return exit_code(payload)


def refuse_outputs_over_inputs(args) -> None:
    """Every output of a bake is a file of its own: not the targets, the robot, the preset or the
    obstacles it reads (after links), and not another output. Without this `--joints-out` given
    the targets' name replaced the targets and the bake exited 0."""
    from ..core.files import refuse_writing_over_inputs

    def given_file(value):
        return value if value and Path(value).is_file() else None

    outputs = {"--out": args.out, "--joints-out": args.joints_out, "--report": args.report,
               "--retime": getattr(args, "retime", None), "--limits-report": getattr(args, "limits_report", None)}
    inputs = {"--targets": args.targets, "--path": getattr(args, "path", None), "robot file": given_file(args.urdf),
              "--preset": given_file(args.preset), "--obstacles": given_file(getattr(args, "obstacles", None))}
    refuse_writing_over_inputs(outputs, inputs)


def exit_code(payload: dict) -> int:
    """0 when every frame converged and none was flagged, else 3 (the JSON's "status" says which)."""
    return 0 if payload["status"] == "ok" else 3


def check_csv_links(csv_path, urdf: str, track: TargetTrack) -> None:
    """Every name in the CSV's link column is a link of the robot, checked before Blender starts;
    an unknown one is named with its line and column."""
    from ..core.errors import UnknownNameError
    from ..core.model.loading import load_robot

    if track.links is None:
        return
    robot = load_robot(urdf, check_meshes=False)
    known = set(robot.links)
    for i, name in enumerate(track.links):
        if name and name not in known:
            line = track.line_numbers[i] if track.line_numbers else "?"
            raise KinemaError(f"targets '{csv_path}' line {line}, column link: {UnknownNameError('link', name, robot.links)}")


def joints_by_flag(flags: dict[int, list[str]]) -> str:
    """{frame: [joints]} -> "joint4 frames 10–20; joint6 frame 31" (the joints behind a flag)."""
    from ..blender.baking import frame_ranges
    from ..core.errors import printable

    frames_of: dict[str, list[int]] = {}
    for frame, names in sorted(flags.items()):
        for name in names:
            frames_of.setdefault(name, []).append(frame)
    parts = []
    for name, frames in frames_of.items():
        parts.append(f"{printable(name)} frame{'s' if len(frames) > 1 else ''} {frame_ranges(frames)}")
    return "; ".join(parts)


def finish_outputs(outcome: BakeOutcome, joints_out, report_png, started: float, title: str = "") -> tuple[dict, list[str]]:
    result = outcome.result
    robot = result.solution.robot
    report = result.report
    if joints_out:
        write_joints_csv(Path(joints_out), robot.actuated_joint_names, result.solution.frames, result.solution.joints)
    if report_png:
        draw_report(report_png, robot, result, title or f"{robot.name}: baked joints against their limits")
    payload = {
        "frames": report.frames,
        "converged": report.converged,
        "max_position_error": _finite(report.max_position_error),
        "max_rotation_error": _finite(report.max_rotation_error),
        "flagged": report.flagged,
        "seconds": round(time.perf_counter() - started, 3),
        "bake_seconds": round(outcome.seconds, 3),
        "robot": robot.name,
        "out": str(outcome.blend),
        "joints_out": str(Path(joints_out).resolve()) if joints_out else None,
        "report": str(Path(report_png).resolve()) if report_png else None,
        "keyed_joints": result.keyed_joints,
        "solver": sorted(result.solution.backends),
        "checks": {k: v for k, v in report.to_dict().items() if k in ("not_converged", "near_limit", "too_fast", "flips")},
        "status": ("not_converged" if report.converged + len(report.planned) < report.frames else "flagged" if report.flagged else "ok"),
    }
    from ..blender.baking import frame_ranges

    lines = [
        (f"baked {report.frames} frames of {robot.name} in {outcome.seconds:.2f} s: {report.converged} converged, "
         f"worst {report.max_position_error * 1000:.4f} mm / {math.degrees(report.max_rotation_error):.4f}°"),
        f"saved {outcome.blend}",
    ]
    if report.flagged:
        if report.not_converged:
            lines.append(f"flagged, not converged: frames {frame_ranges(report.not_converged)}")
        if report.near_limit:
            lines.append(f"flagged, near a limit: {joints_by_flag(report.near_limit)}")
        if report.too_fast:
            lines.append(f"flagged, too fast: {joints_by_flag(report.too_fast)}")
        if report.flips:
            lines.append(f"flagged, branch flips (all joints jump): frames {frame_ranges(report.flips)}")
    else:
        lines.append("no frames flagged")
    if joints_out:
        lines.append(f"joints written to {joints_out}")
    if report_png:
        lines.append(f"report picture {report_png}")
    return payload, lines


# ---- demo ------------------------------------------------------------------------------------
