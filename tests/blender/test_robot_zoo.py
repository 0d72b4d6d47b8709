"""A new user's first ten minutes on robots this suite never chose (#29's robot zoo).

Every robot comes from a package the test extra installs: example-robot-data's URDFs, robosuite's
and robosuite-models' MJCF models, and rtb-data's URDF and xacro files (roboticstoolbox's model
package). Thirteen of the 46 were in a test before issue #29's first commit (2026-12-03), found
by `git grep -w` of their names at e18e8f0: ur3_gripper, ur5_gripper, tiago_pro, simple_humanoid,
robosuite's kinova3, ur5e, jaco and iiwa, and, by their file names, ur3_joint_limited_robot,
ur10_joint_limited_robot, tiago_no_hand, romeo_small and icub_reduced. So the zoo holds 33 robots
new to the suite (the issue asks 30). Ten more joined on 2026-12-06 (rtb-data's QUT Frankie
xacros: a Panda on a turning base, on an omnidirectional base, and two Pandas; its Ridgeback, a
mobile base alone; example-robot-data's xArm7, full TALOS, PR2, A1, Allegro hand and Solo12), 56
in all; the
first found a base seeded across its +-999999 rad limits (tests/core/test_free_turning_joints.py). Each is driven only through the operators, as a person would, with the
default solver and the default budget:

1. File ▸ Import ▸ Robot;
2. Add IK Target: the pose unchanged to the bit;
3. 20 drags to poses the arm can reach (a small step along its joints each), and one 3 m out of
   reach and straight back: each reachable drag lands the tool on the control, none pauses live
   updates, the far one says "out of reach";
4. Shift+D, then both rigs driven: each follows its own control, the other stays put;
5. a keyed loop scrubbed forward, backward and by jumps: the same pose on each frame;
6. Bake: the keys are what playback showed;
7. Find Solutions: an answer (or a one-line refusal) within a stated memory (tracemalloc, NumPy's
   arrays included).

Poses are judged by the robot file's own FK: yourdfpy for a URDF, MuJoCo's mj_kinematics for an
MJCF model (rig_helpers.IndependentFK). Tolerances: a reached pose 1e-5 m and 1e-5 rad; a frame's
pose forward, backward and jumped to 1e-4 rad (tests/blender/test_animator_workflow.py's bound);
bake against playback 1e-6 rad; Find Solutions' peak 512 MB.

Two robots run by default (QUICK: a 6-axis URDF arm and a 7-axis MJCF arm); the rest are marked
slow (`pytest -m slow tests/blender/test_robot_zoo.py`, about 60 s for all 46 on one core). The
whole zoo passed in the default run on all three CI legs once, then failed once under CI's load on
bpy 4.5: rtb_px100 (4 moving joints) stopped short of an interpolated pose it cannot reach with
"over budget" instead of "out of reach". Which of the two a stop-short search says depends on the
clock, so the slow mark stays until such answers do not.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from rig_helpers import IndependentFK, joints_of, pose_error, robot_of, set_joints, walk
from robot_zoo_robots import ZOO, robot_file

#: Open findings on the zoo, each a real miss kept visible as a non-strict xfail
#: rather than dropped. Fixed since the first measure (2026-12-03): tiago_dual and tiago_pro (3 runs
#: in a row each), simple_humanoid and talos_reduced (a slide from the posture itself decides between
#: the minima of a long redundant chain: core/solve/_kernel_maths.py `_settle_by_inputs`) and
#: hextilt_flying_arm_5 (eight polish steps: core/solve/_polish.py); tests/core/test_frame_inputs_decide.py.
OPEN = {
    "robosuite_ur5e": "#29: the keyed loop passes 0.2 mm outside the workspace at frame 15, where two of the arm's "
                      "branches (0.41 rad apart at frame 14, in shoulder_pan and wrist_2) meet; the stop-short answer there "
                      "is the same from both sides (1.2e-7 rad), but continuity then carries the arm onto the other "
                      "branch, so frames 1-14 and 40 differ by up to 0.98 rad forward against backward (measured "
                      "2026-12-04). Continuity cannot name 'the same branch' past the fold; a rule that picks it from the "
                      "inputs would pop the arm elsewhere",
    "robosuite_aloha": "#29: its joints span +-3 degrees (the file's <compiler> is commented out, so MuJoCo reads its "
                       "ranges in degrees), so most of the keyed loop stops short at a limit, correctly (a cold search finds "
                       "no better). But at frame 17 the wrist is straight (wrist_angle 0.002 rad), so forearm_roll and "
                       "wrist_rotate turn about one axis: the stop-short answer is a near-continuum, and forward and backward "
                       "land 3.2e-3 rad apart along it (measured 2026-12-04). A stopped-short answer is not yet settled "
                       "toward the posture as a converged one on a spare joint is",
    "robosuite_z1": "#29: keyed near the elbow's fold (joint3 -3.05 rad, folded back on itself), every frame converges and "
                    "forward and backward agree, but a jump (frame 1 -> 27 -> 18) leads the tool along a straight line from "
                    "the last frame, not along the keyed path, and lands on the other exact answer 0.33 rad away in joints "
                    "2-4 (the same tool pose; measured 2026-12-04). A 6-axis arm's branch is chosen by continuity; a jump "
                    "that followed the keyed path would agree",
    "rtb_frankie": "a Panda on a turning base (8 moving joints, two spare): scrubbed back, frames 10-13 land 0.45-0.53 rad "
                   "from forward (panda_joint1, panda_joint2; measured 2026-12-06, NumPy and PyRoki alike). There the "
                   "answer slid from the posture itself lies about BRANCH_JUMP (0.5 rad) from the warm one, so it is taken "
                   "from one side and not from the other (core/solve/_kernel_maths.py `_settle_by_inputs`)",
    "talos": "the full TALOS (v2): scrubbed back, frames 14-18 and 24-26 land 0.09-0.18 rad from forward in "
             "arm_left_1 and arm_left_4 (measured 2026-12-06, PyRoki); the same kind as rtb_frankie: a long redundant "
             "chain whose slide toward the posture has more than one minimum",
}
#: In the default run: a 6-axis arm (URDF) and a 7-axis arm (MJCF), whose keyed frames all converge.
QUICK = ("ur5_limited", "robosuite_kinova3")
CASES = [name if name in QUICK else pytest.param(name, marks=[
    pytest.mark.slow, *([pytest.mark.xfail(reason=OPEN[name], strict=False)] if name in OPEN else [])]) for name in ZOO]

REACHED_M, REACHED_RAD = 1e-5, 1e-5
SCRUB_RAD = 1e-4
BAKE_RAD = 1e-6
FIND_SOLUTIONS_PEAK_MB = 512.0


def _drag(bpy, rig, bone_name, pose):
    from mathutils import Matrix

    rig.pose.bones[bone_name].matrix = Matrix(np.asarray(pose).tolist())
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()


def _mid_range(robot, link, q):
    """q with the chain's joints 40 % of the way through their ranges: keys posed away from the
    import pose. That pose is often a singular straight arm (a UR's elbow at 0), where one target
    fixes the elbow only to ~1e-4 rad (the tool moves < 1e-8 m across that spread), so scrubbing
    it agrees to the tool's pose but not to SCRUB_RAD in joint space (#29 item 3, still open).
    A joint that turns freely (continuous, or QUT Frankie's base: +-999999 rad) takes the turn
    around zero, as a user would pose it, not 200000 rad."""
    moving = set(robot.chain_joint_names(link)) - set(robot.held_joints(True))
    lower = np.where(robot.turns_freely, -np.pi, robot.lower)
    upper = np.where(robot.turns_freely, np.pi, robot.upper)
    chain = np.array([name in moving for name in robot.actuated_joint_names])
    return np.where(chain, lower + 0.4 * (upper - lower), q)


def _parts(rig):
    from kinema_nodes.blender.edit import rig_tree

    tree = rig_tree(rig)
    solver = next(n for n in tree.nodes if n.bl_idname == "KinemaSolverNode")
    target = next(n for n in tree.nodes if n.bl_idname == "KinemaIKTargetNode" and n.robot_rig() == rig)
    return tree, solver, target


def _paused(tree, solver) -> bool:
    from kinema_nodes.session import readout_of

    return bool(solver.over_budget or readout_of(tree, solver.name).get("paused"))


def _summary(tree, solver) -> str:
    from kinema_nodes.session import readout_of

    return readout_of(tree, solver.name).get("summary", "")


def _cold_misses(robot, link, control, start) -> bool:
    """True when the cold search (`kinema-nodes solve --cold`: seeds over the joint ranges, here
    for 300 ms) finds no configuration that puts `link` at the control's pose either."""
    from kinema_nodes.core.model.rotations import matrix_to_quaternion
    from kinema_nodes.core.solve import IKTarget, SolveOptions, solve

    goal = np.array(control.matrix, dtype=float)
    target = IKTarget(link, tuple(goal[:3, 3]), tuple(matrix_to_quaternion(goal[:3, :3])))
    options = SolveOptions(backend="numpy", cold=True, held_joints=robot.held_joints(True), budget_ms=300.0)
    return not solve(robot, target, start, options).converged


@pytest.mark.parametrize("name", CASES)
def test_a_new_user_s_first_ten_minutes(blender, name):
    bpy = blender
    # 1-2: import, Add IK Target
    from kinema_nodes.core.errors import RobotFileError

    try:
        path, packages = robot_file(name)
    except RobotFileError as error:  # robosuite 1.5.1 (the newest for Python 3.13) ships no xArm7
        pytest.skip(str(error))
    assert bpy.ops.kinema.import_urdf(filepath=path, package_path=packages) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    before = joints_of(rig)
    assert bpy.ops.kinema.add_ik_target() == {"FINISHED"}
    assert np.array_equal(joints_of(rig), before), "Add IK Target moved the arm"
    tree, solver, target = _parts(rig)
    robot = robot_of(rig)
    fk = IndependentFK(robot, packages)
    link, bone = target.link_name, target.control_bone

    # 3: drags, one far out of reach and back
    configurations = walk(robot, link, before, 20, 0.08, seed=0)
    for index, q in enumerate(configurations):
        if index == 10:
            far = fk.pose(joints_of(rig), link)
            far[:3, 3] += (3.0, 0.0, 0.0)
            _drag(bpy, rig, bone, far)
            assert "out of reach" in _summary(tree, solver), _summary(tree, solver)
            assert not _paused(tree, solver)
        goal = fk.pose(q, link)
        _drag(bpy, rig, bone, goal)
        assert not _paused(tree, solver), (index, _summary(tree, solver))
        position, angle = pose_error(fk.pose(joints_of(rig), link), goal)
        assert position <= REACHED_M and angle <= REACHED_RAD, (index, position, angle, _summary(tree, solver))

    # 4: Shift+D, then drive both
    for obj in bpy.context.selected_objects:
        obj.select_set(False)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.duplicate()
    copy = bpy.context.view_layer.objects.active
    assert copy is not rig
    _, copy_solver, copy_target = _parts(copy)
    assert copy_target.control_bone
    here, there = joints_of(rig), joints_of(copy)
    moves = walk(robot, link, there, 2, 0.08, seed=3)
    _drag(bpy, copy, copy_target.control_bone, fk.pose(moves[0], link))
    assert pose_error(fk.pose(joints_of(copy), link), fk.pose(moves[0], link))[0] <= REACHED_M
    assert np.array_equal(joints_of(rig), here), "driving the copy moved the original"
    goal = fk.pose(walk(robot, link, here, 1, 0.08, seed=4)[0], link)
    copied = joints_of(copy)
    _drag(bpy, rig, bone, goal)
    assert pose_error(fk.pose(joints_of(rig), link), goal)[0] <= REACHED_M
    assert np.array_equal(joints_of(copy), copied), "driving the original moved the copy"
    copy_solver.live = False
    copy.select_set(False)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig  # the original again: Bake and Find Solutions act on the active rig

    # 5: a keyed loop, scrubbed forward, backward and by jumps
    scene = bpy.context.scene
    mid = _mid_range(robot, link, joints_of(rig))
    solver.live = False  # the arm posed by its FK sliders first, as a user sets up a shot
    set_joints(rig, mid)
    bpy.context.view_layer.update()
    solver.live = True
    keys = dict(zip((1, 11, 21, 31), walk(robot, link, mid, 4, 0.12, seed=5)))
    keys[41] = keys[1]
    control = rig.pose.bones[bone]
    for frame, q in keys.items():
        scene.frame_set(frame)
        _drag(bpy, rig, bone, fk.pose(q, link))
        control.keyframe_insert("location", frame=frame)
        control.keyframe_insert("rotation_quaternion", frame=frame)
    scene.frame_start, scene.frame_end = 1, 41
    frames = list(range(1, 42))
    seen = {}
    underactuated = len(set(robot.chain_joint_names(link)) - set(robot.held_joints(True))) < 6
    for order in (frames, frames[::-1], [5, 33, 12, 40, 1, 27, 18]):
        for frame in order:
            scene.frame_set(frame)
            summary = _summary(tree, solver)
            # with fewer than 6 moving joints, a pose interpolated between two keys is in general
            # off the poses the arm can reach: stopping short there is the right answer. With 6 or
            # more, such a pose can still lie just outside (robosuite's UR5e: 0.20 mm at frame 15,
            # where a 2 s cold search stops at the same 0.199 mm): out of reach is right there only
            # if the cold search over the joint ranges finds nothing either.
            # Likewise a pose the limits keep the tool from (ALOHA's joints span +-3 degrees: its file's
            # <compiler> is commented out, so MuJoCo reads its ranges in degrees, and so do we).
            assert summary.startswith("converged") or (frame not in keys and summary.startswith(
                ("did not converge: out of reach", "did not converge: blocked by a joint limit"))
                and (underactuated or _cold_misses(robot, link, control, joints_of(rig)))), (frame, summary)
            seen.setdefault(frame, []).append(joints_of(rig))
    worst = max(float(np.max(np.abs(pose - poses[0]))) for poses in seen.values() for pose in poses)
    assert worst <= SCRUB_RAD, worst
    assert not _paused(tree, solver)

    # 6: Bake equals playback
    played = {frame: seen[frame][0] for frame in frames}
    assert bpy.ops.kinema.bake() == {"FINISHED"}
    solver.live = False
    baked = []
    for frame in frames:
        scene.frame_set(frame)
        baked.append(joints_of(rig))
    assert np.max(np.abs(np.array(baked) - np.array([played[f] for f in frames]))) <= BAKE_RAD

    # 7: Find Solutions within a stated memory
    solver.live = True
    scene.frame_set(21)
    tracemalloc.start()
    try:
        found = bpy.ops.kinema.find_solutions()
        peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert found in ({"FINISHED"}, {"CANCELLED"})
    assert peak_mb <= FIND_SOLUTIONS_PEAK_MB, peak_mb
