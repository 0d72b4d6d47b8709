"""The compiled kernel is compiled for one signature only. numba types a read-only or strided
argument as a new signature and compiles the whole kernel again, in the caller's thread (43 s
on a 2-core machine, seen as the first Find Solutions on a fresh machine freezing Blender), so
every caller's arrays must reach it C-contiguous and writable. Runs the solver, Elbow Swivel and
Find Solutions on a 7-axis arm and a humanoid's 31-joint tree, then counts the signatures."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.robot import default_tool_point
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import _kernel
from kinema_nodes.core.solve._chain import problem_for
from kinema_nodes.core.solve._numpy_backend import descend_batch
from kinema_nodes.core.solve._types import IKTarget, check_targets


@pytest.fixture(scope="module")
def compiled():
    form, why = _kernel.kernel_status(wait=True)
    if form != "numba":
        pytest.skip(f"the compiled kernel is not available here: {why}")
    return _kernel._numba_form


@pytest.mark.parametrize("name, link", [("talos_left_arm", None), ("romeo_small", "l_gripper")])
def test_every_kernel_call_reuses_the_one_compiled_signature(compiled, name, link):
    robot = load_robot(name)
    link = link or default_tool_point(robot)
    problem = problem_for(robot, (link,), frozenset())
    q = robot.mid_configuration()
    pose = link_pose(robot, q, link)
    targets = check_targets(robot, IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))))
    read_only_row = np.broadcast_to(q, (1, robot.dof))
    assert not read_only_row.flags.writeable
    descend_batch(problem, read_only_row, targets, 1e-5, 1e-5, 5)
    descend_batch(problem, q[None], targets, 1e-5, 1e-5, 5, swivel=0.3)
    descend_batch(problem, np.asfortranarray(np.stack([q, q])), targets, 1e-5, 1e-5, 5)
    assert len(compiled.signatures) == 1, compiled.signatures
