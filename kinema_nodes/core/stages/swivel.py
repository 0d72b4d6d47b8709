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

#: Swivel equations are weighted against tool metres/radians: the tool wins a conflict.
SWIVEL_WEIGHT = 0.3
#: A swivel this close to the request (rad) is "reached"; farther is "saturated".
SWIVEL_TOLERANCE = 1e-4
#: Step for the numerical derivative of the swivel angle (rad).
DERIVATIVE_STEP = 1e-6
MAX_STEP = 0.4
MAX_DAMPING = 1e8


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


def _point_chains(robot: RobotModel, links: tuple[str, str, str], free: np.ndarray) -> list:
    """Fast FK chains of the shoulder, elbow and wrist links with selectors from chain columns to
    the free variables (cached on the robot per links and free set)."""
    from ..solve import TargetChain

    cache = robot.cache("swivel_chains")
    key = (links, tuple(int(i) for i in free))
    if key not in cache:
        position = {int(j): c for c, j in enumerate(free)}
        entries = []
        for link in links:
            chain = TargetChain(robot, link)
            selector = np.zeros((chain.count, len(free)))
            for row, source in enumerate(chain.sources):
                if int(source) in position:
                    selector[row, position[int(source)]] = 1.0
            entries.append((chain, selector))
        cache[key] = entries
    return cache[key]


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
             swivel: tuple | None = None, stall_window: int | None = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Damped least squares from every row of q (B, n) side by side, each row until it converges
    or stalls (no halving of its cost in `stall_window` iterations; None: never). `swivel` = (robot, links(shoulder, elbow, wrist), target angles (B,)) adds the
    swivel equation. Returns (q, errors (B, T, 2), swivel residual (B,) or zeros)."""
    q = np.array(q, dtype=float)
    free = problem.free
    lower, upper = problem.lower, problem.upper
    scale = np.repeat(targets.weights, 3, axis=1).reshape(-1)
    batch, k = q.shape[0], len(free)
    q[:, free] = np.clip(q[:, free], lower, upper)

    def evaluate(qs, wanted):
        errors, residual, jac = problem.residual(qs, targets.rotations, targets.positions)
        residual = residual * scale
        jac = jac * scale[:, None]
        swivel_residual = np.zeros(len(qs))
        if swivel is not None:
            robot, links, _ = swivel
            # Points and their Jacobians (fast chain FK), then the angle at q and at q + h e_i for
            # every free joint i from the linearised points: a derivative without k more FK passes.
            points = []
            for chain, selector in _point_chains(robot, links, free):
                tip, chain_jac = chain.evaluate(qs)
                position = tip[:, :3, 3]
                moved = position[:, None, :] + DERIVATIVE_STEP * np.swapaxes(chain_jac[:, :3, :] @ selector, 1, 2)
                points.append(np.concatenate([position[:, None, :], moved], axis=1))  # (B, k + 1, 3)
            shoulder, elbow, wrist = points
            axis = wrist - shoulder
            axis /= np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-12)
            offset = elbow - shoulder
            offset -= np.sum(offset * axis, axis=-1, keepdims=True) * axis
            ref, partner = reference_directions(axis)
            angles = np.arctan2(np.sum(offset * partner, -1), np.sum(offset * ref, -1)).reshape(len(qs), k + 1)
            swivel_residual = wrap(wanted - angles[:, 0])
            derivative = wrap(angles[:, 1:] - angles[:, :1]) / DERIVATIVE_STEP
            residual = np.concatenate([residual, SWIVEL_WEIGHT * swivel_residual[:, None]], axis=1)
            jac = np.concatenate([jac, SWIVEL_WEIGHT * derivative[:, None, :]], axis=1)
        return errors, residual, jac, swivel_residual

    def finished(errors, swivel_residual):
        ok = np.all((errors <= np.array([tol_p, tol_r])) | (targets.weights == 0), axis=(-2, -1))
        if swivel is not None:
            ok &= np.abs(swivel_residual) <= SWIVEL_TOLERANCE * 0.1
        return ok

    wanted_all = np.asarray(swivel[2], dtype=float) if swivel is not None else None
    errors, residual, jac, swivel_residual = evaluate(q, wanted_all)
    cost = np.sum(residual ** 2, axis=1)
    damping = np.full(batch, 1e-3)
    done = finished(errors, swivel_residual)
    checkpoint = cost.copy()
    eye = np.eye(k)
    for iteration in range(1, iterations + 1):
        active = np.flatnonzero(~done)
        if not len(active) or not k:
            break
        x = q[active][:, free]
        j, r = jac[active], residual[active]
        jt = np.swapaxes(j, 1, 2)
        jtj = jt @ j
        g = (jt @ r[..., None])[..., 0]
        step = np.linalg.solve(jtj + damping[active, None, None] * eye, g[..., None])[..., 0]
        blocked = ((x <= lower) & (step < 0)) | ((x >= upper) & (step > 0))
        if blocked.any():
            keep = (~blocked).astype(float)
            masked = jtj * keep[:, :, None] * keep[:, None, :]
            step = np.linalg.solve(masked + damping[active, None, None] * eye, (g * keep)[..., None])[..., 0] * keep
        biggest = np.max(np.abs(step), axis=1)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(biggest, 1e-300))[:, None]
        trial = q[active].copy()
        trial[:, free] = np.clip(x + step, lower, upper)
        t_errors, t_residual, t_jac, t_swivel = evaluate(trial, None if wanted_all is None else wanted_all[active])
        t_cost = np.sum(t_residual ** 2, axis=1)
        better = t_cost < cost[active]
        rows = active[better]
        q[rows], errors[rows], residual[rows], jac[rows] = trial[better], t_errors[better], t_residual[better], t_jac[better]
        cost[rows], swivel_residual[rows] = t_cost[better], t_swivel[better]
        damping[active] = np.where(better, np.maximum(damping[active] * 0.2, 1e-12), damping[active] * 10.0)
        done |= finished(errors, swivel_residual) | (damping >= MAX_DAMPING)
        if stall_window and iteration % stall_window == 0:
            done |= (cost > 0.5 * checkpoint) & (cost > 1e-14)
            checkpoint = cost.copy()
    return q, errors, swivel_residual


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
    from dataclasses import replace

    result = solve(robot, targets, q[0], replace(options, backend="numpy", cold=False))
    joints = result.joints
    if not result.converged:
        fallback = solve(robot, targets, start, replace(options, backend="numpy", cold=False))
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
