"""Find Solutions is bounded for any robot (issue #29, item 11): an answer, or a one-line
refusal, within a stated memory. Unbounded, robosuite's GR1 with both hands as targets (3 waist
and 2 x 7 arm joints: 17) found 434 "branches" of its continuum in 1.4 GB, the seeds growing
eightfold a round (a larger 17-joint mobile manipulator asked for 246 GiB); example-robot-data's
Centauro (a wheeled mobile manipulator: torso and 2 x 6 arm joints) is the second robot.

Each search runs in a fresh process whose address space is capped (RLIMIT_AS), so a search
that grows past the bound fails with MemoryError (or is killed) instead of passing. Its time is
bounded by work, not asserted in seconds: every kernel call the search makes is counted (seeds x
iterations asked; a call that only measures counts one per seed) and must stay within
`MAX_DESCENT_STEPS`, on GR1, Centauro and robosuite-models' YuMi (both arms: 14 joints).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kinema_nodes.core.model.loading import find_urdf
from kinema_nodes.core.stages.configurations import MAX_CONFIGURATIONS, MAX_DESCENT_STEPS, MAX_FREE_JOINTS

ROOT = Path(__file__).resolve().parents[2]

#: The address-space cap of the searching process: the interpreter, NumPy, numba and the
#: compiled kernel take about 1 GiB of it before the search starts (1.0 GiB: numba cannot load).
#: Bounded, GR1's search runs under 1.3 GiB; unbounded it fails under 1.5 GiB allocating its
#: third round's comparison (917 x 1208 x 32 float64).
ADDRESS_SPACE_GIB = 1.5

SEARCH_SCRIPT = textwrap.dedent(
    r'''
    import json, resource, sys
    import numpy as np
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.rotations import matrix_to_quaternion
    from kinema_nodes.core.solve import IKTarget, SolveOptions, descend_batch
    from kinema_nodes.core.stages.configurations import find_configurations, TooManyJoints
    import kinema_nodes.core.solve as solve_module

    real, steps = solve_module.descend_batch, [0]

    def counted(problem, seeds, arrays, tol_p, tol_r, iterations, *args, **kwargs):
        steps[0] += len(seeds) * max(int(iterations), 1)
        return real(problem, seeds, arrays, tol_p, tol_r, iterations, *args, **kwargs)

    solve_module.descend_batch = counted  # the search imports it from the module at each call

    path, links, offset, cap_gib = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3]), float(sys.argv[4])
    robot = load_robot(path)
    q = np.clip(robot.zero_configuration() + offset, robot.lower, robot.upper)
    targets = []
    for link in links:
        pose = link_pose(robot, q, link)
        targets.append(IKTarget(link, tuple(pose[:3, 3]), tuple(matrix_to_quaternion(pose[:3, :3]))))
    resource.setrlimit(resource.RLIMIT_AS, (int(cap_gib * 2**30),) * 2)
    report = {}
    try:
        found = find_configurations(robot, targets, q, SolveOptions(backend="numpy"), hold_prismatic=False)
        report["count"] = len(found)
        report["errors"] = [max(c.position_error, c.rotation_error) for c in found]
    except TooManyJoints as exc:
        report["refused"] = str(exc)
    report["steps"] = steps[0]
    print("REPORT " + json.dumps(report))
    '''
)


def search(path: str, links: str, offset: float) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SEARCH_SCRIPT, path, links, str(offset), str(ADDRESS_SPACE_GIB)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    line = next((line for line in done.stdout.splitlines() if line.startswith("REPORT ")), None)
    assert done.returncode == 0 and line is not None, f"rc {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(line[len("REPORT "):])


@pytest.mark.parametrize("robot, links, offset", [
    ("robosuite_gr1", "right_eef,left_eef", 0.6),   # 17 joints: unbounded, 434 branches and 1.4 GB
    ("centauro", "arm1_6,arm2_6", 0.3),    # 13 joints on a wheeled base
    ("robosuite_yumi", "right_hand,left_hand", 0.3),  # 2 x 7 joints (robosuite-models)
])
def test_a_big_robot_gets_an_answer_within_the_memory_and_work_bound(robot, links, offset):
    report = search(str(find_urdf(robot)), links, offset)
    assert 1 <= report["count"] <= MAX_CONFIGURATIONS, report
    assert 0 < report["steps"] <= MAX_DESCENT_STEPS, report
    assert max(report["errors"]) <= 1e-4, "every configuration listed reaches the targets (1e-4 m / rad)"


@pytest.mark.parametrize("robot, links", [
    ("robosuite_gr1", "right_eef,left_eef,l_foot_roll,r_foot_roll"),  # both hands and both feet: 25 joints
    ("centauro", "arm1_6,arm2_6,wheel_1,wheel_2,wheel_3,wheel_4"),
])
def test_more_joints_than_the_bound_is_a_one_line_refusal(robot, links):
    report = search(str(find_urdf(robot)), links, 0.3)
    refused = report.get("refused", "")
    assert refused.startswith(f"Find Solutions searches at most {MAX_FREE_JOINTS} joints;"), report
    assert "\n" not in refused
