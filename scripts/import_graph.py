"""The package's imports, read from the source with `ast`: the module graph, its circles, and the
folder picture in docs/ARCHITECTURE.md.

Every import statement counts: at module level, inside a function (a lazy import still ties
the two modules: each needs the other to work), and under `if TYPE_CHECKING:` (it never runs,
but a module that names another's types for its checker still depends on it, and hiding the
edge there is how circles are papered over). A circle is a strongly connected set of two or
more modules.

    python scripts/import_graph.py            # rewrite the picture in docs/ARCHITECTURE.md
    python scripts/import_graph.py --check    # exit 1 if the picture is stale or a circle exists
    python scripts/import_graph.py --circles  # list the circles
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kinema_nodes"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
PICTURE_START = "<!-- import picture: start (scripts/import_graph.py writes this) -->"
PICTURE_END = "<!-- import picture: end -->"


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)



def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports (a `from pkg import name` counts as importing
    the module `pkg.name` when that is a module, else `pkg`)."""
    paths = {_module_name(p, package): p for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts}
    top = package.name
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != top:
                    continue
                for alias in node.names:
                    whole = f"{source}.{alias.name}"
                    target = whole if whole in paths else source
                    if target in paths and target != name:
                        graph[name].add(target)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in paths and alias.name != name:
                        graph[name].add(alias.name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def folder_of(module: str) -> str:
    """The folder a module is drawn in: core's sub-folders, the other top folders, and the
    top-level modules (tree.py, evaluator.py, ...) each on their own."""
    parts = module.split(".")[1:]
    if not parts:
        return "kinema_nodes"
    if parts[0] == "core" and len(parts) > 2:
        return f"core/{parts[1]}"
    if parts[0] == "core" and len(parts) == 2:
        is_folder = (PACKAGE / "core" / parts[1]).is_dir()
        return f"core/{parts[1]}" if is_folder else "core"
    if len(parts) == 1 and not (PACKAGE / parts[0]).is_dir():
        return f"{parts[0]}.py"
    return parts[0]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = folder_of(module)
        folders.setdefault(source, set())
        for target in targets:
            if folder_of(target) != source:
                folders[source].add(folder_of(target))
    return folders


def _node_id(folder: str) -> str:
    return folder.replace("/", "_").replace(".", "_")


def mermaid(folders: dict[str, set[str]]) -> str:
    """A Mermaid flowchart: one box a folder, one arrow a folder that imports another."""
    lines = ["```mermaid", "flowchart TD"]
    for folder in sorted(folders):
        lines.append(f'    {_node_id(folder)}["{folder}"]')
    for folder in sorted(folders):
        for target in sorted(folders[folder]):
            if folder == "kinema_nodes":
                continue  # register() imports everything; drawn, it hides the layers
            lines.append(f"    {_node_id(folder)} --> {_node_id(target)}")
    lines.append("```")
    return "\n".join(lines)


def picture() -> str:
    return f"{PICTURE_START}\n{mermaid(folder_graph(module_graph()))}\n{PICTURE_END}"


def current_picture(text: str) -> str | None:
    if PICTURE_START not in text or PICTURE_END not in text:
        return None
    return text[text.index(PICTURE_START): text.index(PICTURE_END) + len(PICTURE_END)]


def write_picture(path: Path = ARCHITECTURE) -> None:
    text = path.read_text()
    old = current_picture(text)
    if old is None:
        raise SystemExit(f"{path}: no picture markers ({PICTURE_START!r} ... {PICTURE_END!r})")
    path.write_text(text.replace(old, picture()))


def _say(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the picture is stale or a circle exists")
    parser.add_argument("--circles", action="store_true", help="list the import circles")
    args = parser.parse_args(argv)
    found = circles(module_graph())
    if args.circles or args.check:
        _say(f"circle of {len(c)}: {' <-> '.join(c)}" for c in found)
    if args.check:
        stale = current_picture(ARCHITECTURE.read_text()) != picture()
        if stale:
            print("docs/ARCHITECTURE.md: the import picture is stale: run python scripts/import_graph.py")
        return 1 if (found or stale) else 0
    if not args.circles:
        write_picture()
    return 0


if __name__ == "__main__":
    sys.exit(main())
