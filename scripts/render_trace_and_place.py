"""Regenerates docs/trace_and_place.png, the README's "Trace and place" picture (#30): what the
Pick and place and Trace a curve presets do on real arms, in real Blender, in one image.

- Left: example-robot-data's Franka Panda with the Pick and place preset applied, a 3 cm box
  grasped at frame 20, baked (the arm's joints and the box's own keys): an onion skin of the arm
  and the box, pale at the approach, the grasp, the place and the retract, solid mid-carry, and
  the tool centre point's path.
- Right: the UR5 with the Trace a curve preset, its S-curve stretched out past the arm's reach,
  and Preview Reach run on it: the path drawn in the colours of its preview mesh's `reach_color`
  attribute (green reachable, yellow near a singularity, orange near a joint limit, red
  unreachable), the arm solid where it starts and pale a little before its elbow comes near
  straight; labels mark where the yellow and the red begin.

Run from the repository root (about a minute the first time, 15 s once Blender's and the solver's
caches are warm; the default writes the README's picture):

    python scripts/render_trace_and_place.py [--out docs/trace_and_place.png] [--resolution 1200x600]
        [--json FILE.json] [--panels DIR]

--json writes what the picture shows (the verdict counts, the frames); --panels keeps the two
renders as Blender made them (place.png, trace.png), before the titles, legends and labels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Start poses away from singularities and limits (those the presets' own tests use).
PANDA_START = [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5]
UR5_START = [0.3, -1.2, 1.4, -1.0, -1.3, 0.2]
#: Pick and place: approach, grasp, place, retract pale; mid-carry solid (the preset's keys: 1, 20, 30, 50, 60, 75).
PLACE_GHOSTS, PLACE_SOLID, PLACE_END = (1, 20, 60, 75), 40, 75
#: The traced S-curve, stretched from the preset's 15 cm to this many times that: it runs out of the UR5's reach.
TRACE_STRETCH = 4.0
TRACE_SPEED = 0.1  # m/s: a few hundred frames (samples) for the stretched pass
#: Preview Reach's Elbow Margin (the panel's default is 10°): on this path the kept orientation stops the UR5
#: with its elbow still 16-23° from straight (measured at 6x), so 10° marks no sample near the singularity before the red.
ELBOW_MARGIN = 25.0
GHOST = (0.35, 0.55, 0.95, 0.22)
GHOST_BEFORE = 12  # samples (about 5 cm) before the first one near a singularity
BOX = (0.95, 0.55, 0.1, 1.0)
BOX_GHOST = (0.95, 0.55, 0.1, 0.45)
#: Where each panel's camera looks from (robot x forward, z up).
PLACE_VIEW_FROM = (1.0, -0.35, 0.45)
TRACE_VIEW_FROM = (0.3, -1.0, 0.35)
LEGEND_HEIGHT = 44
TITLE_HEIGHT = 26


def _start(bpy, name: str, start):
    """An empty file with `name` (an example-robot-data robot) imported and posed at `start`."""
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    bpy.ops.wm.read_homefile(use_empty=True)
    rig = import_urdf(bpy.context, name)
    bpy.context.view_layer.objects.active = rig
    robot = robot_for_rig(rig)
    q = robot.zero_configuration()
    q[: len(start)] = start
    write_joint_values(rig, robot, np.clip(q, robot.lower, robot.upper))
    bpy.context.view_layer.update()
    return rig, robot


def _nodes(tree) -> dict:
    return {node.bl_idname: node for node in tree.nodes}


def _copy_at(bpy, obj, frame: int, rgba):
    """A still copy of one object as it is at `frame`, in one see-through colour."""
    from kinema_nodes.blender import render

    scene = bpy.context.scene
    scene.frame_set(frame)
    mesh = obj.data.copy()
    mesh.materials.clear()
    mesh.materials.append(render.flat_material(f"{obj.name} @{frame}", rgba))
    copy = bpy.data.objects.new(f"{obj.name} @{frame}", mesh)
    copy.matrix_world = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.copy()
    scene.collection.objects.link(copy)
    return copy


def _stage(bpy, rig, extra, view_from, resolution, path: Path, spacing: float = 0.1):
    """Ground grid under everything shown, a camera that frames it, a Workbench render to `path`."""
    from kinema_nodes.blender import render

    scene = bpy.context.scene
    shown = [o for o in rig.children_recursive if o.type == "MESH"] + [o for o in extra if o.type == "MESH"]
    cloud = render.visible_points(shown, max_points=40_000)
    base = np.array(rig.matrix_world)[:3, 3]
    reach = float(np.max(np.linalg.norm(cloud[:, :2] - base[:2], axis=1)))
    render.ground_grid(base[:2], 2.5 * reach, spacing, height=float(base[2]))
    scene.render.resolution_x, scene.render.resolution_y = resolution
    render.frame_camera(scene, shown + [o for o in extra if o.type != "MESH"], view_from=view_from, margin=0.86)
    return render.render_workbench(scene, path, resolution)


def pick_and_place(bpy, resolution, path: Path) -> dict:
    """The left panel: the Pick and place preset on the Panda, baked, as an onion skin."""
    from mathutils import Matrix

    from kinema_nodes.blender import render
    from kinema_nodes.blender.grasping import bake_grasp, key_grasp_node, link_world
    from kinema_nodes.blender.presets import apply_preset

    rig, robot = _start(bpy, "panda", PANDA_START)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, PLACE_END
    tree = apply_preset(bpy.context, rig, "Pick and place", backend="NUMPY")
    nodes = _nodes(tree)
    solver, grasp = nodes["KinemaSolverNode"], nodes["KinemaGraspNode"]
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    scene.frame_set(grasp.grasp_frame)
    pick = link_world(rig, robot.tool_point)
    bpy.ops.mesh.primitive_cube_add(size=0.03)
    box = bpy.context.active_object
    box.name = "Box"
    held = np.eye(4)
    held[2, 3] = 0.015  # just past the tool point, along its axis
    box.matrix_world = Matrix((pick @ held).tolist())
    box.data.materials.append(render.flat_material("Box", BOX))
    grasp.carried = box
    key_grasp_node(bpy.context, grasp)
    bpy.context.view_layer.objects.active = rig
    scene.frame_set(1)
    if bpy.ops.kinema.bake() != {"FINISHED"}:
        raise RuntimeError("the pick and place did not bake")
    bake_grasp(bpy.context, box)
    solver.live = False  # the keys play as baked
    tool_path = []
    for frame in range(1, PLACE_END + 1):
        scene.frame_set(frame)
        tool_path.append(link_world(rig, robot.tool_point)[:3, 3])
    staged = [render.path_curve("Tool Path", np.array(tool_path), (0.85, 0.1, 0.1, 1.0), 0.003)]
    for frame in PLACE_GHOSTS:
        staged += render.ghost_copies(rig, frame, GHOST)
        staged.append(_copy_at(bpy, box, frame, BOX_GHOST))
    scene.frame_set(PLACE_SOLID)
    bpy.context.view_layer.update()
    _stage(bpy, rig, staged + [box], PLACE_VIEW_FROM, resolution, path)
    return {"robot": "panda", "ghost_frames": list(PLACE_GHOSTS), "solid_frame": PLACE_SOLID}


def trace(bpy, resolution, path: Path) -> dict:
    """The right panel: the Trace a curve preset on the UR5, stretched out of reach, coloured by
    Preview Reach. Returns the verdict counts."""
    from kinema_nodes.blender import render
    from kinema_nodes.blender.presets import apply_preset
    from kinema_nodes.blender.rig import read_joint_values, write_joint_values
    from kinema_nodes.blender.tool_setup import preview_reach
    from kinema_nodes.core.reach_preview import counts

    rig, robot = _start(bpy, "ur5", UR5_START)
    tree = apply_preset(bpy.context, rig, "Trace a curve", backend="NUMPY")
    nodes = _nodes(tree)
    tool, solver = nodes["KinemaToolNode"], nodes["KinemaSolverNode"]
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    curve = tool.path
    curve.scale = (TRACE_STRETCH,) * 3  # its origin is the bead's start: it grows along +X
    tool.path_speed = TRACE_SPEED
    bpy.context.view_layer.update()
    scene = bpy.context.scene
    length = 0.15 * 1.1 * TRACE_STRETCH + tool.approach + tool.retract  # the S is about 10 % longer than its chord
    fps = scene.render.fps / scene.render.fps_base
    scene.frame_start, scene.frame_end = 1, int(np.ceil(length / ((1 - tool.ramp) * TRACE_SPEED) * fps)) + 2
    scene.frame_set(1)
    start = read_joint_values(rig, robot)
    preview, samples = preview_reach(bpy.context, rig, elbow_margin_deg=ELBOW_MARGIN)
    verdicts = [sample.verdict for _, sample in samples]
    mesh = preview.data
    points = np.empty(3 * len(mesh.vertices), dtype=np.float32)
    mesh.vertices.foreach_get("co", points)
    world = np.array(rig.matrix_world)
    points = points.reshape(-1, 3).astype(float) @ world[:3, :3].T + world[:3, 3]
    colours = np.empty(4 * len(mesh.vertices), dtype=np.float32)
    mesh.attributes["reach_color"].data.foreach_get("color", colours)
    colours = colours.reshape(-1, 4)
    preview.hide_render = True  # its points are drawn as the tube below, in the same colours
    curve.hide_render = True
    staged = []
    run = 0
    for i in range(1, len(points) + 1):  # one tube per run of one verdict, each ending where the next starts
        if i == len(points) or verdicts[i] != verdicts[run]:
            ends = points[run:min(i + 1, len(points))]
            if len(ends) == 1:
                ends = np.array([ends[0], ends[0] + 1e-4])
            staged.append(render.path_curve(f"Reach {verdicts[run]} {run}", ends, (*colours[run, :3], 1.0), 0.012))
            run = i
    solver.live = False
    stretched = next((i for i, v in enumerate(verdicts) if v == "near_singularity"), None)
    if stretched is not None:  # pale a little before its elbow first comes near straight (its tool would hide the yellow)
        stretched = max(0, stretched - GHOST_BEFORE)
        write_joint_values(rig, robot, samples[stretched][1].joints)
        staged += render.ghost_copies(rig, scene.frame_current, GHOST)
    write_joint_values(rig, robot, start)  # solid where it starts
    bpy.context.view_layer.update()
    _stage(bpy, rig, staged, TRACE_VIEW_FROM, resolution, path)
    labels = []  # (x, y) in the panel, text, verdict: where each run of a verdict other than reachable begins
    for verdict, text in (("near_singularity", "elbow near straight"), ("near_limit", "near a limit"),
                          ("unreachable", "out of reach")):
        first = next((i for i, v in enumerate(verdicts) if v == verdict), None)
        if first is not None:
            x, y = render.to_pixels(scene, points[first:first + 1])[0]
            labels.append((float(x), float(y), text, verdict))
    return {"robot": "ur5", "verdicts": counts([s for _, s in samples]), "samples": len(samples),
            "elbow_margin_deg": ELBOW_MARGIN, "labels": labels,
            "stretched_frame": samples[stretched][0] if stretched is not None else None}


def compose(left: Path, right: Path, size, place: dict, traced: dict, out: Path) -> None:
    """The two renders side by side, each with a title above and a legend below."""
    from PIL import Image, ImageDraw, ImageFont

    from kinema_nodes.core.reach_preview import COLOURS, VERDICTS

    width, height = size
    half = width // 2
    picture = Image.new("RGB", (width, height), (255, 255, 255))
    for x, panel in ((0, left), (half, right)):
        picture.paste(Image.open(panel).convert("RGB"), (x, TITLE_HEIGHT))
    draw = ImageDraw.Draw(picture)
    try:
        font, small = ImageFont.load_default(size=16), ImageFont.load_default(size=13)
    except TypeError:  # Pillow < 10.1
        font = small = ImageFont.load_default()
    draw.line([(half, 0), (half, height)], fill=(170, 170, 175), width=2)
    draw.text((10, 5), "Pick and place (Franka Panda), baked", fill=(30, 30, 30), font=font)
    draw.text((half + 10, 5), "Trace a curve (UR5), Preview Reach before the bake", fill=(30, 30, 30), font=font)
    legend_top = height - LEGEND_HEIGHT
    ghosts = ", ".join(str(f) for f in place["ghost_frames"])
    draw.text((10, legend_top + 6), f"pale: arm and box at frames {ghosts}    solid: frame {place['solid_frame']}",
              fill=(40, 40, 40), font=small)
    draw.text((10, legend_top + 24), "red line: the tool centre point's path", fill=(40, 40, 40), font=small)
    x = half + 10
    names = {"reachable": "reachable", "near_singularity": f"near a singularity (elbow {traced['elbow_margin_deg']:g}°)",
             "near_limit": "near a limit", "unreachable": "unreachable"}
    for row, verdicts in enumerate((VERDICTS[:2], VERDICTS[2:])):
        x = half + 10
        for verdict in verdicts:
            rgb = tuple(int(round(255 * c ** (1 / 2.2))) for c in COLOURS[verdict])  # linear -> sRGB
            y = legend_top + 6 + 18 * row
            draw.rectangle([x, y + 2, x + 12, y + 12], fill=rgb)
            text = f"{names[verdict]}: {traced['verdicts'][verdict]}"
            draw.text((x + 17, y), text, fill=(40, 40, 40), font=small)
            x += 17 + int(draw.textlength(text, font=small)) + 18
    if traced["stretched_frame"] is not None:
        draw.text((x, legend_top + 24), f"solid: start   pale: frame {traced['stretched_frame']}", fill=(40, 40, 40), font=small)
    overlay = ImageDraw.Draw(picture, "RGBA")
    for row, (x, y, text, verdict) in enumerate(traced["labels"]):
        x, y = x + half, y + TITLE_HEIGHT
        below = row % 2  # alternately above and below the path, so neighbours do not overlap
        tx, ty = x + 14, y + (26 if below else -44)
        overlay.line([(x, y + (7 if below else -7)), (tx, ty + (0 if below else 14))], fill=(40, 40, 40, 220), width=1)
        box = overlay.textbbox((tx, ty), text, font=small)
        overlay.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill=(255, 255, 255, 200))
        overlay.text((tx, ty), text, fill=(40, 40, 40), font=small)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a palette keeps the README's picture small (about 90 KB); the octree keeps the verdicts' saturated colours
    picture.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, format="PNG", optimize=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "trace_and_place.png"), metavar="FILE.png")
    parser.add_argument("--resolution", default="1200x600", metavar="WxH", help="the whole picture (two panels side by side)")
    parser.add_argument("--json", metavar="FILE.json", help="write what the picture shows: verdict counts, frames")
    parser.add_argument("--panels", metavar="DIR", help="keep the two renders, unlabelled, in DIR")
    args = parser.parse_args(argv)
    from kinema_nodes.cli.headless import blender_output_to_stderr, headless_blender, parse_resolution

    width, height = parse_resolution(args.resolution)
    panel = (width // 2, height - TITLE_HEIGHT - LEGEND_HEIGHT)
    out = Path(args.out).resolve()
    bpy = headless_blender()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.panels or temporary)
        with blender_output_to_stderr():
            place = pick_and_place(bpy, panel, Path(folder) / "place.png")
            traced = trace(bpy, panel, Path(folder) / "trace.png")
        compose(Path(folder) / "place.png", Path(folder) / "trace.png", (width, height), place, traced, out)
    summary = {"picture": str(out), "size": [width, height], "panel": list(panel), "title_height": TITLE_HEIGHT,
               "legend_height": LEGEND_HEIGHT, "pick_and_place": place, "trace": traced}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # bpy 4.5 can hang in its own shutdown
