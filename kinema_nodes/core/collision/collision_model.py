"""The collision model's data: capsules per link and the pairs to check. Apart from the code
that builds it (`robot_capsules`) so the kinematics and distances that read it need not import
its builder, which itself uses them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class CollisionModel:
    """Capsules in their links' frames and the self-collision pairs to check.

    `a`, `b` (C, 3) are capsule end points in the frame of link `link_of[c]`, `radius` (C,).
    `self_pairs` (P, 2) index capsules of links that may collide; `allowed` is the set of link
    pairs (sorted names) never checked, and `allowed_source` says where it came from."""

    links: tuple[str, ...]  # the link of each capsule (C,)
    a: np.ndarray
    b: np.ndarray
    radius: np.ndarray
    self_pairs: np.ndarray
    allowed: frozenset
    allowed_source: str  # "computed" or the SRDF's path
    moving: np.ndarray  # (C,) bool: the capsule's link is moved by some joint
    geometry_source: dict  # link -> "collision" | "visual"
    #: Convex pieces of the links' geometry (each piece's hull vertices in its link's frame, one
    #: piece after another: piece p is hull_local[piece_start[p]:piece_start[p + 1]]; link l's
    #: pieces are link_pieces[l] .. link_pieces[l + 1] - 1, in `robot.links` order; none for a link
    #: without geometry or with sphere geometry): the solver tightens near pairs with them.
    hull_local: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    piece_start: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    link_pieces: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    #: What each capsule is called in the readouts, where that is not its link (a carried
    #: object's capsules sit on the link that holds it but are named after the object); () for
    #: the robot alone.
    labels: tuple = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Each capsule's name in the readouts (C,): its label, else its link."""
        return self.labels or self.links

    @property
    def link_set(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.links))
