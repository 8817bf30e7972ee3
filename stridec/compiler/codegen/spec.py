"""The input of copy code generation, and the pure rewrites that simplify it.

A `CopySpec` describes one strided copy over an iteration space `sizes`:

    dst[dst_offset + Σ i_k·dst_strides_k] = cast(src[src_offset + Σ i_k·src_strides_k])

for every coordinate `i` with `0 <= i_k < sizes_k`, except where a `MaskBound` fails; there
`fill` is stored and `src` is not read (with `fill=None`, nothing is stored either: the
masks then restrict the domain of the copy). Example: NCHW (C = 3) packed into NCHW4 runs over
the split space (N, C/4 = 1, 4, H, W) with the mask `0 <= 0·n + 4·co + 1·ci + 0·h + 0·w < 3`,
so channel 3 of every block is `fill`.

The rewrites below never change which value lands at which destination address; they only
re-express the loop nest so that code generation sees the fewest, best-ordered dims:
`drop_unit_dims`, `simplify_masks`, `orient_for_writes` (flip dims so destination strides
are >= 0), `order_for_writes` (smallest |dst stride| innermost) and `coalesce_copy_dims`
(merge neighbouring dims `k, k+1` when `x_k == x_{k+1}·size_{k+1}` holds for the source
strides, the destination strides and every mask's coefficients). `canonicalize_copy` runs
them in that order. They work on plain int tuples and know nothing of `stridec.ir.layout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stridec.errors import LayoutError, UnsupportedError, VerificationError
from stridec.ir.affine import (
    MAX_RANK,
    Box,
    MaskBound,
    Shaped,
    address_span,
    as_mask,
    box_within,
    checked_int,
    checked_ints,
    guillotine,
    linear_span,
    merge_dims,
)
from stridec.ir.dtypes import DType, as_dtype
from stridec.ir.ops import ExplicitCopyOp, FillOp, FramedCopyOp
from stridec.ir.symbols import Sym, evaluate, free_symbols, statically_true, symbol

__all__ = [
    "MAX_RANK",
    "MaskBound",
    "CopySpec",
    "Tuning",
    "linear_span",
    "drop_unit_dims",
    "simplify_masks",
    "orient_for_writes",
    "write_order",
    "order_for_writes",
    "coalesce_copy_dims",
    "canonicalize_copy",
    "is_fill_only",
    "fill_then_box_copy",
    "fill_around_box_copies",
    "fill_parts",
    "fills_around_box_copies",
    "copy_spec",
    "dst_box",
    "address_span",
    "binding_class",
    "bind_copy",
    "canonicalize_symbolic",
    "copy_symbols",
    "size_class",
]

@dataclass(frozen=True, slots=True)
class Tuning:
    """Overrides of a kernel's CUDA plan, for sweeps on a GPU (`bench/tune.py`); None keeps
    stridec's own choice. For a copy, `strategy` must apply to it ("gather" always does)
    and `blocks` gives one power of two per tile axis of that strategy (`CopyPlan.axes`);
    for philox, `blocks` is `(BLOCK,)` and `strategy` is ignored. The interpreter target
    ignores tuning: there, blocks only bound the number of programs."""

    strategy: str | None = None
    blocks: tuple[int, ...] | None = None
    num_warps: int | None = None


@dataclass(frozen=True, slots=True)
class CopySpec(Shaped):
    """One strided copy between two flat storages (see the module docstring).

    Strides and offsets are in elements and may be negative (flip) or zero (broadcast);
    `masks` may hold any objects with `.coeffs`, `.lo` and `.hi` (they are converted to
    `MaskBound`, so equal specs compare and hash equal). `fill=None` leaves masked
    elements unwritten.
    """

    sizes: tuple[int, ...]
    src_strides: tuple[int, ...]
    src_offset: int
    dst_strides: tuple[int, ...]
    dst_offset: int
    src_dtype: DType
    dst_dtype: DType
    masks: tuple[MaskBound, ...] = ()
    fill: float | int | bool | None = 0

    def __post_init__(self) -> None:
        if self._canonical():
            return  # specs built from specs (the rewrites below): nothing to convert
        sizes = _int_tuple(self.sizes, "sizes")
        rank = len(sizes)
        if rank > MAX_RANK:
            raise UnsupportedError(
                f"copy: rank above {MAX_RANK} is not supported; got sizes {sizes} (rank {rank})"
            )
        if any(statically_true(n < 0) if isinstance(n, Sym) else n < 0 for n in sizes):
            raise LayoutError(f"copy: sizes must be >= 0; got {sizes}")
        src_strides = _int_tuple(self.src_strides, "src_strides")
        dst_strides = _int_tuple(self.dst_strides, "dst_strides")
        for what, strides in (("src_strides", src_strides), ("dst_strides", dst_strides)):
            if len(strides) != rank:
                raise LayoutError(
                    f"copy: {what} must have one entry per dim of sizes {sizes}; got {strides}"
                )
        masks = tuple(as_mask(m) for m in self.masks)
        for m in masks:
            if len(m.coeffs) != rank:
                raise LayoutError(
                    f"copy: mask coeffs must have one entry per dim of sizes {sizes}; "
                    f"got {m.coeffs}"
                )
        fill = self.fill
        if fill is not None and not isinstance(fill, (bool, int, float)):
            raise VerificationError(f"copy: fill must be a bool, int, float or None; got {fill!r}")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "src_strides", src_strides)
        object.__setattr__(self, "dst_strides", dst_strides)
        object.__setattr__(self, "src_offset", _int(self.src_offset, "src_offset"))
        object.__setattr__(self, "dst_offset", _int(self.dst_offset, "dst_offset"))
        object.__setattr__(self, "src_dtype", as_dtype(self.src_dtype, "copy src_dtype"))
        object.__setattr__(self, "dst_dtype", as_dtype(self.dst_dtype, "copy dst_dtype"))
        object.__setattr__(self, "masks", masks)

    def _canonical(self) -> bool:
        """Whether the fields already are what the checks of `__post_init__` make of them
        (tuples of Python ints, one per dim, sizes >= 0, int offsets, DTypes, MaskBounds of
        the rank, a plain fill): a static spec built from another one."""
        sizes, src, dst, masks, fill = (
            self.sizes, self.src_strides, self.dst_strides, self.masks, self.fill
        )
        if not (type(sizes) is type(src) is type(dst) is type(masks) is tuple):
            return False
        rank = len(sizes)
        return (
            rank <= MAX_RANK
            and len(src) == rank
            and len(dst) == rank
            and all(type(n) is int and n >= 0 for n in sizes)
            and all(type(v) is int for v in (*src, *dst, self.src_offset, self.dst_offset))
            and isinstance(self.src_dtype, DType)
            and isinstance(self.dst_dtype, DType)
            and all(type(m) is MaskBound and len(m.coeffs) == rank for m in masks)
            and (fill is None or type(fill) in (bool, int, float))
        )


def _int(value: Any, what: str) -> int:
    if isinstance(value, Sym):
        return value  # type: ignore[return-value]
    return checked_int(value, what, "copy")


def _int_tuple(values: Sequence[int], what: str) -> tuple[int, ...]:
    return checked_ints(values, what, "copy", symbolic=True)


def _replace(spec: CopySpec, **changes: Any) -> CopySpec:
    fields = {
        "sizes": spec.sizes,
        "src_strides": spec.src_strides,
        "src_offset": spec.src_offset,
        "dst_strides": spec.dst_strides,
        "dst_offset": spec.dst_offset,
        "src_dtype": spec.src_dtype,
        "dst_dtype": spec.dst_dtype,
        "masks": spec.masks,
        "fill": spec.fill,
    }
    fields.update(changes)
    return CopySpec(**fields)


def drop_unit_dims(spec: CopySpec) -> CopySpec:
    """Remove size-1 dims: their coordinate is always 0, so strides and coeffs vanish.

    An empty spec (some size 0) is returned unchanged.
    """
    if spec.numel == 0:
        return spec
    keep = [k for k, n in enumerate(spec.sizes) if n != 1]
    if len(keep) == spec.rank:
        return spec
    return _permute_dims(spec, keep)


def _permute_dims(spec: CopySpec, dims: Sequence[int]) -> CopySpec:
    """The spec whose dim j is `spec`'s dim `dims[j]` (a subset when dropping unit dims)."""
    return _replace(
        spec,
        sizes=tuple(spec.sizes[k] for k in dims),
        src_strides=tuple(spec.src_strides[k] for k in dims),
        dst_strides=tuple(spec.dst_strides[k] for k in dims),
        masks=tuple(MaskBound(tuple(m.coeffs[k] for k in dims), m.lo, m.hi) for m in spec.masks),
    )


def simplify_masks(spec: CopySpec) -> CopySpec:
    """Drop masks that hold on the whole box; collapse to one empty mask if one never holds.

    The empty mask `MaskBound((0,)*rank, 0, 0)` means "every element is `fill`" (see
    `is_fill_only`). Masks of the same coefficients (or their negation) and constant
    bounds are one, their intervals intersected: `0 <= i < 5` and `2 <= i < 9` are
    `2 <= i < 5`, and `-2 <= -i < 100` (`i < 3`) makes them `2 <= i < 3`; the order of
    the rest is kept.
    """
    if spec.numel == 0 or not spec.masks:
        return spec
    merged: dict[tuple, MaskBound] = {}
    for k, m in enumerate(spec.masks):
        key: tuple = ("symbolic", k)
        if type(m.lo) is int and type(m.hi) is int and all(type(c) is int for c in m.coeffs):
            lead = next((c for c in m.coeffs if c), 0)
            if lead < 0:  # lo <= c.x < hi  <=>  1 - hi <= -c.x < 1 - lo
                m = MaskBound(tuple(-c for c in m.coeffs), 1 - m.hi, 1 - m.lo)
            key = (m.coeffs,)
        if key in merged:
            have = merged[key]
            m = MaskBound(m.coeffs, max(have.lo, m.lo), min(have.hi, m.hi))
        merged[key] = m
    kept: list[MaskBound] = []
    for m in merged.values():
        low, high = linear_span(spec.sizes, m.coeffs)
        empty = type(m.lo) is int and type(m.hi) is int and m.hi <= m.lo
        if empty or high < m.lo or low >= m.hi:
            return _replace(spec, masks=(MaskBound((0,) * spec.rank, 0, 0),))
        if m.lo <= low and high < m.hi:
            continue
        if m not in kept:
            kept.append(m)
    return _replace(spec, masks=tuple(kept))


def is_fill_only(spec: CopySpec) -> bool:
    """True when some mask can never hold, so no element is read (after `simplify_masks`)."""
    return any(not any(m.coeffs) and not (m.lo <= 0 < m.hi) for m in spec.masks)


#: The copy strategies every target renders: runs contiguous on both sides (`linear`), a
#: tiled transpose (the source unit-stride in another dim than the destination), and an
#: element at a time (`gather`).
COPY_STRATEGIES = ("linear", "tiled_transpose", "gather")


def transpose_dim(spec: CopySpec) -> int | None:
    """The dim a tiled transpose of canonical `spec` loads along: the destination is
    unit-stride innermost and the source unit-stride in another dim (with several, an
    overlapping source, the largest gives the longest runs); None when there is none."""
    if spec.rank < 2 or spec.dst_strides[-1] != 1:
        return None
    unit = [k for k in range(spec.rank - 1) if spec.src_strides[k] == 1]
    return max(unit, key=lambda k: (spec.sizes[k], k)) if unit else None


def copy_strategy(spec: CopySpec, fill_only: bool) -> tuple[str, int | None]:
    """The strategy of canonical `spec` (one of `COPY_STRATEGIES`) and, for a transpose,
    the dim where the source is unit-stride (`transpose_dim`), for every target: a fill
    (`fill_only`: nothing read) is linear where the destination is unit-stride inside,
    a copy where both sides are."""
    if spec.rank == 0:
        return "linear", None
    dst_inner, src_inner = spec.dst_strides[-1], spec.src_strides[-1]
    if fill_only:
        return ("linear" if dst_inner == 1 else "gather"), None
    if dst_inner == 1 and src_inner == 1:
        return "linear", None
    unit = transpose_dim(spec)
    if unit is not None:
        return "tiled_transpose", unit
    return "gather", None


def orient_for_writes(spec: CopySpec) -> CopySpec:
    """Reverse the loop over every dim whose destination stride is negative.

    Running dim k backwards (`i_k = n-1-j`) moves each address's offset to the dim's last
    element and negates the stride: `off + i·s == (off + (n-1)·s) + j·(-s)`; a mask's
    bounds shift the same way. Dims with destination stride 0 are oriented by the source
    stride instead. Afterwards every destination stride is >= 0, so writes run forwards.
    """
    if spec.numel == 0:
        return spec
    flip = [
        d < 0 or (d == 0 and s < 0) for d, s in zip(spec.dst_strides, spec.src_strides, strict=True)
    ]
    return _flip_dims(spec, flip)


def _flip_dims(spec: CopySpec, flip: Sequence[bool]) -> CopySpec:
    """`spec` with the loop over each dim `k` where `flip[k]` run backwards."""
    if not any(flip):
        return spec
    src_offset, dst_offset = spec.src_offset, spec.dst_offset
    src_strides, dst_strides = list(spec.src_strides), list(spec.dst_strides)
    for k, n in enumerate(spec.sizes):
        if flip[k]:
            src_offset += (n - 1) * src_strides[k]
            dst_offset += (n - 1) * dst_strides[k]
            src_strides[k] = -src_strides[k]
            dst_strides[k] = -dst_strides[k]
    masks = []
    for m in spec.masks:
        shift = sum((n - 1) * c for n, c, f in zip(spec.sizes, m.coeffs, flip, strict=True) if f)
        coeffs = tuple(-c if f else c for c, f in zip(m.coeffs, flip, strict=True))
        masks.append(MaskBound(coeffs, m.lo - shift, m.hi - shift))
    return _replace(
        spec,
        src_strides=tuple(src_strides),
        src_offset=src_offset,
        dst_strides=tuple(dst_strides),
        dst_offset=dst_offset,
        masks=tuple(masks),
    )


def write_order(spec: CopySpec) -> tuple[int, ...]:
    """Dims from outermost to innermost so that the smallest |dst stride| is innermost.

    Ties go to the larger |src stride| outside, then to the original order. Dims with
    destination stride 0 (several coordinates writing one address) go outermost.
    """

    def key(k: int) -> tuple[bool, int, int, int]:
        d, s = spec.dst_strides[k], spec.src_strides[k]
        return (d != 0, -abs(d), -abs(s), k)

    return tuple(sorted(range(spec.rank), key=key))


def order_for_writes(spec: CopySpec) -> CopySpec:
    """Permute the dims into `write_order`, so the innermost loop writes consecutively."""
    order = write_order(spec)
    if order == tuple(range(spec.rank)):
        return spec
    return _permute_dims(spec, order)


def coalesce_copy_dims(spec: CopySpec) -> CopySpec:
    """Drop size-1 dims and merge neighbouring dims `k, k+1` where it holds jointly on
    every side (`stridec.ir.affine.merge_dims`): the source strides, the destination
    strides and every mask's coeffs. E.g. sizes (4, 8) with src (8, 1) and dst (16, 2)
    merge into sizes (32,) with src (1,) and dst (2,). An empty spec is returned unchanged.
    """
    if spec.numel == 0 or spec.rank < 2:
        return spec
    sizes, (src_strides, dst_strides, *coeffs) = merge_dims(
        spec.sizes, [spec.src_strides, spec.dst_strides] + [m.coeffs for m in spec.masks]
    )
    if len(sizes) == spec.rank:
        return spec
    return _replace(
        spec,
        sizes=sizes,
        src_strides=src_strides,
        dst_strides=dst_strides,
        masks=tuple(MaskBound(c, m.lo, m.hi) for c, m in zip(coeffs, spec.masks, strict=True)),
    )


def canonicalize_copy(spec: CopySpec, coalesce: bool = True, simplify: bool = True
                      ) -> CopySpec:
    """All rewrites, in order: unit dims, masks, orientation, write order, coalescing (but
    with `coalesce` False: a symbolic copy's dims that merge at one binding only; with
    `simplify` False, its masks as they are: they may hold everywhere, or nowhere, at one
    binding only)."""
    spec = drop_unit_dims(spec)
    if simplify:
        spec = simplify_masks(spec)
    spec = orient_for_writes(spec)
    spec = order_for_writes(spec)
    return coalesce_copy_dims(spec) if coalesce else spec


def dst_box(
    spec: CopySpec, sizes: Sequence[int], strides: Sequence[int], offset: int
) -> Box | None:
    """The box `[start_k, start_k + spec.sizes_k)` per dim of the layout
    `(sizes, strides, offset)` that `spec` writes, when it writes one
    (`stridec.ir.affine.box_within`); None otherwise, and for an empty spec. E.g. rows
    2..3 of a contiguous (6, 3) buffer: sizes (2, 3), strides (3, 1), offset 6 = 2·3 + 0·1,
    so the box ((2, 4), (0, 3)). Boxes disjoint in one dim write disjoint addresses."""
    return box_within(sizes, strides, offset, spec.sizes, spec.dst_strides, spec.dst_offset)


def fill_then_box_copy(fill: CopySpec, copy: CopySpec) -> CopySpec | None:
    """One masked copy doing what `fill` then `copy` do, or None when it cannot.

    `fill` writes `fill.fill` over its whole space; `copy` then writes a box of the same
    destination: same strides dim for dim, its offset `start` coordinates in. That is one
    copy over the fill's space, valid where `start_k <= i_k < start_k + box_k` (and where
    the copy's own masks hold, shifted by `start`), reading `src(i - start)`, so
    `src_offset - Σ start_k·src_strides_k` (negative for F.pad's leading pads: masked-off
    lanes are never dereferenced), and writing `fill.fill` elsewhere. E.g. F.pad of a
    (3,) row by (1, 2): a fill of (6,), then a copy of (3,) at start 1, become one copy
    over (6,) with `1 <= i < 4`, source offset -1. Every destination element is written
    once instead of up to twice.
    """
    if not _mergeable(fill, copy):
        return None
    box = dst_box(copy, fill.sizes, fill.dst_strides, fill.dst_offset)
    if box is None:
        return None
    start = [lo for lo, _ in box]
    masks = [  # a bound where the box may not span the dim (for every value of the symbols)
        MaskBound(tuple(int(j == k) for j in range(fill.rank)), start[k], start[k] + copy.sizes[k])
        for k in range(fill.rank)
        if not (start[k] == 0 and statically_true(copy.sizes[k] >= fill.sizes[k]))
    ]
    for m in copy.masks:
        shift = sum(c * s for c, s in zip(m.coeffs, start, strict=True))
        masks.append(MaskBound(m.coeffs, m.lo + shift, m.hi + shift))
    src_offset = copy.src_offset - sum(s * k for s, k in zip(copy.src_strides, start, strict=True))
    return _replace(
        copy,
        sizes=fill.sizes,
        src_offset=src_offset,
        dst_offset=fill.dst_offset,
        masks=tuple(masks),
        fill=fill.fill,
    )


def _mergeable(fill: CopySpec, copy: CopySpec) -> bool:
    """What `fill_then_box_copy` asks of the two besides a box: a fill and a copy that
    writes something, the same destination strides and dtype, and masked points of the
    copy left to the fill's value or written with it."""
    if not is_fill_only(fill) or fill.fill is None or copy.numel == 0 or fill.numel == 0:
        return False
    if copy.rank != fill.rank or copy.dst_strides != fill.dst_strides:
        return False
    if copy.dst_dtype != fill.dst_dtype or (copy.masks and copy.fill not in (None, fill.fill)):
        return False
    return not (copy.masks and copy.fill is not None and type(copy.fill) is not type(fill.fill))


def fill_parts(
    fill: CopySpec, copies: Sequence[CopySpec], boxes: Sequence[Box] | None = None
) -> list[tuple[Box, Box]] | None:
    """Per copy of `copies`, in their order, (the part of `fill`'s space it gets, the box
    of that space it writes), the parts cut by planes (`guillotine`); None when a copy
    writes no box of `fill`'s space or no planes separate the boxes. `boxes`: those of
    the copies (`dst_box` in `fill`'s space), when the caller has them."""
    if not copies or not is_fill_only(fill) or fill.fill is None or fill.numel == 0:
        return None
    if boxes is None:
        found = [dst_box(copy, fill.sizes, fill.dst_strides, fill.dst_offset) for copy in copies]
        if any(box is None for box in found):
            return None
        boxes = found  # type: ignore[assignment]
    parts = guillotine(tuple((0, n) for n in fill.sizes), list(range(len(copies))), boxes)
    if parts is None:
        return None
    part_of = dict((i, part) for part, i in parts)
    return [(part_of[i], box) for i, box in enumerate(boxes)]


def fill_around_box_copies(
    fill: CopySpec,
    copies: Sequence[CopySpec],
    parts: Sequence[tuple[Box, Box]] | None = None,
) -> list[CopySpec] | None:
    """Copies, one per copy of `copies` and in their order, that together do what `fill`
    and then `copies` do, writing disjoint boxes; None when they cannot.

    Each copy must write a box of `fill`'s space (as in `fill_then_box_copy`), no two
    boxes may meet, and planes must separate them (`guillotine`): the fill's space is
    cut into one part per copy, and each part with its copy is one `fill_then_box_copy`.
    F.pad of a cat, for instance: a fill of (2, 10), then a copy of (2, 3) at column 1 and
    one of (2, 4) at column 4, are cut at column 4 into a (2, 4) part holding the first
    (valid for 1 <= j < 4, the fill elsewhere) and a (2, 6) part holding the second (valid
    for j < 4). Each element is written once, and the parts can run as one batch.
    """
    if parts is None:  # else what `fill_parts` gave for these copies
        parts = fill_parts(fill, copies)
    if parts is None:
        return None
    merged: list[CopySpec] = []
    for (part, _), copy in zip(parts, copies, strict=True):
        one = fill_then_box_copy(_part_of_fill(fill, part), copy)
        if one is None:
            return None
        merged.append(one)
    return merged


def fills_around_box_copies(
    fill: CopySpec, copies: Sequence[CopySpec], parts: Sequence[tuple[Box, Box]]
) -> bool:
    """Whether `fill_around_box_copies(fill, copies, parts)` gives copies, without building
    them: what `merge-fills` asks before it writes frames. `parts` (from `fill_parts`) hold
    each copy's box of `fill`'s space inside its part; the part of `fill` differs from
    `fill` only in sizes and offset, which `_mergeable` does not read, and the box found
    in `fill`'s space, shifted by the part's start, is the one found in the part's (a
    smaller box of an injective map nests too). So what remains is `_mergeable`."""
    return len(parts) == len(copies) and all(_mergeable(fill, copy) for copy in copies)


def _part_of_fill(fill: CopySpec, part: Box) -> CopySpec:
    """`fill` over the box `part` of its space (a part of the whole space is `fill`)."""
    sizes = tuple(hi - lo for lo, hi in part)
    if sizes == fill.sizes:
        return fill
    starts = (lo for lo, _ in part)
    offset = fill.dst_offset + sum(i * s for i, s in zip(starts, fill.dst_strides, strict=True))
    return _replace(fill, sizes=sizes, dst_offset=offset)


def copy_spec(op: ExplicitCopyOp) -> CopySpec:
    """The `CopySpec` of an explicit copy op. A fill (no source) is masked everywhere: every
    point gets `fill`. A copy with a `frame` is the masked copy over its framed space that
    does what a fill of that space and then the copy do (`fill_then_box_copy`)."""
    space, dst = op.space, op.dst
    if isinstance(op, FillOp):  # nothing is read, no point is valid
        src_strides, src_offset, src_dtype = (0,) * len(space), 0, op.dtype
        masks = (MaskBound((0,) * len(space), 1, 1),)
    else:
        src = op.src
        src_strides, src_offset, src_dtype = src.strides, src.offset, op.operands[0].type.dtype
        masks = tuple(MaskBound(c, lo, hi) for c, lo, hi in op.masks or ())
    # fill None with masks: a domain restriction (masked points are not written).
    spec = CopySpec(
        space, src_strides, src_offset, dst.strides, dst.offset, src_dtype, op.dtype, masks,
        op.fill,
    )
    if not isinstance(op, FramedCopyOp):
        return spec
    framed = op.framed_dst()
    fill = CopySpec(
        framed.sizes, (0,) * framed.rank, 0, framed.strides, framed.offset, op.dtype, op.dtype,
        (MaskBound((0,) * framed.rank, 1, 1),), op.fill,
    )
    if spec.numel == 0:
        return fill
    merged = fill_then_box_copy(fill, spec)
    if merged is None:
        raise UnsupportedError(f"copy: cannot run the frame {op.frame} of {op} as one copy")
    return merged


# --------------------------------------------------------------------------- symbolic sizes


def copy_symbols(spec: CopySpec) -> frozenset[str]:
    """The symbols `spec`'s sizes, strides, offsets and masks name (empty: a static copy)."""
    masks = [(m.coeffs, m.lo, m.hi) for m in spec.masks]
    return free_symbols((spec.sizes, spec.src_strides, spec.src_offset, spec.dst_strides,
                         spec.dst_offset, masks))


def bind_copy(spec: CopySpec, bindings: Any) -> CopySpec:
    """`spec` with its symbols bound (`stridec.ir.symbols.evaluate`): a static copy, or a
    symbolic one where `bindings` leaves symbols free or binds them to expressions."""
    bindings = {n: bindings[n] if n in bindings else symbol(n) for n in copy_symbols(spec)}
    return _replace(
        spec,
        sizes=evaluate(spec.sizes, bindings),
        src_strides=evaluate(spec.src_strides, bindings),
        src_offset=evaluate(spec.src_offset, bindings),
        dst_strides=evaluate(spec.dst_strides, bindings),
        dst_offset=evaluate(spec.dst_offset, bindings),
        masks=tuple(
            MaskBound(evaluate(m.coeffs, bindings), evaluate(m.lo, bindings),
                      evaluate(m.hi, bindings))
            for m in spec.masks
        ),
    )


def _provably_negative(x: Any) -> bool:
    return statically_true(x < 0) if isinstance(x, Sym) else x < 0


def canonicalize_symbolic(spec: CopySpec, hint: Any) -> CopySpec:
    """`canonicalize_copy` for a copy over symbolic sizes, valid for every value of the
    symbols (`hint`, one binding, only orders the dims): unit dims dropped where a size
    is 1 for every value; a dim flipped where its destination stride is negative for
    every value; dims ordered by their strides at `hint` (any order is the same copy);
    neighbours merged where the merge is an identity of the polynomials. Masks are kept
    as they are (which ones always hold depends on the values)."""
    spec = drop_unit_dims(spec)
    flip = [
        _provably_negative(d) or (isinstance(d, int) and d == 0 and _provably_negative(s))
        for d, s in zip(spec.dst_strides, spec.src_strides, strict=True)
    ]
    spec = _flip_dims(spec, flip)
    at = bind_copy(spec, hint)
    order = write_order(at)
    if order != tuple(range(spec.rank)):
        spec = _permute_dims(spec, order)
    return coalesce_copy_dims(spec)


INT32_MAX = 2**31 - 1


def size_class(value: int) -> str:
    """"0", "1", "16k" (a positive multiple of 16) or "n" (anything else)."""
    if value in (0, 1):
        return str(value)
    return "16k" if value % 16 == 0 else "n"


def binding_class(bindings: Mapping[str, int]) -> tuple[tuple[str, str, bool], ...]:
    """(symbol, `size_class`, fits in int32) of each symbol, in the binding's order."""
    return tuple((k, size_class(v), v <= INT32_MAX) for k, v in bindings.items())
