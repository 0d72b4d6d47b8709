"""An elbow swivel on an arm whose tool is out of reach searches nothing more.

The Swivel node runs after the Solver: a swivelled descent, then a tool-only pass from it and,
if that misses, one from the Solver's answer. The Solver has already searched the joint ranges
for the tool (the search on a miss); the two passes searched them again, so a frame out of reach
ran three searches (Baxter dragged 0.6 m out with a swivel: 50 ms an update against 14 without).
Now the passes do not search (`search_share=0`): on the Panda, a tool target its limits block
(its hand 25 cm over the base, pointing down) costs the swivel at most one restart batch a pass,
and the answer is the same miss as the Solver's, within limits, the swivel said saturated."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion
from kinema_nodes.core.solve import IKTarget, SolveOptions, kernel_status, restart_count, solve
from kinema_nodes.core.stages.swivel import set_swivel


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    assert kernel_status(wait=True) == ("numba", None)


def test_a_swivel_with_the_tool_out_of_reach_does_not_search_again(robots):
    robot = robots("panda")
    link = "panda_hand"
    q0 = np.clip(np.zeros(robot.dof), robot.lower, robot.upper)
    q0[robot.joint_index("panda_joint4")], q0[robot.joint_index("panda_joint6")] = -1.8, 1.6
    pose = link_pose(robot, q0, link)
    target = IKTarget(link, (0.05, 0.0, 0.25), tuple(matrix_to_quaternion(pose)))
    options = SolveOptions(backend="numpy", budget_ms=400.0)  # a budget no search here meets: counted, not timed
    before = restart_count()
    missed = solve(robot, [target], q0, options)
    assert not missed.converged and restart_count() - before > 10, "the Solver searched"
    before = restart_count()
    swivelled = set_swivel(robot, [target], missed.joints, 0.5, options, link)
    assert restart_count() - before <= 2, restart_count() - before
    assert swivelled.saturated and swivelled.note.startswith("swivel saturated")
    assert swivelled.position_error <= missed.position_error + 1e-6
    q = swivelled.joints
    assert np.isfinite(q).all() and np.all(q >= robot.lower - 1e-9) and np.all(q <= robot.upper + 1e-9)
