"""How outputs come back (docs/design.md#passes plan-memory, §5): a pure view of an input is a torch
view of the caller's tensor (same storage, torch's strides and offset); a layout torch
cannot hold (negative strides) is materialized; several outputs, and outputs that view one
buffer, keep torch's relations; every call returns fresh buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def assert_torch_view(out: torch.Tensor, base: torch.Tensor, want: torch.Tensor) -> None:
    """`out` views `base`'s storage exactly as torch's view `want` does."""
    assert storage_ptr(out) == storage_ptr(base)
    assert out.shape == want.shape
    assert out.stride() == want.stride()
    assert out.storage_offset() == want.storage_offset()
    assert torch.equal(out, want)


def compiled(name: str, sizes: tuple[int, ...], build: Callable[[Any], Any],
             dtype: str = "float32") -> stridec.CompiledGraph:
    g = stridec.Graph(name)
    out = build(g.input("x", sizes, dtype))
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return stridec.compile(g)


def strided_input(device: str) -> torch.Tensor:
    """A (4, 6) argument at offset 5 of a 60-element storage, rows 12 apart, every other
    column: element (i, j) at 5 + 12·i + 2·j."""
    return torch.as_strided(torch.randn(60, device=device), (4, 6), (12, 2), 5)


VIEWS: list[tuple[str, Callable[[Any], Any], Callable[[torch.Tensor], torch.Tensor]]] = [
    ("identity", lambda v: v, lambda t: t),
    ("transpose", lambda v: v.t(), lambda t: t.t()),
    ("slice_select", lambda v: v[1:, ::2][2], lambda t: t[1:, ::2][2]),
    ("expand", lambda v: v[:, :1].expand(4, 3), lambda t: t[:, :1].expand(4, 3)),
    ("unsqueeze_permute", lambda v: v.unsqueeze(1).permute(2, 1, 0),
     lambda t: t.unsqueeze(1).permute(2, 1, 0)),
    ("unfold", lambda v: v.unfold(1, 2, 2), lambda t: t.unfold(1, 2, 2)),
    # Storage indices 7, 8, 13, 14 of the caller's storage, as torch reads them.
    ("as_strided", lambda v: v.as_strided((2, 2), (1, 6), 7),
     lambda t: t.as_strided((2, 2), (1, 6), 7)),
    ("rank0", lambda v: v[3, 5], lambda t: t[3, 5]),
]


@pytest.mark.parametrize(("name", "build", "view"), VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("device", DEVICES)
def test_a_view_of_an_input_is_a_torch_view(name: str, build: Callable[[Any], Any],
                                           view: Callable[[torch.Tensor], torch.Tensor],
                                           device: str) -> None:
    fn = compiled(name, (4, 6), build)
    x = strided_input(device)
    out = fn(x)
    assert_torch_view(out, x, view(x))
    assert fn.plan_for(x).kernels == []
    x.mul_(2)  # the caller's later writes show through, as through any torch view
    assert torch.equal(out, view(x))


@pytest.mark.parametrize("device", DEVICES)
def test_a_flip_is_new_memory_with_torchs_strides(device: str) -> None:
    """torch's flip copies (strides as preserve_format): so does stridec, flipping twice
    included, one kernel each."""
    fn = compiled("flipped", (4, 6), lambda v: (v.flip(1), v.t().flip(0), v[::2].flip(0, 1),
                                                v.flip(0).flip(0)))
    x = strided_input(device)
    outs = fn(x)
    wants = (x.flip(1), x.t().flip(0), x[::2].flip(0, 1), x.flip(0).flip(0))
    for out, want in zip(outs, wants, strict=True):
        assert storage_ptr(out) != storage_ptr(x)
        assert out.stride() == want.stride()
        assert torch.equal(out, want)
    assert len(fn.plan_for(x).kernels) == 4


@pytest.mark.parametrize("device", DEVICES)
def test_a_negative_stride_output_is_materialized(device: str) -> None:
    """torch cannot hold a negative stride: an as_strided reading backwards comes back as
    a new, contiguous tensor. x.flip(1)[i, j] = x[i, 5 - j], at storage index
    6·i + (5 - j) = 5 + 6·i - j of a contiguous x."""
    fn = compiled("backwards", (4, 6), lambda v: v.as_strided((4, 6), (6, -1), 5))
    x = torch.randn(4, 6, device=device)
    out = fn(x)
    assert storage_ptr(out) != storage_ptr(x)
    assert out.is_contiguous() and torch.equal(out, x.flip(1))


@pytest.mark.parametrize("device", DEVICES)
def test_several_outputs_come_back_as_a_tuple_in_order(device: str) -> None:
    fn = compiled("several", (4, 6), lambda v: (v.t().contiguous(), v[1], v.to("float16")))
    x = strided_input(device)
    outs = fn(x)
    assert isinstance(outs, tuple) and len(outs) == 3
    assert torch.equal(outs[0], x.t().contiguous())
    assert_torch_view(outs[1], x, x[1])
    assert outs[2].dtype == torch.float16 and torch.equal(outs[2], x.half())
    single = compiled("single", (4, 6), lambda v: v.t().contiguous())(x)
    assert isinstance(single, torch.Tensor)


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_viewing_one_buffer_alias_as_in_torch(device: str) -> None:
    """`y = x.t().contiguous()` and views of it: one kernel, one new buffer, and each
    output a view of it with torch's strides — y[1] starts at 1·4 = 4."""
    fn = compiled("aliasing", (4, 6), lambda v: (lambda y: (y, y.t(), y[1], y[:, ::2]))(
        v.t().contiguous()))
    x = strided_input(device)
    y, yt, row, cols = fn(x)
    want = x.t().contiguous()
    assert storage_ptr(y) != storage_ptr(x)
    assert y.stride() == (4, 1) and y.storage_offset() == 0
    assert_torch_view(yt, y, y.t())
    assert_torch_view(row, y, y[1])
    assert_torch_view(cols, y, y[:, ::2])
    assert torch.equal(y, want)
    assert len(fn.plan_for(x).kernels) == 1
    y.zero_()  # one storage, as torch's y and its views
    assert not row.any() and not yt.any()


@pytest.mark.parametrize("device", DEVICES)
def test_the_same_input_twice_and_an_input_with_a_copy(device: str) -> None:
    fn = compiled("both", (4, 6), lambda v: (v, v.contiguous(), v[0], v.flip(1)))
    x = strided_input(device)
    a, b, c, d = fn(x)
    assert_torch_view(a, x, x)
    assert storage_ptr(b) != storage_ptr(x) and b.is_contiguous() and torch.equal(b, x)
    assert_torch_view(c, x, x[0])
    assert storage_ptr(d) != storage_ptr(x) and torch.equal(d, x.flip(1))


@pytest.mark.parametrize("device", DEVICES)
def test_every_call_returns_fresh_buffers(device: str) -> None:
    """A cached plan allocates anew on each call: an earlier result is never overwritten."""
    fn = compiled("fresh", (4, 6), lambda v: v.t().contiguous())
    x = strided_input(device)
    first = fn(x)
    kept = first.clone()
    x2 = strided_input(device)
    second = fn(x2)
    assert storage_ptr(first) != storage_ptr(second)
    assert torch.equal(first, kept) and torch.equal(second, x2.t().contiguous())


@pytest.mark.parametrize("device", DEVICES)
def test_output_layouts_and_dtypes(device: str) -> None:
    """A packed output has the format's physical row-major sizes; `copy_to` strides come
    back as given; philox words come back as uint32."""
    g = stridec.Graph("layouts")
    x = g.input("x", (2, 3, 4, 5), "int8")
    s = g.input("s", (6,), "int32")
    bits, new_state = g.philox(s, (2, 3))
    g.output(x.pack("NCHW4"), x.copy_to((1, 2, 6, 24)), bits, new_state)
    fn = stridec.compile(g)
    t = torch.randint(-9, 9, (2, 3, 4, 5), dtype=torch.int8, device=device)
    state = torch.zeros(6, dtype=torch.int32, device=device)
    packed, strided, b, st = fn(t, state)
    assert packed.shape == (2, 1, 4, 5, 4) and packed.is_contiguous()
    assert strided.stride() == (1, 2, 6, 24) and torch.equal(strided, t)
    assert b.dtype == torch.uint32 and b.shape == (2, 3) and b.is_contiguous()
    assert st.dtype == torch.int32 and st.tolist() == [2, 0, 0, 0, 0, 0]  # ⌈6/4⌉ = 2 blocks
    assert torch.equal(state, torch.zeros_like(state))  # the caller's state is not written
