"""A tree follows its rig's bones when they are renamed, as Blender's IK constraint does.

Apart from `edit.py` because the evaluator calls it before each snapshot of a tree, and
`edit.py` itself calls the evaluator: this module knows the session and the registry only.
"""

from __future__ import annotations

import uuid

import bpy

from ..core.graph.registry import TREE_IDNAME, kind_of
from ..session import SESSION, mark_dirty


def follow_renames(tree) -> None:
    """Follow bones renamed since the last look, for the armatures `tree` names (its Robot nodes'
    rigs, its targets' controls): a renamed link bone renames its link in the URDF the rig
    carries (`_follow_links`), a renamed control bone is found again by the key it and its target
    share (`_follow_control`). Runs before each snapshot of the tree; an armature whose bone names
    are those it had at the last look costs one `keys()` call."""
    if tree.library is not None:
        return
    seen = SESSION.bone_names
    key = tree.as_pointer()
    changed: dict[tuple, list] = {}
    for node in tree.nodes:
        kind = kind_of(node)
        obj = node.rig if kind == "robot" else node.control_object if kind == "ik_target" else None
        if obj is None or obj.type != "ARMATURE":
            continue
        memo = (key, obj.data.as_pointer())
        if memo in changed or seen.get(memo) != obj.data.bones.keys():
            changed.setdefault(memo, []).append((kind != "robot", node, obj))
    for memo, nodes in changed.items():
        for is_target, node, obj in sorted(nodes, key=lambda found: found[0]):  # links first: a target's link may be renamed
            if is_target:
                _follow_control(node)
            else:
                _follow_links(obj)
        seen[memo] = nodes[0][2].data.bones.keys()


def _follow_links(rig) -> dict[str, str]:
    """Rename, in the URDF the rig carries, each link whose bone was renamed, and in every node
    that names it (a target's Target Bone, a Link Switch's rows, a role set by hand) and the rig's
    tool point. A link's bone is known by the joint it stores (`Bone.kinema.joint`), the root's
    as the parent of the root's children's. Returns {old link: new link}."""
    from ..core.model.renames import rename_links
    from .rig import is_rig, robot_for_rig, urdf_hash

    armature = rig.data
    if not is_rig(rig) or armature.library is not None:
        return {}
    robot = robot_for_rig(rig)
    bones = armature.bones
    by_joint = {bone.kinema.joint: bone.name for bone in bones if bone.kinema.joint}
    renamed = {joint.child: by_joint[joint.name] for joint in robot.joints
               if joint.name in by_joint and by_joint[joint.name] != joint.child}
    child = next((by_joint.get(j.name) for j in robot.joints if j.parent == robot.root_link), None)
    root = bones[child].parent if child in bones else None
    if root is not None and root.name != robot.root_link:
        renamed[robot.root_link] = root.name
    if not renamed:
        return renamed
    settings = armature.kinema
    settings.urdf_text = rename_links(settings.urdf_text, renamed, settings.urdf_path or "rig.urdf")
    settings.urdf_hash = urdf_hash(settings.urdf_text)
    settings.tool_point = renamed.get(settings.tool_point, settings.tool_point)
    settings.fingerprint = robot_for_rig(rig).fingerprint
    for tree in bpy.data.node_groups:
        if tree.bl_idname == TREE_IDNAME and tree.library is None:
            _rename_links_in(tree, armature, renamed)
    return renamed


def _rename_links_in(tree, armature, renamed: dict[str, str]) -> None:
    """The link names `tree`'s nodes keep for rigs of `armature`, renamed."""
    from .flatten import all_nodes

    nodes = all_nodes(tree)
    robots = [n for n in nodes if kind_of(n) == "robot" and n.rig is not None and n.rig.data == armature]
    if not robots:
        return
    for node in robots:
        for item in node.role_overrides:
            if item.link in renamed:
                item.link = renamed[item.link]
    for node in nodes:
        if kind_of(node) == "ik_target":
            rig = node.robot_rig()
            if rig is not None and rig.data == armature and node.link_name in renamed:
                node.link_name = renamed[node.link_name]
        for row in getattr(node, "ranges", ()):
            if getattr(row, "link", None) in renamed:
                row.link = renamed[row.link]
    mark_dirty(tree)


def _follow_control(target) -> None:
    """A target's control bone, found again by its key when renamed; a target that has no key
    yet (made by a preset, or before keys) takes its bone's, which gets one if it has none."""
    armature = target.control_object.data
    bones = armature.bones
    bone = bones.get(target.control_bone) if target.control_bone else None
    if target.control_key:
        if bone is not None and bone.kinema.control == target.control_key:
            return
        found = next((b for b in bones if b.kinema.control == target.control_key), None)
        if found is not None:
            target.control_bone = found.name
        return
    if bone is None:
        return
    if not bone.kinema.control and armature.library is None:
        bone.kinema.control = uuid.uuid4().hex
    if bone.kinema.control:
        target.control_key = bone.kinema.control
