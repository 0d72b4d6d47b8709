"""The rig contract: how joint values live on an imported armature.

One bone per URDF link, named as the link, whose rest matrix is the link's pose at zero joint
values. Each movable joint moves its child link's bone through ONE channel:

- a revolute/continuous joint whose axis is a coordinate axis of the link frame (nearly every
  real robot) turns an Euler channel (`rotation_euler[k]`, mode XYZ); the axis' sign is folded
  into the channel's scale, so `channel = scale * joint value`;
- a prismatic joint on a coordinate axis slides `location[k]`;
- any other axis turns the angle of an AXIS_ANGLE rotation whose axis is fixed to the joint's
  (`rotation_axis_angle[0]`), or, for a slide, a `kinema_slide` custom property on the bone
  that drives its three location channels (a custom property, not a registered one: Blender's
  depsgraph files a registered pose-bone property under the bone's own transform, so a driver
  from it to the same bone's location is a dependency cycle and a pose can lag a write).

All other channels are locked. Mimic joints are driven from their source joint's channel, so
they follow sliders, keys and solvers alike. The evaluator, the Joints panel and Bake all go
through the functions here: `read_joint_values`, `write_joint_values`, `joint_channel`,
`key_joint_values`, `robot_for_rig`; the live frame reads and writes through `live_rig` (a
`LiveRig`: the same channels, the same clamp and refusals, buffers kept from frame to frame).

The rig carries its URDF text (and where it came from) in the armature data, so a saved
.blend is self-contained; `robot_for_rig` rebuilds the RobotModel from it, cached by hash.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import bpy
import numpy as np

from ..core.errors import KinemaError
from ..core.lru import LRU
from ..core.model.bones import bone_channel
from ..core.model.loading import robot_from_urdf_text
from ..core.model.robot import Joint, RobotModel

#: A skew slide lives in the custom property SLIDE_KEY. Rigs imported before the cycle fix kept it
#: in a registered property of the same name, whose data path is OLD_SLIDE (`upgrade_slides` moves them).
SLIDE_KEY = "kinema_slide"
#: Channel data paths, by kind.
EULER, LOCATION, AXIS_ANGLE, SLIDE = "rotation_euler", "location", "rotation_axis_angle", f'["{SLIDE_KEY}"]'
OLD_SLIDE = SLIDE_KEY
#: How many floats each channel has per pose bone (for foreach_get/foreach_set).
_CHANNEL_WIDTH = {EULER: 3, LOCATION: 3, AXIS_ANGLE: 4}

#: Name of the rig's bone collections.
COLLECTION_ROOT, COLLECTION_JOINTS, COLLECTION_TOOL_POINTS, COLLECTION_IK = "Kinema", "Joints", "Tool Points", "IK"


@dataclass(frozen=True)
class JointChannel:
    """The one F-curve channel that shows a joint: `value = scale * q[source]`."""

    joint: str
    bone: str
    data_path: str
    index: int
    scale: float
    source: int  # index of the actuated joint in the configuration vector
    driven: bool  # a mimic joint: driven from its source's channel, never keyed


def _channel_for(robot: RobotModel, joint: Joint) -> JointChannel:
    multiplier = joint.mimic.multiplier if joint.mimic else 1.0
    source = robot.joint_index(joint.mimic.joint if joint.mimic else joint.name)
    k, scale = bone_channel(joint.axis, multiplier)
    if k is not None:
        path = LOCATION if joint.type == "prismatic" else EULER
        return JointChannel(joint.name, joint.child, path, k, scale, source, joint.mimic is not None)
    path = SLIDE if joint.type == "prismatic" else AXIS_ANGLE
    return JointChannel(joint.name, joint.child, path, 0, scale, source, joint.mimic is not None)


def joint_channels(robot: RobotModel) -> list[JointChannel]:
    """Every movable joint's channel (actuated first-in-tree-order, mimics included), cached."""
    cache = robot.cache("rig_channels")
    if "all" not in cache:
        cache["all"] = [_channel_for(robot, joint) for joint in robot.joints if joint.is_movable]
        cache["by_joint"] = {c.joint: c for c in cache["all"]}
    return cache["all"]


def joint_channel(robot: RobotModel, joint_name: str) -> tuple[str, str, int, float]:
    """(bone name, data path, array index, scale) of the F-curve that keys a joint.

    The channel holds `scale * value`; for a mimic joint, value is its source joint's value.
    """
    joint_channels(robot)
    channel = robot.cache("rig_channels")["by_joint"].get(joint_name)
    if channel is None:
        movable = [c.joint for c in joint_channels(robot)]
        raise KinemaError(f"unknown movable joint '{joint_name}'; movable joints: {', '.join(movable)}")
    return channel.bone, channel.data_path, channel.index, channel.scale


def actuated_channels(robot: RobotModel) -> list[JointChannel]:
    """Channels of the actuated joints, in configuration-vector order."""
    joint_channels(robot)
    cache = robot.cache("rig_channels")
    if "actuated" not in cache:
        cache["actuated"] = [cache["by_joint"][name] for name in robot.actuated_joint_names]
    return cache["actuated"]


# ---- the robot a rig carries ---------------------------------------------------------------

#: The robots of the rigs in this session, by URDF hash and path (a handful of rigs at a time).
_ROBOT_CACHE = LRU(16)


def urdf_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def is_rig(obj) -> bool:
    """An armature object made by the importer."""
    return obj is not None and obj.type == "ARMATURE" and bool(obj.data.kinema.urdf_text)


def robot_for_rig(obj) -> RobotModel:
    """The RobotModel of a rig, rebuilt from the URDF text the rig carries (cached by hash)."""
    if not is_rig(obj):
        raise KinemaError(f"'{getattr(obj, 'name', obj)}' is not a Kinema robot rig (import a URDF first)")
    settings = obj.data.kinema
    key = settings.urdf_hash or urdf_hash(settings.urdf_text)
    key = f"{key}|{settings.urdf_path}"
    return _ROBOT_CACHE.get_or_build(
        key, lambda: robot_from_urdf_text(settings.urdf_text, settings.urdf_path or f"{settings.robot_name}.urdf"))


def remember_robot(obj, robot: RobotModel) -> None:
    """Seed the cache with a robot the importer already built, so the first frame is free."""
    settings = obj.data.kinema
    _ROBOT_CACHE.put(f"{settings.urdf_hash}|{settings.urdf_path}", robot)


def reset_caches() -> None:
    """Forget every rig's robot (tests start each from the rig's own URDF text) and live layout."""
    _ROBOT_CACHE.clear()
    _LIVE.clear()


# ---- reading and writing joint values --------------------------------------------------------

def _bone_indices(obj, channels: list[JointChannel]) -> np.ndarray:
    names = obj.pose.bones.keys()
    index = {name: i for i, name in enumerate(names)}
    try:
        return np.array([index[c.bone] for c in channels], dtype=np.int64)
    except KeyError as exc:
        raise KinemaError(f"rig '{obj.name}' has no bone {exc}; re-import the robot") from None


#: (rig, channel list) -> (channels, bone count, every bone's name in order, per data path: (path,
#: width, channel positions, flat indices (bone index for a slide), scales), every channel's scale). Reading and writing the rig is every
#: live frame's work; looking the bones up by name each time cost more than the writes.
_LAYOUTS = LRU(32)


def _layout(obj, channels: list[JointChannel]):
    bones = obj.pose.bones
    key = (obj.as_pointer(), id(channels))
    cached = _LAYOUTS.get(key)
    if cached is not None and cached[0] is channels and bones.keys() == cached[2]:  # one call: every bone's name, in order
        return bones, cached[3], cached[4]
    indices = _bone_indices(obj, channels)
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(channels):
        groups.setdefault(c.data_path, []).append(i)
    if SLIDE in groups and obj.library is None and any(
            bones[channels[i].bone].bone.kinema.data_path == OLD_SLIDE for i in groups[SLIDE]):
        upgrade_slides(obj)  # an old rig no file load has met: appended, or open when the add-on was enabled
    paths = []
    for path, positions in groups.items():
        positions = np.array(positions, dtype=np.int64)
        width = _CHANNEL_WIDTH.get(path, 1)
        components = np.array([channels[i].index for i in positions], dtype=np.int64)
        # where each channel sits in the flat foreach array of every bone's `path`
        flat = indices[positions] * width + (components if width > 1 else 0)
        paths.append((path, width, positions, flat, np.array([channels[i].scale for i in positions], dtype=float)))
    scales = np.array([c.scale for c in channels], dtype=float)
    _LAYOUTS.put(key, (channels, len(bones), bones.keys(), paths, scales))
    return bones, paths, scales


def read_joint_values(obj, robot: RobotModel, keep: dict | None = None) -> np.ndarray:
    """The configuration vector the rig shows (robot.actuated_joint_names order), radians/metres.

    `keep`: a dict that receives the channel arrays read (every bone's), for a
    `write_joint_values(..., read=keep)` straight after, with nothing written to the rig between
    (a live frame reads, solves and writes: the write then does not read them again)."""
    channels = actuated_channels(robot)
    q = np.zeros(len(channels))
    if not channels:
        return q
    bones, paths, all_scales = _layout(obj, channels)
    count = len(bones)
    for path, width, positions, flat, scales in paths:
        if path == SLIDE:
            for i, bone, scale in zip(positions.tolist(), flat.tolist(), scales.tolist()):
                q[i] = slide_value(bones[bone]) / scale
            continue
        values = np.empty(count * width, dtype=np.float32)
        bones.foreach_get(path, values)
        q[positions] = values[flat] / scales
        if keep is not None:
            keep[path] = values
    if keep is not None:
        keep[None] = (obj.as_pointer(), channels, bones, paths, all_scales)
    return q


def write_joint_values(obj, robot: RobotModel, q, read: dict | None = None) -> np.ndarray:
    """Pose the rig at configuration q (clamped to the limits); returns what was written.

    Refuses non-finite values rather than ever putting a NaN on a bone. `read`: the `keep` of
    the `read_joint_values` of this rig just before (its arrays are written, not read again).
    """
    channels = actuated_channels(robot)
    q = np.asarray(q, dtype=float)
    if q.shape != (len(channels),):
        raise KinemaError(f"expected {len(channels)} joint values for '{robot.name}', got shape {q.shape}")
    if not np.isfinite(q).all():
        _refuse_unholdable(robot, q, np.ones(len(q)))
    q = np.minimum(np.maximum(q, robot.lower), robot.upper)  # inside the limits (continuous joints have none)
    if not channels:
        return q
    layout = None if read is None else read.get(None)
    if layout is not None and layout[0] == obj.as_pointer() and layout[1] is channels:
        bones, paths, all_scales = layout[2:]  # the layout the read just checked
    else:
        bones, paths, all_scales = _layout(obj, channels)
        read = None
    if not _within_float32(robot, all_scales) and not (np.abs(all_scales * q) < _FLOAT32_MAX).all():
        _refuse_unholdable(robot, q, all_scales)  # joint values reach bones here or in LiveRig.write: never inf
    count = len(bones)
    for path, width, positions, flat, scales in paths:
        if path == SLIDE:
            for i, bone, scale in zip(positions.tolist(), flat.tolist(), scales.tolist()):
                bones[bone][SLIDE_KEY] = scale * q[i]
            continue
        values = None if read is None else read.get(path)
        if values is None:
            values = np.empty(count * width, dtype=np.float32)
            bones.foreach_get(path, values)
        values[flat] = scales * q[positions]
        bones.foreach_set(path, values)
    # The pose channels changed, nothing else: a full `update_tag()` (every recalc flag) makes the
    # depsgraph pass our write causes re-copy and re-evaluate the whole object, over twice the
    # cost of a transform tag, for the same evaluated pose (tests/blender/test_live_ik.py).
    obj.update_tag(refresh={"OBJECT"})
    return q


_FLOAT32_MAX = float(np.finfo(np.float32).max)


class LiveRig:
    """A rig's joint channels laid out for the live frame, which reads, solves and writes the
    same bones every frame: one float32 buffer holds every bone's values of each channel path
    (one `foreach_get` per path fills its slice), so reading and writing every joint is one
    gather and one scatter; every bone's pose matrix is read in one `foreach_get` too (the
    control bones' poses). `live_rig` checks the rig's bone names each frame before one is
    used, so a bone renamed, added or removed by a script between frames is seen (the general
    read then says what is wrong)."""

    __slots__ = ("robot", "channels", "names", "views", "values", "flat", "scales", "matrices", "index", "lower",
                 "upper", "bounded", "held", "channel", "written", "spans")

    def __init__(self, robot, channels, names, paths, scales):
        self.robot, self.channels, self.names = robot, channels, names
        count = len(names)
        self.values = np.empty(sum(count * width for _, width, *_ in paths), dtype=np.float32)
        self.views, self.flat, at = [], np.empty(len(channels), dtype=np.int64), 0
        #: per view, the bytes of `channel` its joints fill when they are consecutive (else None):
        #: `write` leaves a view whose joints did not change alone (a held gripper's slides)
        self.spans = []
        for path, width, positions, flat, _ in paths:
            self.views.append((path, self.values[at:at + count * width]))
            self.flat[positions] = at + flat
            at += count * width
            order = np.sort(np.asarray(positions, dtype=np.int64))
            consecutive = len(order) > 0 and order[-1] - order[0] == len(order) - 1
            self.spans.append(slice(4 * int(order[0]), 4 * int(order[-1]) + 4) if consecutive else None)
        self.scales = scales
        self.matrices = np.empty(count * 16, dtype=np.float32)
        self.index = {name: i for i, name in enumerate(names)}
        self.lower, self.upper = robot.lower, robot.upper
        self.bounded = _within_float32(robot, scales)
        self.held = self.values[self.flat]
        self.channel = np.empty(len(channels), dtype=np.float32)
        self.written = frozenset(c.bone for c in channels)  # the bones whose channels `write` sets

    def read(self, bones) -> np.ndarray:
        """The configuration the rig shows (as `read_joint_values`); the values stay for `write`,
        and `held` is each joint's channel as the rig holds it (float32)."""
        for path, view in self.views:
            bones.foreach_get(path, view)
        self.held = held = self.values[self.flat]
        return self.start(held)

    def start(self, held: np.ndarray) -> np.ndarray:
        """The configuration channels `held` (float32, in joint order, as `held` or `holding`)
        show: what a solve from them starts at."""
        return held / self.scales

    def holds(self, bones, written: bytes) -> bool:
        """Whether the rig's channels are `written` (what `write` returned), read as `read` reads
        them but with no joint values made."""
        for path, view in self.views:
            bones.foreach_get(path, view)
        return self.values[self.flat].tobytes() == written

    def read_matrices(self, bones) -> None:
        """Every bone's pose matrix (armature space, this frame's), for `control_rows`."""
        bones.foreach_get("matrix", self.matrices)

    def control_rows(self, name: str):
        """(the bone's pose as 16 floats, column after column; its top three rows) from the last
        `read_matrices`, or None for a bone the rig does not have."""
        i = self.index.get(name)
        if i is None:
            return None
        flat = self.matrices[16 * i:16 * i + 16].tolist()
        return flat, (flat[0::4], flat[1::4], flat[2::4])

    def control_flat(self, name: str) -> list | None:
        """The bone's pose as 16 floats, column after column, from the last `read_matrices`, or
        None for a bone the rig does not have."""
        i = self.index.get(name)
        return None if i is None else self.matrices[16 * i:16 * i + 16].tolist()

    def holding(self, q: np.ndarray) -> np.ndarray:
        """The channels (float32, in joint order) `write` of q leaves the rig holding: clamped to
        the limits; a value no channel can hold (not finite, beyond float32) raises KinemaError.
        The array is reused by the next call."""
        if not math.isfinite(sum(q.tolist())) and not np.isfinite(q).all():  # one cheap call for the usual answer
            _refuse_unholdable(self.robot, q, np.ones(len(q)))
        q = np.minimum(np.maximum(q, self.lower), self.upper)
        if not self.bounded and not (np.abs(q * self.scales) < _FLOAT32_MAX).all():
            _refuse_unholdable(self.robot, q, self.scales)
        channel = self.channel
        np.multiply(q, self.scales, out=channel, casting="unsafe")
        return channel

    def write(self, obj, bones, q: np.ndarray) -> bytes:
        """`write_joint_values` of q straight after this frame's `read`: clamped to the limits,
        never a non-finite value; nothing is set or tagged when the rig already holds q. Returns
        the channels the rig now holds, as bytes (what `held` of the next `read` shows)."""
        channel = self.holding(q)
        written = channel.tobytes()
        self.put(obj, bones, channel, written)
        return written

    def put(self, obj, bones, channel: np.ndarray, written: bytes) -> None:
        """Set the channels `channel` (float32, in joint order, as `holding` made them; `written`:
        its bytes) straight after this frame's `read`; nothing when the rig holds them already."""
        held = self.held.tobytes()
        if written != held:
            self.values[self.flat] = channel
            for (path, view), span in zip(self.views, self.spans):
                if span is None or written[span] != held[span]:
                    bones.foreach_set(path, view)
            obj.update_tag(refresh=_TRANSFORM)


_TRANSFORM = {"OBJECT"}
_LIVE: dict = {}  # (rig, robot) -> LiveRig (a handful of rigs at a time)


def live_rig(obj, robot: RobotModel, bones) -> LiveRig | None:
    """The rig's LiveRig, checked against its bone names now; None where the live frame cannot
    take it (a skew slide, kept in a custom property; no actuated joint), or where a bone a
    joint needs is missing: the general path reads it and says why."""
    names = bones.keys()
    key = (obj.as_pointer(), id(robot))
    live = _LIVE.get(key)
    if live is not None and live.robot is robot and live.names == names:
        return live
    channels = actuated_channels(robot)
    if not channels or any(c.data_path == SLIDE for c in channels) or any(c.bone not in names for c in channels):
        return None
    _, paths, scales = _layout(obj, channels)
    if len(_LIVE) >= 32:
        _LIVE.clear()
    live = _LIVE[key] = LiveRig(robot, channels, names, paths, scales)
    return live


def _within_float32(robot: RobotModel, scales: np.ndarray) -> bool:
    """Every joint's limits, scaled onto its channel, fit in float32: a clamped value always does."""
    cache = robot.cache("rig_channels")
    if "within_float32" not in cache:
        reach = np.maximum(np.abs(robot.lower), np.abs(robot.upper)) * np.abs(scales)
        cache["within_float32"] = bool(np.isfinite(reach).all() and (reach < _FLOAT32_MAX).all())
    return cache["within_float32"]


def _refuse_unholdable(robot: RobotModel, q: np.ndarray, scales: np.ndarray) -> None:
    """Raise the one line that names the joints whose values cannot reach a bone."""
    if not np.isfinite(q).all():
        bad = [robot.actuated_joint_names[i] for i in np.flatnonzero(~np.isfinite(q))]
        raise KinemaError(f"refusing non-finite joint values for {', '.join(bad)}")
    bad = [robot.actuated_joint_names[i] for i in np.flatnonzero(~(np.abs(scales * q) < _FLOAT32_MAX))]
    if bad:
        raise KinemaError(f"refusing joint values Blender cannot hold (beyond float32) for {', '.join(bad)}")


def set_joint_value(obj, robot: RobotModel, joint_name: str, value: float) -> float:
    """One actuated joint (clamped); returns the value written."""
    q = read_joint_values(obj, robot)
    q[robot.joint_index(joint_name)] = value
    return float(write_joint_values(obj, robot, q)[robot.joint_index(joint_name)])


def key_joint_values(obj, robot: RobotModel, frame: float) -> int:
    """Keyframe every actuated joint's channel at `frame`; returns the number of keys."""
    bones = obj.pose.bones
    keyed = 0
    for c in actuated_channels(robot):
        bone = bones.get(c.bone)
        if bone is None:
            raise KinemaError(f"rig '{obj.name}' has no bone '{c.bone}'; re-import the robot")
        index = -1 if c.data_path == SLIDE else c.index
        if bone.keyframe_insert(c.data_path, index=index, frame=frame, group=c.bone):
            keyed += 1
    return keyed


def tool_point(obj) -> str:
    """The link the rig's IK aims at by default."""
    return obj.data.kinema.tool_point


# ---- what the rig stores (registered by build.register) -----------------------------------------

JOINT_TYPES = [
    ("NONE", "Fixed", "No joint moves this bone"),
    ("revolute", "Revolute", ""),
    ("continuous", "Continuous", ""),
    ("prismatic", "Prismatic", ""),
    ("fixed", "Fixed", ""),
    ("floating", "Floating (held rigid)", ""),
    ("planar", "Planar (held rigid)", ""),
]


class KinemaBoneJoint(bpy.types.PropertyGroup):
    """The joint that moves this bone, as imported (kept with the bone in the .blend)."""

    joint: bpy.props.StringProperty(name="Joint", description="URDF joint whose child link this bone is")
    joint_type: bpy.props.EnumProperty(name="Type", items=JOINT_TYPES, default="NONE")
    axis: bpy.props.FloatVectorProperty(name="Axis", size=3, description="Joint axis in the link frame")
    lower: bpy.props.FloatProperty(name="Lower Limit", default=float("-inf"))
    upper: bpy.props.FloatProperty(name="Upper Limit", default=float("inf"))
    actuated: bpy.props.BoolProperty(name="Actuated", description="Has its own value (movable and not a mimic)")
    mimic_joint: bpy.props.StringProperty(name="Mimics")
    data_path: bpy.props.StringProperty(name="Channel", description="Pose bone property that holds the joint value")
    index: bpy.props.IntProperty(name="Channel Index")
    scale: bpy.props.FloatProperty(name="Channel Scale", default=1.0)
    control: bpy.props.StringProperty(
        name="Control Key",
        description="Which IK target's control this bone is, whatever its name (the target keeps the same key): "
                    "a renamed control is followed")


class KinemaRigSettings(bpy.types.PropertyGroup):
    """The robot an armature is a rig of: its URDF text travels inside the .blend."""

    robot_name: bpy.props.StringProperty(name="Robot")
    urdf_text: bpy.props.StringProperty(name="URDF", description="The URDF this rig was imported from")
    urdf_path: bpy.props.StringProperty(name="URDF Path", subtype="FILE_PATH")
    urdf_hash: bpy.props.StringProperty(name="URDF Hash")
    fingerprint: bpy.props.StringProperty(name="Kinematic Fingerprint")
    tool_point: bpy.props.StringProperty(name="Tool Point", description="Link the IK aims at by default")


def slide_value(pose_bone) -> float:
    """A skew slide's channel value (0 before anything was written)."""
    return float(pose_bone.get(SLIDE_KEY, 0.0))


def upgrade_slides(obj) -> int:
    """Move a rig imported before the cycle fix onto the custom property: the value, its keys
    and the drivers that read or drive it. Returns how many slides moved (0 for a current rig)."""
    moved = []
    for pose_bone in obj.pose.bones:
        settings = pose_bone.bone.kinema
        if settings.data_path != OLD_SLIDE:
            continue
        pose_bone[SLIDE_KEY] = float(getattr(pose_bone, OLD_SLIDE, 0.0))
        settings.data_path = SLIDE
        moved.append(pose_bone.name)
    if not moved:
        return 0
    from .animation import fcurves, pose_bone_path

    renames = {pose_bone_path(bone, OLD_SLIDE): pose_bone_path(bone, SLIDE) for bone in moved}
    animation = obj.animation_data
    if animation is not None:
        for driver in animation.drivers:
            if driver.data_path in renames:
                driver.data_path = renames[driver.data_path]
            for variable in driver.driver.variables:
                for target in variable.targets:
                    if target.data_path in renames:
                        target.data_path = renames[target.data_path]
        for curve in fcurves(obj):
            if curve.data_path in renames:
                curve.data_path = renames[curve.data_path]
    obj.update_tag()
    return len(moved)


def _slider_get(pose_bone, kinds: tuple[str, ...]) -> float:
    settings = pose_bone.bone.kinema
    if settings.joint_type not in kinds or not settings.actuated:
        return 0.0
    if settings.data_path == SLIDE:
        raw = slide_value(pose_bone)
    else:
        raw = getattr(pose_bone, settings.data_path)[settings.index]
    return raw / settings.scale


def _slider_set(pose_bone, value: float, kinds: tuple[str, ...]) -> None:
    settings = pose_bone.bone.kinema
    if settings.joint_type not in kinds or not settings.actuated or not np.isfinite(value):
        return
    value = min(max(value, settings.lower), settings.upper)
    if settings.data_path == SLIDE:
        pose_bone[SLIDE_KEY] = settings.scale * value
    else:
        channel = getattr(pose_bone, settings.data_path)
        channel[settings.index] = settings.scale * value


def _angle_get(self):
    return _slider_get(self, ("revolute", "continuous"))


def _angle_set(self, value):
    _slider_set(self, value, ("revolute", "continuous"))


def _millimetres_get(self):
    return _slider_get(self, ("prismatic",)) * 1000.0


def _millimetres_set(self, value):
    _slider_set(self, value / 1000.0, ("prismatic",))


def _slider_range(settings) -> tuple[float, float]:
    if settings.joint_type == "continuous" or not (np.isfinite(settings.lower) and np.isfinite(settings.upper)):
        return -np.pi, np.pi
    return settings.lower, settings.upper


def _range_get(self):
    settings = self.bone.kinema
    if not settings.actuated:
        return 0.0
    lower, upper = _slider_range(settings)
    if upper <= lower:
        return 0.5
    return float(min(max((_slider_get(self, (settings.joint_type,)) - lower) / (upper - lower), 0.0), 1.0))


def _range_set(self, fraction):
    settings = self.bone.kinema
    lower, upper = _slider_range(settings)
    _slider_set(self, lower + fraction * (upper - lower), (settings.joint_type,))


def register_properties() -> None:
    bpy.types.Bone.kinema = bpy.props.PointerProperty(type=KinemaBoneJoint)
    bpy.types.Armature.kinema = bpy.props.PointerProperty(type=KinemaRigSettings)
    # The Joints panel's sliders: views of the bone channel, so slider and rig never disagree.
    bpy.types.PoseBone.kinema_angle = bpy.props.FloatProperty(
        name="Joint Angle", description="This joint's angle (clamped to its limits)", subtype="ANGLE",
        get=_angle_get, set=_angle_set, options=set(), precision=2, step=100,
    )
    bpy.types.PoseBone.kinema_millimetres = bpy.props.FloatProperty(
        name="Joint Position (mm)", description="This slide's position in millimetres (clamped to its limits)",
        get=_millimetres_get, set=_millimetres_set, options=set(), precision=2, step=100,
    )
    # A slider spanning exactly the joint's limits (a property's own range cannot differ per
    # bone, so this one is the fraction of the range; the number field beside it is exact).
    bpy.types.PoseBone.kinema_range = bpy.props.FloatProperty(
        name="Joint Range", description="Where this joint is between its lower and upper limit",
        subtype="FACTOR", min=0.0, max=1.0, get=_range_get, set=_range_set, options=set(), precision=2,
    )
    # Where rigs imported before the cycle fix kept a skew slide; kept so those files open and
    # `upgrade_slides` can read it (new rigs use the `kinema_slide` custom property).
    bpy.types.PoseBone.kinema_slide = bpy.props.FloatProperty(
        name="Slide (old rigs)", description="Where rigs imported before the cycle fix kept a skew slide",
        subtype="DISTANCE", unit="LENGTH",
    )


def unregister_properties() -> None:
    for owner, name in (
        (bpy.types.PoseBone, "kinema_slide"), (bpy.types.PoseBone, "kinema_range"), (bpy.types.PoseBone, "kinema_millimetres"),
        (bpy.types.PoseBone, "kinema_angle"), (bpy.types.Armature, "kinema"), (bpy.types.Bone, "kinema"),
    ):
        if hasattr(owner, name):
            delattr(owner, name)


CLASSES = (KinemaBoneJoint, KinemaRigSettings)
