"""Index-map algebra under `fuse-copies` and `eliminate-copies` (docs/design.md#passes).

(Composition, below; then boxes: `restrict`, `box_of` and `image_box` say which box of a
layout's coordinates a layout addresses, and `split_box` cuts a box where linear bounds
change from holding to failing -- how `fuse-copies` cuts a copy that reads a buffer
several copies wrote.)

A copy *writer* walks an iteration space P (sizes p) and stores

    buffer[Wd(i)] = source[Ws(i)]

where ``Wd`` (writer_dst) and ``Ws`` (writer_src) are layouts over P: Wd addresses the buffer
(one address per coordinate, maybe padded or permuted), Ws the source storage (any strides).
A *reader* is a layout R over a space Q that addresses the buffer. Fusing the copy into the
reader means reading the source directly, at ``Ws(Wd⁻¹(R(j)))`` for every reader coordinate
j. That is a strided layout exactly when the P-coordinates ``Wd⁻¹(R(j))`` are an affine
function of j -- sometimes only after a reader dim is split into mixed-radix factors (a
reshape that merged two writer dims walks across the boundary between them).

**Inverting Wd.** Sorted by stride, an injective Wd nests: each stride exceeds the reach of
the dims inside it. Then a buffer address decomposes greedily, largest stride first. With
p = (2, 4, 5) and the contiguous Wd strides (20, 5, 1), address 37 is

    37 // 20 = 1, rem 17;   17 // 5 = 3, rem 2;   2 // 1 = 2, rem 0   ->  i = (1, 3, 2)

and indeed {1,3,2}·{20,5,1} = 20 + 15 + 2 = 37. A coordinate past its size, or a final
remainder other than 0, means the address is never written (outside Wd or in its padding).

**Composing.** ``coord_base = Wd⁻¹(R.offset)``; each reader dim moves the P-coordinates by
``Wd⁻¹(R.offset + stride) - coord_base`` per step. A reader stride of 20 over that writer
moves 1 along P dim 0 (20 = {1,0,0}·{20,5,1}). The buffer flattened, size 40 and stride 1,
moves {0,0,1}, but only 5 steps fit in dim 2: its innermost factor is 5. The rest, stride
5, moves {0,1,0} for 4 steps, and stride 20 moves {1,0,0} for 2: the split is (2, 4, 5),
with strides (20, 5, 1). Every factor moves by a constant vector, so

    P-coords(j') = coord_base + coord_map · j'

and the fused read is the layout ``Ws.offset + Ws·coord_base`` with stride
``Σ_m coord_map[m][k]·Ws_m`` on each refined dim k. The composition is right as soon as
(1) coord_base decodes R.offset, (2) each movement's Wd-image is its refined stride and (3)
the box of coordinates the refined reader spans stays inside P: then Wd of those
coordinates is the refined reader's address, and as Wd is injective they *are* Wd⁻¹ of it.
`compose` keeps (3) as an invariant while it picks factors.

A writer that can be coalesced (``coalesce_jointly(Wd, Ws)``) composes with more readers:
P-coordinates of a coarser P are affine more often. Callers without masks over P may pass
the coalesced pair.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stridec.errors import LayoutError
from stridec.ir.affine import (
    MAX_RANK,
    Box,
    MaskBound,
    StridedInverse,
    box_within,
    invert_strided,
    sign_of,
)
from stridec.ir.layout import Layout, contiguous_strides
from stridec.ir.symbols import (
    Sym,
    UndecidedError,
    exact_div,
    floor_div,
    generic_value,
    size_min,
    statically_true,
)

__all__ = [
    "Composition",
    "as_view",
    "box_of",
    "compose",
    "compose_mask",
    "compose_pieces",
    "image_box",
    "refine",
    "restrict",
    "split_box",
]

@dataclass(frozen=True, slots=True)
class Composition:
    """A reader composed with a copy's writer: how to read the copy's source directly.

    - `split`: for each reader dim, its factor sizes, outermost first (their product is the
      dim's size; a dim that needs no split, or of size 0 or 1, is ``(size,)``).
    - `sizes`: the refined space Q', the factors concatenated.
    - `src`: a layout over Q' addressing the source storage.
    - `coord_base`, `coord_map`: the P-coordinates of the refined coordinate j' are
      ``coord_base[m] + Σ_k coord_map[m][k]·j'[k]``.

    For every j' in Q': ``Ws(P-coords(j')) == src(j')`` and ``Wd(P-coords(j')) ==
    refine(reader, split)(j')``.
    """

    split: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]
    src: Layout
    coord_base: tuple[int, ...]
    coord_map: tuple[tuple[int, ...], ...]

    @property
    def is_refined(self) -> bool:
        """Whether some reader dim was split into more than one factor."""
        return any(len(factors) > 1 for factors in self.split)


def _steps_that_fit(
    move: Sequence[int], lo: Sequence[int], hi: Sequence[int], sizes: Sequence[int]
) -> int | None:
    """How many positions (0, 1, ...) a walk by `move` can take before the box [lo, hi]
    swept along it leaves P; ``None`` when `move` is zero (it never leaves). Over
    symbolic sizes, the count for every value of the symbols (`UndecidedError` where the
    smallest of several depends on them)."""
    fit: int | None = None
    for m, v in enumerate(move):
        sign = sign_of(v)
        if sign is None:
            raise UndecidedError(f"compose: the sign of the move {v} depends on the symbols")
        if sign > 0:
            room = floor_div(sizes[m] - 1 - hi[m], v)
        elif sign < 0:
            room = floor_div(lo[m], -v)
        else:
            continue
        fit = room + 1 if fit is None else size_min(fit, room + 1)
    return fit


def _largest_divisor_at_most(n: int, bound: int) -> int:
    """The largest divisor of `n` (>= 1) that is at most `bound`: (12, 5) -> 4."""
    best = 1
    d = 1
    while d * d <= n:
        if n % d == 0:
            for candidate in (d, n // d):
                if best < candidate <= bound:
                    best = candidate
        d += 1
    return best


def _empty_composition(reader: Layout, p_rank: int) -> Composition:
    q = reader.sizes
    return Composition(
        split=tuple((n,) for n in q),
        sizes=q,
        src=Layout(q, contiguous_strides(q), 0),
        coord_base=(0,) * p_rank,
        coord_map=tuple((0,) * len(q) for _ in range(p_rank)),
    )


def compose(reader: Layout, writer_dst: Layout, writer_src: Layout) -> Composition | None:
    """Compose `reader` (over the buffer) with the copy ``buffer[Wd(i)] = source[Ws(i)]``.

    Returns ``None`` when the reader touches an address the writer never writes (outside
    Wd, or in its padding), when Wd is not provably injective, or when the P-coordinates
    are not affine even after splitting reader dims. An empty reader composes trivially.

    Reader dims are taken innermost (smallest |stride|) first, and each is split greedily:
    take the largest factor of what is left of its size that the walk can make without
    leaving P (given the box the dims taken so far sweep), then go on with the stride times
    that factor. Over p = (2, 4, 5), Wd strides (20, 5, 1), the reader (8,) stride 5 (the
    buffer flattened, every 5th element) moves {0,1,0}: 4 steps fit along dim 1 and 4
    divides 8, so the first factor is 4; the rest, stride 20, moves {1,0,0} twice. The
    split is (2, 4), and with Ws strides (1, 2, 8) the source layout is strides
    ({1,0,0}·{1,2,8}, {0,1,0}·{1,2,8}) = (1, 2).

    The greedy split is the coarsest one there is, and it is found whenever any split
    makes the coordinates affine: a factor ends exactly where the next step would leave P
    (the address there decodes to something else, so a new movement starts), and any valid
    split must end a factor at that step too.
    """
    p = writer_dst.sizes
    if writer_src.sizes != p:
        raise LayoutError(
            f"compose: writer_dst sizes {p} and writer_src sizes {writer_src.sizes} must be "
            f"equal (both index the copy's iteration space)"
        )
    q = reader.sizes
    if reader.numel == 0:
        return _empty_composition(reader, len(p))
    inverse = invert_strided(writer_dst.sizes, writer_dst.strides, writer_dst.offset)
    if inverse is None:
        return None
    try:
        found = _compose(reader, writer_src, inverse, p, q)
    except UndecidedError:  # a step whose answer depends on the symbols' values
        return None
    return found if isinstance(found, Composition) else None


def compose_pieces(
    reader: Layout, writer_dst: Layout, writer_src: Layout, limit: int
) -> list[tuple[Box, Composition]] | None:
    """`reader`'s space cut into boxes on each of which it composes with the copy
    (`compose`), with each box's composition (over the box's own coordinates); ``None``
    where some box does not compose and no cut helps, or past `limit` boxes.

    Where a reader dim walks across a boundary of the writer's coordinates at a place no
    split can follow -- rows 0..10 of windows of 7 rows (Swin's window_reverse read by a
    roll), 11 rows no split of which steps back to row 0 of the next window -- it is cut
    there, where its first run leaves P (row 7): rows [0, 7) and [7, 11) each compose.
    """
    if writer_src.sizes != writer_dst.sizes:
        raise LayoutError(
            f"compose_pieces: writer_dst sizes {writer_dst.sizes} and writer_src sizes "
            f"{writer_src.sizes} must be equal"
        )
    inverse = invert_strided(writer_dst.sizes, writer_dst.strides, writer_dst.offset)
    if inverse is None or reader.numel == 0:
        return None
    done: list[tuple[Box, Composition]] = []
    stack: list[Box] = [tuple((0, n) for n in reader.sizes)]
    while stack:
        box = stack.pop()
        try:
            found = _compose(restrict(reader, box), writer_src, inverse, writer_dst.sizes,
                             tuple(hi - lo for lo, hi in box))
        except UndecidedError:
            return None
        if isinstance(found, Composition):
            done.append((box, found))
        elif found is None:
            return None
        else:
            k, at = found
            lo, hi = box[k]
            stack.append(box[:k] + ((lo + at, hi),) + box[k + 1 :])
            stack.append(box[:k] + ((lo, lo + at),) + box[k + 1 :])
        if len(done) + len(stack) > limit:
            return None
    return sorted(done, key=lambda piece: _box_key(piece[0]))


def _compose(
    reader: Layout, writer_src: Layout, inverse: StridedInverse, p: Sequence[int],
    q: Sequence[int],
) -> Composition | tuple[int, int] | None:
    """`compose` past its checks; where a reader dim k walks out of P after `at` steps
    from the reader's start (0 < at < its size) and no split of it follows, (k, at): the
    place `compose_pieces` cuts."""
    base = inverse.coords_of(reader.offset)
    if base is None:
        return None
    static = not inverse.symbolic and reader.is_static()
    zero = (0,) * len(p)
    lo, hi = list(base), list(base)
    # Per reader dim, its factors innermost first, as (size, P-movement per step).
    factors: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in q]
    for k in sorted(range(len(q)), key=lambda k: abs(generic_value(reader.strides[k]))):
        size, stride = q[k], reader.strides[k]
        if size == 1 or stride == 0:
            factors[k].append((size, zero))
            continue
        left = size
        first: int | None = None  # steps the dim's first run makes inside P
        whole = False
        while left != 1:
            # R.offset + stride is the reader's own address (this factor's first step), so
            # an unwritten one means the reader reads what the copy never wrote. Over
            # symbolic sizes a step is decoded past P's sizes too: the sweep below keeps
            # every point the walk reaches inside P, which proves the step in P.
            reached = inverse.coords_of(reader.offset + stride, checked=static)
            if reached is None:
                return _cut(k, first, size, whole)
            move = tuple(b - a for a, b in zip(base, reached, strict=True))
            fit = _steps_that_fit(move, lo, hi, p)
            if first is None:
                first = fit
                # the walk starts where P's coordinates it moves start (the run is whole)
                whole = all(lo[m] == 0 if v > 0 else hi[m] == p[m] - 1
                            for m, v in enumerate(move) if v)
            if fit is None or statically_true(fit >= left):
                take = left
            elif isinstance(fit, int) and isinstance(left, int):
                take = _largest_divisor_at_most(left, fit)
            else:
                return _cut(k, first, size, whole)
            if isinstance(take, int) and take < 2:
                return _cut(k, first, size, whole)
            for m, v in enumerate(move):
                if sign_of(v) < 0:
                    lo[m] += (take - 1) * v
                else:
                    hi[m] += (take - 1) * v
            factors[k].append((take, move))
            stride *= take
            left = exact_div(left, take)

    if not static and not all(statically_true(a >= 0) and statically_true(b < n)
                              for a, b, n in zip(lo, hi, p, strict=True)):
        return None  # the walks leave P for some values of the symbols
    refined = [f for dim in factors for f in reversed(dim)]
    if len(refined) > MAX_RANK:
        return None
    sizes = tuple(n for n, _ in refined)
    coord_map = tuple(tuple(move[m] for _, move in refined) for m in range(len(p)))
    ws = writer_src.strides
    src = Layout(
        sizes,
        tuple(sum(v * s for v, s in zip(move, ws, strict=True)) for _, move in refined),
        writer_src.offset + sum(i * s for i, s in zip(base, ws, strict=True)),
    )
    return Composition(
        split=tuple(tuple(n for n, _ in reversed(dim)) for dim in factors),
        sizes=sizes,
        src=src,
        coord_base=base,
        coord_map=coord_map,
    )


def _cut(k: int, first: int | None, size: int, whole: bool) -> tuple[int, int] | None:
    """Where `compose_pieces` cuts reader dim k (at a place known for every value of the
    symbols): after its first run, where that run starts mid-way (rows 3.. of windows of
    7: at 4, so the rest starts a window); after the most whole runs that fit, where it
    starts a run (rows 0..52 of windows of 7: at 49, seven windows, one split (7, 7))."""
    if not (isinstance(first, int) and isinstance(size, int) and 0 < first < size):
        return None
    runs = size // first * first
    return (k, runs) if whole and first < runs < size else (k, first)


def refine(layout: Layout, split: Sequence[Sequence[int]]) -> Layout:
    """Split each dim of `layout` into mixed-radix factors, outermost first.

    A dim of size 12 and stride s split as (f1, f2, f3) = (3, 2, 2) gets strides
    (f2*f3*s, f3*s, s) = (4s, 2s, s); element (a, b, c) is element 4a + 2b + c of the old dim.
    """
    if len(split) != layout.rank:
        raise LayoutError(
            f"refine: split {tuple(map(tuple, split))} has {len(split)} entries; sizes "
            f"{layout.sizes} have rank {layout.rank}"
        )
    sizes: list[int] = []
    strides: list[int] = []
    for k, (n, s, dim_factors) in enumerate(zip(layout.sizes, layout.strides, split, strict=True)):
        fs = tuple(f if isinstance(f, Sym) else int(f) for f in dim_factors)
        if not fs or any(not isinstance(f, Sym) and f < 0 for f in fs) or math.prod(fs) != n:
            raise LayoutError(
                f"refine: factors {fs} of dim {k} must be >= 0 and multiply to its size {n} "
                f"(sizes {layout.sizes})"
            )
        inner = s
        dim_strides = []
        for f in reversed(fs):
            dim_strides.append(inner)
            inner *= f
        sizes.extend(fs)
        strides.extend(reversed(dim_strides))
    return Layout(tuple(sizes), tuple(strides), layout.offset)


def compose_mask(
    coeffs: Sequence[int], lo: int, hi: int, comp: Composition
) -> tuple[tuple[int, ...], int, int]:
    """Re-express the mask ``lo <= Σ_m coeffs[m]·i[m] < hi`` over P as one over Q'.

    Substituting ``i = coord_base + coord_map·j'`` gives coefficients ``Σ_m
    coeffs[m]·coord_map[m][k]`` and bounds shifted by ``Σ_m coeffs[m]·coord_base[m]``. The
    NCHW4 fill mask ``0 <= 4*co + ci < 6`` read by a reader whose base is (0, 1, 0, 0, 0)
    and which walks ci only becomes ``0 - 4 <= 1*j' < 6 - 4``.
    """
    if len(coeffs) != len(comp.coord_base):
        raise LayoutError(
            f"compose_mask: coeffs {tuple(coeffs)} have {len(coeffs)} entries; the writer's "
            f"space has rank {len(comp.coord_base)}"
        )
    shift = sum(c * b for c, b in zip(coeffs, comp.coord_base, strict=True))
    new_coeffs = tuple(
        sum(c * row[k] for c, row in zip(coeffs, comp.coord_map, strict=True))
        for k in range(len(comp.sizes))
    )
    return new_coeffs, lo - shift, hi - shift


def as_view(result: Layout, writer_dst: Layout, writer_src: Layout) -> Layout | None:
    """The copy's `result` as a view of its source, or ``None`` where the copy is needed.

    The copy can be dropped when the source, read through the composed map without any
    split, already has the layout the copy was asked for: the same strides on every dim of
    size > 1. ``x.contiguous()`` of a contiguous x is x itself; of ``x.permute(1, 0)`` it is
    not (the source would be seen with strides (1, 3), not the requested (2, 1)). The view
    keeps the requested strides at the source's offset.
    """
    comp = compose(result, writer_dst, writer_src)
    if comp is None or comp.is_refined:
        return None
    if result.numel > 0 and any(
        n != 1 and a != b
        for n, a, b in zip(result.sizes, comp.src.strides, result.strides, strict=True)
    ):
        return None
    return Layout(result.sizes, result.strides, comp.src.offset)


# --------------------------------------------------------------------------- boxes


def restrict(layout: Layout, box: Box) -> Layout:
    """`layout` over the sub-box `box` of its sizes: coordinate j of the result is
    coordinate ``start + j`` of `layout`, so the offset moves by ``Σ start_k·stride_k``.
    Strides (60, 5, 1) restricted to ((1, 2), (0, 4), (2, 5)) start at 60 + 2 = 62."""
    return Layout(
        tuple(stop - start for start, stop in box),
        layout.strides,
        layout.offset + sum(start * s for (start, _), s in zip(box, layout.strides, strict=True)),
    )


def box_of(part: Layout, whole: Layout) -> Box | None:
    """The box of `whole`'s coordinates that `part` addresses dim for dim, or ``None``
    (`stridec.ir.affine.box_within`)."""
    return box_within(
        whole.sizes, whole.strides, whole.offset, part.sizes, part.strides, part.offset
    )


def image_box(dst: Layout, whole: Layout) -> Box | None:
    """The coordinates of `whole` whose addresses `dst` writes, when they form a box.

    `dst` may order, split or flip `whole`'s dims: composing it with `whole` gives, per
    `whole` dim m, ``u_m = base_m + Σ_k c_mk·j_k``. The values form an interval when the dims
    that move u_m count in mixed radix (sorted by |c|: |c| = 1, then the previous |c| times
    the previous size, all of one sign) and no dim moves two coordinates. A `pack` writer
    walking ``(N, C/4, 4, H, W)`` into a contiguous ``(N, C, H, W)`` (C = 8) moves c by 4
    per block and 1 per lane: c runs over [0, 8). ``None`` when `dst` writes outside
    `whole` (or into its padding) or the image is not a box.
    """
    if dst.numel == 0:
        return None
    comp = compose(dst, whole, Layout.contiguous(whole.sizes))
    if comp is None:
        return None
    moved = [0] * len(comp.sizes)
    box = []
    for m, row in enumerate(comp.coord_map):
        steps = []
        for k, (c, n) in enumerate(zip(row, comp.sizes, strict=True)):
            if c and n != 1:
                sign = sign_of(c)
                if sign is None:
                    return None
                steps.append((abs(c) if sign > 0 else -c, sign < 0, n))
                moved[k] += 1
        steps.sort(key=lambda step: (generic_value(step[0]), step[1]))
        reach = 1
        for c, _, n in steps:
            if c != reach:
                return None
            reach *= n
        if len({negative for _, negative, _ in steps}) > 1:
            return None
        base = comp.coord_base[m]
        if steps and steps[0][1]:  # counting down from base
            box.append((base - reach + 1, base + 1))
        else:
            box.append((base, base + reach))
    if any(count > 1 for count in moved):
        return None
    return tuple(box)


def _cuts(box: Box, k: int, crossed: Sequence[int], b: MaskBound) -> list[int]:
    """Where along dim k the form stops lying wholly below a crossed threshold t, or starts
    lying wholly above it: with the rest of the form in [r_lo, r_hi] and coefficient c,
    below is ``c·v + r_hi < t`` and above ``c·v + r_lo >= t``."""
    c = b.coeffs[k]
    r_lo, r_hi = b.span(box, skip=k)
    start, stop = box[k]
    points = {start, stop}
    for t in crossed:
        for x in (t - r_hi, t - r_lo):
            # first v with c·v >= x (c > 0), or with c·v < x (c < 0)
            v = -(-x // c) if c > 0 else (-x) // (-c) + 1  # a divisor > 0 (symbolic x)
            if start < v < stop:
                points.add(v)
    return _ordered(points)


def _ordered(values: Iterable[Any]) -> list[Any]:
    """`values` sorted, where their order holds for every value of the symbols
    (`UndecidedError` otherwise); plain ints as `sorted`."""
    out = sorted(values, key=generic_value)
    for a, b in zip(out, out[1:], strict=False):
        if not a < b:  # a Relation's truth value: proven, or raises
            raise UndecidedError(f"split_box: {a} < {b} depends on the symbols")
    return out


def split_box(
    box: Box, bounds: Sequence[MaskBound], limit: int
) -> tuple[list[Box], list[Box]] | None:
    """Cut `box` into boxes on each of which every bound holds everywhere (`inside`) or some
    bound fails everywhere (`outside`); ``None`` past `limit` boxes.

    A bound whose form crosses one of its thresholds on a box cuts the dim of its largest
    |coefficient| where the form leaves "wholly below" or enters "wholly above" the
    threshold, and a run of values in between (where the other dims alone straddle it) is
    cut into single values, so that the next cut falls on another dim. NCHW4 of C = 6,
    the bound ``4·co + ci < 6`` over co in [0, 2), ci in [0, 4): co = 0 lies wholly below
    (values 0..3); co = 1 straddles (4..7) and is cut at ci = 2. Inside: (co 0, ci 0..3)
    and (co 1, ci 0..1); outside: (co 1, ci 2..3). Mixed-radix forms (each coefficient
    above the span of the smaller ones) straddle at one value per threshold. Over symbolic
    sizes the cuts are where they are for every value of the symbols (rows N.. of a cat
    along N + M rows are cut at N), or ``None``.
    """
    try:
        return _split_box(box, bounds, limit)
    except UndecidedError:  # a cut whose place depends on the symbols' values
        return None


def _box_key(box: Box) -> tuple[int, ...]:
    return tuple(generic_value(x) for bounds in box for x in bounds)


def _split_box(
    box: Box, bounds: Sequence[MaskBound], limit: int
) -> tuple[list[Box], list[Box]] | None:
    inside: list[Box] = []
    outside: list[Box] = []
    stack = [box]
    steps = 0
    while stack:
        steps += 1
        if steps > 16 * limit:  # each step cuts or settles a box; never reached
            return None
        b = stack.pop()
        crossing: tuple[MaskBound, list[int]] | None = None
        failed = False
        for bound in bounds:
            low, high = bound.span(b)
            if high < bound.lo or low >= bound.hi:
                failed = True
                break
            if crossing is None:
                crossed = [t for t in (bound.lo, bound.hi) if low < t <= high]
                if crossed:
                    crossing = (bound, crossed)
        if failed:
            outside.append(b)
        elif crossing is None:
            inside.append(b)
        else:
            bound, crossed = crossing
            k = max(
                (k for k, (start, stop) in enumerate(b) if stop - start != 1 and bound.coeffs[k]),
                key=lambda k: abs(bound.coeffs[k]),
            )
            edges = _cuts(b, k, crossed, bound)
            for start, stop in zip(edges, edges[1:], strict=False):
                sub = b[:k] + ((start, stop),) + b[k + 1 :]
                low, high = bound.span(sub)
                if stop - start != 1 and any(low < t <= high for t in crossed):
                    if stop - start > limit:
                        return None
                    stack.extend(b[:k] + ((v, v + 1),) + b[k + 1 :] for v in range(start, stop))
                else:
                    stack.append(sub)
        if len(inside) + len(outside) + len(stack) > limit:
            return None
    return sorted(inside, key=_box_key), sorted(outside, key=_box_key)
