"""Where a rig's bones go, as numbers: head, tail and roll from a link's pose, the bones' length
from the robot's size, and a bone's local poses for given armature-space poses.

The Blender side (blender/build.py, cli/bake.py) only copies these into edit bones and F-curves,
so the arithmetic is tested without Blender and the same everywhere.
"""

from __future__ import annotations

import math

import numpy as np


def bone_head_tail_roll(matrix: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Head, tail and roll that make Blender's bone matrix equal `matrix` as closely as float32 allows.

    Blender rebuilds a bone's rotation from its direction (tail - head, in float32) and roll
    (`vec_roll_to_mat3_normalized`); `EditBone.matrix = ...` loses up to 1e-5 near the -Y
    direction, so the roll is solved here in double against Blender's own construction.
    """
    head = matrix[:3, 3].astype(np.float32).astype(float)
    tail = (matrix[:3, 3] + length * matrix[:3, 1]).astype(np.float32).astype(float)
    nor = tail - head
    nor /= np.linalg.norm(nor)
    x, y, z = nor
    theta, theta_alt = 1.0 + y, x * x + z * z
    if theta > 6.1e-3 or theta_alt > 2.5e-4**2:
        if theta <= 6.1e-3:
            theta = theta_alt * 0.5 + theta_alt * theta_alt * 0.125
        bone_x = np.array([1.0 - x * x / theta, -x, -x * z / theta])
    else:
        bone_x = np.array([-1.0, 0.0, 0.0])
    target_x = matrix[:3, 0]
    roll = math.atan2(float(np.dot(np.cross(bone_x, target_x), nor)), float(np.dot(bone_x, target_x)))
    return head, tail, roll


def default_bone_length(rest_poses: np.ndarray) -> float:
    """Bones long enough to keep float32 rest rotations within 1e-7, short enough to read."""
    extent = float(np.ptp(rest_poses[:, :3, 3], axis=0).max()) if len(rest_poses) > 1 else 1.0
    return float(np.clip(0.1 * extent, 0.05, 0.2))


def bone_channel(axis, multiplier: float = 1.0) -> tuple[int | None, float]:
    """How a joint about (or along) unit `axis` is keyed on its bone: (k, scale) when the axis is
    exactly +-e_k (the bone's own k-th Euler angle or location, scaled by the axis sign and the
    mimic multiplier), else (None, multiplier) for a general axis (an angle or a slide of its own)."""
    axis = np.asarray(axis, dtype=float)
    k = int(np.argmax(np.abs(axis)))
    if np.all(np.delete(axis, k) == 0.0):
        return k, float(np.sign(axis[k]) * multiplier)
    return None, float(multiplier)


def bone_local_poses(rest: np.ndarray, poses: np.ndarray, parent_pose: np.ndarray | None = None,
                     parent_rest: np.ndarray | None = None) -> np.ndarray:
    """The pose-bone (basis) matrices that put a bone at armature-space `poses` (N, 4, 4).

    `rest` is the bone's rest matrix in armature space; with a parent, the bone sits where the
    parent's current pose carries its rest (`parent_pose @ inv(parent_rest) @ rest`)."""
    if parent_pose is not None:
        rest = parent_pose @ np.linalg.inv(parent_rest) @ rest  # where the bone sits with an identity basis
    return np.linalg.inv(rest) @ poses
