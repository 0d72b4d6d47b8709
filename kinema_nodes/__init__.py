"""Kinema Nodes: robot IK for Blender animators, wired as a node tree.

`kinema_nodes.core` is plain Python + NumPy and never imports bpy; everything that touches
Blender lives beside it and is only imported by `register()`, so the package (and its CLI)
imports in any Python.
"""

__version__ = "0.1.0"

#: Modules that define Blender classes, in registration order. Each has a `CLASSES` tuple and
#: may have `register()`/`unregister()` hooks for menus and handlers.
BLENDER_MODULES = (
    "ui.preferences", "tree", "nodes", "ui.node_buttons", "blender.build", "blender.limits", "ui.operators", "ui.joints_panel", "ui.ik_panel",
    "ui.ik_sections", "ui.collisions_panel", "ui.bones_panel",
    "ui.group_operators", "ui.presets_panel", "ui.bake_panel", "ui.export_operators", "ui.reach_operators", "ui.tool_panel", "blender.handlers",
    "blender.warming", "blender.grasping", "ui.grasp_panel", "blender.plan_jobs",
)


def _blender_modules():
    import importlib

    return [importlib.import_module(f".{name}", __name__) for name in BLENDER_MODULES]


def register() -> None:
    from . import blender  # noqa: F401 - first: importing it waits for a kernel build before bpy loads
    import bpy

    for module in _blender_modules():
        for cls in getattr(module, "CLASSES", ()):
            bpy.utils.register_class(cls)
        hook = getattr(module, "register", None)
        if hook is not None:
            hook()


def unregister() -> None:
    import bpy

    for module in reversed(_blender_modules()):
        hook = getattr(module, "unregister", None)
        if hook is not None:
            hook()
        for cls in reversed(getattr(module, "CLASSES", ())):
            bpy.utils.unregister_class(cls)
