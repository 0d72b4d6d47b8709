"""CLI commands that run inside the bpy module: `import` (and, later, `configs`, `bake`, `demo`).

`headless_blender()` is the one way these commands get a Blender: the bpy module with the
add-on registered and an empty file. Pictures go through `render.render_rig`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from .cli import emit, parse_joint_values
from .core.errors import KinemaError

_REGISTERED = False


def headless_blender(empty_file: bool = True):
    """The bpy module with Kinema Nodes registered (once per process) and, by default, an empty file."""
    global _REGISTERED
    # Blender logs start-up notes (colour management, ...) as it imports and loads its first file.
    with _silenced():
        try:
            import bpy
        except ImportError:
            bpy = None
        if bpy is not None:
            if not _REGISTERED and not hasattr(bpy.types.Armature, "kinema"):
                from . import register

                register()
            _REGISTERED = True
            if empty_file:
                bpy.ops.wm.read_homefile(use_empty=True)
    if bpy is None:
        raise KinemaError("this command needs Blender's Python module: pip install bpy (see the README)")
    return bpy


@contextlib.contextmanager
def _silenced():
    """Blender's start-up log lines go nowhere: stdout is the answer, stderr is for one-line errors."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


@contextlib.contextmanager
def blender_output_to_stderr():
    """Blender prints progress on the process's stdout; keep stdout for the command's answer."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def blend_path(path: str | Path) -> Path:
    """An --out argument as an absolute .blend path (checked before any work is done)."""
    path = Path(path).resolve()
    if path.suffix.lower() != ".blend":
        raise KinemaError(f"--out '{path}' must end in .blend")
    return path


def save_blend(bpy, path: str | Path) -> Path:
    """Save the open file to `path` (folders made as needed); a clear error when it cannot be written."""
    path = blend_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KinemaError(f"cannot create folder for '{path}': {exc.strerror or exc}") from None
    try:
        with blender_output_to_stderr():
            bpy.ops.wm.save_as_mainfile(filepath=str(path), check_existing=False, compress=True)
    except RuntimeError as exc:
        raise KinemaError(f"cannot save '{path}': {str(exc).strip().splitlines()[-1]}") from None
    return path


def parse_resolution(text: str) -> tuple[int, int]:
    """A --resolution argument, WIDTHxHEIGHT, as two pixel counts."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise KinemaError(f"--resolution '{text}' is not WIDTHxHEIGHT") from None
    if not (16 <= width <= 8192 and 16 <= height <= 8192):
        raise KinemaError(f"--resolution '{text}' is outside 16..8192 pixels")
    return width, height


_resolution = parse_resolution  # the name cli_bake imports


# ---- import --------------------------------------------------------------------------------

def add_arguments_import(parser):
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--out", required=True, metavar="FILE.blend", help="where to save the Blender file")
    parser.add_argument("--render", metavar="FILE.png", help="also render a Workbench picture of the robot")
    parser.add_argument("--resolution", default="640x480", metavar="WxH", help="picture size (default 640x480)")
    parser.add_argument("--joints", nargs="*", default=[], metavar="NAME=VALUE", help="pose: joint values, radians or metres")
    parser.add_argument("--no-collision", action="store_true", help="leave out the collision geometry")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_import(args) -> int:
    from .core.robot import load_robot

    values = parse_joint_values(args.joints)
    resolution = parse_resolution(args.resolution)
    blend_path(args.out)
    load_robot(args.urdf).configuration(values)  # a bad file or joint name fails before Blender starts
    started = time.perf_counter()
    bpy = headless_blender()
    from . import rig
    from .importer import import_urdf

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
        from .render import render_rig

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
        lines.append(f"clamped to limits: {', '.join(clamped)}")
    if picture:
        lines.append(f"rendered {picture}")
    emit(args, payload, "\n".join(lines))
    return 0
