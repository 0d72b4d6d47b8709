"""Roles: names for the parts of a robot that a preset can refer to on any robot.

A preset says "aim the *tool point* at this control" or "swing the *elbow*", never
"panda_hand_tcp" or "link4"; binding the preset to a robot looks each role up here. Roles are
inferred from the robot's structure, and the user can set any of them by hand on the Robot
node (an override always wins).

The rules (one robot, its `RobotModel`):

- **tool point** — `RobotModel.tool_point` (a link named tcp/tool/ee/flange, else the tip of
  the longest chain). The *main chain* is the chain from the root to the tool point.
- **rail** — the main chain's first movable joint is prismatic (a slide under the arm): the
  link it moves (the carriage). `rail_joint` gives the joint itself.
- **arm joints** — the revolute (and continuous) joints of the main chain, root to tip, below
  its last *branch point* (a link whose children lead to two or more subtrees with movable
  joints: the torso of a humanoid, the body of a dual-arm robot), not counting slides and
  gripper joints (`RobotModel.gripper_joints`: a jaw in the chain is not an arm joint).
- **base** — the link the first arm joint hangs from.
- **shoulder**, **elbow**, **wrist** — the links moved by arm joints 2, 4 and 6 on an arm
  with seven or more joints (the shoulder-elbow-wrist of `core.stages.swivel`), and by joints 2, 3
  and 4 on shorter arms (shoulder lift, elbow, first wrist joint of a six-axis arm); a role
  whose joint does not exist is left unbound.
- **flange** — on the main chain below the last arm joint: a link named ``flange``, else one
  named ``link8``/``ee_link``/``tool0``-style mounting names (see `_FLANGE_WORDS`), else by
  structure: the deepest link there that is neither the tool point nor part of the hand (a
  hand, gripper or palm frame, or a link a gripper joint moves), else the link moved by the
  last arm joint.
- **left hand**, **right hand**, **left foot**, **right foot** (robots with limbs) — links whose
  names say the side (``left``/``l_``… or ``right``/``r_``…). Feet: a link named sole, then
  foot, then ankle, then toe; hands: a link named tcp/tool, then hand/palm/gripper, then
  wrist; among equals, the one with the most joints above it. Feet are never hands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model.robot import RobotModel, is_gripper_part

#: Every role, in the order they are listed and matched (a link that fills several roles is
#: saved under the first).
ROLES = ("tool_point", "flange", "wrist", "elbow", "shoulder", "base", "rail",
         "left_hand", "right_hand", "left_foot", "right_foot")

ROLE_LABELS = {
    "tool_point": "Tool Point", "flange": "Flange", "wrist": "Wrist", "elbow": "Elbow", "shoulder": "Shoulder",
    "base": "Base", "rail": "Rail", "left_hand": "Left Hand", "right_hand": "Right Hand",
    "left_foot": "Left Foot", "right_foot": "Right Foot",
}

_FLANGE_WORDS = (re.compile(r"flange"), re.compile(r"(^|_)link_?8$|(^|_)ee_link$|(^|_)tool0$|mount"))
_HAND_FRAME = re.compile(r"hand(?!le)|gripper|palm")
_LEFT = re.compile(r"(^|[_\-])(left|l)([_\-]|$)|left")
_RIGHT = re.compile(r"(^|[_\-])(right|r)([_\-]|$)|right")
_FOOT_WORDS = (re.compile(r"sole"), re.compile(r"foot"), re.compile(r"ankle"), re.compile(r"toe"))
_HAND_WORDS = (re.compile(r"tcp|tool"), re.compile(r"hand|palm|gripper(?!.*(finger|tip|motor))"), re.compile(r"wrist"))


@dataclass(frozen=True)
class RoleBinding:
    """Roles of one robot: `links` maps role -> link; `missing` maps role -> why it is unbound."""

    links: dict[str, str]
    missing: dict[str, str]
    overridden: frozenset[str] = frozenset()

    def link(self, role: str) -> str | None:
        return self.links.get(role)

    def role_of(self, link: str) -> str | None:
        """The first role (in `ROLES` order) that `link` fills, or None."""
        for role in ROLES:
            if self.links.get(role) == link:
                return role
        return None


def _branches_with_joints(robot: RobotModel, link: str) -> int:
    """How many of `link`'s children lead to a subtree that has a movable joint."""

    def movable_below(child: str) -> bool:
        joint = robot.joint_of_child[child]
        if joint.is_movable:
            return True
        return any(movable_below(grandchild) for grandchild in robot.children(child))

    return sum(1 for child in robot.children(link) if movable_below(child))


def arm_joints(robot: RobotModel, tool_point: str | None = None, held=frozenset()) -> list:
    """The revolute joints of the chain to `tool_point`, root to tip, below its last branch
    point, less gripper joints and `held` ones (see module doc)."""
    tool_point = tool_point or robot.tool_point
    chain = robot.chain(tool_point)
    skip = robot.gripper_joints | frozenset(held)

    def is_arm(joint) -> bool:
        return joint.is_actuated and joint.type != "prismatic" and joint.name not in skip

    revolute = [j for j in chain if is_arm(j)]
    if not revolute:
        return []
    last_revolute = chain.index(revolute[-1])
    start = 0
    for index, joint in enumerate(chain[: last_revolute + 1]):
        if _branches_with_joints(robot, joint.parent) >= 2:
            start = index
    return [j for j in chain[start:] if is_arm(j)]


def limb_roles(robot: RobotModel, tool_point: str | None = None, held=frozenset()) -> dict[str, str]:
    """Shoulder, elbow and wrist of the arm that moves `tool_point` (the roles the Elbow Swivel
    turns about): the links moved by arm joints 2, 4 and 6 on an arm with seven or more joints,
    by joints 2, 3 and 4 on shorter arms. A role whose joint does not exist is left out."""
    arm = arm_joints(robot, tool_point, held)
    picks = {"shoulder": 1, "elbow": 3, "wrist": 5} if len(arm) >= 7 else {"shoulder": 1, "elbow": 2, "wrist": 3}
    return {role: arm[index].child for role, index in picks.items() if index < len(arm)}


def rail_joint(robot: RobotModel, tool_point: str | None = None):
    """The prismatic joint at the root of the main chain (the rail), or None."""
    movable = [j for j in robot.chain(tool_point or robot.tool_point) if j.is_actuated]
    if movable and movable[0].type == "prismatic":
        return movable[0]
    return None


def _named(robot: RobotModel, candidates: list[str], words) -> str | None:
    def rank(link: str) -> tuple[int, int, int]:
        depth, count = robot.chain_facts(link)
        return (-count, -depth, robot.link_index[link])

    for pattern in words:
        hits = [link for link in candidates if pattern.search(link.lower())]
        if hits:
            return min(hits, key=rank)
    return None


def _limb_roles(robot: RobotModel) -> tuple[dict[str, str], dict[str, str]]:
    links, missing = {}, {}
    for side, pattern in (("left", _LEFT), ("right", _RIGHT)):
        on_side = [link for link in robot.links if pattern.search(link.lower()) and robot.chain_facts(link)[1]]
        if side == "left":
            on_side = [link for link in on_side if not _RIGHT.search(link.lower()) or _LEFT.search(link.lower())]
        feet = [link for link in on_side if any(p.search(link.lower()) for p in _FOOT_WORDS)]
        foot = _named(robot, feet, _FOOT_WORDS)
        hand_candidates = [link for link in on_side if link not in feet and not re.search(r"finger|tip|thumb|motor", link.lower())]
        hand = _named(robot, hand_candidates, _HAND_WORDS)
        for limb, link in (("hand", hand), ("foot", foot)):
            role = f"{side}_{limb}"
            if link:
                links[role] = link
            else:
                missing[role] = f"no link named for a {side} {limb} (e.g. '{side}_{'sole' if limb == 'foot' else 'hand'}')"
    return links, missing


def infer_roles(robot: RobotModel) -> RoleBinding:
    """Every role this robot's structure gives, and why the others are missing."""
    links: dict[str, str] = {"tool_point": robot.tool_point}
    missing: dict[str, str] = {}
    arm = arm_joints(robot)
    n = len(arm)
    if arm:
        links["base"] = arm[0].parent
    else:
        missing["base"] = f"no revolute joint above the tool point '{robot.tool_point}'"
    limbs = limb_roles(robot)
    for role in ("shoulder", "elbow", "wrist"):
        if role in limbs:
            links[role] = limbs[role]
        else:
            missing[role] = f"the arm has {n} revolute joint(s) below its base; too few for a {role}"
    rail = rail_joint(robot)
    if rail is not None:
        links["rail"] = rail.child
    else:
        missing["rail"] = "no prismatic joint at the root of the main chain"
    if arm:
        chain = robot.chain(robot.tool_point)
        below = [j.child for j in chain[chain.index(arm[-1]):]]
        mounts = [link for link in below if link != robot.tool_point and not _is_hand(robot, link)]
        links["flange"] = _named(robot, below, _FLANGE_WORDS) or (mounts[-1] if mounts else arm[-1].child)
    else:
        missing["flange"] = "no revolute joint above the tool point"
    limb_links, limb_missing = _limb_roles(robot)
    links.update(limb_links)
    missing.update(limb_missing)
    return RoleBinding(links, missing)


def _is_hand(robot: RobotModel, link: str) -> bool:
    return bool(_HAND_FRAME.search(link.lower())) or is_gripper_part(robot, link)


def resolve_roles(robot: RobotModel, overrides: dict[str, str] | None = None) -> RoleBinding:
    """Inferred roles with the user's overrides (role -> link) on top. An override naming a
    link the robot lacks unbinds that role and says so, rather than silently falling back."""
    inferred = infer_roles(robot)
    links, missing = dict(inferred.links), dict(inferred.missing)
    applied = set()
    for role, link in (overrides or {}).items():
        if role not in ROLES or not link:
            continue
        if link in robot.links:
            links[role] = link
            missing.pop(role, None)
            applied.add(role)
        else:
            links.pop(role, None)
            missing[role] = f"set by hand to '{link}', which is not a link of this robot"
    return RoleBinding(links, missing, frozenset(applied))
