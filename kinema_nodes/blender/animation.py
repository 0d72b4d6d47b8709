"""F-curves of a data-block, and stepped keys for choices (an index is not a quantity).

One place for both so that Key Target Bone, Key Configuration and presets agree, on Blender 5's
slotted actions and on 4.5's legacy `Action.fcurves`.
"""

from __future__ import annotations


def fcurves(id_data) -> list:
    """Every F-curve animating `id_data` (empty when it has no action)."""
    animation = id_data.animation_data
    if animation is None or animation.action is None:
        return []
    action = animation.action
    if hasattr(action, "fcurves") and not getattr(action, "is_action_layered", False):
        return list(action.fcurves)
    from bpy_extras import anim_utils

    channelbag = anim_utils.action_get_channelbag_for_slot(action, animation.action_slot)
    return list(channelbag.fcurves) if channelbag else []


def quoted(name: str) -> str:
    """`name` as Blender quotes it inside an RNA path: a backslash or a double quote in a link
    or node name must not end the string."""
    return name.replace("\\", "\\\\").replace('"', '\\"')


def unquoted_prefix(path: str, collection: str) -> tuple[str, str] | None:
    """('name', 'rest of the path') for an RNA path ``collection["NAME"]rest`` (the inverse of
    `quoted`; the rest keeps its leading ``.`` or ``[``), or None when the path is not one."""
    head = f'{collection}["'
    if not path.startswith(head):
        return None
    name, i = [], len(head)
    while i < len(path):
        char = path[i]
        if char == "\\" and i + 1 < len(path):
            name.append(path[i + 1])
            i += 2
        elif char == '"':
            return ("".join(name), path[i + 2:]) if path[i + 1:i + 2] == "]" else None
        else:
            name.append(char)
            i += 1
    return None


def pose_bone_path(bone: str, data_path: str) -> str:
    """The RNA path of a pose bone's property (F-curves, drivers); `data_path` is a property
    name or a custom property's `["name"]`."""
    return f'pose.bones["{quoted(bone)}"]{"" if data_path.startswith("[") else "."}{data_path}'


def node_path(node_name: str, rest: str) -> str:
    """The RNA path of a node's property in its tree; `rest` starts with ``.`` or ``[``."""
    return f'nodes["{quoted(node_name)}"]{rest}'


def node_fcurve(node, property_name: str):
    """The F-curve of a node's property in its tree, or None."""
    path = node_path(node.name, f".{property_name}")
    return next((f for f in fcurves(node.id_data) if f.data_path == path), None)


def key_stepped(node, property_name: str, frame: float) -> None:
    """Key a node's property at `frame` with CONSTANT interpolation: a change of choice never
    passes through the values in between (Blender keys int properties LINEAR by default)."""
    node.keyframe_insert(property_name, frame=frame)
    fcurve = node_fcurve(node, property_name)
    if fcurve is not None:
        for point in fcurve.keyframe_points:
            point.interpolation = "CONSTANT"
        fcurve.update()


def remove_fcurves(id_data, prefixes: tuple[str, ...]) -> int:
    """Delete the F-curves of `id_data` whose data path starts with one of `prefixes`; an action
    left with no F-curve at all is unassigned and deleted (it only held what was removed).
    Returns how many F-curves went."""
    import bpy

    animation = id_data.animation_data
    if animation is None or animation.action is None or not prefixes:
        return 0
    action = animation.action
    if hasattr(action, "fcurves") and not getattr(action, "is_action_layered", False):
        collection = action.fcurves
    else:
        from bpy_extras import anim_utils

        collection = getattr(anim_utils.action_get_channelbag_for_slot(action, animation.action_slot), "fcurves", None)
    if collection is None:
        return 0
    doomed = [f for f in collection if f.data_path.startswith(prefixes)]
    for fcurve in doomed:
        collection.remove(fcurve)
    if doomed and not len(collection) and action.users <= 1 and not animation.drivers and not animation.nla_tracks:
        animation.action = None
        bpy.data.actions.remove(action)
        id_data.animation_data_clear()
    return len(doomed)
