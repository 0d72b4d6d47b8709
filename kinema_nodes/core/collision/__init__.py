"""core.collision: everything about keeping clear, except the solve that does it.

The robot is its capsules (`robot_capsules`: fitted by `capsule_fit`, the pairs never checked from
the robot or its SRDF, `srdf`); the world is its obstacles (`world`: box, sphere, capsule, a mesh
wrapped in capsules, the ground plane z = 0; read from an obstacle file by `obstacle_file`, fitted
to an animator's mesh by `obstacle_shapes`); `avoid` is what a solve keeps clear of
(`SolveOptions.avoid`). `distances` measures every checked pair at a configuration (the formulas
in `geometry`, the forward kinematics in `kinematics`, the numba form in `_kernel`), and
`clearance` sums them up in the user's words.

The solve that keeps clear (the collision-aware descent) is `core/solve/_avoiding.py`; it uses only
the names below, and nothing here imports `core.solve`. Names with a leading underscore stay in
this folder.
"""

from .avoid import MAX_MARGIN_M, Avoid, check_avoid
from .capsule_fit import convex_pieces, fit_capsules
from .clearance import Clearance, clearance, collision_reason, summarise
from .distances import Pairs, measure_pairs, movable_rows, prepare_pairs
from .geometry import capsule_pair_distances, segment_closest
from .kinematics import world_capsules
from .obstacle_file import ObstacleFileError, load_obstacles, mesh_obstacle, world_from_dicts
from .robot_capsules import CollisionModel, collision_model, link_geometry
from .srdf import read_srdf_pairs
from .world import GROUND, Box, Capsule, MeshObstacle, Sphere, World

__all__ = [
    "GROUND",
    "MAX_MARGIN_M",
    "Avoid",
    "Box",
    "Capsule",
    "Clearance",
    "CollisionModel",
    "MeshObstacle",
    "ObstacleFileError",
    "Pairs",
    "Sphere",
    "World",
    "capsule_pair_distances",
    "check_avoid",
    "clearance",
    "collision_model",
    "collision_reason",
    "convex_pieces",
    "fit_capsules",
    "link_geometry",
    "load_obstacles",
    "measure_pairs",
    "mesh_obstacle",
    "movable_rows",
    "prepare_pairs",
    "read_srdf_pairs",
    "segment_closest",
    "summarise",
    "world_capsules",
    "world_from_dicts",
]
