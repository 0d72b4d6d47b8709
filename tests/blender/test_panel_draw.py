"""Every panel's draw() (and every node's buttons) runs against a recording layout that checks
each property, operator and icon against Blender's real RNA, so a typo fails (issue #12.8).
Robots: UR3 (6 axes) and TIAGo Pro (a 7-axis arm with an elbow swivel), from example-robot-data.
"""

from __future__ import annotations

import numpy as np
import pytest

from recording_layout import LayoutError, RecordingLayout, draw_node, draw_panel
from test_animator_workflow import SEVEN_AXIS, add_target, home_pose, import_rig, pose_rig, robot_of


def addon_panels():
    import bpy

    import kinema_nodes

    return [cls for module in kinema_nodes._blender_modules() for cls in getattr(module, "CLASSES", ())
            if isinstance(cls, type) and issubclass(cls, bpy.types.Panel)]


def draw_everything(bpy, drawn: dict) -> None:
    from kinema_nodes.evaluator import kinema_trees

    for cls in addon_panels():
        layout = draw_panel(cls)
        if layout is not None:
            drawn.setdefault(cls.bl_idname, []).append(layout)
    for tree in kinema_trees():
        for node in tree.nodes:
            if hasattr(node, "draw_buttons"):
                draw_node(node)


def test_the_recording_layout_catches_typos(blender):
    bpy = blender
    rig = import_rig(bpy, "ur_description/urdf/ur3_robot.urdf")
    tree, target, solver = add_target(bpy, rig, "tool0")
    layout = RecordingLayout()
    layout.prop(solver, "live")
    layout.operator("kinema.switch_target_bone").link = "wrist_1_link"
    with pytest.raises(LayoutError, match="no property 'lvie'"):
        layout.prop(solver, "lvie")
    with pytest.raises(LayoutError, match="no operator"):
        layout.operator("kinema.add_ik_targt")
    with pytest.raises(LayoutError, match="has no property 'lnk'"):
        layout.operator("kinema.switch_target_bone").lnk = "wrist_1_link"
    with pytest.raises(LayoutError, match="unknown icon"):
        layout.label(text="x", icon="CON_KINEMATICS")
    with pytest.raises(LayoutError, match="no parameter 'txt'"):
        layout.label(txt="x")
    with pytest.raises(LayoutError, match="no attribute 'alrt'"):
        layout.row().alrt = True
    with pytest.raises(LayoutError, match="no enum property"):
        layout.operator_menu_enum("kinema.switch_target_link_menu", "target")


def test_every_panel_draws_against_the_real_rna_on_two_robots(blender):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.edit import add_elbow_swivel, find_solutions

    drawn: dict = {}
    draw_everything(bpy, drawn)  # an empty file

    ur3 = import_rig(bpy, "ur_description/urdf/ur3_robot.urdf")
    pose_rig(bpy, ur3, [0.3, -1.2, 1.4, -1.6, -1.5, 0.2])
    bpy.context.view_layer.objects.active = ur3
    draw_everything(bpy, drawn)  # a rig, no target
    tree, target, solver = add_target(bpy, ur3, "tool0")
    bpy.context.view_layer.update()
    draw_everything(bpy, drawn)
    find_solutions(bpy.context, ur3)
    solver.live = False
    bake_tree(tree, 1, 5)
    draw_everything(bpy, drawn)  # found configurations, a bake report

    relative, link = SEVEN_AXIS["tiago_pro"]
    arm = import_rig(bpy, relative)
    pose_rig(bpy, arm, home_pose(robot_of(arm)))
    bpy.context.view_layer.objects.active = arm
    tree, target, solver = add_target(bpy, arm, link)
    bpy.context.view_layer.update()
    add_elbow_swivel(bpy.context, arm)
    bpy.context.view_layer.update()
    draw_everything(bpy, drawn)
    solver.over_budget = True
    draw_everything(bpy, drawn)  # the red readout with Resume

    missing = sorted(cls.bl_idname for cls in addon_panels() if cls.bl_idname not in drawn)
    assert not missing, f"panels never drawn (poll never true): {missing}"
    for name, layouts in drawn.items():
        assert any(layout.calls for layout in layouts), name


@pytest.mark.parametrize("name", ["ur3", "tiago_pro"])
def test_the_bones_panel_has_a_radio_button_per_joint_bone_and_one_click_re_roots_the_chain(blender, name):
    bpy = blender
    from kinema_nodes.ui.bones_panel import KINEMA_PT_ik_bones, joint_bones
    from kinema_nodes.core.model.kinematics import link_pose

    relative, link = {"ur3": ("ur_description/urdf/ur3_robot.urdf", "tool0"), "tiago_pro": SEVEN_AXIS["tiago_pro"]}[name]
    rig = import_rig(bpy, relative)
    robot = robot_of(rig)
    pose_rig(bpy, rig, home_pose(robot))
    tree, target, solver = add_target(bpy, rig, link)
    bpy.context.view_layer.update()
    bones = joint_bones(robot)
    movable = {j.child for j in robot.joints if j.is_movable}
    assert set(bones) == movable  # every joint bone, nothing else
    layout = draw_panel(KINEMA_PT_ik_bones)
    buttons = [c for c in layout.calls if c[0] == "operator" and c[1] == "kinema.switch_target_bone"]
    links = [c[3] for c in layout.calls if c[0] == "operator_property" and c[2] == "link"]
    assert set(bones) <= set(links) and len(buttons) == len(links)
    chosen = [c[2].get("depress") for c in buttons]
    assert chosen.count(True) == 1 and links[chosen.index(True)] == link  # the radio shows the aimed bone

    elbow = next(b for b in bones if len(robot.chain_joint_names(b)) == 3)
    before = np.array(rig.pose.bones[elbow].matrix)
    assert bpy.ops.kinema.switch_target_bone(target=target.name, link=elbow) == {"FINISHED"}  # the click
    bpy.context.view_layer.update()
    assert solver.solving_to == elbow and target.link_at_frame(robot) == elbow
    np.testing.assert_allclose(np.array(rig.pose.bones[elbow].matrix), before, atol=1e-5)  # nothing jumped
    control = np.array(rig.pose.bones[target.control_bone].matrix)
    from kinema_nodes.blender.rig import read_joint_values

    np.testing.assert_allclose(control[:3, 3], link_pose(robot, read_joint_values(rig, robot), elbow)[:3, 3], atol=1e-5)
    layout = draw_panel(KINEMA_PT_ik_bones)
    buttons = [c for c in layout.calls if c[0] == "operator" and c[1] == "kinema.switch_target_bone"]
    links = [c[3] for c in layout.calls if c[0] == "operator_property" and c[2] == "link"]
    assert links[[c[2].get("depress") for c in buttons].index(True)] == elbow
    assert "UNDO" in bpy.types.Operator.bl_rna_get_subclass_py("KINEMA_OT_switch_target_bone").bl_options
