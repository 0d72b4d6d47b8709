"""placo's side of bench/bench_peers.py: placo needs numpy >= 2, so it runs in its own venv.

    python3.11 -m venv bench/.venv-placo && bench/.venv-placo/bin/pip install 'numpy>=2' placo
    bench/.venv-placo/bin/python bench/peers_placo.py REQUEST.npz ANSWER.npz

REQUEST.npz (written by bench_peers.py): the stripped chain URDF, tip frame, chain joint names,
limits, target poses (n, 4, 4), seeds (n, k), trajectory index per frame, cold flag. Each case runs
a `KinematicsSolver` with one soft frame task on the tip (fixed base, joint limits on), iterating
`solve` until placo's own FK is within the tolerance; from a restart seed within limits after 30
iterations, until 33 ms have passed. Tracking frames start from placo's previous answer. ANSWER.npz:
q (n, k) chain joint values and ms (n,) per-solve wall time, measured here after 10 warm-up solves.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import placo


def main(request: str, answer: str) -> int:
    data = np.load(request)
    urdf, tip = str(data["urdf"]), str(data["tip"])
    chain = [str(name) for name in data["chain"]]
    lower, upper, continuous = data["lower"], data["upper"], data["continuous"]
    targets, seeds, trajectory, cold = data["targets"], data["seeds"], data["trajectory"], bool(data["cold"])
    tol, budget = float(data["tol"]), float(data["budget_s"])
    robot = placo.RobotWrapper(urdf, placo.Flags.ignore_collisions)
    robot.set_T_world_fbase(np.eye(4))
    solver = placo.KinematicsSolver(robot)
    solver.mask_fbase(True)
    solver.enable_joint_limits(True)
    solver.enable_velocity_limits(False)
    task = solver.add_frame_task(tip, np.eye(4))
    task.configure(tip, "soft", 1.0, 1.0)
    rng = np.random.default_rng(3)
    lo = np.where(continuous, -np.pi, lower)
    hi = np.where(continuous, np.pi, upper)

    def set_q(q):
        for name, value in zip(chain, q):
            robot.set_joint(name, float(value))
        robot.update_kinematics()

    def get_q():
        return np.array([robot.get_joint(name) for name in chain])

    def close(T):
        now = robot.get_T_world_frame(tip)
        d = now[:3, :3].T @ T[:3, :3]
        angle = np.arccos(np.clip((np.trace(d) - 1.0) / 2.0, -1.0, 1.0))
        return np.linalg.norm(now[:3, 3] - T[:3, 3]) <= tol and angle <= tol

    def one(T, seed):
        start = time.perf_counter()
        task.T_world_frame = T
        set_q(seed)
        while True:
            for _ in range(30):
                solver.solve(True)
                robot.update_kinematics()
                if close(T):
                    return get_q()
            if time.perf_counter() - start > budget:
                return get_q()
            set_q(rng.uniform(lo, hi))

    for i in range(int(data["warmup"])):
        one(targets[i % len(targets)], seeds[i % len(seeds)])
    n = len(targets)
    q_out, ms = np.zeros((n, len(chain))), np.zeros(n)
    previous = None
    for i in range(n):
        new_run = cold or previous is None or trajectory[i] != trajectory[i - 1]
        seed = seeds[i] if new_run else previous
        t = time.perf_counter()
        q = one(targets[i], seed)
        ms[i] = (time.perf_counter() - t) * 1000.0
        q_out[i] = previous = q
    np.savez(answer, q=q_out, ms=ms)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
