"""core.plan: motion between the keys (issue #31). bpy-free; OMPL is imported only when a segment needs a plan."""

from .between_keys import (
    PlannedShot,
    SegmentPlan,
    default_free_joints,
    densify,
    ompl_available,
    plan_between_keys,
    plan_shot,
    segment_seed,
    time_path,
)

__all__ = ["PlannedShot", "SegmentPlan", "default_free_joints", "densify", "ompl_available", "plan_between_keys", "plan_shot", "segment_seed", "time_path"]
