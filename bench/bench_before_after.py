"""Before and after a change, side by side in one run: the live frame (bench_live.py) and the
solvers (`kinema-nodes bench`), each checkout in its own processes, taking turns round by round so
both see the same machine load.

    python bench/bench_before_after.py REV [--rounds 3] [--frames 200] [--n 300] [--no-write]

REV is the "before" commit: it is checked out in a temporary git worktree (removed after). Each
round runs, for before and then after (the order flips every round): bench_live.py --no-write
(its side-by-side block: Kinema NumPy and Blender's IK constraint per frame_set, CPU ms), and
`python -m kinema_nodes bench ROBOT --json` on the NumPy solver, tracking and cold, for each robot.
The table gives each figure's median over the rounds. Writes its section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import publish  # noqa: E402

SECTION = "bench_before_after"
ROBOTS = ("ur5", "panda")
SIDE_BY_SIDE = re.compile(r"Kinema NumPy ([0-9.]+) \(([0-9.]+)\), Blender IK constraint ([0-9.]+) \(([0-9.]+)\)")


def _run(checkout: Path, args: list[str], timeout: float) -> str:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def live(checkout: Path, frames: int) -> dict:
    text = _run(checkout, ["bench/bench_live.py", "--frames", str(frames), "--no-write"], 1200)
    found = SIDE_BY_SIDE.search(text)
    if found is None:
        raise SystemExit(f"{checkout}: bench_live.py printed no side-by-side line")
    kinema, kinema_p95, blender, blender_p95 = map(float, found.groups())
    return {"live NumPy ms/frame (CPU)": kinema, "live NumPy p95": kinema_p95, "Blender IK ms/frame (CPU)": blender,
            "ratio to Blender IK": kinema / blender}


def solvers(checkout: Path, n: int) -> dict:
    figures = {}
    for robot in ROBOTS:
        for mode in ("tracking", "cold"):
            text = _run(checkout, ["-m", "kinema_nodes", "bench", robot, "--n", str(n), "--mode", mode, "--solver", "numpy",
                                   "--json"], 1200)
            result = json.loads(text)
            figures[f"{robot} {mode} median ms"] = result["median_ms"]
            figures[f"{robot} {mode} success"] = result["success_rate"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the 'before' commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--n", type=int, default=300, help="targets per solver row")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    before_rev = subprocess.run(["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
    load_before = os.getloadavg()
    rows: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory() as scratch:
        before = Path(scratch) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.rev], cwd=ROOT, check=True, capture_output=True)
        try:
            for round_ in range(args.rounds):
                order = [("before", before), ("after", ROOT)]
                if round_ % 2:
                    order.reverse()
                for label, checkout in order:
                    for name, value in {**live(checkout, args.frames), **solvers(checkout, args.n)}.items():
                        rows[label].setdefault(name, []).append(value)
                print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    load_after = os.getloadavg()
    lines = [
        "## Before and after a change (`bench/bench_before_after.py`)",
        "",
        f"Command: `python bench/bench_before_after.py {args.rev} --rounds {args.rounds} --frames {args.frames} --n {args.n}`; "
        f"before = {before_rev}, after = {head}; load average before {', '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {', '.join(f'{x:.2f}' for x in load_after)}. Median over the rounds; before and after take turns each round.",
        "",
        "| figure | before | after | after / before |",
        "|---|---|---|---|",
    ]
    for name in rows["before"]:
        b, a = statistics.median(rows["before"][name]), statistics.median(rows["after"][name])
        ratio = f"{a / b:.2f}" if b else "—"
        lines.append(f"| {name} | {b:.4g} | {a:.4g} | {ratio} |")
    return publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
