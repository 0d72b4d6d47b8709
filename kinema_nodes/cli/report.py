"""The report picture of `bake` and `demo`: each keyed joint over time against its limits, with
the flags of the bake drawn on the joints they are about."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..core.errors import KinemaError


def _canvas(width: int, height: int):
    """A white picture to draw a report on, with its two font sizes."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise KinemaError("the report picture needs Pillow: pip install pillow") from None

    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image, "RGBA")
    try:
        font, small = ImageFont.load_default(size=15), ImageFont.load_default(size=12)
    except TypeError:  # Pillow < 10.1
        font = small = ImageFont.load_default()
    return image, draw, font, small


def draw_report(path: str | Path, robot, result, title: str = "") -> Path:
    """Joint values over time against their limits (grey band: the allowed range), flagged frames
    marked in red, one strip per keyed joint. PIL only (no plotting library needed)."""
    solution, report = result.solution, result.report
    frames = solution.frames
    names = [n for n, keyed in zip(robot.actuated_joint_names, solution.keyed) if keyed] or list(robot.actuated_joint_names)
    width, strip, left, right, top, bottom = 1000, 78, 150, 20, 58, 72
    traced = bool(getattr(report, "clearance", None))  # a bake that avoided collisions: its clearance trace
    rows = segment_lines(report)
    height = top + strip * (len(names) + traced) + bottom + 16 * len(rows)
    image, draw, font, small = _canvas(width, height)
    first, last = float(frames[0]), float(frames[-1])
    span = max(last - first, 1.0)

    gauge = 26  # a column on the right: the joint's whole range, with the part this shot uses
    plot_right = width - right - gauge - 10

    def x_of(frame):
        return left + (plot_right - left) * (float(frame) - first) / span

    whole_pose = _runs(sorted(set(report.not_converged) | set(report.flips)))  # a failed or flipped pose: every joint
    per_joint = {name: (_runs(_frames_naming(report.near_limit, name)), _runs(_frames_naming(report.too_fast, name)))
                 for name in names}
    handoffs = [i for i in range(1, len(frames)) if solution.links[i] != solution.links[i - 1]]
    headline = title or robot.name
    draw.text((left, 8), headline, fill=(20, 20, 20), font=font)
    counts = report.counts()
    draw.text((left, 30), f"{report.frames} frames, {report.converged} converged; flagged: {counts['flagged']} "
              f"(not converged {counts['not_converged']}, near a limit {counts['near_limit']}, "
              f"too fast {counts['too_fast']}, branch flips {counts['flips']}"
              + (f", in collision {counts['in_collision']})" if traced else ")"), fill=(60, 60, 60), font=small)
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
        # a joint locked by its limits (lower == upper) still gets a readable strip
        least = 0.1 * (upper - lower) if limited and upper > lower else 0.2
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
        near_runs, fast_runs = per_joint[name]
        for a, b in _runs(getattr(report, "planned", [])):  # under the flags: a plan's frames, every joint
            draw.rectangle([max(left, x_of(a) - bar / 2), y0 + 1, min(plot_right, x_of(b) + bar / 2), y1 - 1], fill=PLANNED_COLOUR)
        for runs, colour in ((whole_pose, NOT_CONVERGED_COLOUR), (near_runs, NEAR_LIMIT_COLOUR), (fast_runs, TOO_FAST_COLOUR)):
            for a, b in runs:
                draw.rectangle([max(left, x_of(a) - bar / 2), y0 + 1, min(plot_right, x_of(b) + bar / 2), y1 - 1], fill=colour)
        points = [(x_of(f), y_of(v)) for f, v in zip(frames, values)]
        if len(points) > 1:
            draw.line(points, fill=(30, 90, 200), width=2)
        else:
            draw.ellipse([points[0][0] - 2, points[0][1] - 2, points[0][0] + 2, points[0][1] + 2], fill=(30, 90, 200))
        used_low, used_high = float(values.min()), float(values.max())
        y_high, y_low = y_of(used_high), y_of(used_low)
        spread = max(0.0, 14.0 - (y_low - y_high)) / 2  # two labels closer than a line of text move apart
        for value, y, label_y in ((used_high, y_high, y_high - spread), (used_low, y_low, y_low + spread)):
            for x in range(int(plot_right - 36), int(plot_right), 4):  # the range actually used, where it is
                draw.line([x, y, x + 2, y], fill=(110, 110, 120))
            text = f"{value * scale:.1f}{unit}"
            right_edge = plot_right - 40
            box = draw.textbbox((0, 0), text, font=small)
            draw.text((right_edge - (box[2] - box[0]), label_y - (box[3] + box[1]) / 2), text, fill=(60, 60, 70), font=small)
        g0 = width - right - gauge
        draw.rectangle([g0, y0, width - right, y1], fill=(226, 230, 236), outline=(150, 150, 160))
        if limited:
            def g_of(value, y0=y0, y1=y1, lower=lower, upper=upper):
                if upper <= lower:
                    return 0.5 * (y0 + y1)
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
    if traced:
        _clearance_strip(draw, report, frames, x_of, left, plot_right, top + len(names) * strip + 6,
                         top + (len(names) + 1) * strip - 6, bar, font, small)
    axis_y = top + strip * (len(names) + traced)
    for i in handoffs:
        label = "hand-off to " + ", ".join(solution.links[i])
        draw.text((x_of(frames[i]) + 4, top - 14), label, fill=(60, 60, 60), font=small)
    for tick in frame_ticks(int(first), int(last)):
        x = x_of(tick)
        draw.line([x, axis_y - 4, x, axis_y + 2], fill=(80, 80, 80))
        draw.text((x - 10, axis_y + 6), f"{tick}", fill=(60, 60, 60), font=small)
    legend_y = axis_y + 22
    x = left
    for colour, words in ((NOT_CONVERGED_COLOUR, "not converged or branch flip (all joints)"),
                          (TOO_FAST_COLOUR, "too fast (that joint)"), (NEAR_LIMIT_COLOUR, "near a limit (that joint)")):
        draw.rectangle([x, legend_y + 2, x + 14, legend_y + 12], fill=colour, outline=(150, 150, 150))
        draw.text((x + 18, legend_y), words, fill=(60, 60, 60), font=small)
        x += 26 + 7 * len(words)
    legend = ("Frame axis below.  Blue: joint value; dashed marks: the lowest and highest value used.  "
              "Red line: a limit in view.  Dashes: hand-off.")
    draw.text((left, legend_y + 16), legend, fill=(60, 60, 60), font=small)
    draw.text((left, legend_y + 30), "Right column: the joint's whole range, and the part this shot uses.", fill=(60, 60, 60), font=small)
    for k, line in enumerate(rows):
        y = legend_y + 48 + 16 * k
        if k == 0:
            draw.rectangle([left - 18, y + 2, left - 4, y + 12], fill=PLANNED_COLOUR, outline=(150, 150, 150))
        draw.text((left, y), line, fill=(60, 60, 60), font=small)
    from ..core.files import write_with

    return write_with(Path(path), lambda temporary: image.save(temporary, format="PNG"), "--report")


def segment_lines(report) -> list[str]:
    """The report's segment rows (Plan Between Keys), one line each: the planned segments with
    their least clearance, and any flag."""
    lines = []
    for row in getattr(report, "segments", []):
        if row["mode"] != "planned" and not row.get("flag"):
            continue
        least = row.get("least_clearance_m")
        words = f"frames {row['first']}–{row['last']}: {row['mode']}"
        if row["mode"] == "planned":
            words += ", least clearance " + ("not measured" if least is None else f"{least * 1000:.1f} mm")
        if row.get("flag"):
            words += f"; {row['flag']}"
        lines.append(words)
    return lines


def _clearance_strip(draw, report, frames, x_of, left, right, y0, y1, bar, font, small) -> None:
    """Each frame's smallest clearance (mm) as a trace, the margin as a dashed green line, zero
    (touching) as a red line, frames in collision shaded."""
    values = [c for c in report.clearance if c is not None]
    margin = float(report.margin_m or 0.0)
    low = min([0.0, *values]) * 1000.0
    high = max([margin * 2.0, *values]) * 1000.0
    high = max(high, low + 1.0)
    pad = 0.1 * (high - low)
    low, high = low - pad, high + pad

    def y_of(mm):
        return y1 - (y1 - y0) * (float(mm) - low) / (high - low)

    draw.rectangle([left, y0, right, y1], fill=(246, 246, 248), outline=(200, 200, 205))
    for a, b in _runs(sorted(report.in_collision)):
        draw.rectangle([max(left, x_of(a) - bar / 2), y0 + 1, min(right, x_of(b) + bar / 2), y1 - 1], fill=NOT_CONVERGED_COLOUR)
    draw.line([left, y_of(0.0), right, y_of(0.0)], fill=(200, 60, 60), width=2)
    for x in range(int(left), int(right), 10):
        draw.line([x, y_of(margin * 1000.0), min(x + 5, right), y_of(margin * 1000.0)], fill=(40, 150, 60), width=2)
    points = [(x_of(f), y_of(c * 1000.0)) for f, c in zip(frames, report.clearance) if c is not None]
    if len(points) > 1:
        draw.line(points, fill=(30, 90, 200), width=2)
    elif points:
        draw.ellipse([points[0][0] - 2, points[0][1] - 2, points[0][0] + 2, points[0][1] + 2], fill=(30, 90, 200))
    draw.text((8, y0 + 4), "clearance", fill=(20, 20, 20), font=font)
    draw.text((8, y0 + 26), f"margin {margin * 1000:.1f} mm (dashed)", fill=(90, 90, 90), font=small)
    least = min(values) * 1000.0 if values else float("nan")
    draw.text((8, y0 + 42), f"least {least:.1f} mm", fill=(90, 90, 90), font=small)


#: Band colours (RGBA, over the strip's background).
#: Frames a plan keyed (Plan Between Keys): a pale green band under the flags.
PLANNED_COLOUR = (60, 170, 90, 45)
NOT_CONVERGED_COLOUR = (220, 40, 40, 80)
TOO_FAST_COLOUR = (245, 140, 0, 110)
NEAR_LIMIT_COLOUR = (150, 60, 200, 70)


def frame_ticks(first: int, last: int, most: int = 10) -> list[int]:
    """Evenly spaced, round frame numbers (a step of 1, 2 or 5 times a power of ten) across
    first..last, at most about `most` of them, with the first and last frame where they fit."""
    span = max(last - first, 1)
    step = 1
    for power in range(0, 8):
        for factor in (1, 2, 5):
            step = factor * 10 ** power
            if span / step <= most:
                break
        else:
            continue
        break
    ticks = list(range(-(-first // step) * step, last + 1, step))
    if not ticks or ticks[0] - first > 0.4 * step:
        ticks.insert(0, first)
    if last - ticks[-1] > 0.4 * step:
        ticks.append(last)
    return ticks


def _frames_naming(flags: dict[int, list[str]], name: str) -> list[int]:
    return sorted(frame for frame, names in flags.items() if name in names)


def _runs(frames: list[int]) -> list[tuple[int, int]]:
    """[1, 2, 3, 7] -> [(1, 3), (7, 7)]: one band per run of frames, not one per frame."""
    runs: list[list[int]] = []
    for frame in frames:
        if runs and frame == runs[-1][1] + 1:
            runs[-1][1] = frame
        else:
            runs.append([frame, frame])
    return [(a, b) for a, b in runs]


# ---- limits: velocity and acceleration against their limits (`bake --limits-report`) -------------

def draw_limits_report(path: str | Path, report, joints, retimed=None, title: str = "", prismatic=()) -> Path:
    """Per joint, velocity (left) and acceleration (right) over time in seconds against their
    limits after the margin (red lines), frames over a limit shaded; with `retimed` (a
    `core.shot.retime.RetimeResult`) its traces too, in green, on the same time axis, so both timings
    show. PIL only. Joints the shot does not move are left out."""
    from ..core.files import write_with
    from ..core.shot.limits import derivatives

    limits = report.limits
    q = np.asarray(joints, dtype=float)
    moving = np.flatnonzero(np.ptp(q, axis=0) > 1e-9) if len(q) > 1 else np.arange(q.shape[1])
    rows = list(moving) or [0]
    fps = report.fps
    times = (report.frames - report.frames[0]) / fps
    d = report.derivatives
    after = derivatives(retimed.joints, retimed.fps) if retimed is not None else None
    after_times = np.arange(retimed.frame_count) / retimed.fps if retimed is not None else None
    span = max(float(times[-1]) if len(times) else 0.0, retimed.duration_s if retimed is not None else 0.0, 1e-6)

    width, strip, left, gap, right, top, bottom = 1200, 92, 170, 40, 20, 78, 64
    panel = (width - left - gap - right) // 2
    height = top + strip * len(rows) + bottom
    image, draw, font, small = _canvas(width, height)
    draw.text((left, 8), title or "velocity and acceleration against their limits", fill=(20, 20, 20), font=font)
    counts = ", ".join(f"{kind} {len(report.violations[kind])} joint{'' if len(report.violations[kind]) == 1 else 's'}"
                       for kind in ("velocity", "acceleration", "jerk"))
    timing = f"baked {times[-1]:.2f} s at {fps:g} fps"
    if retimed is not None:
        timing += f"; retimed (green) {retimed.duration_s:.2f} s, shortest executable {retimed.optimal_duration_s:.2f} s"
    draw.text((left, 30), f"{timing}.  Over a limit: {counts}.  Margin {limits.margin_percent:g} %.", fill=(60, 60, 60),
              font=small)
    draw.text((left, 52), "velocity", fill=(40, 40, 40), font=font)
    draw.text((left + panel + gap, 52), "acceleration", fill=(40, 40, 40), font=font)
    flagged = {kind: {v.joint: set(v.frames) for v in report.violations[kind]} for kind in ("velocity", "acceleration")}
    frame_index = {int(round(f)): i for i, f in enumerate(report.frames)}

    for row, j in enumerate(rows):
        name = limits.joint_names[j]
        prismatic_unit = "m" if name in prismatic else "rad"
        y0, y1 = top + row * strip + 6, top + (row + 1) * strip - 6
        draw.text((8, y0 + 4), name, fill=(20, 20, 20), font=font)
        for column, kind in enumerate(("velocity", "acceleration")):
            x0 = left + column * (panel + gap)
            x1 = x0 + panel
            values = getattr(d, kind)[:, j]
            limit = float(limits.effective(kind)[j])
            traces = [values] + ([getattr(after, kind)[:, j]] if after is not None else [])
            high = max(float(np.abs(t).max(initial=0.0)) for t in traces)
            if np.isfinite(limit):
                high = max(high, limit)
            high = max(high * 1.15, 1e-9)

            def x_of(t, x0=x0):
                return x0 + panel * float(t) / span

            def y_of(v, y0=y0, y1=y1, high=high):
                return (y0 + y1) / 2 - (y1 - y0) / 2 * float(v) / high

            draw.rectangle([x0, y0, x1, y1], fill=(246, 246, 248), outline=(200, 200, 205))
            draw.line([x0, y_of(0), x1, y_of(0)], fill=(205, 205, 210))
            for frame in sorted(flagged[kind].get(name, ())):
                i = frame_index.get(frame)
                if i is not None:
                    x = x_of(times[i])
                    draw.rectangle([x - 1.5, y0, x + 1.5, y1], fill=(220, 40, 40, 60))
            if np.isfinite(limit):
                for sign in (1, -1):
                    draw.line([x0, y_of(sign * limit), x1, y_of(sign * limit)], fill=(200, 60, 60), width=2)
                draw.text((x1 - 110, y_of(limit) - 14), f"limit {limit:.3g} {prismatic_unit}/s{'^2' if column else ''}",
                          fill=(170, 50, 50), font=small)
            else:
                draw.text((x1 - 80, y0 + 2), "no limit set", fill=(120, 120, 130), font=small)
            step = max(1, len(values) // panel)
            points = [(x_of(t), y_of(v)) for t, v in zip(times[::step], values[::step])]
            if len(points) > 1:
                draw.line(points, fill=(30, 90, 200), width=2)
            if after is not None:
                later = getattr(after, kind)[:, j]
                step = max(1, len(later) // panel)
                points = [(x_of(t), y_of(v)) for t, v in zip(after_times[::step], later[::step])]
                if len(points) > 1:
                    draw.line(points, fill=(30, 160, 70), width=2)
        worst = report.worst["velocity"][j], report.worst["acceleration"][j]
        draw.text((8, y0 + 26), f"worst speed {worst[0]:.3g} {prismatic_unit}/s", fill=(90, 90, 90), font=small)
        draw.text((8, y0 + 42), f"worst acc. {worst[1]:.3g} {prismatic_unit}/s^2", fill=(90, 90, 90), font=small)
    axis_y = top + strip * len(rows)
    for column in range(2):
        x0 = left + column * (panel + gap)
        for tick in np.linspace(0.0, span, 6):
            x = x0 + panel * tick / span
            draw.line([x, axis_y - 4, x, axis_y + 2], fill=(80, 80, 80))
            draw.text((x - 10, axis_y + 6), f"{tick:.1f}", fill=(60, 60, 60), font=small)
    legend = ("seconds.  Blue: the baked shot.  Green: retimed.  Red lines: limit after the margin.  "
              "Red bands: frames over it.")
    draw.text((left, axis_y + 24), legend, fill=(60, 60, 60), font=small)
    return write_with(Path(path), lambda temporary: image.save(temporary, format="PNG"), "--limits-report")
