"""The one bounded cache: compiled solvers (core/solve), a live rig's remembered answers
(core/solve/_frame.py, _entry.py), found configurations (core/stages) and the robot a rig carries
(blender/rig) all keep their recent entries in an `LRU`, so the size bound and the eviction order
are the same everywhere and one call clears each."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

#: How many compiled solvers stay in memory: enough for a hand-off between a few links.
DEFAULT_LRU_SIZE = 4


class LRU:
    """A bounded mapping that drops the least recently used entry when full."""

    def __init__(self, capacity: int = DEFAULT_LRU_SIZE):
        self.capacity = max(1, int(capacity))
        self._items: OrderedDict[Hashable, object] = OrderedDict()

    def get(self, key: Hashable, default: object = None) -> object:
        """The entry (now the most recently used), or `default` without storing it."""
        items = self._items
        try:
            items.move_to_end(key)  # one lookup for a miss: a live rig asks every frame
        except KeyError:
            return default
        return items[key]

    def put(self, key: Hashable, value: object) -> object:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return value

    def get_or_build(self, key: Hashable, build: Callable[[], object]) -> object:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        return self.put(key, build())

    def resize(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def keys(self) -> list[Hashable]:
        return list(self._items)

    def values(self) -> list[object]:
        return list(self._items.values())

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
