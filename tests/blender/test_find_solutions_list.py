"""Find Solutions and ◀ ▶ as a user clicks them (issue #29, items 11 and 12).

11: a 17-joint robot (robosuite's GR1, both hands) and robosuite-models' YuMi (both arms, 14
joints) get their answer, at most MAX_CONFIGURATIONS of them, on both clicks; more joints than the bound (GR1's hands and feet, example-robot-data's
Centauro's arms and wheels) get a one-line refusal in Blender's report. (The memory
bound itself is tested in tests/core/test_find_solutions_bounded.py, under an address-space cap.)
12: on 7-axis arms (robosuite's KUKA iiwa, Franka Panda and Kinova Jaco MJCF models) ◀ ▶ step through the one list
Find Solutions found: the count never changes, the Configuration panel and the readout say the
same count, and ◀ after ▶ comes back to the pose it left. The list is kept only while the
control stays: on robosuite-models' YuMi and PR2 (7-axis arms), a control moved 3 cm and turned
gets a list found for the pose it has now, and ▶ puts the tool there (MuJoCo's FK, 1e-5 m/rad);
on two Tiagos (example-robot-data's URDF, robosuite's MJCF) whose arm chain starts at a torso
slide, the list is kept over clicks (no search) until the robot changes for the search (Hold
Slides off frees the slide): then ▶ searches once, and the new list holds again.
"""

from __future__ import annotations

import numpy as np
import pytest

from recording_layout import draw_panel

#: Joint tolerance (rad, m) for "the same pose": the configuration is written, not solved again.
SAME_POSE = 1e-6


def rig_with_targets(bpy, name: str, links: list[str], offset: float | None = None):
    """The robot imported as a user does, posed (40 % of each joint's range, or zero + `offset`),
    with an IK target on each of `links` (one Solver) and the tree run once."""
    from kinema_nodes import evaluator
    from kinema_nodes.blender.edit import rig_solver, rig_tree
    from kinema_nodes.blender.rig import robot_for_rig, write_joint_values

    from kinema_nodes.core.model.loading import find_urdf

    path = find_urdf(name)
    assert bpy.ops.kinema.import_urdf(filepath=str(path)) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    robot = robot_for_rig(rig)
    if offset is None:
        lower = np.where(np.isfinite(robot.lower), robot.lower, -3.0)
        upper = np.where(np.isfinite(robot.upper), robot.upper, 3.0)
        q = lower + 0.4 * (upper - lower)
    else:
        q = np.clip(robot.zero_configuration() + offset, robot.lower, robot.upper)
    write_joint_values(rig, robot, q)
    bpy.context.view_layer.update()
    for link in links:
        assert bpy.ops.kinema.add_ik_target(link=link) == {"FINISHED"}
    tree = rig_tree(rig)
    solver = rig_solver(tree, rig)
    solver.backend = "NUMPY"
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    evaluator.run_tree(tree, force=True)
    return rig, robot, tree, solver


def joints_of(rig, robot) -> np.ndarray:
    from kinema_nodes.blender.rig import read_joint_values

    return np.asarray(read_joint_values(rig, robot), dtype=float)


# ---- 11. bounded ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, links, offset", [
    ("robosuite_gr1", ["right_eef", "left_eef"], 0.6),  # 17 joints: 3 waist and 2 x 7 arm
    ("robosuite_yumi", ["right_hand", "left_hand"], 0.3),  # 2 x 7 arm joints (robosuite-models)
])
def test_find_solutions_on_a_two_armed_robot_answers_within_the_bound(blender, name, links, offset):
    from kinema_nodes.blender.edit import configuration_node
    from kinema_nodes.core.stages.configurations import MAX_CONFIGURATIONS

    bpy = blender
    rig, robot, tree, solver = rig_with_targets(bpy, name, links, offset=offset)
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    assert 1 <= node.solutions_found <= MAX_CONFIGURATIONS
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}  # the second click: the same list, no new search
    assert 1 <= node.solutions_found <= MAX_CONFIGURATIONS


@pytest.mark.parametrize("name, links", [
    ("robosuite_gr1", ["right_eef", "left_eef", "l_foot_roll", "r_foot_roll"]),  # 25 joints
    ("centauro", ["arm1_6", "arm2_6", "wheel_1", "wheel_2", "wheel_3", "wheel_4"]),  # 37 joints
])
def test_find_solutions_beyond_the_bound_is_a_one_line_refusal(blender, name, links):
    from kinema_nodes.core.stages.configurations import MAX_FREE_JOINTS

    bpy = blender
    rig, robot, tree, solver = rig_with_targets(bpy, name, links, offset=0.3)
    assert len({j for link in links for j in robot.chain_joint_names(link)}) > MAX_FREE_JOINTS
    with pytest.raises(RuntimeError, match=f"Find Solutions searches at most {MAX_FREE_JOINTS} joints;") as raised:
        bpy.ops.kinema.find_solutions()
    said = str(raised.value).strip().splitlines()
    assert len([line for line in said if "Find Solutions searches" in line]) == 1, said


# ---- 12. one list ---------------------------------------------------------------------------

def panel_count(bpy) -> str:
    from kinema_nodes.ui.ik_sections import KINEMA_PT_ik_configuration

    labels = [t for t in draw_panel(KINEMA_PT_ik_configuration).texts() if " of " in t]
    assert len(labels) == 1, labels
    return labels[0]


@pytest.mark.parametrize("name", ["robosuite_iiwa", "robosuite_panda", "robosuite_jaco"])
def test_the_arrows_step_through_one_list(blender, name):
    from kinema_nodes.blender.edit import configuration_node
    from kinema_nodes.core.stages.configurations import branch_difference

    bpy = blender
    rig, robot, tree, solver = rig_with_targets(bpy, name, ["right_hand"])
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    count = node.solutions_found
    assert count >= 2, f"{name}: a 7-axis arm reaches this pose in more than one way"
    visited = [joints_of(rig, robot)]
    for step in range(min(count, 5)):
        assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
        assert node.solutions_found == count, "a click must not search again"
        index = node.configuration_index
        assert f"{index} of {count}" in panel_count(bpy)
        assert f"configuration {index} of {count}" in solver.summary, solver.summary
        visited.append(joints_of(rig, robot))
    for back in range(len(visited) - 1, 0, -1):
        assert bpy.ops.kinema.step_configuration(step=-1) == {"FINISHED"}
        assert node.solutions_found == count
        if back - 1 == 0:
            break  # the first pose was the solver's own answer, not necessarily a listed one
        moved = np.max(np.abs(branch_difference(robot, joints_of(rig, robot), visited[back - 1])))
        assert moved <= SAME_POSE, f"◀ after ▶ lands {moved:.3g} rad from the pose it left"


@pytest.mark.parametrize("name", ["robosuite_yumi", "robosuite_pr2"])
def test_a_moved_control_gets_a_list_found_again(blender, name):
    from mathutils import Matrix
    from rig_helpers import IndependentFK, pose_error

    from kinema_nodes.blender.edit import configuration_node, first_target

    bpy = blender
    rig, robot, tree, solver = rig_with_targets(bpy, name, ["right_hand"])
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    target = first_target(rig)
    fk = IndependentFK(robot)
    moved = fk.pose(joints_of(rig, robot), "right_hand")
    turn = np.array([[np.cos(0.2), -np.sin(0.2), 0.0], [np.sin(0.2), np.cos(0.2), 0.0], [0.0, 0.0, 1.0]])
    moved[:3, :3] = moved[:3, :3] @ turn
    moved[:3, 3] += (0.03, 0.0, 0.0)
    rig.pose.bones[target.control_bone].matrix = Matrix(moved.tolist())
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    goal = np.array(rig.pose.bones[target.control_bone].matrix, dtype=float)  # as Blender keeps it (float32)
    for step in (1, 1, -1):
        assert bpy.ops.kinema.step_configuration(step=step) == {"FINISHED"}
        position, angle = pose_error(fk.pose(joints_of(rig, robot), "right_hand"), goal)
        assert position <= 1e-5 and angle <= 1e-5, (step, position, angle, solver.summary)
        assert f"{node.configuration_index} of {node.solutions_found}" in panel_count(bpy)


@pytest.mark.parametrize("name", ["tiago_no_hand", "robosuite_tiago"])
def test_the_list_is_kept_until_the_robot_changes(blender, name, monkeypatch):
    from kinema_nodes.blender.edit import configuration_node
    from kinema_nodes.core.model.loading import find_urdf, load_robot
    from kinema_nodes.core.stages import configurations

    searches = []
    search = configurations.find_configurations  # the real search, counted as it runs

    def counted(*args, **kwargs):
        searches.append(args[3].held_joints if len(args) > 3 else None)
        return search(*args, **kwargs)

    monkeypatch.setattr(configurations, "find_configurations", counted)
    bpy = blender
    tool = load_robot(find_urdf(name)).tool_point
    rig, robot, tree, solver = rig_with_targets(bpy, name, [tool])
    slide = "torso_lift_joint"
    assert slide in robot.chain_joint_names(tool) and solver.hold_prismatic
    assert bpy.ops.kinema.find_solutions() == {"FINISHED"}
    node = configuration_node(tree, solver)
    found = len(searches)
    assert found >= 1 and all(slide in held for held in searches)
    for _ in range(3):
        assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    assert len(searches) == found, "a click on an unchanged robot and control must not search again"
    solver.hold_prismatic = False  # the robot the search sees changes: its torso slide is free
    assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    assert len(searches) == found + 1 and slide not in searches[-1], searches[found:]
    count = node.solutions_found
    for _ in range(3):
        assert bpy.ops.kinema.step_configuration(step=1) == {"FINISHED"}
    assert len(searches) == found + 1 and node.solutions_found == count
