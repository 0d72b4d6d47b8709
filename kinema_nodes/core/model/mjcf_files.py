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
    for tag, attribute, name, joined in _named_files(roots, _compiler_folders(roots)):
        inside(joined, f"<{tag} {attribute}>")
    return included
