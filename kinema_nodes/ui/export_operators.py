"""File ▸ Export entries for a baked robot shot, and the Bake section's limits: Check Limits,
Retime and the per-joint table. Thin: every number comes from `blender.limits` and `core`."""

from __future__ import annotations

import bpy
from bpy_extras.io_utils import ExportHelper

from ..blender import limits as rig_limits
from ..blender.edit import active_rig
from . import ReportingOperator
from ..core.errors import KinemaError

FORMAT_ITEMS = [
    ("csv", "CSV", "time_s and one column per joint (rad, m), robot and frame rate in a leading comment"),
    ("json", "JSON", "robot, URDF sha256, joint names, units, frame rate, limits, positions"),
    ("ros2", "ROS 2 JointTrajectory", "trajectory_msgs/msg/JointTrajectory as a rosbag2 folder and as YAML"),
    ("mujoco", "MuJoCo qpos", "qpos ordered for an MJCF model's joints, in an .npz"),
]
EXTENSIONS = {"csv": ".csv", "json": ".json", "ros2": "", "mujoco": ".npz"}


def _rig(context, name: str = ""):
    if name:
        return rig_limits.find_rig(name)
    rig = active_rig(context)
    return rig if rig is not None else rig_limits.find_rig(None)


class KINEMA_OT_export_trajectory(ReportingOperator, bpy.types.Operator, ExportHelper):
    """Export the rig's baked joint motion for a robot or a simulator"""

    bl_idname = "kinema.export_trajectory"
    bl_label = "Export Robot Trajectory"
    bl_options = {"REGISTER"}  # noqa: RUF012 -- Blender reads a set

    filename_ext = ""
    format: bpy.props.EnumProperty(name="Format", items=FORMAT_ITEMS, default="csv")
    rig: bpy.props.StringProperty(name="Rig", description="Rig to export (default: the active one)")
    use_scene_range: bpy.props.BoolProperty(name="Scene Frame Range", default=False,
                                            description="Export the scene's frame range instead of everything baked")
    velocities: bpy.props.BoolProperty(name="Velocities", default=False, description="JSON: add velocities per frame")
    topic: bpy.props.StringProperty(name="Topic", default="/joint_trajectory", description="ROS 2: the bag's topic")
    model: bpy.props.StringProperty(name="MJCF Model", subtype="FILE_PATH",
                                    description="MuJoCo: the model whose joints order qpos")
    replace_bag: bpy.props.BoolProperty(name="Replace Existing Bag", default=False,
                                        description="ROS 2: replace a bag already at this path (a folder holding "
                                                    "anything but the bag is never replaced)")

    def invoke(self, context, event):
        self.filename_ext = EXTENSIONS[self.format]
        return ExportHelper.invoke(self, context, event)

    def execute(self, context):
        return self.reported(lambda: self.export(context))

    def export(self, context):
        from ..core.shot.export import export

        rig = _rig(context, self.rig)
        frames = (context.scene.frame_start, context.scene.frame_end) if self.use_scene_range else None
        trajectory = rig_limits.rig_trajectory(rig, context.scene, frames)
        paths = export(trajectory, self.format, bpy.path.abspath(self.filepath), topic=self.topic,
                       model=bpy.path.abspath(self.model) if self.model else None, velocities=self.velocities,
                       force=self.replace_bag)
        flagged = trajectory.report is not None and trajectory.report.flagged
        return ({"WARNING"} if flagged else {"INFO"},
                f"exported {len(trajectory.frames)} frames to {', '.join(str(p) for p in paths)}"
                + ("; limits exceeded (see Check Limits)" if flagged else ""))


class _OnBakedRig(ReportingOperator):
    """An operator on one rig's baked curves (by name, else the active rig), its answer one report
    line (UNDO, ReportingOperator's: each writes onto the rig or the file)."""

    rig: bpy.props.StringProperty(name="Rig")

    def execute(self, context):
        return self.reported(lambda: self.on_rig(_rig(context, self.rig), context.scene))


class KINEMA_OT_check_limits(_OnBakedRig, bpy.types.Operator):
    """Check the baked joint curves against velocity, acceleration and jerk limits (flags only: the animation is not changed)"""

    bl_idname = "kinema.check_limits"
    bl_label = "Check Limits"

    def on_rig(self, rig, scene):
        """Writes timeline markers and the table on the rig."""
        rows = rig_limits.check_rig(rig, scene)[0].table()
        if not rows:
            return "within every limit checked"
        return {"WARNING"}, (f"{len(rows)} limit violations: "
                             + "; ".join(f"{r['kind']} {r['joint']} ({len(r['frames'])} frames)" for r in rows[:4]))


class KINEMA_OT_retime(_OnBakedRig, bpy.types.Operator):
    """Write a retimed copy of the action: the same path at the fastest timing the velocity and acceleration limits allow (the original is kept)"""

    bl_idname = "kinema.retime"
    bl_label = "Retime"

    def on_rig(self, rig, scene):
        result, action = rig_limits.retime_rig(rig, scene)
        return (f"shortest executable: {result.optimal_duration_s:.2f} s (was {result.original_duration_s:.2f} s); "
                f"'{action.name}' has {result.frame_count} frames")


class KINEMA_OT_per_joint_limits(bpy.types.Operator):
    """List every joint, so it can have its own acceleration and jerk limits"""

    bl_idname = "kinema.per_joint_limits"
    bl_label = "Per-Joint Limits"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 -- Blender reads a set

    def execute(self, context):
        from ..blender.rig import robot_for_rig

        rig = active_rig(context)
        if rig is None:
            return {"CANCELLED"}
        settings = rig.data.kinema_limits
        present = {item.joint for item in settings.joints}
        for name in robot_for_rig(rig).actuated_joint_names:
            if name not in present:
                settings.joints.add().joint = name
        return {"FINISHED"}


def check_after_bake(context, results) -> None:
    """After Bake to Keyframes: check each baked rig's limits (markers, the table). Flags only."""
    for result in results:
        try:
            rig_limits.check_rig(result.rig, context.scene)
        except KinemaError:
            continue  # nothing keyed on that rig's joints: nothing to check


def draw_limits(layout, rig) -> None:
    """The Bake section's limits: settings, Check Limits / Retime, and the last check's table."""
    settings = getattr(rig.data, "kinema_limits", None)
    if settings is None:
        return
    box = layout.box()
    box.label(text="Robot Limits", icon="DRIVER_ROTATIONAL_DIFFERENCE")
    box.prop(settings, "margin")
    row = box.row(align=True)
    row.prop(settings, "max_acceleration", text="Max Acceleration")
    row.prop(settings, "max_jerk", text="Max Jerk")
    if len(settings.joints):
        grid = box.grid_flow(columns=3, align=True)
        for item in settings.joints:
            grid.label(text=item.joint)
            grid.prop(item, "max_acceleration", text="")
            grid.prop(item, "max_jerk", text="")
    else:
        box.operator(KINEMA_OT_per_joint_limits.bl_idname)
    row = box.row(align=True)
    row.operator(KINEMA_OT_check_limits.bl_idname, icon="CHECKMARK").rig = rig.name
    row.operator(KINEMA_OT_retime.bl_idname, icon="TIME").rig = rig.name
    found = rig_limits.last_check(rig)
    if not found:
        return
    table = found.get("table", [])
    if not table:
        box.label(text=f"Frames {found['frames'][0]}–{found['frames'][1]}: within every limit checked", icon="CHECKMARK")
        return
    from ..blender.baking import frame_ranges

    from ..blender.rig import robot_for_rig

    robot = robot_for_rig(rig)
    grid = box.grid_flow(columns=4, align=True)
    for heading in ("Joint", "Worst", "Limit", "Frames"):
        grid.label(text=heading)
    for row in table:
        unit = limit_unit(robot, row["joint"], row["kind"])
        grid.label(text=f"{row['joint']} ({row['kind'][:3]})", icon="ERROR")
        grid.label(text=f"{row['worst']:.3g} {unit}")
        grid.label(text=f"{row['limit']:.3g} {unit}")
        text = frame_ranges(row["frames"])
        grid.label(text=text if len(text) <= 24 else text[:23] + "…")


def limit_unit(robot, joint: str, kind: str) -> str:
    """The unit of a velocity, acceleration or jerk limit on `joint`: rad/s² for a revolute
    joint, m/s² for a slide."""
    names = list(robot.actuated_joint_names)
    metres = joint in names and bool(robot.is_prismatic[names.index(joint)])
    return ("m" if metres else "rad") + {"velocity": "/s", "acceleration": "/s²", "jerk": "/s³"}[kind]


def _menu(self, context):
    for key, label, _ in FORMAT_ITEMS:
        self.layout.operator(KINEMA_OT_export_trajectory.bl_idname, text=f"Robot Trajectory: {label}").format = key


CLASSES = (KINEMA_OT_export_trajectory, KINEMA_OT_check_limits, KINEMA_OT_retime, KINEMA_OT_per_joint_limits)


def register() -> None:
    bpy.types.TOPBAR_MT_file_export.append(_menu)


def unregister() -> None:
    bpy.types.TOPBAR_MT_file_export.remove(_menu)
