"""`plan-memory`: decide how each graph output reaches the caller (SPEC §4, step 6).

- An output whose root is a graph input is handed back as a torch view of that input
  (`torch.as_strided` on the caller's tensor), never copied — unless its layout has a
  negative stride, which torch cannot express; then it is materialized contiguously. That
  copy is fused with the copy it reads, if any, so the output still takes one kernel.
- Every other output lives in a buffer allocated with `torch.empty_strided`-style
  storage of `layout.min_storage_size()` elements and is returned as a view of it.
- With `copy-aliased-outputs` (the custom-op contract, SPEC §7) outputs that view an
  input are copied too, so no output aliases an input.

The plan is recorded on the graph as `graph.memory_plan`: one `OutputPlan` per output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stridec.compiler.pass_manager import Pass, register_pass
from stridec.compiler.passes.fuse_copies import fuse
from stridec.compiler.passes.lower_formats import explicit_copy
from stridec.compiler.rewriting import Rewriter
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout

__all__ = ["PlanMemory", "OutputPlan"]


@dataclass(frozen=True)
class OutputPlan:
    """How output `index` is returned: a view of input `input_name`, or of a new buffer."""

    index: int
    aliases_input: str | None
    layout: Layout


def _needs_copy(value: Value, copy_aliased: bool) -> bool:
    root = value.root()
    if any(s < 0 for s in value.type.layout.strides):
        return True
    return copy_aliased and root.owner.name == "input"


def _drop_if_dead(op: Op, dropped: set[int]) -> None:
    """Drop `op` if nothing reads it; `dropped` collects the ids to leave out of the order
    (removing each from the op list at once would cost the list's length per output)."""
    if op.graph is not None and op.name != "input" and not any(r.uses for r in op.results):
        dropped.add(id(op))
        op.drop_uses()
        op.graph = None


def _fused(value: Value, rw: Rewriter) -> Value:
    """The new copy `value`, fused with the copy whose buffer it reads, if it can be.

    `x.t().contiguous().flip(0)` is returned through a copy of the flipped view; reading
    the transposing copy's buffer would take two kernels for one output, reading x
    through the composed map takes one (`fuse-copies` has already run).
    """
    op = value.owner
    producer = op.operands[0].owner
    fused = fuse(op, producer)
    if isinstance(fused, str):
        return value
    operands, attrs = fused
    new = O.CopyOp(operands, attrs)
    new.graph = rw.graph
    # `explicit_copy` has just placed `op` last: no need to search the list for it.
    index = len(rw.ops) - 1 if rw.ops and rw.ops[-1] is op else rw.ops.index(op)
    rw.ops[index] = new
    op.drop_uses()
    op.graph = None
    return new.result


@register_pass
@dataclass
class PlanMemory(Pass):
    name: ClassVar[str] = "plan-memory"
    copy_aliased_outputs: bool = False

    def run(self, graph: Graph) -> None:
        out_op = graph.output_op
        plans: list[OutputPlan] = []
        if out_op is None:
            graph.memory_plan = plans  # type: ignore[attr-defined]
            return
        rw = Rewriter(graph)
        rw.ops = graph.ops[:-1]
        dropped: set[int] = set()
        for i, v in enumerate(list(out_op.operands)):
            if _needs_copy(v, self.copy_aliased_outputs):
                layout = Layout.contiguous(v.type.sizes)
                new = _fused(
                    explicit_copy(
                        rw,
                        v,
                        layout=layout,
                        dtype=v.type.dtype,
                        space=v.type.sizes,
                        src=v.type.layout,
                        dst=layout,
                    ),
                    rw,
                )
                out_op.set_operand(i, new)
                # The view the copy replaces, then the buffer it read, if now unread.
                for op in (v.owner, v.root().owner):
                    _drop_if_dead(op, dropped)
                v = new
            root = v.root()
            alias = root.owner.attrs["name"] if root.owner.name == "input" else None
            plans.append(OutputPlan(i, alias, v.type.layout))
        rw.ops.append(out_op)
        graph.set_ops(op for op in rw.ops if id(op) not in dropped)
        graph.memory_plan = plans  # type: ignore[attr-defined]
