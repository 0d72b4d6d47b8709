"""Small NumPy rotation helpers for the bpy-free, jax-free paths (quaternions are w, x, y, z).

The JAX solver uses jaxlie; these exist so FK, the NumPy solver and the CLI work without JAX.
"""

from __future__ import annotations

import numpy as np


def axis_angle_matrices(axis: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices about one unit axis for a batch of angles: (B,) -> (B, 3, 3)."""
    angles = np.asarray(angles, dtype=float)
    x, y, z = axis
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    s = np.sin(angles)[..., None, None]
    c = np.cos(angles)[..., None, None]
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


def matrix_to_quaternion(matrix: np.ndarray) -> np.ndarray:
    """(..., 3, 3) or (..., 4, 4) rotation -> (..., 4) unit quaternion (w, x, y, z), w >= 0."""
    m = np.asarray(matrix, dtype=float)[..., :3, :3]
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    candidates = np.stack(
        [
            np.stack([1 + trace, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
            np.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2], m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            np.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], m[..., 1, 2] + m[..., 2, 1]], -1),
            np.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], 1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1),
        ],
        axis=-2,
    )
    diagonal = np.stack([trace, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1)
    best = np.argmax(diagonal, axis=-1)
    q = np.take_along_axis(candidates, best[..., None, None], axis=-2)[..., 0, :]
    q = normalised(q)
    return np.where(q[..., :1] < 0, -q, q)


def normalised(quaternion: np.ndarray) -> np.ndarray:
    """(..., 4) quaternions scaled to unit length, scaling by the largest component first so
    (1e200, 1e200, 0, 0) does not overflow the norm to inf (and come out as zeros). A zero or
    non-finite quaternion comes out NaN, for the caller's finite check to refuse."""
    q = np.asarray(quaternion, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        biggest = np.max(np.abs(q), axis=-1, keepdims=True)
        scaled = q / biggest
        return scaled / np.linalg.norm(scaled, axis=-1, keepdims=True)


def quaternion_to_matrix(quaternion: np.ndarray) -> np.ndarray:
    """(..., 4) quaternion (w, x, y, z), normalised here -> (..., 3, 3)."""
    q = normalised(np.asarray(quaternion, dtype=float))
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def rotation_log(matrix: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation -> (..., 3) rotation vector (axis * angle), robust near 0 and pi."""
    q = matrix_to_quaternion(matrix)
    vector = q[..., 1:]
    sin_half = np.linalg.norm(vector, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, q[..., :1])
    scale = np.where(sin_half > 1e-12, angle / np.maximum(sin_half, 1e-300), 2.0)
    return vector * scale


def rotation_angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle in radians of the rotation taking `a` to `b` ((..., 3, 3) each)."""
    relative = np.swapaxes(np.asarray(a)[..., :3, :3], -1, -2) @ np.asarray(b)[..., :3, :3]
    return np.linalg.norm(rotation_log(relative), axis=-1)


def pose_matrix(position, quaternion_wxyz) -> np.ndarray:
    """4x4 from a position and a (w, x, y, z) quaternion."""
    matrix = np.eye(4)
    matrix[:3, :3] = quaternion_to_matrix(np.asarray(quaternion_wxyz, dtype=float))
    matrix[:3, 3] = np.asarray(position, dtype=float)
    return matrix


def wrap_angle(angle):
    """Angle(s) in radians wrapped into [-pi, pi)."""
    return (np.asarray(angle, dtype=float) + np.pi) % (2 * np.pi) - np.pi


def same_hemisphere(quaternions: np.ndarray) -> np.ndarray:
    """(N, 4) quaternions with each flipped onto its predecessor's hemisphere, so keys made from
    them blend the short way round (q and -q are the same rotation)."""
    q = np.array(quaternions, dtype=float)
    for i in range(1, len(q)):
        if np.dot(q[i], q[i - 1]) < 0:
            q[i] = -q[i]
    return q


def pose_matrices(positions, quaternions_wxyz) -> np.ndarray:
    """(N, 4, 4) from (N, 3) positions and (N, 4) (w, x, y, z) quaternions."""
    positions = np.asarray(positions, dtype=float)
    matrices = np.tile(np.eye(4), (len(positions), 1, 1))
    matrices[:, :3, :3] = quaternion_to_matrix(np.asarray(quaternions_wxyz, dtype=float))
    matrices[:, :3, 3] = positions
    return matrices
