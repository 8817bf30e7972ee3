"""`plan-memory`: decide how each graph output reaches the caller. Step 6 of the default
pipeline (docs/design.md#passes).

- An output whose root is a graph input is handed back as a torch view of that input
  (`torch.as_strided` on the caller's tensor), never copied — unless its layout has a
  negative stride, which torch cannot express; then it is materialized contiguously. That
  copy is fused as `fuse-copies` fuses (with the copy it reads, or cut into one copy per
  writer of a cat's buffer), so the output still takes one kernel.
- Every other output lives in a buffer allocated with `torch.empty_strided`-style
  storage of `layout.min_storage_size()` elements and is returned as a view of it.
- With `copy-aliased-outputs` (the custom-op contract, docs/design.md#torch-integration) outputs that view an
  input are copied too, so no output aliases an input.

The plan is recorded on the graph as `graph.memory_plan`: one `OutputPlan` per output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stridec.compiler.copy_fusion import fuse_with_writers
from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter, explicit_copy
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
    if any(s < 0 for s in value.type.layout.strides):
        return True
    # (An input's memory after in-place writes into it is the input's memory too.)
    return copy_aliased and isinstance(O.storage_root(value).owner, O.InputOp)


def _drop_if_dead(op: Op, dropped: set[int], rw: Rewriter) -> None:
    """Drop `op` if nothing reads it, then the ops it read that this leaves unread (a
    cat's chain of copies into one buffer goes copy by copy); `dropped` collects the ids
    to leave out of the order (removing each from the op list at once would cost the
    list's length per output)."""
    pending = [op]
    while pending:
        op = pending.pop()
        if (op.graph is None or isinstance(op, O.InputOp) or any(r.uses for r in op.results)
                or O.has_effects(op)):
            continue
        producers = [v.owner for v in op.operands]
        dropped.add(id(op))
        rw.erase(op)
        pending.extend(producers)


@register_pass
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
                copy = explicit_copy(
                    rw,
                    v,
                    layout=layout,
                    dtype=v.type.dtype,
                    space=v.type.sizes,
                    src=v.type.layout,
                    dst=layout,
                )
                out_op.set_operand(i, copy)
                _drop_if_dead(v.owner, dropped, rw)  # the view the copy replaces, if now unread
                # Fused with the copies whose buffer it reads, as `fuse-copies` would have,
                # had the copy existed then: `x.t().contiguous().flip(0)` reads x through
                # the composed map, `cat([a, b], 1).flip(1)` is one copy per cat input.
                fuse_with_writers(copy.owner, rw, {})
                _drop_if_dead(v.root().owner, dropped, rw)  # the buffer it read, if now unread
                v = out_op.operands[i]
            root = O.storage_root(v)
            alias = root.owner.arg_name if isinstance(root.owner, O.InputOp) else None
            plans.append(OutputPlan(i, alias, v.type.layout))
        rw.keep(out_op)
        graph.set_ops(op for op in rw.ops if id(op) not in dropped)
        graph.memory_plan = plans  # type: ignore[attr-defined]
