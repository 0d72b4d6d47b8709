"""A carried object as part of the robot's collision model (#30 item 5: "while carried, the object
joins the robot's collision model for Avoid Collisions").

While a grasp holds an object, the object is rigid with the link that holds it, so it is one more
set of capsules on that link: its pose in the link's frame is the grasp's offset, fixed for the
whole grasp. It is fitted as a robot link is (`robot_capsules`): its mesh cut into convex pieces,
capsules around each piece, and the pieces themselves kept for the near pairs, so a box is
measured as the box it is, not as the fatter capsule around it.

What it is checked against: the world (when the solve avoids one), and the robot's own links
(when it avoids itself) except those it is meant to touch: the holding link, the links rigid with
it (a tool point and its hand), and the gripper (its hand and everything a gripper joint moves),
as MoveIt's "touch links" of an attached object.

The carried pieces are added to the holding link's pieces, so a near pair is measured on the
union of the link's and the object's pieces: the smaller gap, a lower bound of both the link's
and the object's own distance, so every row stays a lower bound of the meshes' distance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .capsule_fit import _hull_points, convex_pieces, fit_capsules
from .collision_model import CollisionModel

if TYPE_CHECKING:
    from ..model.robot import RobotModel


@dataclass(frozen=True)
class CarriedObject:
    """An object held by `link`: capsules ((a, b, r), ...) and convex pieces (each a tuple of
    points) in that link's frame, and the name the readouts give it. Plain tuples, so it hashes:
    a grasp that holds the same object the same way is the same key frame after frame."""

    link: str
    capsules: tuple
    pieces: tuple
    name: str = "carried object"


def carried_object(link: str, vertices: np.ndarray, faces: np.ndarray | None, offset: np.ndarray,
                   name: str = "carried object") -> CarriedObject:
    """The object whose mesh is `vertices` (V, 3) and `faces` (F, 3) in its own frame, held by
    `link` with `offset` (4x4: the object's frame in the link's, scale included) as
    a `CarriedObject` in that link's frame."""
    vertices = np.asarray(vertices, dtype=float).reshape(-1, 3)
    offset = np.asarray(offset, dtype=float)
    in_link = vertices @ offset[:3, :3].T + offset[:3, 3]
    faces = None if faces is None else np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    pieces = convex_pieces(in_link, faces) if faces is not None and len(faces) else [_hull_points(in_link)]
    capsules = tuple((tuple(map(float, a)), tuple(map(float, b)), float(r)) for piece in pieces for a, b, r in fit_capsules(piece))
    return CarriedObject(link, capsules, tuple(tuple(tuple(map(float, p)) for p in piece) for piece in pieces), name)


def touch_links(robot: RobotModel, link: str) -> frozenset[str]:
    """The links a carried object held by `link` may touch: that link, the links rigid with it
    (joined by fixed joints, either way), and its gripper (the one whose hand is rigid with the
    link or above it): that hand and the links its gripper joints move. Another gripper (a dual
    arm's other hand) is checked like any link."""
    from ..gripper import gripper_hands

    rigid = {link}
    changed = True
    while changed:
        changed = False
        for joint in robot.joints:
            if joint.is_movable:
                continue
            if joint.parent in rigid and joint.child not in rigid:
                rigid.add(joint.child)
                changed = True
            elif joint.child in rigid and joint.parent not in rigid:
                rigid.add(joint.parent)
                changed = True
    above = set()  # the link and every link above it
    walk = link
    while True:
        above.add(walk)
        joint = robot.joint_of_child.get(walk)
        if joint is None:
            break
        walk = joint.parent
    # its own gripper only: a dual arm's other hand can still hit what this one carries
    own = [(hand, joints) for hand, joints in gripper_hands(robot) if hand in rigid or hand in above]
    held = {name for _, joints in own for name in joints}
    moved = set()
    for joint in robot.joints:  # tree order: a parent is placed before its child
        source = joint.mimic.joint if joint.mimic else joint.name
        if (joint.is_movable and source in held) or joint.parent in moved:
            moved.add(joint.child)
    return frozenset(rigid | moved | {hand for hand, _ in own})


def with_carried(robot: RobotModel, model: CollisionModel, carried: tuple) -> CollisionModel:
    """`model` with each carried object's capsules on its holding link, their pairs with the
    robot's other links (not its touch links) added to the self pairs, and their pieces added to
    the holding link's pieces. The robot's own rows keep their order: the carried rows come after."""
    if not carried:
        return model
    links, labels = list(model.links), list(model.labels or model.links)
    a, b, radius = [model.a], [model.b], [model.radius]
    moving = [model.moving]
    moved = {name for name, m in zip(model.links, model.moving) if m}
    extra_pieces: dict[str, list[np.ndarray]] = {}
    pairs = [model.self_pairs]
    robot_count = len(model.links)
    for item in carried:
        robot.check_link(item.link)
        first = len(links)
        for ca, cb, cr in item.capsules:
            links.append(item.link)
            labels.append(item.name)
            a.append(np.asarray(ca, dtype=float)[None])
            b.append(np.asarray(cb, dtype=float)[None])
            radius.append(np.array([cr], dtype=float))
        link_moves = item.link in moved or _moved(robot, item.link)
        moving.append(np.full(len(item.capsules), link_moves, dtype=bool))
        touching = touch_links(robot, item.link)
        new = [(c, j) for c in range(first, len(links)) for j in range(robot_count) if model.links[j] not in touching]
        if new:
            pairs.append(np.array(new, dtype=np.int64))
        extra_pieces.setdefault(item.link, []).extend(np.asarray(p, dtype=float).reshape(-1, 3) for p in item.pieces)
    hull, piece_start, link_pieces = [], [0], [0]
    for index, link in enumerate(robot.links):
        own = range(int(model.link_pieces[index]), int(model.link_pieces[index + 1]))
        for p in own:
            piece = model.hull_local[model.piece_start[p]:model.piece_start[p + 1]]
            hull.append(piece)
            piece_start.append(piece_start[-1] + len(piece))
        for piece in extra_pieces.get(link, ()):
            hull.append(piece)
            piece_start.append(piece_start[-1] + len(piece))
        link_pieces.append(len(piece_start) - 1)
    return CollisionModel(tuple(links), np.concatenate(a), np.concatenate(b), np.concatenate(radius),
                          np.concatenate(pairs).reshape(-1, 2), model.allowed, model.allowed_source, np.concatenate(moving),
                          model.geometry_source, (np.concatenate(hull) if hull else np.zeros((0, 3))).reshape(-1, 3),
                          np.array(piece_start, dtype=np.int64), np.array(link_pieces, dtype=np.int64), tuple(labels))


def _moved(robot: RobotModel, link: str) -> bool:
    """Whether some joint moves `link` (a link of the model without capsules of its own)."""
    while link in robot.joint_of_child:
        joint = robot.joint_of_child[link]
        if joint.is_movable:
            return True
        link = joint.parent
    return False
