"""The extension's Preferences: the solve budget the manual promises (33 ms by default), the
package folders, and whether live rigs solve ahead while Blender is idle."""

import bpy

from ..core.defaults import DEFAULT_SOLVE_BUDGET_MS
from ..session import changed_outside

#: The add-on's module name, which Blender looks its preferences up by: "kinema_nodes", or
#: "bl_ext.<repository>.kinema_nodes" when installed as an extension (this module is in its ui/).
ADDON_MODULE = __package__.rpartition(".")[0]


def _budget_changed(_prefs, _context):
    """A Solver without its own budget compiles this one into its spec: every tree compiles again
    at its next run (the live frame does not read the Preferences to find out, #33)."""
    changed_outside()


class KinemaPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_MODULE

    solve_budget_ms: bpy.props.FloatProperty(
        name="Solve Budget (ms)",
        description="A live solve slower than this pauses live updates, to keep the viewport usable",
        default=DEFAULT_SOLVE_BUDGET_MS,
        min=1.0,
        max=10000.0,
        update=_budget_changed,
    )

    package_folders: bpy.props.StringProperty(
        name="Package Folders",
        description="Folders that are, or hold, ROS packages (package:// and $(find) in URDF and xacro files), "
        "separated by ';'. ROS_PACKAGE_PATH and AMENT_PREFIX_PATH are searched too",
    )

    solve_ahead: bpy.props.BoolProperty(
        name="Solve Ahead While Idle",
        description="While nothing is edited or played, live rigs solve the frames a playback from the current frame, "
        "then a scrub back from it, will show (4 ms at a time), so the first playback or scrub back after an edit "
        "plays from memory",
        default=True,
    )

    def draw(self, context):
        from ..core.solve import kernel_summary

        self.layout.prop(self, "solve_budget_ms")
        self.layout.prop(self, "package_folders")
        self.layout.prop(self, "solve_ahead")
        self.layout.label(text=kernel_summary())


CLASSES = (KinemaPreferences,)


def preferences(context=None):
    """This extension's preferences, or None when it is not installed as an add-on."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_MODULE)
    return addon.preferences if addon else None


def package_folders(context=None) -> list[str]:
    """The Preferences' package folders (part of the one package search path), as a list."""
    prefs = preferences(context)
    text = getattr(prefs, "package_folders", "") if prefs else ""
    return [bpy.path.abspath(part.strip()) for part in text.replace("\n", ";").split(";") if part.strip()]


def register():
    """Preferences read again (Revert, Load Factory Preferences) register the add-on again: a tree
    compiled with the old budget compiles again."""
    _budget_changed(None, None)
