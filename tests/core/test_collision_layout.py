"""Collisions have one home (issue #28): `core/collision/` never imports the solver or the stages
(the descent that uses it, core/solve/_avoiding.py, imports it, never the other way round), and
nothing outside it reaches for the old homes (core/stages/collisions, core/model/collision)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kinema_nodes"
COLLISION = PACKAGE / "core" / "collision"


def _imported(path: Path) -> set[str]:
    """Every module `path` imports (lazy imports too), as absolute dotted names."""
    here = path.relative_to(PACKAGE.parent).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - (node.level - 1)] if node.level else ()
            module = ".".join(base + ((node.module,) if node.module else ()))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_collision_never_imports_the_solver_or_the_stages():
    offenders = [f"{path.name}: {name}" for path in sorted(COLLISION.glob("*.py")) for name in sorted(_imported(path))
                 if name.startswith(("kinema_nodes.core.solve", "kinema_nodes.core.stages"))]
    assert not offenders, offenders


def test_nothing_imports_the_old_homes():
    old = ("kinema_nodes.core.stages.collisions", "kinema_nodes.core.stages._collision_kernel", "kinema_nodes.core.model.collision",
           "kinema_nodes.core.model.obstacle_shapes", "kinema_nodes.core.solve._api")
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in sorted(PACKAGE.rglob("*.py")) for name in sorted(_imported(path))
                 if name.startswith(old)]
    assert not offenders, offenders
