"""Mesh files a URDF refers to: cheap checks before anything reads them, and loading as arrays.

A mesh comes from a file someone else wrote, so it is checked like the URDF: a folder, an
empty file, a file of an unknown format, one too large, XML with entity declarations (.dae),
junk that no loader understands, a mesh with no triangles, NaN or absurd coordinates, face
indices that point nowhere: each is refused with one line naming the file and the problem
(a `RobotFileError`), never later as a crash or a NaN in Blender.

`check_mesh_file` only looks at the file system; `load_robot` runs it on every mesh a URDF
names. `load_mesh` is the one loader (trimesh; pycollada for .dae): Blender's import builds
its meshes from it, per-part colours included, so these checks guard the real path.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
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


#: Largest total a zipped COLLADA (.zae, or a .dae that is a zip) may unpack to, and the most
#: members it may have: checked from the zip's directory before anything is decompressed.
MAX_UNPACKED_BYTES = MAX_MESH_BYTES
MAX_ZIP_MEMBERS = 256
#: Largest vertex or face count read from any mesh (a 50 MB mesh has ~1M triangles).
MAX_MESH_ELEMENTS = 20_000_000
_ZIP_MAGIC = b"PK\x03\x04"
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass
class MeshArrays:
    """Triangles ready for Blender: vertices (n, 3) float, faces (f, 3) int, a material per face
    (an index into `materials`, each a (name, linear RGBA) pair from the mesh file)."""

    vertices: np.ndarray
    faces: np.ndarray
    face_material: np.ndarray
    materials: list[tuple[str, tuple[float, float, float, float]]] = field(default_factory=list)


def srgb_to_linear(c: float) -> float:
    """A display (sRGB) channel as the linear value Blender materials hold."""
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgba_from_trimesh(colour) -> tuple[float, float, float, float]:
    rgba = np.asarray(colour, dtype=float).ravel()[:4] / 255.0
    if rgba.size < 4:
        rgba = np.concatenate([rgba, np.ones(4 - rgba.size)])
    rgba = np.clip(np.nan_to_num(rgba, nan=1.0), 0.0, 1.0)
    return (srgb_to_linear(rgba[0]), srgb_to_linear(rgba[1]), srgb_to_linear(rgba[2]), float(rgba[3]))


def _geometry_colour(geometry) -> tuple[str, tuple[float, float, float, float]] | None:
    """The colour a mesh file gives a geometry (COLLADA/OBJ materials), or None."""
    visual = getattr(geometry, "visual", None)
    if visual is None:
        return None
    try:
        material = getattr(visual, "material", None)
        if material is not None:
            colour = getattr(material, "main_color", None)
            if colour is not None:
                return (str(getattr(material, "name", None) or "material")[:60], _rgba_from_trimesh(colour))
        if getattr(visual, "kind", None) in ("face", "vertex"):
            colour = getattr(visual, "main_color", None)
            if colour is not None:
                return ("colour", _rgba_from_trimesh(colour))
    except Exception:  # noqa: BLE001  (a colour trimesh cannot work out is no colour, not a failure)
        return None
    return None


def _xml_verdict(head_chunks, source, what: str) -> None:
    """Refuse an XML document with a DOCTYPE (internal subset, entities or an external DTD),
    deciding on the document as lxml decodes it (UTF-8, UTF-16, UTF-32, declared encodings),
    never on raw bytes. The parser resolves no entities, loads no DTD and uses no network.
    Only the prolog is read: a DOCTYPE must come before the root element."""
    from lxml import etree

    parser = etree.XMLPullParser(events=("start",), resolve_entities=False, load_dtd=False, no_network=True,
                                 dtd_validation=False, huge_tree=False)
    root = None
    try:
        for chunk in head_chunks:
            parser.feed(chunk)
            events = list(parser.read_events())
            if events:
                root = events[0][1]
                break
        if root is None:
            parser.close()
    except etree.XMLSyntaxError as exc:
        raise RobotFileError(source, f"{what} could not be read as XML ({' '.join(str(exc).split())[:120]})") from None
    if root is None:
        raise RobotFileError(source, f"{what} could not be read as XML (no root element)")
    if root.getroottree().docinfo.doctype:
        raise RobotFileError(source, f"{what} declares a DOCTYPE or XML entities; refused (COLLADA never needs them, and they can expand without bound or read other files)")


def _chunks(handle, size: int = 64 * 1024, limit: int = MAX_MESH_BYTES):
    read = 0
    while read < limit:
        chunk = handle.read(min(size, limit - read))
        if not chunk:
            return
        read += len(chunk)
        yield chunk


def _check_xml(path: Path, source, what: str) -> None:
    """A .dae as XML, or a .dae that is really a zip (pycollada opens those): every member's
    unpacked size is capped from the zip's directory before anything is inflated, and every
    XML member gets the same DOCTYPE verdict as a plain file."""
    import zipfile

    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
            handle.seek(0)
            if magic != _ZIP_MAGIC:
                _xml_verdict(_chunks(handle), source, what)
                return
    except OSError as exc:
        raise RobotFileError(source, f"{what} cannot be read: {exc.strerror or exc}") from None
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_MEMBERS:
                raise RobotFileError(source, f"{what} is a zip of {len(members)} files; refusing more than {MAX_ZIP_MEMBERS}")
            total = sum(m.file_size for m in members)
            if total > MAX_UNPACKED_BYTES:
                raise RobotFileError(source, f"{what} is a zip that unpacks to {total / 1e6:.0f} MB; refusing more than {MAX_UNPACKED_BYTES / 1e6:.0f} MB")
            documents = [m for m in members if m.filename.lower().endswith((".dae", ".xml")) or m.filename == "manifest.xml"]
            if not documents:
                raise RobotFileError(source, f"{what} is a zip with no COLLADA document inside")
            for member in documents:
                with archive.open(member) as inner:
                    _xml_verdict(_chunks(inner, limit=member.file_size + 1), source, f"{what} (member '{member.filename[:80]}')")
    except RobotFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError, ValueError) as exc:
        raise RobotFileError(source, f"{what} is a broken zip: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}") from None


def _check_collada_indices(path: Path, source, what: str) -> None:
    """trimesh skips a COLLADA primitive pycollada finds malformed (indices beyond its
    vertices), so one bad part would vanish silently. Read it strictly first: malformed is
    refused; a missing texture or an unsupported extra stays tolerated, as in trimesh."""
    import collada
    from collada.common import DaeBrokenRefError, DaeMalformedError, DaeUnsupportedError

    try:
        collada.Collada(str(path), ignore=[DaeUnsupportedError, DaeBrokenRefError])
    except DaeMalformedError as exc:
        problem = " ".join(str(exc).split())[:160]
        if "beyond the limits" in problem:
            raise RobotFileError(source, f"{what} has faces that point at vertices it does not have ({problem})") from None
        raise RobotFileError(source, f"{what} could not be read as DAE: {problem}") from None
    except Exception:  # noqa: BLE001  (anything else: trimesh's own read decides, as before)
        return


def _check_side_files(path: Path, source, what: str) -> None:
    """An OBJ names its material files (`mtllib`); trimesh opens them by name. Each must be a
    regular file of sane size beside the mesh, so `mtllib /dev/zero` cannot hang the import."""
    try:
        with open(path, "rb") as handle:
            names = []
            for line in _lines(handle):
                if line[:6].lower() == b"mtllib":
                    names.extend(line[6:].decode("utf-8", "replace").split())
    except OSError as exc:
        raise RobotFileError(source, f"{what} cannot be read: {exc.strerror or exc}") from None
    for name in names:
        side = (path.parent / name)
        try:
            info = side.stat()
        except (OSError, ValueError):
            continue  # a missing material file: trimesh uses no colour, as before
        if not stat.S_ISREG(info.st_mode):
            raise RobotFileError(source, f"{what} names material file '{name}', which is not a regular file; refused")
        if info.st_size > MAX_MESH_BYTES:
            raise RobotFileError(source, f"{what} names material file '{name}' of {info.st_size / 1e6:.0f} MB; refused")


def _lines(handle):
    for chunk_line in handle:
        yield chunk_line.strip()


def _check_header_counts(path: Path, source, what: str) -> None:
    """PLY and OFF headers state element counts that readers allocate up front; a 100-byte file
    claiming 10^12 vertices would ask for terabytes. Refuse counts beyond `MAX_MESH_ELEMENTS`."""
    suffix = path.suffix.lower()
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024)
    except OSError as exc:
        raise RobotFileError(source, f"{what} cannot be read: {exc.strerror or exc}") from None
    counts = []
    if suffix == ".ply":
        counts = [int(m) for m in re.findall(rb"^element\s+\S+\s+(\d+)", head.split(b"end_header")[0], re.MULTILINE)]
    elif suffix == ".off":
        words = [w for line in head.splitlines() if not line.strip().startswith(b"#") for w in line.split()]
        if words and words[0].upper().endswith(b"OFF"):
            words = words[1:]
        counts = [int(w) for w in words[:3] if w.isdigit()]
    if any(c > MAX_MESH_ELEMENTS for c in counts):
        raise RobotFileError(source, f"{what} claims {max(counts)} elements; refusing more than {MAX_MESH_ELEMENTS}")


def check_transform(transform, source, what: str) -> np.ndarray:
    """A part's 4x4 placement: finite, a bottom row of (0, 0, 0, 1), and not collapsing the part
    (an invertible rotation-scale block)."""
    transform = np.asarray(transform, dtype=float)
    if transform.shape != (4, 4) or not np.all(np.isfinite(transform)):
        raise RobotFileError(source, f"{what} places a part with a NaN, inf or malformed transform")
    if not np.allclose(transform[3], (0.0, 0.0, 0.0, 1.0), atol=1e-9):
        raise RobotFileError(source, f"{what} places a part with a projective transform (bottom row {transform[3].tolist()})")
    determinant = float(np.linalg.det(transform[:3, :3]))
    if not np.isfinite(determinant) or abs(determinant) < 1e-18:
        raise RobotFileError(source, f"{what} places a part with a transform that collapses it (zero scale)")
    return transform


def _has_triangles(scene) -> bool:
    return any(len(getattr(g, "faces", ())) for g in scene.geometry.values())


def _collada_without_broken_materials(path: Path, source, what: str):
    """The scene of a COLLADA file whose geometry trimesh dropped because a material it binds
    did not load, read again without those bindings; None if that is not the reason.

    Why: example-robot-data's ANYmal foot (`anymal_foot.dae`, in `anymal` and `anymal_kinova`)
    binds a material whose texture names a surface the file never declares. pycollada skips the
    broken material, and trimesh then drops the whole mesh node that binds it, so a readable
    mesh came out empty. The parts keep the colours of the materials that did load."""
    import io

    import collada
    import trimesh
    from collada.common import DaeBrokenRefError, DaeError, DaeUnsupportedError

    from .xml_reading import parse_xml, read_xml_file

    with open(path, "rb") as handle:
        if handle.read(4) == _ZIP_MAGIC:
            return None
    data = read_xml_file(path, MAX_MESH_BYTES, "mesh", source)
    try:
        loaded = {m.id for m in collada.Collada(io.BytesIO(data), ignore=[DaeBrokenRefError, DaeUnsupportedError, DaeError]).materials}
    except Exception:  # noqa: BLE001  (pycollada cannot read it at all: the first read's verdict stands)
        return None
    from lxml import etree

    root = parse_xml(data, source, what)
    dropped = 0
    for bound in list(root.iter("{*}instance_material")):
        if bound.get("target", "").lstrip("#") not in loaded:
            bound.getparent().remove(bound)
            dropped += 1
    if not dropped:
        return None
    scene = trimesh.load(io.BytesIO(etree.tostring(root)), file_type="dae", force="scene", process=False)
    return scene if _has_triangles(scene) else None


def load_mesh(path: str | Path, scale=(1.0, 1.0, 1.0), source: str | Path | None = None,
              filename: str | None = None) -> MeshArrays:
    """The one mesh loader: triangles of a mesh file in metres, each part placed by its own
    transform and joined, with the colour each part carries. Blender's import calls this.

    Refused with one `RobotFileError` line: what `check_mesh_file` refuses; a DOCTYPE (decided
    on the decoded XML) or a zip bomb behind a .dae; header counts no file that size can hold;
    a zero, NaN or inf scale; a NaN, inf, projective or collapsing part transform; faces that
    point at vertices the part does not have; NaN vertices; any coordinate beyond
    `MAX_MESH_COORDINATE` metres after scale (so nothing overflows Blender's float32 either).
    """
    import trimesh

    path = check_mesh_file(path, source, filename)
    source = path if source is None else source
    what = _name(path, filename)
    try:
        scale = np.broadcast_to(np.asarray(scale, dtype=float), (3,))
    except (ValueError, TypeError):
        raise RobotFileError(source, f"{what} has scale {scale!r}: needs three numbers") from None
    if not np.all(np.isfinite(scale)) or np.any(scale == 0):
        raise RobotFileError(source, f"{what} has scale {tuple(float(x) for x in scale)}: needs three finite, non-zero numbers")
    if np.any(np.abs(scale) > _FLOAT32_MAX) or np.any(np.abs(scale) < 1e-30):
        raise RobotFileError(source, f"{what} has scale {tuple(float(x) for x in scale)}, beyond what Blender's float32 holds")
    suffix = path.suffix.lower()
    if suffix in _XML_FORMATS:
        _check_xml(path, source, what)
        _check_collada_indices(path, source, what)
    elif suffix == ".obj":
        _check_side_files(path, source, what)
    if suffix in (".ply", ".off"):
        _check_header_counts(path, source, what)
    try:
        # From the path, not the bytes: OBJ and glTF name side files (materials, buffers).
        scene = trimesh.load(str(path), file_type=suffix[1:], force="scene", process=False)
        if suffix in _XML_FORMATS and not _has_triangles(scene):
            scene = _collada_without_broken_materials(path, source, what) or scene
    except RobotFileError:
        raise
    except (Exception, RecursionError) as exc:  # noqa: BLE001  (trimesh and pycollada raise many kinds on junk)
        message = " ".join(str(exc).split())[:200]
        raise RobotFileError(source, f"{what} could not be read as {suffix[1:].upper()}: {type(exc).__name__}: {message}") from None
    try:
        nodes = list(scene.graph.nodes_geometry)
    except Exception as exc:  # noqa: BLE001  (a junk file can leave any kind of broken graph)
        raise RobotFileError(source, f"{what} has a broken scene graph: {type(exc).__name__}") from None
    vertices, faces, face_material, materials = [], [], [], []
    material_index: dict[tuple, int] = {}
    offset = 0
    for node in nodes:
        try:
            transform, geometry_name = scene.graph[node]
        except Exception as exc:  # noqa: BLE001
            raise RobotFileError(source, f"{what} has a broken scene graph: {type(exc).__name__}") from None
        geometry = scene.geometry.get(geometry_name)
        f = np.asarray(getattr(geometry, "faces", np.empty((0, 3))))
        if f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
            continue
        if not np.issubdtype(f.dtype, np.integer):
            raise RobotFileError(source, f"{what} has face indices that are not whole numbers")
        f = f.astype(np.int64)
        v = np.asarray(geometry.vertices, dtype=float)
        if v.ndim != 2 or v.shape[1] != 3:
            raise RobotFileError(source, f"{what} has vertices of shape {v.shape}, expected (n, 3)")
        if f.min() < 0 or f.max() >= len(v):
            raise RobotFileError(source, f"{what} has faces that point at vertices it does not have "
                                         f"(index {int(f.max()) if f.max() >= len(v) else int(f.min())}, {len(v)} vertices)")
        transform = check_transform(transform, source, what)
        if not np.all(np.isfinite(v)):
            raise RobotFileError(source, f"{what} has NaN or inf vertices")
        if hasattr(geometry, "merge_vertices"):
            # Checked raw, then shared corners merged (an STL repeats each corner per
            # triangle), as trimesh's own processing would and as Blender wants them.
            geometry.merge_vertices()
            v = np.asarray(geometry.vertices, dtype=float)
            f = np.asarray(geometry.faces, dtype=np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            placed = v @ transform[:3, :3].T + transform[:3, 3]
        colour = _geometry_colour(geometry)
        slot = -1
        if colour is not None:
            slot = material_index.setdefault(colour, len(materials))
            if slot == len(materials):
                materials.append(colour)
        vertices.append(placed)
        faces.append(f + offset)
        face_material.append(np.full(len(f), slot, dtype=np.int64))
        offset += len(v)
    if not faces:
        raise RobotFileError(source, f"{what} has no triangles (it is empty, or not a {suffix[1:].upper()} file that can be read)")
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.concatenate(vertices) * scale
    if not np.all(np.isfinite(v)):
        raise RobotFileError(source, f"{what} has NaN or inf vertices (after its transforms and scale)")
    reach = float(np.max(np.abs(v)))
    if reach > MAX_MESH_COORDINATE:
        raise RobotFileError(source, f"{what} has a vertex {reach:.3g} m from its origin (after scale); refusing meshes beyond {MAX_MESH_COORDINATE:g} m")
    fm = np.concatenate(face_material)
    fm[fm < 0] = 0
    return MeshArrays(v, np.concatenate(faces), fm, materials)


def load_mesh_arrays(
    path: str | Path, scale=(1.0, 1.0, 1.0), source: str | Path | None = None, filename: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (n, 3) float64 and faces (f, 3) int64 of `load_mesh` (same checks)."""
    mesh = load_mesh(path, scale, source, filename)
    return mesh.vertices, mesh.faces


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
