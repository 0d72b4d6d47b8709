"""The Levenberg-Marquardt kernel's maths: the one LM loop of the NumPy backend, Elbow Swivel
and Find Solutions, written so numba can compile it. Building it (numba, in a thread, cached on
disk) and choosing the form that runs is `_kernel`; this module holds only the functions and
the numbers they use, and imports nothing of the package.

Why a kernel: one LM iteration on a 7-joint arm is a few hundred floating-point operations;
run through the interpreter and NumPy's dispatch it costs tens of microseconds, compiled it
costs one or two. So the whole descent (FK, geometric Jacobian, the damped step with its
active set of joints pinned at limits, several targets, the optional elbow-swivel equation)
runs inside one call, seed after seed, without coming back to Python.

Robot-independent: a chain is data, not code. `KernelChain` packs the joints that move any
target as a tree (parent indices, folded origins, axes, kinds, mimic factors) plus each
target's tip transform, so numba compiles the kernel once per machine (cached on disk in
the Kinema cache folder) and every robot, link set and held-joint set reuses it.

numba is optional and imported lazily. Without it the same loop runs as plain Python over
NumPy leaf functions (`_*_np`): the control flow is the very same function object code, only
the three leaves (evaluate, normal equations, damped solve) are their vectorised twins, so the
answers agree within rounding (tested to 1e-9). The kernel never reads a clock: the caller
bounds each call by iterations and checks its budget between calls.
"""

from __future__ import annotations

import math

import numpy as np

#: Largest change of one joint in one step (rad or m): keeps cold solves from flinging the
#: arm through a singularity into a far branch.
MAX_STEP = 0.6
MAX_DAMPING = 1e6
START_DAMPING = 1e-3
#: On a chain with exactly as many free joints as weighted equations (a 6-joint arm reaching a
#: pose) the damping near an answer follows the cost (Chan's rule, as roboticstoolbox's `ik_LM`):
#: at most this times the weighted squared error. A tracking frame starts a few hundredths of a
#: radian away, where the fixed START_DAMPING held back the steps of a 6-joint arm beside a
#: singular pose (UR5, Kinova: 3-5 iterations a frame instead of 2). Not on a redundant chain
#: (its spare joints would take the larger steps) nor on one with too few joints, whose descent
#: ends where the damping path leads it (a hand-off's elbow: bake and playback must agree there).
DAMPING_PER_COST = 0.1
#: The damping never falls below this. On a redundant chain J^T J is singular, and a step solved
#: with a tinier damping amplifies rounding (1 / damping) into the spare joints: answers would
#: then depend on summation order, not on the problem. At 1e-6 the numba and NumPy forms agree
#: to ~1e-10 while the step on the joints the task sees is unchanged (their eigenvalues are >> 1e-6).
MIN_DAMPING = 1e-6
#: A descent whose cost has not halved in this many iterations stops (a restart is cheaper).
STALL_WINDOW = 10
#: ... unless its cost is already this small (it is creeping onto a tight tolerance).
STALL_FLOOR = 1e-12
#: Swivel equations are weighted against tool metres/radians: the tool wins a conflict.
SWIVEL_WEIGHT = 0.3
#: A swivel residual this small (rad) counts as met inside the kernel.
SWIVEL_MET = 1e-5
#: Step for the numerical derivative of the swivel angle (rad).
DERIVATIVE_STEP = 1e-6

# The posture slide (see `_settle` and core/solve/_posture.py for why).
#: The slide stops when no joint moves more than this in one step (rad or m).
POSTURE_STEP_TOLERANCE = 1e-8
#: Largest change of one joint in one step of the slide.
POSTURE_MAX_STEP = 0.2
POSTURE_MAX_ITERATIONS = 200
#: An answer further than this (m, rad) off its targets is not slid at all.
DRIFT_LIMIT = 1e-3
#: Iterations of the descent from the posture itself (`_settle_by_inputs`): a constant, not the
#: solve's own count, so every path that settles (the frame call, restarts, PyRoki's answer
#: slid afterwards, which asks for no descent of its own) seeks the same answer. It has no stall
#: test: from a far posture the descent crawls past a limit for a while, then arrives (talos_reduced's
#: arm: stalled at 20 iterations, converged at 34).
POSTURE_SEED_ITERATIONS = 100
#: The descent from the posture runs on chains of at least this many free joints (two spare on a
#: full pose): the humanoid chains whose slide had two minima have three and four spare (#29). On a
#: 7-axis arm (one spare) the slide from the frame before was never seen to part (the zoo's 7-axis
#: arms scrubbed both ways before the descent existed), and the descent cost its live frame about
#: 0.08 ms, a third of it (bench_live --plain, Panda: 0.26-0.33 ms against 0.18-0.20 without).
POSTURE_SEED_MIN_JOINTS = 8
#: The Newton return onto the family stops below this error (m, rad), or after RETURN_STEPS.
PROJECTED = 1e-11
#: A slide step whose return ends further off than this (m, rad) is shortened.
ON_FAMILY = 1e-9
RETURN_STEPS = 6
#: Pulls shorter than this are taken without the distance test (it would compare round-off).
ROUNDING = 1e-7
#: The step length adapts between these multiples of the projected pull.
MIN_FRACTION, MAX_FRACTION = 1e-6, 8.0
#: J J^T is regularised by this fraction of its trace: a singular arm gets a bounded step
#: (the least-change step's SVD cut-off, without an SVD). It also leaks into the projected
#: pull (~ this * trace / sigma_min^2 of it), which must stay well under POSTURE_STEP_TOLERANCE
#: or the slide crawls to its iteration cap at the optimum: 1e-12 left a 1e-8 floor on TIAGo Pro.
RANK_REGULARISER = 1e-14

REVOLUTE, PRISMATIC = 0, 1
#: One target without a swivel descends through `_descend_one` (the compiled form only; the
#: plain NumPy form keeps the general loop over its vectorised leaves).
SINGLE_CHAIN_FORM = True


# ---- chain data --------------------------------------------------------------------------------

class KernelChain:
    """The moving joints of every target chain as one tree, in arrays the kernel reads.

    Node i: `parent[i]` (-1 at the root; parents come first), `origin` (rotation `rot0[i]`,
    translation `pos0[i]`) from the parent node's frame with fixed joints folded in, unit-free
    `axis[i]`, `kind[i]`, and the value q[source[i]] * mult[i] + offset[i]. `column[i]` is the
    free variable the node follows (-1 when held). Target t sits at node `tip_node[t]` times
    (`tip_rot[t]`, `tip_pos[t]`); `affects[t, i]` says node i moves it. The three swivel
    points (shoulder, elbow, wrist) are stored the same way when asked for.
    """

    def __init__(self, problem, swivel_links: tuple[str, ...] | None = None):
        from ..model.kinematics import FIXED, PRISMATIC as KIND_PRISMATIC, chain_steps

        robot, links, free = problem.robot, problem.links, problem.free
        self.problem = problem
        self.swivel_links = tuple(swivel_links or ())
        self._plain_data = None

        index: dict[str, int] = {}
        parent, kind, axis, rot0, pos0, source, mult, offset = [], [], [], [], [], [], [], []

        def walk(link):
            """Add the chain's moving joints; return (tip node, tip transform, nodes on the way)."""
            pending = np.eye(4)
            last = -1
            on_way = []
            for step in chain_steps(robot, link):
                pending = pending @ step.origin
                if step.kind == FIXED:
                    continue
                if step.name not in index:
                    index[step.name] = len(parent)
                    parent.append(last)
                    kind.append(PRISMATIC if step.kind == KIND_PRISMATIC else REVOLUTE)
                    axis.append(np.asarray(step.axis, dtype=float))
                    rot0.append(pending[:3, :3].copy())
                    pos0.append(pending[:3, 3].copy())
                    source.append(step.source)
                    mult.append(step.multiplier)
                    offset.append(step.offset)
                last = index[step.name]
                on_way.append(last)
                pending = np.eye(4)
            return last, pending, on_way

        tips = [walk(link) for link in links]
        points = [walk(link) for link in (swivel_links or ())]
        m = len(parent)
        position = {int(j): c for c, j in enumerate(free)}
        self.parent = np.array(parent, dtype=np.int64)
        self.kind = np.array(kind, dtype=np.int64)
        self.axis = np.array(axis, dtype=float).reshape(m, 3)
        self.rot0 = np.array(rot0, dtype=float).reshape(m, 3, 3)
        self.pos0 = np.array(pos0, dtype=float).reshape(m, 3)
        self.source = np.array(source, dtype=np.int64)
        self.mult = np.array(mult, dtype=float)
        self.offset = np.array(offset, dtype=float)
        self.column = np.array([position.get(int(s), -1) for s in source], dtype=np.int64)

        def pack(entries):
            nodes = np.array([e[0] for e in entries], dtype=np.int64)
            rot = np.array([e[1][:3, :3] for e in entries], dtype=float).reshape(-1, 3, 3)
            pos = np.array([e[1][:3, 3] for e in entries], dtype=float).reshape(-1, 3)
            affects = np.zeros((len(entries), m), dtype=np.bool_)
            for row, entry in enumerate(entries):
                affects[row, entry[2]] = True
            return nodes, rot, pos, affects

        self.tip_node, self.tip_rot, self.tip_pos, self.affects = pack(tips)
        self.point_node, self.point_rot, self.point_pos, self.point_affects = pack(points)
        self.free = np.asarray(free, dtype=np.int64)
        self.lower = robot.lower[self.free].astype(float)
        self.upper = robot.upper[self.free].astype(float)
        self.targets = len(links)
        self.data = (self.parent, self.kind, self.axis, self.rot0, self.pos0, self.source, self.mult, self.offset,
                     self.column, self.tip_node, self.tip_rot, self.tip_pos, self.affects, self.point_node,
                     self.point_rot, self.point_pos, self.point_affects, self.free, self.lower, self.upper)

        self.ints, self.floats = _buffers(self.data)

    @property
    def plain_data(self) -> tuple:
        """`data` plus what the NumPy leaves use: the ChainProblem and the swivel point chains."""
        if self._plain_data is None:
            from ._chain import TargetChain

            position = {int(j): c for c, j in enumerate(self.free)}
            point_chains = []
            for link in self.swivel_links:
                chain = TargetChain(self.problem.robot, link)
                selector = np.zeros((chain.count, len(self.free)))
                for row, source in enumerate(chain.sources):
                    if int(source) in position:
                        selector[row, position[int(source)]] = 1.0
                point_chains.append((chain, selector))
            self._plain_data = (*self.data, self.problem, point_chains)
        return self._plain_data


def _buffers(data: tuple) -> tuple[np.ndarray, np.ndarray]:
    """`data` as two flat buffers (int64, float64), the layout `_unpack` reads. numba's
    dispatch pays per argument (twenty arrays cost microseconds a call), so the compiled
    kernel takes these two and unpacks them inside."""
    (parent, kind, axis, rot0, pos0, source, mult, offset, column, tip_node, tip_rot, tip_pos, affects, point_node,
     point_rot, point_pos, point_affects, free, lower, upper) = data
    header = np.array([len(parent), len(tip_node), len(point_node), len(free)], dtype=np.int64)
    ints = np.concatenate([header, parent, kind, source, column, tip_node, point_node, free,
                           affects.astype(np.int64).ravel(), point_affects.astype(np.int64).ravel()]).astype(np.int64)
    floats = np.concatenate([axis.ravel(), rot0.ravel(), pos0.ravel(), mult, offset, tip_rot.ravel(), tip_pos.ravel(),
                             point_rot.ravel(), point_pos.ravel(), lower, upper]).astype(float)
    return ints, floats


# ---- leaves, scalar form (what numba compiles) -------------------------------------------------

def _forward(data, q, R, P, W, C):
    """Node frames R (m,3,3), P (m,3); world axes W and joint centres C (m,3)."""
    parent, kind, axis, rot0, pos0, source, mult, offset = data[0], data[1], data[2], data[3], data[4], data[5], data[6], data[7]
    for i in range(parent.shape[0]):
        v = q[source[i]] * mult[i] + offset[i]
        p = parent[i]
        # R[i] first holds the joint's frame before its motion (parent frame times origin), then
        # is turned by the motion in place, row by row: no scratch array (parents come first)
        if p < 0:
            for a in range(3):
                C[i, a] = pos0[i, a]
                for b in range(3):
                    R[i, a, b] = rot0[i, a, b]
        else:
            for a in range(3):
                C[i, a] = R[p, a, 0] * pos0[i, 0] + R[p, a, 1] * pos0[i, 1] + R[p, a, 2] * pos0[i, 2] + P[p, a]
                for b in range(3):
                    R[i, a, b] = R[p, a, 0] * rot0[i, 0, b] + R[p, a, 1] * rot0[i, 1, b] + R[p, a, 2] * rot0[i, 2, b]
        x, y, z = axis[i, 0], axis[i, 1], axis[i, 2]
        for a in range(3):
            W[i, a] = R[i, a, 0] * x + R[i, a, 1] * y + R[i, a, 2] * z
        # About a frame axis (nearly every URDF joint), a turn moves two columns of R only: a
        # third of the general product's arithmetic, and FK is most of an evaluation.
        e = -1
        sign = 1.0
        if x == 0.0 and y == 0.0 and (z == 1.0 or z == -1.0):
            e, sign = 2, z
        elif x == 0.0 and z == 0.0 and (y == 1.0 or y == -1.0):
            e, sign = 1, y
        elif y == 0.0 and z == 0.0 and (x == 1.0 or x == -1.0):
            e, sign = 0, x
        if kind[i] == REVOLUTE and e >= 0:
            s = sign * math.sin(v)
            c = math.cos(v)
            b, d = (e + 1) % 3, (e + 2) % 3
            for a in range(3):
                rb, rd = R[i, a, b], R[i, a, d]
                R[i, a, b] = c * rb + s * rd
                R[i, a, d] = c * rd - s * rb
                P[i, a] = C[i, a]
        elif kind[i] == REVOLUTE:
            s = math.sin(v)
            c = 1.0 - math.cos(v)
            # I + s K + (1 - cos) K^2 for K = skew(axis)
            m00, m01, m02 = 1.0 - c * (y * y + z * z), -s * z + c * x * y, s * y + c * x * z
            m10, m11, m12 = s * z + c * x * y, 1.0 - c * (x * x + z * z), -s * x + c * y * z
            m20, m21, m22 = -s * y + c * x * z, s * x + c * y * z, 1.0 - c * (x * x + y * y)
            for a in range(3):
                r0, r1, r2 = R[i, a, 0], R[i, a, 1], R[i, a, 2]
                R[i, a, 0] = r0 * m00 + r1 * m10 + r2 * m20
                R[i, a, 1] = r0 * m01 + r1 * m11 + r2 * m21
                R[i, a, 2] = r0 * m02 + r1 * m12 + r2 * m22
                P[i, a] = C[i, a]
        else:
            for a in range(3):
                P[i, a] = C[i, a] + W[i, a] * v


def _tip(R, P, node, rot, pos, out_R, out_p):
    for a in range(3):
        out_p[a] = R[node, a, 0] * pos[0] + R[node, a, 1] * pos[1] + R[node, a, 2] * pos[2] + P[node, a]
        for b in range(3):
            out_R[a, b] = R[node, a, 0] * rot[0, b] + R[node, a, 1] * rot[1, b] + R[node, a, 2] * rot[2, b]


def _rotation_error(target, current, out, row, rel):
    """World rotation vector taking `current` to `target` (both 3x3) into out[row:row+3]; `rel`
    (3, 3) is scratch."""
    for a in range(3):
        for b in range(3):
            rel[a, b] = target[a, 0] * current[b, 0] + target[a, 1] * current[b, 1] + target[a, 2] * current[b, 2]
    v0 = 0.5 * (rel[2, 1] - rel[1, 2])
    v1 = 0.5 * (rel[0, 2] - rel[2, 0])
    v2 = 0.5 * (rel[1, 0] - rel[0, 1])
    cos = 0.5 * (rel[0, 0] + rel[1, 1] + rel[2, 2] - 1.0)
    sin = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if cos < -0.5:
        # Near a half turn the skew part loses the axis; read it from the symmetric part
        # (R + R^T = 2 cos I + 2 (1 - cos) a a^T) and take its sign from the skew part.
        denominator = 2.0 * (1.0 - cos)
        column = 0
        best = -1e300
        for a in range(3):
            d = (2.0 * rel[a, a] - 2.0 * cos) / denominator
            if d > best:
                best, column = d, a
        a0 = (rel[0, column] + rel[column, 0] - (2.0 * cos if column == 0 else 0.0)) / denominator
        a1 = (rel[1, column] + rel[column, 1] - (2.0 * cos if column == 1 else 0.0)) / denominator
        a2 = (rel[2, column] + rel[column, 2] - (2.0 * cos if column == 2 else 0.0)) / denominator
        norm = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        sign = -1.0 if (a0 * v0 + a1 * v1 + a2 * v2) < 0 else 1.0
        angle = math.atan2(sin, cos) * sign / norm
        out[row], out[row + 1], out[row + 2] = a0 * angle, a1 * angle, a2 * angle
    else:
        scale = math.atan2(sin, cos) / sin if sin > 1e-12 else 1.0
        out[row], out[row + 1], out[row + 2] = v0 * scale, v1 * scale, v2 * scale


def _swivel_angle(s0, s1, s2, e0, e1, e2, w0, w1, w2):
    """Elbow angle about the shoulder-to-wrist line (see core/stages/swivel.py for the definition)."""
    a0, a1, a2 = w0 - s0, w1 - s1, w2 - s2
    norm = max(math.sqrt(a0 * a0 + a1 * a1 + a2 * a2), 1e-12)
    a0, a1, a2 = a0 / norm, a1 / norm, a2 / norm
    o0, o1, o2 = e0 - s0, e1 - s1, e2 - s2
    d = o0 * a0 + o1 * a1 + o2 * a2
    o0, o1, o2 = o0 - d * a0, o1 - d * a1, o2 - d * a2
    r0, r1, r2 = -a2 * a0, -a2 * a1, 1.0 - a2 * a2  # root +Z less its part along the axis
    if math.sqrt(r0 * r0 + r1 * r1 + r2 * r2) < 0.1:  # the line is vertical: measure from root +X
        r0, r1, r2 = 1.0 - a0 * a0, -a0 * a1, -a0 * a2
    norm = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
    r0, r1, r2 = r0 / norm, r1 / norm, r2 / norm
    p0, p1, p2 = a1 * r2 - a2 * r1, a2 * r0 - a0 * r2, a0 * r1 - a1 * r0
    return math.atan2(o0 * p0 + o1 * p1 + o2 * p2, o0 * r0 + o1 * r1 + o2 * r2)


def _wrap(angle):
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def _add_column(J, base, c, linear, angular, revolute, W, C, tp, i):
    """Node i's motion of the point tp into column c of J: rows base..base+2 (scaled by `linear`)
    and, for a revolute joint with `angular` non-zero, the rotation rows base+3..base+5."""
    if revolute:
        l0, l1, l2 = tp[0] - C[i, 0], tp[1] - C[i, 1], tp[2] - C[i, 2]
        J[base, c] += linear * (W[i, 1] * l2 - W[i, 2] * l1)
        J[base + 1, c] += linear * (W[i, 2] * l0 - W[i, 0] * l2)
        J[base + 2, c] += linear * (W[i, 0] * l1 - W[i, 1] * l0)
        if angular != 0.0:
            for a in range(3):
                J[base + 3 + a, c] += angular * W[i, a]
    else:
        for a in range(3):
            J[base + a, c] += linear * W[i, a]


def workspace_size(m: int) -> int:
    """Floats of `_evaluate`'s scratch for a chain of m nodes: the node frames, world axes and
    joint centres, a tip frame and a relative rotation (allocated once per descent, not per call)."""
    return 18 * m + 21


def _workspace(ws, m):
    """`_evaluate`'s scratch as views of ws (`workspace_size(m)` floats): R (m,3,3), P, W, C (m,3),
    a tip frame (3,3) and position (3,), a relative rotation (3,3). Made once per descent: a
    reshape costs about as much as a joint's FK step."""
    return (ws[:9 * m].reshape((m, 3, 3)), ws[9 * m:12 * m].reshape((m, 3)), ws[12 * m:15 * m].reshape((m, 3)),
            ws[15 * m:18 * m].reshape((m, 3)), ws[18 * m:18 * m + 9].reshape((3, 3)), ws[18 * m + 9:18 * m + 12],
            ws[18 * m + 12:18 * m + 21].reshape((3, 3)))


def _evaluate(data, q, tpos, trot, twt, wanted, errors, r, J, ws):
    """Errors (T,2), weighted residual r (rows) and Jacobian J (rows, k) at q; the swivel row
    last when the chain has swivel points; ws (`_workspace`) is scratch. Returns (cost, swivel
    residual)."""
    tip_node, tip_rot, tip_pos, affects = data[9], data[10], data[11], data[12]
    point_node, point_rot, point_pos, point_affects = data[13], data[14], data[15], data[16]
    kind, mult, column = data[1], data[6], data[8]
    m = data[0].shape[0]
    k = J.shape[1]
    R, P, W, C, tR, tp, rel = ws
    _forward(data, q, R, P, W, C)
    for row in range(J.shape[0]):
        for c in range(k):
            J[row, c] = 0.0
    cost = 0.0
    for t in range(tip_node.shape[0]):
        _tip(R, P, tip_node[t], tip_rot[t], tip_pos[t], tR, tp)
        base = 6 * t
        for a in range(3):
            r[base + a] = tpos[t, a] - tp[a]
        _rotation_error(trot[t], tR, r, base + 3, rel)
        ep = math.sqrt(r[base] ** 2 + r[base + 1] ** 2 + r[base + 2] ** 2)
        er = math.sqrt(r[base + 3] ** 2 + r[base + 4] ** 2 + r[base + 5] ** 2)
        errors[t, 0], errors[t, 1] = ep, er
        wp, wr = twt[t, 0], twt[t, 1]
        cost += (ep * wp) ** 2 + (er * wr) ** 2
        for a in range(3):
            r[base + a] *= wp
            r[base + 3 + a] *= wr
        for i in range(m):
            if column[i] >= 0 and affects[t, i]:
                _add_column(J, base, column[i], mult[i] * wp, mult[i] * wr, kind[i] == REVOLUTE, W, C, tp, i)
    swivel = 0.0
    if point_node.shape[0] == 3:
        # The three points and their position Jacobians, then the angle at q and at q + h e_c
        # from the linearised points: a derivative without k more FK passes.
        pts = np.empty((3, 3))
        jp = np.zeros((3, 3, k))
        for n in range(3):
            _tip(R, P, point_node[n], point_rot[n], point_pos[n], tR, tp)
            for a in range(3):
                pts[n, a] = tp[a]
            for i in range(m):
                if column[i] >= 0 and point_affects[n, i]:
                    _add_column(jp[n], 0, column[i], mult[i], 0.0, kind[i] == REVOLUTE, W, C, tp, i)
        angle = _swivel_angle(pts[0, 0], pts[0, 1], pts[0, 2], pts[1, 0], pts[1, 1], pts[1, 2], pts[2, 0], pts[2, 1], pts[2, 2])
        swivel = _wrap(wanted - angle)
        row = 6 * tip_node.shape[0]
        r[row] = SWIVEL_WEIGHT * swivel
        cost += r[row] ** 2
        h = DERIVATIVE_STEP
        for c in range(k):
            moved = _swivel_angle(pts[0, 0] + h * jp[0, 0, c], pts[0, 1] + h * jp[0, 1, c], pts[0, 2] + h * jp[0, 2, c],
                                  pts[1, 0] + h * jp[1, 0, c], pts[1, 1] + h * jp[1, 1, c], pts[1, 2] + h * jp[1, 2, c],
                                  pts[2, 0] + h * jp[2, 0, c], pts[2, 1] + h * jp[2, 1, c], pts[2, 2] + h * jp[2, 2, c])
            J[row, c] = SWIVEL_WEIGHT * _wrap(moved - angle) / h
    return cost, swivel


def _normal(J, r, A, g):
    """A = J^T J, g = J^T r."""
    rows, k = J.shape
    for a in range(k):
        s = 0.0
        for i in range(rows):
            s += J[i, a] * r[i]
        g[a] = s
        for b in range(a, k):
            s = 0.0
            for i in range(rows):
                s += J[i, a] * J[i, b]
            A[a, b] = s
            A[b, a] = s


def _cholesky(A, shift, keep, L):
    """L L^T = A + shift I over the kept rows (lower triangle of L; a row not kept gets 1 on the
    diagonal and zeros elsewhere). L may be A itself when every row is kept."""
    for a in range(A.shape[0]):
        if not keep[a]:
            L[a, a] = 1.0
            continue
        for b in range(a + 1):
            if not keep[b]:
                continue
            s = A[a, b] + (shift if a == b else 0.0)
            for c in range(b):
                s -= L[a, c] * L[b, c]
            if a == b:
                L[a, a] = math.sqrt(max(s, 1e-300))
            else:
                L[a, b] = s / L[b, b]


def _damped_solve(A, g, damping, keep, step, L, y):
    """step = (A + damping I)^-1 g over the kept joints (the others get 0), by Cholesky: the
    damped normal matrix is symmetric positive definite. L (k, k) and y (k,) are scratch."""
    k = g.shape[0]
    for a in range(k):
        for b in range(k):
            L[a, b] = 0.0
    _cholesky(A, damping, keep, L)
    for a in range(k):
        s = g[a] if keep[a] else 0.0
        for c in range(a):
            s -= L[a, c] * y[c]
        y[a] = s / L[a, a]
    for a in range(k - 1, -1, -1):
        s = y[a]
        for c in range(a + 1, k):
            s -= L[c, a] * step[c]
        step[a] = s / L[a, a] if keep[a] else 0.0


def _min_norm(J, v, keep, toward, task, pull):
    """Over the kept columns of J: task = the least-change step J^+ v that meets the linearised
    targets, and pull = `toward` less its part the targets see (projected onto the null space
    of J). The other columns get 0. By Cholesky of J J^T (rows x rows, regularised)."""
    rows, k = J.shape
    M = np.empty((rows, rows))
    trace = 0.0
    for a in range(rows):
        for b in range(a + 1):
            s = 0.0
            for c in range(k):
                if keep[c]:
                    s += J[a, c] * J[b, c]
            M[a, b] = s
            M[b, a] = s
        trace += M[a, a]
    y = np.empty((rows, 2))
    for a in range(rows):
        s = 0.0
        for c in range(k):
            if keep[c]:
                s += J[a, c] * toward[c]
        y[a, 0] = v[a]
        y[a, 1] = s
    _cholesky(M, RANK_REGULARISER * trace + 1e-300, np.ones(rows, dtype=np.bool_), M)  # in place
    for h in range(2):
        for a in range(rows):
            s = y[a, h]
            for c in range(a):
                s -= M[a, c] * y[c, h]
            y[a, h] = s / M[a, a]
        for a in range(rows - 1, -1, -1):
            s = y[a, h]
            for c in range(a + 1, rows):
                s -= M[c, a] * y[c, h]
            y[a, h] = s / M[a, a]
    for c in range(k):
        if keep[c]:
            s0 = 0.0
            s1 = 0.0
            for a in range(rows):
                s0 += J[a, c] * y[a, 0]
                s1 += J[a, c] * y[a, 1]
            task[c] = s0
            pull[c] = toward[c] - s1
        else:
            task[c] = 0.0
            pull[c] = 0.0


# ---- leaves, vectorised form (the same numbers in plain NumPy, when numba is missing) ---------

def _evaluate_np(data, q, tpos, trot, twt, wanted, errors, r, J, ws):
    """`_evaluate` over the vectorised chain FK of `_chain.ChainProblem` (data[20]) and, for the
    swivel, the point chains (data[21]): the same formulas, batched by NumPy instead of looped."""
    problem, point_chains = data[20], data[21]
    count = data[9].shape[0]
    err, residual, jac = problem.residual(q[None], trot, tpos)
    errors[:, :] = err[0]
    scale = np.repeat(twt, 3, axis=1).reshape(-1)
    r[:6 * count] = residual[0] * scale
    J[:6 * count] = jac[0] * scale[:, None]
    cost = float(np.sum((err[0] * twt) ** 2))
    swivel = 0.0
    if point_chains:
        k = J.shape[1]
        pts, moved = [], []
        for chain, selector in point_chains:
            tip, chain_jac = chain.evaluate(q[None])
            pts.append(tip[0, :3, 3])
            moved.append(tip[0, :3, 3][None, :] + DERIVATIVE_STEP * (chain_jac[0, :3] @ selector).T)  # (k, 3)
        angle = _swivel_angle(*pts[0], *pts[1], *pts[2])
        swivel = _wrap(wanted - angle)
        row = 6 * count
        r[row] = SWIVEL_WEIGHT * swivel
        cost += r[row] ** 2
        for col in range(k):
            J[row, col] = SWIVEL_WEIGHT * _wrap(_swivel_angle(*moved[0][col], *moved[1][col], *moved[2][col]) - angle) / DERIVATIVE_STEP
    return cost, swivel


def _min_norm_np(J, v, keep, toward, task, pull):
    task[:] = 0.0
    pull[:] = 0.0
    j = J[:, keep]
    M = j @ j.T
    M += (RANK_REGULARISER * np.trace(M) + 1e-300) * np.eye(len(M))
    y = np.linalg.solve(M, np.stack([v, j @ toward[keep]], axis=1))
    task[keep] = j.T @ y[:, 0]
    pull[keep] = toward[keep] - j.T @ y[:, 1]


def _normal_np(J, r, A, g):
    A[:] = J.T @ J
    g[:] = J.T @ r


def _damped_solve_np(A, g, damping, keep, step, L, y):
    if keep.all():
        step[:] = np.linalg.solve(A + damping * np.eye(len(g)), g)
        return
    step[:] = 0.0
    if keep.any():
        inner = A[np.ix_(keep, keep)] + damping * np.eye(int(keep.sum()))
        step[keep] = np.linalg.solve(inner, g[keep])


# ---- the loop (one source, two builds) ---------------------------------------------------------

def _converged(errors, twt, tol_p, tol_r, swivel, has_swivel):
    for t in range(errors.shape[0]):
        if twt[t, 0] > 0 and errors[t, 0] > tol_p:
            return False
        if twt[t, 1] > 0 and errors[t, 1] > tol_r:
            return False
    return not (has_swivel and abs(swivel) > SWIVEL_MET)


def _forward_one(ints, floats, m, q, s):
    """`_forward` over the flat buffers for a chain whose frames live in s (R at 0, P at 9m, W
    at 12m, C at 15m, row-major): the same formulas in the same order, without the views that
    `_unpack` and `_workspace` make (a reshape costs as much as a joint's FK here)."""
    for i in range(m):
        v = q[ints[4 + 2 * m + i]] * floats[15 * m + i] + floats[16 * m + i]
        p = ints[4 + i]
        ri, pi, wi, ci = 9 * i, 9 * m + 3 * i, 12 * m + 3 * i, 15 * m + 3 * i
        o, po = 3 * m + 9 * i, 12 * m + 3 * i
        if p < 0:
            for a in range(3):
                s[ci + a] = floats[po + a]
                for b in range(3):
                    s[ri + 3 * a + b] = floats[o + 3 * a + b]
        else:
            rp, pp = 9 * p, 9 * m + 3 * p
            for a in range(3):
                s[ci + a] = s[rp + 3 * a] * floats[po] + s[rp + 3 * a + 1] * floats[po + 1] + \
                    s[rp + 3 * a + 2] * floats[po + 2] + s[pp + a]
                for b in range(3):
                    s[ri + 3 * a + b] = s[rp + 3 * a] * floats[o + b] + s[rp + 3 * a + 1] * floats[o + 3 + b] + \
                        s[rp + 3 * a + 2] * floats[o + 6 + b]
        x, y, z = floats[3 * i], floats[3 * i + 1], floats[3 * i + 2]
        for a in range(3):
            s[wi + a] = s[ri + 3 * a] * x + s[ri + 3 * a + 1] * y + s[ri + 3 * a + 2] * z
        e = -1
        sign = 1.0
        if x == 0.0 and y == 0.0 and (z == 1.0 or z == -1.0):
            e, sign = 2, z
        elif x == 0.0 and z == 0.0 and (y == 1.0 or y == -1.0):
            e, sign = 1, y
        elif y == 0.0 and z == 0.0 and (x == 1.0 or x == -1.0):
            e, sign = 0, x
        revolute = ints[4 + m + i] == REVOLUTE
        if revolute and e >= 0:
            sn = sign * math.sin(v)
            c = math.cos(v)
            b, d = (e + 1) % 3, (e + 2) % 3
            for a in range(3):
                rb, rd = s[ri + 3 * a + b], s[ri + 3 * a + d]
                s[ri + 3 * a + b] = c * rb + sn * rd
                s[ri + 3 * a + d] = c * rd - sn * rb
                s[pi + a] = s[ci + a]
        elif revolute:
            sn = math.sin(v)
            c = 1.0 - math.cos(v)
            m00, m01, m02 = 1.0 - c * (y * y + z * z), -sn * z + c * x * y, sn * y + c * x * z
            m10, m11, m12 = sn * z + c * x * y, 1.0 - c * (x * x + z * z), -sn * x + c * y * z
            m20, m21, m22 = -sn * y + c * x * z, sn * x + c * y * z, 1.0 - c * (x * x + y * y)
            for a in range(3):
                r0, r1, r2 = s[ri + 3 * a], s[ri + 3 * a + 1], s[ri + 3 * a + 2]
                s[ri + 3 * a] = r0 * m00 + r1 * m10 + r2 * m20
                s[ri + 3 * a + 1] = r0 * m01 + r1 * m11 + r2 * m21
                s[ri + 3 * a + 2] = r0 * m02 + r1 * m12 + r2 * m22
                s[pi + a] = s[ci + a]
        else:
            for a in range(3):
                s[pi + a] = s[ci + a] + s[wi + a] * v


def _evaluate_one(ints, floats, m, k, q, tpos, trot, wp, wr, s, slot):
    """`_evaluate` for one target and no swivel, over the flat buffers (`_forward_one`), into
    s[slot:]: the weighted residual (6), the Jacobian (6 x k, row-major), then the position
    and rotation errors. Returns the cost."""
    _forward_one(ints, floats, m, q, s)
    node = ints[4 + 4 * m]
    rn, pn, tr, tp, rel = 9 * node, 9 * m + 3 * node, 18 * m, 18 * m + 9, 18 * m + 12
    rot, pos = 17 * m, 17 * m + 9
    for a in range(3):
        s[tp + a] = s[rn + 3 * a] * floats[pos] + s[rn + 3 * a + 1] * floats[pos + 1] + s[rn + 3 * a + 2] * floats[pos + 2] + \
            s[pn + a]
        for b in range(3):
            s[tr + 3 * a + b] = s[rn + 3 * a] * floats[rot + b] + s[rn + 3 * a + 1] * floats[rot + 3 + b] + \
                s[rn + 3 * a + 2] * floats[rot + 6 + b]
    for a in range(3):
        s[slot + a] = tpos[0, a] - s[tp + a]
    # `_rotation_error(trot[0], tip rotation)` into s[slot+3:slot+6]
    for a in range(3):
        for b in range(3):
            s[rel + 3 * a + b] = trot[0, a, 0] * s[tr + 3 * b] + trot[0, a, 1] * s[tr + 3 * b + 1] + \
                trot[0, a, 2] * s[tr + 3 * b + 2]
    v0 = 0.5 * (s[rel + 7] - s[rel + 5])
    v1 = 0.5 * (s[rel + 2] - s[rel + 6])
    v2 = 0.5 * (s[rel + 3] - s[rel + 1])
    cos = 0.5 * (s[rel] + s[rel + 4] + s[rel + 8] - 1.0)
    sin = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if cos < -0.5:
        denominator = 2.0 * (1.0 - cos)
        column = 0
        best = -1e300
        for a in range(3):
            d = (2.0 * s[rel + 4 * a] - 2.0 * cos) / denominator
            if d > best:
                best, column = d, a
        a0 = (s[rel + column] + s[rel + 3 * column] - (2.0 * cos if column == 0 else 0.0)) / denominator
        a1 = (s[rel + 3 + column] + s[rel + 3 * column + 1] - (2.0 * cos if column == 1 else 0.0)) / denominator
        a2 = (s[rel + 6 + column] + s[rel + 3 * column + 2] - (2.0 * cos if column == 2 else 0.0)) / denominator
        norm = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        sign = -1.0 if (a0 * v0 + a1 * v1 + a2 * v2) < 0 else 1.0
        angle = math.atan2(sin, cos) * sign / norm
        s[slot + 3], s[slot + 4], s[slot + 5] = a0 * angle, a1 * angle, a2 * angle
    else:
        scale = math.atan2(sin, cos) / sin if sin > 1e-12 else 1.0
        s[slot + 3], s[slot + 4], s[slot + 5] = v0 * scale, v1 * scale, v2 * scale
    ep = math.sqrt(s[slot] ** 2 + s[slot + 1] ** 2 + s[slot + 2] ** 2)
    er = math.sqrt(s[slot + 3] ** 2 + s[slot + 4] ** 2 + s[slot + 5] ** 2)
    cost = 0.0
    cost += (ep * wp) ** 2 + (er * wr) ** 2
    for a in range(3):
        s[slot + a] *= wp
        s[slot + 3 + a] *= wr
    J = slot + 6
    for row in range(6 * k):
        s[J + row] = 0.0
    for i in range(m):
        c = ints[4 + 3 * m + i]
        if c < 0:
            continue
        linear, angular = floats[15 * m + i] * wp, floats[15 * m + i] * wr
        wi, ci = 12 * m + 3 * i, 15 * m + 3 * i
        if ints[4 + m + i] == REVOLUTE:
            l0, l1, l2 = s[tp] - s[ci], s[tp + 1] - s[ci + 1], s[tp + 2] - s[ci + 2]
            s[J + c] += linear * (s[wi + 1] * l2 - s[wi + 2] * l1)
            s[J + k + c] += linear * (s[wi + 2] * l0 - s[wi] * l2)
            s[J + 2 * k + c] += linear * (s[wi] * l1 - s[wi + 1] * l0)
            if angular != 0.0:
                for a in range(3):
                    s[J + (3 + a) * k + c] += angular * s[wi + a]
        else:
            for a in range(3):
                s[J + a * k + c] += linear * s[wi + a]
    s[J + 6 * k] = ep
    s[J + 6 * k + 1] = er
    return cost


def _damped_solve_one(s, A, g, k, damping, keep, step, L, y):
    """`_damped_solve` (with `_cholesky`) on k x k blocks of s at A and L, vectors at g, step,
    y: the same operations in the same order."""
    for a in range(k * k):
        s[L + a] = 0.0
    for a in range(k):
        if not keep[a]:
            s[L + a * k + a] = 1.0
            continue
        for b in range(a + 1):
            if not keep[b]:
                continue
            t = s[A + a * k + b] + (damping if a == b else 0.0)
            for c in range(b):
                t -= s[L + a * k + c] * s[L + b * k + c]
            if a == b:
                s[L + a * k + a] = math.sqrt(max(t, 1e-300))
            else:
                s[L + a * k + b] = t / s[L + b * k + b]
    for a in range(k):
        t = s[g + a] if keep[a] else 0.0
        for c in range(a):
            t -= s[L + a * k + c] * s[y + c]
        s[y + a] = t / s[L + a * k + a]
    for a in range(k - 1, -1, -1):
        t = s[y + a]
        for c in range(a + 1, k):
            t -= s[L + c * k + a] * s[step + c]
        s[step + a] = t / s[L + a * k + a] if keep[a] else 0.0


def _descend_one(ints, floats, q, tpos, trot, wp, wr, tol_p, tol_r, max_iterations, stall_window, errors):
    """`_descend` for one target and no swivel (a single chain), the every-frame case: the same
    arithmetic in the same order, so the same bits, over the flat buffers and one flat scratch
    (`_forward_one`): no views, no reshapes, the residual and Jacobian swapped by offset."""
    m, t, p, k = ints[0], ints[1], ints[2], ints[3]
    n = q.shape[0]
    free = 4 + 4 * m + t + p
    bounds = 17 * m + 12 * t + 12 * p
    slot = 6 + 6 * k + 2  # residual, Jacobian, errors
    first = 18 * m + 21
    at = first + 2 * slot
    qt, x, xt, g, step, y, A, L = at, at + n, at + n + k, at + n + 2 * k, at + n + 3 * k, at + n + 4 * k, \
        at + n + 5 * k, at + n + 5 * k + k * k
    s = np.empty(at + n + 5 * k + 2 * k * k)
    keep = np.empty(k, dtype=np.bool_)
    for c in range(k):
        j = ints[free + c]
        s[x + c] = min(max(q[j], floats[bounds + c]), floats[bounds + k + c])
        q[j] = s[x + c]
    for c in range(n):
        s[qt + c] = q[c]
    trial_q = s[qt:qt + n]
    current = first
    cost = _evaluate_one(ints, floats, m, k, q, tpos, trot, wp, wr, s, current)
    ep, er = s[current + 6 + 6 * k], s[current + 7 + 6 * k]
    square = k == (3 if wp > 0 else 0) + (3 if wr > 0 else 0)
    damping = min(START_DAMPING, max(DAMPING_PER_COST * cost, MIN_DAMPING)) if square else START_DAMPING
    checkpoint = cost
    iterations = 0
    while k > 0 and iterations < max_iterations and ((wp > 0 and ep > tol_p) or (wr > 0 and er > tol_r)):
        iterations += 1
        # `_normal`: A = J^T J, g = J^T r
        J = current + 6
        for a in range(k):
            acc = 0.0
            for i in range(6):
                acc += s[J + i * k + a] * s[current + i]
            s[g + a] = acc
            for b in range(a, k):
                acc = 0.0
                for i in range(6):
                    acc += s[J + i * k + a] * s[J + i * k + b]
                s[A + a * k + b] = acc
                s[A + b * k + a] = acc
        for c in range(k):
            keep[c] = True
        _damped_solve_one(s, A, g, k, damping, keep, step, L, y)
        blocked = False
        for c in range(k):
            if (s[x + c] <= floats[bounds + c] and s[step + c] < 0) or (s[x + c] >= floats[bounds + k + c] and s[step + c] > 0):
                keep[c] = False
                blocked = True
        if blocked:
            _damped_solve_one(s, A, g, k, damping, keep, step, L, y)
        biggest = 0.0
        for c in range(k):
            biggest = max(biggest, abs(s[step + c]))
        shrink = MAX_STEP / biggest if biggest > MAX_STEP else 1.0
        for c in range(k):
            s[xt + c] = min(max(s[x + c] + s[step + c] * shrink, floats[bounds + c]), floats[bounds + k + c])
            s[qt + ints[free + c]] = s[xt + c]
        trial = first + slot if current == first else first
        cost_trial = _evaluate_one(ints, floats, m, k, trial_q, tpos, trot, wp, wr, s, trial)
        if cost_trial < cost:
            cost = cost_trial
            for c in range(k):
                s[x + c] = s[xt + c]
                q[ints[free + c]] = s[xt + c]
            current = trial
            ep, er = s[current + 6 + 6 * k], s[current + 7 + 6 * k]
            damping = max(min(damping * 0.2, DAMPING_PER_COST * cost) if square else damping * 0.2, MIN_DAMPING)
        else:
            damping = min(damping * 10.0, MAX_DAMPING)
            if damping >= MAX_DAMPING:
                break
        if stall_window > 0 and iterations % stall_window == 0:
            if cost > 0.5 * checkpoint and cost > STALL_FLOOR:
                break
            checkpoint = cost
    errors[0, 0], errors[0, 1] = ep, er
    return iterations, not ((wp > 0 and ep > tol_p) or (wr > 0 and er > tol_r)), 0.0


def _descend(data, ints, floats, q, tpos, trot, twt, wanted, tol_p, tol_r, max_iterations, stall_window, errors):
    """One LM descent from q (n,), in place. Returns (iterations, converged, swivel residual);
    `errors` (T,2) holds the unweighted errors at the returned q. `ints`, `floats`: the chain's
    flat buffers, which `_descend_one` reads for one target (the plain form ignores them)."""
    if SINGLE_CHAIN_FORM and data[9].shape[0] == 1 and data[13].shape[0] != 3:
        return _descend_one(ints, floats, q, tpos, trot, twt[0, 0], twt[0, 1], tol_p, tol_r, max_iterations, stall_window,
                            errors)
    free, lower, upper = data[17], data[18], data[19]
    k = free.shape[0]
    has_swivel = data[13].shape[0] == 3
    rows = 6 * data[9].shape[0] + (1 if has_swivel else 0)
    t = errors.shape[0]
    n = q.shape[0]
    # every float array of the descent is a view of one allocation (an allocation costs about
    # as much as a joint's FK here)
    scratch = np.empty(4 * k + 2 * rows + 2 * rows * k + 2 * t + n + 2 * k * k + 2 * k + workspace_size(data[0].shape[0]))
    x = scratch[:k]
    at = k
    r = scratch[at:at + rows]
    r_trial = scratch[at + rows:at + 2 * rows]
    at += 2 * rows
    J = scratch[at:at + rows * k].reshape((rows, k))
    J_trial = scratch[at + rows * k:at + 2 * rows * k].reshape((rows, k))
    at += 2 * rows * k
    errors_trial = scratch[at:at + 2 * t].reshape((t, 2))
    q_trial = scratch[at + 2 * t:at + 2 * t + n]
    at += 2 * t + n
    x_trial = scratch[at:at + k]
    g = scratch[at + k:at + 2 * k]
    step = scratch[at + 2 * k:at + 3 * k]
    at += 3 * k
    A = scratch[at:at + k * k].reshape((k, k))
    L = scratch[at + k * k:at + 2 * k * k].reshape((k, k))
    at += 2 * k * k
    y = scratch[at:at + k]
    ws = _workspace(scratch[at + k:], data[0].shape[0])
    for c in range(k):
        x[c] = min(max(q[free[c]], lower[c]), upper[c])
        q[free[c]] = x[c]
    cost, swivel = _evaluate(data, q, tpos, trot, twt, wanted, errors, r, J, ws)
    if k == 0:
        return 0, _converged(errors, twt, tol_p, tol_r, swivel, has_swivel), swivel
    for c in range(n):
        q_trial[c] = q[c]
    keep = np.empty(k, dtype=np.bool_)
    equations = 1 if has_swivel else 0
    for i in range(t):
        equations += (3 if twt[i, 0] > 0 else 0) + (3 if twt[i, 1] > 0 else 0)
    square = k == equations
    damping = min(START_DAMPING, max(DAMPING_PER_COST * cost, MIN_DAMPING)) if square else START_DAMPING
    checkpoint = cost
    iterations = 0
    while iterations < max_iterations and not _converged(errors, twt, tol_p, tol_r, swivel, has_swivel):
        iterations += 1
        _normal(J, r, A, g)
        for c in range(k):
            keep[c] = True
        _damped_solve(A, g, damping, keep, step, L, y)
        # Joints pinned at a bound that the step pushes outward leave the step (an active set).
        blocked = False
        for c in range(k):
            if (x[c] <= lower[c] and step[c] < 0) or (x[c] >= upper[c] and step[c] > 0):
                keep[c] = False
                blocked = True
        if blocked:
            _damped_solve(A, g, damping, keep, step, L, y)
        biggest = 0.0
        for c in range(k):
            biggest = max(biggest, abs(step[c]))
        shrink = MAX_STEP / biggest if biggest > MAX_STEP else 1.0
        for c in range(k):
            x_trial[c] = min(max(x[c] + step[c] * shrink, lower[c]), upper[c])
            q_trial[free[c]] = x_trial[c]
        cost_trial, swivel_trial = _evaluate(data, q_trial, tpos, trot, twt, wanted, errors_trial, r_trial, J_trial, ws)
        if cost_trial < cost:
            cost, swivel = cost_trial, swivel_trial
            for c in range(k):
                x[c] = x_trial[c]
                q[free[c]] = x_trial[c]
            errors[:, :] = errors_trial
            r, r_trial = r_trial, r
            J, J_trial = J_trial, J
            damping = max(min(damping * 0.2, DAMPING_PER_COST * cost) if square else damping * 0.2, MIN_DAMPING)
        else:
            damping = min(damping * 10.0, MAX_DAMPING)
            if damping >= MAX_DAMPING:
                break
        if stall_window > 0 and iterations % stall_window == 0:
            if cost > 0.5 * checkpoint and cost > STALL_FLOOR:
                break
            checkpoint = cost
    return iterations, _converged(errors, twt, tol_p, tol_r, swivel, has_swivel), swivel


def _family_error(errors, twt):
    """The largest error of a weighted equation (how far q is off the family of answers)."""
    worst = 0.0
    for t in range(errors.shape[0]):
        if twt[t, 0] > 0:
            worst = max(worst, errors[t, 0])
        if twt[t, 1] > 0:
            worst = max(worst, errors[t, 1])
    return worst


def _toward(anchor, continuous, x, out):
    """anchor - x, multi-turn joints the short way round; returns half its squared length."""
    total = 0.0
    for c in range(x.shape[0]):
        d = anchor[c] - x[c]
        if continuous[c] > 0.5:
            d = _wrap(d)
        out[c] = d
        total += d * d
    return 0.5 * total


def _return_to_family(data, q, x, tpos, trot, twt, errors, r, J, keep, zeros, task, pull, ws, evaluated):
    """Newton steps of least change from q (in place, x = its free part) back onto the family
    (the weighted targets met exactly); errors, r and J are left at the end point. `evaluated`:
    they hold q's already."""
    free, lower, upper = data[17], data[18], data[19]
    for step in range(RETURN_STEPS + 1):
        if step > 0 or not evaluated:
            _evaluate(data, q, tpos, trot, twt, 0.0, errors, r, J, ws)
        if _family_error(errors, twt) < PROJECTED or step == RETURN_STEPS:
            break
        _min_norm(J, r, keep, zeros, task, pull)
        for c in range(free.shape[0]):
            x[c] = min(max(x[c] + task[c], lower[c]), upper[c])
            q[free[c]] = x[c]


def _settle(data, q, tpos, trot, twt, posture, tol_p, tol_r, errors):
    """Slide the converged q (n,) along its family of answers toward the posture, the targets
    held (core/solve/_posture.py says why). posture (2k,): the anchor per free column, then 1.0
    for a multi-turn column. Each step pulls toward the anchor within the joint motions the
    targets do not see, then Newton steps return onto the family; a step is kept only if it
    brings the arm nearer the anchor (a line search whose length adapts to the family's
    curvature, Barzilai-Borwein). Returns (iterations, settled); where the slide cannot keep
    the targets within tolerance q and errors are left as they came."""
    free, lower, upper = data[17], data[18], data[19]
    k = free.shape[0]
    rows = 6 * data[9].shape[0]
    anchor = posture[:k]
    continuous = posture[k:2 * k]
    original = q.copy()
    original_errors = errors.copy()
    r = np.empty(rows)
    J = np.empty((rows, k))
    ws = _workspace(np.empty(workspace_size(data[0].shape[0])), data[0].shape[0])
    _evaluate(data, q, tpos, trot, twt, 0.0, errors, r, J, ws)
    if _family_error(errors, twt) > DRIFT_LIMIT:
        errors[:, :] = original_errors
        return 0, False
    x = np.empty(k)
    for c in range(k):
        x[c] = q[free[c]]
    toward = np.empty(k)
    task = np.empty(k)
    pull = np.empty(k)
    after = np.empty(k)
    zeros = np.zeros(k)
    keep = np.empty(k, dtype=np.bool_)
    everything = np.ones(k, dtype=np.bool_)
    q_trial = q.copy()
    x_trial = np.empty(k)
    x_before = np.empty(k)
    step = np.empty(k)
    r_trial = np.empty(rows)
    J_trial = np.empty((rows, k))
    errors_trial = np.empty_like(errors)
    far = _toward(anchor, continuous, x, toward)
    fraction = 1.0
    iterations = 0
    pulled = False  # task and pull are already this point's, every joint kept (the last step's length needed them)
    for iterations in range(1, POSTURE_MAX_ITERATIONS + 1):
        if not pulled:
            _toward(anchor, continuous, x, toward)
            for c in range(k):
                keep[c] = True
            _min_norm(J, r, keep, toward, task, pull)
        pulled = False
        for _ in range(k):  # joints on a limit that the pull pushes outward sit out
            blocked = False
            for c in range(k):
                if keep[c] and ((x[c] <= lower[c] and pull[c] < 0) or (x[c] >= upper[c] and pull[c] > 0)):
                    keep[c] = False
                    blocked = True
            if not blocked:
                break
            _min_norm(J, r, keep, toward, task, pull)
        size = 0.0
        for c in range(k):
            size = max(size, abs(pull[c]))
        if size < POSTURE_STEP_TOLERANCE:
            if iterations == 1:  # already where it settles: leave the answer bit for bit
                for c in range(q.shape[0]):
                    q[c] = original[c]
                errors[:, :] = original_errors
                return 0, True
            break
        if iterations == 1:
            # Meet the targets exactly first, so that the distance test below compares pulls,
            # not the solver's tolerance.
            _return_to_family(data, q, x, tpos, trot, twt, errors, r, J, everything, zeros, task, after, ws, True)
            far = _toward(anchor, continuous, x, after)
            continue
        accepted = False
        near = far
        while fraction >= MIN_FRACTION:
            biggest = 0.0
            for c in range(k):
                step[c] = fraction * pull[c]
                biggest = max(biggest, abs(step[c]))
            shrink = POSTURE_MAX_STEP / biggest if biggest > POSTURE_MAX_STEP else 1.0
            decrease = 0.0
            for c in range(k):
                step[c] *= shrink
                decrease += step[c] * pull[c]
            for c in range(q.shape[0]):
                q_trial[c] = q[c]
            for c in range(k):
                x_trial[c] = min(max(x[c] + task[c] + step[c], lower[c]), upper[c])
                q_trial[free[c]] = x_trial[c]
            # joints sitting out on a limit stay on it while the step returns to the family
            # (moved off by round-off, the pull would push them back every step, a crawl)
            _return_to_family(data, q_trial, x_trial, tpos, trot, twt, errors_trial, r_trial, J_trial, keep, zeros, after,
                              toward, ws, False)
            near = _toward(anchor, continuous, x_trial, after)
            # back on the family within the solve's tolerance (a long step whose Newton return
            # has not got there yet is shortened, so the slide never ends off target)
            on_family = _family_error(errors_trial, twt) <= ON_FAMILY and _converged(errors_trial, twt, tol_p, tol_r, 0.0,
                                                                                     False)
            # Below ROUNDING the distances differ by round-off only: take the step as it is.
            if on_family and (near <= far - 1e-4 * decrease or size < ROUNDING):
                accepted = True
                break
            fraction *= 0.5
        if not accepted:
            break
        for c in range(q.shape[0]):
            q[c] = q_trial[c]
        for c in range(k):
            x_before[c] = x[c]
            x[c] = x_trial[c]
        errors[:, :] = errors_trial
        r, r_trial = r_trial, r
        J, J_trial = J_trial, J
        far = near
        # The next length from the last step and how much the pull changed over it.
        _toward(anchor, continuous, x, toward)
        _min_norm(J, r, keep, toward, task, after)
        moved2 = 0.0
        curvature = 0.0
        for c in range(k):
            moved = x[c] - x_before[c]
            moved2 += moved * moved
            curvature += moved * (pull[c] - after[c])
        fraction = min(max(moved2 / curvature, MIN_FRACTION), MAX_FRACTION) if curvature > 0 else min(MAX_FRACTION,
                                                                                                      fraction * 2.0)
        # With every joint kept, that pull is the one the next step starts from (same inputs, same bits).
        pulled = True
        for c in range(k):
            pulled = pulled and keep[c]
        if pulled:
            for c in range(k):
                pull[c] = after[c]
    if not _converged(errors, twt, tol_p, tol_r, 0.0, False):
        for c in range(q.shape[0]):
            q[c] = original[c]
        errors[:, :] = original_errors
        return iterations, False
    return iterations, True


def _settle_by_inputs(data, ints, floats, q, tpos, trot, twt, posture, tol_p, tol_r, errors):
    """`_settle`, then the same slide from the frame's own inputs: a descent from the posture
    (the free joints at the anchor, clipped into their limits) to the targets, slid toward the
    posture in turn. Where that answer lies within BRANCH_JUMP of the warm one (the same
    branch) it is taken. Why: on a long redundant chain (a humanoid's arm with its waist, four
    spare joints) the distance to a far posture has more than one minimum on the family, and a
    slide from the frame before stops at whichever is nearest it: scrubbing forward and
    backward ended 0.43 rad apart (simple_humanoid, #29). The answer sought from the posture
    depends only on the targets and the posture; the warm answer decides the branch only.
    Returns (iterations, settled) as `_settle`."""
    iterations, settled = _settle(data, q, tpos, trot, twt, posture, tol_p, tol_r, errors)
    if not settled:
        return iterations, False
    free, lower, upper = data[17], data[18], data[19]
    k = free.shape[0]
    if k < POSTURE_SEED_MIN_JOINTS:
        return iterations, True
    seeded = q.copy()
    for c in range(k):
        seeded[free[c]] = min(max(posture[c], lower[c]), upper[c])
    seeded_errors = np.empty_like(errors)
    its, ok, _ = _descend(data, ints, floats, seeded, tpos, trot, twt, 0.0, tol_p, tol_r, POSTURE_SEED_ITERATIONS, 0,
                          seeded_errors)
    iterations += its
    if not ok:
        return iterations, True
    more, seeded_settled = _settle(data, seeded, tpos, trot, twt, posture, tol_p, tol_r, seeded_errors)
    iterations += more
    if not seeded_settled:
        return iterations, True
    for c in range(k):
        d = seeded[free[c]] - q[free[c]]
        if posture[k + c] > 0.5:
            d = _wrap(d)
        if abs(d) > BRANCH_JUMP:
            return iterations, True
    for c in range(q.shape[0]):
        q[c] = seeded[c]
    errors[:, :] = seeded_errors
    return iterations, True


def _solve_rows(data, ints, floats, seeds, problem_of, tpos, trot, twt, wanted, tol_p, tol_r, max_iterations, stall_window,
                stop_at_first, posture, q_out, errors_out, swivel_out, iterations_out, converged_out, settled_out):
    """`_descend` from every row of seeds (S, n), row s aiming at problem problem_of[s] (its
    targets tpos/trot/twt[p] and swivel wanted[s]). With stop_at_first the rows after the first
    converged one are not run (iterations_out = -1). A non-empty `posture` (2k,) settles each
    converged row toward it (`_settle`, its iterations added; settled_out says whether it
    did). Returns how many rows ran."""
    ran = 0
    settle = posture.shape[0] > 0 and data[13].shape[0] != 3
    for s in range(seeds.shape[0]):
        p = problem_of[s]
        q_out[s, :] = seeds[s]
        its, ok, sw = _descend(data, ints, floats, q_out[s], tpos[p], trot[p], twt[p], wanted[s], tol_p, tol_r, max_iterations,
                               stall_window, errors_out[s])
        settled_out[s] = False
        if ok and settle:
            extra, settled = _settle_by_inputs(data, ints, floats, q_out[s], tpos[p], trot[p], twt[p], posture, tol_p, tol_r,
                                               errors_out[s])
            its += extra
            settled_out[s] = settled
        iterations_out[s], converged_out[s], swivel_out[s] = its, ok, sw
        ran += 1
        if ok and stop_at_first:
            for rest in range(s + 1, seeds.shape[0]):
                iterations_out[rest] = -1
                converged_out[rest] = False
            break
    return ran


def _unpack(ints, floats):
    """`KernelChain.data` from the two flat buffers (views, no copies)."""
    m, t, p, k = ints[0], ints[1], ints[2], ints[3]
    at = 4
    parent = ints[at:at + m]
    kind = ints[at + m:at + 2 * m]
    source = ints[at + 2 * m:at + 3 * m]
    column = ints[at + 3 * m:at + 4 * m]
    at += 4 * m
    tip_node = ints[at:at + t]
    point_node = ints[at + t:at + t + p]
    free = ints[at + t + p:at + t + p + k]
    at += t + p + k
    affects = ints[at:at + t * m].reshape((t, m))
    point_affects = ints[at + t * m:at + t * m + p * m].reshape((p, m))
    at = 0
    axis = floats[at:at + 3 * m].reshape((m, 3))
    rot0 = floats[at + 3 * m:at + 12 * m].reshape((m, 3, 3))
    pos0 = floats[at + 12 * m:at + 15 * m].reshape((m, 3))
    mult = floats[at + 15 * m:at + 16 * m]
    offset = floats[at + 16 * m:at + 17 * m]
    at = 17 * m
    tip_rot = floats[at:at + 9 * t].reshape((t, 3, 3))
    tip_pos = floats[at + 9 * t:at + 12 * t].reshape((t, 3))
    at += 12 * t
    point_rot = floats[at:at + 9 * p].reshape((p, 3, 3))
    point_pos = floats[at + 9 * p:at + 12 * p].reshape((p, 3))
    at += 12 * p
    lower = floats[at:at + k]
    upper = floats[at + k:at + 2 * k]
    return (parent, kind, axis, rot0, pos0, source, mult, offset, column, tip_node, tip_rot, tip_pos, affects, point_node,
            point_rot, point_pos, point_affects, free, lower, upper)


def _packed_rows(ints, floats, seeds, problem_of, targets, wanted, settings, posture, q_out, errors_out, stats_out):
    """`_solve_rows` with the chain as two buffers, targets as one (P, T, 14) array (position,
    rotation, weights), settings (tol_p, tol_r, max_iterations, stall_window, stop_at_first),
    the posture (2k,) or empty, and the per-row swivel residual, iterations, converged and
    settled flags in stats_out (S, 4): eleven arguments."""
    data = _unpack(ints, floats)
    count = targets.shape[0]
    tcount = targets.shape[1]
    tpos = np.empty((count, tcount, 3))
    trot = np.empty((count, tcount, 3, 3))
    twt = np.empty((count, tcount, 2))
    for p in range(count):
        for t in range(tcount):
            for a in range(3):
                tpos[p, t, a] = targets[p, t, a]
                for b in range(3):
                    trot[p, t, a, b] = targets[p, t, 3 + 3 * a + b]
            twt[p, t, 0] = targets[p, t, 12]
            twt[p, t, 1] = targets[p, t, 13]
    rows = seeds.shape[0]
    swivel = np.zeros(rows)
    iterations = np.zeros(rows, dtype=np.int64)
    converged = np.zeros(rows, dtype=np.bool_)
    settled = np.zeros(rows, dtype=np.bool_)
    ran = _solve_rows(data, ints, floats, seeds, problem_of, tpos, trot, twt, wanted, settings[0], settings[1], int(settings[2]),
                      int(settings[3]), settings[4] > 0.5, posture, q_out, errors_out, swivel, iterations, converged,
                      settled)
    for s in range(rows):
        stats_out[s, 0] = swivel[s]
        stats_out[s, 1] = iterations[s]
        stats_out[s, 2] = 1.0 if converged[s] else 0.0
        stats_out[s, 3] = 1.0 if settled[s] else 0.0
    return ran


#: `_frame`'s answers: done (converged, within the limits, nothing left for Python but the result);
#: the general path must answer (no convergence from the start, the slide gave up, or the limits
#: clip the answer: restarts, reasons and clipping as `solve` does them); refused (a number `solve`
#: refuses, so that it names the problem).
FRAME_DONE, FRAME_GENERAL, FRAME_REFUSED = 0, 1, 2
#: A warm solve whose answer moves any free joint further than this (rad or m) has changed
#: branch: `_frame` leaves it to the general path, which walks the tool there instead
#: (core/solve/_continuation.py; `_api._complete` tests the same bound on the same numbers).
BRANCH_JUMP = 0.5
#: `_types.MAX_TARGET_DISTANCE_M` squared (kept here: the kernel imports nothing of the package).
FRAME_MAX_DISTANCE_SQUARED = 1.0e4 ** 2
#: Frame settings after the chain's floats (`frame_floats`): tol_p, tol_r, max_iterations,
#: stall_window, posture on (1.0) or off, dof, cold seeds (0 for a warm solve).
FRAME_SETTINGS = 7


def _frame(ints, floats, start, positions, wxyz, q_out):
    """One solve in one call, for `PreparedSolve.solve` and `solve` on the NumPy backend: the
    number checks and quaternion-to-matrix packing of `_types._pack`, the descent from the start
    (cold: from the first batch of seeds, the start first, up to the first that converges, as
    `_numpy_backend.solve_numpy`'s first batch), the posture slide, and `_api._finish`'s contract
    (multi-turn joints unwrapped toward the start, the limits) into q_out (n,). `floats` is the chain's buffer followed by the frame's
    settings, weights, the robot's limits and the posture (`frame_floats`); positions (3T,) and
    wxyz (4T,) flat. Returns (code, position error, rotation error, iterations): the largest
    float64 errors at q_out, measured by the descent (the unwrap moves joints by whole turns only).
    The arithmetic is `_packed_rows`' followed by `_finish`'s, in the same order, so the answer
    is the general path's to the bit."""
    m, t, p, k = ints[0], ints[1], ints[2], ints[3]
    free = ints[4 + 4 * m + t + p:4 + 4 * m + t + p + k]
    at = 17 * m + 12 * t + 12 * p
    lower, upper = floats[at:at + k], floats[at + k:at + 2 * k]
    at += 2 * k
    tol_p, tol_r = floats[at], floats[at + 1]
    max_iterations, stall_window = int(floats[at + 2]), int(floats[at + 3])
    use_posture = floats[at + 4] > 0.5
    n = int(floats[at + 5])
    seeds = int(floats[at + 6])
    at += FRAME_SETTINGS
    # shaped allocations, not views of one: a reshape costs more than an allocation here
    twt = np.empty((t, 2))
    for i in range(t):
        twt[i, 0], twt[i, 1] = floats[at + 2 * i], floats[at + 2 * i + 1]
    at += 2 * t
    lower_at, upper_at = at, at + n
    at += 2 * n
    posture = floats[at:at + 2 * k]
    tpos = np.empty((t, 3))
    trot = np.empty((t, 3, 3))
    errors = np.empty((t, 2))
    if start.shape[0] != n or positions.shape[0] != 3 * t or wxyz.shape[0] != 4 * t or q_out.shape[0] != n:
        return FRAME_REFUSED, 0.0, 0.0, 0
    for c in range(n):
        if not math.isfinite(start[c]):
            return FRAME_REFUSED, 0.0, 0.0, 0
    for i in range(t):
        px, py, pz = positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]
        w, x, y, z = wxyz[4 * i], wxyz[4 * i + 1], wxyz[4 * i + 2], wxyz[4 * i + 3]
        norm2 = w * w + x * x + y * y + z * z
        # NaN fails every comparison; an overflow to inf fails the bounds
        if not (px * px + py * py + pz * pz <= FRAME_MAX_DISTANCE_SQUARED and 1e-12 <= norm2 and norm2 < math.inf):
            return FRAME_REFUSED, 0.0, 0.0, 0
        norm = math.sqrt(norm2)
        w, x, y, z = w / norm, x / norm, y / norm, z / norm
        tpos[i, 0], tpos[i, 1], tpos[i, 2] = px, py, pz
        trot[i, 0, 0], trot[i, 0, 1], trot[i, 0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)
        trot[i, 1, 0], trot[i, 1, 1], trot[i, 1, 2] = 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)
        trot[i, 2, 0], trot[i, 2, 1], trot[i, 2, 2] = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)
    fractions = at + 2 * k  # cold: the first batch's seeds as fractions of each joint's range (seeds x k)
    iterations = 0
    ok = False
    for row in range(max(seeds, 1)):
        for c in range(n):
            q_out[c] = start[c]
        if row > 0:  # `_numpy_backend.random_seeds`; a joint that turns freely spans start +- pi
            for c in range(k):
                j = free[c]
                turns = posture[k + c] > 0.5
                lo = start[j] - np.pi if turns else lower[c]
                hi = start[j] + np.pi if turns else upper[c]
                q_out[j] = lo + floats[fractions + row * k + c] * (hi - lo)
        if SINGLE_CHAIN_FORM and t == 1 and p != 3:  # `_descend`'s own test, without unpacking the chain
            its, ok, _ = _descend_one(ints, floats, q_out, tpos, trot, twt[0, 0], twt[0, 1], tol_p, tol_r, max_iterations,
                                      stall_window, errors)
        else:
            its, ok, _ = _descend(_unpack(ints, floats), ints, floats, q_out, tpos, trot, twt, 0.0, tol_p, tol_r,
                                  max_iterations, stall_window, errors)
        iterations += its
        if ok:
            break
    if not ok:
        return FRAME_GENERAL, 0.0, 0.0, iterations
    if use_posture and p != 3:
        extra, settled = _settle_by_inputs(_unpack(ints, floats), ints, floats, q_out, tpos, trot, twt, posture, tol_p, tol_r,
                                           errors)
        iterations += extra
        if not settled:
            return FRAME_GENERAL, 0.0, 0.0, iterations
    for c in range(k):
        if posture[k + c] > 0.5:  # a multi-turn joint: the value nearest the start
            j = free[c]
            s = start[j]
            q_out[j] = s + (q_out[j] - s + math.pi) % (2 * math.pi) - math.pi
    for c in range(n):
        v = q_out[c]
        if not (v >= floats[lower_at + c] and v <= floats[upper_at + c]):  # NaN too
            return FRAME_GENERAL, 0.0, 0.0, iterations
    if seeds == 0:
        for c in range(k):
            j = free[c]
            if abs(q_out[j] - start[j]) > BRANCH_JUMP:
                return FRAME_GENERAL, 0.0, 0.0, iterations
    position_error = errors[0, 0]
    rotation_error = errors[0, 1]
    for i in range(1, t):
        position_error = max(position_error, errors[i, 0])
        rotation_error = max(rotation_error, errors[i, 1])
    return FRAME_DONE, position_error, rotation_error, iterations


def _sweep(ints, floats, start, positions, wxyz, polish_steps, first, q_all):
    """`_frame` on sample after sample (positions (N, 3T), wxyz (N, 4T)) from row `first`, each
    from the answer before (the first from `start`), answers into q_all (N, n): a bake's
    every-frame solve without coming back to Python between frames (the reach preview of a long
    path). With `polish_steps` > 0 (a chain with no spare joint) each answer is polished as
    `_polish.polish` does it: `_packed_rows` from the answer with no tolerance for that many
    steps, then `_contract._finish` and `_within`, the same arithmetic in the same order.
    Returns the first row it cannot answer to the bit of `FrameSolve.solve` (the general path
    must: `_frame` did not finish, the descent took no step, or the polish clipped at a limit),
    or N when every row is answered; the caller solves that row and calls again from the next."""
    m, t, p, k = ints[0], ints[1], ints[2], ints[3]
    free = ints[4 + 4 * m + t + p:4 + 4 * m + t + p + k]
    at = 17 * m + 12 * t + 12 * p + 2 * k
    tol_p, tol_r = floats[at], floats[at + 1]
    n = int(floats[at + 5])
    at += FRAME_SETTINGS
    weights_at = at
    at += 2 * t
    lower_at, upper_at = at, at + n
    continuous_at = at + 2 * n + k
    count = positions.shape[0]
    current = np.empty(n)
    for c in range(n):
        current[c] = start[c]
    q = np.empty(n)
    finished = np.empty(n)
    seeds = np.empty((1, n))
    targets = np.empty((1, t, 14))
    problem_of = np.zeros(1, dtype=np.int64)
    wanted = np.zeros(1)
    settings = np.array([0.0, 0.0, float(polish_steps), float(STALL_WINDOW), 0.0])
    no_posture = np.zeros(0)
    polished = np.empty((1, n))
    errors = np.empty((1, t, 2))
    stats = np.empty((1, 4))
    for row in range(first, count):
        code, _, _, iterations = _frame(ints, floats, current, positions[row], wxyz[row], q)
        if code != FRAME_DONE:
            return row
        if polish_steps > 0:
            if iterations == 0:  # `polish` measures the start against the target first: Python's float64 residual
                return row
            for i in range(t):  # `_types._pack`: the quaternion normalised, then the matrix
                w, x, y, z = wxyz[row, 4 * i], wxyz[row, 4 * i + 1], wxyz[row, 4 * i + 2], wxyz[row, 4 * i + 3]
                norm = math.sqrt(w * w + x * x + y * y + z * z)
                w, x, y, z = w / norm, x / norm, y / norm, z / norm
                targets[0, i, 0], targets[0, i, 1], targets[0, i, 2] = positions[row, 3 * i], positions[row, 3 * i + 1], \
                    positions[row, 3 * i + 2]
                targets[0, i, 3], targets[0, i, 4], targets[0, i, 5] = 1 - 2 * (y * y + z * z), 2 * (x * y - z * w), \
                    2 * (x * z + y * w)
                targets[0, i, 6], targets[0, i, 7], targets[0, i, 8] = 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), \
                    2 * (y * z - x * w)
                targets[0, i, 9], targets[0, i, 10], targets[0, i, 11] = 2 * (x * z - y * w), 2 * (y * z + x * w), \
                    1 - 2 * (x * x + y * y)
                targets[0, i, 12], targets[0, i, 13] = floats[weights_at + 2 * i], floats[weights_at + 2 * i + 1]
            for c in range(n):
                seeds[0, c] = q[c]
            _packed_rows(ints, floats, seeds, problem_of, targets, wanted, settings, no_posture, polished, errors, stats)
            # `_contract._finish` from the frame's start: multi-turn joints unwrapped toward it, the limits
            for c in range(n):
                finished[c] = current[c]
            for c in range(k):
                j = free[c]
                v = polished[0, j]
                if floats[continuous_at + c] > 0.5:
                    s = current[j]
                    turned = s + (v - s + np.pi) % (2 * np.pi) - np.pi
                    if turned >= floats[lower_at + j] and turned <= floats[upper_at + j]:
                        v = turned
                finished[j] = v
            for c in range(n):
                v = finished[c]
                if not (math.isfinite(v) and v >= floats[lower_at + c] and v <= floats[upper_at + c]):  # clipped: Python's residual
                    return row
            within = True
            for i in range(t):  # `_contract._within`
                if (errors[0, i, 0] > tol_p and floats[weights_at + 2 * i] != 0) or \
                        (errors[0, i, 1] > tol_r and floats[weights_at + 2 * i + 1] != 0):
                    within = False
            if within:
                for c in range(n):
                    q[c] = finished[c]
        for c in range(n):
            q_all[row, c] = q[c]
            current[c] = q[c]
    return count


def frame_floats(chain: KernelChain, tol_p: float, tol_r: float, max_iterations: int, weights, robot_lower, robot_upper,
                 continuous, fractions=None) -> tuple[np.ndarray, int, int]:
    """`_frame`'s float buffer for a chain: its own floats, then the settings, weights (T, 2),
    the robot's limits (n each), the posture slot (the anchor at the free columns, then 1.0 per
    multi-turn column, as `posture_columns`) and, for a cold solve, the first batch's seed
    `fractions` (seeds, k). Returns (buffer, where the posture flag is, where the posture anchor
    starts)."""
    k = len(chain.free)
    fractions = np.zeros((0, k)) if fractions is None else np.asarray(fractions, dtype=float).reshape(-1, k)
    settings = np.array([tol_p, tol_r, float(max_iterations), float(STALL_WINDOW), 0.0, float(len(robot_lower)),
                         float(len(fractions))])
    posture = np.concatenate([np.zeros(k), np.asarray(continuous, dtype=float)])
    buffer = np.concatenate([chain.floats, settings, np.asarray(weights, dtype=float).ravel(),
                             np.asarray(robot_lower, dtype=float), np.asarray(robot_upper, dtype=float), posture,
                             fractions.ravel()])
    flag = len(chain.floats) + 4
    return np.ascontiguousarray(buffer, dtype=float), flag, len(buffer) - 2 * k - fractions.size


def posture_columns(chain: KernelChain, posture) -> np.ndarray:
    """The kernel's posture argument (2k,): the posture (n,) at the free columns, then 1.0 for
    each multi-turn column."""
    continuous = chain.problem.continuous
    return np.concatenate([np.asarray(posture, dtype=float)[chain.free], np.asarray(continuous, dtype=float)])
