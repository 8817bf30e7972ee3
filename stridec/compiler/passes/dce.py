"""`dce`: remove ops none of whose results is used (inputs and `output` stay, and so do
writes into an input's memory: `has_effects`)."""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter
from stridec.ir.graph import Graph, Op
from stridec.ir.ops import InputOp, OutputOp, has_effects

__all__ = ["DeadCodeElimination"]


@register_pass
class DeadCodeElimination(Pass):
    """One backward sweep: an op is dead when every result is unused."""

    name: ClassVar[str] = "dce"

    def run(self, graph: Graph) -> None:
        # The sweep counts the uses each value has left rather than removing the dead
        # ops' uses one at a time; `Rewriter.erase_all` then filters each list once.
        left: dict[int, int] = {}  # id of a value read by a dead op -> its uses left
        dead: list[Op] = []
        kept = []
        for op in reversed(graph.ops):
            if isinstance(op, (InputOp, OutputOp)) or any(
                left.get(id(r), len(r.uses)) for r in op.results
            ) or has_effects(op):
                kept.append(op)
                continue
            dead.append(op)
            for v in op.operands:
                left[id(v)] = left.get(id(v), len(v.uses)) - 1
        dropped = {id(op) for op in dead}
        if any(id(user) not in dropped for op in dead for r in op.results for user, _ in r.uses):
            # A dead op is read by a kept one: the use lists disagree with the operands
            # (IR that was not verified), so the counts cannot be trusted.
            self._run_one_op_at_a_time(graph)
            return
        Rewriter(graph).erase_all(dead)
        graph.set_ops(reversed(kept))

    @staticmethod
    def _run_one_op_at_a_time(graph: Graph) -> None:
        rw = Rewriter(graph)
        for op in reversed(graph.ops):
            if (isinstance(op, (InputOp, OutputOp)) or any(r.uses for r in op.results)
                    or has_effects(op)):
                rw.keep(op)
                continue
            rw.erase(op)
        graph.set_ops(reversed(rw.ops))
