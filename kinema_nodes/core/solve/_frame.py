"""The every-frame solve as one compiled call (`_kernel_maths._frame`), for `PreparedSolve.solve` and
`solve` on the NumPy backend (warm, and cold as far as the first batch of seeds).

Why: a warm tracking solve is two or three LM iterations, about ten microseconds of compiled
arithmetic, and the Python around it (number checks, quaternion packing, `_finish`, the float64
errors, the result) used to cost three times that. Here Python checks the types, makes one call
and builds the `SolveResult`; the kernel does the rest. Anything that is not a converged warm
descent within the limits (restarts, a budget, a reason, a refused number, a posture the slide
cannot reach) answers `None`, and the caller takes the general path, which answers and words
it exactly as before: the two paths give the same bits wherever this one answers.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..lru import LRU
from . import _kernel
from ._types import IKTarget, SolveResult

_FLOAT = np.dtype(float)
_ARRAY = np.ndarray
_DONE = _kernel.FRAME_DONE
_empty, _clock = np.empty, time.perf_counter  # one lookup each, not two: this runs every frame
#: Frame answers a live rig's FrameSolve keeps (each under 1 kB, so under 2 MB for each link set a
#: live rig solves): a shot of this many frames plays back from the second loop on without
#: solving; past it the least recently met frames are dropped (core/lru.py).
REMEMBERED = 2048
#: What the memory keeps for inputs the frame call does not answer (the general path does).
MISSED = object()


class FrameSolve:
    """One link set, weights and options on the compiled kernel: the chain and every setting
    packed once into the kernel's buffers. `solve` takes positions (T, 3) and wxyz (T, 4) (any
    array-like) and the start (n,)."""

    __slots__ = ("ints", "floats", "flag_at", "posture_at", "free", "redundant", "posture", "shape", "dof", "usable",
                 "problem", "weights", "options", "answers", "settings", "last_key")

    def __init__(self, problem, weights, options, redundant: bool, remember: bool = False):
        from ._numpy_backend import first_batch_fractions, kernel_chain

        robot = problem.robot
        chain = kernel_chain(problem)
        self.ints = chain.ints
        # the compiled cold seeds know no slide kept at the start (`slides_freely`): the general path draws those
        fractions = first_batch_fractions(len(problem.free)) if options.cold and not problem.slides.any() else None
        #: a cold solve on a rig too large for the fixed seed table draws fresh seeds: the general path
        self.usable = not options.cold or fractions is not None
        self.floats, self.flag_at, self.posture_at = _kernel.frame_floats(
            chain, options.position_tolerance, options.rotation_tolerance, int(options.max_iterations), weights,
            robot.lower, robot.upper, problem.continuous, fractions)
        self.free = problem.free.tolist()
        self.redundant = redundant
        self.problem, self.weights, self.options = problem, weights.tolist(), options  # for the polish (core/solve/_polish.py)
        self.posture = None  # the posture now in the buffer (a tuple, or None)
        self.dof = robot.dof
        self.shape = (robot.dof,)
        if redundant and options.posture is not None:
            self._set_posture(options.posture)
        #: `remember` (a live rig's): the answers of the last REMEMBERED frame calls by their exact
        #: inputs (see `solve`); None: every call runs the kernel
        self.answers = LRU(REMEMBERED) if remember else None
        #: the last `solve`'s inputs as remembered (None: it had none), for the general path's memory
        self.last_key = None
        #: the part of `floats` a solve can change after this: the posture (its flag is read apart)
        self.settings = slice(self.posture_at, self.posture_at + len(self.free))

    def _set_posture(self, posture) -> bool:
        """The posture (n,) into the buffer; False for one `solve` must check (wrong length, not finite)."""
        try:
            if len(posture) != self.dof or not math.isfinite(sum(posture)):
                return False
            values = [float(posture[j]) for j in self.free]
        except (TypeError, ValueError):
            return False
        at = self.posture_at
        self.floats[at:at + len(values)] = values
        self.floats[self.flag_at] = 1.0
        self.posture = posture if type(posture) is tuple else None
        return True

    def solve(self, positions, wxyz, start, posture, t0: float, note=None) -> SolveResult | None:
        """The answer, or None where the general path must answer (see the module docstring).
        `posture`: this frame's posture (n,) or None; `note`: the result's fallback_reason."""
        self.last_key = None
        run = _kernel._frame_form  # read directly: a function call here costs as much as an argument check
        if run is None or _kernel._force_plain:
            run = _kernel.frame_form()  # starts the build on the first ask
        if run is None or not self.usable:
            return None
        # float64 arrays (a live rig's, a bake's) go in as they are: np.asarray costs as much as a
        # joint's FK and this is every frame
        try:
            p = positions.ravel() if type(positions) is _ARRAY and positions.dtype is _FLOAT else \
                np.asarray(positions, dtype=_FLOAT).ravel()
            r = wxyz.ravel() if type(wxyz) is _ARRAY and wxyz.dtype is _FLOAT else np.asarray(wxyz, dtype=_FLOAT).ravel()
            s = start if type(start) is _ARRAY and start.dtype is _FLOAT else np.asarray(start, dtype=_FLOAT)
        except (TypeError, ValueError):
            return None
        if s.shape != self.shape:
            return None
        if not s.flags.c_contiguous:
            s = np.ascontiguousarray(s)
        if self.redundant:
            if posture is None:
                if self.floats[self.flag_at]:
                    self.floats[self.flag_at] = 0.0
                    self.posture = None
            elif posture is not self.posture and not self._set_posture(posture):
                return None
        answers = self.answers
        if answers is not None:
            # The frame call is a function of its arguments alone (no clock, no random draw), so
            # the same bits in give the same answer out: a looped playback or a scrub back over
            # frames already solved finds it here (#33).
            floats = self.floats
            key = self.last_key = (run, p.tobytes(), r.tobytes(), s.tobytes(), floats[self.flag_at],
                                   floats[self.settings].tobytes())
            kept = answers.get(key)
            if kept is not None:
                if kept is MISSED:  # the call would miss again: the general path answers
                    return None
                q, position_error, rotation_error, iterations = kept
                return SolveResult(q.copy(), position_error, rotation_error, True, "converged", iterations,
                                   (_clock() - t0) * 1000.0, "numpy", note)
        q = _empty(self.dof)
        code, position_error, rotation_error, iterations = run(self.ints, self.floats, s, p, r, q)
        if code == _DONE and not self.redundant:
            polished = self._polish(s, q, p, r, iterations)
            if polished is None:
                code = None  # the polish did not answer: a miss, as the call's own
            else:
                q, iterations, errors = polished
                if errors is not None:
                    position_error, rotation_error = (max(column) for column in zip(*errors.tolist()))
        if code != _DONE:
            if answers is not None:
                answers.put(key, MISSED)
            return None
        if answers is not None:
            answers.put(key, (q.copy(), position_error, rotation_error, iterations))
        return SolveResult(q, position_error, rotation_error, True, "converged", iterations, (_clock() - t0) * 1000.0,
                           "numpy", note)

    def sweep(self, positions, wxyz, start, posture, first: int, q_all) -> int | None:
        """`solve` on rows first.. of positions (N, 3T) and wxyz (N, 4T) (float64, C order), each
        from the answer before (the first from `start`), in one compiled call (`_kernel_maths._sweep`),
        the answers into q_all (N, n): the same bits as `solve` row by row, which it stands for
        wherever it answers. Returns the first row it left for `solve` (the general path
        answers it), N when none; None when the compiled sweep cannot run here."""
        from ._polish import POLISH_STEPS

        run = _kernel.sweep_form()
        if run is None or not self.usable:
            return None
        if self.redundant:
            if posture is None:
                if self.floats[self.flag_at]:
                    self.floats[self.flag_at] = 0.0
                    self.posture = None
            elif posture is not self.posture and not self._set_posture(posture):
                return None
        start = np.ascontiguousarray(start, dtype=_FLOAT)
        if start.shape != self.shape:
            return None
        return int(run(self.ints, self.floats, start, positions, wxyz, 0 if self.redundant else POLISH_STEPS, int(first), q_all))

    def _polish(self, start, q, p, r, iterations):
        """`_polish.polish` of the kernel's converged answer, with the targets packed as the
        general path packs them (same bits): (q, iterations, the float64 errors or None where the
        kernel's answer stands), or None where the targets cannot be packed here (the general path answers)."""
        from ._polish import polish
        from ._types import _pack

        try:
            positions, wxyz = p.reshape(-1, 3).tolist(), r.reshape(-1, 4).tolist()
            items = [IKTarget(link, position, quaternion, wp, wr)
                     for link, position, quaternion, (wp, wr) in zip(self.problem.links, positions, wxyz, self.weights)]
            arrays = _pack(items, self.problem.links)
        except Exception:  # noqa: BLE001 -- anything odd: the general path checks and words it
            return None
        robot = self.problem.robot
        q2, errors, iterations = polish(robot, self.problem, start, q, None, iterations, arrays, self.options)
        return q2, iterations, errors


#: FrameSolves kept per robot for `solve` (one per options object, link set and weights).
KEPT = 64


def solve_frame(robot, targets, start, options, t0: float) -> SolveResult | None:
    """`solve`'s NumPy path on the compiled frame call, or None for the general path. The
    FrameSolve for this request is built once (its link set, weights and options checked by the
    same checks as `solve`'s; a request they refuse goes to the general path, which says why)
    and found again by the options object, links and weights."""
    if _kernel.frame_form() is None:
        return None
    if type(options.held_joints) is not frozenset:  # a plain set can change in place under one options object
        return None
    if type(targets) is IKTarget:
        one = targets
    elif (type(targets) is list or type(targets) is tuple) and len(targets) == 1:
        one = targets[0]
        if type(one) is not IKTarget:
            return None
    else:
        one = None
    if one is not None:
        key = (id(options), one.link, one.position_weight, one.rotation_weight)
        positions, wxyz, items = one.position, one.wxyz, (one,)
    else:
        if (type(targets) is not list and type(targets) is not tuple) or not targets:
            return None
        if any(type(t) is not IKTarget for t in targets):
            return None
        key = (id(options), *((t.link, t.position_weight, t.rotation_weight) for t in targets))
        positions, wxyz, items = [t.position for t in targets], [t.wxyz for t in targets], targets
    cache = robot.cache("frame_solves")
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = (options, _find(robot, items, options, key))  # options kept alive: its id stays its own
    frame = entry[1]
    if frame is None:
        return None
    return frame.solve(positions, wxyz, start, options.posture, t0)


def _find(robot, items, options, key) -> FrameSolve | None:
    """The FrameSolve for a new options object: the one built for equal options (callers that
    `replace` their options per call), else a new one. Both caches stay within KEPT entries."""
    cache = robot.cache("frame_solves")
    if len(cache) >= KEPT:
        cache.clear()
    by_value = robot.cache("frame_solves_by_value")
    try:
        value_key = (options, key[1:])
        frame = by_value.get(value_key, _MISSING)
    except TypeError:  # an unhashable field (a plain set of held joints)
        return _build(robot, items, options)
    if frame is _MISSING:
        if len(by_value) >= KEPT:
            by_value.clear()
        frame = by_value[value_key] = _build(robot, items, options)
    return frame


_MISSING = object()


def _build(robot, items, options) -> FrameSolve | None:
    from ..errors import KinemaError
    from ._chain import problem_for
    from ._posture import redundancy
    from ._types import check_options, check_targets

    try:
        check_options(robot, options)
        weights = np.array([(float(t.position_weight), float(t.rotation_weight)) for t in items])
        probe = check_targets(robot, [IKTarget(t.link, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), *w)
                                      for t, w in zip(items, weights.tolist())])
    except (KinemaError, TypeError, ValueError):
        return None
    problem = problem_for(robot, probe.links, frozenset(options.held_joints))
    if not len(problem.free):
        return None
    return FrameSolve(problem, weights, options, redundancy(problem, weights) > 0)
