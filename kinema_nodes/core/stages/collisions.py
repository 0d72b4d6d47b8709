"""Collisions: the world of obstacles, clearances, and the solve that keeps out of both.

The robot is its capsules (`core.model.collision`); an obstacle is a box, a sphere, a capsule,
or a mesh wrapped in capsules the same way; the ground is the plane z = 0 of the robot's root
frame. A distance is signed (negative: the two overlap by that much), so "colliding" means a
distance below zero and `margin_m` is how far the solver keeps things apart when it can.

`solve_avoiding` is what `core.solve.solve` runs when `SolveOptions.avoid` is set: the plain
solve first; if its answer is within tolerance and clear, that is the answer. Otherwise a
damped least-squares descent on the pose residual plus one hinge residual per pair closer than
the margin (each pair's distance gradient from the Jacobian of its closest point), from the
start and from the plain answer. Of the answers that do not collide, the one nearest the goal
wins; a pose that reaches the goal but collides is never reported as converged, and when the
goal cannot be reached without a collision the answer stops short with the pair named.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import KinemaError, RobotFileError

#: Largest obstacle file read, and most primitives in it.
MAX_OBSTACLE_BYTES = 16 * 1024 * 1024
MAX_OBSTACLES = 10_000
#: Coordinates and sizes beyond this (metres) are a unit mix-up or junk.
MAX_OBSTACLE_COORDINATE = 1.0e4
#: Largest margin (m): more than this keeps the arm from reaching anything.
MAX_MARGIN_M = 1.0
GROUND = "ground"
PRIMITIVES = ("box", "sphere", "capsule", "mesh", "ground")


class ObstacleFileError(KinemaError):
    """An obstacle file (or one item of a list of obstacles) that cannot be used, with the file named."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# ---- primitives -------------------------------------------------------------------------

def _rotation(wxyz) -> np.ndarray:
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


@dataclass(frozen=True)
class Box:
    """A box of full edge lengths `size` (x, y, z), centred at `pose` = (x, y, z, qw, qx, qy, qz)."""

    size: tuple[float, float, float]
    pose: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    name: str = "box"


@dataclass(frozen=True)
class Sphere:
    center: tuple[float, float, float]
    radius: float
    name: str = "sphere"


@dataclass(frozen=True)
class Capsule:
    a: tuple[float, float, float]
    b: tuple[float, float, float]
    radius: float
    name: str = "capsule"


@dataclass(frozen=True)
class MeshObstacle:
    """A mesh file placed at `pose`, wrapped in capsules that hold its convex hull (one to three,
    see `core.model.collision.fit_capsules`): conservative, so a concave mesh (a table with legs)
    is treated as the hull it spans."""

    path: str
    pose: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    name: str = "mesh"
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    capsules: tuple = ()  # ((a, b, r), ...) in the root frame, filled by `mesh_obstacle`


@dataclass(frozen=True)
class World:
    """Obstacles in the robot's root frame, their names (one per obstacle, in the messages),
    and whether the ground plane z = 0 counts."""

    obstacles: tuple = ()
    ground: bool = False
    names: tuple = ()
    arrays: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if not self.names or len(self.names) != len(self.obstacles):
            object.__setattr__(self, "names", tuple(getattr(o, "name", f"obstacle {i + 1}") for i, o in enumerate(self.obstacles)))
        self.arrays.update(_world_arrays(self))


@dataclass(frozen=True)
class Avoid:
    """What the solver keeps clear of: the robot itself (`self_`), a `world`, and by how much."""

    self_: bool = True
    world: World | None = None
    margin_m: float = 0.0


@dataclass(frozen=True)
class Clearance:
    """The smallest distance (m, negative when something overlaps), the closest pairs
    (name_a, name_b, distance) nearest first (every pair within the margin, at least the
    closest), and the pairs that overlap (name_a, name_b). An obstacle is named as in its file."""

    min_m: float
    pairs: tuple = ()
    colliding: tuple = ()
    obstacles: frozenset = frozenset()  # which second names are obstacles (not links)

    def describe(self, pair) -> str:
        a, b = pair[0], pair[1]
        return f"link {a} vs obstacle {b}" if b in self.obstacles else f"link {a} vs {b}"


def collision_reason(pair, obstacles=frozenset()) -> str:
    """The readout for a solve a collision stopped: "blocked by a collision: link A vs B"."""
    a, b = pair[0], pair[1]
    what = f"link {a} vs obstacle {b}" if b in obstacles else f"link {a} vs {b}"
    return f"blocked by a collision: {what}"


def _world_arrays(world: World) -> dict:
    caps_a, caps_b, caps_r, caps_name = [], [], [], []
    box_rot, box_centre, box_half, box_name = [], [], [], []
    for obstacle, name in zip(world.obstacles, world.names):
        if isinstance(obstacle, Box):
            box_rot.append(_rotation(obstacle.pose[3:]))
            box_centre.append(obstacle.pose[:3])
            box_half.append(np.asarray(obstacle.size, dtype=float) / 2)
            box_name.append(name)
        elif isinstance(obstacle, Sphere):
            caps_a.append(obstacle.center)
            caps_b.append(obstacle.center)
            caps_r.append(obstacle.radius)
            caps_name.append(name)
        elif isinstance(obstacle, Capsule):
            caps_a.append(obstacle.a)
            caps_b.append(obstacle.b)
            caps_r.append(obstacle.radius)
            caps_name.append(name)
        elif isinstance(obstacle, MeshObstacle):
            for a, b, r in obstacle.capsules:
                caps_a.append(a)
                caps_b.append(b)
                caps_r.append(r)
                caps_name.append(name)
        else:
            raise KinemaError(f"unknown obstacle {type(obstacle).__name__}; use Box, Sphere, Capsule or MeshObstacle")
    return {
        "caps_a": np.array(caps_a, dtype=float).reshape(-1, 3), "caps_b": np.array(caps_b, dtype=float).reshape(-1, 3),
        "caps_r": np.array(caps_r, dtype=float), "caps_name": tuple(caps_name),
        "box_rot": np.array(box_rot, dtype=float).reshape(-1, 3, 3), "box_centre": np.array(box_centre, dtype=float).reshape(-1, 3),
        "box_half": np.array(box_half, dtype=float).reshape(-1, 3), "box_name": tuple(box_name),
    }


# ---- reading obstacles --------------------------------------------------------------------

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
    from ..model.collision import fit_capsules
    from ..model.meshes import load_mesh_arrays

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
    try:
        vertices, _ = load_mesh_arrays(real, scale, source=source, filename=filename)
    except RobotFileError as exc:
        raise ObstacleFileError(source, f"{where}: {exc.problem}") from None
    rotation, offset = _rotation(pose[3:]), np.asarray(pose[:3])
    placed = vertices @ rotation.T + offset
    capsules = tuple((tuple(a.tolist()), tuple(b.tolist()), float(r)) for a, b, r in fit_capsules(placed))
    return MeshObstacle(str(real), pose, name, tuple(scale), capsules)


def world_from_dicts(items, base_dir, source="obstacles", ground: bool = False) -> World:
    """A World from a list of primitives (the obstacle file's format, see `load_obstacles`);
    `base_dir` is where mesh file names are looked up (and the folder they must stay in)."""
    if not isinstance(items, (list, tuple)):
        raise ObstacleFileError(source, f"needs a list of obstacles, got {type(items).__name__}")
    if len(items) > MAX_OBSTACLES:
        raise ObstacleFileError(source, f"has {len(items)} obstacles; refusing more than {MAX_OBSTACLES}")
    obstacles, names = [], []
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
            obstacles.append(mesh_obstacle(source, where, filename, _pose(source, where, pose), name, Path(base_dir), scale))
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


def check_avoid(avoid: Avoid) -> None:
    if not isinstance(avoid, Avoid):
        raise KinemaError(f"solver option avoid must be an Avoid, not {type(avoid).__name__}")
    margin = avoid.margin_m
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or not 0 <= margin <= MAX_MARGIN_M:
        raise KinemaError(f"collision margin must be a number from 0 to {MAX_MARGIN_M * 1000:g} mm, got {margin!r}")
    if avoid.world is not None and not isinstance(avoid.world, World):
        raise KinemaError(f"avoid.world must be a World, not {type(avoid.world).__name__}")


# ---- distances ------------------------------------------------------------------------------

def segment_closest(p1, q1, p2, q2):
    """Closest points of segments p1q1 and p2q2 (arrays (..., 3), broadcast): (s, t, c1, c2)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = np.einsum("...i,...i->...", d1, d1)
    e = np.einsum("...i,...i->...", d2, d2)
    f = np.einsum("...i,...i->...", d2, r)
    c = np.einsum("...i,...i->...", d1, r)
    b = np.einsum("...i,...i->...", d1, d2)
    eps = 1e-14
    denom = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(denom > eps * np.maximum(a * e, eps), np.clip((b * f - c * e) / np.where(denom > 0, denom, 1.0), 0, 1), 0.0)
        s = np.where(a <= eps, 0.0, s)
        t = np.where(e <= eps, 0.0, (b * s + f) / np.where(e > eps, e, 1.0))
        # t outside [0, 1]: clamp and recompute s
        t_clamped = np.clip(t, 0.0, 1.0)
        s_re = np.where(a <= eps, 0.0, np.clip((b * t_clamped - c) / np.where(a > eps, a, 1.0), 0.0, 1.0))
        s = np.where((t < 0) | (t > 1), s_re, s)
        t = t_clamped
    c1 = p1 + s[..., None] * d1
    c2 = p2 + t[..., None] * d2
    return s, t, c1, c2


def capsule_pair_distances(a1, b1, r1, a2, b2, r2) -> np.ndarray:
    """Signed distances between capsules (broadcast over leading axes)."""
    _, _, c1, c2 = segment_closest(a1, b1, a2, b2)
    return np.linalg.norm(c1 - c2, axis=-1) - r1 - r2


def _box_sdf(points, rot, centre, half):
    """Signed distance of points (P, 3) to boxes (P, ...) and the outward unit gradient (P, 3)."""
    local = np.einsum("pji,pj->pi", rot, points - centre)  # R^T (x - c)
    q = np.abs(local) - half
    outside = np.maximum(q, 0.0)
    out_norm = np.linalg.norm(outside, axis=-1)
    inside = np.minimum(np.max(q, axis=-1), 0.0)
    sdf = out_norm + inside
    sign = np.where(local >= 0, 1.0, -1.0)
    grad_out = sign * outside / np.maximum(out_norm, 1e-300)[:, None]
    face = np.argmax(q, axis=-1)
    grad_in = np.zeros_like(local)
    grad_in[np.arange(len(local)), face] = sign[np.arange(len(local)), face]
    grad_local = np.where((out_norm > 0)[:, None], grad_out, grad_in)
    return sdf, np.einsum("pij,pj->pi", rot, grad_local)


def _segment_box(a, b, rot, centre, half, steps: int = 28):
    """Closest point of segments to boxes: the box's signed distance is convex, so along a
    segment it has one minimum, found by a ternary search (P pairs at once). Returns (point on
    the segment, signed distance of it to the box, outward unit normal there)."""
    lo = np.zeros(len(a))
    hi = np.ones(len(a))
    ab = b - a
    for _ in range(steps):
        m1 = lo + (hi - lo) / 3
        m2 = hi - (hi - lo) / 3
        f1, _ = _box_sdf(a + m1[:, None] * ab, rot, centre, half)
        f2, _ = _box_sdf(a + m2[:, None] * ab, rot, centre, half)
        better = f1 < f2
        hi = np.where(better, m2, hi)
        lo = np.where(better, lo, m1)
    t = 0.5 * (lo + hi)
    candidates = np.stack([np.zeros_like(t), t, np.ones_like(t)])  # the ends too (flat minima)
    best_d = np.full(len(a), np.inf)
    best_p = np.empty_like(a)
    best_n = np.empty_like(a)
    for tc in candidates:
        p = a + tc[:, None] * ab
        d, n = _box_sdf(p, rot, centre, half)
        take = d < best_d
        best_d = np.where(take, d, best_d)
        best_p[take] = p[take]
        best_n[take] = n[take]
    return best_p, best_d, best_n


class _Kinematics:
    """FK of every link for one configuration, and each movable joint's world axis and origin,
    so the Jacobian of any point on any link is two array products."""

    def __init__(self, robot, model):
        self.robot = robot
        index = {name: i for i, name in enumerate(robot.links)}
        self.link_index = index
        self.steps = []
        movable = []
        for joint in robot.joints:
            kind = 0
            if joint.is_movable:
                kind = 2 if joint.type == "prismatic" else 1
            source = multiplier = offset = 0
            if kind:
                if joint.mimic is not None:
                    source, multiplier, offset = robot.joint_index(joint.mimic.joint), joint.mimic.multiplier, joint.mimic.offset
                else:
                    source, multiplier, offset = robot.joint_index(joint.name), 1.0, 0.0
                movable.append((joint, source, multiplier))
            self.steps.append((index[joint.parent], index[joint.child], np.asarray(joint.origin, dtype=float),
                               np.asarray(joint.axis, dtype=float), kind, source, multiplier, offset, len(movable) - 1))
        self.movable_count = len(movable)
        self.sources = np.array([m[1] for m in movable], dtype=int)
        self.multipliers = np.array([m[2] for m in movable], dtype=float)
        self.prismatic = np.array([m[0].type == "prismatic" for m in movable], dtype=bool)
        # ancestor[l, m]: joint m moves link l
        ancestor = np.zeros((len(robot.links), len(movable)), dtype=bool)
        for parent, child, _, _, kind, _, _, _, m in self.steps:
            ancestor[child] = ancestor[parent]
            if kind:
                ancestor[child, m] = True
        self.ancestor = ancestor
        self.capsule_link = np.array([index[name] for name in model.links], dtype=int)
        self.scatter = np.zeros((len(movable), robot.dof))
        for m, (_, source, multiplier) in enumerate(movable):
            self.scatter[m, source] += multiplier

    def evaluate(self, q):
        poses = np.empty((len(self.robot.links), 4, 4))
        poses[self.link_index[self.robot.root_link]] = np.eye(4)
        origins = np.empty((self.movable_count, 3))
        axes = np.empty((self.movable_count, 3))
        for parent, child, origin, axis, kind, source, multiplier, offset, m in self.steps:
            pose = poses[parent] @ origin
            if kind:
                origins[m] = pose[:3, 3]
                axes[m] = pose[:3, :3] @ axis
                value = q[source] * multiplier + offset
                if kind == 1:
                    x, y, z = axis
                    s, c = math.sin(value), math.cos(value)
                    k = 1.0 - c
                    rot = np.array([[c + x * x * k, x * y * k - z * s, x * z * k + y * s],
                                    [y * x * k + z * s, c + y * y * k, y * z * k - x * s],
                                    [z * x * k - y * s, z * y * k + x * s, c + z * z * k]])
                    pose = pose.copy()
                    pose[:3, :3] = pose[:3, :3] @ rot
                else:
                    pose = pose.copy()
                    pose[:3, 3] += pose[:3, :3] @ (axis * value)
            poses[child] = pose
        return poses, origins, axes

    def gradient(self, capsule_index, points, normals, origins, axes):
        """d(distance)/dq (P, dof) for points (P, 3) on the capsules' links moved along `normals`."""
        lever = points[:, None, :] - origins[None]  # (P, M, 3)
        rev = np.einsum("pmk,pk->pm", np.cross(axes[None], lever), normals)
        pri = normals @ axes.T
        term = np.where(self.prismatic[None], pri, rev) * self.ancestor[self.capsule_link[capsule_index]]
        return term @ self.scatter


def world_capsules(robot, model, q):
    """Capsule end points in the root frame for configurations q (B, n): (B, C, 3) twice."""
    from ..model.kinematics import link_poses

    poses = link_poses(robot, np.atleast_2d(q))
    index = np.array([robot.links.index(name) for name in model.links], dtype=int)
    frames = poses[:, index]
    a = np.einsum("bcij,cj->bci", frames[..., :3, :3], model.a) + frames[..., :3, 3]
    b = np.einsum("bcij,cj->bci", frames[..., :3, :3], model.b) + frames[..., :3, 3]
    return a, b


@dataclass
class _Pairs:
    """Every checked pair at one configuration: distances, the closest point on the robot side
    (and the other side for self pairs), the unit normal pushing them apart, names."""

    d: np.ndarray
    cap_a: np.ndarray
    point_a: np.ndarray
    cap_b: np.ndarray  # -1 for an obstacle
    point_b: np.ndarray
    normal: np.ndarray  # moves A away from B
    names: list


def _setup(robot, avoid: Avoid):
    from ..model.collision import collision_model

    model = collision_model(robot)
    cache = robot.cache("collision_kinematics")
    kin = cache.get("kin")
    if kin is None:
        kin = cache["kin"] = _Kinematics(robot, model)
    return model, kin


def _pairs(robot, model, kin, avoid: Avoid, q, within: float | None = None) -> tuple[_Pairs, tuple]:
    poses, origins, axes = kin.evaluate(q)
    frames = poses[kin.capsule_link]
    ca = np.einsum("cij,cj->ci", frames[:, :3, :3], model.a) + frames[:, :3, 3]
    cb = np.einsum("cij,cj->ci", frames[:, :3, :3], model.b) + frames[:, :3, 3]
    d_all, cap_a, point_a, cap_b, point_b, normal, names = [], [], [], [], [], [], []
    if avoid.self_ and len(model.self_pairs):
        i, j = model.self_pairs[:, 0], model.self_pairs[:, 1]
        _, _, p1, p2 = segment_closest(ca[i], cb[i], ca[j], cb[j])
        gap = p1 - p2
        length = np.linalg.norm(gap, axis=-1)
        d = length - model.radius[i] - model.radius[j]
        n = np.where(length[:, None] > 1e-12, gap / np.maximum(length, 1e-300)[:, None], np.array([0.0, 0.0, 1.0]))
        d_all.append(d)
        cap_a.append(i)
        point_a.append(p1)
        cap_b.append(j)
        point_b.append(p2)
        normal.append(n)
        names += [(model.links[x], model.links[y]) for x, y in zip(i, j)]
    world = avoid.world
    moving = np.flatnonzero(model.moving)
    if world is not None and len(moving):
        arrays = world.arrays
        wc = len(arrays["caps_r"])
        if wc:
            ri = np.repeat(moving, wc)
            wi = np.tile(np.arange(wc), len(moving))
            _, _, p1, p2 = segment_closest(ca[ri], cb[ri], arrays["caps_a"][wi], arrays["caps_b"][wi])
            gap = p1 - p2
            length = np.linalg.norm(gap, axis=-1)
            d = length - model.radius[ri] - arrays["caps_r"][wi]
            n = np.where(length[:, None] > 1e-12, gap / np.maximum(length, 1e-300)[:, None], np.array([0.0, 0.0, 1.0]))
            d_all.append(d)
            cap_a.append(ri)
            point_a.append(p1)
            cap_b.append(np.full(len(ri), -1))
            point_b.append(p2)
            normal.append(n)
            names += [(model.links[x], arrays["caps_name"][w]) for x, w in zip(ri, wi)]
        wb = len(arrays["box_half"])
        if wb:
            ri = np.repeat(moving, wb)
            wi = np.tile(np.arange(wb), len(moving))
            p, sdf, n = _segment_box(ca[ri], cb[ri], arrays["box_rot"][wi], arrays["box_centre"][wi], arrays["box_half"][wi])
            d_all.append(sdf - model.radius[ri])
            cap_a.append(ri)
            point_a.append(p)
            cap_b.append(np.full(len(ri), -1))
            point_b.append(p - n * sdf[:, None])
            normal.append(n)
            names += [(model.links[x], arrays["box_name"][w]) for x, w in zip(ri, wi)]
    if world is not None and world.ground and len(moving):
        za, zb = ca[moving, 2], cb[moving, 2]
        low = np.where((za <= zb)[:, None], ca[moving], cb[moving])
        d_all.append(np.minimum(za, zb) - model.radius[moving])
        cap_a.append(moving)
        point_a.append(low)
        cap_b.append(np.full(len(moving), -1))
        point_b.append(low * np.array([1.0, 1.0, 0.0]))
        normal.append(np.tile(np.array([0.0, 0.0, 1.0]), (len(moving), 1)))
        names += [(model.links[x], GROUND) for x in moving]
    if not d_all:
        empty = np.zeros((0, 3))
        return _Pairs(np.zeros(0), np.zeros(0, dtype=int), empty, np.zeros(0, dtype=int), empty, empty, []), (origins, axes)
    return _Pairs(np.concatenate(d_all), np.concatenate(cap_a), np.concatenate(point_a), np.concatenate(cap_b),
                  np.concatenate(point_b), np.concatenate(normal), names), (origins, axes)


def _obstacle_names(avoid: Avoid) -> frozenset:
    names = set(avoid.world.names) if avoid.world is not None else set()
    if avoid.world is not None and avoid.world.ground:
        names.add(GROUND)
    return frozenset(names)


def _summarise(pairs: _Pairs, avoid: Avoid) -> Clearance:
    obstacles = _obstacle_names(avoid)
    if not len(pairs.d):
        return Clearance(math.inf, (), (), obstacles)
    # one entry per named pair (a link pair has several capsule pairs): its smallest distance
    order = np.argsort(pairs.d)
    best: dict[tuple, float] = {}
    for k in order.tolist():
        name = pairs.names[k]
        if name not in best:
            best[name] = float(pairs.d[k])
        if len(best) >= 64 and pairs.d[k] > avoid.margin_m:
            break
    listed = [(a, b, d) for (a, b), d in best.items() if d < avoid.margin_m] or [next((a, b, d) for (a, b), d in best.items())]
    colliding = tuple((a, b) for a, b, d in listed if d < 0)
    return Clearance(float(pairs.d[order[0]]), tuple(listed), colliding, obstacles)


def clearance(robot, q, avoid: Avoid) -> Clearance:
    """The clearance of configuration q (n,) from what `avoid` names, by the capsule model."""
    check_avoid(avoid)
    q = np.asarray(q, dtype=float)
    if q.shape != (robot.dof,) or not np.all(np.isfinite(q)):
        raise KinemaError(f"clearance needs {robot.dof} finite joint values (robot '{robot.name}')")
    model, kin = _setup(robot, avoid)
    pairs, _ = _pairs(robot, model, kin, avoid, q)
    return _summarise(pairs, avoid)


# ---- the solve -------------------------------------------------------------------------------

#: Weight of a hinge residual (m) against the pose residual (m, rad).
HINGE_WEIGHT = 1.0
#: Largest joint step per iteration (rad or m): keeps a step from jumping through a thin obstacle.
MAX_STEP = 0.15
#: Iterations of the collision-aware descent.
DESCENT_ITERATIONS = 150
#: Seeds beyond the start and the plain answer that a cold solve tries.
COLD_SEEDS = 6


def _descend(robot, problem, model, kin, avoid, q0, targets, tol_p, tol_r, iterations, margin):
    """LM on [pose residual; hinge residuals of pairs closer than `margin`]. Returns the best
    collision-free iterate (pose error first), or the least-penetrating one when none is free:
    (q, errors (T, 2), clearance of it, iterations)."""
    free = problem.free
    lower, upper = robot.lower[free], robot.upper[free]
    q = np.clip(q0.copy(), robot.lower, robot.upper)
    lam = 1e-3
    best = None  # (key, q, errors, min distance)
    weights = targets.weights
    wrow = np.repeat(weights, 3, axis=1).reshape(-1)
    cost_prev = None
    stall = 0
    used = 0
    for used in range(1, iterations + 1):
        errors, residual, jac = problem.residual(q[None], targets.rotations, targets.positions)
        pairs, (origins, axes) = _pairs(robot, model, kin, avoid, q)
        d = pairs.d
        dmin = float(d.min()) if len(d) else math.inf
        pose_ok = bool(np.all((errors[0] <= (tol_p, tol_r)) | (weights == 0)))
        pose_cost = float(np.sum((errors[0] * weights) ** 2))
        key = (0 if dmin >= 0 else 1, pose_cost if dmin >= 0 else -dmin)
        if best is None or key < best[0]:
            best = (key, q.copy(), errors[0].copy(), dmin)
        active = d < margin
        if pose_ok and not active.any():
            break
        if pose_ok and dmin >= 0 and margin == 0:
            break
        r = residual[0] * wrow
        j = jac[0] * wrow[:, None]
        if active.any():
            idx = np.flatnonzero(active)
            grad = kin.gradient(pairs.cap_a[idx], pairs.point_a[idx], pairs.normal[idx], origins, axes)
            self_rows = pairs.cap_b[idx] >= 0
            if self_rows.any():
                sb = idx[self_rows]
                grad[self_rows] -= kin.gradient(pairs.cap_b[sb], pairs.point_b[sb], pairs.normal[sb], origins, axes)
            hinge = HINGE_WEIGHT * (margin - d[idx])
            r = np.concatenate([r, hinge])
            j = np.concatenate([j, HINGE_WEIGHT * grad[:, free]])
        cost = float(r @ r)
        if cost_prev is not None and cost > cost_prev * (1 - 1e-9):
            lam = min(lam * 10.0, 1e6)
            stall += 1
            if stall > 12:
                break
        else:
            lam = max(lam * 0.3, 1e-7)
            stall = 0
        cost_prev = cost if cost_prev is None else min(cost, cost_prev)
        jtj = j.T @ j
        step = np.linalg.solve(jtj + lam * (np.diag(np.diag(jtj)) + 1e-9 * np.eye(len(free))), j.T @ r)
        biggest = float(np.max(np.abs(step), initial=0.0))
        if biggest > MAX_STEP:
            step *= MAX_STEP / biggest
        x = np.clip(q[free] + step, lower, upper)
        q = q.copy()
        q[free] = x
    _, q_best, errors_best, dmin_best = best
    return q_best, errors_best, dmin_best, used


def solve_avoiding(robot, targets, start, options, plain_solve):
    """`solve` under `options.avoid` (see the module docstring). `plain_solve` is the solve
    without avoidance (core.solve's own), so this stage adds only the collision part."""
    from ..solve import check_targets, problem_for
    from ..solve._types import SolveResult

    t0 = time.perf_counter()
    avoid = options.avoid
    check_avoid(avoid)
    plain_options = replace(options, avoid=None)
    base = plain_solve(robot, targets, start, plain_options)
    model, kin = _setup(robot, avoid)
    base_pairs, _ = _pairs(robot, model, kin, avoid, base.joints)
    base_clear = _summarise(base_pairs, avoid)
    if base.converged and base_clear.min_m >= avoid.margin_m:
        return _with_clearance(base, base_clear, t0)
    arrays = check_targets(robot, targets)
    problem = problem_for(robot, arrays.links, frozenset(options.held_joints))
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    start = np.asarray(start, dtype=float)
    seeds = [start, base.joints]
    if options.cold:
        rng = np.random.default_rng(1)
        for q in robot.random_configurations(COLD_SEEDS, rng):
            seed = start.copy()
            seed[problem.free] = q[problem.free]
            seeds.append(seed)
    candidates = []
    if base.converged and base_clear.min_m >= 0:
        candidates.append((base.joints, None, base_clear.min_m))
    iterations = base.iterations
    budget_s = options.budget_ms / 1000.0 * 4  # the avoiding solve may take a few plain budgets
    for seed in seeds:
        for margin in ((avoid.margin_m, 0.0) if avoid.margin_m > 0 else (0.0,)):
            q, errors, dmin, used = _descend(robot, problem, model, kin, avoid, seed, arrays, tol_p, tol_r,
                                             max(DESCENT_ITERATIONS, int(options.max_iterations)), margin)
            iterations += used
            ok = bool(np.all((errors <= (tol_p, tol_r)) | (arrays.weights == 0)))
            candidates.append((q, errors, dmin))
            if ok and dmin >= 0:
                break
            seed = q
        if candidates and _done(candidates[-1], arrays, tol_p, tol_r):
            break
        if time.perf_counter() - t0 > budget_s:
            break
    # the answer: collision-free first, then nearest the goal
    scored = []
    for q, errors, dmin in candidates:
        q_done = np.clip(q, robot.lower, robot.upper)
        errors_done = problem.residual(q_done[None], arrays.rotations, arrays.positions, with_jacobian=False)[0][0]
        pairs, _ = _pairs(robot, model, kin, avoid, q_done)
        clear = _summarise(pairs, avoid)
        ok = bool(np.all((errors_done <= (tol_p, tol_r)) | (arrays.weights == 0)))
        cost = float(np.sum((errors_done * arrays.weights) ** 2))
        scored.append(((0 if clear.min_m >= 0 else 1, 0 if ok else 1, cost if clear.min_m >= 0 else -clear.min_m),
                       q_done, errors_done, clear, ok))
    scored.sort(key=lambda item: item[0])
    _, q, errors, clear, ok = scored[0]
    converged = ok and clear.min_m >= 0
    if converged:
        reason = "converged"
    elif clear.colliding or clear.min_m < avoid.margin_m:
        pair = clear.colliding[0] if clear.colliding else clear.pairs[0][:2]
        reason = collision_reason(pair, clear.obstacles)
    else:
        reason = base.reason if base.reason != "converged" else "out of reach"
    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
    return SolveResult(joints=q, position_error=position_error, rotation_error=rotation_error, converged=converged,
                       reason=reason, iterations=int(iterations), ms=(time.perf_counter() - t0) * 1000.0,
                       backend=base.backend, fallback_reason=base.fallback_reason,
                       min_clearance_m=clear.min_m, colliding=clear.colliding)


def _done(candidate, arrays, tol_p, tol_r) -> bool:
    _, errors, dmin = candidate
    if errors is None:
        return dmin >= 0
    return dmin >= 0 and bool(np.all((errors <= (tol_p, tol_r)) | (arrays.weights == 0)))


def _with_clearance(result, clear: Clearance, t0: float):
    result.min_clearance_m = clear.min_m
    result.colliding = clear.colliding
    result.ms = (time.perf_counter() - t0) * 1000.0
    return result
