"""`cse`: an op that repeats an earlier one is replaced by it. Repeats means the same
name, operands, attributes and result types. Every op here is a pure function of its
operands (Philox too: the same state gives the same bits), except `input` and `output`,
and a `copy` into a buffer, which writes in place. Nor is a buffer that such a copy
writes into shared: in

    %0 = copy %x {... dst = strided<[3, 1], offset: 0>} : tensor<4x3xf32>   (cat([x, y]))
    %1 = copy %y, %0 {... dst = strided<[3, 1], offset: 6>}
    %2 = copy %x {... dst = strided<[3, 1], offset: 0>} : tensor<4x3xf32>   (cat([x, z]))
    %3 = copy %z, %2 {... dst = strided<[3, 1], offset: 6>}

%2 equals %0, but merging them would make %1 and %3 write rows 2..3 of one buffer.
Nor are two materializations merged when both are returned to the caller, who expects
independent tensors."""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter, written_into
from stridec.ir.graph import Graph
from stridec.ir.ops import CopyOp, InputOp, OutputOp

__all__ = ["CommonSubexpressionElimination"]


@register_pass
class CommonSubexpressionElimination(Pass):
    name: ClassVar[str] = "cse"

    def run(self, graph: Graph) -> None:
        seen: dict[tuple, object] = {}
        rw = Rewriter(graph)
        # Two equal materializations that both reach the caller stay apart: torch returns
        # independent tensors for `(x.t().contiguous(), x.t().contiguous())`.
        returned = {id(v.root()) for v in graph.outputs}
        for op in graph.ops:
            if (
                isinstance(op, (InputOp, OutputOp))
                or (isinstance(op, CopyOp) and op.writes_into)
                or written_into(op)
            ):
                rw.keep(op)
                continue
            key = (
                type(op),
                tuple(id(v) for v in op.operands),
                tuple(sorted(op.attrs.items(), key=lambda kv: kv[0])),
                tuple(r.type for r in op.results),
            )
            try:
                earlier = seen.get(key)
            except TypeError:  # an unhashable attribute: leave the op alone
                rw.keep(op)
                continue
            if earlier is None:
                seen[key] = op
                rw.keep(op)
                continue
            pairs = zip(op.results, earlier.results, strict=True)  # type: ignore[attr-defined]
            if not op.aliases_operand() and any(
                id(a) in returned and id(b) in returned for a, b in pairs
            ):
                rw.keep(op)
                continue
            rw.replace(op, earlier.results)  # type: ignore[attr-defined]
        graph.set_ops(rw.ops)
