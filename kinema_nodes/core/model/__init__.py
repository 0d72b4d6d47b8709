"""core.model: what a robot is. Siblings use

- `robot`: `RobotModel` (joints, limits, the tool point, `held_joints()`, `cache(name)` for what
  other modules derive from a robot) and `load_robot` (URDF, xacro, MJCF, bundled names);
- `kinematics`: `link_pose`, `link_poses`, `jacobian` (batched forward kinematics);
- `rotations`: quaternions, rotation matrices, `wrap_angle`, `same_hemisphere`, `pose_matrices`;
- `meshes`: the one mesh loader (`load_mesh`, hardened against hostile files);
- `bones`: the numbers of a rig's bones (head/tail/roll, length, local poses);
- `packages`, `xacro`, `mjcf`: where `package://` paths lead and the other file formats;
- `example_robots`: the real robots of example-robot-data.

Names with a leading underscore stay inside this folder.
"""
