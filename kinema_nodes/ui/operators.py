"""Operators of the robot rig: Import URDF, Import Robot by Name, Key All, Reset to zero.

Each does its work in one call of `execute`, so one undo step takes it all back; errors the
user can act on are reported in Blender's report area, never as a traceback.
"""

import bpy
from bpy_extras.io_utils import ImportHelper

from . import ReportingOperator, RigOperator, file_filter
from ..blender import rig
from ..blender.edit import active_rig
from ..core.errors import KinemaError


class KINEMA_OT_import_urdf(ReportingOperator, bpy.types.Operator, ImportHelper):
    """Import a robot from a URDF file as an armature with one bone per link, and its meshes"""

    bl_idname = "kinema.import_urdf"
    bl_label = "Import URDF"
    filename_ext = ".urdf"
    filter_glob: file_filter("*.urdf;*.xacro;*.xml;*.mjcf")
    import_collision: bpy.props.BoolProperty(
        name="Collision Geometry", default=True,
        description="Also import the collision geometry (in a hidden collection)",
    )
    xacro_args: bpy.props.StringProperty(
        name="xacro Arguments",
        description="Arguments of a .xacro file, as name:=value separated by spaces (like the xacro command)",
    )
    package_path: bpy.props.StringProperty(
        name="Package Folder", subtype="DIR_PATH",
        description="A folder that is, or holds, the ROS packages the robot names (besides the Preferences' folders)",
    )

    def execute(self, context):
        return self.reported(lambda: self.import_robot(context))

    def import_robot(self, context) -> str:
        from ..blender.build import import_urdf
        from ..core.model.xacro import parse_xacro_args
        from ..core.solve import kernel_status
        from .preferences import package_folders

        kernel_status()  # starts loading the compiled kernel now, beside the import, so the first drag finds it ready
        try:
            folders = package_folders(context) + ([bpy.path.abspath(self.package_path)] if self.package_path.strip() else [])
            notes = []
            rig_object = import_urdf(context, self.filepath, collision=self.import_collision,
                                     package_path=folders, xacro_args=parse_xacro_args(self.xacro_args.split()), notes=notes)
        except KinemaError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the importer has already removed what it made
            raise KinemaError(f"Import of '{self.filepath}' failed: {type(exc).__name__}: {exc}") from None
        robot = rig.robot_for_rig(rig_object)
        return _with_notes(f"Imported '{robot.name}': {len(robot.links)} links, {robot.dof} joints as '{rig_object.name}'", notes)


def _with_notes(line: str, notes: list):
    """The import's report: its line, or a warning with the first note that asks something of
    the user (`core.model.mjcf.ATTENTION`: the import went through, but the file likely says
    something it does not mean)."""
    from ..core.model.mjcf import ATTENTION

    asking = [note for note in notes if note.startswith(ATTENTION)]
    if not asking:
        return line
    more = f" ({len(asking) - 1} more: `kinema-nodes info FILE` lists every note)" if len(asking) > 1 else ""
    return {"WARNING"}, f"{line}; {asking[0]}{more}"


#: Every (robot list, items list) handed to Blender for the robot names, kept: Blender holds
#: pointers into the strings of the items it was given, so they must outlive any menu drawn
#: from them. A new list appears only when the robots are listed again (at each invoke).
_ROBOT_ITEMS: list[tuple[tuple, list]] = []


def _robot_name_items(self, context):
    """One item per robot a name reaches (`kinema-nodes robots`): a library's robot that its
    package has not fetched yet says so, and its tooltip gives the command that fetches it."""
    from ..core.model.example_robots import named_robots

    robots = named_robots()
    for listed, items in _ROBOT_ITEMS:
        if listed is robots:
            return items
    items = []
    for robot in robots:
        where = str(robot.path) if robot.path is not None else f"from {robot.source}'s cache"
        if robot.cached:
            items.append((robot.name, robot.name, f"{robot.source} ({robot.format}): {where}"))
        else:
            items.append((robot.name, f"{robot.name} (not fetched yet)",
                          f"{robot.source} ({robot.format}), not fetched yet: {robot.fetch_hint}"))
    _ROBOT_ITEMS.append((robots, items))
    return items


class KINEMA_OT_import_robot_by_name(ReportingOperator, bpy.types.Operator):
    """Import a robot by its name: bundled, example-robot-data, robosuite, or a robot that robot_descriptions or mujoco-menagerie has fetched"""

    bl_idname = "kinema.import_robot_by_name"
    bl_label = "Import Robot by Name"
    bl_property = "robot"
    robot: bpy.props.EnumProperty(name="Robot", items=_robot_name_items,
                                  description="The robot's name, as `kinema-nodes robots` lists it")
    import_collision: bpy.props.BoolProperty(
        name="Collision Geometry", default=True,
        description="Also import the collision geometry (in a hidden collection)",
    )

    def invoke(self, context, event):
        from ..core.model.example_robots import named_robots

        named_robots.cache_clear()  # a library may have fetched a robot since the last list
        context.window_manager.invoke_search_popup(self)
        return {"RUNNING_MODAL"}

    def execute(self, context):
        return self.reported(lambda: self.import_named(context))

    def import_named(self, context) -> str:
        from ..blender.build import import_urdf
        from ..core.model.loading import find_urdf
        from ..core.solve import kernel_status
        from .preferences import package_folders

        # A library robot not fetched yet: find_urdf refuses it in one line that says how to fetch it.
        path = find_urdf(self.robot)
        kernel_status()  # as Import URDF: the compiled kernel loads beside the import, ready for the first drag
        try:
            notes = []
            rig_object = import_urdf(context, path, collision=self.import_collision, package_path=package_folders(context), notes=notes)
        except KinemaError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the importer has already removed what it made
            raise KinemaError(f"Import of '{self.robot}' failed: {type(exc).__name__}: {exc}") from None
        robot = rig.robot_for_rig(rig_object)
        return _with_notes(f"Imported '{self.robot}' ({robot.name}): {len(robot.links)} links, {robot.dof} joints as '{rig_object.name}'",
                           notes)


class KINEMA_OT_key_all_joints(RigOperator, bpy.types.Operator):
    """Keyframe every joint of the active robot at the current frame"""

    bl_idname = "kinema.key_all_joints"
    bl_label = "Key All"

    def execute(self, context):
        obj, frame = active_rig(context), context.scene.frame_current

        def key():
            return f"Keyed {rig.key_joint_values(obj, rig.robot_for_rig(obj), frame)} joints at frame {frame}"

        return self.reported(key)


class KINEMA_OT_reset_joints(RigOperator, bpy.types.Operator):
    """Put every joint of the active robot at zero (or the nearest limit when zero is outside it)"""

    bl_idname = "kinema.reset_joints"
    bl_label = "Reset to Zero"

    def execute(self, context):
        obj = active_rig(context)

        def reset():
            robot = rig.robot_for_rig(obj)
            rig.write_joint_values(obj, robot, robot.zero_configuration())

        return self.reported(reset)


def _menu_import(self, context):
    self.layout.operator(KINEMA_OT_import_urdf.bl_idname, text="Robot (.urdf, .xacro, MuJoCo .xml)")
    self.layout.operator(KINEMA_OT_import_robot_by_name.bl_idname, text="Robot by Name...")


CLASSES = (KINEMA_OT_import_urdf, KINEMA_OT_import_robot_by_name, KINEMA_OT_key_all_joints, KINEMA_OT_reset_joints)


def register() -> None:
    bpy.types.TOPBAR_MT_file_import.append(_menu_import)


def unregister() -> None:
    bpy.types.TOPBAR_MT_file_import.remove(_menu_import)
