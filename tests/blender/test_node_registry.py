"""The node registry is the one list of node kinds: every Blender node, its sockets, the Add menu,
presets and validation agree with it."""

from __future__ import annotations

from kinema_nodes.core.graph.registry import BY_KIND, NODES, SOCKET_TYPES, SPEC_KINDS, kind_of
from kinema_nodes.core.graph.spec import NODE_KINDS, GraphSpec, NodeSpec, validate


def test_every_kind_is_a_blender_node_with_the_registry_sockets(blender):
    bpy = blender
    tree = bpy.data.node_groups.new("Registry", "KinemaNodeTree")
    for entry in NODES:
        if not entry.in_spec:
            continue
        node = tree.nodes.new(entry.bl_idname)
        assert kind_of(node) == entry.kind and node.kind == entry.kind and node.bl_label == entry.label
        assert [(s.name, s.bl_idname) for s in node.inputs] == [(n, SOCKET_TYPES[t]) for n, t in entry.inputs]
        assert [(s.name, s.bl_idname) for s in node.outputs] == [(n, SOCKET_TYPES[t]) for n, t in entry.outputs]
        assert {s.name for s in node.inputs if s.is_multi_input} == set(entry.multi_input)
    assert bpy.types.Node.bl_rna_get_subclass_py(BY_KIND["group"].bl_idname) is not None


def test_the_add_menu_and_presets_offer_exactly_the_registry(blender):
    from kinema_nodes.blender.presets import NODE_TYPES
    from kinema_nodes.tree import CATEGORIES

    in_menu = [idname for _, _, idnames in CATEGORIES for idname in idnames]
    assert sorted(in_menu) == sorted(entry.bl_idname for entry in NODES)
    assert NODE_TYPES == {kind: BY_KIND[kind].bl_idname for kind in SPEC_KINDS}


def test_validation_knows_the_registry_kinds_and_nothing_else():
    assert NODE_KINDS == SPEC_KINDS and "group" not in NODE_KINDS
    problems = validate(GraphSpec((NodeSpec.make("x", "teleporter"),)))
    assert problems.message("x") == "unknown node kind 'teleporter'"
