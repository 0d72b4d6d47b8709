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
#: Caps checked before anything is allocated (issue #32, item 9): cells x orientations, and the
#: map's memory (a `reached` flag and a witness configuration of `dof` floats per pose), so a
#: pose count within the cell cap but beyond memory is refused with one line, not a MemoryError.
MAX_POSES = 100_000_000
MAX_MAP_BYTES = 2 * 1024 ** 3
MAX_ORIENTATIONS = 100_000
MAX_SEEDS = 256
MAX_CELLS = 10_000_000
#: Plastic-number constant of the super-Fibonacci spiral (Alexa, CVPR 2022).
_PSI = 1.533751168755204288118041


def super_fibonacci(count: int) -> np.ndarray:
    """`count` unit quaternions (wxyz) spread evenly over SO(3): Alexa's super-Fibonacci spirals."""
    if count < 1:
        raise KinemaError(f"--orientations must be at least 1, got {count}")
    if count > MAX_ORIENTATIONS:
        raise KinemaError(f"--orientations {count} is more than {MAX_ORIENTATIONS:,}")
    s = np.arange(count) + 0.5
    r, big_r = np.sqrt(s / count), np.sqrt(1.0 - s / count)
    alpha, beta = 2 * np.pi * s / math.sqrt(2.0), 2 * np.pi * s / _PSI
    q = np.stack([r * np.sin(alpha), r * np.cos(alpha), big_r * np.sin(beta), big_r * np.cos(beta)], axis=1)
    return q * np.where(q[:, :1] < 0, -1.0, 1.0)  # w >= 0, the same rotations


def check_seeds(seeds: int) -> None:
    if seeds < 1:
        raise KinemaError(f"--seeds must be at least 1, got {seeds}")
    if seeds > MAX_SEEDS:
        raise KinemaError(f"--seeds {seeds} is more than {MAX_SEEDS} (random starts per pose)")


def check_pose_count(cells: int, orientations: int, dof: int) -> None:
    """Refuse a map over `MAX_POSES` poses or `MAX_MAP_BYTES` of memory, before any allocation."""
    poses = cells * orientations
    size = poses * (1 + 8 * max(dof, 1))
    if poses > MAX_POSES or size > MAX_MAP_BYTES:
        raise KinemaError(f"{cells:,} cells x {orientations:,} orientations make {poses:,} poses "
                          f"({size / 1024 ** 3:.1f} GiB of map for {dof} joints); the cap is {MAX_POSES:,} poses and "
                          f"{MAX_MAP_BYTES / 1024 ** 3:.0f} GiB: use a larger --step, a smaller --box or fewer --orientations")


def grid_shape(box, step: float) -> tuple[np.ndarray, tuple[int, int, int]]:
    """(the box's low corner, the grid's shape) for cubes of side `step`; nothing per cell is made."""
    box = np.asarray(box, dtype=float).reshape(2, 3)
    if not np.isfinite(box).all():
        raise KinemaError("--box must be six finite numbers: X0 Y0 Z0 X1 Y1 Z1")
    if not (math.isfinite(step) and step > 0):
        raise KinemaError(f"--step must be a positive number of metres, got {step}")
    low, high = box.min(axis=0), box.max(axis=0)
    shape = tuple(int(max(1, math.ceil((h - lo) / step - 1e-9))) for lo, h in zip(low, high))
    if math.prod(shape) > MAX_CELLS:
        raise KinemaError(f"--box / --step make {math.prod(shape)} cells, more than {MAX_CELLS:,}; use a larger --step")
    return low, shape


def grid_cells(box, step: float) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Cell centres (C, 3) of the box cut into cubes of side `step`, x fastest, and the grid's shape."""
    low, shape = grid_shape(box, step)
    axes = [lo + (np.arange(n) + 0.5) * step for lo, n in zip(low, shape)]
    z, y, x = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    return np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1), shape


def _ball_back(steps, centre: np.ndarray, radius: float):
    """A ball holding every position of a point given in the frame after `steps[-1]` (the ball
    `centre`, `radius` there), in the frame before `steps[0]`. A turn about an axis through
    the joint origin moves the ball within the ball centred on the axis's nearest point, wider
    by the distance to it (triangle inequality, whatever the joint's limits). None with a slide."""
    from .model.kinematics import FIXED, REVOLUTE

    centre = np.asarray(centre, dtype=float)
    for step in reversed(steps):
        if step.kind != FIXED:
            if step.kind != REVOLUTE:
                return None
            axis = np.asarray(step.axis, dtype=float)
            axis = axis / np.linalg.norm(axis)
            foot = (centre @ axis) * axis
            radius += float(np.linalg.norm(centre - foot))
            centre = foot
        centre = step.origin[:3, :3] @ centre + step.origin[:3, 3]
    return centre, radius


def reach_ball(robot, link: str) -> tuple[np.ndarray, float] | None:
    """A ball no pose of `link` can leave, in the root frame: centred on the first moving joint's
    axis, its radius grown joint by joint by the distance of the ball's centre from each axis
    (`_ball_back`), so offsets along an axis cost nothing. None when a slide is in the chain."""
    from .model.kinematics import chain_steps

    steps = chain_steps(robot, link)
    if not any(step.kind for step in steps):
        return None
    return _ball_back(steps, np.zeros(3), 0.0)


@dataclass(frozen=True)
class PointTest:
    """Where one point that moves with the pose may be. The point is one of `points` (K, 3, in
    the link's frame; K > 1 samples a circle the point may lie anywhere on, `slack` the most a
    point of the circle is from the nearest sample), and it must lie within `far` of the
    bounds' centre and at least `near` from the first moving joint's axis (both distances a turn
    of that joint leaves alone)."""

    points: np.ndarray
    far: float
    near: float
    slack: float = 0.0

    def passes(self, centres: np.ndarray, rotations: np.ndarray, centre: np.ndarray, axis: np.ndarray) -> np.ndarray:
        """(C, N) bool for cell centres (C, 3) x rotations (N, 3, 3)."""
        offsets = np.einsum("nij,kj->nki", rotations, self.points)  # (N, K, 3)
        ok = np.zeros((len(centres), len(rotations)), dtype=bool)
        for k in range(len(self.points)):
            v = centres[:, None, :] + offsets[None, :, k] - centre
            along = v @ axis
            radial = np.sqrt(np.maximum(np.einsum("cni,cni->cn", v, v) - along ** 2, 0.0))
            ok |= (np.linalg.norm(v, axis=-1) <= self.far + self.slack) & (radial >= self.near - self.slack)
        return ok


@dataclass(frozen=True)
class ReachBounds:
    """Tests that decide a pose unreachable without solving it.

    - the link's origin stays within `radius` of `centre` (a point on the first moving joint's
      axis `axis`, so the distance does not change with that joint): a cell farther away is out
      at every orientation;
    - `tests`: the last moving joint's origin is fixed by the pose alone (its own turn leaves it
      where it is), and the joint before it lies on a circle about the last joint's axis; each must
      be where some configuration can put it (`PointTest`), else the pose is out.

    Each limit is the extreme a search over the joint limits found (many random configurations,
    the best hill-climbed to a local extreme) widened by `MARGIN`, and no radius exceeds the
    triangle bound of `reach_ball` (which no configuration can beat). A pose lost to an extreme
    the search missed would be a reachable pose marked out: the UR5 closed-form check
    (tests/core/test_reach.py) counts those.
    """

    centre: np.ndarray
    axis: np.ndarray
    radius: float
    tests: tuple[PointTest, ...] = ()

    def cells_in(self, centres: np.ndarray) -> np.ndarray:
        return np.linalg.norm(np.asarray(centres, dtype=float) - self.centre, axis=-1) <= self.radius

    def poses_in(self, centres: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        """(C, N) bool: which (cell, orientation) pass every test."""
        centres = np.asarray(centres, dtype=float).reshape(-1, 3)
        inside = np.repeat(self.cells_in(centres)[:, None], len(rotations), axis=1)
        for test in self.tests:
            rows = np.flatnonzero(inside.any(axis=1))
            inside[rows] &= test.passes(centres[rows], rotations, self.centre, self.axis)
        return inside


#: Added to a searched extreme distance (metres): what the search may fall short by.
MARGIN = 1e-3
#: Samples on the circle of the second-last joint's origin.
CIRCLE_SAMPLES = 48
_BOUNDS: dict = {}


def _extremes(robot, frame_link: str, centre: np.ndarray, axis: np.ndarray, rng) -> tuple[float, float]:
    """(largest distance of `frame_link`'s origin from `centre`, smallest from the axis through
    it) over the joint limits: 8,000 random configurations, the 8 most extreme hill-climbed by
    shrinking random steps (kept within the limits) down to 1e-7 rad."""
    from .model.kinematics import link_pose

    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)

    def measures(q):
        v = link_pose(robot, q, frame_link)[:, :3, 3] - centre
        along = v @ axis
        return np.linalg.norm(v, axis=1), -np.sqrt(np.maximum(np.einsum("bi,bi->b", v, v) - along ** 2, 0.0))

    found = []
    start = robot.random_configurations(8000, rng)
    for which in (0, 1):
        score = measures(start)[which]
        best = start[np.argsort(score)[-8:]].copy()
        value = measures(best)[which]
        for scale in np.geomspace(0.5, 1e-7, 40):
            trial = np.clip(np.repeat(best, 24, axis=0) + rng.normal(0.0, scale, (len(best) * 24, robot.dof)), lower, upper)
            d = measures(trial)[which].reshape(len(best), 24)
            pick = d.argmax(axis=1)
            better = d[np.arange(len(best)), pick] > value
            best[better] = trial.reshape(len(best), 24, -1)[np.arange(len(best)), pick][better]
            value = np.maximum(value, d.max(axis=1))
        found.append(float(value.max()))
    return found[0], -found[1]


def reach_bounds(robot, link: str) -> ReachBounds | None:
    """`ReachBounds` for this link (searched once per robot and link in a process), None when a
    slide is in the chain."""
    from .model.kinematics import FIXED, REVOLUTE, chain_steps

    key = (id(robot), robot.path, link)
    if key in _BOUNDS:
        return _BOUNDS[key]
    ball = reach_ball(robot, link)
    bounds = None
    if ball is not None:
        rng = np.random.default_rng(20261201)
        steps = chain_steps(robot, link)
        moving = [i for i, step in enumerate(steps) if step.kind != FIXED]
        frame = np.eye(4)
        for step in steps[:moving[0] + 1]:
            frame = frame @ step.origin
        axis = frame[:3, :3] @ np.asarray(steps[moving[0]].axis, dtype=float)
        axis /= np.linalg.norm(axis)
        centre = ball[0]
        radius = min(ball[1], _extremes(robot, link, centre, axis, rng)[0] + MARGIN)
        tests = []
        last = moving[-1]
        if len(moving) >= 2 and steps[last].kind == REVOLUTE:
            tail = np.eye(4)
            for step in steps[last + 1:]:
                tail = tail @ step.origin
            to_joint = np.linalg.inv(tail)  # link frame -> the last joint's frame (after its turn)
            child = robot.joint_by_name[steps[last].name].child
            far, near = _extremes(robot, child, centre, axis, rng)
            tests.append(PointTest(to_joint[:3, 3][None].copy(), far + MARGIN, near - MARGIN))
            # The second-last joint's origin, seen from the last joint's frame, turns about its axis.
            between = np.eye(4)
            for step in steps[moving[-2] + 1:last + 1]:
                between = between @ step.origin
            u = np.linalg.inv(between)[:3, 3]
            a = np.asarray(steps[last].axis, dtype=float)
            a = a / np.linalg.norm(a)
            foot = (u @ a) * a
            ring = float(np.linalg.norm(u - foot))
            if ring > 1e-9:
                e1 = (u - foot) / ring
                e2 = np.cross(a, e1)
                angles = np.linspace(0.0, 2 * np.pi, CIRCLE_SAMPLES, endpoint=False)
                circle = foot + ring * (np.cos(angles)[:, None] * e1 + np.sin(angles)[:, None] * e2)
            else:
                circle = u[None]
            points = circle @ to_joint[:3, :3].T + to_joint[:3, 3]
            child = robot.joint_by_name[steps[moving[-2]].name].child
            far, near = _extremes(robot, child, centre, axis, rng)
            tests.append(PointTest(points, far + MARGIN, near - MARGIN, ring * np.pi / CIRCLE_SAMPLES))
        bounds = ReachBounds(centre, axis, radius, tuple(tests))
    _BOUNDS[key] = bounds
    return bounds


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
    poses: int  # poses the kernel decided (the others fail a `ReachBounds` test)
    seconds: float  # deciding them (setup_seconds not counted)
    iterations: int = 0  # LM iterations the kernel ran
    cpu_seconds: float = 0.0  # this process's CPU time deciding (the per-core cost, whatever else runs)
    setup_seconds: float = 0.0  # loading the compiled kernel (once per process) and the robot, searching bounds


_ROBOTS: dict = {}


def _robot(robot_ref):
    """The robot by path or name, loaded once per worker process."""
    if not isinstance(robot_ref, str):
        return robot_ref
    if robot_ref not in _ROBOTS:
        from .model.loading import load_robot

        _ROBOTS[robot_ref] = load_robot(robot_ref, check_meshes=False)
    return _ROBOTS[robot_ref]


def _seeds(robot, problem, count: int) -> np.ndarray:
    """Fixed pseudo-random configurations over the free joints' seed windows (their limits; a
    joint that turns freely: +-pi; a slide without limits that matter: its middle)."""
    start = robot.mid_configuration()
    free = problem.free
    lower, upper = problem.seed_window(start[free])
    seeds = np.tile(start, (count, 1))
    seeds[:, free] = lower + np.random.default_rng(20261201).random((count, len(free))) * (upper - lower)
    return seeds


def _lattice(centres: np.ndarray) -> np.ndarray:
    """(C, 3) integer grid coordinates of cell centres (rank of each coordinate on its axis)."""
    return np.stack([np.unique(np.round(centres[:, a], 9), return_inverse=True)[1].ravel() for a in range(3)], axis=1)


def _neighbours(lattice: np.ndarray) -> np.ndarray:
    """(C, 6) chunk index of the cell at -x, -y, -z, +x, +y, +z (-1: none in the chunk)."""
    shape = lattice.max(axis=0) + 1 if len(lattice) else np.ones(3, dtype=int)
    where = np.full(tuple(int(v) for v in shape), -1, dtype=np.int64)
    where[tuple(lattice.T)] = np.arange(len(lattice))
    out = np.full((len(lattice), 6), -1, dtype=np.int64)
    for k, (axis, delta) in enumerate(((0, -1), (1, -1), (2, -1), (0, 1), (1, 1), (2, 1))):
        moved = lattice.copy()
        moved[:, axis] += delta
        ok = (moved[:, axis] >= 0) & (moved[:, axis] < shape[axis])
        out[ok, k] = where[tuple(moved[ok].T)]
    return out


#: A descent whose cost has not halved in this many iterations gives up (the kernel's rule)...
STALL_WINDOW = 10
#: ... and in this many for the extra random starts at a region's edge, where most poses are out.
EDGE_STALL_WINDOW = 5
#: Iterations for a start from a neighbour's witness: it converges quickly or not at all.
NEIGHBOUR_ITERATIONS = 20
#: Random starts for a pose whose earlier neighbours at the same orientation were solved or
#: tried already (the full `seeds` only where no neighbour tells anything).
QUICK_SEEDS = 2
#: More random starts for a pose next to a solved one that its witness did not reach.
EDGE_SEEDS = 3


def reach_chunk(robot_ref, link: str, centres: np.ndarray, cell_indices, orientations: np.ndarray,
                seeds: int = DEFAULT_SEEDS, tolerance: float = REACH_TOLERANCE, max_iterations: int = 100,
                bounds: ReachBounds | None | bool = True) -> ReachChunk:
    """Decide every (cell, orientation) of these cells; runs on a cluster worker.

    1. `ReachBounds` rule out poses no configuration reaches (no solve).
    2. Cells go in diagonal waves (x + y + z grid index), one `solve_poses` call per wave: each
       pose starts from the witnesses of its -x, -y, -z neighbours at the same orientation
       (solved in the wave before), then random starts: all `seeds` where no such neighbour was
       tried, else `QUICK_SEEDS` (a pose whose neighbours are solved converges from them
       almost always; one whose neighbours are out is likely out too).
    3. A flood: a pose still open tries each solved neighbour's witness (all six directions)
       it has not tried, until no new pose is solved; so a reachable region found anywhere in
       the chunk spreads over all of itself. A pose next to a solved one that no witness
       reached gets `EDGE_SEEDS` more random starts (once), then the flood goes on.
    Measured on UR5 against the closed form (bench/RESULTS.md): the give-up rules cost ~0.1 %
    of all poses against trying every seed everywhere, for ~1/2 of the kernel time.
    `bounds=True` computes them (`reach_bounds`), None/False solves every pose.
    """
    import time

    from .model.rotations import quaternion_to_matrix
    from .solve import kernel_status, problem_for, solve_poses

    check_seeds(seeds)
    check_pose_count(len(centres), len(orientations), 1)  # the chunk's own arrays, before any is made
    t0, cpu0 = time.perf_counter(), time.process_time()
    kernel_status(wait=True)  # a map is no live frame: wait for the compiled kernel (loaded once per process)
    robot = _robot(robot_ref)
    link = robot.check_link(link)
    problem = problem_for(robot, (link,), frozenset())
    fixed = _seeds(robot, problem, seeds)
    centres = np.asarray(centres, dtype=float).reshape(-1, 3)
    orientations = np.asarray(orientations, dtype=float)
    rotations = np.array([quaternion_to_matrix(q) for q in orientations]).reshape(-1, 3, 3)
    count, n, dof = len(centres), len(orientations), robot.dof
    if bounds is True:
        bounds = reach_bounds(robot, link)
    setup = time.perf_counter() - t0, time.process_time() - cpu0
    candidate = bounds.poses_in(centres, rotations) if bounds else np.ones((count, n), dtype=bool)
    reached = np.zeros((count, n), dtype=bool)
    witness = np.full((count, n, dof), np.nan)
    tried = np.zeros((count, n, 6), dtype=bool)  # tried from that neighbour's witness
    full = np.zeros((count, n), dtype=bool)  # tried from every random seed
    lattice = _lattice(centres) if count else np.zeros((0, 3), dtype=int)
    around = _neighbours(lattice)
    wave = lattice.sum(axis=1)
    options = {"position_tolerance": tolerance, "rotation_tolerance": tolerance}
    iterations = 0

    def attempt(cells, orient, starts, direction_of_start, stall_window=STALL_WINDOW):
        nonlocal iterations
        caps = [NEIGHBOUR_ITERATIONS if d >= 0 else max_iterations for d in direction_of_start]
        sol = solve_poses(problem, centres[cells], rotations[orient], starts, **options, max_iterations=caps,
                          stall_window=stall_window)
        iterations += int(sol.iterations.sum())
        for k, d in enumerate(direction_of_start):
            if d >= 0:
                tried[cells, orient, d] |= np.isfinite(starts[:, k, 0])
        ok = sol.converged & np.all(sol.q >= robot.lower - 1e-12, axis=1) & np.all(sol.q <= robot.upper + 1e-12, axis=1)
        reached[cells[ok], orient[ok]] = True
        witness[cells[ok], orient[ok]] = sol.q[ok]

    for w in np.unique(wave):
        cells, orient = np.nonzero(candidate[wave == w])
        if not len(cells):
            continue
        cells = np.flatnonzero(wave == w)[cells]
        starts = np.full((len(cells), 3 + seeds, dof), np.nan)
        told = np.zeros(len(cells), dtype=bool)
        for d in range(3):
            other = around[cells, d]
            has = other >= 0
            starts[has, d] = witness[other[has], orient[has]]
            told[has] |= candidate[other[has], orient[has]]
        starts[:, 3:] = fixed
        starts[told, 3 + QUICK_SEEDS:] = np.nan
        full[cells, orient] = ~told
        attempt(cells, orient, starts, (0, 1, 2) + (-1,) * seeds)

    while True:
        open_cells, open_orient = np.nonzero(candidate & ~reached)
        starts = np.full((len(open_cells), 6, dof), np.nan)
        beside = np.zeros(len(open_cells), dtype=bool)  # a neighbour at this orientation is solved
        for d in range(6):
            other = around[open_cells, d]
            use = other >= 0
            use[use] = reached[other[use], open_orient[use]]
            beside |= use
            use &= ~tried[open_cells, open_orient, d]
            starts[use, d] = witness[other[use], open_orient[use]]
        keep = np.isfinite(starts[:, :, 0]).any(axis=1)
        if keep.any():
            attempt(open_cells[keep], open_orient[keep], starts[keep], tuple(range(6)))
            continue
        # Next to a solved pose but not reached from it: the edge of a region, worth every seed.
        more = beside & ~full[open_cells, open_orient]
        if not more.any():
            break
        cells, orient = open_cells[more], open_orient[more]
        full[cells, orient] = True
        edge = fixed[QUICK_SEEDS:QUICK_SEEDS + EDGE_SEEDS]
        attempt(cells, orient, np.broadcast_to(edge, (len(cells), len(edge), dof)), (-1,) * len(edge),
                EDGE_STALL_WINDOW)
    return ReachChunk(np.asarray(cell_indices), reached, witness, int(candidate.sum()), time.perf_counter() - t0 - setup[0],
                      iterations, time.process_time() - cpu0 - setup[1], setup[0])


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
    """A map written by `ReachMap.save` (no pickles: a map file runs no code), checked whole
    (`map_problem`) before anything draws it."""
    from .files import check_input_file

    check_input_file(path, "reach map")
    try:
        with np.load(path, allow_pickle=False) as data:
            reach_map = ReachMap(str(data["robot"]), str(data["link"]), [str(n) for n in data["joint_names"]], data["centres"],
                                 tuple(int(v) for v in data["shape"]), float(data["step"]), data["orientations_wxyz"],
                                 data["reached"], data["witness"])
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise KinemaError(f"reach map '{path}' cannot be read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    problem = map_problem(reach_map)
    if problem:
        raise KinemaError(f"reach map '{path}': {problem}; refusing to use it")
    return reach_map


def map_problem(reach_map: ReachMap) -> str | None:
    """What makes a map's arrays disagree with each other or hold non-finite numbers, else None.
    A map with NaN centres would be drawn as points at the origin or nowhere, and a shape that
    is not its cell count would be drawn sliced wrong: both look like a real map."""
    centres = np.asarray(reach_map.centres)
    cells = len(centres) if centres.ndim else 0
    if centres.ndim != 2 or centres.shape[1:] != (3,) or not np.issubdtype(centres.dtype, np.number):
        return f"centres have shape {centres.shape}, not (cells, 3)"
    if not np.all(np.isfinite(centres)):
        return "a cell centre is not finite (NaN or inf)"
    if len(reach_map.shape) != 3 or min(reach_map.shape) < 1 or int(np.prod(reach_map.shape, dtype=object)) != cells:
        return f"the grid shape {reach_map.shape} does not hold its {cells} cells"
    if not (math.isfinite(reach_map.step) and reach_map.step > 0):
        return f"the cell size {reach_map.step} is not a positive number"
    orientations = np.asarray(reach_map.orientations)
    if orientations.ndim != 2 or orientations.shape[1:] != (4,) or not np.all(np.isfinite(orientations)):
        return "the orientations are not finite quaternions (orientations, 4)"
    reached = np.asarray(reach_map.reached)
    if reached.dtype != bool or reached.shape != (cells, len(orientations)):
        return f"'reached' has shape {reached.shape} of {reached.dtype}, not ({cells}, {len(orientations)}) of bool"
    witness = np.asarray(reach_map.witness)
    if witness.shape != (cells, len(orientations), len(reach_map.joint_names)):
        return f"the witness configurations have shape {witness.shape}, not ({cells}, {len(orientations)}, " \
               f"{len(reach_map.joint_names)} joints)"
    if not np.all(np.isfinite(witness[reached])):
        return "a reached pose's witness configuration is not finite"
    return None


def check_map_matches(reach_map: ReachMap, robot, where: str = "reach map") -> None:
    """Refuse a map made for another robot: its robot name and joint names must be the rig's
    (a map of another arm, drawn on this one, shows reach it does not have)."""
    if reach_map.robot != robot.name:
        raise KinemaError(f"{where} is of robot '{reach_map.robot}', not '{robot.name}'; refusing to draw it on this rig")
    if list(reach_map.joint_names) != list(robot.actuated_joint_names):
        raise KinemaError(f"{where} was made for the joints {', '.join(reach_map.joint_names[:8])}, not this rig's "
                          f"{', '.join(robot.actuated_joint_names[:8])}; refusing to draw it on this rig")
    if reach_map.link not in robot.links:
        raise KinemaError(f"{where} is of link '{reach_map.link}', which this rig does not have")


def chunks(count: int, parts: int, work: np.ndarray | None = None) -> list[np.ndarray]:
    """Cell indices cut into `parts` contiguous runs (neighbouring cells seed each other), of
    about equal `work` per run when given (per cell, e.g. the poses the bounds leave to solve:
    cells outside the reach cost nothing, so equal cell counts would not balance the workers)."""
    parts = max(1, min(count, parts))
    if work is None or not np.asarray(work).sum() > 0:
        return [c for c in np.array_split(np.arange(count), parts) if len(c)]
    total = np.cumsum(np.asarray(work, dtype=float) + 1e-3)  # + a little per cell: empty cells are not free
    cuts = np.searchsorted(total, total[-1] * np.arange(1, parts) / parts)
    return [c for c in np.split(np.arange(count), cuts) if len(c)]


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
