"""cli.demo"""

from __future__ import annotations

import time
from pathlib import Path
import numpy as np
from .common import emit
from ..core.errors import KinemaError
from .bake import BakeOutcome, TerminalProgress, need_pillow, bake_track, finish_outputs
from .csv_files import TargetTrack, read_targets_csv, write_targets_csv


DEMO_ROBOT = "arm7"


DEMO_HANDOFF_LINK = "link4"  # the elbow leads after the hand-off


def demo_track(robot, start: np.ndarray, tool: str, frames_eight: int = 120, frames_elbow: int = 48) -> TargetTrack:
    """The tool point traces a figure-eight (a lemniscate in the y-z plane in front of the robot,
    tool orientation held), then the goal is handed to the elbow, which swings the arm round.

    The elbow's poses come from forward kinematics of a joint-space sweep that starts where the
    figure-eight leaves the arm (solved here with the NumPy solver), so every goal is reachable."""
    from ..core.model.kinematics import link_pose
    from ..core.model.rotations import matrix_to_quaternion
    from ..core.solve import IKTarget, SolveOptions, solve_trajectory

    home = link_pose(robot, start, tool)
    centre = home[:3, 3]
    wxyz = matrix_to_quaternion(home)
    t = np.linspace(0.0, 2.0 * np.pi, frames_eight)
    width, height = 0.22, 0.14
    positions = np.stack([np.full_like(t, centre[0]), centre[1] + width * np.sin(t),
                          centre[2] + height * np.sin(t) * np.cos(t)], axis=1)
    goals = [IKTarget(tool, tuple(p), tuple(wxyz)) for p in positions]
    held = robot.held_joints()
    solved = solve_trajectory(robot, goals, start, SolveOptions(backend="numpy", held_joints=held))
    q = solved[-1].joints.copy()
    sweep = np.linspace(0.0, 1.0, frames_elbow + 1)[1:]
    elbow = []
    for s in sweep:
        qe = q.copy()
        qe[robot.joint_index("joint1")] += 0.7 * np.sin(np.pi * s) * 1.0
        qe[robot.joint_index("joint2")] += -0.25 * np.sin(np.pi * s)
        elbow.append(link_pose(robot, qe, DEMO_HANDOFF_LINK))
    elbow = np.array(elbow)
    frames = np.arange(1, frames_eight + frames_elbow + 1)
    all_positions = np.concatenate([positions, elbow[:, :3, 3]])
    all_wxyz = np.concatenate([np.tile(wxyz, (frames_eight, 1)), matrix_to_quaternion(elbow)])
    links = [tool] * frames_eight + [DEMO_HANDOFF_LINK] * frames_elbow
    return TargetTrack(frames, all_positions, all_wxyz, links)


def add_arguments_demo(parser):
    parser.add_argument("--out", default="kinema-demo", metavar="DIR", help="folder for the outputs (default ./kinema-demo)")
    parser.add_argument("--solver", choices=("pyroki", "numpy"), default="pyroki", help="IK backend (default pyroki)")
    parser.add_argument("--resolution", default="800x600", metavar="WxH", help="rendered frame size (default 800x600)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


DEMO_START = {"joint1": 0.0, "joint2": -0.3, "joint3": 0.0, "joint4": -2.2, "joint5": 0.0, "joint6": 1.9, "joint7": 0.8}


def run_demo(args) -> int:
    from .import_robot import _resolution
    from ..core.model.robot import load_robot

    started = time.perf_counter()
    need_pillow()
    resolution = _resolution(args.resolution)
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
    emit(args, payload, text + f"\nrendered {render_path}")
    return 0


def render_demo_frame(outcome: BakeOutcome, track: TargetTrack, path: Path, resolution) -> Path:
    """A Workbench picture part-way through the figure-eight, with the path drawn as a red tube."""
    import bpy

    from .headless import blender_output_to_stderr, save_blend
    from ..blender.render import frame_camera, render_workbench

    rig = outcome.rig
    eight = [i for i, link in enumerate(track.links or []) if link == (track.links[0] if track.links else "")]
    points = track.positions[eight] if eight else track.positions
    curve = bpy.data.curves.new("Kinema Path", "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = 0.004
    spline = curve.splines.new("POLY")
    spline.points.add(len(points) - 1)
    world = np.array(rig.matrix_world)
    homogeneous = np.c_[points, np.ones(len(points))] @ world.T
    spline.points.foreach_set("co", homogeneous.astype(np.float32).ravel())
    material = bpy.data.materials.new("Kinema Path")
    material.diffuse_color = (0.85, 0.1, 0.1, 1.0)
    curve.materials.append(material)
    path_object = bpy.data.objects.new("Kinema Path", curve)
    bpy.context.scene.collection.objects.link(path_object)
    scene = bpy.context.scene
    scene.frame_set(int(track.frames[0]) + len(points) // 4)  # the tool at the end of one loop
    scene.render.resolution_x, scene.render.resolution_y = resolution
    bpy.context.view_layer.update()
    with blender_output_to_stderr():
        frame_camera(scene, rig.children_recursive, view_from=(1.0, 0.35, 0.45))
        picture = render_workbench(scene, path, resolution)
    save_blend(bpy, outcome.blend)  # keep the path and camera in the demo file
    return picture
