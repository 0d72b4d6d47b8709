"""The world the robot keeps clear of: obstacles in its root frame (box, sphere, capsule, a mesh
wrapped in capsules) and the ground plane z = 0, with each obstacle's arrays laid out once for
the distance kernel."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import KinemaError
from ..model.rotations import quaternion_to_matrix

GROUND = "ground"


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
    see `capsule_fit.fit_capsules`): conservative, so a concave mesh (a table with legs)
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
    # point sets (+ a radius) whose hull is each primitive, for `_kernel.hull_refine`
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

