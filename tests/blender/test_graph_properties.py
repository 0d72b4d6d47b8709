"""Property-based tests: random node graphs and random edits never make the evaluator raise or
write NaN, and every problem the compiler finds is shown on the node at fault.

Core side: random GraphSpecs through validate/compile. Blender side: random trees of real nodes
on a real rig, edited at random (links added and removed, nodes deleted, controls deleted,
settings changed), each followed by a run of every tree.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinema_nodes.core.graph.registry import BY_KIND, SPEC_KINDS, kind_of
from kinema_nodes.core.graph.spec import GraphSpec, LinkSpec, NodeSpec, validate
from kinema_nodes.core.graph.program import compile_program

#: Every kind a graph may hold, with its (input, output) socket names, from the node registry.
KINDS = SPEC_KINDS
SOCKETS = {kind: (tuple(n for n, _ in BY_KIND[kind].inputs), tuple(n for n, _ in BY_KIND[kind].outputs)) for kind in KINDS}


@st.composite
def graph_specs(draw):
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=8))
    nodes = []
    for i, kind in enumerate(kinds):
        params = {}
        if kind == "robot":
            params = {"rig": draw(st.sampled_from(["arm", "", "ghost"])), "rig_is_armature": draw(st.booleans())}
        elif kind == "ik_target":
            params = {"control": draw(st.sampled_from(["ctl", ""])), "control_exists": draw(st.booleans()),
                      "link": draw(st.sampled_from(["", "tool_tcp", "wrist_2_link", "nowhere"]))}
        elif kind == "solver":
            params = {"backend": draw(st.sampled_from(["numpy", "off", "bogus"]))}
        elif kind == "link_switch":
            params = {"ranges": ((1, "tool_tcp"), (5, draw(st.sampled_from(["forearm_link", "nowhere"]))))}
        nodes.append(NodeSpec.make(f"{kind}{i}", kind, **params))
    links = []
    for _ in range(draw(st.integers(0, 12))):
        a, b = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
        outs, ins = SOCKETS[a.kind][1], SOCKETS[b.kind][0]
        if outs and ins:
            links.append(LinkSpec(a.name, draw(st.sampled_from(outs)), b.name, draw(st.sampled_from(ins))))
    return GraphSpec(tuple(nodes), tuple(links))


@settings(max_examples=300, deadline=None)
@given(spec=graph_specs())
def test_random_graphs_validate_and_compile_without_raising(spec, robots):
    robot = robots("arm6")
    problems = validate(spec)
    program = compile_program(spec, {"arm": robot})
    for node, messages in program.problems.by_node.items():
        assert node in {n.name for n in spec.nodes} and all(messages)
    if program.ok:
        for step in program.steps:
            assert step.rig == "arm" and step.targets
    assert problems.by_node.keys() <= program.problems.by_node.keys() | {k for k, v in problems.by_node.items() if not v}


NODE_TYPES = tuple(BY_KIND[kind].bl_idname for kind in KINDS)

EDITS = st.lists(
    st.tuples(st.sampled_from(["add", "link", "unlink", "remove", "delete_control", "backend", "link_name", "move"]),
              st.integers(0, 10_000), st.integers(0, 10_000)),
    min_size=1, max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS)
def test_random_edits_never_raise_never_write_nan_and_show_errors_on_the_nodes(blender_session, edits):
    bpy = blender_session
    from kinema_nodes import evaluator
    from kinema_nodes.blender.flatten import node_by_path
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig

    bpy.ops.wm.read_homefile(use_empty=True)
    evaluator.forget_all()
    rig = import_urdf(bpy.context, "arm6")
    robot = robot_for_rig(rig)
    controls = []
    for i in range(2):
        empty = bpy.data.objects.new(f"Goal{i}", None)
        bpy.context.scene.collection.objects.link(empty)
        empty.location = (0.3 + 0.1 * i, 0.1, 0.4)
        controls.append(empty)
    tree = bpy.data.node_groups.new("Random", "KinemaNodeTree")
    for kind in ("KinemaRobotNode", "KinemaIKTargetNode", "KinemaSolverNode"):
        tree.nodes.new(kind)
    tree.nodes["Robot"].rig = rig
    tree.nodes["IK Target"].control_object = controls[0]
    tree.nodes["Solver"].backend = "NUMPY"
    tree.links.new(tree.nodes["Robot"].outputs["Robot"], tree.nodes["IK Target"].inputs["Robot"])
    tree.links.new(tree.nodes["IK Target"].outputs["Target"], tree.nodes["Solver"].inputs["Targets"])

    for action, a, b in edits:
        nodes = list(tree.nodes)
        if action == "add":
            tree.nodes.new(NODE_TYPES[a % len(NODE_TYPES)])
        elif action == "link" and nodes:
            out_node, in_node = nodes[a % len(nodes)], nodes[b % len(nodes)]
            if out_node.outputs and in_node.inputs:
                tree.links.new(out_node.outputs[a % len(out_node.outputs)], in_node.inputs[b % len(in_node.inputs)])
        elif action == "unlink" and tree.links:
            tree.links.remove(tree.links[a % len(tree.links)])
        elif action == "remove" and nodes:
            tree.nodes.remove(nodes[a % len(nodes)])
        elif action == "delete_control" and controls:
            bpy.data.objects.remove(controls.pop(a % len(controls)))
        elif action == "backend":
            for node in nodes:
                if kind_of(node) == "solver":
                    node.backend = ("NUMPY", "OFF")[a % 2]
        elif action == "link_name":
            for node in nodes:
                if kind_of(node) == "ik_target":
                    node.link_name = ("", "wrist_2_link", "forearm_link")[a % 3]
        elif action == "move" and controls:
            controls[a % len(controls)].location = (0.2 + (a % 7) * 0.05, -0.2 + (b % 5) * 0.1, 0.2 + (b % 3) * 0.1)
        evaluator.mark_dirty(tree)
        evaluator.run_all(bpy.context.scene)  # must not raise
        bpy.context.view_layer.update()

        q = read_joint_values(rig, robot)
        assert np.all(np.isfinite(q))
        assert np.all(q >= robot.lower - 1e-6) and np.all(q <= robot.upper + 1e-6)
        program = evaluator.program_for(tree)
        for name, messages in program.problems.by_node.items():
            if messages:
                node = node_by_path(tree, name)
                assert node is not None and node.kinema_error, (name, messages)
