"""The demo's shot, as numbers: the tool point traces a figure-eight, then the goal is handed to
the elbow, which swings the arm round (`kinema-nodes demo` bakes it; cli/demo.py wraps it in a
CSV track)."""

from __future__ import annotations

import numpy as np

DEMO_HANDOFF_LINK = "link4"  # the elbow leads after the hand-off


def demo_goals(robot, start: np.ndarray, tool: str, frames_eight: int = 120,
               frames_elbow: int = 48) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(frames, positions, wxyz, links) of the demo: a lemniscate in the y-z plane in front of the
    robot, tool orientation held, then the elbow's poses from forward kinematics of a joint-space
    sweep that starts where the figure-eight leaves the arm (solved with the NumPy solver), so
    every goal is reachable."""
    from .model.kinematics import link_pose
    from .model.rotations import matrix_to_quaternion
    from .solve import IKTarget, SolveOptions, solve_trajectory

    home = link_pose(robot, start, tool)
    centre = home[:3, 3]
    wxyz = matrix_to_quaternion(home)
    t = np.linspace(0.0, 2.0 * np.pi, frames_eight)
    width, height = 0.22, 0.14
    positions = np.stack([np.full_like(t, centre[0]), centre[1] + width * np.sin(t),
                          centre[2] + height * np.sin(t) * np.cos(t)], axis=1)
    goals = [IKTarget(tool, tuple(p), tuple(wxyz)) for p in positions]
    held = robot.held_joints()
    solved = solve_trajectory(robot, goals, start, SolveOptions(backend="numpy", held_joints=held))
    q = solved[-1].joints.copy()
    sweep = np.linspace(0.0, 1.0, frames_elbow + 1)[1:]
    elbow = []
    for s in sweep:
        qe = q.copy()
        qe[robot.joint_index("joint1")] += 0.7 * np.sin(np.pi * s) * 1.0
        qe[robot.joint_index("joint2")] += -0.25 * np.sin(np.pi * s)
        elbow.append(link_pose(robot, qe, DEMO_HANDOFF_LINK))
    elbow = np.array(elbow)
    frames = np.arange(1, frames_eight + frames_elbow + 1)
    all_positions = np.concatenate([positions, elbow[:, :3, 3]])
    all_wxyz = np.concatenate([np.tile(wxyz, (frames_eight, 1)), matrix_to_quaternion(elbow)])
    links = [tool] * frames_eight + [DEMO_HANDOFF_LINK] * frames_elbow
    return frames, all_positions, all_wxyz, links
