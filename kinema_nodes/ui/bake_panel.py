"""Bake to Keyframes: a sub-panel of the IK panel, and the operator (undoable, progress, Esc).

The panel is a front end of the rig's tree: it edits (or adds) the tree's Bake node and runs
`baking.BakeJob` on it. In the UI the operator runs modally, a slice of frames per timer tick,
with Blender's progress bar, and Esc cancels before anything is written; run from a script
(no window) it bakes in one go.
"""

from __future__ import annotations

import bpy

from . import SidebarPanel
from ..blender import baking
from .ik_panel import KINEMA_PT_inverse_kinematics
from ..blender.edit import active_rig, rig_tree, target_nodes
from ..blender.edit import ensure_bake_node

#: Work done per timer tick of the modal bake: long enough to make progress, short enough
#: that the window redraws and Esc is seen.
WORK_PER_TICK_S = 0.05


def _tree_for(context, name: str):
    if name:
        tree = bpy.data.node_groups.get(name)
        if tree is None or tree.bl_idname != "KinemaNodeTree":
            return None
        return tree
    rig = active_rig(context)
    return rig_tree(rig) if rig else None


def _summary(results) -> str:
    parts = []
    for result in results:
        report = result.report
        flagged = report.flagged
        text = f"{result.rig.name}: {report.converged}/{report.frames} frames converged"
        if flagged:
            text += f", {len(flagged)} flagged ({baking.frame_ranges(flagged)[:60]})"
        parts.append(text)
    return "; ".join(parts)


class KINEMA_OT_bake(bpy.types.Operator):
    """Solve every frame of the range and key the joints (Esc cancels and leaves the animation as it was)"""

    bl_idname = "kinema.bake"
    bl_label = "Bake to Keyframes"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 -- Blender reads a set

    tree: bpy.props.StringProperty(name="Tree", description="Kinema tree to bake (default: the active rig's)")

    _job = None
    _steps = None
    _timer = None

    @classmethod
    def poll(cls, context):
        return True

    def _start(self, context):
        tree = _tree_for(context, self.tree)
        if tree is None or not target_nodes(tree):
            self.report({"ERROR"}, "nothing to bake: select a rig with an IK target")
            return None
        node = ensure_bake_node(tree, context.scene)
        return baking.BakeJob(tree, node.frame_start, node.frame_end, scene=context.scene, speed_limit=node.speed_limit / 100.0), node

    def _finish(self, context, job, node):
        baking.store_report(node, job.results)
        from .export_operators import check_after_bake

        check_after_bake(context, job.results)  # limits markers and table; flags only
        summary = _summary(job.results)
        plan_flags = [f"frames {s.first}-{s.last}: {s.plan.flag}" for segments in job.segments.values() for s in segments
                      if s.plan.flag]  # Plan Between Keys: a segment too short for the limits, or one it could not plan
        if plan_flags:
            summary = "; ".join([summary, *plan_flags])
        flagged = plan_flags or any(r.report.flagged for r in job.results)
        self.report({"WARNING"} if flagged else {"INFO"}, summary)
        return {"FINISHED"}

    def execute(self, context):
        from ..core.errors import KinemaError

        started = self._start(context)
        if started is None:
            return {"CANCELLED"}
        job, node = started
        wm = context.window_manager
        wm.progress_begin(0, job.total)
        try:
            job.run(progress=lambda done, total: wm.progress_update(done))
        except KinemaError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
        return self._finish(context, job, node)

    def invoke(self, context, event):
        if context.window is None:
            return self.execute(context)
        started = self._start(context)
        if started is None:
            return {"CANCELLED"}
        self._job, self._node = started
        self._steps = self._job.steps()
        wm = context.window_manager
        wm.progress_begin(0, self._job.total)
        self._timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        import time

        if event.type == "ESC":
            self._job.cancel()
            self._end(context)
            self.report({"INFO"}, "Bake cancelled; the animation is as it was")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}  # the scene must not change under the bake
        deadline = time.perf_counter() + WORK_PER_TICK_S
        done = 0
        try:
            while not self._job.finished and time.perf_counter() < deadline:
                done = next(self._steps)
        except StopIteration:
            done = self._job.total
        except Exception as exc:  # noqa: BLE001 -- end the modal cleanly, whatever went wrong
            self._end(context)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        context.window_manager.progress_update(done)
        if self._job.finished:
            self._end(context)
            return self._finish(context, self._job, self._node)
        return {"RUNNING_MODAL"}

    def _end(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()


class KINEMA_PT_bake(SidebarPanel, bpy.types.Panel):
    bl_idname = "KINEMA_PT_bake"
    bl_label = "Bake to Keyframes"
    bl_parent_id = KINEMA_PT_inverse_kinematics.bl_idname
    bl_options = {"DEFAULT_CLOSED"}  # noqa: RUF012 -- Blender reads a set

    @classmethod
    def poll(cls, context):
        rig = active_rig(context)
        return rig is not None and bool(target_nodes(rig_tree(rig), rig))

    def draw(self, context):
        from ..nodes.bake import draw_report

        layout = self.layout
        tree = rig_tree(active_rig(context))
        node = baking.bake_node_of(tree)
        if node is not None:
            row = layout.row(align=True)
            row.prop(node, "frame_start")
            row.prop(node, "frame_end")
            layout.prop(node, "speed_limit")
        else:
            layout.label(text=f"Frames {context.scene.frame_start}–{context.scene.frame_end} (the scene's range)")
        layout.operator(KINEMA_OT_bake.bl_idname, icon="KEYFRAME").tree = tree.name
        if node is not None:
            draw_report(node, layout)
        from .export_operators import draw_limits

        draw_limits(layout, active_rig(context))


CLASSES = (KINEMA_OT_bake, KINEMA_PT_bake)
