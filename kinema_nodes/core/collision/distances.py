"""Every checked pair's signed distance at one configuration: the robot's capsules against each
other and against the world, by the numba kernel (`_kernel.py`) or the NumPy form, then the near
pairs measured again on the links' convex pieces.

A distance is signed (negative: the two overlap by that much), so "colliding" means a distance
below zero, and `Avoid.margin_m` is how far the solver keeps things apart when it can.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .avoid import Avoid
from .geometry import _segment_box, segment_closest
from .kinematics import CollisionKinematics
from .world import GROUND, Box, Sphere, World

if TYPE_CHECKING:
    from ..model.robot import RobotModel
    from .collision_model import CollisionModel


@dataclass
class Pairs:
    """Every checked pair at one configuration: distances, the closest point on the robot side
    (and the other side for self pairs), the unit normal pushing them apart, names."""

    d: np.ndarray
    cap_a: np.ndarray
    point_a: np.ndarray
    cap_b: np.ndarray  # -1 for an obstacle
    point_b: np.ndarray
    normal: np.ndarray  # moves A away from B
    names: list

    def subset(self, rows: np.ndarray) -> Pairs:
        """The pairs of the rows marked True (itself when all are)."""
        if rows.all():
            return self
        index = np.flatnonzero(rows)
        return Pairs(self.d[index], self.cap_a[index], self.point_a[index], self.cap_b[index], self.point_b[index],
                     self.normal[index], [self.names[i] for i in index])


_PROBE_WORLD = World((Box((0.1, 0.1, 0.1), (9.0, 9.0, 9.0, 1.0, 0.0, 0.0, 0.0), "probe"),
                      Sphere((9.0, 0.0, 9.0), 0.1, "probe ball")), ground=True)


def prepare_pairs(robot: RobotModel, avoid: Avoid) -> tuple[CollisionModel, CollisionKinematics]:
    """The robot's collision model and the kinematics that measure its pairs (both cached with the robot)."""
    from .robot_capsules import collision_model

    model = collision_model(robot, avoid.srdf)
    if avoid.carried:
        return _with_carried(robot, model, avoid)
    cache = robot.cache("collision_kinematics")
    kin = cache.get(avoid.srdf)
    if kin is None:
        kin = CollisionKinematics(robot, model)
        measure_pairs(robot, model, kin, Avoid(True, _PROBE_WORLD, 0.0, avoid.srdf), np.clip(np.zeros(robot.dof), robot.lower, robot.upper))
        cache[avoid.srdf] = kin  # the kernel compiled (or loaded from its cache) before any solve's clock runs
    return model, kin


#: Collision models with carried objects a robot keeps (a grasp holds the same object the same
#: way on every frame it lasts, so a shot needs a few).
_CARRIED_KEPT = 8


def _with_carried(robot: RobotModel, model: CollisionModel, avoid: Avoid) -> tuple[CollisionModel, CollisionKinematics]:
    """The model with `avoid.carried` on it (`carried.with_carried`) and its kinematics, cached
    with the robot by (SRDF, carried objects)."""
    from .carried import with_carried

    cache = robot.cache("carried_collision")
    key = (avoid.srdf, avoid.carried)
    got = cache.get(key)
    if got is None:
        if len(cache) >= _CARRIED_KEPT:
            cache.pop(next(iter(cache)))
        prepare_pairs(robot, replace(avoid, carried=()))  # the kernel compiled once, as for the robot alone
        carried_model = with_carried(robot, model, avoid.carried)
        got = cache[key] = (carried_model, CollisionKinematics(robot, carried_model))
    return got


#: Tests set this to run the NumPy form even where the numba one is built.
FORCE_NUMPY = False


def _layout(model, kin, avoid: Avoid):
    """Which capsule and which obstacle each pair row is, and its names: fixed for a robot and a
    world, so worked out once (rows in the order both forms of `measure_pairs` fill them)."""
    key = (avoid.self_, avoid.world)
    got = kin.layouts.get(key)
    if got is not None:
        return got
    cap_a, cap_b, names, sets = [], [], [], []
    if avoid.self_ and len(model.self_pairs):
        cap_a += model.self_pairs[:, 0].tolist()
        cap_b += model.self_pairs[:, 1].tolist()
        names += [(model.names[x], model.names[y]) for x, y in model.self_pairs.tolist()]
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
                    names.append((model.names[i], name))
                    sets.append(which)
        if world.ground:
            for i in moving.tolist():
                cap_a.append(i)
                cap_b.append(-1)
                names.append((model.names[i], GROUND))
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


def measure_pairs(robot: RobotModel, model: CollisionModel, kin: CollisionKinematics, avoid: Avoid,
                  q: np.ndarray) -> tuple[Pairs, tuple]:
    """Every pair `avoid` checks at configuration q (n,), and (origins, axes) of the movable joints
    there (for `kin.gradient`): by the numba kernel, or the NumPy form where it is missing."""
    from . import _kernel

    run = None if FORCE_NUMPY else _kernel.compiled()
    if run is None:
        pairs, frames, poses = _pairs_numpy(robot, model, kin, avoid, q)
        _refine(model, kin, avoid, pairs, poses, _kernel.hull_refine)
        _allow_touching(kin, avoid, pairs)
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
        world["box_centre"], world["box_half"], bool(avoid.world is not None and avoid.world.ground), np.inf, d, point_a,
        point_b, normal, origins, axes, poses)
    pairs = Pairs(d, cap_a, point_a, cap_b, point_b, normal, names)
    _refine(model, kin, avoid, pairs, poses, _kernel.compiled_refine())
    _allow_touching(kin, avoid, pairs)
    return pairs, (origins, axes)


def _allow_touching(kin, avoid: Avoid, pairs: Pairs) -> None:
    """The rows `avoid.touching` allows (a link and an obstacle it may touch: a gripper and the
    object it grasps) measured as far apart, so they neither steer a solve nor count as a
    collision; the rest of the robot still keeps clear of that obstacle."""
    if not avoid.touching or not len(pairs.d):
        return
    key = (avoid.self_, avoid.world, "touching", avoid.touching, len(pairs.names))
    mask = kin.layouts.get(key)
    if mask is None:
        mask = np.fromiter((name in avoid.touching for name in pairs.names), dtype=bool, count=len(pairs.names))
        if len(kin.layouts) > 16:
            kin.layouts.clear()
        kin.layouts[key] = mask
    pairs.d[mask] = np.inf


#: Pairs whose capsules come this close (m, beyond the margin) are measured again on the links' hulls.
REFINE_WITHIN = 0.03


def _refine(model, kin, avoid: Avoid, pairs: Pairs, poses, run) -> None:
    """Near pairs measured again between the links' convex pieces (`_kernel.hull_refine`):
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


def _pairs_numpy(robot, model, kin, avoid: Avoid, q) -> tuple[Pairs, tuple, np.ndarray]:
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
        names += [(model.names[x], model.names[y]) for x, y in zip(i, j)]
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
            names += [(model.names[x], arrays["caps_name"][w]) for x, w in zip(ri, wi)]
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
            names += [(model.names[x], arrays["box_name"][w]) for x, w in zip(ri, wi)]
    if world is not None and world.ground and len(moving):
        za, zb = ca[moving, 2], cb[moving, 2]
        low = np.where((za <= zb)[:, None], ca[moving], cb[moving])
        d_all.append(np.minimum(za, zb) - model.radius[moving])
        cap_a.append(moving)
        point_a.append(low)
        cap_b.append(np.full(len(moving), -1))
        point_b.append(low * np.array([1.0, 1.0, 0.0]))
        normal.append(np.tile(np.array([0.0, 0.0, 1.0]), (len(moving), 1)))
        names += [(model.names[x], GROUND) for x in moving]
    if not d_all:
        empty = np.zeros((0, 3))
        return Pairs(np.zeros(0), np.zeros(0, dtype=int), empty, np.zeros(0, dtype=int), empty, empty, []), (origins, axes), poses
    return Pairs(np.concatenate(d_all), np.concatenate(cap_a), np.concatenate(point_a), np.concatenate(cap_b),
                  np.concatenate(point_b), np.concatenate(normal), names), (origins, axes), poses


def movable_rows(model: CollisionModel, kin: CollisionKinematics, avoid: Avoid, free: np.ndarray) -> np.ndarray:
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


#: In a motion's walk (`PairMeter.walk`), a capsule-box row whose cheap lower bound is beyond this
#: (m) takes the bound instead of its distance: far rows prove a little less of the motion, and
#: most of a measurement's time (the segment-box search) is saved.
WALK_FAR = 0.15


class PairMeter:
    """Each checked pair's distance at many configurations of one robot and `Avoid` (a planner
    measures thousands): `measure_pairs`'s rows by the same kernels, without building its `Pairs`,
    the kernels' arguments made once. Also the rows' capsule distances alone (before the hull
    refinement near obstacles), which change no faster than the joints move the capsules."""

    def __init__(self, robot: RobotModel, model: CollisionModel, kin: CollisionKinematics, avoid: Avoid):
        self.robot, self.model, self.kin, self.avoid = robot, model, kin, avoid
        self._lean_args = False
        self._walk_buffers = None

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' distances as `measure_pairs` gives them, the rows' capsule distances alone,
        never above the first), touching pairs as +inf."""
        lean = self._lean()
        if lean is None:
            from . import _kernel

            pairs, _, poses = _pairs_numpy(self.robot, self.model, self.kin, self.avoid, q)
            capsules = pairs.d.copy()
            _refine(self.model, self.kin, self.avoid, pairs, poses, _kernel.hull_refine)
            _allow_touching(self.kin, self.avoid, pairs)
            capsules[np.isinf(pairs.d)] = np.inf
            return pairs.d, capsules
        run, refine, args, tail, buffers, refine_args, touching = lean
        d, point_a, point_b, normal, poses = buffers
        d = np.empty_like(d)
        run(np.asarray(q, dtype=float), *args, np.inf, d, point_a, point_b, normal, *tail, poses)
        capsules = d
        if refine_args is not None and len(d) and float(d.min()) < refine_args[-1]:
            capsules = d.copy()
            refine(poses, *refine_args, d, point_a, point_b, normal)
        if touching is not None:
            d[touching] = np.inf
            capsules[touching] = np.inf
        return d, capsules

    def walk(self, qa: np.ndarray, delta: np.ndarray, count: int, reach_a: float, reach_b: float, moving: np.ndarray,
             inverse: np.ndarray, margin: float) -> tuple[bool, float, int] | None:
        """`_kernel.walk_kernel` on this robot and `Avoid`: the samples of a motion measured in one
        compiled call (`certify.Certifier.walk` says what it proves). None where the NumPy form serves."""
        from . import _kernel

        lean = self._lean()
        walker = None if lean is None else _kernel.compiled_walk()
        if walker is None:
            return None
        _, _, args, tail, (d, _, _, _, poses), refine_args, touching = lean
        if self._walk_buffers is None:
            rows = len(d)
            if refine_args is None:  # nothing to refine: arrays of the kernel's types, never read
                refine_args = (np.zeros((0, 3)), np.zeros(1, dtype=np.int64), np.zeros(len(self.robot.links) + 1, dtype=np.int64),
                               np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64), np.full(rows, -1, dtype=np.int64),
                               np.zeros((0, 3)), np.zeros(1, dtype=np.int64), np.zeros(0), -np.inf)
            buffers = (np.empty(rows), np.empty((rows, 3)), np.empty((rows, 3)), np.empty((rows, 3)),
                       np.empty_like(tail[0]), np.empty_like(tail[1]), np.empty_like(poses))
            self._walk_buffers = (np.zeros(rows, dtype=bool) if touching is None else touching, lean[5] is not None,
                                  float(refine_args[-1]), np.empty((128, 4)), buffers, refine_args[:-1])
        touching_rows, refine_on, within, stack, buffers, refine_rest = self._walk_buffers
        clear, least, measured = walker(np.asarray(qa, dtype=float), np.asarray(delta, dtype=float), int(count), float(reach_a),
                                        float(reach_b), moving, inverse, float(margin), touching_rows, refine_on, within,
                                        max(within, WALK_FAR), stack,
                                        *args, *buffers, *refine_rest)
        return bool(clear), float(least), int(measured)

    def _lean(self):
        """The kernels' arguments for this robot and `Avoid`, made once (None: the NumPy form runs)."""
        if self._lean_args is not False:
            return self._lean_args
        from . import _kernel

        run = None if FORCE_NUMPY else _kernel.compiled()
        if run is None:
            self._lean_args = None
            return None
        robot, model, kin, avoid = self.robot, self.model, self.kin, self.avoid
        cap_a, cap_b, names, moving, (link_a, link_b, sets) = _layout(model, kin, avoid)
        world = avoid.world.arrays if avoid.world is not None else _EMPTY_WORLD
        count = len(cap_a)
        self_pairs = model.self_pairs if avoid.self_ else _NO_PAIRS
        args = (kin.steps_i, kin.steps_f, len(robot.links), kin.root, kin.capsule_link, model.a, model.b, model.radius,
                self_pairs, moving, world["caps_a"], world["caps_b"], world["caps_r"], world["box_rot"], world["box_centre"],
                world["box_half"], bool(avoid.world is not None and avoid.world.ground))
        tail = (np.empty((kin.movable_count, 3)), np.empty((kin.movable_count, 3)))
        buffers = (np.empty(count), np.empty((count, 3)), np.empty((count, 3)), np.empty((count, 3)),
                   np.empty((len(robot.links), 4, 4)))
        refine_args = None
        if len(model.hull_local):
            refine_args = (model.hull_local, model.piece_start, model.link_pieces, link_a, link_b, sets, world["set_points"],
                           world["set_start"], world["set_radius"], avoid.margin_m + REFINE_WITHIN)
        touching = None
        if avoid.touching:
            touching = np.fromiter((name in avoid.touching for name in names), dtype=bool, count=len(names))
        self._lean_args = (run, _kernel.compiled_refine(), args, tail, buffers, refine_args, touching)
        return self._lean_args


def pair_layout(model, kin, avoid: Avoid):
    """The rows `measure_pairs` reports for `avoid`: (capsule a, capsule b or obstacle, names, moving, hull sets)."""
    return _layout(model, kin, avoid)
