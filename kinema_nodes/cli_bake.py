"""`kinema-nodes bake` and `kinema-nodes demo`: the headless main job.

`bake` imports the robot, builds the node tree the panel would (Robot -> IK Target -> Solver ->
Bake) with a control whose animation comes from the CSV, bakes it through the evaluator (the
same `baking.BakeJob` as Bake to Keyframes) with a progress bar on the terminal, turns Live IK
off (the shot no longer needs the solver) and saves the file. `demo` writes such a CSV for a
bundled robot — the tool tracing a figure-eight, then a hand-off to the elbow — and runs it.
"""

from __future__ import annotations

import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cli import emit, parse_joint_values
from .core.errors import KinemaError

CSV_COLUMNS = ("frame", "x", "y", "z", "qw", "qx", "qy", "qz")


# ---- the targets CSV --------------------------------------------------------------------------

@dataclass
class TargetTrack:
    """Target poses per frame, in the robot's root frame (from a CSV or made up by the demo)."""

    frames: np.ndarray  # (F,) int, increasing
    positions: np.ndarray  # (F, 3) metres
    wxyz: np.ndarray  # (F, 4) unit quaternions
    links: list[str] | None  # (F,) link per frame ('' = the --link), or None without a link column


def read_targets_csv(path: str | Path) -> TargetTrack:
    """Read `frame,x,y,z,qw,qx,qy,qz[,link]`; every problem is a one-line KinemaError."""
    path = Path(path)
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise KinemaError(f"cannot read targets '{path}': {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise KinemaError(f"targets '{path}' is empty; expected a header {','.join(CSV_COLUMNS)}[,link]")
        header = [h.strip().lower() for h in header]
        missing = [c for c in CSV_COLUMNS if c not in header]
        if missing:
            raise KinemaError(f"targets '{path}' lacks column(s) {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}[,link]")
        columns = [header.index(c) for c in CSV_COLUMNS]
        link_column = header.index("link") if "link" in header else None
        rows, links = [], []
        for line_number, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            try:
                values = [float(row[i]) for i in columns]
            except (ValueError, IndexError):
                raise KinemaError(f"targets '{path}' line {line_number}: expected numbers in {','.join(CSV_COLUMNS)}") from None
            if not all(math.isfinite(v) for v in values):
                raise KinemaError(f"targets '{path}' line {line_number}: a value is not finite (NaN or inf)")
            if values[0] != round(values[0]):
                raise KinemaError(f"targets '{path}' line {line_number}: frame {values[0]:g} is not a whole number")
            if math.sqrt(sum(v * v for v in values[4:])) < 1e-9:
                raise KinemaError(f"targets '{path}' line {line_number}: the quaternion qw,qx,qy,qz has zero length")
            rows.append(values)
            if link_column is not None:
                links.append(row[link_column].strip() if link_column < len(row) else "")
    if not rows:
        raise KinemaError(f"targets '{path}' has a header but no rows")
    data = np.array(rows)
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    frames = data[:, 0].astype(int)
    repeated = frames[1:][np.diff(frames) == 0]
    if len(repeated):
        raise KinemaError(f"targets '{path}': frame {int(repeated[0])} appears twice")
    wxyz = data[:, 4:8] / np.linalg.norm(data[:, 4:8], axis=1, keepdims=True)
    return TargetTrack(frames, data[:, 1:4], wxyz, [links[i] for i in order] if link_column is not None else None)


def write_targets_csv(path: Path, track: TargetTrack) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CSV_COLUMNS, *(["link"] if track.links is not None else [])])
        for i, frame in enumerate(track.frames):
            row = [int(frame), *(f"{v:.9g}" for v in track.positions[i]), *(f"{v:.9g}" for v in track.wxyz[i])]
            writer.writerow(row + ([track.links[i]] if track.links is not None else []))


def write_joints_csv(path: Path, joint_names: list[str], frames: np.ndarray, joints: np.ndarray) -> None:
    """Header `frame` then one column per joint (URDF names), radians/metres."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frame", *joint_names])
        for frame, q in zip(frames, joints):
            writer.writerow([int(frame), *(f"{v:.10g}" for v in q)])


# ---- building the scene -------------------------------------------------------------------------

def key_control(bpy, rig, target, track: TargetTrack) -> None:
    """Key the control bone so its armature-space pose is the track's pose on each frame (in bulk)."""
    from .baking import _channelbag, _fcurve, write_keys
    from .core.rotations import matrix_to_quaternion, quaternion_to_matrix

    bone = rig.pose.bones[target.control_bone]
    rest = np.array(bone.bone.matrix_local, dtype=float)
    if bone.parent is not None:
        parent_pose = np.array(bone.parent.matrix, dtype=float)
        parent_rest = np.array(bone.parent.bone.matrix_local, dtype=float)
        rest = parent_pose @ np.linalg.inv(parent_rest) @ rest  # where the bone sits with an identity basis
    poses = np.tile(np.eye(4), (len(track.frames), 1, 1))
    poses[:, :3, :3] = quaternion_to_matrix(track.wxyz)
    poses[:, :3, 3] = track.positions
    local = np.linalg.inv(rest) @ poses
    quaternions = matrix_to_quaternion(local)
    for i in range(1, len(quaternions)):  # keep neighbours on one hemisphere so keys blend the short way
        if np.dot(quaternions[i], quaternions[i - 1]) < 0:
            quaternions[i] = -quaternions[i]
    bag = _channelbag(rig)
    frames = track.frames.astype(float)
    name = bone.name.replace("\\", "\\\\").replace('"', '\\"')
    for index in range(3):
        write_keys(_fcurve(bag, f'pose.bones["{name}"].location', index, bone.name), frames, local[:, index, 3])
    for index in range(4):
        write_keys(_fcurve(bag, f'pose.bones["{name}"].rotation_quaternion', index, bone.name), frames, quaternions[:, index])
    bone.rotation_mode = "QUATERNION"


def key_links(target, robot, track: TargetTrack, default_link: str) -> None:
    """Key the target's link where the CSV's link column changes (stepped keys)."""
    from .ik_panel import key_target_link

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
        self.stream = stream or sys.stderr
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


def bake_track(urdf: str, link: str | None, track: TargetTrack, out: str | Path, *, solver: str = "pyroki",
               start: dict[str, float] | None = None, fps: float | None = None, speed_limit: float = 100.0,
               progress=None, preset: str | None = None) -> BakeOutcome:
    """Everything `bake` does in Blender: import, tree, keyed control, bake, save."""
    from .cli_blender import blender_output_to_stderr, headless_blender, save_blend

    if not str(out).lower().endswith(".blend"):
        raise KinemaError(f"--out '{out}' must end in .blend")
    bpy = headless_blender()
    from . import rig as rig_module
    from .bake_panel import ensure_bake_node
    from .baking import bake_tree
    from .ik_panel import add_ik_target
    from .importer import import_urdf

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
        from .presets_ui import apply_preset, preset_driver

        tree = apply_preset(bpy.context, rig, preset, backend=solver.upper())
        target, solver_node = preset_driver(tree)
        link = target.link_name or link
    else:
        tree, target, solver_node = add_ik_target(bpy.context, rig, link, backend=solver.upper())
    solver_node.live = False
    solver_node.use_own_budget, solver_node.budget_ms = True, 60_000.0  # a bake is not a live frame
    key_control(bpy, rig, target, track)
    key_links(target, robot, track, link)
    node = ensure_bake_node(tree, scene)
    node.frame_start, node.frame_end, node.speed_limit = first, last, speed_limit
    started = time.perf_counter()
    results = bake_tree(tree, first, last, progress=progress, fps=fps)
    seconds = time.perf_counter() - started
    scene.frame_set(first)
    blend = save_blend(bpy, out)
    return BakeOutcome(rig, tree, results[0], seconds, blend)


# ---- the report picture -------------------------------------------------------------------------

def draw_report(path: str | Path, robot, result, title: str = "") -> Path:
    """Joint values over time against their limits (grey band: the allowed range), flagged frames
    marked in red, one strip per keyed joint. PIL only (no plotting library needed)."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise KinemaError("the report picture needs Pillow: pip install pillow") from None

    solution, report = result.solution, result.report
    frames = solution.frames
    names = [n for n, keyed in zip(robot.actuated_joint_names, solution.keyed) if keyed] or list(robot.actuated_joint_names)
    width, strip, left, right, top, bottom = 1000, 78, 150, 20, 58, 58
    height = top + strip * len(names) + bottom
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image, "RGBA")
    try:
        font, small = ImageFont.load_default(size=15), ImageFont.load_default(size=12)
    except TypeError:  # Pillow < 10.1
        font = small = ImageFont.load_default()
    first, last = float(frames[0]), float(frames[-1])
    span = max(last - first, 1.0)

    gauge = 26  # a column on the right: the joint's whole range, with the part this shot uses
    plot_right = width - right - gauge - 10

    def x_of(frame):
        return left + (plot_right - left) * (float(frame) - first) / span

    flagged = set(report.flagged)
    handoffs = [i for i in range(1, len(frames)) if solution.links[i] != solution.links[i - 1]]
    headline = title or robot.name
    draw.text((left, 8), headline, fill=(20, 20, 20), font=font)
    counts = report.counts()
    draw.text((left, 30), f"{report.frames} frames, {report.converged} converged; flagged: {counts['flagged']} "
              f"(not converged {counts['not_converged']}, near a limit {counts['near_limit']}, "
              f"too fast {counts['too_fast']}, branch flips {counts['flips']})", fill=(60, 60, 60), font=small)
    bar = max(1.0, (plot_right - left) / span)
    for row, name in enumerate(names):
        j = robot.joint_index(name)
        y0, y1 = top + row * strip + 6, top + (row + 1) * strip - 6
        values = solution.joints[:, j]
        lower, upper = robot.lower[j], robot.upper[j]
        limited = bool(np.isfinite(lower) and np.isfinite(upper))
        unit, scale = ("mm", 1000.0) if robot.is_prismatic[j] else ("°", 180.0 / math.pi)
        # Zoom on the motion (at least a tenth of the range tall) so small moves show; a limit
        # inside the view is drawn as a line with the out-of-range side shaded.
        low, high = float(values.min()), float(values.max())
        least = 0.1 * (upper - lower) if limited else 0.2
        if high - low < least:
            middle = 0.5 * (low + high)
            low, high = middle - least / 2, middle + least / 2
        pad = 0.12 * (high - low)
        low, high = low - pad, high + pad

        def y_of(value, y0=y0, y1=y1, low=low, high=high):
            return y1 - (y1 - y0) * (float(value) - low) / (high - low)

        draw.rectangle([left, y0, plot_right, y1], fill=(246, 246, 248), outline=(200, 200, 205))
        if limited:
            for limit, outside in ((lower, low), (upper, high)):
                if low < limit < high:
                    draw.rectangle([left, min(y_of(limit), y_of(outside)), plot_right, max(y_of(limit), y_of(outside))],
                                   fill=(240, 200, 200))
                    draw.line([left, y_of(limit), plot_right, y_of(limit)], fill=(200, 60, 60), width=2)
        for frame in flagged:
            x = x_of(frame)
            draw.rectangle([x - bar / 2, y0, x + bar / 2, y1], fill=(220, 40, 40, 70))
        points = [(x_of(f), y_of(v)) for f, v in zip(frames, values)]
        if len(points) > 1:
            draw.line(points, fill=(30, 90, 200), width=2)
        else:
            draw.ellipse([points[0][0] - 2, points[0][1] - 2, points[0][0] + 2, points[0][1] + 2], fill=(30, 90, 200))
        for value in (high - pad, low + pad):
            draw.text((plot_right - 60, y_of(value) - (2 if value == high - pad else 12)), f"{value * scale:.1f}{unit}",
                      fill=(120, 120, 130), font=small)
        g0 = width - right - gauge
        draw.rectangle([g0, y0, width - right, y1], fill=(226, 230, 236), outline=(150, 150, 160))
        if limited:
            def g_of(value, y0=y0, y1=y1, lower=lower, upper=upper):
                return y1 - (y1 - y0) * (float(value) - lower) / (upper - lower)

            used_low, used_high = float(values.min()), float(values.max())
            draw.rectangle([g0 + 3, g_of(used_high) - 1, width - right - 3, g_of(used_low) + 1], fill=(30, 90, 200))
        draw.text((8, y0 + 4), name, fill=(20, 20, 20), font=font)
        limits_text = f"limits {lower * scale:.0f} .. {upper * scale:.0f} {unit}" if limited else "no limits"
        draw.text((8, y0 + 26), limits_text, fill=(90, 90, 90), font=small)
        draw.text((8, y0 + 42), f"used {values.min() * scale:.1f} .. {values.max() * scale:.1f} {unit}", fill=(90, 90, 90), font=small)
        for i in handoffs:
            x = x_of(frames[i])
            for y in range(int(y0), int(y1), 6):
                draw.line([x, y, x, min(y + 3, y1)], fill=(90, 90, 90), width=1)
    axis_y = top + strip * len(names)
    for i in handoffs:
        label = "hand-off to " + ", ".join(solution.links[i])
        draw.text((x_of(frames[i]) + 4, top - 14), label, fill=(60, 60, 60), font=small)
    ticks = np.linspace(first, last, num=min(11, int(span) + 1))
    for tick in ticks:
        x = x_of(round(tick))
        draw.line([x, axis_y - 4, x, axis_y + 2], fill=(80, 80, 80))
        draw.text((x - 10, axis_y + 6), f"{round(tick)}", fill=(60, 60, 60), font=small)
    legend = "frame.   Blue: joint value.  Red band: flagged frame.  Red line: a limit in view.  Dashes: hand-off."
    draw.text((left, axis_y + 22), legend, fill=(60, 60, 60), font=small)
    draw.text((left, axis_y + 36), "Right column: the joint's whole range, and the part this shot uses.", fill=(60, 60, 60), font=small)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


# ---- bake ------------------------------------------------------------------------------------

def add_arguments_bake(parser):
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link the targets are for (default: the tool point)")
    parser.add_argument("--targets", required=True, metavar="FILE.csv",
                        help="frame,x,y,z,qw,qx,qy,qz[,link] per row; poses in the robot's root frame (metres); "
                             "every frame from the first row's to the last row's is baked, between rows the control moves linearly")
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
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _need_pillow() -> None:
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
    if args.fps is not None and not (math.isfinite(args.fps) and args.fps > 0):
        raise KinemaError(f"--fps must be a positive number, got {args.fps}")
    if not (math.isfinite(args.speed_limit) and args.speed_limit > 0):
        raise KinemaError(f"--speed-limit must be a positive percentage, got {args.speed_limit}")
    if args.report:
        _need_pillow()
    track = read_targets_csv(args.targets)
    start = parse_joint_values(args.start)
    outcome = bake_track(args.urdf, args.link, track, args.out, solver=args.solver, start=start, fps=args.fps,
                         speed_limit=args.speed_limit, progress=TerminalProgress("baking"), preset=args.preset)
    payload, text = finish_outputs(outcome, args.joints_out, args.report, started)
    emit(args, payload, text)
    return 0


def finish_outputs(outcome: BakeOutcome, joints_out, report_png, started: float, title: str = "") -> tuple[dict, str]:
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
    }
    from .baking import frame_ranges

    lines = [
        (f"baked {report.frames} frames of {robot.name} in {outcome.seconds:.2f} s: {report.converged} converged, "
         f"worst {report.max_position_error * 1000:.4f} mm / {math.degrees(report.max_rotation_error):.4f}°"),
        f"saved {outcome.blend}",
    ]
    if report.flagged:
        for frame_list, words in ((report.not_converged, "not converged"), (list(report.near_limit), "near a limit"),
                                  (list(report.too_fast), "too fast"), (report.flips, "branch flips")):
            if frame_list:
                lines.append(f"flagged, {words}: frames {frame_ranges(frame_list)}")
    else:
        lines.append("no frames flagged")
    if joints_out:
        lines.append(f"joints written to {joints_out}")
    if report_png:
        lines.append(f"report picture {report_png}")
    return payload, "\n".join(lines)


# ---- demo ------------------------------------------------------------------------------------

DEMO_ROBOT = "arm7"
DEMO_HANDOFF_LINK = "link4"  # the elbow leads after the hand-off


def demo_track(robot, start: np.ndarray, tool: str, frames_eight: int = 120, frames_elbow: int = 48) -> TargetTrack:
    """The tool point traces a figure-eight (a lemniscate in the y-z plane in front of the robot,
    tool orientation held), then the goal is handed to the elbow, which swings the arm round.

    The elbow's poses come from forward kinematics of a joint-space sweep that starts where the
    figure-eight leaves the arm (solved here with the NumPy solver), so every goal is reachable."""
    from .core.kinematics import link_pose
    from .core.rotations import matrix_to_quaternion
    from .core.solvers import IKTarget, SolveOptions, solve_trajectory

    home = link_pose(robot, start, tool)
    centre = home[:3, 3]
    wxyz = matrix_to_quaternion(home)
    t = np.linspace(0.0, 2.0 * np.pi, frames_eight)
    width, height = 0.22, 0.14
    positions = np.stack([np.full_like(t, centre[0]), centre[1] + width * np.sin(t),
                          centre[2] + height * np.sin(t) * np.cos(t)], axis=1)
    goals = [IKTarget(tool, tuple(p), tuple(wxyz)) for p in positions]
    held = frozenset(n for n, p in zip(robot.actuated_joint_names, robot.is_prismatic) if p)
    solved = solve_trajectory(robot, goals, start, SolveOptions(backend="numpy", held_joints=held))
    q = solved[-1].joints.copy()
    sweep = np.linspace(0.0, 1.0, frames_elbow + 1)[1:]
    elbow = []
    for s in sweep:
        qe = q.copy()
        qe[robot.joint_index("joint1")] += 0.7 * np.sin(np.pi * s) * 1.0
        qe[robot.joint_index("joint2")] += -0.25 * np.sin(np.pi * s)
        elbow.append(link_pose(robot, qe, DEMO_HANDOFF_LINK))
    elbow = np.array(elbow)
    frames = np.arange(1, frames_eight + frames_elbow + 1)
    all_positions = np.concatenate([positions, elbow[:, :3, 3]])
    all_wxyz = np.concatenate([np.tile(wxyz, (frames_eight, 1)), matrix_to_quaternion(elbow)])
    links = [tool] * frames_eight + [DEMO_HANDOFF_LINK] * frames_elbow
    return TargetTrack(frames, all_positions, all_wxyz, links)


def add_arguments_demo(parser):
    parser.add_argument("--out", default="kinema-demo", metavar="DIR", help="folder for the outputs (default ./kinema-demo)")
    parser.add_argument("--solver", choices=("pyroki", "numpy"), default="pyroki", help="IK backend (default pyroki)")
    parser.add_argument("--resolution", default="800x600", metavar="WxH", help="rendered frame size (default 800x600)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


DEMO_START = {"joint1": 0.0, "joint2": -0.3, "joint3": 0.0, "joint4": -2.2, "joint5": 0.0, "joint6": 1.9, "joint7": 0.8}


def run_demo(args) -> int:
    from .cli_blender import _resolution
    from .core.robot import load_robot

    started = time.perf_counter()
    _need_pillow()
    resolution = _resolution(args.resolution)
    folder = Path(args.out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KinemaError(f"cannot create folder '{folder}': {exc.strerror or exc}") from None
    robot = load_robot(DEMO_ROBOT, check_meshes=False)
    start = robot.configuration(DEMO_START, base=robot.mid_configuration())
    track = demo_track(robot, start, robot.tool_point)
    targets_csv = folder / "demo_targets.csv"
    write_targets_csv(targets_csv, track)
    track = read_targets_csv(targets_csv)  # the demo runs exactly what `bake` would read
    outcome = bake_track(DEMO_ROBOT, robot.tool_point, track, folder / "demo.blend", solver=args.solver, start=DEMO_START,
                         progress=TerminalProgress("baking"))
    render_path = render_demo_frame(outcome, track, folder / "demo_frame.png", resolution)
    payload, text = finish_outputs(outcome, folder / "demo_joints.csv", folder / "demo_report.png", started,
                                   title=f"Kinema Nodes demo: {DEMO_ROBOT} traces a figure-eight, then the elbow leads")
    payload["render"] = str(render_path)
    payload["targets"] = str(targets_csv.resolve())
    emit(args, payload, text + f"\nrendered {render_path}")
    return 0


def render_demo_frame(outcome: BakeOutcome, track: TargetTrack, path: Path, resolution) -> Path:
    """A Workbench picture part-way through the figure-eight, with the path drawn as a red tube."""
    import bpy

    from .cli_blender import blender_output_to_stderr, save_blend
    from .render import frame_camera, render_workbench

    rig = outcome.rig
    eight = [i for i, link in enumerate(track.links or []) if link == (track.links[0] if track.links else "")]
    points = track.positions[eight] if eight else track.positions
    curve = bpy.data.curves.new("Kinema Path", "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = 0.004
    spline = curve.splines.new("POLY")
    spline.points.add(len(points) - 1)
    world = np.array(rig.matrix_world)
    homogeneous = np.c_[points, np.ones(len(points))] @ world.T
    spline.points.foreach_set("co", homogeneous.astype(np.float32).ravel())
    material = bpy.data.materials.new("Kinema Path")
    material.diffuse_color = (0.85, 0.1, 0.1, 1.0)
    curve.materials.append(material)
    path_object = bpy.data.objects.new("Kinema Path", curve)
    bpy.context.scene.collection.objects.link(path_object)
    scene = bpy.context.scene
    scene.frame_set(int(track.frames[0]) + len(points) // 4)  # the tool at the end of one loop
    scene.render.resolution_x, scene.render.resolution_y = resolution
    bpy.context.view_layer.update()
    with blender_output_to_stderr():
        frame_camera(scene, rig.children_recursive, view_from=(1.0, 0.35, 0.45))
        picture = render_workbench(scene, path, resolution)
    save_blend(bpy, outcome.blend)  # keep the path and camera in the demo file
    return picture
