"""Rig presets: a node graph saved without naming any robot's links, to apply to any robot.

A preset is a JSON file::

    {
      "kinema_preset": 1,
      "name": "Reach with the tool",
      "description": "One control; the tool point follows it.",
      "nodes": [
        {"name": "Robot", "kind": "robot"},
        {"name": "Tool", "kind": "ik_target", "control": "bone",
         "params": {"link": {"role": "tool_point"}, "position_weight": 1.0, "rotation_weight": 1.0},
         "keys": {"link": [[1, {"role": "tool_point"}], [60, {"role": "wrist"}]]}},
        {"name": "Solver", "kind": "solver", "params": {"backend": "pyroki", "live": true}},
        {"name": "Swivel", "kind": "swivel", "values": {"swivel_angle": 0.0}}
      ],
      "links": [["Robot", "Robot", "Tool", "Robot"], ["Tool", "Target", "Solver", "Targets"]],
      "requires": {"roles": ["elbow"], "arm_joints": 7}
    }

- A link is never written by name: ``{"role": "<role>"}`` (see `core.roles`) binds to the
  robot's link for that role; ``{"link": "<name>"}`` (a link no role describes) binds only on
  robots that have a link of that name.
- ``params`` are the node's structural settings, as in `GraphSpec` (minus anything tied to one
  rig: the rig, the control, the budget from Preferences). ``values`` are per-frame settings
  (swivel angle, configuration index) set once. ``keys.link`` keys the target's link choice
  (stepped) — a hand-off from one part of the arm to another.
- ``keys.control`` (an IK Target with a control bone): [frame, [dx, dy, dz]] rows, the control
  keyed that far (m, root frame) from where it is made, orientation kept, or [frame, {"toward":
  "<another IK Target>", "share": s}] rows, keyed the share s of the way from where it is made to
  where the other's control is made (two hands meeting for a hand-over); ``keys.gripper_value``
  (a Gripper node): [frame, 0..1] rows. The motion of a pick and place, short enough that most
  arms reach it from where they stand (`MOTION_KEYS`).
- ``"control": "bone"`` on an IK Target: applying the preset makes a control bone at the
  link it aims at (as Add IK Target does), so nothing moves when the preset is applied.
- ``"path"`` on a Tool: [[dx, dy, dz], ...] points (m, root frame) from the path's start;
  applying it lays a smooth curve through them (a Bezier with automatic handles) and makes it
  the Tool's Follow Path, a bead traced at the Tool's speed (`MAX_PATH_POINTS` points, each
  within `MAX_CONTROL_OFFSET_M`). The start is the tool centre point where the arm is when the
  preset is applied, or, with an approach, that far ahead along the tool's axis: the approach
  starts where the tool is, so nothing moves.
- Every Robot node binds to the rig the preset is applied to.
- ``requires`` (optional): roles the preset needs even where no node names them (an arm on a
  rail needs the rail), and the fewest revolute joints the arm must have (an elbow swivel
  needs seven).
- ``values.swivel_offset`` (an Elbow Swivel): the angle relative to the arm's own swivel when
  the preset was saved, so applying it to an arm where it was saved unchanged moves nothing.
- ``groups`` (optional): node groups, each ``{"node": "<path>", "tree": "<group name>"}``. The
  nodes are listed flattened, named by their path inside the group ("Arm/IK Target"); applying
  the preset builds the group again (innermost first) and puts a Group node named ``<path>`` in
  its place. Two entries with one tree are one group used twice.

`bind` resolves every role against one robot and returns the concrete plan, or the roles it
could not bind with the reason for each; the Blender side (`blender/presets.py`) builds nothing unless
everything bound.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import KinemaError
from .graph.spec import NODE_KINDS, GraphSpec, LinkSpec, NodeSpec
from .model.robot import RobotModel
from .roles import ROLES, RoleBinding, arm_joints, resolve_roles

FORMAT_VERSION = 1
#: Params that describe one rig, never saved in a preset.
RIG_SPECIFIC_PARAMS = frozenset({"rig", "rig_is_armature", "control", "control_exists", "known_links", "budget_ms"})
#: Params whose string value is a link name (saved as a role). A Gripper node's "hand" (the link
#: its gripper hangs from) is one too; left empty (every gripper) it stays empty.
LINK_PARAMS = frozenset({"link", "hand"})
#: Link params whose empty value means "none" rather than the tool point.
EMPTY_LINK_PARAMS = frozenset({"hand"})


class PresetError(KinemaError):
    """A preset file that cannot be read or used; the message names the file."""


class PresetWarning(UserWarning):
    """A preset file skipped while listing a folder (the others still load); names the file."""


#: Largest preset file read: the shipped ones are ~2 KB.
MAX_PRESET_BYTES = 1024 * 1024
#: Most nodes and links in a preset, and rows in one list of keys or ranges, checked before any
#: node is looked at: a 1 MiB file can name ~20,000 nodes, each a Blender node (and maybe a bone)
#: to build. The shipped presets have at most 6 nodes and 8 links.
MAX_PRESET_NODES = 256
MAX_PRESET_LINKS = 1024
MAX_PRESET_ROWS = 10_000
#: The range of a number a preset may set, by param name (the Blender properties' own limits,
#: or what the quantity can mean: a position tolerance of a metre already accepts any pose). A
#: tolerance of 1e300 makes every solve "converged"; a weight of 1e308 overflows the solver's
#: squared errors to inf. Either would be applied silently, so both are refused.
NUMBER_RANGES: dict[str, tuple[float, float]] = {
    "position_tolerance": (1e-9, 1.0),  # m
    "rotation_tolerance": (1e-9, math.pi),  # rad
    "position_weight": (0.0, 1e6),
    "rotation_weight": (0.0, 1e6),
    "max_iterations": (1, 10_000),
    "margin_mm": (0.0, 1000.0),
    "speed_limit": (0.0, 1e6),
    "configuration_index": (0, 1_000_000),
}
#: Any other number in a preset (a frame, a swivel angle, a value): within this of zero.
MAX_PRESET_NUMBER = 1e7
#: Sockets per node kind (inputs, outputs), as the nodes make them: a preset link must use these.
NODE_SOCKETS = {
    "robot": ((), ("Robot",)), "ik_target": (("Robot", "Link"), ("Target",)), "solver": (("Targets",), ("Solution",)),
    "swivel": (("Solution",), ("Solution",)), "configuration": (("Solution",), ("Solution",)),
    "bake": (("Solution",), ("Solution",)), "link_switch": ((), ("Link",)), "tool": ((), ("Link",)),
    "gripper": (("Solution",), ("Solution",)), "grasp": (("Robot", "Link"), ()),
}
#: Keyed motion a preset may carry, by key name: the node kind it keys. ``keys.control`` on an IK
#: Target with a control bone: [frame, [dx, dy, dz]] rows, the control moved by that much (m, in
#: the robot's root frame) from where it is made, its orientation kept: a motion that scales to
#: no robot, so it is kept short (a pick and place's approach, carry and retract, a few cm).
#: ``keys.gripper_value`` on a Gripper node: [frame, 0..1] rows.
MOTION_KEYS = {"control": "ik_target", "gripper_value": "gripper"}
#: Largest control offset a preset may key (m): farther is a shot, not a setup.
MAX_CONTROL_OFFSET_M = 1.0
#: Most points of a Tool's path in a preset (each a Bezier point of the curve it lays).
MAX_PATH_POINTS = 1000
#: The fields a preset node may have.
NODE_FIELDS = frozenset({"name", "kind", "params", "values", "keys", "control", "path"})


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    nodes: tuple[dict, ...]
    links: tuple[tuple[str, str, str, str], ...]
    path: Path | None = None
    requires: dict = field(default_factory=dict)
    groups: tuple[dict, ...] = ()

    @property
    def roles(self) -> list[str]:
        """Roles this preset needs, in `ROLES` order."""
        found: set[str] = set(self.requires.get("roles", ()))
        _collect_roles([dict(n) for n in self.nodes], found)
        return [role for role in ROLES if role in found] + sorted(found - set(ROLES))

    def to_json(self) -> dict:
        data = {"kinema_preset": FORMAT_VERSION, "name": self.name, "description": self.description,
                "nodes": [dict(n) for n in self.nodes], "links": [list(link) for link in self.links]}
        if self.requires:
            data["requires"] = dict(self.requires)
        if self.groups:
            data["groups"] = [dict(g) for g in self.groups]
        return data


@dataclass
class BoundPreset:
    """A preset bound to one robot: a GraphSpec with real link names, plus what the spec does
    not carry (which targets get a control bone, per-frame values, stepped link keys)."""

    preset: Preset
    spec: GraphSpec
    roles: RoleBinding
    controls: tuple[str, ...] = ()  # IK Target nodes that get a new control bone
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_keys: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    groups: tuple[dict, ...] = ()
    #: node -> {key: [(frame, value), ...]} for `MOTION_KEYS` (control offsets, gripper values).
    motion_keys: dict[str, dict[str, list]] = field(default_factory=dict)
    #: Tool node -> its path's points (m, root frame) from the tool centre point where it is applied.
    paths: dict[str, tuple[tuple[float, float, float], ...]] = field(default_factory=dict)


def _collect_roles(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        if set(value) == {"role"}:
            found.add(str(value["role"]))
            return
        for item in value.values():
            _collect_roles(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_roles(item, found)


def _freeze(value: Any) -> Any:
    """JSON lists -> tuples, so params stay hashable in a GraphSpec."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


# ---- reading and writing ------------------------------------------------------------------

def preset_from_json(data: Any, source: str = "<preset>", path: Path | None = None) -> Preset:
    """Check a preset's JSON and return it; a problem is one line naming `source`."""

    def fail(problem: str):
        raise PresetError(f"{source}: {problem}")

    if not isinstance(data, dict):
        fail("not a Kinema preset (expected a JSON object)")
    version = data.get("kinema_preset")
    if version != FORMAT_VERSION:
        fail(f"not a Kinema preset of version {FORMAT_VERSION} (\"kinema_preset\": {version!r})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        fail("the preset has no name")
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        fail("the preset has no nodes")
    if len(nodes) > MAX_PRESET_NODES:
        fail(f"the preset has {len(nodes)} nodes; refusing more than {MAX_PRESET_NODES}")
    if isinstance(data.get("links"), list) and len(data["links"]) > MAX_PRESET_LINKS:
        fail(f"the preset has {len(data['links'])} links; refusing more than {MAX_PRESET_LINKS}")
    names = set()
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("name"), str) or not node["name"]:
            fail("every node needs a name")
        if node["name"] in names:
            fail(f"two nodes are named '{node['name']}'")
        names.add(node["name"])
        if node.get("kind") not in NODE_KINDS:
            fail(f"node '{node['name']}' has unknown kind {node.get('kind')!r} (known: {', '.join(NODE_KINDS)})")
        for key in ("params", "values", "keys"):
            if not isinstance(node.get(key, {}), dict):
                fail(f"node '{node['name']}': '{key}' must be an object")
        _check_node_fields(node, fail)
    links = data.get("links", [])
    if not isinstance(links, list):
        fail("'links' must be a list")
    for link in links:
        if not (isinstance(link, list) and len(link) == 4 and all(isinstance(x, str) for x in link)):
            fail(f"a link must be [from_node, from_socket, to_node, to_socket], not {link!r}")
        if link[0] not in names or link[2] not in names:
            fail(f"link {link!r} names a node the preset does not have")
        kinds = {n["name"]: n["kind"] for n in nodes}
        if link[1] not in NODE_SOCKETS[kinds[link[0]]][1]:
            fail(f"link {link!r}: node '{link[0]}' ({kinds[link[0]]}) has no output socket '{link[1]}'")
        if link[3] not in NODE_SOCKETS[kinds[link[2]]][0]:
            fail(f"link {link!r}: node '{link[2]}' ({kinds[link[2]]}) has no input socket '{link[3]}'")
    controls = {n["name"] for n in nodes if n["kind"] == "ik_target" and n.get("control") == "bone"}
    for node in nodes:
        for _, value in node.get("keys", {}).get("control", ()):
            if isinstance(value, dict) and (value["toward"] not in controls or value["toward"] == node["name"]):
                fail(f"node '{node['name']}': keys.control toward '{value['toward']}': not another IK Target with "
                     "\"control\": \"bone\" in this preset")
    requires = data.get("requires", {})
    if not isinstance(requires, dict) or not isinstance(requires.get("roles", []), list) \
            or not isinstance(requires.get("arm_joints", 0), int) or isinstance(requires.get("arm_joints", 0), bool) \
            or not all(isinstance(r, str) for r in requires.get("roles", [])) or not 0 <= requires.get("arm_joints", 0) <= 1000 \
            or set(requires) - {"roles", "arm_joints"}:
        fail("'requires' must be {\"roles\": [\"role\", ...], \"arm_joints\": n}")
    if not isinstance(data.get("description", ""), str):
        fail("'description' must be text")
    found: set[str] = set(requires.get("roles", []))
    _collect_roles(nodes, found)
    unknown = sorted(found - set(ROLES))
    if unknown:
        fail(f"unknown role(s) {', '.join(unknown)} (known: {', '.join(ROLES)})")
    groups = data.get("groups", [])
    if not isinstance(groups, list) or not all(
            isinstance(g, dict) and set(g) == {"node", "tree"} and all(isinstance(v, str) and v for v in g.values())
            for g in groups):
        fail("'groups' must be a list of {\"node\": \"<path>\", \"tree\": \"<group name>\"}")
    for group in groups:
        if not any(n["name"].startswith(group["node"] + "/") for n in nodes):
            fail(f"group '{group['node']}' has no nodes (they are named '{group['node']}/<node>')")
    return Preset(name.strip(), str(data.get("description", "")), tuple(nodes), tuple(tuple(x) for x in links), path,
                  dict(requires), tuple(dict(g) for g in groups))


def load_preset(path: str | Path) -> Preset:
    """Read and check a preset file; anything wrong with it (not a regular file, too large,
    not UTF-8, not JSON, nested too deep, a malformed field) is one `PresetError` naming it."""
    from .files import check_input_file

    path = Path(path)
    try:
        check_input_file(path, "preset")
        if path.stat().st_size > MAX_PRESET_BYTES:
            raise PresetError(f"{path}: the preset is {path.stat().st_size} bytes; refusing presets over {MAX_PRESET_BYTES} bytes")
        data = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant)
    except PresetError:
        raise
    except KinemaError as exc:
        raise PresetError(f"{path}: {exc}") from None
    except OSError as exc:
        raise PresetError(f"{path}: cannot read the preset ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise PresetError(f"{path}: not UTF-8 text (byte {exc.start}); presets are UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise PresetError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise PresetError(f"{path}: JSON nested too deep to be a preset") from None
    except ValueError as exc:
        raise PresetError(f"{path}: {exc}") from None
    try:
        return preset_from_json(data, str(path), path)
    except RecursionError:
        raise PresetError(f"{path}: JSON nested too deep to be a preset") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a preset may hold")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and abs(value) <= MAX_PRESET_NUMBER


def _check_range(where: str, key: str, value, fail) -> None:
    """A number outside what its param can mean (`NUMBER_RANGES`), or beyond `MAX_PRESET_NUMBER`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return
    low, high = NUMBER_RANGES.get(key, (-MAX_PRESET_NUMBER, MAX_PRESET_NUMBER))
    if not low <= value <= high:
        fail(f"{where} is {value:g}, outside {low:g} .. {high:g}")


def _is_reference(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("role", "link") \
        and isinstance(next(iter(value.values())), str) and bool(next(iter(value.values())))


def _check_node_fields(node: dict, fail) -> None:
    """Every field of one preset node has the shape the builder expects; else `fail` names it."""
    name = node["name"]
    if set(node) - NODE_FIELDS:
        fail(f"node '{name}': unknown field(s) {', '.join(sorted(set(node) - NODE_FIELDS))}")
    if "path" in node:
        points = node["path"]
        if node["kind"] != "tool":
            fail(f"node '{name}': 'path' belongs on a node of kind tool")
        if not isinstance(points, list) or not 2 <= len(points) <= MAX_PATH_POINTS:
            fail(f"node '{name}': 'path' must be a list of 2 to {MAX_PATH_POINTS} [dx, dy, dz] points")
        for point in points:
            if not (isinstance(point, list) and len(point) == 3 and all(_is_number(v) for v in point)
                    and max(abs(v) for v in point) <= MAX_CONTROL_OFFSET_M):
                fail(f"node '{name}': 'path' points are [dx, dy, dz] within {MAX_CONTROL_OFFSET_M:g} m, not {point!r:.60}")
    if node.get("control") not in (None, "bone"):
        fail(f"node '{name}': 'control' must be \"bone\" (or left out), not {node.get('control')!r}")
    for key, value in node.get("params", {}).items():
        where = f"node '{name}': params.{key}"
        if key in LINK_PARAMS:
            if not (value is None or value == "" or _is_reference(value)):
                fail(f"{where} must be {{\"role\": ...}} or {{\"link\": ...}}, not {value!r:.60}")
        elif node["kind"] == "link_switch" and key == "ranges":
            if isinstance(value, list) and len(value) > MAX_PRESET_ROWS:
                fail(f"{where} has {len(value)} rows; refusing more than {MAX_PRESET_ROWS}")
            if not isinstance(value, list) or not all(
                    isinstance(row, list) and len(row) == 2 and _is_number(row[0]) and _is_reference(row[1]) for row in value):
                fail(f"{where} must be a list of [first_frame, {{\"role\": ...}}] rows")
        elif isinstance(value, list):
            if len(value) > 64 or not all(_is_number(v) or isinstance(v, (str, bool)) for v in value):
                fail(f"{where} must be a short list of numbers")
        else:
            _check_range(where, key, value, fail)
            if not (value is None or isinstance(value, (str, bool)) or _is_number(value)):
                fail(f"{where} must be a number, text or true/false, not {type(value).__name__}")
    for key, value in node.get("values", {}).items():
        _check_range(f"node '{name}': values.{key}", key, value, fail)
        if not (_is_number(value) or isinstance(value, bool)):
            fail(f"node '{name}': values.{key} must be a finite number, not {value!r:.60}")
    keys = node.get("keys", {})
    if set(keys) - {"link", *MOTION_KEYS}:
        fail(f"node '{name}': keys.{sorted(set(keys) - {'link', *MOTION_KEYS})[0]} is not a key a preset can hold "
             f"(only {', '.join(['link', *MOTION_KEYS])})")
    for key, kind in MOTION_KEYS.items():
        if key not in keys:
            continue
        rows = keys[key]
        if node["kind"] != kind or (key == "control" and node.get("control") != "bone"):
            fail(f"node '{name}': keys.{key} belongs on a node of kind {kind}" + (" with \"control\": \"bone\"" if key == "control" else ""))
        if not isinstance(rows, list) or len(rows) > MAX_PRESET_ROWS:
            fail(f"node '{name}': keys.{key} must be a list of at most {MAX_PRESET_ROWS} [frame, value] rows")
        for row in rows:
            if not (isinstance(row, list) and len(row) == 2 and _is_number(row[0])):
                fail(f"node '{name}': keys.{key} rows are [frame, value], not {row!r:.60}")
            value = row[1]
            if key == "control" and not (isinstance(value, list) and len(value) == 3 and all(_is_number(v) for v in value)
                                         and max(abs(v) for v in value) <= MAX_CONTROL_OFFSET_M) and not _is_toward(value):
                fail(f"node '{name}': keys.control rows are [frame, [dx, dy, dz]] within {MAX_CONTROL_OFFSET_M:g} m "
                     f"or [frame, {{\"toward\": \"<IK Target>\", \"share\": 0..1}}], not {row!r:.60}")
            if key == "gripper_value" and not (_is_number(value) and 0.0 <= value <= 1.0):
                fail(f"node '{name}': keys.gripper_value rows are [frame, 0..1], not {row!r:.60}")
    if "link" in keys:
        rows = keys["link"]
        if isinstance(rows, list) and len(rows) > MAX_PRESET_ROWS:
            fail(f"node '{name}': keys.link has {len(rows)} rows; refusing more than {MAX_PRESET_ROWS}")
        if node["kind"] != "ik_target" or not isinstance(rows, list) or not all(
                isinstance(row, list) and len(row) == 2 and _is_number(row[0]) and _is_reference(row[1]) for row in rows):
            fail(f"node '{name}': keys.link must be a list of [frame, {{\"role\": ...}}] rows on an IK Target")


def _is_toward(value) -> bool:
    """A `keys.control` row's value that keys the control part of the way toward another
    target's control: {"toward": "<IK Target>", "share": 0..1}."""
    return isinstance(value, dict) and set(value) == {"toward", "share"} and isinstance(value["toward"], str) \
        and bool(value["toward"]) and _is_number(value["share"]) and 0.0 <= value["share"] <= 1.0


def read_presets(folders: list[Path]) -> list[tuple[Path, Preset]]:
    """Every readable preset in `folders`, in order; an unreadable one is skipped with a
    `PresetWarning` naming it, so one bad file never hides the others."""
    found = []
    for folder in folders:
        folder = Path(folder)
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                found.append((path, load_preset(path)))
            except PresetError as exc:
                warnings.warn(f"skipped preset {path}: {exc}", PresetWarning, stacklevel=2)
    return found


def save_preset(preset: Preset, path: str | Path) -> Path:
    """Write `preset` as JSON (checked by reading it back the way `load_preset` will)."""
    path = Path(path)
    data = preset.to_json()
    from .files import write_text

    preset_from_json(json.loads(json.dumps(data)), str(path))
    return write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n", "preset")


def file_name(name: str) -> str:
    """A preset's file name from its display name: "7-DoF arm with elbow swivel" -> "7_dof_arm_with_elbow_swivel.json"."""
    stem = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "preset"
    return f"{stem}.json"


def find_preset(name: str, folders: list[Path]) -> Path:
    """A preset by display name or file name (with or without .json), first folder first."""
    wanted = {name.lower(), file_name(name)[:-5], Path(name).stem.lower()}
    available = []
    for path, preset in read_presets(folders):
        available.append(preset.name)
        if path.stem.lower() in wanted or preset.name.lower() in wanted:
            return path
    shown = ", ".join(f"'{n}'" for n in available) or "(none)"
    raise PresetError(f"no preset named '{name}'; available presets: {shown}")


# ---- from a graph, to a graph ----------------------------------------------------------------

def _link_reference(link: str, binding: RoleBinding) -> dict:
    role = binding.role_of(link)
    return {"role": role} if role else {"link": link}


def make_preset(spec: GraphSpec, binding: RoleBinding, name: str, description: str = "",
                controls: tuple[str, ...] | None = None, values: dict[str, dict] | None = None,
                link_keys: dict[str, list[tuple[float, str]]] | None = None, groups: list[dict] | None = None,
                paths: dict[str, list] | None = None) -> Preset:
    """A preset from a graph built on one robot: every link becomes the role it fills there.

    An IK Target with no link aims at the tool point (saved as that role). `controls` lists
    the IK Targets that get a control bone when applied (default: all of them); `paths`, a Tool's
    path as points from the tool centre point (see the module docstring).
    """
    nodes = []
    for node in spec.nodes:
        params: dict[str, Any] = {}
        for key, value in node.params:
            if key in RIG_SPECIFIC_PARAMS:
                continue
            if key in EMPTY_LINK_PARAMS and not value:
                value = ""
            elif key in LINK_PARAMS:
                value = _link_reference(value or binding.link("tool_point"), binding)
            elif node.kind == "link_switch" and key == "ranges":
                value = [[first, _link_reference(link, binding)] for first, link in value]
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float):
                value = float(f"{value:.7g}")  # Blender stores float32: 1e-05, not 9.99999974e-06
            params[key] = value
        entry: dict[str, Any] = {"name": node.name, "kind": node.kind}
        if params:
            entry["params"] = params
        if node.kind == "ik_target" and (controls is None or node.name in controls):
            entry["control"] = "bone"
        if values and values.get(node.name):
            entry["values"] = dict(values[node.name])
        if link_keys and link_keys.get(node.name):
            entry["keys"] = {"link": [[float(f), _link_reference(link, binding)] for f, link in link_keys[node.name]]}
        if paths and paths.get(node.name) is not None:
            entry["path"] = [[float(f"{v:.7g}") for v in point] for point in paths[node.name]]
        nodes.append(entry)
    links = tuple((x.from_node, x.from_socket, x.to_node, x.to_socket) for x in spec.links)
    data = {"kinema_preset": FORMAT_VERSION, "name": name, "description": description,
            "nodes": nodes, "links": [list(x) for x in links]}
    if groups:
        data["groups"] = [dict(g) for g in groups]
    return preset_from_json(data, name)


def bind(preset: Preset, robot: RobotModel, overrides: dict[str, str] | None = None) -> tuple[BoundPreset | None, dict[str, str]]:
    """Bind every role of `preset` to `robot` (roles inferred, `overrides` role -> link win).

    Returns (plan, {}) when everything bound, else (None, {role or link: why not}).
    """
    binding = resolve_roles(robot, overrides)
    unbound: dict[str, str] = {}

    def resolve(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"role"}:
            role = value["role"]
            link = binding.link(role)
            if link is None:
                unbound[role] = binding.missing.get(role, "not a role this robot has")
            return link
        if isinstance(value, dict) and set(value) == {"link"}:
            link = value["link"]
            if link not in robot.links:
                unbound[f"link '{link}'"] = "the preset names this link, and this robot has no link of that name"
                return None
            return link
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [resolve(v) for v in value]
        return value

    for role in preset.requires.get("roles", ()):
        resolve({"role": role})
    wanted_joints = int(preset.requires.get("arm_joints", 0))
    if wanted_joints:
        have = len(arm_joints(robot, binding.link("tool_point")))
        if have < wanted_joints:
            unbound["arm"] = (f"needs an arm with {wanted_joints} revolute joints; '{robot.name}' has {have} "
                              "(joints of its torso and gripper do not count)")
    nodes, controls, values, link_keys, motion_keys, paths = [], [], {}, {}, {}, {}
    for node in preset.nodes:
        params = {k: _freeze(resolve(v)) for k, v in node.get("params", {}).items()}
        nodes.append(NodeSpec.make(node["name"], node["kind"], **params))
        if node["kind"] == "ik_target" and node.get("control") == "bone":
            controls.append(node["name"])
        if node.get("values"):
            values[node["name"]] = dict(node["values"])
        keys = node.get("keys", {}).get("link")
        if keys:
            link_keys[node["name"]] = [(float(frame), resolve(link)) for frame, link in keys]
        motion = {key: [(float(frame), value) for frame, value in node["keys"][key]] for key in MOTION_KEYS if key in node.get("keys", {})}
        if motion:
            motion_keys[node["name"]] = motion
        if "path" in node:
            paths[node["name"]] = tuple(tuple(float(v) for v in point) for point in node["path"])
    if unbound:
        return None, unbound
    spec = GraphSpec(tuple(nodes), tuple(LinkSpec(*link) for link in preset.links))
    return BoundPreset(preset, spec, binding, tuple(controls), values, link_keys, preset.groups, motion_keys, paths), {}


def describe_unbound(preset: Preset, robot_name: str, unbound: dict[str, str]) -> str:
    """One line: which roles could not bind and why, and how to fix it."""
    parts = "; ".join(f"{role.replace('_', ' ')}: {why}" for role, why in unbound.items())
    hints = []
    if set(unbound) - {"arm"}:
        hints.append("set the role by hand on the Robot node (Roles)")
    if "arm" in unbound:
        # No role setting adds a joint: say what would work instead.
        wanted = int(preset.requires.get("arm_joints", 0))
        hints.append(f"apply it to an arm with {wanted} revolute joints (a 7-axis arm such as a Panda, an xArm7 or a Sawyer), "
                     "or, on this robot, use a preset that needs no spare joint ('Reach with the tool', "
                     "'Hand-off between two links')" if wanted >= 7 else f"apply it to an arm with {wanted} revolute joints")
    hint = "; or ".join(hints) if len(hints) > 1 else (hints[0] if hints else "choose another preset")
    return (f"preset '{preset.name}' cannot be applied to '{robot_name}': it could not bind {parts}. "
            f"{hint[0].upper()}{hint[1:]}. Nothing was changed.")
