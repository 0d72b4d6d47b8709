"""Forward kinematics and the geometric Jacobian in NumPy, batched over configurations.

Poses are 4x4 matrices in the root link's frame. A configuration is a vector of the robot's
actuated joints (`RobotModel.actuated_joint_names`); mimic joints follow their source.
Every function takes one configuration (n,) or a batch (B, n) and returns the same leading
shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import KinemaError
from .robot import Joint, RobotModel
from .rotations import axis_angle_matrices

FIXED, REVOLUTE, PRISMATIC = 0, 1, 2


@dataclass(frozen=True)
class ChainStep:
    """One joint of a chain, in the form FK needs."""

    name: str
    kind: int
    origin: np.ndarray
    axis: np.ndarray
    source: int  # index into the configuration, -1 for fixed joints
    multiplier: float
    offset: float


def _step(robot: RobotModel, joint: Joint) -> ChainStep:
    if not joint.is_movable:
        return ChainStep(joint.name, FIXED, joint.origin, joint.axis, -1, 0.0, 0.0)
    kind = PRISMATIC if joint.type == "prismatic" else REVOLUTE
    if joint.mimic is not None:
        return ChainStep(joint.name, kind, joint.origin, joint.axis, robot.joint_index(joint.mimic.joint), joint.mimic.multiplier, joint.mimic.offset)
    return ChainStep(joint.name, kind, joint.origin, joint.axis, robot.joint_index(joint.name), 1.0, 0.0)


def chain_steps(robot: RobotModel, link: str) -> list[ChainStep]:
    """The joints from the root to `link`, cached on the robot."""
    cache = robot.cache("chain_steps")
    if link not in cache:
        cache[link] = [_step(robot, joint) for joint in robot.chain(link)]
    return cache[link]


def _batch(q: np.ndarray) -> tuple[np.ndarray, bool]:
    q = np.asarray(q, dtype=float)
    single = q.ndim == 1
    return (q[None] if single else q), single


def _motion(step: ChainStep, q: np.ndarray) -> np.ndarray:
    """The joint's own motion for a batch: (B, 4, 4)."""
    value = q[:, step.source] * step.multiplier + step.offset
    motion = np.tile(np.eye(4), (q.shape[0], 1, 1))
    if step.kind == REVOLUTE:
        motion[:, :3, :3] = axis_angle_matrices(step.axis, value)
    else:
        motion[:, :3, 3] = value[:, None] * step.axis
    return motion


def _walk(steps: list[ChainStep], q: np.ndarray, keep_joint_frames: bool = False):
    """Compose a chain. Returns the tip pose and, on request, each movable joint's frame."""
    pose = np.tile(np.eye(4), (q.shape[0], 1, 1))
    joint_frames = []
    for step in steps:
        pose = pose @ step.origin
        if step.kind != FIXED:
            if keep_joint_frames:
                joint_frames.append((step, pose))
            pose = pose @ _motion(step, q)
    return pose, joint_frames


def link_pose(robot: RobotModel, q: np.ndarray, link: str) -> np.ndarray:
    """Pose of one link: (n,) -> (4, 4), (B, n) -> (B, 4, 4)."""
    qb, single = _batch(q)
    with np.errstate(over="ignore", invalid="ignore"):
        pose, _ = _walk(chain_steps(robot, link), qb)
    _check_finite(robot, qb, pose, link)
    return pose[0] if single else pose


def _check_finite(robot: RobotModel, qb: np.ndarray, poses: np.ndarray, link: str | None = None) -> None:
    """Refuse joint values whose forward kinematics overflow (a huge prismatic travel, a mimic
    multiplier that carries a value past float64): one line, never an inf pose downstream."""
    if np.all(np.isfinite(poses)):
        return
    names = [robot.actuated_joint_names[i] for i in np.flatnonzero(np.any(np.abs(qb) > 1e6, axis=0))]
    where = f" of link '{link}'" if link else ""
    joints = f" (joint values {', '.join(names)} beyond 1e6)" if names else ""
    raise KinemaError(f"'{robot.name}': the pose{where} overflows: these joint values put it beyond any finite "
                      f"distance{joints}")


def link_poses(robot: RobotModel, q: np.ndarray) -> np.ndarray:
    """Poses of all links, in `robot.links` order: (n,) -> (L, 4, 4), (B, n) -> (B, L, 4, 4)."""
    qb, single = _batch(q)
    index = {name: i for i, name in enumerate(robot.links)}
    poses = np.empty((qb.shape[0], len(robot.links), 4, 4))
    poses[:, index[robot.root_link]] = np.eye(4)
    with np.errstate(over="ignore", invalid="ignore"):
        for joint in robot.joints:  # tree order: the parent's pose is always ready
            step = _step(robot, joint)
            pose = poses[:, index[joint.parent]] @ step.origin
            if step.kind != FIXED:
                pose = pose @ _motion(step, qb)
            poses[:, index[joint.child]] = pose
    _check_finite(robot, qb, poses)
    return poses[0] if single else poses


def jacobian(robot: RobotModel, q: np.ndarray, link: str) -> np.ndarray:
    """Geometric Jacobian of `link`'s origin in the root frame: (n,) -> (6, n), (B, n) -> (B, 6, n).

    Rows 0-2: linear velocity of the link origin; rows 3-5: angular velocity. Columns follow
    the configuration vector; joints outside the chain have zero columns, mimic joints add
    `multiplier` times their column to their source joint.
    """
    qb, single = _batch(q)
    tip, frames = _walk(chain_steps(robot, link), qb, keep_joint_frames=True)
    jac = np.zeros((qb.shape[0], 6, robot.dof))
    tip_position = tip[:, :3, 3]
    for step, frame in frames:
        axis_world = frame[:, :3, :3] @ step.axis
        if step.kind == REVOLUTE:
            jac[:, :3, step.source] += step.multiplier * np.cross(axis_world, tip_position - frame[:, :3, 3])
            jac[:, 3:, step.source] += step.multiplier * axis_world
        else:
            jac[:, :3, step.source] += step.multiplier * axis_world
    return jac[0] if single else jac
