"""The rig helpers the Blender tests share: import a robot, read and set its joints, let the
depsgraph settle. Real Blender, real robots: these only shorten what each test would spell out."""

from __future__ import annotations

import numpy as np


def import_rig(bpy, name_or_path, *, active: bool = False, **options):
    """A robot (a bundled name or a URDF path) imported as a rig; `active`: made the active object."""
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(bpy.context, name_or_path, **options)
    if active:
        bpy.context.view_layer.objects.active = rig
    return rig


def robot_of(rig):
    from kinema_nodes.blender.rig import robot_for_rig

    return robot_for_rig(rig)


def joints_of(rig) -> np.ndarray:
    """The rig's joint values now (one per actuated joint)."""
    from kinema_nodes.blender.rig import read_joint_values

    return read_joint_values(rig, robot_of(rig))


def set_joints(rig, q) -> None:
    """Pose the rig at joint values `q` (no depsgraph update)."""
    from kinema_nodes.blender.rig import write_joint_values

    write_joint_values(rig, robot_of(rig), np.asarray(q, dtype=float))


def pose_and_update(bpy, rig, q) -> None:
    """`set_joints`, then one depsgraph update (the handlers run on it)."""
    set_joints(rig, q)
    bpy.context.view_layer.update()


def settle(bpy) -> None:
    """Let the depsgraph run the handlers, then evaluate what they wrote."""
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()


class IndependentFK:
    """A link's pose relative to the robot's root by the robot file's own reader, not ours:
    yourdfpy for a URDF, MuJoCo's mj_kinematics for an MJCF model."""

    def __init__(self, robot):
        self.robot = robot
        path = str(robot.path)
        self.mjcf = path.endswith(".xml")
        if self.mjcf:
            import mujoco

            self.mujoco = mujoco
            self.model = mujoco.MjModel.from_xml_path(path)
            self.data = mujoco.MjData(self.model)
            joint = mujoco.mjtObj.mjOBJ_JOINT
            self.address = {j.name: int(self.model.jnt_qposadr[mujoco.mj_name2id(self.model, joint, j.name)])
                            for j in robot.joints if j.is_movable}
        else:
            import yourdfpy

            self.urdf = yourdfpy.URDF.load(path, load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)

    def _body_pose(self, name):
        mujoco = self.mujoco
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body < 0:  # a site (MJCF sites become links)
            site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, name)
            rotation, position = self.data.site_xmat[site].reshape(3, 3), self.data.site_xpos[site]
        else:
            rotation = np.empty(9)
            mujoco.mju_quat2Mat(rotation, self.data.xquat[body])
            rotation, position = rotation.reshape(3, 3), self.data.xpos[body]
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = rotation, position
        return pose

    def pose(self, q, link) -> np.ndarray:
        robot = self.robot
        if not self.mjcf:
            self.urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
            return self.urdf.get_transform(link, self.urdf.base_link)
        mujoco = self.mujoco
        self.data.qpos[:] = self.model.qpos0
        for name, value in zip(robot.actuated_joint_names, q):
            self.data.qpos[self.address[name]] = self.model.qpos0[self.address[name]] + value
        mujoco.mj_kinematics(self.model, self.data)
        root = np.eye(4) if robot.root_link == "world" else self._body_pose(robot.root_link)
        return np.linalg.inv(root) @ self._body_pose(link)


def pose_error(a, b) -> tuple[float, float]:
    """(position m, rotation rad) between two 4x4 poses."""
    angle = np.arccos(np.clip((np.trace(a[:3, :3].T @ b[:3, :3]) - 1) / 2, -1, 1))
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), float(angle)
