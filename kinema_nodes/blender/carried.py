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

#: Scene pointer -> (what it was read at, objects with a grasp track, rigs whose gripper value is used).
_ROSTERS: dict = {}
_TRACKS_CHANGED = [0]
#: (what it was read at, whether any object of the file has a grasp track or a used gripper value).
_IN_FILE: list = [None, False]


def tracks_changed(*_args) -> None:
    """A grasp track or a rig's use of its gripper value changed (a key, a clear, the slider,
    an undo, a file load): the next `roster` looks at every object again. Also a handler."""
    _TRACKS_CHANGED[0] += 1
    _ROSTERS.clear()


def roster(scene) -> tuple:
    """(objects in `scene` with a grasp track, armatures in it whose gripper value is used).

    Read from every object only when something that could change it happened since: the
    file's or the scene's object count (an add, a delete, Shift+D, Append, Link, a link into
    the scene) or `tracks_changed` (every place that keys, clears or turns on a gripper, and
    undo, redo and load). The frame handlers run on every frame and every depsgraph update of
    every scene, and one look at each object costs ~0.4 µs: 0.4 ms a frame in a scene of 1,000
    objects that holds no robot at all.

    A file none of whose objects has either (most files, and every scene that holds no robot)
    answers from the file's object count alone: counting a scene's objects walks them all."""
    count = len(bpy.data.objects)
    if _IN_FILE[0] != (count, _TRACKS_CHANGED[0]):
        _IN_FILE[:] = (count, _TRACKS_CHANGED[0]), any(
            len(obj.kinema_grasps) or (obj.type == "ARMATURE" and obj.kinema_gripper_used) for obj in bpy.data.objects)
    if not _IN_FILE[1]:
        return (), ()
    seen = (count, len(scene.objects), _TRACKS_CHANGED[0])
    key = scene.as_pointer()
    got = _ROSTERS.get(key)
    if got is not None and got[0] == seen:
        try:
            for obj in got[1] + got[2]:  # one removed and another added in between: the count is the same
                obj.name
            return got[1], got[2]
        except ReferenceError:
            pass
    held, grippers = [], []
    for obj in scene.objects:
        if len(obj.kinema_grasps):
            held.append(obj)
        if obj.type == "ARMATURE" and obj.kinema_gripper_used:
            grippers.append(obj)
    _ROSTERS[key] = (seen, tuple(held), tuple(grippers))
    return _ROSTERS[key][1], _ROSTERS[key][2]


def grasp_events(obj) -> list[GraspEvent]:
    """The object's grasp track as `core.grasp` events."""
    return [GraspEvent(e.frame, e.kind, e.holder.name if e.holder else "", e.link, np.array(e.matrix, dtype=float).reshape(4, 4))
            for e in obj.kinema_grasps]


def carried_by(rig, frame: float) -> list:
    """The objects `rig` holds at `frame`: (object, the grasp event holding it)."""
    held = []
    for obj in roster(bpy.context.scene)[0]:
        if not len(obj.kinema_grasps):
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
    for obj in roster(bpy.context.scene)[0]:
        for event in obj.kinema_grasps:
            if event.kind == "GRASP" and event.holder == rig and event.link in robot.links:
                pairs.update((link, obj.name) for link in touch_links(robot, event.link))
    return frozenset(pairs)


def reset_caches() -> None:
    _CARRIED_FITS.clear()
    tracks_changed()
