"""Limits on the timeline, retimed copies and exports: the Blender half of `core.shot.limits`,
`core.shot.retime` and `core.shot.export`.

It only translates: the baked joint curves of a rig become a (frames, joints) array, the
rig's limit settings become a `core.shot.limits.Limits`, and results come back as timeline
markers, a table the Bake section shows, and (on request only) a retimed *copy* of the rig's
action. Nothing here changes the original animation.

The rig's limit settings (`armature.kinema_limits`): a safety margin in percent, acceleration
and jerk limits for all joints, and per-joint values that override them (0: none).
"""

from __future__ import annotations

import json

import bpy
import numpy as np

from ..core.errors import KinemaError, UnknownNameError
from .animation import pose_bone_path
from ..core.shot.limits import KINDS, LimitReport, check_limits
from .rig_limits import rig_limits

#: Markers the limits check places (the bake's own flags use "Kinema: ").
MARKER_PREFIX = "Kinema limit: "
#: Frames one export or limits check may span: a bake's own cap (cli/csv_files.MAX_BAKE_FRAMES),
#: so every baked shot fits, and a stray key at frame 10,000,000 is refused before the work.
MAX_EXPORT_FRAMES = 100_000
#: Suffix of a retimed copy of an action.
RETIMED_SUFFIX = " retimed"


def _rate_limit(kind: str, power: str, one_joint: bool):
    """A Max Acceleration or Max Jerk setting (`power` "²" or "³"): one joint's own, where 0
    defers to the value for all joints, or that value, where 0 checks nothing."""
    units = f"rad/s{power}, m/s{power} for a slide"
    if one_joint:
        description = f"This joint's {kind} limit ({units}); 0 uses the value for all joints"
    else:
        description = f"{kind.capitalize()} limit for every joint ({units}); 0: not checked"
    return bpy.props.FloatProperty(name=f"Max {kind.capitalize()}", min=0.0, default=0.0, description=description)


class KinemaJointLimit(bpy.types.PropertyGroup):
    """One joint's own acceleration and jerk limits (0: use the value for all joints)."""

    joint: bpy.props.StringProperty(name="Joint")
    max_acceleration: _rate_limit("acceleration", "²", one_joint=True)
    max_jerk: _rate_limit("jerk", "³", one_joint=True)


class KinemaLimitSettings(bpy.types.PropertyGroup):
    """The limits a rig's baked motion is checked against (velocity comes from the URDF)."""

    margin: bpy.props.FloatProperty(
        name="Safety Margin", subtype="PERCENTAGE", min=0.0, max=90.0, default=0.0,
        description="Scale every limit down by this much (payload, wear, the controller's headroom)")
    max_acceleration: _rate_limit("acceleration", "²", one_joint=False)
    max_jerk: _rate_limit("jerk", "³", one_joint=False)
    joints: bpy.props.CollectionProperty(type=KinemaJointLimit)
    last_check: bpy.props.StringProperty(name="Last Check", description="What the last limits check found (JSON)")


CLASSES = (KinemaJointLimit, KinemaLimitSettings)


def register() -> None:
    bpy.types.Armature.kinema_limits = bpy.props.PointerProperty(type=KinemaLimitSettings)


def unregister() -> None:
    if hasattr(bpy.types.Armature, "kinema_limits"):
        del bpy.types.Armature.kinema_limits


# ---- the rig and its baked curves -----------------------------------------------------------------

def rigs_in_file() -> list:
    from .rig import is_rig

    return [obj for obj in bpy.data.objects if is_rig(obj)]


def find_rig(name: str | None = None):
    """The rig called `name`, or the file's only rig."""
    rigs = rigs_in_file()
    if name:
        rig = next((r for r in rigs if r.name == name), None)
        if rig is None:
            raise UnknownNameError("rig", name, [r.name for r in rigs])
        return rig
    if not rigs:
        raise KinemaError("the file has no Kinema robot rig")
    if len(rigs) > 1:
        raise KinemaError(f"the file has several rigs ({', '.join(r.name for r in rigs)}); choose one with --rig")
    return rigs[0]


def _channelbag(action, slot):
    """The F-curves of `action` for `slot` (Blender 4.4+), or the legacy action itself."""
    try:
        from bpy_extras import anim_utils
    except ImportError:
        return action
    get = getattr(anim_utils, "action_get_channelbag_for_slot", None)
    if get is None or slot is None:
        return action
    return get(action, slot)


def joint_fcurves(rig, robot) -> list:
    """Per actuated joint, the F-curve of its channel in the rig's action (None when not keyed)."""
    from .rig import SLIDE, actuated_channels

    animation = rig.animation_data
    action = animation.action if animation else None
    bag = _channelbag(action, getattr(animation, "action_slot", None)) if action else None
    curves = []
    for channel in actuated_channels(robot):
        index = 0 if channel.data_path == SLIDE else channel.index
        path = pose_bone_path(channel.bone, channel.data_path)
        curves.append(bag.fcurves.find(path, index=index) if bag is not None else None)
    return curves


def baked_range(rig, robot) -> tuple[int, int]:
    """First and last keyed frame over the rig's joint curves; an error when nothing is baked."""
    curves = [c for c in joint_fcurves(rig, robot) if c is not None and len(c.keyframe_points)]
    if not curves:
        raise KinemaError(f"rig '{rig.name}' has nothing baked: bake it first (Bake to Keyframes, or kinema-nodes bake)")
    low, high = np.inf, -np.inf
    for curve in curves:
        co = np.empty(2 * len(curve.keyframe_points), dtype=np.float32)
        curve.keyframe_points.foreach_get("co", co)
        low, high = min(low, float(co[0::2].min())), max(high, float(co[0::2].max()))
    if not (np.isfinite(low) and np.isfinite(high)):
        raise KinemaError(f"rig '{rig.name}' has a key at a frame that is not a finite number")
    return int(np.ceil(low - 1e-6)), int(np.floor(high + 1e-6))


def parse_frames(text: str | None) -> tuple[int, int] | None:
    """``A:B`` (inclusive) -> (A, B)."""
    if not text:
        return None
    first, sep, last = text.partition(":")
    try:
        if not sep:
            raise ValueError
        a, b = int(first), int(last)
    except ValueError:
        raise KinemaError(f"--frames '{text}' is not FIRST:LAST (two whole frame numbers)") from None
    if b < a:
        raise KinemaError(f"--frames '{text}': the last frame is before the first")
    return a, b


def baked_joints(rig, robot, frames: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(frame numbers, joint values (F, n)) the rig's action plays on every whole frame of
    `frames` (default: the baked range). A joint without keys keeps the value the rig holds."""
    from .rig import actuated_channels, read_joint_values

    first, last = baked_range(rig, robot)
    if frames is not None:
        if frames[0] < first or frames[1] > last:
            raise KinemaError(f"frames {frames[0]}:{frames[1]} lie outside the baked range {first}:{last} of rig '{rig.name}'")
        first, last = frames
    if last - first + 1 > MAX_EXPORT_FRAMES:
        raise KinemaError(f"rig '{rig.name}' is keyed from frame {first} to {last}: {last - first + 1:,} frames, more than "
                          f"{MAX_EXPORT_FRAMES:,} (a key far outside the shot?); export a part with --frames FIRST:LAST")
    numbers = np.arange(first, last + 1, dtype=float)
    held = read_joint_values(rig, robot)
    q = np.tile(held, (len(numbers), 1))
    for i, (curve, channel) in enumerate(zip(joint_fcurves(rig, robot), actuated_channels(robot))):
        if curve is None or not len(curve.keyframe_points):
            continue
        evaluate = curve.evaluate
        q[:, i] = np.fromiter((evaluate(f) for f in numbers), dtype=float, count=len(numbers)) / channel.scale
    if not np.all(np.isfinite(q)):
        raise KinemaError(f"rig '{rig.name}' has non-finite values on its joint curves")
    return numbers, q


# ---- limits ---------------------------------------------------------------------------------------

def check_rig(rig, scene=None, frames: tuple[int, int] | None = None, *, markers: bool = True,
              **overrides) -> tuple[LimitReport, np.ndarray]:
    """Check the rig's baked curves against its limits at the scene's frame rate; markers on the
    timeline and the table on the rig's settings. Returns (report, joint values)."""
    from .baking import scene_fps
    from .rig import robot_for_rig

    scene = scene or bpy.context.scene
    robot = robot_for_rig(rig)
    numbers, q = baked_joints(rig, robot, frames)
    limits = rig_limits(rig, robot, **overrides)
    report = check_limits(numbers, q, limits, scene_fps(scene))
    if markers:
        mark_violations(scene, int(numbers[0]), int(numbers[-1]), report)
    settings = getattr(rig.data, "kinema_limits", None)
    if settings is not None:
        settings.last_check = json.dumps({"fps": report.fps, "frames": [int(numbers[0]), int(numbers[-1])],
                                          "table": report.table(),
                                          "checked": {k: limits.checked(k) for k in KINDS}})
    return report, q


def mark_violations(scene, frame_start: int, frame_end: int, report: LimitReport) -> int:
    """A marker "Kinema limit: velocity elbow_joint, ..." at the first frame of each run of frames
    with the same violations; earlier limit markers in the range are replaced."""
    markers = scene.timeline_markers
    for marker in [m for m in markers if m.name.startswith(MARKER_PREFIX) and frame_start <= m.frame <= frame_end]:
        markers.remove(marker)
    count = 0
    previous_frame, previous_words = None, None
    for frame, words in report.flagged_frames().items():
        if previous_frame is not None and frame == previous_frame + 1 and words == previous_words:
            previous_frame = frame
            continue
        text = ", ".join(words)
        markers.new(MARKER_PREFIX + (text if len(text) <= 50 else text[:49] + "…"), frame=frame)
        count += 1
        previous_frame, previous_words = frame, words
    return count


def last_check(rig) -> dict:
    settings = getattr(rig.data, "kinema_limits", None)
    try:
        return json.loads(settings.last_check) if settings is not None and settings.last_check else {}
    except ValueError:
        return {}


# ---- retime: a retimed copy of the action ---------------------------------------------------------

def write_retimed_action(rig, robot, result, first_frame: int, *, assign: bool = True):
    """A copy of the rig's action on the retimed timing: joint channels from `result`, every
    other channel (the IK control, ...) sampled through the same time warp. The original action
    is kept (fake user) and never changed. Returns the new action."""
    from .baking import write_keys
    from .rig import SLIDE, actuated_channels

    animation = rig.animation_data
    original = animation.action if animation else None
    if original is None:
        raise KinemaError(f"rig '{rig.name}' has nothing baked: bake it first")
    slot = getattr(animation, "action_slot", None)
    copy = original.copy()
    copy.name = original.name + RETIMED_SUFFIX
    original.use_fake_user = True
    new_frames = first_frame + np.arange(result.frame_count, dtype=float)
    source = np.asarray(result.source_frames, dtype=float)
    joint_paths = {}
    for i, channel in enumerate(actuated_channels(robot)):
        index = 0 if channel.data_path == SLIDE else channel.index
        joint_paths[(pose_bone_path(channel.bone, channel.data_path), index)] = (i, channel.scale)
    old_bag = _channelbag(original, slot)
    new_bag = _channelbag(copy, _matching_slot(copy, slot))
    for curve in list(new_bag.fcurves):
        key = (curve.data_path, curve.array_index)
        if key in joint_paths:
            i, scale = joint_paths[key]
            values = scale * np.clip(result.joints[:, i], robot.lower[i], robot.upper[i])
        else:
            old = old_bag.fcurves.find(curve.data_path, index=curve.array_index)
            values = np.fromiter((old.evaluate(f) for f in source), dtype=float, count=len(source))
        points = curve.keyframe_points
        for point in reversed(list(points)):
            points.remove(point, fast=True)
        write_keys(curve, new_frames, values)
    if assign:
        animation.action = copy
        new_slot = _matching_slot(copy, slot)
        if new_slot is not None:
            animation.action_slot = new_slot
    rig.update_tag()
    return copy


def _matching_slot(action, slot):
    if slot is None or not hasattr(action, "slots"):
        return None
    return next((s for s in action.slots if s.identifier == slot.identifier), None)


def retime_rig(rig, scene=None, frames: tuple[int, int] | None = None, *, assign: bool = True, **overrides):
    """Retime the rig's baked shot under its velocity and acceleration limits; writes a retimed
    copy of the action. Returns (RetimeResult, new action)."""
    from ..core.shot.retime import retime
    from .baking import scene_fps
    from .rig import robot_for_rig

    scene = scene or bpy.context.scene
    robot = robot_for_rig(rig)
    numbers, q = baked_joints(rig, robot, frames)
    result = retime(numbers, q, rig_limits(rig, robot, **overrides), scene_fps(scene))
    action = write_retimed_action(rig, robot, result, int(numbers[0]), assign=assign)
    if assign:
        scene.frame_start, scene.frame_end = int(numbers[0]), int(numbers[0]) + result.frame_count - 1
        # the markers and the table now describe the retimed motion (the old timing's are gone)
        for marker in [m for m in scene.timeline_markers
                       if m.name.startswith(MARKER_PREFIX) and numbers[0] <= m.frame <= numbers[-1]]:
            scene.timeline_markers.remove(marker)
        check_rig(rig, scene, **overrides)
    return result, action


# ---- exports ----------------------------------------------------------------------------------------

def rig_trajectory(rig, scene=None, frames: tuple[int, int] | None = None, **overrides):
    """The rig's baked shot as a `core.shot.export.Trajectory`, with its limits checked."""
    from ..core.shot.export import trajectory_for
    from .baking import scene_fps
    from .rig import robot_for_rig

    scene = scene or bpy.context.scene
    robot = robot_for_rig(rig)
    numbers, q = baked_joints(rig, robot, frames)
    limits = rig_limits(rig, robot, **overrides)
    fps = scene_fps(scene)
    report = check_limits(numbers, q, limits, fps)
    return trajectory_for(robot, rig.data.kinema.urdf_text, numbers, q, fps, limits, report, rig_tools(rig, robot))


def rig_tools(rig, robot) -> list[dict]:
    """The Tools of the rig's tree, as exports name them (their link, or the robot's tool point
    when a Tool names none), in node-name order."""
    from ..core.shot.export import tool_entry
    from .edit import rig_tree

    tree = rig_tree(rig)
    if tree is None:
        return []
    found = []
    for node in sorted((n for n in tree.nodes if getattr(n, "kind", "") == "tool" and not n.mute), key=lambda n: n.name):
        found.append(tool_entry(node.name, node.link_name or robot.tool_point, tuple(node.offset_location), node.offset_wxyz()))
    return found
