"""`eliminate-copies`: a copy whose source already has the requested layout is a view.

    %1 = strided_copy %x {space = [4, 5], src = strided<[5, 1], offset: 10>,
                  dst = strided<[5, 1], offset: 0>}
  → %1 = as_strided %x {sizes = [4, 5], strides = [5, 1], offset = 10}

(`x[2:].contiguous()` of a contiguous (6, 5) x: rows 2.. start at 2·5 = 10 and are already
row-major.) Only plain copies qualify: no cast, no mask, no target buffer, and the result
is not itself a buffer some later copy writes into. `index_maps.as_view` decides, given
the copy's writer coalesced jointly (a copy without masks may be: the pairs it writes do
not change), so a copy that merely regroups dims -- `x.pack("NCHW4").unpack("NCHW4", 8)`,
space (2, 2, 4, 4, 5) with src = dst = strides (160, 80, 20, 5, 1) -- is seen as the one
run (320,) it is, and goes.

Whatever read the copy's buffer now reads the source: the buffer address `b` of every
element is the source address `b + δ`, with δ = view offset − buffer offset (10 − 0 = 10
above). Layouts over the buffer are absolute, so they move by δ:

    %2 = as_strided %1 {sizes = [5, 4], strides = [1, 5], offset = 0}         (%1.t())
  → %2 = as_strided %x {sizes = [5, 4], strides = [1, 5], offset = 10}

and a copy reading the buffer through `src = strided<[1, 5], offset: 0>` reads `%x` through
`strided<[1, 5], offset: 10>`. A buffer read by any other op (an unfolded view: run
`fold-views` first) is left alone.

A copy whose buffer the caller gets (an output, or a view of it) stays: every copy here
comes from an op whose torch result is new memory (`clone`, `copy`, `pad`, `cat`, `flip`,
a copying `reshape`, a `contiguous` of what is not contiguous), and handing back the
source instead would let a write to the result change an input. (A `contiguous` of what
already is contiguous, or a cast to the same dtype, is a view, never a copy.)
"""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter, overwritten, written_into
from stridec.errors import LayoutError
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.index_maps import as_view
from stridec.ir.layout import Layout, coalesce_jointly

__all__ = ["EliminateCopies"]


def _shifted(layout: Layout, delta: int) -> Layout:
    return Layout(layout.sizes, layout.strides, layout.offset + delta)


def _returned(value: Value) -> bool:
    """Whether the caller gets `value`'s buffer: an output reads it, directly or through
    views (folded or not)."""
    for user, _ in value.uses:
        if isinstance(user, O.OutputOp) or (user.aliases_operand() and _returned(user.result)):
            return True
    return False


def _read_through_folded_views(value: Value) -> str | None:
    """Why `value`'s buffer cannot be read from elsewhere: a reader other than an output,
    a copy's source or an as_strided read only so (an unfolded view, whose recorded type
    would go stale when its operand moves); None when there is none."""
    for user, i in value.uses:
        if isinstance(user, O.AsStridedOp) and user.result.type.dtype != value.type.dtype:
            return "an as_strided reads the buffer's bytes as another element type"
        if isinstance(user, O.AsStridedOp):
            why = _read_through_folded_views(user.result)
            if why is not None:
                return why
        elif not (isinstance(user, O.OutputOp)
                  or (isinstance(user, O.ExplicitCopyOp) and i == 0)):
            return f"'{user.name}' reads the buffer (not a folded view)"
    return None


def _view_of_source(op: Op) -> Layout | str:
    """The copy's result as a layout over its source root, or why the copy must stay."""
    if not isinstance(op, O.ExplicitCopyOp):
        return "not an explicit copy"
    if isinstance(op, O.FillOp) or op.writes_into:
        return "a fill, or a copy into another buffer"
    if not isinstance(op, O.StridedCopyOp) or op.dtype != op.operands[0].type.dtype:
        return "masked, framed or casting"
    if written_into(op):
        return "a later copy writes into its buffer"
    if overwritten(op.operands[0]):
        return "its source is written over later (an in-place write): the copy keeps the values"
    if _returned(op.result):
        return "its buffer is returned, and the op it came from gives new memory"
    # Necessary, and much cheaper than the proof below: a copy that moves some dim by a
    # different stride on each side (a transpose) is never a shift of addresses.
    space = op.space
    moves = zip(space, op.src.strides, op.dst.strides, strict=True)
    if 0 not in space and any(n != 1 and s != d for n, s, d in moves):
        return "it moves elements (src and dst strides differ)"
    dst, src = coalesce_jointly(op.dst, op.src)
    view = as_view(op.layout, dst, src)
    if view is None:
        return "the source does not have the requested layout"
    why = _read_through_folded_views(op.result)
    return view if why is None else why


def _view(root: Value, layout: Layout) -> Op | Value:
    """`root` read through `layout`: the root itself, or one as_strided of it."""
    if layout == root.type.layout:
        return root
    return O.AsStridedOp(
        [root], {"sizes": layout.sizes, "strides": layout.strides, "offset": layout.offset}
    )


def _read_layout(reader: Op) -> Layout:
    """The absolute layout through which an as_strided or a copy reads its operand 0."""
    return reader.result.type.layout if isinstance(reader, O.AsStridedOp) else reader.src


def _rebased(reader: Op, root: Value, layout: Layout) -> Op | Value:
    """`reader` reading `root` through `layout` instead of its buffer."""
    if isinstance(reader, O.AsStridedOp):
        return _view(root, layout)
    return type(reader)([root, *reader.operands[1:]], reader.with_attrs(src=layout))


@register_pass
class EliminateCopies(Pass):
    name: ClassVar[str] = "eliminate-copies"

    def run(self, graph: Graph) -> None:
        # Readers of an eliminated buffer, rebuilt over the source; each takes the old op's
        # place in the order (a copy reader may also read a buffer defined after the copy).
        substitutes: dict[int, Op | None] = {}
        rw = Rewriter(graph)
        for op in graph.ops:
            if id(op) in substitutes:
                new = substitutes.pop(id(op))
                rw.erase(op)
                if new is None:
                    continue
                op = new
            view = _view_of_source(op)
            if isinstance(view, str):
                rw.keep(op)
                continue
            root = op.operands[0]
            delta = view.offset - op.layout.offset
            readers = [u for u, _ in op.result.uses if not isinstance(u, O.OutputOp)]
            try:
                moved = [_shifted(_read_layout(u), delta) for u in readers]
            except LayoutError:  # a reader outside the buffer's elements (its padding)
                rw.keep(op)
                continue
            rebased = {id(u): _rebased(u, root, lay) for u, lay in zip(readers, moved, strict=True)}
            alias: Value | None = None
            for user, i in list(op.result.uses):
                if isinstance(user, O.OutputOp):
                    if alias is None:
                        made = _view(root, view)
                        if isinstance(made, Op):
                            made = rw.insert(made).result
                        alias = made
                    user.set_operand(i, alias)
                    continue
                new = rebased[id(user)]
                if isinstance(new, Op):
                    new.graph = graph
                    user.result.replace_all_uses_with(new.result)
                    substitutes[id(user)] = new
                else:
                    user.result.replace_all_uses_with(new)
                    substitutes[id(user)] = None
            rw.erase(op)
        graph.set_ops(rw.ops)
