"""Results written into caller memory (`fn(*inputs, out=...)`) and inputs that declare
their layout, on every backend: each `out` equals torch's result bit for bit, every byte of
the buffer outside the `out` window keeps its value, and bad `out` arguments are refused
before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.errors import CallError
from stridec.ir.layout import Layout
from stridec.runtime.backends.reference import layout_indices
from stridec.runtime.compile import BACKENDS as ALL_BACKENDS

BACKENDS = [b for b in ("interpret", "cpu", "reference") if b in ALL_BACKENDS]
SENTINEL = -7


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns, so that equality is bit for bit (NaN payloads too)."""
    if t.is_floating_point():
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.contiguous().view(bits)
    if t.dtype == torch.uint32:
        return t.contiguous().view(torch.int32)
    return t


def assert_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(bits(got), bits(want)), (got, want)


def sentinel_buffer(elements: int, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.uint32:
        return torch.full((elements,), 0xDEADBEEF, dtype=torch.int64).to(torch.uint32)
    return torch.full((elements,), SENTINEL, dtype=dtype)


def assert_untouched(buffer: torch.Tensor, windows: Sequence[torch.Tensor]) -> None:
    """Every element of the flat `buffer` outside `windows` still holds the sentinel."""
    written = torch.zeros(buffer.numel(), dtype=torch.bool)
    for w in windows:
        if w.numel():
            lay = Layout(tuple(w.shape), tuple(w.stride()), w.storage_offset())
            written[layout_indices(lay).reshape(-1)] = True
    fresh = sentinel_buffer(buffer.numel(), buffer.dtype)
    assert torch.equal(bits(buffer)[~written], bits(fresh)[~written])


def graph_of(name: str, inputs: Sequence[tuple[Sequence[int], str]],
             build: Callable[..., Any]) -> stridec.Graph:
    g = stridec.Graph(name)
    values = [g.input(f"x{i}", sizes, dtype) for i, (sizes, dtype) in enumerate(inputs)]
    out = build(*values)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g


# (id, inputs, the graph, the same in torch)
CASES: list[tuple[str, list, Callable[..., Any], Callable[..., Any]]] = [
    ("transpose", [((2, 3, 4), "float32")],
     lambda x: x.permute(2, 0, 1).contiguous(), lambda x: x.permute(2, 0, 1)),
    ("view_of_input", [((3, 5), "float32")], lambda x: x.t(), lambda x: x.t()),
    ("cast", [((3, 5), "float32")], lambda x: x.t().to("float16"),
     lambda x: x.t().to(torch.float16)),
    ("pad", [((2, 3), "int32")], lambda x: stridec.pad(x, (1, 2, 0, 1), value=9),
     lambda x: F.pad(x, (1, 2, 0, 1), value=9)),
    ("cat", [((2, 3), "float32"), ((2, 2), "float32")],
     lambda a, b: stridec.cat([a, b], 1), lambda a, b: torch.cat([a, b], 1)),
    ("two_outputs", [((4, 3), "float32")],
     lambda x: (x[1:].contiguous(), x.t().contiguous()), lambda x: (x[1:], x.t())),
]


def inputs_for(case_inputs: list, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for sizes, dtype in case_inputs:
        t = torch.randn(sizes, generator=gen) * 100
        out.append(t.to(getattr(torch, dtype)))
    return out


def expected(case: Any, tensors: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    want = case[3](*tensors)
    return want if isinstance(want, tuple) else (want,)


def strided_out(sizes: Sequence[int], order: Sequence[int], pads: Sequence[int], offset: int,
                tail: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A window of a sentinel-filled buffer: dims laid out in `order` (outermost first),
    each dim's extent padded by `pads[d]` elements, starting at `offset`."""
    strides = [0] * len(sizes)
    running = 1
    for d in reversed(order):
        strides[d] = running
        running *= sizes[d] + pads[d]
    lay = Layout(tuple(sizes), tuple(strides), offset)
    buffer = sentinel_buffer(lay.min_storage_size() + tail, dtype)
    return buffer, torch.as_strided(buffer, tuple(sizes), tuple(strides), offset)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_out_windows_of_larger_buffers(case: Any, backend: str) -> None:
    g = graph_of(case[0], case[1], case[2])
    fn = stridec.compile(g, backend=backend)
    tensors = inputs_for(case[1])
    want = expected(case, tensors)
    buffers, outs = [], []
    for k, w in enumerate(want):  # each out transposed, pitched and offset in its buffer
        order = list(range(w.dim()))[::-1] if k % 2 == 0 else list(range(w.dim()))
        buf, o = strided_out(w.shape, order, [1] * w.dim(), 3, 2, w.dtype)
        buffers.append(buf)
        outs.append(o)
    got = fn(*tensors, out=tuple(outs))
    got = got if isinstance(got, tuple) else (got,)
    for g_, o, w, buf in zip(got, outs, want, buffers, strict=True):
        assert g_ is o
        assert_bits(o, w)
        assert_untouched(buf, [o])


@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("backend", BACKENDS)
def test_out_layouts_drawn(backend: str, data: Any) -> None:
    """Windows, pitches, permutations and offsets drawn by hypothesis."""
    case = data.draw(st.sampled_from(CASES), label="case")
    g = graph_of(case[0], case[1], case[2])
    fn = stridec.compile(g, backend=backend)
    tensors = inputs_for(case[1], data.draw(st.integers(0, 3), label="seed"))
    want = expected(case, tensors)
    buffers, outs = [], []
    for w in want:
        order = data.draw(st.permutations(list(range(w.dim()))), label="order")
        pads = data.draw(st.lists(st.integers(0, 3), min_size=w.dim(), max_size=w.dim()))
        offset = data.draw(st.integers(0, 5), label="offset")
        tail = data.draw(st.integers(0, 4), label="tail")
        buf, o = strided_out(w.shape, order, pads, offset, tail, w.dtype)
        buffers.append(buf)
        outs.append(o)
    fn(*tensors, out=tuple(outs) if len(outs) > 1 else outs[0])
    for o, w, buf in zip(outs, want, buffers, strict=True):
        assert_bits(o, w)
        assert_untouched(buf, [o])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pitched_output_directml_padding(backend: str) -> None:
    """DirectML's padding example: a 2x3 result in rows of pitch 5; the two padding
    elements of each row keep their bytes. Element (1, 2) lands at 1·5 + 2·1 = 7."""
    g = stridec.Graph("pitch")
    x = g.input("x", (3, 2), "float32")
    g.output(x.t())
    fn = stridec.compile(g, backend=backend)
    x = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    buffer = sentinel_buffer(10, torch.float32)
    out = torch.as_strided(buffer, (2, 3), (5, 1), 0)
    assert fn(x, out=out) is out
    assert_bits(out, x.t())
    assert buffer[7] == x.t()[1, 2]
    assert_untouched(buffer, [out])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["nhwc", "channels"])
def test_zero_copy_cat(backend: str, layout: str) -> None:
    """Two outputs into disjoint windows of one buffer: torch.cat without the cat, in one
    launch on the compiled backends."""
    g = stridec.Graph("zcat")
    a = g.input("a", (2, 3, 4, 5), "float32")
    b = g.input("b", (2, 5, 4, 3), "float32")
    g.output(a, b.permute(0, 3, 2, 1))
    fn = stridec.compile(g, backend=backend)
    A, B = torch.randn(2, 3, 4, 5), torch.randn(2, 5, 4, 3)
    want = torch.cat([A, B.permute(0, 3, 2, 1)], 1)
    full = (2, 6, 4, 5)
    if layout == "nhwc":
        buffer = sentinel_buffer(2 * 6 * 4 * 5 + 7, torch.float32)
        whole = torch.as_strided(buffer, full, (120, 1, 30, 6), 3)
    else:
        buffer = sentinel_buffer(2 * 6 * 4 * 5 + 7, torch.float32)
        whole = torch.as_strided(buffer, full, (120, 20, 5, 1), 3)
    outs = (whole[:, :3], whole[:, 3:])
    fn(A, B, out=outs)
    assert_bits(whole, want)
    assert_untouched(buffer, [whole])
    if backend != "reference":
        assert len(fn.plan_for(A, B, out=outs).kernels) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_philox_state_updated_in_place(backend: str) -> None:
    """`out=(bits, state)` with the state as its own out: a loop that allocates no output
    and matches the reference generator step for step; the new state is written by a
    launch of its own, after the one that reads the old state."""
    g = stridec.Graph("rng")
    s = g.input("s", (6,), "uint32")
    values, new_state = g.philox(s, (3, 7))
    g.output(values, new_state)
    fn = stridec.compile(g, backend=backend)
    oracle = stridec.compile(g, backend="reference")
    start = torch.tensor([0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 7, 9],
                         dtype=torch.int64).to(torch.uint32)
    state, expect_state = start.clone(), start.clone()
    buffer = sentinel_buffer(40, torch.uint32)
    out_bits = torch.as_strided(buffer, (3, 7), (1, 3), 2)  # column-major window
    for _ in range(3):
        want_bits, expect_state = oracle(expect_state)
        got = fn(state, out=(out_bits, state))
        assert got[0] is out_bits and got[1] is state
        assert_bits(out_bits, want_bits)
        assert_bits(state, expect_state)
        assert_untouched(buffer, [out_bits])
    if backend != "reference":
        plan = fn.plan_for(state, out=(out_bits, state))
        kinds = [k.kind for k in plan.kernels]
        # The generator writes the bits straight into `out_bits`; the state is written last.
        assert kinds == ["philox", "copy"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", ["identity", "transpose", "shifted"])
def test_out_overlapping_an_input_is_staged(backend: str, which: str) -> None:
    """An out that shares memory with an input gets torch's answer (computed as if into
    fresh memory, then written), never a half-updated one."""
    g = stridec.Graph("inplace")
    x = g.input("x", (4, 4), "float32")
    g.output(x.t().contiguous() if which != "identity" else x)
    fn = stridec.compile(g, backend=backend)
    base = torch.randn(5, 5)
    x = base[:4, :4]
    want = x.t().clone() if which != "identity" else x.clone()
    out = {"identity": x, "transpose": x, "shifted": base[1:, 1:]}[which]
    fn(x.clone() if False else x, out=out)
    assert_bits(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_output_is_computed_before_an_out_over_an_input_is_written(backend: str) -> None:
    """Output 0 written into its own input, output 1 a view of that input: output 1 is
    the input before the write, as torch computes both before either out is written (the
    reference backend once copied output 0 in first and then read the overwritten input)."""
    g = stridec.Graph("two")
    x = g.input("x", (2, 3), "float32")
    g.output(x.flip(1).contiguous(), x.t())
    fn = stridec.compile(g, backend=backend)
    t = torch.randn(2, 3)
    want = (t.flip(1).contiguous(), t.t().clone())
    second = torch.empty(3, 2)
    fn(t, out=(t, second))
    assert_bits(t, want[0])
    assert_bits(second, want[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_an_empty_output(backend: str) -> None:
    g = stridec.Graph("empty")
    x = g.input("x", (0, 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend=backend)
    out = torch.empty(3, 0)
    assert fn(torch.empty(0, 3), out=out) is out


# -- bad out= arguments: each a CallError naming the argument, before any write --------

def _two_output_graph() -> stridec.Graph:
    g = stridec.Graph("two")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous(), x.to("float16"))
    return g


def _bad_outs() -> list[tuple[str, Callable[[], Any], str]]:
    def win(buf: torch.Tensor, sizes: tuple, strides: tuple, offset: int = 0) -> torch.Tensor:
        return torch.as_strided(buf, sizes, strides, offset)

    def shrunk() -> tuple:
        a = torch.full((3, 2), -7.0)
        a.untyped_storage().resize_(4 * 4)
        return (a, torch.empty(2, 3, dtype=torch.float16))

    def shared() -> tuple:
        buf = torch.full((8,), -7.0)
        a = win(buf, (3, 2), (2, 1), 0)
        b = win(buf.view(torch.float16), (2, 3), (3, 1), 4)  # bytes 8..19 meet a's 8..23
        return (a, b)

    good16 = lambda: torch.empty(2, 3, dtype=torch.float16)  # noqa: E731
    return [
        ("count", lambda: torch.empty(3, 2), r"expected 2; got 1"),
        ("count3", lambda: (torch.empty(3, 2), good16(), good16()), r"expected 2; got 3"),
        ("not_tensor", lambda: ([1.0], good16()), r"out\[0\]: expected a torch.Tensor"),
        ("sizes", lambda: (torch.empty(2, 3), good16()), r"out\[0\]: expected sizes \[3, 2\]"),
        ("dtype", lambda: (torch.empty(3, 2), torch.empty(2, 3)),
         r"out\[1\]: expected dtype float16"),
        ("device", lambda: (torch.empty(3, 2, device="meta"), good16()),
         r"out\[0\]: expected device cpu"),
        ("expanded", lambda: (torch.full((1, 2), -7.0).expand(3, 2), good16()),
         r"out\[0\]: expected each element at its own address"),
        ("too_small", shrunk, r"out\[0\]: layout .* past its storage"),
        ("shared", shared, r"out\[1\]: shares memory with out\[0\]"),
        ("grad", lambda: (torch.empty(3, 2, requires_grad=True), good16()),
         r"out\[0\]: expected a tensor that does not require grad"),
        ("kind", lambda: "x", r"'out' must be a tensor or a tuple"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", _bad_outs(), ids=[b[0] for b in _bad_outs()])
def test_bad_out_is_refused_before_any_write(bad: Any, backend: str) -> None:
    fn = stridec.compile(_two_output_graph(), backend=backend)
    outs = bad[1]()
    before = [bits(o.detach()).clone() for o in (outs if isinstance(outs, tuple) else (outs,))
              if isinstance(o, torch.Tensor) and o.device.type == "cpu"
              and o.untyped_storage().nbytes() >= _storage_need(o)]
    with pytest.raises(CallError, match=bad[2]):
        fn(torch.randn(2, 3), out=outs)
    after = [bits(o.detach()) for o in (outs if isinstance(outs, tuple) else (outs,))
             if isinstance(o, torch.Tensor) and o.device.type == "cpu"
             and o.untyped_storage().nbytes() >= _storage_need(o)]
    for b, a in zip(before, after, strict=True):
        assert torch.equal(a, b)


def _storage_need(t: torch.Tensor) -> int:
    if not t.numel():
        return 0
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (last + 1) * t.element_size()


def test_out_and_keywords() -> None:
    fn = stridec.compile(_two_output_graph(), backend="interpret")
    with pytest.raises(CallError, match="keyword argument"):
        fn(torch.randn(2, 3), out=(torch.empty(3, 2), torch.empty(2, 3, dtype=torch.float16)),
           bogus=1)


# -- inputs with a declared layout -----------------------------------------------------

def _pitched_graph() -> stridec.Graph:
    """A 3x3 input in rows of pitch 5 (storage 15): the graph reads the padding too."""
    g = stridec.Graph("pitched_in")
    x = g.input("x", (3, 3), "float32", strides=(5, 1), storage=15)
    g.output(x.as_strided((3, 5), (5, 1), 0).contiguous(), x.t().contiguous())
    return g


def test_declared_input_text_round_trip() -> None:
    g = _pitched_graph()
    text = str(g)
    assert 'input {name = "x", storage = 15} : tensor<3x3xf32, strided<[5, 1], offset: 0>>' in text
    assert str(stridec.parse(text)) == text


def test_declared_storage_must_hold_the_layout() -> None:
    g = stridec.Graph("small")
    with pytest.raises(stridec.LayoutError, match="storage of 12 elements"):
        g.input("x", (3, 3), "float32", strides=(5, 1), storage=12)


def test_as_strided_beyond_numel_needs_a_declared_storage() -> None:
    g = stridec.Graph("undeclared")
    x = g.input("x", (3, 3), "float32")
    with pytest.raises(stridec.LayoutError):
        x.as_strided((3, 5), (5, 1), 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_declared_input_layout(backend: str) -> None:
    fn = stridec.compile(_pitched_graph(), backend=backend)
    storage = torch.randn(15)
    x = torch.as_strided(storage, (3, 3), (5, 1), 0)
    got = fn(x)
    assert_bits(got[0], storage.view(3, 5))
    assert_bits(got[1], x.t().contiguous())
    out = (torch.empty(3, 5), torch.empty(3, 3).t())
    fn(x, out=out)
    assert_bits(out[0], storage.view(3, 5))
    assert_bits(out[1], x.t())
    small = torch.as_strided(torch.randn(13), (3, 3), (5, 1), 0)
    with pytest.raises(CallError, match="argument 'x': expected a storage of at least 15"):
        fn(small)
    # The meaning of the as_strided depends on the declared layout: another is refused.
    with pytest.raises(CallError, match="argument 'x': the graph reads this input's storage"):
        fn(torch.randn(3, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_declared_view_of_a_sliced_input(backend: str) -> None:
    """`view` of a sliced input, valid for the declared layout; a caller's tensor of
    another layout re-specializes (the view means the same on any layout it fits)."""
    g = stridec.Graph("sliced")
    x = g.input("x", (4, 6), "float32", strides=(8, 1))
    g.output(x.view(4, 2, 3).permute(1, 0, 2).contiguous())
    fn = stridec.compile(g, backend=backend)
    for t in (torch.randn(4, 8)[:, :6], torch.randn(4, 6), torch.randn(6, 4).t()):
        assert_bits(fn(t), t.view(4, 2, 3).permute(1, 0, 2))


def test_view_of_a_sliced_input_needs_the_declaration() -> None:
    g = stridec.Graph("undeclared_slice")
    x = g.input("x", (4, 6), "float32", strides=(8, 1))
    x.view(24 // 4, 4) if False else None
    g2 = stridec.Graph("expanded")
    y = g2.input("y", (4, 3), "float32", strides=(0, 1))
    assert y.view(2, 2, 3).type.layout.strides == (0, 0, 1)
    with pytest.raises(stridec.LayoutError):
        x.view(24)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "reference"])
def test_out_fast_path_rechecks_what_can_change(backend: str) -> None:
    """A repeated `out=` call is answered from its call key (no new compile, a cache hit);
    an out or input storage shrunk since, or another out storage, goes down the full path
    and is refused or re-planned there."""
    g = stridec.Graph("fast")
    x = g.input("x", (3, 4), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend=backend)
    x = torch.randn(3, 4)
    out = torch.empty(4, 3)
    fn(x, out=out)
    hits = fn.stats.cache_hits
    fn(x, out=out)
    assert fn.stats.compiles == 1 and fn.stats.cache_hits == hits + 1
    assert_bits(out, x.t())
    shrunk = torch.empty(4, 3)
    shrunk.untyped_storage().resize_(4 * 8)
    with pytest.raises(CallError, match="out: layout .* past its storage"):
        fn(x, out=shrunk)
    small = torch.randn(3, 4)
    fn(small, out=out)
    small.untyped_storage().resize_(4 * 8)
    with pytest.raises(CallError, match="argument 'x'"):
        fn(small, out=out)
    y = torch.randn(4, 4)
    x = y[:3]
    want = x.t().clone()
    fn(x, out=y.t()[:, :3])  # now the out overlaps the input: staged, still torch's answer
    assert_bits(y.t()[:, :3], want)


# -- the same on CUDA (the triton backend; skipped without a GPU) ----------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_out_windows_on_cuda(case: Any) -> None:
    g = graph_of(case[0], case[1], case[2])
    fn = stridec.compile(g)
    tensors = [t.cuda() for t in inputs_for(case[1])]
    want = expected(case, [t.cpu() for t in tensors])
    buffers, outs = [], []
    for k, w in enumerate(want):
        order = list(range(w.dim()))[::-1] if k % 2 == 0 else list(range(w.dim()))
        buf, o = strided_out(w.shape, order, [1] * w.dim(), 3, 2, w.dtype)
        buffers.append(buf.cuda())
        outs.append(torch.as_strided(buffers[-1], o.shape, o.stride(), o.storage_offset()))
    fn(*tensors, out=tuple(outs))
    torch.cuda.synchronize()
    for o, w, buf in zip(outs, want, buffers, strict=True):
        assert_bits(o.cpu(), w)
        host = buf.cpu()
        assert_untouched(host, [torch.as_strided(host, o.shape, o.stride(), o.storage_offset())])


@pytest.mark.gpu
def test_zero_copy_cat_and_philox_loop_on_cuda() -> None:
    g = stridec.Graph("zcat_cuda")
    a = g.input("a", (2, 3, 4, 5), "float16")
    b = g.input("b", (2, 5, 4, 3), "float16")
    g.output(a, b.permute(0, 3, 2, 1))
    fn = stridec.compile(g)
    A = torch.randn(2, 3, 4, 5, device="cuda").half()
    B = torch.randn(2, 5, 4, 3, device="cuda").half()
    whole = torch.empty(2, 6, 4, 5, device="cuda", dtype=torch.float16)
    outs = (whole[:, :3], whole[:, 3:])
    fn(A, B, out=outs)
    assert torch.equal(whole, torch.cat([A, B.permute(0, 3, 2, 1)], 1))
    assert len(fn.plan_for(A, B, out=outs).kernels) == 1

    g = stridec.Graph("rng_cuda")
    s = g.input("s", (6,), "uint32")
    g.output(*g.philox(s, (64, 1000)))
    fn, oracle = stridec.compile(g), stridec.compile(g, backend="reference")
    state = torch.tensor([0xFFFFFFF0, 0xFFFFFFFF, 0, 0, 1, 2], dtype=torch.int64).to(torch.uint32)
    expect, state = state.clone(), state.cuda()
    bits = torch.empty(1000, 64, dtype=torch.uint32, device="cuda").t()  # column-major
    for _ in range(3):  # many programs read the old state; a later launch writes the new
        fn(state, out=(bits, state))
        want_bits, expect = oracle(expect)
        assert_bits(bits.cpu(), want_bits)
        assert_bits(state.cpu(), expect)
