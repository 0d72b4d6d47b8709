"""The Gripper node after the solver (#30 item 6): its keyed value, 0 open .. 1 closed, set into
the gripper joints the solver holds (`core.gripper.set_gripper`, the blend the panel's slider
uses), so the next frame's solve starts from it and never moves it."""

from __future__ import annotations

import numpy as np

from ..gripper import close_on, gripper_hands, set_gripper


def apply_stage(stage) -> tuple[np.ndarray, str]:
    """values["gripper_value"] (0..1) into the gripper named by the node's "hand" ("" = all);
    with the node's "close_on_object", stopped where the fingers meet what the robot carries
    (values["carried"], the frame's `CarriedObject`s)."""
    robot = stage.robot
    if not gripper_hands(robot):
        return stage.joints, f"robot '{robot.name}' has no gripper joints: the Gripper node does nothing"
    hand = str(stage.node.get("hand", "") or "")
    value = float(stage.values.get("gripper_value", 0.0))
    carried = stage.values.get("carried") or ()
    note = ""
    try:
        if stage.node.get("close_on_object", False) and carried:
            stopped = close_on(robot, stage.joints, value, hand, carried)
            if stopped < value:
                note = f"gripper stopped on the object at {stopped:.3f}"
            value = stopped
        joints = set_gripper(robot, stage.joints, value, hand)
    except ValueError as exc:
        return stage.joints, str(exc)
    return joints, note
