"""What a solve takes and returns, and the checks that refuse bad requests up front.

Kept free of JAX so the NumPy backend, the CLI and Blender's UI can build requests without
paying for a JAX import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..defaults import DEFAULT_SOLVE_BUDGET_MS
from ..errors import KinemaError

if TYPE_CHECKING:
    from ..collision import Avoid

#: A target farther than this from the robot's root is a typo or a unit mix-up (mm for m),
#: not a pose any robot can reach; refused rather than sent to the solver.
MAX_TARGET_DISTANCE_M = 1.0e4

BACKENDS = ("pyroki", "numpy")
#: A solve stopped by a collision reads "blocked by a collision: link A vs B" (or "... vs obstacle O").
COLLISION_REASON = "blocked by a collision"
REASONS = ("converged", "out of reach", "blocked by a joint limit", "over budget", COLLISION_REASON)


def converged(errors: np.ndarray, weights: np.ndarray, tol_p: float, tol_r: float) -> np.ndarray:
    """errors (..., T, 2) -> (...) bool: every target within tolerance where it has weight. The
    one convergence test outside the compiled kernels (which run the same comparison inside)."""
    ok = (errors <= (tol_p, tol_r)) | (weights == 0)
    return ok.all(axis=(-2, -1))


@dataclass(frozen=True)
class IKTarget:
    """One goal: put `link` at a pose in the robot's root frame (wxyz quaternion)."""

    link: str
    position: tuple[float, float, float]
    wxyz: tuple[float, float, float, float]
    position_weight: float = 1.0
    rotation_weight: float = 1.0


@dataclass(frozen=True)
class SolveOptions:
    """How to solve. Only `backend` and `cold` change the compiled program; the rest are
    runtime values, so changing a tolerance never recompiles."""

    backend: str = "pyroki"
    position_tolerance: float = 1e-5
    rotation_tolerance: float = 1e-5
    max_iterations: int = 100
    budget_ms: float = DEFAULT_SOLVE_BUDGET_MS
    held_joints: frozenset[str] = field(default_factory=frozenset)
    cold: bool = False
    #: Spare joints: a converged answer slides along its family (targets held) to the member
    #: nearest this joint vector (one value per actuated joint), so a frame's pose depends on
    #: its inputs, not on the frame before (see _posture.py). None: the answer nearest the start.
    posture: tuple[float, ...] | None = None
    #: Keep clear of the robot itself and/or obstacles (core/collision; the descent: _avoiding.py); None: collisions ignored.
    avoid: Avoid | None = None


@dataclass
class SolveResult:
    """The answer: always finite joints within limits, whatever happened."""

    joints: np.ndarray
    position_error: float
    rotation_error: float
    converged: bool
    reason: str
    iterations: int
    ms: float
    backend: str
    fallback_reason: str | None = None
    batched: bool = False  # answered by a batched call (solve_many's PyRoki scan), then checked like any solve
    #: With `SolveOptions.avoid`: the smallest clearance (m, negative: overlapping) and the pairs that overlap.
    min_clearance_m: float | None = None
    colliding: tuple = ()
    #: Whether a deadline stopped a search behind this answer (True: another run, on a quieter
    #: machine, could answer otherwise; False: every search ran to its count or its answer, so
    #: the same inputs give the same answer; None: not said). A live rig remembers an answer
    #: only where it is not True (core/solve/_entry.py, `PreparedSolve._remembering`).
    clocked: bool | None = None


@dataclass(frozen=True)
class TargetArrays:
    """Targets checked and packed as arrays (T targets)."""

    links: tuple[str, ...]
    positions: np.ndarray  # (T, 3)
    rotations: np.ndarray  # (T, 3, 3)
    wxyz: np.ndarray  # (T, 4), unit
    weights: np.ndarray  # (T, 2): position, rotation
    #: (T, 14): position, rotation (row-major), weights in one C-contiguous block, the layout the
    #: compiled kernel reads (the three fields above are views of it when `_pack` made them).
    packed: np.ndarray | None = None


def as_target_list(targets: IKTarget | Sequence[IKTarget]) -> list[IKTarget]:
    if isinstance(targets, IKTarget):
        return [targets]
    targets = list(targets)
    if not targets:
        raise KinemaError("no IK target given")
    for target in targets:
        if not isinstance(target, IKTarget):
            raise KinemaError(f"an IK target must be an IKTarget, not {type(target).__name__}")
    return targets


def check_targets(robot, targets: IKTarget | Sequence[IKTarget]) -> TargetArrays:
    """Refuse NaN/inf, zero quaternions, absurd distances and negative weights, each with a
    message naming the link, so the solver never sees a value that could poison it."""
    targets = as_target_list(targets)
    links = []
    seen = set()
    for target in targets:
        link = robot.check_link(target.link)
        if link in seen:
            raise KinemaError(f"link '{link}' has two IK targets; give each link one target")
        seen.add(link)
        if not robot.chain_joint_names(link):
            raise KinemaError(f"link '{link}' is not moved by any joint, so it cannot be an IK target")
        links.append(link)
    return _pack(targets, tuple(links))


_MAX_DISTANCE_SQUARED = MAX_TARGET_DISTANCE_M ** 2


def _pack(targets: Sequence[IKTarget], links: tuple[str, ...]) -> TargetArrays:
    """The number checks of `check_targets` and the arrays, for links already checked. The
    every-frame case (plain numbers, all fine) is tested in a few float operations per target;
    anything else goes through `_pack_checked`, which names what is wrong."""
    rows, quaternions = [], []
    try:
        for target in targets:
            px, py, pz = target.position
            w, x, y, z = target.wxyz
            px, py, pz, w, x, y, z = float(px), float(py), float(pz), float(w), float(x), float(y), float(z)
            wp, wr = float(target.position_weight), float(target.rotation_weight)
            norm2 = w * w + x * x + y * y + z * z
            # NaN fails every comparison; an overflow to inf fails the bounds: both go to the careful path
            if not (px * px + py * py + pz * pz <= _MAX_DISTANCE_SQUARED and 1e-12 <= norm2 < math.inf
                    and 0.0 <= wp < math.inf and 0.0 <= wr < math.inf and (wp > 0.0 or wr > 0.0)):
                raise ValueError
            norm = math.sqrt(norm2)
            w, x, y, z = w / norm, x / norm, y / norm, z / norm
            quaternions.append((w, x, y, z))
            rows.append((px, py, pz,
                         1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                         2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                         2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y), wp, wr))
    except (TypeError, ValueError):
        return _pack_checked(targets, links)
    packed = np.array(rows)
    count = len(rows)
    return TargetArrays(links, packed[:, :3], packed[:, 3:12].reshape(count, 3, 3), np.array(quaternions), packed[:, 12:14],
                        packed)


def _pack_checked(targets: Sequence[IKTarget], links: tuple[str, ...]) -> TargetArrays:
    """`_pack` one check at a time, raising a message that names the link and the problem."""
    rows, quaternions = [], []
    for target, link in zip(targets, links):
        try:
            position = [float(v) for v in target.position]
            quaternion = [float(v) for v in target.wxyz]
        except (TypeError, ValueError):
            raise KinemaError(f"IK target for '{link}': position and rotation must be numbers") from None
        if len(position) != 3 or len(quaternion) != 4:
            raise KinemaError(f"IK target for '{link}': position needs 3 numbers and rotation 4 (w x y z)")
        if not all(math.isfinite(v) for v in position):
            raise KinemaError(f"IK target for '{link}': position {position} is not finite (NaN or inf)")
        if not all(math.isfinite(v) for v in quaternion):
            raise KinemaError(f"IK target for '{link}': rotation {quaternion} is not finite (NaN or inf)")
        distance = math.sqrt(sum(v * v for v in position))
        if distance > MAX_TARGET_DISTANCE_M:
            raise KinemaError(
                f"IK target for '{link}': position is {distance:.3g} m from the root; "
                f"refusing targets farther than {MAX_TARGET_DISTANCE_M:g} m (units are metres)"
            )
        norm = math.hypot(*quaternion)  # scaled: (1e200, 1e200, 0, 0) must not overflow to inf
        if norm < 1e-6:
            raise KinemaError(f"IK target for '{link}': rotation quaternion {quaternion} has zero length")
        pair = [float(target.position_weight), float(target.rotation_weight)]
        if not all(math.isfinite(v) and v >= 0 for v in pair) or not any(v > 0 for v in pair):
            raise KinemaError(f"IK target for '{link}': weights must be finite, not negative, and not both zero (got {pair})")
        unit = [v / norm for v in quaternion]
        quaternions.append(unit)
        rotation = _rotation_matrix(*unit)
        rows.append(position + rotation[0] + rotation[1] + rotation[2] + pair)
    packed = np.array(rows)
    count = len(rows)
    return TargetArrays(links, packed[:, :3], packed[:, 3:12].reshape(count, 3, 3), np.array(quaternions), packed[:, 12:14],
                        packed)


def pack_targets(robot, targets: IKTarget | Sequence[IKTarget], checked_links: dict) -> TargetArrays:
    """`check_targets` for the every-frame path: a link set that passed the full check once is
    remembered in `checked_links` (kept per robot by the caller), so later calls check only the
    numbers. Same checks, same messages, same arrays."""
    items = (targets,) if isinstance(targets, IKTarget) else targets
    if not isinstance(items, (tuple, list)) or not items or any(type(t) is not IKTarget for t in items):
        return check_targets(robot, targets)
    names = tuple(t.link for t in items)
    links = checked_links.get(names)
    if links is None:
        arrays = check_targets(robot, items)
        if len(checked_links) > 256:
            checked_links.clear()
        checked_links[names] = arrays.links
        return arrays
    return _pack(items, links)


def _rotation_matrix(w: float, x: float, y: float, z: float) -> list[list[float]]:
    """Unit quaternion -> 3x3 rotation, in plain floats (this runs on every solve)."""
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def check_start(robot, start) -> np.ndarray:
    start = np.asarray(start, dtype=float)
    if start.shape == (robot.dof,) and math.isfinite(start.sum()):  # the every-frame case, in one reduction
        return start
    if start.shape != (robot.dof,):
        raise KinemaError(f"start configuration has shape {start.shape}; robot '{robot.name}' has {robot.dof} joints")
    if not np.all(np.isfinite(start)):
        bad = [robot.actuated_joint_names[i] for i in np.flatnonzero(~np.isfinite(start))]
        raise KinemaError(f"start configuration is not finite for joints {', '.join(bad)}")
    return start


_REPLACED: dict = {}  # (id(options), changes) -> (options, the copy)


def replaced(options: SolveOptions, **changes) -> SolveOptions:
    """`dataclasses.replace(options, **changes)` (hashable values), made once per options object:
    a live frame asks for the same copy every frame (the avoiding solve's plain options, a live
    PyRoki rig's NumPy options), and a dataclass `replace` costs as much as the kernel's solve.
    The options are frozen, so the copy stays theirs while the options object lives (kept here)."""
    key = (id(options), *changes.items())
    known = _REPLACED.get(key)
    if known is not None and known[0] is options:
        return known[1]
    from dataclasses import replace

    copy = replace(options, **changes)
    if len(_REPLACED) >= 64:
        _REPLACED.clear()
    _REPLACED[key] = (options, copy)
    return copy


def check_options(robot, options: SolveOptions) -> None:
    if options.backend not in BACKENDS:
        raise KinemaError(f"unknown solver '{options.backend}'; choose one of {', '.join(BACKENDS)}")
    for name in options.held_joints:
        robot.joint_index(name)
    for what, value in (("position_tolerance", options.position_tolerance), ("rotation_tolerance", options.rotation_tolerance),
                        ("budget_ms", options.budget_ms)):
        if not (np.isfinite(value) and value > 0):
            raise KinemaError(f"solver option {what} must be a positive number, got {value}")
    if options.posture is not None:
        posture = np.asarray(options.posture, dtype=float)
        if posture.shape != (robot.dof,) or not np.all(np.isfinite(posture)):
            raise KinemaError(f"solver option posture needs {robot.dof} finite joint values (robot '{robot.name}')")
    if options.avoid is not None:
        from ..collision import check_avoid

        check_avoid(options.avoid)
    if int(options.max_iterations) < 1:
        raise KinemaError(f"solver option max_iterations must be at least 1, got {options.max_iterations}")
