"""Class 2: presets, and transactions in Blender.

Every malformed preset field is a `PresetError` naming the field; one unreadable file in a
preset folder is skipped with a warning naming it (the others still load); applying a preset
that fails part-way leaves the rig's tree exactly as it was.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path

import pytest

from kinema_nodes.core.presets import PresetError, PresetWarning, find_preset, load_preset, preset_from_json, read_presets

from corpus import assert_one_line

SHIPPED = Path(__file__).resolve().parents[2] / "kinema_nodes" / "presets"
REACH = json.loads((SHIPPED / "reach_with_the_tool.json").read_text())
HANDOFF = json.loads((SHIPPED / "hand_off_between_two_links.json").read_text())


def _node(data, kind):
    return next(n for n in data["nodes"] if n["kind"] == kind)


def _set(path, value, base=REACH):
    """A copy of `base` with one field replaced: path is a list of keys, a ('kind', K) picks a node."""
    data = copy.deepcopy(base)
    target = data
    for key in path[:-1]:
        target = _node(data, key[1]) if isinstance(key, tuple) else target[key]
    target[path[-1]] = value
    return data


TARGET, SOLVER = ("kind", "ik_target"), ("kind", "solver")
MALFORMED = {
    "keys_link_not_a_list": (_set([TARGET, "keys"], {"link": 5}), "keys.link"),
    "keys_link_row_too_short": (_set([TARGET, "keys"], {"link": [[1]]}), "keys.link"),
    "keys_link_frame_not_a_number": (_set([TARGET, "keys"], {"link": [["one", {"role": "tool_point"}]]}), "keys.link"),
    "keys_link_reference_not_a_role": (_set([TARGET, "keys"], {"link": [[1, "tool_point"]]}), "keys.link"),
    "keys_of_an_unknown_kind": (_set([TARGET, "keys"], {"swivel": []}), "keys.swivel"),
    "value_not_a_number": (_set([TARGET, "values"], {"position_weight": "heavy"}), "values.position_weight"),
    "value_a_list": (_set([TARGET, "values"], {"position_weight": [1, 2]}), "values.position_weight"),
    "param_link_a_number": (_set([TARGET, "params", "link"], 5), "params.link"),
    "param_link_role_a_number": (_set([TARGET, "params", "link"], {"role": 5}), "params.link"),
    "param_link_two_keys": (_set([TARGET, "params", "link"], {"role": "tool_point", "link": "x"}), "params.link"),
    "param_an_object": (_set([TARGET, "params", "position_weight"], {"a": 1}), "params.position_weight"),
    "param_nested_list": (_set([TARGET, "params", "position_weight"], [1, [2]]), "params.position_weight"),
    "param_huge_list": (_set([SOLVER, "params", "position_tolerance"], list(range(1000))), "params.position_tolerance"),
    "control_not_bone": (_set([TARGET, "control"], "object"), "'control'"),
    "unknown_node_field": (_set([TARGET, "colour"], "red"), "unknown field"),
    "params_not_an_object": (_set([TARGET, "params"], [1, 2]), "'params' must be an object"),
    "link_unknown_output_socket": (_set(["links"], [["Robot", "Arm", "Tool", "Robot"]]), "no output socket 'Arm'"),
    "link_unknown_input_socket": (_set(["links"], [["Robot", "Robot", "Tool", "Base"]]), "no input socket 'Base'"),
    "link_three_items": (_set(["links"], [["Robot", "Robot", "Tool"]]), "a link must be"),
    "link_numbers": (_set(["links"], [[1, 2, 3, 4]]), "a link must be"),
    "links_not_a_list": (_set(["links"], {"a": 1}), "'links' must be a list"),
    "link_to_missing_node": (_set(["links"], [["Robot", "Robot", "Ghost", "Robot"]]), "names a node"),
    "requires_role_a_number": (_set(["requires"], {"roles": [1]}), "'requires'"),
    "requires_joints_text": (_set(["requires"], {"arm_joints": "7"}), "'requires'"),
    "requires_joints_bool": (_set(["requires"], {"arm_joints": True}), "'requires'"),
    "requires_joints_negative": (_set(["requires"], {"arm_joints": -1}), "'requires'"),
    "requires_unknown_key": (_set(["requires"], {"legs": 2}), "'requires'"),
    "requires_unknown_role": (_set(["requires"], {"roles": ["tail"]}), "unknown role"),
    "description_a_number": (_set(["description"], 5), "'description'"),
    "nodes_not_a_list": (_set(["nodes"], {"Robot": {}}), "no nodes"),
    "node_without_name": (_set(["nodes"], [{"kind": "robot"}]), "every node needs a name"),
    "two_nodes_one_name": (_set(["nodes"], [{"name": "R", "kind": "robot"}, {"name": "R", "kind": "robot"}]), "two nodes are named"),
    "unknown_kind": (_set([TARGET, "kind"], "teleporter"), "unknown kind"),
    "wrong_version": (_set(["kinema_preset"], 2), "version"),
    "empty_name": (_set(["name"], "  "), "no name"),
    "ranges_malformed": (_set([("kind", "link_switch"), "params", "ranges"], [[1, "wrist"]], base=HANDOFF), "params.ranges"),
    "ranges_not_a_list": (_set([("kind", "link_switch"), "params", "ranges"], 7, base=HANDOFF), "params.ranges"),
    "top_level_a_list": ([REACH], "expected a JSON object"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_field_is_a_preset_error_naming_it(case):
    data, field = MALFORMED[case]
    with pytest.raises(PresetError) as caught:
        preset_from_json(data, "bad.json")
    assert_one_line(caught.value, "bad.json", field)


def test_shipped_presets_still_load():
    assert len(read_presets([SHIPPED])) == len(list(SHIPPED.glob("*.json"))) >= 6


def _bad_file(folder: Path, kind: str) -> Path:
    path = folder / f"bad_{kind}.json"
    if kind == "latin1":
        path.write_bytes(json.dumps(REACH).replace("Reach", "R\u00e9ach").encode("latin-1"))
    elif kind == "nested_deep":
        path.write_text("[" * 200_000 + "]" * 200_000)
    elif kind == "nan_constant":
        path.write_text(json.dumps(_set([TARGET, "params", "position_weight"], 1.0)).replace("1.0", "NaN", 1))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "huge":
        path.write_text(json.dumps(_set(["description"], "x" * 2_000_000)))
    elif kind == "empty":
        path.write_text("")
    elif kind == "malformed_field":
        path.write_text(json.dumps(MALFORMED["keys_link_row_too_short"][0]))
    return path


BAD_FILES = {"latin1": "not utf-8", "nested_deep": "nested too deep", "nan_constant": "nan", "fifo": "not a regular file",
             "folder": "folder", "huge": "refusing presets over", "empty": "not valid json", "malformed_field": "keys.link"}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_unreadable_preset_is_one_line(tmp_path, kind):
    path = _bad_file(tmp_path, kind)
    with pytest.raises(PresetError) as caught:
        load_preset(path)
    assert_one_line(caught.value, path.name, BAD_FILES[kind])


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_one_bad_file_is_skipped_with_a_warning_and_the_rest_load(tmp_path, kind):
    good = tmp_path / "mine.json"
    good.write_text(json.dumps(_set(["name"], "My reach")))
    bad = _bad_file(tmp_path, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = read_presets([tmp_path, SHIPPED])
        assert find_preset("My reach", [tmp_path, SHIPPED]) == good
    assert "My reach" in [p.name for _, p in found] and len(found) == 1 + len(list(SHIPPED.glob("*.json")))
    named = [w for w in caught if issubclass(w.category, PresetWarning) and bad.name in str(w.message)]
    assert named and "\n" not in str(named[0].message)


# ---- in Blender: apply is a transaction ---------------------------------------------------

def _tree_state(bpy, rig):
    tree = rig.kinema_tree
    return {
        "tree": tree.name if tree else None,
        "nodes": sorted((n.name, n.bl_idname) for n in tree.nodes) if tree else [],
        "links": sorted((x.from_node.name, x.to_node.name) for x in tree.links) if tree else [],
        "bones": sorted(b.name for b in rig.data.bones),
        "groups": sorted(g.name for g in bpy.data.node_groups),
        "controls": sorted(n.control_bone for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode") if tree else [],
    }


FAILS_IN_BLENDER = {
    "solver_backend_unknown": _set([SOLVER, "params", "backend"], "warp_drive"),
    "iterations_beyond_int32": _set([SOLVER, "params", "max_iterations"], 10**12),
    "swivel_angle_text_in_params": _set([TARGET, "params", "position_weight"], "heavy"),
}


@pytest.mark.parametrize("case", sorted(FAILS_IN_BLENDER))
def test_preset_failing_part_way_changes_nothing(blender, tmp_path, monkeypatch, case):
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.presets import apply_preset

    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path / "user"))
    bpy = blender
    rig = import_urdf(bpy.context, "arm6")
    apply_preset(bpy.context, rig, "Reach with the tool", backend="NUMPY")
    before = _tree_state(bpy, rig)
    bad = tmp_path / f"{case}.json"
    bad.write_text(json.dumps(_set(["name"], f"Broken {case}", base=FAILS_IN_BLENDER[case])))
    with pytest.raises(PresetError) as caught:
        apply_preset(bpy.context, rig, bad, backend=None)
    assert_one_line(caught.value)
    assert _tree_state(bpy, rig) == before


def test_preset_applied_twice_keeps_plain_control_names(blender, tmp_path, monkeypatch):
    """The new tree is built beside the old one; once swapped in, its control bones get their
    plain names back (no '.001' left over from the old tree's bones)."""
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.presets import apply_preset

    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(tmp_path / "user"))
    bpy = blender
    rig = import_urdf(bpy.context, "arm6")
    apply_preset(bpy.context, rig, "Reach with the tool", backend="NUMPY")
    first = _tree_state(bpy, rig)
    apply_preset(bpy.context, rig, "Reach with the tool", backend="NUMPY")
    assert _tree_state(bpy, rig) == first


def test_blender_preset_list_skips_bad_file_with_warning(blender, tmp_path, monkeypatch):
    from kinema_nodes.blender.presets import available_presets

    user = tmp_path / "user"
    user.mkdir()
    bad = _bad_file(user, "latin1")
    monkeypatch.setenv("KINEMA_NODES_PRESET_DIR", str(user))
    with pytest.warns(PresetWarning, match=bad.name):
        found = available_presets()
    assert len(found) == len(list(SHIPPED.glob("*.json")))
