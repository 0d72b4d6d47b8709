"""What a rig carries on a frame, read from the objects' grasp tracks (blender/grasping.py), for
Avoid Collisions: the objects it holds, and their meshes as `core.collision.CarriedObject`s in the
holding link's frame. Apart from grasping.py, which keys the tracks, so that the evaluator and
the obstacle world can read what is carried without importing the panel's machinery (and
without an import circle through it)."""

from __future__ import annotations

import bpy
import numpy as np

from ..core.grasp import GraspEvent, event_at

#: CarriedObjects by (object, link, offset, mesh hash): a grasp lasting many frames is fitted once.
_CARRIED_FITS: dict = {}
_CARRIED_KEPT = 32


def grasp_events(obj) -> list[GraspEvent]:
    """The object's grasp track as `core.grasp` events."""
    return [GraspEvent(e.frame, e.kind, e.holder.name if e.holder else "", e.link, np.array(e.matrix, dtype=float).reshape(4, 4))
            for e in obj.kinema_grasps]


def carried_by(rig, frame: float) -> list:
    """The objects `rig` holds at `frame`: (object, the grasp event holding it)."""
    held = []
    for obj in bpy.context.scene.objects:
        if not len(getattr(obj, "kinema_grasps", ())):
            continue
        event = event_at(grasp_events(obj), frame)
        if event is not None and event.kind == "GRASP" and event.holder == rig.name:
            held.append((obj, event))
    return held


def _mesh_arrays(obj, depsgraph):
    """(vertices (V, 3) float32, triangles (T, 3)) of the object's mesh in its own frame, its
    modifiers and shape keys applied when it has any."""
    evaluated = obj.evaluated_get(depsgraph) if depsgraph is not None and (obj.modifiers or obj.data.shape_keys) else None
    mesh = evaluated.to_mesh() if evaluated is not None else obj.data
    try:
        vertices = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.attributes["position"].data.foreach_get("vector", vertices)
        mesh.calc_loop_triangles()
        triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", triangles)
    finally:
        if evaluated is not None:
            evaluated.to_mesh_clear()
    return vertices.reshape(-1, 3), triangles.reshape(-1, 3).astype(np.int64)


def carried_objects(rig, frame: float, depsgraph=None) -> tuple:
    """The objects `rig` holds at `frame` as `core.collision.CarriedObject`s (their meshes in
    the holding link's frame), for Avoid Collisions: mesh objects only, in name order."""
    from ..core.collision.carried import carried_object

    out = []
    for obj, event in sorted(carried_by(rig, frame), key=lambda held: held[0].name):
        if obj.type != "MESH":
            continue
        vertices, triangles = _mesh_arrays(obj, depsgraph)
        key = (obj.name, event.link, np.asarray(event.matrix).tobytes(), hash(vertices.tobytes()), hash(triangles.tobytes()))
        got = _CARRIED_FITS.get(key)
        if got is None:
            got = carried_object(event.link, vertices.astype(np.float64), triangles if len(triangles) else None, event.matrix, obj.name)
            if len(_CARRIED_FITS) >= _CARRIED_KEPT:
                _CARRIED_FITS.pop(next(iter(_CARRIED_FITS)))
            _CARRIED_FITS[key] = got
        out.append(got)
    return tuple(out)


def touching_pairs(rig, robot) -> frozenset:
    """(link, object) pairs Avoid Collisions never checks for `rig`: each object it grasps at
    some frame with each link that grasp may touch (`core.collision.carried.touch_links`: the
    holding link, what is rigid with it, its gripper), so the fingers can close round an object
    in the Obstacles collection before the grasp and open off it after the release, while the
    rest of the arm keeps clear of it."""
    from ..core.collision.carried import touch_links

    pairs = set()
    for obj in bpy.context.scene.objects:
        for event in getattr(obj, "kinema_grasps", ()):
            if event.kind == "GRASP" and event.holder == rig and event.link in robot.links:
                pairs.update((link, obj.name) for link in touch_links(robot, event.link))
    return frozenset(pairs)


def reset_caches() -> None:
    _CARRIED_FITS.clear()
