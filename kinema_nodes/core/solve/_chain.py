"""Forward kinematics and Jacobian of the target links for ONE configuration, fast.

`core.model.kinematics` is batched and general; a solver calls FK hundreds of times per solve on a
single configuration, where NumPy's per-call overhead dominates. Here each target chain is
pre-digested once (fixed joints folded into the next joint's origin, axes and mimic factors
in arrays) so one evaluation is a handful of vectorised NumPy calls plus one 4x4 product per
moving joint.
"""

from __future__ import annotations

import numpy as np

from ..model.kinematics import FIXED, PRISMATIC, chain_steps
from ..model.robot import RobotModel


class TargetChain:
    """One target link's chain: moving joints with folded origins, and the fixed tip."""

    def __init__(self, robot: RobotModel, link: str):
        origins, axes, sources, multipliers, offsets, prismatic = [], [], [], [], [], []
        pending = np.eye(4)
        for step in chain_steps(robot, link):
            pending = pending @ step.origin
            if step.kind == FIXED:
                continue
            origins.append(pending)
            axes.append(step.axis)
            sources.append(step.source)
            multipliers.append(step.multiplier)
            offsets.append(step.offset)
            prismatic.append(step.kind == PRISMATIC)
            pending = np.eye(4)
        self.tip = pending
        self.count = len(origins)
        self.origins = np.array(origins).reshape(-1, 4, 4)
        self.axes = np.array(axes, dtype=float).reshape(-1, 3)
        self.sources = np.array(sources, dtype=int)
        self.multipliers = np.array(multipliers, dtype=float)
        self.offsets = np.array(offsets, dtype=float)
        self.prismatic = np.array(prismatic, dtype=bool)
        self.revolute = ~self.prismatic
        # Prismatic joints get a zero skew (no rotation) and revolute ones a zero slide, so
        # one formula serves both without branching.
        rot_axes = np.where(self.prismatic[:, None], 0.0, self.axes)
        x, y, z = rot_axes.T
        zero = np.zeros(self.count)
        self.skew = np.stack([np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1), np.stack([-y, x, zero], -1)], -2)
        self.skew2 = self.skew @ self.skew
        self.slide_axes = np.where(self.prismatic[:, None], self.axes, 0.0)
        self.linear_is_axis = self.prismatic[:, None]
        self.angular_scale = np.where(self.prismatic, 0.0, 1.0)[:, None]
        self.has_prismatic = bool(self.prismatic.any())
        self.has_mimic = bool(np.any(self.multipliers != 1.0))

    def tip_poses(self, q: np.ndarray) -> np.ndarray:
        """Tip poses only (B, 4, 4): the final float64 check needs no Jacobian."""
        values = q[:, self.sources] * self.multipliers + self.offsets
        s = np.sin(values)[..., None, None]
        c = 1.0 - np.cos(values)[..., None, None]
        motions = np.empty((q.shape[0], self.count, 4, 4))
        motions[..., :3, :3] = self.skew * s + self.skew2 * c + _EYE3
        motions[..., :3, 3] = values[..., None] * self.slide_axes
        motions[..., 3, :] = _BOTTOM
        steps = self.origins @ motions
        pose = steps[:, 0]
        for i in range(1, self.count):
            pose = pose @ steps[:, i]
        return pose @ self.tip

    def evaluate(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a batch q (B, n): tip poses (B, 4, 4) and chain Jacobians (B, 6, count), mimic
        multipliers applied. Cost is nearly flat in B, so seeds are solved side by side."""
        batch = q.shape[0]
        values = q[:, self.sources] * self.multipliers + self.offsets  # (B, m)
        s = np.sin(values)[..., None, None]
        c = 1.0 - np.cos(values)[..., None, None]
        motions = np.empty((batch, self.count, 4, 4))
        motions[..., :3, :3] = self.skew * s + self.skew2 * c + _EYE3
        motions[..., :3, 3] = values[..., None] * self.slide_axes
        motions[..., 3, :] = _BOTTOM
        steps = self.origins @ motions  # (B, m, 4, 4)
        frames = np.empty((self.count, batch, 4, 4))
        pose = steps[:, 0]
        frames[0] = pose
        for i in range(1, self.count):
            pose = np.matmul(pose, steps[:, i], out=frames[i])
        tip = pose @ self.tip
        axes_world = (frames[..., :3, :3] @ self.axes[:, None, :, None])[..., 0]  # (m, B, 3)
        lever = tip[None, :, :3, 3] - frames[..., :3, 3]
        a0, a1, a2 = axes_world[..., 0], axes_world[..., 1], axes_world[..., 2]
        l0, l1, l2 = lever[..., 0], lever[..., 1], lever[..., 2]
        jac = np.empty((batch, 6, self.count))
        # Linear part: axis x lever for revolute joints (the axis itself for prismatic ones).
        jac[:, 0] = (a1 * l2 - a2 * l1).T
        jac[:, 1] = (a2 * l0 - a0 * l2).T
        jac[:, 2] = (a0 * l1 - a1 * l0).T
        jac[:, 3:] = axes_world.transpose(1, 2, 0)
        if self.has_prismatic:
            jac[:, :3] = np.where(self.prismatic, jac[:, 3:], jac[:, :3])
            jac[:, 3:] *= self.angular_scale[:, 0]
        if self.has_mimic:
            jac *= self.multipliers
        return tip, jac


_EYE3 = np.eye(3)
_BOTTOM = np.array([0.0, 0.0, 0.0, 1.0])
_SKEW_ROWS, _SKEW_COLS = np.array([2, 0, 1]), np.array([1, 2, 0])  # (R21 - R12, R02 - R20, R10 - R01)


def rotation_error_vectors(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """World-frame rotation vectors taking `current` (B, 3, 3) to `target` (3, 3): (B, 3)."""
    relative = target @ np.swapaxes(current, -1, -2)
    v = 0.5 * (relative[:, _SKEW_ROWS, _SKEW_COLS] - relative[:, _SKEW_COLS, _SKEW_ROWS])
    cos = 0.5 * (np.trace(relative, axis1=1, axis2=2) - 1.0)
    sin = np.sqrt(np.einsum("bi,bi->b", v, v))
    scale = np.where(sin > 1e-12, np.arctan2(sin, cos) / np.maximum(sin, 1e-300), 1.0)
    out = v * scale[:, None]
    far = cos < -0.5
    if far.any():
        # Near a half turn the skew part loses the axis; read it from the symmetric part
        # (R + R^T = 2 cos I + 2 (1 - cos) a a^T) and take its sign from the skew part.
        rel, c, vf = relative[far], cos[far], v[far]
        outer = (rel + np.swapaxes(rel, -1, -2) - 2.0 * c[:, None, None] * _EYE3) / (2.0 * (1.0 - c))[:, None, None]
        column = np.argmax(np.diagonal(outer, axis1=-2, axis2=-1), axis=-1)
        axis = np.take_along_axis(outer, column[:, None, None], axis=-1)[..., 0]
        axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
        axis *= np.where(np.einsum("bi,bi->b", axis, vf) < 0, -1.0, 1.0)[:, None]
        out[far] = axis * np.arctan2(sin[far], c)[:, None]
    return out


class ChainProblem:
    """All targets of one solve, over the free variables (chain joints not held)."""

    def __init__(self, robot: RobotModel, links: tuple[str, ...], held: frozenset[str]):
        self.robot = robot
        self.links = links
        self.chains = [TargetChain(robot, link) for link in links]
        in_chain: set[int] = set()
        for chain in self.chains:
            in_chain.update(int(i) for i in chain.sources)
        held_index = {robot.joint_index(name) for name in held}
        self.free = np.array(sorted(in_chain - held_index), dtype=int)
        position = {int(j): k for k, j in enumerate(self.free)}
        # Chain column -> free variable, so mimic pairs add up and held joints drop out.
        self.selectors = []
        for chain in self.chains:
            selector = np.zeros((chain.count, len(self.free)))
            for row, source in enumerate(chain.sources):
                if int(source) in position:
                    selector[row, position[int(source)]] = 1.0
            self.selectors.append(selector)
        self.lower = robot.lower[self.free]
        self.upper = robot.upper[self.free]
        #: joints unwrapped toward the start and seeded within half a turn of it (`turns_freely`)
        self.continuous = robot.turns_freely[self.free]
        self.has_continuous = bool(self.continuous.any())
        #: slides seeded at the start value (`slides_freely`)
        self.slides = robot.slides_freely[self.free]

    def seed_window(self, start_free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`seed_window` of the free joints (`start_free`: their start values)."""
        return seed_window(self.lower, self.upper, self.continuous, self.slides, start_free)

    def residual(self, q: np.ndarray, rotations: np.ndarray, positions: np.ndarray, with_jacobian: bool = True):
        """For a batch q (B, n): unweighted errors per target (B, T, 2), the residual (B, 6T)
        and its Jacobian (B, 6T, free) — d(current pose)/dq, so a Gauss-Newton step solves
        J dx = residual."""
        batch = q.shape[0]
        count = len(self.chains)
        residual = np.empty((batch, 6 * count))
        jac = np.empty((batch, 6 * count, len(self.free))) if with_jacobian else None
        for t, chain in enumerate(self.chains):
            if with_jacobian:
                tip, chain_jac = chain.evaluate(q)
            else:
                tip = chain.tip_poses(q)
            residual[:, 6 * t:6 * t + 3] = positions[t] - tip[:, :3, 3]
            residual[:, 6 * t + 3:6 * t + 6] = rotation_error_vectors(rotations[t], tip[:, :3, :3])
            if with_jacobian:
                jac[:, 6 * t:6 * t + 6] = chain_jac @ self.selectors[t]
        errors = np.sqrt(np.einsum("btij,btij->bti", *(residual.reshape(batch, count, 2, 3),) * 2))
        return errors, residual, jac


def seed_window(lower, upper, turns, slides, start) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) random seeds of these joints lie within: their limits; for a joint that
    turns freely (`turns`) the turn around its start value; for a slide without limits that
    matter (`slides`) the start value itself. One rule for the NumPy restarts, Find Solutions,
    reach maps and PyRoki's seeds."""
    return (np.where(turns, start - np.pi, np.where(slides, start, lower)),
            np.where(turns, start + np.pi, np.where(slides, start, upper)))


def problem_for(robot: RobotModel, links: tuple[str, ...], held: frozenset[str]) -> ChainProblem:
    """A cached ChainProblem (chain data is reused across every frame of a live session)."""
    cache = robot.cache("chain_problems")
    key = (links, held)
    problem = cache.get(key)
    if problem is None:
        if len(cache) > 32:
            cache.clear()
        problem = cache[key] = ChainProblem(robot, links, held)
    return problem
