"""`cse`: an op with the same name, operands, attributes and result types as an earlier
one is the earlier one. Every op here is a pure function of its operands (Philox too: the
same state gives the same bits), except `input` and `output`, and a `copy` into a buffer,
which writes in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stridec.compiler.pass_manager import Pass, register_pass
from stridec.ir.graph import Graph

__all__ = ["CommonSubexpressionElimination"]


@register_pass
@dataclass
class CommonSubexpressionElimination(Pass):
    name: ClassVar[str] = "cse"

    def run(self, graph: Graph) -> None:
        seen: dict[tuple, object] = {}
        kept = []
        for op in graph.ops:
            if op.name in ("input", "output") or (op.name == "copy" and len(op.operands) == 2):
                kept.append(op)
                continue
            key = (
                op.name,
                tuple(id(v) for v in op.operands),
                tuple(sorted(op.attrs.items(), key=lambda kv: kv[0])),
                tuple(r.type for r in op.results),
            )
            try:
                earlier = seen.get(key)
            except TypeError:  # an unhashable attribute: leave the op alone
                kept.append(op)
                continue
            if earlier is None:
                seen[key] = op
                kept.append(op)
                continue
            for old, new in zip(op.results, earlier.results):  # type: ignore[attr-defined]
                old.replace_all_uses_with(new)
            op.drop_uses()
            op.graph = None
        graph.set_ops(kept)
