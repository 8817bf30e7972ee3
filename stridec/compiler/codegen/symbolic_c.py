"""The C kernels of copies over symbolic sizes (the `cpu` backend).

A copy over symbolic sizes runs on the planned library (`codegen/c/plan.py`) as a static
copy of the size of `hint` (a binding) would: the copy is canonicalized for every value of
its symbols (`canonicalize_symbolic`, `hint` ordering the dims), the plan's decisions
(micro-kernel, loop order, blocks, a transpose's sides) are taken at `hint`, and its
extents, strides and offsets are the symbolic copy's, so its argument block holds
expressions that `Program.bind` evaluates per call: one compiled library and one plan
serve every binding of the class. Each decision the micro-kernel relies on (a unit
stride, K lanes, a side's dims contiguous) is checked to hold for every value of the
symbols; where one does not, the copy takes the next of the model's candidates whose
premises all hold (a transpose of the lanes an interleave at `hint` had), down to the
library's gather, which has none. Dims that merge at `hint` only are planned unmerged, on
the symbolic copy's own dims; masks that hold everywhere or nowhere at `hint` only, with
the masks as they are (none dropped, the copy no fill); where the model's candidates do
not fit the symbolic copy's dims at all (a dim that `hint` orients or orders otherwise
than other bindings do), the gather over the symbolic canonical dims as they are.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from stridec.compiler.codegen.c import copy as c
from stridec.compiler.codegen.c import plan as planned
from stridec.compiler.codegen.spec import (
    CopySpec,
    MaskBound,
    bind_copy,
    canonicalize_copy,
    canonicalize_symbolic,
    copy_symbols,
    is_fill_only,
)
from stridec.compiler.copy_plan import (
    MAX_MASKS,
    MAX_THREADS,
    CopyPlan,
    Loop,
    PlanMask,
    candidate_plans,
)
from stridec.errors import UnsupportedError
from stridec.ir.dtypes import bit_pattern

__all__ = ["generate_c_copy_symbolic"]


def _plan(spec: CopySpec, hint: Mapping[str, int]
          ) -> list[tuple[planned.PlannedClass, tuple]]:
    """The calls (class, symbolic params) of one copy, as `plan.planned_calls` of a static
    one."""
    symbols = copy_symbols(spec)
    constants = {k: hint[k] for k in symbols if hint[k] in (0, 1)}
    if constants:
        spec = bind_copy(spec, constants)
    canon = canonicalize_symbolic(spec, hint) if copy_symbols(spec) else spec
    if not copy_symbols(canon):  # the hint's 0s and 1s left no symbol: the static copy
        return planned.planned_calls(canon)
    at = bind_copy(canon, hint)
    if at.numel == 0:
        return []
    on_library = _planned_call(canon, at)
    if on_library is not None:
        return [on_library]
    if is_fill_only(at) and canon.fill is None:
        return []
    if len(canon.masks) > MAX_MASKS:
        raise UnsupportedError(
            f"copy: at most {MAX_MASKS} masks over symbolic sizes are supported; got "
            f"{len(canon.masks)} (bind the sizes, or compile the graph with static shapes)")
    return [planned.planned_call(at, _gather_plan(canon, at))]


def _gather_plan(canon: CopySpec, at: CopySpec) -> CopyPlan:
    """The library's gather of the symbolic canonical copy `canon` (`at` at the hint): an
    element at a time along its last dim, the others looped over as they are, masks and
    fill as they are; it relies on no stride, so it holds for every value of the
    symbols."""
    if not canon.rank:
        canon = dataclasses.replace(canon, sizes=(1,), src_strides=(1,), dst_strides=(1,),
                                    masks=tuple(MaskBound((0,), m.lo, m.hi) for m in canon.masks))
    sizes, src, dst = canon.sizes, canon.src_strides, canon.dst_strides
    last = canon.rank - 1
    loops = tuple(Loop(j, sizes[j], sizes[j] if j == last else 1, src[j], dst[j])
                  for j in range(canon.rank))
    cast = (() if canon.src_dtype == canon.dst_dtype
            else (canon.src_dtype.name, canon.dst_dtype.name))
    size = canon.src_dtype.itemsize
    fill = None if canon.fill is None or not canon.masks else bit_pattern(canon.fill,
                                                                         canon.dst_dtype)
    masks = tuple(PlanMask(m.lo, m.hi, 0, tuple(m.coeffs)) for m in canon.masks)
    moved = math.prod(sizes) * (size + canon.dst_dtype.itemsize)
    return CopyPlan("gather", size, loops, canon.src_offset, canon.dst_offset, a_loop=-1,
                    b_loop=last, parallel=MAX_THREADS, stream_bytes=moved // 2, masks=masks,
                    fill_bits=fill, cast=cast)


def _planned_call(canon: CopySpec, at: CopySpec
                  ) -> tuple[planned.PlannedClass, tuple] | None:
    """(class, symbolic argument block) of the symbolic canonical copy `canon` on the
    planned library, with the plan the model takes for `at` (`canon` at the hint); None
    where the planner takes no plan there, or one of its decisions does not hold for every
    value of the symbols."""
    fill = _fills_always(canon)

    def canonical(coalesce: bool, simplify: bool = True) -> CopySpec:
        found = canonicalize_copy(at, coalesce, simplify)
        if fill:  # its never-holding mask is written another way there: the dims must agree
            found = dataclasses.replace(found, masks=at.masks)
        return found

    # Dims the hint alone lets merge: planned unmerged, on the symbolic copy's own dims;
    # masks that hold everywhere or nowhere at the hint only: planned as they are.
    coalesce, simplify = canonical(True) == at, True
    if not coalesce and canonical(False) != at:
        if fill or canonical(False, simplify=False) != at:
            return None
        simplify = False
    plans = candidate_plans(at, limit=64, gather=True, coalesce=coalesce, simplify=simplify)
    # runs moved as wider elements are whole runs at the hint only
    plans = [p for p in plans if p.elem_bytes == at.src_dtype.itemsize]
    natural = [p for p in plans if p.kernel != "gather"] or plans  # the gather's last
    plans = natural + [p for p in plans if p not in natural]
    # A fill of every value (a mask of constants that never holds) is the fill kernel; a
    # fill at the hint only is planned with its masks as they are (above).
    if not plans or (plans[0].kernel == "fill") != fill:
        return None
    # The model's plan where its premises hold for every value; else the next of its
    # candidates whose premises do (a transpose of the lanes the hint's interleave was),
    # down to the gather's, which has none.
    for plan in plans:
        symbolic = _symbolic_plan(plan, canon, at)
        if symbolic is not None:
            return planned.planned_call(at, symbolic)
    return None


def _fills_always(canon: CopySpec) -> bool:
    return any(all(type(c) is int and c == 0 for c in m.coeffs) and type(m.lo) is int
               and type(m.hi) is int and not m.lo <= 0 < m.hi for m in canon.masks)


def _side_dims(side: tuple[tuple[int, int], ...], first: int, at: CopySpec,
               contiguous: tuple[int, ...], other: tuple[int, ...]) -> list[int] | None:
    """The dims of a transpose's side at the hint: `first`, then for each further entry
    (extent, stride on the other side) the dim that continues the side contiguously in
    `contiguous`; None if an entry matches no dim or two."""
    dims = [first]
    run = at.sizes[first]
    for extent, stride in side[1:]:
        found = [j for j in range(at.rank) if j not in dims and contiguous[j] == run
                 and at.sizes[j] == extent and other[j] == stride]
        if len(found) != 1:
            return None
        dims.append(found[0])
        run *= extent
    return dims


def _symbolic_plan(plan: CopyPlan, canon: CopySpec, at: CopySpec) -> CopyPlan | None:
    """`plan` (of `at`) with the extents, strides and offsets of the symbolic `canon`, or
    None where the micro-kernel's premises hold at the hint only."""
    sizes, src, dst = canon.sizes, canon.src_strides, canon.dst_strides
    kernel, lanes = plan.kernel, plan.lanes
    a = plan.loops[plan.a_loop].dim if plan.a_loop >= 0 else None
    b = plan.loops[plan.b_loop].dim if plan.b_loop >= 0 else None
    # The lanes' dim has no loop: the deinterleave's a, the interleave's b.
    lane_dims = sorted(set(range(canon.rank)) - {loop.dim for loop in plan.loops})
    if kernel in ("deinterleave", "interleave"):
        if len(lane_dims) != 1:
            return None
        a, b = (lane_dims[0], b) if kernel == "deinterleave" else (a, lane_dims[0])
    elif lane_dims and kernel != "transpose":  # a transpose's sides take dims of no loop
        return None
    # What each micro-kernel relies on (copy_plan._kernel), for every value.
    if b is None or (dst[b] != 1 and kernel != "gather"):
        return None
    premises = {
        "rows": lambda: src[b] == 1,
        "reverse": lambda: src[b] == -1,
        "transpose": lambda: a is not None and src[a] == 1,
        "deinterleave": lambda: src[b] == lanes and sizes[a] == lanes and src[a] == 1,
        "interleave": lambda: sizes[b] == lanes and src[a] == 1 and dst[a] == lanes,
        "compress": lambda: src[b] == lanes,
        "fill": lambda: True,
        "gather": lambda: True,  # an element at a time along b: any strides
    }
    if kernel not in premises or not premises[kernel]():
        return None
    changes: dict = {}
    if kernel == "transpose":
        side_a = _side_dims(plan.a_side, a, at, at.src_strides, at.dst_strides)
        side_b = _side_dims(plan.b_side, b, at, at.dst_strides, at.src_strides)
        if side_a is None or side_b is None:
            return None
        for dims, contiguous in ((side_a, src), (side_b, dst)):
            run = 1
            for j in dims:  # each dim continues its side for every value
                if contiguous[j] != run:
                    return None
                run = run * sizes[j]
        extents = {a: math.prod(sizes[j] for j in side_a), b: math.prod(sizes[j] for j in side_b)}
        changes["a_side"] = tuple((sizes[j], dst[j]) for j in side_a)
        changes["b_side"] = tuple((sizes[j], src[j]) for j in side_b)
    loops = []
    for k, loop in enumerate(plan.loops):
        if kernel == "transpose" and k in (plan.a_loop, plan.b_loop):
            loops.append(Loop(loop.dim, extents[loop.dim], loop.step, loop.src_stride,
                              loop.dst_stride))
        else:
            loops.append(Loop(loop.dim, sizes[loop.dim], loop.step, src[loop.dim],
                              dst[loop.dim]))
    if kernel in ("deinterleave", "interleave"):
        changes["lane_stride"] = dst[a] if kernel == "deinterleave" else src[b]
    if plan.masks:  # `canon`'s masks, one to one with `at`'s (none simplified away there)
        lane = lane_dims[0] if kernel in ("deinterleave", "interleave") else None
        side_dims = [*side_a, *side_b] if kernel == "transpose" else []
        if len(side_dims) > 2 and any(not (type(m.coeffs[j]) is int and m.coeffs[j] == 0)
                                      for m in canon.masks for j in side_a):
            return None  # each source row valid or masked whole at every value
        changes["masks"] = tuple(
            PlanMask(m.lo, m.hi, m.coeffs[lane] if lane is not None else 0,
                     tuple(m.coeffs[loop.dim] for loop in loops),
                     tuple(m.coeffs[j] for j in side_dims))
            for m in canon.masks)
    # a cast streams by the mean of the bytes it reads and writes (copy_plan._plans_of)
    moved = math.prod(sizes) * (plan.elem_bytes + plan.dst_bytes)
    stream = plan.stream_bytes if plan.stream_bytes < 0 else moved // 2
    # Threads: the library runs a small copy on the calling thread whatever this says, so
    # the hint's size does not hold a larger binding to one.
    return dataclasses.replace(plan, loops=tuple(loops), src_offset=canon.src_offset,
                               dst_offset=canon.dst_offset, stream_bytes=stream,
                               parallel=MAX_THREADS, **changes)



def generate_c_copy_symbolic(
    specs: Sequence[CopySpec], args: Sequence[tuple[int, int]], hint: Mapping[str, int]
) -> c.CCopyKernel:
    """The C kernel of `specs` (one copy launched as `(src, dst)`, or a batch into one
    buffer launched as `(dst, src_0, …)`: `args` gives each call's storages), its calls'
    parameters symbolic."""
    label = "copy" if len(specs) == 1 else "batch"
    return c.assemble_kernel(specs, args, label, lambda spec: _plan(spec, hint))
