"""`merge-fills`: a fill of a new buffer and the copies of boxes into that buffer become
one framed copy each, so every element is written once, not twice. Last step of the
default pipeline (docs/design.md#passes).

F.pad of a (3,) row by (1, 2): a fill of (6,), then a copy of the row into elements 1..3,

    %0 = fill {layout = strided<[1], offset: 0>, dtype = f32, space = [6], dst = strided<[1], offset: 0>, fill = 0.0} : tensor<6xf32>
    %1 = strided_copy %x, %0 {space = [3], src = strided<[1], offset: 0>, dst = strided<[1], offset: 1>} : tensor<6xf32>
  → %1 = framed_copy %x {layout = strided<[1], offset: 0>, space = [3], src = strided<[1], offset: 0>, dst = strided<[1], offset: 1>, fill = 0.0, frame = [[1, 2]]} : tensor<6xf32>

The framed copy writes `fill` on 1 point before its box and 2 after it: one masked kernel
over (6,) (`stridec.compiler.codegen.spec.copy_spec`). With several copies into the buffer
(F.pad of a cat), the fill's space is cut by planes into one part per copy
(`fill_parts`), and each copy takes the frame of its part; the parts are disjoint boxes,
so `lower_to_program` runs them as one batched kernel.

A fill is taken when its only reader is a copy into its buffer. The copies that follow it
into that buffer (views between them do not count; any other op ends the run) are taken
while each writes a box inside the fill's box, meeting none taken so far, in the fill's
dtype and without reading the buffer; one whose box misses the fill's stays as it is (the
two write different elements). Nothing changes when a copy is neither, when no planes
separate the boxes, or when a copy's masks leave points unwritten where the fill wrote
another value (`fills_around_box_copies`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import ClassVar

from stridec.compiler.codegen.spec import (
    CopySpec,
    MaskBound,
    copy_spec,
    dst_box,
    fill_parts,
    fills_around_box_copies,
)
from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter
from stridec.errors import StridecError
from stridec.ir.affine import Box, box_inside, boxes_disjoint
from stridec.ir.graph import Graph, Op
from stridec.ir.index_maps import compose
from stridec.ir.layout import Layout
from stridec.ir.ops import AsStridedOp, CopyOp, FillOp, InputOp, explicit_copy_op
from stridec.ir.symbols import UndecidedError

__all__ = ["MergeFills"]


def _is_fill(op: Op) -> bool:
    return isinstance(op, FillOp)


def _launches_nothing(op: Op) -> bool:
    """Ops between a fill and its copies that do not end the run (no kernel of their own)."""
    return not isinstance(op, CopyOp) and (isinstance(op, (InputOp, AsStridedOp))
                                           or op.aliases_operand())


def _fill_over_copy_dims(fill: CopySpec, copy: CopySpec) -> CopySpec | None:
    """`fill` seen over `copy`'s dims where the copy splits some of the fill's: the same
    points, one dim per copy dim with the copy's destination stride, so the copy writes a
    box of it and its frame (one `[before, after]` per copy dim) can say where the fill
    goes. None unless each fill dim that two or more copy dims walk (in mixed radix) is
    walked whole by them, each other one by at most one copy dim at stride 1 in its
    coordinates (or, when none walks it, by a copy dim of size 1 at the fill's stride),
    and no copy dim walks two fill dims.

    A channel shuffle padded in H and W, F.pad(x.view(N, 2, 3, H, W).transpose(1, 2)...):
    its copy walks (n, g, c, h, w) with channel 3·g + c of a (N, 6, H + 2, W + 2) fill;
    over the copy's dims the fill is (N, 2, 3, H + 2, W + 2), the channel's stride split
    as (3·s, s), and the copy's box is the whole of g and c, rows and columns 1 in.
    """
    whole = Layout(fill.sizes, fill.dst_strides, fill.dst_offset)
    try:
        written = Layout(copy.sizes, copy.dst_strides, copy.dst_offset)
    except StridecError:
        return None
    comp = compose(written, whole, Layout.contiguous(fill.sizes))
    if comp is None or comp.is_refined:
        return None
    sizes = [1] * copy.rank
    strides = list(copy.dst_strides)
    claimed: set[int] = set()
    for m, (n, stride) in enumerate(zip(fill.sizes, fill.dst_strides, strict=True)):
        row = comp.coord_map[m]
        movers = sorted((row[k], k) for k in range(copy.rank) if row[k] and copy.sizes[k] != 1)
        if any(k in claimed for _, k in movers):
            return None
        if len(movers) > 1:  # split: the copy must walk the whole fill dim, in mixed radix
            reach = 1
            for c, k in movers:
                if c != reach:
                    return None
                reach *= copy.sizes[k]
            if reach != n or comp.coord_base[m] != 0:
                return None
            for _, k in movers:
                sizes[k] = copy.sizes[k]
                claimed.add(k)
            continue
        if movers:
            c, k = movers[0]
            if c != 1:
                return None
        elif n == 1:
            continue
        else:
            free = [k for k in range(copy.rank)
                    if copy.sizes[k] == 1 and k not in claimed and copy.dst_strides[k] == stride]
            if not free:
                return None
            k = free[0]
        sizes[k] = n
        strides[k] = stride
        claimed.add(k)
    if math.prod(sizes) != fill.numel:
        return None
    rank = copy.rank
    return CopySpec(
        tuple(sizes), (0,) * rank, 0, tuple(strides), fill.dst_offset, fill.src_dtype,
        fill.dst_dtype, (MaskBound((0,) * rank, 1, 1),), fill.fill,
    )


def _run_after(
    fill: CopyOp, later: Iterable[Op]
) -> tuple[CopySpec, list[CopyOp], list[tuple[CopyOp, CopySpec, Box | None]], bool] | str:
    """The fill's spec, the copies into its buffer that follow it (the chain, in order)
    and those of them it is merged with, with their specs and their boxes (None where
    there are none to compare), and whether those boxes are of the spec's own space
    (else of the fill's layout); or why there are none. Where the first copy splits the
    fill's dims (`_fill_over_copy_dims`), the spec is the fill over the copy's dims."""
    uses = fill.result.uses
    if len(uses) != 1 or not isinstance(uses[0][0], CopyOp) or uses[0][1] != 1:
        return "the fill is not read by one copy into its buffer alone"
    layout = fill.layout
    spec = copy_spec(fill)
    space = (layout.sizes, layout.strides, layout.offset)
    own = fill.dst == layout  # the fill writes its whole layout: its space is the layout's
    fill_box = dst_box(spec, *space)
    buffer = {id(fill.result)}
    value = fill.result
    chain: list[CopyOp] = []
    taken: list[tuple[CopyOp, CopySpec, Box | None]] = []
    for op in later:
        if _launches_nothing(op):
            continue
        if not isinstance(op, CopyOp) or len(op.operands) != 2 or op.operands[1] is not value:
            break
        copy = copy_spec(op)
        if copy.numel:
            if id(op.operands[0].root()) in buffer or copy.dst_dtype != spec.dst_dtype:
                break
            box = dst_box(copy, *space)
            if box is None and own and not taken and not chain:
                refined = _fill_over_copy_dims(spec, copy)
                if refined is not None:
                    spec = refined
                    space = (spec.sizes, spec.dst_strides, spec.dst_offset)
                    fill_box = tuple((0, n) for n in spec.sizes)
                    box = dst_box(copy, *space)
            if fill_box is None or box is None:  # no boxes to compare: one copy at most
                if taken or fill_box is not None:
                    break
                taken.append((op, copy, box))
            elif box_inside(box, fill_box) and all(
                b is not None and boxes_disjoint(box, b) for _, _, b in taken
            ):
                taken.append((op, copy, box))
            elif not boxes_disjoint(box, fill_box):
                break
        chain.append(op)
        value = op.result
        buffer.add(id(value))
    if not taken:
        return "no copy of a box inside the fill's follows it"
    return spec, chain, taken, own


def _merge(
    fill: CopyOp, later: Iterable[Op]
) -> tuple[list[CopyOp], list[tuple[CopyOp, CopySpec, Box | None]], list[tuple[Box, Box]]] | None:
    """The run after `fill` (`_run_after`), the copies taken and each one's (part, box)
    of the fill's space (`fill_parts`), or None where they do not merge."""
    run = _run_after(fill, later)
    if isinstance(run, str):
        return None
    fill_spec, chain, taken, own = run
    specs = [spec for _, spec, _ in taken]
    # Boxes of the fill's own space are those `fill_parts` would find again.
    boxes = [box for _, _, box in taken]
    known = own and all(box is not None for box in boxes)
    parts = fill_parts(fill_spec, specs, boxes if known else None)
    if parts is None or not fills_around_box_copies(fill_spec, specs, parts):
        return None
    return chain, taken, parts


@register_pass
class MergeFills(Pass):
    """Merge each fill of a new buffer with the box copies into it (module docstring)."""

    name: ClassVar[str] = "merge-fills"

    def run(self, graph: Graph) -> None:
        rw = Rewriter(graph)
        ops = list(graph.ops)
        index = {id(op): i for i, op in enumerate(ops)}
        dropped: set[int] = set()
        for position, fill in enumerate(ops):
            if not _is_fill(fill):
                continue
            try:
                found = _merge(fill, itertools.islice(ops, position + 1, None))
            except UndecidedError:  # a box or a cut whose place depends on the symbols
                continue
            if found is None:
                continue
            chain, taken, parts = found
            frames = {
                id(op): tuple((b0 - p0, p1 - b1) for (p0, p1), (b0, b1) in zip(part, box, strict=True))
                for (op, _, _), (part, box) in zip(taken, parts, strict=True)
            }
            into = None  # the first copy of the chain starts the buffer the fill started
            for op in chain:
                attrs = dict(op.attrs)
                if id(op) in frames:
                    attrs.update(fill=fill.fill, frame=frames[id(op)])
                operands = [op.operands[0]] + ([into] if into is not None else [])
                new = ops[index[id(op)]] = explicit_copy_op(operands, attrs)
                new.graph = graph
                rw.replace(op, new.results)
                into = new.result
            rw.erase(fill)
            dropped.add(id(fill))
        graph.set_ops(op for op in ops if id(op) not in dropped)
