"""Robot node: the rig (armature) the graph drives."""

import bpy

from ..core.graph.spec import NodeSpec
from ..tree import KinemaTreeNode, property_changed


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


def _role_items(self, context):
    from ..core.roles import ROLE_LABELS, ROLES

    return [(role, ROLE_LABELS[role], f"The link presets mean by '{ROLE_LABELS[role]}' on this robot") for role in ROLES]


class KinemaRoleOverride(bpy.types.PropertyGroup):
    """A role set by hand: presets that name this role bind it to this link"""

    role: bpy.props.EnumProperty(name="Role", items=_role_items)
    link: bpy.props.StringProperty(name="Link", description="The link (bone) that fills this role on this robot")


class KinemaRobotNode(KinemaTreeNode, bpy.types.Node):
    """The robot rig this graph drives"""

    kind = "robot"

    rig: bpy.props.PointerProperty(name="Rig", type=bpy.types.Object, poll=_is_armature, update=property_changed,
                                   description="The armature made by Import URDF")
    role_overrides: bpy.props.CollectionProperty(type=KinemaRoleOverride, name="Roles",
                                                 description="Roles set by hand (tool point, flange, wrist, ...) for presets; "
                                                             "the others are inferred from the robot's structure")

    def draw_buttons(self, context, layout):
        layout.prop(self, "rig", text="")
        self.draw_messages(layout)

    def draw_buttons_ext(self, context, layout):
        self.draw_buttons(context, layout)
        draw_roles(self, layout)

    def role_override_map(self) -> dict[str, str]:
        """{role: link} set by hand on this node (empty links are ignored)."""
        return {item.role: item.link for item in self.role_overrides if item.link}

    def to_spec(self) -> NodeSpec:
        from ..blender.rig import is_rig

        rig = self.rig
        robot = is_rig(rig)
        # The robot's hash too: a link renamed (blender/renames.py: follow_renames) is a new robot to compile.
        return NodeSpec.make(self.name, "robot", rig=rig.name if rig else "", rig_is_armature=bool(rig) and robot,
                             robot=rig.data.kinema.urdf_hash if robot else "")


def draw_roles(node, layout):
    """The robot's roles for presets: inferred ones, and the ones set by hand (editable)."""
    from ..core.roles import ROLE_LABELS, resolve_roles
    from ..blender.rig import is_rig, robot_for_rig

    box = layout.box()
    box.label(text="Roles (for presets)")
    rig = node.rig
    binding = None
    if rig is not None and is_rig(rig):
        try:
            binding = resolve_roles(robot_for_rig(rig), node.role_override_map())
        except Exception:  # noqa: BLE001 - a rig whose URDF no longer reads shows no roles
            binding = None
    if binding is not None:
        column = box.column(align=True)
        for role, link in binding.links.items():
            hand = " (by hand)" if role in binding.overridden else ""
            column.label(text=f"{ROLE_LABELS[role]}: {link}{hand}")
    for index, item in enumerate(node.role_overrides):
        row = box.row(align=True)
        row.prop(item, "role", text="")
        if rig is not None and rig.type == "ARMATURE":
            row.prop_search(item, "link", rig.data, "bones", text="")
        else:
            row.prop(item, "link", text="")
        remove = row.operator("kinema.role_override_remove", text="", icon="X")
        remove.node, remove.index = node.name, index
    box.operator("kinema.role_override_add", text="Set a Role by Hand", icon="ADD").node = node.name


CLASSES = (KinemaRoleOverride, KinemaRobotNode)
