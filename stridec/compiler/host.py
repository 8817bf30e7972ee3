"""What the copy planner knows of the machine it plans for: the data caches of CPU 0, read
from `/sys/devices/system/cpu/cpu0/cache` (sizes, ways, line), and the pages its TLB holds
(`/proc/cpuinfo`'s "TLB size", on AMD), whether it gathers vectors (AVX-512), and slowly
(Intel's before Sapphire Rapids) or a lane at a time (AMD's), and whether its streamed
stores pay where they start or end inside a line (Intel), with typical values where they
cannot be read.
Plain data, no torch: the planner (`copy_plan.py`) and the C backend's
streaming threshold (`runtime/backends/cpu.py`) read the same numbers."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

__all__ = ["LLC_PER_CPU", "MIN_TLB_PAGES", "Caches", "host_caches", "read_caches", "read_gathers",
           "read_lane_gathers", "read_partial_streams", "read_slow_gathers",
           "read_slow_streams", "read_tlb_pages"]

_ROOT = "/sys/devices/system/cpu/cpu0/cache"
# The most L3 a CPU has to itself on any processor made (AMD's stacked-cache parts: 96 MiB
# for 8 cores, 12 MiB a core, 6 a hardware thread), with room to spare.
LLC_PER_CPU = 16 << 20
# The fewest 4 KiB pages a last-level TLB holds (every x86-64 core since 2008: 512 or more).
MIN_TLB_PAGES = 512


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
    l3_cpus: int = 0  # the CPUs that share the L3 (its shared_cpu_list); 0: unknown
    # The CPU loads a vector of elements through a table of offsets in one instruction
    # (AVX-512's vpgatherdd: /proc/cpuinfo's avx512f), as the C library's table does.
    gathers: bool = False
    # Streamed stores of rows that start or end inside a line still beat ordinary ones
    # (Intel's write-combining buffers: a transpose's 1072-byte rows twice as fast streamed
    # on the Xeon; the EPYC wrote such lines through the cache, twice as slow, docs/cpu.md).
    partial_streams: bool = False
    # Its gathers are slow: Intel's AVX-512 CPUs before Sapphire Rapids (no avx512_fp16)
    # gather under the microcode that closes Gather Data Sampling ("Downfall"): a 16-lane
    # vpgatherdd from L1 took 19 ns on a Cascade Lake VM, 1.2 ns an element (docs/cpu.md).
    slow_gathers: bool = False
    # Its streamed stores of lines built in a buffer in L1 (a rows block of joined runs
    # that are not whole lines, a thin transpose block) lose to stores through the cache:
    # the same CPUs as `slow_gathers`, where that was measured (TTC's (0,2,1) 1.14-1.28x as
    # long streamed on a Cascade Lake VM; 0.68-0.98x on a Zen 5 VM, docs/cpu.md).
    slow_streams: bool = False
    # Its gathers load about a lane a cycle (AMD's): a 16-lane vpgatherdd from L1 took
    # 6.3 ns on a Zen 5 VM, 16 scalar loads 4.4 (docs/cpu.md).
    lane_gathers: bool = False

    @property
    def last_level(self) -> int:
        """The last-level cache a copy on these CPUs can count on: the L3, but at most
        `LLC_PER_CPU` for each CPU that shares it (a virtual machine of 2 CPUs sees its
        host's 300 MiB L3 whole, which its neighbours fill), else the L2."""
        if not self.l3:
            return self.l2
        return min(self.l3, self.l3_cpus * LLC_PER_CPU) if self.l3_cpus else self.l3


def _size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def _cpuinfo_words(cpuinfo: str, field: str) -> list[str] | None:
    """The words of `field` ("TLB size", "flags") of the first processor in `cpuinfo`,
    or None where it has none or the file cannot be read."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].split()
                if not line.strip():
                    break  # the first processor's fields only
    except OSError:
        pass
    return None


def read_tlb_pages(cpuinfo: str = "/proc/cpuinfo") -> int | None:
    """The 4 KiB pages the last-level TLB holds, where /proc/cpuinfo says ("TLB size:
    3584 4K pages"), else None; None too for fewer than `MIN_TLB_PAGES`, an L1 TLB's."""
    words = _cpuinfo_words(cpuinfo, "TLB size") or []
    if len(words) >= 2 and words[0].isdigit() and words[1] == "4K":
        pages = int(words[0])
        # A hypervisor's CPUID may leave the L2 TLB out (a Zen 5 VM said 192, its pages
        # measured to reach about 4096: docs/cpu.md); no x86-64 core has an L2 TLB that small.
        return pages if pages >= MIN_TLB_PAGES else None
    return None


def read_gathers(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the first processor of `cpuinfo` has AVX-512 (its vector gathers)."""
    return "avx512f" in (_cpuinfo_words(cpuinfo, "flags") or [])


def read_slow_gathers(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the first processor of `cpuinfo` gathers vectors slowly: an Intel one with
    AVX-512 but not its FP16 (Skylake to Ice Lake, whose gathers the GDS microcode slows)."""
    flags = _cpuinfo_words(cpuinfo, "flags") or []
    return (read_partial_streams(cpuinfo) and "avx512f" in flags
            and "avx512_fp16" not in flags)


def read_slow_streams(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the first processor of `cpuinfo` streams lines built in L1 slowly: the CPUs
    of `read_slow_gathers` (measured on a Cascade Lake; not on later Intel CPUs)."""
    return read_slow_gathers(cpuinfo)


def read_lane_gathers(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the first processor of `cpuinfo` gathers vectors a lane at a time: an AMD
    one with AVX-512 (Zen 4 and 5; measured on a Zen 5)."""
    flags = _cpuinfo_words(cpuinfo, "flags") or []
    vendor = (_cpuinfo_words(cpuinfo, "vendor_id") or [""])[0]
    return vendor == "AuthenticAMD" and "avx512f" in flags


def read_partial_streams(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the first processor of `cpuinfo` is Intel's (its streamed partial lines)."""
    return (_cpuinfo_words(cpuinfo, "vendor_id") or [""])[0] == "GenuineIntel"


def _cpu_count(cpu_list: str) -> int:
    """The CPUs of a sysfs CPU list ("0-1", "0,2,4-7"), 0 where it cannot be read."""
    count = 0
    for part in cpu_list.strip().split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return 0
        count += int(hi) - int(lo) + 1 if hi else 1
    return count


def read_caches(root: str = _ROOT, cpuinfo: str = "/proc/cpuinfo") -> Caches | None:
    """The data and unified caches under `root` (one `index*` folder each) and the TLB of
    `cpuinfo`, or None where no cache can be read."""
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    found: dict[int, tuple[int, int, int]] = {}
    l3_cpus = 0
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
        if level == 3:
            try:
                with open(os.path.join(path, "shared_cpu_list"), encoding="ascii") as f:
                    l3_cpus = _cpu_count(f.read())
            except OSError:
                l3_cpus = 0
    if not found:
        return None
    default = Caches()
    l1 = found.get(1, (default.l1, default.l1_ways, default.line))
    l2 = found.get(2, (default.l2, default.l2_ways, l1[2]))
    l3 = found.get(3, (0, 0, l1[2]))
    tlb = read_tlb_pages(cpuinfo) or default.tlb_pages
    return Caches(l1[0], l2[0], l3[0], l1[1], l2[1], l1[2], True, tlb, l3_cpus if l3[0] else 0,
                  read_gathers(cpuinfo), read_partial_streams(cpuinfo),
                  read_slow_gathers(cpuinfo), read_slow_streams(cpuinfo),
                  read_lane_gathers(cpuinfo))


@functools.cache
def host_caches() -> Caches:
    """This machine's caches (`read_caches`), or the defaults where they cannot be read."""
    return read_caches() or Caches()
