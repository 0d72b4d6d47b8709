"""Reading a robot: a file (URDF, xacro, MJCF) or a robot's name becomes a checked `RobotModel`.

Everything a file says is checked here before the model is built (a tree of links, finite
numbers, limits on every revolute and prismatic joint, unit axes, meshes that exist), so a bad
file is refused with one line naming the file and the problem, never later as a NaN. xacro and
MJCF are turned into URDF first (`xacro`, `mjcf`); names reach bundled and installed robots
(`example_robots`).
"""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import RobotFileError
from .example_robots import bundled_robots, example_robot
from .file_checks import MAX_LINKS, MAX_NUMBER_TEXT, MAX_URDF_BYTES, finite_numbers, read_robot_file
from .mesh_paths import mesh_refs
from .mjcf import ATTENTION
from .packages import PackageSearchPath
from .robot_libraries import library_file_options
from .robot import KNOWN_TYPES, MOVABLE_TYPES, Joint, Mimic, RobotModel


#: File endings read as xacro (expanded to URDF first) and as MJCF (through MuJoCo's compiler).
XACRO_SUFFIXES = (".xacro",)
MJCF_SUFFIXES = (".xml", ".mjcf")


def find_urdf(name_or_path: str | Path) -> Path:
    """A path to a robot file (URDF, xacro or MJCF), or a robot's name: bundled, from
    example-robot-data (`panda`, `ur5`, `so101`, `baxter`, ...), robosuite (`robosuite_panda`,
    ...), robot_descriptions or mujoco-menagerie (from what they have fetched) when installed.
    `kinema-nodes robots` lists the names."""
    import stat as _stat

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


#: How many numbers an attribute holds (mesh scale may also be one number; see mesh_paths.mesh_refs).
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


def _limit_value(value, default: float) -> float:
    return default if value is None else float(value)


def _make_joint(path: Path, yj) -> Joint:
    origin = np.eye(4) if yj.origin is None else finite_numbers(path, f"joint '{yj.name}' <origin>", yj.origin)
    axis = finite_numbers(path, f"joint '{yj.name}' <axis>", yj.axis if yj.axis is not None else (1.0, 0.0, 0.0))
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
        finite_numbers(path, f"joint '{yj.name}' <limit>", (lower, upper))
        if lower > upper:
            raise RobotFileError(path, f"joint '{yj.name}' has lower limit {lower} above upper limit {upper}")
    mimic = None
    if yj.mimic is not None:
        multiplier = _limit_value(yj.mimic.multiplier, 1.0)
        offset = _limit_value(yj.mimic.offset, 0.0)
        finite_numbers(path, f"joint '{yj.name}' <mimic>", (multiplier, offset))
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


#: line's ``--package-path`` and ``--xacro-arg`` for the whole run (set by `cli.main`).
LOAD_DEFAULTS: dict = {"package_path": (), "xacro_args": {}}


def set_load_defaults(package_path=(), xacro_args: dict[str, str] | None = None) -> None:
    LOAD_DEFAULTS["package_path"] = tuple(package_path or ())
    LOAD_DEFAULTS["xacro_args"] = dict(xacro_args or {})



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
    library = library_file_options(path)
    if library is not None:
        # a robot_descriptions xacro: its module's arguments and package folders, the user's on top
        package_path = (*package_path, *library.package_path)
        xacro_args = {**library.xacro_args, **(xacro_args or {})}
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
    names = {j.name for j in ordered}
    for i, joint in enumerate(ordered):
        if joint.mimic is not None and joint.mimic.joint not in names:
            # example-robot-data's alex_psyonic_hands: each finger's second joint mimics
            # 'index_q1', a joint the file names 'Left_index_q1' and 'Right_index_q1'. Nothing
            # says which it follows, so it moves on its own, and the import says so.
            notes.append(f"{ATTENTION}joint '{joint.name}' mimics joint '{joint.mimic.joint}', which is not defined: "
                         "it moves on its own")
            ordered[i] = replace(joint, mimic=None)
    by_name = {j.name: j for j in ordered}
    for joint in ordered:
        if joint.type in ("floating", "planar"):
            notes.append(f"{joint.type} joint '{joint.name}' is held rigid at its origin")
        if joint.mimic is not None and not by_name[joint.mimic.joint].is_actuated:
            raise RobotFileError(path, f"joint '{joint.name}' mimics '{joint.mimic.joint}', which is not an actuated joint")
    search = search or PackageSearchPath(robot_file=path)
    meshes = mesh_refs(path, yurdf, search) if check_meshes else []
    # Keep links in tree order too, so rigs build parents before children.
    link_order = [root_link] + [j.child for j in ordered]
    robot = RobotModel(
        name=yurdf.robot.name, path=path, links=link_order, joints=ordered, root_link=root_link,
        meshes=meshes, notes=notes, urdf=yurdf, file_order=[j.name for j in joints],
    )
    robot.urdf_text = data.decode("utf-8", errors="replace")
    return robot
