"""The C kernels of strided copies: the native CPU backend (`backend="cpu"`).

Every copy runs on the planned copies' library (`codegen/c/plan.py`, the C sources in
`codegen/c/lib/`): one compiled unit per element size, and one per (source, destination)
dtype pair of a cast, whose entry point takes the copy's argument block -- sizes,
strides, offsets, the loop order, the blocking, the micro-kernel, masks and fill -- at
run time. One compiled library thus runs every copy of its class, whatever the graph, so
a test suite of thousands of programs builds a few dozen libraries.

`generate_c_copy(spec)` is one copy, `generate_c_copy_batch(specs)` copies into one
buffer; each copy is one call of the library, or none where it writes nothing, or
several where its masks are more than an argument block holds (`plan.planned_calls`).
A kernel's calls run one after another, each on the process's thread pool
(`codegen/c/pool.py`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stridec.compiler.codegen.c import plan
from stridec.compiler.codegen.spec import CopySpec

__all__ = [
    "CCopyKernel",
    "CKernel",
    "UNIT_SEPARATOR",
    "assemble_kernel",
    "call_fits",
    "generate_c_copy",
    "generate_c_copy_batch",
]

# Between the compile units of a kernel that calls several classes (a batch).
UNIT_SEPARATOR = "/* ---- stridec compile unit ---- */\n"


def call_fits(symbol: str, params: Sequence[int]) -> bool:
    """Whether `params` are a whole argument block of the copy call `symbol` (a planned
    copy's, `codegen/c/plan.py`): for checking a program read back from disk before it
    runs."""
    return plan.is_plan_symbol(symbol) and plan.plan_call_fits(symbol, tuple(params))


@dataclass(frozen=True, slots=True)
class CKernel:
    """A kernel of the `cpu` backend as calls of compiled C units: `calls` holds one
    `(symbol, src_arg, dst_arg, params)` per call, run one after another as
    `symbol(storage[src_arg], storage[dst_arg], params, nthreads)` over the launch's
    storages; `source` is the C text of every unit it calls, joined by `UNIT_SEPARATOR`.
    The fields after `numel` are keywords, shared with the Triton kernels' records."""

    name: str
    strategy: str
    source: str
    calls: tuple[tuple[str, int, int, tuple[int, ...]], ...]
    numel: int
    _: dataclasses.KW_ONLY
    kind: str = "copy"
    lang: str = "c"
    grid: tuple[int, ...] = (1,)
    index_bits: int = 64
    num_warps: int = 1

    @property
    def constexprs(self) -> dict[str, int]:
        return {}


@dataclass(frozen=True, slots=True)
class CCopyKernel(CKernel):
    """A copy (or a batch of copies into one buffer) as calls of the planned library; the
    launch passes storages `(src, dst)`, or `(dst, src_0, …)` for a batch."""


def assemble_kernel(
    specs: Sequence[CopySpec], args: Sequence[tuple[int, int]], label: str,
    plan_one: Callable[[CopySpec], Sequence[tuple[plan.PlannedClass, tuple]]],
) -> CCopyKernel:
    """One C kernel of `specs`, each planned by `plan_one` (the class and parameters of
    each of its calls: none where it writes nothing), `args` giving each call's storages:
    one unit of the libraries met."""
    calls = []
    call_classes: list[plan.PlannedClass] = []
    classes: list[plan.PlannedClass] = []
    for spec, (src_arg, dst_arg) in zip(specs, args, strict=True):
        if spec.numel == 0:
            continue
        for cls, params in plan_one(spec):
            calls.append((cls.symbol, src_arg, dst_arg, params))
            call_classes.append(cls)
            if all(c.symbol != cls.symbol for c in classes):
                classes.append(cls)
    if len(calls) > 1:
        # A batch writes one buffer: its members stream or not together, by its total (an
        # expression of the symbols over symbolic sizes, as the static plan's number).
        total = sum(s.numel * s.dst_dtype.itemsize for s in specs if s.numel)
        calls = [(sym, a, b, (*p[:6], p[6] if _never_streams(p[6]) else total, *p[7:]))
                 for sym, a, b, p in calls]
    source = UNIT_SEPARATOR.join(_unit_source(c) for c in classes)
    sources = tuple(_source_digest(c) for c in classes)
    digest = hashlib.sha256(repr((sources, calls)).encode()).hexdigest()[:16]
    strategies = [cls.strategy for cls in call_classes]
    strategy = strategies[0] if len(strategies) == 1 else f"{label}({','.join(strategies)})"
    numel = sum(s.numel for s in specs) if calls else 0
    return CCopyKernel(f"stridec_c_copy_{digest}", strategy, source, tuple(calls), numel)


def _never_streams(stream_bytes: object) -> bool:
    return type(stream_bytes) is int and stream_bytes < 0


def _unit_source(cls: plan.PlannedClass) -> str:
    return plan.plan_unit_source(cls.elem_bytes, cls.cast)


@functools.cache
def _source_digest(cls: plan.PlannedClass) -> str:
    """The digest of a unit's C source: kernels name themselves by their units' digests
    and calls, without hashing the whole text again for every kernel."""
    return hashlib.sha256(_unit_source(cls).encode()).hexdigest()


def generate_c_copy(spec: CopySpec) -> CCopyKernel:
    """The C kernel of one copy, launched as `(src_storage, dst_storage)`; casts convert
    as torch's CPU `.to()` (`codegen/c/casts.py`)."""
    return assemble_kernel([spec], [(0, 1)], "copy", plan.planned_calls)


def generate_c_copy_batch(specs: Sequence[CopySpec]) -> CCopyKernel:
    """The C kernel of copies into one buffer, launched as `(dst, src_0, …, src_{k-1})`;
    the copies run one after another, each on every thread."""
    return assemble_kernel(list(specs), [(j + 1, 0) for j in range(len(specs))], "batch",
                           plan.planned_calls)
