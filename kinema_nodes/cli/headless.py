"""Blender without a window for the commands that need it (`import`, `configs`, `bake`, `demo`):
the add-on registered once per process, Blender's own log lines kept off the answer, and .blend
files saved whole or not at all."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from ..core.errors import KinemaError


_REGISTERED = False


def headless_blender(empty_file: bool = True):
    """The bpy module with Kinema Nodes registered (once per process) and, by default, an empty file."""
    global _REGISTERED
    from ..core.solve import wait_for_kernel_build

    wait_for_kernel_build()  # bpy loading while the kernel thread imports numba deadlocks (see its docstring)
    # Blender logs start-up notes (colour management, ...) as it imports and loads its first file.
    with _silenced():
        try:
            import bpy
        except ImportError:
            bpy = None
        if bpy is not None:
            if not _REGISTERED and not hasattr(bpy.types.Armature, "kinema"):
                from .. import register

                register()
            _REGISTERED = True
            if empty_file:
                bpy.ops.wm.read_homefile(use_empty=True)
    if bpy is None:
        raise KinemaError("this command needs Blender's Python module: pip install bpy (see the README)")
    return bpy


@contextlib.contextmanager
def _silenced():
    """Blender's start-up log lines go nowhere: stdout is the answer, stderr is for one-line errors."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


@contextlib.contextmanager
def blender_output_to_stderr():
    """Blender prints progress on the process's stdout; keep stdout for the command's answer."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def blend_path(path: str | Path) -> Path:
    """An --out argument as an absolute .blend path (checked before any work is done)."""
    path = Path(path).resolve()
    if path.suffix.lower() != ".blend":
        raise KinemaError(f"--out '{path}' must end in .blend")
    from ..core.files import check_output_path

    return check_output_path(path, "--out")


def save_blend(bpy, path: str | Path) -> Path:
    """Save the open file to `path` whole or not at all: Blender saves to a temporary name in
    the same folder, the result is checked (a .blend that ends in its ENDB block) and fsynced,
    and only then moved over `path`. A full disk leaves an existing `path` as it was, and no
    `.blend1` backup or `@` temporary is left behind."""
    from ..core.files import check_output_path, write_with

    path = check_output_path(blend_path(path), "--out")

    def save(temporary: Path) -> None:
        try:
            with blender_output_to_stderr():
                bpy.ops.wm.save_as_mainfile(filepath=str(temporary), check_existing=False, compress=True, copy=True)
        except RuntimeError as exc:
            raise KinemaError(f"cannot save '{path}': {str(exc).strip().splitlines()[-1]}; the old file is unchanged") from None
        if not blend_is_whole(temporary):
            raise KinemaError(f"cannot save '{path}': Blender wrote an incomplete file (disk full?); the old file is unchanged")

    return write_with(path, save, "--out", leftovers=("@", "1"))


#: Blender writes compressed .blend files in zstd's seekable format; its footer ends with this.
_SEEKABLE_MAGIC = (0x8F92EAB1).to_bytes(4, "little")


def blend_is_whole(path: str | Path) -> bool:
    """True when `path` is a complete .blend: the BLENDER header, and an ENDB block at the end
    (through zstd when compressed). A truncated save fails this."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            handle.seek(0)
            if head == b"\x28\xb5\x2f\xfd":
                try:
                    import zstandard
                except ImportError:
                    return path.stat().st_size > 64  # cannot look inside: trust Blender's own error
                handle.seek(-4, os.SEEK_END)
                if handle.read(4) != _SEEKABLE_MAGIC:  # Blender ends its zstd files with a seek table
                    return False
                handle.seek(0)
                tail, first = b"", b""
                try:
                    reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
                    while chunk := reader.read(1 << 20):
                        first = first or chunk[:7]
                        tail = (tail + chunk)[-64:]
                except zstandard.ZstdError:
                    return False
            else:
                first = handle.read(7)
                handle.seek(max(0, path.stat().st_size - 64))
                tail = handle.read()
    except OSError:
        return False
    return first == b"BLENDER" and b"ENDB" in tail


def parse_resolution(text: str) -> tuple[int, int]:
    """A --resolution argument, WIDTHxHEIGHT, as two pixel counts."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise KinemaError(f"--resolution '{text}' is not WIDTHxHEIGHT") from None
    if not (16 <= width <= 8192 and 16 <= height <= 8192):
        raise KinemaError(f"--resolution '{text}' is outside 16..8192 pixels")
    return width, height
