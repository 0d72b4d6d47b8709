"""Bake to Keyframes in real Blender: keys reproduce live IK, hand-offs, cancel, unreachable
stretches; and the bake checks on plain arrays.

Tolerances: pose bones and keys store float32, so "the same motion" is 1e-6 (radians/metres).
"""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.model.kinematics import link_pose
from rig_helpers import import_rig, joints_of, pose_and_update, robot_of

ARM7_START = [0.1, -0.3, 0.2, -2.0, 0.1, 1.6, 0.5, 0.0]


def _rig_with_target(bpy, link="flange", robot="arm7", start=ARM7_START):
    """arm7 posed at `start` with an IK target (NumPy solver) on `link`; Live IK left off."""
    from kinema_nodes.blender.edit import add_ik_target

    rig = import_rig(bpy, robot)
    pose_and_update(bpy, rig, start)
    bpy.context.view_layer.objects.active = rig
    tree, target, solver = add_ik_target(bpy.context, rig, link, backend="NUMPY")
    solver.use_own_budget, solver.budget_ms = True, 10_000.0
    solver.live = False
    return rig, tree, target, solver


def _key_control(bpy, rig, target, poses_by_frame):
    """Key the control bone at armature-space 4x4 poses {frame: pose}."""
    from mathutils import Matrix

    bone = rig.pose.bones[target.control_bone]
    for frame, pose in poses_by_frame.items():
        bone.matrix = Matrix(np.asarray(pose).tolist())
        bpy.context.view_layer.update()
        bone.keyframe_insert("location", frame=frame)
        bone.keyframe_insert("rotation_quaternion", frame=frame)


def _fk_poses(rig, link, configurations, frames):
    robot = robot_of(rig)
    return {f: link_pose(robot, np.asarray(q, dtype=float), link) for q, f in zip(configurations, frames)}


def _fcurve_data(rig):
    from kinema_nodes.blender.baking import channelbag

    bag = channelbag(rig)
    data = {}
    for fcurve in bag.fcurves:
        co = np.empty(2 * len(fcurve.keyframe_points), dtype=np.float32)
        fcurve.keyframe_points.foreach_get("co", co)
        data[(fcurve.data_path, fcurve.array_index)] = co
    return data


def test_baked_keys_reproduce_the_live_solution_on_every_frame(blender):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree

    rig, tree, target, solver = _rig_with_target(bpy)
    start = np.array(ARM7_START)
    end = start + np.array([0.4, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5, 0.0])
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start, end, start], [1, 15, 30]))
    frames = range(1, 31)

    pose_and_update(bpy, rig, start)
    solver.live = True
    live = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        live.append(joints_of(rig))
    live = np.array(live)

    solver.live = False
    pose_and_update(bpy, rig, start)
    results = bake_tree(tree, 1, 30)
    assert results is not None and len(results) == 1
    report = results[0].report
    assert report.frames == 30 and report.converged == 30
    assert solver.live is False  # the bake put Live IK back as it was

    baked = []
    for frame in frames:  # playback without the solver: the keys alone
        bpy.context.scene.frame_set(frame)
        baked.append(joints_of(rig))
    np.testing.assert_allclose(np.array(baked), live, atol=1e-6)
    np.testing.assert_allclose(results[0].solution.joints, live, atol=1e-6)
    # one key per frame on each solved joint, none on the held finger slide
    data = _fcurve_data(rig)
    robot = robot_of(rig)
    from kinema_nodes.blender.rig import joint_channel

    for name in robot.actuated_joint_names:
        bone, path, index, _ = joint_channel(robot, name)
        key = (f'pose.bones["{bone}"].{path}', index)
        if name in robot.chain_joint_names("flange"):
            assert np.array_equal(data[key][0::2], np.arange(1, 31, dtype=np.float32)), name
        else:
            assert key not in data, name


def test_a_keyed_hand_off_bakes_keys_for_every_joint_used_anywhere(blender):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.edit import key_target_link

    rig, tree, target, _ = _rig_with_target(bpy, link="link5")
    robot = robot_of(rig)
    start = np.array(ARM7_START)
    later = start + np.array([0.3, 0.2, -0.2, 0.3, 0.2, -0.3, 0.4, 0.0])
    # frames 1-10 the goal is link5's, standing still (joints 1-5 solve: a 5-joint chain reaches
    # only some 6-D poses); from 11 the flange's (joints 1-7), moving
    poses = _fk_poses(rig, "link5", [start, start], [1, 10])
    poses.update(_fk_poses(rig, "flange", [start + 0.1, later], [11, 20]))
    _key_control(bpy, rig, target, poses)
    key_target_link(target, robot, "link5", 1)
    key_target_link(target, robot, "flange", 11)

    results = bake_tree(tree, 1, 20)
    solution = results[0].solution
    assert solution.links[:10] == [("link5",)] * 10 and solution.links[10:] == [("flange",)] * 10
    assert results[0].report.converged == 20, results[0].report.to_dict()
    arm = robot.chain_joint_names("flange")
    assert sorted(results[0].keyed_joints) == sorted(arm)
    from kinema_nodes.blender.rig import joint_channel

    data = _fcurve_data(rig)
    for name in arm:  # joints 6 and 7 too, although only the second half moves them
        bone, path, index, _ = joint_channel(robot, name)
        assert np.array_equal(data[(f'pose.bones["{bone}"].{path}', index)][0::2], np.arange(1, 21, dtype=np.float32)), name
    for frame, link in ((5, "link5"), (20, "flange")):
        bpy.context.scene.frame_set(frame)
        reached = link_pose(robot, joints_of(rig), link)
        assert np.abs(reached[:3, 3] - poses[1 if frame == 5 else 20][:3, 3]).max() < 1e-5


def test_cancel_leaves_the_previous_action_intact(blender):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree

    rig, tree, target, solver = _rig_with_target(bpy)
    start = np.array(ARM7_START)
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start, start + 0.3], [1, 40]))
    assert bake_tree(tree, 1, 40) is not None
    before = _fcurve_data(rig)
    markers_before = [(m.name, m.frame) for m in bpy.context.scene.timeline_markers]
    bpy.context.scene.frame_set(7)
    joints_before = joints_of(rig)
    solver.live = True

    # a different motion, then a bake cancelled half-way (as Esc does in the UI)
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start - 0.3], [40]))
    calls = []

    def cancel_after_a_while():
        calls.append(1)
        return len(calls) > 30

    solver.live = False
    bpy.context.scene.frame_set(7)
    solver.live = True
    assert bake_tree(tree, 1, 40, should_cancel=cancel_after_a_while) is None
    assert len(calls) > 30
    after = _fcurve_data(rig)
    assert before.keys() == after.keys()
    control = f'pose.bones["{target.control_bone}"]'
    for key in [k for k in before if not k[0].startswith(control)]:  # the joints' keys
        assert np.array_equal(before[key], after[key]), key
    assert [(m.name, m.frame) for m in bpy.context.scene.timeline_markers] == markers_before
    assert bpy.context.scene.frame_current == 7
    assert solver.live is True
    solver.live = False
    bpy.context.scene.frame_set(7)
    np.testing.assert_array_equal(joints_of(rig), joints_before)


def test_an_unreachable_stretch_bakes_flags_those_frames_and_writes_no_nan(blender):
    bpy = blender
    from kinema_nodes.blender.baking import MARKER_PREFIX, bake_tree

    rig, tree, target, _ = _rig_with_target(bpy)
    robot = robot_of(rig)
    start = np.array(ARM7_START)
    near = link_pose(robot, start, "flange")
    far = near.copy()
    far[:3, 3] = [3.0, 0.0, 0.5]  # metres away: out of any arm7's reach
    _key_control(bpy, rig, target, {1: near, 8: far, 12: far, 20: near})
    results = bake_tree(tree, 1, 20)
    report = results[0].report
    assert set(range(8, 13)) <= set(report.not_converged)
    assert 1 not in report.not_converged and 20 not in report.not_converged
    assert set(report.not_converged) <= set(report.flagged)
    assert np.all(np.isfinite(results[0].solution.joints))
    for key, co in _fcurve_data(rig).items():
        assert np.all(np.isfinite(co)), key
    markers = [m for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER_PREFIX)]
    assert markers and any("not converged" in m.name for m in markers)
    assert min(m.frame for m in markers) <= 8
    payload = results[0].report.to_dict()
    import json

    json.dumps(payload, allow_nan=False)
    node = tree.nodes.get("Bake")
    assert node is None or node.report()  # a Bake node, when the tree has one, keeps the report


def test_bake_operator_adds_a_bake_node_and_keeps_the_report(blender):
    bpy = blender
    rig, tree, target, _ = _rig_with_target(bpy)
    assert bpy.types.Panel.bl_rna_get_subclass_py("KINEMA_PT_bake") is not None  # the IK panel's sub-panel
    start = np.array(ARM7_START)
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start, start + 0.2], [1, 10]))
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 10
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    node = next(n for n in tree.nodes if n.bl_idname == "KinemaBakeNode")
    assert (node.frame_start, node.frame_end) == (1, 10)
    report = node.report()[rig.name]
    assert report["frames"] == 10 and report["converged"] == 10


# ---- the checks, on plain arrays ---------------------------------------------------------------

def _solution(robot, joints, links=None, targets=None, converged=None):
    from kinema_nodes.core.shot.bake import BakeSolution

    joints = np.asarray(joints, dtype=float)
    count = len(joints)
    return BakeSolution(
        robot, np.arange(1, count + 1, dtype=float), joints,
        np.ones(count, bool) if converged is None else np.asarray(converged),
        np.zeros(count), np.zeros(count), links or [("flange",)] * count,
        np.tile(np.array([n in robot.chain_joint_names("flange") for n in robot.actuated_joint_names]), (count, 1)),
        np.tile(np.eye(4), (count, 1, 1, 1)) if targets is None else targets, [""] * count, np.zeros(count),
    )


def test_checks_flag_limits_speeds_flips_and_failures(robots):
    from kinema_nodes.core.shot.bake import check_bake

    robot = robots("arm7")
    q = np.tile(robot.mid_configuration(), (6, 1))
    j = robot.joint_index(robot.chain_joint_names("flange")[1])
    q[2, j] = robot.upper[j] - 0.001 * (robot.upper[j] - robot.lower[j])  # pressed against a limit
    q[4, 0] += 1.0  # a 1 rad jump while the target stands still: a flip, and too fast at 24 fps
    report = check_bake(_solution(robot, q, converged=[1, 1, 1, 1, 1, 0]), fps=24.0)
    assert report.not_converged == [6]
    assert report.near_limit == {3: [robot.actuated_joint_names[j]]}
    assert 5 in report.flips and 5 in report.too_fast and 6 in report.too_fast
    assert report.flagged == [3, 4, 5, 6]  # 4: joint j leaves the limit in one frame, fast
    # the same jump is no flip when the target moved as much (a fast but honest move)
    targets = np.tile(np.eye(4), (6, 1, 1, 1))
    targets[4:, 0, :3, 3] = [2.0, 0, 0]
    assert 5 not in check_bake(_solution(robot, q, targets=targets), fps=24.0).flips
    # nor at a hand-off
    links = [("flange",)] * 4 + [("link5",)] * 2
    assert 5 not in check_bake(_solution(robot, q, links=links), fps=24.0).flips
    # a generous speed limit (none at all) leaves only the other flags
    unlimited = check_bake(_solution(robot, q), fps=24.0, velocity_limits=np.full(robot.dof, np.inf))
    assert unlimited.too_fast == {}


def test_a_long_shot_solved_as_one_batch_matches_frame_by_frame(blender):
    """The PyRoki scan over frames (solve_many) gives the live, frame-by-frame answers, each within 1e-5 at the tool."""
    bpy = blender
    from kinema_nodes.blender.baking import BakeJob

    # link6: six joints for six equations (a redundant chain with a posture: the test after this one).
    rig, tree, target, solver = _rig_with_target(bpy, link="link6")
    solver.backend = "PYROKI"
    start = np.array(ARM7_START)
    end = start + np.array([0.4, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5, 0.0])
    _key_control(bpy, rig, target, _fk_poses(rig, "link6", [start, end, start], [1, 20, 40]))
    by_frame = BakeJob(tree, 1, 40, batch=False)
    by_frame.run()
    pose_and_update(bpy, rig, start)
    for fcurve in list(_channelbag_fcurves(rig)):
        if "IK_" not in fcurve.data_path:
            fcurve.keyframe_points.clear()
    batched = BakeJob(tree, 1, 40, batch_min_frames=1)
    batched.run()
    assert not batched.notes, batched.notes
    a, b = by_frame.results[0], batched.results[0]
    assert a.solution.scanned == 0 and b.solution.scanned == 40, "the batch did not run"
    assert a.report.converged == b.report.converged == 40
    assert b.report.max_position_error <= 1e-5 and b.report.max_rotation_error <= 1e-5
    # both meet 1e-5 m / 1e-5 rad at the tool; joints of this non-redundant chain then agree to ~1e-4 rad
    np.testing.assert_allclose(b.solution.joints, a.solution.joints, atol=1e-4)


def test_a_redundant_arm_with_a_posture_bakes_as_one_batch_equal_to_frame_by_frame(blender):
    """A 7-joint chain with a posture (arm7 -> flange): the PyRoki scan runs (no frame-by-frame
    fallback) and, each frame's spare joints settled toward that frame's posture, the batch
    equals the frame-by-frame bake within 1e-6 rad (the slide does not depend on the start
    within a branch, 1e-8 precision; rig float32 ~1e-7)."""
    bpy = blender
    from kinema_nodes.blender.baking import BakeJob

    rig, tree, target, solver = _rig_with_target(bpy, link="flange")
    assert len(solver.postures), "Add IK Target keeps the pose as the posture"
    solver.backend = "PYROKI"
    start = np.array(ARM7_START)
    end = start + np.array([0.4, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5, 0.0])
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start, end, start], [1, 20, 40]))
    by_frame = BakeJob(tree, 1, 40, batch=False)
    by_frame.run()
    pose_and_update(bpy, rig, start)
    for fcurve in list(_channelbag_fcurves(rig)):
        if "IK_" not in fcurve.data_path:
            fcurve.keyframe_points.clear()
    batched = BakeJob(tree, 1, 40, batch_min_frames=1)
    batched.run()
    assert not batched.notes, batched.notes
    a, b = by_frame.results[0], batched.results[0]
    assert a.solution.scanned == 0 and b.solution.scanned == 40, "the batch did not run"
    assert a.report.converged == b.report.converged == 40
    np.testing.assert_allclose(b.solution.joints, a.solution.joints, rtol=0, atol=1e-6)


def _channelbag_fcurves(rig):
    from kinema_nodes.blender.baking import channelbag

    return channelbag(rig).fcurves


def test_baking_part_of_the_range_again_replaces_only_those_keys(blender):
    bpy = blender
    from kinema_nodes.blender.baking import bake_tree
    from kinema_nodes.blender.rig import joint_channel

    rig, tree, target, _ = _rig_with_target(bpy)
    start = np.array(ARM7_START)
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start, start + 0.3], [1, 20]))
    bake_tree(tree, 1, 20)
    robot = robot_of(rig)
    bone, path, index, _ = joint_channel(robot, "joint1")
    key = (f'pose.bones["{bone}"].{path}', index)
    before = _fcurve_data(rig)[key].reshape(-1, 2)
    _key_control(bpy, rig, target, _fk_poses(rig, "flange", [start - 0.3], [20]))  # a new end pose
    bake_tree(tree, 5, 10)
    after = _fcurve_data(rig)[key].reshape(-1, 2)
    assert after[:, 0].tolist() == list(range(1, 21))  # still one key per frame, in order
    outside = (after[:, 0] < 5) | (after[:, 0] > 10)
    assert np.array_equal(after[outside], before[outside])
    assert not np.allclose(after[~outside, 1], before[~outside, 1])
