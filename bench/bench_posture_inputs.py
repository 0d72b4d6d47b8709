"""What the posture's own answer costs a redundant arm's tracking frame (#29, item 13).

Why: since `_kernel_maths._settle_by_inputs` every converged frame of a redundant arm with a
posture runs a second descent, from the posture itself, and slides it too, so that the frame's
answer depends on its inputs only. This measures `solve` per frame as bench_ik's
`posture_tracking` does (the pose 40 % up each joint's range as the posture, 500 tracking
frames, seed 0), on the arms of that table plus simple_humanoid's arm with its waist.

    PYTHONPATH=$PWD python bench/bench_posture_inputs.py [--n 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ARMS = (("baxter", "right_gripper_base_link"), ("tiago_pro", "arm_left_tool_link"), ("simple_humanoid", "r_wrist"))


def main() -> None:
    from bench_ik import posture_tracking

    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.solve import kernel_status

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    kernel_status(wait=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f}; kernel: {kernel_status()[0]}")
    print("| arm | N | success | median ms | p95 ms | p99 ms | CPU s (all frames) |")
    print("|---|---|---|---|---|---|---|")
    for name, link in ARMS:
        robot = load_robot(name, check_meshes=False)
        cpu = time.process_time()
        r = posture_tracking(robot, link, args.n, 0)
        cpu = time.process_time() - cpu
        print(f"| {name} -> {link} | {args.n} | {r['success_rate']:.2%} | {r['median_ms']:.3f} | {r['p95_ms']:.3f} | "
              f"{r['p99_ms']:.3f} | {cpu:.2f} |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
