"""The files an MJCF model makes MuJoCo read, checked before MuJoCo reads them.

MuJoCo's compiler follows ``<include file=...>`` and reads every asset a model names (meshes,
textures, height fields, skins, attached models) from the paths the file gives, absolute or
through ``..``, and blocks forever on a FIFO. So before the compile, the include tree is walked
here with the one XML reader (`xml_reading`: regular files, size cap, no DOCTYPE in any
encoding), and every file it names must lie inside the robot's folders (`robot_folders`: the
model's folder, the one above, its ROS package and declared packages) after ``..`` and symlinks
are followed, and must be a regular file if it exists (a missing one is MuJoCo's to report).

Paths resolve as MuJoCo resolves them: includes against the main model's folder; meshes, skins
and height fields against ``meshdir``, textures against ``texturedir``, either falling back to
``assetdir`` (each relative to the main model's folder), and attached models against ``assetdir``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import RobotFileError
from .xml_reading import parse_xml, read_xml_file

#: Most files one model may include (MuJoCo refuses an include cycle itself; this caps fan-out).
MAX_INCLUDES = 500
#: Largest included MJCF file.
MAX_INCLUDE_BYTES = 32 * 1024 * 1024

#: Most height-field samples (nrow x ncol, summed over the model) and texture pixels MuJoCo may
#: allocate, checked from the attributes and from the files' headers before MuJoCo compiles: a
#: `<hfield nrow="100000" ncol="100000">` asks it for 40 GB. 4096 x 4096 samples is 64 MB of floats.
MAX_HFIELD_SAMPLES = 4096 * 4096
MAX_TEXTURE_PIXELS = 64 * 1024 * 1024

_TEXTURE_FILES = ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")
_ASSET_FOLDER = {"mesh": "meshdir", "skin": "meshdir", "hfield": "meshdir", "texture": "texturedir", "model": None}


def _compiler_folders(roots) -> dict[str, str]:
    folders: dict[str, str] = {}
    for root in roots:
        for compiler in root.iter("compiler"):
            for name in ("meshdir", "texturedir", "assetdir"):
                value = compiler.get(name)
                if value is not None:
                    folders[name] = value
    return folders


def _named_files(roots, folders: dict[str, str]):
    """(element tag, attribute, the path MuJoCo reads) for every asset file the model names."""
    for root in roots:
        for element in root.iter(*_ASSET_FOLDER):
            for attribute in _TEXTURE_FILES if element.tag == "texture" else ("file",):
                name = element.get(attribute)
                if not name:
                    continue
                kind = _ASSET_FOLDER[element.tag]
                folder = folders.get(kind) if kind else None
                folder = folders.get("assetdir", "") if folder is None else folder
                yield element.tag, attribute, name, os.path.join(folder, name)


def check_mjcf_files(path: str | Path, search=None) -> list[Path]:
    """Walk the include tree of the MJCF at `path` and check every file it names (see the module
    docstring). Returns the included files; raises `RobotFileError` (one line) for the first
    that breaks the rule."""
    from .packages import PackageSearchPath
    from .mesh_paths import robot_folders

    path = Path(path)
    base = path.absolute().parent
    search = search or PackageSearchPath(robot_file=path)
    folders = robot_folders(path, search=search)

    def inside(name: str, what: str) -> Path:
        candidate = Path(name) if os.path.isabs(name) else base / name
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError, ValueError):
            raise RobotFileError(path, f"MJCF {what} '{name}' is not a usable path") from None
        if not any(real == folder or folder in real.parents for folder in folders):
            raise RobotFileError(path, f"MJCF {what} '{name}' is {real}, outside the robot's folders "
                                       f"({', '.join(str(f) for f in folders)}); refused")
        try:
            info = os.stat(real)
        except OSError:
            return real  # missing: MuJoCo says so
        if not stat.S_ISREG(info.st_mode):
            raise RobotFileError(path, f"MJCF {what} '{name}' is not a regular file (a folder, device, pipe or socket); refused")
        return real

    roots = []
    included: list[Path] = []
    pending = [(path, None)]
    while pending:
        current, name = pending.pop()
        if name is not None:
            current = inside(name, "<include>")
            if not current.exists():
                continue
            included.append(current)
            if len(included) > MAX_INCLUDES:
                raise RobotFileError(path, f"MJCF includes more than {MAX_INCLUDES} files; refused")
        what = f"MJCF '{current.name}'"
        root = parse_xml(read_xml_file(current, MAX_INCLUDE_BYTES, what, source=path), path, what)
        roots.append(root)
        pending.extend((None, element.get("file")) for element in root.iter("include") if element.get("file"))
    files = {}
    for tag, attribute, name, joined in _named_files(roots, _compiler_folders(roots)):
        files[(tag, attribute, name)] = inside(joined, f"<{tag} {attribute}>")
    _check_sizes(path, roots, files)
    return included


def _whole(path, text, what: str) -> int:
    try:
        values = [int(v) for v in str(text).split()]
    except ValueError:
        raise RobotFileError(path, f"MJCF {what} '{str(text)[:40]}' is not a whole number") from None
    if len(values) != 1 or values[0] < 0:
        raise RobotFileError(path, f"MJCF {what} '{str(text)[:40]}' is not a whole number")
    return values[0]


def _image_size(real: Path, binary_ok: bool) -> tuple[int, int] | None:
    """(columns, rows) from a PNG's header or MuJoCo's custom height-field file (int32 nrow,
    ncol), read from the first 24 bytes only; None when it is neither (MuJoCo then says so)."""
    try:
        with open(real, "rb") as handle:
            head = handle.read(24)
    except OSError:
        return None
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if binary_ok and len(head) >= 8 and not real.suffix.lower() == ".png":
        rows, columns = int.from_bytes(head[0:4], "little", signed=True), int.from_bytes(head[4:8], "little", signed=True)
        return (max(columns, 0), max(rows, 0))
    return None


def _check_sizes(path: Path, roots, files: dict) -> None:
    """Height fields and textures within `MAX_HFIELD_SAMPLES` and `MAX_TEXTURE_PIXELS`, counted
    from their attributes and file headers, before MuJoCo allocates them."""
    samples = pixels = 0
    for root in roots:
        for element in root.iter("hfield", "texture"):
            tag = element.tag
            name = element.get("name") or element.get("file") or "(unnamed)"
            if tag == "hfield":
                rows, columns = (_whole(path, element.get(key, "0"), f"<hfield {key}>") for key in ("nrow", "ncol"))
                if element.get("file") and (tag, "file", element.get("file")) in files:
                    size = _image_size(files[(tag, "file", element.get("file"))], binary_ok=True)
                    if size is not None:
                        columns, rows = size
                samples += rows * columns
                if samples > MAX_HFIELD_SAMPLES:
                    raise RobotFileError(path, f"MJCF <hfield name=\"{name[:60]}\"> of {rows} x {columns} samples takes the model's "
                                               f"height fields over {MAX_HFIELD_SAMPLES:,} samples; refused")
            else:
                width, height = (_whole(path, element.get(key, "0"), f"<texture {key}>") for key in ("width", "height"))
                area = width * max(height, 1) if element.get("builtin") not in (None, "none") else 0
                for attribute in _TEXTURE_FILES:
                    key = (tag, attribute, element.get(attribute))
                    if element.get(attribute) and key in files:
                        size = _image_size(files[key], binary_ok=False)
                        area += size[0] * size[1] if size else 0
                if element.get("type") in ("cube", "skybox") and element.get("builtin") not in (None, "none"):
                    area *= 6
                pixels += area
                if pixels > MAX_TEXTURE_PIXELS:
                    raise RobotFileError(path, f"MJCF <texture name=\"{name[:60]}\"> takes the model's textures over "
                                               f"{MAX_TEXTURE_PIXELS:,} pixels; refused")
