"""Set Up Tool: the quick set-up of a tool centre point (the Tool node's own module is
nodes/tool.py; its frame-by-frame part is blender/path_moves.py)."""

from __future__ import annotations

import numpy as np

from .path_moves import tool_of, tool_offset, tool_poses


def set_up_tool(rig, link: str, location, rotation, target=None, snap: bool = True):
    """What Set Up Tool does: the Tool node of the rig's IK Target (`target`, default its first),
    made and wired into the target's Link input when it has none, mounted on `link` at the offset
    (`location` in metres, `rotation` XYZ Euler radians, in the link's frame). With `snap`, the
    control moves onto the tool centre point where the arm is now, so the arm does not jump.
    Returns the Tool node."""
    from .. import evaluator
    from ..core.errors import KinemaError
    from ..core.graph.registry import bl_idname
    from .edit import rig_tree, target_nodes
    from .rig import robot_for_rig

    robot = robot_for_rig(rig)
    link = robot.check_link(link or robot.tool_point)
    tree = rig_tree(rig)
    targets = target_nodes(tree, rig) if tree is not None else []
    target = target or (targets[0] if targets else None)
    if target is None:
        raise KinemaError("this rig has no IK target: add one first (Add IK Target)")
    tool = tool_of(target)
    if tool is None:
        tool = target.id_data.nodes.new(bl_idname("tool"))
        tool.location = (target.location.x - 260, target.location.y - 120)
        target.id_data.links.new(tool.outputs["Link"], target.inputs["Link"])
    tool.link_name = link
    tool.offset_location = tuple(location)
    tool.offset_rotation = tuple(rotation)
    if snap:
        snap_control_to_tool(rig, target)
    evaluator.mark_dirty(target.id_data)
    return tool


def tool_segments(target_node, rig, fps: float) -> list[dict]:
    """`path_moves.segments` of the Tool feeding `target_node`, at the current frame ([] without one)."""
    import bpy

    from ..evaluator import control_pose
    from .path_moves import segments

    tool = tool_of(target_node)
    if tool is None:
        return []
    return segments(tool, target_node, rig, control_pose(target_node, rig), bpy.context.scene.frame_current, fps)


def snap_control_to_tool(rig, target) -> None:
    """Move the IK Target's control onto its Tool's centre point where the arm is now (nothing
    when no Tool feeds it), and keep that pose as the posture: adding a tool never moves the arm."""
    from mathutils import Matrix

    from ..core.model.kinematics import link_pose
    from .edit import keep_pose_as_posture
    from .rig import read_joint_values, robot_for_rig

    tool = tool_of(target)
    control = target.control_object
    if tool is None or control is None:
        return
    robot = robot_for_rig(rig)
    link = tool.link_name or target.link_for_index(robot, 0)
    pose = Matrix(link_pose(robot, read_joint_values(rig, robot), link) @ tool_offset(tool))
    if target.control_bone:
        bone = control.pose.bones[target.control_bone]
        bone.matrix = pose if control == rig else control.matrix_world.inverted_safe() @ rig.matrix_world @ pose
    else:
        control.matrix_world = rig.matrix_world @ pose
    keep_pose_as_posture(rig, target)


PREVIEW_SUFFIX = " Reach Preview"


def preview_reach(context, rig, target=None, frames=None, **margins):
    """What Preview Reach does: the tool's pose at every frame of the scene (or `frames`), solved
    one after another from the arm's pose now and judged (core/reach_preview.py), shown as a
    point per frame coloured by its verdict (green reachable, yellow near a singularity, orange
    near a joint limit, red unreachable) on a mesh in the rig's space, made again each time.
    Returns (the preview object, [(frame, Sample)])."""
    import bpy

    from .. import evaluator
    from ..core import reach_preview
    from ..core.errors import KinemaError
    from ..core.paths import link_goal
    from .edit import rig_tree, target_nodes
    from .reach import _material, _points_group
    from .rig import read_joint_values, robot_for_rig

    tree = rig_tree(rig)
    targets = target_nodes(tree, rig) if tree is not None else []
    target = target or (targets[0] if targets else None)
    tool = tool_of(target) if target is not None else None
    if tool is None:
        raise KinemaError("no Tool feeds this rig's IK target: Set Up Tool first")
    program = evaluator.program_for(tree)
    step = next((s for s in program.steps if any(t.node == target.name for t in s.targets)), None)
    if step is None:
        raise KinemaError(f"'{target.name}' feeds no Solver that can run")
    robot = robot_for_rig(rig)
    scene = context.scene
    frames = list(frames if frames is not None else range(scene.frame_start, scene.frame_end + 1))
    pose_now = evaluator.control_pose(target, rig)
    if pose_now is None:
        raise KinemaError(f"the control of '{target.name}' has no usable pose")
    poses = tool_poses(tool, target, rig, pose_now, scene.frame_current, frames, step)
    offset = tool_offset(tool)


    options = reach_preview.bake_solve_options(step, robot)
    link = tool.link_name or target.link_for_index(robot, 0)
    samples = reach_preview.preview(robot, link, [link_goal(p, offset) for p in poses], read_joint_values(rig, robot), options,
                                    **margins)
    name = rig.name + PREVIEW_SUFFIX
    old = bpy.data.objects.get(name)
    if old is not None:
        mesh = old.data
        bpy.data.objects.remove(old)
        bpy.data.meshes.remove(mesh)
    mesh = bpy.data.meshes.new(name)
    points = np.array([p[:3, 3] for p in poses], dtype=np.float32)
    mesh.vertices.add(len(points))
    mesh.vertices.foreach_set("co", points.ravel())
    mesh.edges.add(max(len(points) - 1, 0))
    mesh.edges.foreach_set("vertices", np.array([(i, i + 1) for i in range(len(points) - 1)], dtype=np.int32).ravel())
    verdicts = np.array([reach_preview.VERDICTS.index(s.verdict) for s in samples], dtype=np.int32)
    colours = np.ones((len(samples), 4), dtype=np.float32)
    colours[:, :3] = [reach_preview.COLOURS[s.verdict] for s in samples]
    mesh.attributes.new("reach_verdict", "INT", "POINT").data.foreach_set("value", verdicts)
    mesh.attributes.new("reach_color", "FLOAT_COLOR", "POINT").data.foreach_set("color", colours.ravel())
    mesh.update()
    material = _material(bpy)
    mesh.materials.append(material)
    obj = bpy.data.objects.new(name, mesh)
    obj.modifiers.new("Reach Points", "NODES").node_group = _points_group(bpy, 0.004, material)
    scene.collection.objects.link(obj)
    obj.parent = rig  # drawn in the robot's root frame
    obj["kinema_reach_preview"] = str(reach_preview.counts(samples))
    return obj, list(zip(frames, samples))
