"""The obstacle file: a JSON list of primitives (and mesh files beside it) read into a `World`,
every problem one `ObstacleFileError` line naming the file and the obstacle."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import KinemaError, RobotFileError
from ..model.rotations import quaternion_to_matrix
from .world import Box, Capsule, MeshObstacle, Sphere, World

#: Largest obstacle file read, and most primitives in it.
MAX_OBSTACLE_BYTES = 16 * 1024 * 1024
MAX_OBSTACLES = 10_000
#: Most mesh obstacles in one file, counted before any mesh is read: each is placed and fitted
#: with capsules, so a file naming one large mesh thousands of times is refused up front.
MAX_MESH_OBSTACLES = 256
#: Most triangles over all mesh obstacles (a file's triangles times the obstacles naming it),
#: checked after each distinct file is read once and before any is placed or fitted.
MAX_OBSTACLE_TRIANGLES = 2_000_000
#: Coordinates and sizes beyond this (metres) are a unit mix-up or junk.
MAX_OBSTACLE_COORDINATE = 1.0e4
PRIMITIVES = ("box", "sphere", "capsule", "mesh", "ground")


class ObstacleFileError(KinemaError):
    """An obstacle file (or one item of a list of obstacles) that cannot be used, with the file named."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _numbers(source, where: str, value, count: int | None, what: str) -> tuple[float, ...]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and count is None:
        value = [value]
    if not isinstance(value, (list, tuple)) or (count is not None and len(value) != count):
        raise ObstacleFileError(source, f"{where}: {what} needs {count or 1} number{'s' if (count or 1) > 1 else ''}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ObstacleFileError(source, f"{where}: {what} must be numbers, got {v!r}"[:300])
        v = float(v)
        if not math.isfinite(v):
            raise ObstacleFileError(source, f"{where}: {what} has {v} (NaN or inf)")
        if abs(v) > MAX_OBSTACLE_COORDINATE:
            raise ObstacleFileError(source, f"{where}: {what} has {v:g}, beyond {MAX_OBSTACLE_COORDINATE:g} m (units are metres)")
        out.append(v)
    return tuple(out)


def _positive(source, where: str, values, what: str) -> None:
    for v in values:
        if v < 0:
            raise ObstacleFileError(source, f"{where}: {what} {v:g} is negative")
        if v == 0:
            raise ObstacleFileError(source, f"{where}: {what} is zero")


def _pose(source, where: str, value) -> tuple[float, ...]:
    if value is None:
        return (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    pose = _numbers(source, where, value, 7, "pose (x y z qw qx qy qz)")
    norm = math.sqrt(sum(v * v for v in pose[3:]))
    if norm < 1e-6:
        raise ObstacleFileError(source, f"{where}: pose quaternion has zero length")
    return pose[:3] + tuple(v / norm for v in pose[3:])


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def mesh_obstacle(source, where: str, filename, pose, name: str, base_dir: Path, scale=(1.0, 1.0, 1.0)) -> MeshObstacle:
    """A mesh obstacle read through the one hardened loader (`core.model.meshes.load_mesh`), from a
    file inside `base_dir` (no absolute path or `..` or link leading out of it)."""
    real = _mesh_path(source, where, filename, base_dir)
    return _placed_mesh(real, _load_mesh(source, where, real, filename, scale)[0], pose, name, scale)


def _load_mesh(source, where: str, real: Path, filename, scale):
    from ..model.meshes import load_mesh_arrays

    try:
        return load_mesh_arrays(real, scale, source=source, filename=filename)
    except RobotFileError as exc:
        raise ObstacleFileError(source, f"{where}: {exc.problem}") from None


def _placed_mesh(real: Path, vertices, pose, name: str, scale) -> MeshObstacle:
    from .capsule_fit import fit_capsules

    rotation, offset = quaternion_to_matrix(pose[3:]), np.asarray(pose[:3])
    placed = vertices @ rotation.T + offset
    capsules = tuple((tuple(a.tolist()), tuple(b.tolist()), float(r)) for a, b, r in fit_capsules(placed))
    return MeshObstacle(str(real), pose, name, tuple(scale), capsules)


def _mesh_path(source, where: str, filename, base_dir: Path) -> Path:
    """The mesh file's real path, inside `base_dir` and existing (nothing is read)."""
    if not isinstance(filename, str) or not filename.strip() or "\x00" in filename or len(filename) > 4096:
        raise ObstacleFileError(source, f"{where}: mesh needs a file name")
    folder = Path(base_dir).resolve()
    path = (folder / filename)
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        raise ObstacleFileError(source, f"{where}: mesh '{filename}' is not a usable path") from None
    if not _inside(real, folder):
        raise ObstacleFileError(source, f"{where}: mesh '{filename}' is {real}, outside the obstacle file's folder {folder}; "
                                        "meshes must lie inside it")
    if not real.exists():
        raise ObstacleFileError(source, f"{where}: mesh '{filename}' not found (looked in {folder})")
    return real


def _build_meshes(source, meshes: list, obstacles: list) -> None:
    """Place the mesh obstacles (`meshes`: (slot in `obstacles`, where, real path, file name,
    pose, name, scale)), within `MAX_MESH_OBSTACLES` and `MAX_OBSTACLE_TRIANGLES`: every
    distinct (file, scale) is read once, and the total is checked before any is fitted."""
    if len(meshes) > MAX_MESH_OBSTACLES:
        raise ObstacleFileError(source, f"has {len(meshes)} mesh obstacles; refusing more than {MAX_MESH_OBSTACLES} "
                                        "(each is placed and fitted with capsules)")
    loaded: dict = {}
    total = 0
    for _, where, real, filename, _, _, scale in meshes:
        key = (str(real), tuple(scale))
        if key not in loaded:
            loaded[key] = _load_mesh(source, where, real, filename, scale)
        total += len(loaded[key][1])
        if total > MAX_OBSTACLE_TRIANGLES:
            raise ObstacleFileError(source, f"{where}: the mesh obstacles hold more than {MAX_OBSTACLE_TRIANGLES:,} triangles in all "
                                            f"('{filename}' has {len(loaded[key][1]):,}, named by {sum(m[2] == real for m in meshes)} "
                                            "obstacles); use fewer or simpler meshes")
    for slot, _, real, _, pose, name, scale in meshes:
        obstacles[slot] = _placed_mesh(real, loaded[(str(real), tuple(scale))][0], pose, name, scale)


def world_from_dicts(items, base_dir, source="obstacles", ground: bool = False) -> World:
    """A World from a list of primitives (the obstacle file's format, see `load_obstacles`);
    `base_dir` is where mesh file names are looked up (and the folder they must stay in)."""
    if not isinstance(items, (list, tuple)):
        raise ObstacleFileError(source, f"needs a list of obstacles, got {type(items).__name__}")
    if len(items) > MAX_OBSTACLES:
        raise ObstacleFileError(source, f"has {len(items)} obstacles; refusing more than {MAX_OBSTACLES}")
    obstacles, names, meshes = [], [], []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"obstacle {index + 1}"
        if not isinstance(item, dict):
            raise ObstacleFileError(source, f"{where}: needs an object like {{\"box\": {{...}}}}, got {type(item).__name__}")
        kinds = [k for k in item if k in PRIMITIVES]
        unknown = [k for k in item if k not in PRIMITIVES and k not in ("name", "pose", "scale")]
        if unknown:
            raise ObstacleFileError(source, f"{where}: unknown primitive '{str(unknown[0])[:60]}' (known: {', '.join(PRIMITIVES)})")
        if len(kinds) != 1:
            raise ObstacleFileError(source, f"{where}: needs exactly one of {', '.join(PRIMITIVES)}")
        kind = kinds[0]
        name = item.get("name", f"{kind} {index + 1}")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise ObstacleFileError(source, f"{where}: name must be a short text")
        if name in seen:
            raise ObstacleFileError(source, f"{where}: name '{name}' is taken by obstacle {seen[name] + 1}")
        seen[name] = index
        where = f"obstacle {index + 1} ('{name}')"
        spec = item[kind]
        if kind == "ground":
            if spec not in (True, {}, None):
                raise ObstacleFileError(source, f"{where}: ground takes true (the plane z = 0 of the robot's root)")
            ground = True
            continue
        if kind == "mesh":
            if isinstance(spec, dict):
                filename, pose, scale = spec.get("file"), spec.get("pose", item.get("pose")), spec.get("scale", item.get("scale"))
            else:
                filename, pose, scale = spec, item.get("pose"), item.get("scale")
            scale = (1.0, 1.0, 1.0) if scale is None else _numbers(source, where, scale, 3, "scale")
            _positive(source, where, [abs(s) for s in scale], "scale")
            real = _mesh_path(source, where, filename, Path(base_dir))
            meshes.append((len(obstacles), where, real, filename, _pose(source, where, pose), name, scale))
            obstacles.append(None)  # placed by `_build_meshes`, once the whole file is known
            names.append(name)
            continue
        if not isinstance(spec, dict):
            raise ObstacleFileError(source, f"{where}: {kind} needs an object of its numbers")
        allowed = {"box": {"size", "pose"}, "sphere": {"center", "radius"}, "capsule": {"a", "b", "radius"}}[kind]
        extra = sorted(set(spec) - allowed)
        missing = sorted(allowed - set(spec) - ({"pose"} if kind == "box" else set()))
        if extra or missing:
            raise ObstacleFileError(source, f"{where}: {kind} takes {', '.join(sorted(allowed))}"
                                            + (f"; unknown '{str(extra[0])[:60]}'" if extra else f"; missing '{missing[0]}'"))
        if kind == "box":
            size = _numbers(source, where, spec["size"], 3, "size")
            _positive(source, where, size, "size")
            obstacles.append(Box(size, _pose(source, where, spec.get("pose")), name))
        elif kind == "sphere":
            centre = _numbers(source, where, spec["center"], 3, "center")
            radius = _numbers(source, where, spec["radius"], None, "radius")
            _positive(source, where, radius, "radius")
            obstacles.append(Sphere(centre, radius[0], name))
        else:
            a = _numbers(source, where, spec["a"], 3, "a")
            b = _numbers(source, where, spec["b"], 3, "b")
            radius = _numbers(source, where, spec["radius"], None, "radius")
            _positive(source, where, radius, "radius")
            obstacles.append(Capsule(a, b, radius[0], name))
        names.append(name)
    _build_meshes(source, meshes, obstacles)
    return World(tuple(obstacles), bool(ground), tuple(names))


def _no_constants(token):
    raise ValueError(f"{token} is not a number")


def load_obstacles(path) -> World:
    """The obstacle file: a JSON list of primitives in the robot's root frame,
    ``{"box": {"size": [x, y, z], "pose": [x, y, z, qw, qx, qy, qz]}}``, ``{"sphere": {"center": [..],
    "radius": r}}``, ``{"capsule": {"a": [..], "b": [..], "radius": r}}``, ``{"mesh": "file.stl",
    "pose": [...]}``, ``{"ground": true}``; each may carry a "name". Anything wrong is one
    `ObstacleFileError` line naming the file and the obstacle."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ObstacleFileError(path, "is not a file")
        if size > MAX_OBSTACLE_BYTES:
            raise ObstacleFileError(path, f"is {size / 1e6:.0f} MB; refusing obstacle files over {MAX_OBSTACLE_BYTES / 1e6:.0f} MB")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ObstacleFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ObstacleFileError(path, "is not UTF-8 text (JSON)") from None
    try:
        items = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ObstacleFileError(path, "is nested too deeply to be an obstacle list") from None
    except ValueError as exc:
        raise ObstacleFileError(path, f"is not valid JSON: {' '.join(str(exc).split())[:200]}") from None
    return world_from_dicts(items, path.parent, source=path)
