"""MuJoCo models (MJCF) as robots, read through MuJoCo's own compiler.

`mujoco.MjModel.from_xml_path` compiles the file (includes, defaults, ``autolimits``,
``angle="degree"``, ``eulerseq``, mesh folders: everything MJCF means is MuJoCo's to decide),
and the compiled tree is then written out as a URDF that says the same thing:

- each body is a link of the same name; a body without joints hangs from its parent on a fixed
  joint; the world body is the root link ``world`` unless exactly one body hangs from it and
  that body has a free joint: then that body is the root (the free joint is the base);
- hinge and slide joints become revolute/continuous and prismatic joints with MuJoCo's ranges
  (a joint's ``ref`` is its zero). MJCF joints have no speed or force limit of their own: a
  joint's ``<limit>`` carries ``velocity`` only where a velocity actuator's control range gives
  one, and ``effort`` only where the joint's ``actuatorfrcrange`` or its actuators' ranges give
  one; a limit the file does not give is left out (read as "no limit"), never written as 0. A
  joint anchored away from its body's origin, or a second joint in one body, gets a small helper link ``BODY__JOINT`` so that each body's frame is
  exactly MuJoCo's;
- equality constraints that couple two joints linearly (grippers) become mimic joints;
- mesh and primitive geoms become visuals (``contype = conaffinity = 0``) or collisions, with
  their material's colour; meshes point at the files MuJoCo read, placed where MuJoCo puts
  them (its compiler re-centres a mesh; that is undone here);
- each site becomes a link on a fixed joint: a candidate tool point.

Ball joints are refused with a message: a ball has no single axis, and splitting it into three
hinges would make up joint names and limits the file does not have. Free joints below the top
are refused likewise.

The URDF text is what the rig stores, so a saved .blend never needs the MJCF again.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import RobotFileError

#: Largest MJCF file read.
MAX_MJCF_BYTES = 32 * 1024 * 1024
#: Range given to a slide joint MuJoCo leaves unlimited (metres either way).
UNLIMITED_SLIDE = 10.0

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_PLANE, _HFIELD, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH = range(8)
_EQ_JOINT = 2
_TRN_JOINT, _GAIN_FIXED, _BIAS_NONE, _BIAS_AFFINE = 0, 0, 0, 1


def _quat_matrix(q) -> np.ndarray:
    w, x, y, z = (float(v) for v in q)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _transform(pos, quat=None) -> np.ndarray:
    t = np.eye(4)
    if quat is not None:
        t[:3, :3] = _quat_matrix(quat)
    t[:3, 3] = np.asarray(pos, dtype=float)
    return t


def _rpy(r: np.ndarray) -> tuple[float, float, float]:
    """URDF roll-pitch-yaw of a rotation matrix (R = Rz(yaw) Ry(pitch) Rx(roll)), exact to
    rounding at any pitch. Near pitch +-pi/2 roll and yaw each lose precision (each is an atan2
    of two entries of size cos(pitch)): robosuite's YuMi, a body rotated by pitch pi/2 to 1e-12,
    came out 1.1e-5 rad off MuJoCo's own FK. So yaw is taken first, whatever it is, and roll and
    pitch are read from Rz(-yaw) R = Ry(pitch) Rx(roll), which absorbs yaw's error exactly."""
    yaw = math.atan2(r[1, 0], r[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    pitch = math.atan2(-r[2, 0], c * r[0, 0] + s * r[1, 0])
    roll = math.atan2(s * r[0, 2] - c * r[1, 2], c * r[1, 1] - s * r[0, 1])
    return roll, pitch, yaw


def _numbers(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def _origin(t: np.ndarray) -> str:
    if np.allclose(t, np.eye(4), rtol=0, atol=0):
        return ""
    return f'<origin xyz="{_numbers(t[:3, 3])}" rpy="{_numbers(_rpy(t[:3, :3]))}"/>'


def _name(mujoco, model, kind, index: int) -> str:
    return mujoco.mj_id2name(model, kind, index) or ""


def _compile(path: Path):
    try:
        import mujoco
    except ImportError:
        raise RobotFileError(path, "is a MuJoCo model (MJCF); reading it needs the 'mujoco' package (pip install mujoco)") from None
    from .file_checks import read_robot_file

    from .xml_reading import check_no_doctype

    check_no_doctype(read_robot_file(path, MAX_MJCF_BYTES, "MJCF"), path, "MJCF")
    try:
        model = mujoco.MjModel.from_xml_path(str(path.absolute()))
    except Exception as exc:  # noqa: BLE001  (MuJoCo's compiler raises ValueError, sometimes others)
        message = " ".join(str(exc).split()) or type(exc).__name__
        model = _compiled_with_shell_inertia(mujoco, path) if _MASS_WORDS.search(message) else None
        if model is None:
            raise RobotFileError(path, f"MuJoCo's compiler refused it: {message[:400]}") from None
    return mujoco, model


#: Compiler refusals about a mesh's volume or a body's mass: what the mesh inertia "shell" mends.
_MASS_WORDS = re.compile(r"mesh volume is too small|inertia", re.IGNORECASE)


def _compiled_with_shell_inertia(mujoco, path: Path):
    """The model compiled again with every mesh's inertia taken from its surface (MuJoCo's own
    advice for thin or open meshes, e.g. robosuite 1.5.1's Sawyer head under MuJoCo 4), or None.
    Only masses change; the kinematics read from the model and the meshes' placement (the
    re-centring is undone from the compiled model's own offsets) are the same."""
    try:
        spec = mujoco.MjSpec.from_file(str(path.absolute()))
        for mesh in spec.meshes:
            mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
        return spec.compile()
    except Exception:  # noqa: BLE001  (the first refusal is the one reported)
        return None


class _Writer:
    """Collects URDF links and joints, keeping names unique."""

    def __init__(self) -> None:
        self.links: dict[str, list[str]] = {}
        self.joints: list[str] = []
        self.names: set[str] = set()
        self.joint_names: set[str] = set()

    def unique(self, name: str, taken: set[str]) -> str:
        out, count = name, 1
        while out in taken:
            count += 1
            out = f"{name}_{count}"
        taken.add(out)
        return out

    def link(self, name: str) -> str:
        name = self.unique(name, self.names)
        self.links[name] = []
        return name

    def joint(self, name: str, kind: str, parent: str, child: str, origin: np.ndarray, extra: str = "") -> str:
        name = self.unique(name, self.joint_names)
        self.joints.append(
            f'  <joint name={quoteattr(name)} type="{kind}"><parent link={quoteattr(parent)}/><child link={quoteattr(child)}/>'
            f"{_origin(origin)}{extra}</joint>"
        )
        return name

    def text(self, name: str) -> str:
        parts = [f'<?xml version="1.0"?>\n<robot name={quoteattr(name)}>']
        for link, elements in self.links.items():
            parts.append(f"  <link name={quoteattr(link)}>" + "".join(elements) + "</link>")
        parts.extend(self.joints)
        parts.append("</robot>\n")
        return "\n".join(parts)


def urdf_from_mjcf(path: str | Path, search=None) -> tuple[str, list[str]]:
    """(URDF text, notes) for an MJCF file. Raises `RobotFileError` (one line naming the file)."""
    path = Path(path)
    from .mjcf_files import check_mjcf_files

    check_mjcf_files(path, search)
    mujoco, model = _compile(path)
    obj = mujoco.mjtObj
    notes: list[str] = []
    w = _Writer()

    body_name = {0: "world"}
    for b in range(1, model.nbody):
        body_name[b] = _name(mujoco, model, obj.mjOBJ_BODY, b) or f"body{b}"
    joint_name = {j: _name(mujoco, model, obj.mjOBJ_JOINT, j) or f"{body_name[int(model.jnt_bodyid[j])]}_joint{j}" for j in range(model.njnt)}

    top = [b for b in range(1, model.nbody) if int(model.body_parentid[b]) == 0]
    for j in range(model.njnt):
        kind, body = int(model.jnt_type[j]), int(model.jnt_bodyid[j])
        if kind == _BALL:
            raise RobotFileError(
                path, f"body '{body_name[body]}' has a ball joint '{joint_name[j]}'; ball joints are refused "
                "(a ball has no single axis: make it three hinges in the MJCF)"
            )
        if kind == _FREE and int(model.body_parentid[body]) != 0:
            raise RobotFileError(path, f"body '{body_name[body]}' has a free joint '{joint_name[j]}' below the top of the tree; only a top body may float")

    def has_free(b: int) -> bool:
        return any(int(model.jnt_type[j]) == _FREE for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]))

    speed, effort = _actuator_limits(model)
    link_of: dict[int, str] = {}
    if len(top) == 1 and has_free(top[0]):
        root_body = top[0]
        link_of[root_body] = w.link(body_name[root_body])
        notes.append(f"free joint of body '{body_name[root_body]}' taken as the base")
        world_geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) == 0]
        if world_geoms:
            notes.append(f"{len(world_geoms)} geom(s) of the world body left out (the robot's base floats)")
    else:
        link_of[0] = w.link("world")
        root_body = 0

    for b in range(1, model.nbody):
        if b == root_body:
            continue
        parent = int(model.body_parentid[b])
        parent_link = link_of[parent]
        base = _transform(model.body_pos[b], model.body_quat[b])
        joints = list(range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]))
        if any(int(model.jnt_type[j]) == _FREE for j in joints):
            # a top body that floats while others hang from the world too: held at its start
            notes.append(f"free joint of body '{body_name[b]}' held at its starting pose")
            joints = [j for j in joints if int(model.jnt_type[j]) != _FREE]
        if not joints:
            link_of[b] = w.link(body_name[b])
            w.joint(f"{body_name[b]}_fixed", "fixed", parent_link, link_of[b], base)
            continue
        origin = base
        previous = parent_link
        for k, j in enumerate(joints):
            anchor = np.asarray(model.jnt_pos[j], dtype=float)
            last = k == len(joints) - 1
            centred = not np.any(anchor)
            child = w.link(body_name[b]) if last and centred else w.link(f"{body_name[b]}__{joint_name[j]}")
            origin = origin @ _transform(anchor)
            axis = np.asarray(model.jnt_axis[j], dtype=float)
            ref = float(model.qpos0[model.jnt_qposadr[j]])
            if ref != 0.0:
                notes.append(f"joint '{joint_name[j]}' has ref {ref:g}: its zero is MuJoCo's ref position")
            limited = bool(model.jnt_limited[j])
            lo, hi = (float(v) - ref for v in model.jnt_range[j])
            if int(model.jnt_type[j]) == _HINGE:
                kind = "revolute" if limited else "continuous"
            else:
                kind = "prismatic"
                if not limited:
                    lo, hi = -UNLIMITED_SLIDE, UNLIMITED_SLIDE
                    notes.append(f"slide joint '{joint_name[j]}' has no range; given ±{UNLIMITED_SLIDE:g} m")
            extra = f'<axis xyz="{_numbers(axis)}"/>'
            rates = "".join(f' {what}="{value!r}"' for what, value in (("effort", effort.get(j)), ("velocity", speed.get(j)))
                            if value is not None)
            if kind != "continuous":
                extra += f'<limit lower="{lo!r}" upper="{hi!r}"{rates}/>'
            elif rates:
                extra += f"<limit{rates}/>"
            w.joint(joint_name[j], kind, previous, child, origin, extra)
            previous = child
            origin = _transform(-anchor)
            if last:
                if centred:
                    link_of[b] = child
                else:
                    link_of[b] = w.link(body_name[b])
                    w.joint(f"{body_name[b]}__anchor", "fixed", child, link_of[b], origin)

    note = _degrees_note(model)
    if note:
        notes.append(note)
    _mimics(mujoco, model, path, w, joint_name, notes)
    _geoms(mujoco, model, path, w, link_of, root_body, notes)

    for s in range(model.nsite):
        body = int(model.site_bodyid[s])
        if body not in link_of:
            continue
        name = w.link(_name(mujoco, model, obj.mjOBJ_SITE, s) or f"site{s}")
        w.joint(f"{name}_site", "fixed", link_of[body], name, _transform(model.site_pos[s], model.site_quat[s]))

    robot_name = _model_name(path) or path.stem
    return w.text(robot_name), notes


def _actuator_limits(model) -> tuple[dict[int, float], dict[int, float]]:
    """(joint -> speed limit, joint -> force limit) from what the MJCF says, in the joint's units.

    A velocity actuator (a servo whose bias is ``-kv * velocity``) takes a target speed: its
    control range, over its gear, is the joint's speed limit. A force limit is the joint's
    ``actuatorfrcrange``, else an actuator's ``forcerange``, else a motor's control range times its
    gear. Joints without any of these are absent: no limit."""
    speed: dict[int, float] = {}
    force: dict[int, float] = {}
    for j in range(model.njnt):
        if bool(model.jnt_actfrclimited[j]):
            force[j] = float(np.max(np.abs(model.jnt_actfrcrange[j])))
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) != _TRN_JOINT:
            continue
        j, gear = int(model.actuator_trnid[a][0]), abs(float(model.actuator_gear[a][0]))
        if j < 0 or gear == 0:
            continue
        reach = float(np.max(np.abs(model.actuator_ctrlrange[a]))) if bool(model.actuator_ctrllimited[a]) else math.inf
        gain, bias = model.actuator_gainprm[a], model.actuator_biasprm[a]
        fixed_gain = int(model.actuator_gaintype[a]) == _GAIN_FIXED and float(gain[0]) != 0
        servo_on_speed = (int(model.actuator_biastype[a]) == _BIAS_AFFINE and float(bias[0]) == 0 and float(bias[1]) == 0
                          and float(bias[2]) == -float(gain[0]))
        if fixed_gain and servo_on_speed and math.isfinite(reach) and reach > 0:
            speed[j] = max(speed.get(j, 0.0), reach / gear)
        if j in force:
            continue
        if bool(model.actuator_forcelimited[a]):
            force[j] = float(np.max(np.abs(model.actuator_forcerange[a]))) * gear
        elif fixed_gain and int(model.actuator_biastype[a]) == _BIAS_NONE and math.isfinite(reach) and reach > 0:
            force[j] = reach * abs(float(gain[0])) * gear
    return {j: v for j, v in speed.items() if v > 0}, {j: v for j, v in force.items() if v > 0}


def _model_name(path: Path) -> str | None:
    try:
        head = path.read_bytes()[:4096]
    except OSError:
        return None
    match = re.search(rb"<mujoco[^>]*\smodel\s*=\s*[\"']([^\"']+)[\"']", head)
    return match.group(1).decode("utf-8", "replace") if match else None


#: How a note that asks something of the user begins (the import reports it as a warning).
ATTENTION = "check the file: "
#: Every limited hinge within this (rad, about 3.2 degrees): radians read as degrees, most likely.
DEGREES_SUSPECT_RAD = float(np.radians(3.2))


def _degrees_note(model) -> str | None:
    """The note for a file whose every limited hinge range lies within +-3.2 degrees: MuJoCo
    reads angles in degrees unless `<compiler angle="radian">` says otherwise, so a file that
    wrote radians without it (robosuite-models' ALOHA, its compiler line commented out) imports as
    an arm that can hardly move. MuJoCo's reading stands (it is the file's meaning); the note says
    what to change."""
    hinges = [j for j in range(model.njnt) if int(model.jnt_type[j]) == _HINGE and bool(model.jnt_limited[j])]
    if not hinges:
        return None
    widest = float(np.abs(model.jnt_range[hinges]).max())
    if widest == 0.0 or widest > DEGREES_SUSPECT_RAD:
        return None
    return (f"{ATTENTION}every hinge's range is within ±{np.degrees(widest):.2f}°: MuJoCo reads angles in degrees unless "
            '<compiler angle="radian"/> says otherwise; if the file\'s numbers are radians, add that line to it')


def _mimics(mujoco, model, path, w: _Writer, joint_name, notes) -> None:
    """Equality constraints on joints, as mimic joints (only linear couplings).

    A joint may follow one that itself follows another (MuJoCo compiles such chains); a URDF
    mimic names an actuated joint, so each chain is resolved to its root joint, the offsets and
    multipliers composed: ``q1 = a + b q2`` and ``q2 = c + d q3`` give ``q1 = (a + b c) + b d q3``."""
    follows: dict[str, tuple[str, float, float]] = {}  # joint -> (the joint it follows, offset, multiplier)
    for e in range(model.neq):
        if int(model.eq_type[e]) != _EQ_JOINT:
            continue
        j1, j2 = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        coef = [float(v) for v in model.eq_data[e][:5]]
        if not bool(model.eq_active0[e]):
            notes.append(f"equality on joint '{joint_name[j1]}' is inactive; left out")
            continue
        if j2 < 0:
            notes.append(f"equality holds joint '{joint_name[j1]}' at {coef[0]:g}; left free")
            continue
        if any(abs(c) > 0 for c in coef[2:]):
            notes.append(f"equality couples '{joint_name[j1]}' to '{joint_name[j2]}' by a polynomial; not a mimic, left free")
            continue
        name1, name2 = joint_name[j1], joint_name[j2]
        if name1 in follows:
            notes.append(f"second equality on joint '{name1}' left out")
            continue
        leader = name2
        while leader in follows and leader != name1:
            leader = follows[leader][0]
        if leader == name1:
            notes.append(f"equality of '{name1}' on '{name2}' closes a loop of couplings; left out")
            continue
        follows[name1] = (name2, coef[0], coef[1])

    for name1, (name2, offset, multiplier) in follows.items():
        root, path_names = name2, [name1, name2]
        while root in follows:
            step_leader, step_offset, step_multiplier = follows[root]
            offset, multiplier = offset + multiplier * step_offset, multiplier * step_multiplier
            root = step_leader
            path_names.append(root)
        if len(path_names) > 2:
            notes.append(f"joint '{name1}' follows " + ", which follows ".join(f"'{n}'" for n in path_names[1:])
                         + f": a mimic of '{root}'")
        pattern = re.compile(r"(<joint name=" + re.escape(quoteattr(name1)) + r" type=\"[a-z]+\">.*?)</joint>")
        for i, text in enumerate(w.joints):
            if pattern.match(text.strip()):
                mimic = f'<mimic joint={quoteattr(root)} multiplier="{multiplier!r}" offset="{offset!r}"/>'
                w.joints[i] = text[: -len("</joint>")] + mimic + "</joint>"
                break


def _material(mujoco, model, g: int) -> str:
    mat = int(model.geom_matid[g])
    rgba = model.mat_rgba[mat] if mat >= 0 else model.geom_rgba[g]
    name = (_name(mujoco, model, mujoco.mjtObj.mjOBJ_MATERIAL, mat) if mat >= 0 else "") or "rgba_" + "_".join(f"{v:.3f}" for v in rgba)
    return f'<material name={quoteattr(name)}><color rgba="{_numbers(rgba)}"/></material>'


def _geoms(mujoco, model, path: Path, w: _Writer, link_of, root_body, notes) -> None:
    skipped: dict[str, int] = {}
    # A model whose every geom collides (one MuJoCo wrote from a URDF) is drawn by its collision geoms.
    any_visual = any(int(model.geom_contype[g]) == 0 and int(model.geom_conaffinity[g]) == 0 for g in range(model.ngeom))
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        if body not in link_of:
            continue
        kind = int(model.geom_type[g])
        size = [float(v) for v in model.geom_size[g]]  # Python floats: numpy 2's repr is np.float64(...)
        place = _transform(model.geom_pos[g], model.geom_quat[g])
        if kind == _SPHERE:
            shape = f'<sphere radius="{size[0]!r}"/>'
        elif kind == _BOX:
            shape = f'<box size="{_numbers(2 * v for v in size[:3])}"/>'
        elif kind == _CYLINDER:
            shape = f'<cylinder radius="{size[0]!r}" length="{2 * size[1]!r}"/>'
        elif kind == _CAPSULE:
            shape = f'<cylinder radius="{size[0]!r}" length="{2 * (size[1] + size[0])!r}"/>'
            skipped["capsule (drawn as a cylinder)"] = skipped.get("capsule (drawn as a cylinder)", 0) + 1
        elif kind == _MESH:
            mesh = int(model.geom_dataid[g])
            address = int(model.mesh_pathadr[mesh])
            if address < 0:
                skipped["mesh without a file"] = skipped.get("mesh without a file", 0) + 1
                continue
            filename = bytes(model.paths[address:]).split(b"\x00", 1)[0].decode("utf-8", "replace")
            file_path = Path(filename)
            if not file_path.is_absolute():
                file_path = (path.absolute().parent / file_path)
            # MuJoCo re-centres a mesh on its inertial frame and moves the geom to match; the
            # file's own frame is the geom's frame with that shift undone.
            place = place @ np.linalg.inv(_transform(model.mesh_pos[mesh], model.mesh_quat[mesh]))
            shape = f'<mesh filename={quoteattr(str(file_path))} scale="{_numbers(model.mesh_scale[mesh])}"/>'
        else:
            label = {_PLANE: "plane", _HFIELD: "height field", _ELLIPSOID: "ellipsoid"}.get(kind, f"geom type {kind}")
            skipped[label] = skipped.get(label, 0) + 1
            continue
        visual = not any_visual or (int(model.geom_contype[g]) == 0 and int(model.geom_conaffinity[g]) == 0)
        role = "visual" if visual else "collision"
        material = _material(mujoco, model, g) if visual else ""
        w.links[link_of[body]].append(f"<{role}>{_origin(place)}<geometry>{shape}</geometry>{material}</{role}>")
    for label, count in skipped.items():
        notes.append(f"{count} {label} geom(s) {'left out' if 'drawn' not in label else ''}".rstrip())
