"""Velocity, acceleration and jerk of a baked shot, checked against limits a robot can trust.

The limits come from three places: velocity from the URDF's ``<limit velocity>``; acceleration
and jerk from the rig's settings (one value for every joint, or per joint), because URDFs do not
carry them; and a safety margin in percent that scales every limit down (payload, wear, a
controller's own headroom: a program that passes at 100 % can still fail on the robot).

The derivatives are the motion the robot plays: the baked keys at the scene's frame rate,
with straight segments between frames (the bake keys LINEAR). So

- velocity of frame k is the speed of the step into it, ``(q[k] - q[k-1]) * fps``;
- acceleration of frame k is the change of speed at it, ``(q[k+1] - 2 q[k] + q[k-1]) * fps**2``;
- jerk of frame k is the change of acceleration into it, ``(a[k] - a[k-1]) * fps``.

Each is flagged only where its stencil lies inside the shot. At the ends a frame takes the
value of the nearest frame whose stencil fits (the same difference, one-sided), so the first and
last frames are neither dropped nor given a made-up spike by assuming the robot stands still
outside the shot. One frame moved too far shows as a velocity violation on that joint at that
frame and nowhere else.

The default only flags; nothing here ever changes the motion (`core.shot.retime` does, on request).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import KinemaError

if TYPE_CHECKING:
    from ..model.robot import RobotModel

#: The three kinds of limit, in the order reports list them.
KINDS = ("velocity", "acceleration", "jerk")


@dataclass(frozen=True, eq=False)
class Limits:
    """Per-joint limits before the margin (inf: no limit). Units rad/s, rad/s², rad/s³ for
    revolute joints and m/s, m/s², m/s³ for prismatic ones."""

    joint_names: tuple[str, ...]
    velocity: np.ndarray
    acceleration: np.ndarray
    jerk: np.ndarray
    margin_percent: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        for kind in KINDS:
            values = np.asarray(getattr(self, kind), dtype=float)
            if values.shape != (n,):
                raise KinemaError(f"{kind} limits need one value per joint ({n}), got shape {values.shape}")
            if np.any(np.isnan(values)) or np.any(values <= 0):
                raise KinemaError(f"{kind} limits must be positive numbers (inf for none)")
            object.__setattr__(self, kind, values)
        margin = float(self.margin_percent)
        if not (np.isfinite(margin) and 0.0 <= margin < 100.0):
            raise KinemaError(f"the safety margin must be at least 0 % and below 100 %, got {self.margin_percent}")
        object.__setattr__(self, "margin_percent", margin)

    @property
    def scale(self) -> float:
        """What every limit is multiplied by: a 10 % margin leaves 90 % of each."""
        return 1.0 - self.margin_percent / 100.0

    def effective(self, kind: str) -> np.ndarray:
        """The limit the check uses: the set value scaled by the margin."""
        return getattr(self, kind) * self.scale

    def checked(self, kind: str) -> bool:
        """Whether any joint has a limit of this kind (an unset limit is not checked)."""
        return bool(np.isfinite(getattr(self, kind)).any())

    def to_dict(self) -> dict:
        """JSON-ready: per kind, the effective limit per joint (None where there is none)."""
        out: dict = {"margin_percent": self.margin_percent}
        for kind in KINDS:
            values = self.effective(kind)
            out[kind] = {"checked": self.checked(kind),
                         "per_joint": {n: (float(v) if np.isfinite(v) else None) for n, v in zip(self.joint_names, values)}}
        return out


def _per_joint(names: Sequence[str], everyone: float | None, per_joint: Mapping[str, float] | None, what: str) -> np.ndarray:
    values = np.full(len(names), np.inf if everyone is None or everyone <= 0 else float(everyone))
    index = {n: i for i, n in enumerate(names)}
    for name, value in (per_joint or {}).items():
        if name not in index:
            raise KinemaError(f"{what} limit for unknown joint '{name}'; joints: {', '.join(names)}")
        value = float(value)
        if np.isnan(value):
            raise KinemaError(f"{what} limit for joint '{name}' is not a number")
        values[index[name]] = np.inf if value <= 0 else value
    return values


def limits_for(robot: RobotModel, *, max_acceleration: float | None = None, max_jerk: float | None = None,
               acceleration: Mapping[str, float] | None = None, jerk: Mapping[str, float] | None = None,
               velocity_scale: float = 1.0, margin_percent: float = 0.0) -> Limits:
    """The limits of `robot`'s actuated joints: velocity from its URDF (times `velocity_scale`),
    acceleration and jerk for every joint (`max_*`) with per-joint values overriding them
    (a value of 0 or None means no limit)."""
    names = tuple(robot.actuated_joint_names)
    for what, value in (("--max-acc", max_acceleration), ("--max-jerk", max_jerk)):
        if value is not None and not np.isfinite(value):
            raise KinemaError(f"{what} must be a finite number, got {value}")
    if not (np.isfinite(velocity_scale) and velocity_scale > 0):
        raise KinemaError(f"the velocity scale must be a positive number, got {velocity_scale}")
    velocity = np.asarray(robot.velocity_limits, dtype=float).copy()
    velocity = np.where(velocity > 0, velocity, np.inf) * velocity_scale  # URDF velocity="0" means "not given"
    return Limits(names, velocity, _per_joint(names, max_acceleration, acceleration, "acceleration"),
                  _per_joint(names, max_jerk, jerk, "jerk"), margin_percent)


@dataclass(frozen=True)
class Derivatives:
    """(F, n) velocity, acceleration and jerk per frame, and where each stencil fits (F,) bool."""

    velocity: np.ndarray
    acceleration: np.ndarray
    jerk: np.ndarray
    defined: dict[str, np.ndarray]


def _fill_ends(values: np.ndarray, first: int, last: int) -> np.ndarray:
    """Frames before `first` take row `first`, after `last` take row `last`."""
    if values.shape[0] == 0 or first > last:
        values[:] = 0.0
        return values
    values[:first] = values[first]
    values[last + 1:] = values[last]
    return values


def step_velocity(joints: np.ndarray, fps: float, frames: np.ndarray | None = None) -> np.ndarray:
    """(F-1, n) the speed of each step into frame k = 1..F-1, ``(q[k] - q[k-1]) * fps``, signed;
    divided by the step's length in frames when `frames` (the frame numbers) are given, so a bake
    over a range with gaps is not read as faster than it is. The one velocity formula that
    `derivatives` (the limit check, which reads every frame of its range, so no gaps) and
    `core.shot.bake.check_bake` (the too-fast flag, with its frame numbers) both use."""
    q = np.asarray(joints, dtype=float)
    velocity = np.diff(q, axis=0) * fps
    if frames is not None:
        velocity = velocity / np.maximum(np.diff(np.asarray(frames, dtype=float)), 1e-9)[:, None]
    return velocity


def derivatives(joints: np.ndarray, fps: float) -> Derivatives:
    """Velocity, acceleration and jerk of each frame (see the module's docstring)."""
    q = np.asarray(joints, dtype=float)
    if q.ndim != 2:
        raise KinemaError(f"joint values must be (frames, joints), got shape {q.shape}")
    if not (np.isfinite(fps) and fps > 0):
        raise KinemaError(f"the frame rate must be a positive number, got {fps}")
    if not np.all(np.isfinite(q)):
        raise KinemaError("the baked joint values contain NaN or inf")
    count = q.shape[0]
    frames = np.arange(count)
    velocity = np.zeros_like(q)
    acceleration = np.zeros_like(q)
    jerk = np.zeros_like(q)
    if count >= 2:
        velocity[1:] = step_velocity(q, fps)
    _fill_ends(velocity, 1, count - 1)
    if count >= 3:
        acceleration[1:-1] = np.diff(q, n=2, axis=0) * fps ** 2
    _fill_ends(acceleration, 1, count - 2)
    if count >= 4:
        jerk[2:-1] = np.diff(q, n=3, axis=0) * fps ** 3
    _fill_ends(jerk, 2, count - 2)
    defined = {"velocity": frames >= 1, "acceleration": (frames >= 1) & (frames <= count - 2),
               "jerk": (frames >= 2) & (frames <= count - 2)}
    return Derivatives(velocity, acceleration, jerk, defined)


@dataclass(frozen=True)
class Violation:
    """One joint over one kind of limit: its worst value (absolute), the limit, the frames."""

    joint: str
    worst: float
    limit: float
    frames: list[int]

    def to_dict(self) -> dict:
        return {"joint": self.joint, "worst": float(self.worst), "limit": float(self.limit), "frames": list(self.frames)}


@dataclass
class LimitReport:
    """What the check found. `worst[kind]` is each joint's largest absolute value over the shot."""

    fps: float
    frames: np.ndarray  # (F,) frame numbers
    limits: Limits
    derivatives: Derivatives
    worst: dict[str, np.ndarray] = field(default_factory=dict)
    violations: dict[str, list[Violation]] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        return any(self.violations[kind] for kind in KINDS)

    def flagged_frames(self) -> dict[int, list[str]]:
        """frame -> short reasons ("velocity shoulder_pan_joint"), for timeline markers."""
        reasons: dict[int, list[str]] = {}
        for kind in KINDS:
            for violation in self.violations[kind]:
                for frame in violation.frames:
                    reasons.setdefault(frame, []).append(f"{kind} {violation.joint}")
        return dict(sorted(reasons.items()))

    def table(self) -> list[dict]:
        """One row per (kind, joint) over its limit: the Bake section's table."""
        return [{"kind": kind, **v.to_dict()} for kind in KINDS for v in self.violations[kind]]

    def to_dict(self) -> dict:
        out = {f"{kind}_violations": [v.to_dict() for v in self.violations[kind]] for kind in KINDS}
        out["limits"] = self.limits.to_dict()
        out["fps"] = self.fps
        return out


def check_limits(frames: np.ndarray, joints: np.ndarray, limits: Limits, fps: float,
                 active: np.ndarray | None = None) -> LimitReport:
    """Flag every frame where a joint's velocity, acceleration or jerk is over its limit (after
    the margin). `active` (n,) bool leaves joints the shot does not move out of the check."""
    frames = np.asarray(frames)
    q = np.asarray(joints, dtype=float)
    if q.shape != (len(frames), len(limits.joint_names)):
        raise KinemaError(f"joint values of shape {q.shape} do not match {len(frames)} frames of "
                          f"{len(limits.joint_names)} joints")
    d = derivatives(q, fps)
    mask = np.ones(q.shape[1], dtype=bool) if active is None else np.asarray(active, dtype=bool)
    report = LimitReport(float(fps), frames, limits, d)
    frame_numbers = np.rint(frames).astype(int)
    for kind in KINDS:
        values = np.abs(getattr(d, kind))
        report.worst[kind] = values.max(axis=0, initial=0.0)
        limit = limits.effective(kind)
        over = (values > limit[None, :]) & d.defined[kind][:, None] & mask[None, :]
        found = []
        for j in np.flatnonzero(over.any(axis=0)):
            rows = np.flatnonzero(over[:, j])
            found.append(Violation(limits.joint_names[j], float(values[rows, j].max()), float(limit[j]),
                                   [int(f) for f in frame_numbers[rows]]))
        report.violations[kind] = found
    return report
