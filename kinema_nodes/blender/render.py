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
    points = visible_points(objects)
    back = np.asarray(view_from, dtype=float)
    back /= np.linalg.norm(back)
    right = np.cross((0.0, 0.0, 1.0), back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)

    camera = scene.camera
    if camera is None:
        data = bpy.data.cameras.new("Kinema Camera")
        camera = bpy.data.objects.new("Kinema Camera", data)
        scene.collection.objects.link(camera)
        scene.camera = camera
    camera.data.lens = lens
    camera.data.sensor_fit = "AUTO"
    width, height = scene.render.resolution_x, scene.render.resolution_y
    tan_long = camera.data.sensor_width / (2.0 * lens)  # AUTO fit: the sensor spans the longer side
    tan_x = tan_long * (1.0 if width >= height else width / height) * margin
    tan_y = tan_long * (height / width if width >= height else 1.0) * margin

    # Aim at the centre, then walk the camera sideways and back until the picture is centred and full.
    position = points.mean(axis=0) + 3.0 * float(np.ptp(points, axis=0).max()) * back
    for _ in range(8):
        offset = points - position
        depth = -(offset @ back)
        x, y = (offset @ right) / depth, (offset @ up) / depth
        mid_depth = float(np.median(depth))
        position = position + right * 0.5 * (x.max() + x.min()) * mid_depth + up * 0.5 * (y.max() + y.min()) * mid_depth
        zoom = max((x.max() - x.min()) / (2 * tan_x), (y.max() - y.min()) / (2 * tan_y))
        position = position - back * (1.0 - zoom) * mid_depth
    rotation = np.column_stack([right, up, back])
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = rotation, position
    camera.matrix_world = Matrix(matrix.tolist())
    extent = float(np.ptp(points, axis=0).max())
    distance = float(np.median(-(points - position) @ back))
    camera.data.clip_start = max(1e-3, 0.01 * distance)
    camera.data.clip_end = 10.0 * (distance + extent)
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
    bpy.ops.render.render(write_still=True, scene=scene.name)
    return filepath


def render_rig(rig_object, filepath: str | Path, resolution: tuple[int, int] = (640, 480)) -> Path:
    """A picture of a rig in its current pose, from a camera that frames it."""
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = resolution
    bpy.context.view_layer.update()
    frame_camera(scene, rig_object.children_recursive)
    return render_workbench(scene, filepath, resolution)
