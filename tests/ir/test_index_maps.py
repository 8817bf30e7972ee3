"""Index-map algebra tests. The oracle is the copy run for real: a writer scatters a source
into a sentinel-filled buffer (``buffer[Wd(i)] = source[Ws(i)]``), a reader gathers from the
buffer, and a composition must read the very same elements straight from the source."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.errors import LayoutError
from stridec.ir.affine import MaskBound
from stridec.ir.formats import get_format
from stridec.ir.index_maps import (
    Composition,
    as_view,
    box_of,
    compose,
    compose_mask,
    compose_pieces,
    image_box,
    refine,
    restrict,
    split_box,
)
from stridec.ir.layout import MAX_RANK, Layout
from stridec.ir.symbols import evaluate, symbol
from stridec.runtime.backends.reference import gather, layout_indices

SETTINGS = settings(max_examples=200, deadline=None)
SENTINEL = -1


# -- the oracle ---------------------------------------------------------------------------


def grid(sizes: tuple[int, ...]) -> torch.Tensor:
    """Every coordinate of `sizes`, shaped (*sizes, rank)."""
    axes = [torch.arange(n, dtype=torch.int64) for n in sizes]
    if not axes:
        return torch.zeros((0,), dtype=torch.int64)
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)


class Copy:
    """A copy run for real: `buffer` after ``buffer[Wd(i)] = source[Ws(i)]``, and for each
    buffer address the P-coordinates that wrote it (-1 where nothing did)."""

    def __init__(self, wd: Layout, ws: Layout, buffer_size: int) -> None:
        self.wd, self.ws = wd, ws
        self.source = torch.arange(1, ws.min_storage_size() + 2, dtype=torch.int64)
        self.buffer = torch.full((buffer_size,), SENTINEL, dtype=torch.int64)
        self.writer_of = torch.full((buffer_size, wd.rank), -1, dtype=torch.int64)
        if wd.numel:
            dst = layout_indices(wd)
            self.buffer[dst] = gather(self.source, ws)
            self.writer_of[dst] = grid(wd.sizes)
        self.written = torch.zeros(buffer_size, dtype=torch.bool)
        if wd.numel:
            self.written[layout_indices(wd)] = True

    def reads_unwritten(self, reader: Layout) -> bool:
        return reader.numel > 0 and not bool(self.written[layout_indices(reader)].all())

    def p_coords(self, reader: Layout) -> torch.Tensor:
        """Brute-force Wd⁻¹(R(j)), shaped (*sizes, rank P)."""
        return self.writer_of[layout_indices(reader)]


def affine(sizes: tuple[int, ...], coeffs: tuple[int, ...], base: int) -> torch.Tensor:
    """``base + Σ coeffs[k]·j[k]`` over `sizes` (any signs, unlike a Layout's offset)."""
    value = torch.full(sizes, base, dtype=torch.int64)
    for k, (n, c) in enumerate(zip(sizes, coeffs, strict=True)):
        shape = [1] * len(sizes)
        shape[k] = n
        value = value + (torch.arange(n, dtype=torch.int64) * c).view(shape)
    return value


def check_composition(
    copy: Copy, reader: Layout, data: st.DataObject | None = None
) -> Composition | None:
    """Compose and check every promise of a Composition against the real copy."""
    comp = compose(reader, copy.wd, copy.ws)
    if copy.reads_unwritten(reader):
        assert comp is None, (reader, copy.wd)
    if comp is None:
        return None
    p = copy.wd.sizes
    assert len(comp.split) == reader.rank
    assert all(math.prod(f) == n for f, n in zip(comp.split, reader.sizes, strict=True))
    assert comp.sizes == tuple(f for dim in comp.split for f in dim)
    assert comp.src.sizes == comp.sizes
    assert len(comp.coord_base) == len(p) == len(comp.coord_map)
    assert all(len(row) == len(comp.sizes) for row in comp.coord_map)

    refined = refine(reader, comp.split)
    assert refined.sizes == comp.sizes
    # A refinement only relabels: the same addresses in the same row-major order.
    assert torch.equal(layout_indices(refined).reshape(reader.sizes), layout_indices(reader))

    # The point of it all: the source through comp.src is the buffer through the reader.
    direct = gather(copy.source, comp.src)
    through_buffer = gather(copy.buffer, refined)
    assert torch.equal(direct, through_buffer), (reader, copy.wd, copy.ws, comp)
    assert torch.equal(direct.reshape(reader.sizes), gather(copy.buffer, reader))
    assert not bool((through_buffer == SENTINEL).any())

    if reader.numel == 0:
        return comp
    # coord_base + coord_map·j' are the P-coordinates that wrote each element.
    predicted = [affine(comp.sizes, comp.coord_map[m], comp.coord_base[m]) for m in range(len(p))]
    actual = copy.p_coords(refined)
    for m in range(len(p)):
        assert torch.equal(predicted[m], actual[..., m]), (m, reader, copy.wd, comp)

    if data is not None:
        coeffs = tuple(data.draw(st.lists(st.integers(-3, 3), min_size=len(p), max_size=len(p))))
        lo = data.draw(st.integers(-4, 8))
        hi = lo + data.draw(st.integers(0, 8))
        new_coeffs, new_lo, new_hi = compose_mask(coeffs, lo, hi, comp)
        over_p = torch.zeros(comp.sizes, dtype=torch.int64)
        for m, c in enumerate(coeffs):
            over_p = over_p + c * actual[..., m]
        over_q = affine(comp.sizes, new_coeffs, 0)
        assert torch.equal((lo <= over_p) & (over_p < hi), (new_lo <= over_q) & (over_q < new_hi))
    return comp


def is_affine(copy: Copy, reader: Layout) -> bool:
    """Brute force: are the P-coordinates that wrote the reader's elements an affine
    function of its coordinates (no element unwritten)?"""
    if reader.numel == 0 or copy.reads_unwritten(reader):
        return False
    coords = copy.p_coords(reader)
    origin = coords[(0,) * reader.rank]
    predicted = origin.expand_as(coords).clone()
    for k, n in enumerate(reader.sizes):
        if n < 2:
            continue
        unit = [0] * reader.rank
        unit[k] = 1
        step = coords[tuple(unit)] - origin
        shape = [1] * reader.rank + [1]
        shape[k] = n
        predicted = predicted + torch.arange(n).view(shape) * step
    return torch.equal(predicted, coords)


def factorizations(n: int) -> list[tuple[int, ...]]:
    """Every ordered way to write n as factors >= 2 (n itself included): 8 -> (8,), (2, 4),
    (2, 2, 2), (4, 2)."""
    if n <= 3:
        return [(n,)]
    out = [(n,)]
    for d in range(2, n):
        if n % d == 0:
            out += [(d,) + rest for rest in factorizations(n // d)]
    return out


def some_split_is_affine(copy: Copy, reader: Layout) -> bool:
    """Brute force over every split of every reader dim."""
    if reader.numel == 0 or copy.reads_unwritten(reader):
        return False
    for split in itertools.product(*(factorizations(n) for n in reader.sizes)):
        if sum(map(len, split)) <= MAX_RANK and is_affine(copy, refine(reader, split)):
            return True
    return False


# -- strategies ---------------------------------------------------------------------------


# Sizes 0 and 1 are edge cases worth meeting, not in every other example.
SIZES = st.sampled_from((2, 1, 3, 4, 0, 2, 3, 4, 5, 6))


@st.composite
def writer_sizes(draw: st.DrawFn) -> tuple[int, ...]:
    return tuple(draw(st.lists(SIZES, max_size=4)))


@st.composite
def writer_dsts(draw: st.DrawFn, p: tuple[int, ...], flips: bool = True) -> Layout:
    """An injective Wd over `p`: contiguous, permuted, pitched or gapped, maybe offset."""
    kinds = ["contiguous", "for_order", "gapped"] + (["padded"] if p else [])
    kind = draw(st.sampled_from(kinds))
    order = draw(st.permutations(range(len(p))))
    if kind == "contiguous":
        wd = Layout.contiguous(p)
    elif kind == "for_order":
        wd = Layout.for_order(p, order)
    elif kind == "padded":
        wd = Layout.padded(p, p[-1] + draw(st.integers(0, 3)))
    else:
        strides = [0] * len(p)
        reach = 0
        for m in reversed(order):
            strides[m] = reach + 1 + draw(st.integers(0, 2))
            reach += max(p[m] - 1, 0) * strides[m]
        wd = Layout(p, strides)
    wd = Layout(wd.sizes, wd.strides, wd.offset + draw(st.integers(0, 3)))
    if flips and p and draw(st.integers(0, 3)) == 0:
        wd = wd.flip(draw(st.sets(st.integers(0, len(p) - 1), min_size=1)))
    return wd


@st.composite
def writer_srcs(draw: st.DrawFn, p: tuple[int, ...]) -> Layout:
    """Any Ws over `p`: broadcast (0), negative (flipped) and permuted strides, offsets."""
    strides = tuple(draw(st.lists(st.integers(-4, 4), min_size=len(p), max_size=len(p))))
    low = sum((n - 1) * s for n, s in zip(p, strides, strict=True) if s < 0 and n > 0)
    return Layout(p, strides, -low + draw(st.integers(0, 3)))


def apply_view_op(data: st.DataObject, lay: Layout) -> Layout:
    """One random view op of the kind a consumer applies to a copy's result."""
    ops = ["unsqueeze"]
    if lay.rank >= 1:
        ops += ["slice", "flip", "unfold", "squeeze"]
        if any(n >= 1 for n in lay.sizes):
            ops.append("select")
        if any(n == 1 for n in lay.sizes):
            ops.append("expand")
    if lay.rank >= 2:
        ops.append("permute")
    op = data.draw(st.sampled_from(ops), label="op")
    dim = data.draw(st.integers(0, max(lay.rank - 1, 0)), label="dim")
    if op == "permute":
        return lay.permute(data.draw(st.permutations(range(lay.rank))))
    if op == "slice":
        start = data.draw(st.integers(-5, 5))
        stop = data.draw(st.none() | st.integers(-5, 5))
        return lay.slice(dim, start, stop, data.draw(st.integers(1, 3)))
    if op == "select":
        dim = data.draw(st.sampled_from([k for k, n in enumerate(lay.sizes) if n >= 1]))
        return lay.select(dim, data.draw(st.integers(-lay.sizes[dim], lay.sizes[dim] - 1)))
    if op == "flip":
        return lay.flip(data.draw(st.sets(st.integers(0, lay.rank - 1))))
    if op == "unfold":
        size = data.draw(st.integers(0, lay.sizes[dim]))
        return lay.unfold(dim, size, data.draw(st.integers(1, 3)))
    if op == "squeeze":
        return lay.squeeze(dim)
    if op == "expand":
        target = [n if n != 1 else data.draw(st.integers(1, 3)) for n in lay.sizes]
        return lay.expand(target)
    return lay.unsqueeze(data.draw(st.integers(0, lay.rank)))


def view_chain(data: st.DataObject, lay: Layout) -> Layout:
    for _ in range(data.draw(st.integers(0, 4), label="steps")):
        if lay.rank >= 8:
            break
        lay = apply_view_op(data, lay)
    return lay


def reshape_merging(data: st.DataObject, p: tuple[int, ...]) -> tuple[int, ...]:
    """Sizes a contiguous tensor of sizes `p` reshapes to along P's own boundaries: split each
    dim into factors, then merge runs of neighbouring factors (across dims) into new dims."""
    factors: list[int] = []
    for n in p:
        divisors = [d for d in range(2, n) if n % d == 0]
        if divisors and data.draw(st.booleans()):
            d = data.draw(st.sampled_from(divisors))
            factors += [n // d, d]
        else:
            factors.append(n)
    sizes: list[int] = []
    for f in factors:
        if sizes and data.draw(st.integers(0, 2)) > 0:
            sizes[-1] *= f
        else:
            sizes.append(f)
    return tuple(sizes)


@st.composite
def affine_walks(draw: st.DrawFn, wd: Layout) -> Layout:
    """A reader affine in P by construction: factors that each step along one P dim (by 1, 2
    or -1) from a base where the whole box fits -- mostly one per P dim in the buffer's
    order, often the whole dim, plus overlapping extras -- then neighbours merged wherever
    their buffer strides chain, so that merged dims must be split back."""
    p = wd.sizes
    span = [0] * len(p)
    steps: list[tuple[int, int, int]] = []  # (size, P dim, step)

    def add(m: int) -> None:
        step = draw(st.sampled_from([1, 1, 1, 2, -1]))
        n = draw(st.sampled_from([2, 3, p[m], p[m], p[m]]))
        if span[m] + (n - 1) * abs(step) <= p[m] - 1:
            span[m] += (n - 1) * abs(step)
            steps.append((n, m, step))

    for m in sorted(range(len(p)), key=lambda m: -abs(wd.strides[m])):
        if draw(st.integers(0, 3)) > 0:
            add(m)
    for _ in range(draw(st.integers(0, 2))):
        add(draw(st.integers(0, len(p) - 1)))
    base = [
        sum((n - 1) * -c for n, mm, c in steps if mm == m and c < 0)
        + draw(st.integers(0, p[m] - 1 - span[m]))
        for m in range(len(p))
    ]
    if draw(st.integers(0, 3)) > 0:
        steps.sort(key=lambda d: -abs(d[2] * wd.strides[d[1]]))
    sizes: list[int] = []
    strides: list[int] = []
    for n, m, c in steps:
        t = c * wd.strides[m]
        if strides and strides[-1] == n * t and draw(st.integers(0, 4)) > 0:
            sizes[-1] *= n
            strides[-1] = t
        else:
            sizes.append(n)
            strides.append(t)
    return Layout(sizes, strides, wd.index_of(base))


def copy_for(wd: Layout, ws: Layout, *readers: Layout, slack: int = 0) -> Copy:
    size = max([wd.min_storage_size()] + [r.min_storage_size() for r in readers]) + slack
    return Copy(wd, ws, size)


# -- properties ---------------------------------------------------------------------------


@SETTINGS
@given(p=writer_sizes(), data=st.data())
def test_views_of_the_copy_result_always_fuse(p: tuple[int, ...], data: st.DataObject) -> None:
    """Permute / slice / select / flip / expand / unfold of what the writer wrote: every
    reader dim walks one P dim (unfold: two readers dims walk the same one), so the
    composition exists and needs no split."""
    wd = data.draw(writer_dsts(p), label="wd")
    ws = data.draw(writer_srcs(p), label="ws")
    reader = view_chain(data, wd)
    comp = check_composition(copy_for(wd, ws, reader), reader, data)
    assert comp is not None, (reader, wd)
    assert not comp.is_refined


@SETTINGS
@given(p=writer_sizes(), data=st.data())
def test_reshapes_along_writer_boundaries_fuse(p: tuple[int, ...], data: st.DataObject) -> None:
    """A reshape of a contiguous result that merges writer dims (and splits them) fuses once
    the merged reader dims are split back at the writer's boundaries; then any permute."""
    wd = Layout.contiguous(p)
    wd = Layout(p, wd.strides, data.draw(st.integers(0, 3)))
    ws = data.draw(writer_srcs(p), label="ws")
    reader = wd.view(reshape_merging(data, p))
    assert reader is not None
    if reader.rank >= 2:
        reader = reader.permute(data.draw(st.permutations(range(reader.rank))))
    comp = check_composition(copy_for(wd, ws, reader), reader, data)
    assert comp is not None, (reader, wd)


@SETTINGS
@given(p=st.lists(SIZES.filter(bool), min_size=1, max_size=4).map(tuple), data=st.data())
def test_readers_affine_after_a_split_fuse(p: tuple[int, ...], data: st.DataObject) -> None:
    """Readers built to be affine in P once split (any base, negative and overlapping
    steps, merged neighbours) always compose."""
    wd = data.draw(writer_dsts(p), label="wd")
    ws = data.draw(writer_srcs(p), label="ws")
    reader = data.draw(affine_walks(wd), label="reader")
    comp = check_composition(copy_for(wd, ws, reader), reader, data)
    assert comp is not None, (reader, wd)


@SETTINGS
@given(p=writer_sizes(), data=st.data())
def test_random_readers_of_the_buffer(p: tuple[int, ...], data: st.DataObject) -> None:
    """as_strided readers anywhere in (and past) the written region: whatever compose
    answers is checked; it is None whenever an unwritten address is read; it is found
    whenever some split of the reader makes the coordinates affine (brute force over all
    splits), and then without a split if none is needed."""
    wd = data.draw(writer_dsts(p), label="wd")
    ws = data.draw(writer_srcs(p), label="ws")
    rank = data.draw(st.integers(0, 3), label="reader rank")
    # Sizes of runs of writer dims too, so that some readers walk across their boundaries.
    runs = [math.prod(p[a:b]) for a in range(len(p)) for b in range(a + 2, len(p) + 1)]
    reader_sizes = SIZES | st.sampled_from(runs) if runs else SIZES
    sizes = tuple(data.draw(st.lists(reader_sizes, min_size=rank, max_size=rank)))
    useful = sorted({abs(s) for s in wd.strides} | {0, 1})
    strides = tuple(
        data.draw(st.sampled_from(useful)) * data.draw(st.sampled_from([1, 1, 2, -1]))
        for _ in range(rank)
    )
    low = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True) if s < 0 and n > 0)
    offset = data.draw(st.integers(0, wd.min_storage_size() + 2), label="offset")
    if wd.numel and data.draw(st.booleans()):  # start at a written element
        offset = wd.index_of([data.draw(st.integers(0, n - 1)) for n in wd.sizes])
    reader = Layout(sizes, strides, max(offset, -low))
    copy = copy_for(wd, ws, reader, slack=2)
    comp = check_composition(copy, reader, data)
    if comp is None:
        assert not some_split_is_affine(copy, reader), (reader, wd)
    elif is_affine(copy, reader):
        assert not comp.is_refined, (reader, wd, comp)


@SETTINGS
@given(p=writer_sizes(), data=st.data())
def test_as_view_keeps_the_requested_strides(p: tuple[int, ...], data: st.DataObject) -> None:
    """When as_view answers, the view has the copy result's strides and reads what the copy
    would have written; when the unsplit source strides equal them, it must answer."""
    wd = data.draw(writer_dsts(p, flips=False), label="wd")
    ws = data.draw(writer_srcs(p), label="ws")
    copy = copy_for(wd, ws)
    view = as_view(wd, wd, ws)
    same = all(n == 1 or a == b for n, a, b in zip(p, ws.strides, wd.strides, strict=True))
    if wd.numel == 0 or same:
        assert view is not None
    if view is None:
        return
    assert view.sizes == wd.sizes
    assert all(n == 1 or a == b for n, a, b in zip(p, view.strides, wd.strides, strict=True))
    assert torch.equal(gather(copy.source, view), gather(copy.buffer, wd))


# -- worked examples ----------------------------------------------------------------------

# The writer of the module docstring: p = (2, 4, 5), Wd contiguous (20, 5, 1), Ws the
# source (5, 4, 2) seen transposed, strides (1, 2, 8).
P245 = (2, 4, 5)
WD245 = Layout.contiguous(P245)
WS245 = Layout(P245, (1, 2, 8))


def test_reader_stride_20_moves_along_p_dim_0() -> None:
    # 7 = {0,1,2}·{20,5,1}; 7 + 20 = 27 = {1,1,2}·{20,5,1}: one step is {1,0,0}.
    reader = Layout((2,), (20,), 7)
    comp = check_composition(copy_for(WD245, WS245, reader), reader)
    assert comp == Composition(
        split=((2,),),
        sizes=(2,),
        # Ws(0,1,2) = 0*1 + 1*2 + 2*8 = 18; the step {1,0,0}·{1,2,8} = 1.
        src=Layout((2,), (1,), 18),
        coord_base=(0, 1, 2),
        coord_map=((1,), (0,), (0,)),
    )


def test_flattened_buffer_splits_at_the_writer_dims() -> None:
    # The buffer read as 40 contiguous elements walks all three writer dims: split (2, 4, 5).
    flat = Layout((40,), (1,), 0)
    comp = check_composition(copy_for(WD245, WS245, flat), flat)
    assert comp is not None
    assert comp.split == ((2, 4, 5),)
    assert comp.src == Layout((2, 4, 5), (1, 2, 8), 0)
    # Every 5th element: 4 steps {0,1,0} fit, then stride 20 steps {1,0,0}.
    every_5th = Layout((8,), (5,), 0)
    comp = check_composition(copy_for(WD245, WS245, every_5th), every_5th)
    assert comp is not None
    assert comp.split == ((2, 4),)
    assert comp.src == Layout((2, 4), (1, 2), 0)
    assert comp.coord_map == ((1, 0), (0, 1), (0, 0))


def test_reshape_merging_two_writer_dims_with_unmergeable_source() -> None:
    # x.permute(1, 0).contiguous().flatten() for x of sizes (2, 3): the writer walks
    # P = (3, 2) reading x with strides (1, 3), which do not merge; the reader (6,) splits.
    p = (3, 2)
    wd, ws = Layout.contiguous(p), Layout(p, (1, 3))
    reader = wd.view((6,))
    assert reader is not None
    comp = check_composition(copy_for(wd, ws, reader), reader)
    assert comp is not None
    assert comp.split == ((3, 2),)
    assert comp.src == Layout((3, 2), (1, 3), 0)


def test_reader_carrying_mid_row_still_composes() -> None:
    # Over p = (3, 4) contiguous, 4 elements from address 2: (0,2) (0,3) (1,0) (1,1).
    # Split (2, 2): the outer step goes from (0,2) to (1,0), i.e. {1,-2}: 4 - 2 = 2.
    p = (3, 4)
    wd = ws = Layout.contiguous(p)
    reader = Layout((4,), (1,), 2)
    comp = check_composition(copy_for(wd, ws, reader), reader)
    assert comp is not None
    assert comp.split == ((2, 2),)
    assert comp.coord_map == ((1, 0), (-2, 1))


def test_nchw4_pack_then_unpack_fuses() -> None:
    # (N, C, H, W) = (2, 8, 3, 5): P = (N, C/4, 4, H, W), Wd the row-major (N, C/4, H, W, 4)
    # seen in P order, Ws the logical NCHW tensor split c = 4*co + ci.
    packing = get_format("NCHW4").packing((2, 8, 3, 5))
    assert packing.space == (2, 2, 4, 3, 5)
    wd, ws = packing.physical, packing.logical
    assert wd.strides == (120, 60, 1, 20, 4)
    # The unpack reads the packed buffer with the same layout over the same space.
    comp = check_composition(copy_for(wd, ws), wd)
    assert comp is not None
    assert not comp.is_refined
    assert comp.src == ws
    assert comp.coord_base == (0,) * 5
    assert comp.coord_map == tuple(tuple(int(m == k) for k in range(5)) for m in range(5))


def test_nchw4_fill_mask_moves_to_the_reader() -> None:
    # C = 6: channels 6 and 7 are padding, the mask 0 <= 4*co + ci < 6. A reader of block
    # co = 1 (channels 4..7) has base co = 1, so the mask over it is -4 <= ci' < 2.
    packing = get_format("NCHW4").packing((1, 6, 2, 2))
    wd, ws = packing.physical, packing.logical
    (bound,) = packing.mask
    block = wd.select(1, 1)  # over (N, 4, H, W)
    comp = check_composition(copy_for(wd, ws, block), block)
    assert comp is not None
    coeffs, lo, hi = compose_mask(bound.coeffs, bound.lo, bound.hi, comp)
    assert (coeffs, lo, hi) == ((0, 1, 0, 0), -4, 2)


def test_reader_touching_pitched_padding_does_not_fuse() -> None:
    # Rows of 4 at pitch 6: addresses 4, 5, 10, 11, ... are never written.
    p = (3, 4)
    wd, ws = Layout.padded(p, 6), Layout.contiguous(p)
    rows = Layout((3, 4), (6, 1), 0)
    assert check_composition(copy_for(wd, ws, rows), rows) is not None
    for reader in (Layout((3, 6), (6, 1), 0), Layout((16,), (1,), 0), Layout((2,), (1,), 3)):
        copy = copy_for(wd, ws, reader)
        assert copy.reads_unwritten(reader)
        assert compose(reader, wd, ws) is None


def test_reader_outside_the_written_region_does_not_fuse() -> None:
    wd = Layout.contiguous((2, 3))
    wd = Layout(wd.sizes, wd.strides, 4)  # writes addresses 4..9
    ws = Layout.contiguous((2, 3))
    for reader in (Layout((2,), (1,), 9), Layout((3,), (1,), 2), Layout((), (), 10)):
        assert compose(reader, wd, ws) is None
    assert compose(Layout((), (), 9), wd, ws) is not None


def test_broadcast_destination_is_not_injective() -> None:
    wd = Layout((3, 2), (0, 1))
    assert compose(Layout((2,), (1,), 0), wd, Layout.contiguous((3, 2))) is None


def test_empty_and_scalar_readers() -> None:
    wd, ws = WD245, WS245
    for sizes in ((0,), (3, 0, 2), (0, 0)):
        reader = Layout(sizes, (1,) * len(sizes), 100)
        comp = compose(reader, wd, ws)
        assert comp is not None
        assert comp.sizes == sizes and comp.src.sizes == sizes
        assert comp.split == tuple((n,) for n in sizes)
    # An empty writer: an empty reader still composes, any element read does not.
    nothing = Layout.contiguous((2, 0))
    assert compose(Layout((0,), (1,), 0), nothing, nothing) is not None
    assert compose(Layout((), (), 0), nothing, nothing) is None
    scalar = Layout((), (), 37)  # {1,3,2}·{20,5,1} = 37
    comp = check_composition(copy_for(wd, ws, scalar), scalar)
    assert comp is not None
    assert comp.coord_base == (1, 3, 2)
    assert comp.src == Layout((), (), 1 * 1 + 3 * 2 + 2 * 8)


def test_split_past_the_rank_limit_is_refused() -> None:
    # (6, 1, ..., 1) of rank MAX_RANK over a (2, 3) writer would need MAX_RANK + 1 dims.
    p = (2, 3)
    reader = Layout((6,) + (1,) * (MAX_RANK - 1), (1,) * MAX_RANK, 0)
    assert compose(reader, Layout.contiguous(p), Layout.contiguous(p)) is None
    assert compose(Layout((6,), (1,), 0), Layout.contiguous(p), Layout.contiguous(p)) is not None


def test_refine_strides_and_errors() -> None:
    lay = Layout((12, 5), (10, 2), 3)
    # (3, 2, 2) of stride 10: (2*2*10, 2*10, 10) = (40, 20, 10).
    assert refine(lay, ((3, 2, 2), (5,))) == Layout((3, 2, 2, 5), (40, 20, 10, 2), 3)
    with pytest.raises(LayoutError, match="multiply to its size 12"):
        refine(lay, ((5, 2), (5,)))
    with pytest.raises(LayoutError, match="rank 2"):
        refine(lay, ((12,),))
    with pytest.raises(LayoutError, match=r"\(2, 3\)"):
        compose(lay, Layout.contiguous((2, 3)), Layout.contiguous((3, 2)))


def test_as_view_examples() -> None:
    # x.contiguous() of a contiguous x is x, offset included.
    x = Layout((2, 3, 4), (12, 4, 1), 5)
    result = Layout.contiguous(x.sizes)
    assert as_view(result, result, x) == x
    # x.permute(2, 0, 1).contiguous(): the source seen in P order has strides (1, 12, 4).
    permuted = x.permute((2, 0, 1))
    result = Layout.contiguous(permuted.sizes)
    assert as_view(result, result, permuted) is None
    # NHWC storage seen as NHWC logical, copied to contiguous NHWC: a view.
    nhwc = Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1)).permute((0, 2, 3, 1))
    result = Layout.contiguous(nhwc.sizes)
    assert as_view(result, result, nhwc) == nhwc
    # Rows of a contiguous tensor are contiguous; a column slice is not.
    y = Layout.contiguous((4, 6))
    rows, cols = y.slice(0, 1, 3), y.slice(1, 1, 3)
    assert as_view(Layout.contiguous(rows.sizes), Layout.contiguous(rows.sizes), rows) == Layout(
        (2, 6), (6, 1), 6
    )
    assert as_view(Layout.contiguous(cols.sizes), Layout.contiguous(cols.sizes), cols) is None
    # A size-1 dim keeps the requested stride; an empty copy is always a view.
    one = Layout((3, 1), (1, 7), 2)
    assert as_view(Layout.contiguous((3, 1)), Layout.contiguous((3, 1)), one) == Layout(
        (3, 1), (1, 1), 2
    )
    assert as_view(Layout.contiguous((0, 2)), Layout.contiguous((0, 2)), Layout((0, 2), (5, 9)))


# -- symbolic sizes: a batch N outside the writer's dims ------------------------------------

N = symbol("N")


def _batched(inner: Layout, stride: int) -> Layout:
    """`inner` with an outermost dim of the symbolic size N at `stride`."""
    return Layout((N, *inner.sizes), (stride, *inner.strides), inner.offset)


@SETTINGS
@given(p=st.lists(SIZES.filter(bool), max_size=3).map(tuple), data=st.data())
def test_symbolic_compositions_hold_at_every_batch(p: tuple[int, ...], data: st.DataObject) -> None:
    """A writer over (N, *p) (N outermost), a reader that is any view of what it wrote with
    N walked whole and the dims maybe permuted: the composition over symbolic sizes is
    found, and evaluated at N = 2, 3, 5 it reads from the source what the reader reads
    from the buffer, as the static composition does; so does `image_box`."""
    wd_inner = data.draw(writer_dsts(p), label="wd")
    ws_inner = data.draw(writer_srcs(p), label="ws")
    wd = _batched(wd_inner, wd_inner.min_storage_size() + data.draw(st.integers(0, 2)))
    ws = _batched(ws_inner, data.draw(st.sampled_from([0, ws_inner.min_storage_size() + 1])))
    inner = view_chain(data, wd_inner)
    if inner.rank >= MAX_RANK:
        return
    reader = _batched(inner, wd.strides[0])
    if data.draw(st.booleans(), label="permute"):
        reader = reader.permute(data.draw(st.permutations(range(reader.rank))))
    comp = compose(reader, wd, ws)
    assert comp is not None, (reader, wd)
    box = image_box(reader, wd)
    for n in (2, 3, 5):
        at = {"N": n}
        wd_n, ws_n, reader_n = wd.evaluate(at), ws.evaluate(at), reader.evaluate(at)
        copy = copy_for(wd_n, ws_n, reader_n)
        split = evaluate(comp.split, at)
        direct = gather(copy.source, comp.src.evaluate(at))
        assert torch.equal(direct, gather(copy.buffer, refine(reader_n, split))), (n, comp)
        assert compose(reader_n, wd_n, ws_n) is not None
        if box is not None:
            assert evaluate(box, at) == image_box(reader_n, wd_n), (n, reader, wd)


def test_symbolic_boxes() -> None:
    """Rows N.. of a contiguous (N + M, 6) are a box for every N and M; rows 1.. of (N, 6)
    are not one the proofs can place (N - 1 rows may be none), and a whole batch cut
    where a writer of rows [0, N) ends is cut at N."""
    m = symbol("M")
    whole = Layout.contiguous((N + m, 6))
    rows = Layout((m, 6), (6, 1), 6 * N)
    assert box_of(rows, whole) == ((N, N + m), (0, 6))
    assert image_box(rows, whole) == ((N, N + m), (0, 6))
    assert evaluate(image_box(rows, whole), {"N": 3, "M": 2}) == image_box(
        rows.evaluate({"N": 3, "M": 2}), whole.evaluate({"N": 3, "M": 2}))
    inside, outside = split_box(((0, N + m), (0, 6)), [MaskBound((1, 0), 0, N)], 8)
    assert inside == [((0, N), (0, 6))] and outside == [((N, N + m), (0, 6))]
    assert split_box(((0, N), (0, 6)), [MaskBound((1, 0), 0, 3)], 8) is None  # N < 3?
    # The same cut through a negative coefficient: 1 - N <= -i < 1 is i in [0, N).
    inside, outside = split_box(((0, N + m), (0, 6)), [MaskBound((-1, 0), 1 - N, 1)], 8)
    assert inside == [((0, N), (0, 6))] and outside == [((N, N + m), (0, 6))]


@SETTINGS
@given(p=st.lists(SIZES.filter(bool), min_size=1, max_size=3).map(tuple), data=st.data())
def test_compose_pieces_cut_readers_that_cross_the_writer(
    p: tuple[int, ...], data: st.DataObject
) -> None:
    """Readers of runs across the writer's dims (a reshape of a slice, as a roll of
    window_reverse reads): when compose_pieces answers, its boxes tile the reader's space
    and each one's composition reads from the source what the reader reads there."""
    wd = Layout.contiguous(p)
    ws = data.draw(writer_srcs(p), label="ws")
    start = data.draw(st.integers(0, wd.numel - 1), label="start")
    length = data.draw(st.integers(1, wd.numel - start), label="length")
    reader = Layout((length,), (1,), start)  # a run of the buffer's addresses
    if data.draw(st.booleans(), label="rows") and p[-1] > 1:  # or of its rows, whole
        rows = Layout.contiguous((wd.numel // p[-1], p[-1]))
        first = data.draw(st.integers(0, rows.sizes[0] - 1), label="first row")
        count = data.draw(st.integers(1, rows.sizes[0] - first), label="rows")
        reader = Layout((count, p[-1]), rows.strides, first * p[-1])
    copy = copy_for(wd, ws, reader)
    pieces = compose_pieces(reader, wd, ws, 64)
    assert pieces is not None, (reader, wd)
    covered = torch.zeros(reader.sizes, dtype=torch.int64)
    for box, comp in pieces:
        part = restrict(reader, box)
        covered[tuple(slice(lo, hi) for lo, hi in box)] += 1
        refined = refine(part, comp.split)
        assert torch.equal(gather(copy.source, comp.src), gather(copy.buffer, refined))
    assert bool((covered == 1).all())


def test_compose_pieces_of_a_window_reverse() -> None:
    """Rows 0..10 of windows of 7 (the window_reverse buffer (2, 7, C) read through 14
    rows): cut at row 7, where the first window ends; rows 0..13 need no cut (split)."""
    wd = Layout.contiguous((2, 7, 3))
    ws = Layout((2, 7, 3), (3, 6, 1))  # the windows' source, transposed
    rows = Layout((11, 3), (3, 1), 0)
    pieces = compose_pieces(rows, wd, ws, 8)
    assert [box for box, _ in pieces] == [((0, 7), (0, 3)), ((7, 11), (0, 3))]
    assert [comp.src.offset for _, comp in pieces] == [0, 3]
    assert compose(Layout((14, 3), (3, 1), 0), wd, ws).split == ((2, 7), (3,))
    # Rows 0..52 of 8 windows of 7: the first run is a whole window, so the cut is after
    # the 7 whole windows that fit (one split (7, 7)), not after each window.
    wd8, ws8 = Layout.contiguous((8, 7, 3)), Layout.contiguous((8, 7, 3))
    pieces = compose_pieces(Layout((53, 3), (3, 1), 0), wd8, ws8, 8)
    assert [box for box, _ in pieces] == [((0, 49), (0, 3)), ((49, 53), (0, 3))]
    assert pieces[0][1].split == ((7, 7), (3,))
