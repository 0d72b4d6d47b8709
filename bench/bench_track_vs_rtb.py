"""Tracking, Kinema `prepare(...).solve` against roboticstoolbox's C++ `ik_LM` only, finely interleaved (#13).

The tracking target is a ratio to the fastest peer (rtb `ik_LM`), and on this shared 2-core machine a
4-block `bench_peers.py` run moves that ratio by +-30 % from run to run. Here the two solvers alternate
REPS times over the same 300 frames (`core.solve._bench.tracking_cases`, seed 0), each seeded from its
own previous answer; the figure is the median over reps of each rep's median frame.

    bench/.venv-peers/bin/python bench/bench_track_vs_rtb.py [REPS] [robots]
    KINEMA_SOURCE=/path/to/other/checkout bench/.venv-peers/bin/python bench/bench_track_vs_rtb.py 15

(KINEMA_SOURCE measures another checkout, as for bench_peers.py.)
"""
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_peers as bp  # noqa: E402  (puts KINEMA_SOURCE or this checkout on sys.path)
from kinema_nodes.core.model.kinematics import link_pose  # noqa: E402
from kinema_nodes.core.solve import SolveOptions, _kernel, prepare  # noqa: E402
from kinema_nodes.core.solve._bench import tracking_cases  # noqa: E402

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
ROBOTS = sys.argv[2].split(",") if len(sys.argv) > 2 else [name for name, _ in bp.ROBOTS]
N = int(os.environ.get("FRAMES", 300))


def main() -> None:
    _kernel.kernel_status(wait=True)
    links = dict(bp.ROBOTS)
    tmp = Path(tempfile.mkdtemp())
    for name in ROBOTS:
        case = bp.Case(name, links[name], tmp)
        rtb = bp.RtbSolver("ik_LM")
        rtb.setup(case)
        targets, truth, traj = tracking_cases(case.robot, case.link, N, 0)
        poses = link_pose(case.robot, truth, case.link)
        prepared = prepare(case.robot, [case.link], SolveOptions(backend="numpy", cold=False))
        positions = [np.ascontiguousarray(targets[i, :3]).reshape(1, 3) for i in range(N)]
        wxyz = [np.ascontiguousarray(targets[i, 3:7]).reshape(1, 4) for i in range(N)]
        matrices = [np.ascontiguousarray(poses[i]) for i in range(N)]

        def kinema():
            previous, times, iterations = None, [], []
            for i in range(N):
                start = truth[i] if previous is None or traj[i] != traj[i - 1] else previous
                t = time.perf_counter()
                result = prepared.solve(positions[i], wxyz[i], start)
                times.append(time.perf_counter() - t)
                previous = result.joints
                iterations.append(result.iterations)
            return np.median(times), np.mean(iterations)

        def peer():
            previous, times, iterations = None, [], []
            for i in range(N):
                start = truth[i][case.index] if previous is None or traj[i] != traj[i - 1] else previous
                t = time.perf_counter()
                answer = rtb.call(matrices[i], q0=start, tol=5e-11, joint_limits=True)
                times.append(time.perf_counter() - t)
                previous = np.asarray(answer[0], float)
                iterations.append(answer[2])
            return np.median(times), np.mean(iterations)

        kinema()
        peer()
        ours, theirs = [], []
        for rep in range(REPS):
            pairs = ((kinema, ours), (peer, theirs))
            for run, out in (pairs if rep % 2 == 0 else pairs[::-1]):
                out.append(run())
        k = np.median([m for m, _ in ours])
        r = np.median([m for m, _ in theirs])
        print(f"{name}: Kinema prepare {k * 1e6:.2f} us ({ours[0][1]:.2f} iterations), rtb ik_LM {r * 1e6:.2f} us "
              f"({theirs[0][1]:.2f} iterations), ratio {k / r:.2f}", flush=True)


if __name__ == "__main__":
    main()
