"""Shared by every subcommand: the one-line parser, joint values from the command line, where
the answer and the warnings go, and numbers from options."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import warnings

import numpy as np

from ..core.errors import KinemaError, printable


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the CLI's error contract), and a negative number
    in any notation (`-1e-5`, `-.5`, `-inf`) is a value, not an option: `--target 0.4 -1e-5 ...`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.I)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_joint_values(items: list[str] | None) -> dict[str, float]:
    """NAME=VALUE pairs -> {name: value}; bad pairs are a `KinemaError`."""
    values: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.rpartition("=")  # the last '=': a joint may be called "a=b", a number never is
        if not sep or not name:
            raise KinemaError(f"joint value '{item}' is not NAME=VALUE")
        values[name] = number_in_text(text, f"joint value '{item}'")
    return values


def number_in_text(text: str, where: str) -> float:
    """A finite number written as `text` (a joint value, a CSV field), else one line saying
    `where` it was and why not."""
    try:
        value = float(text)
    except ValueError:
        raise KinemaError(f"{where}: '{text}' is not a number") from None
    if not math.isfinite(value):
        raise KinemaError(f"{where}: '{text}' is not a finite number")
    return value


#: Where a command's answer and its own warnings go while it runs. Under `own_lines_only` the
#: process's stdout and stderr belong to Blender, JAX and PyRoki (which log from C and Python at
#: times we cannot predict) and are dropped; the command writes to saved copies of the real ones.
_answer = None
_notes = None


def emit(args, payload: dict, text: str | list[str]) -> None:
    """Print the JSON object with --json, else the human text, terminal-safe: given as a list of
    lines, a newline inside one (from a name) is shown as an escape rather than starting a line."""
    out = _answer or sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(payload, allow_nan=False), file=out)
    else:
        lines = text if isinstance(text, list) else text.split("\n")
        print("\n".join(printable(line) for line in lines), file=out)
    out.flush()


def notes_stream():
    """The stream for the command's own lines on stderr (warnings, the progress bar)."""
    return _notes or sys.stderr


def warn(text: str) -> None:
    """One warning line on stderr: the command changed something the user gave it."""
    stream = notes_stream()
    print(f"kinema-nodes: warning: {printable(text, newlines=True)}", file=stream)
    stream.flush()


@contextlib.contextmanager
def own_lines_only(verbose: bool = False):
    """stdout carries the answer and stderr the command's own lines, nothing else.

    Whatever else is written to fd 1 or fd 2 (Blender's `Info: Saved as`, EGL errors, render
    paths; JAX and PyRoki warnings) is dropped; with `verbose` it goes to stderr instead."""
    global _answer, _notes
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    _answer = os.fdopen(os.dup(saved_out), "w")
    _notes = os.fdopen(os.dup(saved_err), "w")
    os.dup2(saved_err if verbose else devnull, 1)
    if not verbose:
        os.dup2(devnull, 2)
    from ..core import errors

    errors.NOTES = _notes  # Kinema's own notes (a corrupt cache entry, ...) still reach the terminal
    show_warning = warnings.showwarning
    warnings.showwarning = _kinema_warnings_to(_notes, show_warning)
    try:
        yield
    finally:
        errors.NOTES = None
        warnings.showwarning = show_warning
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for stream in (_answer, _notes):
            stream.close()
        _answer = _notes = None
        for fd in (saved_out, saved_err, devnull):
            os.close(fd)


def _kinema_warnings_to(stream, other):
    """A `warnings.showwarning` that prints Kinema's own warnings (a skipped preset file, ...)
    as one line on `stream`, and leaves everyone else's to `other`."""
    def show(message, category, filename, lineno, file=None, line=None):
        if category.__module__.startswith(__package__.rpartition(".")[0] + "."):
            print(f"kinema-nodes: warning: {printable(str(message))}", file=stream, flush=True)
        else:
            other(message, category, filename, lineno, file, line)
    return show


def finite_number(value: float, option: str, *, low: float, high: float) -> float:
    """An option's number, refused (one line) when NaN, inf or outside low..high."""
    value = float(value)
    if not math.isfinite(value):
        raise KinemaError(f"{option} must be a finite number, got {value}")
    if not low <= value <= high:
        raise KinemaError(f"{option} {value:g} is outside {low:g} .. {high:g}")
    return value


def finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


#: How far from unit length a quaternion may be before normalising it earns a warning.
UNIT_QUATERNION_SLACK = 1e-6

#: The largest --budget-ms: a minute per solve (what a bake allows itself).
MAX_BUDGET_MS = 60_000.0


def unit_quaternion(wxyz, where: str) -> tuple[np.ndarray, float]:
    """(the unit quaternion, its given length). Scaled by its largest component first, so
    (1e200, 1e200, 0, 0) normalises instead of overflowing; zero, NaN or inf is a KinemaError."""
    q = np.asarray(wxyz, dtype=float)
    if not np.all(np.isfinite(q)):
        raise KinemaError(f"{where}: the quaternion {' '.join(f'{v:g}' for v in q)} is not finite (NaN or inf)")
    biggest = float(np.max(np.abs(q)))
    if biggest == 0.0 or not np.isfinite(biggest):
        raise KinemaError(f"{where}: the quaternion qw,qx,qy,qz has zero length")
    scaled = q / biggest
    norm = float(np.linalg.norm(scaled))
    return scaled / norm, norm * biggest


def target_pose(values, option: str = "--target") -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
    """X Y Z QW QX QY QZ from the command line: finite position, unit quaternion (a warning
    when it was not unit length and has been normalised)."""
    position = np.asarray(values[:3], dtype=float)
    if not np.all(np.isfinite(position)):
        raise KinemaError(f"{option}: the position {' '.join(f'{v:g}' for v in position)} is not finite (NaN or inf)")
    wxyz, length = unit_quaternion(values[3:7], option)
    if abs(length - 1.0) > UNIT_QUATERNION_SLACK:
        warn(f"{option}: the quaternion had length {length:.9g}, not 1; normalised to "
             f"{' '.join(f'{v:.6f}' for v in wxyz)}")
    return tuple(float(v) for v in position), tuple(float(v) for v in wxyz)


def read_small_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or one KinemaError line naming it as
    `what` (a FIFO or device is refused before it is opened; a file grown past the limit since
    the stat is refused too, never read whole)."""
    import stat

    try:
        info = path.stat()
    except OSError as exc:
        raise KinemaError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise KinemaError(f"{what} '{path}' is not a regular file")
    if info.st_size > limit:
        raise KinemaError(f"{what} '{path}' is {info.st_size / 1e6:.1f} MB; at most {limit // (1024 * 1024)} MiB is read")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise KinemaError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    if len(data) > limit:
        raise KinemaError(f"{what} '{path}' is over {limit // (1024 * 1024)} MiB; at most that much is read")
    return data
