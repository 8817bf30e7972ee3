"""Symbolic sizes declared a multiple (`dynamic={0: {0: "8*B"}}` or `{"multiple_of": 8}`)
and Python's `/` of a size where the quotient is an integer: Megatron's `chunk(8)` of the
batch, einops' `(b1 b2)`, Swin's `int(windows.shape[0] / (H * W / ws / ws))`. Each traces
once and matches torch (values, strides) at every size of its class, on every CPU backend;
a size that is no multiple is a `CallError` naming the argument and the dim."""

from __future__ import annotations

import math

import pytest
import torch

import stridec
from stridec.errors import CallError, LayoutError
from stridec.ir.symbols import UndecidedError, bind_sizes, symbol, true_div
from stridec.runtime.backends import cpu as cpu_backend

BACKENDS = ["reference", "interpret"] + (["cpu"] if cpu_backend.available() else [])


def _matches(graph: stridec.Graph, fn, shapes) -> None:
    for backend in BACKENDS:
        compiled = stridec.compile(graph, backend=backend)
        for _ in range(2):  # the second call is a cached one
            for shape in shapes:
                t = torch.randn(shape)
                got, want = compiled(t), fn(t)
                assert torch.equal(got, want) and got.stride() == want.stride(), (backend, shape)


# -- Megatron: the batch split in micro-batches ------------------------------------------
def micro_batches(x):
    """Megatron-style: the batch in 8 chunks, each (seq, micro-batch, hidden), side by side."""
    return torch.cat([c.transpose(0, 1) for c in x.chunk(8)], 1).contiguous()


@pytest.mark.parametrize("dynamic", [{0: {0: "8*B"}}, {0: {0: {"multiple_of": 8}}},
                                     {"x": {0: {"multiple_of": 8, "name": "B"}}}],
                         ids=["expression", "multiple_of", "named"])
def test_chunk_of_a_declared_multiple(dynamic) -> None:
    graph = stridec.trace(micro_batches, torch.randn(16, 3, 4), dynamic=dynamic)
    c = graph.inputs[0].type.sizes[0]
    assert c.scaled is not None and c.scaled[1] == 8
    _matches(graph, micro_batches, [(8, 3, 4), (24, 3, 4), (40, 3, 4), (0, 3, 4)])


def test_a_size_that_is_no_multiple_is_refused() -> None:
    graph = stridec.trace(micro_batches, torch.randn(16, 3, 4), dynamic={0: {0: "8*B"}})
    for backend in BACKENDS:
        fn = stridec.compile(graph, backend=backend)
        fn(torch.randn(16, 3, 4))  # a cached plan first: the fast path must refuse too
        with pytest.raises(CallError, match=r"argument 'x': dim 0 is 8\*B, a multiple of 8"
                                            r".*got 12"):
            fn(torch.randn(12, 3, 4))


def test_chunk_of_an_undeclared_size_still_refuses() -> None:
    with pytest.raises(UndecidedError, match="declare the size a multiple"):
        stridec.trace(lambda x: x.chunk(8)[1], torch.randn(16, 3), dynamic={0: [0]})


def test_as_torch_op_and_inside_torch_compile() -> None:
    graph = stridec.trace(micro_batches, torch.randn(16, 3, 4), dynamic={0: {0: "8*B"}})
    op = stridec.compile(graph).as_torch_op("stridec_test_divisible::micro_batches")
    compiled = torch.compile(lambda t: op(t) * 2, dynamic=True, fullgraph=True,
                             backend="aot_eager")
    for n in (8, 24, 40):
        t = torch.randn(n, 3, 4)
        assert torch.equal(op(t), micro_batches(t))
        assert torch.equal(compiled(t), micro_batches(t) * 2)
    with pytest.raises(CallError, match="a multiple of 8"):
        op(torch.randn(12, 3, 4))


# -- einops: a grouped axis of a declared multiple --------------------------------------
def test_einops_grouped_axis() -> None:
    einops = pytest.importorskip("einops")

    def groups(x):  # einops' docs: split the batch into 4 groups
        return einops.rearrange(x, "(b1 b2) h w -> b1 w (b2 h)", b1=4)

    graph = stridec.trace(groups, torch.randn(8, 3, 5), dynamic={0: {0: {"multiple_of": 4}}})
    _matches(graph, groups, [(4, 3, 5), (12, 3, 5), (20, 3, 5)])


# -- Swin: int() of a true division ------------------------------------------------------
def window_partition(x, window_size):
    """Swin Transformer (microsoft/Swin-Transformer, models/swin_transformer.py), verbatim."""
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows


def window_reverse(windows, window_size, H, W):
    """Swin Transformer, verbatim: the batch as int() of a true division."""
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)
    return x


def test_swin_window_reverse_of_declared_windows() -> None:
    def reverse(w):
        return window_reverse(w, 4, 16, 16)

    graph = stridec.trace(reverse, torch.randn(32, 4, 4, 3),
                          dynamic={0: {0: {"multiple_of": 16}}})
    assert str(graph.outputs[0].type).startswith("tensor<s0x16x16x3xf32")
    assert "int" not in globals()  # the module's `int` is Python's again
    _matches(graph, reverse, [(16, 4, 4, 3), (48, 4, 4, 3)])


def test_swin_round_trip_over_a_symbolic_batch() -> None:
    def round_trip(x):
        return window_reverse(window_partition(x, 4), 4, 16, 16)

    graph = stridec.trace(round_trip, torch.randn(2, 16, 16, 3), dynamic={0: {0: "B"}})
    _matches(graph, round_trip, [(1, 16, 16, 3), (3, 16, 16, 3)])


def test_int_of_an_inexact_quotient_is_refused_at_the_division() -> None:
    with pytest.raises(UndecidedError, match="declared a multiple"):
        stridec.trace(lambda w: window_reverse(w, 4, 16, 16), torch.randn(32, 4, 4, 3),
                      dynamic={0: [0]})


# -- the arithmetic ----------------------------------------------------------------------
def test_true_division_is_exact_or_refused() -> None:
    B, N = symbol("B"), symbol("N")
    assert (64 * B) / 64.0 == B and (64 * B) / (16 * 16 / 2 / 2) == B
    assert (2 * N) / 0.5 == 4 * N and (6 * N * B) / (2 * N) == 3 * B
    assert true_div(12, 4 * N / N) == 3
    assert math.floor(B) is B and math.ceil(B) is B and round(B) is B
    for bad in (lambda: N / 64, lambda: 64 / N, lambda: (N + 1) / 2):
        with pytest.raises(UndecidedError, match="fraction for some values of N"):
            bad()
    with pytest.raises(LayoutError, match="division by zero"):
        N / 0.0
    with pytest.raises(UndecidedError, match="int\\(\\) of the symbolic size N"):
        int(N)


def test_bind_sizes_of_a_multiple() -> None:
    B = symbol("B")
    assert bind_sizes((8 * B, B), (24, 3), {}) == {"B": 3}
    assert bind_sizes((B, 8 * B), (3, 24), {}) == {"B": 3}
    with pytest.raises(CallError, match="is 8\\*B, which is 32 with B = 4"):
        bind_sizes((B, 8 * B), (4, 24), {})
    with pytest.raises(CallError, match="a multiple of 8"):
        bind_sizes((8 * B,), (20,), {})


@pytest.mark.parametrize("spec,message", [
    ({"multiple_of": 0}, "a positive int"),
    ({"multiple_of": 8, "size": 2}, "multiple_of"),
    ("N+1", "one symbol, or a positive int times one"),
    ("8*B", "the example's size 12 is not"),
    ({"multiple_of": 5}, "the example's size 12 is not"),
])
def test_bad_declarations(spec, message) -> None:
    with pytest.raises(CallError, match=message):
        stridec.trace(lambda x: x.t(), torch.randn(12, 3), dynamic={0: {0: spec}})
