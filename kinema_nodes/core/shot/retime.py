"""Retime: the fastest timing of a baked path that the robot can execute.

An explicit action, never the default (the check only flags). The path is the baked joint
values, frame after frame; the result moves along the same path — through every baked
configuration, in the same order — with a new timing: the time-optimal one under the velocity
and acceleration limits (after the safety margin), found by TOPP-RA (`toppra`, the field's
standard), starting and ending at rest.

How:
- the path parameter is the distance travelled in joint space, so frames where nothing moves
  (holds) take no path length and no time: a robot does not need to stand still to follow the
  path;
- the path is split where the shot holds still or turns back sharply (the robot stops there, as
  it must to reverse), and a cubic spline through the baked configurations (toppra's
  `SplineInterpolator`) is each piece;
- TOPP-RA gives the path speed at every baked configuration; between them the path
  acceleration is constant, which fixes the time of each stretch;
- the result is sampled at the scene's frame rate. The duration is rounded up to whole frames by
  slowing everything uniformly (which only lowers velocities and accelerations), and the samples
  are checked with `core.shot.limits` — the same finite differences the check uses. TOPP-RA
  enforces its limits at the baked configurations only; if the samples between them are over,
  the timing is stretched uniformly by what is needed and checked again.

toppra is imported lazily: without it the check still works and retime says how to install it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from ..errors import KinemaError
from .limits import Limits, check_limits

#: Joint-space steps shorter than this (rad or m) are holds, not path.
MIN_STEP = 1e-9
#: Stand-in for "no limit" in TOPP-RA's constraints (it wants finite bounds).
UNLIMITED = 1e9
#: Times the timing may be stretched after sampling before giving up.
MAX_STRETCHES = 8
#: Consecutive steps turning by more than this (cosine of 60 degrees) make a cusp: the path is
#: split there and the robot stops, as it must to reverse.
SHARP_TURN_COSINE = 0.5


def toppra_available() -> tuple[bool, str]:
    try:
        import toppra  # noqa: F401
    except ImportError as exc:
        return False, f"retiming needs toppra: pip install toppra ({exc})"
    return True, ""


@dataclass(frozen=True)
class RetimeResult:
    """The retimed shot, sampled at `fps`: joints (N, n), and for each new frame the (fractional)
    frame of the original shot it shows, so other animation can follow the same time warp."""

    joints: np.ndarray
    source_frames: np.ndarray  # (N,) frame numbers of the original shot, fractional
    fps: float
    duration_s: float  # of the retimed shot, (N - 1) / fps
    optimal_duration_s: float  # TOPP-RA's, before rounding up to whole frames
    original_duration_s: float
    stretch: float  # uniform slow-down applied after sampling (1.0: none needed)

    @property
    def frame_count(self) -> int:
        return int(self.joints.shape[0])

    def to_dict(self) -> dict:
        return {"frames": self.frame_count, "fps": self.fps, "duration_s": self.duration_s,
                "shortest_executable_s": self.optimal_duration_s, "original_duration_s": self.original_duration_s,
                "stretch": self.stretch}


def _path_parameter(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chord length at each kept waypoint, and the indices of the kept waypoints."""
    steps = np.linalg.norm(np.diff(q, axis=0), axis=1)
    moving = steps > MIN_STEP
    keep = np.concatenate([[0], np.flatnonzero(moving) + 1])
    s = np.concatenate([[0.0], np.cumsum(steps[moving])])
    return s, keep


def _times(s: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Time at each grid point for constant path acceleration on each stretch."""
    ds = np.diff(s)
    mean_speed = sd[:-1] + sd[1:]
    if np.any(mean_speed <= 0):
        raise KinemaError("the path cannot be retimed: the fastest timing stops part-way (a limit of zero?)")
    return np.concatenate([[0.0], np.cumsum(2.0 * ds / mean_speed)])


def _sample(t_grid, s, sd, times) -> np.ndarray:
    """The path parameter at `times` (constant path acceleration between grid points)."""
    i = np.clip(np.searchsorted(t_grid, times, side="right") - 1, 0, len(s) - 2)
    tau = times - t_grid[i]
    ds = s[i + 1] - s[i]
    sdd = (sd[i + 1] ** 2 - sd[i] ** 2) / (2.0 * ds)
    return np.clip(s[i] + sd[i] * tau + 0.5 * sdd * tau ** 2, s[i], s[i + 1])


def _source_frames(path_s: np.ndarray, s: np.ndarray, keep: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """The original (fractional) frame at each path parameter. Each stretch of the path is one
    moving step of the shot, from frame keep[m+1] - 1 to keep[m+1]; a hold before it takes no path."""
    m = np.clip(np.searchsorted(s, path_s, side="right") - 1, 0, len(s) - 2)
    fraction = (path_s - s[m]) / (s[m + 1] - s[m])
    end = keep[m + 1]
    return frames[end - 1] + fraction * (frames[end] - frames[end - 1])


def _pieces(q: np.ndarray, s: np.ndarray, keep: np.ndarray) -> list[np.ndarray]:
    """Split the kept waypoints where the shot stops (a hold) or turns back sharply (a cusp):
    the robot has to stop there anyway, and a spline across such a point would leave the path."""
    cuts = {0, len(keep) - 1}
    held = np.flatnonzero(keep[1:] - 1 != keep[:-1])  # frames between keep[m] and keep[m+1] - 1 hold still
    cuts.update(int(m) for m in held)
    steps = np.diff(q[keep], axis=0)
    lengths = np.linalg.norm(steps, axis=1)
    cosine = np.einsum("ij,ij->i", steps[:-1], steps[1:]) / (lengths[:-1] * lengths[1:])
    cuts.update(int(m) + 1 for m in np.flatnonzero(cosine < SHARP_TURN_COSINE))
    cuts = sorted(cuts)
    return [np.arange(a, b + 1) for a, b in zip(cuts[:-1], cuts[1:])]


def retime(frames: np.ndarray, joints: np.ndarray, limits: Limits, fps: float) -> RetimeResult:
    """The time-optimal timing of the path `joints` (F, n) under `limits`' velocity and
    acceleration (after its margin), sampled at `fps`. Raises `KinemaError` when it cannot."""
    ok, reason = toppra_available()
    if not ok:
        raise KinemaError(reason)
    import toppra
    import toppra.algorithm as algorithm
    import toppra.constraint as constraint

    logging.getLogger("toppra").setLevel(logging.WARNING)
    frames = np.asarray(frames, dtype=float)
    q = np.asarray(joints, dtype=float)
    if q.ndim != 2 or q.shape[0] != len(frames) or q.shape[1] != len(limits.joint_names):
        raise KinemaError(f"joint values of shape {q.shape} do not match {len(frames)} frames of {len(limits.joint_names)} joints")
    if not np.all(np.isfinite(q)):
        raise KinemaError("the baked joint values contain NaN or inf")
    velocity = limits.effective("velocity")
    acceleration = limits.effective("acceleration")
    if not np.isfinite(acceleration).any():
        raise KinemaError("retiming needs acceleration limits: set them in the rig's limits (or --max-acc)")
    s, keep = _path_parameter(q)
    if len(keep) < 2:
        raise KinemaError("the baked path does not move; there is nothing to retime")
    v = np.where(np.isfinite(velocity), velocity, UNLIMITED)
    a = np.where(np.isfinite(acceleration), acceleration, UNLIMITED)
    constraints = [constraint.JointVelocityConstraint(np.stack([-v, v], axis=1)),
                   constraint.JointAccelerationConstraint(np.stack([-a, a], axis=1))]
    pieces = []  # (kept positions, spline, path speeds, times from the piece's start)
    for positions in _pieces(q, s, keep):
        piece_s = s[positions]
        spline = toppra.SplineInterpolator(piece_s, q[keep[positions]])
        problem = algorithm.TOPPRA(constraints, spline, gridpoints=piece_s, solver_wrapper="seidel")
        _, sd, _ = problem.compute_parameterization(0.0, 0.0)
        if sd is None or np.any(~np.isfinite(sd)):
            raise KinemaError("TOPP-RA found no executable timing for this path under these limits")
        sd = np.maximum(np.asarray(sd, dtype=float), 0.0)
        pieces.append((positions, spline, sd, _times(piece_s, sd)))
    starts = np.concatenate([[0.0], np.cumsum([piece[3][-1] for piece in pieces])])
    optimal = float(starts[-1])

    def sample(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty((len(times), q.shape[1]))
        path_s = np.empty(len(times))
        which = np.clip(np.searchsorted(starts, times, side="right") - 1, 0, len(pieces) - 1)
        for p, (positions, spline, sd, t_grid) in enumerate(pieces):
            rows = np.flatnonzero(which == p)
            if len(rows):
                local = _sample(t_grid, s[positions], sd, times[rows] - starts[p])
                path_s[rows] = local
                out[rows] = np.asarray(spline(local), dtype=float).reshape(len(rows), -1)
        return out, path_s

    stretch = 1.0
    check = Limits(limits.joint_names, velocity, acceleration, np.full(len(velocity), np.inf))
    for _ in range(MAX_STRETCHES):
        count = max(2, int(math.ceil(optimal * stretch * fps - 1e-9)) + 1)
        new_duration = (count - 1) / fps
        sampled, path_s = sample(np.linspace(0.0, optimal, count))  # the whole path, spread over whole frames
        sampled[0], sampled[-1] = q[keep[0]], q[keep[-1]]
        report = check_limits(np.arange(count), sampled, check, fps)
        if not report.violations["velocity"] and not report.violations["acceleration"]:
            return RetimeResult(sampled, _source_frames(path_s, s, keep, frames), float(fps), new_duration, optimal,
                                float((frames[-1] - frames[0]) / fps), new_duration / optimal)
        ratio = max(float(np.max(report.worst["velocity"] / velocity, initial=0.0)),
                    math.sqrt(float(np.max(report.worst["acceleration"] / acceleration, initial=0.0))))
        stretch = max(stretch * 1.0005, new_duration / optimal * ratio * 1.0005)
    raise KinemaError("the retimed samples stay over the limits after stretching; the path may be too sharp "
                      "for this frame rate")
