"""The one solver entry point everything above `core` uses.

`solve` checks the request, runs a backend, and then enforces the contract on whatever came
back, so no backend can break it: joints not in the chain and held joints are copied from
the start bit for bit, multi-turn joints are unwrapped to the value nearest the start,
everything is clipped into its limits, and the errors are measured again in float64 with
the NumPy kinematics (the same yardstick for both backends).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..errors import KinemaError
from ..lru import LRU
from ._blas import single_threaded_blas
from ._chain import problem_for
from ._frame import FrameSolve, solve_frame
from ._kernel import BRANCH_JUMP, kernel_status
from ._numpy_backend import cold_batches, lm_run, solve_numpy
from ._contract import _finish, _within
from ._polish import polish
from ._reach_bound import short_of_reach
from ._types import (IKTarget, SolveOptions, SolveResult, TargetArrays, check_options, check_start,
                     check_targets, pack_targets, replaced)

#: A float32 PyRoki answer that misses the float64 tolerance by less than this is polished by
#: a few float64 NumPy iterations (float32 bottoms out around 1e-6).
POLISH_BELOW = 1e-2
POLISH_ITERATIONS = 6
DEFAULT_OPTIONS = SolveOptions()


def pyroki_available() -> tuple[bool, str | None]:
    """(True, None) if the PyRoki backend can run here; else (False, the reason)."""
    from ._pyroki_backend import pyroki_available as available

    return available()


#: PyRoki compiles the whole robot into one program and its compile time grows with it
#: (400 links: 37 s; 2,000 links: no answer after 300 s). Beyond these the NumPy solver runs,
#: with a message saying why. The largest real robots we ship tests for have ~60 links.
MAX_PYROKI_LINKS = 256
MAX_PYROKI_CHAIN = 64


def pyroki_size_reason(robot, chain_joints: int | None = None) -> str | None:
    """Why a robot (or a chain of `chain_joints` moving joints) is too large for PyRoki, or None."""
    if len(robot.links) > MAX_PYROKI_LINKS:
        return (f"'{robot.name}' has {len(robot.links)} links; PyRoki's compile grows with the robot, so robots over "
                f"{MAX_PYROKI_LINKS} links use the NumPy solver")
    if chain_joints is not None and chain_joints > MAX_PYROKI_CHAIN:
        return (f"the chain has {chain_joints} moving joints; PyRoki's compile grows with the chain, so chains over "
                f"{MAX_PYROKI_CHAIN} joints use the NumPy solver")
    return None


def _choose_backend(options: SolveOptions, robot=None, chain_joints: int | None = None, *,
                    import_jax: bool = True) -> tuple[str, str | None]:
    """`import_jax=False` (the live path): JAX only has to be installed; importing it is left
    to the background build (`_warming`), which reports a failed import."""
    if options.backend == "numpy":
        return "numpy", None
    too_large = pyroki_size_reason(robot, chain_joints) if robot is not None else None
    if too_large:
        return "numpy", too_large
    # Only JAX is needed up front: a solver exported by an earlier session runs without
    # importing PyRoki (and its viewer dependencies); a failed PyRoki import while building
    # one is caught in `solve` and reported the same way.
    from ._pyroki_backend import jax_available, jax_present

    if not import_jax and jax_present():
        return "pyroki", None
    ok, reason = jax_available()
    return ("pyroki", None) if ok else ("numpy", reason)


def _jumped(q: np.ndarray, start: np.ndarray, problem) -> bool:
    return bool(np.max(np.abs(q[problem.free] - start[problem.free]), initial=0.0) > BRANCH_JUMP)


def _walk(robot, problem, start, target_arrays, options):
    """A converged warm answer that changed branch, found again on the start's branch (core/
    solve/_continuation.py): by leading the tool there in small steps, else among seeds close
    around the start. (q, errors, iterations) under the contract, or None (the direct answer stands)."""
    from ._continuation import nearby, walk

    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    spent = 0
    for attempt in (walk, nearby):
        found = attempt(problem, start, target_arrays, tol_p, tol_r, options.max_iterations, BRANCH_JUMP)
        if found is None:
            continue
        spent += found[2]
        q, errors = _finish(robot, problem, start, found[0], target_arrays, options, found[1])
        if _within(errors, target_arrays.weights, tol_p, tol_r):
            return q, errors, spent
    return None


def _reason(robot, problem, q, converged: bool, over_budget: bool) -> str:
    if converged:
        return "converged"
    if over_budget:
        return "over budget"
    x = q[problem.free]
    lower, upper = robot.lower[problem.free], robot.upper[problem.free]
    span = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
    at_limit = (x <= lower + 1e-6 * span) | (x >= upper - 1e-6 * span)
    return "blocked by a joint limit" if at_limit.any() else "out of reach"


def solve(
    robot, targets: IKTarget | Sequence[IKTarget], start: np.ndarray, options: SolveOptions | None = None, *,
    keep_branch: bool = True, search_share: float = 1.0,
) -> SolveResult:
    """Joint values that put each target link at its pose, starting from `start`.

    Never raises for a hard target: an unreachable one returns the closest pose found with
    converged=False. Raises `KinemaError` for a malformed request (NaN, zero quaternion,
    unknown link or joint, wrong start length). A warm solve keeps the branch the start is on
    (core/solve/_continuation.py); `keep_branch=False` is for a search whose start is only a
    seed (a random one), where landing far from it is no branch change to undo. A warm solve
    that misses searches as `cold` does, for `search_share` of the budget (0: not at all), so the
    default start never loses to a cold solve.
    """
    t0 = time.perf_counter()
    options = DEFAULT_OPTIONS if options is None else options
    if options.avoid is not None:  # keep clear of the robot itself / obstacles: core/solve/_avoiding.py
        from ._avoiding import solve_avoiding

        return solve_avoiding(robot, targets, start, options, solve)
    if options.backend == "numpy":
        result = solve_frame(robot, targets, start, options, t0)  # one compiled call (core/solve/_frame.py)
        if result is not None:
            return result
    return _solve_past_frame(robot, targets, start, options, t0, keep_branch, search_share)


def _solve_past_frame(robot, targets, start, options: SolveOptions, t0: float, keep_branch: bool = True,
                      search_share: float = 1.0) -> SolveResult:
    """`solve` after the compiled frame call missed (or was not asked): the general path. A live
    frame whose own frame call just missed comes here directly, so that the same descent is not
    run a second time before the restarts (#33: it doubled the cost of every missed frame)."""
    if options.backend == "numpy" and kernel_status()[0] == "numba":  # no BLAS call on this path
        return _solve(robot, targets, start, options, t0, keep_branch, search_share)
    with single_threaded_blas():
        return _solve(robot, targets, start, options, t0, keep_branch, search_share)


def _checked(robot, targets, start, options: SolveOptions):
    """The request's checks. Options and link sets are checked in full once per robot (and
    remembered there); the numbers are checked on every call, all at once."""
    memo = robot.cache("checked_options")
    try:
        known = options in memo
    except TypeError:  # an unhashable field (a plain set of held joints): check every time
        known = False
        check_options(robot, options)
    if not known:
        check_options(robot, options)
        with contextlib.suppress(TypeError):
            if len(memo) > 64:
                memo.clear()
            memo[options] = True
    target_arrays = pack_targets(robot, targets, robot.cache("checked_links"))
    start = check_start(robot, start)
    problem = problem_for(robot, target_arrays.links, frozenset(options.held_joints))
    return target_arrays, start, problem


def _solve(robot, targets, start, options: SolveOptions, t0: float, keep_branch: bool = True,
           search_share: float = 1.0) -> SolveResult:
    if options.avoid is not None:  # solve_many's frame-by-frame path
        from ._avoiding import solve_avoiding

        return solve_avoiding(robot, targets, start, options, solve)
    target_arrays, start, problem = _checked(robot, targets, start, options)
    backend, fallback_reason = _choose_backend(options, robot, len(problem.free))
    if _beyond_reach(robot, problem, target_arrays):
        return _stop_short(robot, problem, start, target_arrays, options, t0, backend, fallback_reason)
    from ._posture import posture_argument

    q_raw = None
    #: the clock the budget runs on: time PyRoki spent failing before a fallback is not the fallback's
    budget_t0 = t0
    if backend == "pyroki" and len(problem.free):
        from ._pyroki_backend import solve_pyroki

        try:
            q_raw, iterations, _, over_budget = solve_pyroki(robot, problem, start, target_arrays, options, t0)
        except KinemaError:
            raise
        except Exception as exc:  # noqa: BLE001 - an import or JAX failure must not cost the user the frame
            from ._warming import failure_reason

            backend, fallback_reason = "numpy", failure_reason(exc)
            budget_t0 = time.perf_counter()
    errors = None
    settled = False
    if q_raw is None:
        backend = "numpy"
        q_raw, errors, iterations, _, over_budget, settled = solve_numpy(
            problem, start, target_arrays, _budget_options(options, budget_t0, t0), t0,
            posture_argument(problem, target_arrays.weights, options.posture), batches=cold_batches(options.budget_ms))
    result = _complete(robot, problem, start, target_arrays, options, t0, q_raw, errors, iterations, over_budget, backend,
                       fallback_reason, settled=settled, keep_branch=keep_branch)
    clocked = bool(over_budget)
    if backend == "pyroki" and not result.converged and not options.cold:
        # A warm float32 descent stuck beside a singularity or a limit (the arm left stretched by
        # a drag out of reach) where NumPy's restarts get through: a reachable goal converges.
        # PyRoki's time here is not charged to NumPy's budget.
        budget_t0 = time.perf_counter()
        q_raw, errors, iterations, _, over_budget, settled = solve_numpy(
            problem, start, target_arrays, _budget_options(options, budget_t0, t0), t0,
            posture_argument(problem, target_arrays.weights, options.posture), batches=cold_batches(options.budget_ms))
        retried = _complete(robot, problem, start, target_arrays, options, t0, q_raw, errors, iterations, over_budget,
                            "numpy", PYROKI_STUCK, settled=settled, keep_branch=keep_branch)
        clocked = clocked or bool(over_budget)
        if retried.converged:
            retried.clocked = clocked
            return retried
    if not result.converged and not options.cold and search_share > 0:
        searched, over = _search_on_miss(robot, problem, start, target_arrays, options, t0, budget_t0, search_share, result)
        clocked = clocked or bool(over)
        if searched is not None:
            searched.clocked = clocked
            return searched
    result.clocked = clocked
    return result


#: General-path answers a live rig keeps (`PreparedSolve._remembering`; each under 2 kB): the
#: frames a looped playback sends there (out of reach, avoiding itself) are fewer than its frames.
REMEMBERED_GENERAL = 512
#: The most a warm miss searches (ms), whatever the budget: a bake's budget is seconds a frame,
#: and a stretch the arm cannot reach would otherwise search that long on every frame of it
#: (10 s a frame seen in a Blender bake, 60 s in the CLI's). `--cold` keeps the whole budget.
SEARCH_ON_MISS_CAP_MS = 300.0
#: The note of a warm solve that missed and the cold search (the seeds of `--cold`) answered.
SEARCHED_ON_MISS = "the descent from the start missed; the cold search over the joint ranges answered"


def _budget_options(options: SolveOptions, budget_t0: float, t0: float, share: float = 1.0) -> SolveOptions:
    """`options` with the budget measured from `budget_t0` rather than from `t0` (the solve's own
    clock, which the NumPy backend reads its deadline from): the time spent before `budget_t0` (a
    PyRoki program failing or stalling) is not charged. `share` of the budget only."""
    budget = options.budget_ms * share + (budget_t0 - t0) * 1000.0
    return options if budget == options.budget_ms else replace(options, budget_ms=budget)


def _search_on_miss(robot, problem, start, target_arrays, options, t0, budget_t0, share, missed) -> tuple:
    """A warm solve that missed (its descent and one batch of restarts) gets what `--cold` gets:
    the cold search over the joint ranges, led by the start, for the rest of its budget (`share`
    of it: the live rig leaves room for the frame; never more than SEARCH_ON_MISS_CAP_MS). A reachable goal converges from the default
    start whenever it does cold; the answer is None when the search found nothing either, and
    the warm answer stands (the arm follows as near as it can: a closer miss elsewhere is another
    branch), its reason now said with the search tried. Returns (that answer or None, whether the
    clock stopped the search)."""
    from ._posture import posture_argument

    cold = replace(options, cold=True, budget_ms=min(options.budget_ms * share, SEARCH_ON_MISS_CAP_MS))
    q_raw, errors, iterations, converged, over, settled = solve_numpy(
        problem, start, target_arrays, _budget_options(cold, budget_t0, t0), t0,
        posture_argument(problem, target_arrays.weights, options.posture), batches=cold_batches(cold.budget_ms))
    if not converged:
        return None, over
    found = _complete(robot, problem, start, target_arrays, cold, t0, q_raw, errors, iterations + missed.iterations, False,
                      "numpy", missed.fallback_reason or SEARCHED_ON_MISS, settled=settled)
    if not found.converged:
        return None, over
    found.ms = (time.perf_counter() - t0) * 1000.0
    return found, over


#: The note of a warm PyRoki solve that did not converge and NumPy's restarts answered instead.
PYROKI_STUCK = "PyRoki's descent stalled here; the NumPy solver's restarts answered"


def _beyond_reach(robot, problem, target_arrays) -> bool:
    """A target no configuration can reach (core/solve/_reach_bound.py): farther from its chain's
    first joint than the chain is long."""
    return short_of_reach(problem, target_arrays.positions, robot.lower, robot.upper) > 0.0


def _stop_short(robot, problem, start, target_arrays, options, t0, backend, fallback_reason) -> SolveResult:
    """A goal beyond reach: one float64 descent from the start, which stretches the arm toward it
    and stops short, instead of restarts that cannot find what is not there (they used to run to
    the budget every frame of a drag out of reach and pause live updates). Cold or warm alike."""
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    q_raw, errors, iterations, _ = lm_run(problem, start, target_arrays, tol_p, tol_r, options.max_iterations)
    q, errors = _finish(robot, problem, start, q_raw, target_arrays, options, errors)
    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
    return SolveResult(joints=q, position_error=position_error, rotation_error=rotation_error, converged=False,
                       reason="out of reach", iterations=int(iterations), ms=(time.perf_counter() - t0) * 1000.0,
                       backend="numpy", fallback_reason=fallback_reason if backend == "numpy" else None, clocked=False)


def _complete(robot, problem, start, target_arrays, options, t0, q_raw, errors, iterations, over_budget, backend,
              fallback_reason, settled: bool = False, keep_branch: bool = True) -> SolveResult:
    """The contract on a backend's raw answer (shared by `solve` and `solve_many`): `_finish`,
    then for PyRoki the branch check and the float64 polish, then the posture slide (unless the
    kernel `settled` the answer already, in the call that found it)."""
    q, errors = _finish(robot, problem, start, q_raw, target_arrays, options, errors)
    tol_p, tol_r = options.position_tolerance, options.rotation_tolerance
    converged = _within(errors, target_arrays.weights, tol_p, tol_r)
    if backend == "pyroki" and not options.cold and (not converged or _jumped(q, start, problem)):
        # A warm float32 descent can stall next to a singularity or a limit where the float64
        # one still gets through; a far-away answer is a branch flip the user did not ask
        # for. One float64 descent from the start decides before we accept either.
        q_near, errors_near, extra, ok_near = lm_run(problem, start, target_arrays, tol_p, tol_r, options.max_iterations)
        iterations += extra
        if ok_near or not converged:
            q_near, errors_near = _finish(robot, problem, start, q_near, target_arrays, options, errors_near)
            if ok_near or np.sum((errors_near * target_arrays.weights) ** 2) < np.sum((errors * target_arrays.weights) ** 2):
                q, errors, converged = q_near, errors_near, ok_near
    if converged and keep_branch and not options.cold and _jumped(q, start, problem):
        walked = _walk(robot, problem, start, target_arrays, options)
        if walked is not None:
            q, errors, extra = walked
            iterations += extra
            settled = False
    if not converged and backend == "pyroki" and float(np.max(errors)) < POLISH_BELOW:
        q_polished, _, extra, _ = lm_run(problem, q, target_arrays, tol_p, tol_r, POLISH_ITERATIONS)
        q2, errors2 = _finish(robot, problem, start, q_polished, target_arrays, options)
        iterations += extra
        if np.sum((errors2 * target_arrays.weights) ** 2) <= np.sum((errors * target_arrays.weights) ** 2):
            q, errors = q2, errors2
            converged = _within(errors, target_arrays.weights, tol_p, tol_r)
    if converged and options.posture is not None and not settled:
        from ._posture import redundancy, settle_posture

        if redundancy(problem, target_arrays.weights) > 0:
            q_settled, errors_settled, extra, settled = settle_posture(
                problem, q, target_arrays, np.asarray(options.posture, dtype=float), options.position_tolerance,
                options.rotation_tolerance)
            iterations += extra
            if settled:
                q, errors = _finish(robot, problem, start, q_settled, target_arrays, options, errors_settled)
    if converged:
        q, errors, iterations = polish(robot, problem, start, q, errors, iterations, target_arrays, options)
    ms = (time.perf_counter() - t0) * 1000.0
    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
    return SolveResult(
        joints=q,
        position_error=position_error,
        rotation_error=rotation_error,
        converged=converged,
        reason=_reason(robot, problem, q, converged, over_budget),
        iterations=int(iterations),
        ms=ms,
        backend=backend,
        fallback_reason=fallback_reason,
    )


#: A frame whose accepted answer is farther than this (rad or m) from the scan's own answer
#: re-seeds the rest of the scan from the accepted one (the branch check changed it).
RESEED_BEYOND = 1e-3


def batch_unavailable(robot, links: Sequence[str], options: SolveOptions, weights=None) -> str | None:
    """Why `solve_many` would solve frames aiming at `links` one call each rather than as one
    PyRoki scan; None when it scans. `weights` (T, 2) default to 1."""
    if options.backend != "pyroki":
        return f"the {options.backend} backend solves frame by frame"
    if options.cold:
        return "cold solves try their seeds frame by frame"
    if options.avoid is not None:
        return "collision avoidance solves frame by frame"
    links = tuple(robot.check_link(link) for link in links)
    too_large = pyroki_size_reason(robot)
    if too_large:
        return too_large
    from ._pyroki_backend import jax_available

    ok, reason = jax_available()
    return None if ok else reason


def solve_many(
    robot, targets_per_frame: Sequence[IKTarget | Sequence[IKTarget]], start: np.ndarray, options: SolveOptions | None = None,
    *, seed: Callable[[np.ndarray], np.ndarray] | None = None, progress: Callable[[int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None, postures: Sequence | None = None,
) -> list[SolveResult] | None:
    """Solve frame after frame, each seeded from the previous answer (through `seed`, e.g. the
    rig's float32 precision), every frame under the contract of `solve`: the same checks, the
    same `_finish`, branch check, polish and float64 errors. Returns None if `should_cancel`
    said so part-way.

    With the PyRoki backend each run of frames aiming at the same links goes through one jitted
    scan per chunk of frames (one JAX call instead of one per frame); the NumPy backend solves
    frame by frame on the compiled kernel. A scan that fails falls back to frame-by-frame solves
    and says why in each result's `fallback_reason`. `postures`: one posture per frame (or None),
    in place of `options.posture` (the posture is a per-frame input, keyed at hand-offs)."""
    options = DEFAULT_OPTIONS if options is None else options
    seed = seed or (lambda q: q)
    frame_options = [options] * len(targets_per_frame)
    if postures is not None:
        frame_options = [replace(options, posture=None if p is None else tuple(float(v) for v in p)) for p in postures]
    with single_threaded_blas():
        current = seed(np.clip(check_start(robot, start), robot.lower, robot.upper))
        checked = [_checked(robot, targets, current, o)[0] for targets, o in zip(targets_per_frame, frame_options)]
        count = len(checked)
        results: list[SolveResult] = []
        backend, fallback_reason = _choose_backend(options, robot)
        first = 0
        while first < count:
            if should_cancel is not None and should_cancel():
                return None
            links = checked[first].links
            last = first
            while last + 1 < count and checked[last + 1].links == links and last + 1 - first < _scan_chunk():
                last += 1
            problem = problem_for(robot, links, frozenset(options.held_joints))
            chunk = None
            if (backend == "pyroki" and len(problem.free)
                    and batch_unavailable(robot, links, options, checked[first].weights) is None):
                chunk, fallback_reason = _scan_chunk_results(robot, problem, current, checked[first:last + 1],
                                                             frame_options[first:last + 1], seed)
            if chunk is None:
                chunk = []
                for arrays, frame_option in zip(checked[first:last + 1], frame_options[first:last + 1]):
                    t0 = time.perf_counter()
                    result = _solve(robot, _as_goals(arrays), current, frame_option, t0)
                    if fallback_reason and result.fallback_reason is None:
                        result.fallback_reason = fallback_reason
                    chunk.append(result)
                    current = seed(result.joints)
            results.extend(chunk)
            current = seed(chunk[-1].joints)
            first += len(chunk)
            if progress is not None:
                progress(first, count)
    return results


def _scan_chunk() -> int:
    from ._pyroki_backend import SCAN_CHUNK

    return SCAN_CHUNK


def _as_goals(arrays: TargetArrays) -> list[IKTarget]:
    return [IKTarget(link, tuple(arrays.positions[t]), tuple(arrays.wxyz[t]), *arrays.weights[t])
            for t, link in enumerate(arrays.links)]


def _scan_chunk_results(robot, problem, current, frames: list[TargetArrays], frame_options, seed):
    """Frames of one link set through the PyRoki scan, then `_complete` on each (with that
    frame's options: its posture). Returns (results, None), or (None, why) when the scan cannot
    run, so the caller solves frame by frame."""
    options = frame_options[0]
    t0 = time.perf_counter()
    try:
        from ._pyroki_backend import scan_frames

        positions = np.array([a.positions for a in frames])
        wxyz = np.array([a.wxyz for a in frames])
        weights = np.array([a.weights for a in frames])
        raw, iterations = scan_frames(robot, problem, current, positions, wxyz, weights, options)
    except KinemaError:
        raise
    except Exception as exc:  # noqa: BLE001 - a JAX failure costs speed, never the frames
        return None, f"PyRoki scan failed ({type(exc).__name__}: {exc})"
    share = (time.perf_counter() - t0) / len(frames)
    results = []
    from ._posture import redundancy

    # With a posture the spare joints of each accepted answer slide toward it (in `_complete`),
    # away from the scan's own answer by design; after the slide the answer does not depend on
    # the start within a branch, so the scan is re-seeded only where the two part by a branch.
    sliding = redundancy(problem, frames[0].weights) > 0
    for i, arrays in enumerate(frames):
        t_frame = time.perf_counter() - share
        result = _complete(robot, problem, current, arrays, frame_options[i], t_frame, raw[i], None, int(iterations[i]),
                           False, "pyroki", None)
        reseed_beyond = BRANCH_JUMP if sliding and frame_options[i].posture is not None else RESEED_BEYOND
        result.batched = True
        results.append(result)
        current = seed(result.joints)
        if i + 1 < len(frames) and np.max(np.abs(result.joints - raw[i])) > reseed_beyond:
            break  # the rest of the scan started from an answer the contract did not accept: solve it again from here
    return results, None


#: A live frame that missed searches for this share of its budget: the readout and the pause count
#: the whole frame against the budget (the ordinary tracking step never searches: it converges).
LIVE_SEARCH_SHARE = 0.5
#: What a live PyRoki rig's readout says on a frame the compiled NumPy frame call answered.
TRACKING_NOTE = "a tracking step, on the compiled kernel (PyRoki answers restarts and branch changes)"


class PreparedSolve:
    """The every-frame solve with the checks done once: the link set, options, held joints and
    kernel chain are checked and built here; `solve` then makes one compiled call (the number
    checks, the descent, the posture slide and `_finish` inside it: core/solve/_frame.py) and
    builds the result. The contract is the one of `solve` (same `_finish`, same float64 errors);
    anything but a converged descent on the compiled kernel (a PyRoki backend, numba not ready,
    a warm descent that needs restarts or a cold one past its first batch of seeds, suspicious
    numbers) takes the general `solve` path, so the answers are the same either way."""

    def __init__(self, robot, links: Sequence[str], options: SolveOptions | None = None, weights=None, live: bool = False):
        self.robot = robot
        self.options = options = DEFAULT_OPTIONS if options is None else options
        check_options(robot, options)
        links = tuple(links)
        self.weights = np.ones((len(links), 2)) if weights is None else np.array(weights, dtype=float).reshape(len(links), 2)
        probe = check_targets(robot, [IKTarget(link, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), *w)
                                      for link, w in zip(links, self.weights.tolist())])
        self.links = probe.links
        self.problem = problem_for(robot, self.links, frozenset(options.held_joints))
        backend, _ = _choose_backend(options, robot, len(self.problem.free), import_jax=not live)
        #: live: the PyRoki program still compiling (`_warming`); the NumPy kernel answers until it is ready
        self.warming = None
        self.note = None
        #: the share of the budget a live miss may search (the frame must stay within the budget)
        self.search_share = LIVE_SEARCH_SHARE if live else 1.0
        self.live_pyroki = live and backend == "pyroki" and len(self.problem.free) > 0
        if self.live_pyroki:
            if self._poll_pyroki():
                backend = "numpy"
        self.fast = backend == "numpy" and options.avoid is None and len(self.problem.free) > 0
        #: live PyRoki, once ready: an ordinary tracking step is answered by the same compiled frame
        #: call as NumPy (#33: PyRoki's one solve is a JAX dispatch costing ~10x the whole frame);
        #: a frame that call misses (restarts, a branch change, out of reach) is PyRoki's
        self.track = self.live_pyroki and options.avoid is None
        #: the compiled frame call (NumPy, or live PyRoki's tracking steps); None: the general path answers
        self.frame = None
        if self.fast or self.track:
            from ._posture import redundancy

            self.frame = FrameSolve(self.problem, self.weights, options, redundancy(self.problem, self.weights) > 0, remember=live)
        #: live: the general path's answers to frames the frame call missed, or that avoid the robot
        #: itself (`_remembering`), and the time under which no deadline of theirs can have been reached
        self.remembered = LRU(REMEMBERED_GENERAL) if live else None
        #: live, Avoid Collisions on the robot itself only: its answers are the frame's inputs' (a
        #: world or a held object is not in them)
        avoid = options.avoid
        self.avoiding_itself = live and avoid is not None and avoid.world is None and not avoid.carried
        #: whether the last `solve`'s answer is the one the same inputs give again (a frame call's,
        #: or one remembered by `_remembering`): a live rig may then keep it by its frame
        #: (evaluator's `FastFrame`); False for an answer the clock or a compile in the background shaped
        self.repeatable = False
        self.unclocked_ms = min(options.budget_ms, options.budget_ms * self.search_share, SEARCH_ON_MISS_CAP_MS)

    def _poll_pyroki(self) -> bool:
        """Live only: True while the NumPy kernel stands in for a PyRoki program that is still
        compiling (or failed to: then for good, with the failure as the note)."""
        from ._warming import compiling_reason, failure_reason, pyroki_state

        state, what = pyroki_state(self.robot, self.links)
        if state == "ready":
            self.warming = self.note = None
            return False
        self.warming = what if state == "compiling" else None
        self.note = compiling_reason(what) if state == "compiling" else failure_reason(what)
        return True

    def _general(self, positions, wxyz, start, options, frame_missed: bool = False) -> SolveResult:
        """`solve`; on the NumPy backend, with the note, while PyRoki is not ready (live). A
        PyRoki program dropped from memory since (the LRU of compiled solvers) is rebuilt in the
        background too, never on this thread. `frame_missed`: this frame's compiled call has just
        run and missed, so `solve`'s own would miss the same way: it is skipped."""
        if self.note is None and self.live_pyroki:
            self._poll_pyroki()
        options = _options(options) if self.note is None else replaced(_options(options), backend="numpy")
        goals = self.goals(positions, wxyz)
        if frame_missed and options.avoid is None:
            result = _solve_past_frame(self.robot, goals, start, options, time.perf_counter(), search_share=self.search_share)
        elif options.avoid is not None and self.live_pyroki and self.note is None:
            from ._avoiding import solve_avoiding

            # a live avoiding frame's plain solves are tracking steps too (#33: PyRoki's JAX dispatch
            # cost twice the whole avoiding frame on NumPy)
            result = solve_avoiding(self.robot, goals, start, options, _tracking_step)
        else:
            result = solve(self.robot, goals, start, options, search_share=self.search_share)
        if self.note is not None:
            result.fallback_reason = result.fallback_reason or self.note
        return result

    def goals(self, positions, wxyz) -> list[IKTarget]:
        return [IKTarget(link, tuple(p), tuple(r), *w) for link, p, r, w in
                zip(self.links, np.asarray(positions).tolist(), np.asarray(wxyz).tolist(), self.weights.tolist())]

    def solve(self, positions, wxyz, start, posture=None) -> SolveResult:
        """positions (T, 3) metres and wxyz (T, 4) in the root frame, one row per link;
        `posture` (n,): this frame's posture (SolveOptions.posture), None for the options' own."""
        t0 = time.perf_counter()
        own = posture is None
        if own:
            posture = self.options.posture
        self.repeatable = False
        if self.warming is not None and not self._poll_pyroki():
            self.fast = False  # PyRoki is ready: from now on it answers, warm-started from the rig's pose
        if self.fast:
            # one compiled call: checks, packing, descent, slide and `_finish` (core/solve/_frame.py)
            result = self.frame.solve(positions, wxyz, start, posture, t0, self.note)
            if result is not None:
                self.repeatable = self.note is None
                return result
            return self._remembering(self.frame.last_key, t0, lambda: self._general(
                positions, wxyz, start, self._posed(posture, own), frame_missed=True))
        if self.track:
            result = self.frame.solve(positions, wxyz, start, posture, t0, TRACKING_NOTE)
            if result is not None:
                self.repeatable = self.note is None
                return result
            return self._remembering(self.frame.last_key, t0, lambda: self._general(
                positions, wxyz, start, self._posed(posture, own)))
        if self.avoiding_itself:
            key = tuple(np.asarray(a, dtype=float).tobytes() for a in (positions, wxyz, start, () if posture is None else posture))
            return self._remembering(key, t0, lambda: self._general(positions, wxyz, start, self._posed(posture, own)))
        return self._general(positions, wxyz, start, self._posed(posture, own))

    def _remembering(self, key, t0: float, general) -> SolveResult:
        """`general()` (the general path), remembered on a live rig by `key` (the frame's exact
        inputs) where the clock cannot have shaped its answer: the NumPy search is counted
        (`cold_batches`), every seed is drawn from fixed tables, a warm PyRoki solve is one call
        of its compiled program (it returns after its first attempt, whatever the clock; XLA on
        the CPU gives the same bits for the same inputs: tested), and the clock stops a search
        only past a budget this solve stayed under, or, however long it took, the general path
        says no deadline stopped one (`SolveResult.clocked` False: each search ran to its count,
        as a far frame's on a slow robot does: TIAGo's 17 batches on PyRoki took 17-22 ms, over
        the 16.5 ms a live miss may search, and were searched again on every pass). A looped
        playback through frames the frame call misses (out of reach: 5-8 ms a frame, every loop)
        or that avoid the robot itself then pays each once (#33). Not kept: an answer given while the solver changed (PyRoki's
        program ready, or dropped and rebuilding), whose note is not the key's."""
        if key is None or self.remembered is None:
            return general()
        note = self.note
        key = (key, note)
        kept = self.remembered.get(key)
        if kept is not None:
            self.repeatable = note is None
            return replace(kept, joints=kept.joints.copy(), ms=(time.perf_counter() - t0) * 1000.0)
        began = time.perf_counter()
        result = general()
        # the whole call, not result.ms: a warm answer standing after a search that found nothing
        # carries the time from before that search
        spent = (time.perf_counter() - began) * 1000.0
        if ((spent < self.unclocked_ms or result.clocked is False) and self.note == note
                and result.backend in ("numpy", "pyroki") and type(result.joints) is np.ndarray):
            self.remembered.put(key, replace(result, joints=result.joints.copy()))
            self.repeatable = note is None
        return result

    def forget(self) -> None:
        """Drop every remembered answer: the frames that follow are solved as on a first playback."""
        for memory in (self.remembered, None if self.frame is None else self.frame.answers):
            if memory is not None:
                memory.clear()

    def _posed(self, posture, own: bool):
        """The options with this frame's posture, for the general path (the frame call takes the
        posture as an argument)."""
        options = self.options
        if own or (options.posture is not None and tuple(posture) == options.posture):
            return options
        return _WithPosture(options, posture)


    def solve_many(self, positions, wxyz, start) -> tuple[np.ndarray, np.ndarray]:
        """`solve` on many frames, each from the answer before (the first from `start`), as a
        bake solves them: positions (N, T, 3) and wxyz (N, T, 4). Returns (joints (N, n),
        converged (N,)), the same as `solve` frame by frame. On the NumPy backend the frames go
        through the compiled kernel in one call (`FrameSolve.sweep`), back in Python only for a
        frame the general path must answer; elsewhere, `solve` frame by frame."""
        count = len(positions)
        if count == 0:
            return np.empty((0, self.robot.dof)), np.zeros(0, dtype=bool)
        positions = np.ascontiguousarray(np.asarray(positions, dtype=float).reshape(count, -1))
        wxyz = np.ascontiguousarray(np.asarray(wxyz, dtype=float).reshape(count, -1))
        joints = np.empty((count, self.robot.dof))
        converged = np.zeros(count, dtype=bool)
        current = np.array(start, dtype=float)
        compiled = self.fast and self.warming is None
        row = 0
        while row < count:
            if compiled:
                stop = self.frame.sweep(positions, wxyz, current, self.options.posture, row, joints)
                if stop is None:
                    compiled = False
                else:
                    converged[row:stop] = True
                    if stop > row:
                        current = joints[stop - 1].copy()
                    row = stop
                    if row == count:
                        break
            result = self.solve(positions[row].reshape(len(self.links), 3), wxyz[row].reshape(len(self.links), 4), current)
            current = np.asarray(result.joints, dtype=float)
            joints[row], converged[row] = current, bool(result.converged)
            row += 1
        return joints, converged


def _tracking_step(robot, targets, start, options, *, keep_branch: bool = True) -> SolveResult:
    """A live PyRoki rig's plain solve inside its avoiding frame: the compiled NumPy frame call
    where it answers (a converged warm descent: a tracking step, as on a plain live PyRoki frame),
    PyRoki's `solve` where it does not."""
    t0 = time.perf_counter()
    tracked = solve_frame(robot, targets, start, replaced(options, backend="numpy"), t0)
    if tracked is not None:
        tracked.fallback_reason = TRACKING_NOTE
        return tracked
    return solve(robot, targets, start, options, keep_branch=keep_branch)


class _WithPosture(tuple):
    """(options, posture): SolveOptions with this frame's posture, built only if asked for (a
    dataclass `replace` costs more than the kernel call)."""

    def __new__(cls, options, posture):
        return super().__new__(cls, (options, posture))


def _options(options) -> SolveOptions:
    if isinstance(options, _WithPosture):
        return replaced(options[0], posture=tuple(map(float, options[1])))
    return options


def prepare(robot, links: Sequence[str], options: SolveOptions | None = None, weights=None, *,
            live: bool = False) -> PreparedSolve:
    """A `PreparedSolve` for these links and options (see there): for a live session or a bake
    that solves the same link set frame after frame.

    `live=True` (the viewport): never wait for a PyRoki compile. While the program for this
    robot and link set compiles in the background, the NumPy kernel answers (backend "numpy",
    `fallback_reason` saying PyRoki is compiling); the first solve after it is ready is PyRoki's,
    warm-started from the pose the kernel left. Without `live` (a bake, the CLI) a PyRoki solve
    waits for its program, so the answer comes from the backend asked for."""
    return PreparedSolve(robot, links, options, weights, live=live)


def warm_up(robot, links: Sequence[str], options: SolveOptions | None = None, *, wait: bool = True) -> float:
    """Compile the solver for these target links without solving (the wait-cursor moment).
    Returns the seconds it took; instant for the NumPy backend or when PyRoki is missing.
    `wait=False` (Add IK Target): start the compile in the background and return at once."""
    t0 = time.perf_counter()
    options = DEFAULT_OPTIONS if options is None else options
    links = tuple(robot.check_link(link) for link in ([links] if isinstance(links, str) else links))
    if not links:
        raise KinemaError("warm_up needs at least one target link")
    backend, _ = _choose_backend(options, robot, import_jax=wait)
    if backend == "pyroki" and not wait:
        from ._warming import pyroki_state

        pyroki_state(robot, links)
    elif backend == "pyroki":
        from ._pyroki_backend import warm_up_pyroki

        with contextlib.suppress(Exception):  # solve() will fall back to NumPy and report why
            warm_up_pyroki(robot, links)
    return time.perf_counter() - t0


def solve_trajectory(
    robot, targets_per_frame: Sequence[IKTarget | Sequence[IKTarget]], start: np.ndarray, options: SolveOptions | None = None
) -> list[SolveResult]:
    """Solve frame after frame, each seeded from the previous answer (the bake case), so the
    arm stays on one branch and multi-turn joints never jump.

    A plain loop over `solve`, for any backend. The Blender bake (core/bake.py) runs the
    PyRoki program inside a `jax.lax.scan` instead, one JAX call per chunk of frames."""
    current = check_start(robot, start)
    results = []
    for targets in targets_per_frame:
        result = solve(robot, targets, current, options)
        results.append(result)
        current = result.joints
    return results
