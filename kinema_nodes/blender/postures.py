"""Postures: where a redundant arm's spare joints settle, stored on its Solver node.

A Solver node keeps a list of postures (`KinemaPosture`: a frame and a JSON object of joint
values): the pose at Add IK Target, and the pose at each keyed hand-off from its frame on. This
module reads and writes that list, and keeps each stored text parsed once (every live frame asks).
"""

from __future__ import annotations

import json

import numpy as np

#: The frame of the posture in force before any hand-off (the pose at Add IK Target).
BEFORE_ANY_KEY = -1.0e9

_KEPT = 64
_parsed: dict = {}  # (stored text, joint names) -> (which joints it names, their values)
_whole: dict = {}  # (stored text, robot fingerprint) -> the posture when it names every joint, else None


def clear_cache() -> None:
    """Forget every parsed posture (a new file, a test's fresh start)."""
    _parsed.clear()
    _whole.clear()


def posture_entry(solver, frame: float):
    """The posture entry in force at `frame`: the last one keyed at or before it, else the first."""
    entries = sorted(solver.postures, key=lambda entry: entry.frame)
    if not entries:
        return None
    chosen = entries[0]
    for entry in entries:
        if entry.frame <= frame + 1e-6:
            chosen = entry
    return chosen


def posture_at(solver, robot, frame: float, fallback) -> tuple[float, ...] | None:
    """The posture in force at `frame` as one value per actuated joint (joints it does not
    name take `fallback`'s value); None when the solver has none."""
    entry = posture_entry(solver, frame)
    if entry is None:
        return None
    text = entry.joints or "{}"
    key = (text, tuple(robot.actuated_joint_names))
    parsed = _parsed.get(key)
    if parsed is None:  # read each stored posture once, not every frame
        try:
            named = json.loads(text)
        except ValueError:
            return None
        known = np.zeros(robot.dof, dtype=bool)
        stored = np.zeros(robot.dof)
        for i, name in enumerate(robot.actuated_joint_names):
            value = named.get(name)
            if isinstance(value, (int, float)) and np.isfinite(value):
                known[i], stored[i] = True, float(value)
        if len(_parsed) > _KEPT:
            _parsed.clear()
        parsed = _parsed[key] = (known, stored)
    values = np.where(parsed[0], parsed[1], np.asarray(fallback, dtype=float))
    return tuple(np.minimum(np.maximum(values, robot.lower), robot.upper).tolist())


def record_posture(solver, robot, joints, frame: float | None = None) -> None:
    """Store `joints` as the posture: keyed at `frame` (a hand-off), or, with no frame, as the
    posture in force now (the scene's frame), the base one when there is none yet."""
    import bpy

    text = json.dumps({name: float(v) for name, v in zip(robot.actuated_joint_names, joints)})
    if frame is None:
        entry = posture_entry(solver, bpy.context.scene.frame_current)
    else:
        entry = next((e for e in solver.postures if abs(e.frame - frame) < 1e-6), None)
    if entry is None:
        entry = solver.postures.add()
        entry.frame = BEFORE_ANY_KEY if frame is None else float(frame)
    entry.joints = text


def frame_posture(solver, robot, frame: float, start) -> tuple[float, ...] | None:
    """The posture a redundant arm's spare joints settle toward on this frame. A solver that has
    none yet (a tree wired by hand, a file from before) takes the pose it first solves from."""
    if not hasattr(solver, "postures"):
        return None
    if not len(solver.postures):
        record_posture(solver, robot, start)
    return posture_at(solver, robot, frame, start)


def whole_posture(solver, robot, frame: float, start):
    """`frame_posture` when it names every actuated joint (else None), with the one stored posture
    that names every joint (what Add IK Target and every hand-off store) parsed and limited once,
    not every frame."""
    postures = getattr(solver, "postures", None)
    if postures is None or len(postures) != 1:
        posture = frame_posture(solver, robot, frame, start)
        return None if posture is None or len(posture) != robot.dof else posture
    memo = (postures[0].joints, robot.fingerprint)
    if memo not in _whole:
        posture = frame_posture(solver, robot, frame, np.full(robot.dof, np.nan))
        if len(_whole) > _KEPT:
            _whole.clear()
        _whole[memo] = posture if posture is not None and len(posture) == robot.dof and np.isfinite(posture).all() else None
    posture = _whole[memo]
    if posture is None:
        posture = frame_posture(solver, robot, frame, start)
        return None if posture is None or len(posture) != robot.dof else posture
    return posture
