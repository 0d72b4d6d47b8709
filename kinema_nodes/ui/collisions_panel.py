"""Avoid collisions: a section of the IK panel and its operators (issue #14).

A front end of the rig's Solver node: the self and world toggles, the Obstacles collection (the
node's own socket), the margin in millimetres and the ground plane are the node's settings,
drawn here as on the node. Obstacles from Selection gathers the selected meshes into a
collection and sets it on the Solver in one undo step; Show Collision Model puts the robot's
capsules in the viewport (and takes them away again).
"""

from __future__ import annotations

import bpy

from . import RigOperator, SidebarPanel
from ..blender.edit import active_rig, rig_solver, rig_tree
from .ik_sections import PANEL, _NeedsTarget

#: The collection Obstacles from Selection fills (made on first use), per rig.
OBSTACLES_SUFFIX = " obstacles"
#: Obstacles whose shape choice the section lists (the rest are counted).
SHAPES_SHOWN = 8


def _solver(context):
    rig = active_rig(context)
    tree = rig_tree(rig)
    return None if tree is None else rig_solver(tree, rig)


class KINEMA_OT_obstacles_from_selection(_NeedsTarget, RigOperator, bpy.types.Operator):
    """Put the selected mesh objects in the rig's obstacle collection and let the Solver avoid them"""

    bl_idname = "kinema.obstacles_from_selection"
    bl_label = "Obstacles from Selection"

    def execute(self, context):
        def gather():
            from ..blender.collisions import obstacle_objects

            rig = active_rig(context)
            solver = _solver(context)
            chosen = [obj for obj in context.selected_objects if obj.type == "MESH" and obj.parent != rig]
            if not chosen:
                raise ValueError("select the mesh objects the robot should avoid (its own meshes do not count)")
            collection = solver.obstacles
            if collection is None:
                name = rig.name + OBSTACLES_SUFFIX
                collection = bpy.data.collections.get(name) or bpy.data.collections.new(name)
                if collection.name not in context.scene.collection.children:
                    context.scene.collection.children.link(collection)
            for obj in chosen:
                if obj.name not in collection.objects:
                    collection.objects.link(obj)
            solver.obstacles = collection
            solver.avoid_world = True
            return f"'{collection.name}': {len(obstacle_objects(collection))} obstacles"

        return self.reported(gather)


class KINEMA_OT_toggle_collision_model(RigOperator, bpy.types.Operator):
    """Show the robot's collision model (the capsules the solver keeps apart) in the viewport, or remove it"""

    bl_idname = "kinema.toggle_collision_model"
    bl_label = "Show Collision Model"

    def act(self, context, rig):
        from ..blender.collisions import hide_collision_model, model_collection, show_collision_model

        if model_collection(rig) is not None:
            return f"removed {hide_collision_model(rig)} collision-model objects"
        return f"collision model: {show_collision_model(context, rig)} capsules"


class KINEMA_PT_ik_avoid_collisions(_NeedsTarget, SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_ik_avoid_collisions"
    bl_label = "Avoid Collisions"
    bl_parent_id = PANEL
    bl_options = {"DEFAULT_CLOSED"}  # noqa: RUF012 -- Blender reads a set

    def draw(self, context):
        from ..blender.collisions import model_collection, obstacle_objects
        from ..nodes.solver import draw_avoid

        layout = self.layout
        rig = active_rig(context)
        solver = _solver(context)
        if solver is None:
            return
        draw_avoid(solver, layout, with_collection=True)
        obstacles = obstacle_objects(solver.obstacles)
        if obstacles:
            column = layout.column(align=True)
            for obj in obstacles[:SHAPES_SHOWN]:  # how each mesh is approximated
                column.prop(obj, "kinema_collision_shape", text=obj.name)
            if len(obstacles) > SHAPES_SHOWN:
                column.label(text=f"and {len(obstacles) - SHAPES_SHOWN} more")
        layout.operator("kinema.obstacles_from_selection", icon="RESTRICT_SELECT_OFF")
        shown = model_collection(rig) is not None
        layout.operator("kinema.toggle_collision_model", text="Show Collision Model", icon="MESH_CAPSULE", depress=shown)
        words = "blocked by a collision"
        blocked = next((part[part.index(words):] for part in solver.summary.split("; ") if words in part), "")
        if blocked:
            row = layout.row()
            row.alert = True
            row.label(text=blocked, icon="ERROR")
        clearance = solver.clearance_text
        if clearance:
            layout.label(text=clearance, icon="DRIVER_DISTANCE")


CLASSES = (KINEMA_OT_obstacles_from_selection, KINEMA_OT_toggle_collision_model, KINEMA_PT_ik_avoid_collisions)


def register() -> None:
    from ..blender.collisions import register_properties

    register_properties()


def unregister() -> None:
    from ..blender.collisions import unregister_properties

    unregister_properties()
