"""The extension's Preferences: the solve budget the manual promises (33 ms by default)."""

import bpy

from ..core.defaults import DEFAULT_SOLVE_BUDGET_MS


class KinemaPreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    solve_budget_ms: bpy.props.FloatProperty(
        name="Solve Budget (ms)",
        description="A live solve slower than this pauses live updates, to keep the viewport usable",
        default=DEFAULT_SOLVE_BUDGET_MS,
        min=1.0,
        max=10000.0,
    )

    def draw(self, context):
        self.layout.prop(self, "solve_budget_ms")


CLASSES = (KinemaPreferences,)


def preferences(context=None):
    """This extension's preferences, or None when it is not installed as an add-on."""
    context = context or bpy.context
    addon = context.preferences.addons.get(__package__)
    return addon.preferences if addon else None
