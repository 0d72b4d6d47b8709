"""The robot zoo of #29: robots from packages the test extra installs, each by a name a user
could type or a file a user could pick. One list for the zoo test (tests/blender/test_robot_zoo.py)
and the first-minutes benchmark (bench/bench_first_minutes.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: 6- and 7-axis arms, hobby arms, mobile manipulators, legged robots with arms, humanoids, a flying
#: arm, dual arms; test_robot_zoo's docstring says which were in a test before #29.
ZOO = (
    "ur5_limited", "robosuite_kinova3",
    "ur3_gripper", "ur3_joint_limited_robot", "ur10_joint_limited_robot", "ur5_gripper", "talos_left_arm",
    "tiago_no_hand", "tiago_dual", "tiago_pro", "b1_z1", "centauro", "g1_29dof_with_hand_rev_1_0", "human",
    "simple_humanoid", "romeo_small", "icub_reduced", "talos_reduced", "hextilt_flying_arm_5", "borinot_flying_arm_2",
    "finger_edu", "double_pendulum", "panda_collision", "so100", "robosuite_baxter", "robosuite_gr1",
    "robosuite_spot_arm", "robosuite_tiago", "robosuite_xarm7", "robosuite_jaco", "robosuite_iiwa", "robosuite_ur5e",
    # robosuite-models (robosuite's model pack): dual arms, hobby arms, humanoids, a PR2, two quadrupeds (a foot as the tool)
    "robosuite_aloha", "robosuite_arx5", "robosuite_b1", "robosuite_g1", "robosuite_go2", "robosuite_h1", "robosuite_pr2",
    "robosuite_vx300s", "robosuite_yumi", "robosuite_z1",
    # rtb-data (roboticstoolbox's models): a hobby arm, a classic 6-axis arm, two Trossen arms (xacro)
    "rtb_al5d", "rtb_puma560", "rtb_px100", "rtb_wx250s",
    # rtb-data's QUT Frankie (xacro): a Panda on a turning base (+-999999 rad), on an omnidirectional one, two Pandas;
    # its Clearpath Ridgeback, a base alone (two slides and a turn, each +-999999)
    "rtb_frankie", "rtb_frankie_omni", "rtb_dual_panda", "rtb_ridgeback",
    # example-robot-data's URDFs of robots the zoo had only as MJCF or not at all (2026-12-06)
    "xarm7", "talos", "pr2", "a1", "allegro_right_hand", "solo12",
)
#: rtb-data's robots, by their file below its `xacro/` folder. Their package:// names have no
#: package.xml, so (as a user would) the import dialog is given that folder as the package folder.
RTB = {
    "rtb_al5d": "lynxmotion_al5d_description/urdf/al5d_robot.urdf",
    "rtb_puma560": "unimation_puma560_description/urdf/puma560_robot.urdf",
    "rtb_px100": "trossen_descriptions/urdf/px100.urdf.xacro",
    "rtb_wx250s": "trossen_descriptions/urdf/wx250s.urdf.xacro",
    "rtb_frankie": "qut_frankie_description/robots/frankie_arm_hand.urdf.xacro",
    "rtb_frankie_omni": "qut_frankie_description/robots/frankieOmni_arm_hand.urdf.xacro",
    "rtb_dual_panda": "qut_frankie_description/robots/dual_panda_example.urdf.xacro",
    "rtb_ridgeback": "clearpath_ridgeback_description/urdf/ridgeback.urdf.xacro",
}


def robot_file(name: str) -> tuple[str, str]:
    """(the file File ▸ Import ▸ Robot is given, its package folder or "")."""
    from kinema_nodes.core.model.loading import find_urdf

    if name not in RTB:
        return str(find_urdf(name)), ""
    spec = importlib.util.find_spec("rtbdata")
    if spec is None:
        raise RuntimeError("rtb-data is not installed: install the test dependencies (README)")
    folder = Path(list(spec.submodule_search_locations)[0]) / "xacro"
    return str(folder / RTB[name]), str(folder)

