"""The house rules, read from the source with `ast`: core never imports Blender, and no package
uses another package's private (underscore) names.

A package is a folder of `kinema_nodes/`; the top level (tree.py, evaluator.py) is one too.
Inside one folder, modules may share private names (core/solve/_entry uses _chain); across folders
only public names travel, so each package can change its insides without breaking its siblings.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kinema_nodes"
BLENDER_MODULES = ("bpy", "mathutils", "bmesh", "bl_ui", "bl_math", "bpy_extras", "gpu", "blf", "addon_utils")

#: Files that still use another package's private parts, with the issue that removes them.
#: Empty when the rule holds everywhere.
KNOWN_EXCEPTIONS: dict[str, str] = {}


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _package_of(path: Path) -> tuple[str, ...]:
    return path.relative_to(PACKAGE.parent).parent.parts


def _resolve(path: Path, node: ast.ImportFrom) -> tuple[str, ...]:
    """The absolute dotted name an ImportFrom names (relative imports resolved)."""
    if node.level == 0:
        return tuple((node.module or "").split("."))
    base = _package_of(path)
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return base + (tuple(node.module.split(".")) if node.module else ())


def _is_module(dotted: tuple[str, ...]) -> bool:
    target = PACKAGE.parent.joinpath(*dotted)
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def _owner(dotted: tuple[str, ...]) -> tuple[str, ...]:
    """The package (folder) a dotted module name belongs to."""
    target = PACKAGE.parent.joinpath(*dotted)
    return dotted if (target / "__init__.py").is_file() else dotted[:-1]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path, source: str | None = None) -> list[str]:
    """Every use in `path` (or in `source`, read as if it stood at `path`) of another package's
    private name, as 'line: what'."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    here = _package_of(path)
    found = []
    foreign_modules: dict[str, tuple[str, ...]] = {}  # local name -> module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(path, node)
            if source[:1] != ("kinema_nodes",):
                continue
            private_part = next((p for p in source if _private(p)), None)
            if private_part and _owner(source[: source.index(private_part)] + (private_part,)) != here:
                found.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''} import ...")
                continue
            for alias in node.names:
                whole = source + (alias.name,)
                if _is_module(whole):
                    if _owner(whole) != here:
                        foreign_modules[alias.asname or alias.name] = whole
                    if _private(alias.name) and _owner(whole) != here:
                        found.append(f"{node.lineno}: import of private module {alias.name}")
                elif _private(alias.name) and _owner(source) != here:
                    found.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                dotted = tuple(alias.name.split("."))
                if dotted[:1] == ("kinema_nodes",) and any(_private(p) for p in dotted) and _owner(dotted) != here:
                    found.append(f"{node.lineno}: import {alias.name}")
                if alias.asname and dotted[:1] == ("kinema_nodes",) and _owner(dotted) != here:
                    foreign_modules[alias.asname] = dotted
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            if node.value.id in foreign_modules:
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        # Stashing private state on a robot (RobotModel is core/model's) through its __dict__:
        # `robot.cache(name)` is the place for what other modules derive from a robot.
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and here != ("kinema_nodes", "core", "model"):
            if isinstance(node.value, ast.Name) and "robot" in node.value.id:
                found.append(f"{node.lineno}: {ast.unparse(node)} (use robot.cache(name))")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def blender_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in BLENDER_MODULES:
                found.append(f"{node.lineno}: {name}")
    return found


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_no_package_uses_another_packages_private_names():
    offenders = {}
    for path in _modules():
        uses = private_uses(path)
        if uses and _name(path) not in KNOWN_EXCEPTIONS:
            offenders[_name(path)] = uses
    assert not offenders, "private names used across packages (make them public):\n" + "\n".join(
        f"  {name}: {'; '.join(uses)}" for name, uses in offenders.items()
    )


def test_known_exceptions_still_need_their_exception():
    stale = [name for name in KNOWN_EXCEPTIONS if not private_uses(PACKAGE / name)]
    assert not stale, f"these files no longer use private names; drop them from KNOWN_EXCEPTIONS: {stale}"


def test_core_never_imports_blender():
    offenders = {_name(p): blender_imports(p) for p in (PACKAGE / "core").rglob("*.py")}
    offenders = {name: uses for name, uses in offenders.items() if uses}
    assert not offenders, f"core/ must stay bpy-free: {offenders}"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ..core.graph.program import _link_switch\n", 1),
        ("from ..core.solve._chain import chain_problem\n", 1),
        ("from .. import evaluator\nevaluator._compiled.get(1)\n", 1),
        ("import kinema_nodes.evaluator as ev\nev._rig_object()\n", 1),
        ("robot.__dict__['_kinema_channels'] = 1\n", 1),
        ("robot.cache('channels')['all'] = 1\n", 0),
        ("from .edit import _set_mode\n", 0),  # the same package
        ("from ..core.graph.program import link_switch\n", 0),
    ],
)
def test_the_rule_catches_what_it_should(source, expected):
    """The checker itself can fail: each kind of use, read as if it stood in blender/edit.py."""
    assert len(private_uses(PACKAGE / "blender" / "edit.py", source)) == expected


def test_the_rule_finds_blender_imports_in_core(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import numpy\nfrom mathutils import Matrix\nimport bpy.types\n")
    assert len(blender_imports(sample)) == 2


# ---- one owner for the live state (issue #28) ---------------------------------------------------

#: Modules whose live state belongs in the session object (kinema_nodes/session.py), and the one
#: module-level store each may hold.
LIVE_MODULES = {"evaluator.py": (), "tree.py": (), "session.py": ("SESSION",)}
#: Calls that make a mutable object (a store) when bound at module level.
MUTABLE_CALLS = frozenset({"dict", "set", "list", "bytearray", "object", "defaultdict", "OrderedDict", "Counter", "deque",
                           "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "LRU", "Session"})


def module_stores(source: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """Every module-level binding of a mutable object (a dict, set or list display or
    comprehension, or a call that makes one) and every `global` statement, as 'line: what';
    names in `allowed` may be bound."""
    tree = ast.parse(source)
    found = [f"{node.lineno}: global {', '.join(node.names)}" for node in ast.walk(tree) if isinstance(node, ast.Global)]
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if names and all(name in allowed for name in names):
            continue
        mutable = isinstance(value, (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp))
        if isinstance(value, ast.Call):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            mutable = called in MUTABLE_CALLS
        if mutable:
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


@pytest.mark.parametrize("name", sorted(LIVE_MODULES))
def test_live_state_lives_only_in_the_session_object(name):
    found = module_stores((PACKAGE / name).read_text(), LIVE_MODULES[name])
    assert found == [], f"module-level state in {name} outside kinema_nodes/session.py's SESSION: {found}"


#: Each source the state rule reads, with how many stores it must find there.
STATE_CASES = {
    "_dirty: set[int] = set()\n": 1,
    "_compiled = {}\n": 1,
    "_ROBOT_NODES = weakref.WeakKeyDictionary()\n": 1,
    "_GENERAL = object()\n": 1,
    "def f():\n    global _running\n    _running = True\n": 1,
    "SESSION = Session()\n": 0,  # the one store, where allowed
    "KEPT = 32\nNAMES = ('a', 'b')\nCLASSES = (A, B)\n": 0,
    "def f():\n    cache = {}\n    return cache\n": 0,
}


@pytest.mark.parametrize("source", list(STATE_CASES))
def test_the_state_rule_catches_what_it_should(source):
    assert len(module_stores(source, ("SESSION",))) == STATE_CASES[source]
