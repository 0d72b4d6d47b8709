"""The tool point is the tool and fingers are held, found by the tree's shape as well as by
names (#29 items 18 and 19), on arms and grippers the suite did not use for this: robosuite's
Kinova Gen3, xArm7 and Spot Arm MJCF arms with its Rethink, Robotiq 140 and Boston Dynamics
grippers, put together the way robosuite does (the gripper's root body on the arm's
``right_hand``) with MuJoCo's own `MjSpec.attach`. Meshes are left out (only the tree matters);
bodies are renamed to what other makers call them: carriages, drivers, followers, pads, jaws.

- 18: fingers that no word names (slides moving carriages, a Robotiq linkage of drivers and
  followers) are gripper joints, held in every solve; the tool point is never a finger or a
  pad; a site named for grasping (``pinch``, ``grasp``, ``tcp``) wins over every link, and the
  shipped presets (the 7-DoF Elbow Swivel one included) accept the robot as it loads.
- 19: an arm's last joint that turns a link named like a jaw (the fixed jaw the moving one
  hangs from) is the arm's wrist, never held, so a target the wrist must turn to reach is
  reached.

Independent check: MuJoCo's `mj_kinematics` on the same MJCF. Tolerances: the solver's 1e-5 m
/ 1e-5 rad, checked at 2e-5; a held joint is unchanged exactly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from independent_fk import mujoco_pose

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.robot import is_gripper_part
from kinema_nodes.core.model.rotations import matrix_to_quaternion, rotation_angle_between
from kinema_nodes.core.presets import bind, load_preset
from kinema_nodes.core.stages.swivel import has_spare_joint

mujoco = pytest.importorskip("mujoco")

#: The presets the add-on ships (Apply Preset offers these).
SHIPPED_PRESETS = Path(__file__).resolve().parents[2] / "kinema_nodes" / "presets"


def robosuite_assets() -> Path:
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets"


def arm_with_gripper(tmp_path: Path, arm: str, gripper: str, renames: dict[str, str], *, keep_sites: bool = True,
                     pinch_on: str | None = None, site_name: str = "pinch") -> Path:
    """robosuite's `arm` with its `gripper` on ``right_hand`` (names prefixed ``g_``), bodies and
    joints renamed by `renames`, the gripper's sites kept or dropped, and a site named `site_name`
    (``pinch`` unless told) added where the gripper's ``eef`` body is, on the body `pinch_on`."""
    if not (robosuite_assets() / "robots" / arm).is_dir():
        import robosuite

        pytest.skip(f"robosuite {robosuite.__version__} ships no {arm} (1.5.2, the default leg's, does)")
    specs = [mujoco.MjSpec.from_file(str(robosuite_assets() / "robots" / arm / "robot.xml")),
             mujoco.MjSpec.from_file(str(robosuite_assets() / "grippers" / f"{gripper}.xml"))]
    for spec in specs:
        for geom in list(spec.geoms):
            if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
                spec.delete(geom)
        for asset in [*spec.meshes, *spec.textures]:
            spec.delete(asset)
    whole, hand = specs
    hand.option.gravity = whole.option.gravity  # bd_gripper's zero gravity would be an attach conflict (a warning and a log file)
    for element in [*hand.actuators, *hand.excludes]:  # they name what is renamed below; the tree is what counts
        hand.delete(element)
    if not keep_sites:
        for site in list(hand.sites):
            hand.delete(site)
    whole.body("right_hand").add_frame().attach_body(hand.worldbody.first_body(), "g_", "")
    if pinch_on is not None:
        model = whole.compile()
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        eef, body = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in ("g_eef", pinch_on))
        offset = np.linalg.inv(_pose(data.xpos[body], data.xquat[body])) @ _pose(data.xpos[eef], data.xquat[eef])
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, offset[:3, :3].ravel())
        whole.body(pinch_on).add_site(name=site_name, pos=offset[:3, 3], quat=quat)
    for old, new in renames.items():
        element = whole.body(old) or whole.joint(old)
        element.name = new
    path = tmp_path / f"{arm}_{gripper}.xml"
    path.write_text(whole.to_xml())
    return path


def _pose(position, quaternion) -> np.ndarray:
    rotation = np.empty(9)
    mujoco.mju_quat2Mat(rotation, np.asarray(quaternion, dtype=float))
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rotation.reshape(3, 3), position
    return out


def reach(path: Path, robot, goal_q: np.ndarray, start: np.ndarray):
    """Solve for the tool point's pose at `goal_q` from `start` with the robot's held joints;
    the answer and where MuJoCo puts the tool point for it."""
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

    goal = mujoco_pose(path, robot, goal_q, robot.tool_point)
    result = solve(robot, IKTarget(robot.tool_point, tuple(goal[:3, 3]), tuple(matrix_to_quaternion(goal)), 1.0, 1.0),
                   start, SolveOptions(backend="numpy", held_joints=robot.held_joints()))
    return result, goal, mujoco_pose(path, robot, result.joints, robot.tool_point)


# ---- 18: fingers by structure; pads never; a pinch site wins ----------------------------------

CASES = {
    # slides moving "carriages" with "pads" on them; no site, no word says gripper or finger
    "kinova3 + rethink, carriages and pads": dict(
        arm="kinova3", gripper="rethink_gripper", keep_sites=False, pinch_on=None,
        renames={"right_hand": "bracelet_mount", "g_gripper_base": "g_base_plate", "g_eef": "g_mount",
                 "g_l_finger": "left_carriage", "g_r_finger": "right_carriage",
                 "g_l_finger_tip": "left_pad", "g_r_finger_tip": "right_silicone_pad",
                 "g_l_finger_joint": "left_slide", "g_r_finger_joint": "right_slide"},
        fingers={"left_slide", "right_slide"}, tool="g_mount"),
    # a Robotiq 140 linkage called drivers, couplers and followers, with a pinch site on its base
    "xarm7 + robotiq 140, drivers and followers": dict(
        arm="xarm7", gripper="robotiq_gripper_140", keep_sites=False, pinch_on="g_right_gripper",
        renames={"g_right_gripper": "g_coupling", "g_eef": "g_frame",
                 "g_left_outer_knuckle": "left_driver", "g_left_inner_finger": "left_follower",
                 "g_left_inner_knuckle": "left_coupler",
                 "g_right_outer_knuckle": "right_driver", "g_right_inner_finger": "right_follower",
                 "g_right_inner_knuckle": "right_coupler"},
        fingers={"g_finger_joint", "g_left_inner_finger_joint", "g_left_inner_knuckle_joint", "g_right_outer_knuckle_joint",
                 "g_right_inner_finger_joint", "g_right_inner_knuckle_joint"}, tool="pinch"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fingers_no_word_names_are_held_and_the_tool_point_is_never_one(case, tmp_path):
    spec = CASES[case]
    path = arm_with_gripper(tmp_path, spec["arm"], spec["gripper"], spec["renames"], keep_sites=spec["keep_sites"],
                            pinch_on=spec["pinch_on"])
    robot = load_robot(path)
    assert robot.gripper_joints == spec["fingers"]
    assert spec["fingers"] <= robot.held_joints(hold_slides=False)
    assert robot.tool_point == spec["tool"]
    assert not is_gripper_part(robot, robot.tool_point)
    assert all(is_gripper_part(robot, link) for link in robot.links if "pad" in link or "carriage" in link or "follower" in link)
    arm = [n for n in robot.chain_joint_names(robot.tool_point)]
    assert len(arm) == 7 and not set(arm) & spec["fingers"]
    assert has_spare_joint(robot, robot.tool_point, robot.held_joints())  # Elbow Swivel is offered
    assert_presets_accept(robot)

    # the arm reaches a pose it can reach; the fingers keep their values exactly
    rng = np.random.default_rng(18)
    start = robot.mid_configuration()
    fingers = [robot.joint_index(n) for n in spec["fingers"]]
    start[fingers] = rng.uniform(robot.lower[fingers], robot.upper[fingers])
    goal_q = start.copy()
    moved = [robot.joint_index(n) for n in arm]
    goal_q[moved] = np.clip(goal_q[moved] + rng.uniform(-0.3, 0.3, len(moved)), robot.lower[moved], robot.upper[moved])
    result, goal, reached = reach(path, robot, goal_q, start)
    assert result.converged, result.reason
    np.testing.assert_array_equal(result.joints[fingers], start[fingers])
    assert np.abs(reached[:3, 3] - goal[:3, 3]).max() < 2e-5
    assert rotation_angle_between(reached[:3, :3], goal[:3, :3]) < 2e-5
    assert np.abs(link_pose(robot, result.joints, robot.tool_point) - reached).max() < 1e-9


@pytest.mark.parametrize("site", ["pinch", "grasp", "tcp"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_site_named_for_grasping_is_the_tool_point_and_presets_accept_the_robot(case, site, tmp_path):
    """Each word the issue lists for a grasp site (pinch, grasp, tcp: `default_tool_point`'s
    best two ranks) wins over every link of the composed robot, pads and carriages included; the
    7 arm joints are the chain to it (no finger in it), Elbow Swivel is offered, and the shipped
    presets bind to the robot as it loads (`assert_presets_accept`). The site sits where the
    gripper's ``eef`` body is, on the gripper's root (Kinova + Rethink, whose own case has no site)
    or on the Robotiq's base body. Exact checks: names and counts, no tolerance."""
    spec = CASES[case]
    path = arm_with_gripper(tmp_path, spec["arm"], spec["gripper"], spec["renames"], keep_sites=spec["keep_sites"],
                            pinch_on=spec["pinch_on"] or "g_gripper_base", site_name=site)
    robot = load_robot(path)
    assert robot.gripper_joints == spec["fingers"]
    assert robot.tool_point == site
    assert not is_gripper_part(robot, site)
    arm = robot.chain_joint_names(site)
    assert len(arm) == 7 and not set(arm) & spec["fingers"]
    assert has_spare_joint(robot, site, robot.held_joints())  # Elbow Swivel is offered
    assert_presets_accept(robot)


def assert_presets_accept(robot) -> None:
    """The shipped '7-DoF arm with elbow swivel' (7 arm joints; shoulder, elbow and wrist roles)
    and 'Reach with the tool' bind to `robot` with no role set by hand, their Tool on the robot's
    default tool point (#29 item 18: with the tool point on a finger pad, presets refused)."""
    for name in ("7_dof_arm_with_elbow_swivel", "reach_with_the_tool"):
        plan, unbound = bind(load_preset(SHIPPED_PRESETS / f"{name}.json"), robot)
        assert unbound == {}, (name, unbound)
        assert [node.get("link") for node in plan.spec.nodes if node.kind == "ik_target"] == [robot.tool_point]


# ---- 19: an arm's wrist is never held, whatever its link is called -----------------------------

WRISTS = {
    # a 6-axis arm whose last link is named as the fixed jaw; the gripper's one moving jaw hangs from it
    "spot arm, fixed jaw": dict(
        arm="spot_arm", gripper="bd_gripper", pinch_on="g_right_gripper", wrist="arm_wr1", jaws={"g_arm_f1x"},
        renames={"arm_link_wr1": "Fixed_Jaw", "right_hand": "wrist_plate", "g_right_gripper": "g_jaw_mount",
                 "g_mover": "Moving_Jaw"}),
    # a 7-axis arm whose last link is the fixed jaw and two jaws slide on it
    "xarm7, fixed jaw": dict(
        arm="xarm7", gripper="rethink_gripper", pinch_on=None, wrist="joint7", jaws={"g_l_finger_joint", "g_r_finger_joint"},
        renames={"link7": "Fixed_Jaw", "g_gripper_base": "g_jaw_base", "g_l_finger": "left_jaw", "g_r_finger": "right_jaw"}),
}


@pytest.mark.parametrize("case", sorted(WRISTS))
def test_the_wrist_turning_a_fixed_jaw_is_the_arms_and_reaches(case, tmp_path):
    spec = WRISTS[case]
    path = arm_with_gripper(tmp_path, spec["arm"], spec["gripper"], spec["renames"], pinch_on=spec["pinch_on"])
    robot = load_robot(path)
    assert robot.gripper_joints == spec["jaws"]
    assert spec["wrist"] not in robot.held_joints()
    if spec["pinch_on"]:
        assert robot.tool_point == "pinch"
    assert spec["wrist"] in robot.chain_joint_names(robot.tool_point)

    # a target only a turn of the wrist reaches
    start = robot.mid_configuration()
    goal_q = start.copy()
    wrist = robot.joint_index(spec["wrist"])
    goal_q[wrist] = np.clip(start[wrist] + 0.8, robot.lower[wrist], robot.upper[wrist])
    result, goal, reached = reach(path, robot, goal_q, start)
    assert result.converged, result.reason
    jaws = [robot.joint_index(n) for n in spec["jaws"]]
    np.testing.assert_array_equal(result.joints[jaws], start[jaws])
    assert np.abs(reached[:3, 3] - goal[:3, 3]).max() < 2e-5
    assert rotation_angle_between(reached[:3, :3], goal[:3, :3]) < 2e-5
