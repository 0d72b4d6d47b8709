"""Where a robot's meshes are: the file each URDF mesh reference means, and the folders it must
lie in.

``package://`` references go through the package search path (`packages`); plain ones are tried
against the URDF's folder and its parents. A mesh found outside the robot's folders is refused,
so a URDF cannot name ``/etc/passwd`` as a mesh. The model (`robot.RobotModel.mesh_files`) and
the loader both find meshes here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import RobotFileError
from .file_checks import finite_numbers
from .packages import PackageSearchPath, resolve_package_file


@dataclass(frozen=True)
class MeshRef:
    """A mesh a link shows, with the URDF's filename and the file it resolved to."""

    link: str
    role: str  # "visual" or "collision"
    filename: str
    path: Path
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)



def _mesh_candidates(filename: str, urdf_dir: Path):
    """Every place a plain (not ``package://``) mesh reference may mean, in the order tried."""
    filename = filename.removeprefix("file://")
    candidate = Path(filename)
    if candidate.is_absolute():
        yield candidate
        return
    for folder in [urdf_dir, *urdf_dir.parents]:
        yield folder / candidate


def resolve_mesh_path(filename: str, urdf_dir: Path, search: PackageSearchPath | None = None) -> Path | None:
    """The file a URDF mesh reference means, or None.

    ``package://NAME/rest`` is ``rest`` inside package NAME, found on the package search path
    (`core.model.packages`: declared folders, the URDF's folder and its parents, ROS_PACKAGE_PATH,
    AMENT_PREFIX_PATH), where a folder is package NAME only if it really is one. Plain relative
    paths are tried against the URDF's folder and each of its parents.

    This only finds the file; `load_robot` then refuses one outside the robot's folders
    (see `robot_folders`).
    """
    if filename.startswith("package://"):
        search = search or PackageSearchPath(robot_file=urdf_dir / "robot.urdf")
        try:
            candidate = resolve_package_file(filename, search, urdf_dir)
        except RobotFileError:
            return None
        try:
            return candidate if candidate.is_file() else None
        except (OSError, ValueError):
            return None
    for candidate in _mesh_candidates(filename, urdf_dir):
        try:
            if candidate.is_file():
                return candidate
        except (OSError, ValueError):  # a name too long, a NUL byte: not a file we can use
            continue
    return None


def _package_names(filename: str) -> list[str]:
    """The package a ``package://`` reference names (``package:///a/b`` names ``a``)."""
    if not filename.startswith("package://"):
        return []
    parts = [part for part in filename[len("package://"):].split("/") if part]
    return parts[:1]


def robot_folders(urdf_path: str | Path, packages=(), search: PackageSearchPath | None = None) -> list[Path]:
    """The folders a robot's meshes must lie in (after following ``..`` and symlinks).

    - the folder holding the URDF, and its parent (the usual ``robot/urdf/`` beside
      ``robot/meshes/``);
    - the nearest folder above the URDF holding a ``package.xml`` (the ROS package it is in);
    - the folder of each package its meshes use (``package://NAME/...``) that the package search
      path finds: a folder that really is package NAME (see `core.model.packages`), never one
      that merely happens to be called NAME.

    The file system's root and the home folder are never one of them (unless the URDF itself
    lies there), so a URDF cannot name ``/etc/passwd`` or ``~/.ssh/...`` as a mesh.
    """
    urdf_dir = Path(urdf_path).resolve().parent
    too_wide = {Path(urdf_dir.anchor), Path.home().resolve()}
    folders = [urdf_dir]
    if urdf_dir.parent not in too_wide:
        folders.append(urdf_dir.parent)
    for folder in urdf_dir.parents:
        if folder in too_wide:
            break
        if (folder / "package.xml").is_file():
            folders.append(folder)
            break
    search = search or PackageSearchPath(robot_file=Path(urdf_path))
    for name in packages:
        search.find(name)
    for folder in search.roots():
        if folder not in too_wide:
            folders.append(folder)
    return list(dict.fromkeys(folders))


def _is_inside(path: Path, folders: list[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def _not_found(path: Path, link: str, role: str, filename: str, where: str, candidates) -> RobotFileError:
    from .meshes import check_mesh_file

    for candidate in candidates:
        try:
            exists = candidate.exists()
        except (OSError, ValueError):
            exists = False
        if exists:  # a folder or a device: say what it is
            check_mesh_file(candidate, path, filename)
    return RobotFileError(path, f"link '{link}' {role} mesh '{filename}' not found (looked in {where})")


def mesh_refs(path: Path, yurdf, search: PackageSearchPath) -> list[MeshRef]:
    """Every mesh the URDF (`yurdf`, read from `path`) names, found and checked; a missing one,
    one outside the robot's folders or a bad scale is one line naming the file."""
    from .meshes import check_mesh_file

    urdf_dir = path.parent
    found: list[tuple[str, str, str, Path, object]] = []
    for link in yurdf.robot.links:
        for role, elements in (("visual", link.visuals), ("collision", link.collisions)):
            for element in elements:
                geometry = element.geometry
                if geometry is None or geometry.mesh is None:
                    continue
                filename = geometry.mesh.filename or ""
                if not filename.strip():
                    raise RobotFileError(path, f"link '{link.name}' {role} <mesh> has no filename")
                if "\x00" in filename or len(filename) > 4096:
                    raise RobotFileError(path, f"link '{link.name}' {role} mesh filename is not a usable path")
                if filename.startswith("package://"):
                    try:
                        candidate = resolve_package_file(filename, search, path)
                    except RobotFileError as exc:
                        missing = exc.problem.startswith("package '")
                        problem = f"mesh '{filename}' not found: {exc.problem}" if missing else exc.problem
                        raise RobotFileError(path, f"link '{link.name}' {role} {problem}") from None
                    try:
                        is_file = candidate.is_file()
                    except (OSError, ValueError):
                        is_file = False
                    if not is_file:
                        raise _not_found(path, link.name, role, filename, f"package '{_package_names(filename)[0]}' at {candidate.parent}", [candidate])
                    resolved = candidate
                else:
                    resolved = resolve_mesh_path(filename, urdf_dir)
                    if resolved is None:
                        raise _not_found(path, link.name, role, filename, f"{urdf_dir} and its parents", _mesh_candidates(filename, urdf_dir))
                found.append((link.name, role, filename, resolved, geometry.mesh.scale))
    folders = robot_folders(path, {name for _, _, filename, _, _ in found for name in _package_names(filename)}, search=search)
    refs = []
    for link_name, role, filename, resolved, scale in found:
        real = resolved.resolve()
        if not _is_inside(real, folders):
            raise RobotFileError(
                path, f"link '{link_name}' {role} mesh '{filename}' is {real}, outside the robot's folders "
                f"({', '.join(str(f) for f in folders)}); meshes must lie inside them"
            )
        check_mesh_file(real, path, filename)
        if scale is None:
            scale = (1.0, 1.0, 1.0)
        elif np.isscalar(scale):
            scale = (float(scale),) * 3
        scale = finite_numbers(path, f"link '{link_name}' mesh scale", scale)
        if scale.shape != (3,):
            raise RobotFileError(path, f"link '{link_name}' mesh scale needs one or three numbers")
        refs.append(MeshRef(link_name, role, filename, resolved, tuple(float(v) for v in scale)))
    return refs
