"""A copy that reads a buffer several copies assembled (a cat's, a pad's fill and box
copy) becomes one copy per writer, each over its box of the consumer's space
(`fuse-copies`, `plan_assembled`), and lowering runs them as one kernel.

Graph level: each chain, compiled for the CPU (Triton's interpreter), equals the same
computation in torch -- packs through `bench/workloads.pack_eager`, torch's own way to
pack -- and takes the launches stated; inputs come contiguous and strided. Cases that
must not fuse stay correct. Index level: `split_box`, `box_of` and `image_box` against
brute force over every coordinate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from bench.workloads import pack_eager
from stridec.compiler.pass_manager import PassManager
from stridec.ir.affine import MaskBound
from stridec.ir.index_maps import box_of, image_box, split_box
from stridec.ir.layout import Layout

cat, pad = stridec.cat, stridec.pad


def _inputs(shapes: Sequence[tuple[int, ...]], strided: bool, dtype: torch.dtype) -> list:
    """Random tensors; `strided` ones are every other element of a bigger, transposed
    storage (strides neither contiguous nor positive-ordered)."""
    gen = torch.Generator().manual_seed(sum(map(sum, shapes)))
    out = []
    for shape in shapes:
        if strided:
            big = torch.randn(*(2 * n for n in reversed(shape)), generator=gen)
            every_other = tuple(slice(None, None, 2) for _ in shape)
            t = big.permute(*reversed(range(len(shape))))[every_other]
        else:
            t = torch.randn(*shape, generator=gen)
        out.append(t.to(dtype))
    return out


def _check(
    build: Callable[..., Any],
    oracle: Callable[..., torch.Tensor],
    shapes: Sequence[tuple[int, ...]],
    launches: int,
    dtype: str = "float32",
) -> None:
    g = stridec.Graph("chain")
    values = [g.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    g.output(build(*values))
    fn = stridec.compile(g)
    for strided in (False, True):
        xs = _inputs(shapes, strided, stridec.as_dtype(dtype).torch)
        assert fn.plan_for(*xs).launches == launches, fn.plan_for(*xs).ir
        got, want = fn(*xs), oracle(*xs)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want), (got, want)


NCHW_A, NCHW_B = (2, 2, 3, 5), (2, 4, 3, 5)

# (name, stridec chain, torch oracle, input shapes, launches: one per chain)
CHAINS: list[tuple[str, Callable[..., Any], Callable[..., torch.Tensor], list, int]] = [
    (
        "cat then NHWC",
        lambda a, b: cat([a, b], 1).permute(0, 2, 3, 1).contiguous(),
        lambda a, b: torch.cat([a, b], 1).permute(0, 2, 3, 1).contiguous(),
        [NCHW_A, NCHW_B], 1,
    ),
    (
        "cat then NCHW4, C = 2 + 4 (a block holds both inputs, one is padded)",
        lambda a, b: cat([a, b], 1).pack("NCHW4"),
        lambda a, b: pack_eager(torch.cat([a, b], 1), "NCHW4"),
        [NCHW_A, NCHW_B], 1,
    ),
    (
        "cat then NCHW4, C = 4 + 4",
        lambda a, b: cat([a, b], 1).pack("NCHW4"),
        lambda a, b: pack_eager(torch.cat([a, b], 1), "NCHW4"),
        [(2, 4, 3, 5), (2, 4, 3, 5)], 1,
    ),
    (
        "cat of three then NCHW32, C = 5 + 30 + 1",
        lambda a, b, c: cat([a, b, c], 1).pack("NCHW32"),
        lambda a, b, c: pack_eager(torch.cat([a, b, c], 1), "NCHW32"),
        [(1, 5, 2, 3), (1, 30, 2, 3), (1, 1, 2, 3)], 1,
    ),
    (
        "cat then NCHW64, C = 5 + 70",
        lambda a, b: cat([a, b], 1).pack("NCHW64"),
        lambda a, b: pack_eager(torch.cat([a, b], 1), "NCHW64"),
        [(1, 5, 2, 3), (1, 70, 2, 3)], 1,
    ),
    (
        "cat then CHWN4",
        lambda a, b: cat([a, b], 1).pack("CHWN4"),
        lambda a, b: F.pad(torch.cat([a, b], 1), (0, 0, 0, 0, 0, 2))
        .reshape(2, 2, 4, 3, 5).permute(1, 3, 4, 0, 2).contiguous(),
        [NCHW_A, NCHW_B], 1,
    ),
    (
        "cat of pads",
        lambda a, b: cat([pad(a, (1, 1)), pad(b, (2, 0))], 0),
        lambda a, b: torch.cat([F.pad(a, (1, 1)), F.pad(b, (2, 0))], 0),
        [(2, 3), (3, 3)], 1,
    ),
    (
        "cat of a tensor and a pad (the fill goes before the first copy)",
        lambda a, b: cat([b, pad(a, (1, 1))], 0),
        lambda a, b: torch.cat([b, F.pad(a, (1, 1))], 0),
        [(2, 3), (3, 5)], 1,
    ),
    (
        "pad of a cat",
        lambda a, b: pad(cat([a, b], 1), (1, 2)),
        lambda a, b: F.pad(torch.cat([a, b], 1), (1, 2)),
        [(2, 3), (2, 4)], 1,
    ),
    (
        "cat of a transpose, transposed back",
        lambda a, b: cat([a.t(), b], 0).t().contiguous(),
        lambda a, b: torch.cat([a.t(), b], 0).t().contiguous(),
        [(3, 2), (4, 3)], 1,
    ),
    (
        "pad of a cat then NHWC",
        lambda a, b: pad(cat([a, b], 1), (1, 1, 1, 1)).permute(0, 2, 3, 1).contiguous(),
        lambda a, b: F.pad(torch.cat([a, b], 1), (1, 1, 1, 1)).permute(0, 2, 3, 1).contiguous(),
        [NCHW_A, NCHW_B], 1,
    ),
    (
        "cat of pads then NHWC",
        lambda a, b: cat([pad(a, (1, 1, 1, 1)), pad(b, (1, 1, 1, 1))], 1)
        .permute(0, 2, 3, 1).contiguous(),
        lambda a, b: torch.cat([F.pad(a, (1, 1, 1, 1)), F.pad(b, (1, 1, 1, 1))], 1)
        .permute(0, 2, 3, 1).contiguous(),
        [NCHW_A, NCHW_B], 1,
    ),
    (
        "cat of a pad, a tensor and a pad, then NHWC (the first fill widens past the tensor)",
        lambda a, b, c: cat([pad(a, (1, 1, 1, 1)), b, pad(c, (1, 1, 1, 1))], 1)
        .permute(0, 2, 3, 1).contiguous(),
        lambda a, b, c: torch.cat([F.pad(a, (1, 1, 1, 1)), b, F.pad(c, (1, 1, 1, 1))], 1)
        .permute(0, 2, 3, 1).contiguous(),
        [(2, 2, 3, 4), (2, 3, 5, 6), (2, 1, 3, 4)], 1,
    ),
    (
        "pad of a cat then NCHW4",
        lambda a, b: pad(cat([a, b], 1), (1, 1)).pack("NCHW4"),
        lambda a, b: pack_eager(F.pad(torch.cat([a, b], 1), (1, 1)), "NCHW4"),
        [(2, 1, 3, 4), (2, 2, 3, 4)], 1,
    ),
    (
        "a slice of a cat (the first input is not read)",
        lambda a, b, c: cat([a, b, c], 0)[3:5].contiguous(),
        lambda a, b, c: torch.cat([a, b, c], 0)[3:5].contiguous(),
        [(3, 4), (1, 4), (2, 4)], 1,
    ),
    (
        "a flipped cat",
        lambda a, b: cat([a, b], 1).flip(1).contiguous(),
        lambda a, b: torch.cat([a, b], 1).flip(1).contiguous(),
        [(3, 4), (3, 2)], 1,
    ),
    (
        "pad then transpose",
        lambda a: pad(a, (2, 1), value=2.5).t().contiguous(),
        lambda a: F.pad(a, (2, 1), value=2.5).t().contiguous(),
        [(3, 4)], 1,
    ),
]


@pytest.mark.parametrize(
    "build,oracle,shapes,launches", [c[1:] for c in CHAINS], ids=[c[0] for c in CHAINS]
)
def test_chain_equals_torch_in_the_launches_stated(build, oracle, shapes, launches) -> None:
    _check(build, oracle, shapes, launches)


def test_a_cast_moves_into_the_pieces() -> None:
    _check(
        lambda a, b: cat([a, b], 1).permute(0, 2, 3, 1).contiguous().to("float16"),
        lambda a, b: torch.cat([a, b], 1).permute(0, 2, 3, 1).contiguous().half(),
        [NCHW_A, NCHW_B], 1,
    )  # fmt: skip


def test_integer_pack_of_a_cat() -> None:
    _check(
        lambda a, b: cat([a, b], 1).pack("NCHW4"),
        lambda a, b: pack_eager(torch.cat([a, b], 1), "NCHW4"),
        [(1, 3, 2, 3), (1, 2, 2, 3)], 1, dtype="int8",
    )  # fmt: skip


def test_a_full_read_through_a_transpose_is_one_fill() -> None:
    g = stridec.Graph("full_t")
    g.output(g.full((3, 4), 1.5, "float32").t().contiguous())
    fn = stridec.compile(g)
    assert fn.plan_for().launches == 1
    assert torch.equal(fn(), torch.full((4, 3), 1.5))


# ----------------------------------------------------------- what must not fuse, still right


def test_a_cat_that_is_also_returned_stays_and_is_read_as_it_was() -> None:
    """The cat buffer is an output: it is written anyway, so its reader keeps reading it
    (two launches, as before) and both results equal torch's."""
    g = stridec.Graph("cat_out")
    a, b = g.input("a", (2, 3), "float32"), g.input("b", (1, 3), "float32")
    c = cat([a, b], 0)
    g.output(c, c.t().contiguous())
    fn = stridec.compile(g)
    ta, tb = torch.randn(2, 3), torch.randn(1, 3)
    assert fn.plan_for(ta, tb).launches == 2
    got_c, got_t = fn(ta, tb)
    assert torch.equal(got_c, torch.cat([ta, tb])) and torch.equal(got_t, torch.cat([ta, tb]).t())


def test_pads_of_two_fill_values_are_one_launch() -> None:
    """One buffer can start with one fill only: the second pad's fill rides on its copy
    as a frame."""
    _check(
        lambda a, b: cat([pad(a, (1, 1), value=1.0), pad(b, (2, 0), value=2.0)], 0),
        lambda a, b: torch.cat([F.pad(a, (1, 1), value=1.0), F.pad(b, (2, 0), value=2.0)], 0),
        [(2, 3), (3, 3)], 1,
    )  # fmt: skip


def test_a_read_across_the_cat_dim_is_one_launch() -> None:
    """reshape merges c with h: the buffer's coordinates are an affine map of the reader's
    once its merged dim is split as (c, h), and the split reader is cut at the cat."""
    _check(
        lambda a, b: cat([a, b], 1).reshape(2, -1).t().contiguous(),
        lambda a, b: torch.cat([a, b], 1).reshape(2, -1).t().contiguous(),
        [(2, 2, 3), (2, 4, 3)], 1,
    )  # fmt: skip


def test_an_unpack_of_a_cat_is_right_in_two_launches() -> None:
    """unpack walks (n, co, ci, h, w) and writes c = 4·co + ci: its space splits a dim of
    its result, so its pieces would not be boxes of the result, dim for dim."""
    _check(
        lambda a, b: cat([a, b], 1).unpack("NCHW4", 5),
        lambda a, b: torch.cat([a, b], 1).permute(0, 1, 4, 2, 3).reshape(2, 8, 3, 5)[:, :5],
        [(2, 1, 3, 5, 4), (2, 1, 3, 5, 4)], 2,
    )  # fmt: skip


def test_a_flipped_cat_returned_as_is_is_one_launch() -> None:
    """torch cannot return a negative stride: `plan-memory` copies the flipped view, and
    cuts that copy into one copy per cat input as `fuse-copies` would (the cat's own
    copies are then unread and go)."""
    _check(
        lambda a, b: cat([a, b], 0).flip(0),
        lambda a, b: torch.cat([a, b], 0).flip(0),
        [(2, 3), (1, 3)], 1,
    )  # fmt: skip
    _check(
        lambda a, b, c: cat([a, b, c], 1).flip(1, 0),
        lambda a, b, c: torch.cat([a, b, c], 1).flip(1, 0),
        [(2, 3, 4), (2, 1, 4), (2, 2, 4)], 1,
    )  # fmt: skip


INTERLEAVED = """graph @interleaved {
  %x = input {name = "x"} : tensor<3xf32>
  %y = input {name = "y"} : tensor<3xf32>
  %0 = strided_copy %x {layout = strided<[1], offset: 0>, space = [3], src = strided<[1], offset: 0>, dst = strided<[2], offset: 0>} : tensor<6xf32>
  %1 = strided_copy %y, %0 {space = [3], src = strided<[1], offset: 0>, dst = strided<[2], offset: 1>} : tensor<6xf32>
  %2 = strided_copy %1 {space = [6], src = strided<[-1], offset: 5>, dst = strided<[1], offset: 0>} : tensor<6xf32>
  output %2
}"""  # noqa: E501


def test_writers_that_are_not_boxes_stay_and_are_right() -> None:
    """x and y written to the even and odd elements, read backwards: no box of the
    reader's space reads one writer, so nothing fuses, and the result is still right."""
    g = stridec.parse(INTERLEAVED)
    fused = stridec.parse(INTERLEAVED)
    PassManager.parse("fuse-copies").run(fused)
    assert str(fused) == str(g)
    x, y = torch.arange(3.0), torch.arange(10.0, 13.0)
    woven = torch.stack([x, y], 1).reshape(6)
    assert torch.equal(stridec.compile(g)(x, y), woven.flip(0))


# --------------------------------------------------------------------- the index algebra

BOXES = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(
    lambda ns: tuple((0, n) for n in ns)
)


@st.composite
def box_and_bounds(draw):
    box = draw(BOXES)
    rank = len(box)
    bounds = []
    for _ in range(draw(st.integers(0, 3))):
        coeffs = tuple(draw(st.integers(-5, 5)) for _ in range(rank))
        lo = draw(st.integers(-6, 12))
        const, width = draw(st.integers(-3, 3)), draw(st.integers(0, 8))
        bounds.append(MaskBound(coeffs, lo - const, lo + width - const))
    return box, bounds


def _points(box):
    return itertools.product(*(range(a, b) for a, b in box))


def _holds(bound: MaskBound, j) -> bool:
    value = sum(c * x for c, x in zip(bound.coeffs, j, strict=True))
    return bound.lo <= value < bound.hi


@settings(max_examples=300, deadline=None)
@given(box_and_bounds())
def test_split_box_partitions_by_where_every_bound_holds(case) -> None:
    box, bounds = case
    split = split_box(box, bounds, 10_000)
    assert split is not None
    inside, outside = split
    seen: list = []
    for cell, every in [(c, True) for c in inside] + [(c, False) for c in outside]:
        for j in _points(cell):
            assert all(_holds(b, j) for b in bounds) == every, (cell, j)
            seen.append(j)
    assert sorted(seen) == sorted(_points(box))  # a partition: each point once


def test_split_box_of_nchw4_with_six_channels() -> None:
    """c = 4·co + ci < 6 over co in [0, 2), ci in [0, 4): block 0 whole, block 1 cut at 2."""
    inside, outside = split_box(((0, 2), (0, 4)), [MaskBound((4, 1), 0, 6)], 64)
    assert inside == [((0, 1), (0, 4)), ((1, 2), (0, 2))] and outside == [((1, 2), (2, 4))]


def test_split_box_gives_up_past_its_limit() -> None:
    """i + j < 50 over 100 x 100 straddles at every i: more boxes than the limit."""
    assert split_box(((0, 100), (0, 100)), [MaskBound((1, 1), 0, 50)], 64) is None


LAYOUTS = st.lists(st.integers(1, 4), min_size=1, max_size=3).flatmap(
    lambda ns: st.permutations(range(len(ns))).map(lambda order: Layout.for_order(ns, order))
)


@st.composite
def part_of(draw):
    whole = draw(LAYOUTS)
    start = [draw(st.integers(0, n - 1)) for n in whole.sizes]
    sizes = [draw(st.integers(1, n - s)) for n, s in zip(whole.sizes, start, strict=True)]
    order = draw(st.permutations(range(whole.rank)))
    flips = [draw(st.booleans()) for _ in sizes]
    return whole, start, sizes, order, flips


def _addresses(layout: Layout) -> set[int]:
    return {
        layout.offset + sum(i * s for i, s in zip(j, layout.strides, strict=True))
        for j in _points(tuple((0, n) for n in layout.sizes))
    }


@settings(max_examples=300, deadline=None)
@given(part_of())
def test_box_of_and_image_box_name_the_coordinates_written(case) -> None:
    """A box of `whole`, addressed dim for dim (`box_of`) or through its dims permuted and
    flipped (`image_box`), is found, and addresses exactly what the layout does."""
    whole, start, sizes, order, flips = case
    part = Layout(sizes, whole.strides, whole.offset + sum(
        b * s for b, s in zip(start, whole.strides, strict=True)
    ))  # fmt: skip
    want = tuple((b, b + n) for b, n in zip(start, sizes, strict=True))
    assert box_of(part, whole) == want
    seen = part
    for k, flipped in enumerate(flips):
        if flipped:
            seen = seen.flip([k])
    seen = seen.permute(order)
    assert image_box(seen, whole) == want
    box_layout = Layout(sizes, whole.strides, part.offset)
    assert _addresses(seen) == _addresses(box_layout)


def test_image_box_refuses_what_is_not_a_box() -> None:
    whole = Layout.contiguous((6,))
    assert image_box(Layout((3,), (2,), 0), whole) is None  # every other element
    assert image_box(Layout((2, 2), (3, 1), 0), whole) is None  # elements 0, 1, 3, 4
    assert box_of(Layout((3,), (1,), 4), whole) is None  # sticks out of the end


@pytest.mark.gpu
@pytest.mark.parametrize(
    "build,oracle,shapes,launches", [c[1:] for c in CHAINS], ids=[c[0] for c in CHAINS]
)
def test_chain_on_cuda(build, oracle, shapes, launches) -> None:
    """The same chains compiled by Triton for the GPU, in the same number of launches."""
    g = stridec.Graph("chain")
    values = [g.input(f"x{i}", s, "float32") for i, s in enumerate(shapes)]
    g.output(build(*values))
    fn = stridec.compile(g)
    for strided in (False, True):
        xs = [t.cuda() for t in _inputs(shapes, strided, torch.float32)]
        assert fn.plan_for(*xs).launches == launches
        got, want = fn(*xs), oracle(*xs)
        torch.cuda.synchronize()
        assert got.shape == want.shape and torch.equal(got, want)
