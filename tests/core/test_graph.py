"""GraphSpec validation and compilation, on plain data (no Blender)."""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.graph.spec import GraphSpec, LinkSpec, NodeSpec, downstream_chain, validate
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.graph.program import FrameInputs, compile_program


def reach_graph(rig="arm", control_exists=True, backend="numpy", extra_nodes=(), extra_links=()):
    nodes = (
        NodeSpec.make("Robot", "robot", rig=rig, rig_is_armature=True),
        NodeSpec.make("Target", "ik_target", control="ctl", control_exists=control_exists, link=""),
        NodeSpec.make("Solver", "solver", backend=backend),
        *extra_nodes,
    )
    links = (LinkSpec("Robot", "Robot", "Target", "Robot"), LinkSpec("Target", "Target", "Solver", "Targets"), *extra_links)
    return GraphSpec(nodes, links)


def test_a_valid_graph_has_no_problems():
    assert not validate(reach_graph())


def test_equal_specs_are_equal_and_hash_alike():
    assert reach_graph() == reach_graph() and hash(reach_graph()) == hash(reach_graph())
    assert reach_graph() != reach_graph(backend="pyroki")


def test_missing_robot_is_an_error_on_the_robot_node():
    problems = validate(reach_graph(rig=""))
    assert "no robot" in problems.message("Robot")


def test_deleted_control_is_an_error_on_the_target_node():
    problems = validate(reach_graph(control_exists=False))
    assert "control 'ctl' no longer exists" in problems.message("Target")


def test_a_cycle_is_an_error_on_its_nodes():
    graph = reach_graph(
        extra_nodes=(NodeSpec.make("Swivel", "swivel"), NodeSpec.make("Config", "configuration")),
        extra_links=(LinkSpec("Solver", "Solution", "Swivel", "Solution"), LinkSpec("Swivel", "Solution", "Config", "Solution"),
                     LinkSpec("Config", "Solution", "Swivel", "Solution")),
    )
    problems = validate(graph)
    assert "cycle" in problems.message("Swivel") and "cycle" in problems.message("Config")


def test_two_solvers_writing_one_rig_is_an_error_on_both():
    graph = reach_graph(
        extra_nodes=(NodeSpec.make("Target 2", "ik_target", control="ctl2", control_exists=True), NodeSpec.make("Solver 2", "solver")),
        extra_links=(LinkSpec("Robot", "Robot", "Target 2", "Robot"), LinkSpec("Target 2", "Target", "Solver 2", "Targets")),
    )
    problems = validate(graph)
    assert "all write robot 'arm'" in problems.message("Solver") and "all write robot 'arm'" in problems.message("Solver 2")


def test_downstream_chain_follows_the_solution():
    graph = reach_graph(
        extra_nodes=(NodeSpec.make("Swivel", "swivel"), NodeSpec.make("Bake", "bake")),
        extra_links=(LinkSpec("Solver", "Solution", "Swivel", "Solution"), LinkSpec("Swivel", "Solution", "Bake", "Solution")),
    )
    assert downstream_chain(graph, "Solver") == ["Swivel", "Bake"]


def test_compiled_program_reaches_the_control(robots):
    robot = robots("arm6")
    program = compile_program(reach_graph(), {"arm": robot})
    assert program.ok and len(program.steps) == 1
    goal = link_pose(robot, np.array([0.2, -1.0, 1.1, -0.4, 0.5, 0.3]), robot.tool_point)
    (result,) = program.run(FrameInputs(1, {"Target": goal}, {"arm": robot.zero_configuration()}))
    assert result.converged and result.solved_links == ("tool_tcp",)
    reached = link_pose(robot, result.joints, robot.tool_point)
    np.testing.assert_allclose(reached, goal, atol=1e-5)
    assert result.summary.startswith("converged")


def test_a_control_with_no_pose_writes_nothing(robots):
    robot = robots("arm6")
    program = compile_program(reach_graph(), {"arm": robot})
    (result,) = program.run(FrameInputs(1, {"Target": np.full((4, 4), np.nan)}, {"arm": robot.zero_configuration()}))
    assert result.joints is None and "no usable pose" in result.summary


def test_link_switch_picks_the_link_by_frame(robots):
    robot = robots("arm6")
    graph = reach_graph(
        extra_nodes=(NodeSpec.make("Switch", "link_switch", ranges=((1, "tool_tcp"), (10, "wrist_2_link"))),),
        extra_links=(LinkSpec("Switch", "Link", "Target", "Link"),),
    )
    program = compile_program(graph, {"arm": robot})
    target = program.steps[0].targets[0]
    assert program.resolve_link(target, FrameInputs(5, {}, {})) == "tool_tcp"
    assert program.resolve_link(target, FrameInputs(10, {}, {})) == "wrist_2_link"
