"""core.model: what a robot is. Siblings use

- `robot`: `RobotModel` (joints, limits, the tool point, `held_joints()`, `cache(name)` for what
  other modules derive from a robot), and the rules for tool points and gripper parts;
- `loading`: `load_robot` (URDF, xacro, MJCF, bundled names), `find_urdf`, `robot_from_urdf_text`;
- `file_checks`: the limits a robot file must keep (size, links, finite numbers);
- `mesh_paths`: the file each mesh reference means, and the folders meshes must lie in;
- `kinematics`: `link_pose`, `link_poses`, `jacobian` (batched forward kinematics);
- `rotations`: quaternions, rotation matrices, `wrap_angle`, `same_hemisphere`, `pose_matrices`;
- `meshes`: the one mesh loader (`load_mesh`, hardened against hostile files);
- `bones`: the numbers of a rig's bones (head/tail/roll, length, local poses);
- `packages`, `xacro`, `mjcf`: where `package://` paths lead and the other file formats;
- `example_robots`: robots by name: the bundled ones and those of example-robot-data and robosuite.

Names with a leading underscore stay inside this folder.
"""
