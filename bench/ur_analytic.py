"""The published closed-form inverse kinematics of the UR5 (Hawkins 2013, "Analytic Inverse
Kinematics for the Universal Robots UR-5/UR-10 Arms"): the oracle that Find Solutions is
measured against. Not product code: benchmarks and tests import it.

Hawkins works in the Denavit-Hartenberg frames of the UR5. Our bundled `arm6` and
example-robot-data's `ur5` are ROS URDFs with the same joint angles but different base and
flange frames; `UrOracle` measures those two constant transforms once from the URDF's own
forward kinematics, so the oracle answers in URDF terms: poses of the flange link in the
robot's root frame, joint vectors in `robot.actuated_joint_names` order.
"""

from __future__ import annotations

import numpy as np

#: UR5 DH parameters (Universal Robots).
D1, A2, A3, D4, D5, D6 = 0.089159, -0.425, -0.39225, 0.10915, 0.09465, 0.0823
_D = (D1, 0.0, 0.0, D4, D5, D6)
_A = (0.0, A2, A3, 0.0, 0.0, 0.0)
_ALPHA = (np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0)


def dh_transform(theta: float, i: int) -> np.ndarray:
    c, s = np.cos(theta), np.sin(theta)
    ca, sa = np.cos(_ALPHA[i]), np.sin(_ALPHA[i])
    return np.array([[c, -s * ca, s * sa, _A[i] * c], [s, c * ca, -c * sa, _A[i] * s], [0, sa, ca, _D[i]], [0, 0, 0, 1.0]])


def dh_forward(q) -> np.ndarray:
    pose = np.eye(4)
    for i, theta in enumerate(q):
        pose = pose @ dh_transform(theta, i)
    return pose


def dh_inverse(pose: np.ndarray) -> np.ndarray:
    """Every solution (up to 8) of the DH flange pose, each joint in (-pi, pi]. (k, 6)."""
    pose = np.asarray(pose, dtype=float)
    p05 = pose @ np.array([0.0, 0.0, -D6, 1.0])
    radius = np.hypot(p05[0], p05[1])
    if radius < abs(D4):
        return np.empty((0, 6))
    psi = np.arctan2(p05[1], p05[0])
    phi = np.arccos(np.clip(D4 / radius, -1.0, 1.0))
    solutions = []
    inverse_pose = np.linalg.inv(pose)
    for theta1 in (np.pi / 2 + psi + phi, np.pi / 2 + psi - phi):
        s1, c1 = np.sin(theta1), np.cos(theta1)
        cos5 = (pose[0, 3] * s1 - pose[1, 3] * c1 - D4) / D6
        if abs(cos5) > 1.0 + 1e-9:
            continue
        for sign5 in (1.0, -1.0):
            theta5 = sign5 * np.arccos(np.clip(cos5, -1.0, 1.0))
            s5 = np.sin(theta5)
            if abs(s5) < 1e-9:
                theta6 = 0.0  # wrist singularity: theta6 is free; any value is a solution
            else:
                theta6 = np.arctan2((-inverse_pose[1, 0] * s1 + inverse_pose[1, 1] * c1) / s5,
                                    (inverse_pose[0, 0] * s1 - inverse_pose[0, 1] * c1) / s5)
            t01 = dh_transform(theta1, 0)
            t45 = dh_transform(theta5, 4)
            t56 = dh_transform(theta6, 5)
            t14 = np.linalg.inv(t01) @ pose @ np.linalg.inv(t45 @ t56)
            p13 = t14 @ np.array([0.0, -D4, 0.0, 1.0]) - np.array([0, 0, 0, 1.0])
            length2 = float(p13 @ p13)
            cos3 = (length2 - A2 * A2 - A3 * A3) / (2 * A2 * A3)
            if abs(cos3) > 1.0 + 1e-9:
                continue
            for sign3 in (1.0, -1.0):
                theta3 = sign3 * np.arccos(np.clip(cos3, -1.0, 1.0))
                theta2 = -np.arctan2(p13[1], -p13[0]) + np.arcsin(np.clip(A3 * np.sin(theta3) / np.sqrt(length2), -1.0, 1.0))
                t13 = dh_transform(theta2, 1) @ dh_transform(theta3, 2)
                t34 = np.linalg.inv(t13) @ t14
                theta4 = np.arctan2(t34[1, 0], t34[0, 0])
                solutions.append([theta1, theta2, theta3, theta4, theta5, theta6])
    solutions = np.array(solutions, dtype=float).reshape(-1, 6)
    return (solutions + np.pi) % (2 * np.pi) - np.pi


class UrOracle:
    """Closed-form IK of a UR5-kinematics URDF (`arm6`, `ur5`) in that URDF's own terms."""

    def __init__(self, robot, flange: str):
        from kinema_nodes.core.model.kinematics import link_pose

        self.robot = robot
        self.flange = flange
        self.arm = [robot.joint_index(n) for n in robot.chain_joint_names(flange) if not robot.is_prismatic[robot.joint_index(n)]]
        if len(self.arm) != 6:
            raise ValueError(f"{robot.name}: expected 6 revolute joints to '{flange}'")
        base_q = robot.zero_configuration()
        self._base_q = base_q
        # URDF flange = base @ DH(q) @ tool for constant base, tool: measure them at q = 0 with the
        # base as a pure rotation about z (the ROS UR base is the DH base turned by pi).
        urdf0 = link_pose(robot, base_q, flange)
        dh0 = dh_forward(np.zeros(6))
        best = None
        rng = np.random.default_rng(0)
        probes = rng.uniform(-np.pi, np.pi, size=(5, 6))
        for base_angle in (0.0, np.pi / 2, np.pi, -np.pi / 2):
            c, s = np.cos(base_angle), np.sin(base_angle)
            base = np.eye(4)
            base[:2, :2] = [[c, -s], [s, c]]
            tool = np.linalg.inv(base @ dh0) @ urdf0
            error = 0.0
            for probe in probes:
                q = base_q.copy()
                q[self.arm] = probe
                error += np.abs(link_pose(robot, q, flange) - base @ dh_forward(probe) @ tool).max()
            if best is None or error < best[0]:
                best = (error, base, tool)
        if best[0] > 1e-6:
            raise ValueError(f"{robot.name}: not UR5 kinematics (DH mismatch {best[0]:.2e})")
        self.base, self.tool = best[1], best[2]

    def solutions(self, flange_pose: np.ndarray) -> np.ndarray:
        """Every closed-form branch (k, robot.dof), joints in (-pi, pi], others as at zero."""
        dh_pose = np.linalg.inv(self.base) @ np.asarray(flange_pose, dtype=float) @ np.linalg.inv(self.tool)
        branches = dh_inverse(dh_pose)
        out = np.tile(self._base_q, (len(branches), 1))
        out[:, self.arm] = branches
        return out
