"""What the copy planner knows of the machine it plans for: the data caches of CPU 0, read
from `/sys/devices/system/cpu/cpu0/cache` (sizes, ways, line), and the pages its TLB holds
(`/proc/cpuinfo`'s "TLB size", on AMD), with typical values where they cannot be read.
Plain data, no torch: the planner (`copy_plan.py`) and the C backend's
streaming threshold (`runtime/backends/cpu.py`) read the same numbers."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

__all__ = ["Caches", "host_caches", "read_caches", "read_tlb_pages"]

_ROOT = "/sys/devices/system/cpu/cpu0/cache"


@dataclass(frozen=True, slots=True)
class Caches:
    """Data cache sizes in bytes by level (`l3` 0 where there is none), the ways of L1 and
    L2, and the line size; `known` is False where they are the defaults, not read."""

    l1: int = 32 << 10
    l2: int = 1 << 20
    l3: int = 32 << 20
    l1_ways: int = 8
    l2_ways: int = 8
    line: int = 64
    known: bool = False
    tlb_pages: int = 1536

    @property
    def last_level(self) -> int:
        return self.l3 or self.l2


def _size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def read_tlb_pages(cpuinfo: str = "/proc/cpuinfo") -> int | None:
    """The 4 KiB pages the last-level TLB holds, where /proc/cpuinfo says ("TLB size:
    3584 4K pages"), else None."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("TLB size"):
                    words = line.split(":", 1)[1].split()
                    if len(words) >= 2 and words[0].isdigit() and words[1] == "4K":
                        return int(words[0])
                if not line.strip():
                    break  # the first processor's fields only
    except OSError:
        pass
    return None


def read_caches(root: str = _ROOT, cpuinfo: str = "/proc/cpuinfo") -> Caches | None:
    """The data and unified caches under `root` (one `index*` folder each) and the TLB of
    `cpuinfo`, or None where no cache can be read."""
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    found: dict[int, tuple[int, int, int]] = {}
    for entry in entries:
        path = os.path.join(root, entry)
        try:
            with open(os.path.join(path, "type"), encoding="ascii") as f:
                if f.read().strip() not in ("Unified", "Data"):
                    continue
            with open(os.path.join(path, "level"), encoding="ascii") as f:
                level = int(f.read().strip())
            with open(os.path.join(path, "size"), encoding="ascii") as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        if size is None:
            continue
        ways, line = 8, 64
        for name in ("ways_of_associativity", "coherency_line_size"):
            try:
                with open(os.path.join(path, name), encoding="ascii") as f:
                    value = int(f.read().strip())
            except (OSError, ValueError):
                continue
            if value > 0:
                ways, line = (value, line) if name.startswith("ways") else (ways, value)
        found[level] = (size, ways, line)
    if not found:
        return None
    default = Caches()
    l1 = found.get(1, (default.l1, default.l1_ways, default.line))
    l2 = found.get(2, (default.l2, default.l2_ways, l1[2]))
    l3 = found.get(3, (0, 0, l1[2]))
    tlb = read_tlb_pages(cpuinfo) or default.tlb_pages
    return Caches(l1[0], l2[0], l3[0], l1[1], l2[1], l1[2], True, tlb)


@functools.cache
def host_caches() -> Caches:
    """This machine's caches (`read_caches`), or the defaults where they cannot be read."""
    return read_caches() or Caches()
