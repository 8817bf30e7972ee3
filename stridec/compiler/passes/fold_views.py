"""`fold-views`: every chain of views over a root storage becomes one stride rewrite.

Each value's type already carries its layout over the root storage (the view rules are
applied as the graph is built), so a chain

    %1 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf32, strided<[60, 5, 1, 20], offset: 0>>
    %2 = slice %1 {dim = 1, start = 1, step = 2} : tensor<2x2x5x3xf32, strided<[60, 10, 1, 20], offset: 5>>

folds to one op reading the root directly (offset 5 = 1·5: row 1 of dim H):

    %2 = as_strided %x {sizes = [2, 2, 5, 3], strides = [60, 10, 1, 20], offset = 5}

A view that addresses its root exactly as the root itself does is the root. A reshape
that is not viewable is no view: it stays, and `lower-formats` makes it a copy. A chain
through a `bitcast` (torch's `view(dtype)`) reads the root's bytes as another element
type: its one as_strided says so (`dtype`), its layout in elements of that type.
"""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Value

__all__ = ["FoldViews", "as_strided_of_root"]


def as_strided_of_root(value: Value, rw: Rewriter) -> Value:
    """A value equal to `value`, read straight from its root: the root or one as_strided
    (of the root's bytes read as `value`'s dtype where a `bitcast` in the chain changed
    it: its layout counts elements of that dtype)."""
    root = value.root()
    layout, dtype = value.type.layout, value.type.dtype
    if root.type.layout == layout and root.type.dtype == dtype:
        return root
    attrs = {"sizes": layout.sizes, "strides": layout.strides, "offset": layout.offset,
             "dtype": dtype}
    return rw.create(O.AsStridedOp, [root], attrs).result


def _read_by_non_view(value: Value) -> bool:
    return any(not user.aliases_operand() for user, _ in value.uses)


@register_pass
class FoldViews(Pass):
    """Replace every view (chain) by a single `as_strided` over the root storage."""

    name: ClassVar[str] = "fold-views"

    def run(self, graph: Graph) -> None:
        rw = Rewriter(graph)
        for op in graph.ops:
            if not op.aliases_operand():
                rw.keep(op)
                continue
            if isinstance(op, O.AsStridedOp) and not op.operands[0].owner.aliases_operand():
                if op.result.type.layout != op.operands[0].type.layout:
                    rw.keep(op)
                    continue
            # A result read only by further views needs no op of its own: those views fold
            # through it to the root (its operand links stay until they are folded).
            replacements = [
                as_strided_of_root(r, rw) if _read_by_non_view(r) else r for r in op.results
            ]
            rw.replace(op, replacements)
        graph.set_ops(rw.ops)
