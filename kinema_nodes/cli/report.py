"""cli.report"""

from __future__ import annotations

import math
from pathlib import Path
import numpy as np
from ..core.errors import KinemaError


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
