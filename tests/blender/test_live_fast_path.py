"""An ordinary tracking step stays on the compiled fast path (#33 item 1): no restart seeds are
drawn while the control moves a few millimetres along reachable poses, on example-robot-data's
Panda (the issue's plain scene) and its limited UR5 (held out: 6 joints, the polish path).

Not timed: the fast path is told apart by `restart_count` (the batches of restart seeds drawn),
which counts only on the general path. A frame whose goal is out of reach is a real miss and
restarts; that is tested apart (test_live_budget.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from rig_helpers import IndependentFK, joints_of, pose_error, robot_of


def _plain_scene(bpy, name):
    """Import, Add IK Target, Solver NumPy, PyRoki's background compile finished: what a user does."""
    from kinema_nodes.blender.edit import rig_tree
    from kinema_nodes.core.model.loading import find_urdf
    from kinema_nodes.core.solve import kernel_status, wait_for_pyroki

    bpy.ops.kinema.import_urdf(filepath=str(find_urdf(name)))
    rig = bpy.context.view_layer.objects.active
    bpy.ops.kinema.add_ik_target()
    tree = rig_tree(rig)
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    target = next(n for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode")
    wait_for_pyroki()
    kernel_status(wait=True)
    solver.backend = "NUMPY"
    bpy.context.view_layer.update()
    return rig, target


@pytest.mark.parametrize("name", ["panda", "ur5_limited"])
def test_an_ordinary_tracking_step_takes_the_fast_path_with_no_restarts(blender, name):
    from mathutils import Matrix

    from kinema_nodes.core.solve import restart_count

    rig, target = _plain_scene(blender, name)
    robot = robot_of(rig)
    fk = IndependentFK(robot)
    link = target.link_name
    moving = np.isin(robot.actuated_joint_names, list(set(robot.chain_joint_names(link)) - set(robot.held_joints(True))))
    rng = np.random.default_rng(33)
    q = joints_of(rig).copy()
    before = restart_count()
    for _ in range(12):
        # a step of at most 0.01 rad per joint: a few millimetres at the tool, reachable by construction
        q = np.clip(q + moving * rng.uniform(-0.01, 0.01, robot.dof), robot.lower + 0.02, robot.upper - 0.02)
        goal = fk.pose(q, link)
        rig.pose.bones[target.control_bone].matrix = Matrix(np.asarray(goal).tolist())
        blender.context.view_layer.update()
        blender.context.view_layer.update()
        position, rotation = pose_error(fk.pose(joints_of(rig), link), goal)
        assert position <= 1e-5 and rotation <= 1e-5, (position, rotation)
    assert restart_count() == before, "an ordinary tracking step drew restart seeds (left the fast path)"


def test_the_restart_counter_counts_a_real_miss(blender):
    """The counter is live: the issue's plain scene moved 5 cm along the control's own z (out of
    the Panda's reach at the hand's orientation, yet inside the quick reach bound) draws restarts,
    so the test above can fail."""
    from kinema_nodes.core.solve import restart_count
    from kinema_nodes.session import readout_of

    rig, target = _plain_scene(blender, "panda")
    before = restart_count()
    rig.pose.bones[target.control_bone].location.z -= 0.05
    blender.context.view_layer.update()
    blender.context.view_layer.update()
    assert restart_count() > before
    tree = target.id_data
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    assert "out of reach" in readout_of(tree, solver.name)["summary"]
