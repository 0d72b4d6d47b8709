"""Collisions in Blender: the obstacle world read from a collection, and the robot's collision
model shown in the viewport.

The world is read on every frame a solve needs it (an animated obstacle is where the frame puts
it), in the robot's root frame (the rig's armature space). Each mesh is fitted once in its own
frame (`core.collision.obstacle_shapes`; refitted only when its vertices change, a modifier or a
shape key); a frame then costs one matrix product per obstacle, and a read of its vertices
through the position attribute and a hash of them. (Asking the depsgraph instead, by the
evaluated mesh's `session_uid`, held on bpy 5.0 and failed on 5.3: there an edited mesh without
modifiers keeps its number, so an edit went unseen. No cheaper sign of an edit is exposed.) Mesh objects only: an empty or
a curve in the collection is passed over.

A mesh object chooses how it is approximated with `kinema_collision_shape` (Auto, Box, Sphere,
Capsule, Convex Pieces); Auto takes the primitive of least volume, or convex pieces when none
comes near the mesh.
"""

from __future__ import annotations

import numpy as np

from ..core.lru import LRU
from ..core.collision.obstacle_shapes import SHAPES

#: The collection that shows a rig's collision model (one per rig): "<rig> collision model".
MODEL_SUFFIX = " collision model"
#: Custom property marking what a collision-model object stands for (the rig's name).
MODEL_TAG = "kinema_collision_model"

SHAPE_ITEMS = [(name.upper(), label, text) for name, (label, text) in SHAPES.items()]

#: Fits by (mesh data, vertex hash, shape): an obstacle is refitted only when its vertices change.
_FITS = LRU(256)
#: Placed primitives by (object, fits, matrix): an obstacle that did not move is not placed again.
_PLACED = LRU(256)


def reset_caches() -> None:
    _FITS.clear()
    _PLACED.clear()


# ---- the world ----------------------------------------------------------------------------------

def obstacle_objects(collection) -> list:
    """The mesh objects of `collection` and its children, each once, in name order."""
    if collection is None:
        return []
    return sorted((obj for obj in collection.all_objects if obj.type == "MESH"), key=lambda obj: obj.name)


def _evaluated_mesh(obj, depsgraph):
    """(mesh, release): the evaluated mesh (modifiers and shape keys applied) when the object
    has either, else its own mesh; call `release()` when done."""
    if (not obj.modifiers and obj.data.shape_keys is None) or depsgraph is None:
        return obj.data, lambda: None
    evaluated = obj.evaluated_get(depsgraph)
    return evaluated.to_mesh(), evaluated.to_mesh_clear


def _triangles(mesh) -> np.ndarray:
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    return triangles.reshape(-1, 3).astype(np.int64)


def local_fits(obj, depsgraph=None) -> list:
    """The fits standing for `obj`'s mesh in its own frame, refitted only when its vertices (or
    its shape choice) change: each frame reads the vertices once and hashes them."""
    return _keyed_fits(obj, depsgraph)[1]


def _keyed_fits(obj, depsgraph) -> tuple[tuple, list]:
    """Read and hash the vertices; fit them unless these very vertices (with this shape choice)
    were fitted before. Returns the cache key with the fits."""
    from ..core.collision.obstacle_shapes import fit_local

    shape = getattr(obj, "kinema_collision_shape", "AUTO").lower()
    mesh, release = _evaluated_mesh(obj, depsgraph)
    try:
        vertices = np.empty(len(mesh.vertices) * 3, dtype=np.float32)  # Blender's own type: a straight copy
        # the position attribute reads several times faster than MeshVertex.co (the same floats)
        mesh.attributes["position"].data.foreach_get("vector", vertices)
        vertices = vertices.reshape(-1, 3)
        key = (obj.name, shape, len(vertices), len(mesh.polygons), hash(vertices.tobytes()))
        fits = _FITS.get(key)
        if fits is None:
            triangles = _triangles(mesh)
            fits = fit_local(vertices.astype(np.float64), shape, triangles if len(triangles) else None, what=f"obstacle '{obj.name}'")
            _FITS.put(key, fits)
    finally:
        release()
    return key, fits


def world_primitives(collection, rig, depsgraph=None, frame: float | None = None) -> tuple[list, list[str]]:
    """Every obstacle of `collection` as collide primitives in `rig`'s root frame, and the
    object each came from (one name per primitive). An object `rig` carries on this frame is
    no obstacle to it: it is part of its collision model (`carried.carried_objects`)."""
    from ..core.collision.obstacle_shapes import place

    if collection is None:
        return [], []
    import bpy

    from .carried import carried_by

    to_root = np.array(rig.matrix_world.inverted_safe(), dtype=float)
    primitives, names = [], []
    held = {obj.name for obj, _ in carried_by(rig, bpy.context.scene.frame_current if frame is None else frame)}
    for obj in obstacle_objects(collection):
        if _part_of(obj, rig):  # the robot's own meshes (or its collision model) are not obstacles to it
            continue
        if obj.name in held:  # what it carries is part of it now (`carried.carried_objects`)
            continue
        matrix = to_root @ np.array(obj.matrix_world, dtype=float)
        fit_key, fits = _keyed_fits(obj, depsgraph)
        key = (fit_key, matrix.tobytes())
        placed = _PLACED.get(key)
        if placed is None:  # moved, or refitted: place again (a still obstacle costs a lookup)
            placed = [primitive for fit in fits for primitive in place(fit, matrix, obj.name)]
            _PLACED.put(key, placed)
        primitives += placed
        names += [obj.name] * len(placed)
    return primitives, names


def _part_of(obj, rig) -> bool:
    parent = obj.parent
    while parent is not None:
        if parent == rig:
            return True
        parent = parent.parent
    return False


#: The ground as an obstacle when the rig does not stand on it (a box whose top is world Z = 0).
GROUND_BOX_SIZE = 200.0


def _ground(rig):
    """The scene's ground (world Z = 0) for `rig`: the World's own ground plane (its root frame's
    z = 0) when the rig stands upright on it, else a large box whose top face is the ground."""
    from ..core.collision import Box
    from ..core.model.rotations import matrix_to_quaternion

    world = np.array(rig.matrix_world, dtype=float)
    scale = np.linalg.norm(world[:3, :3], axis=0)
    rotation = world[:3, :3] / scale
    if abs(world[2, 3]) < 1e-9 and np.allclose(rotation[:, 2], (0.0, 0.0, 1.0), atol=1e-9):
        return True, None
    to_root = np.linalg.inv(world)
    centre = to_root @ np.array([0.0, 0.0, -GROUND_BOX_SIZE / 2.0, 1.0])
    root_rotation = to_root[:3, :3] / np.linalg.norm(to_root[:3, :3], axis=0)
    size = GROUND_BOX_SIZE / scale.min()
    return False, Box((size, size, size), (*map(float, centre[:3]), *map(float, matrix_to_quaternion(root_rotation))), "ground")


def world_for(solver, rig, depsgraph=None, frame: float | None = None):
    """The `World` a Solver node avoids on this frame, or None when it avoids no world (World
    switched off, or neither a collection nor the ground to avoid)."""
    if not solver.avoids_world():
        return None
    import bpy

    from ..core.collision import World

    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    primitives, names = world_primitives(solver.obstacles, rig, depsgraph, frame)
    plane = False
    if solver.ground:
        plane, box = _ground(rig)
        if box is not None:
            primitives, names = [*primitives, box], [*names, "ground"]
    return World(tuple(primitives), plane, tuple(names))


# ---- the collision model in the viewport ----------------------------------------------------------

def model_collection(rig):
    """The collection showing `rig`'s collision model, or None when it is not shown."""
    import bpy

    collection = bpy.data.collections.get(rig.name + MODEL_SUFFIX)
    return collection if collection is not None and collection.get(MODEL_TAG) == rig.name else None


def _capsule_mesh(name: str, length: float, radius: float, segments: int = 16, rings: int = 4):
    """A capsule along Z centred on the origin (a sphere when `length` is 0)."""
    import bpy

    radius = max(float(radius), 1e-4)
    vertices = []
    half = length / 2.0
    profile = []  # (z, r) from the bottom pole to the top pole
    for k in range(rings + 1):
        angle = -np.pi / 2 + (np.pi / 2) * k / rings
        profile.append((-half + radius * np.sin(angle), radius * np.cos(angle)))
    for k in range(rings + 1):
        angle = (np.pi / 2) * k / rings
        profile.append((half + radius * np.sin(angle), radius * np.cos(angle)))
    t = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    for z, r in profile:
        vertices += [(r * np.cos(a), r * np.sin(a), z) for a in t]
    faces = []
    for ring in range(len(profile) - 1):
        for s in range(segments):
            i0, i1 = ring * segments + s, ring * segments + (s + 1) % segments
            faces.append((i0, i1, i1 + segments, i0 + segments))
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(map(float, v)) for v in vertices], [], faces)
    mesh.update()
    return mesh


def _segment_frame(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A 4x4 placing a Z-aligned capsule between `a` and `b` (in the link frame)."""
    axis = b - a
    length = float(np.linalg.norm(axis))
    z = axis / length if length > 1e-9 else np.array([0.0, 0.0, 1.0])
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    frame = np.eye(4)
    frame[:3, 0], frame[:3, 1], frame[:3, 2], frame[:3, 3] = x, y, z, (a + b) / 2.0
    return frame


def show_collision_model(context, rig) -> int:
    """Show `rig`'s collision model: one capsule (or sphere) object per piece, parented to its
    link's bone so it follows the pose, in a collection of its own that never renders and is
    not selectable. Returns the number of objects (replacing any shown before)."""
    import bpy
    from mathutils import Matrix

    from ..core.collision import collision_model
    from .rig import robot_for_rig

    hide_collision_model(rig)
    robot = robot_for_rig(rig)
    model = collision_model(robot)
    collection = bpy.data.collections.new(rig.name + MODEL_SUFFIX)
    collection[MODEL_TAG] = rig.name
    collection.hide_render = True
    collection.hide_select = True
    parent = rig.users_collection[0] if rig.users_collection else context.scene.collection
    parent.children.link(collection)
    armature = rig.data
    for c, link in enumerate(model.links):
        if link not in armature.bones:
            continue
        a, b, radius = np.asarray(model.a[c]), np.asarray(model.b[c]), float(model.radius[c])
        name = f"{link} collision {c}"
        mesh = _capsule_mesh(name, float(np.linalg.norm(b - a)), radius)
        obj = bpy.data.objects.new(name, mesh)
        obj[MODEL_TAG] = rig.name
        collection.objects.link(obj)
        obj.display_type = "WIRE"
        obj.show_in_front = True
        obj.parent = rig
        obj.parent_type = "BONE"
        obj.parent_bone = link
        obj.matrix_parent_inverse = Matrix.Translation((0.0, -armature.bones[link].length, 0.0))
        obj.matrix_basis = Matrix(_segment_frame(a, b).tolist())
    return len(collection.objects)


def hide_collision_model(rig) -> int:
    """Remove `rig`'s collision-model objects, their meshes and their collection. Returns how
    many objects went."""
    import bpy

    collection = model_collection(rig)
    if collection is None:
        return 0
    objects = [obj for obj in collection.objects if obj.get(MODEL_TAG) == rig.name]
    meshes = [obj.data for obj in objects]
    for obj in objects:
        bpy.data.objects.remove(obj)
    for mesh in meshes:
        if mesh.users == 0:
            bpy.data.meshes.remove(mesh)
    bpy.data.collections.remove(collection)
    return len(objects)


def register_properties() -> None:
    import bpy

    bpy.types.Object.kinema_collision_shape = bpy.props.EnumProperty(
        name="Collision Shape", items=SHAPE_ITEMS, default="AUTO",
        description="How Kinema approximates this mesh when it is an obstacle")


def unregister_properties() -> None:
    import bpy

    del bpy.types.Object.kinema_collision_shape
