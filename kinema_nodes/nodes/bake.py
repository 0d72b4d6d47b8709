"""Bake node: the frame range and speed limit of a bake, and the last bake's report.

The node computes nothing: `baking.bake_tree` (run by Bake to Keyframes in the panel, the node's
button, or the CLI) solves every frame through the evaluator and keys the joints.
"""

import json

import bpy

from ..tree import property_changed
from .solution_node import SolutionNode


class KinemaBakeNode(SolutionNode, bpy.types.Node):
    """Solves every frame of a range and keys the joints"""

    kind = "bake"
    settings = ("frame_start", "frame_end")

    frame_start: bpy.props.IntProperty(name="Start", default=1, update=property_changed)
    frame_end: bpy.props.IntProperty(name="End", default=250, update=property_changed)
    speed_limit: bpy.props.FloatProperty(
        name="Speed Limit", default=100.0, min=1.0, max=1000.0, subtype="PERCENTAGE",
        description="Flag frames where a joint moves faster than this share of its URDF velocity limit")
    last_report: bpy.props.StringProperty(name="Last Report", description="The last bake's findings (JSON, by rig)")

    def init(self, context):
        super().init(context)
        scene = context.scene if context else None
        if scene is not None:
            self.frame_start, self.frame_end = scene.frame_start, scene.frame_end

    def draw_buttons(self, context, layout):
        row = layout.row(align=True)
        row.prop(self, "frame_start")
        row.prop(self, "frame_end")
        layout.prop(self, "speed_limit")
        layout.operator("kinema.bake", icon="KEYFRAME").tree = self.id_data.name
        draw_report(self, layout)
        self.draw_messages(layout)

    def report(self) -> dict:
        """The last bake's findings by rig name ({} before the first bake)."""
        try:
            return json.loads(self.last_report) if self.last_report else {}
        except ValueError:
            return {}


def draw_report(node, layout, limit: int = 6) -> None:
    """Counts and the flagged frames of the last bake."""
    from ..blender.baking import frame_ranges

    for rig_name, report in node.report().items():
        column = layout.column(align=True)
        converged, frames, planned = report["converged"], report["frames"], len(report.get("planned", []))
        text = f"{rig_name}: {converged}/{frames} frames converged" + (f", {planned} planned" if planned else "")
        column.label(text=text, icon="CHECKMARK" if converged + planned == frames else "ERROR")
        for row in report.get("segments", []):
            if row["mode"] == "planned":
                least = row.get("least_clearance_m")
                column.label(text=f"Frames {row['first']}–{row['last']} planned, least clearance "
                                  + ("—" if least is None else f"{least * 1000:.1f} mm"), icon="IPO_EASE_IN_OUT")
        kinds = (("not_converged", "not converged"), ("near_limit", "near a limit"), ("too_fast", "too fast"), ("flips", "branch flips"),
                 ("in_collision", "in collision"))
        for key, words in kinds:
            frames_of = sorted(int(f) for f in report.get(key, []))
            if frames_of:
                text = frame_ranges(frames_of)
                if len(text) > 40:
                    text = text[:40] + "…"
                column.label(text=f"{len(frames_of)} {words}: {text}")
        if report.get("min_clearance_m") is not None:
            column.label(text=f"Least clearance {report['min_clearance_m'] * 1000:.1f} mm "
                              f"(margin {(report.get('margin_m') or 0.0) * 1000:.1f} mm)", icon="DRIVER_DISTANCE")
        if not report.get("flagged"):
            column.label(text="No frames flagged")


CLASSES = (KinemaBakeNode,)
