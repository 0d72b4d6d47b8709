"""The robot as the solver and the rig see it: joints, limits, links, chains, tool point.

A `RobotModel` is built once from a URDF (by `loading`, which checks everything the rest of
the product relies on) and then only read. This module is the model alone: it never reads a
file, so the loader, MJCF and the named robots can all build on it without a circle.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import RobotFileError, UnknownNameError
from .mesh_paths import MeshRef, mesh_refs
from .packages import PackageSearchPath

if TYPE_CHECKING:
    import yourdfpy

#: Joint types we move. floating/planar are legal URDF but have no place in an arm's chain;
#: they are kept rigid at their origin (and reported in `RobotModel.notes`).
MOVABLE_TYPES = ("revolute", "continuous", "prismatic")
KNOWN_TYPES = MOVABLE_TYPES + ("fixed", "floating", "planar")
#: A revolute joint whose limits span more than this (rad, four turns) is solved as a continuous
#: one (`RobotModel.turns_freely`): such limits are a file's way of writing "no limit" (rtb-data's
#: QUT Frankie: a base that turns +-999999 rad), and seeds drawn across them wound the joint
#: hundreds of thousands of radians, where float32 bones hold it to a hundredth of a radian.
#: Real limits of two turns each way (the UR wrists' +-2 pi) stay limits.
FREE_TURNING_SPAN = 8 * np.pi
#: A slide whose limits span more than this (m) has none that matter either (the same base's
#: +-999999 m): its seeds keep the start value (`RobotModel.slides_freely`), for a value drawn
#: from its range put the arm hundreds of kilometres from any target and no restart converged.
FREE_SLIDING_SPAN = 1000.0


@dataclass(frozen=True)
class Mimic:
    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True, eq=False)
class Joint:
    """One URDF joint. Angles in radians, lengths in metres; axis is a unit vector."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray  # 4x4, parent link frame -> joint frame at zero
    axis: np.ndarray  # unit 3-vector in the joint frame
    lower: float = -np.inf
    upper: float = np.inf
    velocity: float = np.inf
    effort: float = np.inf
    mimic: Mimic | None = None

    @property
    def is_movable(self) -> bool:
        return self.type in MOVABLE_TYPES

    @property
    def is_actuated(self) -> bool:
        """Has its own value in a configuration (movable and not a mimic)."""
        return self.is_movable and self.mimic is None

@dataclass(eq=False)
class RobotModel:
    """A robot read from a URDF. Built by `loading.load_robot`; treat as read-only."""

    name: str
    path: Path | None
    links: list[str]
    joints: list[Joint]  # tree order: a joint comes after the joint of its parent link
    root_link: str
    meshes: list[MeshRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    urdf: yourdfpy.URDF | None = None  # what it came from, for geometry and materials
    file_order: list[str] | None = None  # joint names as the file lists them
    urdf_text: str = ""  # the URDF it was built from (a xacro's expansion, an MJCF's conversion)
    source_format: str = "urdf"  # what the file was: "urdf", "xacro" or "mjcf"

    def __post_init__(self) -> None:
        self.joint_by_name = {j.name: j for j in self.joints}
        self.joint_of_child = {j.child: j for j in self.joints}
        # Configuration vectors follow the file's order, as yourdfpy and ROS tools do.
        order = self.file_order or [j.name for j in self.joints]
        self.actuated_joints = [self.joint_by_name[n] for n in order if self.joint_by_name[n].is_actuated]
        self.actuated_joint_names = [j.name for j in self.actuated_joints]
        self._actuated_index = {n: i for i, n in enumerate(self.actuated_joint_names)}
        self._derived: dict[str, dict] = {}

    def cache(self, name: str) -> dict:
        """A dict kept with this robot for data other modules derive from it once (chain steps,
        chain problems, swivel chains, rig channels), one per `name`. It lives and dies with the
        robot, so a reloaded robot never sees another's derived data."""
        return self._derived.setdefault(name, {})

    def mesh_files(self) -> list[MeshRef]:
        """The robot's mesh files: those `load_robot` found, or (a robot read without its meshes,
        e.g. from a rig's stored URDF) found now by the same search and checks, once per robot.
        The collision model reads link meshes through this, so it never needs `check_meshes`."""
        if self.meshes:
            return self.meshes
        cache = self.cache("mesh_files")
        if "refs" not in cache:
            refs = []
            if self.path is not None and self.urdf is not None:
                refs = mesh_refs(Path(self.path), self.urdf, PackageSearchPath(robot_file=Path(self.path)))
            cache["refs"] = refs
        return cache["refs"]

    # ---- configuration vectors ---------------------------------------------------------
    @property
    def dof(self) -> int:
        return len(self.actuated_joints)

    @cached_property
    def lower(self) -> np.ndarray:
        return np.array([j.lower for j in self.actuated_joints], dtype=float)

    @cached_property
    def upper(self) -> np.ndarray:
        return np.array([j.upper for j in self.actuated_joints], dtype=float)

    @cached_property
    def velocity_limits(self) -> np.ndarray:
        """Per actuated joint, its speed limit; inf where there is none. A URDF's ``velocity="0"``
        (the attribute is required, so files without a limit write 0) is no limit, as in Check Limits."""
        speeds = np.array([j.velocity for j in self.actuated_joints], dtype=float)
        return np.where(speeds > 0, speeds, np.inf)

    @cached_property
    def is_continuous(self) -> np.ndarray:
        return np.array([j.type == "continuous" for j in self.actuated_joints], dtype=bool)

    @cached_property
    def turns_freely(self) -> np.ndarray:
        """Joints the solver treats as continuous: continuous ones, and revolute ones whose limits
        span more than FREE_TURNING_SPAN. Their seeds lie within half a turn of the start and their
        answers are unwrapped toward it (whole turns, where the limits allow); the limits still hold."""
        span = self.upper - self.lower
        return self.is_continuous | ((~self.is_prismatic) & (span > FREE_TURNING_SPAN))

    @cached_property
    def slides_freely(self) -> np.ndarray:
        """Slides whose limits span more than FREE_SLIDING_SPAN: restarts leave them at the start
        value and the descent moves them (the limits still hold)."""
        return self.is_prismatic & (self.upper - self.lower > FREE_SLIDING_SPAN)

    @cached_property
    def is_prismatic(self) -> np.ndarray:
        return np.array([j.type == "prismatic" for j in self.actuated_joints], dtype=bool)

    def joint_index(self, name: str) -> int:
        """Index of an actuated joint in a configuration vector."""
        try:
            return self._actuated_index[name]
        except KeyError:
            raise UnknownNameError("joint", name, self.actuated_joint_names) from None

    def check_link(self, name: str) -> str:
        if name not in self.link_index:
            raise UnknownNameError("link", name, self.links)
        return name

    @property
    def link_index(self) -> dict[str, int]:
        """Link name -> its place in `links` (a dict: `links.index` per link is quadratic)."""
        index = self._derived.get("link_index")
        if index is None:
            index = self._derived["link_index"] = {name: i for i, name in enumerate(self.links)}
        return index

    def chain_facts(self, link: str) -> tuple[int, int]:
        """(joints from the root to `link`, actuated joints that move it as `chain_joint_names`
        counts them), for every link in one pass over the tree: ranking all links of a
        2,000-link robot stays linear, where a walk per link is quadratic."""
        facts = self._derived.get("chain_facts")
        if facts is None:
            facts = {self.root_link: (0, 0)}
            for joint in self.joints:  # tree order: the parent link is done before the child
                depth, count = facts.get(joint.parent, (0, 0))
                adds = joint.is_movable and (not joint.mimic or joint.mimic.joint not in self.chain_joint_names(joint.parent))
                facts[joint.child] = (depth + 1, count + int(adds))
            self._derived["chain_facts"] = facts
        return facts[self.check_link(link)]

    def zero_configuration(self) -> np.ndarray:
        """All joints at zero, moved inside their limits where zero is outside them."""
        return np.clip(np.zeros(self.dof), self.lower, self.upper)

    def mid_configuration(self) -> np.ndarray:
        """Middle of each joint's range (zero for continuous joints)."""
        finite = np.isfinite(self.lower) & np.isfinite(self.upper)
        return np.where(finite, 0.5 * (np.where(finite, self.lower, 0) + np.where(finite, self.upper, 0)), 0.0)

    def configuration(self, values: dict[str, float] | None = None, base: np.ndarray | None = None) -> np.ndarray:
        """A configuration vector from {joint name: value}; unnamed joints keep `base` (or zero)."""
        q = self.zero_configuration() if base is None else np.array(base, dtype=float).copy()
        for name, value in (values or {}).items():
            value = float(value)
            if not np.isfinite(value):
                raise RobotFileError(self.path or self.name, f"joint '{name}' value {value} is not a finite number")
            q[self.joint_index(name)] = value
        return q

    def random_configurations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform within limits; continuous joints uniform in [-pi, pi]."""
        lo = np.where(np.isfinite(self.lower), self.lower, -np.pi)
        hi = np.where(np.isfinite(self.upper), self.upper, np.pi)
        return rng.uniform(lo, hi, size=(n, self.dof))

    # ---- the link tree -----------------------------------------------------------------
    def chain(self, link: str) -> list[Joint]:
        """Joints from the root link down to `link`, in order."""
        self.check_link(link)
        joints = []
        while link in self.joint_of_child:
            joint = self.joint_of_child[link]
            joints.append(joint)
            link = joint.parent
        return joints[::-1]

    def chain_joint_names(self, link: str) -> list[str]:
        """Actuated joints that move `link`, from the root to the tip (a mimic joint counts for
        its source, at the place of the first joint of the pair)."""
        names: list[str] = []
        seen: set[str] = set()  # a set, not `in names`: a 2,000-link chain must stay linear
        for joint in self.chain(link):
            if not joint.is_movable:
                continue
            source = joint.mimic.joint if joint.mimic else joint.name
            if source not in seen:
                seen.add(source)
                names.append(source)
        return names

    def children(self, link: str) -> list[str]:
        return [j.child for j in self.joints if j.parent == link]

    @cached_property
    def leaf_links(self) -> list[str]:
        parents = {j.parent for j in self.joints}
        return [name for name in self.links if name not in parents]

    @cached_property
    def gripper_joints(self) -> frozenset[str]:
        """Actuated joints of a hand or gripper (see `gripper_joint_names`)."""
        return gripper_joint_names(self)

    def held_joints(self, hold_slides: bool = True) -> frozenset[str]:
        """The joints IK leaves where they are, for every solver, panel, node and command.

        Gripper joints are always held: aiming the tool must never open or close the hand. With
        `hold_slides` (the Solver's "Hold Slides", on by default) every prismatic joint is held
        too, a rail under the arm as well as a finger slide: the animator moves those by hand.
        """
        if not hold_slides:
            return self.gripper_joints
        return self.gripper_joints | frozenset(j.name for j in self.actuated_joints if j.type == "prismatic")

    @cached_property
    def tool_point(self) -> str:
        """The link IK aims at unless told otherwise. See `default_tool_point`."""
        return default_tool_point(self)

    @cached_property
    def fingerprint(self) -> str:
        """Hash of everything that changes kinematics: names, types, origins, axes, limits."""
        h = hashlib.sha256()
        h.update(self.root_link.encode())
        for j in self.joints:
            h.update(f"{j.name}|{j.type}|{j.parent}|{j.child}|{j.lower!r}|{j.upper!r}|{j.mimic}".encode())
            h.update(np.ascontiguousarray(j.origin, dtype=float).tobytes())
            h.update(np.ascontiguousarray(j.axis, dtype=float).tobytes())
        return h.hexdigest()[:16]


_TOOL_WORDS = (
    (re.compile(r"tcp|pinch"), 0),
    (re.compile(r"grasp|grip(?!per)"), 1),
    (re.compile(r"tool"), 2),
    (re.compile(r"(^|[_\-])(ee|eef|end_?effector|ee_link)([_\-]|$)|end_?effector"), 3),
    (re.compile(r"flange"), 4),
)
#: A link of a hand: the frame the fingers hang from.
_HAND_WORDS = re.compile(r"hand(?!le)|gripper|palm")
#: A link that moves inside a hand.
_FINGER_WORDS = re.compile(r"finger|jaw|thumb|knuckle|phalan")
#: A joint of the arm's wrist: never a gripper joint, whatever the link it turns is called.
_WRIST_WORDS = re.compile(r"wrist")
#: A part of a finger that is never the tool (a pad, a fingertip: "fingertip" has "finger").
_PAD_WORDS = re.compile(r"(^|[^a-z])pads?([^a-z]|$)|silicone")
#: Most movable joints one finger has (a robot hand's thumb has four); a longer branch is a limb.
FINGER_JOINTS = 4
#: Fewest joints above a hand: an arm has three or more (a neck carrying two sensors has fewer).
ARM_JOINTS = 3


def _below(robot: RobotModel) -> dict[str, list[Joint]]:
    """Link -> the movable joints in the tree below it (one pass, from the tips up)."""
    below: dict[str, list[Joint]] = {link: [] for link in robot.links}
    for joint in reversed(robot.joints):  # tree order reversed: a child link is done before its parent
        below[joint.parent] = below[joint.parent] + ([joint] if joint.is_movable else []) + below[joint.child]
    return below


def _structural_fingers(robot: RobotModel, below: dict[str, list[Joint]]) -> set[str]:
    """Joints of fingers found by the tree's shape, whatever they are called: two or more short
    branches (at most `FINGER_JOINTS` joints each, none continuous) hanging from one link that an
    arm moves (`ARM_JOINTS` or more joints above it), and nothing else movable hanging from it.
    Legs from a trunk, wheels (continuous), a torso carrying arms and a head's sensors are not fingers."""
    source = {j.name: (j.mimic.joint if j.mimic else j.name) for j in robot.joints}
    hanging: dict[str, list[Joint]] = {}
    for joint in robot.joints:
        if joint.is_movable:
            hanging.setdefault(joint.parent, []).append(joint)
    found: set[str] = set()
    for link, joints in hanging.items():
        if len(joints) < 2 or robot.chain_facts(link)[1] < ARM_JOINTS:
            continue
        branches = [[joint, *below[joint.child]] for joint in joints]
        if all(len({source[j.name] for j in branch}) <= FINGER_JOINTS and all(j.type != "continuous" for j in branch)
               for branch in branches):
            found.update(source[j.name] for branch in branches for j in branch)
    return found


def gripper_joint_names(robot: RobotModel) -> frozenset[str]:
    """The actuated joints of hands and grippers.

    A movable joint is a gripper joint when it hangs below a hand link (a link other than the
    root whose name says hand, gripper or palm, among its own parent link and the links above
    it), when it is in a finger by the tree's shape (`_structural_fingers`: fingers called
    driver, follower or carriage count), or when the link it moves is named as a finger or jaw
    (finger, jaw, thumb, knuckle, phalanx) and no other gripper joint lies below it: a hobby
    arm's wrist that turns its fixed jaw (the moving jaw hangs from it) is the arm's, and so is
    any joint named wrist (a humanoid's wrist turns links called hand). A mimic
    joint makes its source a gripper joint when it is one. A robot that is nothing but a hand
    (every movable joint would be a gripper joint) has none: there is no arm to hold it for.
    """
    below_hand: dict[str, bool] = {robot.root_link: False}
    for joint in robot.joints:  # tree order: a parent link is seen before its children
        parent_is_hand = joint.parent != robot.root_link and bool(_HAND_WORDS.search(joint.parent.lower()))
        below_hand[joint.child] = below_hand.get(joint.parent, False) or parent_is_hand
    below = _below(robot)
    movable = [j for j in robot.joints if j.is_movable]
    source = {j.name: (j.mimic.joint if j.mimic else j.name) for j in movable}
    found = {source[j.name] for j in movable if below_hand[j.child]} | _structural_fingers(robot, below)
    named = {j.name for j in movable if _FINGER_WORDS.search(j.child.lower())}
    if movable and len(found | {source[n] for n in named}) >= len(set(source.values())):
        return frozenset()
    for joint in movable:
        if joint.name in named and source[joint.name] not in found:
            if not any(j.name in named or source[j.name] in found for j in below[joint.child]):
                found.add(source[joint.name])
    return frozenset(name for name in found if not _WRIST_WORDS.search(name.lower()))


def is_gripper_part(robot: RobotModel, link: str) -> bool:
    """A link that a gripper joint moves, or named as a finger, jaw or pad (unless the gripper
    hangs from it and none of its joints moves it: a hobby arm's fixed jaw carries the moving one)."""
    moved = _moved_by(robot, robot.gripper_joints)
    if moved[link] > 0:
        return True
    lowered = link.lower()
    if _PAD_WORDS.search(lowered):
        return True
    if not _FINGER_WORDS.search(lowered):
        return False
    return not any(j.name in robot.gripper_joints or (j.mimic and j.mimic.joint in robot.gripper_joints)
                   for j in _below(robot)[link])


def _moved_by(robot: RobotModel, names: frozenset[str]) -> dict[str, int]:
    """Link -> how many of the actuated joints `names` move it (one pass over the tree)."""
    key = ("moved_by", names)
    counts = robot.cache("moved_by").get(key)
    if counts is None:
        counts = {robot.root_link: 0}
        for joint in robot.joints:
            source = joint.mimic.joint if joint.mimic else joint.name
            counts[joint.child] = counts.get(joint.parent, 0) + int(joint.is_movable and source in names and not (
                joint.mimic and joint.mimic.joint in robot.chain_joint_names(joint.parent)))
        robot.cache("moved_by")[key] = counts
    return counts


def default_tool_point(robot: RobotModel) -> str:
    """The rule for the default tool point (the README's "Default tool point").

    1. A link whose name says what it is, best first: ``tcp``, ``grasp``, ``tool``, ``ee`` /
       ``eef`` / ``end_effector``, ``flange``.
    2. Otherwise a hand frame: a link named hand, gripper or palm.
    3. Otherwise the tip of the longest chain.

    A jaw or finger (a link a gripper joint moves, or named finger/jaw/thumb/knuckle) is never
    chosen while any other link qualifies, so the gripper stays out of the chain. Among equals:
    the most arm joints above it (gripper joints not counted), then the deepest, then the first
    in the file.
    """
    grippers = robot.gripper_joints

    moved_by_gripper = _moved_by(robot, grippers)

    def rank(link: str) -> tuple[int, int, int]:
        depth, count = robot.chain_facts(link)
        return (-(count - moved_by_gripper[link]), -depth, robot.link_index[link])

    parts = {link for link in robot.links if is_gripper_part(robot, link)}
    for allowed in ([link for link in robot.links if link not in parts], list(robot.links)):
        named: list[tuple[int, str]] = []
        for link in allowed:
            lowered = link.lower()
            for pattern, priority in _TOOL_WORDS:
                if pattern.search(lowered):
                    named.append((priority, link))
                    break
        if named:
            best = min(p for p, _ in named)
            return min((link for p, link in named if p == best), key=rank)
        hands = [link for link in allowed if link != robot.root_link and _HAND_WORDS.search(link.lower())]
        if hands:
            return min(hands, key=rank)
    # the ends of the tree once the fingers are taken off: a hand whose fingers are all it carries is one
    carries_more = {j.parent for j in robot.joints if j.child not in parts}
    ends = [link for link in robot.links if link not in parts and link not in carries_more] if grippers else []
    tips = ends or [link for link in robot.leaf_links if link not in parts] or robot.leaf_links
    return min(tips, key=rank)
