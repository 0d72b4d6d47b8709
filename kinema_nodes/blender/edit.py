"""The one rig-editing API: add and remove IK targets, snap a control to its link, key the
Target Bone, add an elbow swivel, find and step through solutions.

The panel's buttons, the node buttons, presets and the CLI all edit a rig through these
functions, so an edit made from any of them leaves the same rig and the same tree behind.
"""

from __future__ import annotations

import contextlib
import uuid

import bpy
import numpy as np

from .. import evaluator
from ..core.graph.registry import bl_idname, kind_of
from . import baking

IK_COLLECTION = "IK"
KINEMA_COLLECTION = "Kinema"


def active_rig(context):
    from .rig import is_rig

    obj = context.active_object
    return obj if is_rig(obj) else None


def rig_tree(rig):
    return getattr(rig, "kinema_tree", None)


# ---- copies of a rig: Shift+D, Alt+D, Append, Link with an override ---------------------------

def drives(tree, rig) -> bool:
    """True when a Robot node of `tree` (inside its groups too) is `rig`."""
    from .flatten import all_nodes

    return any(kind_of(node) == "robot" and node.rig == rig for node in all_nodes(tree))


def _original_of(tree, rig):
    """The rig `tree` drives that `rig` is a copy of: one of its Robot nodes' rigs with the same
    robot (by the URDF's hash), the one whose name `rig`'s begins with first (Blender names a
    copy "ur5.001"); None when the tree drives no such rig."""
    from .flatten import all_nodes
    from .rig import is_rig

    robot = rig.data.kinema.urdf_hash
    found = [node.rig for node in all_nodes(tree) if kind_of(node) == "robot" and node.rig is not None
             and node.rig != rig and is_rig(node.rig) and node.rig.data.kinema.urdf_hash == robot]
    found.sort(key=lambda obj: not rig.name.startswith(obj.name))
    return found[0] if found else None


def own_tree(rig):
    """The rig's tree, made its own first if it is a copy's: a rig whose `kinema_tree` drives
    another rig (and not this one) was copied from it (Blender copies the object and keeps the
    pointer), so it gets a copy of that tree, aimed at itself. Returns the rig's tree (or None)."""
    tree = rig_tree(rig)
    if tree is None or drives(tree, rig):
        return tree
    original = _original_of(tree, rig)
    if original is None:
        return tree
    return _copy_tree_for(rig, tree, original)


def _copy_tree_for(rig, tree, original):
    """A copy of `tree` whose Object pointers that named `original` name `rig`: its Robot node,
    its targets' controls, its swivel's ring. Node groups inside stay shared (they are data); the
    tree's keys (Target Bone, configuration) get their own action, so keying one rig's choice
    never keys the other's."""
    copy = tree.copy()
    copy.name = f"Kinema {rig.name}"
    copy.use_fake_user = tree.use_fake_user
    for node in copy.nodes:
        for prop in node.bl_rna.properties:
            if prop.type == "POINTER" and not prop.is_readonly and getattr(node, prop.identifier, None) == original:
                setattr(node, prop.identifier, rig)
    animation = copy.animation_data
    if animation is not None and animation.action is not None:
        slot = animation.action_slot
        identifier = slot.identifier if slot is not None else None
        animation.action = animation.action.copy()
        found = animation.action.slots.get(identifier) if identifier else None
        if found is not None:
            animation.action_slot = found
    rig.kinema_tree = copy
    evaluator.mark_dirty(copy)
    return copy


def adopt_copies(objects=None) -> list:
    """`own_tree` for every rig in `objects` (default: the file's); returns the trees made. The
    depsgraph handler calls this when the file's object count changes (a duplicate, an append, a
    link), never per frame."""
    from .rig import is_rig

    made = []
    for obj in bpy.data.objects if objects is None else objects:
        tree = getattr(obj, "kinema_tree", None)
        if tree is None or not is_rig(obj) or not _editable(obj):
            continue
        own = own_tree(obj)
        if own is not tree:
            made.append(own)
    return made


def _editable(obj) -> bool:
    """A local object or a library override (a linked object is read-only)."""
    return obj.library is None


def solver_nodes(tree):
    return [n for n in tree.nodes if kind_of(n) == "solver"] if tree else []


def target_nodes(tree, rig=None):
    """IK Target nodes of a tree, inside node groups too."""
    from .flatten import all_nodes

    nodes = [n for n in all_nodes(tree) if kind_of(n) == "ik_target"] if tree else []
    if rig is not None:
        nodes = [n for n in nodes if n.robot_rig() == rig]
    return nodes


def set_mode(context, rig, mode: str) -> str:
    previous = rig.mode
    if context.view_layer.objects.active != rig:
        context.view_layer.objects.active = rig
    rig.select_set(True)
    if rig.mode != mode:
        bpy.ops.object.mode_set(mode=mode)
    return previous


def ik_collection(armature, visible: bool = True):
    collections = armature.collections_all
    parent = collections.get(KINEMA_COLLECTION) or armature.collections.new(KINEMA_COLLECTION)
    ik = collections.get(IK_COLLECTION) or armature.collections.new(IK_COLLECTION, parent=parent)
    if visible:
        ik.is_visible = True
        parent.is_visible = True
    return ik


@contextlib.contextmanager
def edit_mode(context, rig):
    """Edit mode on `rig` for the block (it gets the edit bones), then back to Pose mode if the
    rig was in Pose mode, else Object mode, whatever the block raised."""
    previous = set_mode(context, rig, "EDIT")
    try:
        yield rig.data.edit_bones
    finally:
        set_mode(context, rig, "POSE" if previous == "POSE" else "OBJECT")


def remove_edit_bones(context, rig, names) -> None:
    """Remove the bones named (those that exist) from `rig`."""
    with edit_mode(context, rig) as bones:
        for name in names:
            bone = bones.get(name)
            if bone is not None:
                bones.remove(bone)


def add_control_bone(context, rig, robot, link: str) -> str:
    """A control bone at `link`'s current pose, parented to the rig's root (never into the arm)."""
    from ..core.model.kinematics import link_pose
    from .rig import read_joint_values

    pose = link_pose(robot, read_joint_values(rig, robot), link)
    with edit_mode(context, rig) as bones:
        name = f"IK_{link}"
        bone = bones.new(name)
        name = bone.name  # made unique by Blender
        length = max(0.05, 0.5 * max(b.length for b in bones if b.name != name)) if len(bones) > 1 else 0.1
        bone.head = (0.0, 0.0, 0.0)
        bone.tail = (0.0, length, 0.0)
        bone.matrix = _matrix(pose)
        bone.parent = bones.get(robot.root_link)
        bone.use_deform = False
        ik_collection(rig.data).assign(bone)
    pose_bone = rig.pose.bones[name]
    pose_bone.lock_scale = (True, True, True)
    pose_bone.rotation_mode = "QUATERNION"
    pose_bone.bone.kinema.control = uuid.uuid4().hex
    return name


def _matrix(array):
    from mathutils import Matrix

    return Matrix(np.asarray(array, dtype=float).tolist())


def ensure_tree(rig):
    """The rig's tree with a Robot node and a Solver node, made if missing."""
    tree = own_tree(rig)
    if tree is None:
        tree = bpy.data.node_groups.new(f"Kinema {rig.name}", "KinemaNodeTree")
        tree.use_fake_user = True
        rig.kinema_tree = tree
    robot_node = next((n for n in tree.nodes if kind_of(n) == "robot" and n.rig == rig), None)
    if robot_node is None:
        robot_node = tree.nodes.new(bl_idname("robot"))
        robot_node.rig = rig
        robot_node.location = (-400, 0)
    solver = next(iter(solver_nodes(tree)), None)
    if solver is None:
        solver = tree.nodes.new(bl_idname("solver"))
        solver.location = (200, 0)
        solver.live = True
    return tree, robot_node, solver


def add_ik_target(context, rig, link: str | None = None, backend: str | None = None):
    """What Add IK Target does; returns (tree, target node, solver node). Leaves the pose as it was."""
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    link = robot.check_link(link or robot.tool_point)
    tree, robot_node, solver = ensure_tree(rig)
    if backend:
        solver.backend = backend
    bone = add_control_bone(context, rig, robot, link)
    target = tree.nodes.new(bl_idname("ik_target"))
    target.location = (-100, -200 * len(target_nodes(tree)))
    target.control_object = rig
    target.control_bone = bone
    target.control_key = rig.data.bones[bone].kinema.control
    target.link_name = link
    tree.links.new(robot_node.outputs["Robot"], target.inputs["Robot"])
    tree.links.new(target.outputs["Target"], solver.inputs["Targets"])
    solver.live = True
    keep_pose_as_posture(rig, target)
    evaluator.mark_dirty(tree)
    return tree, target, solver


def keep_pose_as_posture(rig, target, frame: float | None = None) -> None:
    """The rig's pose now becomes the posture its spare joints settle toward (keyed from `frame`
    on at a hand-off; else the one in force now), for every solver `target` feeds. So adding,
    snapping or handing off never moves the arm, and every frame after depends only on its inputs."""
    from .postures import record_posture
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    joints = read_joint_values(rig, robot)
    tree = target.id_data
    fed = {link.to_node.name for link in target.outputs["Target"].links} if "Target" in target.outputs else set()
    for solver in solver_nodes(tree):
        if solver.name in fed or len(solver_nodes(tree)) == 1:
            record_posture(solver, robot, joints, frame)


def snap_to_tool(rig, target) -> None:
    """Put the control back on the link it aims at (the "resynchronise" button)."""
    from ..core.model.kinematics import link_pose
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    pose = link_pose(robot, read_joint_values(rig, robot), target.link_at_frame(robot))
    control = target.control_object
    if control is None:
        return
    if target.control_bone:
        bone = control.pose.bones[target.control_bone]
        if control == rig:
            bone.matrix = _matrix(pose)
        else:
            bone.matrix = control.matrix_world.inverted_safe() @ rig.matrix_world @ _matrix(pose)
    else:
        control.matrix_world = rig.matrix_world @ _matrix(pose)
    keep_pose_as_posture(rig, target)
    evaluator.mark_dirty(target.id_data)


def remove_ik_target(context, rig, target) -> None:
    """✕: remove the target and everything adding it made, so the rig returns to plain FK as it
    was: its node and control bone, the control's F-curves and the target's keyed choice; with
    the rig's last target, also the Elbow Swivel (its ring bone, the ring's constraints and keys,
    the ring shape when nothing else uses it), the shown collision model and the tree; Kinema/IK
    hides again once empty."""
    from .animation import node_path, remove_fcurves

    tree = target.id_data
    bones = [target.control_bone] if target.control_object == rig and target.control_bone else []
    remove_fcurves(tree, (node_path(target.name, "."),))
    tree.nodes.remove(target)
    last = not target_nodes(tree)
    if last:
        for node in swivel_nodes(tree):
            if node.ring_object == rig and node.ring_bone:
                bones.append(node.ring_bone)
            tree.nodes.remove(node)
    bones = [name for name in bones if name in rig.data.bones]
    if bones:
        remove_fcurves(rig, tuple(f'pose.bones["{name}"]' for name in bones))
        for name in bones:  # constraints go with their pose bone; clear them first all the same
            pose_bone = rig.pose.bones.get(name)
            while pose_bone is not None and pose_bone.constraints:
                pose_bone.constraints.remove(pose_bone.constraints[0])
        remove_edit_bones(context, rig, bones)
    _hide_empty_ik_collection(rig.data)
    _remove_unused_ring_shape()
    if last:
        from .collisions import hide_collision_model

        hide_collision_model(rig)
        rig.kinema_tree = None
        bpy.data.node_groups.remove(tree)
    else:
        evaluator.mark_dirty(tree)


def _hide_empty_ik_collection(armature) -> None:
    """Kinema/IK comes with the import, hidden; Add IK Target shows it. Empty again, it hides."""
    ik = armature.collections_all.get(IK_COLLECTION)
    if ik is not None and not len(ik.bones) and not len(ik.children):
        ik.is_visible = False


def _remove_unused_ring_shape() -> None:
    shape = bpy.data.objects.get(RING_SHAPE)
    if shape is None:
        return
    used = any(bone.custom_shape == shape for obj in bpy.data.objects if obj.pose for bone in obj.pose.bones)
    if not used and not shape.users_collection:
        mesh = shape.data
        bpy.data.objects.remove(shape)
        if mesh is not None and not mesh.users:
            bpy.data.meshes.remove(mesh)


def rig_solver(tree, rig):
    """The Solver the rig's IK targets feed (the one the panel shows), else the tree's first."""
    solvers = solver_nodes(tree)
    for target in target_nodes(tree, rig):
        for link in target.outputs["Target"].links:
            if link.to_node in solvers:
                return link.to_node
    return solvers[0] if solvers else None


def _control_channels(target):
    """(owner, [data paths]) of the target's control: its pose bone's, or its object's."""
    control = target.control_object
    if control is None:
        return None, []
    if target.control_bone:
        bone = control.pose.bones.get(target.control_bone) if control.pose else None
        if bone is None:
            return None, []
        rotation = "rotation_quaternion" if bone.rotation_mode == "QUATERNION" else "rotation_euler"
        prefix = f'pose.bones["{target.control_bone}"].'
        return control, [prefix + "location", prefix + rotation]
    rotation = "rotation_quaternion" if control.rotation_mode == "QUATERNION" else "rotation_euler"
    return control, ["location", rotation]


def control_fcurves(target) -> list:
    from .animation import fcurves

    owner, paths = _control_channels(target)
    return [f for f in fcurves(owner) if f.data_path in paths] if owner is not None else []


def hold_control_before(target, frame: float) -> None:
    """Before a keyed hand-off moves an animated control: key it where it is one frame before
    (stepped), so the frames up to the switch keep following the old link's path."""
    for fcurve in control_fcurves(target):
        points = fcurve.keyframe_points
        if not any(abs(p.co[0] - (frame - 1)) < 1e-6 for p in points):
            points.insert(frame - 1, fcurve.evaluate(frame - 1))
        fcurve.update()


def key_control_at(target, frame: float) -> None:
    """After a keyed hand-off snapped an animated control: key it there, or the next frame
    change would put it back on the old link's path and the arm would jump. The keys on either
    side of the switch get straight (vector) handles facing away from it, so the jump between
    them bends neither neighbouring stretch of the path."""
    owner, paths = _control_channels(target)
    if owner is None or not control_fcurves(target):
        return
    for path in paths:
        owner.keyframe_insert(path, frame=frame)
    for fcurve in control_fcurves(target):
        for point in fcurve.keyframe_points:
            if abs(point.co[0] - (frame - 1)) < 1e-6:
                point.interpolation = "CONSTANT"
                point.handle_left_type = "VECTOR"
            elif abs(point.co[0] - frame) < 1e-6:
                point.handle_right_type = "VECTOR"
        fcurve.update()


def key_target_link(target, robot, link: str, frame: float) -> None:
    """Key the target's link choice at `frame`, stepped."""
    from .animation import key_stepped

    target.link_index = robot.links.index(robot.check_link(link)) + 1
    key_stepped(target, "link_index", frame)
    evaluator.mark_dirty(target.id_data)


RING_SHAPE = "Kinema Swivel Ring"


def is_link_animated(target) -> bool:
    """True when the target's link choice is keyed (a hand-off): then a switch keys it too."""
    animation = target.id_data.animation_data
    if animation is None or animation.action is None:
        return False
    from .animation import node_fcurve

    return node_fcurve(target, "link_index") is not None


def _key_choice_before(target, robot, frame: float, scene_start: float) -> None:
    """The first keyed hand-off also keys the choice the shot had until then (at the scene's
    start), so the frames before it keep aiming where they did; a lone key would hold its
    value backwards over the whole shot."""
    from .animation import node_fcurve

    fcurve = node_fcurve(target, "link_index") if target.id_data.animation_data else None
    if frame <= scene_start or (fcurve is not None and any(point.co[0] < frame - 1e-6 for point in fcurve.keyframe_points)):
        return
    key_target_link(target, robot, target.link_at_frame(robot, frame), scene_start)


def switch_target_link(context, rig, target, link: str, key: bool | None = None) -> str:
    """Aim `target` at `link` without a jump: the control is snapped onto the new link's current
    pose first, then the choice is set (and keyed, stepped, when `key` or when the choice is
    already keyed). Returns the link."""
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    link = robot.check_link(link)
    if key is None:
        key = is_link_animated(target)
    frame = context.scene.frame_current
    if key:
        _key_choice_before(target, robot, frame, context.scene.frame_start)
        hold_control_before(target, frame)
        key_target_link(target, robot, link, frame)
        keep_pose_as_posture(rig, target, frame)  # the hand-off settles from here
    else:
        target.link_index = 0
        target.link_name = link
    snap_to_tool(rig, target)  # puts the control on the link now aimed at
    if key:
        key_control_at(target, frame)
    evaluator.mark_dirty(target.id_data)
    return link


def first_target(rig):
    targets = target_nodes(rig_tree(rig), rig)
    return targets[0] if targets else None


def _insert_after(tree, node, kind: str):
    """A new node of `kind` wired into `node`'s Solution output: what `node` fed, the new node
    feeds now."""
    new = tree.nodes.new(bl_idname(kind))
    new.location = (node.location.x + 250, node.location.y)
    for to_socket in [link.to_socket for link in node.outputs["Solution"].links]:
        tree.links.new(new.outputs["Solution"], to_socket)
    tree.links.new(node.outputs["Solution"], new.inputs["Solution"])
    return new


def configuration_node(tree, solver, create: bool = False):
    """The Configuration-Select node the solver's Solution flows through (after an Elbow
    Swivel, if any); with `create`, one is wired in there when there is none."""
    node = solver
    while True:
        following = [link.to_node for link in node.outputs["Solution"].links]
        found = next((n for n in following if kind_of(n) == "configuration"), None)
        if found is not None:
            return found
        swivel = next((n for n in following if kind_of(n) == "swivel"), None)
        if swivel is None:
            break
        node = swivel
    return _insert_after(tree, node, "configuration") if create else None


def _search(rig, node, index: int | None) -> dict:
    """Run the rig's tree once with the Configuration-Select node asked for its solutions (and
    its index set to `index`, or as it is): the node's report, kept on the node."""
    tree = node.id_data
    values = {"find": True} if index is None else {"find": True, "configuration_index": index}
    results = evaluator.run_tree(tree, force=True, values={node.name: values})
    report = next((r.reports[node.name] for r in results if node.name in r.reports), None)
    if report is None:
        solver = rig_solver(tree, rig)
        why = next((r.summary for r in results if r.node == solver.name), "") or evaluator.compiled_program(tree).node_message(solver.name)
        raise ValueError(f"the Solver did not run: {why or 'nothing to solve'}")
    if report.get("refused"):
        raise ValueError(report["refused"])
    node.solutions_found = len(report["solutions"])
    return report


def find_solutions(context, rig) -> dict:
    """What Find Solutions does, through the rig's tree: the Configuration-Select node after
    the Solver (wired in if missing) searches the targets' pose now; its index is set to the
    solver's own answer among them, so nothing moves. Returns {"node", "count", "index"}."""
    if first_target(rig) is None:
        raise ValueError("this rig has no IK target")
    tree = rig_tree(rig)
    node = configuration_node(tree, rig_solver(tree, rig), create=True)
    evaluator.mark_dirty(tree)
    report = _search(rig, node, 0)
    node.configuration_index = node.solution_you_had = report["current"]
    evaluator.run_tree(tree, force=True)
    return {"node": node, "count": len(report["solutions"]), "index": node.configuration_index}


def step_configuration(rig, step: int) -> int:
    """◀ ▶: the Configuration-Select node's next (or previous) index, wrapping round its
    solutions for the pose now; the evaluator writes the joints, as on any frame (nothing is
    keyed: Key All keys the joints, Key Configuration the index). The spare joints then settle
    toward the configuration chosen. Returns the new index (1-based)."""
    from ..core.stages.configurations import step_index

    tree = rig_tree(rig)
    node = configuration_node(tree, rig_solver(tree, rig)) if tree else None
    if node is None or node.solutions_found < 0:
        raise ValueError("click Find Solutions first")
    report = _search(rig, node, None)
    count = len(report["solutions"])
    if not count:
        raise ValueError("no configuration reaches the target")
    here = node.configuration_index if node.configuration_index > 0 else max(report["current"], 1)
    node.configuration_index = step_index(count, min(here, count) - 1, step) + 1
    evaluator.run_tree(tree, force=True)
    target = first_target(rig)
    if target is not None:
        keep_pose_as_posture(rig, target)
    return node.configuration_index


def key_configuration_index(node, frame: float, index: int | None = None) -> None:
    """Key the node's configuration index at `frame`, stepped (CONSTANT): a change of index
    never passes through the configurations in between."""
    from .animation import key_stepped

    if index is not None:
        node.configuration_index = index
    key_stepped(node, "configuration_index", frame)
    node.mark_dirty()


def _ring_shape():
    """A unit circle in the bone's XZ plane (round its Y axis), shared by every ring."""
    shape = bpy.data.objects.get(RING_SHAPE)
    if shape is not None:
        return shape
    angles = np.linspace(0, 2 * np.pi, 48, endpoint=False)
    vertices = [(float(np.cos(a)), 0.0, float(np.sin(a))) for a in angles]
    edges = [(i, (i + 1) % len(vertices)) for i in range(len(vertices))]
    mesh = bpy.data.meshes.new(RING_SHAPE)
    mesh.from_pydata(vertices, edges, [])
    return bpy.data.objects.new(RING_SHAPE, mesh)


def swivel_nodes(tree):
    return [n for n in tree.nodes if kind_of(n) == "swivel"] if tree else []


def add_elbow_swivel(context, rig, target=None):
    """What Add Elbow Swivel does: a ring bone on the shoulder-to-wrist line (in Kinema/IK,
    parented to the rig's root, kept on the line by constraints as the arm moves) whose Y
    rotation is the swivel angle, set to the arm's current angle so nothing moves, and a Swivel
    node wired after the Solver. Returns (node, bone name)."""
    from ..core.stages.swivel import has_spare_joint, swivel_geometry
    from .rig import read_joint_values, robot_for_rig

    robot = robot_for_rig(rig)
    target = target or first_target(rig)
    if target is None:
        raise ValueError("add an IK target first")
    tree = target.id_data
    solver = solver_nodes(tree)[0]
    held = robot.held_joints(solver.hold_prismatic)
    link = target.link_at_frame(robot)
    if not has_spare_joint(robot, link, held):
        raise ValueError(f"the chain to '{link}' has no spare joint: its elbow cannot swing")
    geometry = swivel_geometry(robot, link, read_joint_values(rig, robot), held)
    shoulder, axis, angle = geometry["shoulder"], geometry["axis"], float(geometry["angle"])
    from ..core.stages.swivel import reference_directions

    reference, _ = reference_directions(axis[None])
    length = 0.5 * float(np.linalg.norm(geometry["wrist"] - shoulder))
    with edit_mode(context, rig) as bones:
        bone = bones.new("IK_swivel")
        name = bone.name
        bone.head = tuple(shoulder)
        bone.tail = tuple(shoulder + axis * length)
        bone.align_roll(tuple(np.cross(reference[0], axis)))  # bone X = the swivel's zero direction
        bone.parent = bones.get(robot.root_link)
        bone.use_deform = False
        ik_collection(rig.data).assign(bone)
    ring = rig.pose.bones[name]
    ring.rotation_mode = "XYZ"
    ring.lock_location = (True, True, True)
    ring.lock_rotation = (True, False, True)
    ring.lock_scale = (True, True, True)
    ring.rotation_euler = (0.0, angle, 0.0)
    ring.custom_shape = _ring_shape()
    # Keep the ring on the shoulder-to-wrist line as the arm moves (display only: the angle is
    # read from the ring's own Y rotation, which these constraints leave alone).
    from ..core.stages.swivel import swivel_links

    shoulder_link, _, wrist_link = swivel_links(robot, link, held)
    follow = ring.constraints.new("COPY_LOCATION")
    follow.target, follow.subtarget = rig, shoulder_link
    aim = ring.constraints.new("DAMPED_TRACK")
    aim.target, aim.subtarget, aim.track_axis = rig, wrist_link, "TRACK_Y"
    node = next(iter(swivel_nodes(tree)), None)
    if node is None:
        node = _insert_after(tree, solver, "swivel")
    node.swivel_angle = angle
    node.ring_object = rig
    node.ring_bone = name
    evaluator.mark_dirty(tree)
    return node, name


def ensure_bake_node(tree, scene=None):
    """The tree's Bake node, added after its first solver (range: the scene's) if missing."""
    node = baking.bake_node_of(tree)
    if node is None:
        node = tree.nodes.new(bl_idname("bake"))
        solver = next(iter(solver_nodes(tree)), None)
        if solver is not None:
            node.location = (solver.location.x + 250, solver.location.y)
            tree.links.new(solver.outputs["Solution"], node.inputs["Solution"])
        scene = scene or bpy.context.scene
        node.frame_start, node.frame_end = scene.frame_start, scene.frame_end
    return node
