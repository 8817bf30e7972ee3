"""`merge-fills`: a fill of a new buffer and the copies of boxes into that buffer become
one framed copy each, so every element is written once, not twice. Last step of the
default pipeline (docs/design.md#passes).

F.pad of a (3,) row by (1, 2): a fill of (6,), then a copy of the row into elements 1..3,

    %0 = copy {layout = strided<[1], offset: 0>, dtype = f32, space = [6], dst = strided<[1], offset: 0>, fill = 0.0} : tensor<6xf32>
    %1 = copy %x, %0 {space = [3], src = strided<[1], offset: 0>, dst = strided<[1], offset: 1>} : tensor<6xf32>
  → %1 = copy %x {layout = strided<[1], offset: 0>, space = [3], src = strided<[1], offset: 0>, dst = strided<[1], offset: 1>, fill = 0.0, frame = [[1, 2]]} : tensor<6xf32>

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
from collections.abc import Iterable
from typing import ClassVar

from stridec.compiler.codegen.spec import (
    CopySpec,
    copy_spec,
    dst_box,
    fill_parts,
    fills_around_box_copies,
)
from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter
from stridec.ir.affine import Box, boxes_disjoint
from stridec.ir.graph import Graph, Op
from stridec.ir.ops import AsStridedOp, CopyOp, InputOp

__all__ = ["MergeFills"]


def _inside(a: Box, b: Box) -> bool:
    return all(lo1 <= lo0 and hi0 <= hi1 for (lo0, hi0), (lo1, hi1) in zip(a, b, strict=True))


def _is_fill(op: Op) -> bool:
    return isinstance(op, CopyOp) and op.is_explicit and not op.operands


def _static(op: CopyOp) -> bool:
    """No symbolic size in the copy's layouts: its boxes are numbers (a symbolic graph is
    merged once `stridec.compile` has specialized it)."""
    return all(lay is None or lay.is_static() for lay in (op.layout, op.src, op.dst))


def _launches_nothing(op: Op) -> bool:
    """Ops between a fill and its copies that do not end the run (no kernel of their own)."""
    return not isinstance(op, CopyOp) and (isinstance(op, (InputOp, AsStridedOp))
                                           or op.aliases_operand())


def _run_after(
    fill: CopyOp, later: Iterable[Op]
) -> tuple[CopySpec, list[CopyOp], list[tuple[CopyOp, CopySpec, Box | None]]] | str:
    """The fill's spec, the copies into its buffer that follow it (the chain, in order)
    and those of them it is merged with, with their specs and their boxes of the fill's
    layout (None where there are none to compare); or why there are none."""
    uses = fill.result.uses
    if len(uses) != 1 or not isinstance(uses[0][0], CopyOp) or uses[0][1] != 1:
        return "the fill is not read by one copy into its buffer alone"
    if not _static(fill):
        return "the fill's sizes are symbolic"
    layout = fill.layout
    spec = copy_spec(fill)
    fill_box = dst_box(spec, layout.sizes, layout.strides, layout.offset)
    buffer = {id(fill.result)}
    value = fill.result
    chain: list[CopyOp] = []
    taken: list[tuple[CopyOp, CopySpec, Box | None]] = []
    for op in later:
        if _launches_nothing(op):
            continue
        if not isinstance(op, CopyOp) or len(op.operands) != 2 or op.operands[1] is not value:
            break
        if not _static(op):
            break
        copy = copy_spec(op)
        if copy.numel:
            if id(op.operands[0].root()) in buffer or copy.dst_dtype != spec.dst_dtype:
                break
            box = dst_box(copy, layout.sizes, layout.strides, layout.offset)
            if fill_box is None or box is None:  # no boxes to compare: one copy at most
                if taken or fill_box is not None:
                    break
                taken.append((op, copy, box))
            elif _inside(box, fill_box) and all(
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
    return spec, chain, taken


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
            assert isinstance(fill, CopyOp)
            run = _run_after(fill, itertools.islice(ops, position + 1, None))
            if isinstance(run, str):
                continue
            fill_spec, chain, taken = run
            specs = [spec for _, spec, _ in taken]
            # Where the fill writes its whole layout, its space is the layout's: the boxes
            # found in the layout are those `fill_parts` would find again.
            boxes = [box for _, _, box in taken]
            known = fill.dst == fill.layout and all(box is not None for box in boxes)
            parts = fill_parts(fill_spec, specs, boxes if known else None)
            if parts is None or not fills_around_box_copies(fill_spec, specs, parts):
                continue
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
                new = ops[index[id(op)]] = CopyOp(operands, attrs)
                new.graph = graph
                rw.replace(op, new.results)
                into = new.result
            rw.erase(fill)
            dropped.add(id(fill))
        graph.set_ops(op for op in ops if id(op) not in dropped)
