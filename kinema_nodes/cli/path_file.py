"""The path file of `kinema-nodes bake --path`: points, a speed and the moves between them, made
into the tool's pose at every frame by core/paths.py (the maths the Tool node's Linear and
Circular moves and Follow Path use), then baked as a targets CSV is.

Reading is strict: every problem is one line naming the file and the field, exit code 2, before
Blender starts, so nothing is half-made. The reach verdicts of `--json` come from
core/reach_preview.py, run on the same goals with the bake's own solver settings before the bake.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..core import path_legs, paths
from ..core.errors import KinemaError
from .common import read_small_file
from .csv_files import BLENDER_MAX_FRAME, MAX_BAKE_FRAMES, TargetTrack

#: Caps on a path file (README, "The path file of bake").
MAX_PATH_BYTES = 16 * 1024 * 1024
MAX_PATH_POINTS = 100_000

#: The keys a path file may have, at the top and per point (anything else is refused: a typo
#: such as "aproach" must not bake silently without its approach).
TOP_KEYS = {"points", "speed", "ramp", "approach", "retract", "start_frame", "turn_speed", "blend"}
POINT_KEYS = {"xyz", "wxyz", "move", "via"}
MOVE_NAMES = {"joint": "JOINT", "linear": "LINEAR", "circular": "CIRCULAR"}

PATH_FILE_HELP = (
    'a JSON path file instead of --targets: {"speed": M_PER_S, "points": [{"xyz": [x, y, z], "wxyz": [w, x, y, z]}, '
    '{"xyz": [..], "move": "linear"|"circular"|"joint", "via": [x, y, z]}, ...], "ramp": 0.1, "approach": M, '
    '"retract": M, "blend": M, "start_frame": 1}; poses in the robot\'s root frame (metres); a point\'s move is how the tool '
    'gets there (linear by default; circular needs a via point); a point without wxyz keeps the one before '
    "(the first: the tool's at the start pose); approach and retract run along the tool's Z axis; "
    "blend: a radius within which the tool rounds each point between two linear or circular moves instead of stopping")


def _number(value, where: str, *, low: float = -math.inf, high: float = math.inf, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KinemaError(f"{where}: {json.dumps(value)[:40]} is not a number")
    value = float(value)
    if not math.isfinite(value):
        raise KinemaError(f"{where}: {value} is not a finite number")
    if value < low or (low_open and value == low) or value > high:
        raise KinemaError(f"{where}: {value:g} is outside {'(' if low_open else '['}{low:g} .. {high:g}]")
    return value


def _vector(value, size: int, where: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != size:
        raise KinemaError(f"{where}: expected a list of {size} numbers")
    return np.array([_number(v, f"{where}[{i}]", low=-1e6, high=1e6) for i, v in enumerate(value)])


def _read_json(path: Path):
    data = read_small_file(path, MAX_PATH_BYTES, "path file")
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise KinemaError(f"path file '{path}' is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise KinemaError(f"path file '{path}' line {exc.lineno}: not JSON ({exc.msg})") from None


def read_path_file(path: str | Path, start_rotation: np.ndarray, fps: float) -> tuple[TargetTrack, list[path_legs.PathLeg]]:
    """The file's tool poses at every frame (a TargetTrack, as a targets CSV gives) and its legs.
    `start_rotation`: the tool's orientation at the start pose, for a first point without wxyz."""
    path = Path(path)
    data = _read_json(path)
    where = f"path file '{path}'"
    if not isinstance(data, dict):
        raise KinemaError(f"{where}: expected a JSON object with \"speed\" and \"points\"")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise KinemaError(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(sorted(TOP_KEYS))})")
    if "speed" not in data:
        raise KinemaError(f"{where}: \"speed\" (m/s) is missing")
    speed = _number(data["speed"], f"{where}, speed", low=0.0, high=100.0, low_open=True)
    ramp = _number(data.get("ramp", 0.1), f"{where}, ramp", low=0.0, high=0.5)
    approach = _number(data.get("approach", 0.0), f"{where}, approach", low=0.0, high=100.0)
    retract = _number(data.get("retract", 0.0), f"{where}, retract", low=0.0, high=100.0)
    blend = _number(data.get("blend", 0.0), f"{where}, blend", low=0.0, high=100.0)
    turn_speed = math.radians(_number(data.get("turn_speed", 90.0), f"{where}, turn_speed", low=0.0, high=1e5, low_open=True))
    start_frame = _number(data.get("start_frame", 1), f"{where}, start_frame", low=-BLENDER_MAX_FRAME, high=BLENDER_MAX_FRAME)
    if start_frame != int(start_frame):
        raise KinemaError(f"{where}, start_frame: {start_frame:g} is not a whole frame")
    points = data.get("points")
    if not isinstance(points, list) or len(points) < 2:
        raise KinemaError(f"{where}: \"points\" must be a list of at least two points")
    if len(points) > MAX_PATH_POINTS:
        raise KinemaError(f"{where}: {len(points):,} points; at most {MAX_PATH_POINTS:,}")
    poses, moves, vias = [], [], []
    rotation = paths.quaternion_matrix(paths.matrix_quaternion(start_rotation))
    for i, point in enumerate(points):
        at = f"{where}, points[{i}]"
        if not isinstance(point, dict):
            raise KinemaError(f"{at}: expected an object with \"xyz\"")
        unknown = sorted(set(point) - POINT_KEYS)
        if unknown:
            raise KinemaError(f"{at}: unknown key '{unknown[0]}' (known: {', '.join(sorted(POINT_KEYS))})")
        if "xyz" not in point:
            raise KinemaError(f"{at}: \"xyz\" is missing")
        position = _vector(point["xyz"], 3, f"{at}.xyz")
        if "wxyz" in point:
            wxyz = _vector(point["wxyz"], 4, f"{at}.wxyz")
            if np.linalg.norm(wxyz) < 1e-9:
                raise KinemaError(f"{at}.wxyz: the quaternion has zero length")
            rotation = paths.quaternion_matrix(wxyz)
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = rotation, position
        poses.append(pose)
        move = point.get("move", "linear")
        if i == 0:
            if "move" in point or "via" in point:
                raise KinemaError(f"{at}: the first point is where the path starts; it has no move or via")
            continue
        if move not in MOVE_NAMES:
            raise KinemaError(f"{at}.move: '{str(move)[:40]}' is not one of joint, linear, circular")
        move = MOVE_NAMES[move]
        via = None
        if move == "CIRCULAR":
            if "via" not in point:
                raise KinemaError(f"{at}: a circular move needs a \"via\" point")
            via = _vector(point["via"], 3, f"{at}.via")
            if paths.circle(poses[-2][:3, 3], via, position) is None:
                raise KinemaError(f"{at}: the via point is on the line through the move's ends; no circle passes through them")
        elif "via" in point:
            raise KinemaError(f"{at}: only a circular move has a via point")
        moves.append(move)
        vias.append(via)
    legs = path_legs.path_legs(poses, moves, vias, speed, ramp, approach, retract, turn_speed, blend)
    seconds = sum(leg.seconds for leg in legs)
    if seconds * fps > MAX_BAKE_FRAMES:
        raise KinemaError(f"{where}: the path takes {seconds:.1f} s, {seconds * fps:,.0f} frames at {fps:g} fps; "
                          f"a bake spans at most {MAX_BAKE_FRAMES:,}")
    if start_frame + seconds * fps + 1 > BLENDER_MAX_FRAME:
        raise KinemaError(f"{where}: the path ends past Blender's last frame {BLENDER_MAX_FRAME:,}")
    frames, frame_poses = path_legs.path_frames(legs, fps, int(start_frame))
    stacked = np.array(frame_poses)
    wxyz = np.array([paths.matrix_quaternion(p[:3, :3]) for p in stacked])
    track = TargetTrack(frames=frames.astype(int), positions=stacked[:, :3, 3].copy(), wxyz=wxyz, links=None)
    return track, legs


def start_rotation(urdf: str, link: str | None, start: dict[str, float]) -> np.ndarray:
    """The tool's orientation at the pose a bake starts from (what a first point without wxyz keeps)."""
    from ..core.model.kinematics import link_pose
    from ..core.model.loading import load_robot

    robot = load_robot(urdf, check_meshes=False)
    q = robot.configuration(start or {}, base=robot.mid_configuration())
    return link_pose(robot, q, robot.check_link(link or robot.tool_point))[:3, :3]


def tool_axis_freedom(args) -> float:
    """--tool-axis-freedom DEG in radians: 0 .. 180 degrees, and only with --path (the turn is
    chosen along a path's samples; a targets CSV's rows are poses the user set)."""
    from .common import finite_number

    degrees = finite_number(getattr(args, "tool_axis_freedom", 0.0) or 0.0, "--tool-axis-freedom", low=0.0, high=180.0)
    if degrees and not getattr(args, "path", None):
        raise KinemaError("--tool-axis-freedom needs --path: it turns the tool along a path file's samples")
    return math.radians(degrees)


#: The fastest the tool's turn about its axis may change with --tool-axis-freedom (rad/s): 90°/s,
#: under the wrist joints' speed limits of the arms we test (Panda 2.61 rad/s, UR5 3.14), so the
#: turn itself never makes a bake too fast.
TURN_SPEED = math.radians(90.0)


class ReachPreview:
    """Called by bake_track once the tree is built, before the control is keyed and the bake runs:
    with tool-axis freedom, each frame's goal turned about the tool's Z by core/tool_axis.py
    (the track changed in place, so the control is keyed at the turned poses); then the reach
    preview of the goals (core/reach_preview.py), both with the options the bake's Solver will
    use, from the pose the bake starts at, as Preview Reach does in Blender (blender/tool_setup.py)."""

    def __init__(self, track: TargetTrack, freedom: float = 0.0, fps: float = 24.0):
        self.track, self.freedom, self.fps = track, float(freedom), float(fps)
        self.samples = None
        self.turns = None

    def __call__(self, tree, target, rig, robot, link: str) -> None:
        from .. import evaluator
        from ..blender.rig import read_joint_values
        from ..core import reach_preview
        from ..core.model.rotations import pose_matrices

        program = evaluator.program_for(tree)
        step = next((s for s in program.steps if any(t.node == target.name for t in s.targets)), None)
        if step is None:
            return
        options = reach_preview.bake_solve_options(step, robot)
        goals = pose_matrices(self.track.positions, self.track.wxyz)
        start = read_joint_values(rig, robot)
        if self.freedom > 0.0:
            from ..core import tool_axis

            step = TURN_SPEED / self.fps / 2  # two steps a frame at most: the turn at most TURN_SPEED
            choices = tool_axis.choose_turns(robot, link, goals, start, options, self.freedom, step=step, reach=2,
                                             first_step=math.radians(10.0))
            self.turns = np.array([c.angle for c in choices])
            goals = np.array([tool_axis.turned(goal, c.angle) for goal, c in zip(goals, choices)])
            self.track.wxyz[:] = [paths.matrix_quaternion(goal[:3, :3]) for goal in goals]
        self.samples = reach_preview.preview(robot, link, goals, start, options)

    def payload(self) -> dict:
        """The `--json` shape: counts by verdict, the first unreachable frame, and each frame's verdict."""
        from ..core import reach_preview

        if self.samples is None:
            return {}
        frames = [int(f) for f in self.track.frames]
        first = next((f for f, s in zip(frames, self.samples) if s.verdict == "unreachable"), None)
        found = {"reach": {"counts": reach_preview.counts(self.samples), "first_unreachable_frame": first,
                           "verdicts": {str(f): s.verdict for f, s in zip(frames, self.samples)}}}
        if self.turns is not None:
            found["tool_axis_turn_deg"] = [round(float(np.degrees(a)), 6) for a in self.turns]
        return found

    def lines(self) -> list[str]:
        from ..core import reach_preview

        if self.samples is None:
            return []
        counts = reach_preview.counts(self.samples)
        text = ", ".join(f"{counts[v]} {v.replace('_', ' ')}" for v in reach_preview.VERDICTS)
        first = self.payload()["reach"]["first_unreachable_frame"]
        lines = [f"reach preview: {text}" + (f"; first unreachable frame {first}" if first is not None else "")]
        if self.turns is not None:
            lines.append(f"tool turned about its axis: {np.degrees(self.turns.min()):.0f}° .. {np.degrees(self.turns.max()):.0f}°")
        return lines
