"""No import circles in kinema_nodes/, and the layout picture in docs/ARCHITECTURE.md is the one
the code's imports draw today (scripts/import_graph.py reads both from the source with `ast`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_of_the_package_imports_itself_round_a_circle():
    graph = _import_graph()
    assert graph.circles(graph.module_graph()) == []


def test_the_circle_finder_sees_circles_through_lazy_and_type_checking_imports(tmp_path):
    package = tmp_path / "kinema_nodes"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "a.py").write_text("from . import b\n")
    (package / "core" / "b.py").write_text("def f():\n    from .a import thing\n")
    (package / "core" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import x\n")
    (package / "core" / "d.py").write_text("from .c import y\n")
    (package / "core" / "e.py").write_text("from .a import z\n")
    graph = _import_graph()
    found = graph.circles(graph.module_graph(package))
    assert found == [["kinema_nodes.core.a", "kinema_nodes.core.b"], ["kinema_nodes.core.c", "kinema_nodes.core.d"]]


def test_the_architecture_picture_is_drawn_from_today_s_imports():
    graph = _import_graph()
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert graph.current_picture(text) == graph.picture(), "run: python scripts/import_graph.py"
