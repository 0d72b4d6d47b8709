"""Several ways to reach one pose: every distinct in-limit configuration for a target.

How solutions are found: the compiled LM kernel (`core.solve.descend_batch`) from many seeds
in one batch per round (the current pose first, then seeds drawn uniformly within the limits,
a fixed random stream so the same request always gives the same answer), until a round adds
no new branch. On an arm without a spare joint each new branch also seeds its shoulder, elbow
and wrist flips, and every combination of them, in the next round (the current pose's, when
it reaches the target, in the first); a flip that negates the elbow or the wrist's middle
joint first settles with that joint held, so it starts beside the other branch instead of
running into a limit; a joint of two turns or more starts nearest the middle of its range, so
the descent is not stopped by a limit the other way round is free of. Before the last
comparison the branches are polished toward their exact solution (`POLISH_TOLERANCE`), so two
answers of one branch beside a singularity meet.

What "distinct" means (a different branch, not a nearby point):
- Joints that can turn a full revolution or more (continuous joints, and revolute joints whose
  range is at least 2 pi, like the UR's +-360 deg) are compared modulo 2 pi: theta and
  theta + 2 pi are the same branch. Each branch is then shown at its representative nearest to
  the current pose, within limits.
- Two solutions are the same branch when no joint differs by more than `DISTINCT_RAD`
  (0.05 rad, ~3 deg; metres for a prismatic joint) after that wrapping. Solutions converge to
  1e-5 m / 1e-5 rad at the tool, far tighter than that; distinct branches of a 6-axis arm are
  apart by large angles except right at a singularity, where two branches meet and are one.
- A redundant arm (seven or more free revolute joints, see `core.stages.swivel`) reaches a pose along
  a one-parameter family; points of one family are not different configurations. Every
  solution is therefore first swung to the swivel angle of the current pose (or as near as its
  limits allow) and only then compared, so what remains are different branches of the
  shoulder, elbow and wrist at the same elbow swivel. A family whose limits keep it from that
  swivel is shown once per sign pattern of its shoulder, elbow and wrist joints (2nd, 4th and
  6th revolute joints) and side, at the end nearest the current swivel, once a long swing
  has shown that it truly cannot reach it.

Ordered by distance from the current pose (Euclidean, on the representatives); the
configuration that is the current pose is marked `current`.

Bounded for any robot: the search refuses, in one line, targets that move more than
`MAX_FREE_JOINTS` joints; it keeps at most `MAX_CONFIGURATIONS` configurations (an arm with
joints to spare beyond its elbow swivel reaches a pose in a continuum, where every seed is a
"new" branch, and each branch's flips seeded the next round: the seeds grew eightfold a round)
and descends at most `MAX_FLIP_SEEDS` flips a round; branches are compared `COMPARE_ROWS` at a
time. Its memory is then a few hundred MB at most and its time a few rounds of bounded batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import KinemaError
from ..lru import LRU
from ..model.robot import RobotModel

#: Largest joint difference (rad, or m for prismatic joints) between two solutions of one branch.
DISTINCT_RAD = 0.05
#: Random seeds per round (arms without a spare joint, and redundant arms), and most rounds;
#: the search stops early after a round with no new branch.
SEEDS_PER_ROUND = 16
SEEDS_PER_ROUND_REDUNDANT = 48
MAX_ROUNDS = 6
MIN_ROUNDS = 2
#: Most kernel iterations per descent: a flip's, and the swings of a redundant arm (a seed that
#: stops improving stops sooner).
ITERATIONS = 40
#: Most iterations of a random seed's descent; one that then is within RESCUE_ERROR (m, rad)
#: of the target goes on for up to RESCUE_ITERATIONS more.
SEED_ITERATIONS = 20
RESCUE_ERROR = 1e-3
RESCUE_ITERATIONS = 60
#: On an arm without a spare joint a random seed gives up after this many iterations without halving
#: its error (the kernel's own window: 10); one near a solution goes on (RESCUE_ERROR). UR5,
#: seeds 2026 and 7: the same branches found with 21 % fewer kernel iterations; 4 lost one.
SEED_STALL = 5
#: Iterations a flip seed settles with its flipped joint held (`_settle_flips`), and how near
#: (rad) a settled seed may come to a branch already found before it is dropped.
SETTLE_ITERATIONS = 6
SETTLED_KNOWN = 0.1
#: On a redundant arm a random seed gives up after this many iterations without progress: there
#: many cheap seeds found as many branches as fewer patient ones (the kernel's own window: 10).
REDUNDANT_STALL = 3
#: Iterations of the long swing that decides whether a family's end truly misses the swivel.
END_ITERATIONS = 150
#: A redundant arm's solution within this of the reference swivel (rad) reached it.
SWIVEL_REACHED = 1e-3
#: Before the last comparison an arm without a spare joint polishes its branches this far
#: (m, rad), for at most this many iterations, never giving up early: near a singularity (a UR
#: wrist at pi - 0.001) the tool's 1e-5 leaves the joints around it loose by several DISTINCT_RAD,
#: so two answers of one branch, each within 1e-5, can lie either side of it and compare apart.
POLISH_TOLERANCE = 1e-10
POLISH_ITERATIONS = 60
#: The bound on a search (see the module's docstring): most free joints the targets may move
#: (beyond: a one-line refusal), most configurations kept, most flip seeds a round, and how many
#: candidates are compared at once. A 17-joint robot (robosuite's GR1, both hands: 3 waist and
#: 2 x 7 arm joints) found 434 branches and 1.4 GB in 12 s unbounded, growing eightfold a round.
MAX_FREE_JOINTS = 24
MAX_CONFIGURATIONS = 64
MAX_FLIP_SEEDS = 256
COMPARE_ROWS = 64
#: The time bound that follows: the most kernel steps (one LM iteration on one seed; a step that
#: only measures counts one) a search with the default seeds and rounds asks for, whatever the
#: robot. Each round descends at most MAX_FLIP_SEEDS + SEEDS_PER_ROUND_REDUNDANT seeds (settle,
#: descent, rescue, a redundant arm's two swings and its swivel measure); then at most 54 family
#: ends (3 sign joints x 2 sides) take a long swing, and MAX_CONFIGURATIONS branches a polish.
#: Each step costs O(joints^2) on at most MAX_FREE_JOINTS joints: robosuite's GR1 (17 joints)
#: answers in about 4 s.
MAX_DESCENT_STEPS = (2 + MAX_ROUNDS * (MAX_FLIP_SEEDS + SEEDS_PER_ROUND_REDUNDANT)
                     * (SETTLE_ITERATIONS + max(ITERATIONS, SEED_ITERATIONS) + RESCUE_ITERATIONS + 2 * ITERATIONS + 1)
                     + 3 ** 3 * 2 * (END_ITERATIONS + ITERATIONS + 1) + MAX_CONFIGURATIONS * (POLISH_ITERATIONS + 1))
#: Found sets kept for the Configuration-Select node (per robot, targets, held joints, swivel).
CACHE_SIZE = 256


class TooManyJoints(KinemaError):
    """Targets that move more joints than the search is bounded for (`MAX_FREE_JOINTS`)."""


@dataclass(frozen=True)
class Configuration:
    """One way to reach the target."""

    joints: np.ndarray
    position_error: float
    rotation_error: float
    distance: float  # from the current pose, on the representative shown
    current: bool


def wraps(robot: RobotModel) -> np.ndarray:
    """Joints compared modulo 2 pi: continuous, or revolute with a range of a full turn or more."""
    span = robot.upper - robot.lower
    return ~robot.is_prismatic & (robot.is_continuous | (span >= 2 * np.pi - 1e-6))


def branch_difference(robot: RobotModel, a: np.ndarray, b: np.ndarray, wrapping: np.ndarray | None = None) -> np.ndarray:
    """a - b per joint, wrapped into (-pi, pi] for the joints in `wraps` (`wrapping`: that
    mask, when the caller has it already). Broadcasts."""
    difference = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    wrapped = (difference + np.pi) % (2 * np.pi) - np.pi
    return np.where(wraps(robot) if wrapping is None else wrapping, wrapped, difference)


def same_branch(robot: RobotModel, a: np.ndarray, b: np.ndarray, tolerance: float = DISTINCT_RAD,
                wrapping: np.ndarray | None = None) -> bool:
    return bool(np.max(np.abs(branch_difference(robot, a, b, wrapping))) <= tolerance)


def nearest_representative(robot: RobotModel, q: np.ndarray, reference: np.ndarray, wrapping: np.ndarray | None = None) -> np.ndarray:
    """q (n,) or a batch (B, n) with each wrapping joint moved by whole turns to the value
    nearest `reference` that is still within its limits."""
    q = np.array(q, dtype=float)
    reference = np.asarray(reference, dtype=float)
    columns = np.flatnonzero(wraps(robot) if wrapping is None else wrapping)
    if len(columns):
        turns = 2 * np.pi * np.arange(-2, 3)
        near = reference[columns] + ((q[..., columns] - reference[columns] + np.pi) % (2 * np.pi) - np.pi)
        options = near[..., None] + turns  # (..., w, 5)
        inside = (options >= robot.lower[columns, None] - 1e-9) & (options <= robot.upper[columns, None] + 1e-9)
        best = np.argmin(np.where(inside, np.abs(options - reference[columns, None]), np.inf), axis=-1)
        chosen = np.take_along_axis(options, best[..., None], axis=-1)[..., 0]
        q[..., columns] = np.where(inside.any(axis=-1), chosen, q[..., columns])
    return np.clip(q, robot.lower, robot.upper)


def _held(robot: RobotModel, options, hold_prismatic: bool) -> frozenset[str]:
    return frozenset(options.held_joints) | robot.held_joints(hold_slides=hold_prismatic)


def _new_branches(robot: RobotModel, candidates: np.ndarray, found: np.ndarray, wrapping: np.ndarray | None = None) -> np.ndarray:
    """The candidates (m, n) that are a branch neither of `found` (f, n) nor of an earlier
    candidate: one comparison over all pairs, then a greedy pass in order."""
    return candidates[_new_branch_rows(robot, candidates, found, wrapping=wrapping)]


def _new_branch_rows(robot: RobotModel, candidates: np.ndarray, found: np.ndarray, tolerance: float = DISTINCT_RAD,
                     wrapping: np.ndarray | None = None) -> list[int]:
    """`_new_branches`, as row indices of `candidates`, `tolerance` apart."""
    if not len(candidates):
        return []
    wrapping = wraps(robot) if wrapping is None else wrapping
    pool = np.concatenate([found, candidates]) if len(found) else candidates
    near = np.concatenate([np.max(np.abs(branch_difference(robot, rows[:, None], pool[None], wrapping)), axis=-1) <= tolerance
                           for rows in np.array_split(candidates, -(-len(candidates) // COMPARE_ROWS))])
    offset = len(pool) - len(candidates)
    blocked = near[:, :offset].any(axis=1) if offset else np.zeros(len(candidates), dtype=bool)
    among = near[:, offset:]
    kept: list[int] = []
    for i in range(len(candidates)):
        if not blocked[i]:  # no branch found and no candidate kept before it is this one
            kept.append(i)
            blocked |= among[:, i]
    return kept


def find_configurations(
    robot: RobotModel,
    targets,
    current: np.ndarray,
    options=None,
    *,
    seeds_per_round: int | None = None,
    max_rounds: int = MAX_ROUNDS,
    rng_seed: int = 0,
    hold_prismatic: bool = True,
) -> list[Configuration]:
    """Every distinct in-limit configuration that reaches `targets` (IKTarget or list), ordered
    by distance from `current`, the current one marked. Empty when nothing reaches the target.
    Joints outside the chain and held joints (and, with `hold_prismatic`, every slide: rails
    and fingers move by hand) keep their values from `current`.

    Every round's seeds go through the compiled kernel in batches (`core.solve.descend_batch`;
    on an arm without a spare joint the flips and the random seeds apart, with their own
    iteration budgets, and a seed that ends near a solution goes on in a rescue batch): the
    first round's are the current pose and, on an arm without a spare joint when the current pose
    reaches the target, its branch flips; each round adds random seeds and the flips of what the
    round before found. On such an arm the branches are polished before the last comparison."""
    from ..solve import SolveOptions, check_start, check_targets, converged, descend_batch, problem_for
    from .swivel import has_spare_joint, swivel_links

    options = options or SolveOptions(backend="numpy")
    arrays = check_targets(robot, targets)
    current = check_start(robot, current)
    held = _held(robot, options, hold_prismatic)
    wrapping = wraps(robot)
    problem = problem_for(robot, arrays.links, held)
    if len(problem.free) > MAX_FREE_JOINTS:
        raise TooManyJoints(f"Find Solutions searches at most {MAX_FREE_JOINTS} joints; {', '.join(arrays.links)} "
                            f"move{'s' if len(arrays.links) == 1 else ''} {len(problem.free)}: hold some, or aim at fewer links")
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    spare = next((link for link in arrays.links if has_spare_joint(robot, link, held)), None)
    if seeds_per_round is None:
        seeds_per_round = SEEDS_PER_ROUND if spare is None else SEEDS_PER_ROUND_REDUNDANT

    def descend(seeds, swivel=None):
        q, errors, _, _, _ = descend_batch(problem, seeds, arrays, tol_p, tol_r, ITERATIONS,
                                           swivel_links=None if swivel is None else swivel_at[0], swivel=swivel)
        return q, converged(errors, arrays.weights, tol_p, tol_r)

    def descend_seeds(seeds, iterations, stall=None):
        # A seed that ends near a solution (beside a singularity, where LM crawls) goes on, never
        # giving up; the rest stop at `iterations`.
        patience = {} if stall is None else {"stall_window": stall}
        q, errors, _, _, _ = descend_batch(problem, seeds, arrays, tol_p, tol_r, iterations, **patience)
        ok = converged(errors, arrays.weights, tol_p, tol_r)
        near = ~ok & (np.max(errors, axis=(1, 2)) <= RESCUE_ERROR)
        if near.any() and RESCUE_ITERATIONS:
            q[near], errors_near, _, _, _ = descend_batch(problem, q[near], arrays, tol_p, tol_r, RESCUE_ITERATIONS, stall_window=0)
            ok[near] = converged(errors_near, arrays.weights, tol_p, tol_r)
        return q, ok

    def swivel_miss(q, wanted):
        # The kernel's own swivel residual at q (no step taken): wanted - angle, wrapped.
        return -descend_batch(problem, q, arrays, tol_p, tol_r, 0, swivel_links=swivel_at[0], swivel=wanted)[2]

    signature = np.zeros(0, dtype=int)
    if spare is not None:
        swivel_at = (swivel_links(robot, spare, held), 0.0)
        swivel_at = (swivel_at[0], float(swivel_miss(current[None], 0.0)[0]))
        revolute = [robot.joint_index(n) for n in robot.chain_joint_names(spare)
                    if n not in held and not robot.is_prismatic[robot.joint_index(n)]]
        signature = np.array([revolute[1], revolute[3], revolute[5]])

    rng = np.random.default_rng(rng_seed)
    found = np.zeros((0, robot.dof))
    ends: dict[tuple, tuple[float, np.ndarray]] = {}  # redundant arms: families that cannot reach the swivel
    # Flip seeds help a 6-axis arm find branches with small basins; on a redundant arm (compared
    # at one swivel) they measured no better than random seeds and cost time, so they are off.
    flips = _flip_groups(robot, problem, held) if spare is None else []
    pending = _Seeds(robot.dof)
    pending.add(current, ())
    # No step taken: the kernel's own errors at the current pose, and whether it reaches.
    current_reaches = bool(descend_batch(problem, current[None], arrays, tol_p, tol_r, 0)[4][0])
    flipped_current = current_reaches and bool(flips)
    if flipped_current:  # the current pose is a branch: its flips join the first round
        pending.add_flips(_flipped(robot, current[None], flips), flips)
    for round_index in range(max_rounds):
        seeds, holds = pending.take(MAX_FLIP_SEEDS)
        seeds = _settle_flips(robot, arrays, held, seeds, holds, tol_p, tol_r)
        # A settled flip already on a branch found (or on another settled flip) adds nothing.
        seeds = seeds[_new_branch_rows(robot, seeds, found, SETTLED_KNOWN, wrapping)]
        drawn = _random_seeds(problem, current, seeds_per_round, rng)
        if spare is None:
            # A flip may have far to go (a folded elbow's other side): it keeps the full descent.
            q, ok = descend_seeds(seeds, ITERATIONS)
            q_drawn, ok_drawn = descend_seeds(drawn, SEED_ITERATIONS, SEED_STALL)
            q, ok = np.concatenate([q, q_drawn]), np.concatenate([ok, ok_drawn])
        else:
            q, ok = descend_seeds(np.concatenate([seeds, drawn]), SEED_ITERATIONS, REDUNDANT_STALL)
        q = q[ok]
        misses = np.zeros(len(q))
        if spare is not None and len(q):
            # Swing each solution to the current pose's swivel, then let the tool have the last word.
            q, _ = descend(q, np.full(len(q), swivel_at[1]))
            q, ok = descend(q)
            q = q[ok]
            misses = swivel_miss(q, swivel_at[1]) if len(q) else misses[:0]
        q = nearest_representative(robot, q, current, wrapping)
        added = 0
        for candidate, miss in zip(q[np.abs(misses) > SWIVEL_REACHED], misses[np.abs(misses) > SWIVEL_REACHED]):
            # One family, many end points (where the seed's descent stopped): keep one per
            # branch sign pattern (shoulder, elbow, wrist joints) and side, the nearest swivel.
            key = (*np.sign(candidate[signature]).astype(int), int(np.sign(miss)))
            added += key not in ends
            if key not in ends or abs(miss) < ends[key][0]:
                ends[key] = (abs(miss), candidate)
        fresh = _new_branches(robot, q[np.abs(misses) <= SWIVEL_REACHED], found, wrapping)
        found = np.concatenate([found, fresh])
        if flips:
            # (the current pose's flips went into the first round)
            flipping = fresh[_new_branch_rows(robot, fresh, current[None], wrapping=wrapping)] if flipped_current else fresh
            pending.add_flips(_flipped(robot, flipping, flips), flips)
        added += len(fresh)
        if len(found) >= MAX_CONFIGURATIONS:
            break
        if round_index + 1 >= MIN_ROUNDS and added == 0:
            break
    if ends:
        # A family's end is a configuration of its own only if its swivel truly cannot reach the
        # current one: a descent that stalled short of it is given a long swing first, and what
        # then reaches the swivel is compared like any other branch.
        last = np.array([c for _, c in ends.values()])
        swung, _, _, _, _ = descend_batch(problem, last, arrays, tol_p, tol_r, END_ITERATIONS, swivel_links=swivel_at[0],
                                          swivel=np.full(len(last), swivel_at[1]), stall_window=0)
        swung, ok = descend(swung)
        reaches = ok & (np.abs(swivel_miss(swung, swivel_at[1])) <= SWIVEL_REACHED)
        last[reaches] = nearest_representative(robot, swung[reaches], current, wrapping)
        found = np.concatenate([found, _new_branches(robot, last[reaches], found, wrapping)])
        found = np.concatenate([found, _new_branches(robot, last[~reaches], found, wrapping)])
    found = found[:MAX_CONFIGURATIONS]
    if not len(found):
        return []
    if spare is None:
        found = _polished(robot, problem, arrays, found, current, tol_p, tol_r, wrapping)
    errors = descend_batch(problem, found, arrays, tol_p, tol_r, 0)[1]
    result = []
    for q, err in zip(found, errors):
        distance = float(np.linalg.norm(q - current))
        is_current = current_reaches and same_branch(robot, q, current, wrapping=wrapping)
        if is_current:
            q, distance = current.copy(), 0.0
        result.append(Configuration(q, float(np.max(err[:, 0])), float(np.max(err[:, 1])), distance, is_current))
    result.sort(key=lambda c: (not c.current, c.distance))
    return result


def _polished(robot: RobotModel, problem, arrays, found: np.ndarray, current: np.ndarray, tol_p, tol_r, wrapping) -> np.ndarray:
    """The branches found, each descended toward its exact solution (`POLISH_TOLERANCE`) and
    compared again: answers of one branch that the tool's tolerance left apart (beside a
    singularity) meet there, and are kept once. A row that the polish did not leave within
    the caller's tolerance keeps its unpolished value."""
    from ..solve import converged, descend_batch

    polished, errors, _, _, _ = descend_batch(problem, found, arrays, POLISH_TOLERANCE, POLISH_TOLERANCE, POLISH_ITERATIONS,
                                              stall_window=0)
    ok = converged(errors, arrays.weights, tol_p, tol_r)
    found = np.where(ok[:, None], nearest_representative(robot, polished, current, wrapping), found)
    return found[_new_branch_rows(robot, found, found[:0], wrapping=wrapping)]


def wrap_angle(angle):
    return (np.asarray(angle) + np.pi) % (2 * np.pi) - np.pi


def _flip_groups(robot: RobotModel, problem, held) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The classic branch flips of an arm, as (joints turned half a turn, joints negated):
    shoulder (1st and 3rd revolute joints +pi, 2nd negated), elbow (the joint after the shoulder
    negated) and wrist (last three: 1st and 3rd +pi, 2nd negated), and every combination of
    them. Exact for an arm whose shoulder and wrist axes meet; for others (offsets, like the UR
    and the Panda) they are seeds that land near the other branch, so the search finds it
    without waiting for a random seed to fall into its basin."""
    revolute = [int(i) for i in problem.free if not robot.is_prismatic[int(i)]]
    if len(revolute) < 6:
        return []
    shoulder, wrist = revolute[:3], revolute[-3:]
    elbow = revolute[3] if len(revolute) >= 7 else revolute[2]
    basic = [((shoulder[0], shoulder[2]), (shoulder[1],), ()), ((), (elbow,), (elbow,)), ((wrist[0], wrist[2]), (wrist[1],), (wrist[1],))]
    combined = []
    for mask in range(1, 2 ** len(basic)):
        parts = [basic[i] for i in range(len(basic)) if mask >> i & 1]
        turned, negated, held_while_settling = (sum((p[k] for p in parts), ()) for k in range(3))
        combined.append((turned, negated, tuple(sorted(set(held_while_settling)))))
    return combined


def _flipped(robot: RobotModel, branches: np.ndarray, flips) -> np.ndarray:
    """Every flip of every branch (B, n): (B * F, n), branch-major, in the order of `flips`."""
    turned, negated = _flip_masks(robot.dof, tuple(flips))
    seeds = np.repeat(np.asarray(branches, dtype=float)[:, None], len(flips), axis=1)  # (B, F, n)
    # half a turn toward the middle of the joint's range (continuous: either way), then negate
    bounded = np.isfinite(robot.upper - robot.lower)
    middle = np.where(bounded, 0.5 * (np.where(bounded, robot.lower, 0.0) + np.where(bounded, robot.upper, 0.0)), seeds + 1.0)
    seeds = seeds + turned * np.where(seeds < middle, np.pi, -np.pi)
    seeds = np.where(negated, -seeds, seeds)
    # A joint of two turns or more starts at its value nearest the middle of its range, so the
    # descent can go either way: beside a limit the short way to the other branch runs into it.
    centred = bounded & wraps(robot)
    seeds = np.where(centred, middle + ((seeds - middle + np.pi) % (2 * np.pi) - np.pi), seeds)
    return np.clip(seeds, robot.lower, robot.upper).reshape(-1, robot.dof)


@lru_cache(maxsize=64)
def _flip_masks(dof: int, flips: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(F, dof) half turns per joint, and whether it is negated (an odd count), of each flip."""
    turned = np.zeros((len(flips), dof))
    negated = np.zeros((len(flips), dof), dtype=bool)
    for k, (turn, negate, _) in enumerate(flips):
        np.add.at(turned[k], list(turn), 1.0)
        np.logical_xor.at(negated[k], list(negate), True)
    return turned, negated


class _Seeds:
    """The next round's seeds beside the random ones, each with the joints it holds while it
    settles (`_settle_flips`)."""

    def __init__(self, dof: int):
        self.dof = dof
        self.rows, self.holds = [], []

    def add(self, seed, hold) -> None:
        self.rows.append(seed)
        self.holds.append(hold)

    def add_flips(self, seeds: np.ndarray, flips) -> None:
        """`_flipped`'s rows, each holding what its flip holds."""
        self.rows.extend(seeds)
        self.holds.extend(flip[2] for _ in range(len(seeds) // max(len(flips), 1)) for flip in flips)

    def take(self, most: int):
        """The seeds added since the last take, the first `most` of them (the flips of the
        branches found first)."""
        taken = (np.array(self.rows[:most]).reshape(-1, self.dof), self.holds[:most])
        self.rows, self.holds = [], []
        return taken


def _settle_flips(robot, arrays, held, seeds, holds, tol_p, tol_r) -> np.ndarray:
    """A flip negates the elbow or the wrist's middle joint, exactly what the other branch has
    on an arm like the UR; the joints around it do not follow. Holding the flipped joint, the
    others settle first (one short descent per kind of flip), so the free descent starts beside
    the other branch, not at a limit it would run into."""
    from ..solve import descend_batch, problem_for

    seeds = seeds.copy()
    for hold in set(holds) - {()}:
        rows = [i for i, h in enumerate(holds) if h == hold]
        problem = problem_for(robot, arrays.links, held | {robot.actuated_joint_names[i] for i in hold})
        seeds[rows] = descend_batch(problem, seeds[rows], arrays, tol_p, tol_r, SETTLE_ITERATIONS)[0]
    return seeds


def _random_seeds(problem, start: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Configurations drawn uniformly within the free joints' seed windows (their limits; a joint
    that turns freely: start +- pi)."""
    free = problem.free
    lower, upper = problem.seed_window(start[free])
    seeds = np.tile(start, (count, 1))
    seeds[:, free] = rng.uniform(lower, upper, size=(count, len(free)))
    return seeds


def step_index(count: int, index: int, step: int) -> int:
    """◀ ▶: the next index, wrapping round the list."""
    return (index + step) % count if count else 0


# ---- Configuration-Select node ----------------------------------------------------------

_cache = LRU(CACHE_SIZE)


def _cache_key(robot: RobotModel, goals, held) -> tuple:
    poses = tuple((g.link, tuple(np.round(g.position, 6)), tuple(np.round(g.wxyz, 6)), g.position_weight, g.rotation_weight)
                  for g in goals)
    return (robot.fingerprint, poses, tuple(sorted(held)))


def configurations_for_node(robot: RobotModel, goals, joints: np.ndarray, options) -> list[Configuration]:
    """The found set for the node, in its stable order: by distance from the robot's home pose
    (zero, or the nearest in-limit value), so an index names the same branch whatever the arm
    did on the frames before (scrubbing backwards, jumping, baking out of order).

    Cached per (robot, target poses rounded to 1e-6, held joints): one list per pose of the
    controls, found once and kept until a control or the robot changes, so ◀ ▶ step through
    that list (a redundant arm's list is compared at the swivel of the answer that first asked;
    choosing a configuration moves the spare joints, which must not make a new list), and
    scrubbing back over frames already seen does not search again."""
    held = frozenset(options.held_joints)
    key = _cache_key(robot, goals, held)
    found = _cache.get(key)
    if found is None:
        home = robot.zero_configuration()
        home[np.isin(robot.actuated_joint_names, list(held))] = np.asarray(joints)[np.isin(robot.actuated_joint_names, list(held))]
        configurations = find_configurations(robot, goals, joints, options, hold_prismatic=False)
        found = sorted((c.joints for c in configurations), key=lambda q: float(np.linalg.norm(branch_difference(robot, q, home))))
        _cache.put(key, found)
    return found


def apply_stage(stage):
    """Configuration-Select after the solver. values["configuration_index"]: 0 keeps the
    solver's own answer (nearest where the arm was); k >= 1 picks the k-th configuration in
    the node's stable order (see `configurations_for_node`), so a keyed or driven index
    changes configuration on purpose, and the same index gives the same branch on every frame.

    values["find"] (Find Solutions and ◀ ▶ set it for one run) also reports the node's
    solutions: (joints, note, {"solutions": [...], "current": k}), k the 1-based index of the
    solver's own answer among them (0: none is), with "refused": the one line why, when the
    search refuses the targets (`TooManyJoints`)."""
    index = int(stage.values.get("configuration_index", 0))
    find = bool(stage.values.get("find", False))
    try:
        joints, note, found = _choose(stage, index, find)
    except TooManyJoints as exc:  # the solver's own answer stands; Find Solutions says why in one line
        joints, note, found = stage.joints, f"configuration: {exc}", []
        if find:
            return joints, note, {"solutions": [], "current": 0, "refused": str(exc)}
    if not find:
        return joints, note
    current = next((k for k, q in enumerate(found, 1) if same_branch(stage.robot, q, stage.joints)), 0)
    return joints, note, {"solutions": found, "current": current}


def _choose(stage, index: int, find: bool) -> tuple[np.ndarray, str, list]:
    """(joints, note, the node's solutions) for index; the solutions are searched only when
    an index >= 1 or a find asks for them."""
    if index <= 0 and not find:
        return stage.joints, "configuration 0: the solver's own", []
    if not stage.result.converged:
        return stage.joints, "configuration: the solver did not reach the target, nothing to choose from", []
    found = configurations_for_node(stage.robot, stage.goals, stage.joints, stage.options)
    if index <= 0:
        return stage.joints, "configuration 0: the solver's own", found
    if not found:
        return stage.joints, "configuration: none found", found
    chosen = min(index, len(found))
    joints = nearest_representative(stage.robot, found[chosen - 1], stage.start)
    held = np.isin(stage.robot.actuated_joint_names, list(stage.options.held_joints))
    joints[held] = np.asarray(stage.joints)[held]
    note = f"configuration {chosen} of {len(found)}"
    if chosen != index:
        note += f" (asked for {index}; there are only {len(found)})"
    return joints, note, found


def clear_cache() -> None:
    _cache.clear()


__all__ = [
    "DISTINCT_RAD",
    "Configuration",
    "MAX_CONFIGURATIONS",
    "MAX_FREE_JOINTS",
    "TooManyJoints",
    "apply_stage",
    "branch_difference",
    "find_configurations",
    "nearest_representative",
    "same_branch",
    "step_index",
    "wraps",
]
