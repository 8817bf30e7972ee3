"""The C target of the copy planner: one library per element size, and one per
(source, destination) dtype pair of a cast, written in C.

The library's sources are package data (`lib/casts.h`, `lib/copy_abi.h`,
`lib/copy_cast.h`, `lib/copy_micro.h`, `lib/copy_lanes.h`, `lib/copy_plan.c`); a unit is
their text after a few `#define`s (the element size, or a cast's two dtypes; the entry
point's name) and the thread pool's and streaming stores' declarations
(`lib/pool.h`, `lib/stream.h`). Everything a copy needs -- sizes, strides, the loop order, the
blocking, the micro-kernel -- is its argument block, whose layout `lib/copy_abi.h` states
once as X-macro field lists; `ABI` reads those lists, so the Python that fills a block and
the C that reads it share one description.

Which of a copy's plans runs is the model's first (`plan_copy`), unless the copies are
lowered inside `choosing(chooser)`: then `chooser` picks among `ranked_plans` (measured
choice, `stridec.runtime.tune`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources

from stridec.compiler.codegen.c.casts import C_PRELUDE
from stridec.compiler.codegen.c.pool import POOL_DECLARATION, STREAM_DECLARATION
from stridec.compiler.codegen.spec import CopySpec, MaskBound, canonicalize_copy, is_fill_only
from stridec.compiler.copy_plan import (
    KERNELS,
    MAX_BLOCK_ROWS,
    MAX_MASKS,
    PERMUTE_BYTES,
    PERMUTE_TABLE_BYTES,
    PERMUTE_TABLE_ELEMENTS,
    CopyPlan,
    candidate_plans,
    plan_copy,
)
from stridec.errors import UnsupportedError
from stridec.ir.affine import MAX_RANK

__all__ = ["ABI", "CAST_PREFIX", "LANE_KERNELS", "LIBRARY_FILES", "PlanABI", "PlannedClass",
           "SYMBOL_PREFIX", "choosing", "is_plan_symbol", "plan_call_fits", "plan_params",
           "plan_symbol", "plan_unit_source", "planned_call", "planned_calls", "ranked_plans"]

LIBRARY_FILES = ("copy_abi.h", "copy_cast.h", "copy_micro.h", "copy_lanes.h", "copy_plan.c")
SYMBOL_PREFIX = "stridec_plan_bits"
CAST_PREFIX = "stridec_plan_cast_"


def _library_text(name: str) -> str:
    return (resources.files("stridec.compiler.codegen.c") / "lib" / name).read_text("utf-8")


@dataclass(frozen=True, slots=True)
class PlanABI:
    """The argument block's layout as `lib/copy_abi.h` declares it."""

    version: int
    max_loops: int
    max_group: int
    max_rows: int
    max_masks: int
    header: tuple[str, ...]
    loop: tuple[str, ...]
    group: tuple[str, ...]
    mask: tuple[str, ...]
    kernels: dict[str, int]

    def index(self, field: str) -> int:
        return self.header.index(field)


def _macro_body(text: str, name: str) -> str:
    found = re.search(rf"#define {name}\(X\)((?:.*\\\n)*.*)", text)
    if found is None:
        raise ValueError(f"lib/copy_abi.h: no {name}(X) list")
    return re.sub(r"/\*.*?\*/", "", found.group(1))


def _read_abi() -> PlanABI:
    text = _library_text("copy_abi.h")

    def number(name: str) -> int:
        found = re.search(rf"#define {name} (\d+)", text)
        if found is None:
            raise ValueError(f"lib/copy_abi.h: no #define {name}")
        return int(found.group(1))

    header = tuple(re.findall(r"X\((\w+)\)", _macro_body(text, "STRIDEC_COPY_HEADER")))
    loop = tuple(re.findall(r"X\((\w+)\)", _macro_body(text, "STRIDEC_COPY_LOOP")))
    group = tuple(re.findall(r"X\((\w+)\)", _macro_body(text, "STRIDEC_COPY_GROUP")))
    mask = tuple(re.findall(r"X\((\w+)\)", _macro_body(text, "STRIDEC_COPY_MASK")))
    kernels = {n: int(v) for n, v in
               re.findall(r"X\((\w+), (\d+)\)", _macro_body(text, "STRIDEC_COPY_KERNELS"))}
    assert number("STRIDEC_COPY_MAX_PERMUTE") == PERMUTE_BYTES, \
        "lib/copy_abi.h and copy_plan.PERMUTE_BYTES disagree"
    assert (number("STRIDEC_COPY_MAX_PERMUTE_TABLE"), number("STRIDEC_COPY_MAX_PERMUTE_ELEMENTS")) \
        == (PERMUTE_TABLE_BYTES, PERMUTE_TABLE_ELEMENTS), \
        "lib/copy_abi.h and copy_plan.PERMUTE_TABLE_BYTES / _ELEMENTS disagree"
    return PlanABI(number("STRIDEC_COPY_ABI"), number("STRIDEC_COPY_MAX_LOOPS"),
                   number("STRIDEC_COPY_MAX_GROUP"), number("STRIDEC_COPY_MAX_ROWS"),
                   number("STRIDEC_COPY_MAX_MASKS"), header, loop, group, mask, kernels)


ABI = _read_abi()
assert set(ABI.kernels) == set(KERNELS), "lib/copy_abi.h and copy_plan.KERNELS disagree"
assert ABI.max_rows == MAX_BLOCK_ROWS, "lib/copy_abi.h and copy_plan.MAX_BLOCK_ROWS disagree"
assert ABI.max_masks == MAX_MASKS, "lib/copy_abi.h and copy_plan.MAX_MASKS disagree"
assert ABI.max_loops >= MAX_RANK and ABI.max_group >= MAX_RANK, "lib/copy_abi.h: below MAX_RANK"
# A batch sets word 6 of each member's call to the whole batch's bytes (codegen/c/copy.py).
assert ABI.index("stream_bytes") == 6, "lib/copy_abi.h: stream_bytes must be word 6"

# The strategy a planned kernel reports, by micro-kernel: the names the Triton target uses
# for the same walk.
STRATEGIES = {"rows": "linear", "transpose": "tiled_transpose", "gather": "gather",
              "deinterleave": "deinterleave", "interleave": "interleave", "compress": "compress",
              "reverse": "reverse", "fill": "fill", "permute": "gather"}


@dataclass(frozen=True, slots=True)
class PlannedClass:
    """A call of the planned copies' library of `elem_bytes`-byte elements (one unit for
    every plan of that size), or of a cast's library (`cast`: its source and destination
    dtypes, one unit for every plan of that pair); `strategy` names the plan's
    micro-kernel."""

    elem_bytes: int
    strategy: str
    cast: tuple[str, str] = ()

    @property
    def symbol(self) -> str:
        return plan_symbol(self.elem_bytes, self.cast)


# The micro-kernels of K interleaved lanes (lib/copy_lanes.h).
LANE_KERNELS = ("deinterleave", "interleave", "compress")


Chooser = Callable[[CopySpec, list[CopyPlan]], CopyPlan]
# The chooser of the copies lowered in this context (`choosing`); None: the model's first.
_CHOOSER: ContextVar[Chooser | None] = ContextVar("stridec_plan_chooser", default=None)


def ranked_plans(spec: CopySpec, limit: int = 4) -> list[CopyPlan]:
    """The distinct plans of `spec`, at most `limit`, best first by the model
    (`candidate_plans`), those of the first's library (a copy's runs moved as wider
    elements run on another)."""
    ranked: dict[tuple[int, ...], CopyPlan] = {}
    plans = candidate_plans(spec, limit=limit)
    for plan in plans:
        if (plan.elem_bytes, plan.cast) == (plans[0].elem_bytes, plans[0].cast):
            ranked.setdefault(plan_params(plan), plan)
    return list(ranked.values())


@contextlib.contextmanager
def choosing(chooser: Chooser) -> Iterator[None]:
    """Copies lowered inside run the plan `chooser(spec, ranked_plans(spec))` returns (one
    of those plans), where there are two or more."""
    token = _CHOOSER.set(chooser)
    try:
        yield
    finally:
        _CHOOSER.reset(token)


def planned_call(spec: CopySpec, plan: CopyPlan | None = None
                 ) -> tuple[PlannedClass, tuple[int, ...]] | None:
    """(class, argument block) of `spec` on the planned library, with `plan` (one of
    `candidate_plans(spec)`), else the one the chooser of `choosing` picks, else the
    model's; None where the planner takes no plan (`planned_calls` runs every copy)."""
    if plan is None:
        chooser = _CHOOSER.get()
        plans = ranked_plans(spec) if chooser is not None else []
        if plans:
            plan = plans[0] if len(plans) == 1 else chooser(spec, plans)
        else:  # the model's plan
            plan = plan_copy(spec)
            if plan is None:
                return None
    cls = PlannedClass(plan.elem_bytes, STRATEGIES[plan.kernel], plan.cast)
    return cls, plan_params(plan)


def planned_calls(spec: CopySpec) -> list[tuple[PlannedClass, tuple[int, ...]]]:
    """The calls of the planned library that run `spec`: none where it writes nothing; the
    model's plan (`planned_call`); else its gather, which relies on no stride; a copy of
    more masks than the argument block holds (`MAX_MASKS` directions) as the copies of
    the halves of its largest masked dim, recursively, each of which drops the masks that
    hold on all of it (at one element, every mask)."""
    call = planned_call(spec)
    if call is not None:
        return [call]
    plans = candidate_plans(spec, limit=1, gather=True)
    if plans:
        return [planned_call(spec, plans[0])]
    canon = canonicalize_copy(spec)
    if canon.numel == 0 or (is_fill_only(canon) and canon.fill is None):
        return []
    if len(canon.masks) <= MAX_MASKS:
        raise UnsupportedError(f"copy: the planner takes no plan of {spec}")
    k = max((j for j in range(canon.rank)
             if canon.sizes[j] > 1 and any(m.coeffs[j] for m in canon.masks)),
            key=lambda j: canon.sizes[j])
    half = canon.sizes[k] // 2
    low = dataclasses.replace(canon, sizes=_at(canon.sizes, k, half))
    high = dataclasses.replace(
        canon, sizes=_at(canon.sizes, k, canon.sizes[k] - half),
        src_offset=canon.src_offset + half * canon.src_strides[k],
        dst_offset=canon.dst_offset + half * canon.dst_strides[k],
        masks=tuple(MaskBound(m.coeffs, m.lo - m.coeffs[k] * half, m.hi - m.coeffs[k] * half)
                    for m in canon.masks))
    return planned_calls(low) + planned_calls(high)


def _at(values: tuple[int, ...], k: int, value: int) -> tuple[int, ...]:
    return (*values[:k], value, *values[k + 1:])


def plan_symbol(elem_bytes: int, cast: tuple[str, str] = ()) -> str:
    """The entry point of the library of `elem_bytes`-byte copies, or of the cast `cast`."""
    return f"{CAST_PREFIX}{cast[0]}_{cast[1]}" if cast else f"{SYMBOL_PREFIX}{elem_bytes}"


def is_plan_symbol(symbol: str) -> bool:
    return symbol.startswith((SYMBOL_PREFIX, CAST_PREFIX))


@functools.cache
def plan_unit_source(elem_bytes: int, cast: tuple[str, str] = ()) -> str:
    """The compile unit of the planned copies of `elem_bytes`-byte elements, or of the
    casts `cast` (source dtype, destination dtype: `elem_bytes` is the source's)."""
    symbol = plan_symbol(elem_bytes, cast)
    what = (f"#define CAST_SRC STRIDEC_DT_{cast[0].upper()}\n"
            f"#define CAST_DST STRIDEC_DT_{cast[1].upper()}" if cast
            else f"#define ELEM_BYTES {elem_bytes}")
    head = [
        f"/* stridec planned copy {symbol}: "
        f"{f'{cast[0]} to {cast[1]}' if cast else f'{elem_bytes}-byte elements'} */",
        what,
        f"#define STRIDEC_SYMBOL {symbol}",
        C_PRELUDE, POOL_DECLARATION, STREAM_DECLARATION,
        "/* The entry point (lib/copy_plan.c): the copy of argument block p on nthreads. */",
        f"void {symbol}(const void* src, void* dst, const int64_t* p, int64_t nthreads);",
    ]
    return "\n".join(head + [_library_text(name) for name in LIBRARY_FILES])


def plan_params(plan: CopyPlan) -> tuple[int, ...]:
    """The argument block of `plan` (`lib/copy_abi.h`)."""
    values = {
        "abi": ABI.version, "kernel": ABI.kernels[plan.kernel], "loops": len(plan.loops),
        "src_offset": plan.src_offset, "dst_offset": plan.dst_offset,
        "parallel": plan.parallel, "stream_bytes": plan.stream_bytes,
        "a_loop": plan.a_loop, "b_loop": plan.b_loop, "lanes": plan.lanes,
        "lane_stride": plan.lane_stride, "chunk": plan.chunk, "prefetch": int(plan.prefetch),
        "stage": int(plan.stage), "a_dims": len(plan.a_side), "b_dims": len(plan.b_side),
        "masks": len(plan.masks), "fill": int(plan.fill_bits is not None),
        "fill_bits": plan.fill_bits or 0, "c_loop": plan.c_loop,
    }
    words = [values[name] for name in ABI.header]
    for loop in plan.loops:
        fields = {"extent": loop.extent, "step": loop.step, "src_stride": loop.src_stride,
                  "dst_stride": loop.dst_stride}
        words += [fields[name] for name in ABI.loop]
    for extent, stride in (*plan.a_side, *plan.b_side):
        fields = {"extent": extent, "stride": stride}
        words += [fields[name] for name in ABI.group]
    sides = len(plan.a_side) + len(plan.b_side)
    for mask in plan.masks:
        if len(mask.coeffs) != len(plan.loops) or len(mask.sides) != sides:
            raise ValueError(f"plan_params: a mask of {len(mask.coeffs)} loop and "
                             f"{len(mask.sides)} side coefficients in a plan of "
                             f"{len(plan.loops)} loops and {sides} side dims")
        fields = {"lo": mask.lo, "hi": mask.hi, "lane": mask.lane}
        words += [fields[name] for name in ABI.mask] + list(mask.coeffs) + list(mask.sides)
    return tuple(words)


def plan_call_fits(symbol: str, params) -> bool:
    """Whether `params` are a whole argument block of the planned copy `symbol`: for
    checking a program read back from disk before it runs."""
    p = tuple(params)
    if not is_plan_symbol(symbol) or len(p) < len(ABI.header):
        return False
    loops, masks = p[ABI.index("loops")], p[ABI.index("masks")]
    sides = p[ABI.index("a_dims")] + p[ABI.index("b_dims")]
    return (p[ABI.index("abi")] == ABI.version and 1 <= loops <= ABI.max_loops
            and 0 <= sides <= 2 * ABI.max_group and 0 <= masks <= ABI.max_masks
            and len(p) == (len(ABI.header) + len(ABI.loop) * loops + len(ABI.group) * sides
                           + (len(ABI.mask) + loops + sides) * masks)
            and p[ABI.index("kernel")] in ABI.kernels.values())
