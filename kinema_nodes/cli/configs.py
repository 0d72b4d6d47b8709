"""`kinema-nodes configs`: every distinct configuration that reaches one target, and a
labelled contact sheet of them.

    kinema-nodes configs URDF --link LINK --target X Y Z QW QX QY QZ [--start NAME=VALUE ...]
                         [--json] [--render FILE.png]

JSON: {"robot", "link", "target": {"position", "wxyz"}, "count", "seconds",
       "configurations": [{"joints": {name: value}, "position_error", "rotation_error",
                           "current": bool, "distance"}, ...], "render": path or null}
Ordered by distance from the --start pose (as `solve` names it; --from also works; default:
every joint at zero, or the nearest value inside its limits); "current" marks the
configuration that is that pose, when it reaches the target.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .common import emit, parse_joint_values, target_pose
from ..core.errors import KinemaError

TILE = (360, 250)  # rendered picture; the label sits in a bar above it
LABEL = 36
COLUMNS = 4


def add_arguments_configs(parser):
    """Every distinct way the arm reaches one pose (exit 3 when none does), optionally as a contact sheet."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link to aim at (default: the robot's tool point)")
    parser.add_argument("--target", nargs=7, type=float, required=True, metavar=("X", "Y", "Z", "QW", "QX", "QY", "QZ"),
                        help="pose of the link in the robot's root frame: metres and a wxyz quaternion")
    parser.add_argument("--start", "--from", dest="current", nargs="*", metavar="NAME=VALUE",
                        help="the current pose (radians / metres); order and 'current' are relative to it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--render", metavar="FILE.png", help="write a contact sheet: one labelled Workbench picture per configuration")


def run_configs(args) -> int:
    from ..core.stages.configurations import find_configurations
    from ..core.model.loading import load_robot
    from ..core.solve import IKTarget, SolveOptions

    robot = load_robot(args.urdf)
    link = robot.check_link(args.link or robot.tool_point)
    if args.render and Path(args.render).suffix.lower() != ".png":
        raise KinemaError(f"--render '{args.render}' must end in .png")
    if args.render:
        from ..core.files import check_output_path

        check_output_path(args.render, "--render")  # refused now, not after the search
    current = robot.configuration(parse_joint_values(args.current))
    (x, y, z), (qw, qx, qy, qz) = target_pose(args.target)
    target = IKTarget(link, (x, y, z), (qw, qx, qy, qz))
    started = time.perf_counter()
    configurations = find_configurations(robot, [target], current, SolveOptions(backend="numpy"))
    seconds = time.perf_counter() - started
    names = robot.actuated_joint_names
    payload = {
        "robot": robot.name,
        "link": link,
        "target": {"position": [x, y, z], "wxyz": [qw, qx, qy, qz]},
        "count": len(configurations),
        "seconds": round(seconds, 3),
        "configurations": [
            {"joints": dict(zip(names, (float(v) for v in c.joints))), "position_error": c.position_error,
             "rotation_error": c.rotation_error, "current": c.current, "distance": c.distance}
            for c in configurations
        ],
        "render": None,
    }
    if args.render and configurations:
        payload["render"] = str(render_contact_sheet(args.urdf, robot, link, target, configurations, args.render))
    plural = "s" if len(configurations) != 1 else ""
    lines = [f"{robot.name}: {len(configurations)} configuration{plural} reach '{link}' ({seconds * 1000:.0f} ms)"]
    lines += configuration_rows(robot, configurations)
    if not configurations:
        lines.append("  none: the target is out of reach or blocked by joint limits")
    if payload["render"]:
        lines.append(f"contact sheet: {payload['render']}")
    emit(args, payload, lines)
    return 0 if configurations else 3


def configuration_rows(robot, configurations) -> list[str]:
    """A table: a header row of joint names with their units (deg, or mm for a slide), then one
    row per configuration, and how far each is from the target."""
    headers = [f"{name} ({'mm' if prismatic else 'deg'})" for name, prismatic in zip(robot.actuated_joint_names, robot.is_prismatic)]
    widths = [max(len(h), 8) for h in headers]
    rows = ["      " + "  ".join(h.rjust(w) for h, w in zip(headers, widths)) + "  position error"]
    for i, c in enumerate(configurations, 1):
        cells = [f"{v * 1000:.1f}" if prismatic else f"{np.degrees(v):.1f}" for v, prismatic in zip(c.joints, robot.is_prismatic)]
        mark = "  <- current" if c.current else ""
        rows.append(f"  {i:>2}: " + "  ".join(cell.rjust(w) for cell, w in zip(cells, widths))
                    + f"  {c.position_error * 1000:.4f} mm{mark}")
    return rows if configurations else []


def render_contact_sheet(urdf, robot, link: str, target, configurations, filepath) -> Path:
    """One Workbench picture per configuration from one camera, labelled, composed with PIL."""
    import tempfile

    from PIL import Image, ImageDraw

    from .headless import blender_output_to_stderr, headless_blender

    filepath = Path(filepath).resolve()
    bpy = headless_blender()  # first: the search above may have started a kernel build
    from ..blender.build import import_urdf
    from ..blender.render import frame_camera, render_workbench
    from ..blender.rig import robot_for_rig, write_joint_values

    with blender_output_to_stderr():
        rig = import_urdf(bpy.context, str(urdf))
    rig_robot = robot_for_rig(rig)
    marker = _target_marker(bpy, target)
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = TILE
    _frame_all(bpy, scene, rig, rig_robot, configurations, marker, frame_camera)
    tiles = []
    with tempfile.TemporaryDirectory() as folder:
        for i, c in enumerate(configurations, 1):
            write_joint_values(rig, rig_robot, c.joints)
            bpy.context.view_layer.update()
            path = Path(folder) / f"tile_{i}.png"
            with blender_output_to_stderr():
                render_workbench(scene, path, TILE)
            tile = Image.new("RGB", (TILE[0], TILE[1] + LABEL), (20, 22, 26))
            tile.paste(Image.open(path).convert("RGB"), (0, LABEL))
            draw = ImageDraw.Draw(tile)
            label = f"{i}" + ("  current" if c.current else "")
            detail = f"{c.position_error * 1000:.4f} mm, {np.degrees(c.rotation_error):.4f} deg"
            draw.text((8, 3), label, fill=(255, 170, 60) if c.current else (235, 235, 235))
            draw.text((8, 18), detail, fill=(170, 170, 170))
            tiles.append(tile)
    bpy.data.objects.remove(marker)
    columns = min(COLUMNS, len(tiles))
    rows = (len(tiles) + columns - 1) // columns
    height = TILE[1] + LABEL
    sheet = Image.new("RGB", (columns * TILE[0], rows * height), (40, 42, 46))
    for i, tile in enumerate(tiles):
        sheet.paste(tile, ((i % columns) * TILE[0], (i // columns) * height))
    from ..core.files import write_with

    return write_with(filepath, lambda temporary: sheet.save(temporary, format="PNG"), "--render")


def _frame_all(bpy, scene, rig, rig_robot, configurations, marker, frame_camera) -> None:
    """One camera for every tile, so the pictures compare: framed on the arm's vertices in all
    the configurations at once (a temporary point cloud)."""
    from ..blender.render import visible_points
    from ..blender.rig import write_joint_values

    clouds = [np.array([tuple(marker.location)])]
    for c in configurations:
        write_joint_values(rig, rig_robot, c.joints)
        bpy.context.view_layer.update()
        clouds.append(visible_points(rig.children_recursive, max_points=20_000))
    mesh = bpy.data.meshes.new("kinema_frame_cloud")
    mesh.from_pydata([tuple(p) for p in np.concatenate(clouds)], [], [])
    holder = bpy.data.objects.new("kinema_frame_cloud", mesh)
    scene.collection.objects.link(holder)
    bpy.context.view_layer.update()
    try:
        frame_camera(scene, [holder])
    finally:
        bpy.data.objects.remove(holder)
        bpy.data.meshes.remove(mesh)


def _target_marker(bpy, target):
    """A small orange sphere where the target is."""
    mesh = bpy.data.meshes.new("kinema_target")
    import bmesh

    shape = bmesh.new()
    bmesh.ops.create_uvsphere(shape, u_segments=16, v_segments=8, radius=0.025)
    shape.to_mesh(mesh)
    shape.free()
    material = bpy.data.materials.new("kinema_target")
    material.diffuse_color = (1.0, 0.45, 0.05, 1.0)
    mesh.materials.append(material)
    marker = bpy.data.objects.new("kinema_target", mesh)
    marker.location = tuple(target.position)
    bpy.context.scene.collection.objects.link(marker)
    return marker
