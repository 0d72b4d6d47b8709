"""Grasp, release and the gripper value on real Blender objects (#30 items 5 and 6).

- The gripper values are `Object.kinema_gripper` on a rig, one per gripper in `gripper_hands`
  order (a dual arm has two; 0 open .. 1 closed, keyable, at most MAX_GRIPPERS). Moving
  the slider, or a key on it at a frame change, writes the mapped values (`core.gripper`) into
  the gripper joints; those joints are the ones every solver holds, so IK never undoes it. A rig
  whose slider was never touched keeps its gripper where the animator put it.
- A grasp track lives on the carried object (`Object.kinema_grasps`): Key Grasp / Key Release
  add events, and after each frame change the object's world pose is set from the track
  (`core.grasp.object_pose`): only the frame decides it, so scrubbing either way agrees.
- Bake Grasp writes the object's own location/rotation/scale keys over the scene's range, so the
  shot plays with the add-on disabled.

The handler runs after the evaluator's (this module registers later), so the rig's joints it
reads are the solved ones; link poses come from the joint values by forward kinematics, not
from pose bones, which Blender only refreshes at the next depsgraph evaluation.
"""

from __future__ import annotations

import bpy
import numpy as np
from bpy.app.handlers import persistent

from ..core.errors import KinemaError
from ..core.grasp import grasp_offset, object_pose
from .carried import grasp_events, roster, tracks_changed


#: Gripper values a rig carries (a dual arm uses two; a hand per slot beyond that is left alone).
MAX_GRIPPERS = 4


# ---- the gripper value -------------------------------------------------------------------
def apply_gripper(rig) -> bool:
    """Write the rig's gripper value into its gripper joints; True when something changed."""
    from ..core.gripper import gripper_configuration, gripper_ends
    from .rig import is_rig, read_joint_values, robot_for_rig, write_joint_values

    if not is_rig(rig) or not rig.kinema_gripper_used:
        return False
    robot = robot_for_rig(rig)
    if not gripper_ends(robot):
        return False
    q = read_joint_values(rig, robot)
    wanted = gripper_configuration(robot, list(rig.kinema_gripper), q)
    if np.allclose(wanted, q, rtol=0, atol=1e-7):
        return False
    write_joint_values(rig, robot, wanted)
    return True


def gripper_node_drives(rig) -> bool:
    """True when a Gripper node on a Solver's chain in the rig's tree sets its gripper: then the
    node's value wins, and the panel's slider (which would undo it after every frame) stands by."""
    def drives(tree, depth=0) -> bool:
        for node in tree.nodes:
            if getattr(node, "kind", "") == "gripper" and node.inputs["Solution"].is_linked:
                return True
            inner = getattr(node, "node_tree", None)
            if inner is not None and depth < 16 and drives(inner, depth + 1):
                return True
        return False

    tree = getattr(rig, "kinema_tree", None)
    return tree is not None and drives(tree)


def _gripper_changed(self, context):
    if not self.kinema_gripper_used:
        tracks_changed()
    self.kinema_gripper_used = True
    apply_gripper(self)


# ---- the grasp track ---------------------------------------------------------------------
class KinemaGraspEvent(bpy.types.PropertyGroup):
    frame: bpy.props.IntProperty(name="Frame")
    kind: bpy.props.EnumProperty(name="Kind", items=(("GRASP", "Grasp", ""), ("RELEASE", "Release", "")))
    holder: bpy.props.PointerProperty(name="Robot", type=bpy.types.Object)
    link: bpy.props.StringProperty(name="Link")
    matrix: bpy.props.FloatVectorProperty(name="Matrix", size=16)
    source: bpy.props.StringProperty(name="Source", description="The Grasp node that keyed this event (empty: a panel button)")


def _matrix(values) -> np.ndarray:
    return np.array(values, dtype=float).reshape(4, 4)


def _world(obj) -> np.ndarray:
    return np.array(obj.matrix_world, dtype=float)


def link_world(rig, link: str) -> np.ndarray:
    """A link's world pose now, by forward kinematics from the rig's joint values."""
    from ..core.model.kinematics import link_pose
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    return _world(rig) @ link_pose(robot, read_joint_values(rig, robot), robot.check_link(link))


def carried_pose(obj, frame: float) -> np.ndarray:
    """The object's world pose at `frame` from its grasp track (the rig posed for that frame)."""

    def holder_link(holder: str, link: str) -> np.ndarray:
        rig = bpy.data.objects.get(holder)
        if rig is None:
            raise KinemaError(f"the robot '{holder}' that grasps '{obj.name}' is gone")
        return link_world(rig, link)

    return object_pose(grasp_events(obj), frame, _matrix(obj.kinema_grasp_rest), holder_link)


def _put(obj, frame: int, kind: str, rig=None, link: str = "", matrix=None, source: str = "") -> None:
    tracks_changed()
    for i in reversed(range(len(obj.kinema_grasps))):
        if obj.kinema_grasps[i].frame == frame:
            obj.kinema_grasps.remove(i)
    event = obj.kinema_grasps.add()
    event.frame, event.kind, event.link, event.source = frame, kind, link, source
    event.holder = rig
    event.matrix = np.asarray(matrix, dtype=float).reshape(16).tolist()


def key_grasp(context, obj, rig, link: str | None = None, source: str = "") -> str:
    """The robot's `link` (its tool point by default) takes hold of `obj` at the current frame,
    where the object is now: no jump."""
    from .rig import is_rig, tool_point

    if obj is None or not is_rig(rig) or obj == rig:
        raise KinemaError("select the object to grasp and make the robot active")
    link = link or tool_point(rig)
    frame = context.scene.frame_current
    if not len(obj.kinema_grasps):
        obj.kinema_grasp_rest = _world(obj).reshape(16).tolist()
    _put(obj, frame, "GRASP", rig, link, grasp_offset(link_world(rig, link), _world(obj)), source)
    return f"'{link}' of {rig.name} grasps {obj.name} at frame {frame}"


def key_release(context, obj, source: str = "") -> str:
    """The object lets go at the current frame, staying where its link carries it now."""
    frame = context.scene.frame_current
    events = grasp_events(obj) if obj is not None else []
    from ..core.grasp import event_at

    holding = event_at(events, frame)
    if holding is None or holding.kind != "GRASP":
        raise KinemaError(f"nothing holds '{obj.name if obj else ''}' at frame {frame}: Key Grasp first")
    _put(obj, frame, "RELEASE", None, "", carried_pose(obj, frame), source)
    return f"{obj.name} released at frame {frame}"


def clear_grasps(obj) -> str:
    """Forget the object's grasp track; it goes back to where it was before its first grasp."""
    if obj is None or not len(obj.kinema_grasps):
        raise KinemaError("the selected object has no grasp to clear")
    from mathutils import Matrix

    obj.matrix_world = Matrix(_matrix(obj.kinema_grasp_rest).tolist())
    obj.kinema_grasps.clear()
    tracks_changed()
    return f"grasps of {obj.name} cleared"


def key_grasp_node(context, node) -> str:
    """Key a Grasp node's grasp and release on its object's track (replacing what it keyed
    before): the scene visits the grasp frame, then the release frame, so each event is keyed
    with the arm where that frame puts it; the current frame is restored."""
    from .rig import is_rig

    obj, rig = node.carried, node.robot_rig()
    if obj is None or not is_rig(rig):
        raise KinemaError(f"Grasp node '{node.name}': choose the object and connect a Robot node")
    if node.release_frame and node.release_frame <= node.grasp_frame:
        raise KinemaError(f"Grasp node '{node.name}': the release frame must come after the grasp frame")
    source = node.source()
    had = len(obj.kinema_grasps)
    for i in reversed(range(len(obj.kinema_grasps))):
        if obj.kinema_grasps[i].source == source:
            obj.kinema_grasps.remove(i)
    tracks_changed()
    if had and not len(obj.kinema_grasps):  # back where it was before any grasp, so the grasp starts from there
        from mathutils import Matrix

        obj.matrix_world = Matrix(_matrix(obj.kinema_grasp_rest).tolist())
    scene = context.scene
    keep = scene.frame_current
    try:
        scene.frame_set(node.grasp_frame)
        said = key_grasp(context, obj, rig, node.holding_link(node.grasp_frame), source)
        if node.release_frame:
            scene.frame_set(node.release_frame)
            said += "; " + key_release(context, obj, source)
    finally:
        scene.frame_set(keep)
    return said


def bake_grasp(context, obj) -> int:
    """Key the object's own transform at every frame of the scene, from its grasp track."""
    scene = context.scene
    if not len(obj.kinema_grasps):
        raise KinemaError(f"'{obj.name}' has no grasp to bake")
    keep = scene.frame_current
    obj.rotation_mode = "QUATERNION"
    keyed = 0
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        for path in ("location", "rotation_quaternion", "scale"):
            obj.keyframe_insert(path, frame=frame)
        keyed += 1
    scene.frame_set(keep)
    return keyed


def place_carried(scene, grippers: bool = True) -> None:
    """Every rig's gripper value (with `grippers`), then every grasped object's pose, for the
    scene's frame. An object already there is not written: a write is a depsgraph update, and
    this also runs on those (a carried object follows a live drag) without feeding itself."""
    held, used = roster(scene)  # this runs on every frame and depsgraph update of every scene
    if grippers:
        for rig in used:
            if not gripper_node_drives(rig):
                apply_gripper(rig)
    frame = scene.frame_current
    for obj in held:  # after every gripper: a grasp may hold at a finger
        if not len(obj.kinema_grasps):  # cleared outside the grasp buttons
            continue
        try:
            pose = carried_pose(obj, frame)
        except KinemaError:
            continue
        if np.abs(pose - _world(obj)).max() <= 1e-9:
            continue
        from mathutils import Matrix

        obj.matrix_world = Matrix(pose.tolist())


@persistent
def on_frame_change(scene, depsgraph=None):
    place_carried(scene)


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    """A live drag moves the rig without a frame change: the carried object follows. The
    gripper value is not applied here, so a gripper joint's own slider still moves it by hand."""
    place_carried(scene, grippers=False)


@persistent
def on_undo_or_load(*_args):
    tracks_changed()


HANDLERS = ((bpy.app.handlers.frame_change_post, on_frame_change), (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
            (bpy.app.handlers.undo_post, on_undo_or_load), (bpy.app.handlers.redo_post, on_undo_or_load),
            (bpy.app.handlers.load_post, on_undo_or_load))


CLASSES = (KinemaGraspEvent,)


def register():
    bpy.types.Object.kinema_gripper = bpy.props.FloatVectorProperty(
        name="Gripper", description="How closed each of the robot's grippers is: 0 open, 1 closed (keyable; IK never moves it)",
        size=MAX_GRIPPERS, min=0.0, max=1.0, default=(0.0,) * MAX_GRIPPERS, subtype="NONE", update=_gripper_changed)
    bpy.types.Object.kinema_gripper_used = bpy.props.BoolProperty(
        name="Gripper Value Used", description="The gripper follows the Gripper value (set when the slider is first moved)")
    bpy.types.Object.kinema_grasps = bpy.props.CollectionProperty(type=KinemaGraspEvent)
    bpy.types.Object.kinema_grasp_rest = bpy.props.FloatVectorProperty(name="Rest Pose", size=16)
    for handlers, function in HANDLERS:
        if function not in handlers:
            handlers.append(function)


def unregister():
    for handlers, function in HANDLERS:
        while function in handlers:
            handlers.remove(function)
    for name in ("kinema_grasp_rest", "kinema_grasps", "kinema_gripper_used", "kinema_gripper"):
        if hasattr(bpy.types.Object, name):
            delattr(bpy.types.Object, name)
