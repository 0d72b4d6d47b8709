"""Freedom about the tool axis: the solver may turn the tool about its own Z axis, within a range,
choosing per sample the turn that keeps the joints furthest from their limits and from
singularities, continuous along the path.

Why: a weld, a glue bead or a drill does not care how the tool is turned about its own axis, and
fixing that turn is what drives a wrist into its limit on a long twisting path (RoboDK offers
±180° for the same reason). The turn is chosen one sample after another, warm-started from the
sample before, among turns a few steps either side of the turn before (so it never jumps), and
an answer whose joints step further than `max_joint_step` from the sample before is refused (a
flip of branch is not a continuous motion). Pure NumPy, no Blender: the CLI's `--tool-axis-freedom`
turns the goals with it before the bake, and the bake then follows the turned goals; the Tool
node's Turn About Axis (Follow Path) takes `turn_profile` along its path once and each frame
the turn at its distance (blender/path_moves.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The largest joint step between two samples that still counts as continuous (rad or m).
MAX_JOINT_STEP = 0.5


def turned(goal: np.ndarray, angle: float) -> np.ndarray:
    """`goal` (a 4x4 pose) turned by `angle` rad about its own Z axis (its position unchanged)."""
    c, s = np.cos(angle), np.sin(angle)
    turn = np.eye(4)
    turn[:2, :2] = [[c, -s], [s, c]]
    return np.asarray(goal, dtype=float) @ turn


@dataclass
class TurnChoice:
    angle: float  # rad about the tool's Z, from the goal as given
    joints: np.ndarray
    converged: bool
    verdict: str


def _clearance(judge, q: np.ndarray) -> float:
    """How far the joints are from their limits (the nearest bounded moving joint's distance as a
    share of its range, 0..0.5) plus how far from a singularity (the Jacobian's smallest singular
    value, scaled to about 0..0.5 for an arm of a metre's reach): bigger is better."""
    from .model.kinematics import jacobian

    robot = judge.robot
    bounded = judge.bounded & judge.active
    span = np.where(bounded, robot.upper - robot.lower, 1.0)
    near = np.minimum(q - robot.lower, robot.upper - q) / span
    limits = float(np.min(near[bounded])) if bounded.any() else 0.5
    j = jacobian(robot, q, judge.link)[:, judge.active]
    smallest = float(np.linalg.svd(j, compute_uv=False)[-1]) if j.size else 0.0
    return limits + 0.5 * min(smallest, 1.0)


def choose_turns(robot, link: str, goals, start: np.ndarray, options, turn_range: float, step: float = np.radians(10.0),
                 reach: int = 2, max_joint_step: float = MAX_JOINT_STEP, first_step: float | None = None,
                 offset: np.ndarray | None = None) -> list[TurnChoice]:
    """For each goal (a 4x4 pose of `link` in the root frame), the turn about its Z within
    ±`turn_range` rad that keeps the joints furthest from limits and singularities: the turns
    tried are the turn before plus k `step`s, |k| <= `reach` (all of -range..range by `step` at
    the first sample, by `first_step` when given), each solved from the sample before's joints, so
    the turn changes by at most `reach` steps a sample (a bake sets the step from its frame rate,
    so the turn's speed stays under the wrist's); verdicts as the reach preview
    gives them (core/reach_preview.Judge). A turn whose answer does not converge, is judged near
    a limit, or steps a joint more than `max_joint_step` is taken only when no turn does better.
    With `offset` (a Tool's tool centre point in `link`'s frame), the goals are the tool centre
    point's poses, turned about its own Z, and `link` is solved to where that puts it."""
    from .graph.program import pose_to_target
    from .reach_preview import VERDICTS, Judge
    from .solve import prepare

    judge = Judge(robot, link, frozenset(options.held_joints))
    prepared = prepare(robot, [link], options)  # the bake's every-frame solve: the checks done once
    turn_range = float(max(turn_range, 0.0))

    def run(first_angles) -> tuple[list[TurnChoice], int]:
        current = np.asarray(start, dtype=float)
        previous_angle = 0.0
        choices: list[TurnChoice] = []
        faults = 0
        for index, goal in enumerate(goals):
            if turn_range <= 0.0:
                angles = [0.0]
            elif index == 0:
                angles = first_angles
            else:
                angles = [previous_angle + k * step for k in range(-reach, reach + 1)]
                angles = [a for a in angles if abs(a) <= turn_range + 1e-12] or [previous_angle]
            best, best_key = None, None
            for angle in angles:
                aimed = turned(goal, angle)
                position, wxyz = pose_to_target(aimed if offset is None else aimed @ np.linalg.inv(offset))
                result = prepared.solve(np.asarray([position], dtype=float), np.asarray([wxyz], dtype=float), current)
                q = np.asarray(result.joints, dtype=float)
                verdict, _ = judge(q, bool(result.converged))
                jump = float(np.max(np.abs(q - current))) if index else 0.0
                smooth = jump <= max_joint_step
                # worst first: a refused step, then the verdict, then clearance; ties go to the smaller turn change
                key = (smooth, -VERDICTS.index(verdict), _clearance(judge, q) if verdict != "unreachable" else 0.0,
                       -abs(angle - previous_angle))
                if best_key is None or key > best_key:
                    best, best_key = TurnChoice(float(angle), q, bool(result.converged), verdict), key
            faults += not (best_key[0] and best.verdict == "reachable")
            choices.append(best)
            current, previous_angle = best.joints, best.angle
        return choices, faults

    if turn_range <= 0.0:
        return run([0.0])[0]
    coarse = first_step or step
    count = int(np.floor(turn_range / coarse + 1e-9))
    choices, faults = run([k * coarse for k in range(-count, count + 1)])
    # The turn chosen sample by sample cannot see ahead: a path that twists the tool further than
    # a wrist joint's range in all (a blade round a whole circle) needs the turn to start at one
    # end of its range so as to sweep to the other. When the first pass leaves faults, passes that
    # start at each eighth of the range are tried, and the one with the fewest faults is kept.
    for first in np.linspace(-turn_range, turn_range, 9):
        if not faults:
            break
        tried, tried_faults = run([float(first)])
        if tried_faults < faults:
            choices, faults = tried, tried_faults
    return choices


def turn_profile(robot, link: str, path, rotation: np.ndarray, orientation: str, start: np.ndarray, options,
                 turn_range: float, offset: np.ndarray | None = None, spacing: float = 0.005,
                 most: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """(distances along `path`, the turn at each) for a Follow Path (core/paths.PolylinePath,
    the tool's orientation from `rotation` and `orientation` as paths.follow_pose gives it):
    choose_turns over samples `spacing` apart (at most `most`), from the path's start to its end.

    Why along the path and not frame by frame: a frame's turn must not depend on the frames
    played before it (scrubbing and baking give the same poses), yet the turn must be continuous;
    chosen once from the start to the end of the path, it is both, and a frame takes the turn at
    its distance (np.interp between samples). Each sample's turn changes by at most two 5° steps
    from the one before."""
    from .paths import follow_pose

    count = int(min(max(np.ceil(path.length / spacing), 1), most - 1)) + 1
    distances = np.linspace(0.0, path.length, count)
    goals = [follow_pose(path, d, rotation, orientation) for d in distances]
    choices = choose_turns(robot, link, goals, start, options, turn_range, step=np.radians(5.0), reach=2,
                           first_step=np.radians(10.0), offset=offset)
    return distances, np.array([c.angle for c in choices])
