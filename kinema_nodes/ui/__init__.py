"""ui: the sidebar panels, operators and preferences the user clicks.

Thin by rule: a button calls blender/edit.py (or another blender/ module) and a panel draws
what they return; nothing here computes a number or solves. Nothing outside ui/ imports it;
the add-on's register() loads its modules (BLENDER_MODULES).
"""


class SidebarPanel:
    """Mix-in for a panel in the Kinema tab of the 3D viewport's sidebar."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Kinema"


class ReportingOperator:
    """Mix-in for an operator that does its work in one undo step and reports an error the user
    can act on in Blender's report area, never as a traceback."""

    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 -- Blender reads a set

    def reported(self, work, errors: tuple = ()) -> set[str]:
        """Run `work()` (it may return its info line, or a (level, line) pair such as
        ({"WARNING"}, "...")): {"FINISHED"}, or {"CANCELLED"} with the message when it raises a
        KinemaError, a ValueError or one of `errors`."""
        from ..core.errors import KinemaError

        try:
            message = work()
        except (KinemaError, ValueError, *errors) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        level, message = message if isinstance(message, tuple) else ({"INFO"}, message)
        if isinstance(message, str) and message:
            self.report(level, message)
        return {"FINISHED"}


def file_filter(patterns: str):
    """An import operator's `filter_glob`: the file browser shows only these files."""
    import bpy

    return bpy.props.StringProperty(default=patterns, options={"HIDDEN"})


class RigOperator(ReportingOperator):
    """Mix-in for an operator on the active robot rig (only offered when there is one)."""

    @classmethod
    def poll(cls, context):
        from ..blender.edit import active_rig

        return active_rig(context) is not None

    def execute(self, context):
        """`act(context, rig)` on the active rig as one reported step; an operator that needs
        more than the rig writes its own `execute`."""
        from ..blender.edit import active_rig

        rig = active_rig(context)
        return self.reported(lambda: self.act(context, rig))
