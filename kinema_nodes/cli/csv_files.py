"""The CSV files of `bake` and `demo`: the targets read in, the joint values and targets written out.

Reading is strict and says where: every problem is one line naming the file, the line, the
column and the value. Caps keep a bad or hostile file from taking the machine (all documented in
the README): the file's size, its rows, one field's length, the frames a bake spans, and
Blender's own frame range. A UTF-8 byte-order mark is accepted.

Writing follows the OWASP rule for CSV injection: a name that a spreadsheet would run as a
formula (starting with = + - @) is written quoted, with a leading apostrophe; reading strips it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import KinemaError
from .common import UNIT_QUATERNION_SLACK, number_in_text, read_small_file, warn

CSV_COLUMNS = ("frame", "x", "y", "z", "qw", "qx", "qy", "qz")

#: Caps on a targets CSV (README, "Command line").
MAX_CSV_BYTES = 64 * 1024 * 1024
MAX_CSV_ROWS = 1_000_000
MAX_FIELD_CHARS = 256
#: Frames one bake may span, first row's frame to last row's (every frame between is solved).
MAX_BAKE_FRAMES = 100_000
#: Blender's frame range (MAXFRAME in Blender's DNA_scene_types.h).
BLENDER_MAX_FRAME = 1_048_574

#: What a spreadsheet treats as the start of a formula (OWASP "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@")


@dataclass
class TargetTrack:
    """Target poses per frame, in the robot's root frame (from a CSV or made up by the demo)."""

    frames: np.ndarray  # (F,) int, increasing
    positions: np.ndarray  # (F, 3) metres
    wxyz: np.ndarray  # (F, 4) unit quaternions
    links: list[str] | None  # (F,) link per frame ('' = the --link), or None without a link column
    line_numbers: list[int] | None = None  # (F,) the CSV line of each frame, when read from a file


def spreadsheet_safe(name: str) -> str:
    """A name as a CSV cell a spreadsheet shows rather than runs: `=cmd` becomes `'=cmd`."""
    return "'" + name if name.startswith(FORMULA_STARTS) else name


def from_spreadsheet_safe(cell: str) -> str:
    """Undo `spreadsheet_safe` when reading back."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS) else cell


def _read_text(path: Path) -> str:
    """The file as text: a regular file, at most MAX_CSV_BYTES, UTF-8 (with or without a BOM)."""
    data = read_small_file(path, MAX_CSV_BYTES, "targets")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        index = data[line_start:exc.start].count(b",")
        header = data.split(b"\n", 1)[0].decode("utf-8-sig", "replace").strip().split(",")
        column = header[index].strip().lower() if index < len(header) and line > 1 else f"#{index + 1}"
        raise KinemaError(f"targets '{path}' line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 "
                          f"(save the file as UTF-8)") from None


def read_targets_csv(path: str | Path) -> TargetTrack:
    """Read `frame,x,y,z,qw,qx,qy,qz[,link]`; every problem is a one-line KinemaError naming the
    file, line, column and value. Warns (one line each) when quaternions were normalised or the
    rows were not in frame order."""
    path = Path(path)
    where = f"targets '{path}'"
    reader = csv.reader(io.StringIO(_read_text(path), newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise KinemaError(f"{where} line 1: {exc}") from None
    if header is None:
        raise KinemaError(f"{where} is empty; expected a header {','.join(CSV_COLUMNS)}[,link]")
    header = [h.strip().lower() for h in header]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise KinemaError(f"{where} line 1 lacks column(s) {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}[,link]")
    columns = [header.index(c) for c in CSV_COLUMNS]
    link_column = header.index("link") if "link" in header else None
    rows, links, line_numbers = [], [], []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise KinemaError(f"{where} line {reader.line_num}: {exc}") from None
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(rows) >= MAX_CSV_ROWS:
            raise KinemaError(f"{where} line {line}: more than {MAX_CSV_ROWS:,} rows; at most that many are read")
        for index, cell in enumerate(row):
            if len(cell) > MAX_FIELD_CHARS:
                name = header[index] if index < len(header) else f"#{index + 1}"
                raise KinemaError(f"{where} line {line}, column {name}: a field of {len(cell):,} characters "
                                  f"(at most {MAX_FIELD_CHARS})")
        values = []
        for name, index in zip(CSV_COLUMNS, columns):
            if index >= len(row):
                raise KinemaError(f"{where} line {line}, column {name}: missing (the row has {len(row)} fields)")
            values.append(number_in_text(row[index].strip(), f"{where} line {line}, column {name}"))
        frame = values[0]
        if frame != round(frame):
            raise KinemaError(f"{where} line {line}, column frame: '{row[columns[0]].strip()}' is not a whole number")
        if abs(frame) > BLENDER_MAX_FRAME:
            raise KinemaError(f"{where} line {line}, column frame: {int(frame)} is outside Blender's frame range "
                              f"-{BLENDER_MAX_FRAME:,} .. {BLENDER_MAX_FRAME:,}")
        rows.append(values)
        line_numbers.append(line)
        if link_column is not None:
            links.append(from_spreadsheet_safe(row[link_column].strip()) if link_column < len(row) else "")
    if not rows:
        raise KinemaError(f"{where} has a header but no rows")
    data = np.array(rows)
    quaternions = data[:, 4:8]
    biggest = np.max(np.abs(quaternions), axis=1)
    if np.any(biggest == 0.0):
        line = line_numbers[int(np.flatnonzero(biggest == 0.0)[0])]
        raise KinemaError(f"{where} line {line}, columns qw,qx,qy,qz: the quaternion 0,0,0,0 has zero length")
    scaled = quaternions / biggest[:, None]  # scaled first: (1e200, 1e200, 0, 0) must not overflow the norm
    norms = np.linalg.norm(scaled, axis=1)
    lengths = norms * biggest
    data[:, 4:8] = scaled / norms[:, None]
    unnormalised = [(line_numbers[i], float(lengths[i])) for i in np.flatnonzero(np.abs(lengths - 1.0) > UNIT_QUATERNION_SLACK)]
    frames = data[:, 0].astype(int)
    out_of_order = np.flatnonzero(np.diff(frames) < 0)
    order = np.argsort(frames, kind="stable")
    sorted_frames = frames[order]
    repeated = np.flatnonzero(np.diff(sorted_frames) == 0)
    if len(repeated):
        frame = int(sorted_frames[repeated[0]])
        first, second = sorted(line_numbers[i] for i in np.flatnonzero(frames == frame)[:2])
        raise KinemaError(f"{where} line {second}, column frame: frame {frame} appears twice (also on line {first})")
    span = int(sorted_frames[-1]) - int(sorted_frames[0]) + 1
    if span > MAX_BAKE_FRAMES:
        raise KinemaError(f"{where}: frames {int(sorted_frames[0])} .. {int(sorted_frames[-1])} span {span:,} frames; "
                          f"a bake spans at most {MAX_BAKE_FRAMES:,}")
    if unnormalised:
        line, length = unnormalised[0]
        more = f" and {len(unnormalised) - 1} more row(s)" if len(unnormalised) > 1 else ""
        warn(f"{where}: quaternion not unit length on line {line} (length {length:.9g}){more}; normalised")
    if len(out_of_order):
        i = int(out_of_order[0])
        warn(f"{where}: rows not in frame order (line {line_numbers[i + 1]} has frame {frames[i + 1]} after frame "
             f"{frames[i]}); sorted by frame")
    data = data[order]
    return TargetTrack(sorted_frames, data[:, 1:4], data[:, 4:8], [links[i] for i in order] if link_column is not None else None,
                       [line_numbers[i] for i in order])


def name_cell(name: str) -> str:
    """A name as one CSV cell: quoted where the csv rules need it, and a name that starts like a
    formula is prefixed with an apostrophe *and* quoted (OWASP), so no spreadsheet runs it."""
    safe = spreadsheet_safe(name)
    if safe != name or any(c in safe for c in ',"\r\n') or safe != safe.strip():
        return '"' + safe.replace('"', '""') + '"'
    return safe


def write_csv_file(path: Path, text: str) -> None:
    """The one place these CSVs reach the disk: whole or not at all (core.files: a temporary in
    the same folder, fsynced, then moved over the old file; a full disk is one line)."""
    from ..core.files import write_text

    write_text(Path(path), text, "CSV")


def targets_csv_text(track: TargetTrack) -> str:
    lines = [",".join([*CSV_COLUMNS, *(["link"] if track.links is not None else [])])]
    for i, frame in enumerate(track.frames):
        cells = [str(int(frame)), *(f"{v:.9g}" for v in track.positions[i]), *(f"{v:.9g}" for v in track.wxyz[i])]
        if track.links is not None:
            cells.append(name_cell(track.links[i]))
        lines.append(",".join(cells))
    return "\r\n".join(lines) + "\r\n"


def joints_csv_text(joint_names: list[str], frames: np.ndarray, joints: np.ndarray) -> str:
    """Header `frame` then one column per joint (URDF names); radians or metres per row."""
    lines = [",".join(["frame", *(name_cell(n) for n in joint_names)])]
    lines += [",".join([str(int(frame)), *(f"{v:.10g}" for v in q)]) for frame, q in zip(frames, joints)]
    return "\r\n".join(lines) + "\r\n"


def write_targets_csv(path: Path, track: TargetTrack) -> None:
    write_csv_file(path, targets_csv_text(track))


def write_joints_csv(path: Path, joint_names: list[str], frames: np.ndarray, joints: np.ndarray) -> None:
    """Header `frame` then one column per joint (URDF names), radians/metres."""
    write_csv_file(path, joints_csv_text(joint_names, frames, joints))
