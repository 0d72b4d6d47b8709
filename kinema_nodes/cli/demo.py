"""`kinema-nodes demo`: the main job on a bundled arm in one command. The shot (core.demo: a
figure-eight, then a hand-off to the elbow) is baked like `bake` does, and written as a .blend,
the CSVs, the report picture and a rendered frame."""

from __future__ import annotations

import time
from pathlib import Path
import numpy as np
from .common import emit
from ..core.errors import KinemaError
from .bake import BakeOutcome, TerminalProgress, bake_track, exit_code, finish_outputs, need_pillow
from .csv_files import TargetTrack, read_targets_csv, write_targets_csv


DEMO_ROBOT = "arm7"


def demo_track(robot, start: np.ndarray, tool: str, frames_eight: int = 120, frames_elbow: int = 48) -> TargetTrack:
    """The demo's shot (core.demo.demo_goals: a figure-eight, then a hand-off to the elbow) as a track."""
    from ..core.demo import demo_goals

    return TargetTrack(*demo_goals(robot, start, tool, frames_eight, frames_elbow))


def add_arguments_demo(parser):
    """The main job on a bundled arm: bake a figure-eight with a hand-off to the elbow; .blend, CSVs, pictures."""
    parser.add_argument("--out", default="kinema-demo", metavar="DIR", help="folder for the outputs (default ./kinema-demo)")
    parser.add_argument("--solver", choices=("pyroki", "numpy"), default="pyroki", help="IK backend (default pyroki)")
    parser.add_argument("--resolution", default="800x600", metavar="WxH", help="rendered frame size (default 800x600)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


DEMO_START = {"joint1": 0.0, "joint2": -0.3, "joint3": 0.0, "joint4": -2.2, "joint5": 0.0, "joint6": 1.9, "joint7": 0.8}


def run_demo(args) -> int:
    from .headless import parse_resolution
    from ..core.model.loading import load_robot

    started = time.perf_counter()
    need_pillow()
    resolution = parse_resolution(args.resolution)
    folder = Path(args.out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KinemaError(f"cannot create folder '{folder}': {exc.strerror or exc}") from None
    robot = load_robot(DEMO_ROBOT, check_meshes=False)
    start = robot.configuration(DEMO_START, base=robot.mid_configuration())
    track = demo_track(robot, start, robot.tool_point)
    targets_csv = folder / "demo_targets.csv"
    write_targets_csv(targets_csv, track)
    track = read_targets_csv(targets_csv)  # the demo runs exactly what `bake` would read
    outcome = bake_track(DEMO_ROBOT, robot.tool_point, track, folder / "demo.blend", solver=args.solver, start=DEMO_START,
                         progress=TerminalProgress("baking"))
    render_path = render_demo_frame(outcome, track, folder / "demo_frame.png", resolution)
    payload, text = finish_outputs(outcome, folder / "demo_joints.csv", folder / "demo_report.png", started,
                                   title=f"Kinema Nodes demo: {DEMO_ROBOT} traces a figure-eight, then the elbow leads")
    payload["render"] = str(render_path)
    payload["targets"] = str(targets_csv.resolve())
    emit(args, payload, [*text, f"rendered {render_path}"])
    return exit_code(payload)


#: Frames of the demo picture: pale copies of the arm (an onion skin) and the solid arm.
GHOST_FRAMES = (30, 90, 120)
SOLID_FRAME = 150
#: Three-quarter view: in front of the robot, to its right, from above (robot x forward, z up).
DEMO_VIEW_FROM = (1.0, -0.85, 0.62)


def render_demo_frame(outcome: BakeOutcome, track: TargetTrack, path: Path, resolution) -> Path:
    """The shot in one picture: a three-quarter view over a ground grid, the arm at several
    frames (pale copies) and solid where the elbow leads, the tool's figure-eight in red, the
    elbow's path in orange, and a marker with a label where the elbow takes over."""
    import tempfile

    import bpy
    from PIL import Image, ImageDraw, ImageFont

    from .headless import blender_output_to_stderr, save_blend
    from ..blender import render

    rig = outcome.rig
    scene = bpy.context.scene
    world = np.array(rig.matrix_world)
    links = track.links or [""] * len(track.frames)
    tool_link = links[0]
    handoff = next((i for i in range(1, len(links)) if links[i] != links[i - 1]), None)

    def to_world(points):
        return np.c_[points, np.ones(len(points))] @ world[:3, :].T

    def link_position(link: str, frame: int) -> np.ndarray:
        scene.frame_set(frame)
        bpy.context.view_layer.update()
        return to_world(np.array([rig.pose.bones[link].matrix.translation]))[0]

    tool_rows = [i for i, link in enumerate(links) if link == tool_link]
    staged = [render.path_curve("Kinema Tool Path", to_world(track.positions[tool_rows]), (0.85, 0.1, 0.1, 1.0), 0.005)]
    labels = []  # (world point, text, colour)
    if handoff is not None:
        elbow_link = links[handoff]
        staged.append(render.path_curve("Kinema Elbow Path", to_world(track.positions[handoff:]), (1.0, 0.55, 0.0, 1.0), 0.005))
        takeover = to_world(track.positions[handoff:handoff + 1])[0]
        staged.append(render.marker_sphere("Kinema Hand-off", takeover, 0.022, (1.0, 0.55, 0.0, 1.0)))
        labels.append((takeover, f"elbow ({elbow_link}) takes over, frame {int(track.frames[handoff])}", (200, 90, 0)))
    frames = [int(f) for f in track.frames]
    ghost_frames = [f for f in GHOST_FRAMES if frames[0] <= f <= frames[-1]]
    solid = SOLID_FRAME if frames[0] <= SOLID_FRAME <= frames[-1] else frames[len(frames) // 2]
    ghosts = []
    for frame in ghost_frames:
        ghosts += render.ghost_copies(rig, frame, (0.35, 0.55, 0.95, 0.22))
        labels.append((link_position(tool_link, frame), f"{frame}", (40, 70, 160)))
    labels.append((link_position(tool_link, solid), f"{solid}", (20, 20, 20)))
    base = to_world(np.zeros((1, 3)))[0]
    meshes = [o for o in rig.children_recursive if o.type == "MESH"]
    scene.frame_set(solid)
    bpy.context.view_layer.update()
    cloud = np.concatenate([render.visible_points(meshes + ghosts, max_points=40_000), to_world(track.positions)])
    reach = float(np.max(np.linalg.norm(cloud[:, :2] - base[:2], axis=1)))
    spacing = 0.1 if reach < 1.5 else 0.5
    staged += render.ground_grid(base[:2], 1.4 * reach, spacing, height=float(base[2]))
    scene.render.resolution_x, scene.render.resolution_y = resolution
    holder = _point_cloud_object(bpy, scene, cloud)
    with blender_output_to_stderr():
        render.frame_camera(scene, [holder], view_from=DEMO_VIEW_FROM, margin=0.8)
    render.remove_objects([holder])
    pixels = render.to_pixels(scene, np.array([point for point, _, _ in labels]))
    elbow_pixels = render.to_pixels(scene, to_world(track.positions[handoff:])) if handoff is not None else None
    with tempfile.TemporaryDirectory() as folder:
        with blender_output_to_stderr():
            raw = render.render_workbench(scene, Path(folder) / "frame.png", resolution)
        picture = Image.open(raw).convert("RGB")
    render.remove_objects(ghosts)  # the onion skin is for the picture; the .blend keeps the path, grid and marker
    draw = ImageDraw.Draw(picture, "RGBA")
    try:
        font, small = ImageFont.load_default(size=15), ImageFont.load_default(size=13)
    except TypeError:  # Pillow < 10.1
        font = small = ImageFont.load_default()
    if elbow_pixels is not None:  # drawn over the picture: the arm itself would hide much of it
        line = [tuple(p) for p in elbow_pixels]
        draw.line(line, fill=(255, 255, 255, 220), width=7, joint="curve")
        draw.line(line, fill=(255, 140, 0, 255), width=4, joint="curve")
        x, y = elbow_pixels[0]
        draw.ellipse([x - 9, y - 9, x + 9, y + 9], outline=(255, 255, 255, 230), width=6)
        draw.ellipse([x - 9, y - 9, x + 9, y + 9], outline=(230, 110, 0, 255), width=3)
    for (x, y), (_, text, colour) in zip(pixels, labels):
        is_takeover = "takes over" in text
        dx, dy = (14, -22) if is_takeover else (8, -16)
        box = draw.textbbox((x + dx, y + dy), text, font=font if is_takeover else small)
        draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill=(255, 255, 255, 190))
        draw.text((x + dx, y + dy), text, fill=colour, font=font if is_takeover else small)
    width, height = picture.size
    legend = [(f"red: the tool's figure-eight, frames {frames[0]}-{int(track.frames[handoff - 1]) if handoff else frames[-1]}"
               + (f"    orange: the elbow leads, frames {int(track.frames[handoff])}-{frames[-1]}" if handoff else "")),
              f"pale: the arm at frames {', '.join(str(f) for f in ghost_frames)}    solid: the arm at frame {solid}"
              "    numbers: the tool at that frame"]
    draw.rectangle([0, height - 42, width, height], fill=(255, 255, 255, 210))
    for row, text in enumerate(legend):
        draw.text((10, height - 38 + 18 * row), text, fill=(40, 40, 40), font=small)
    scene.frame_set(frames[0])
    save_picture(picture, path)
    save_blend(bpy, outcome.blend)  # keep the paths, grid, marker and camera in the demo file
    return Path(path).resolve()


def save_picture(image, path: Path) -> None:
    """The one place the demo picture reaches the disk (kept small so it can be made atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")


def _point_cloud_object(bpy, scene, points: np.ndarray):
    """A temporary vertex-only mesh, for framing the camera on everything the shot shows."""
    mesh = bpy.data.meshes.new("kinema_frame_cloud")
    mesh.from_pydata([tuple(p) for p in points], [], [])
    holder = bpy.data.objects.new("kinema_frame_cloud", mesh)
    scene.collection.objects.link(holder)
    bpy.context.view_layer.update()
    return holder
