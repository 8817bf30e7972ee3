"""`eliminate-copies`: a copy whose source already has the requested layout is a view.

    %1 = copy %x {space = [4, 5], src = strided<[5, 1], offset: 10>, dst = strided<[5, 1], offset: 0>}
  → %1 = as_strided %x {sizes = [4, 5], strides = [5, 1], offset = 10}

(`x[2:].contiguous()` of a contiguous (6, 5) x: rows 2.. start at 2·5 = 10 and are already
row-major.) Only plain copies qualify: no cast, no mask, no target buffer, and the result
is not itself a buffer some later copy writes into. `index_maps.as_view` decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stridec.compiler.index_maps import as_view
from stridec.compiler.pass_manager import Pass, register_pass
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op

__all__ = ["EliminateCopies"]


def _written_into(op: Op) -> bool:
    return any(user.name == "copy" and i == 1 for user, i in op.result.uses)


@register_pass
@dataclass
class EliminateCopies(Pass):
    name: ClassVar[str] = "eliminate-copies"

    def run(self, graph: Graph) -> None:
        ops = []
        for op in graph.ops:
            ops.append(op)
            a = op.attrs
            if (
                op.name != "copy"
                or a["space"] is None
                or len(op.operands) != 1
                or a["masks"]
                or a["dtype"] != op.operands[0].type.dtype
                or _written_into(op)
            ):
                continue
            view = as_view(a["layout"], a["dst"], a["src"])
            if view is None:
                continue
            root = op.operands[0]
            if view == root.type.layout:
                replacement = root
                ops.pop()
            else:
                new = O.AsStridedOp(
                    [root], {"sizes": view.sizes, "strides": view.strides, "offset": view.offset}
                )
                new.graph = graph
                ops[-1] = new
                replacement = new.result
            op.result.replace_all_uses_with(replacement)
            op.drop_uses()
            op.graph = None
        graph.set_ops(ops)
