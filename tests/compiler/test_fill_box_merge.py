"""A fill followed by a box copy into it runs as one masked copy (`fill_then_box_copy`).

Spec level: the merged copy must leave every destination address holding what the two
copies in sequence leave there (brute force over small boxes, as the other spec rewrites
are checked). Graph level: `pad` lowers to one kernel whose output equals `F.pad`, on
contiguous and strided inputs; fills that something else reads stay separate kernels.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler.codegen.spec import CopySpec, MaskBound, fill_then_box_copy
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
    g.output(stridec.pad(v, pad, fill=value))
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
