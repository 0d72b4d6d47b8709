"""A control bone's pose at a frame from its own F-curves, before Blender evaluates the frame (#33).

The live frame solves in `frame_change_pre` when every control of a plain step is a bone of the
rig whose pose comes only from its own keys: the solve's write then rides the frame's one
depsgraph evaluation instead of causing a second one (`frame_change_post` writes after the
evaluation, and Blender evaluates again for it). `KeyedControl.pose` computes the pose matrix
the evaluation will give, in float32 with the operations of Blender's own pose evaluation
(`BKE_pchan_to_mat4`, `BKE_bone_parent_transform_calc_from_matrices` and `_apply`), so that it
is the same matrix, bit for bit. `frame_change_post` still reads the evaluated matrix and
solves again whenever it is not (the fast frame's fingerprint): the answer is the one the post
route gives in every case, and this route only saves work when its prediction holds.

Taken only where nothing else can move the control (anything else keeps the post route):
- the control is a bone of the rig with rotation mode Quaternion, no constraints, default
  parenting flags (not connected, inherits rotation and full scale, local location), and either
  no parent or a root parent bone that itself has no constraints, no keys, no drivers and no joint;
- no driver writes the control or its parent; no F-curve of the control or its parent is muted,
  in a muted group or invalid; no F-curve keys a joint channel the solve writes;
- the rig's animation is one action on its slot, no NLA tracks, influence 1, blend Replace,
  not in tweak mode, no manual frame range; the armature shows its pose (not Rest Position).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.graph.program import bone_goal

_F32 = np.float32
#: (rig pointer, bone name) -> (generation, KeyedControl or None, Misses)
_CACHE: dict = {}
#: Frames a control that missed twice at one generation is left to the post route before it is
#: predicted again; doubled at each miss after, up to `LEFT_AT_MOST`.
LEFT_FOR = 32
LEFT_AT_MOST = 4096


def reset_caches() -> None:
    _CACHE.clear()


class KeyedControl:
    """One control bone's F-curves and the static part of its pose (its parent transform)."""

    __slots__ = ("curves", "constants", "rotscale", "columns", "poses", "goals", "rig", "action", "pointers",
                 "signature")

    def __init__(self, curves, constants, rotscale, rig, action, pointers, signature):
        #: ten channels (location 3, rotation_quaternion 4, scale 3): the F-curve's place in its
        #: channel bag, or None (constant)
        self.curves = curves
        #: the rig, its action's address and its channel bag's F-curves' addresses when this was
        #: made: a script may remove a curve between two frames with no depsgraph update between
        #: (no new generation); `pose` reads the curves afresh and takes them only when they are
        #: these, so a curve freed since is never touched
        self.rig, self.action, self.pointers = rig, action, pointers
        self.constants = constants  # the bone's own value of each channel not keyed
        self.rotscale = rotscale  # float32 [column][row]: the parent transform's rotscale (= loc) matrix
        self.columns = [rotscale[k].tolist() for k in range(4)]
        #: frame -> pose: a scrub or a looped playback meets each frame again, and the keys have not
        #: changed while this object lives (it is checked again after every depsgraph update, and
        #: kept only where its `signature` is the same; a key a script moves without one is caught
        #: after the evaluation, which solves again)
        self.poses: dict = {}
        self.goals: dict = {}  # frame -> (pose, position, wxyz): `goal`
        #: everything its poses are made from (`_signature`); one built again after an edit with the
        #: same signature is this one, whose poses stand
        self.signature = signature

    def goal(self, frame: float) -> tuple | None:
        """(`pose`, its position, its rotation as wxyz, both as arrays) at `frame`, made once per frame met (a
        scrub meets frames again and the quaternion costs as much as the pose's lookup), or None
        where `pose` is None or the pose has no usable rotation or position (the post route then
        answers, and says why)."""
        known = self.goals.get(frame)
        if known is not None:
            return known
        flat = self.pose(frame)
        goal = None if flat is None else bone_goal(flat)
        if goal is None:
            return None
        if len(self.goals) >= _POSES_KEPT:
            self.goals.clear()
        position, wxyz = goal
        # and as the (1, 3) and (1, 4) float64 arrays a one-target solve takes as they are
        known = self.goals[frame] = (flat, position, wxyz, np.array((position,)), np.array((wxyz,)))
        return known

    def pose(self, frame: float) -> list | None:
        """The control's pose matrix (armature space) at `frame`, as 16 floats column after
        column (what `LiveRig.control_rows` reads after the evaluation), or None when a channel
        is not finite or the curves are not the ones this was made with (the post route then
        answers). The list is shared: not to be changed.

        A frame not met yet is computed with its neighbours (`WINDOW`: playback and scrubbing
        meet them next), in NumPy float32 arrays, one element per frame: each float32 operation
        is IEEE single precision, element by element, the operations of Blender's C in its order."""
        known = self.poses.get(frame)
        if known is not None:
            return known
        try:
            anim = self.rig.animation_data
            action = anim.action if anim is not None else None
            if action is None or action.as_pointer() != self.action:
                return None
            from bpy_extras import anim_utils

            bag = anim_utils.action_get_channelbag_for_slot(action, anim.action_slot)
            fcurves = list(bag.fcurves) if bag is not None else ()
            if tuple(curve.as_pointer() for curve in fcurves) != self.pointers:
                return None
        except ReferenceError:  # the rig itself was removed
            return None
        frames = [frame + k for k in range(-WINDOW[0], WINDOW[1] + 1)]
        channels = np.array([[fcurves[c].evaluate(f) for f in frames] if c is not None else [k] * len(frames)
                             for c, k in zip(self.curves, self.constants)], dtype=_F32)  # float32 already
        finite = np.isfinite(channels).all(axis=0)
        if not finite.all():
            channels[:, ~finite] = 0.0
        poses = _poses(channels, self.columns)
        if len(self.poses) >= _POSES_KEPT:
            self.poses.clear()
        for f, ok, pose in zip(frames, finite.tolist(), poses):
            if ok:
                self.poses[f] = pose
        return self.poses.get(frame)


#: Frames computed together when a pose is asked for a frame not met yet (before, after it).
WINDOW = (24, 40)


def _poses(channels: np.ndarray, columns) -> list:
    """Each frame's pose (16 floats, column after column) from its ten channels (rows of
    `channels`, float32: location, rotation_quaternion, scale; one column per frame), with the
    static parent transform `columns` (float32 [column][row])."""
    with np.errstate(divide="ignore", invalid="ignore"):
        l0, l1, l2, w, x, y, z, s0, s1, s2 = channels
        # normalize_qt: the dot product left to right, then q * (1 / length), all float32
        length = np.sqrt(((w * w + x * x) + y * y) + z * z)
        inverse = _F32(1.0) / length
        zero = length == 0.0
        w, x, y, z = w * inverse, x * inverse, y * inverse, z * inverse
        if zero.any():  # normalize_qt's answer for a zero quaternion
            w, x, y, z = (np.where(zero, _F32(v), c) for v, c in ((0.0, w), (1.0, x), (0.0, y), (0.0, z)))
        # quat_to_mat3: in double, each entry rounded to float
        q0, q1, q2, q3 = (_SQRT2 * c.astype(np.float64) for c in (w, x, y, z))
        qda, qdb, qdc = q0 * q1, q0 * q2, q0 * q3
        qaa, qab, qac = q1 * q1, q1 * q2, q1 * q3
        qbb, qbc, qcc = q2 * q2, q2 * q3, q3 * q3
        m = [(1.0 - qbb - qcc, qdc + qab, -qdb + qac),
             (-qdc + qab, 1.0 - qaa - qcc, qda + qbc),
             (qdb + qac, -qda + qbc, 1.0 - qaa - qbb)]
        # times the diagonal size matrix: column i by size i (its zeros add nothing; x * 1 is x)
        m = [[e.astype(_F32) * s for e in column] for column, s in zip(m, (s0, s1, s2))]
        a0, a1, a2, a3 = ([_F32(v) for v in column] for column in columns)
        out = []
        # mul_m4_m4m4(out, rotscale, chan), columns 0-2: (c0*A[0] + c1*A[1]) + c2*A[2] (chan's fourth entry is 0)
        for c0, c1, c2 in m:
            out += [(c0 * a0[r] + c1 * a1[r]) + c2 * a2[r] for r in range(4)]
        # column 3: mul_v3_m4v3(loc_mat, loc) = ((l0*A[0] + l1*A[1]) + A[2]*l2) + A[3] in rows 0-2,
        # and mul_m4_m4m4's (l0*A[0] + l1*A[1]) + (l2*A[2] + 1*A[3]) in row 3
        out += [((l0 * a0[r] + l1 * a1[r]) + a2[r] * l2) + a3[r] for r in range(3)]
        out.append((l0 * a0[3] + l1 * a1[3]) + (l2 * a2[3] + a3[3]))
    return np.array(out, dtype=_F32).T.tolist()


_POSES_KEPT = 4096
_SQRT2 = float(np.sqrt(2.0))  # M_SQRT2: the double nearest the square root of 2



class Misses(NamedTuple):
    """How often a control's prediction missed at one generation, and for how many more asks it is
    left to the post route."""

    generation: int | None = None
    count: int = 0
    left: int = 0


def keyed_control(rig, bone_name: str, written_bones, generation: int) -> KeyedControl | None:
    """The control's KeyedControl, or None where its pose may come from anything but its own
    F-curves (module doc), or while it is left to the post route after its misses
    (`mispredicted`). Checked again after anything could have changed (`generation`)."""
    key = (rig.as_pointer(), bone_name)
    found = _CACHE.get(key)
    misses = Misses() if found is None else found[2]
    if found is not None and found[0] == generation:
        if misses.left > 1:
            _CACHE[key] = (generation, None, misses._replace(left=misses.left - 1))
            return None
        if misses.left == 0:
            return found[1]
    try:
        keyed = _build(rig, bone_name, written_bones)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, ReferenceError):
        keyed = None
    if (keyed is not None and keyed.signature is not None and found is not None and found[1] is not None
            and found[1].signature == keyed.signature):
        keyed = found[1]  # an edit elsewhere (a selection, another object): the poses worked out stand
        keyed.rig = rig  # this update's wrapper: an undo or a file load leaves the one before dangling
    if len(_CACHE) >= 32:
        _CACHE.clear()
    _CACHE[key] = (generation, keyed, misses._replace(left=0))
    return keyed


def mispredicted(rig, bone_name: str, generation: int) -> None:
    """Blender evaluated the control elsewhere than its KeyedControl said (`frame_change_post`'s
    check). F-curves a script edits with no depsgraph update before the next frame change leave
    the generation where it was, so the control is built again from its F-curves for the next
    frame. One that misses again at this generation is left to the post route (which solves it
    once a frame, instead of both routes) for `LEFT_FOR` frames, then predicted again, twice as
    long after each further miss: a script that edits keys now and then, with no edit Blender
    sees, would otherwise leave every later frame to the post route."""
    key = (rig.as_pointer(), bone_name)
    found = _CACHE.get(key)
    if found is None or found[0] != generation:
        return
    misses = found[2]
    count = misses.count + 1 if misses.generation == generation else 1
    if count == 1:
        _CACHE[key] = (None, None, Misses(generation, 1, 0))
    else:
        _CACHE[key] = (generation, None, Misses(generation, count, min(LEFT_FOR << (count - 2), LEFT_AT_MOST)))


_DEFAULT_FLAGS = (False, True, "FULL", True)  # use_connect, use_inherit_rotation, inherit_scale, use_local_location


def _plain_bone(bone) -> bool:
    return (bone.use_connect, bone.use_inherit_rotation, bone.inherit_scale, bone.use_local_location) == _DEFAULT_FLAGS


def _build(rig, bone_name: str, written_bones) -> KeyedControl | None:
    pose_bones = rig.pose.bones
    control = pose_bones.get(bone_name)
    anim = rig.animation_data
    if control is None or anim is None or rig.data.pose_position != "POSE":
        return None
    if control.rotation_mode != "QUATERNION" or len(control.constraints) or not _plain_bone(control.bone):
        return None
    parent = control.parent
    if parent is not None and (parent.parent is not None or len(parent.constraints) or parent.name in written_bones):
        return None
    action = anim.action
    if (action is None or len(anim.nla_tracks) or anim.use_tweak_mode or anim.action_influence != 1.0
            or anim.action_blend_type != "REPLACE" or action.use_frame_range):
        return None
    owners = {f'pose.bones["{bone_name}"]'}
    if parent is not None:
        owners.add(f'pose.bones["{parent.name}"]')
    for driver in anim.drivers:
        if driver.data_path.rsplit(".", 1)[0] in owners:
            return None
    from bpy_extras import anim_utils

    channelbag = anim_utils.action_get_channelbag_for_slot(action, anim.action_slot)
    if channelbag is None:
        return None
    written = {f'pose.bones["{name}"]' for name in written_bones}
    own = f'pose.bones["{bone_name}"]'
    curves = [None] * 10
    first = {"location": 0, "rotation_quaternion": 3, "scale": 7}
    for place, curve in enumerate(channelbag.fcurves):
        owner, _, prop = curve.data_path.rpartition(".")
        if owner in written or (parent is not None and owner == f'pose.bones["{parent.name}"]'):
            return None  # a keyed joint channel (our write would be overwritten) or a keyed parent
        if owner != own:
            continue
        if curve.mute or not curve.is_valid or (curve.group is not None and curve.group.mute):
            return None
        if prop in first:
            index = curve.array_index
            width = 4 if prop == "rotation_quaternion" else 3
            if not 0 <= index < width:
                return None
            curves[first[prop] + index] = place
    if all(c is None for c in curves):
        return None  # nothing keyed: the post route (whose frames a still control answers at once)
    constants = [*control.location, *control.rotation_quaternion, *control.scale]
    bone = control.bone
    if parent is None:
        rotscale = np.array(bone.matrix_local, dtype=_F32).T.copy()  # arm_mat, [column][row]
    else:
        # BKE_bone_offset_matrix_get: bone_mat with the head, plus the parent's length along y
        offset = np.zeros((4, 4), dtype=_F32)
        offset[:3, :3] = np.array(bone.matrix, dtype=_F32).T
        offset[3, :3] = np.array(bone.head, dtype=_F32)
        offset[3, 1] += _F32(parent.bone.length)
        offset[3, 3] = 1.0
        parent_pose = np.array(parent.matrix, dtype=_F32).T  # static: no keys, constraints or parent
        rotscale = (offset[:, 0:1] * parent_pose[0] + offset[:, 1:2] * parent_pose[1]) + (
            offset[:, 2:3] * parent_pose[2] + offset[:, 3:4] * parent_pose[3])
    if not np.isfinite(rotscale).all():
        return None
    fcurves = channelbag.fcurves
    pointers = tuple(curve.as_pointer() for curve in fcurves)
    rotscale, address = rotscale.astype(_F32), action.as_pointer()
    signature = _signature(fcurves, curves, constants, rotscale, address, pointers)
    return KeyedControl(curves, constants, rotscale, rig, address, pointers, signature)


#: What a key holds that its F-curve's value between keys is made from (foreach_get: name, floats a key)
_KEY_FIELDS = (("co", 2), ("handle_left", 2), ("handle_right", 2), ("interpolation", 1), ("easing", 1),
               ("back", 1), ("amplitude", 1), ("period", 1))


def _signature(fcurves, curves, constants, rotscale, action: int, pointers: tuple) -> tuple | None:
    """Everything a KeyedControl's poses are made from: its curves' keys (each field of
    `_KEY_FIELDS`) and extrapolation, the values of the channels not keyed, the parent transform
    and the curves' addresses; None (never equal) where a curve has a modifier, whose settings are not read here.
    Equal signatures give equal poses; one that misses something costs no wrong answer, since
    frame_change_post checks each prediction against Blender's evaluation."""
    keys = []
    for place in curves:
        if place is None:
            continue
        curve = fcurves[place]
        if len(curve.modifiers):
            return None
        points = curve.keyframe_points
        count = len(points)
        for field, width in _KEY_FIELDS:
            values = np.empty(count * width, dtype=np.float64)
            points.foreach_get(field, values)
            keys.append(values.tobytes())
        keys.append(curve.extrapolation)
    unkeyed = tuple(value for place, value in zip(curves, constants) if place is None)  # a keyed channel's value is the frame's
    return (tuple(curves), unkeyed, rotscale.tobytes(), action, pointers, tuple(keys))
