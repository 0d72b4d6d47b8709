"""cli.csv_files"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
import numpy as np
from ..core.errors import KinemaError


CSV_COLUMNS = ("frame", "x", "y", "z", "qw", "qx", "qy", "qz")


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
