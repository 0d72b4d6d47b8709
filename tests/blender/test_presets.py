"""Rig presets: roles inferred from real robots, the preset format, and presets applied in
real Blender to real robots (NumPy solver).

Tolerances as in test_live_ik: a link reaches its control within 1e-5 m / 1e-5 rad;
"unchanged" is exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.graph.spec import GraphSpec, LinkSpec, NodeSpec
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.presets import PresetError, bind, load_preset, make_preset, preset_from_json, save_preset
from kinema_nodes.core.roles import infer_roles, resolve_roles
from kinema_nodes.core.model.rotations import rotation_angle_between
from rig_helpers import import_rig, joints_of, pose_and_update, robot_of, settle

SHIPPED = Path(__file__).resolve().parents[2] / "kinema_nodes" / "presets"


# ---- roles (no Blender) ----------------------------------------------------------------------

def test_roles_are_inferred_from_the_structure_of_real_arms(robots):
    panda = infer_roles(robots("panda")).links
    assert panda["tool_point"] == "panda_hand_tcp"
    assert (panda["shoulder"], panda["elbow"], panda["wrist"]) == ("panda_link2", "panda_link4", "panda_link6")
    assert (panda["flange"], panda["base"]) == ("panda_link8", "panda_link0")
    ur5 = infer_roles(robots("ur5")).links
    assert (ur5["shoulder"], ur5["elbow"], ur5["wrist"]) == ("upper_arm_link", "forearm_link", "wrist_1_link")
    assert ur5["base"] == "base_link"
    xarm7 = infer_roles(robots("xarm7")).links
    assert (xarm7["elbow"], xarm7["wrist"], xarm7["flange"]) == ("link4", "link6", "link7")


def test_the_rail_is_the_slide_at_the_root_of_the_main_chain(robots):
    assert infer_roles(robots("rail_arm6")).links["rail"] == "carriage"
    binding = infer_roles(robots("arm7"))  # its finger slide is not at the root: no rail
    assert "rail" not in binding.links
    assert "no prismatic joint at the root" in binding.missing["rail"]


def test_a_humanoid_has_hands_and_feet_and_its_arm_starts_below_the_torso(robots):
    talos = infer_roles(robots("talos")).links
    assert (talos["left_hand"], talos["right_hand"]) == ("wrist_left_ft_tool_link", "wrist_right_ft_tool_link")
    assert (talos["left_foot"], talos["right_foot"]) == ("left_sole_link", "right_sole_link")
    assert talos["base"] == "torso_2_link" and talos["elbow"] == "arm_left_4_link"
    g1 = infer_roles(robots("g1")).links
    assert (g1["left_hand"], g1["right_foot"]) == ("left_rubber_hand", "right_ankle_roll_link")


def test_a_role_set_by_hand_wins_and_a_wrong_one_says_so(robots):
    panda = robots("panda")
    binding = resolve_roles(panda, {"flange": "panda_hand", "wrist": "no_such_link"})
    assert binding.links["flange"] == "panda_hand" and "flange" in binding.overridden
    assert "wrist" not in binding.links
    assert "'no_such_link', which is not a link of this robot" in binding.missing["wrist"]


# ---- the format (no Blender) -----------------------------------------------------------------

def _reach_spec(link: str) -> GraphSpec:
    return GraphSpec(
        (NodeSpec.make("Robot", "robot", rig="Panda", rig_is_armature=True),
         NodeSpec.make("Aim", "ik_target", control="Panda:IK", control_exists=True, link=link, position_weight=1.0, rotation_weight=0.5),
         NodeSpec.make("Solver", "solver", backend="numpy", live=True, budget_ms=33.0, max_iterations=80)),
        (LinkSpec("Robot", "Robot", "Aim", "Robot"), LinkSpec("Aim", "Target", "Solver", "Targets")),
    )


def test_a_preset_names_roles_not_links_and_binds_to_another_robot(robots, tmp_path):
    panda, ur5 = robots("panda"), robots("ur5")
    preset = make_preset(_reach_spec("panda_link4"), resolve_roles(panda), "Aim the elbow")
    text = json.dumps(preset.to_json())
    assert "panda" not in text.lower()  # nothing of the Panda is left in the file
    assert preset.roles == ["elbow"]
    path = save_preset(preset, tmp_path / "aim.json")
    plan, unbound = bind(load_preset(path), ur5)
    assert unbound == {}
    assert plan.spec.node("Aim").get("link") == "forearm_link"
    assert plan.spec.node("Aim").get("rotation_weight") == 0.5
    assert plan.spec.node("Solver").get("max_iterations") == 80
    assert plan.controls == ("Aim",)
    assert "rig" not in dict(plan.spec.node("Robot").params)


def test_a_link_no_role_describes_binds_only_where_the_name_exists(robots):
    panda = robots("panda")
    preset = make_preset(_reach_spec("panda_leftfinger"), resolve_roles(panda), "Finger")
    plan, unbound = bind(preset, robots("ur5"))
    assert plan is None and "link 'panda_leftfinger'" in unbound


@pytest.mark.parametrize("data, problem", [
    ([], "not a Kinema preset"),
    ({"kinema_preset": 1, "name": "x", "nodes": [{"name": "a", "kind": "teleport"}]}, "unknown kind 'teleport'"),
    ({"kinema_preset": 1, "name": "x", "nodes": [{"name": "a", "kind": "ik_target", "params": {"link": {"role": "tail"}}}]},
     "unknown role(s) tail"),
    ({"kinema_preset": 1, "name": "x", "nodes": [{"name": "a", "kind": "robot"}], "links": [["a", "Robot", "b", "Robot"]]},
     "names a node the preset does not have"),
])
def test_a_bad_preset_is_refused_with_one_line_naming_the_file(data, problem):
    with pytest.raises(PresetError) as error:
        preset_from_json(data, "broken.json")
    assert str(error.value).startswith("broken.json: ") and problem in str(error.value) and "\n" not in str(error.value)


def test_every_shipped_preset_reads(robots):
    names = {load_preset(path).name for path in SHIPPED.glob("*.json")}
    assert names == {"Reach with the tool", "7-DoF arm with elbow swivel", "Arm on a rail", "Dual arm",
                     "Hand-off between two links", "Whole-body reach for a humanoid", "Pick and place", "Trace a curve", "Dual-arm hand-over"}


# ---- in Blender ------------------------------------------------------------------------------

@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    folder = tmp_path / "user_presets"
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(folder))
    return folder


def _apply(bpy, rig, name):
    from kinema_nodes.blender.presets import apply_preset

    bpy.context.view_layer.objects.active = rig
    tree = apply_preset(bpy.context, rig, name, backend="NUMPY")
    for solver in _nodes(tree, "KinemaSolverNode"):
        solver.use_own_budget, solver.budget_ms = True, 10_000.0  # a loaded test machine must not pause live IK
    return tree


def _nodes(tree, idname):
    return [n for n in tree.nodes if n.bl_idname == idname]


def _matrix(array):
    from mathutils import Matrix

    return Matrix(np.asarray(array, dtype=float).tolist())


def _bone(rig, name):
    return np.array(rig.pose.bones[name].matrix, dtype=float)


def _assert_reaches(rig, target, link=None, tolerance=1e-5):
    control = _bone(rig, target.control_bone)
    tool = _bone(rig, link or target.link_name)
    assert np.abs(tool[:3, 3] - control[:3, 3]).max() < tolerance, (link or target.link_name, tool[:3, 3], control[:3, 3])
    assert rotation_angle_between(tool, control) < tolerance


def _key_control_along(bpy, rig, target, configurations, frames):
    """Key the control at the FK poses of `configurations` (reachable by construction)."""
    robot = robot_of(rig)
    bone = rig.pose.bones[target.control_bone]
    for q, frame in zip(configurations, frames):
        bone.matrix = _matrix(link_pose(robot, np.asarray(q), target.link_name))
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)


#: Starting poses away from singularities, and a move per robot (a few tenths of a radian).
STARTS = {
    "panda": [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.02, 0.02][:9],
    "ur5": [0.3, -1.2, 1.4, -0.8, 1.2, 0.3],
    "kinova": [0.2, 2.9, 1.3, -0.2, 1.2, 0.4],
    "xarm7": [0.1, -0.2, 0.1, 0.9, 0.1, 0.9, 0.2],
}


def _start(robot, name):
    q = robot.zero_configuration()
    values = STARTS[name]
    q[: len(values)] = values[: len(q)]
    return np.clip(q, robot.lower, robot.upper)


def test_a_preset_saved_on_the_panda_drives_other_arms_the_same_way(blender, presets_folder):
    """Built on the Panda with Add IK Target (aimed at its flange), saved, and applied to a UR5
    and a Kinova: on each, the flange follows a keyframed control on every frame."""
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.presets import save_tree_as_preset

    bpy = blender
    panda = import_rig(bpy, "panda", active=True)
    pose_and_update(bpy, panda, _start(robot_of(panda), "panda"))
    tree, target, solver = add_ik_target(bpy.context, panda, "panda_link8", backend="NUMPY")
    target.rotation_weight = 0.8
    path = save_tree_as_preset(tree, panda, "Flange reach", "made on a Panda")
    assert path.parent == presets_folder
    assert not any(f'"{link}"' in path.read_text() for link in robot_of(panda).links)  # roles, not the Panda's links

    for name, flange in (("ur5", "tool0"), ("kinova", "j2s6s200_link_6")):
        rig = import_rig(bpy, name, active=True)
        robot = robot_of(rig)
        start = _start(robot, name)
        pose_and_update(bpy, rig, start)
        tree = _apply(bpy, rig, "Flange reach")
        (target,), (solver,) = _nodes(tree, "KinemaIKTargetNode"), _nodes(tree, "KinemaSolverNode")
        assert target.link_name == flange and target.rotation_weight == pytest.approx(0.8)
        assert target.control_object == rig and target.control_bone in rig.data.bones
        settle(bpy)
        assert np.abs(joints_of(rig) - start).max() <= 1e-6  # applying moved nothing
        end = np.clip(start + 0.25 * np.sign(np.arange(robot.dof) % 2 - 0.5), robot.lower, robot.upper)
        _key_control_along(bpy, rig, target, [start, end], [1, 12])
        for frame in range(1, 13):
            bpy.context.scene.frame_set(frame)
            assert solver.summary.startswith("converged"), (name, frame, solver.summary)
            _assert_reaches(rig, target)
        assert solver.solving_to == flange and not solver.kinema_error and not target.kinema_error


def _state(bpy):
    """Everything a failed apply must leave alone."""
    state = {"trees": sorted(t.name for t in bpy.data.node_groups), "objects": sorted(o.name for o in bpy.data.objects)}
    for tree in bpy.data.node_groups:
        state[f"nodes {tree.name}"] = sorted(n.name for n in tree.nodes)
        state[f"links {tree.name}"] = len(tree.links)
    for obj in bpy.data.objects:
        if obj.type == "ARMATURE":
            state[f"bones {obj.name}"] = sorted(b.name for b in obj.data.bones)
            state[f"joints {obj.name}"] = joints_of(obj).tolist()
            state[f"tree {obj.name}"] = obj.kinema_tree.name if obj.kinema_tree else None
    return state


def test_a_preset_whose_roles_cannot_bind_says_which_and_changes_nothing(blender, presets_folder):
    from kinema_nodes.blender.edit import add_ik_target
    from kinema_nodes.blender.presets import apply_preset

    bpy = blender
    panda = import_rig(bpy, "panda", active=True)
    add_ik_target(bpy.context, panda, backend="NUMPY")
    ur5 = import_rig(bpy, "ur5", active=True)  # no tree yet
    settle(bpy)
    before = _state(bpy)
    with pytest.raises(PresetError) as error:
        apply_preset(bpy.context, panda, "Arm on a rail")
    message = str(error.value)
    assert "could not bind rail: no prismatic joint at the root of the main chain" in message
    assert "Nothing was changed" in message and "\n" not in message
    with pytest.raises(PresetError) as error:
        apply_preset(bpy.context, ur5, "Whole-body reach for a humanoid")
    assert all(role in str(error.value) for role in ("left hand", "right hand", "left foot", "right foot"))
    with pytest.raises(PresetError) as error:
        apply_preset(bpy.context, ur5, "7-DoF arm with elbow swivel")
    assert "needs an arm with 7 revolute joints; 'ur5' has 6" in str(error.value)
    with pytest.raises(PresetError, match="no preset named 'Cartwheel'; available presets: .*'Reach with the tool'"):
        apply_preset(bpy.context, ur5, "Cartwheel")
    settle(bpy)
    assert _state(bpy) == before


def test_the_apply_operator_reports_an_unbindable_preset_and_cancels(blender, presets_folder):
    bpy = blender
    panda = import_rig(bpy, "panda", active=True)
    settle(bpy)
    before = _state(bpy)
    with pytest.raises(RuntimeError, match="could not bind rail"):  # bpy.ops turns an ERROR report into RuntimeError
        bpy.ops.kinema.apply_preset(preset=str(SHIPPED / "arm_on_a_rail.json"))
    assert _state(bpy) == before
    assert panda.kinema_tree is None


def test_a_preset_builds_a_rig_tree_headless_for_the_command_line(blender, presets_folder):
    """What `kinema-nodes bake --preset NAME` does before keying its track: a tree from a
    preset by name, and the target/solver the track drives."""
    from kinema_nodes.blender.presets import apply_preset, preset_driver

    bpy = blender
    rig = import_rig(bpy, "arm7", active=True)
    pose_and_update(bpy, rig, ARM7)
    tree = apply_preset(bpy.context, rig, "7_dof_arm_with_elbow_swivel", backend="NUMPY")  # the file name works too
    assert rig.kinema_tree == tree
    target, solver = preset_driver(tree)
    assert (target.name, solver.name, solver.backend) == ("Tool", "Solver", "NUMPY")
    assert target.control_object == rig and target.control_bone in rig.data.bones


def test_a_role_set_by_hand_on_the_robot_node_binds_a_preset(blender, presets_folder):
    """A hand-made setting beats inference: with the 'wrist' role moved to wrist_2_link, the
    hand-off preset hands over to wrist_2_link; the setting survives re-applying."""
    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    tree = _apply(bpy, rig, "Reach with the tool")
    (robot_node,) = _nodes(tree, "KinemaRobotNode")
    item = robot_node.role_overrides.add()
    item.role, item.link = "wrist", "wrist_2_link"
    tree = _apply(bpy, rig, "Hand-off between two links")
    (robot_node,) = _nodes(tree, "KinemaRobotNode")
    assert robot_node.role_override_map() == {"wrist": "wrist_2_link"}
    (switch,) = _nodes(tree, "KinemaLinkSwitchNode")
    assert [(row.start, row.link) for row in switch.ranges] == [(1.0, "tool_tcp"), (50.0, "wrist_2_link")]
    (target,) = _nodes(tree, "KinemaIKTargetNode")
    assert [b.name for b in rig.data.collections_all["IK"].bones] == [target.control_bone]  # the old control went with the old tree


def test_keyed_target_bone_choices_are_saved_as_roles_and_keyed_again(blender, presets_folder):
    """Key Target Bone on the Panda (tool point, then the wrist at frame 30), saved, applied to
    an xArm7: the keys step between the xArm7's tool point and wrist."""
    from kinema_nodes.blender.edit import add_ik_target, key_target_link
    from kinema_nodes.blender.presets import save_tree_as_preset

    bpy = blender
    panda = import_rig(bpy, "panda", active=True)
    tree, target, _ = add_ik_target(bpy.context, panda, backend="NUMPY")
    key_target_link(target, robot_of(panda), "panda_hand_tcp", 1)
    key_target_link(target, robot_of(panda), "panda_link6", 30)
    text = save_tree_as_preset(tree, panda, "Tool then wrist").read_text()
    assert '"keys"' in text and '"role": "wrist"' in text
    xarm = import_rig(bpy, "xarm7", active=True)
    tree = _apply(bpy, xarm, "Tool then wrist")
    (target,) = _nodes(tree, "KinemaIKTargetNode")
    robot = robot_of(xarm)
    for frame, link in ((1, "link_eef"), (29, "link_eef"), (30, "link6"), (45, "link6")):
        bpy.context.scene.frame_set(frame)
        assert target.link_at_frame(robot) == link, frame


# ---- every shipped preset, on a robot it is made for -----------------------------------------

def _moved(robot, q, rng, scale=0.15):
    moved = q + rng.uniform(-scale, scale, size=q.shape)
    held = robot.is_prismatic
    moved[held] = q[held]
    return np.clip(moved, robot.lower, robot.upper)


def _controls_to(bpy, rig, targets, q):
    """Put each target's control at its link's FK pose for configuration q (reachable)."""
    robot = robot_of(rig)
    for target in targets:
        rig.pose.bones[target.control_bone].matrix = _matrix(link_pose(robot, q, target.link_at_frame(robot)))
    bpy.context.view_layer.update()


ARM7 = [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0]
ARM6 = [0.3, -1.2, 1.4, -0.8, 1.2, 0.3]


def _talos_start(robot):
    q = robot.mid_configuration()
    for side, sign in (("left", 1), ("right", -1)):
        q[robot.joint_index(f"arm_{side}_2_joint")] = 0.3 * sign
        q[robot.joint_index(f"arm_{side}_4_joint")] = -1.2
    for side in ("left", "right"):
        q[robot.joint_index(f"leg_{side}_3_joint")] = -0.3
        q[robot.joint_index(f"leg_{side}_4_joint")] = 0.6
        q[robot.joint_index(f"leg_{side}_5_joint")] = -0.3
    return q


def test_shipped_reach_with_the_tool_on_arm6(blender, presets_folder):
    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    pose_and_update(bpy, rig, ARM6)
    tree = _apply(bpy, rig, "Reach with the tool")
    (target,), (solver,) = _nodes(tree, "KinemaIKTargetNode"), _nodes(tree, "KinemaSolverNode")
    assert target.link_name == "tool_tcp" and solver.live
    _controls_to(bpy, rig, [target], _moved(robot_of(rig), np.array(ARM6), np.random.default_rng(1)))
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target)


def test_shipped_elbow_swivel_preset_on_arm7(blender, presets_folder):
    """Robot -> IK Target (tool point) -> Solver -> Elbow Swivel; applying it moves nothing
    (the swivel starts at the arm's own angle); the tool follows its control."""
    from kinema_nodes.core.graph.program import stage_function

    bpy = blender
    rig = import_rig(bpy, "arm7", active=True)
    pose_and_update(bpy, rig, ARM7)
    tree = _apply(bpy, rig, "7-DoF arm with elbow swivel")
    (target,), (solver,), (swivel,) = (_nodes(tree, t) for t in ("KinemaIKTargetNode", "KinemaSolverNode", "KinemaSwivelNode"))
    assert swivel.inputs["Solution"].links[0].from_node == solver
    assert target.link_name == "flange"  # the tool point is never a finger (#12)
    settle(bpy)
    assert np.abs(joints_of(rig) - np.array(ARM7)).max() <= 1e-6
    _controls_to(bpy, rig, [target], _moved(robot_of(rig), np.array(ARM7), np.random.default_rng(2), 0.1))
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target)
    if stage_function("swivel") is not None:  # the swivel's own behaviour (issue 6), when it is in
        swivel.swivel_angle += 0.3
        settle(bpy)
        _assert_reaches(rig, target)


def test_shipped_arm_on_a_rail_preset_slides_the_rail_to_reach(blender, presets_folder):
    bpy = blender
    rig = import_rig(bpy, "rail_arm6", active=True)
    robot = robot_of(rig)
    start = robot.zero_configuration()
    start[1:] = ARM6
    pose_and_update(bpy, rig, start)
    tree = _apply(bpy, rig, "Arm on a rail")
    (target,), (solver,) = _nodes(tree, "KinemaIKTargetNode"), _nodes(tree, "KinemaSolverNode")
    assert not solver.hold_prismatic
    goal = start.copy()
    rail = robot.joint_index("rail_joint")
    goal[rail] = start[rail] + 0.5 * (robot.upper[rail] - start[rail])
    _controls_to(bpy, rig, [target], goal)
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target)
    assert abs(joints_of(rig)[rail] - start[rail]) > 0.05  # the carriage moved


@pytest.mark.parametrize("preset, links", [
    ("Dual arm", ("wrist_left_ft_tool_link", "wrist_right_ft_tool_link")),
    ("Whole-body reach for a humanoid", ("wrist_left_ft_tool_link", "wrist_right_ft_tool_link", "left_sole_link", "right_sole_link")),
])
def test_shipped_multi_target_presets_on_talos(blender, presets_folder, preset, links):
    bpy = blender
    rig = import_rig(bpy, "talos", active=True)
    robot = robot_of(rig)
    start = _talos_start(robot)
    pose_and_update(bpy, rig, start)
    tree = _apply(bpy, rig, preset)
    targets = _nodes(tree, "KinemaIKTargetNode")
    (solver,) = _nodes(tree, "KinemaSolverNode")
    assert tuple(t.link_name for t in targets) == links
    assert len(solver.inputs["Targets"].links) == len(links)
    hands = [t for t in targets if "hand" in t.name.lower()]
    for target, offset in zip(hands, ((0.03, 0.02, -0.02), (-0.02, 0.03, 0.02))):
        rig.pose.bones[target.control_bone].location = offset
    settle(bpy)
    assert solver.summary.startswith("converged"), solver.summary
    for target in targets:
        _assert_reaches(rig, target)


def test_shipped_hand_off_preset_hands_the_control_from_the_tool_to_the_wrist(blender, presets_folder):
    """Robot -> IK Target <- Link Switch (tool point from frame 1, wrist from frame 50) -> Solver."""
    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    robot = robot_of(rig)
    pose_and_update(bpy, rig, ARM6)
    tree = _apply(bpy, rig, "Hand-off between two links")
    (target,), (solver,), (switch,) = (_nodes(tree, t) for t in ("KinemaIKTargetNode", "KinemaSolverNode", "KinemaLinkSwitchNode"))
    assert target.inputs["Link"].links[0].from_node == switch
    bpy.context.scene.frame_set(1)
    settle(bpy)
    assert solver.solving_to == "tool_tcp" and solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target, "tool_tcp")
    assert np.abs(joints_of(rig) - np.array(ARM6)).max() <= 1e-6  # the control was made on the tool: nothing moved
    bpy.context.scene.frame_set(49)
    assert solver.solving_to == "tool_tcp"  # stepped: no link in between
    bpy.context.scene.frame_set(50)
    q = _moved(robot, np.array(ARM6), np.random.default_rng(3), 0.1)
    rig.pose.bones[target.control_bone].matrix = _matrix(link_pose(robot, q, "wrist_1_link"))
    settle(bpy)
    assert solver.solving_to == "wrist_1_link" and solver.summary.startswith("converged"), solver.summary
    _assert_reaches(rig, target, "wrist_1_link")


def test_the_panel_operators_save_apply_and_set_roles_on_the_active_rig(blender, presets_folder):
    bpy = blender
    rig = import_rig(bpy, "arm6", active=True)
    tree = _apply(bpy, rig, "Reach with the tool")  # NumPy: the saved preset keeps it, so no JAX compile below
    assert bpy.ops.kinema.role_override_add() == {"FINISHED"}
    (robot_node,) = _nodes(tree, "KinemaRobotNode")
    robot_node.role_overrides[0].role, robot_node.role_overrides[0].link = "flange", "wrist_3_link"
    assert bpy.ops.kinema.save_preset(name="Studio reach", description="ours") == {"FINISHED"}
    assert (presets_folder / "studio_reach.json").is_file()
    assert bpy.ops.kinema.role_override_remove(index=0) == {"FINISHED"}
    assert len(robot_node.role_overrides) == 0
    other = import_rig(bpy, "ur5", active=True)
    assert bpy.ops.kinema.apply_preset(preset=str(presets_folder / "studio_reach.json")) == {"FINISHED"}
    (target,) = _nodes(other.kinema_tree, "KinemaIKTargetNode")
    assert target.link_name == "tool0" and _nodes(other.kinema_tree, "KinemaSolverNode")[0].backend == "NUMPY"
