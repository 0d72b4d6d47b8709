"""The robot as the solver and the rig see it: joints, limits, links, chains, tool point.

A `RobotModel` is built once from a URDF through yourdfpy and then only read. It checks
everything the rest of the product relies on (a tree of links, finite numbers, limits on
every revolute and prismatic joint, unit axes, meshes that exist) so that a bad file is
refused here with one line naming the file and the problem, never later as a NaN.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import RobotFileError, UnknownNameError
from .packages import PackageSearchPath, resolve_package_file

#: Joint types we move. floating/planar are legal URDF but have no place in an arm's chain;
#: they are kept rigid at their origin (and reported in `RobotModel.notes`).
MOVABLE_TYPES = ("revolute", "continuous", "prismatic")
KNOWN_TYPES = MOVABLE_TYPES + ("fixed", "floating", "planar")

#: Largest URDF we read. Real robots are well under a megabyte.
MAX_URDF_BYTES = 32 * 1024 * 1024
#: Any coordinate beyond this many metres is a typo or an attack, not a robot.
MAX_COORDINATE = 1.0e6
#: Most links (and joints) we accept. Real robots have tens, a few hundred at most; a file with
#: thousands is generated junk or an attack on the rig builder and the solver's compiler.
MAX_LINKS = 2000
#: Longest attribute text we parse as numbers (a 'number' of a million digits is an attack).
MAX_NUMBER_TEXT = 1000


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


@dataclass(frozen=True)
class MeshRef:
    """A mesh a link shows, with the URDF's filename and the file it resolved to."""

    link: str
    role: str  # "visual" or "collision"
    filename: str
    path: Path
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)


@dataclass(eq=False)
class RobotModel:
    """A robot read from a URDF. Built by `load_robot`; treat as read-only."""

    name: str
    path: Path | None
    links: list[str]
    joints: list[Joint]  # tree order: a joint comes after the joint of its parent link
    root_link: str
    meshes: list[MeshRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    urdf: object = None  # the yourdfpy.URDF it came from, for geometry and materials
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
                refs = _mesh_refs(Path(self.path), self.urdf, PackageSearchPath(robot_file=Path(self.path)))
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


# ---- loading ----------------------------------------------------------------------------

def bundled_robots() -> dict[str, Path]:
    """Robots that ship with the package, by name."""
    folder = Path(__file__).resolve().parents[2] / "robots"
    return {p.stem: p for p in sorted(folder.glob("*.urdf"))}


#: File endings read as xacro (expanded to URDF first) and as MJCF (through MuJoCo's compiler).
XACRO_SUFFIXES = (".xacro",)
MJCF_SUFFIXES = (".xml", ".mjcf")


def find_urdf(name_or_path: str | Path) -> Path:
    """A path to a robot file (URDF, xacro or MJCF), or a robot's name: bundled, from
    example-robot-data (`panda`, `ur5`, `so101`, `baxter`, ...) or robosuite (`robosuite_panda`,
    ...) when installed. `kinema-nodes robots` lists the names."""
    import stat as _stat

    from .example_robots import example_robot

    path = Path(name_or_path)
    try:
        info = path.stat()
    except (OSError, ValueError):
        info = None
    if info is not None:
        if _stat.S_ISREG(info.st_mode):
            return path
        if _stat.S_ISDIR(info.st_mode):
            raise RobotFileError(path, "is a folder, not a robot file")
        raise RobotFileError(path, "is not a regular file (a device, pipe or socket?); refused")
    bundled = bundled_robots()
    if str(name_or_path) in bundled:
        return bundled[str(name_or_path)]
    example = example_robot(str(name_or_path))
    if example is not None:
        return example
    if path.suffix.lower() in (".urdf", *XACRO_SUFFIXES, *MJCF_SUFFIXES) or path.parent != Path("."):
        raise RobotFileError(path, "file not found")
    raise RobotFileError(path, "no such file, and no robot of that name (`kinema-nodes robots` lists the names)")


def robot_file_kind(path: Path) -> str:
    """'xacro', 'mjcf' or 'urdf': by the ending, and for .xml by the root element."""
    name = path.name.lower()
    if name.endswith(XACRO_SUFFIXES):
        return "xacro"
    if name.endswith(MJCF_SUFFIXES):
        try:
            with open(path, "rb") as handle:
                head = handle.read(64 * 1024)
        except OSError:
            return "mjcf"
        head = re.sub(rb"<!--.*?-->", b"", head, flags=re.DOTALL)
        head = re.sub(rb"<\?.*?\?>", b"", head, flags=re.DOTALL)
        match = re.search(rb"<\s*([A-Za-z_][\w:.\-]*)", head)
        if match and match.group(1) == b"robot":
            return "urdf"
        return "mjcf"
    return "urdf"


def _parse_xml(path: Path, data: bytes):
    from .xml_reading import parse_xml

    root = parse_xml(data, path, "URDF")
    if root is None or root.tag != "robot":
        tag = getattr(root, "tag", None)
        tag = tag if isinstance(tag, str) else "(not an element)"
        raise RobotFileError(path, f"root element is <{tag[:80]}>, expected <robot>")
    return root


#: How many numbers an attribute holds (mesh scale may also be one number; see _mesh_refs).
_NUMBER_COUNTS = {"xyz": 3, "rpy": 3, "size": 3, "radius": 1, "length": 1, "lower": 1, "upper": 1,
                  "velocity": 1, "effort": 1, "multiplier": 1, "offset": 1}


def _check_structure(path: Path, root) -> None:
    """Problems that would make yourdfpy's parser raise something cryptic."""
    if not root.get("name"):
        raise RobotFileError(path, "<robot> has no name")
    links = root.findall("link")
    if not links:
        raise RobotFileError(path, "no <link> elements")
    for tag, count in (("link", len(links)), ("joint", len(root.findall("joint")))):
        if count > MAX_LINKS:
            raise RobotFileError(path, f"has {count} <{tag}> elements; refusing robots with more than {MAX_LINKS}")
    for element in root.findall("joint"):
        name = element.get("name")
        if not name:
            raise RobotFileError(path, f"a <joint> at line {element.sourceline} has no name")
        for tag in ("parent", "child"):
            sub = element.find(tag)
            if sub is None or not sub.get("link"):
                raise RobotFileError(path, f"joint '{name}' has no <{tag} link=...>")
        jtype = element.get("type")
        if jtype not in KNOWN_TYPES:
            raise RobotFileError(path, f"joint '{name}' has unknown type '{jtype}' (expected one of {', '.join(KNOWN_TYPES)})")
    for element in root.findall("link"):
        if not element.get("name"):
            raise RobotFileError(path, f"a <link> at line {element.sourceline} has no name")
    for element in root.iter("origin", "axis", "limit", "mimic", "box", "cylinder", "sphere", "mesh"):
        owner = element.getparent()
        while owner is not None and owner.tag not in ("joint", "link"):
            owner = owner.getparent()
        where = f"{owner.tag} '{owner.get('name')}' <{element.tag}>" if owner is not None else f"<{element.tag}>"
        for attribute in ("xyz", "rpy", "size", "scale", "radius", "length", "lower", "upper", "velocity", "effort", "multiplier", "offset"):
            text = element.get(attribute)
            if text is None:
                continue
            if len(text) > MAX_NUMBER_TEXT:
                raise RobotFileError(path, f"{where} {attribute} is {len(text)} characters long; not a list of numbers")
            try:
                numbers = [float(token) for token in text.split()]
            except ValueError:
                raise RobotFileError(path, f"{where} {attribute}='{text}' is not a list of numbers") from None
            if not all(np.isfinite(numbers)):
                raise RobotFileError(path, f"{where} contains NaN or inf")
            expected = _NUMBER_COUNTS.get(attribute)
            if expected is not None and len(numbers) != expected:
                raise RobotFileError(path, f"{where} {attribute}='{text}' needs {expected} numbers, has {len(numbers)}")


def _finite(path: Path, what: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise RobotFileError(path, f"{what} contains NaN or inf")
    if np.any(np.abs(array) > MAX_COORDINATE):
        raise RobotFileError(path, f"{what} has a value beyond {MAX_COORDINATE:g}")
    return array


def _limit_value(value, default: float) -> float:
    return default if value is None else float(value)


def _make_joint(path: Path, yj) -> Joint:
    origin = np.eye(4) if yj.origin is None else _finite(path, f"joint '{yj.name}' <origin>", yj.origin)
    axis = _finite(path, f"joint '{yj.name}' <axis>", yj.axis if yj.axis is not None else (1.0, 0.0, 0.0))
    if axis.shape != (3,):
        raise RobotFileError(path, f"joint '{yj.name}' <axis> needs three numbers")
    norm = float(np.linalg.norm(axis))
    if yj.type in MOVABLE_TYPES:
        if norm < 1e-9:
            raise RobotFileError(path, f"joint '{yj.name}' has a zero <axis>")
        axis = axis / norm
    lower, upper, velocity, effort = -np.inf, np.inf, np.inf, np.inf
    limit = yj.limit
    if limit is not None:
        velocity = _limit_value(limit.velocity, np.inf)
        effort = _limit_value(limit.effort, np.inf)
        for what, value in (("velocity", velocity), ("effort", effort)):
            if np.isnan(value):
                raise RobotFileError(path, f"joint '{yj.name}' <limit {what}> is NaN")
    if yj.type in ("revolute", "prismatic"):
        if limit is None:
            raise RobotFileError(path, f"{yj.type} joint '{yj.name}' has no <limit> (only continuous joints may turn without limits)")
        # URDF: lower and upper default to zero when <limit> is present.
        lower = _limit_value(limit.lower, 0.0)
        upper = _limit_value(limit.upper, 0.0)
        _finite(path, f"joint '{yj.name}' <limit>", (lower, upper))
        if lower > upper:
            raise RobotFileError(path, f"joint '{yj.name}' has lower limit {lower} above upper limit {upper}")
    mimic = None
    if yj.mimic is not None:
        multiplier = _limit_value(yj.mimic.multiplier, 1.0)
        offset = _limit_value(yj.mimic.offset, 0.0)
        _finite(path, f"joint '{yj.name}' <mimic>", (multiplier, offset))
        mimic = Mimic(yj.mimic.joint, multiplier, offset)
    return Joint(
        name=yj.name, type=yj.type, parent=yj.parent, child=yj.child, origin=origin, axis=axis,
        lower=lower, upper=upper, velocity=velocity, effort=effort, mimic=mimic,
    )


def _tree_order(path: Path, links: list[str], joints: list[Joint]) -> tuple[str, list[Joint]]:
    link_set = set(links)
    if len(link_set) != len(links):
        duplicate = next(name for name in links if links.count(name) > 1)
        raise RobotFileError(path, f"link '{duplicate}' is defined twice")
    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise RobotFileError(path, f"joint '{duplicate}' is defined twice")
    parent_joint: dict[str, Joint] = {}
    for joint in joints:
        for role, link in (("parent", joint.parent), ("child", joint.child)):
            if link not in link_set:
                raise RobotFileError(path, f"joint '{joint.name}' names {role} link '{link}', which is not defined")
        if joint.parent == joint.child:
            raise RobotFileError(path, f"joint '{joint.name}' connects link '{joint.child}' to itself (a kinematic loop)")
        if joint.child in parent_joint:
            other = parent_joint[joint.child]
            raise RobotFileError(
                path, f"link '{joint.child}' is the child of two joints ('{other.name}' and '{joint.name}'): kinematic loops are not supported"
            )
        parent_joint[joint.child] = joint
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise RobotFileError(path, "every link has a parent joint: the joints form a kinematic loop")
    if len(roots) > 1:
        raise RobotFileError(path, f"several root links ({', '.join(roots[:5])}): a URDF must be one tree")
    children: dict[str, list[Joint]] = {}
    for joint in joints:
        children.setdefault(joint.parent, []).append(joint)
    ordered: list[Joint] = []
    stack = [roots[0]]
    while stack:
        link = stack.pop()
        kids = children.get(link, [])
        ordered.extend(kids)
        stack.extend(j.child for j in reversed(kids))
    if len(ordered) != len(joints):
        missing = sorted(set(names) - {j.name for j in ordered})
        raise RobotFileError(path, f"joints {', '.join(missing[:5])} form a kinematic loop, unreachable from root '{roots[0]}'")
    return roots[0], ordered


def _mesh_candidates(filename: str, urdf_dir: Path):
    """Every place a plain (not ``package://``) mesh reference may mean, in the order tried."""
    filename = filename.removeprefix("file://")
    candidate = Path(filename)
    if candidate.is_absolute():
        yield candidate
        return
    for folder in [urdf_dir, *urdf_dir.parents]:
        yield folder / candidate


def resolve_mesh_path(filename: str, urdf_dir: Path, search: PackageSearchPath | None = None) -> Path | None:
    """The file a URDF mesh reference means, or None.

    ``package://NAME/rest`` is ``rest`` inside package NAME, found on the package search path
    (`core.model.packages`: declared folders, the URDF's folder and its parents, ROS_PACKAGE_PATH,
    AMENT_PREFIX_PATH), where a folder is package NAME only if it really is one. Plain relative
    paths are tried against the URDF's folder and each of its parents.

    This only finds the file; `load_robot` then refuses one outside the robot's folders
    (see `robot_folders`).
    """
    if filename.startswith("package://"):
        search = search or PackageSearchPath(robot_file=urdf_dir / "robot.urdf")
        try:
            candidate = resolve_package_file(filename, search, urdf_dir)
        except RobotFileError:
            return None
        try:
            return candidate if candidate.is_file() else None
        except (OSError, ValueError):
            return None
    for candidate in _mesh_candidates(filename, urdf_dir):
        try:
            if candidate.is_file():
                return candidate
        except (OSError, ValueError):  # a name too long, a NUL byte: not a file we can use
            continue
    return None


def _package_names(filename: str) -> list[str]:
    """The package a ``package://`` reference names (``package:///a/b`` names ``a``)."""
    if not filename.startswith("package://"):
        return []
    parts = [part for part in filename[len("package://"):].split("/") if part]
    return parts[:1]


def robot_folders(urdf_path: str | Path, packages=(), search: PackageSearchPath | None = None) -> list[Path]:
    """The folders a robot's meshes must lie in (after following ``..`` and symlinks).

    - the folder holding the URDF, and its parent (the usual ``robot/urdf/`` beside
      ``robot/meshes/``);
    - the nearest folder above the URDF holding a ``package.xml`` (the ROS package it is in);
    - the folder of each package its meshes use (``package://NAME/...``) that the package search
      path finds: a folder that really is package NAME (see `core.model.packages`), never one
      that merely happens to be called NAME.

    The file system's root and the home folder are never one of them (unless the URDF itself
    lies there), so a URDF cannot name ``/etc/passwd`` or ``~/.ssh/...`` as a mesh.
    """
    urdf_dir = Path(urdf_path).resolve().parent
    too_wide = {Path(urdf_dir.anchor), Path.home().resolve()}
    folders = [urdf_dir]
    if urdf_dir.parent not in too_wide:
        folders.append(urdf_dir.parent)
    for folder in urdf_dir.parents:
        if folder in too_wide:
            break
        if (folder / "package.xml").is_file():
            folders.append(folder)
            break
    search = search or PackageSearchPath(robot_file=Path(urdf_path))
    for name in packages:
        search.find(name)
    for folder in search.roots():
        if folder not in too_wide:
            folders.append(folder)
    return list(dict.fromkeys(folders))


def _is_inside(path: Path, folders: list[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def _not_found(path: Path, link: str, role: str, filename: str, where: str, candidates) -> RobotFileError:
    from .meshes import check_mesh_file

    for candidate in candidates:
        try:
            exists = candidate.exists()
        except (OSError, ValueError):
            exists = False
        if exists:  # a folder or a device: say what it is
            check_mesh_file(candidate, path, filename)
    return RobotFileError(path, f"link '{link}' {role} mesh '{filename}' not found (looked in {where})")


def _mesh_refs(path: Path, yurdf, search: PackageSearchPath) -> list[MeshRef]:
    from .meshes import check_mesh_file

    urdf_dir = path.parent
    found: list[tuple[str, str, str, Path, object]] = []
    for link in yurdf.robot.links:
        for role, elements in (("visual", link.visuals), ("collision", link.collisions)):
            for element in elements:
                geometry = element.geometry
                if geometry is None or geometry.mesh is None:
                    continue
                filename = geometry.mesh.filename or ""
                if not filename.strip():
                    raise RobotFileError(path, f"link '{link.name}' {role} <mesh> has no filename")
                if "\x00" in filename or len(filename) > 4096:
                    raise RobotFileError(path, f"link '{link.name}' {role} mesh filename is not a usable path")
                if filename.startswith("package://"):
                    try:
                        candidate = resolve_package_file(filename, search, path)
                    except RobotFileError as exc:
                        missing = exc.problem.startswith("package '")
                        problem = f"mesh '{filename}' not found: {exc.problem}" if missing else exc.problem
                        raise RobotFileError(path, f"link '{link.name}' {role} {problem}") from None
                    try:
                        is_file = candidate.is_file()
                    except (OSError, ValueError):
                        is_file = False
                    if not is_file:
                        raise _not_found(path, link.name, role, filename, f"package '{_package_names(filename)[0]}' at {candidate.parent}", [candidate])
                    resolved = candidate
                else:
                    resolved = resolve_mesh_path(filename, urdf_dir)
                    if resolved is None:
                        raise _not_found(path, link.name, role, filename, f"{urdf_dir} and its parents", _mesh_candidates(filename, urdf_dir))
                found.append((link.name, role, filename, resolved, geometry.mesh.scale))
    folders = robot_folders(path, {name for _, _, filename, _, _ in found for name in _package_names(filename)}, search=search)
    refs = []
    for link_name, role, filename, resolved, scale in found:
        real = resolved.resolve()
        if not _is_inside(real, folders):
            raise RobotFileError(
                path, f"link '{link_name}' {role} mesh '{filename}' is {real}, outside the robot's folders "
                f"({', '.join(str(f) for f in folders)}); meshes must lie inside them"
            )
        check_mesh_file(real, path, filename)
        if scale is None:
            scale = (1.0, 1.0, 1.0)
        elif np.isscalar(scale):
            scale = (float(scale),) * 3
        scale = _finite(path, f"link '{link_name}' mesh scale", scale)
        if scale.shape != (3,):
            raise RobotFileError(path, f"link '{link_name}' mesh scale needs one or three numbers")
        refs.append(MeshRef(link_name, role, filename, resolved, tuple(float(v) for v in scale)))
    return refs


#: What `load_robot` uses when a caller passes no package path or xacro arguments: the command
#: line's ``--package-path`` and ``--xacro-arg`` for the whole run (set by `cli.main`).
LOAD_DEFAULTS: dict = {"package_path": (), "xacro_args": {}}


def set_load_defaults(package_path=(), xacro_args: dict[str, str] | None = None) -> None:
    LOAD_DEFAULTS["package_path"] = tuple(package_path or ())
    LOAD_DEFAULTS["xacro_args"] = dict(xacro_args or {})


def read_robot_file(path: Path, limit: int, kind: str) -> bytes:
    """A robot file's bytes, read once: over `limit` bytes, or unreadable, it is one line
    naming the file (`kind` says what is refused: "URDFs", "MJCF")."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise RobotFileError(path, f"file is {size / 1e6:.0f} MB; refusing {kind} over {limit / 1e6:.0f} MB")
        return path.read_bytes()
    except OSError as exc:
        raise RobotFileError(path, f"cannot read: {exc.strerror or exc}") from None


def load_robot(
    name_or_path: str | Path, check_meshes: bool = True, *, package_path=None, xacro_args: dict[str, str] | None = None
) -> RobotModel:
    """Read and check a robot: a URDF, a xacro file (expanded first, with `xacro_args`), an MJCF
    model (through MuJoCo's compiler), or a robot's name (see `find_urdf`).

    `package_path` adds folders to the package search path (``--package-path DIR``, the
    Preferences). The RobotModel keeps the URDF it was built from (`urdf_text`: for xacro the
    expansion, for MJCF the conversion), so a rig never needs the workspace again.

    Raises `RobotFileError` with one line naming the file and the problem.
    """
    path = find_urdf(name_or_path)
    package_path = LOAD_DEFAULTS["package_path"] if package_path is None else package_path
    xacro_args = LOAD_DEFAULTS["xacro_args"] if xacro_args is None else xacro_args
    search = PackageSearchPath(declared=[Path(p) for p in package_path], robot_file=path)
    kind = robot_file_kind(path)
    if kind == "xacro":
        from .xacro import expand_xacro

        text, notes = expand_xacro(path, xacro_args or {}, search)
        robot = robot_from_urdf_text(text, path, check_meshes=check_meshes, search=search, notes=notes)
        robot.source_format = "xacro"
        return robot
    if xacro_args:
        raise RobotFileError(path, f"xacro arguments ({', '.join(sorted(xacro_args))}) given, but this is not a .xacro file")
    if kind == "mjcf":
        from .mjcf import urdf_from_mjcf

        text, notes = urdf_from_mjcf(path, search)
        robot = robot_from_urdf_text(text, path, check_meshes=check_meshes, search=search, notes=notes)
        robot.source_format = "mjcf"
        return robot
    data = read_robot_file(path, MAX_URDF_BYTES, "URDFs")
    try:
        return robot_from_urdf_text(data, path, check_meshes=check_meshes, search=search)
    except RobotFileError as exc:
        if _XACRO_LEFT_OVER.search(data):
            # A URDF with xacro left in it is not run through xacro behind the user's back (xacro
            # evaluates expressions); the message says how to.
            raise RobotFileError(
                exc.path, f"{exc.problem}; the file still has xacro in it ($(...) or ${{...}}): "
                "name it .urdf.xacro to expand it with xacro (--xacro-arg NAME:=VALUE for its arguments)"
            ) from None
        raise


_XACRO_LEFT_OVER = re.compile(rb"\$\([a-z]+[ )]|\$\{|xmlns:xacro")


_XML_DECLARATION_VERSION = re.compile(rb"\A(\xef\xbb\xbf)?(\s*<\?xml\s+version\s*=\s*)([\"'])[^\"'<>?]{0,16}\3")


def lenient_xml_version(data: bytes) -> bytes:
    """`data` with its XML declaration's version number read as 1.0.

    pybullet's URDFs say ``version="0.0"``, which libxml2 refuses though nothing in the file
    depends on it. Only the declaration's number changes; the checks against entities, DOCTYPEs,
    size and depth run on the document as before."""
    return _XML_DECLARATION_VERSION.sub(lambda m: (m.group(1) or b"") + m.group(2) + m.group(3) + b"1.0" + m.group(3), data, count=1)


def robot_from_urdf_text(
    data: bytes | str, path: str | Path, check_meshes: bool = False, *, search: PackageSearchPath | None = None, notes=()
) -> RobotModel:
    """A RobotModel from URDF text (e.g. the copy a rig keeps inside its .blend).

    `path` names the source in messages and is where relative meshes are looked for; `search`
    is the package search path for ``package://`` meshes (by default: the folders above `path`
    and the environment's ROS paths).
    """
    import yourdfpy

    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_URDF_BYTES:
        raise RobotFileError(path, f"URDF is {len(data) / 1e6:.0f} MB; refusing URDFs over {MAX_URDF_BYTES / 1e6:.0f} MB")
    data = lenient_xml_version(data)
    root = _parse_xml(path, data)
    _check_structure(path, root)
    try:
        yurdf = yourdfpy.URDF.load(io.BytesIO(data), build_scene_graph=False, load_meshes=False, mesh_dir=str(path.parent))
    except Exception as exc:  # yourdfpy raises many kinds on odd input
        raise RobotFileError(path, f"could not be read as URDF: {type(exc).__name__}: {exc}") from None

    joints = [_make_joint(path, yj) for yj in yurdf.robot.joints]
    links = [link.name for link in yurdf.robot.links]
    root_link, ordered = _tree_order(path, links, joints)
    notes = list(notes)
    by_name = {j.name: j for j in ordered}
    for joint in ordered:
        if joint.type in ("floating", "planar"):
            notes.append(f"{joint.type} joint '{joint.name}' is held rigid at its origin")
        if joint.mimic is not None:
            source = by_name.get(joint.mimic.joint)
            if source is None:
                raise RobotFileError(path, f"joint '{joint.name}' mimics joint '{joint.mimic.joint}', which is not defined")
            if not source.is_actuated:
                raise RobotFileError(path, f"joint '{joint.name}' mimics '{source.name}', which is not an actuated joint")
    search = search or PackageSearchPath(robot_file=path)
    meshes = _mesh_refs(path, yurdf, search) if check_meshes else []
    # Keep links in tree order too, so rigs build parents before children.
    link_order = [root_link] + [j.child for j in ordered]
    robot = RobotModel(
        name=yurdf.robot.name, path=path, links=link_order, joints=ordered, root_link=root_link,
        meshes=meshes, notes=notes, urdf=yurdf, file_order=[j.name for j in joints],
    )
    robot.urdf_text = data.decode("utf-8", errors="replace")
    return robot
