"""The live session: everything the running of Kinema trees remembers between runs, in one object.

`SESSION` holds one `TreeState` per tree (known by its pointer): its compiled spec and program,
when that program was last checked, and per Solver (by node path) its fast frame, its last
inputs, its readout, whether it is paused over budget. One invalidation rule holds for all of it:
what was made for a program at a generation is good while the tree's program is that program and
nothing bumped the generation (`changed_outside`: any depsgraph update, an undo, a file load) or
marked the tree dirty. `Session.clear()` forgets it all (a file load; each test, through the
`fresh_caches` fixture).

Nodes, the tree type and the panels reach the session through the functions below
(`mark_dirty`, `readout`, ...), never through the evaluator, so nothing the evaluator imports
imports it back. Plain Python: Blender is imported only to read the scene's frame.
"""

from __future__ import annotations

from .core.lru import LRU

#: How many prepared solves the session keeps (`Session.prepared`; each fast frame keeps its own).
PREPARED_KEPT = 32


class TreeState:
    """What the live runs of one tree remember (see the module doc). Keyed by solver path: a
    group's Solver used by two Group nodes is two paths in its users' states, and its own name in
    the group tree's state (what the node itself shows)."""

    __slots__ = ("dirty", "spec", "program", "checked", "robot_nodes", "fast", "last_inputs", "readouts", "paused", "off_shown",
                 "slow_frames", "asked", "ahead")

    def __init__(self):
        self.dirty = False
        self.spec = self.program = None
        #: (generation checked at, may skip the snapshot)
        self.checked = None
        self.robot_nodes: dict[str, str | None] = {}  # solver path -> its Robot node, for `program`
        self.fast: dict = {}  # solver path -> (program, generation, its fast frame or None)
        self.last_inputs: dict = {}  # solver path -> the inputs it last solved (bytes, or the fast frame's tuple)
        self.readouts: dict[str, dict] = {}  # solver path -> its last readout
        self.paused: set[str] = set()  # users of a group paused over budget (a plain Solver has `over_budget`)
        self.off_shown: dict = {}  # solver path -> (program, generation) whose Off readout is shown
        self.slow_frames: dict[str, int] = {}  # solver path -> ordinary frames in a row over budget
        self.asked: dict[str, tuple] = {}  # solver path -> (solver, links) of its last solve: a switch is a one-off
        self.ahead: dict = {}  # solver path -> where its frames solved ahead stand (evaluator's `Ahead`)

    def compiled(self, spec, program) -> None:
        """The tree compiled to `program`: what was checked or bound for the last one goes."""
        self.spec, self.program, self.checked = spec, program, None
        self.robot_nodes = {}


class PreFrame:
    """What `evaluator.run_pre` solved in `frame_change_pre` for the frame Blender is evaluating:
    `key` (frame, generation, node-group count, tree pointers; None once checked), whether every
    live step was answered, and per answered step (rig, its LiveRig, control bone indices, the
    poses solved for, the channels written). `run_all` checks it after the evaluation."""

    __slots__ = ("key", "complete", "checks")

    def __init__(self):
        self.key, self.complete, self.checks = None, False, []


class Session:
    """The one store of live state (module doc)."""

    def __init__(self):
        self.generation = 0
        self.running = False  # a run (or Bake, which steps frames itself) holds the handlers off
        self.serial = 0  # fast frames made so far: each one's number, unlike id(), is never reused
        #: (robot, links, backend) solved once in this process: the compile is paid (not per file)
        self.compiled_links: set[tuple] = set()
        self.option_fields: tuple[str, ...] = ()  # SolveOptions' fields less the posture, read once
        self.objects_seen = None  # the file's object count when copied rigs were last looked for
        self.pre = PreFrame()
        self.idle_generation = None  # the generation the idle timer's last turn saw (blender/handlers.py)
        #: bumped where the live rigs' frames kept by the evaluator (`FastFrame.kept`) must go with no
        #: new generation: answers forgotten, or Blender evaluated a frame otherwise than the pre route assumed
        self.kept_epoch = 0
        self.clear()

    def clear(self) -> None:
        """Forget every tree (a new file, a test's fresh start)."""
        self.generation += 1
        self.objects_seen = None
        self.pre = PreFrame()
        self.bone_names: dict[tuple[int, int], list] = {}  # (tree, armature) -> its bones' names when renames were last followed
        self.trees: dict[int, TreeState] = {}
        self.prepared = LRU(PREPARED_KEPT)  # core.solve.prepare per (robot, links, weights, options less the posture)

    def tree(self, key: int) -> TreeState:
        """The state of the tree with pointer `key` (a new one the first time)."""
        state = self.trees.get(key)
        if state is None:
            state = self.trees[key] = TreeState()
        return state

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial


SESSION = Session()


def mark_dirty(tree) -> None:
    """Something in `tree` changed: recompile (if the spec differs) and re-solve on the next run."""
    SESSION.tree(tree.as_pointer()).dirty = True


def changed_outside() -> None:
    """Something a tree's spec reads may have changed without a property callback (an edit the
    depsgraph reported, a file load, undo): the next run of every tree snapshots it again."""
    SESSION.generation += 1


def compiled_program(tree):
    """The Program `tree` last compiled to (None before its first run): its problems by node."""
    state = SESSION.trees.get(tree.as_pointer())
    return None if state is None else state.program


def forget_answers() -> None:
    """Empty every live rig's remembered frame answers (core/solve/_frame.py): the frames that
    follow are solved as on a first playback."""
    SESSION.kept_epoch += 1
    for prepared in SESSION.prepared.values():
        prepared.forget()


def readout(solver) -> dict:
    """The last live solve of a Solver node: ms, summary, solving_to, backend_note. Empty when
    that solve was for another frame than the scene's: the readout never shows a result for a
    frame that was not solved."""
    import bpy

    state = SESSION.trees.get(solver.id_data.as_pointer())
    found = state.readouts.get(solver.name, {}) if state is not None else {}
    if found and found.get("frame") != bpy.context.scene.frame_current:
        return {}
    return _worded(found, getattr(solver, "over_budget", False))


def readout_of(tree, path: str) -> dict:
    """The last live solve of one user of a Solver: the solver at `path` ("Arm/Solver") in `tree`
    (a group used twice is two instances, each with its own readout and pause)."""
    state = SESSION.trees.get(tree.as_pointer())
    if state is None:
        return {"paused": False}
    paused = path in state.paused
    if not paused and "/" not in path:
        node = tree.nodes.get(path)
        paused = bool(getattr(node, "over_budget", False))
    return dict(_worded(state.readouts.get(path, {}), paused), paused=paused)


def resume(tree, path: str) -> None:
    """Resume one user of a Solver paused over budget."""
    state = SESSION.tree(tree.as_pointer())
    state.paused.discard(path)
    state.dirty = True


#: What a paused Solver's readout says instead of its last summary: the control may have moved
#: since that solve, so "converged" would be stale.
PAUSED_SUMMARY = "paused: the tool no longer follows the control (Resume)"


def _worded(shown: dict, paused: bool = False) -> dict:
    """A readout with its summary written out: the fast frame leaves the wording to the first
    reader (most frames are never drawn). A paused one says so instead."""
    if shown.get("summary") is None and "solved" in shown:
        from .core.graph.program import summarise

        shown["summary"] = summarise(shown.pop("solved"))
    if paused and shown:
        return {**shown, "summary": PAUSED_SUMMARY}
    return shown
