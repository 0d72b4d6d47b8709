"""Reach preview: each sample of a tool path judged before any bake — reachable, near a
singularity, near a joint limit, or unreachable.

The samples are solved one after another from the arm's pose, as a bake solves them, and judged
by the bake's own rules where it has them (core/shot/bake.py: not converged; a moving joint
within 1 % of its range from a limit), so the preview and the bake agree. Singularities, which a
bake does not flag, by two margins in degrees: the elbow is near one when the arm is within the
margin of straight (shoulder, elbow and wrist on one line); the wrist when the axes of its first
and last joints are within the margin of parallel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Verdicts, best first; a sample gets the worst that applies.
VERDICTS = ("reachable", "near_singularity", "near_limit", "unreachable")
#: The viewport's colour per verdict (linear RGB): green, yellow, orange, red.
COLOURS = {"reachable": (0.1, 0.8, 0.1), "near_singularity": (0.9, 0.8, 0.05), "near_limit": (1.0, 0.35, 0.0),
           "unreachable": (0.9, 0.05, 0.05)}


@dataclass
class Sample:
    verdict: str
    joints: np.ndarray
    why: str = ""


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    cosine = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))


class Judge:
    """The verdict rules for one robot and link."""

    def __init__(self, robot, link: str, held=frozenset(), wrist_margin_deg: float = 10.0, elbow_margin_deg: float = 10.0,
                 limit_margin: float | None = None):
        from .roles import resolve_roles
        from .shot.bake import LIMIT_MARGIN

        self.robot, self.link = robot, link
        names = robot.actuated_joint_names
        chain = [name for name in robot.chain_joint_names(link) if name not in held and name in names]
        self.active = np.array([name in chain for name in names])
        revolute = [name for name in chain if not robot.is_prismatic[names.index(name)]]
        self.wrist = [names.index(name) for name in revolute[-3:]] if len(revolute) >= 5 else []
        roles = resolve_roles(robot)
        self.elbow_links = tuple(roles.link(r) for r in ("shoulder", "elbow", "wrist"))
        if None in self.elbow_links:
            self.elbow_links = None
        self.wrist_margin, self.elbow_margin = wrist_margin_deg, elbow_margin_deg
        margin = LIMIT_MARGIN if limit_margin is None else limit_margin
        span = robot.upper - robot.lower
        self.bounded = np.isfinite(span) & ~robot.is_continuous
        self.margin = np.where(self.bounded, margin * np.where(self.bounded, span, 0.0), 0.0)

    def __call__(self, q: np.ndarray, converged: bool) -> tuple[str, str]:
        from .model.kinematics import jacobian, link_pose

        robot = self.robot
        if not converged:
            return "unreachable", "the solver did not reach it"
        near = self.bounded & ((q <= robot.lower + self.margin) | (q >= robot.upper - self.margin)) & self.active
        if near.any():
            return "near_limit", ", ".join(robot.actuated_joint_names[i] for i in np.flatnonzero(near))
        if self.wrist:
            axes = jacobian(robot, q, self.link)[3:]
            bend = _angle(axes[:, self.wrist[0]], axes[:, self.wrist[-1]])
            bend = min(bend, 180.0 - bend)
            if bend < self.wrist_margin:
                return "near_singularity", f"wrist {bend:.1f} deg from straight"
        if self.elbow_links is not None:
            shoulder, elbow, wrist = (link_pose(robot, q, name)[:3, 3] for name in self.elbow_links)
            if np.linalg.norm(shoulder - elbow) > 1e-6 and np.linalg.norm(wrist - elbow) > 1e-6:
                straight = 180.0 - _angle(shoulder - elbow, wrist - elbow)
                if straight < self.elbow_margin:
                    return "near_singularity", f"elbow {straight:.1f} deg from straight"
        return "reachable", ""


    def many(self, qs: np.ndarray, converged) -> list[tuple[str, str]]:
        """The verdicts of many samples at once, the same as calling the judge on each: the
        Jacobians and the shoulder, elbow and wrist poses in one batched call each (per sample
        they cost as much as the solve; a 10,000-sample path is judged in a fraction of a second)."""
        from .model.kinematics import jacobian, link_pose

        robot = self.robot
        qs = np.asarray(qs, dtype=float).reshape(-1, len(robot.actuated_joint_names))
        converged = np.asarray(converged, dtype=bool)
        near = self.bounded & ((qs <= robot.lower + self.margin) | (qs >= robot.upper - self.margin)) & self.active
        wrist_bend = np.full(len(qs), np.inf)
        if self.wrist and len(qs):
            axes = jacobian(robot, qs, self.link)[:, 3:]
            a, b = axes[:, :, self.wrist[0]], axes[:, :, self.wrist[-1]]
            cosine = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
            bend = np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))
            wrist_bend = np.minimum(bend, 180.0 - bend)
        elbow_straight = np.full(len(qs), np.inf)
        if self.elbow_links is not None and len(qs):
            shoulder, elbow, wrist = (link_pose(robot, qs, name)[:, :3, 3] for name in self.elbow_links)
            upper, lower = shoulder - elbow, wrist - elbow
            long_enough = (np.linalg.norm(upper, axis=1) > 1e-6) & (np.linalg.norm(lower, axis=1) > 1e-6)
            cosine = np.sum(upper * lower, axis=1) / np.maximum(np.linalg.norm(upper, axis=1) * np.linalg.norm(lower, axis=1), 1e-300)
            straight = 180.0 - np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))
            elbow_straight = np.where(long_enough, straight, np.inf)
        found = []
        for i in range(len(qs)):
            if not converged[i]:
                found.append(("unreachable", "the solver did not reach it"))
            elif near[i].any():
                found.append(("near_limit", ", ".join(robot.actuated_joint_names[k] for k in np.flatnonzero(near[i]))))
            elif wrist_bend[i] < self.wrist_margin:
                found.append(("near_singularity", f"wrist {wrist_bend[i]:.1f} deg from straight"))
            elif elbow_straight[i] < self.elbow_margin:
                found.append(("near_singularity", f"elbow {elbow_straight[i]:.1f} deg from straight"))
            else:
                found.append(("reachable", ""))
        return found


def bake_solve_options(step, robot):
    """The options a program step's Solver bakes with, for solving a path's samples ahead of the
    bake (Preview Reach, the turn about the tool axis): its backend (NumPy where it is off), its
    held joints and prismatic holds, no collision avoidance (a preview judges reach only)."""
    from dataclasses import replace

    return replace(step.options, backend=step.backend if step.backend != "off" else "numpy", avoid=None,
                   held_joints=frozenset(step.options.held_joints) | robot.held_joints(step.hold_prismatic))


def preview(robot, link: str, goals, start: np.ndarray, options, **margins) -> list[Sample]:
    """Solve each goal (a 4x4 pose of `link` in the root frame) from the answer before, starting at
    `start`, and judge it (`Judge`; margins: wrist_margin_deg, elbow_margin_deg, limit_margin)."""
    from .graph.program import pose_to_target
    from .solve import prepare

    from .solve import kernel_status

    judge = Judge(robot, link, frozenset(options.held_joints), **margins)
    if options.backend == "numpy":
        # a preview is no live frame: the compiled kernel (loaded from its disk cache once per
        # process, compiled once per machine) solves all the samples in one call, where its
        # plain NumPy stand-in takes ten times as long a sample, as the reach map waits (core/reach.py)
        kernel_status(wait=True)
    prepared = prepare(robot, [link], options)  # the bake's every-frame solve: the checks done once
    targets = [pose_to_target(np.asarray(goal, dtype=float)) for goal in goals]
    if not targets:
        return []
    positions = np.array([[position] for position, _ in targets], dtype=float)
    wxyz = np.array([[quaternion] for _, quaternion in targets], dtype=float)
    # frame after frame from the answer before, in one compiled call where the kernel can (`solve_many`)
    joints, converged = prepared.solve_many(positions, wxyz, np.asarray(start, dtype=float))
    return [Sample(verdict, q, why) for q, (verdict, why) in zip(joints, judge.many(joints, converged))]


def counts(samples) -> dict[str, int]:
    """How many samples got each verdict (the `--json` and report shape)."""
    return {verdict: sum(s.verdict == verdict for s in samples) for verdict in VERDICTS}
