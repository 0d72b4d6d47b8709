"""`kinema-nodes export`, and the limits half of `kinema-nodes bake` (--check-limits, --retime).

`export SHOT.blend --format csv|json|ros2|mujoco --out PATH [--rig NAME] [--frames A:B]` opens
a baked shot, reads the rig's joint curves on every whole frame, checks them against the rig's
limits and writes the format (see `core.shot.export`). A rig with nothing baked, frames outside the
baked range, an unknown rig or an output that cannot be written is one line on stderr and exit
code 2, with no file left behind. Written but over a limit: exit code 3 (the file is written;
the check only flags).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.errors import KinemaError
from .common import emit

SUFFIXES = {"csv": (".csv",), "json": (".json",), "mujoco": (".npz",), "ros2": None}


def add_limit_arguments(parser, *, for_bake: bool = False) -> None:
    """--margin, --max-acc, --max-jerk (and for bake: --check-limits, --retime, --limits-report)."""
    if for_bake:
        parser.add_argument("--check-limits", action="store_true",
                            help="check the baked joints' velocity (URDF), acceleration and jerk against their limits; "
                                 "--json adds velocity_violations, acceleration_violations, jerk_violations")
        parser.add_argument("--retime", metavar="OUT.blend",
                            help="also save a copy of the shot retimed to the fastest timing the velocity and acceleration "
                                 "limits allow (needs --max-acc or the rig's acceleration limits; toppra)")
        parser.add_argument("--limits-report", metavar="FILE.png",
                            help="picture: velocity and acceleration per joint against their limits (and the retimed timing)")
    parser.add_argument("--margin", type=float, metavar="PCT", help="safety margin: every limit scaled down by PCT %% (default 0)")
    parser.add_argument("--max-acc", type=float, metavar="X", help="acceleration limit for every joint, rad/s² (m/s² for slides)")
    parser.add_argument("--max-jerk", type=float, metavar="Y", help="jerk limit for every joint, rad/s³ (m/s³ for slides)")


def limit_overrides(args) -> dict:
    """The rig-settings overrides the flags give (absent flags leave the rig's settings)."""
    overrides = {}
    for option, key, value in (("--margin", "margin", args.margin), ("--max-acc", "max_acceleration", args.max_acc),
                               ("--max-jerk", "max_jerk", args.max_jerk)):
        if value is None:
            continue
        if not math.isfinite(value) or value < 0:
            raise KinemaError(f"{option} must be a number of at least 0, got {value}")
        if option == "--margin" and value >= 100:
            raise KinemaError(f"--margin must be below 100 %, got {value}")
        overrides[key] = value
    return overrides


def add_arguments_export(parser):
    """Export a baked shot for a robot or a simulator: CSV, JSON, ROS 2 JointTrajectory (YAML + rosbag2), MuJoCo qpos."""
    parser.add_argument("blend", metavar="SHOT.blend", help="a .blend with a baked rig")
    parser.add_argument("--format", required=True, choices=("csv", "json", "ros2", "mujoco"), help="what to write")
    parser.add_argument("--out", required=True, metavar="PATH",
                        help="file to write (.csv, .json, .npz); for ros2 the rosbag2 folder, with PATH.yaml beside it")
    parser.add_argument("--rig", metavar="NAME", help="the rig to export (default: the file's only rig)")
    parser.add_argument("--frames", metavar="A:B", help="first and last frame (default: everything baked)")
    parser.add_argument("--topic", default="/joint_trajectory", help="ros2: the topic in the bag (default /joint_trajectory)")
    parser.add_argument("--model", metavar="MJCF.xml", help="mujoco: the model whose joints order qpos")
    parser.add_argument("--velocities", action="store_true", help="json: add velocities per frame")
    parser.add_argument("--force", action="store_true",
                        help="ros2: replace an existing bag at --out (a folder holding anything but the bag is never replaced)")
    add_limit_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def open_blend(path: str):
    """The bpy module with `path` open (checked first: a missing or odd file is one line)."""
    from ..core.files import check_input_file
    from .headless import _silenced, headless_blender

    check_input_file(path, "SHOT.blend")
    if Path(path).suffix.lower() != ".blend":
        raise KinemaError(f"'{path}' is not a .blend file")
    bpy = headless_blender(empty_file=False)
    try:
        with _silenced():
            bpy.ops.wm.open_mainfile(filepath=str(Path(path).resolve()), load_ui=False)
    except RuntimeError as exc:
        raise KinemaError(f"'{path}' cannot be opened: {str(exc).strip().splitlines()[-1]}") from None
    return bpy


def _check_out(fmt: str, out: str, force: bool = False) -> None:
    from ..core.shot.export import check_bag_output, ros2_paths
    from ..core.files import check_output_path

    suffixes = SUFFIXES[fmt]
    if suffixes and Path(out).suffix.lower() not in suffixes:
        raise KinemaError(f"--out '{out}' must end in {' or '.join(suffixes)} for the {fmt} format")
    if fmt == "ros2":
        bag, yaml_path = ros2_paths(out)
        check_output_path(yaml_path, "--out")
        check_bag_output(bag, force)
    else:
        check_output_path(out, "--out")


def refuse_outputs_over_inputs(args) -> None:
    """The export's files are not the shot it reads nor the --model (after links)."""
    from ..core.files import refuse_writing_over_inputs
    from ..core.shot.export import ros2_paths

    outputs = {"--out": args.out}
    if args.format == "ros2":
        bag, yaml_path = ros2_paths(args.out)
        outputs = {"--out": bag, "--out's YAML": yaml_path}
    refuse_writing_over_inputs(outputs, {"SHOT.blend": args.blend, "--model": args.model})


def run_export(args) -> int:
    from ..core.shot.export import export

    _check_out(args.format, args.out, args.force)
    refuse_outputs_over_inputs(args)
    if args.format == "mujoco" and not args.model:
        raise KinemaError("--format mujoco needs --model MJCF.xml (the model whose joints order qpos)")
    overrides = limit_overrides(args)
    from ..blender.limits import find_rig, parse_frames, rig_trajectory

    frames = parse_frames(args.frames)
    bpy = open_blend(args.blend)
    rig = find_rig(args.rig)
    trajectory = rig_trajectory(rig, bpy.context.scene, frames, **overrides)
    paths = export(trajectory, args.format, args.out, topic=args.topic, model=args.model, velocities=args.velocities,
                   force=args.force)
    report = trajectory.report
    payload = {"format": args.format, "out": [str(p) for p in paths], "rig": rig.name, "robot": trajectory.robot_name,
               "frames": [int(trajectory.frames[0]), int(trajectory.frames[-1])], "fps": trajectory.fps,
               "joint_names": list(trajectory.joint_names), **{k: v for k, v in report.to_dict().items() if k.endswith("_violations")},
               "status": "flagged" if report.flagged else "ok"}
    lines = [f"exported {len(trajectory.frames)} frames of {trajectory.robot_name} ({rig.name}) at {trajectory.fps:g} fps "
             f"to {', '.join(str(p) for p in paths)}"]
    lines += violation_lines(report)
    emit(args, payload, lines)
    return 3 if report.flagged else 0


def violation_lines(report) -> list[str]:
    from ..blender.baking import frame_ranges

    rows = report.table()
    if not rows:
        checked = [k for k in ("velocity", "acceleration", "jerk") if report.limits.checked(k)]
        return [f"within the limits checked ({', '.join(checked) or 'none'}; margin {report.limits.margin_percent:g} %)"]
    return [f"over the {row['kind']} limit: {row['joint']} worst {row['worst']:.4g} > {row['limit']:.4g}, "
            f"frames {frame_ranges(row['frames'])}" for row in rows]


# ---- bake --check-limits / --retime ------------------------------------------------------------

def check_bake_arguments(args) -> dict:
    """Before the bake: the limit flags make sense and the outputs can be written."""
    from ..core.files import check_output_path

    overrides = limit_overrides(args)
    if (args.margin is not None or args.max_acc is not None or args.max_jerk is not None or args.limits_report) \
            and not args.check_limits and not args.retime and not (getattr(args, "plan", False) and not args.limits_report):
        raise KinemaError("--margin, --max-acc, --max-jerk and --limits-report go with --check-limits or --retime "
                          "(--margin, --max-acc and --max-jerk also with --plan)")
    if args.retime:
        if not str(args.retime).lower().endswith(".blend"):
            raise KinemaError(f"--retime '{args.retime}' must end in .blend")
        if not args.max_acc:  # the bake builds a fresh rig: no acceleration limits but these
            raise KinemaError("--retime needs --max-acc X (retiming is under velocity and acceleration limits)")
        check_output_path(args.retime, "--retime")
        from ..core.shot.retime import toppra_available

        ok, reason = toppra_available()
        if not ok:
            raise KinemaError(reason)
    if args.limits_report:
        if not str(args.limits_report).lower().endswith(".png"):
            raise KinemaError(f"--limits-report '{args.limits_report}' must end in .png")
        check_output_path(args.limits_report, "--limits-report")
    return overrides


def robot_prismatic(rig) -> list[bool]:
    from ..blender.rig import robot_for_rig

    return [bool(p) for p in robot_for_rig(rig).is_prismatic]


def bake_limits(args, outcome, overrides: dict) -> tuple[dict, list[str], bool]:
    """After the bake: check (markers on the timeline, saved with the shot), retime on request.
    Returns (JSON keys to add, text lines, whether a limit was exceeded)."""
    if not (args.check_limits or args.retime):
        return {}, [], False
    import bpy

    from ..blender.limits import check_rig, retime_rig
    from .headless import save_blend

    rig = outcome.rig
    scene = bpy.context.scene
    report, q = check_rig(rig, scene, **overrides)
    payload = {k: v for k, v in report.to_dict().items() if k.endswith("_violations")}
    payload["limits"] = report.limits.to_dict()
    lines = violation_lines(report)
    save_blend(bpy, outcome.blend)  # the markers and the table travel with the shot
    retimed = None
    if args.retime:
        retimed, action = retime_rig(rig, scene, **overrides)
        save_blend(bpy, args.retime)
        payload["retime"] = {**retimed.to_dict(), "out": str(Path(args.retime).resolve()), "action": action.name}
        lines.append(f"retimed: shortest executable {retimed.optimal_duration_s:.3f} s (was {retimed.original_duration_s:.3f} s), "
                     f"{retimed.frame_count} frames at {retimed.fps:g} fps, saved {args.retime}")
    if args.limits_report:
        from .report import draw_limits_report

        draw_limits_report(args.limits_report, report, q, retimed,
                           title=f"{rig.name}: velocity and acceleration against their limits",
                           prismatic={n for n, p in zip(report.limits.joint_names, robot_prismatic(rig)) if p})
        payload["limits_report"] = str(Path(args.limits_report).resolve())
        lines.append(f"limits report picture {args.limits_report}")
    return payload, lines, report.flagged
