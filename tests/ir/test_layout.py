"""Layout tests. The oracle is torch: every view rule is replayed on ``torch.arange`` data
and compared on (sizes, strides, offset) and on the elements read through the layout."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_draw import prime_factors

from stridec.errors import (
    LayoutError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir.affine import MAX_RANK
from stridec.ir.layout import (
    Layout,
    broadcast_shapes,
    coalesce_jointly,
    contiguous_strides,
    same_addresses,
)

SETTINGS = settings(max_examples=200, deadline=None)


# -- helpers ------------------------------------------------------------------------------


def torch_layout(t: torch.Tensor) -> Layout:
    return Layout(t.shape, t.stride(), t.storage_offset())


def indices(layout: Layout) -> torch.Tensor:
    """Storage index of every element (shape = sizes), by the dot product itself.

    Unlike torch.as_strided this handles negative strides (flip)."""
    idx = torch.full(layout.sizes, layout.offset, dtype=torch.int64)
    for k, (n, s) in enumerate(zip(layout.sizes, layout.strides, strict=True)):
        shape = [1] * layout.rank
        shape[k] = n
        idx = idx + (torch.arange(n, dtype=torch.int64) * s).reshape(shape)
    return idx


def read(storage: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The elements `layout` addresses in `storage`, checked against torch.as_strided."""
    values = storage[indices(layout)]
    if all(s >= 0 for s in layout.strides) and layout.fits(storage.numel()):
        viewed = torch.as_strided(storage, layout.sizes, layout.strides, layout.offset)
        assert torch.equal(viewed, values)
    return values


def addresses(layout: Layout) -> list[int]:
    """Brute force: every addressed index, in row-major order of the coordinates."""
    return indices(layout).flatten().tolist()


sizes_st = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def layouts(draw: st.DrawFn, max_rank: int = 4, stride_range: int = 6) -> Layout:
    """Any valid layout: random sizes, strides in [-stride_range, stride_range], and an
    offset large enough that negative strides stay inside storage."""
    sizes = draw(st.lists(st.integers(0, 4), min_size=0, max_size=max_rank))
    strides = [draw(st.integers(-stride_range, stride_range)) for _ in sizes]
    low = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True) if s < 0 and n > 0)
    offset = draw(st.integers(0, 3)) - low
    return Layout(tuple(sizes), tuple(strides), offset)


def draw_view_sizes(data: st.DataObject, numel: int) -> tuple[int, ...]:
    """A random target shape of `numel` elements, with 1s, 0s and maybe one -1."""
    if numel == 0:
        rank = data.draw(st.integers(1, 4))
        sizes = [data.draw(st.integers(0, 3)) for _ in range(rank)]
        sizes[data.draw(st.integers(0, rank - 1))] = 0
    else:
        rank = data.draw(st.integers(0 if numel == 1 else 1, 4))
        sizes = [1] * rank
        for p in prime_factors(numel):
            sizes[data.draw(st.integers(0, rank - 1))] *= p
    if sizes and data.draw(st.booleans()):
        k = data.draw(st.integers(0, len(sizes) - 1))
        others = math.prod(sizes[:k] + sizes[k + 1 :])
        if others != 0:
            sizes[k] = -1
    return tuple(sizes)


# -- worked examples from the reference texts -----------------------------------------------


def test_directml_dhw_offset_is_the_dot_product() -> None:
    # D, H, W = 2, 2, 3 packed: D-stride = H*W = 2*3 = 6, H-stride = W = 3, W-stride = 1.
    layout = Layout.contiguous((2, 2, 3))
    t = torch.arange(12).reshape(2, 2, 3)
    assert layout.strides == (6, 3, 1) == t.stride()
    # Element H at (d=1, h=0, w=1): {1,0,1}·{6,3,1} = 1*6 + 0*3 + 1*1 = 7.
    assert layout.index_of((1, 0, 1)) == 7 == t[1, 0, 1].item()


def test_directml_broadcast_is_stride_zero() -> None:
    # A row A B C repeated over 2 rows: 3 elements of storage, height-stride 0.
    layout = Layout.contiguous((3,)).expand((2, 3))
    t = torch.arange(3).expand(2, 3)
    assert layout == torch_layout(t) == Layout((2, 3), (0, 1))
    assert layout.numel == 6 and layout.min_storage_size() == 3
    assert layout.is_broadcast() and layout.may_overlap() and not layout.is_packed()


def test_directml_padding_row_stride_five() -> None:
    # Width 3 plus 2 padding elements per row: height-stride 5 instead of 3.
    layout = Layout.padded((3, 3), 5)
    t = torch.arange(15).reshape(3, 5)[:, :3]
    assert layout == torch_layout(t) == Layout((3, 3), (5, 1))
    # Last element (2, 2): 2*5 + 2*1 = 12, so 13 elements; DMLCalcBufferTensorSize for
    # float32 is 13*4 = 52 bytes, already a multiple of 4.
    assert layout.min_storage_size() == 13
    assert layout.buffer_bytes(torch.float32) == 52
    assert layout.buffer_bytes("float16") == 28  # 13*2 = 26, rounded up to 28
    assert layout.is_padded() and not layout.is_packed() and not layout.may_overlap()
    assert torch.equal(read(torch.arange(15), layout), t)
    # Higher rank multiplies up from the pitched row: (2, 3, 3) -> (3*5, 5, 1).
    assert Layout.padded((2, 3, 3), 5).strides == (15, 5, 1)


def test_directml_nchw_and_nhwc_strides_for_1_1_3_5() -> None:
    sizes = (1, 1, 3, 5)
    # NCHW: N = C*H*W = 1*3*5 = 15, C = H*W = 3*5 = 15, H = W = 5, W = 1.
    nchw = Layout.contiguous(sizes)
    assert nchw.strides == (15, 15, 5, 1) == torch.empty(sizes).stride()
    # NHWC: N = H*W*C = 3*5*1 = 15, H = W*C = 5*1 = 5, W = C = 1, C = 1.
    nhwc = Layout.for_order(sizes, (0, 2, 3, 1))
    channels_last = torch.empty(sizes, memory_format=torch.channels_last)
    assert nhwc.strides == (15, 1, 5, 1) == channels_last.stride()
    assert nhwc.is_packed() and nchw.is_contiguous()


def test_pytorch_article_permute_broadcast_index_reshape() -> None:
    t = torch.arange(24).reshape(1, 2, 3, 4)
    layout = Layout.contiguous((1, 2, 3, 4))
    # Contiguous: (2*3*4, 3*4, 4, 1) = (24, 12, 4, 1).
    assert layout == torch_layout(t) and layout.strides == (24, 12, 4, 1)

    # permute permutes the strides; still contiguous, as the size-1 dim does not count.
    permuted = layout.permute((1, 2, 3, 0))
    assert permuted == torch_layout(t.permute(1, 2, 3, 0))
    assert permuted.strides == (12, 4, 1, 24)
    assert permuted.is_contiguous() and t.permute(1, 2, 3, 0).is_contiguous()

    # broadcast_to sets the broadcast dim's stride to 0.
    broadcast = layout.expand((2, 2, 3, 4))
    assert broadcast == torch_layout(t.broadcast_to((2, 2, 3, 4)))
    assert broadcast.strides == (0, 12, 4, 1) and not broadcast.is_contiguous()

    # t[:, :, :, 2]: offset 0 + 2*1 = 2, strides (24, 12, 4); elements 2, 6, 10, 14, 18, 22.
    indexed = layout.select(3, 2)
    assert indexed == torch_layout(t[:, :, :, 2])
    assert (indexed.offset, indexed.strides) == (2, (24, 12, 4))
    assert read(t.flatten(), indexed).flatten().tolist() == [2, 6, 10, 14, 18, 22]
    assert not indexed.is_contiguous()

    # reshape(3, 2) is a view: (2, 3) under stride 12 == 3*4 form one chunk of base
    # stride 4, so the new strides are (2*4, 4) = (8, 4).
    reshaped = indexed.view((3, 2))
    assert reshaped == torch_layout(t[:, :, :, 2].reshape(3, 2))
    assert reshaped is not None and reshaped.strides == (8, 4) and reshaped.offset == 2
    # contiguous() copies into (2, 1).
    assert (
        Layout.contiguous((3, 2)).strides
        == (2, 1)
        == t[:, :, :, 2].reshape(3, 2).contiguous().stride()
    )


def test_str_is_the_mlir_memref_spelling() -> None:
    # NCHW (2, 3, 4, 5) seen as NHWC: strides (3*4*5, 5, 1, 4*5) = (60, 5, 1, 20).
    layout = Layout.contiguous((2, 3, 4, 5)).permute((0, 2, 3, 1))
    assert str(layout) == "strided<[60, 5, 1, 20], offset: 0>"
    assert str(Layout((), (), 3)) == "strided<[], offset: 3>"
    assert str(Layout((2, 2), (2, 1), 7)) == "strided<[2, 1], offset: 7>"


def test_layouts_are_values() -> None:
    a = Layout([2, 3], [3, 1])
    b = Layout(torch.Size([2, 3]), (np.int64(3), np.int64(1)), np.int64(0))
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert type(b.sizes) is tuple and all(type(n) is int for n in b.sizes + b.strides)
    assert type(b.offset) is int
    with pytest.raises(AttributeError):
        a.offset = 3  # type: ignore[misc]
    assert Layout((2, 3), (3, 1), 1) != a
    # The index range derived at construction is no part of the value: not shown, not
    # compared, and recomputed for a changed copy.
    assert repr(a) == "Layout(sizes=(2, 3), strides=(3, 1), offset=0)"
    flipped = dataclasses.replace(a, strides=(3, -1), offset=2)
    assert (flipped.min_index(), flipped.max_index()) == (0, 5)  # 2 + 2·(-1), 2 + 1·3
    assert pickle.loads(pickle.dumps(flipped)) == flipped
    assert copy.deepcopy(flipped).max_index() == 5


def test_contiguous_strides_match_torch_with_zero_sizes() -> None:
    for sizes in [(), (0,), (2, 0, 3), (0, 1, 4), (3, 4, 5)]:
        assert contiguous_strides(sizes) == torch.empty(sizes).stride()
        assert Layout.contiguous(sizes) == torch_layout(torch.empty(sizes))


def test_for_order_matches_torch_channels_last() -> None:
    for sizes in [(2, 3, 4, 5), (1, 7, 1, 3), (3, 1, 2, 2)]:
        expected = torch.empty(sizes, memory_format=torch.channels_last).stride()
        assert Layout.for_order(sizes, (0, 2, 3, 1)).strides == expected
    sizes5 = (2, 3, 4, 5, 6)
    expected = torch.empty(sizes5, memory_format=torch.channels_last_3d).stride()
    assert Layout.for_order(sizes5, (0, 2, 3, 4, 1)).strides == expected


def test_coalesce_nchw_to_nhwc_copy_is_three_dimensional() -> None:
    # Copy NCHW (2, 3, 4, 5) strides (60, 20, 5, 1) into NHWC strides (60, 1, 15, 3).
    # H, W merge on both sides (5 == 5*1 and 15 == 5*3); C, H do not on the NHWC side
    # (1 != 4*15); N, C do not on the NHWC side (60 != 3*1).
    src = Layout.contiguous((2, 3, 4, 5))
    dst = Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1))
    assert dst.strides == (60, 1, 15, 3)
    a, b = coalesce_jointly(src, dst)
    assert a == Layout((2, 3, 20), (60, 20, 1)) and b == Layout((2, 3, 20), (60, 1, 3))
    assert src.coalesce(dst) == (a, b)
    assert src.coalesce() == Layout((120,), (1,))
    assert dst.coalesce() == Layout((2, 3, 20), (60, 1, 3))


def test_view_of_scalar_and_empty() -> None:
    scalar = Layout((), (), 4)
    assert scalar.view((1, 1)) == Layout((1, 1), (1, 1), 4)
    assert scalar.view((-1,)) == torch_layout(torch.arange(5)[4].view(-1))
    empty = Layout.contiguous((2, 0, 3)).permute((2, 0, 1))
    assert empty.view((0, 5)) == torch_layout(torch.empty(2, 0, 3).permute(2, 0, 1).view(0, 5))
    assert empty.view(empty.sizes) == empty


def test_flip_moves_offset_to_last_element() -> None:
    # Flip (2, 3) contiguous on both dims: offset 0 + (2-1)*3 + (3-1)*1 = 5, strides (-3, -1).
    flipped = Layout.contiguous((2, 3)).flip((0, -1))
    assert flipped == Layout((2, 3), (-3, -1), 5)
    assert torch.equal(read(torch.arange(6), flipped), torch.arange(6).reshape(2, 3).flip(0, 1))
    assert flipped.flip((0, 1)) == Layout.contiguous((2, 3))
    assert flipped.is_packed() and not flipped.is_contiguous()
    assert Layout.contiguous((2, 0)).flip(1) == Layout((2, 0), (1, -1))


def test_unfold_windows() -> None:
    # (7,) unfold(0, 3, 2): (7-3)//2 + 1 = 3 windows at stride 2*1, each 3 long at stride 1.
    layout = Layout.contiguous((7,)).unfold(0, 3, 2)
    assert layout == Layout((3, 3), (2, 1)) == torch_layout(torch.arange(7).unfold(0, 3, 2))
    assert layout.may_overlap() and not layout.is_broadcast()


# -- the oracle: random chains of view ops against torch -----------------------------------

OPS = (
    "permute",
    "transpose",
    "expand",
    "slice",
    "select",
    "squeeze",
    "unsqueeze",
    "flip",
    "unfold",
    "as_strided",
    "view",
)


def apply_random_op(
    data: st.DataObject, layout: Layout, t: torch.Tensor, exact: bool, storage_size: int
) -> tuple[Layout, torch.Tensor, bool]:
    """Apply one random view op to both the layout and the torch tensor.

    `exact` is True while `t` is still a view of the original storage; torch's flip copies,
    after which only the elements can be compared.
    """
    rank = layout.rank
    op = data.draw(st.sampled_from(OPS), label="op")

    def dim(bound: int) -> int:
        return data.draw(st.integers(-bound, bound - 1))

    if op == "permute":
        perm = data.draw(st.permutations(range(rank)))
        perm = [d - rank if data.draw(st.booleans()) else d for d in perm]
        return layout.permute(perm), t.permute(perm), exact
    if op == "transpose" and rank >= 1:
        d0, d1 = dim(rank), dim(rank)
        return layout.transpose(d0, d1), t.transpose(d0, d1), exact
    if op == "expand":
        lead = data.draw(st.integers(0, min(2, 8 - rank)))
        target = [data.draw(st.sampled_from([0, 1, 2, 3])) for _ in range(lead)]
        for n in layout.sizes:
            target.append(data.draw(st.sampled_from([1, 0, 2, 3, -1] if n == 1 else [n, -1])))
        if math.prod(abs(n) for n in target) * max(layout.numel, 1) > 4096:
            return layout, t, exact
        return layout.expand(target), t.expand(target), exact
    if op == "slice" and rank >= 1:
        d = dim(rank)
        n = layout.sizes[d]
        bound = st.none() | st.integers(-n - 2, n + 2)
        start, stop = data.draw(bound), data.draw(bound)
        step = data.draw(st.integers(1, 3))
        sliced = torch.ops.aten.slice.Tensor(t, d, start, stop, step)
        return layout.slice(d, start, stop, step), sliced, exact
    if op == "select" and any(layout.sizes):
        d = data.draw(st.sampled_from([k for k in range(rank) if layout.sizes[k] > 0]))
        n = layout.sizes[d]
        index = data.draw(st.integers(-n, n - 1))
        if data.draw(st.booleans()):
            d -= rank
        return layout.select(d, index), t.select(d, index), exact
    if op == "squeeze":
        kind = data.draw(st.sampled_from(["none", "int", "tuple"]))
        if kind == "none":
            return layout.squeeze(), t.squeeze(), exact
        if kind == "int" or rank == 0:
            d = dim(max(rank, 1))
            return layout.squeeze(d), t.squeeze(d), exact
        dims = tuple(data.draw(st.sets(st.integers(0, rank - 1), max_size=rank)))
        return layout.squeeze(dims), t.squeeze(dims), exact
    if op == "unsqueeze" and rank < 8:
        d = data.draw(st.integers(-rank - 1, rank))
        return layout.unsqueeze(d), t.unsqueeze(d), exact
    if op == "flip" and rank >= 1:
        dims = [
            d - rank if data.draw(st.booleans()) else d
            for d in data.draw(st.sets(st.integers(0, rank - 1)))
        ]
        return layout.flip(dims), torch.flip(t, dims), False
    if op == "unfold" and rank < 8:
        d = dim(max(rank, 1))
        max_size = layout.sizes[d] if rank else 1
        size = data.draw(st.integers(0, max_size))
        step = data.draw(st.integers(1, 3))
        return layout.unfold(d, size, step), t.unfold(d, size, step), exact
    if op == "as_strided" and exact:
        sizes = data.draw(st.lists(st.integers(0, 4), max_size=3))
        strides = [data.draw(st.integers(0, 5)) for _ in sizes]
        if math.prod(sizes) == 0:
            offset = data.draw(st.integers(0, storage_size))
        else:
            extent = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
            if extent >= storage_size:
                return layout, t, exact
            offset = data.draw(st.integers(0, storage_size - 1 - extent))
        new = layout.as_strided(sizes, strides, offset, storage_size=storage_size)
        return new, torch.as_strided(t, sizes, strides, offset), exact
    if op == "view":
        target = draw_view_sizes(data, layout.numel)
        viewed = layout.view(target)
        if exact:
            try:
                expected = t.view(target)
            except RuntimeError:
                expected = None
            assert (viewed is None) == (expected is None), (layout, target)
            if expected is None:
                return layout, t, exact
            return viewed, expected, exact  # type: ignore[return-value]
        if viewed is None:
            return layout, t, exact
        return viewed, t.reshape(target), exact
    return layout, t, exact


@SETTINGS
@given(sizes=sizes_st, data=st.data())
def test_view_chains_agree_with_torch(sizes: tuple[int, ...], data: st.DataObject) -> None:
    numel = math.prod(sizes)
    storage = torch.arange(numel)
    layout = Layout.contiguous(sizes)
    t = storage.view(sizes)
    exact = True
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        layout, t, exact = apply_random_op(data, layout, t, exact, numel)
        if exact:
            assert layout == torch_layout(t)
        assert layout.fits(numel)
        assert torch.equal(read(storage, layout), t)


@st.composite
def torch_views(draw: st.DrawFn) -> tuple[Layout, torch.Tensor]:
    """A non-contiguous torch view (as_strided, then permute/slice) and its layout."""
    sizes = draw(st.lists(st.integers(0, 4), max_size=5))
    base = list(contiguous_strides(sizes))
    # Mostly contiguous-like strides (so views often succeed), some entries scrambled.
    strides = [
        draw(st.integers(0, 7))
        if draw(st.integers(0, 3)) == 0
        else s * draw(st.sampled_from([1, 1, 2]))
        for s in base
    ]
    offset = draw(st.integers(0, 3))
    extent = (
        sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) if math.prod(sizes) else 0
    )
    storage = torch.arange(offset + extent + 1)
    t = torch.as_strided(storage, sizes, strides, offset)
    layout = Layout(sizes, strides, offset)
    if sizes and draw(st.booleans()):
        perm = draw(st.permutations(range(len(sizes))))
        t, layout = t.permute(perm), layout.permute(perm)
    if sizes and draw(st.booleans()):
        d = draw(st.integers(0, len(sizes) - 1))
        start, step = draw(st.integers(0, 2)), draw(st.integers(1, 2))
        t, layout = (
            t[(slice(None),) * d + (slice(start, None, step),)],
            layout.slice(d, start, None, step),
        )
    assert layout == torch_layout(t)
    return layout, t


@SETTINGS
@given(view=torch_views(), data=st.data())
def test_view_succeeds_exactly_when_torch_view_does(
    view: tuple[Layout, torch.Tensor], data: st.DataObject
) -> None:
    layout, t = view
    target = draw_view_sizes(data, layout.numel)
    result = layout.view(target)
    try:
        expected = t.view(target)
    except RuntimeError:
        assert result is None, (layout, target)
        return
    assert result == torch_layout(expected), (layout, target)


# -- predicates and derived quantities against brute-force enumeration ----------------------


@SETTINGS
@given(layout=layouts())
def test_predicates_match_enumeration(layout: Layout) -> None:
    addrs = addresses(layout)
    numel = layout.numel
    assert len(addrs) == numel
    unique = len(set(addrs)) == numel
    if numel == 0:
        assert layout.min_index() is None and layout.max_index() is None
        assert layout.min_storage_size() == 0
        assert layout.is_contiguous() and layout.is_packed()
        assert not layout.is_broadcast() and not layout.may_overlap() and not layout.is_padded()
        return
    low, high = min(addrs), max(addrs)
    span = high - low + 1
    assert (layout.min_index(), layout.max_index()) == (low, high)
    assert layout.min_storage_size() == high + 1
    assert layout.is_contiguous() == (addrs == list(range(addrs[0], addrs[0] + numel)))
    assert layout.is_packed() == (unique and span == numel)
    if not layout.may_overlap():
        assert unique
    if layout.is_broadcast():
        assert not unique
    assert layout.is_padded() == (unique and span > numel and not layout.may_overlap())
    if layout.is_padded():
        assert unique and span > numel
    for storage in (high, high + 1):
        assert layout.fits(storage) == (high < storage)
    for dtype, itemsize in ((torch.float16, 2), ("float32", 4), ("f64", 8)):
        for align in (1, 4, 16):
            assert (
                layout.buffer_bytes(dtype, align)
                == math.ceil((high + 1) * itemsize / align) * align
            )
    if all(s >= 0 for s in layout.strides):
        t = torch.as_strided(torch.arange(high + 1), layout.sizes, layout.strides, layout.offset)
        assert layout.is_contiguous() == t.is_contiguous()
        assert torch_layout(t) == layout


@SETTINGS
@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=5), data=st.data())
def test_packed_orders_are_packed_and_overlap_free(sizes: list[int], data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(sizes))))
    layout = Layout.for_order(sizes, order)
    addrs = addresses(layout)
    assert sorted(addrs) == list(range(layout.numel))
    assert layout.is_packed() and not layout.may_overlap() and not layout.is_padded()
    assert layout.is_contiguous() == (layout.numel == 0 or layout.coalesce().rank <= 1)
    # A slice with step 2 stays overlap-free, and is padded exactly when it leaves gaps.
    d = data.draw(st.integers(0, len(sizes) - 1))
    sliced = layout.slice(d, 0, None, 2)
    assert not sliced.may_overlap()
    addrs = addresses(sliced)
    gaps = bool(addrs) and max(addrs) - min(addrs) + 1 > len(addrs)
    assert sliced.is_padded() == gaps


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_same_addresses_is_equality_of_the_index_map(layout: Layout, data: st.DataObject) -> None:
    # Re-stride some dims: size-1 dims never move, so only the others can tell.
    strides = list(layout.strides)
    for k in range(layout.rank):
        if data.draw(st.booleans()):
            strides[k] = data.draw(st.integers(0, 6))
    offset = layout.offset + data.draw(st.sampled_from([0, 0, 0, 1]))
    # Non-negative new strides only raise the lowest index, so `other` stays valid.
    other = Layout(layout.sizes, strides, offset)
    expected = torch.equal(indices(layout), indices(other))
    assert same_addresses(layout, other) == expected == layout.same_addresses(other)
    assert same_addresses(layout, layout)
    assert not same_addresses(layout, layout.unsqueeze(0))


# -- coalescing ------------------------------------------------------------------------------


@SETTINGS
@given(layout=layouts(max_rank=5))
def test_coalesce_reads_the_same_elements_in_order(layout: Layout) -> None:
    merged = layout.coalesce()
    assert torch.equal(indices(layout).flatten(), indices(merged).flatten())
    assert merged.rank <= max(layout.rank, 1)
    assert merged.coalesce() == merged
    if layout.numel > 0:
        assert all(n > 1 for n in merged.sizes)
        for k in range(merged.rank - 1):  # nothing left to merge
            assert merged.strides[k] != merged.sizes[k + 1] * merged.strides[k + 1]


@SETTINGS
@given(a=layouts(max_rank=5), data=st.data())
def test_joint_coalesce_keeps_the_element_correspondence(a: Layout, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["packed", "random", "same"]))
    if kind == "packed":
        b = Layout.for_order(a.sizes, data.draw(st.permutations(range(a.rank))))
    elif kind == "same":
        b = a
    else:
        b = Layout(
            a.sizes, [data.draw(st.integers(0, 6)) for _ in a.sizes], data.draw(st.integers(0, 3))
        )
    ca, cb = coalesce_jointly(a, b)
    assert ca.sizes == cb.sizes
    assert torch.equal(indices(a).flatten(), indices(ca).flatten())
    assert torch.equal(indices(b).flatten(), indices(cb).flatten())
    assert a.coalesce(b) == (ca, cb)
    if kind == "same":
        assert ca == cb == a.coalesce()
    # A joint merge is a merge on each side: never fewer dims than either alone.
    assert ca.rank >= max(a.coalesce().rank, b.coalesce().rank)


# -- broadcast_shapes ------------------------------------------------------------------------


@SETTINGS
@given(
    shapes=st.lists(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=4), min_size=1, max_size=3)
)
def test_broadcast_shapes_match_torch(shapes: list[list[int]]) -> None:
    try:
        expected = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        with pytest.raises(ShapeError, match="does not match"):
            broadcast_shapes(*shapes)
        return
    assert broadcast_shapes(*shapes) == expected
    # Each operand expands to the broadcast shape.
    for shape in shapes:
        assert Layout.contiguous(shape).expand(expected).sizes == expected


# -- bad input -------------------------------------------------------------------------------

NCHW = Layout.contiguous((2, 3, 4, 5))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: NCHW.permute((0, 0, 1, 2)),
            LayoutError,
            r"dims \(0, 0, 1, 2\) is not a permutation",
        ),
        (
            lambda: NCHW.permute((0, 1)),
            LayoutError,
            r"dims \(0, 1\) have rank 2, sizes \(2, 3, 4, 5\)",
        ),
        (lambda: NCHW.permute((0, 1, 2, 4)), LayoutError, r"dim 4 out of range for rank 4"),
        (lambda: NCHW.dim_index(5), LayoutError, r"dim 5 out of range for rank 4"),
        (lambda: NCHW.select(5, 0), LayoutError, r"dim 5 out of range for rank 4"),
        (lambda: NCHW.transpose(0, -5), LayoutError, r"dim -5 out of range for rank 4"),
        (
            lambda: NCHW.expand((2, 6, 4, 5)),
            LayoutError,
            r"expanded size 6 must match the existing size 3",
        ),
        (lambda: NCHW.expand((3, 4, 5)), LayoutError, r"target sizes \(3, 4, 5\) have rank 3"),
        (
            lambda: NCHW.expand((-1, 2, 3, 4, 5)),
            LayoutError,
            r"-1 is not allowed for the new leading dim 0",
        ),
        (lambda: NCHW.expand((2, -2, 4, 5)), LayoutError, r"size -2 at dim 1"),
        (
            lambda: NCHW.slice(1, 0, 2, 0),
            LayoutError,
            r"step must be >= 1; got 0 .*sizes \(2, 3, 4, 5\)",
        ),
        (lambda: NCHW.slice(1, step=-1), LayoutError, r"step must be >= 1; got -1"),
        (lambda: Layout((), ()).slice(0), LayoutError, r"rank-0"),
        (lambda: NCHW.select(1, 3), LayoutError, r"index 3 out of range for dim 1 of size 3"),
        (lambda: NCHW.select(1, -4), LayoutError, r"index -4 out of range"),
        (lambda: Layout((), ()).select(0, 0), LayoutError, r"rank-0"),
        (
            lambda: NCHW.view((7, 20)),
            LayoutError,
            r"sizes \(7, 20\) \(140 elements\) do not match the 120",
        ),
        (lambda: NCHW.view((-1, 7)), LayoutError, r"do not fit the 120 elements"),
        (lambda: NCHW.view((-1, -1)), LayoutError, r"only one dim can be -1"),
        (lambda: Layout.contiguous((0, 3)).view((0, -1)), LayoutError, r"cannot infer the -1"),
        (lambda: NCHW.view((2, -3, 20)), LayoutError, r"size -3 at dim 1"),
        (
            lambda: Layout.contiguous((2, 3)).as_strided((2, 3), (3, 1), 1, storage_size=6),
            LayoutError,
            r"as_strided: sizes \(2, 3\), strides \(3, 1\), offset 1 address indices up to 6, "
            r"outside a storage of 6 elements",
        ),
        (
            lambda: NCHW.flip((1, -3)),
            LayoutError,
            r"flip: dims \(1, -3\) name a dim more than once",
        ),
        (lambda: NCHW.flip(4), LayoutError, r"dim 4 out of range for rank 4"),
        (lambda: NCHW.unfold(1, 4, 1), LayoutError, r"size 4 must be in \[0, 3\]"),
        (lambda: NCHW.unfold(1, 2, 0), LayoutError, r"step must be >= 1; got 0"),
        (lambda: NCHW.unsqueeze(5), LayoutError, r"dim 5 out of range for rank 5"),
        (lambda: NCHW.squeeze((0, 4)), LayoutError, r"dim 4 out of range for rank 4"),
        (lambda: NCHW.squeeze((0, -4)), LayoutError, r"squeeze: dims \(0, -4\) name a dim more"),
        (lambda: Layout((), ()).squeeze((0, -1)), LayoutError, r"name a dim more than once"),
        (lambda: NCHW.index_of((1, 3, 0, 0)), LayoutError, r"coordinate 3 out of range for dim 1"),
        (lambda: NCHW.index_of((1, 2)), LayoutError, r"coords \(1, 2\) have rank 2"),
        (
            lambda: Layout((2, 3), (1,)),
            LayoutError,
            r"sizes \(2, 3\) \(rank 2\) and strides \(1,\)",
        ),
        (lambda: Layout((2, -1), (1, 1)), LayoutError, r"sizes must be >= 0; got \(2, -1\)"),
        (lambda: Layout((2,), (1,), -1), LayoutError, r"offset must be >= 0; got -1"),
        (lambda: Layout((3,), (-1,), 1), LayoutError, r"address index -1, before the start"),
        (lambda: Layout((2.5,), (1,)), VerificationError, r"expected a sequence of ints"),
        (lambda: Layout(3, (1,)), VerificationError, r"expected a sequence of ints; got 3"),
        (
            lambda: Layout((1,) * (MAX_RANK + 1), (1,) * (MAX_RANK + 1)),
            UnsupportedError,
            rf"rank {MAX_RANK + 1} is above the supported maximum of {MAX_RANK}",
        ),
        (lambda: Layout.contiguous((1,) * MAX_RANK).unsqueeze(0), UnsupportedError,
         rf"rank {MAX_RANK + 1}"),
        (lambda: Layout.contiguous((2,)).expand((1,) * MAX_RANK + (2,)), UnsupportedError,
         rf"rank {MAX_RANK + 1}"),
        (lambda: Layout.contiguous((4,)).view((1,) * (MAX_RANK + 1) + (4,)), UnsupportedError,
         rf"rank {MAX_RANK + 2}"),
        (lambda: Layout.padded((3, 6), 5), LayoutError, r"pitch 5 is smaller than the row of 6"),
        (lambda: Layout.padded((), 5), LayoutError, r"rank >= 1"),
        (
            lambda: Layout.for_order((2, 3), (0, 0)),
            LayoutError,
            r"order \(0, 0\) is not a permutation",
        ),
        (
            lambda: coalesce_jointly(NCHW, Layout.contiguous((2, 3))),
            LayoutError,
            r"sizes \(2, 3, 4, 5\) and \(2, 3\)",
        ),
        (lambda: NCHW.buffer_bytes("complex64"), UnsupportedError, r"dtype: expected one of"),
        (lambda: NCHW.buffer_bytes("float32", 0), LayoutError, r"align must be >= 1; got 0"),
        (
            lambda: broadcast_shapes((2, 3), (4, 3)),
            ShapeError,
            r"size 4 of shape \(4, 3\) does not match size 2",
        ),
        (lambda: broadcast_shapes((0,), (2,)), ShapeError, r"does not match"),
        (lambda: broadcast_shapes((1,) * (MAX_RANK + 1)), UnsupportedError,
         rf"rank {MAX_RANK + 1}"),
    ],
)
def test_bad_input_raises_a_named_error(call, error: type[StridecError], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    assert isinstance(info.value, StridecError)


def test_views_accept_what_torch_accepts_on_scalars() -> None:
    scalar = Layout((), (), 2)
    t = torch.arange(3)[2]
    assert scalar.squeeze(0) == torch_layout(t.squeeze(0))
    assert scalar.squeeze(-1) == torch_layout(t.squeeze(-1))
    assert scalar.unsqueeze(-1) == torch_layout(t.unsqueeze(-1))
    assert scalar.unfold(0, 1, 1) == torch_layout(t.unfold(0, 1, 1))
    assert scalar.unfold(-1, 0, 2) == torch_layout(t.unfold(-1, 0, 2))
    assert scalar.transpose(0, -1) == torch_layout(t.transpose(0, -1))
    assert scalar.expand((1, 3)) == torch_layout(t.expand(1, 3))
    assert scalar.permute(()) == scalar
    assert scalar.coalesce() == scalar
    assert scalar.index_of(()) == 2
