"""A fill followed by a box copy into it runs as one masked copy (`fill_then_box_copy`),
and a fill followed by several, each in its own part of the fill, as one such copy per
part (`fill_around_box_copies`). The `merge-fills` pass makes them framed copies in the
IR (tests/passes/merge-fills.ir); lowering only runs what the IR says.

Spec level: the merged copies must leave every destination address holding what the
copies in sequence leave there (brute force over small boxes, as the other spec rewrites
are checked), and write disjoint boxes. Graph level: `pad` lowers to one kernel whose
output equals `F.pad`, on contiguous and strided inputs, and so does a pad of a cat; fills
that something else reads stay separate kernels.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler.codegen.spec import (
    CopySpec,
    MaskBound,
    dst_box,
    fill_around_box_copies,
    fill_parts,
    fill_then_box_copy,
    fills_around_box_copies,
)
from stridec.ir.dtypes import DTYPES

f32 = DTYPES["float32"]
NEVER = 1  # a fill copy's mask: coeffs 0, valid in [1, 1) -- never


def contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def run_sequence(specs: list[CopySpec]) -> dict[int, object]:
    """Destination address -> ("src", address) or ("fill", value), copies applied in order."""
    out: dict[int, object] = {}
    for spec in specs:
        for i in itertools.product(*(range(n) for n in spec.sizes)):
            ok = all(
                m.lo <= sum(c * x for c, x in zip(m.coeffs, i, strict=True)) < m.hi
                for m in spec.masks
            )
            d = spec.dst_offset + sum(x * s for x, s in zip(i, spec.dst_strides, strict=True))
            if ok:
                s = spec.src_offset + sum(x * s for x, s in zip(i, spec.src_strides, strict=True))
                out[d] = ("src", s)
            elif spec.fill is not None:
                out[d] = ("fill", spec.fill)
    return out


def fill_spec(sizes: tuple[int, ...], value: float, offset: int = 0) -> CopySpec:
    rank = len(sizes)
    return CopySpec(
        sizes, (0,) * rank, 0, contiguous(sizes), offset, f32, f32,
        (MaskBound((0,) * rank, NEVER, NEVER),), value,
    )  # fmt: skip


@st.composite
def fill_and_box(draw):
    rank = draw(st.integers(1, 3))
    sizes = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    box = tuple(draw(st.integers(1, n)) for n in sizes)
    start = tuple(draw(st.integers(0, n - b)) for n, b in zip(sizes, box, strict=True))
    offset = draw(st.integers(0, 3))
    fill = fill_spec(sizes, -1.5, offset)
    dst = contiguous(sizes)
    src_strides = tuple(draw(st.integers(-3, 6)) for _ in range(rank))
    low = sum(min(0, (b - 1) * s) for b, s in zip(box, src_strides, strict=True))
    masks: tuple[MaskBound, ...] = ()
    copy_fill = None
    if draw(st.booleans()):
        coeffs = tuple(draw(st.sampled_from((0, 1, -1, 2))) for _ in range(rank))
        lo = draw(st.integers(-1, 2))
        masks = (MaskBound(coeffs, lo, lo + draw(st.integers(1, 4))),)
        copy_fill = draw(st.sampled_from((None, -1.5, 7.0)))
    copy = CopySpec(
        box, src_strides, -low + draw(st.integers(0, 2)),
        dst, offset + sum(s * k for s, k in zip(dst, start, strict=True)), f32, f32,
        masks, copy_fill,
    )  # fmt: skip
    return fill, copy


@settings(max_examples=300, deadline=None)
@given(fill_and_box())
def test_merged_copy_leaves_what_fill_then_copy_leave(pair):
    fill, copy = pair
    merged = fill_then_box_copy(fill, copy)
    if copy.masks and copy.fill not in (None, fill.fill):
        assert merged is None  # two fill values cannot be one copy's
        return
    assert merged is not None
    assert merged.sizes == fill.sizes and merged.fill == fill.fill
    assert run_sequence([merged]) == run_sequence([fill, copy])


def test_a_copy_that_is_not_a_box_of_the_fill_is_not_merged():
    fill = fill_spec((4, 5), 0.0)
    # Destination strides differ from the fill's (a transposed write): no box.
    transposed = CopySpec((5, 4), (4, 1), 0, (1, 5), 0, f32, f32)
    assert fill_then_box_copy(fill, transposed) is None
    # A box that would stick out of the fill's space.
    outside = CopySpec((2, 5), (5, 1), 0, (5, 1), 15, f32, f32)
    assert fill_then_box_copy(fill, outside) is None
    # Another dtype written into the buffer.
    cast = CopySpec((2, 2), (2, 1), 0, (5, 1), 0, f32, DTYPES["float16"])
    assert fill_then_box_copy(fill, cast) is None


def _pad_graph(sizes, pad, value, permute=None):
    g = stridec.Graph("pad")
    x = g.input("x", sizes, "float32")
    v = x.permute(*permute) if permute else x
    g.output(stridec.pad(v, pad, value=value))
    return g


@pytest.mark.parametrize(
    "sizes,pad,permute",
    [
        ((3, 5), (1, 2), None),
        ((4, 3, 5), (2, 1, 0, 3), None),
        ((3, 5), (-1, 2), None),  # a negative pad crops
        ((2, 4, 6), (3, -2, 1, 0), None),
        ((5, 3), (1, 1, 2, 0), (1, 0)),  # a transposed input
        ((2, 3, 4), (0, 0, 0, 0, 1, 1), (2, 0, 1)),
    ],
)
def test_pad_is_one_kernel_equal_to_torch(sizes, pad, permute):
    g = _pad_graph(sizes, pad, -2.5, permute)
    fn = stridec.compile(g)
    x = torch.randn(sizes)
    assert fn.plan_for(x).launches == 1
    view = x.permute(*permute) if permute else x
    assert torch.equal(fn(x), F.pad(view, pad, value=-2.5))


def test_a_filled_buffer_read_by_two_ops_keeps_its_fill_kernel():
    """`full` read as an output and as a copy's source: nothing to absorb it into."""
    g = stridec.Graph("full_twice")
    x = g.input("x", (3, 4), "float32")
    z = g.full((3, 4), 2.0, "float32")
    g.output(z, stridec.cat([z, x], 0))
    fn = stridec.compile(g)
    x_t = torch.randn(3, 4)
    z_out, cat_out = fn(x_t)
    z_ref = torch.full((3, 4), 2.0)
    assert torch.equal(z_out, z_ref) and torch.equal(cat_out, torch.cat([z_ref, x_t], 0))


# ------------------------------------------------- one fill, several box copies inside it


def _guillotine_boxes(draw, region, depth):
    """Boxes inside `region` that planes separate: cut it in two along a random dim, or
    stop and take one random box inside."""
    cuttable = [k for k, (lo, hi) in enumerate(region) if hi - lo > 1]
    if depth and cuttable and draw(st.booleans()):
        k = draw(st.sampled_from(cuttable))
        lo, hi = region[k]
        cut = draw(st.integers(lo + 1, hi - 1))
        low = region[:k] + ((lo, cut),) + region[k + 1:]
        high = region[:k] + ((cut, hi),) + region[k + 1:]
        return _guillotine_boxes(draw, low, depth - 1) + _guillotine_boxes(draw, high, depth - 1)
    box = []
    for lo, hi in region:
        a = draw(st.integers(lo, hi - 1))
        box.append((a, draw(st.integers(a + 1, hi))))
    return [tuple(box)]


@st.composite
def fill_and_boxes(draw):
    rank = draw(st.integers(1, 3))
    sizes = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    offset = draw(st.integers(0, 3))
    fill = fill_spec(sizes, -1.5, offset)
    dst = contiguous(sizes)
    boxes = _guillotine_boxes(draw, tuple((0, n) for n in sizes), 3)
    boxes = draw(st.permutations(boxes))
    copies = []
    for box in boxes:
        extent = tuple(b - a for a, b in box)
        src_strides = tuple(draw(st.integers(-3, 6)) for _ in range(rank))
        low = sum(min(0, (n - 1) * s) for n, s in zip(extent, src_strides, strict=True))
        masks: tuple[MaskBound, ...] = ()
        if draw(st.booleans()):
            coeffs = tuple(draw(st.sampled_from((0, 1, -1))) for _ in range(rank))
            lo = draw(st.integers(-1, 2))
            masks = (MaskBound(coeffs, lo, lo + draw(st.integers(1, 3))),)
        copies.append(CopySpec(
            extent, src_strides, -low + draw(st.integers(0, 2)),
            dst, offset + sum(s * a for s, (a, _) in zip(dst, box, strict=True)), f32, f32,
            masks, draw(st.sampled_from((None, -1.5))) if masks else 0,
        ))  # fmt: skip
    return fill, copies


@settings(max_examples=300, deadline=None)
@given(fill_and_boxes())
def test_parts_leave_what_the_fill_then_the_copies_leave(case):
    fill, copies = case
    merged = fill_around_box_copies(fill, copies)
    assert merged is not None and len(merged) == len(copies)
    assert run_sequence(merged) == run_sequence([fill, *copies])
    # The parts tile the fill's space: disjoint boxes of it, together all of it.
    boxes = [dst_box(m, fill.sizes, fill.dst_strides, fill.dst_offset) for m in merged]
    assert all(b is not None for b in boxes)
    assert sum(m.numel for m in merged) == fill.numel
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            pairs = zip(a, b, strict=True)
            assert any(hi0 <= lo1 or hi1 <= lo0 for (lo0, hi0), (lo1, hi1) in pairs)


@settings(max_examples=300, deadline=None)
@given(fill_and_boxes(), st.data())
def test_asking_whether_the_parts_merge_answers_as_merging_them(case, data):
    """`merge-fills` hands `fill_parts` the boxes it found and asks
    `fills_around_box_copies`, which builds no copy: the parts are those found without
    the boxes, and the answer is whether `fill_around_box_copies` builds the copies, also
    for a copy that cannot merge (another dtype, masked points written with another
    value, another type of the same value)."""
    fill, copies = case
    k = data.draw(st.integers(0, len(copies) - 1))
    change = data.draw(st.sampled_from(("none", "dtype", "fill", "fill type")))
    if change == "dtype":
        copies[k] = dataclasses.replace(copies[k], dst_dtype=DTYPES["float16"])
    elif change == "fill" and copies[k].masks:
        copies[k] = dataclasses.replace(copies[k], fill=2.5)
    elif change == "fill type" and copies[k].masks:
        fill = dataclasses.replace(fill, fill=-1)  # the copies' -1.5 is no int
    parts = fill_parts(fill, copies)
    assert parts is not None
    assert fill_parts(fill, copies, [box for _, box in parts]) == parts
    merged = fill_around_box_copies(fill, copies, parts)
    assert fills_around_box_copies(fill, copies, parts) == (merged is not None)
    if change == "none":
        assert merged is not None


def _box_copy(sizes, start, extent):
    dst = contiguous(sizes)
    offset = sum(s * a for s, a in zip(dst, start, strict=True))
    return CopySpec(extent, contiguous(extent), 0, dst, offset, f32, f32)


def test_boxes_that_meet_or_no_plane_separates_are_not_merged():
    fill = fill_spec((3, 3), 0.0)
    meeting = [_box_copy((3, 3), (0, 0), (2, 2)), _box_copy((3, 3), (1, 1), (2, 2))]
    assert fill_around_box_copies(fill, meeting) is None
    # A pinwheel around the centre: every cut along a row or a column splits some box.
    pinwheel = [
        _box_copy((3, 3), (0, 0), (1, 2)),
        _box_copy((3, 3), (0, 2), (2, 1)),
        _box_copy((3, 3), (2, 1), (1, 2)),
        _box_copy((3, 3), (1, 0), (2, 1)),
    ]
    assert fill_around_box_copies(fill, pinwheel) is None
    # A copy that writes across the fill's strides is no box of it.
    assert fill_around_box_copies(fill, [CopySpec((3, 3), (3, 1), 0, (1, 3), 0, f32, f32)]) is None
    assert fill_around_box_copies(fill, []) is None


def test_a_pad_of_a_cat_is_one_kernel_equal_to_torch():
    """pad's fill, then the cat's two copies into it: one part of the fill each."""
    g = stridec.Graph("pad_cat")
    x, y = g.input("x", (3, 2, 4), "float32"), g.input("y", (3, 3, 4), "float32")
    g.output(stridec.pad(stridec.cat([x, y], 1), (1, 2, 2, 0), value=-1.0))
    fn = stridec.compile(g)
    tx, ty = torch.randn(3, 2, 4), torch.randn(3, 3, 4).transpose(0, 2).contiguous().transpose(0, 2)
    assert fn.plan_for(tx, ty).launches == 1
    assert torch.equal(fn(tx, ty), F.pad(torch.cat([tx, ty], 1), (1, 2, 2, 0), value=-1.0))


def test_the_merge_is_the_pass_not_lowering():
    """Without `merge-fills` in the pipeline, a pad is its fill and its copy: two kernels
    (the copy's box meets the fill's, so they cannot batch); with it, one. Both equal
    F.pad."""
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE

    g = stridec.Graph("pad")
    g.output(stridec.pad(g.input("x", (3, 4), "float32"), (1, 2, 0, 1), value=0.5))
    tx = torch.randn(3, 4)
    without = DEFAULT_PIPELINE.replace(",merge-fills", "")
    assert without != DEFAULT_PIPELINE
    counts = []
    for pipeline in (without, DEFAULT_PIPELINE):
        fn = stridec.compile(g, pipeline=pipeline)
        counts.append(fn.plan_for(tx).launches)
        assert torch.equal(fn(tx), F.pad(tx, (1, 2, 0, 1), value=0.5))
    assert counts == [2, 1]


FRAMED = (
    "graph @pad_of_cat {\n"
    '  %a = input {name = "a"} : tensor<2x3xf32>\n'
    '  %b = input {name = "b"} : tensor<2x4xf32>\n'
    "  %0 = framed_copy %a {layout = strided<[10, 1], offset: 0>, space = [2, 3], "
    "src = strided<[3, 1], offset: 0>, dst = strided<[10, 1], offset: 1>, fill = 7.0, "
    "frame = [[0, 0], [1, 0]]} : tensor<2x10xf32>\n"
    "  %1 = framed_copy %b, %0 {space = [2, 4], src = strided<[4, 1], offset: 0>, "
    "dst = strided<[10, 1], offset: 4>, fill = 7.0, frame = [[0, 0], [0, 2]]} : tensor<2x10xf32>\n"
    "  output %1\n"
    "}\n"
)


@pytest.mark.parametrize("backend", ["reference", "interpret", "cpu"])
def test_framed_copies_as_written_equal_f_pad(backend):
    """Framed copies in the text IR, run with no pipeline: the reference executor writes
    each frame, lowering makes each a masked copy (one batched kernel)."""
    a, b = torch.randn(2, 3), torch.randn(2, 4)
    fn = stridec.compile(stridec.parse(FRAMED), backend=backend, pipeline="")
    assert torch.equal(fn(a, b), F.pad(torch.cat([a, b], 1), (1, 2), value=7.0))
    if backend != "reference":
        assert fn.plan_for(a, b).launches == 1
