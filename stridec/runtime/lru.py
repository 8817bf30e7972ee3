"""`Lru`: the one bounded cache of the runtime (the plan cache in memory, and each
`CompiledGraph`'s caches of programs, calls, classes and bound graphs).

One policy: at most `capacity` entries, the least recently used leaves first. An entry's
last use is a stamp in a one-element list, its *cell*; `get` stamps it, and so does
`touch(cell)`, which a caller holding an entry's cell (a cached call) uses without hashing
the key again. Entries may share a cell (`put(..., cell=...)`): a cached call's entry is
as recent as the program it runs. Eviction scans for the oldest stamp: the caches hold
tens of entries, and an eviction is rare next to a hit.

Not locked: a caller that shares one between threads holds its own lock around `get`,
`put` and `touch`; a lock-free reader reads `data` (one dict read is atomic) and stamps
nothing.

>>> cache = Lru(2)
>>> cache.put("a", 1)
[]
>>> cache.put("b", 2)
[]
>>> cache.get("a")
1
>>> cache.put("c", 3)          # "b" is the least recently used
['b']
>>> sorted(cache.items())
[('a', 1), ('c', 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Lru"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A mapping of at most `capacity` entries, least recently used out first;
    `on_evict(key)` runs after each entry leaves."""

    __slots__ = ("capacity", "data", "_cells", "clock", "on_evict")

    def __init__(self, capacity: int,
                 on_evict: Callable[[K], None] | None = None) -> None:
        self.capacity = capacity
        #: key -> value; lock-free readers read it directly.
        self.data: dict[K, V] = {}
        self._cells: dict[K, list[int]] = {}
        #: The stamp of the last use (`touch` inline: `lru.clock += 1; cell[0] = lru.clock`).
        self.clock = 0
        self.on_evict = on_evict

    def get(self, key: K, default: Any = None) -> Any:
        """The value of `key`, stamped used; `default` where there is none."""
        cell = self._cells.get(key)
        if cell is None:
            return default
        self.clock += 1
        cell[0] = self.clock
        return self.data[key]

    def cell(self, key: K) -> list[int]:
        """The recency cell of `key`'s entry (`touch` stamps it)."""
        return self._cells[key]

    def touch(self, cell: list[int]) -> None:
        """Stamp the entry (or entries) of `cell` used."""
        self.clock += 1
        cell[0] = self.clock

    def put(self, key: K, value: V, cell: list[int] | None = None) -> list[K]:
        """Enter `key`, stamped used -- or with the recency `cell` of the entry of another
        `Lru` it depends on, which that one stamps (a cached call's entry is as recent as
        the program it runs) -- and evict the least recently used entries past
        `capacity`; returns the keys evicted."""
        if cell is None:
            self.clock += 1
            cell = [self.clock]
        self.data[key] = value
        self._cells[key] = cell
        evicted: list[K] = []
        while len(self.data) > self.capacity:
            cells = self._cells
            oldest = min(cells, key=lambda k: cells[k][0])
            del self.data[oldest], cells[oldest]
            evicted.append(oldest)
            if self.on_evict is not None:
                self.on_evict(oldest)
        return evicted

    def pop(self, key: K, default: Any = None) -> Any:
        self._cells.pop(key, None)
        return self.data.pop(key, default)

    def clear(self) -> None:
        self.data.clear()
        self._cells.clear()

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[K]:
        return iter(self.data)

    def keys(self) -> Any:
        return self.data.keys()

    def values(self) -> Any:
        return self.data.values()

    def items(self) -> Any:
        return self.data.items()
