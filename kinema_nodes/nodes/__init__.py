"""One module per node. A node holds properties and sockets and returns its spec; it never solves.

The modules are those the node registry (core/graph/registry.py) names, in its order; the
Group node registers with the group operators (ui/group_operators.py).
"""

import importlib

from ..core.graph.registry import NODES

CLASSES = tuple(cls for entry in NODES if entry.in_spec
                for cls in importlib.import_module(f".{entry.module}", __name__).CLASSES)
