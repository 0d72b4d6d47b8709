"""The reach bound (core/solve/_reach_bound.py) is sound: no configuration puts the tool beyond
it, judged by yourdfpy's own FK (an independent source) on random joint values within limits;
and a goal metres away is found beyond it, by the distance past the ball."""

from __future__ import annotations

import numpy as np
import pytest

from kinema_nodes.core.model.robot import default_tool_point
from kinema_nodes.core.solve._chain import problem_for
from kinema_nodes.core.solve._reach_bound import reach_of, short_of_reach, slide_travel


@pytest.mark.parametrize("name", ["ur10", "kinova", "rail_arm6"])
def test_no_configuration_puts_the_tool_beyond_the_bound(robots, name):
    import yourdfpy

    robot = robots(name)
    link = default_tool_point(robot)
    chain = problem_for(robot, (link,), frozenset()).chains[0]
    centre, radius = reach_of(chain)
    bound = radius + slide_travel(chain, robot.lower, robot.upper)
    urdf = yourdfpy.URDF.load(str(robot.path), load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    rng = np.random.default_rng(7)
    farthest = 0.0
    for _ in range(300):
        q = lower + rng.random(robot.dof) * (upper - lower)
        urdf.update_cfg(dict(zip(robot.actuated_joint_names, q)))
        tip = urdf.get_transform(link, urdf.base_link)[:3, 3]
        farthest = max(farthest, float(np.linalg.norm(tip - centre)))
    assert farthest <= bound + 1e-9
    assert farthest > 0.5 * bound  # the bound is a reach, not a figure of speech


def test_a_goal_three_metres_out_is_beyond_reach_by_what_lies_past_the_ball(robots):
    robot = robots("ur10")
    link = default_tool_point(robot)
    problem = problem_for(robot, (link,), frozenset())
    centre, radius = reach_of(problem.chains[0])
    goal = centre + np.array([3.0, 0.0, 0.0])
    assert short_of_reach(problem, goal[None], robot.lower, robot.upper) == pytest.approx(3.0 - radius, abs=1e-12)
    assert short_of_reach(problem, centre[None], robot.lower, robot.upper) == 0.0
