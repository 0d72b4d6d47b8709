"""A camera that frames a cloud of points, as numbers: the pose and clip range that fit the
points in the picture, seen from a given direction. blender/render.py copies the answer into
Blender's camera; the arithmetic stays here, testable without Blender."""

from __future__ import annotations

import numpy as np


def view_tangents(sensor_width: float, lens: float, width: int, height: int, margin: float) -> tuple[float, float]:
    """tan of half the horizontal and vertical field of view (AUTO sensor fit: the sensor spans
    the longer side), shrunk by `margin` so the points keep a border."""
    tan_long = sensor_width / (2.0 * lens)
    tan_x = tan_long * (1.0 if width >= height else width / height) * margin
    tan_y = tan_long * (height / width if width >= height else 1.0) * margin
    return tan_x, tan_y


def frame_points(points: np.ndarray, view_from, tan_x: float, tan_y: float) -> tuple[np.ndarray, float, float]:
    """(4x4 camera matrix, clip start, clip end) for a camera looking from `view_from` (a direction;
    z is up) that is as close to `points` (N, 3) as fits them in the frame, centred."""
    back = np.asarray(view_from, dtype=float)
    back /= np.linalg.norm(back)
    right = np.cross((0.0, 0.0, 1.0), back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    # Aim at the centre, then walk the camera sideways and back until the picture is centred and full.
    position = points.mean(axis=0) + 3.0 * float(np.ptp(points, axis=0).max()) * back
    for _ in range(8):
        offset = points - position
        depth = -(offset @ back)
        x, y = (offset @ right) / depth, (offset @ up) / depth
        mid_depth = float(np.median(depth))
        position = position + right * 0.5 * (x.max() + x.min()) * mid_depth + up * 0.5 * (y.max() + y.min()) * mid_depth
        zoom = max((x.max() - x.min()) / (2 * tan_x), (y.max() - y.min()) / (2 * tan_y))
        position = position - back * (1.0 - zoom) * mid_depth
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = np.column_stack([right, up, back]), position
    extent = float(np.ptp(points, axis=0).max())
    distance = float(np.median(-(points - position) @ back))
    return matrix, max(1e-3, 0.01 * distance), 10.0 * (distance + extent)
