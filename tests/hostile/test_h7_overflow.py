"""Class 7: overflow and NaN. A quaternion of (1e200, 1e200, 0, 0) is the 90-degree turn it
means (normalised with scaling); NaN, inf or a value float32 cannot hold never reaches a rig:
the one place joint values are written and the one place keys are written both refuse it
before touching anything.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.kinematics import link_pose
from kinema_nodes.core.model.rotations import matrix_to_quaternion, normalised, quaternion_to_matrix
from kinema_nodes.core.solve import IKTarget, SolveOptions, check_targets, solve

from corpus import assert_one_line, run_cli

QUARTER_TURN_X = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], dtype=float)


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e300, 1.0])
def test_huge_or_tiny_quaternion_is_the_turn_it_means(scale):
    assert np.allclose(quaternion_to_matrix(np.array([1.0, 1.0, 0.0, 0.0]) * scale), QUARTER_TURN_X, atol=1e-12)


def test_zero_quaternion_normalises_to_nan_for_the_caller_to_refuse():
    assert np.all(np.isnan(normalised(np.zeros(4))))


@pytest.mark.parametrize("quaternion, fragment", [((0.0, 0.0, 0.0, 0.0), "zero length"), ((1e-300, 0.0, 0.0, 0.0), "zero length"),
                                                  ((float("nan"), 1.0, 0.0, 0.0), "not finite"), ((float("inf"), 0, 0, 0), "not finite")])
def test_unusable_quaternion_is_refused(robots, quaternion, fragment):
    robot = robots("arm6")
    with pytest.raises(KinemaError) as caught:
        check_targets(robot, IKTarget(robot.tool_point, (0.3, 0.1, 0.4), quaternion))
    assert_one_line(caught.value, fragment)


def test_solve_with_1e200_quaternion_reaches_the_pose_it_means(robots):
    robot = robots("arm6")
    q_goal = robot.mid_configuration() + 0.3
    pose = link_pose(robot, q_goal, robot.tool_point)
    wxyz = matrix_to_quaternion(pose)
    options = SolveOptions(backend="numpy", budget_ms=5000.0)
    plain = solve(robot, IKTarget(robot.tool_point, pose[:3, 3], wxyz), robot.mid_configuration(), options)
    huge = solve(robot, IKTarget(robot.tool_point, pose[:3, 3], wxyz * 1e200), robot.mid_configuration(), options)
    assert plain.converged and huge.converged
    reached = link_pose(robot, huge.joints, robot.tool_point)
    assert np.allclose(reached[:3, :3], pose[:3, :3], atol=1e-4) and np.allclose(reached[:3, 3], pose[:3, 3], atol=1e-4)


def test_cli_solve_with_1e200_quaternion_matches_the_unit_one(tmp_path):
    common = ["solve", "arm6", "--solver", "numpy", "--json", "--budget-ms", "2000"]
    unit = run_cli(*common, "--target", "0.4", "0.1", "0.4", "0.70710678", "0.70710678", "0", "0")
    huge = run_cli(*common, "--target", "0.4", "0.1", "0.4", "1e200", "1e200", "0", "0")
    assert unit.returncode in (0, 3) and huge.returncode == unit.returncode, huge.stderr
    a, b = json.loads(unit.stdout), json.loads(huge.stdout)
    assert np.allclose(list(a["joints"].values()), list(b["joints"].values()), atol=1e-6)


# ---- never into a rig ---------------------------------------------------------------------

def _pose_state(rig):
    return [tuple(round(v, 9) for v in (*b.location, *b.rotation_quaternion, *b.rotation_euler)) for b in rig.pose.bones]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e39])
def test_joint_values_that_cannot_be_held_are_refused_before_any_bone_moves(blender, bad):
    from kinema_nodes.blender import rig as rig_module
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(blender.context, "arm6")
    robot = rig_module.robot_for_rig(rig)
    before = _pose_state(rig)
    q = robot.mid_configuration()
    q[-1] = bad  # the last wrist joint is continuous: no limit clamps it
    with pytest.raises(KinemaError) as caught:
        rig_module.write_joint_values(rig, robot, q)
    assert_one_line(caught.value, robot.actuated_joint_names[-1])
    assert _pose_state(rig) == before


@pytest.mark.parametrize("frames, values", [
    ([1.0, 2.0, 3.0], [0.0, float("nan"), 1.0]),
    ([1.0, 2.0, 3.0], [0.0, float("inf"), 1.0]),
    ([1.0, 2.0, 3.0], [0.0, 1e39, 1.0]),
    ([1.0, float("nan"), 3.0], [0.0, 0.5, 1.0]),
    ([1.0, 2.0], [0.0, 0.5, 1.0]),
])
def test_keys_that_cannot_be_held_are_refused_before_the_curve_changes(blender, frames, values):
    from kinema_nodes.blender.baking import write_keys

    bpy = blender
    obj = bpy.data.objects.new("Keyed", None)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = (0.0, 0.0, 0.0)
    obj.keyframe_insert("location", index=0, frame=2)
    fcurve = next(c for c in _fcurves(obj) if c.data_path == "location" and c.array_index == 0)
    before = [tuple(p.co) for p in fcurve.keyframe_points]
    with pytest.raises(KinemaError) as caught:
        write_keys(fcurve, np.array(frames), np.array(values))
    assert_one_line(caught.value, "location")
    assert [tuple(p.co) for p in fcurve.keyframe_points] == before
    assert all(math.isfinite(c) for p in fcurve.keyframe_points for c in p.co)


def _fcurves(obj):
    from kinema_nodes.blender.baking import channelbag  # slotted actions (4.4+) or a legacy action

    return list(channelbag(obj).fcurves)


def test_bake_of_1e200_quaternions_writes_no_nan_into_the_blend(tmp_path):
    """The issue's case end to end: a CSV whose rotations are (1e200, 1e200, 0, 0)-scale is
    baked; every key and every pose-bone channel in the saved .blend is finite."""
    import subprocess
    import sys

    targets = tmp_path / "targets.csv"
    targets.write_text("frame,x,y,z,qw,qx,qy,qz\n" + "".join(
        f"{frame},0.4,{0.1 + 0.01 * frame},0.4,0,1e200,1e200,0\n" for frame in range(1, 5)))
    out = tmp_path / "bake.blend"
    result = run_cli("bake", "arm6", "--targets", targets, "--out", out, "--solver", "numpy")
    assert result.returncode in (0, 3), result.stderr[-1500:]
    script = (
        "import bpy, math, os\n"
        f"bpy.ops.wm.open_mainfile(filepath={str(out)!r})\n"
        "values = []\n"
        "for action in bpy.data.actions:\n"
        "    curves = list(getattr(action, 'fcurves', []) or [])\n"
        "    for layer in getattr(action, 'layers', []):\n"
        "        for strip in layer.strips:\n"
        "            for bag in strip.channelbags:\n"
        "                curves += list(bag.fcurves)\n"
        "    values += [c for f in curves for p in f.keyframe_points for c in p.co]\n"
        "for obj in bpy.data.objects:\n"
        "    if obj.pose:\n"
        "        values += [v for b in obj.pose.bones for v in (*b.location, *b.rotation_quaternion, *b.rotation_euler)]\n"
        "print('VALUES', len(values), 'BAD', sum(not math.isfinite(v) for v in values))\n"
        "os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    line = next(x for x in done.stdout.splitlines() if x.startswith("VALUES"))
    count, bad = int(line.split()[1]), int(line.split()[3])
    assert count > 20 and bad == 0, line
