"""CLI commands that run inside the bpy module: `import` (and, later, `configs`, `bake`, `demo`).

`headless_blender()` is the one way these commands get a Blender: the bpy module with the
add-on registered and an empty file. Pictures go through `render.render_rig`.
"""

from __future__ import annotations

import time

from .common import emit, parse_joint_values
from .headless import blend_path, blender_output_to_stderr, headless_blender, parse_resolution, save_blend




# ---- import --------------------------------------------------------------------------------

def add_arguments_import(parser):
    """Import a robot into a .blend (armature, meshes, pose), optionally with a rendered picture."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--out", required=True, metavar="FILE.blend", help="where to save the Blender file")
    parser.add_argument("--render", metavar="FILE.png", help="also render a Workbench picture of the robot")
    parser.add_argument("--resolution", default="640x480", metavar="WxH", help="picture size (default 640x480)")
    parser.add_argument("--joints", nargs="*", default=[], metavar="NAME=VALUE", help="pose: joint values, radians or metres (default: zero, moved inside the limits; "
                             "values outside the limits are clamped, with a warning)")
    parser.add_argument("--no-collision", action="store_true", help="leave out the collision geometry")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_import(args) -> int:
    from ..core.model.loading import load_robot

    values = parse_joint_values(args.joints)
    resolution = parse_resolution(args.resolution)
    blend_path(args.out)
    if args.render:
        from ..core.files import check_output_path

        check_output_path(args.render, "--render")  # refused before the import, not after the save
    load_robot(args.urdf).configuration(values)  # a bad file or joint name fails before Blender starts
    started = time.perf_counter()
    bpy = headless_blender()
    from ..blender import rig
    from ..blender.build import import_urdf

    rig_object = import_urdf(bpy.context, args.urdf, collision=not args.no_collision)
    robot = rig.robot_for_rig(rig_object)
    q = robot.configuration(values)
    written = rig.write_joint_values(rig_object, robot, q)
    clamped = [name for name, a, b in zip(robot.actuated_joint_names, q, written) if a != b]
    bpy.context.view_layer.update()
    imported_s = time.perf_counter() - started
    out = save_blend(bpy, args.out)
    picture = None
    if args.render:
        from ..blender.render import render_rig

        with blender_output_to_stderr():
            picture = render_rig(rig_object, args.render, resolution)
    meshes = [o for o in rig_object.children if o.type == "MESH"]
    payload = {
        "robot": robot.name,
        "urdf": str(robot.path),
        "out": str(out),
        "render": str(picture) if picture else None,
        "armature": rig_object.name,
        "bones": len(rig_object.data.bones),
        "mesh_objects": len(meshes),
        "tool_point": robot.tool_point,
        "joints": dict(zip(robot.actuated_joint_names, written.tolist())),
        "clamped": clamped,
        "import_seconds": round(imported_s, 3),
    }
    lines = [
        f"imported {robot.name}: {payload['bones']} bones, {len(meshes)} mesh objects in {imported_s:.2f} s",
        f"saved {out}",
    ]
    if clamped:
        from .info import clamp_to_limits

        clamp_to_limits(robot, q)  # the one-line warning on stderr, worded as fk words it
    if picture:
        lines.append(f"rendered {picture}")
    emit(args, payload, "\n".join(lines))
    return 0
