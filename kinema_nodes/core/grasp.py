"""Grasp and release as keyed events (#30 item 5), bpy-free.

An object's grasp track is a list of events sorted by frame: a grasp names a link and stores
the object's pose in that link's frame at the grasp frame; a release stores the object's world
pose at the release frame. The object's pose at any frame then depends only on that frame and
the link's pose at it (never on the frames visited before), so scrubbing either way gives the
same answer, and both switches are continuous by construction:

- at a grasp, link(g) @ offset == the object's pose at g, since offset = inv(link(g)) @ pose;
- at a release, the stored pose == link(r) @ offset, the carried pose at r.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GraspEvent:
    frame: float
    kind: str  # "GRASP" or "RELEASE"
    holder: str  # the rig object's name ("" for a release)
    link: str  # the link that carries the object ("" for a release)
    matrix: np.ndarray  # grasp: object in the link's frame; release: object in the world


def event_at(events: list[GraspEvent], frame: float) -> GraspEvent | None:
    """The last event at or before `frame` (None before the first)."""
    current = None
    for event in sorted(events, key=lambda e: e.frame):
        if event.frame <= frame:
            current = event
    return current


def object_pose(events: list[GraspEvent], frame: float, rest: np.ndarray, link_world) -> np.ndarray:
    """The object's world pose at `frame`: `rest` before the first event, carried by its link
    (`link_world(holder, link)` gives that link's world pose now) while grasped, and where it
    was put after a release."""
    event = event_at(events, frame)
    if event is None:
        return np.array(rest, dtype=float)
    if event.kind == "RELEASE":
        return np.array(event.matrix, dtype=float)
    return link_world(event.holder, event.link) @ np.asarray(event.matrix, dtype=float)


def grasp_offset(link_world: np.ndarray, object_world: np.ndarray) -> np.ndarray:
    """The object's pose in the link's frame: what a grasp keeps constant while carrying."""
    return np.linalg.inv(np.asarray(link_world, dtype=float)) @ np.asarray(object_world, dtype=float)
