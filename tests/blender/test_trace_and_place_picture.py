"""The README's "Trace and place" picture (scripts/render_trace_and_place.py, #30's Show list) is
made by a script that runs real Blender on real arms: the Pick and place preset baked on
example-robot-data's Panda, and the Trace a curve preset on the UR5 stretched out of reach and
coloured by Preview Reach. Run at a low resolution into a temporary folder, in its own process
(as a user runs it), it must give:

- one picture of the size asked, whose two panels each show something: at least 5 % of a
  panel's pixels differ from its most common colour (the background or the floor) by more than
  40 (of 255) in some channel;
- a traced path with samples of three kinds of verdict (reachable, near a singularity or a
  limit, unreachable), by the counts the script reports;
- those verdicts' colours in the traced panel as Blender rendered it (before any legend or label
  is drawn over it): at least 10 pixels each of green, of yellow or orange, and of red, by hue
  (lit by Workbench's studio light, a tube's colour varies across it; the bounds below accept
  it from its shaded side to its highlight).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "render_trace_and_place.py"


def _busy_share(panel: np.ndarray) -> float:
    """Share of a panel's pixels that differ from its most common colour by more than 40."""
    flat = panel.reshape(-1, 3).astype(int)
    colours, counts = np.unique(flat, axis=0, return_counts=True)
    common = colours[np.argmax(counts)]
    return float(np.mean(np.abs(flat - common).max(axis=1) > 40))


def _verdict_pixels(panel: np.ndarray) -> dict[str, int]:
    r, g, b = (panel[..., i].astype(int) for i in range(3))
    return {
        "green": int(np.sum((g > 110) & (g > r + 50) & (g > b + 50))),
        "yellow or orange": int(np.sum((r > 150) & (g > 70) & (r > b + 90) & (g > b + 40) & (r - g < 110))),
        "red": int(np.sum((r > 130) & (r > g + 90) & (r > b + 90))),
    }


@pytest.mark.slow  # about 90 s on a cold machine (bpy, the Panda's meshes, the solver kernel), 15 s warm
def test_the_trace_and_place_picture_shows_both_shots_and_the_three_verdict_colours(tmp_path):
    from PIL import Image

    out, summary, panels = tmp_path / "picture.png", tmp_path / "picture.json", tmp_path / "panels"
    panels.mkdir()
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--resolution", "1000x500", "--json", str(summary),
                           "--panels", str(panels)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    picture = np.asarray(Image.open(out).convert("RGB"))
    shown = json.loads(summary.read_text())
    assert picture.shape == (500, 1000, 3)
    top, bottom = shown["title_height"], 500 - shown["legend_height"]
    for name, panel in (("pick and place", picture[top:bottom, :500]), ("trace", picture[top:bottom, 500:])):
        assert _busy_share(panel) >= 0.05, f"the {name} panel is nearly empty"

    verdicts = shown["trace"]["verdicts"]
    assert verdicts["reachable"] > 0 and verdicts["unreachable"] > 0, verdicts
    assert verdicts["near_singularity"] + verdicts["near_limit"] > 0, verdicts
    assert sum(verdicts.values()) == shown["trace"]["samples"]

    rendered = np.asarray(Image.open(panels / "trace.png").convert("RGB"))
    seen = _verdict_pixels(rendered)
    assert min(seen.values()) >= 10, seen
    assert _verdict_pixels(np.asarray(Image.open(panels / "place.png").convert("RGB")))["green"] < 10  # no path colours there
