"""`lower-formats`: every materialization becomes explicit `copy` ops. Step 3 of the
default pipeline (docs/design.md#passes).

An explicit copy iterates over a `space`; at each point `i` it writes the buffer index
`dst(i)` with the root-storage element `src(i)` (or `fill` where a mask fails). Packing
NCHW4 with C = 3 from a contiguous (2, 3, 4, 5) tensor, for instance:

    space = [2, 1, 4, 4, 5]                         (N, C/4, 4, H, W: c = co·4 + ci)
    src   = strides [60, 80, 20, 5, 1]              (co·4·20 + ci·20: one channel is 20)
    dst   = strides [80, 80, 1, 20, 4]              (row-major (2, 1, 4, 5, 4) seen as N, Cb, ci, H, W)
    masks = [[[0, 4, 1, 0, 0], 0, 3]]               (valid iff 4·co + ci < 3; else fill)

What each op becomes:
- contiguous, cast, copy, clone, flip, a reshape that is not viewable: one copy (a
  flip's reads its operand through negative strides);
- pack / unpack: one copy over the format's split space (unpack restricted by the mask);
- pad: a fill of the whole result (only when some pad is positive), then one copy of the
  kept region into it (`lower_to_program` runs the two as one masked kernel);
- cat: one copy per input, each into a slice of the same buffer;
- full: a fill (a copy without a source);
- write: one copy of its source into its destination's elements, in its storage's
  memory (a copy into a buffer, whose result is that memory after the write).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from stridec.compiler.outputs import check_write_overlap
from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Rewriter, explicit_copy
from stridec.errors import LayoutError
from stridec.ir import ops as O
from stridec.ir.formats import get_format
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout

__all__ = ["LowerFormats"]


def _natural(rw: Rewriter, v: Value, layout: Layout, dtype: Any) -> Value:
    return explicit_copy(
        rw, v, layout=layout, dtype=dtype, space=v.type.sizes, src=v.type.layout, dst=layout
    )


def _source_over_space(fmt: Any, layout: Layout, space: tuple[int, ...]) -> Layout | None:
    """The operand's layout seen over the format's split space, or None where it has none.

    Blocked formats split C into (C/x, x) with c = co·x + ci, so the strides of the two
    new dims are (x·s_c, s_c). Pitched rows run the last dim over the pitch; the extra
    points are masked and never read. They must still be addresses a layout can hold: with
    a flipped C (s_c = -4, offset 8 for C = 3) the padded channel c = 3 of NCHW4 would be
    at 8 - 3·4 = -4, before the storage starts, so there is no such layout (None).
    """
    s = layout.strides
    if getattr(fmt, "is_blocked", False):
        x = fmt.block
        s = (s[0], x * s[1], s[1]) + s[2:]
    try:
        return Layout(space, s, layout.offset)
    except LayoutError:
        return None


def _physical_over_space(fmt: Any, layout: Layout, space: tuple[int, ...], rank: int) -> Layout:
    """A physical tensor's layout seen over the split space (physical dim j is split dim
    `split_order[j]`)."""
    order = getattr(fmt, "split_order", None)
    if order is None:
        return Layout(space, layout.strides, layout.offset)
    strides = [0] * len(space)
    for j, d in enumerate(order(rank)):
        strides[d] = layout.strides[j]
    return Layout(space, tuple(strides), layout.offset)


def _masks(packing: Any) -> tuple | None:
    return tuple((m.coeffs, m.lo, m.hi) for m in packing.mask) or None


#: How each materializing op class becomes explicit copies: its one resulting value, or
#: None to keep the op (`_lowers` fills it).
_LOWERINGS: dict[type[Op], Callable[[Any, Rewriter], Value | None]] = {}


def _lowers(*classes: type[Op]) -> Callable:
    """Register the lowering of the ops of `classes` (by class, not by subclass)."""

    def register(fn: Callable[[Any, Rewriter], Value | None]) -> Callable[[Any, Rewriter], Value | None]:
        for cls in classes:
            _LOWERINGS[cls] = fn
        return fn

    return register


@_lowers(O.ContiguousOp, O.ToFormatOp, O.CastOp, O.ReshapeOp, O.FlattenOp)
def _lower_regrouping(op: Op, rw: Rewriter) -> Value:
    """A row-major copy (a reshape or flatten that is not a view), a contiguous (in its
    memory format), or a cast into its own (preserve_format) layout; all read the operand
    over its own sizes."""
    v, out_t = op.operands[0], op.result.type
    if isinstance(op, (O.CastOp, O.ContiguousOp)):  # same sizes: into the result's layout
        dst = out_t.layout
    else:
        dst = Layout.contiguous(out_t.sizes).view(v.type.sizes)
        assert dst is not None  # a contiguous layout views any regrouping
    return explicit_copy(
        rw, v, layout=out_t.layout, dtype=out_t.dtype, space=v.type.sizes, src=v.type.layout,
        dst=dst,
    )


@_lowers(O.CloneOp, O.FlipOp)
def _lower_fresh_like(op: O.CloneOp | O.FlipOp, rw: Rewriter) -> Value:
    """Same sizes, into the result's own layout; a flip reads its operand backwards."""
    v, out_t = op.operands[0], op.result.type
    return explicit_copy(
        rw, v, layout=out_t.layout, dtype=out_t.dtype, space=v.type.sizes,
        src=op.source_layout(), dst=out_t.layout,
    )


@_lowers(O.NaturalCopyOp)
def _lower_copy(op: O.NaturalCopyOp, rw: Rewriter) -> Value | None:
    """A natural copy becomes explicit (an explicit one stays)."""
    return _natural(rw, op.operands[0], op.layout, op.dtype)


@_lowers(O.FullOp)
def _lower_full(op: O.FullOp, rw: Rewriter) -> Value:
    """A fill of the result's layout (the operand a `full_like` is like is not read)."""
    layout = op.result.type.layout
    return explicit_copy(
        rw, None, layout=layout, dtype=op.dtype, space=op.sizes, src=None, dst=layout,
        fill=op.value,
    )


@_lowers(O.PixelShuffleOp, O.PixelUnshuffleOp)
def _lower_pixel_shuffle(op: O.PixelShuffleOp, rw: Rewriter) -> Value:
    """One copy over the space (*, C, H, r, W, r); an empty input moves nothing (an empty
    unshuffle keeps its sizes)."""
    v, out_t = op.operands[0], op.result.type
    if not v.type.numel:
        return explicit_copy(rw, v, layout=out_t.layout, dtype=out_t.dtype, space=out_t.sizes,
                             src=Layout.contiguous(out_t.sizes), dst=out_t.layout)
    src, dst = op.source_and_destination()
    return explicit_copy(rw, v, layout=out_t.layout, dtype=out_t.dtype, space=op.space(),
                         src=src, dst=dst)


@_lowers(O.PackOp)
def _lower_pack(op: O.PackOp, rw: Rewriter) -> Value:
    v, out_t = op.operands[0], op.result.type
    fmt = get_format(op.format)
    p = fmt.packing(v.type.sizes, v.type.dtype, op.fill)
    masks = _masks(p)
    src = _source_over_space(fmt, v.type.layout, p.space)
    if src is None:  # read the operand from a row-major copy of it instead
        v = _natural(rw, v, Layout.contiguous(v.type.sizes), v.type.dtype)
        src = _source_over_space(fmt, v.type.layout, p.space)
    return explicit_copy(
        rw, v, layout=out_t.layout, dtype=out_t.dtype, space=p.space, src=src, dst=p.physical,
        masks=masks, fill=op.fill if masks else None,
    )


@_lowers(O.UnpackOp)
def _lower_unpack(op: O.UnpackOp, rw: Rewriter) -> Value:
    v, out_t = op.operands[0], op.result.type
    fmt = get_format(op.format)
    p = fmt.unpacking(out_t.sizes, out_t.dtype)
    return explicit_copy(
        rw, v, layout=out_t.layout, dtype=out_t.dtype, space=p.space,
        src=_physical_over_space(fmt, v.type.layout, p.space, out_t.rank), dst=p.logical,
        masks=_masks(p), fill=None,
    )


@_lowers(O.PadOp)
def _lower_pad(op: O.PadOp, rw: Rewriter) -> Value:
    """F.pad: out[o] = in[o - before] inside the kept region, `value` elsewhere.

    Per padded dim d with (before b, after a) and input size n, the kept input range is
    [max(0, -b), min(n, n + a)) and lands at [max(0, -b) + b, min(n, n + a) + b).
    """
    v = op.operands[0]
    out_t = op.result.type
    layout = out_t.layout
    src, dst = v.type.layout, layout
    pad = op.pad
    rank = out_t.rank
    for k in range(len(pad) // 2):
        d = rank - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        n = v.type.sizes[d]
        lo, hi = max(0, -before), min(n, n + after)
        hi = max(lo, hi)
        src = src.slice(d, lo, hi, 1)
        dst = dst.slice(d, lo + before, hi + before, 1)
    buffer = None
    if any(p > 0 for p in pad):
        buffer = explicit_copy(
            rw,
            None,
            layout=layout,
            dtype=out_t.dtype,
            space=out_t.sizes,
            src=None,
            dst=layout,
            fill=op.value,
        )
        if src.numel == 0:
            return buffer
    return explicit_copy(
        rw, v, layout=layout, dtype=out_t.dtype, space=src.sizes, src=src, dst=dst, into=buffer
    )


@_lowers(O.CatOp)
def _lower_cat(op: O.CatOp, rw: Rewriter) -> Value:
    """torch.cat: input k is written into the slice [start_k, start_k + n_k) of `dim`."""
    out_t = op.result.type
    layout = out_t.layout
    dim = op.dim % out_t.rank
    buffer: Value | None = None
    start = 0
    for v in op.operands:
        n = v.type.sizes[dim]
        if n == 0 and buffer is not None:
            continue
        dst = layout.slice(dim, start, start + n, 1)
        buffer = explicit_copy(
            rw,
            v,
            layout=layout,
            dtype=out_t.dtype,
            space=v.type.sizes,
            src=v.type.layout,
            dst=dst,
            into=buffer,
        )
        start += n
    assert buffer is not None
    return buffer


@_lowers(O.WriteOp)
def _lower_write(op: O.WriteOp, rw: Rewriter) -> Value:
    """One copy of `src` into the elements `dest` addresses, in `storage`'s memory (a copy
    into a buffer, as a cat's): a call's argument is written in place. A source that reads
    that memory where the write writes, other than element for element, is refused as
    torch refuses it (`x[1:] = x[:-1]`)."""
    storage, dest, src = op.operands
    if src.root() is storage and dest.type.numel and src.type.numel:
        check_write_overlap(dest.type.layout, src.type.layout)
    return explicit_copy(
        rw, src, layout=storage.type.layout, dtype=storage.type.dtype, space=dest.type.sizes,
        src=src.type.layout, dst=dest.type.layout, into=storage,
    )


@register_pass
class LowerFormats(Pass):
    """Make every materialization an explicit strided copy (or a fill)."""

    name: ClassVar[str] = "lower-formats"

    def run(self, graph: Graph) -> None:
        rw = Rewriter(graph)
        for op in graph.ops:
            fn = _LOWERINGS.get(type(op))
            if fn is not None and not op.aliases_operand():
                value = fn(op, rw)
                if value is not None:
                    rw.replace(op, [value])
                    continue
            rw.keep(op)
        graph.set_ops(rw.ops)
