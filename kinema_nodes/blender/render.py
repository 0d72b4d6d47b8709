"""Pictures of a rig: a camera that frames the robot, and a Workbench render of it.

Used by the `import` command's --render and reused by `configs`, `bake` and `demo`.
"""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

#: Direction the camera looks from (robot convention: x forward, z up): front-left, a little above.
VIEW_FROM = (1.0, 0.75, 0.55)
BACKGROUND = (0.9, 0.9, 0.92)


def visible_points(objects, max_points: int = 200_000) -> np.ndarray:
    """World-space vertices of the evaluated, visible meshes among `objects` (thinned to max_points)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    clouds = []
    for obj in objects:
        if obj.type != "MESH" or not obj.visible_get():
            continue
        evaluated = obj.evaluated_get(depsgraph)
        mesh = evaluated.data
        local = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertices.foreach_get("co", local)
        world = np.array(evaluated.matrix_world)
        clouds.append(local.reshape(-1, 3).astype(float) @ world[:3, :3].T + world[:3, 3])
    if not clouds:
        raise ValueError("nothing visible to frame")
    points = np.concatenate(clouds)
    step = max(1, len(points) // max_points)
    return points[::step]


def frame_camera(scene, objects, *, view_from=VIEW_FROM, lens: float = 50.0, margin: float = 0.88):
    """A camera (the scene's, or a new one) aimed at the objects, as close as fits them in the frame."""
    from ..core.camera import frame_points, view_tangents

    points = visible_points(objects)
    camera = scene.camera
    if camera is None:
        data = bpy.data.cameras.new("Kinema Camera")
        camera = bpy.data.objects.new("Kinema Camera", data)
        scene.collection.objects.link(camera)
        scene.camera = camera
    camera.data.lens = lens
    camera.data.sensor_fit = "AUTO"
    tan_x, tan_y = view_tangents(camera.data.sensor_width, lens, scene.render.resolution_x, scene.render.resolution_y, margin)
    matrix, camera.data.clip_start, camera.data.clip_end = frame_points(points, view_from, tan_x, tan_y)
    camera.matrix_world = Matrix(matrix.tolist())
    return camera


def render_workbench(scene, filepath: str | Path, resolution: tuple[int, int] = (640, 480)) -> Path:
    """Render the scene's camera with Workbench (material colours, studio light) to a PNG."""
    filepath = Path(filepath).resolve()
    filepath.parent.mkdir(parents=True, exist_ok=True)
    render = scene.render
    render.engine = "BLENDER_WORKBENCH"
    render.resolution_x, render.resolution_y = resolution
    render.resolution_percentage = 100
    render.film_transparent = False
    render.image_settings.file_format = "PNG"
    render.filepath = str(filepath)
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.color_type = "MATERIAL"
    shading.show_cavity = True
    shading.show_shadows = False
    scene.display.render_aa = "8"
    if scene.world is None:
        scene.world = bpy.data.worlds.new("Kinema World")
    scene.world.color = BACKGROUND
    from ..core.files import write_with

    def render_to(temporary: Path) -> None:
        render.filepath = str(temporary)  # a temporary beside the target, moved over it when whole
        bpy.ops.render.render(write_still=True, scene=scene.name)

    return write_with(filepath, render_to, "--render")


def render_rig(rig_object, filepath: str | Path, resolution: tuple[int, int] = (640, 480)) -> Path:
    """A picture of a rig in its current pose, from a camera that frames it."""
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = resolution
    bpy.context.view_layer.update()
    frame_camera(scene, rig_object.children_recursive)
    return render_workbench(scene, filepath, resolution)


# ---- staging a shot: ground, paths, markers, onion skins ----------------------------------------

def flat_material(name: str, rgba) -> "bpy.types.Material":
    """A Workbench material: its viewport colour (alpha below 1 is drawn see-through)."""
    material = bpy.data.materials.new(name)
    material.diffuse_color = tuple(rgba)
    if rgba[3] < 1.0:
        for attribute, value in (("surface_render_method", "BLENDED"), ("blend_method", "BLEND")):
            if hasattr(material, attribute):
                try:
                    setattr(material, attribute, value)
                except (TypeError, AttributeError):
                    pass
    return material


def path_curve(name: str, points: np.ndarray, rgba, radius: float):
    """A tube through world-space points (a beveled poly curve)."""
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = radius
    curve.bevel_resolution = 2
    spline = curve.splines.new("POLY")
    spline.points.add(len(points) - 1)
    spline.points.foreach_set("co", np.c_[points, np.ones(len(points))].astype(np.float32).ravel())
    curve.materials.append(flat_material(name, rgba))
    obj = bpy.data.objects.new(name, curve)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def marker_sphere(name: str, location, radius: float, rgba):
    """A small sphere, to mark a point of the shot."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    shape = bmesh.new()
    bmesh.ops.create_uvsphere(shape, u_segments=24, v_segments=12, radius=radius)
    shape.to_mesh(mesh)
    shape.free()
    mesh.materials.append(flat_material(name, rgba))
    obj = bpy.data.objects.new(name, mesh)
    obj.location = tuple(float(v) for v in location)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def ground_grid(centre, half_size: float, spacing: float, height: float = 0.0) -> list:
    """A light floor with darker grid lines at `height` (world z), centred on `centre` (x, y)."""
    cx, cy = float(centre[0]), float(centre[1])
    lines = int(np.ceil(half_size / spacing))
    half = lines * spacing
    mesh = bpy.data.meshes.new("Kinema Ground")
    corners = [(cx - half, cy - half, height), (cx + half, cy - half, height), (cx + half, cy + half, height),
               (cx - half, cy + half, height)]
    mesh.from_pydata(corners, [], [(0, 1, 2, 3)])
    mesh.materials.append(flat_material("Kinema Ground", (0.78, 0.79, 0.8, 1.0)))
    floor = bpy.data.objects.new("Kinema Ground", mesh)
    bpy.context.scene.collection.objects.link(floor)
    curve = bpy.data.curves.new("Kinema Grid", "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = spacing * 0.012
    lift = spacing * 0.013
    for i in range(-lines, lines + 1):
        for a, b in (((cx + i * spacing, cy - half), (cx + i * spacing, cy + half)),
                     ((cx - half, cy + i * spacing), (cx + half, cy + i * spacing))):
            spline = curve.splines.new("POLY")
            spline.points.add(1)
            spline.points.foreach_set("co", [a[0], a[1], height + lift, 1.0, b[0], b[1], height + lift, 1.0])
    curve.materials.append(flat_material("Kinema Grid", (0.55, 0.56, 0.58, 1.0)))
    grid = bpy.data.objects.new("Kinema Grid", curve)
    bpy.context.scene.collection.objects.link(grid)
    return [floor, grid]


def ghost_copies(rig_object, frame: int, rgba) -> list:
    """Still copies of the rig's visible meshes as they are at `frame`, in one see-through
    colour: one layer of an onion skin. The caller removes them (`remove_objects`)."""
    scene = bpy.context.scene
    scene.frame_set(frame)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    material = flat_material(f"Kinema Ghost {frame}", rgba)
    ghosts = []
    for obj in rig_object.children_recursive:
        if obj.type != "MESH" or not obj.visible_get():
            continue
        mesh = obj.data.copy()
        mesh.materials.clear()
        mesh.materials.append(material)
        for polygon in mesh.polygons:
            polygon.material_index = 0
        ghost = bpy.data.objects.new(f"{obj.name} @{frame}", mesh)
        ghost.matrix_world = obj.evaluated_get(depsgraph).matrix_world.copy()
        scene.collection.objects.link(ghost)
        ghosts.append(ghost)
    return ghosts


def remove_objects(objects) -> None:
    """Remove staging objects and the data only they used."""
    for obj in objects:
        data = obj.data
        bpy.data.objects.remove(obj)
        if data is not None and data.users == 0:
            if isinstance(data, bpy.types.Mesh):
                bpy.data.meshes.remove(data)
            elif isinstance(data, bpy.types.Curve):
                bpy.data.curves.remove(data)


def to_pixels(scene, points) -> np.ndarray:
    """World-space points -> (x, y) pixel positions in the scene camera's picture."""
    from bpy_extras.object_utils import world_to_camera_view
    from mathutils import Vector

    width, height = scene.render.resolution_x, scene.render.resolution_y
    out = []
    for point in np.atleast_2d(points):
        view = world_to_camera_view(scene, scene.camera, Vector(tuple(float(v) for v in point)))
        out.append((view.x * width, (1.0 - view.y) * height))
    return np.array(out)
