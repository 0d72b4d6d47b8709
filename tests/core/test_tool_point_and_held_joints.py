"""The tool point is the tool, and grippers are held (#12 item 1); roles from the kinematic
chain, root to tip (#20 item 4). Real robots the suite had not used for this: the SO-101 and
Unitree Z1 of example-robot-data (default tool point a moving jaw before), Baxter, TIAGo, PR2,
Romeo, iCub and simple_humanoid (chains in file order before), and the Panda of the
pybullet-style data that robosuite ships (outside example-robot-data; the rule picked a finger).

Independent check: yourdfpy's own forward kinematics. Tolerances: the solver's 1e-5 m /
1e-5 rad, checked at 2e-5; a held joint is unchanged exactly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.robot import is_gripper_part
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between
from kinema_nodes.core.roles import arm_joints, infer_roles
from kinema_nodes.core.stages.swivel import has_spare_joint, set_swivel, swivel_angle, swivel_links

EXAMPLE_PATHS = {
    "so101": "so_arm_description/urdf/so101.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "baxter": "baxter_description/urdf/baxter.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",
    "romeo": "romeo_description/urdf/romeo_small.urdf",
    "icub": "icub_description/robots/icub_reduced.urdf",
    "simple_humanoid": "simple_humanoid_description/urdf/simple_humanoid.urdf",
}


def robosuite_panda_path() -> Path:
    """robosuite's copy of the pybullet Panda (arm + hand, two finger slides)."""
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "models" / "assets" / "bullet_data" / "panda_description" / "urdf" / "panda_arm_hand.urdf"


_loaded: dict[str, object] = {}


def robot(name: str):
    if name not in _loaded:
        if name == "robosuite_panda":
            path = robosuite_panda_path()
        else:
            folder = example_robots_folder()
            assert folder is not None, "example-robot-data is a test dependency"
            path = folder / EXAMPLE_PATHS[name]
        _loaded[name] = load_robot(path, check_meshes=False)
    return _loaded[name]


# ---- the tool point ------------------------------------------------------------------------

@pytest.mark.parametrize("name, tool_point, was", [
    ("so101", "gripper_frame_link", "moving_jaw_so101_v1_link"),
    ("z1", "gripperStator", "gripperMover"),
    ("robosuite_panda", "panda_hand", "panda_leftfinger"),
    ("baxter", "right_gripper", "r_gripper_l_finger_tip"),
    ("tiago", "hand_grasping_frame", "hand_tool_link"),
])
def test_the_default_tool_point_is_the_hand_never_a_jaw_or_finger(name, tool_point, was):
    model = robot(name)
    assert model.tool_point == tool_point, (name, model.tool_point)
    assert was != tool_point
    assert not is_gripper_part(model, model.tool_point)
    assert not set(model.chain_joint_names(model.tool_point)) & model.gripper_joints


def test_a_grasp_frame_wins_over_the_hand_and_a_finger(tmp_path):
    """pybullet_data's Panda has panda_grasptarget on the hand: the rule takes it (pybullet
    itself has no wheels for Python 3.13, so the link is added to robosuite's copy)."""
    text = robosuite_panda_path().read_text()
    grasp = """<link name="panda_grasptarget"/>
  <joint name="panda_grasptarget_hand" type="fixed"><parent link="panda_hand"/><child link="panda_grasptarget"/>
    <origin rpy="0 0 0" xyz="0 0 0.105"/></joint>
</robot>"""
    path = tmp_path / "panda_grasp.urdf"
    path.write_text(text.replace("</robot>", grasp))
    assert load_robot(path, check_meshes=False).tool_point == "panda_grasptarget"


# ---- gripper joints are held -----------------------------------------------------------------

@pytest.mark.parametrize("name, grippers", [
    ("so101", {"gripper"}),
    ("z1", {"jointGripper"}),
    ("robosuite_panda", {"panda_finger_joint1"}),  # finger 2 mimics it
    ("baxter", {"r_gripper_l_finger_joint", "l_gripper_l_finger_joint"}),
])
def test_gripper_joints_are_held_and_slides_only_with_hold_slides(name, grippers):
    model = robot(name)
    assert grippers <= model.gripper_joints, sorted(model.gripper_joints)
    arm = {j.name for j in arm_joints(model)}
    assert not arm & model.gripper_joints
    slides = {j.name for j in model.actuated_joints if j.type == "prismatic"}
    assert model.held_joints() == model.gripper_joints | slides
    assert model.held_joints(hold_slides=False) == model.gripper_joints


def test_a_robot_that_is_only_a_hand_holds_nothing(robots, tmp_path):
    folder = example_robots_folder()
    hand = load_robot(folder / "allegro_hand_description/urdf/allegro_right_hand.urdf", check_meshes=False)
    assert hand.gripper_joints == frozenset() and hand.dof == 16


def _yourdfpy_pose(model, q, link):
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(model.path), build_scene_graph=True, load_meshes=False, load_collision_meshes=False)
    urdf.update_cfg(dict(zip(model.actuated_joint_names, q)))
    return np.asarray(urdf.get_transform(link, model.root_link), dtype=float)


@pytest.mark.parametrize("name, jaw, jaw_value", [
    ("so101", "moving_jaw_so101_v1_link", 0.6),
    ("z1", "gripperMover", -0.8),
])
def test_aiming_at_the_jaw_moves_the_arm_and_never_the_jaw(name, jaw, jaw_value):
    """The old default tool point: IK to a 3 cm move of the jaw link, with the held joints every
    solver gets. The jaw keeps its value exactly; the jaw link reaches the goal (yourdfpy FK)."""
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

    model = robot(name)
    (jaw_joint,) = [n for n in model.chain_joint_names(jaw) if n in model.gripper_joints]
    start = np.clip(model.mid_configuration() + 0.2, model.lower, model.upper)
    start[model.joint_index(jaw_joint)] = jaw_value
    goal = link_pose(model, start, jaw)
    goal[:3, 3] += (0.02, -0.015, 0.015)
    held = model.held_joints()
    assert jaw_joint in held
    result = solve(model, IKTarget(jaw, tuple(goal[:3, 3]), tuple(matrix_to_quaternion(goal)), 1.0, 0.0),
                   start, SolveOptions(backend="numpy", held_joints=held))
    assert result.converged, result.reason
    assert result.joints[model.joint_index(jaw_joint)] == jaw_value
    reached = _yourdfpy_pose(model, result.joints, jaw)
    assert np.abs(reached[:3, 3] - goal[:3, 3]).max() < 2e-5


# ---- Elbow Swivel only where the arm, without its gripper, has a spare joint -------------------

@pytest.mark.parametrize("name, link, spare", [
    ("z1", "gripperMover", False),  # six arm joints and a jaw: 7 revolute joints, no spare one
    ("so101", "moving_jaw_so101_v1_link", False),
    ("baxter", "right_gripper", True),
    ("tiago", "hand_grasping_frame", True),
])
def test_elbow_swivel_needs_a_spare_arm_joint_not_a_jaw(name, link, spare):
    model = robot(name)
    assert has_spare_joint(model, link, model.held_joints()) is spare


# ---- roles from the chain, root to tip --------------------------------------------------------

@pytest.mark.parametrize("name", ["pr2", "romeo", "icub", "simple_humanoid", "so101"])
def test_chains_run_root_to_tip(name):
    """These files list joints out of tree order; every chain comes back root to tip."""
    model = robot(name)
    for link in model.links:
        names = model.chain_joint_names(link)
        order = [j.mimic.joint if j.mimic else j.name for j in model.chain(link) if j.is_movable]
        assert names == list(dict.fromkeys(order))


@pytest.mark.parametrize("name, shoulder, elbow, wrist, flange", [
    ("romeo", "LShoulderYawLink", "LElbowYawLink", "LWristYawLink", "l_wrist"),
    ("simple_humanoid", "RARM_LINK2", "RARM_LINK4", "RARM_LINK6", "r_wrist"),
    ("icub", "l_shoulder_2", "l_elbow_1", "l_wrist_1", "l_hand"),
    ("pr2", "r_shoulder_lift_link", "r_elbow_flex_link", "r_wrist_flex_link", "r_wrist_roll_link"),
    ("baxter", "right_lower_shoulder", "right_lower_elbow", "right_lower_forearm", "right_wrist"),
    ("z1", "link02", "link03", "link04", "link06"),
])
def test_roles_skip_torso_and_gripper_joints(name, shoulder, elbow, wrist, flange):
    model = robot(name)
    links = infer_roles(model).links
    assert (links["shoulder"], links["elbow"], links["wrist"], links["flange"]) == (shoulder, elbow, wrist, flange)
    arm = arm_joints(model)
    chain = model.chain_joint_names(model.tool_point)
    assert [j.name for j in arm] == [n for n in chain if n in {j.name for j in arm}]  # root to tip
    assert not {j.name for j in arm} & model.gripper_joints


@pytest.mark.parametrize("name", ["romeo", "simple_humanoid", "icub"])
def test_swivel_turns_about_the_arm_roles_on_humanoids(name):
    """Asked for +17 degrees from the current swivel, the elbow swings +17 degrees about the
    shoulder-to-wrist line of the arm (its roles), and the tool holds (1e-5)."""
    from kinema_nodes.core.solve import IKTarget, SolveOptions

    model = robot(name)
    link = model.tool_point
    held = model.held_joints()
    roles = infer_roles(model).links
    assert swivel_links(model, link, held) == (roles["shoulder"], roles["elbow"], roles["wrist"])
    rng = np.random.default_rng(5)
    start = np.clip(model.mid_configuration() + rng.uniform(-0.3, 0.3, model.dof), model.lower, model.upper)
    for j in arm_joints(model):  # bend the arm away from its straight singularity
        i = model.joint_index(j.name)
        start[i] = np.clip(0.5 * (model.lower[i] + model.upper[i]) + 0.4, model.lower[i], model.upper[i])
    pose = link_pose(model, start, link)
    goal = IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose)))
    before = float(swivel_angle(model, link, start, held))
    result = set_swivel(model, [goal], start, before + np.radians(17.0), SolveOptions(backend="numpy", held_joints=held), link)
    turned = np.degrees((float(swivel_angle(model, link, result.joints, held)) - before + np.pi) % (2 * np.pi) - np.pi)
    if not result.saturated:
        assert abs(turned - 17.0) < 0.1, (name, turned, result.note)
    else:
        assert 0.0 < turned < 17.0, (name, turned, result.note)
    reached = link_pose(model, result.joints, link)
    assert np.abs(reached[:3, 3] - pose[:3, 3]).max() < 2e-5 and rotation_angle_between(reached, pose) < 2e-5
