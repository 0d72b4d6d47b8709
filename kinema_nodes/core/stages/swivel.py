"""Elbow swivel of redundant arms: swing the elbow round the shoulder-to-wrist line while the
tool holds its pose (the equivalent of the pole target of Blender's IK constraint).

An arm with a spare joint (seven or more free arm joints in the chain to the target link:
revolute joints below the torso, gripper joints not counted; see `core.roles.arm_joints`)
reaches one tool pose along a one-parameter family of configurations. We name the member by
the *swivel angle*: the angle of the elbow about the line from the shoulder to the wrist (the
roles of `core.roles.limb_roles`: arm joints 2, 4 and 6, root to tip), measured from the plane that contains that line
and the robot's vertical (root +Z; root +X when the line itself is vertical), right-handed
about the shoulder-to-wrist direction. 0 puts the elbow "up", like a pole target above the arm.

Setting an angle re-solves the tool target together with one extra equation (swivel = angle),
seven equations in seven unknowns, by damped least squares in one batch; a final tool-only
pass then holds the tool to the solver's tolerance. Where a joint limit stops the swing the
arm stays at the nearest angle it can reach and the note says the angle saturated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.kinematics import link_pose
from ..model.robot import RobotModel
from ..roles import arm_joints, limb_roles

#: A swivel this close to the request (rad) is "reached"; farther is "saturated".
SWIVEL_TOLERANCE = 1e-4


def _free_revolute_joints(robot: RobotModel, link: str, held=frozenset()) -> list[str]:
    """The free arm joints of the chain to `link` (no torso, gripper, slide or held joint)."""
    return [joint.name for joint in arm_joints(robot, link, held)]


def has_spare_joint(robot: RobotModel, link: str, held=frozenset()) -> bool:
    """True when the arm that moves `link`, without its gripper, has at least seven free
    revolute joints (an elbow that can swing)."""
    return len(_free_revolute_joints(robot, link, held)) >= 7


def swivel_links(robot: RobotModel, link: str, held=frozenset()) -> tuple[str, str, str]:
    """(shoulder, elbow, wrist) links, the roles of the arm that moves `link`: the links of its
    2nd, 4th and 6th arm joints, whose origins are the joint centres."""
    joints = _free_revolute_joints(robot, link, held)
    if len(joints) < 7:
        raise ValueError(f"the arm that moves '{link}' has {len(joints)} free revolute joints; the elbow swivel needs 7")
    roles = limb_roles(robot, link, held)
    return roles["shoulder"], roles["elbow"], roles["wrist"]


def _points(robot: RobotModel, links: tuple[str, str, str], q: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(link_pose(robot, q, name)[..., :3, 3] for name in links)


def reference_directions(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `axis` (B, 3): the zero direction (perpendicular to it) and its right-handed partner."""
    up = np.broadcast_to(np.array([0.0, 0.0, 1.0]), axis.shape)
    ref = up - np.sum(up * axis, axis=-1, keepdims=True) * axis
    vertical = np.linalg.norm(ref, axis=-1) < 0.1
    if np.any(vertical):
        x = np.broadcast_to(np.array([1.0, 0.0, 0.0]), axis.shape)
        alt = x - np.sum(x * axis, axis=-1, keepdims=True) * axis
        ref = np.where(vertical[..., None], alt, ref)
    ref = ref / np.linalg.norm(ref, axis=-1, keepdims=True)
    return ref, np.cross(axis, ref)


def swivel_geometry(robot: RobotModel, link: str, q: np.ndarray, held=frozenset()) -> dict:
    """Shoulder, elbow and wrist points, the unit shoulder-to-wrist axis, and the swivel angle
    (for one configuration (n,) or a batch (B, n))."""
    shoulder, elbow, wrist = _points(robot, swivel_links(robot, link, held), q)
    axis = wrist - shoulder
    axis = axis / np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-12)
    offset = elbow - shoulder
    offset = offset - np.sum(offset * axis, axis=-1, keepdims=True) * axis
    ref, partner = reference_directions(axis)
    angle = np.arctan2(np.sum(offset * partner, axis=-1), np.sum(offset * ref, axis=-1))
    return {"shoulder": shoulder, "elbow": elbow, "wrist": wrist, "axis": axis, "angle": angle}


def swivel_angle(robot: RobotModel, link: str, q: np.ndarray, held=frozenset()) -> float | np.ndarray:
    """The swivel angle (rad, in (-pi, pi]) of configuration(s) q."""
    return swivel_geometry(robot, link, q, held)["angle"]


def wrap(angle):
    return (np.asarray(angle) + np.pi) % (2 * np.pi) - np.pi


def lm_batch(problem, q: np.ndarray, targets, tol_p: float, tol_r: float, iterations: int,
             swivel: tuple | None = None, stall_window: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Damped least squares from every row of q (B, n), each row until it converges or stalls:
    the solver's own kernel (`core.solve.descend_batch`, the one LM loop of the product).
    `swivel` = (robot, links (shoulder, elbow, wrist), target angles (B,)) adds the swivel
    equation, weighted below the tool so the tool wins a conflict. Returns (q, errors (B, T, 2),
    swivel residual (B,) or zeros)."""
    from ..solve import descend_batch

    links = wanted = None
    if swivel is not None:
        _, links, wanted = swivel
    kwargs = {} if stall_window is None else {"stall_window": stall_window}
    q, errors, residual, _, _ = descend_batch(problem, q, targets, tol_p, tol_r, iterations, swivel_links=links,
                                              swivel=wanted, **kwargs)
    return q, errors, residual


@dataclass
class SwivelResult:
    joints: np.ndarray
    angle: float  # the swivel angle reached (rad)
    requested: float
    saturated: bool
    position_error: float
    rotation_error: float
    note: str


def set_swivel(robot: RobotModel, targets, start: np.ndarray, angle: float, options, link: str | None = None) -> SwivelResult:
    """Joint values that keep `targets` and put the elbow at swivel `angle` (rad), seeded from
    `start` (a configuration that already reaches the targets, ideally). Never raises for a
    swivel that limits forbid: the arm goes as far as it can and `saturated` says so."""
    from ..solve import check_targets, problem_for, solve

    arrays = check_targets(robot, targets)
    link = link or arrays.links[0]
    held = frozenset(options.held_joints)
    links = swivel_links(robot, link, held)
    problem = problem_for(robot, arrays.links, held)
    start = np.asarray(start, dtype=float)
    q, _, _ = lm_batch(problem, start[None], arrays, options.position_tolerance, options.rotation_tolerance,
                       max(60, int(options.max_iterations)), (robot, links, np.array([float(angle)])))
    # The tool has the last word: a tool-only pass from the swivelled pose (it barely moves it
    # when the swivel was reachable, and slides back onto the tool pose when a limit cut it short).
    # Neither pass searches the joint ranges on a miss (search_share 0): both start beside the
    # Solver's answer, which searched already, and a search here could only find another branch
    # (with the tool out of reach it ran twice more every frame: Baxter dragged 0.6 m out, 50 ms
    # an update against 14 without the swivel).
    from dataclasses import replace

    tool_only = replace(options, backend="numpy", cold=False)
    result = solve(robot, targets, q[0], tool_only, search_share=0.0)
    joints = result.joints
    if not result.converged:
        fallback = solve(robot, targets, start, tool_only, search_share=0.0)
        if fallback.position_error + fallback.rotation_error < result.position_error + result.rotation_error:
            result, joints = fallback, fallback.joints
    reached = float(swivel_angle(robot, link, joints, held))
    miss = float(abs(wrap(float(angle) - reached)))
    saturated = miss > max(SWIVEL_TOLERANCE, 1e-3)
    if saturated:
        at_limit = [n for n in _free_revolute_joints(robot, link, held)
                    if _at_limit(robot, n, joints[robot.joint_index(n)])]
        why = f": {', '.join(at_limit)} near a limit" if at_limit else ""
        note = f"swivel saturated at {np.degrees(reached):.1f}° of {np.degrees(wrap(angle)):.1f}° (joint limits{why})"
    else:
        note = f"swivel {np.degrees(reached):.1f}°"
    return SwivelResult(joints, reached, float(angle), saturated, result.position_error, result.rotation_error, note)


def _at_limit(robot: RobotModel, name: str, value: float) -> bool:
    i = robot.joint_index(name)
    lower, upper = robot.lower[i], robot.upper[i]
    return bool(np.isfinite(lower) and (value <= lower + 0.02 or value >= upper - 0.02))


def apply_stage(stage) -> tuple[np.ndarray, str]:
    """Swivel node after the solver: values["swivel_angle"] (rad) sets the elbow."""
    robot = stage.robot
    held = frozenset(stage.options.held_joints)
    link = next((g.link for g in stage.goals if has_spare_joint(robot, g.link, held)), None)
    if link is None:
        return stage.joints, "no spare joint in this chain: the swivel does nothing"
    angle = float(stage.values.get("swivel_angle", 0.0))
    result = set_swivel(robot, stage.goals, stage.joints, angle, stage.options, link)
    return result.joints, result.note
