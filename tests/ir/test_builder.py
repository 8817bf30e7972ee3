"""The Python builder: every `Value` method, `stridec.cat` / `stridec.pad` and the `Graph`
sources, each built into a graph, run by the reference executor and compared with the
same torch expression on the same tensor.

For views the oracle is also torch's stride arithmetic: on a contiguous input, the
value's `type.layout` must equal `(t.size(), t.stride(), t.storage_offset())` of the torch
view. `flip` copies in torch (new memory), and so does stridec: how the compiler reads
the input for it (negative strides) is checked by reading the input storage through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stridec
from stridec import Graph, Layout, Value
from stridec.errors import LayoutError, StridecError, VerificationError
from stridec.runtime.backends.reference import flat_storage, gather

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# -- helpers ------------------------------------------------------------------------------


def arange(sizes: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Distinct values, so that any misplaced element shows."""
    return torch.arange(math.prod(sizes), dtype=torch.int64).reshape(sizes).to(dtype)


def torch_layout(t: torch.Tensor) -> Layout:
    return Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())


def build(sizes: tuple[int, ...], fn: Callable[[Value], Any], dtype: str = "float32") -> tuple:
    """A graph `x -> fn(x)` (one result or several); returns (graph, results)."""
    g = Graph("builder")
    x = g.input("x", sizes, dtype)
    out = fn(x)
    results = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    g.output(*results)
    g.verify()
    return g, results


def check(
    sizes: tuple[int, ...],
    fn: Callable[[Any], Any],
    torch_fn: Callable[[torch.Tensor], Any] | None = None,
    *,
    view: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[Value, ...]:
    """Run `fn` on a Value and `torch_fn` (default: `fn`) on a contiguous tensor; compare
    values, sizes and dtypes, and for views the layout over the input's storage."""
    torch_fn = torch_fn or fn
    g, values = build(sizes, fn, str(dtype).removeprefix("torch."))
    t = arange(sizes, dtype)
    expected = torch_fn(t)
    expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    got = stridec.run_reference(g, t)
    assert len(got) == len(expected) == len(values)
    for v, a, e in zip(values, got, expected, strict=True):
        assert v.shape == tuple(e.shape)
        assert v.dtype.torch == e.dtype
        assert a.dtype == e.dtype and torch.equal(a, e)
        if view:
            assert v.root() is g.inputs[0]
            assert v is g.inputs[0] or v.owner.aliases_operand()
            # The torch expression is a view too (the test's own sanity check).
            assert e.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
            assert v.type.layout == torch_layout(e)
    return values


# -- views, method by method --------------------------------------------------------------


@pytest.mark.parametrize("dims", [(0, 1, 2, 3), (0, 2, 3, 1), (3, 2, 1, 0), (-1, 0, -2, 1)])
def test_permute(dims: tuple[int, ...]) -> None:
    check((2, 3, 4, 5), lambda x: x.permute(*dims))
    check((2, 3, 4, 5), lambda x: x.permute(dims))  # a tuple, as torch also takes


@pytest.mark.parametrize("d0, d1", [(0, 1), (1, 3), (-1, 0), (2, 2)])
def test_transpose(d0: int, d1: int) -> None:
    check((2, 3, 4, 5), lambda x: x.transpose(d0, d1))


@pytest.mark.parametrize("sizes", [(), (4,), (3, 4), (0, 4)])
def test_t(sizes: tuple[int, ...]) -> None:
    g, (v,) = build(sizes, lambda x: x.t())
    t = arange(sizes)
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, t.t()) and v.type.layout == torch_layout(t.t())


@pytest.mark.parametrize(
    "sizes, target",
    [((3, 1), (3, 4)), ((1,), (2, 3, 5)), ((), (2, 2)), ((2, 1, 3), (-1, 4, 3)), ((1, 1), (0, 5)),
     ((3, 1), (2, 3, 1))],
)
def test_expand(sizes: tuple[int, ...], target: tuple[int, ...]) -> None:
    check(sizes, lambda x: x.expand(*target))
    check(sizes, lambda x: x.expand(target))


def test_expand_as() -> None:
    g = Graph("expand_as")
    x = g.input("x", (3, 1), "float32")
    y = g.input("y", (2, 3, 4), "int8")
    e = x.expand_as(y)
    g.output(e)
    t, u = arange((3, 1)), torch.zeros(2, 3, 4, dtype=torch.int8)
    (got,) = stridec.run_reference(g, t, u)
    assert torch.equal(got, t.expand_as(u))
    assert e.type.layout == torch_layout(t.expand_as(u))


@pytest.mark.parametrize(
    "dim, start, stop, step",
    [(0, 1, None, 1), (1, None, None, 2), (2, -3, -1, 1), (-1, 1, 100, 3), (1, 5, 2, 1),
     (0, -100, 1, 1), (3, None, 0, 1), (2, 3, 4, 7)],
)
def test_slice(dim: int, start: int | None, stop: int | None, step: int) -> None:
    def torch_slice(t: torch.Tensor) -> torch.Tensor:
        index = (slice(None),) * (dim % t.dim()) + (slice(start, stop, step),)
        return t[index]

    check((2, 3, 4, 5), lambda x: x.slice(dim, start, stop, step), torch_slice)


@pytest.mark.parametrize("dim, start, length", [(0, 0, 2), (1, 1, 2), (-1, -3, 2), (2, 4, 0)])
def test_narrow(dim: int, start: int, length: int) -> None:
    check((2, 3, 4, 5), lambda x: x.narrow(dim, start, length))


@pytest.mark.parametrize("dim, index", [(0, 1), (1, -1), (-1, 4), (2, 0)])
def test_select(dim: int, index: int) -> None:
    check((2, 3, 4, 5), lambda x: x.select(dim, index))


@pytest.mark.parametrize(
    "sizes, dim",
    [((1, 3, 1, 2), None), ((1, 3, 1, 2), 0), ((1, 3, 1, 2), 1), ((1, 3, 1, 2), -2),
     ((1, 3, 1, 2), (0, 2)), ((1, 3, 1, 2), (1, -1)), ((), None), ((), 0), ((1, 1), None),
     ((0, 1), None), ((1, 3, 1, 2), ())],
)
def test_squeeze(sizes: tuple[int, ...], dim: Any) -> None:
    if dim is None:
        check(sizes, lambda x: x.squeeze())
    else:
        check(sizes, lambda x: x.squeeze(dim))


@pytest.mark.parametrize("sizes, dim", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((2, 3), -3),
                                        ((), 0), ((), -1), ((0, 3), 1)])
def test_unsqueeze(sizes: tuple[int, ...], dim: int) -> None:
    check(sizes, lambda x: x.unsqueeze(dim))


@pytest.mark.parametrize("sizes, dims", [((2, 3, 4), (0,)), ((2, 3, 4), (1, -1)),
                                         ((2, 3, 4), (0, 1, 2)), ((0, 3), (0, 1)), ((5,), (0,))])
def test_flip(sizes: tuple[int, ...], dims: tuple[int, ...]) -> None:
    # torch.flip copies: new memory, strides as preserve_format; the compiler reads the
    # input through negative strides (`source_layout`), checked by gathering through it.
    g, (v,) = build(sizes, lambda x: x.flip(*dims))
    t = arange(sizes)
    (got,) = stridec.run_reference(g, t)
    e = torch.flip(t, dims)
    assert torch.equal(got, e) and got.stride() == e.stride()
    assert not v.owner.aliases_operand() and v.root() is v
    assert v.type.layout == torch_layout(e)
    assert torch.equal(gather(flat_storage(t), v.owner.source_layout()), e)
    if t.numel():
        assert all(v.owner.source_layout().strides[d] < 0 for d in dims if sizes[d] > 1)


def test_views_of_a_flip_read_the_flipped_tensor() -> None:
    # torch's flip result is a new contiguous tensor: views and as_strided over it address
    # that tensor's storage, not the input's.
    def fn(x: Any) -> Any:
        return x.flip(1)[:, 1:].permute(1, 0)

    g, (v,) = build((3, 4), fn)
    t = arange((3, 4))
    (got,) = stridec.run_reference(g, t)
    e = fn(t)
    assert torch.equal(got, e)
    assert v.type.layout == torch_layout(e)
    assert v.root().owner.name == "flip"
    g, (w,) = build((2, 3), lambda x: x.flip(1).as_strided((3,), (1,), 0))
    t = arange((2, 3))
    assert torch.equal(stridec.run_reference(g, t)[0], t.flip(1).as_strided((3,), (1,), 0))
    g, (w,) = build((2, 3), lambda x: x.flip(0).view(-1))  # torch: a view of the flip
    assert torch.equal(stridec.run_reference(g, t)[0], t.flip(0).view(-1))


@pytest.mark.parametrize("target", [(6, 4), (-1,), (2, 3, 2, 2), (24,), (1, 24, 1), (4, -1)])
def test_reshape_of_contiguous_is_a_view(target: tuple[int, ...]) -> None:
    check((2, 3, 4), lambda x: x.reshape(*target))
    check((2, 3, 4), lambda x: x.reshape(target))


@pytest.mark.parametrize("target", [(-1,), (6, 4), (2, 12)])
def test_reshape_of_a_permutation_copies(target: tuple[int, ...]) -> None:
    """Not viewable: torch's reshape copies, and so does stridec (contiguous, own storage)."""
    def fn(x: Any) -> Any:
        return x.permute(2, 0, 1).reshape(target)

    g, (v,) = build((2, 3, 4), fn)
    t = arange((2, 3, 4))
    expected = fn(t)
    assert expected.data_ptr() != t.data_ptr()  # torch copied too
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, expected)
    assert not v.owner.aliases_operand() and v.root() is v
    assert v.type.layout == Layout.contiguous(expected.shape) == torch_layout(expected)


def test_reshape_of_a_viewable_slice_stays_a_view() -> None:
    check((2, 3, 4), lambda x: x[:, :, 1].reshape(6))
    check((4, 6), lambda x: x[::2].reshape(2, 2, 3))


@pytest.mark.parametrize("target", [(6, 4), (-1,), (3, 2, 4), (2, 12), (1, 2, 1, 12, 1)])
def test_view(target: tuple[int, ...]) -> None:
    check((2, 3, 4), lambda x: x.view(*target))


@pytest.mark.parametrize("target", [(2, 12), (2, 3, 2, 2), (1, 2, 12, 1), (2, -1), (1, 2, 1, 3, 4)])
def test_view_of_a_strided_slice(target: tuple[int, ...]) -> None:
    # (4, 3, 4)[::2] has strides (24, 4, 1): two chunks, (2,) and (3, 4); targets keep them.
    check((4, 3, 4), lambda x: x[::2].view(target))


@pytest.mark.parametrize("start, end", [(0, -1), (1, 2), (1, -1), (0, 0), (-2, -1), (2, 2)])
def test_flatten(start: int, end: int) -> None:
    check((2, 3, 4), lambda x: x.flatten(start, end))


def test_flatten_defaults_and_scalar() -> None:
    check((2, 3, 4), lambda x: x.flatten())
    check((2, 3, 4), lambda x: x.flatten(1))
    check((), lambda x: x.flatten())


def test_flatten_of_a_permutation_copies() -> None:
    def fn(x: Any) -> Any:
        return x.permute(0, 2, 1).flatten(1)

    g, (v,) = build((2, 3, 4), fn)
    t = arange((2, 3, 4))
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, fn(t)) and not v.owner.aliases_operand()


@pytest.mark.parametrize("dim, sizes", [(1, (2, 2)), (-1, (5, 1)), (0, (1, 2, 1)), (2, (-1, 5))])
def test_unflatten(dim: int, sizes: tuple[int, ...]) -> None:
    check((2, 4, 5), lambda x: x.unflatten(dim, sizes))


@pytest.mark.parametrize(
    "source, destination",
    [(0, 2), (-1, 0), ((0, 1), (2, 3)), ((3, 0), (0, 3)), ([1], [-1]),
     ((0, 1, 2, 3), (3, 2, 1, 0))],
)
def test_movedim(source: Any, destination: Any) -> None:
    check((2, 3, 4, 5), lambda x: x.movedim(source, destination))


@pytest.mark.parametrize(
    "sizes, dim, size, step",
    [((7,), 0, 3, 2), ((2, 7), 1, 3, 1), ((2, 7), -1, 7, 1), ((4, 5), 0, 2, 3), ((3,), 0, 0, 1),
     ((), 0, 1, 1), ((2, 6), 1, 1, 5)],
)
def test_unfold(sizes: tuple[int, ...], dim: int, size: int, step: int) -> None:
    check(sizes, lambda x: x.unfold(dim, size, step))


@pytest.mark.parametrize(
    "size, stride, offset",
    [((2, 2), (1, 1), 3), ((3,), (2,), None), ((4, 3), (1, 4), 0), ((2, 3), (0, 1), 5),
     ((0,), (1,), 23)],
)
def test_as_strided(size: tuple, stride: tuple, offset: int | None) -> None:
    def fn(x: Any) -> Any:
        return x.as_strided(size, stride, offset)

    check((2, 3, 4), fn, lambda t: torch.as_strided(t, size, stride, offset))


def test_as_strided_of_a_view_uses_the_view_offset_over_the_root() -> None:
    """Offset None keeps the operand's offset over the root storage, as torch does."""
    def fn(x: Any) -> Any:
        return x[1:, 2].as_strided((2, 2), (1, 4))

    check((3, 4), fn, lambda t: torch.as_strided(t[1:, 2], (2, 2), (1, 4)))


@pytest.mark.parametrize("split, dim", [(2, 0), (3, 1), (1, -1), (5, 1), ((1, 2, 1), 2),
                                        ((0, 4), 2),
                                        ([3, 1], 1), (4, 2)])
def test_split(split: Any, dim: int) -> None:
    values = check((3, 4, 4), lambda x: x.split(split, dim))
    assert isinstance(values, tuple)


def test_split_of_an_empty_dim() -> None:
    check((0, 3), lambda x: x.split(2, 0))
    check((0, 3), lambda x: x.split((0, 0), 0))


@pytest.mark.parametrize("sizes, chunks, dim", [((6, 2), 3, 0), ((6, 2), 4, 0), ((6, 2), 5, 0),
                                                ((7, 3), 2, 1), ((2, 5), 10, -1), ((0, 3), 3, 0)])
def test_chunk(sizes: tuple[int, ...], chunks: int, dim: int) -> None:
    check(sizes, lambda x: x.chunk(chunks, dim))


# -- __getitem__ ------------------------------------------------------------------------

INDEXES = [
    0, -1, 1, slice(None), slice(1, None), slice(None, None, 2), slice(-3, -1), slice(5, 1),
    None, Ellipsis,
    (0, 1), (-1, -2, -3, -4), (slice(None), 1), (Ellipsis, 0), (0, Ellipsis),
    (None, Ellipsis, None),
    (slice(None), slice(1, None), slice(None, None, 2)), (Ellipsis, slice(-3, -1)),
    (None, 0, None, slice(None, None, 3), Ellipsis, -1), (1, None, slice(2, None, 2), 0),
    (slice(100, None), Ellipsis), (Ellipsis, None), (slice(None, None, 5), -2, None),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem(index: Any) -> None:
    check((2, 3, 4, 5), lambda x: x[index])


def test_getitem_of_a_scalar() -> None:
    check((), lambda x: x[None])
    check((), lambda x: x[...])
    check((), lambda x: x[None, ..., None])


def test_getitem_bad_indices_raise_layout_errors() -> None:
    g = Graph("bad")
    x = g.input("x", (2, 3), "float32")
    with pytest.raises(LayoutError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(LayoutError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(LayoutError, match="select.*index 2"):
        x[2]
    with pytest.raises(LayoutError, match="step"):
        x[::0]
    with pytest.raises(LayoutError, match="index: expected int, slice, None"):
        x[1.5]


@st.composite
def index_cases(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple]:
    """A random shape and a torch index expression over it: ints (in range), slices with
    steps >= 1 (any bounds: torch clamps), None anywhere, and at most one `...` standing
    for a run of full slices. Trailing dims may be left out, as torch allows."""
    sizes = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=5)))
    bound = st.one_of(st.none(), st.integers(-7, 7))
    items: list[Any] = []
    for n in sizes:
        kinds = ["slice", "full"] + (["int"] if n > 0 else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "full":
            items.append(slice(None))
        else:
            step = draw(st.one_of(st.none(), st.integers(1, 4)))
            items.append(slice(draw(bound), draw(bound), step))
    # `...` replaces a run of full slices (possibly empty), or trailing dims are dropped.
    form = draw(st.sampled_from(["plain", "ellipsis", "truncate"]))
    if form == "ellipsis":
        at = draw(st.integers(0, len(items)))
        end = at
        while end < len(items) and items[end] == slice(None) and draw(st.booleans()):
            end += 1
        items[at:end] = [Ellipsis]
    elif form == "truncate":
        keep = draw(st.integers(0, len(items)))
        if all(i == slice(None) for i in items[keep:]):
            items = items[:keep]
    for _ in range(draw(st.integers(0, 3))):
        items.insert(draw(st.integers(0, len(items))), None)
    index: Any = tuple(items)
    if len(items) == 1 and draw(st.booleans()):
        index = items[0]  # a bare index, not a tuple
    return sizes, index


@SETTINGS
@given(case=index_cases())
def test_getitem_matches_torch_indexing(case: tuple) -> None:
    sizes, index = case
    check(sizes, lambda x: x[index])


@SETTINGS
@given(sizes=st.lists(st.integers(0, 5), min_size=1, max_size=5).map(tuple), data=st.data())
def test_getitem_rejects_what_torch_rejects(sizes: tuple[int, ...], data: st.DataObject) -> None:
    """An int past either end: torch raises IndexError, stridec a LayoutError."""
    dim = data.draw(st.integers(0, len(sizes) - 1))
    n = sizes[dim]
    bad = data.draw(st.sampled_from([n, n + 2, -n - 1]))
    index = (slice(None),) * dim + (bad,)
    t = arange(sizes)
    with pytest.raises(IndexError):
        t[index]
    g = Graph("bad")
    x = g.input("x", sizes, "float32")
    with pytest.raises(LayoutError, match=f"select: index {bad} out of range"):
        x[index]


# -- materializations -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.int8, torch.bool, torch.uint32])
def test_contiguous(dtype: torch.dtype) -> None:
    def fn(x: Any) -> Any:
        return x.permute(1, 0, 2)[:, ::2].contiguous()

    (v,) = check((3, 5, 3), fn, view=False, dtype=dtype)
    assert not v.owner.aliases_operand() and v.type.layout == Layout.contiguous(v.shape)


def test_contiguous_of_a_contiguous_value_is_that_value() -> None:
    # As torch's: (5, 1, 3) of strides (3, 30, 1) is contiguous (a size-1 dim's stride
    # does not count), so contiguous() returns the view itself.
    def fn(x: Any) -> Any:
        return x.permute(1, 0, 2)[:, ::2].contiguous()

    (v,) = check((2, 5, 3), fn, view=True)
    assert v.owner.aliases_operand() and v.root().owner.name == "input"


@pytest.mark.parametrize(
    "strides, offset, dtype",
    [((1, 2), 0, None), ((3, 1), 0, None), ((1, 4), 3, None), ((8, 2), 1, "float16"),
     ((1, 2), 0, "int32"), ((1, 2), 0, "uint32")],
)
def test_copy_to(strides: tuple[int, int], offset: int, dtype: str | None) -> None:
    """copy_to(strides) materializes with those strides: the values stay, the layout is new."""
    g, (v,) = build((2, 3), lambda x: x.copy_to(strides, dtype=dtype, offset=offset))
    t = arange((2, 3))
    (got,) = stridec.run_reference(g, t)
    want = torch.float32 if dtype is None else getattr(torch, dtype)
    assert got.dtype == want and torch.equal(got, t.to(want))
    assert v.type.layout == Layout((2, 3), strides, offset)
    assert v.dtype.torch == want and not v.owner.aliases_operand()


def test_copy_to_a_layout() -> None:
    layout = Layout((3, 4), (1, 5), 2)  # column-major with a pitch of 5, at offset 2
    g, (v,) = build((4, 3), lambda x: x.t().copy_to(layout))
    t = arange((4, 3))
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, t.t()) and v.type.layout == layout


@pytest.mark.parametrize("src, dst", [("float32", "float16"), ("float32", "int8"),
                                      ("int32", "bool"),
                                      ("float16", "bfloat16"), ("uint8", "float64")])
def test_to(src: str, dst: str) -> None:
    sizes = (3, 4)
    g, (v,) = build(sizes, lambda x: x.to(dst), src)
    t = (arange(sizes, torch.float64) * 1.75 - 5).to(getattr(torch, src))
    (got,) = stridec.run_reference(g, t)
    assert v.dtype.name == dst and torch.equal(got, t.to(getattr(torch, dst)))


def test_to_accepts_torch_dtypes_and_short_names() -> None:
    g = Graph("to")
    x = g.input("x", (2,), torch.float32)
    assert x.to(torch.int64).dtype.name == "int64"
    assert x.to("f16").dtype.name == "float16"
    assert x.to(stridec.DTYPES["bool"]).dtype.name == "bool"


def test_pack_and_unpack() -> None:
    """NHWC is a permutation; NCHW4 with C = 3 pads one channel of zeros (fill)."""
    g = Graph("pack")
    x = g.input("x", (2, 3, 4, 5), "float32")
    nhwc = x.pack("NHWC")
    nchw4 = x.pack("NCHW4", fill=-1.0)
    back = nchw4.unpack("NCHW4", 3)
    g.output(nhwc, nchw4, back)
    t = arange((2, 3, 4, 5))
    got_nhwc, got_nchw4, got_back = stridec.run_reference(g, t)
    assert torch.equal(got_nhwc, t.permute(0, 2, 3, 1).contiguous())
    split = F.pad(t, (0, 0, 0, 0, 0, 1), value=-1.0).reshape(2, 1, 4, 4, 5)
    expected = split.permute(0, 1, 3, 4, 2)
    assert nchw4.shape == (2, 1, 4, 5, 4) and torch.equal(got_nchw4, expected)
    assert back.shape == (2, 3, 4, 5) and torch.equal(got_back, t)


# -- module functions ---------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim: int) -> None:
    g = Graph("cat")
    x = g.input("x", (2, 3, 4), "float16")
    y = g.input("y", (2, 3, 4), "float16")
    out = stridec.cat([x, y.flip(dim), x[:, :, :]], dim)
    g.output(out)
    t, u = arange((2, 3, 4), torch.float16), -arange((2, 3, 4), torch.float16)
    (got,) = stridec.run_reference(g, t, u)
    expected = torch.cat([t, u.flip(dim), t], dim)
    assert out.shape == tuple(expected.shape) and torch.equal(got, expected)


def test_cat_with_different_sizes_along_dim() -> None:
    g = Graph("cat")
    x = g.input("x", (2, 3), "int32")
    y = g.input("y", (2, 0), "int32")
    z = g.input("z", (2, 5), "int32")
    g.output(stridec.cat((x, y, z), dim=1))
    ts = [arange((2, 3), torch.int32), arange((2, 0), torch.int32), arange((2, 5), torch.int32) + 9]
    (got,) = stridec.run_reference(g, *ts)
    assert torch.equal(got, torch.cat(ts, 1))


@pytest.mark.parametrize("pad, fill", [((1, 2), 0.0), ((0, 0, 2, 1), 7.5),
                                       ((1, 1, 1, 1, 1, 1), -1.0),
                                       ((-1, 2), 0.0), ((0, -2, -1, 0), 3.0)])
def test_pad(pad: tuple[int, ...], fill: float) -> None:
    g = Graph("pad")
    x = g.input("x", (2, 3, 4), "float32")
    out = stridec.pad(x.transpose(0, 2), pad, value=fill)
    g.output(out)
    t = arange((2, 3, 4))
    (got,) = stridec.run_reference(g, t)
    expected = F.pad(t.transpose(0, 2), pad, mode="constant", value=fill)
    assert out.shape == tuple(expected.shape) and torch.equal(got, expected)


# -- graph sources ------------------------------------------------------------------------


def test_input_with_a_declared_layout() -> None:
    layout = Layout((3, 4), (1, 3), 0)
    g = Graph("strided")
    x = g.input("x", (3, 4), "float32", layout=layout)
    y = x.t()
    g.output(y)
    assert x.type.layout == layout and y.type.layout == Layout((4, 3), (3, 1), 0)
    t = arange((4, 3)).t()  # a tensor of that layout
    assert torch_layout(t) == layout
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, t.t())


@pytest.mark.parametrize("dtype", sorted(stridec.DTYPES))
def test_full(dtype: str) -> None:
    g = Graph("full")
    value = True if dtype == "bool" else 3
    f = g.full((2, 3), value, dtype)
    g.output(f, g.full((), value, dtype), g.full((0, 2), value, dtype))
    assert f.shape == (2, 3) and f.dtype.name == dtype
    got = stridec.run_reference(g)
    torch_dtype = getattr(torch, dtype)
    for a, sizes in zip(got, [(2, 3), (), (0, 2)], strict=True):
        assert torch.equal(a, torch.full(sizes, value, dtype=torch_dtype))


def test_full_with_special_floats() -> None:
    g = Graph("full")
    g.output(g.full((2,), -math.inf, "bfloat16"), g.full((3,), 0.1, "float16"))
    a, b = stridec.run_reference(g)
    assert torch.equal(a, torch.full((2,), -math.inf, dtype=torch.bfloat16))
    assert torch.equal(b, torch.full((3,), 0.1, dtype=torch.float16))


@pytest.mark.parametrize("state_dtype, state_sizes", [("uint32", (6,)), ("int32", (1, 1, 1, 6))])
def test_philox_types(state_dtype: str, state_sizes: tuple[int, ...]) -> None:
    """The types only: the bits themselves are checked against Random123 with philox.py."""
    g = Graph("philox")
    state = g.input("state", state_sizes, state_dtype)
    bits, state1 = g.philox(state, (3, 5))
    uniform, state2 = g.philox_uniform(state1, (2, 2, 2), "float16", -1.0, 1.0)
    g.output(bits, state1, uniform, state2)
    assert bits.shape == (3, 5) and bits.dtype.name == "uint32"
    assert uniform.shape == (2, 2, 2) and uniform.dtype.name == "float16"
    for s in (state1, state2):
        assert s.shape == state_sizes and s.dtype.name == state_dtype
    s = torch.tensor([1, 2, 3, 4, 5, 6], dtype=getattr(torch, state_dtype)).reshape(state_sizes)
    got = stridec.run_reference(g, s)
    assert [tuple(a.shape) for a in got] == [(3, 5), state_sizes, (2, 2, 2), state_sizes]
    assert [a.dtype for a in got] == [torch.uint32, s.dtype, torch.float16, s.dtype]
    assert bool(((got[2] >= -1) & (got[2] <= 1)).all())


def test_philox_uniform_defaults_to_float32() -> None:
    g = Graph("philox")
    state = g.input("state", (6,), "uint32")
    u, _ = g.philox_uniform(state, (4,))
    assert u.dtype.name == "float32"


# -- Value queries --------------------------------------------------------------------------


def test_value_queries_mirror_torch() -> None:
    g = Graph("q")
    x = g.input("x", (2, 3, 4), "float16")
    t = torch.empty(2, 3, 4, dtype=torch.float16)
    assert x.shape == tuple(t.shape) and x.size() == tuple(t.size()) and x.size(1) == t.size(1)
    assert x.ndim == t.ndim and x.dim() == t.dim() and x.numel() == t.numel()
    assert x.dtype.torch == t.dtype


def test_values_of_another_graph_are_refused() -> None:
    g, h = Graph("g"), Graph("h")
    x = g.input("x", (2,), "float32")
    y = h.input("y", (2,), "float32")
    with pytest.raises(StridecError, match="another graph"):
        stridec.cat([y, x])
    assert x.uses == [] and y.uses == []  # the refused op left no use behind


@pytest.mark.parametrize("sizes", [(3, 2), (1,), (0, 4)])
def test_iterating_a_value_gives_its_slices_along_dim_0(sizes: tuple[int, ...]) -> None:
    """As `list(t)` on a tensor; without __iter__, Python would index until an error."""
    g = Graph("iter")
    x = g.input("x", sizes, "float32")
    parts = list(x)
    if not parts:  # nothing to return: a graph must return something
        with pytest.raises(VerificationError, match="output: expected at least one"):
            g.output(*parts)
        return
    g.output(*parts)
    t = arange(sizes)
    got = stridec.run_reference(g, t)
    assert len(got) == len(list(t)) == sizes[0]
    for a, e in zip(got, list(t), strict=True):
        assert torch.equal(a, e)
    s = Graph("scalar").input("s", (), "float32")
    with pytest.raises(TypeError):
        list(torch.tensor(1.0))
    with pytest.raises(LayoutError, match="iter: cannot iterate over a rank-0 value"):
        list(s)
