"""Where compiled solvers live on disk, and a small LRU for the ones in memory.

The folder is per user ($KINEMA_CACHE_DIR, else $XDG_CACHE_HOME/kinema_nodes, else
~/.cache/kinema_nodes) so a new Blender session finds what the last one compiled; tests
point KINEMA_CACHE_DIR at a temporary folder so they never share state by accident.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path

#: How many compiled solvers stay in memory: enough for a hand-off between a few links.
DEFAULT_LRU_SIZE = 4


def cache_root() -> Path:
    explicit = os.environ.get("KINEMA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "kinema_nodes"


class LRU:
    """A bounded mapping that drops the least recently used entry when full."""

    def __init__(self, capacity: int = DEFAULT_LRU_SIZE):
        self.capacity = max(1, int(capacity))
        self._items: OrderedDict[Hashable, object] = OrderedDict()

    def get_or_build(self, key: Hashable, build: Callable[[], object]) -> object:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = build()
        self._items[key] = value
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return value

    def resize(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def keys(self) -> list[Hashable]:
        return list(self._items)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
