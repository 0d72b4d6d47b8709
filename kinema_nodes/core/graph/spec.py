"""GraphSpec: a plain, hashable description of a Kinema node tree, and its validation.

The Blender tree is snapshotted into a GraphSpec (by `evaluator.py`); everything after that —
checking the graph, compiling it, running it — happens on plain data, so it is testable
without Blender and two equal specs compile to the same Program.

Node kinds and their sockets (socket names are the identifiers used in `LinkSpec`) are those
of the node registry (registry.py): robot -> ik_target -> solver -> swivel / configuration /
bake, with link_switch feeding an IK Target's Link.

Params are structural settings (a change recompiles). Values that change every frame (control
poses, a keyed link choice, a keyed configuration index) are not in the spec: they are read
each frame as `FrameInputs`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

from .registry import SOLUTION_KINDS, SPEC_KINDS as NODE_KINDS, socket_feeds

#: Output socket -> the input socket it may feed.
_SOCKET_FEEDS = socket_feeds()


@dataclass(frozen=True)
class NodeSpec:
    name: str
    kind: str
    params: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def make(name: str, kind: str, **params: Any) -> "NodeSpec":
        return NodeSpec(name, kind, tuple(sorted(params.items())))

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class LinkSpec:
    from_node: str
    from_socket: str
    to_node: str
    to_socket: str


@dataclass(frozen=True)
class GraphSpec:
    nodes: tuple[NodeSpec, ...]
    links: tuple[LinkSpec, ...] = ()

    def node(self, name: str) -> NodeSpec:
        return self._by_name[name]

    @property
    def _by_name(self) -> dict[str, NodeSpec]:
        cache = self.__dict__.get("_by_name_cache")
        if cache is None:
            cache = {n.name: n for n in self.nodes}
            object.__setattr__(self, "_by_name_cache", cache)
        return cache

    def inputs(self, node: str, socket: str) -> list[LinkSpec]:
        return [link for link in self.links if link.to_node == node and link.to_socket == socket]

    def outputs(self, node: str, socket: str) -> list[LinkSpec]:
        return [link for link in self.links if link.from_node == node and link.from_socket == socket]

    def of_kind(self, kind: str) -> list[NodeSpec]:
        return [n for n in self.nodes if n.kind == kind]


@dataclass
class Problems:
    """Errors per node name; a graph with any error does not run (the node shows why)."""

    by_node: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, node: str, message: str) -> None:
        if message not in self.by_node[node]:
            self.by_node[node].append(message)

    def __bool__(self) -> bool:
        return any(self.by_node.values())

    def message(self, node: str) -> str:
        return "; ".join(self.by_node.get(node, ()))


def validate(spec: GraphSpec) -> Problems:
    """Everything that stops a graph from running, each on the node at fault.

    The snapshot records facts about the Blender side as params (`rig`, `rig_is_armature`,
    `control`, `control_exists`, `known_links`) so this stays a pure function.
    """
    problems = Problems()
    names = {n.name for n in spec.nodes}
    for link in spec.links:
        if link.from_node not in names or link.to_node not in names:
            problems.add(link.to_node if link.to_node in names else link.from_node, "link to a node that no longer exists")

    for link in spec.links:
        expected = _SOCKET_FEEDS.get(link.from_socket)
        if link.to_node in names and expected is not None and link.to_socket != expected:
            problems.add(link.to_node, f"'{link.from_socket}' cannot connect to '{link.to_socket}'")

    order = TopologicalSorter({n.name: set() for n in spec.nodes})
    for link in spec.links:
        order.add(link.to_node, link.from_node)
    try:
        tuple(order.static_order())
    except CycleError as error:
        for name in error.args[1][:-1]:
            problems.add(name, "part of a cycle: a node's output feeds back into its own input")

    for node in spec.nodes:
        if node.kind not in NODE_KINDS:
            problems.add(node.name, f"unknown node kind '{node.kind}'")
        elif node.kind == "robot":
            if not node.get("rig"):
                problems.add(node.name, "no robot: choose the robot's armature")
            elif not node.get("rig_is_armature", True):
                problems.add(node.name, f"'{node.get('rig')}' is not an imported robot rig")
        elif node.kind == "ik_target":
            robot_links = spec.inputs(node.name, "Robot")
            if not robot_links:
                problems.add(node.name, "no robot: connect a Robot node")
            if node.get("control") and not node.get("control_exists", True):
                problems.add(node.name, f"control '{node.get('control')}' no longer exists")
            elif not node.get("control"):
                problems.add(node.name, "no control: choose the bone or object that drives this target")
            link_name = node.get("link")
            known = node.get("known_links")
            if link_name and known is not None and link_name not in known:
                problems.add(node.name, f"link '{link_name}' is not a link of this robot")
        elif node.kind == "solver":
            targets = spec.inputs(node.name, "Targets")
            if not targets:
                problems.add(node.name, "no targets: connect one or more IK Target nodes")
            rigs = {_rig_of_target(spec, link.from_node) for link in targets} - {None}
            if len(rigs) > 1:
                problems.add(node.name, f"targets belong to different robots ({', '.join(sorted(rigs))}); one solver drives one robot")
        elif node.kind in SOLUTION_KINDS and not spec.inputs(node.name, "Solution"):
            problems.add(node.name, "no solution: connect a Solver (or a node after one)")

    writers: dict[str, list[str]] = defaultdict(list)
    for solver in spec.of_kind("solver"):
        for link in spec.inputs(solver.name, "Targets"):
            rig = _rig_of_target(spec, link.from_node)
            if rig and solver.name not in writers[rig]:
                writers[rig].append(solver.name)
    for rig, solvers in writers.items():
        if len(solvers) > 1:
            for name in solvers:
                problems.add(name, f"solvers {', '.join(solvers)} all write robot '{rig}'; keep one (give it several targets instead)")
    return problems


def _rig_of_target(spec: GraphSpec, target: str) -> str | None:
    for link in spec.inputs(target, "Robot"):
        robot = spec.node(link.from_node)
        if robot.kind == "robot":
            return robot.get("rig") or None
    return None


def rig_of_target(spec: GraphSpec, target: str) -> str | None:
    """The rig an IK Target node belongs to (through its Robot input), or None."""
    return _rig_of_target(spec, target)


def downstream_chain(spec: GraphSpec, solver: str) -> list[str]:
    """Nodes a solver's Solution flows through, in order (swivel, configuration, bake).

    Where the Solution branches, the first branch in link order is the one that is written.
    """
    chain: list[str] = []
    current = solver
    seen = {solver}
    while True:
        outs = [link for link in spec.outputs(current, "Solution") if spec.node(link.to_node).kind in SOLUTION_KINDS]
        if not outs or outs[0].to_node in seen:
            return chain
        current = outs[0].to_node
        seen.add(current)
        chain.append(current)
