"""The gripper value: one number from 0 (open) to 1 (closed) that an animator keys, mapped to
the joints of the robot's gripper (#30 item 6). Plain NumPy, no bpy.

Which joints: `RobotModel.gripper_joints`, the joints every solver already holds, so the IK
never moves what this value sets. Mimic joints are not in a configuration: they follow their
source joint, so setting the source moves both fingers of a parallel gripper.

Which end is closed: fingers close towards their zero in the robot files we ship against (the
Panda's slides close at 0 m, the Z1's and SO-101's jaws at 0 rad), so the limit nearer zero is
"closed" and the other "open". A joint whose range has zero at its middle (or no finite range)
is not mapped: there is no honest guess, and the animator keeps moving it by hand.
"""

from __future__ import annotations

import numpy as np

from .model.robot import RobotModel


def gripper_ends(robot: RobotModel) -> dict[str, tuple[float, float]]:
    """Gripper joint name -> (open value, closed value), both within the joint's limits."""
    ends = {}
    for name in sorted(robot.gripper_joints):
        i = robot.joint_index(name)
        lower, upper = float(robot.lower[i]), float(robot.upper[i])
        if not (np.isfinite(lower) and np.isfinite(upper)) or upper <= lower:
            continue
        if abs(lower) < abs(upper):
            ends[name] = (upper, lower)
        elif abs(upper) < abs(lower):
            ends[name] = (lower, upper)
    return ends


def gripper_hands(robot: RobotModel) -> list[tuple[str, list[str]]]:
    """The robot's grippers, one per hand: (the link the gripper hangs from, its mapped joints),
    sorted by that link's name (a dual arm's left before its right, as their names usually go).
    The hand is the parent link of the first joint on the way down that a gripper joint moves."""
    ends = gripper_ends(robot)
    hands: dict[str, list[str]] = {}
    for name in ends:
        joint = next(j for j in robot.joints if j.name == name)
        link = joint.parent
        while link in robot.joint_of_child:
            above = robot.joint_of_child[link]
            source = above.mimic.joint if above.mimic else above.name
            if source not in ends:
                break
            link = above.parent
        hands.setdefault(link, []).append(name)
    return sorted((hand, sorted(names)) for hand, names in hands.items())


def gripper_configuration(robot: RobotModel, value, q: np.ndarray) -> np.ndarray:
    """`q` with every mapped gripper joint set for `value` (clamped to 0..1): a straight blend
    from its open to its closed value, so it never leaves its limits. `value` is one number for
    every gripper, or one per gripper in `gripper_hands` order (missing ones: open)."""
    values = np.atleast_1d(np.asarray(value, dtype=float))
    hands = gripper_hands(robot)
    per_joint = {}
    for k, (_, names) in enumerate(hands):
        v = values[0] if values.size == 1 else (values[k] if k < values.size else 0.0)
        for name in names:
            per_joint[name] = float(np.clip(v, 0.0, 1.0)) if np.isfinite(v) else 0.0
    out = np.array(q, dtype=float).copy()
    for name, (opened, closed) in gripper_ends(robot).items():
        t = per_joint[name]
        # clipped: the blend's rounding may land 1 ulp past a limit (the SO-101's jaw at t = 1)
        out[robot.joint_index(name)] = np.clip(opened + t * (closed - opened), min(opened, closed), max(opened, closed))
    return out


def gripper_value(robot: RobotModel, q: np.ndarray) -> float | None:
    """The 0..1 value that `q`'s gripper joints show (their mean), None without a gripper."""
    ends = gripper_ends(robot)
    if not ends:
        return None
    values = [(q[robot.joint_index(n)] - o) / (c - o) for n, (o, c) in ends.items()]
    return float(np.clip(np.mean(values), 0.0, 1.0))


def gripper_hand(robot: RobotModel, link: str) -> str:
    """The gripper hand (as `gripper_hands` names it) that `link` is, or hangs below (its nearest
    such ancestor): a preset names a Gripper's hand by role (a dual arm's left_hand is Baxter's
    left_gripper frame, PR2's l_gripper_tool_frame), a link under the one the fingers hang from.
    `link` itself when none is (or "" for every gripper)."""
    hands = {name for name, _ in gripper_hands(robot)}
    found = link
    while found and found not in hands and found in robot.joint_of_child:
        found = robot.joint_of_child[found].parent
    return found if found in hands else link


def set_gripper(robot: RobotModel, q: np.ndarray, value: float, hand: str = "") -> np.ndarray:
    """`q` with one gripper set for `value` (0 open .. 1 closed; `hand` is the link it hangs from,
    as `gripper_hands` names it), every other gripper left as it is; `hand` "" sets them all.
    What the Gripper node does after the solver: the same blend as the panel's slider."""
    hands = gripper_hands(robot)
    hand = gripper_hand(robot, hand)
    if hand and hand not in {name for name, _ in hands}:
        raise ValueError(f"'{hand}' holds no gripper of robot '{robot.name}' (grippers: {', '.join(h for h, _ in hands) or 'none'})")
    out = np.array(q, dtype=float).copy()
    for k, (name, joints) in enumerate(hands):
        if hand and name != hand:
            continue
        values = np.zeros(len(hands))
        values[k] = value
        blended = gripper_configuration(robot, values, out)
        for joint in joints:
            i = robot.joint_index(joint)
            out[i] = blended[i]
    return out


#: Halvings of the gripper value when closing on an object: the fingers stop within
#: 2**-CONTACT_HALVINGS of their travel from the contact (a Panda's 4 cm: 0.6 um).
CONTACT_HALVINGS = 16


def _hulls_meet(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the convex hulls of point sets `a` (N, 3) and `b` (M, 3) share a point: a point
    that is a convex combination of both (a linear feasibility problem)."""
    from scipy.optimize import linprog

    if np.any(a.min(axis=0) > b.max(axis=0)) or np.any(b.min(axis=0) > a.max(axis=0)):
        return False  # apart along an axis: no linear programme needed (most pairs, most steps)
    n, m = len(a), len(b)
    equal = np.zeros((5, n + m))
    equal[0, :n] = 1.0
    equal[1, n:] = 1.0
    equal[2:, :n] = a.T
    equal[2:, n:] = -b.T
    result = linprog(np.zeros(n + m), A_eq=equal, b_eq=np.array([1.0, 1.0, 0.0, 0.0, 0.0]), bounds=(0, None), method="highs")
    return result.status == 0


def close_on(robot: RobotModel, q: np.ndarray, value: float, hand: str, carried) -> float:
    """The gripper value at most `value` at which the fingers of `hand` ("" = every gripper) stop
    on the carried objects (`core.collision.CarriedObject`s, their convex pieces in their
    holding link's frame): `value` itself when they close that far without meeting one, else
    the largest value before they meet (bisection, `CONTACT_HALVINGS`), so a gripper keyed
    closed holds the object at its sides instead of passing into it. The fingers are their
    links' convex pieces (`collision_model`), the links a gripper joint of that hand moves.
    Cost: one forward kinematics per halving, and a linear programme only for the pieces whose
    bounding boxes overlap (about 0.1 s a frame where a Panda's fingers stop on a box; nothing
    beyond one check where they close freely)."""
    from .collision import collision_model
    from .model.kinematics import link_pose

    value = float(np.clip(value, 0.0, 1.0))
    hand = gripper_hand(robot, hand)
    hands = [(name, joints) for name, joints in gripper_hands(robot) if not hand or name == hand]
    held = {joint for _, joints in hands for joint in joints}
    fingers = set()
    for joint in robot.joints:  # tree order
        source = joint.mimic.joint if joint.mimic else joint.name
        if (joint.is_movable and source in held) or joint.parent in fingers:
            fingers.add(joint.child)
    model = collision_model(robot)
    finger_pieces = []
    for link in sorted(fingers):
        index = robot.links.index(link)
        for p in range(int(model.link_pieces[index]), int(model.link_pieces[index + 1])):
            finger_pieces.append((link, model.hull_local[model.piece_start[p]:model.piece_start[p + 1]]))
    objects = [(item.link, np.asarray(piece, dtype=float)) for item in carried for piece in item.pieces]
    if not finger_pieces or not objects:
        return value

    def meets(t: float) -> bool:
        posed = set_gripper(robot, q, t, hand)
        poses = {link: link_pose(robot, posed, link) for link in {f for f, _ in finger_pieces} | {o for o, _ in objects}}
        placed = [points @ poses[o][:3, :3].T + poses[o][:3, 3] for o, points in objects]
        return any(_hulls_meet(points @ poses[f][:3, :3].T + poses[f][:3, 3], other)
                   for f, points in finger_pieces for other in placed)

    if not meets(value):
        return value
    low, high = 0.0, value  # open at `low` (checked below), meeting at `high`
    if meets(low):
        return low  # already in the object when open: nothing to stop on
    for _ in range(CONTACT_HALVINGS):
        middle = 0.5 * (low + high)
        if meets(middle):
            high = middle
        else:
            low = middle
    return low
