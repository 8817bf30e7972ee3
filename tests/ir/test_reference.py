"""The reference executor: graphs that mix ops, the explicit form of `copy` (against a
computation written by hand with `torch.as_strided`), inputs that are non-contiguous,
offset or broadcast, and the argument checks (CallError). The oracle is always torch on
the same tensors; a `gpu` test runs the same on CUDA.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec import Graph, Layout
from stridec.errors import CallError, LayoutError, StridecError
from stridec.ir import ops as O
from stridec.runtime.backends.reference import flat_storage

# -- a graph that mixes ops ---------------------------------------------------------------


def mixed(x: Any, y: Any, cat: Any, pad: Any, as_strided: Any) -> list[Any]:
    """The same program for stridec Values and torch tensors (x: (2, 3, 4, 5), y: (5, 4))."""
    a = x.permute(0, 2, 3, 1)[:, 1:, ::2].contiguous().to(torch.float32)
    b = cat([a.reshape(-1), y.t().flatten()], 0)
    c = pad(x.flip(1)[..., None, 1:].squeeze(3), (1, 2, 0, -1))
    d = as_strided(x.unfold(3, 2, 1).select(-1, 1), (3, 2), (4, 1), 2)
    e = y.expand(2, 5, 4).reshape(10, 4)[::3]
    f = x[1, :, 2].t()
    g = cat([y.unsqueeze(0), y.flip(0, 1).unsqueeze(0)], 0).to(torch.float16)
    h = x.transpose(1, 3).reshape(2, -1, 3).movedim(0, -1).chunk(2, 1)[1]
    return [a, b, c, d, e, f, g, h, x, y.t()]


def stridec_mixed() -> Graph:
    g = Graph("mixed")
    x = g.input("x", (2, 3, 4, 5), "float16")
    y = g.input("y", (5, 4), "float32")
    outs = mixed(
        x, y, stridec.cat, lambda v, p: stridec.pad(v, p, value=-1.0),
        lambda v, size, stride, offset: v.as_strided(size, stride, offset),
    )
    g.output(*outs)
    g.verify()
    return g


def torch_mixed(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    return mixed(
        x, y, torch.cat, lambda v, p: F.pad(v, p, value=-1.0),
        lambda v, size, stride, offset: torch.as_strided(v, size, stride, offset),
    )


def assert_all_equal(got: tuple, expected: list) -> None:
    assert len(got) == len(expected)
    for a, e in zip(got, expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert torch.equal(a, e)


def contiguous_inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=gen).to(torch.float16)
    y = torch.randn(5, 4, generator=gen)
    return x.to(device), y.to(device)


def strided_inputs(kind: str, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The same sizes, with the caller's strides and offsets of `kind`."""
    gen = torch.Generator().manual_seed(1)
    if kind == "permuted":  # channels-last storage; y column-major
        x = torch.randn(2, 4, 5, 3, generator=gen).to(torch.float16).permute(0, 3, 1, 2)
        y = torch.randn(4, 5, generator=gen).t()
    elif kind == "offset":  # views into the middle of bigger storages
        x = torch.randn(3, 2, 3, 4, 5, generator=gen).to(torch.float16)[1]
        y = torch.randn(7, 6, generator=gen)[1:6, 2:]
    elif kind == "strided":  # steps, so there are gaps between the elements
        x = torch.randn(4, 3, 8, 5, generator=gen).to(torch.float16)[::2, :, ::2]
        y = torch.randn(10, 8, generator=gen)[::2, 1::2]
    elif kind == "broadcast":  # stride 0
        x = torch.randn(1, 3, 1, 5, generator=gen).to(torch.float16).expand(2, 3, 4, 5)
        y = torch.randn(4, generator=gen).expand(5, 4)
    else:
        raise AssertionError(kind)
    assert tuple(x.shape) == (2, 3, 4, 5) and tuple(y.shape) == (5, 4)
    return x.to(device), y.to(device)


def test_mixed_graph_on_contiguous_inputs() -> None:
    x, y = contiguous_inputs()
    assert_all_equal(stridec.run_reference(stridec_mixed(), x, y), torch_mixed(x, y))


@pytest.mark.parametrize("kind", ["permuted", "offset", "strided", "broadcast"])
def test_mixed_graph_on_strided_inputs(kind: str) -> None:
    """as_strided reads the caller's storage at absolute offsets, as torch.as_strided does."""
    x, y = strided_inputs(kind)
    assert_all_equal(stridec.run_reference(stridec_mixed(), x, y), torch_mixed(x, y))


@pytest.mark.parametrize("kind", ["permuted", "offset", "strided", "broadcast"])
def test_as_strided_keeps_the_callers_offset(kind: str) -> None:
    """Offset left out: the operand's offset over the root -- the caller's, at run time."""
    x, _ = strided_inputs(kind)
    g = Graph("as_strided")
    v = g.input("x", (2, 3, 4, 5), "float16")
    g.output(v.as_strided((2, 2), (1, 1)), v[1, 2].as_strided((3,), (1,)))
    a, b = stridec.run_reference(g, x)
    assert torch.equal(a, x.as_strided((2, 2), (1, 1)))
    assert torch.equal(b, x[1, 2].as_strided((3,), (1,)))


def test_as_strided_past_the_callers_storage() -> None:
    """Declared (2, 3, 4, 5) holds 120 elements; a broadcast caller tensor holds 15."""
    x, _ = strided_inputs("broadcast")
    with pytest.raises(RuntimeError):
        torch.as_strided(x, (3, 2), (7, 1), 2)
    g = Graph("as_strided")
    v = g.input("x", (2, 3, 4, 5), "float16")
    g.output(v.as_strided((3, 2), (7, 1), 2))
    with pytest.raises(LayoutError, match="as_strided: .* outside a storage of 15 elements"):
        stridec.run_reference(g, x)


def test_reshape_of_a_strided_input_copies_as_torch_does() -> None:
    """A reshape the caller's strides do not allow is a copy, so an as_strided of it reads
    the copy's storage, not the caller's."""
    x = torch.arange(12.0).reshape(3, 4).t()  # (4, 3), strides (1, 4)
    g = Graph("reshape")
    v = g.input("x", (4, 3), "float32")
    g.output(v.reshape(12).as_strided((4,), (3,), 0))
    (got,) = stridec.run_reference(g, x)
    assert torch.equal(got, torch.as_strided(x.reshape(12), (4,), (3,), 0))


def test_view_of_a_strided_input_that_torch_refuses() -> None:
    x = torch.arange(12.0).reshape(3, 4).t()
    with pytest.raises(RuntimeError):
        x.view(12)
    g = Graph("view")
    v = g.input("x", (4, 3), "float32")
    g.output(v.view(12))
    with pytest.raises(LayoutError, match="view: sizes \\[12\\] are not viewable"):
        stridec.run_reference(g, x)


def test_outputs_may_repeat_and_alias_inputs() -> None:
    g = Graph("alias")
    x = g.input("x", (2, 3), "int64")
    g.output(x, x, x.t(), x)
    t = torch.arange(6).reshape(2, 3)
    a, b, c, d = stridec.run_reference(g, t)
    assert torch.equal(a, t) and torch.equal(b, t) and torch.equal(c, t.t()) and torch.equal(d, t)


def test_graph_without_inputs() -> None:
    g = Graph("sources")
    f = g.full((2, 3), 4, "int16")
    g.output(f.t().contiguous(), stridec.pad(f, (1, 0), value=-2))
    a, b = stridec.run_reference(g)
    full = torch.full((2, 3), 4, dtype=torch.int16)
    assert torch.equal(a, full.t().contiguous()) and torch.equal(b, F.pad(full, (1, 0), value=-2))


def test_copy_to_a_padded_layout_reads_back_through_it() -> None:
    """Materializing into a pitched layout then taking views: the views address the copy."""
    g = Graph("pitched")
    x = g.input("x", (3, 4), "float32")
    c = x.copy_to(Layout((3, 4), (6, 1), 2))
    g.output(c[:, 1:].t(), c.as_strided((2, 2), (6, 1), 3))
    t = torch.arange(12.0).reshape(3, 4)
    a, b = stridec.run_reference(g, t)
    assert torch.equal(a, t[:, 1:].t())
    storage = torch.zeros(20)
    torch.as_strided(storage, (3, 4), (6, 1), 2).copy_(t)
    assert torch.equal(b, torch.as_strided(storage, (2, 2), (6, 1), 3))


# -- the explicit copy --------------------------------------------------------------------


def explicit_by_hand(
    storage: torch.Tensor | None,
    layout: Layout,
    dtype: torch.dtype,
    space: tuple[int, ...],
    src: Layout | None,
    dst: Layout,
    masks: list[tuple[tuple[int, ...], int, int]],
    fill: float | None,
    into: torch.Tensor | None = None,
) -> torch.Tensor:
    """`dst(i)` of the buffer gets `storage[src(i)]` where every mask holds, else `fill`
    (left alone when fill is None), written with torch.as_strided views."""
    room = max(layout.min_storage_size(), dst.min_storage_size()) + 1
    buffer = torch.zeros(room, dtype=dtype)
    if into is not None:
        buffer[: into.numel()] = into
    valid = torch.ones(space, dtype=torch.bool)
    for coeffs, lo, hi in masks:
        linear = sum(
            (torch.arange(n) * c).reshape([n if k == d else 1 for k in range(len(space))])
            for d, (n, c) in enumerate(zip(space, coeffs, strict=True))
        )
        valid &= (lo <= linear) & (linear < hi)
    if storage is None:
        values = torch.full(space, fill, dtype=dtype)
    else:
        assert src is not None
        padded = torch.zeros(max(storage.numel(), src.min_storage_size()), dtype=storage.dtype)
        padded[: storage.numel()] = storage
        values = torch.as_strided(padded, space, src.strides, src.offset).to(dtype)
    target = torch.as_strided(buffer, space, dst.strides, dst.offset)
    if fill is None:
        target[valid] = values[valid]
    else:
        # On the bits: torch 2.11's CPU has no `where` for uint32.
        bits = {torch.uint32: torch.int32}.get(dtype, dtype)
        fill_t = torch.tensor(fill, dtype=dtype).view(bits)
        target.copy_(torch.where(valid, values.view(bits), fill_t).view(dtype))
    return torch.as_strided(buffer, layout.sizes, layout.strides, layout.offset)


def run_explicit(
    t: torch.Tensor, operand: Any, attrs: dict, into: Any = None
) -> tuple[torch.Tensor, Any]:
    g = Graph("explicit")
    x = g.input("x", tuple(t.shape), str(t.dtype).removeprefix("torch."))
    operands = [operand(x)] + ([into(g)] if into is not None else [])
    op = g.append(O.explicit_copy_op(operands, attrs))
    g.output(op.result)
    g.verify()
    (got,) = stridec.run_reference(g, t)
    return got, op


NCHW4_SPACE = (2, 1, 4, 4, 5)  # (N, C/4, 4, H, W) of a (2, 3, 4, 5) tensor
NCHW4_LOGICAL = Layout(NCHW4_SPACE, (60, 80, 20, 5, 1), 0)  # c = 4*co + ci
NCHW4_PHYSICAL = Layout(NCHW4_SPACE, (80, 80, 1, 20, 4), 0)  # row-major (2, 1, 4, 5, 4)
NCHW4_MASK = [((0, 4, 1, 0, 0), 0, 3)]  # 0 <= 4*co + ci < 3


@pytest.mark.parametrize("fill", [2.5, 0.0])
def test_explicit_copy_packs_with_a_fill(fill: float) -> None:
    """The pack NCHW4 of C = 3 as lower-formats writes it: channel 3 gets the fill."""
    t = torch.randn(2, 3, 4, 5)
    layout = Layout.contiguous((2, 1, 4, 5, 4))
    attrs = {"layout": layout, "space": NCHW4_SPACE, "src": NCHW4_LOGICAL,
             "dst": NCHW4_PHYSICAL, "masks": NCHW4_MASK, "fill": fill}
    got, op = run_explicit(t, lambda x: x, attrs)
    expected = explicit_by_hand(flat_storage(t), layout, torch.float32, NCHW4_SPACE,
                                NCHW4_LOGICAL, NCHW4_PHYSICAL, NCHW4_MASK, fill)
    assert op.result.type.layout == layout and torch.equal(got, expected)
    # ... which is torch's own NCHW4 construction
    split = F.pad(t, (0, 0, 0, 0, 0, 1), value=fill).reshape(2, 1, 4, 4, 5)
    assert torch.equal(got, split.permute(0, 1, 3, 4, 2))


def test_explicit_copy_without_fill_is_a_domain_restriction() -> None:
    """Unpacking: only the points where the mask holds are written (channel 3 is not read
    back, and its destination would lie past the end of the result)."""
    p = torch.randn(2, 1, 4, 5, 4)
    layout = Layout.contiguous((2, 3, 4, 5))
    attrs = {"layout": layout, "space": NCHW4_SPACE, "src": NCHW4_PHYSICAL,
             "dst": NCHW4_LOGICAL, "masks": NCHW4_MASK}
    got, op = run_explicit(p, lambda x: x, attrs)
    assert op.attrs["fill"] is None
    expected = explicit_by_hand(flat_storage(p), layout, torch.float32, NCHW4_SPACE,
                                NCHW4_PHYSICAL, NCHW4_LOGICAL, NCHW4_MASK, None)
    assert torch.equal(got, expected)
    assert torch.equal(got, p.permute(0, 1, 4, 2, 3).reshape(2, 4, 4, 5)[:, :3])


def test_explicit_copy_reads_the_root_storage_of_a_view_operand() -> None:
    """The operand is x[1:] (offset 4); src addresses x's storage, absolutely."""
    t = torch.arange(12.0).reshape(3, 4)
    space = (4, 2)
    src = Layout(space, (1, 4), 4)  # x[1:].t()
    dst = Layout(space, (2, 1), 0)
    layout = Layout.contiguous(space)
    attrs = {"layout": layout, "dtype": "float16", "space": space, "src": src, "dst": dst}
    got, op = run_explicit(t, lambda x: x[1:], attrs)
    expected = explicit_by_hand(flat_storage(t), layout, torch.float16, space, src, dst, [], None)
    assert op.result.dtype.name == "float16"
    assert torch.equal(got, expected) and torch.equal(got, t[1:].t().to(torch.float16))


def test_explicit_copy_on_a_strided_caller_tensor() -> None:
    """src is literal: it indexes the caller's storage, whatever the caller's strides."""
    base = torch.arange(40.0)
    t = base[3:].as_strided((4, 3), (1, 8), 5)  # non-contiguous, offset 5
    space = (3, 4)
    src = Layout(space, (8, 1), 5)
    dst = Layout(space, (1, 3), 0)
    layout = Layout((3, 4), (1, 3), 0)
    attrs = {"layout": layout, "space": space, "src": src, "dst": dst,
             "masks": [((1, 1), 0, 5)], "fill": -1.0}
    got, _ = run_explicit(t, lambda x: x, attrs)
    expected = explicit_by_hand(flat_storage(t), layout, torch.float32, space, src, dst,
                                [((1, 1), 0, 5)], -1.0)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("fill", [None, -1.0])
def test_explicit_copy_into_a_buffer_operand(fill: float | None) -> None:
    """The second operand is the buffer written in place (as cat writes each input): rows
    1..2 of y.t() land in columns 3..5 of a (4, 6) buffer of sevens."""
    t = torch.arange(12.0).reshape(3, 4)
    space = (4, 3)
    src = Layout(space, (1, 4), 0)  # y.t() over y's storage
    dst = Layout(space, (6, 1), 3)  # columns 3..5
    masks = [((1, 0), 1, 3)]  # rows 1 <= i < 3
    layout = Layout.contiguous((4, 6))
    attrs = {"space": space, "src": src, "dst": dst, "masks": masks, "fill": fill}
    got, op = run_explicit(t, lambda x: x.t(), attrs, into=lambda g: g.full((4, 6), 7.0, "float32"))
    assert op.result.type.layout == layout
    expected = explicit_by_hand(flat_storage(t), layout, torch.float32, space, src, dst, masks,
                                fill, into=torch.full((24,), 7.0))
    assert torch.equal(got, expected)
    by_torch = torch.full((4, 6), 7.0)
    if fill is not None:
        by_torch[:, 3:] = fill
    by_torch[1:3, 3:] = t.t()[1:3]
    assert torch.equal(got, by_torch)


def test_explicit_copies_chained_through_one_buffer() -> None:
    """Two copies into the same buffer: the second sees what the first wrote."""
    g = Graph("chain")
    x = g.input("x", (2, 3), "float32")
    buffer = g.full((2, 6), 0.0, "float32")
    left = g.append(O.StridedCopyOp([x, buffer], {"space": (2, 3), "src": Layout((2, 3), (3, 1)),
                                           "dst": Layout((2, 3), (6, 1), 0)})).result
    both = g.append(O.StridedCopyOp([x, left], {"space": (2, 3), "src": Layout((2, 3), (3, 1)),
                                         "dst": Layout((2, 3), (6, 1), 3)})).result
    g.output(both)
    g.verify()
    t = torch.randn(2, 3)
    (got,) = stridec.run_reference(g, t)
    assert torch.equal(got, torch.cat([t, t], 1))
    # The buffer before the writes is memory they wrote over: no op may read it after.
    h = Graph("stale")
    x = h.input("x", (2, 3), "float32")
    buffer = h.full((2, 6), 0.0, "float32")
    left = h.append(O.StridedCopyOp([x, buffer], {"space": (2, 3), "src": Layout((2, 3), (3, 1)),
                                           "dst": Layout((2, 3), (6, 1), 0)})).result
    h.output(left, buffer)
    with pytest.raises(stridec.VerificationError, match="op #3 'output': operand 1 reads "
                       "memory that op #2 'strided_copy' wrote over in place"):
        h.verify()


@pytest.mark.parametrize("dtype, fill", [("float32", -1.5), ("int8", 3), ("bool", True),
                                         ("uint32", 7)])
def test_fill_copy_without_operands(dtype: str, fill: float) -> None:
    layout = Layout((2, 3), (1, 2), 0)
    g = Graph("fill")
    op = g.append(O.FillOp([], {"layout": layout, "dtype": dtype, "space": (2, 3), "dst": layout,
                                "fill": fill}))
    g.output(op.result)
    g.verify()
    (got,) = stridec.run_reference(g)
    torch_dtype = getattr(torch, dtype)
    expected = explicit_by_hand(None, layout, torch_dtype, (2, 3), None, layout, [], fill)
    assert torch.equal(got, expected)
    assert torch.equal(got, torch.full((2, 3), fill, dtype=torch_dtype))


def test_partial_fill_without_operands_leaves_the_rest_zero() -> None:
    """A fill over half of a buffer (a cat's padding, say): the rest of a new buffer is 0."""
    layout = Layout.contiguous((2, 4))
    space = (2, 2)
    dst = Layout(space, (4, 1), 2)
    g = Graph("fill")
    op = g.append(O.FillOp([], {"layout": layout, "dtype": "float32", "space": space,
                                "dst": dst, "fill": 5.0}))
    g.output(op.result)
    (got,) = stridec.run_reference(g)
    expected = explicit_by_hand(None, layout, torch.float32, space, None, dst, [], 5.0)
    assert torch.equal(got, expected)
    assert torch.equal(got, torch.tensor([[0.0, 0, 5, 5], [0, 0, 5, 5]]))


def test_explicit_copy_attribute_checks() -> None:
    g = Graph("bad")
    x = g.input("x", (2, 3), "float32")
    with pytest.raises(StridecError, match="fill: missing attribute 'layout'"):
        O.FillOp([], {"space": (2, 3), "dst": Layout.contiguous((2, 3)), "fill": 0})
    with pytest.raises(StridecError, match="fill: missing attribute 'fill'"):
        O.FillOp([], {"layout": Layout.contiguous((2, 3)), "dtype": "float32", "space": (2, 3),
                      "dst": Layout.contiguous((2, 3))})
    with pytest.raises(StridecError, match="strided_copy: buffer operand"):
        O.StridedCopyOp([x, x], {"layout": Layout((2, 3), (1, 2)), "space": (2, 3),
                                 "src": Layout.contiguous((2, 3)),
                                 "dst": Layout.contiguous((2, 3))})
    assert x.uses == []


# -- argument checks ------------------------------------------------------------------------


def simple() -> Graph:
    g = Graph("simple")
    x = g.input("x", (2, 3), "float32")
    y = g.input("y", (3,), "int32")
    g.output(x.t(), y)
    return g


@pytest.mark.parametrize(
    "args, pattern",
    [
        ((torch.zeros(2, 3),), r"simple: expected 2 tensor\(s\); got 1"),
        ((torch.zeros(2, 3), torch.zeros(3, dtype=torch.int32), torch.zeros(1)),
         r"simple: expected 2 tensor\(s\); got 3"),
        ((torch.zeros(3, 2), torch.zeros(3, dtype=torch.int32)),
         r"input 'x': expected sizes \[2, 3\] and dtype float32; got \[3, 2\]"),
        ((torch.zeros(2, 3), torch.zeros(3)), r"input 'y': expected sizes \[3\] and dtype int32"),
        ((torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.int32)),
         r"input 'x'.*got \[2, 3\] torch.float64"),
        (([[0.0] * 3] * 2, torch.zeros(3, dtype=torch.int32)),
         r"input 'x': expected a torch.Tensor; got list"),
        ((torch.zeros(2, 3), torch.zeros(3, dtype=torch.int32, device="meta")),
         r"input 'y': expected device cpu; got meta"),
    ],
)
def test_call_errors(args: tuple, pattern: str) -> None:
    with pytest.raises(CallError, match=pattern):
        stridec.run_reference(simple(), *args)


def test_a_refused_call_leaves_the_graph_untouched() -> None:
    g = simple()
    text = str(g)
    with pytest.raises(CallError):
        stridec.run_reference(g, torch.zeros(3, 2), torch.zeros(3, dtype=torch.int32))
    assert str(g) == text
    x, y = torch.randn(2, 3).t().contiguous().t(), torch.arange(3, dtype=torch.int32)
    a, b = stridec.run_reference(g, x, y)
    assert torch.equal(a, x.t()) and torch.equal(b, y) and str(g) == text


# -- on CUDA ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["contiguous", "permuted", "offset", "strided", "broadcast"])
def test_mixed_graph_on_cuda(kind: str) -> None:
    x, y = contiguous_inputs("cuda") if kind == "contiguous" else strided_inputs(kind, "cuda")
    got = stridec.run_reference(stridec_mixed(), x, y)
    assert all(a.device.type == "cuda" for a in got)
    assert_all_equal(got, torch_mixed(x, y))
    # and the same as on the CPU
    assert_all_equal(tuple(a.cpu() for a in got), torch_mixed(x.cpu(), y.cpu()))


@pytest.mark.gpu
def test_explicit_copy_and_pack_on_cuda() -> None:
    t = torch.randn(2, 3, 4, 5, device="cuda")
    layout = Layout.contiguous((2, 1, 4, 5, 4))
    attrs = {"layout": layout, "space": NCHW4_SPACE, "src": NCHW4_LOGICAL,
             "dst": NCHW4_PHYSICAL, "masks": NCHW4_MASK, "fill": 1.0}
    g = Graph("cuda")
    x = g.input("x", (2, 3, 4, 5), "float32")
    explicit = g.append(O.MaskedCopyOp([x], attrs)).result
    g.output(explicit, x.pack("NCHW4", fill=1.0), x.pack("NCHW4", fill=1.0).unpack("NCHW4", 3))
    a, b, c = stridec.run_reference(g, t)
    split = F.pad(t, (0, 0, 0, 0, 0, 1), value=1.0).reshape(2, 1, 4, 4, 5)
    assert torch.equal(a, split.permute(0, 1, 3, 4, 2))
    assert torch.equal(b, a) and torch.equal(c, t)
