"""Reachability maps: for each cell centre of a grid and each of N orientations spread evenly
over SO(3), does a within-limits solution exist? (`kinema-nodes reach`.)

bpy-free and dask-free: `reach_chunk` decides a list of cells (the unit a cluster spreads),
`assemble` puts the chunks into one map. Each pose is one call of the solver's own compiled LM
kernel (`core.solve.descend_batch`) over a few seeds, stopping at the first converged one:
first the witness of the previous cell at the same orientation (neighbouring cells are usually
solved by nearby configurations), then fixed pseudo-random seeds over the joint limits. A pose
no seed reaches counts as unreachable, so the map can only err towards "unreachable" near the
edge of the workspace, never claim a pose that is not reached: every witness is a converged
configuration within the joint limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import KinemaError

#: Seeds tried per pose after the neighbour's witness.
DEFAULT_SEEDS = 8
#: Stricter than the solver's default 1e-5, so a witness reaches its pose within 1e-5 m / rad
#: measured by any other FK.
REACH_TOLERANCE = 1e-6
MAX_POSES = 100_000_000
#: Plastic-number constant of the super-Fibonacci spiral (Alexa, CVPR 2022).
_PSI = 1.533751168755204288118041


def super_fibonacci(count: int) -> np.ndarray:
    """`count` unit quaternions (wxyz) spread evenly over SO(3): Alexa's super-Fibonacci spirals."""
    if count < 1:
        raise KinemaError(f"--orientations must be at least 1, got {count}")
    s = np.arange(count) + 0.5
    r, big_r = np.sqrt(s / count), np.sqrt(1.0 - s / count)
    alpha, beta = 2 * np.pi * s / math.sqrt(2.0), 2 * np.pi * s / _PSI
    q = np.stack([r * np.sin(alpha), r * np.cos(alpha), big_r * np.sin(beta), big_r * np.cos(beta)], axis=1)
    return q * np.where(q[:, :1] < 0, -1.0, 1.0)  # w >= 0, the same rotations


def grid_cells(box, step: float) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Cell centres (C, 3) of the box cut into cubes of side `step`, x fastest, and the grid's shape."""
    box = np.asarray(box, dtype=float).reshape(2, 3)
    if not np.isfinite(box).all():
        raise KinemaError("--box must be six finite numbers: X0 Y0 Z0 X1 Y1 Z1")
    if not (math.isfinite(step) and step > 0):
        raise KinemaError(f"--step must be a positive number of metres, got {step}")
    low, high = box.min(axis=0), box.max(axis=0)
    shape = tuple(int(max(1, math.ceil((h - lo) / step - 1e-9))) for lo, h in zip(low, high))
    if math.prod(shape) > 10_000_000:
        raise KinemaError(f"--box / --step make {math.prod(shape)} cells, more than 10,000,000; use a larger --step")
    axes = [lo + (np.arange(n) + 0.5) * step for lo, n in zip(low, shape)]
    z, y, x = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    return np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1), shape


def reach_ball(robot, link: str) -> tuple[np.ndarray, float] | None:
    """A ball no pose of `link` can leave: centred on the first moving joint's origin, radius the
    sum of the distances between successive joint origins (and the link), by the triangle
    inequality. None when a slide is in the chain (no such bound)."""
    from .model.kinematics import link_pose

    chain = [j for j in robot.chain(link) if j.is_movable]
    if not chain or any(j.type == "prismatic" for j in chain):
        return None
    q = robot.mid_configuration()
    points = [(link_pose(robot, q, j.parent) @ np.asarray(j.origin, dtype=float))[:3, 3] for j in chain]
    points.append(link_pose(robot, q, link)[:3, 3])
    radius = float(sum(np.linalg.norm(b - a) for a, b in zip(points, points[1:])))
    return points[0], radius



def default_box(robot, link: str, step: float) -> np.ndarray:
    """The cube around `reach_ball` (one step wider), or 2 m around the root without a ball."""
    ball = reach_ball(robot, link)
    centre, radius = (np.zeros(3), 2.0) if ball is None else ball
    return np.concatenate([centre - radius - step, centre + radius + step])


@dataclass
class ReachChunk:
    cells: np.ndarray  # (C,) indices into the map's cells
    reached: np.ndarray  # (C, N) bool
    witness: np.ndarray  # (C, N, dof) NaN where not reached
    poses: int  # poses solved here (cells outside the reach ball are not)
    seconds: float


_ROBOTS: dict = {}


def _robot(robot_ref):
    """The robot by path or name, loaded once per worker process."""
    if not isinstance(robot_ref, str):
        return robot_ref
    if robot_ref not in _ROBOTS:
        from .model.robot import load_robot

        _ROBOTS[robot_ref] = load_robot(robot_ref, check_meshes=False)
    return _ROBOTS[robot_ref]


def _seeds(robot, problem, count: int) -> np.ndarray:
    """Fixed pseudo-random configurations over the free joints' limits (continuous: +-pi)."""
    start = robot.mid_configuration()
    free = problem.free
    lower = np.where(np.isfinite(problem.lower), problem.lower, -np.pi)
    upper = np.where(np.isfinite(problem.upper), problem.upper, np.pi)
    seeds = np.tile(start, (count, 1))
    seeds[:, free] = lower + np.random.default_rng(20261201).random((count, len(free))) * (upper - lower)
    return seeds


def reach_chunk(robot_ref, link: str, centres: np.ndarray, cell_indices, orientations: np.ndarray,
                seeds: int = DEFAULT_SEEDS, tolerance: float = REACH_TOLERANCE, max_iterations: int = 100) -> ReachChunk:
    """Decide every (cell, orientation) of these cells; runs on a cluster worker."""
    import time

    from .solve import IKTarget, check_targets, descend_batch, problem_for

    t0 = time.perf_counter()
    robot = _robot(robot_ref)
    link = robot.check_link(link)
    problem = problem_for(robot, (link,), frozenset())
    fixed = _seeds(robot, problem, seeds)
    lower, upper = robot.lower, robot.upper
    centres = np.asarray(centres, dtype=float)
    orientations = np.asarray(orientations, dtype=float)
    count, n = len(centres), len(orientations)
    reached = np.zeros((count, n), dtype=bool)
    witness = np.full((count, n, robot.dof), np.nan)
    last = [None] * n
    trial = np.empty((seeds + 1, robot.dof))
    trial[1:] = fixed
    ball = reach_ball(robot, link)
    solved = 0
    for c, centre in enumerate(centres):
        if ball is not None and np.linalg.norm(centre - ball[0]) > ball[1] + 1e-9:
            continue  # beyond every joint's combined reach: unreachable at any orientation
        position = tuple(centre.tolist())
        solved += n
        for o, wxyz in enumerate(orientations.tolist()):
            targets = check_targets(robot, [IKTarget(link, position, tuple(wxyz))])
            if last[o] is not None:
                trial[0] = last[o]
                rows = trial
            else:
                rows = fixed
            q, _, _, _, converged = descend_batch(problem, rows, targets, tolerance, tolerance, max_iterations, stop_at_first=True)
            hits = np.flatnonzero(converged)
            if len(hits):
                found = q[hits[0]]
                if np.all(found >= lower - 1e-12) and np.all(found <= upper + 1e-12):
                    reached[c, o] = True
                    witness[c, o] = found
                    last[o] = found
    return ReachChunk(np.asarray(cell_indices), reached, witness, solved, time.perf_counter() - t0)


@dataclass
class ReachMap:
    robot: str
    link: str
    joint_names: list[str]
    centres: np.ndarray  # (C, 3)
    shape: tuple[int, int, int]  # (nx, ny, nz), x fastest in `centres`
    step: float
    orientations: np.ndarray  # (N, 4) wxyz
    reached: np.ndarray  # (C, N)
    witness: np.ndarray  # (C, N, dof)
    seconds: float = 0.0

    @property
    def index(self) -> np.ndarray:
        """The reachability index per cell: the share of orientations reached."""
        return self.reached.mean(axis=1)

    def save(self, path: str | Path) -> Path:
        from .files import write_with

        def writer(temporary: Path):
            with open(temporary, "wb") as handle:
                np.savez_compressed(handle, robot=self.robot, link=self.link, joint_names=np.array(self.joint_names),
                                    centres=self.centres, shape=np.array(self.shape), step=self.step,
                                    orientations_wxyz=self.orientations, reached=self.reached, witness=self.witness,
                                    index=self.index)

        return write_with(path, writer, "--out")


def load_map(path: str | Path) -> ReachMap:
    """A map written by `ReachMap.save` (no pickles: a map file runs no code)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return ReachMap(str(data["robot"]), str(data["link"]), [str(n) for n in data["joint_names"]], data["centres"],
                            tuple(int(v) for v in data["shape"]), float(data["step"]), data["orientations_wxyz"],
                            data["reached"], data["witness"])
    except (OSError, KeyError, ValueError) as exc:
        raise KinemaError(f"reach map '{path}' cannot be read: {exc}") from None


def chunks(count: int, parts: int) -> list[np.ndarray]:
    """Cell indices cut into `parts` contiguous runs (neighbouring cells seed each other)."""
    return [c for c in np.array_split(np.arange(count), max(1, min(count, parts))) if len(c)]


def assemble(robot, link, centres, shape, step, orientations, results: list[ReachChunk]) -> ReachMap:
    reached = np.zeros((len(centres), len(orientations)), dtype=bool)
    witness = np.full((len(centres), len(orientations), robot.dof), np.nan)
    for part in results:
        reached[part.cells] = part.reached
        witness[part.cells] = part.witness
    return ReachMap(robot.name, link, list(robot.actuated_joint_names), centres, shape, step, orientations, reached, witness)


def _colour(value: float) -> tuple[int, int, int]:
    """Index 0 -> dark blue, 1 -> yellow (a viridis-like ramp, no matplotlib needed)."""
    stops = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], dtype=float)
    x = min(max(float(value), 0.0), 1.0) * (len(stops) - 1)
    i = min(int(x), len(stops) - 2)
    return tuple(int(v) for v in stops[i] + (stops[i + 1] - stops[i]) * (x - i))


def index_colours(index: np.ndarray) -> np.ndarray:
    """(C,) index -> (C, 3) RGB in 0..1, the picture's ramp (the Blender point cloud uses it)."""
    return np.array([_colour(v) for v in np.asarray(index).ravel()], dtype=float).reshape(-1, 3) / 255.0


def render_slices(reach_map: ReachMap, path: str | Path, slices: int = 4, cell_pixels: int | None = None) -> Path:
    """Slices through the map at a few heights (x right, y up), coloured by index; cells no
    orientation reaches are light grey."""
    from PIL import Image, ImageDraw

    from .files import write_with

    nx, ny, nz = reach_map.shape
    index = reach_map.index.reshape(nz, ny, nx)
    levels = sorted({int(round(v)) for v in np.linspace(0, nz - 1, slices + 2)[1:-1]}) if nz > slices else list(range(nz))
    px = cell_pixels or max(4, 240 // max(nx, ny))
    pad, label = 8, 16
    width = len(levels) * (nx * px + pad) + pad
    height = ny * px + 2 * pad + label + 24
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for k, level in enumerate(levels):
        x0 = pad + k * (nx * px + pad)
        z = reach_map.centres[level * nx * ny, 2]
        draw.text((x0, 2), f"z = {z:+.3f} m", fill=(0, 0, 0))
        for j in range(ny):
            for i in range(nx):
                value = index[level, j, i]
                colour = (215, 215, 215) if value == 0 else _colour(value)
                top = label + (ny - 1 - j) * px
                draw.rectangle([x0 + i * px, top, x0 + (i + 1) * px - 1, top + px - 1], fill=colour)
    bar_top = label + ny * px + pad
    span = max(1, width - 2 * pad - 1)
    for x in range(width - 2 * pad):
        draw.line([pad + x, bar_top, pad + x, bar_top + 8], fill=_colour(x / span))
    draw.text((pad, bar_top + 10), "index 0 (grey: none)", fill=(0, 0, 0))
    draw.text((width - pad - 45, bar_top + 10), "index 1", fill=(0, 0, 0))

    def writer(temporary: Path):
        image.save(temporary, format="PNG")

    return write_with(path, writer, "--render")
