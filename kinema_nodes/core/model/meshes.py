"""Mesh files a URDF refers to: cheap checks before anything reads them, and loading as arrays.

A mesh comes from a file someone else wrote, so it is checked like the URDF: a folder, an
empty file, a file of an unknown format, one too large, XML with entity declarations (.dae),
junk that no loader understands, a mesh with no triangles, NaN or absurd coordinates, face
indices that point nowhere: each is refused with one line naming the file and the problem
(a `RobotFileError`), never later as a crash or a NaN in Blender.

`check_mesh_file` only looks at the file system and the first bytes; `load_robot` runs it on
every mesh a URDF names. `load_mesh_arrays` reads the triangles (trimesh; pycollada for .dae).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import numpy as np

from ..errors import RobotFileError

#: Formats trimesh reads without extra packages (.dae through pycollada). Compared lower-case.
MESH_FORMATS = (".stl", ".obj", ".dae", ".ply", ".off", ".glb", ".gltf")
#: Largest mesh file we read. Real robot meshes are a few MB; the largest we know are ~50 MB.
MAX_MESH_BYTES = 256 * 1024 * 1024
#: Any vertex coordinate beyond this many metres (after the URDF's scale) is junk, not a part.
MAX_MESH_COORDINATE = 1.0e4
_XML_FORMATS = (".dae",)
_ENTITY_OR_DOCTYPE = re.compile(rb"<!(ENTITY|DOCTYPE)", re.IGNORECASE)


def _name(path: Path, filename: str | None) -> str:
    return f"mesh '{filename}'" if filename and filename != str(path) else f"mesh '{path}'"


def check_mesh_file(path: str | Path, source: str | Path | None = None, filename: str | None = None) -> Path:
    """Refuse a mesh file that cannot be one: not a regular file, empty, too large, or of a
    format we do not read. `source` (the URDF) is the file named in the message; `filename`
    is how the URDF wrote the reference. Returns the path."""
    path = Path(path)
    source = path if source is None else source
    what = _name(path, filename)
    try:
        info = path.stat()
    except OSError as exc:
        raise RobotFileError(source, f"{what} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. an embedded NUL in the name
        raise RobotFileError(source, f"{what} is not a usable file name: {exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise RobotFileError(source, f"{what} is a folder, not a mesh file")
    if not stat.S_ISREG(info.st_mode):
        raise RobotFileError(source, f"{what} is not a regular file (a device, pipe or socket?)")
    if info.st_size == 0:
        raise RobotFileError(source, f"{what} is empty (0 bytes)")
    if info.st_size > MAX_MESH_BYTES:
        raise RobotFileError(source, f"{what} is {info.st_size / 1e6:.0f} MB; refusing meshes over {MAX_MESH_BYTES / 1e6:.0f} MB")
    suffix = path.suffix.lower()
    if suffix not in MESH_FORMATS:
        raise RobotFileError(source, f"{what} has format '{path.suffix or '(none)'}', which is not read (supported: {', '.join(MESH_FORMATS)})")
    return path


def _check_xml(path: Path, data: bytes, source, what: str) -> None:
    if _ENTITY_OR_DOCTYPE.search(data):
        raise RobotFileError(source, f"{what} declares a DOCTYPE or XML entities; refused (COLLADA never needs them, and they can expand without bound or read other files)")


def load_mesh_arrays(
    path: str | Path, scale=(1.0, 1.0, 1.0), source: str | Path | None = None, filename: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Triangles of a mesh file in metres: vertices (n, 3) float64 and faces (f, 3) int64.

    Every part of a multi-part file (a COLLADA scene) is placed by its own transform and
    joined. Raises `RobotFileError` (one line) for anything that is not a usable mesh.
    """
    import trimesh

    path = check_mesh_file(path, source, filename)
    source = path if source is None else source
    what = _name(path, filename)
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (3,))
    if not np.all(np.isfinite(scale)) or np.any(scale == 0):
        raise RobotFileError(source, f"{what} has scale {tuple(scale)}: needs three finite, non-zero numbers")
    suffix = path.suffix.lower()
    if suffix in _XML_FORMATS:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RobotFileError(source, f"{what} cannot be read: {exc.strerror or exc}") from None
        _check_xml(path, data, source, what)
    try:
        # From the path, not the bytes: OBJ and glTF name side files (materials, buffers).
        scene = trimesh.load(str(path), file_type=suffix[1:], force="scene", process=False)
    except Exception as exc:  # noqa: BLE001  (trimesh and pycollada raise many kinds on junk)
        message = " ".join(str(exc).split())[:200]
        raise RobotFileError(source, f"{what} could not be read as {suffix[1:].upper()}: {type(exc).__name__}: {message}") from None
    vertices, faces = [], []
    offset = 0
    try:
        nodes = list(scene.graph.nodes_geometry)
    except Exception as exc:  # noqa: BLE001  (a junk file can leave any kind of broken graph)
        raise RobotFileError(source, f"{what} has a broken scene graph: {type(exc).__name__}") from None
    for node in nodes:
        transform, geometry_name = scene.graph[node]
        geometry = scene.geometry.get(geometry_name)
        f = np.asarray(getattr(geometry, "faces", np.empty((0, 3))), dtype=np.int64)
        if f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
            continue
        v = np.asarray(geometry.vertices, dtype=float)
        if v.ndim != 2 or v.shape[1] != 3:
            raise RobotFileError(source, f"{what} has vertices of shape {v.shape}, expected (n, 3)")
        if f.min() < 0 or f.max() >= len(v):
            raise RobotFileError(source, f"{what} has faces that point at vertices it does not have")
        transform = np.asarray(transform, dtype=float)
        if not np.all(np.isfinite(transform)):
            raise RobotFileError(source, f"{what} places a part with a NaN or inf transform")
        vertices.append(v @ transform[:3, :3].T + transform[:3, 3])
        faces.append(f + offset)
        offset += len(v)
    if not faces:
        raise RobotFileError(source, f"{what} has no triangles (it is empty, or not a {suffix[1:].upper()} file that can be read)")
    v = np.concatenate(vertices) * scale
    if not np.all(np.isfinite(v)):
        raise RobotFileError(source, f"{what} has NaN or inf vertices")
    if np.max(np.abs(v)) > MAX_MESH_COORDINATE:
        raise RobotFileError(source, f"{what} has a vertex {np.max(np.abs(v)):.3g} m from its origin; refusing meshes beyond {MAX_MESH_COORDINATE:g} m")
    return v, np.concatenate(faces)


def check_robot_meshes(robot) -> int:
    """Load every mesh a RobotModel names (as `load_mesh_arrays` does) and refuse the first bad
    one: run before building anything from the robot, so a bad mesh never leaves half a rig.
    Returns how many distinct (file, scale) pairs were read."""
    seen = set()
    for ref in robot.meshes:
        key = (str(ref.path), tuple(ref.scale))
        if key in seen:
            continue
        seen.add(key)
        load_mesh_arrays(ref.path, ref.scale, source=robot.path or ref.path, filename=ref.filename)
    return len(seen)
