"""A PyRoki build says nothing in Blender's console: PyRoki's URDF parser logs a DEBUG line
through loguru for each joint without an origin (three on robosuite's UR5e: 'Joint
'base_fixed' has no origin, assuming identity transform'), printed on every build of a
program, which a user reads as something gone wrong. Its messages are turned off where we build
PyRoki's robot (`_pyroki_program._quiet_pyroki`); a sink of our own, at DEBUG, must receive none."""

from __future__ import annotations

import pytest
from library_caches import robosuite_robot_folder

from kinema_nodes.core.model.loading import load_robot

pytest.importorskip("pyroki")
loguru = pytest.importorskip("loguru")


def test_building_pyroki_s_robot_logs_nothing():
    from kinema_nodes.core.solve._pyroki_program import _pyroki_robot

    robot = load_robot(str(robosuite_robot_folder("ur5e") / "robot.xml"))
    assert any(joint.origin is None for joint in robot.urdf.joint_map.values()), "the model still has an origin-less joint"
    seen = []
    sink = loguru.logger.add(seen.append, level="DEBUG")
    try:
        _pyroki_robot(robot)
    finally:
        loguru.logger.remove(sink)
    assert not [message for message in seen if message.record["name"].startswith("pyroki")], seen
