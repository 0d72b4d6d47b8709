"""A link's pose by the robot file's own reader, not ours: yourdfpy for a URDF, MuJoCo's
mj_kinematics for an MJCF model, and for a xacro file yourdfpy on xacrodoc's expansion (an
implementation of xacro other than the one the add-on runs). Tests in every folder judge answers with it (tests/ is on the
import path through its conftest.py)."""

from __future__ import annotations

import numpy as np


def mujoco_world_pose(model, data, robot, q, link) -> np.ndarray:
    """`link`'s world pose (a body, else a site) in a compiled MuJoCo model with our configuration
    `q` in qpos (each actuated joint's value added to its qpos0)."""
    import mujoco

    data.qpos[:] = model.qpos0
    for name, value in zip(robot.actuated_joint_names, q):
        address = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]
        data.qpos[address] = model.qpos0[address] + value
    mujoco.mj_kinematics(model, data)
    return _world_pose(model, data, link)


def _world_pose(model, data, link) -> np.ndarray:
    import mujoco

    pose = np.eye(4)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link)
    if body >= 0:
        rotation = np.empty(9)
        mujoco.mju_quat2Mat(rotation, data.xquat[body])
        pose[:3, :3], pose[:3, 3] = rotation.reshape(3, 3), data.xpos[body]
    else:
        site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, link)
        pose[:3, :3], pose[:3, 3] = data.site_xmat[site].reshape(3, 3), data.site_xpos[site]
    return pose


def shell_inertia_model(path):
    """MuJoCo's own compile with every mesh's inertia from its surface (its advice for thin
    meshes; the kinematics are the same)."""
    import mujoco

    spec = mujoco.MjSpec.from_file(str(path))
    for mesh in spec.meshes:
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
    return spec.compile()


def mujoco_pose(path, robot, q, link) -> np.ndarray:
    """`link`'s world pose by MuJoCo's FK of the model at `path` (compiled for this call)."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(path))
    return mujoco_world_pose(model, mujoco.MjData(model), robot, q, link)


class IndependentFK:
    """A link's pose relative to the robot's root, by yourdfpy (URDF) or MuJoCo (MJCF)."""

    def __init__(self, robot, packages: str = ""):
        """`packages`: the folder the import dialog was given as the package folder, if any; each
        folder in it is the package of its name for xacrodoc too (rtb-data's QUT Frankie includes
        `$(find qut_frankie_description)`, a folder with no package.xml)."""
        self.robot = robot
        path = str(robot.path)
        self.mjcf = path.endswith(".xml")
        if self.mjcf:
            import mujoco

            try:
                self.model = mujoco.MjModel.from_xml_path(path)
            except ValueError as error:  # robosuite 1.5.1's Baxter and Sawyer: "mesh volume is too small"
                if "mesh volume is too small" not in str(error):
                    raise
                self.model = shell_inertia_model(path)
            self.data = mujoco.MjData(self.model)
        else:
            import yourdfpy

            options = dict(load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)
            if path.endswith(".xacro"):
                import io

                import xacrodoc

                if packages:
                    from pathlib import Path

                    xacrodoc.packages.update_package_cache(
                        {folder.name: str(folder) for folder in Path(packages).iterdir() if folder.is_dir()})
                text = xacrodoc.XacroDoc.from_file(path, resolve_packages=False).to_urdf_string()
                self.urdf = yourdfpy.URDF.load(io.StringIO(text), **options)
            else:
                self.urdf = yourdfpy.URDF.load(path, **options)

    def pose(self, q, link) -> np.ndarray:
        robot = self.robot
        if not self.mjcf:
            self.urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
            return np.array(self.urdf.get_transform(link, self.urdf.base_link))
        tip = mujoco_world_pose(self.model, self.data, robot, q, link)
        root = np.eye(4) if robot.root_link == "world" else _world_pose(self.model, self.data, robot.root_link)
        return np.linalg.inv(root) @ tip


def pose_error(a, b) -> tuple[float, float]:
    """(position m, rotation rad) between two 4x4 poses."""
    angle = np.arccos(np.clip((np.trace(a[:3, :3].T @ b[:3, :3]) - 1) / 2, -1, 1))
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), float(angle)
