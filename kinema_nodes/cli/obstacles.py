"""`--avoid`, `--obstacles`, `--margin` and `--srdf`: collision avoidance on the command line
(`solve` and `bake`), read into a `core.collision.Avoid`."""

from __future__ import annotations

import math

from ..core.errors import KinemaError

AVOID_CHOICES = ("self", "world", "all")
#: The margin when --avoid is given without --margin (the Solver node's default too).
DEFAULT_MARGIN_MM = 5.0


def add_avoid_arguments(parser, margin_option: str = "--margin", srdf: bool = True) -> None:
    parser.add_argument("--avoid", choices=AVOID_CHOICES, default=None,
                        help="keep clear of the robot itself (self), the obstacles (world) or both (all); "
                             "default: all when --obstacles is given, else nothing")
    parser.add_argument("--obstacles", metavar="FILE.json", default=None,
                        help="obstacles in the robot's root frame: a JSON list of {\"box\": {\"size\": [x,y,z], \"pose\": "
                             "[x,y,z,qw,qx,qy,qz]}}, {\"sphere\": {\"center\": [..], \"radius\": r}}, {\"capsule\": {\"a\": [..], "
                             "\"b\": [..], \"radius\": r}}, {\"mesh\": \"file.stl\", \"pose\": [..]}, {\"ground\": true}")
    parser.add_argument(margin_option, dest="collision_margin", type=float, default=None, metavar="MM",
                        help=f"clearance to keep, in millimetres (default {DEFAULT_MARGIN_MM:g} with --avoid)")
    if srdf:
        parser.add_argument("--srdf", default=None, metavar="FILE.srdf",
                            help="self-collision pairs to skip (<disable_collisions>) instead of the computed ones "
                                 "(default: the .srdf beside the URDF, if any)")


def avoid_wanted(args) -> bool:
    return any(getattr(args, name, None) is not None for name in ("avoid", "obstacles", "collision_margin", "srdf"))


def avoid_from_args(args):
    """The `Avoid` the options ask for, or None. Bad combinations and bad files: one line."""
    if not avoid_wanted(args):
        return None
    from ..core.collision import MAX_MARGIN_M, Avoid, load_obstacles

    option = getattr(args, "margin_option", "--margin")
    mode = args.avoid or ("all" if args.obstacles else None)
    if mode is None:
        raise KinemaError(f"{option} and --srdf need --avoid self|world|all (or --obstacles FILE.json)")
    if mode == "world" and args.obstacles is None:
        raise KinemaError("--avoid world needs --obstacles FILE.json")
    margin_mm = DEFAULT_MARGIN_MM if args.collision_margin is None else float(args.collision_margin)
    if not math.isfinite(margin_mm) or not 0.0 <= margin_mm <= MAX_MARGIN_M * 1000.0:
        raise KinemaError(f"{option} must be from 0 to {MAX_MARGIN_M * 1000:g} mm, got {args.collision_margin}")
    world = load_obstacles(args.obstacles) if (args.obstacles is not None and mode in ("world", "all")) else None
    if args.obstacles is not None and mode == "self":
        raise KinemaError("--obstacles given with --avoid self: use --avoid world or all to avoid them")
    return Avoid(self_=mode in ("self", "all"), world=world, margin_m=margin_mm / 1000.0, srdf=getattr(args, "srdf", None))


def clearance_payload(result) -> dict:
    """The --json fields of a solve under avoidance."""
    value = result.min_clearance_m
    return {"min_clearance_m": value if value is not None and math.isfinite(value) else None,
            "colliding": [list(pair) for pair in result.colliding]}


# ---- bake: the obstacles kept in the saved .blend ------------------------------------------------
# The bake itself avoids the file's primitives as they are (`blender.baking.BakeJob(avoid=)`);
# these put them in the scene as mesh objects wired to the Solver node, so the saved file shows
# what was avoided and its live IK keeps clear of the same obstacles.

OBSTACLE_COLLECTION = "Kinema Obstacles"


def _pose_matrix(pose):
    from ..core.model.rotations import pose_matrix

    return pose_matrix(pose[:3], pose[3:])


def _capsule_surface(length: float, radius: float, segments: int = 24, rings: int = 6):
    """Vertices and faces of a capsule along z, centred: two hemispheres and the tube between."""
    import math as m

    vertices = [(0.0, 0.0, -length / 2 - radius)]
    levels = []
    for half, sign in ((-1, -1.0), (1, 1.0)):
        for k in range(1, rings + 1) if half < 0 else range(rings, 0, -1):
            angle = m.pi / 2 * k / rings
            z = sign * (length / 2 + radius * m.cos(angle))
            levels.append((z, radius * m.sin(angle)))
    for z, r in levels:
        for i in range(segments):
            t = 2 * m.pi * i / segments
            vertices.append((r * m.cos(t), r * m.sin(t), z))
    vertices.append((0.0, 0.0, length / 2 + radius))
    faces = [(0, 1 + (i + 1) % segments, 1 + i) for i in range(segments)]
    for level in range(len(levels) - 1):
        base = 1 + level * segments
        faces += [(base + i, base + (i + 1) % segments, base + segments + (i + 1) % segments, base + segments + i)
                  for i in range(segments)]
    top = len(vertices) - 1
    base = 1 + (len(levels) - 1) * segments
    faces += [(base + i, base + (i + 1) % segments, top) for i in range(segments)]
    return vertices, faces


def obstacle_collection(bpy, world, rig):
    """The obstacle file's primitives as mesh objects in a collection of their own (placed in the
    rig's root frame, each with the Collision Shape it is), for the Solver node's Obstacles."""
    import numpy as np
    from mathutils import Matrix

    from ..core.model.meshes import load_mesh_arrays
    from ..core.collision import Box, Capsule, MeshObstacle, Sphere

    collection = bpy.data.collections.new(OBSTACLE_COLLECTION)
    bpy.context.scene.collection.children.link(collection)
    root = np.array(rig.matrix_world, dtype=float)
    for obstacle, name in zip(world.obstacles, world.names):
        matrix = np.eye(4)
        if isinstance(obstacle, Box):
            hx, hy, hz = (v / 2 for v in obstacle.size)
            vertices = [(x * hx, y * hy, z * hz) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
            faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
            matrix, shape = _pose_matrix(obstacle.pose), "BOX"
        elif isinstance(obstacle, (Sphere, Capsule)):
            a, b = ((obstacle.center, obstacle.center) if isinstance(obstacle, Sphere) else (obstacle.a, obstacle.b))
            a, b = np.array(a, dtype=float), np.array(b, dtype=float)
            length = float(np.linalg.norm(b - a))
            vertices, faces = _capsule_surface(length, obstacle.radius)
            z = (b - a) / length if length > 1e-12 else np.array([0.0, 0.0, 1.0])
            helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
            x = np.cross(helper, z)
            x /= np.linalg.norm(x)
            matrix[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
            matrix[:3, 3] = (a + b) / 2
            shape = "SPHERE" if isinstance(obstacle, Sphere) else "CAPSULE"
        elif isinstance(obstacle, MeshObstacle):
            points, triangles = load_mesh_arrays(obstacle.path, obstacle.scale)
            vertices, faces = points.tolist(), triangles.tolist()
            matrix, shape = _pose_matrix(obstacle.pose), "CONVEX"
        else:
            continue
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(vertices, [], faces)
        mesh.update()
        obj = bpy.data.objects.new(name, mesh)
        obj.matrix_world = Matrix([list(row) for row in (root @ matrix)])  # rows: a plain list would be read by columns
        obj.kinema_collision_shape = shape
        collection.objects.link(obj)
    return collection


def set_solver_avoid(bpy, solver_nodes, avoid, rig) -> None:
    """The Solver nodes' Avoid Collisions settings from an `Avoid` (the bake's --avoid options),
    set after the bake for the saved file: the bake took the `Avoid` itself, for every Solver of
    the tree, so every Solver gets the settings (and one shared obstacle collection)."""
    world = avoid.world
    collection = obstacle_collection(bpy, world, rig) if world is not None and world.obstacles else None
    for solver_node in solver_nodes:
        solver_node.avoid_self = bool(avoid.self_)
        solver_node.margin_mm = avoid.margin_m * 1000.0
        solver_node.avoid_world = world is not None
        if world is not None:
            solver_node.ground = bool(world.ground)
            if collection is not None:
                solver_node.obstacles = collection
