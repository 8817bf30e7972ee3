"""Copy fusion: a copy that reads another copy's buffer reads its source instead (the
rewrites of the `fuse-copies` pass, which `plan-memory` applies to the copies it adds).

    %1 = strided_copy %x {space = [2, 4, 5, 3], src = strided<[60, 5, 1, 20], offset: 0>,
                  dst = strided<[60, 15, 3, 1], offset: 0>}  (x.permute(0, 2, 3, 1).contiguous())
    %2 = strided_copy %1 {space = [2, 3, 4, 5], src = strided<[60, 1, 15, 3], offset: 0>,
                  dst = strided<[60, 20, 5, 1], offset: 0>}  (.permute(0, 3, 1, 2).contiguous())
  → %2 = strided_copy %x {space = [2, 3, 4, 5], src = strided<[60, 20, 5, 1], offset: 0>,
                  dst = strided<[60, 20, 5, 1], offset: 0>}

The consumer's `src` addresses the producer's buffer; composing it with the producer's
`dst`⁻¹ and `src` (`stridec.ir.index_maps.compose`) gives the producer's source
address of every consumer point, as a strided layout — possibly over a refined space
where a consumer dim is split in two. The producer, once unused, goes with `dce`.

It does not fuse when: both copies cast (f32 → f16 → f32 is not f32 → f32); the
producer's fill mask cannot be carried over exactly; no strided composition exists; or
the producer's source is written over in place after it, directly or through a view
(`x.t().contiguous()` read after `x.copy_(y)`: the consumer would read the new values).
The same holds for every rewrite here: a read never moves past a write of the memory it
reads (a cut reader's pieces read its writers' sources where it runs), and a write never
moves ahead of a read (a generator placed into an input that other ops read stays).

A buffer several copies wrote -- a `cat`'s one copy per input, each into a slice; a
`pad`'s fill and its copy of the kept box -- has no single producer to compose with. Its
reader is cut instead (`plan_assembled`): into one copy per writer and box of the
reader's space where it reads that writer, each from the writer's own source, in the
writers' order, all writing boxes of the reader's result; where it reads a fill (the
pad's, or its own masked points, a pack's padded channels), a fill. With x (1, 2, 2, 3)
and y (1, 4, 2, 3), ``cat([x, y], 1).permute(0, 2, 3, 1).contiguous()``:

    %0 = strided_copy %x {space = [1, 2, 2, 3], dst = strided<[36, 6, 3, 1], offset: 0>, …}
    %1 = strided_copy %y, %0 {space = [1, 4, 2, 3], dst = strided<[36, 6, 3, 1], offset: 12>, …}
    %2 = strided_copy %1 {space = [1, 2, 3, 6], src = strided<[36, 3, 1, 6], offset: 0>,
                  dst = strided<[36, 18, 6, 1], offset: 0>}
  → %2 = strided_copy %x {space = [1, 2, 3, 2], src = strided<[0, 3, 1, 6], offset: 0>,
                  dst = strided<[36, 18, 6, 1], offset: 0>}                (channels 0..1)
    %3 = strided_copy %y, %2 {space = [1, 2, 3, 4], src = strided<[0, 3, 1, 6], offset: 0>,
                  dst = strided<[36, 18, 6, 1], offset: 2>}                (channels 2..5)

Disjoint boxes of one buffer: `lower_to_program` runs them as one kernel. A fill can only
start a buffer (a copy without operands makes a new one), so the fills go first, as one
fill of the box spanning them; when the reader writes into a buffer (a cat's later copy),
to the start of that buffer (`_hoist`), or, where no copy starts it (a caller's `out`),
onto the pieces as frames (`_framed`). `merge-fills` then cuts a fill around the copies
into it, one part each. A reader that reads the buffer across its dims (a view merging
the cat dim with another) is split first (`_refined`). It does not cut the reader when:
the buffer is also returned, viewed or written into; the reader's space splits or merges
its result's dims (a reshape's, an unpack's); a writer's region is not a box of the
buffer; a writer's source is written over in place after it; a writer and the reader
both cast; the fills differ in value; or more than `MAX_PIECES` pieces result.

A reader of one copy's buffer that no strided map reads, even split, is cut into boxes
that each compose (`fuse_in_pieces`, `index_maps.compose_pieces`): Swin's window_reverse
read by a roll.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stridec.compiler.rewriting import Rewriter, overwritten
from stridec.errors import StridecError
from stridec.ir import ops as O
from stridec.ir.affine import Box, MaskBound, box_inside, boxes_disjoint, guillotine
from stridec.ir.dtypes import DType, convert
from stridec.ir.graph import Op, Value
from stridec.ir.index_maps import (
    box_of,
    compose,
    compose_mask,
    compose_pieces,
    image_box,
    refine,
    restrict,
    split_box,
)
from stridec.ir.layout import Layout
from stridec.ir.symbols import UndecidedError

__all__ = [
    "Assembly",
    "apply_assembly",
    "fuse",
    "fuse_in_pieces",
    "fuse_into_generator",
    "fuse_with_writers",
    "new_copy",
    "new_op",
    "plan_assembled",
]


def refine_coeffs(coeffs: Sequence[int], split: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """A linear form over Q seen over Q': factor sizes (f1, f2, f3) of a dim with
    coefficient c get coefficients (f2·f3·c, f3·c, c)."""
    out: list[int] = []
    for c, factors in zip(coeffs, split, strict=False):
        inner = 1
        scaled = []
        for f in reversed(factors):
            scaled.append(c * inner)
            inner *= f
        out.extend(reversed(scaled))
    return tuple(out)


def _canonical(mask: tuple, sizes: Sequence[int]) -> tuple:
    """A mask with the coefficients of size-1 dims zeroed (their coordinate is always 0),
    so that equal constraints compare equal."""
    coeffs, lo, hi = mask
    return tuple(0 if n == 1 else c for c, n in zip(coeffs, sizes, strict=False)), lo, hi


def _explicit(op: Op) -> bool:
    """An explicit copy without a frame: a framed one (`merge-fills`) also fills around its
    box, which neither a reader composed with it nor its pieces would carry over."""
    return isinstance(op, O.ExplicitCopyOp) and not isinstance(op, O.FramedCopyOp)


def _stored(fill: float | int | bool, stored: DType, read: DType) -> float | int | bool:
    """`fill` as a producer storing `stored` writes it, read back as `read`: the fill
    0.1 of an f32 pack, cast to f64 by its consumer, is 0.10000000149011612, not 0.1."""
    return convert(convert(fill, stored), read)


def _valid_box(sizes: Sequence[int], masks: Sequence[tuple]) -> list[tuple[int, int]] | None:
    """The box of points where every mask holds, when each mask bounds a single dim.

    A mask `lo <= c·i_k < hi` (c > 0, other coefficients 0 or on size-1 dims) keeps
    `ceil(lo/c) <= i_k < ceil(hi/c)`. NCHW4 with C = 3 has one channel block (co = 0), so
    `0 <= 4·co + ci < 3` bounds ci alone: the box is ci in [0, 3).
    """
    box = [(0, n) for n in sizes]
    for coeffs, lo, hi in masks:
        dims = [k for k, c in enumerate(coeffs) if c != 0 and sizes[k] != 1]
        if len(dims) != 1 or coeffs[dims[0]] < 0:
            return None
        k = dims[0]
        c = coeffs[k]
        start, stop = -(-lo // c), -(-hi // c)
        box[k] = (max(box[k][0], start), min(box[k][1], stop))
        if box[k][0] >= box[k][1]:
            return None
    return box


def _one_affine_map(
    rank: int, reads: Sequence[tuple[Box, Layout]]
) -> tuple[list[int], int] | None:
    """(strides, offset) of the one strided map over a space of `rank` dims that agrees
    with each `(box, read)` -- `read` the map on `box`, over the box's own coordinates
    -- or None when no such map exists.

    A dim that moves in some box takes that box's stride; a dim that moves in none takes
    what the boxes' starts imply: with reads starting at `o_b` at box starts `s_b`,
    ``o_b - o_0 = Σ_k a_k·(s_b,k - s_0,k)`` for each box b, solved one unknown at a time.
    NCHW4 of C = 5 over (co, ci): box (co 0, ci 0..3) reads channel ci at stride 12, box
    (co 1, ci 0) reads channel 4 at offset 48: 48 - 0 = a_co·1, so a_co = 48. A dim no
    equation determines (its coordinate the same in every box) is 0. Every box is then
    checked against the map: its start and each of its moving strides.
    """
    strides: list[int | None] = [None] * rank
    for box, read in reads:
        for k, ((lo, hi), st) in enumerate(zip(box, read.strides, strict=True)):
            if hi - lo > 1:
                if strides[k] is None:
                    strides[k] = st
                elif strides[k] != st:
                    return None
    (box0, read0), rest = reads[0], reads[1:]
    pending = list(rest)
    while pending:
        left = []
        for box, read in pending:
            residual = read.offset - read0.offset
            unknown = []
            for k in range(rank):
                delta = box[k][0] - box0[k][0]
                if delta == 0:
                    continue
                if strides[k] is None:
                    unknown.append((k, delta))
                else:
                    residual -= strides[k] * delta
            if len(unknown) == 1:
                k, delta = unknown[0]
                if residual % delta:
                    return None
                strides[k] = residual // delta
            elif len(unknown) > 1:
                left.append((box, read))
        if len(left) == len(pending):
            break  # several unknowns in every equation left: fixed at 0 below
        pending = left
    known = [0 if st is None else st for st in strides]
    offset = read0.offset - sum(lo * st for (lo, _), st in zip(box0, known, strict=True))
    for box, read in reads:
        start = offset + sum(lo * st for (lo, _), st in zip(box, known, strict=True))
        if start != read.offset:
            return None
    return known, offset


def _fuse_over_valid_box(consumer: Op, producer: Op) -> dict | None:
    """Fuse a masked consumer whose masked points read past the producer's buffer.

    Padded packing reads channel C (and up) of a C-channel buffer at its masked points:
    no composition covers those addresses. The space is cut into boxes where the masks
    hold or fail (`split_box`); composing each valid box gives an affine source map on
    it, and where one strided map agrees with all of them (`_one_affine_map`), that map
    over the whole space is exact on the valid points, and the masked points are never
    read. With C = 5, NCHW4's blocks are (co 0, ci 0..3) and (co 1, ci 0): a cast or a
    transpose before the pack fuses into it as with C = 8. Only without refinement and
    without producer masks.
    """
    if not consumer.masks or consumer.fill is None or producer.masks:
        return None
    space = consumer.space
    bounds = [MaskBound(c, lo, hi) for c, lo, hi in consumer.masks]
    split = split_box(tuple((0, n) for n in space), bounds, MAX_CELLS)
    if split is None or not split[0]:
        return None
    reads = []
    for box in split[0]:
        comp = compose(restrict(consumer.src, box), producer.dst, producer.src)
        if comp is None or comp.is_refined:
            return None
        reads.append((box, comp.src))
    found = _one_affine_map(len(space), reads)
    if found is None:
        return None
    strides, offset = found
    try:
        src = Layout(space, tuple(strides), offset)
    except StridecError:  # the extension would address before the storage's start
        return None
    return {
        "layout": consumer.layout,
        "space": space,
        "src": src,
        "dst": consumer.dst,
        "masks": consumer.masks,
        "fill": consumer.fill,
    }


def fuse(consumer: Op, producer: Op) -> tuple[list, dict] | str:
    """Operands and attributes of the fused copy, or the reason it cannot be fused."""
    if not (
        _explicit(consumer)
        and _explicit(producer)
    ):
        return "not two explicit copies"
    if len(producer.operands) != 1:
        return "the producer is a fill or writes into another buffer"
    source = producer.operands[0]
    if overwritten(source):
        # The consumer would read the source where it runs, after the write.
        return "the producer's source is written over in place after it"
    d0, d1, d2 = source.type.dtype, producer.dtype, consumer.dtype
    if d0 != d1 and d1 != d2:
        return f"both copies cast ({d0} → {d1} → {d2})"
    comp = compose(consumer.src, producer.dst, producer.src)
    if comp is None:
        boxed = _fuse_over_valid_box(consumer, producer)
        if boxed is None:
            return "no strided composition of the two index maps"
        return [source] + list(consumer.operands[1:]), {**boxed, "dtype": d2 if d0 == d1 else d1}
    c_masks = tuple(
        _canonical((refine_coeffs(c, comp.split), lo, hi), comp.sizes)
        for c, lo, hi in consumer.masks or ()
    )
    p_masks = tuple(
        _canonical(compose_mask(c, lo, hi, comp), comp.sizes)
        for c, lo, hi in producer.masks or ()
    )
    masks, fill = c_masks, consumer.fill
    if p_masks:
        if producer.fill is None:
            # The producer left those points unwritten: the consumer's value there is
            # unspecified, so restricting (or filling) them is as good and reads nothing.
            masks = c_masks + tuple(m for m in p_masks if m not in c_masks)
        elif not c_masks:
            masks, fill = p_masks, _stored(producer.fill, d1, d2)
        elif all(m in c_masks for m in p_masks):
            masks = c_masks
        else:
            return "the producer's fill mask is not implied by the consumer's"
    operands = [source] + list(consumer.operands[1:])
    attrs = {
        "layout": consumer.layout,
        "dtype": d2 if d0 == d1 else d1,
        "space": comp.sizes,
        "src": comp.src,
        "dst": refine(consumer.dst, comp.split),
        "masks": masks or None,
        "fill": fill if masks else None,
    }
    return operands, attrs


def fuse_into_generator(consumer: Op, producer: Op) -> tuple[list, dict] | str:
    """Attributes of a Philox op that writes its values where `consumer` would copy them.

    The generator's natural output is contiguous: logical index i lives at address i. So
    composing the consumer's `src` with that writer gives, at every consumer point, the
    logical index to generate (`index`), and the consumer's `dst` says where it goes:

        %b, %s1 = philox %s {sizes = [2, 3, 4, 5]}
        %p = masked_copy %b {space = [2, 1, 4, 4, 5], src = strided<[60, 80, 20, 5, 1]>, …}  (NCHW4)
      → %p, %s1 = philox %s {sizes = [2, 3, 4, 5], space = [2, 1, 4, 4, 5],
                             index = strided<[60, 80, 20, 5, 1]>, dst = …, masks = …}
    """
    if not (_explicit(consumer)) or not isinstance(
        producer, (O.PhiloxOp, O.PhiloxUniformOp)
    ):
        return "not a copy of Philox values"
    if producer.space is not None:
        return "the generator is already placed"
    values = producer.results[0]
    if consumer.operands[0] is not values:
        return "the copy reads the new state, not the values"
    if any(user is not consumer for user, _ in values.uses):
        return "the values have other users"
    if consumer.dtype != values.type.dtype:
        return "the copy casts"
    if len(consumer.operands) == 2 and not isinstance(consumer.operands[1].owner, O.InputOp):
        # A caller's `out` storage (an input) is written by this copy alone; a buffer that
        # other copies write (a cat's) keeps its copies.
        return "the copy writes into a buffer other copies write"
    if len(consumer.operands) == 2 and any(
        user is not consumer for user, _ in consumer.operands[1].uses
    ):
        # The write moves up to the generator: past the ops between that read the input.
        return "the input written into is also read (the write cannot move ahead of it)"
    if consumer.masks and consumer.fill is None:
        return "the copy restricts its domain"
    # The natural output is contiguous at offset 0: the address the consumer reads *is* the
    # logical index, also at masked points (which are never generated).
    attrs = dict(producer.attrs)
    attrs.update(
        layout=consumer.layout,
        space=consumer.space,
        index=consumer.src,
        dst=consumer.dst,
        masks=consumer.masks,
        fill=consumer.fill,
    )
    return [*producer.operands, *consumer.operands[1:]], attrs


# ------------------------------------------------------------ buffers assembled by copies

#: Most copies one consumer of an assembled buffer may become. With its fill, that is one
#: batch kernel (`lower_to_program` runs up to 32 copies into one buffer as one launch).
MAX_PIECES = 31
#: Most boxes the consumer's space may be cut into on the way.
MAX_CELLS = 64


@dataclass(frozen=True, slots=True)
class _Aligned:
    """A copy seen over the dims of its result layout, in their order (`_align`): `src`
    and `dst` over `sizes`, `dst` a box of the layout (or, refined by `_refined`, of the
    layout with some dims split), `masks` over `sizes` too."""

    sizes: tuple[int, ...]
    src: Layout
    dst: Layout
    masks: tuple


def _refined(aligned: _Aligned, split: Sequence[Sequence[int]]) -> _Aligned:
    """`aligned` with its dims split into `split`'s factors: the same copy over a finer
    space (a reader of a (B, H, W, C) cat through a view (B, H·W, C) walks H·W as
    (H, W)), so that it reads the buffer's coordinates affinely."""
    src, dst = refine(aligned.src, split), refine(aligned.dst, split)
    masks = tuple((refine_coeffs(c, split), lo, hi) for c, lo, hi in aligned.masks)
    return _Aligned(src.sizes, src, dst, masks)


def _align(op: Op) -> _Aligned | None:
    """`op`'s space reordered so that dim m walks dim m of its result layout.

    Every dim of the space that moves (size > 1) must write along one dim of the layout,
    with its stride; dims of size 1 go, and layout dims no space dim walks get size 1.
    NCHW4 walks (N, C/4, 4, H, W) with dst strides (80, 80, 1, 20, 4) into the layout
    (N, C/4, H, W, 4) of strides (80, 80, 20, 4, 1): the space becomes (N, C/4, H, W, 4).
    Then the pieces the consumer becomes write boxes of the layout, dim for dim, which is
    what `lower_to_program` batches into one kernel. ``None`` otherwise (a copy whose space
    splits or merges the layout's dims, such as a reshape's, or an empty one). A domain
    restriction to a box (`unpack` of C = 3 from NCHW4 walks 4 channels, writing 3) is
    that box first.
    """
    out: Layout = op.layout
    space, src, dst, masks = op.space, op.src, op.dst, op.masks or ()
    valid = _valid_box(space, masks) if masks and op.fill is None else None
    if valid is not None:  # a domain restriction to a box (unpack): the box is the space
        try:
            src, dst = restrict(src, valid), restrict(dst, valid)
        except StridecError:
            return None
        space, masks = src.sizes, ()
    if math.prod(space) == 0:
        return None
    walks: dict[int, int] = {}  # layout dim -> space dim
    for k, n in enumerate(space):
        if n == 1:
            continue
        dims = [m for m in range(out.rank) if out.sizes[m] > 1 and out.strides[m] == dst.strides[k]]
        if len(dims) != 1 or dims[0] in walks:
            return None
        walks[dims[0]] = k

    def over(values: Sequence[int], rest: int) -> tuple[int, ...]:
        return tuple(values[walks[m]] if m in walks else rest for m in range(out.rank))

    sizes = over(space, 1)
    try:
        new_src = Layout(sizes, over(src.strides, 0), src.offset)
        new_dst = Layout(sizes, out.strides, dst.offset)
    except StridecError:
        return None
    if box_of(new_dst, out) is None:
        return None
    masks = tuple((over(c, 0), lo, hi) for c, lo, hi in masks)
    return _Aligned(sizes, new_src, new_dst, masks)


def _writers(value: Value) -> list[Op] | None:
    """The explicit copies that wrote `value`'s buffer, first first: the last one made
    `value`, each earlier one the buffer the next writes into (its only use). ``None``
    when some op on the way is not an explicit copy."""
    chain = []
    op = value.owner
    while True:
        if not (_explicit(op)):
            return None
        chain.append(op)
        if len(op.operands) != 2:
            break
        into = op.operands[1]
        if len(into.uses) != 1:
            return None
        op = into.owner
    chain.reverse()
    return chain


def _is_fill(op: Op) -> bool:
    return isinstance(op, O.FillOp)


def _key(value: float | int | bool) -> tuple[type, str]:
    """Fill values compared by what is stored: -0.0 is not 0.0, every NaN is NaN."""
    return type(value), repr(value)


def _bbox(boxes: Sequence[Box]) -> Box:
    return tuple(
        (min(b[k][0] for b in boxes), max(b[k][1] for b in boxes)) for k in range(len(boxes[0]))
    )


@dataclass
class Assembly:
    """What a copy reading an assembled buffer becomes (`plan_assembled`).

    - `pieces`: (source, attributes) of one copy per writer and box of the consumer's
      space, in the writers' order, each into the previous one's buffer;
    - `fill`: (where, value) to fill before them, or None: `where` the fill's `dst`
      over its own space (a box of the result layout, or of the consumer's space refined);
    - `into`: the buffer the consumer wrote into (None: a new buffer);
    - `hoist`: where the fill goes when `into` is given: "extend" the fill that starts
      `into`'s buffer, or "insert" one before its first writer; "new" otherwise.
    """

    pieces: list[tuple[Value, dict]]
    fill: tuple[Layout, float | int | bool] | None
    into: Value | None
    hoist: str
    first: Op | None = None  # the first writer of `into`'s buffer, for the hoist


def _pieces(
    consumer: Op, aligned: _Aligned, writer: Op, cell: Box
) -> list[tuple[Box, dict]] | str:
    """The copies doing `consumer`'s work over `cell` straight from `writer`'s source,
    each with its box of the consumer's space.

    The consumer reads there only addresses `writer` wrote, so composing its read with
    the writer's `dst`⁻¹ and `src` is the writer's source address (as in `fuse`); where
    no one composition covers the cell, it is cut where the read crosses the writer's
    coordinates (`compose_pieces`). The writer's masks (and the fill it stored, read back
    in the consumer's dtype) go along.
    """
    d0, d1 = writer.operands[0].type.dtype, writer.dtype
    d2 = consumer.dtype
    if d0 != d1 and d1 != d2:
        return f"both copies cast ({d0} → {d1} → {d2})"
    reader = restrict(aligned.src, cell)
    comp = compose(reader, writer.dst, writer.src)
    parts = [(tuple((0, n) for n in reader.sizes), comp)] if comp is not None else (
        compose_pieces(reader, writer.dst, writer.src, MAX_PIECES)
    )
    if parts is None:
        return "a piece does not read its writer's source through strided layouts"
    out = []
    for box, comp in parts:
        masks = tuple(
            _canonical(compose_mask(c, lo, hi, comp), comp.sizes)
            for c, lo, hi in writer.masks or ()
        )
        at = tuple((c0 + lo, c0 + hi) for (c0, _), (lo, hi) in zip(cell, box, strict=True))
        out.append((at, {
            "layout": consumer.layout,
            "dtype": d2,
            "space": comp.sizes,
            "src": comp.src,
            "dst": refine(restrict(aligned.dst, at), comp.split),
            "masks": masks or None,
            "fill": _stored(writer.fill, d1, d2) if masks else None,
        }))  # fmt: skip
    return out


def _cells_per_writer(
    aligned: _Aligned, valid: Sequence[Box], layout: Layout, boxes: Sequence[Box]
) -> list[list[Box]] | str:
    """For each writer, the boxes of the consumer's space where it reads what that writer
    wrote. On each valid cell the consumer reads the buffer's coordinates as an affine map
    ``u_m = base_m + Σ_k c_mk·(j_k - cell_k)`` (compose with the buffer's own layout), so
    the writer's box ``lo_m <= u_m < hi_m`` is a set of bounds for `split_box`."""
    cells: list[list[Box]] = [[] for _ in boxes]
    whole = Layout.contiguous(layout.sizes)
    for cell in valid:
        read = compose(restrict(aligned.src, cell), layout, whole)
        if read is None or read.is_refined:
            return "the consumer does not read the buffer's coordinates affinely"
        starts = [lo for lo, _ in cell]
        for j, box in enumerate(boxes):
            bounds = [
                MaskBound(row, lo, hi).shifted(
                    base - sum(c * s for c, s in zip(row, starts, strict=True))
                )
                for row, base, (lo, hi) in zip(read.coord_map, read.coord_base, box, strict=True)
            ]
            parts = split_box(cell, bounds, MAX_CELLS)
            if parts is None:
                return "a writer's region cuts the consumer's space into too many boxes"
            cells[j].extend(parts[0])
    return cells


def _hoist(
    into: Value, out: Layout, where: Layout, value: float | int | bool, dtype: DType
) -> tuple[str, Op, Layout] | str:
    """Where the fill of `where` goes when the consumer writes into `into`'s buffer.

    No copy can fill part of an existing buffer, so the fill moves to the start of that
    buffer: it extends the fill that starts it ("extend", to the box spanning both; same
    value), or a new fill is inserted before its first writer ("insert"). Either way the
    fill then runs before the writers the buffer had before the consumer, so none of
    them may write into its box (it would survive where the consumer wrote the fill).
    Points the wider box covers besides are written later, or by nobody. Returns the
    fill's `dst`, a box of `out`.
    """
    box = image_box(where, out)
    if box is None:
        return "the fill is not a box of the result layout"
    chain = _writers(into)
    if chain is None:
        return "the buffer written into is not assembled by copies alone"
    first = chain[0]
    rest, spanned, how = chain, box, "insert"
    if _is_fill(first):
        if _key(_stored(first.fill, dtype, dtype)) != _key(value):
            return "the buffer written into starts with a fill of another value"
        start = image_box(first.dst, out)
        if start is None:
            return "the buffer's fill is not a box"
        rest, spanned, how = chain[1:], _bbox([start, box]), "extend"
    for w in rest:
        written = image_box(w.dst, out)
        if written is None or not boxes_disjoint(written, box):
            return "an earlier writer of the buffer written into meets the fill"
    return how, first, restrict(out, spanned)


def plan_assembled(consumer: Op) -> Assembly | str:
    """How a copy that reads a buffer written by several copies (a `cat`'s, a `pad`'s fill
    and box copy) reads their sources instead, or why it cannot.

    The consumer's space is cut into boxes (`split_box`): by its masks (boxes where every
    mask holds; where one fails everywhere, its fill), then, per writer, by that writer's
    box of the buffer, seen through the consumer's read. Each box where a writer's data is
    read becomes a piece: a copy from the writer's source (`_piece`); where a fill writer
    is read, the fill. Pieces keep the writers' order, so a later writer still wins where
    two wrote (the pad's box copy over its fill), and since the consumer writes each point
    once, the result holds what it held before at every point it wrote. Fills go first,
    in one box (`_hoist`), which is right because only the first writer can be a fill.
    """
    if not (_explicit(consumer)) or not consumer.operands:
        return "not an explicit copy of a buffer"
    buffer = consumer.operands[0]
    writers = _writers(buffer)
    if writers is None:
        return "the buffer is not assembled by copies alone"
    if len(writers) == 1 and not _is_fill(writers[0]):
        return "one copy writes the whole buffer (see `fuse`)"
    if any(
        not (_explicit(user)) or i != 0 for user, i in buffer.uses
    ):
        return "the buffer is also returned, viewed or written into: it stays anyway"
    aligned = _align(consumer)
    if aligned is None:
        return "the consumer does not write a box of its layout, dim for dim"
    into = consumer.operands[1] if len(consumer.operands) == 2 else None
    if into is not None and (len(into.uses) != 1 or any(w.result is into for w in writers)):
        return "the buffer written into is shared, or is the buffer read"
    layout: Layout = writers[0].layout
    read = compose(aligned.src, layout, Layout.contiguous(layout.sizes))
    if read is not None and read.is_refined:
        aligned = _refined(aligned, read.split)
    d1, d2 = writers[0].dtype, consumer.dtype
    full = tuple((0, n) for n in aligned.sizes)
    split = split_box(full, [MaskBound(c, lo, hi) for c, lo, hi in aligned.masks], MAX_CELLS)
    if split is None:
        return "the consumer's masks cut its space into too many boxes"
    valid, masked = split
    fills: list[tuple[Box, float | int | bool]] = []
    if consumer.fill is not None:
        value = _stored(consumer.fill, d2, d2)
        fills += [(cell, value) for cell in masked]
    boxes = []
    for w in writers:
        if w.masks and w.fill is None:
            return "a writer leaves masked points unwritten"
        if not _is_fill(w) and overwritten(w.operands[0]):
            # Its piece would read the source where the consumer runs, after the write.
            return "a writer's source is written over in place after it"
        box = image_box(w.dst, layout)
        if box is None:
            return "a writer's region is not a box of the buffer"
        boxes.append(box)
    cells = _cells_per_writer(aligned, valid, layout, boxes)
    if isinstance(cells, str):
        return cells
    pieces: list[tuple[Value, dict]] = []
    piece_cells: list[Box] = []
    for w, where in zip(writers, cells, strict=True):
        for cell in where:
            if _is_fill(w):
                fills.append((cell, _stored(w.fill, d1, d2)))
                continue
            found = _pieces(consumer, aligned, w, cell)
            if isinstance(found, str):
                return found
            for at, attrs in found:
                pieces.append((w.operands[0], attrs))
                piece_cells.append(at)
    if len(pieces) > MAX_PIECES:
        return f"{len(pieces)} pieces, more than one kernel runs ({MAX_PIECES})"
    if not pieces and not fills:
        return "the consumer reads nothing the writers wrote"
    if len({_key(v) for _, v in fills}) > 1:
        return "fills of different values"
    if not fills:
        return Assembly(pieces, None, into, "new")
    region = _bbox([cell for cell, _ in fills])
    where = restrict(aligned.dst, region)
    value = fills[0][1]
    if into is None:
        return Assembly(pieces, (where, value), None, "new")
    hoisted = _hoist(into, consumer.layout, where, value, d2)
    if isinstance(hoisted, str):
        framed = _framed(pieces, piece_cells, region, value)
        return hoisted if framed is None else Assembly(framed, None, into, "new")
    how, first, where = hoisted
    return Assembly(pieces, (where, value), into, how, first)


def _framed(
    pieces: list[tuple[Value, dict]], cells: Sequence[Box], region: Box,
    value: float | int | bool,
) -> list[tuple[Value, dict]] | None:
    """The pieces with the fill of `region` (a box of their space) carried as frames, as
    `merge-fills` frames a pad's copy: where the fill cannot go first, because the
    consumer writes into memory no copy started (a caller's `out`). The pieces inside
    `region` cut it by planes into one part each (`guillotine`) and write the fill on
    their part around their cell; the others must miss it. None where they cannot: a
    piece across the region's edge, no planes between them, a part with no piece (a
    fill alone), or a piece whose masked points hold another fill."""
    inside = [j for j, cell in enumerate(cells) if box_inside(cell, region)]
    if not inside or any(
        j not in inside and not boxes_disjoint(cell, region) for j, cell in enumerate(cells)
    ):
        return None
    for j in inside:
        attrs = pieces[j][1]
        if len(attrs["space"]) != len(region):  # a frame is per dim of the piece's space
            return None
        if attrs["masks"] and attrs["fill"] is not None and _key(attrs["fill"]) != _key(value):
            return None
    try:
        parts = guillotine(region, inside, cells)
    except UndecidedError:
        return None
    if parts is None:
        return None
    out = list(pieces)
    for part, j in parts:
        frame = tuple(
            (lo - p_lo, p_hi - hi) for (p_lo, p_hi), (lo, hi) in zip(part, cells[j], strict=True)
        )
        source, attrs = pieces[j]
        out[j] = (source, {**attrs, "fill": value, "frame": frame})
    return out


def new_op(rw: Rewriter, cls: type[Op], operands: list[Value], attrs: dict) -> Op:
    """A new op of `rw`'s graph, placed in `rw.ops` by the caller."""
    op = cls(operands, attrs)
    op.graph = rw.graph
    return op


def new_copy(rw: Rewriter, operands: list[Value], attrs: dict) -> Op:
    """A new explicit copy of `rw`'s graph, of the type its computed masks and frame call
    for (`copy_type`), placed in `rw.ops` by the caller."""
    op = O.explicit_copy_op(operands, attrs)
    op.graph = rw.graph
    return op


def _index(ops: list[Op], op: Op) -> int:
    return next(i for i, o in enumerate(ops) if o is op)


def apply_assembly(
    consumer: O.CopyOp, plan: Assembly, rw: Rewriter, generators: dict[int, int]
) -> None:
    """Put `plan`'s fill and pieces where `consumer` (the last of `rw.ops`) was."""
    ops = rw.ops
    ops.pop()
    out: Layout = consumer.layout
    target = plan.into
    if plan.fill is not None:
        where, value = plan.fill
        fill = new_op(rw, O.FillOp, [], {
            "layout": out,
            "dtype": consumer.dtype,
            "space": where.sizes,
            "dst": where,
            "fill": value,
        })  # fmt: skip
        first = plan.first
        if plan.hoist == "new":
            ops.append(fill)
            target = fill.result
        elif plan.hoist == "extend":
            assert first is not None
            ops[_index(ops, first)] = fill
            rw.replace(first, fill.results)
            target = fill.result if target is first.result else target
        else:  # "insert": the buffer's first writer now writes into the fill
            assert first is not None
            index = _index(ops, first)
            writer = new_op(rw, type(first), [first.operands[0], fill.result], dict(first.attrs))
            ops[index] = writer
            ops.insert(index, fill)
            for key, at in generators.items():
                if at >= index:
                    generators[key] = at + 1
            rw.replace(first, writer.results)
            target = writer.result if target is first.result else target
    for source, attrs in plan.pieces:
        piece = new_copy(rw, [source] + ([target] if target is not None else []), attrs)
        ops.append(piece)
        target = piece.result
    assert target is not None
    rw.replace(consumer, [target])


def fuse_in_pieces(consumer: Op, producer: Op) -> Assembly | str:
    """The consumer cut into copies from the producer's source where it reads the
    producer's buffer across its coordinates at places no split follows
    (`compose_pieces`): Swin's window_reverse then a roll reads rows 0..10 of windows of
    7 rows as rows 0..6 of one window and rows 0..3 of the next. Each piece writes a box
    of the consumer's result, all disjoint, so they run as one batched kernel, as the
    consumer alone would. Only where the producer has no other reader (its copy then
    goes), without masks on either side, and while every piece writes a box of the
    result layout."""
    if not (_explicit(consumer) and _explicit(producer)) or len(producer.operands) != 1:
        return "not two explicit copies from a source"
    if len(producer.result.uses) != 1:
        return "the producer's buffer has other readers"
    if consumer.masks or producer.masks:
        return "a masked copy"
    source = producer.operands[0]
    if overwritten(source):
        return "the producer's source is written over in place after it"
    d0, d1, d2 = source.type.dtype, producer.dtype, consumer.dtype
    if d0 != d1 and d1 != d2:
        return f"both copies cast ({d0} → {d1} → {d2})"
    parts = compose_pieces(consumer.src, producer.dst, producer.src, MAX_PIECES)
    if parts is None or len(parts) < 2:
        return "no cut of the consumer's space composes"
    out: Layout = consumer.layout
    pieces = []
    for box, comp in parts:
        dst = refine(restrict(consumer.dst, box), comp.split)
        if image_box(dst, out) is None:
            return "a piece writes no box of the result layout"
        pieces.append((source, {
            "layout": out, "dtype": d2 if d0 == d1 else d1, "space": comp.sizes,
            "src": comp.src, "dst": dst, "masks": None, "fill": None,
        }))  # fmt: skip
    into = consumer.operands[1] if len(consumer.operands) == 2 else None
    return Assembly(pieces, None, into, "new")


def fuse_with_writers(op: O.CopyOp, rw: Rewriter, generators: dict[int, int]) -> None:
    """Make the explicit copy `op`, the last of `rw.ops` (the graph's ops being rebuilt),
    read the sources of the copies that wrote its buffer: fused with the one writer
    (`fuse`), then cut into one copy per writer of an assembled buffer (`plan_assembled`).
    `generators` maps the id of each Philox op in `rw.ops` to its index there (kept right
    when a fill is inserted before them)."""
    producer = op.operands[0].owner
    fused = fuse(op, producer)
    if not isinstance(fused, str):
        operands, attrs = fused
        new = rw.ops[-1] = new_copy(rw, operands, attrs)
        rw.replace(op, new.results)
        op = new
    else:
        cut = fuse_in_pieces(op, producer)
        if not isinstance(cut, str):
            apply_assembly(op, cut, rw, generators)
            return
    plan = plan_assembled(op)
    if not isinstance(plan, str):
        apply_assembly(op, plan, rw, generators)
