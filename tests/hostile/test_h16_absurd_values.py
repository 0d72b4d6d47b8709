"""Class 16: absurd values are refused, not applied, and no bad input ends in an internal
error (issue #32, items 11 and 12).

A preset whose tolerance is 1e300 (every solve "converged") or whose weight is 1e308 (squared
errors overflow) is a `PresetError` naming the field; the shipped presets still load. A MuJoCo
export whose model has a slide, ball or free joint named like one of the robot's revolute
joints (or a hinge named like a prismatic one) is refused rather than written in the wrong
unit. A reach map with NaN centres, arrays that disagree, or made for another robot is
refused before Blender draws it. A rig keyed far outside its shot, a manifest nested 200,000
deep and an option name where a value belongs each end in exit 2 and one line.
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.presets import PresetError, load_preset

from corpus import REPO, assert_cli_refusal, assert_one_line, run_cli, within

PRESETS = REPO / "kinema_nodes" / "presets"


# ---- presets ----------------------------------------------------------------------------------

def _preset_with(tmp_path: Path, shipped: str, node: str, section: str, key: str, value) -> Path:
    data = json.loads((PRESETS / shipped).read_text())
    changed = copy.deepcopy(data)
    target = next(n for n in changed["nodes"] if n["name"] == node)
    target.setdefault(section, {})[key] = value
    path = tmp_path / "absurd.json"
    path.write_text(json.dumps(changed))
    return path


@pytest.mark.parametrize("node, section, key, value", [
    ("Solver", "params", "position_tolerance", 1e300),
    ("Solver", "params", "rotation_tolerance", 1e300),
    ("Solver", "params", "position_tolerance", 0.0),
    ("Solver", "params", "max_iterations", 10**9),
    ("Tool", "params", "position_weight", 1e308),
    ("Tool", "params", "rotation_weight", 1e308),
    ("Tool", "params", "position_weight", -1.0),
    ("Tool", "values", "position_weight", 1e308),
])
def test_an_absurd_preset_number_is_refused_naming_the_field(tmp_path, node, section, key, value):
    path = _preset_with(tmp_path, "reach_with_the_tool.json", node, section, key, value)
    with pytest.raises(PresetError) as caught:
        load_preset(path)
    assert_one_line(caught.value, "absurd.json", f"{section}.{key}", "outside")


@pytest.mark.parametrize("rows", [[[1e300, {"role": "tool_point"}]], [[1.0, {"role": "tool_point"}], [-1e30, {"role": "wrist"}]]])
def test_a_link_switch_frame_beyond_any_shot_is_refused(tmp_path, rows):
    path = _preset_with(tmp_path, "hand_off_between_two_links.json", "Hand-off", "params", "ranges", rows)
    with pytest.raises(PresetError) as caught:
        load_preset(path)
    assert_one_line(caught.value, "params.ranges")


def test_every_shipped_preset_still_loads():
    names = sorted(p.name for p in PRESETS.glob("*.json"))
    assert len(names) >= 6
    for name in names:
        assert load_preset(PRESETS / name).name


def test_bake_with_an_absurd_preset_exits_2_with_one_line(tmp_path):
    path = _preset_with(tmp_path, "reach_with_the_tool.json", "Solver", "params", "position_tolerance", 1e300)
    targets = tmp_path / "targets.csv"
    targets.write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n2,0.4,0.12,0.4,0,1,0,0\n")
    result = run_cli("bake", "arm6", "--targets", targets, "--out", tmp_path / "out.blend", "--solver", "numpy",
                     "--preset", path, timeout=180)
    assert_cli_refusal(result, "position_tolerance", "outside")
    assert not (tmp_path / "out.blend").exists()


# ---- the MuJoCo export: a joint matched by name must be of the same kind ----------------------

RAIL_JOINTS = ["rail_joint", "shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
               "wrist_3_joint"]


def _mjcf(folder: Path, kinds: dict[str, str]) -> Path:
    """A chain of bodies, one joint each, named as rail_arm6's joints with the given kinds."""
    body = ""
    for name in reversed(RAIL_JOINTS):
        kind = kinds.get(name, "slide" if name == "rail_joint" else "hinge")
        body = f'<body name="{name}_body" pos="0 0 0.1"><joint name="{name}" type="{kind}"/><geom size="0.05"/>{body}</body>'
    path = folder / "model.xml"
    path.write_text(f'<mujoco model="rail"><worldbody>{body}</worldbody></mujoco>')
    return path


@pytest.fixture(scope="module")
def rail_trajectory():
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.shot.export import trajectory_for

    robot = load_robot("rail_arm6")
    joints = robot.mid_configuration() + 0.01 * np.outer(np.arange(5), np.ones(robot.dof))
    return trajectory_for(robot, robot.path.read_text(), np.arange(1, 6), joints, 24.0)


@pytest.mark.parametrize("joint, kind", [("rail_joint", "hinge"), ("elbow_joint", "slide"), ("elbow_joint", "ball"),
                                         ("rail_joint", "free")])
def test_a_model_joint_of_another_kind_is_refused(tmp_path, rail_trajectory, joint, kind):
    pytest.importorskip("mujoco")
    from kinema_nodes.core.shot.export import write_mujoco

    model = _mjcf(tmp_path, {joint: kind})
    with pytest.raises(KinemaError) as caught:
        write_mujoco(tmp_path / "qpos.npz", rail_trajectory, model)
    assert_one_line(caught.value, f"'{joint}'", f"{kind} joint", "refusing")
    assert not (tmp_path / "qpos.npz").exists()


def test_a_model_whose_kinds_agree_is_written(tmp_path, rail_trajectory):
    pytest.importorskip("mujoco")
    from kinema_nodes.core.shot.export import write_mujoco

    path, arrays = write_mujoco(tmp_path / "qpos.npz", rail_trajectory, _mjcf(tmp_path, {}))
    assert path.is_file() and np.allclose(arrays["qpos"], rail_trajectory.joints)


# ---- reach maps -------------------------------------------------------------------------------

def _good_map(robot_name: str = "arm6"):
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.reach import ReachMap

    robot = load_robot(robot_name)
    centres = np.array([[x, y, 0.3] for y in (0.0, 0.1) for x in (0.2, 0.3)], dtype=float)
    orientations = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
    reached = np.array([[True, False], [True, True], [False, False], [True, False]])
    witness = np.where(reached[..., None], 0.1, np.nan) * np.ones((4, 2, robot.dof))
    return ReachMap(robot.name, robot.tool_point, list(robot.actuated_joint_names), centres, (2, 2, 1), 0.1, orientations,
                    reached, witness)


def _saved(tmp_path: Path, reach_map, **changes) -> Path:
    path = tmp_path / "map.npz"
    reach_map.save(path)
    if changes:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        arrays.update(changes)
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)
    return path


@pytest.mark.parametrize("change, fragment", [
    ("nan_centre", "not finite"),
    ("inf_centre", "not finite"),
    ("shape_wrong", "grid shape"),
    ("step_nan", "cell size"),
    ("reached_floats", "'reached'"),
    ("witness_of_other_joints", "witness"),
    ("object_array", "cannot be read"),
])
def test_a_broken_reach_map_is_refused_before_drawing(tmp_path, change, fragment):
    from kinema_nodes.core.reach import load_map

    reach_map = _good_map()
    centres = reach_map.centres.copy()
    changes = {
        "nan_centre": lambda: {"centres": np.where(np.arange(12).reshape(4, 3) == 4, np.nan, centres)},
        "inf_centre": lambda: {"centres": np.where(np.arange(12).reshape(4, 3) == 0, np.inf, centres)},
        "shape_wrong": lambda: {"shape": np.array([1000, 1000, 1000])},
        "step_nan": lambda: {"step": np.float64(np.nan)},
        "reached_floats": lambda: {"reached": reach_map.reached.astype(float)},
        "witness_of_other_joints": lambda: {"witness": np.zeros((4, 2, 3))},
        "object_array": lambda: {"centres": np.array([{"a": 1}, None], dtype=object)},
    }[change]()
    path = _saved(tmp_path, reach_map, **changes)
    with pytest.raises(KinemaError) as caught:
        load_map(path)
    assert_one_line(caught.value, "map.npz", fragment)


def test_a_fifo_as_reach_map_is_refused_without_blocking(tmp_path):
    from kinema_nodes.core.reach import load_map

    fifo = tmp_path / "map.npz"
    os.mkfifo(fifo)
    _, error = within(30, "loading a FIFO as a reach map", lambda: load_map(fifo))
    assert isinstance(error, KinemaError)
    assert_one_line(error, "not a regular file")


def test_a_good_reach_map_loads(tmp_path):
    from kinema_nodes.core.reach import load_map

    loaded = load_map(_saved(tmp_path, _good_map()))
    assert loaded.shape == (2, 2, 1) and math.isclose(loaded.index[1], 1.0)


def test_blender_refuses_a_reach_map_of_another_robot_on_a_rig(blender, tmp_path):
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.reach import import_reach_map

    rig = import_urdf(blender.context, "arm6")
    before = len(blender.data.objects)
    path = _saved(tmp_path, _good_map("arm7"))
    with pytest.raises(KinemaError) as caught:
        import_reach_map(blender.context, path, parent=rig)
    assert_one_line(caught.value, "arm7", "arm6", "refusing")
    assert len(blender.data.objects) == before
    obj = import_reach_map(blender.context, _saved(tmp_path, _good_map("arm6")), parent=rig)
    assert len(obj.data.vertices) == 3 and obj.parent == rig


def test_blender_refuses_a_reach_map_with_nan_centres(blender, tmp_path):
    from kinema_nodes.blender.reach import import_reach_map

    reach_map = _good_map()
    centres = reach_map.centres.copy()
    centres[1, 2] = np.nan
    before = len(blender.data.objects)
    with pytest.raises(KinemaError) as caught:
        import_reach_map(blender.context, _saved(tmp_path, reach_map, centres=centres))
    assert_one_line(caught.value, "not finite")
    assert len(blender.data.objects) == before


# ---- no internal errors --------------------------------------------------------------------------

def _keyed_far_out(blender, tmp_path: Path) -> tuple[object, Path]:
    """arm6's rig with its first joint keyed at frames 1, 10 and 10,000,000, saved."""
    from kinema_nodes.blender.animation import pose_bone_path
    from kinema_nodes.blender.baking import channelbag, ensure_fcurve, write_keys
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import SLIDE, actuated_channels, robot_for_rig
    from kinema_nodes.cli.headless import save_blend

    rig = import_urdf(blender.context, "arm6")
    channel = actuated_channels(robot_for_rig(rig))[0]
    index = 0 if channel.data_path == SLIDE else channel.index
    curve = ensure_fcurve(channelbag(rig), pose_bone_path(channel.bone, channel.data_path), index, channel.bone)
    write_keys(curve, np.array([1.0, 10.0, 10_000_000.0]), np.array([0.0, 0.1, 0.2]))
    return rig, save_blend(blender, tmp_path / "far.blend")


def test_a_key_far_outside_the_shot_is_refused_before_the_export(blender, tmp_path):
    from kinema_nodes.blender.limits import rig_trajectory

    rig, _ = _keyed_far_out(blender, tmp_path)
    _, error = within(60, "reading a rig keyed at frame 10,000,000", lambda: rig_trajectory(rig, blender.context.scene))
    assert isinstance(error, KinemaError), error
    assert_one_line(error, "10000000", "--frames")
    trajectory = rig_trajectory(rig, blender.context.scene, (1, 10))  # the shot itself exports
    assert len(trajectory.frames) == 10


def test_export_cli_of_a_key_far_outside_the_shot_exits_2(blender, tmp_path):
    _, shot = _keyed_far_out(blender, tmp_path)
    result = run_cli("export", shot, "--format", "csv", "--out", tmp_path / "joints.csv", timeout=180)
    assert_cli_refusal(result, "more than 100,000", "--frames")
    assert not (tmp_path / "joints.csv").exists()
    result = run_cli("export", shot, "--format", "csv", "--out", tmp_path / "joints.csv", "--frames",
                     "1:99999999999999999999999", timeout=180)
    assert_cli_refusal(result, "outside the baked range")


def test_a_manifest_nested_200000_deep_exits_2(tmp_path):
    manifest = tmp_path / "deep.json"
    manifest.write_text("[" * 200_000 + "]" * 200_000)
    assert_cli_refusal(run_cli("batch", manifest, timeout=60), "nested too deep")


@pytest.mark.parametrize("args, fragment", [
    (["solve", "--target", "0.4", "0", "0.4", "1", "0", "0", "0", "--", "--robot"], "--robot"),
    (["solve", "--robot", "--targets", "x.csv"], "required: --target"),
    (["info", "--", "--json"], "no robot of that name"),
    (["bake", "arm6", "--targets", "--out", "x.blend"], "--targets"),
    (["reach", "arm6", "--scheduler", "--workers", "2"], "--scheduler"),
    (["export", "--format", "csv", "--out", "x.csv", "--", "--rig"], "--rig"),
])
def test_an_option_name_given_as_a_value_exits_2(tmp_path, args, fragment):
    result = run_cli(*args, timeout=60, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-800:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("usage:")
             and not line.startswith(" ")]
    assert len(lines) == 1 and fragment.lower() in lines[0].lower(), result.stderr
