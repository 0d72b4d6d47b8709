"""Files Kinema writes and reads, done so that a failure never leaves half a file.

Every output (the .blend, the joints CSV, the report picture, a preset, a cache entry) is
written to a temporary file in the target's own folder, flushed and fsynced, and only then
moved over the target with `os.replace`, which is atomic on one file system. A full disk, a
killed process or an exception part-way leaves the old file as it was and no temporary behind.

`check_output_path` runs before the long work (a bake, an import) so that an output that
cannot be written is refused in the first second, not after minutes of solving.
`check_input_file` refuses what is not a regular file (a FIFO would block a read forever,
/dev/zero never ends) before anything opens it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import KinemaError

#: Prefix of temporary files, so a leftover (power cut mid-write) is recognisable.
TEMP_PREFIX = ".kinema-tmp-"


class OutputError(KinemaError):
    """An output file that cannot be written; the message names the file."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_output_path(path: str | Path, what: str = "output", make_folder: bool = True) -> Path:
    """Refuse an output path that cannot be written, before any work is done.

    The folder is made when `make_folder` (as the commands always did), then tested by
    creating and removing a temporary file in it: the only test that answers for read-only
    mounts, ACLs and full inode tables alike. An existing target must be a regular file.
    Returns the absolute path.
    """
    path = Path(path).absolute()
    if path.name in ("", ".", ".."):
        raise OutputError(f"{what} '{path}' is not a file name")
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"{what} '{path}' cannot be used: {_reason(exc)}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise OutputError(f"{what} '{path}' is {kind}; refusing to write over it")
    folder = path.parent
    if not folder.is_dir():
        if not make_folder:
            raise OutputError(f"{what} '{path}': the folder '{folder}' does not exist")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{what} '{path}': cannot create the folder '{folder}': {_reason(exc)}") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{what} '{path}': the folder '{folder}' is not writable: {_reason(exc)}") from None
    return path


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def temporary_path(path: str | Path, suffix: str | None = None) -> Path:
    """A fresh, unused name beside `path` (same folder, so `os.replace` is atomic)."""
    path = Path(path)
    handle, name = tempfile.mkstemp(prefix=TEMP_PREFIX + path.stem + "-", suffix=path.suffix if suffix is None else suffix,
                                    dir=path.parent)
    try:
        # mkstemp makes 0600; an output gets the old file's mode, or what open() would give it
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.fchmod(handle, mode)
    finally:
        os.close(handle)
    return Path(name)


def _umask() -> int:
    try:
        with open("/proc/self/status") as status:  # read without changing it (threads)
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def commit(temporary: str | Path, path: str | Path, what: str = "output") -> Path:
    """fsync `temporary` and move it over `path`; on failure remove it and raise OutputError."""
    temporary, path = Path(temporary), Path(path)
    try:
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.getsize(temporary) == 0:
            raise OSError(0, "nothing was written")
        os.replace(temporary, path)
    except OSError as exc:
        _remove_quietly(temporary)
        raise OutputError(f"cannot write {what} '{path}': {_reason(exc)}; the old file is unchanged") from None
    _fsync_folder(path.parent)
    return path


def _temporary_beside(path: Path, what: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return temporary_path(path)
    except OSError as exc:
        raise OutputError(f"cannot write {what} '{path}': {_reason(exc)}") from None


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", what: str = "output", **open_args) -> Iterator:
    """Open a temporary file beside `path` for writing; when the block ends cleanly it is
    flushed, fsynced and moved over `path`. On any error (ENOSPC included) the temporary is
    removed, the old `path` is untouched, and an OSError becomes one-line `OutputError`."""
    path = Path(path)
    if "r" in mode or "a" in mode or "+" in mode:
        raise ValueError("atomic_write only writes whole files")
    if "b" not in mode:
        open_args.setdefault("encoding", "utf-8")
    temporary = _temporary_beside(path, what)
    with _removed_on_failure(temporary, path, what):
        with open(temporary, mode, **open_args) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
    commit(temporary, path, what)


@contextlib.contextmanager
def _removed_on_failure(temporary: Path, path: Path, what: str) -> Iterator:
    """If the block fails, the temporary goes and the old `path` stays; an OSError (ENOSPC
    included) becomes one-line `OutputError`."""
    try:
        yield
    except OSError as exc:
        _remove_quietly(temporary)
        raise OutputError(f"cannot write {what} '{path}': {_reason(exc)}; the old file is unchanged") from None
    except BaseException:
        _remove_quietly(temporary)
        raise


def write_bytes(path: str | Path, data: bytes, what: str = "output") -> Path:
    with atomic_write(path, "wb", what) as handle:
        handle.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, what: str = "output") -> Path:
    with atomic_write(path, "w", what, newline="") as handle:
        handle.write(text)
    return Path(path)


def write_with(path: str | Path, writer: Callable[[Path], object], what: str = "output",
               leftovers: tuple[str, ...] = ()) -> Path:
    """For writers that want a file name, not a handle (Blender's save, Pillow by name):
    `writer(temporary)` writes a temporary beside `path`, which is then fsynced and moved
    over `path`. `leftovers` are suffixes the writer may add to the temporary's name (Blender's
    `@` while saving, `.blend1` backups), removed whatever happens."""
    path = Path(path)
    temporary = _temporary_beside(path, what)
    try:
        with _removed_on_failure(temporary, path, what):
            writer(temporary)
    finally:
        for suffix in leftovers:
            _remove_quietly(Path(str(temporary) + suffix))
    return commit(temporary, path, what)


#: Character and block devices, FIFOs and sockets: never inputs (a read blocks or never ends).
def check_input_file(path: str | Path, what: str = "input") -> Path:
    """Refuse an input that is not a regular file, without opening it (opening a FIFO blocks
    until a writer comes). Returns the path."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise KinemaError(f"{what} '{path}' does not exist") from None
    except (OSError, ValueError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise KinemaError(f"{what} '{path}' cannot be read: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        raise KinemaError(f"{what} '{path}' is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise KinemaError(f"{what} '{path}' is not a regular file (a device, pipe or socket); refused")
    return path


def file_identities(path: str | Path) -> tuple:
    """What makes two paths one file: the path after symlinks and `..` (realpath), and, where
    it exists, its device and inode (a hard link, a bind mount)."""
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except (OSError, ValueError):
        return (("path", real),)
    return (("path", real), ("inode", info.st_dev, info.st_ino))


def refuse_writing_over_inputs(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None]) -> None:
    """Refuse, before any work, an output that is one of the inputs (or another output).

    `outputs` and `inputs` map what the user called each (an option, "shot 'a': targets") to
    its path; None is skipped. Writing the joints over the targets CSV, or a .blend over the
    robot file, would destroy what the user gave us, and the atomic writer would do it without
    complaint; two outputs on one file would leave only the last. Links are resolved first, so a
    symlink or hard link to an input is the input. Linear in the paths (a batch has many)."""
    read: dict[tuple, tuple[str, str | Path]] = {}
    for what, path in inputs.items():
        if path is not None:
            for identity in file_identities(path):
                read.setdefault(identity, (what, path))
    written: dict[tuple, tuple[str, str | Path]] = {}
    for what, path in outputs.items():
        if path is None:
            continue
        identities = file_identities(path)
        for identity in identities:
            if identity in read:
                input_what, input_path = read[identity]
                raise OutputError(f"{what} '{path}' is the {input_what} '{input_path}'; refusing to write over an input")
            if identity in written:
                other_what, other_path = written[identity]
                raise OutputError(f"{what} '{path}' and {other_what} '{other_path}' are the same file; give each its own")
        for identity in identities:
            written[identity] = (what, path)
