"""Tool node: a tool centre point at an offset from a link, and how it travels between keys.

Wire its Link output into an IK Target's Link input: the IK Target then puts the tool centre
point (not the link) on its control. The offset is in the link's own frame, as the robot file
defines it. The same node says how the tool travels between two keys of that control: Joint
(the control's own animation, as without a Tool), Linear (a straight line, orientation on the
shortest arc) or Circular (through a via object), at a constant tool speed between ramps at the
keys (core/paths.py). Keys stay where the animator put them; the rows override the move of the
segment that starts at their key.
"""

import bpy

from ..core.graph.spec import NodeSpec
from ..core.paths import MOVES, PATH_ORIENTATIONS
from ..tree import KinemaTreeNode, property_changed

MOVE_ITEMS = [
    ("JOINT", "Joint", "The control's own animation between the keys (no Tool move)"),
    ("LINEAR", "Linear", "A straight line at constant speed; orientation on the shortest arc"),
    ("CIRCULAR", "Circular", "An arc through the via object at constant speed; orientation on the shortest arc"),
]
assert tuple(item[0] for item in MOVE_ITEMS) == MOVES


PATH_TIMING_ITEMS = [
    ("SPEED", "Speed", "Constant speed in m/s from the Start frame, with the ramps at both ends"),
    ("PROGRESS", "Progress", "A keyed value from 0 (the path's start) to 1 (its end)"),
]
PATH_ORIENTATION_ITEMS = [
    ("KEEP", "Keep", "The tool keeps the control's orientation"),
    ("TANGENT", "Tangent", "The tool turns with the path's direction (a blade), from the control's orientation at the start"),
]
assert tuple(item[0] for item in PATH_ORIENTATION_ITEMS) == PATH_ORIENTATIONS


def _is_curve(self, obj) -> bool:
    return obj.type in ("CURVE", "MESH")


class KinemaToolMove(bpy.types.PropertyGroup):
    """The move of the segment that starts at one key of the control."""

    frame: bpy.props.FloatProperty(name="Key", default=1.0, update=property_changed, description="The key frame this segment starts at")
    move: bpy.props.EnumProperty(name="Move", items=MOVE_ITEMS, default="LINEAR", update=property_changed)
    via: bpy.props.PointerProperty(name="Via", type=bpy.types.Object, update=property_changed,
                                   description="The point a Circular move passes through (default: the node's Via)")


class KinemaToolNode(KinemaTreeNode, bpy.types.Node):
    """A tool centre point at an offset from a link: the IK Target it feeds puts that point on its control, between keys or on a path"""

    kind = "tool"

    link_name: bpy.props.StringProperty(name="Link", update=property_changed, description="The link the tool is mounted on")
    offset_location: bpy.props.FloatVectorProperty(name="Offset", size=3, subtype="TRANSLATION", unit="LENGTH", update=property_changed,
                                                   description="Where the tool centre point is, in the link's frame")
    offset_rotation: bpy.props.FloatVectorProperty(name="Rotation", size=3, subtype="EULER", unit="ROTATION", update=property_changed,
                                                   description="How the tool centre point is turned from the link's frame (XYZ Euler)")
    move: bpy.props.EnumProperty(name="Moves", items=MOVE_ITEMS, default="JOINT", update=property_changed,
                                 description="How the tool travels between two keys of the control, unless a row says otherwise")
    via: bpy.props.PointerProperty(name="Via", type=bpy.types.Object, update=property_changed,
                                   description="The point Circular moves pass through")
    ramp: bpy.props.FloatProperty(name="Ramp", default=0.25, min=0.0, max=0.5, subtype="FACTOR", update=property_changed,
                                  description="Part of each segment's time spent speeding up after its first key (and slowing "
                                              "down before its last); the tool runs at constant speed in between")
    blend_radius: bpy.props.FloatProperty(name="Blend Radius", default=0.0, min=0.0, unit="LENGTH", precision=4,
                                          update=property_changed,
                                          description="At a key between two Linear or Circular moves, the tool rounds the "
                                                      "corner within this distance of the key instead of stopping there "
                                                      "(0: it stops at every key). The key frames stay where they are")
    moves: bpy.props.CollectionProperty(type=KinemaToolMove)
    path: bpy.props.PointerProperty(name="Path", type=bpy.types.Object, update=property_changed, poll=_is_curve,
                                    description="Follow Path: a curve the tool centre point runs along (its evaluated points, "
                                                "as finely as the curve's resolution); the control then gives only the orientation")
    path_timing: bpy.props.EnumProperty(name="Timing", items=PATH_TIMING_ITEMS, default="SPEED", update=property_changed)
    path_speed: bpy.props.FloatProperty(name="Speed", default=0.05, min=0.0, unit="VELOCITY", update=property_changed,
                                        description="The tool's constant speed along the path, in m/s, between the ramps")
    path_start: bpy.props.FloatProperty(name="Start", default=1.0, update=property_changed,
                                        description="The frame the tool leaves the path's start")
    path_progress: bpy.props.FloatProperty(name="Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR", update=property_changed,
                                           description="How far along the path the tool is (Timing Progress): key it")
    path_orientation: bpy.props.EnumProperty(name="Orientation", items=PATH_ORIENTATION_ITEMS, default="KEEP", update=property_changed)
    approach: bpy.props.FloatProperty(name="Approach", default=0.0, min=0.0, unit="LENGTH", update=property_changed,
                                      description="Follow Path (Keep): the tool comes in along its Z axis over this distance to the start")
    retract: bpy.props.FloatProperty(name="Retract", default=0.0, min=0.0, unit="LENGTH", update=property_changed,
                                     description="Follow Path (Keep): the tool backs away along its Z axis this far from the end")
    chordal_tolerance: bpy.props.FloatProperty(name="Chordal", default=0.0, min=0.0, unit="LENGTH", precision=5,
                                               update=property_changed,
                                               description="Follow Path (a Bezier curve): each straight step of the path "
                                                           "stays within this distance of the curve (0: the curve's own resolution)")
    angular_tolerance: bpy.props.FloatProperty(name="Angular", default=0.0, min=0.0, max=3.141592653589793, subtype="ANGLE",
                                               update=property_changed,
                                               description="Follow Path (a Bezier curve): two steps of the path in a row turn by "
                                                           "at most this much (0: no limit)")
    turn_about_axis: bpy.props.BoolProperty(name="Turn About Axis", default=False, update=property_changed,
                                            description="Follow Path: the solver may turn the tool about its own Z axis, within "
                                                        "the range, choosing the turn that keeps the joints furthest from limits "
                                                        "and singularities, continuous along the path")
    turn_range: bpy.props.FloatProperty(name="Turn Range", default=3.141592653589793, min=0.0, max=3.141592653589793,
                                        subtype="ANGLE", update=property_changed,
                                        description="Follow Path: how far either way the tool may turn about its axis")

    def draw_buttons(self, context, layout):
        rig = self.robot_rig()
        if rig is not None:
            layout.prop_search(self, "link_name", rig.data, "bones", text="Link")
        else:
            layout.prop(self, "link_name", text="Link")
        layout.prop(self, "offset_location")
        layout.prop(self, "offset_rotation")
        layout.prop(self, "path")
        if self.path is not None:
            layout.prop(self, "path_timing", expand=True)
            layout.prop(self, "path_speed" if self.path_timing == "SPEED" else "path_progress")
            if self.path_timing == "SPEED":
                layout.prop(self, "path_start")
            layout.prop(self, "path_orientation", expand=True)
            layout.prop(self, "approach")
            layout.prop(self, "retract")
            draw_path_sampling(layout, self)
            self.draw_messages(layout)
            return
        layout.prop(self, "move")
        layout.prop(self, "via")
        layout.prop(self, "ramp")
        layout.prop(self, "blend_radius")
        for index, row in enumerate(self.moves):
            line = layout.row(align=True)
            line.prop(row, "frame", text="")
            line.prop(row, "move", text="")
            line.prop(row, "via", text="")
            op = line.operator("kinema.tool_move_row", text="", icon="X")
            op.node, op.index = self.name, index
        op = layout.operator("kinema.tool_move_row", text="Add Move", icon="ADD")
        op.node, op.index = self.name, -1
        self.draw_messages(layout)

    def robot_rig(self):
        """The rig of the IK Target this Tool feeds (for the link picker)."""
        for link in self.outputs["Link"].links:
            finder = getattr(link.to_node, "robot_rig", None)
            if finder is not None:
                return finder()
        return None

    def link_at(self, frame: float) -> str | None:
        """The link the IK Target aims at: the Tool's link (None: the target's own choice)."""
        return self.link_name or None

    def offset_wxyz(self) -> tuple[float, float, float, float]:
        from mathutils import Euler

        return tuple(Euler(self.offset_rotation, "XYZ").to_quaternion())

    def move_at(self, key: float) -> tuple[str, object]:
        """(move, via object) of the segment that starts at `key`."""
        for row in self.moves:
            if abs(row.frame - key) < 0.5:
                return row.move, row.via or self.via
        return self.move, self.via

    def add_move(self, frame: float, move: str, via=None):
        row = self.moves.add()
        row.frame, row.move, row.via = float(frame), move, via
        self.mark_dirty()
        return row

    def to_spec(self) -> NodeSpec:
        # Keys are the node's property names, so a preset carries the Tool (its link as a role).
        # The via object and the per-key rows belong to one shot's keys and objects: read each
        # frame (blender/path_moves.py), not compiled, not in presets.
        return NodeSpec.make(
            self.name, "tool", link=self.link_name, offset_location=tuple(float(v) for v in self.offset_location),
            offset_rotation=tuple(float(v) for v in self.offset_rotation), move=self.move.lower(), ramp=float(self.ramp),
            blend_radius=float(self.blend_radius),
            path_timing=self.path_timing.lower(), path_speed=float(self.path_speed), path_orientation=self.path_orientation.lower(),
            approach=float(self.approach), retract=float(self.retract),
            turn_about_axis=bool(self.turn_about_axis), turn_range=float(self.turn_range),
            chordal_tolerance=float(self.chordal_tolerance), angular_tolerance=float(self.angular_tolerance),
        )


CLASSES = (KinemaToolMove, KinemaToolNode)


def draw_path_sampling(layout, tool) -> None:
    """The Follow Path rows the node and the Tool panel share: chordal and angular tolerances,
    the turn about the tool axis, the ramp."""
    row = layout.row(align=True)
    row.prop(tool, "chordal_tolerance")
    row.prop(tool, "angular_tolerance")
    row = layout.row(align=True)
    row.prop(tool, "turn_about_axis", text="")
    sub = row.row(align=True)
    sub.active = tool.turn_about_axis
    sub.prop(tool, "turn_range")
    layout.prop(tool, "ramp")
