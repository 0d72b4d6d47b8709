"""A mimic that names a joint the file does not define (example-robot-data's
alex_psyonic_hands: each finger's second joint mimics 'index_q1', 'middle_q1', ..., where the file
names them 'Left_index_q1' and 'Right_index_q1'). Nothing says which joint it follows, so the
import goes through with that joint moving on its own and a note asking to check the file
(the import buttons report it as a warning), instead of refusing a published robot.

Independent check: yourdfpy, on the same file with those mimic tags deleted, gives each link's
pose to 1e-9 m and 1e-7 rad (the rotation is measured through arccos, whose resolution
near 0 is ~2e-8) at random joint values.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import yourdfpy

from kinema_nodes.core.model.loading import find_urdf, load_robot
from kinema_nodes.core.model.mjcf import ATTENTION
from independent_fk import pose_error

BAD = ("index", "middle", "ring", "pinky")


def test_a_mimic_of_an_undefined_joint_moves_on_its_own_and_says_so():
    path = find_urdf("alex_psyonic_hands")
    robot = load_robot(path)
    asking = [note for note in robot.notes if note.startswith(ATTENTION)]
    wrong = [f"{side}_{finger}_q2" for side in ("Left", "Right") for finger in BAD]
    assert len(asking) == len(wrong), robot.notes
    for name, note in zip(wrong, asking):
        assert f"joint '{name}' mimics joint '{name.split('_', 1)[1][:-1]}1', which is not defined: it moves on its own" in note
        assert name in robot.actuated_joint_names
    assert not [j for j in robot.joints if j.mimic is not None]  # the file's only mimics are these eight

    text = path.read_text()
    stripped, count = re.subn(r'<mimic\s+joint\s*=\s*"(?:%s)_q1"[^>]*/>' % "|".join(BAD), "", text)
    assert count == len(wrong)
    reference = yourdfpy.URDF.load(io.StringIO(stripped), load_meshes=False, build_scene_graph=True,
                                   build_collision_scene_graph=False)
    from kinema_nodes.core.model.kinematics import link_pose

    rng = np.random.default_rng(7)
    links = [j.child for j in robot.joints if j.name in wrong] + ["LeftGripperYawLink", "RightGripperYawLink"]
    for _ in range(5):
        q = rng.uniform(np.maximum(robot.lower, -np.pi), np.minimum(robot.upper, np.pi))
        reference.update_cfg(dict(zip(robot.actuated_joint_names, q)))
        for link in links:
            ours = link_pose(robot, q, link)
            theirs = np.array(reference.get_transform(link, reference.base_link))
            position, rotation = pose_error(ours, theirs)
            assert position <= 1e-9 and rotation <= 1e-7, (link, position, rotation)


def test_pyroki_builds_the_robot_with_those_joints_moving_on_their_own():
    """PyRoki's build read the mimic and failed (KeyError 'index_q1'), so every solve fell back
    to NumPy. Its robot now has our actuated joints, and its forward kinematics gives our link
    poses to 1e-5 m and 1e-5 rad (float32 on JAX's CPU)."""
    pytest.importorskip("pyroki")
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.rotations import rotation_angle_between
    from kinema_nodes.core.solve._pyroki_program import _pyroki_robot

    robot = load_robot(find_urdf("alex_psyonic_hands"))
    pk = _pyroki_robot(robot)
    assert sorted(pk.joints.actuated_names) == sorted(robot.actuated_joint_names)
    values = dict(zip(robot.actuated_joint_names, np.random.default_rng(3).uniform(
        np.maximum(robot.lower, -np.pi), np.minimum(robot.upper, np.pi))))
    q = np.array([values[name] for name in robot.actuated_joint_names])
    poses = np.asarray(pk.forward_kinematics(np.array([values[name] for name in pk.joints.actuated_names])))
    import jaxlie

    for link in ("Left_index_L2", "LeftGripperYawLink"):
        theirs = jaxlie.SE3(poses[pk.links.names.index(link)]).as_matrix()
        ours = link_pose(robot, q, link)
        assert np.abs(np.asarray(theirs)[:3, 3] - ours[:3, 3]).max() <= 1e-5, link
        assert rotation_angle_between(np.asarray(theirs)[:3, :3], ours[:3, :3]) <= 1e-5, link
