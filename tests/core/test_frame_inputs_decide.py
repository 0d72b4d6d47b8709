"""A frame's answer depends on its inputs, not on the frame the playhead came from (#29, item 13).

The cases are frames of tests/blender/test_robot_zoo.py's keyed loop where scrubbing forward and
backward used to part: the target is the control's pose there (float32, as the rig stores it), the
two starts are what the rig held on the frame before, coming from either side (some rounded to
four decimals). Robots from
example-robot-data, solved by the default NumPy backend; the tool checked by yourdfpy's FK.

- simple_humanoid's right arm with its waist (10 joints, 4 spare) and talos_reduced's left arm
  with its torso (9 joints, 3 spare), far from their posture (the import pose): the distance to
  the posture has more than one minimum along the poses that reach the target, and the slide
  from the frame before stopped at whichever was nearest (here 0.43 and 0.21 rad apart before
  the fix). Tolerance: 1e-8 rad, the slide's own step tolerance (POSTURE_STEP_TOLERANCE).
- hextilt_flying_arm_5 (5 joints on a full pose): the float32 control lies 9e-10 m off the poses
  the arm can reach, so the last steps converge linearly; four polish steps left 3.6e-6 rad
  between the two starts. Tolerance: 1e-9 rad.
"""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.loading import find_urdf, load_robot
from kinema_nodes.core.solve import IKTarget, SolveOptions, prepare, solve

CASES = {
    "simple_humanoid": dict(
        link="r_wrist",
        position=(0.2071853131055832, 0.02646249532699585, 0.5702326893806458),
        wxyz=(0.2510638759749742, 0.46368497948624726, -0.5905433675100424, -0.6109187352415705),
        starts=(
            {"RARM_SHOULDER_P": -0.8348, "RARM_SHOULDER_R": 0.8068, "RARM_SHOULDER_Y": -0.2722, "RARM_ELBOW": -0.7905, "RARM_WRIST_Y": -0.5235,
             "RARM_WRIST_P": -0.8873, "RARM_WRIST_R": -0.465, "WAIST_P": -0.4672, "WAIST_R": 0.172, "CHEST": -0.0411},
            {"RARM_SHOULDER_P": -0.372, "RARM_SHOULDER_R": 1.3363, "RARM_SHOULDER_Y": 0.103, "RARM_ELBOW": -0.8148, "RARM_WRIST_Y": -0.3103,
             "RARM_WRIST_P": -0.8056, "RARM_WRIST_R": -0.1914, "WAIST_P": -0.1686, "WAIST_R": 0.225, "CHEST": -0.4244},
        ),
        agree=1e-8,
    ),
    "talos_reduced": dict(
        link="wrist_left_ft_tool_link",
        position=(0.45836159586906433, 0.0744948536157608, -0.04743361473083496),
        wxyz=(0.1279341290399089, -0.02857540221757727, -0.40810698326833594, -0.9034738486655393),
        starts=(
            {"torso_1_joint": -0.35507190227508545, "torso_2_joint": -0.2617993950843811,
             "arm_left_1_joint": -0.8022305369377136, "arm_left_2_joint": 0.588170051574707,
             "arm_left_3_joint": -0.5163055658340454, "arm_left_4_joint": -0.7168184518814087,
             "arm_left_5_joint": -0.7159731984138489, "arm_left_6_joint": -0.0015137990703806281,
             "arm_left_7_joint": -0.5446596145629883},
            {"torso_1_joint": -0.2512, "torso_2_joint": -0.2617993950843811, "arm_left_1_joint": -1.0071,
             "arm_left_2_joint": 0.5848, "arm_left_3_joint": -0.4872, "arm_left_4_joint": -0.5778,
             "arm_left_5_joint": -0.6404, "arm_left_6_joint": 0.0788, "arm_left_7_joint": -0.6151},
        ),
        agree=1e-8,
    ),
    "hextilt_flying_arm_5": dict(
        link="flying_arm_5__gripper",
        position=(-0.13677069544792175, 0.047277241945266724, -0.30173301696777344),
        wxyz=(0.06962442995860155, 0.7126465099464959, -0.5452628070192134, -0.4358622051698757),
        starts=(
            {"flying_arm_5__j_base_link_link_1": -0.25867384672164917, "flying_arm_5__j_link_1_link_2": -0.2691475749015808,
             "flying_arm_5__j_link_2_link_3": -0.32700085639953613, "flying_arm_5__j_link_3_link_4": -0.38834840059280396,
             "flying_arm_5__j_link_4_link_5": -0.4383990466594696},
            {"flying_arm_5__j_base_link_link_1": -0.2585686147212982, "flying_arm_5__j_link_1_link_2": -0.26375505328178406,
             "flying_arm_5__j_link_2_link_3": -0.33200228214263916, "flying_arm_5__j_link_3_link_4": -0.38397330045700073,
             "flying_arm_5__j_link_4_link_5": -0.43954360485076904},
        ),
        agree=1e-9,
    ),
}


def _start(robot, named):
    q = np.clip(np.zeros(robot.dof), robot.lower, robot.upper)
    for name, value in named.items():
        q[robot.actuated_joint_names.index(name)] = value
    return q


def _yourdfpy_error(name, robot, link, q, position, wxyz):
    import yourdfpy

    from kinema_nodes.core.model.rotations import quaternion_to_matrix

    urdf = yourdfpy.URDF.load(str(find_urdf(name)), load_meshes=False, build_scene_graph=True)
    urdf.update_cfg({joint: float(value) for joint, value in zip(robot.actuated_joint_names, q)
                     if joint in urdf.actuated_joint_names})
    pose = urdf.get_transform(link, urdf.base_link)
    position_error = float(np.linalg.norm(pose[:3, 3] - np.asarray(position)))
    turn = pose[:3, :3].T @ quaternion_to_matrix(np.asarray(wxyz))
    return position_error, float(np.arccos(np.clip((np.trace(turn) - 1.0) / 2.0, -1.0, 1.0)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_frame_reached_from_either_neighbour_gets_one_answer(name):
    case = CASES[name]
    robot = load_robot(find_urdf(name))
    posture = tuple(np.clip(np.zeros(robot.dof), robot.lower, robot.upper))  # the import pose, as Add IK Target stores it
    options = SolveOptions(backend="numpy", held_joints=robot.held_joints(True), posture=posture)
    target = IKTarget(case["link"], case["position"], case["wxyz"])
    answers = [solve(robot, target, _start(robot, start), options) for start in case["starts"]]
    prepared = prepare(robot, [case["link"]], options)
    answers += [prepared.solve([case["position"]], [case["wxyz"]], _start(robot, start)) for start in case["starts"]]
    for answer in answers:
        assert answer.converged, answer.reason
        position_error, angle_error = _yourdfpy_error(name, robot, case["link"], answer.joints, case["position"], case["wxyz"])
        assert position_error <= 1e-5 and angle_error <= 1e-5, (position_error, angle_error)
    spread = max(float(np.max(np.abs(a.joints - answers[0].joints))) for a in answers)
    assert spread <= case["agree"], spread
