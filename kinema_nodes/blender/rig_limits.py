"""A rig's limit settings (`armature.kinema_limits`) as a `core.shot.limits.Limits`: apart from
blender/limits.py (markers, retimed copies) so that Plan Between Keys, which the bake calls,
reads them without importing the bake back."""

from __future__ import annotations

from ..core.shot.limits import Limits, limits_for


def rig_limits(rig, robot, *, margin: float | None = None, max_acceleration: float | None = None,
               max_jerk: float | None = None, velocity_scale: float = 1.0) -> Limits:
    """The rig's limits; arguments given (the CLI's flags) override the rig's settings."""
    settings = getattr(rig.data, "kinema_limits", None)
    per_acceleration, per_jerk = {}, {}
    if settings is not None:
        for item in settings.joints:
            if item.joint in robot.actuated_joint_names:
                if item.max_acceleration > 0:
                    per_acceleration[item.joint] = item.max_acceleration
                if item.max_jerk > 0:
                    per_jerk[item.joint] = item.max_jerk
    if margin is None:
        margin = settings.margin if settings is not None else 0.0
    if max_acceleration is None:
        max_acceleration = settings.max_acceleration if settings is not None else 0.0
    if max_jerk is None:
        max_jerk = settings.max_jerk if settings is not None else 0.0
    return limits_for(robot, max_acceleration=max_acceleration, max_jerk=max_jerk, acceleration=per_acceleration,
                      jerk=per_jerk, velocity_scale=velocity_scale, margin_percent=margin)
