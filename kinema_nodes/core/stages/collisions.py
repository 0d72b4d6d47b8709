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
from ..model.rotations import quaternion_to_matrix

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
    #: An SRDF whose <disable_collisions> pairs replace the computed ones (None: the robot's own
    #: .srdf beside its URDF if there is one, else the computed pairs).
    srdf: str | None = None


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
            box_rot.append(quaternion_to_matrix(obstacle.pose[3:]))
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
    # point sets (+ a radius) whose hull is each primitive, for `_collision_kernel.hull_refine`
    set_points, set_start, set_radius, caps_set, box_set = [], [0], [], [], []
    mesh_names = {n for o, n in zip(world.obstacles, world.names) if isinstance(o, MeshObstacle)}
    for a, b, r, name in zip(caps_a, caps_b, caps_r, caps_name):
        if name in mesh_names:
            caps_set.append(-1)  # a mesh's capsules: kept as they are
            continue
        caps_set.append(len(set_radius))
        set_points += [a, b]
        set_start.append(set_start[-1] + 2)
        set_radius.append(r)
    for rot, centre, half in zip(box_rot, box_centre, box_half):
        box_set.append(len(set_radius))
        corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float) * half
        set_points += list(corners @ np.asarray(rot).T + np.asarray(centre))
        set_start.append(set_start[-1] + 8)
        set_radius.append(0.0)
    return {
        "set_points": np.array(set_points, dtype=float).reshape(-1, 3), "set_start": np.array(set_start, dtype=np.int64),
        "set_radius": np.array(set_radius, dtype=float), "caps_set": tuple(caps_set), "box_set": tuple(box_set),
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
    rotation, offset = quaternion_to_matrix(pose[3:]), np.asarray(pose[:3])
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
        # a point for the second segment (a sphere): the first one's point nearest it
        s = np.where((e <= eps) & (a > eps), np.clip(-c / np.where(a > eps, a, 1.0), 0.0, 1.0), s)
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


def _local_sdf(local, half):
    """Signed distance of points in a box's own frame (..., 3) to the box of half sizes `half`."""
    q = np.abs(local) - half
    outside = np.maximum(q, 0.0)
    return np.sqrt(np.sum(outside * outside, axis=-1)) + np.minimum(np.max(q, axis=-1), 0.0)


#: Segment-to-box: samples along the segment, then golden-section steps in the best bracket.
_BOX_SAMPLES = 9
_BOX_REFINE = 14
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _segment_box(a, b, rot, centre, half):
    """Closest point of segments to boxes. A box's signed distance is convex, so along a segment
    it has one minimum: bracketed from samples, then narrowed by golden-section steps (P pairs
    at once, in each box's own frame). Returns (point on the segment, its signed distance to the
    box, the outward unit normal there)."""
    a_l = np.einsum("pji,pj->pi", rot, a - centre)
    ab_l = np.einsum("pji,pj->pi", rot, b - a)
    ts = np.linspace(0.0, 1.0, _BOX_SAMPLES)
    samples = _local_sdf(a_l[:, None] + ts[None, :, None] * ab_l[:, None], half[:, None])
    k = np.argmin(samples, axis=1)
    step = 1.0 / (_BOX_SAMPLES - 1)
    lo = np.maximum(k * step - step, 0.0)
    hi = np.minimum(k * step + step, 1.0)
    x1 = hi - _GOLDEN * (hi - lo)
    x2 = lo + _GOLDEN * (hi - lo)
    f1 = _local_sdf(a_l + x1[:, None] * ab_l, half)
    f2 = _local_sdf(a_l + x2[:, None] * ab_l, half)
    for _ in range(_BOX_REFINE):
        left = f1 < f2
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        x2n = np.where(left, x1, lo + _GOLDEN * (hi - lo))
        x1n = np.where(left, hi - _GOLDEN * (hi - lo), x2)
        moved = np.where(left, x1n, x2n)
        fm = _local_sdf(a_l + moved[:, None] * ab_l, half)
        f1, f2 = np.where(left, fm, f2), np.where(left, f1, fm)
        x1, x2 = x1n, x2n
    t = 0.5 * (lo + hi)
    local = a_l + t[:, None] * ab_l
    d = _local_sdf(local, half)
    best = samples[np.arange(len(a)), k]
    use_sample = best < d  # a flat minimum the narrowing cannot improve on
    t = np.where(use_sample, k * step, t)
    local = a_l + t[:, None] * ab_l
    q = np.abs(local) - half
    outside = np.maximum(q, 0.0)
    out_norm = np.sqrt(np.sum(outside * outside, axis=-1))
    d = out_norm + np.minimum(np.max(q, axis=-1), 0.0)
    sign = np.where(local >= 0, 1.0, -1.0)
    grad = sign * outside / np.maximum(out_norm, 1e-300)[:, None]
    inner = out_norm <= 0
    if inner.any():
        face = np.argmax(q[inner], axis=-1)
        g = np.zeros((int(inner.sum()), 3))
        g[np.arange(len(g)), face] = sign[inner][np.arange(len(g)), face]
        grad[inner] = g
    return a + t[:, None] * (b - a), d, np.einsum("pij,pj->pi", rot, grad)


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
        self.capsule_link = np.array([index[name] for name in model.links], dtype=np.int64)
        self.steps_i = np.array([(parent, child, kind, source, max(m, 0)) for parent, child, _, _, kind, source, _, _, m in self.steps],
                                dtype=np.int64).reshape(-1, 5)
        self.steps_f = np.array([np.concatenate([origin.ravel(), axis, [multiplier, offset]])
                                 for _, _, origin, axis, _, _, multiplier, offset, _ in self.steps], dtype=float).reshape(-1, 21)
        self.root = index[robot.root_link]
        self.layouts: dict = {}
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


_PROBE_WORLD = World((Box((0.1, 0.1, 0.1), (9.0, 9.0, 9.0, 1.0, 0.0, 0.0, 0.0), "probe"),
                      Sphere((9.0, 0.0, 9.0), 0.1, "probe ball")), ground=True)


def _setup(robot, avoid: Avoid):
    from ..model.collision import collision_model

    model = collision_model(robot, avoid.srdf)
    cache = robot.cache("collision_kinematics")
    kin = cache.get(avoid.srdf)
    if kin is None:
        kin = _Kinematics(robot, model)
        _pairs(robot, model, kin, Avoid(True, _PROBE_WORLD, 0.0, avoid.srdf), np.clip(np.zeros(robot.dof), robot.lower, robot.upper))
        cache[avoid.srdf] = kin  # the kernel compiled (or loaded from its cache) before any solve's clock runs
    return model, kin


#: Tests set this to run the NumPy form even where the numba one is built.
FORCE_NUMPY = False


def _layout(model, kin, avoid: Avoid):
    """Which capsule and which obstacle each pair row is, and its names: fixed for a robot and a
    world, so worked out once (rows in the order both forms of `_pairs` fill them)."""
    key = (avoid.self_, avoid.world)
    got = kin.layouts.get(key)
    if got is not None:
        return got
    cap_a, cap_b, names, sets = [], [], [], []
    if avoid.self_ and len(model.self_pairs):
        cap_a += model.self_pairs[:, 0].tolist()
        cap_b += model.self_pairs[:, 1].tolist()
        names += [(model.links[x], model.links[y]) for x, y in model.self_pairs.tolist()]
        sets += [-3] * len(model.self_pairs)
    world = avoid.world
    moving = np.flatnonzero(model.moving)
    if world is not None:
        arrays = world.arrays
        for table, set_table in (("caps_name", "caps_set"), ("box_name", "box_set")):
            for i in moving.tolist():
                for name, which in zip(arrays[table], arrays[set_table]):
                    cap_a.append(i)
                    cap_b.append(-1)
                    names.append((model.links[i], name))
                    sets.append(which)
        if world.ground:
            for i in moving.tolist():
                cap_a.append(i)
                cap_b.append(-1)
                names.append((model.links[i], GROUND))
                sets.append(-2)
    cap_a = np.array(cap_a, dtype=np.int64)
    cap_b = np.array(cap_b, dtype=np.int64)
    link_a = kin.capsule_link[cap_a] if len(cap_a) else np.zeros(0, dtype=np.int64)
    link_b = np.where(cap_b >= 0, kin.capsule_link[np.maximum(cap_b, 0)], 0) if len(cap_b) else np.zeros(0, dtype=np.int64)
    got = (cap_a, cap_b, names, moving.astype(np.int64), (link_a.astype(np.int64), link_b.astype(np.int64),
                                                         np.array(sets, dtype=np.int64)))
    if len(kin.layouts) > 16:
        kin.layouts.clear()
    kin.layouts[key] = got
    return got


_EMPTY_WORLD = {"set_points": np.zeros((0, 3)), "set_start": np.zeros(1, dtype=np.int64), "set_radius": np.zeros(0),
                "caps_a": np.zeros((0, 3)), "caps_b": np.zeros((0, 3)), "caps_r": np.zeros(0), "box_rot": np.zeros((0, 3, 3)),
                "box_centre": np.zeros((0, 3)), "box_half": np.zeros((0, 3))}


def _pairs(robot, model, kin, avoid: Avoid, q) -> tuple[_Pairs, tuple]:
    from . import _collision_kernel

    run = None if FORCE_NUMPY else _collision_kernel.compiled()
    if run is None:
        pairs, frames, poses = _pairs_numpy(robot, model, kin, avoid, q)
        _refine(model, kin, avoid, pairs, poses, _collision_kernel.hull_refine)
        return pairs, frames
    cap_a, cap_b, names, moving, _ = _layout(model, kin, avoid)
    world = avoid.world.arrays if avoid.world is not None else _EMPTY_WORLD
    count = len(cap_a)
    poses = np.empty((len(robot.links), 4, 4))
    d = np.empty(count)
    point_a = np.empty((count, 3))
    point_b = np.empty((count, 3))
    normal = np.empty((count, 3))
    origins = np.empty((kin.movable_count, 3))
    axes = np.empty((kin.movable_count, 3))
    self_pairs = model.self_pairs if avoid.self_ else _NO_PAIRS
    run(np.asarray(q, dtype=float), kin.steps_i, kin.steps_f, len(robot.links), kin.root, kin.capsule_link, model.a, model.b,
        model.radius, self_pairs, moving, world["caps_a"], world["caps_b"], world["caps_r"], world["box_rot"],
        world["box_centre"], world["box_half"], bool(avoid.world is not None and avoid.world.ground), d, point_a, point_b,
        normal, origins, axes, poses)
    pairs = _Pairs(d, cap_a, point_a, cap_b, point_b, normal, names)
    _refine(model, kin, avoid, pairs, poses, _collision_kernel.compiled_refine())
    return pairs, (origins, axes)


#: Pairs whose capsules come this close (m, beyond the margin) are measured again on the links' hulls.
REFINE_WITHIN = 0.03


def _refine(model, kin, avoid: Avoid, pairs: _Pairs, poses, run) -> None:
    """Near pairs measured again between the links' convex pieces (`_collision_kernel.hull_refine`):
    the capsules wrap a link loosely (twice to three times its hull's volume), the pieces tightly,
    and both distances are lower bounds of the meshes' own, so the larger one is kept."""
    within = avoid.margin_m + REFINE_WITHIN
    if not len(pairs.d) or float(pairs.d.min()) >= within or not len(model.hull_local):
        return
    link_a, link_b, sets = _layout(model, kin, avoid)[4]
    world = avoid.world.arrays if avoid.world is not None else _EMPTY_WORLD
    run(poses, model.hull_local, model.piece_start, model.link_pieces, link_a, link_b, sets, world["set_points"],
        world["set_start"], world["set_radius"], within, pairs.d, pairs.point_a, pairs.point_b, pairs.normal)


_NO_PAIRS = np.zeros((0, 2), dtype=np.int64)


def _pairs_numpy(robot, model, kin, avoid: Avoid, q) -> tuple[_Pairs, tuple, np.ndarray]:
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
        return _Pairs(np.zeros(0), np.zeros(0, dtype=int), empty, np.zeros(0, dtype=int), empty, empty, []), (origins, axes), poses
    return _Pairs(np.concatenate(d_all), np.concatenate(cap_a), np.concatenate(point_a), np.concatenate(cap_b),
                  np.concatenate(point_b), np.concatenate(normal), names), (origins, axes), poses


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
HINGE_WEIGHT = 10.0
#: Largest joint step per iteration (rad or m): keeps a step from jumping through a thin obstacle.
MAX_STEP = 0.3
#: A descent within tolerance and clear stops after this many iterations even if it is inside the margin.
SETTLE_ITERATIONS = 20
#: Iterations of the collision-aware descent.
DESCENT_ITERATIONS = 150
#: Time the collision stage may take after the plain solve, in plain solve budgets (SolveOptions.budget_ms).
AVOID_BUDGETS = 4
#: ... and never more than this (s): a bake gives each frame a budget of a minute.
MAX_AVOID_S = 1.0
#: A pose this share of the margin clear keeps the margin (the descent settles a hair inside it).
KEPT = 0.9
#: A solve that stops short with a pair this close (m, beyond the margin) was stopped by that pair.
BLOCKED_WITHIN = 0.01
#: Random seeds a cold solve tries with the plain solver for a clear branch before descending.
BRANCH_SEEDS = 24
#: Seeds beyond the start and the plain answer that a cold solve tries.
COLD_SEEDS = 6


def _movable_rows(model, kin, avoid: Avoid, free) -> np.ndarray:
    """Which pair rows the free joints can change: a link pair whose two links the free joints
    move differently, or a link the free joints move against an obstacle. The rest (the other
    arm, held joints) the solve cannot help, so they do not steer it (they still count in
    whether the answer collides)."""
    key = (avoid.self_, avoid.world, "movable", tuple(int(i) for i in free))
    got = kin.layouts.get(key)
    if got is None:
        cap_a, cap_b, _, _, _ = _layout(model, kin, avoid)
        moved_by = kin.ancestor[:, np.isin(kin.sources, free)]  # (links, free movable joints)
        rows_a = moved_by[kin.capsule_link[cap_a]]
        rows_b = np.where((cap_b >= 0)[:, None], moved_by[kin.capsule_link[np.maximum(cap_b, 0)]], False)
        got = kin.layouts[key] = np.any(rows_a != rows_b, axis=1)
    return got


def _subset(pairs: _Pairs, rows: np.ndarray) -> _Pairs:
    if rows.all():
        return pairs
    index = np.flatnonzero(rows)
    return _Pairs(pairs.d[index], pairs.cap_a[index], pairs.point_a[index], pairs.cap_b[index], pairs.point_b[index],
                  pairs.normal[index], [pairs.names[i] for i in index])


def _evaluate(robot, problem, model, kin, avoid, q, targets, wrow, margin, rows):
    errors, residual, jac = problem.residual(q[None], targets.rotations, targets.positions)
    pairs, frames = _pairs(robot, model, kin, avoid, q)
    pairs = _subset(pairs, rows)
    hinge = np.maximum(margin - pairs.d, 0.0) * HINGE_WEIGHT
    r = residual[0] * wrow
    merit = float(r @ r + hinge @ hinge)
    return errors[0], r, jac[0], pairs, frames, hinge, merit


def _damped(j, r, lam):
    """min |J dx - r|^2 + lam |diag(J^T J)| dx|^2 (Levenberg-Marquardt's step)."""
    jtj = j.T @ j
    return np.linalg.solve(jtj + lam * np.diag(np.diag(jtj)) + (1e-9 + lam * 1e-6) * np.eye(jtj.shape[0]), j.T @ r)


def _priority_step(j_pose, r_pose, j_hinge, r_hinge, lam):
    """The step that first pushes every pair closer than the margin back out to it (the hinge
    rows, solved first), then moves toward the pose only in what that leaves free (the null
    space of the hinge rows): where the pose is reachable clear of everything it converges to
    the solver's tolerance; where it is not, the pairs hold and the pose stops short."""
    n = j_pose.shape[1]
    h_pinv = np.linalg.pinv(j_hinge, rcond=1e-6)
    dx_hinge = h_pinv @ r_hinge
    null = np.eye(n) - h_pinv @ j_hinge
    j_null = j_pose @ null
    rest = r_pose - j_pose @ dx_hinge
    jtj = j_null.T @ j_null
    dx_pose = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj)) + (1e-9 + lam * 1e-6) * np.eye(n), j_null.T @ rest)
    return dx_hinge + null @ dx_pose


def _descend(robot, problem, model, kin, avoid, q0, targets, tol_p, tol_r, iterations, margin, deadline=math.inf, rows=None):
    """Levenberg-Marquardt on [pose residual; hinge residuals of pairs closer than `margin`],
    a step taken only when it lowers the sum of squares. Returns the best collision-free iterate
    (one keeping the margin first, then pose error; the least-penetrating one when none is
    free), its errors (T, 2), its
    smallest distance, the iterations used, and the pair nearest at the last iterate (what
    stopped the descent, when something did)."""
    free = problem.free
    lower, upper = robot.lower[free], robot.upper[free]
    weights = targets.weights
    wrow = np.repeat(weights, 3, axis=1).reshape(-1)
    q = np.clip(q0.copy(), robot.lower, robot.upper)
    if rows is None:
        rows = _movable_rows(model, kin, avoid, free)
    errors, r, jac, pairs, (origins, axes), hinge, merit = _evaluate(robot, problem, model, kin, avoid, q, targets, wrow, margin,
                                                                     rows)
    lam = 1e-3
    best = None
    used = 0
    rejected = 0
    while True:
        dmin = float(pairs.d.min()) if len(pairs.d) else math.inf
        pose_cost = float(np.sum((errors * weights) ** 2))
        key = (0 if dmin >= KEPT * margin else 1, pose_cost) if dmin >= 0 else (2, -dmin)
        if best is None or key < best[0]:
            best = (key, q.copy(), errors.copy(), dmin)
        pose_ok = bool(np.all((errors <= (tol_p, tol_r)) | (weights == 0)))
        if pose_ok and (not hinge.any() or (dmin >= 0 and used >= SETTLE_ITERATIONS)):
            break
        if used >= iterations or rejected > 10 or time.perf_counter() > deadline:
            break
        j_pose = jac * wrow[:, None]
        active = np.flatnonzero(hinge > 0)
        j_hinge = None
        if len(active):
            grad = kin.gradient(pairs.cap_a[active], pairs.point_a[active], pairs.normal[active], origins, axes)
            self_rows = pairs.cap_b[active] >= 0
            if self_rows.any():
                sb = active[self_rows]
                grad[self_rows] -= kin.gradient(pairs.cap_b[sb], pairs.point_b[sb], pairs.normal[sb], origins, axes)
            j_hinge = grad[:, free]
            r_hinge = hinge[active] / HINGE_WEIGHT  # metres to push out, back to the margin
        scale = 1.0
        while True:
            used += 1
            step = _priority_step(j_pose, r, j_hinge, r_hinge, lam) if j_hinge is not None else _damped(j_pose, r, lam)
            step *= scale
            biggest = float(np.max(np.abs(step), initial=0.0))
            if biggest > MAX_STEP:
                step *= MAX_STEP / biggest
            q_new = q.copy()
            q_new[free] = np.clip(q[free] + step, lower, upper)
            got = _evaluate(robot, problem, model, kin, avoid, q_new, targets, wrow, margin, rows)
            if got[-1] < merit:
                q = q_new
                errors, r, jac, pairs, (origins, axes), hinge, merit = got
                lam = max(lam * 0.3, 1e-9)
                rejected = 0
                break
            lam = min(lam * 10.0, 1e8)
            scale *= 0.5  # the push-out rows are not damped by lam: shorten the whole step
            rejected += 1
            if rejected > 10 or used >= iterations:
                break
    nearest = None
    if len(pairs.d) and float(pairs.d.min()) < margin + BLOCKED_WITHIN:
        nearest = pairs.names[int(np.argmin(pairs.d))]
    _, q_best, errors_best, dmin_best = best
    return q_best, errors_best, dmin_best, used, nearest


def solve_avoiding(robot, targets, start, options, plain_solve):
    """`solve` under `options.avoid` (see the module docstring). `plain_solve` is the solve
    without avoidance (core.solve's own), so this stage adds only the collision part."""
    from ..solve import check_targets, problem_for
    from ..solve import SolveResult

    t0 = time.perf_counter()
    avoid = options.avoid
    check_avoid(avoid)
    model, kin = _setup(robot, avoid)
    t0 = time.perf_counter()
    plain_options = replace(options, avoid=None)
    base = plain_solve(robot, targets, start, plain_options)
    base_pairs, _ = _pairs(robot, model, kin, avoid, base.joints)
    base_clear = _summarise(base_pairs, avoid)
    if base.converged and base_clear.min_m >= avoid.margin_m:
        return _with_clearance(base, base_clear, t0)
    arrays = check_targets(robot, targets)
    problem = problem_for(robot, arrays.links, frozenset(options.held_joints))
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    start = np.asarray(start, dtype=float)
    seeds = [base.joints, start] if base.converged else [start, base.joints]
    if options.cold:
        rng = np.random.default_rng(1)
        for q in robot.random_configurations(COLD_SEEDS, rng):
            seed = start.copy()
            seed[problem.free] = q[problem.free]
            seeds.append(seed)
    candidates = [start]  # the start itself: an answer no worse than where the arm is, whatever time allows
    if base.converged and base_clear.min_m >= 0:
        candidates.append(base.joints)
    iterations = base.iterations
    blockers = []
    # the collision stage's own time: a few plain budgets, counted from here
    budget_s = time.perf_counter() - t0 + min(options.budget_ms / 1000.0 * AVOID_BUDGETS, MAX_AVOID_S)
    margins = (avoid.margin_m, 0.0) if avoid.margin_m > 0 else (0.0,)
    finished = False
    rows = _movable_rows(model, kin, avoid, problem.free)
    if options.cold:
        # Another branch first: plain solves from random seeds cost a fraction of a millisecond
        # each, and a goal the plain answer reaches through something is often reached clear by
        # another branch (an elbow up instead of down).
        warm = replace(plain_options, cold=False)
        rng = np.random.default_rng(2)
        for q in robot.random_configurations(BRANCH_SEEDS, rng):
            seed = start.copy()
            seed[problem.free] = q[problem.free]
            other = plain_solve(robot, targets, seed, warm, keep_branch=False)  # a random seed: any branch will do
            iterations += other.iterations
            if other.converged:
                other_pairs, _ = _pairs(robot, model, kin, avoid, other.joints)
                reach = _subset(other_pairs, rows).d
                if not len(reach) or float(reach.min()) >= KEPT * avoid.margin_m:
                    candidates.append(other.joints)
                    finished = True
                    break
                if float(other_pairs.d.min(initial=math.inf)) >= 0:
                    candidates.append(other.joints)
            if time.perf_counter() - t0 > budget_s:
                break
        if finished:
            seeds = []
    for seed in seeds:
        for margin in margins:
            q, errors, dmin, used, nearest = _descend(robot, problem, model, kin, avoid, seed, arrays, tol_p, tol_r,
                                                      max(DESCENT_ITERATIONS, int(options.max_iterations)), margin,
                                                      t0 + budget_s, rows)
            iterations += used
            candidates.append(q)
            ok = bool(np.all((errors <= (tol_p, tol_r)) | (arrays.weights == 0)))
            if ok and dmin >= 0:  # within tolerance and clear; the margin is kept where the descent could
                finished = True
                break
            if not ok and nearest is not None:
                blockers.append(nearest)
            seed = q
        if finished or time.perf_counter() - t0 > budget_s:
            break
    # the answer: collision-free first, then within tolerance, then clear by the margin, then nearest the goal
    scored = []
    for q in candidates:
        q_done = np.clip(q, robot.lower, robot.upper)
        errors_done = problem.residual(q_done[None], arrays.rotations, arrays.positions, with_jacobian=False)[0][0]
        pairs, _ = _pairs(robot, model, kin, avoid, q_done)
        clear = _summarise(pairs, avoid)
        movable = _subset(pairs, rows)
        reach = float(movable.d.min()) if len(movable.d) else math.inf  # what the solve could change
        ok = bool(np.all((errors_done <= (tol_p, tol_r)) | (arrays.weights == 0)))
        cost = float(np.sum((errors_done * arrays.weights) ** 2))
        free = reach >= 0
        scored.append(((0 if clear.min_m >= 0 else 1, 0 if free else 1, 0 if ok else 1, 0 if reach >= KEPT * avoid.margin_m else 1,
                        cost if free else -reach), q_done, errors_done, clear, ok, movable))
    scored.sort(key=lambda item: item[0])
    _, q, errors, clear, ok, movable = scored[0]
    converged = ok and clear.min_m >= 0
    if converged:
        reason = "converged"
    else:
        reason = _blocked_reason(clear, movable, blockers, avoid)
        if reason is None:
            reason = base.reason if base.reason != "converged" else "out of reach"
    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
    return SolveResult(joints=q, position_error=position_error, rotation_error=rotation_error, converged=converged,
                       reason=reason, iterations=int(iterations), ms=(time.perf_counter() - t0) * 1000.0,
                       backend=base.backend, fallback_reason=base.fallback_reason,
                       min_clearance_m=clear.min_m, colliding=clear.colliding)


def _blocked_reason(clear: Clearance, movable: _Pairs, blockers: list, avoid: Avoid) -> str | None:
    """What stopped a solve, named: an overlapping pair the solve could move first, then any
    overlapping pair (the answer collides, whatever caused it), then the nearest pair the solve
    could move within the margin (+ `BLOCKED_WITHIN`), then what stopped the descents; None
    when no collision was in the way."""
    order = np.argsort(movable.d) if len(movable.d) else np.zeros(0, dtype=int)
    if len(order) and movable.d[order[0]] < 0:
        return collision_reason(movable.names[int(order[0])], clear.obstacles)
    if clear.colliding:
        return collision_reason(clear.colliding[0], clear.obstacles)
    if len(order) and movable.d[order[0]] < avoid.margin_m + BLOCKED_WITHIN:
        return collision_reason(movable.names[int(order[0])], clear.obstacles)
    if blockers:
        return collision_reason(blockers[0], clear.obstacles)
    return None


def _with_clearance(result, clear: Clearance, t0: float):
    result.min_clearance_m = clear.min_m
    result.colliding = clear.colliding
    result.ms = (time.perf_counter() - t0) * 1000.0
    return result
