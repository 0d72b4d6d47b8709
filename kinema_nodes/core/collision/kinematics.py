"""Forward kinematics for the distance pairs: every link's pose and each movable joint's world axis
and origin for one configuration, so the gradient of any distance is two array products."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..model.robot import RobotModel
    from .collision_model import CollisionModel


class CollisionKinematics:
    """FK of every link for one configuration, and each movable joint's world axis and origin,
    so the Jacobian of any point on any link is two array products."""

    def __init__(self, robot: RobotModel, model: CollisionModel):
        self.robot = robot
        index = {name: i for i, name in enumerate(robot.links)}
        self.link_index = index
        self.steps = []
        movable = []
        for joint in robot.joints:
            kind = 0
            if joint.is_movable:
                kind = 2 if joint.type == "prismatic" else 1
            source = multiplier = offset = 0
            if kind:
                if joint.mimic is not None:
                    source, multiplier, offset = robot.joint_index(joint.mimic.joint), joint.mimic.multiplier, joint.mimic.offset
                else:
                    source, multiplier, offset = robot.joint_index(joint.name), 1.0, 0.0
                movable.append((joint, source, multiplier))
            self.steps.append((index[joint.parent], index[joint.child], np.asarray(joint.origin, dtype=float),
                               np.asarray(joint.axis, dtype=float), kind, source, multiplier, offset, len(movable) - 1))
        self.movable_count = len(movable)
        self.sources = np.array([m[1] for m in movable], dtype=int)
        self.multipliers = np.array([m[2] for m in movable], dtype=float)
        self.prismatic = np.array([m[0].type == "prismatic" for m in movable], dtype=bool)
        # ancestor[l, m]: joint m moves link l
        ancestor = np.zeros((len(robot.links), len(movable)), dtype=bool)
        for parent, child, _, _, kind, _, _, _, m in self.steps:
            ancestor[child] = ancestor[parent]
            if kind:
                ancestor[child, m] = True
        self.ancestor = ancestor
        self.capsule_link = np.array([index[name] for name in model.links], dtype=np.int64)
        self.steps_i = np.array([(parent, child, kind, source, max(m, 0)) for parent, child, _, _, kind, source, _, _, m in self.steps],
                                dtype=np.int64).reshape(-1, 5)
        self.steps_f = np.array([np.concatenate([origin.ravel(), axis, [multiplier, offset]])
                                 for _, _, origin, axis, _, _, multiplier, offset, _ in self.steps], dtype=float).reshape(-1, 21)
        self.root = index[robot.root_link]
        self.layouts: dict = {}
        self.scatter = np.zeros((len(movable), robot.dof))
        for m, (_, source, multiplier) in enumerate(movable):
            self.scatter[m, source] += multiplier

    def evaluate(self, q):
        poses = np.empty((len(self.robot.links), 4, 4))
        poses[self.link_index[self.robot.root_link]] = np.eye(4)
        origins = np.empty((self.movable_count, 3))
        axes = np.empty((self.movable_count, 3))
        for parent, child, origin, axis, kind, source, multiplier, offset, m in self.steps:
            pose = poses[parent] @ origin
            if kind:
                origins[m] = pose[:3, 3]
                axes[m] = pose[:3, :3] @ axis
                value = q[source] * multiplier + offset
                if kind == 1:
                    x, y, z = axis
                    s, c = math.sin(value), math.cos(value)
                    k = 1.0 - c
                    rot = np.array([[c + x * x * k, x * y * k - z * s, x * z * k + y * s],
                                    [y * x * k + z * s, c + y * y * k, y * z * k - x * s],
                                    [z * x * k - y * s, z * y * k + x * s, c + z * z * k]])
                    pose = pose.copy()
                    pose[:3, :3] = pose[:3, :3] @ rot
                else:
                    pose = pose.copy()
                    pose[:3, 3] += pose[:3, :3] @ (axis * value)
            poses[child] = pose
        return poses, origins, axes

    def gradient(self, capsule_index, points, normals, origins, axes):
        """d(distance)/dq (P, dof) for points (P, 3) on the capsules' links moved along `normals`."""
        lever = points[:, None, :] - origins[None]  # (P, M, 3)
        rev = np.einsum("pmk,pk->pm", np.cross(axes[None], lever), normals)
        pri = normals @ axes.T
        term = np.where(self.prismatic[None], pri, rev) * self.ancestor[self.capsule_link[capsule_index]]
        return term @ self.scatter


def world_capsules(robot: RobotModel, model: CollisionModel, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Capsule end points in the root frame for configurations q (B, n): (B, C, 3) twice."""
    from ..model.kinematics import link_poses

    poses = link_poses(robot, np.atleast_2d(q))
    index = np.array([robot.links.index(name) for name in model.links], dtype=int)
    frames = poses[:, index]
    a = np.einsum("bcij,cj->bci", frames[..., :3, :3], model.a) + frames[..., :3, 3]
    b = np.einsum("bcij,cj->bci", frames[..., :3, :3], model.b) + frames[..., :3, 3]
    return a, b
