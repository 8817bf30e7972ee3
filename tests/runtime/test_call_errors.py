"""Bad calls raise `CallError` (a `StridecError`) naming the argument, what was expected
and what was given — before any kernel runs, and without poisoning a cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import stridec
from stridec import CallError, StridecError, UnsupportedError


def two_input_graph() -> stridec.Graph:
    g = stridec.Graph("pair")
    x = g.input("x", (2, 3), "float32")
    y = g.input("y", (3,), "int8")
    g.output(x.t().contiguous(), y.to("float32"))
    return g


def good_args(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 3, device=device), torch.arange(3, dtype=torch.int8, device=device)


BACKENDS = ["auto", "interpret", "cpu", "reference"]


def call_error(fn: stridec.CompiledGraph, *args: Any) -> str:
    with pytest.raises(CallError) as info:
        fn(*args)
    assert isinstance(info.value, StridecError)
    return str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_argument_count_names_the_inputs(backend: str) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, y = good_args()
    for args in [(), (x,), (x, y, y)]:
        msg = call_error(fn, *args)
        assert "pair" in msg and "expected 2" in msg and f"got {len(args)}" in msg
        assert "x" in msg and "y" in msg


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [3, 1.5, None, [1.0, 2.0, 3.0], np.zeros(3, np.int8)],
                         ids=["int", "float", "None", "list", "ndarray"])
def test_a_non_tensor_argument(backend: str, bad: Any) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, _ = good_args()
    msg = call_error(fn, x, bad)
    assert "argument 'y'" in msg and "torch.Tensor" in msg and type(bad).__name__ in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_dtype(backend: str) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, y = good_args()
    msg = call_error(fn, x.double(), y)
    assert "argument 'x'" in msg and "float32" in msg and "float64" in msg
    msg = call_error(fn, x, y.to(torch.uint8))
    assert "argument 'y'" in msg and "int8" in msg and "uint8" in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_sizes(backend: str) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, y = good_args()
    msg = call_error(fn, x.t(), y)
    assert "argument 'x'" in msg and "[2, 3]" in msg and "[3, 2]" in msg
    msg = call_error(fn, x, y[None])
    assert "argument 'y'" in msg and "[3]" in msg and "[1, 3]" in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_arguments_on_two_devices(backend: str) -> None:
    """The meta device stands in for a second device on a machine without a GPU."""
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, y = good_args()
    msg = call_error(fn, x, y.to("meta"))
    assert "argument 'y'" in msg and "cpu" in msg and "meta" in msg


@pytest.mark.gpu
def test_arguments_on_cpu_and_cuda() -> None:
    fn = stridec.compile(two_input_graph())
    x, y = good_args()
    msg = call_error(fn, x.cuda(), y)
    assert "argument 'y'" in msg and "cuda" in msg and "cpu" in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_layout_past_the_end_of_its_storage(backend: str) -> None:
    """A view made before its storage shrank reaches past it: rejected, never read.
    Row 1 of the view ends at 4 + 3 + 2 = 9 (offset 4, stride 3), past 8 elements."""
    fn = stridec.compile(two_input_graph(), backend=backend)
    base = torch.randn(12)
    x = base[4:10].view(2, 3)
    base.untyped_storage().resize_(8 * base.element_size())
    msg = call_error(fn, x, good_args()[1])
    assert "argument 'x'" in msg and "8 elements" in msg


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["sparse", "mkldnn"])
def test_a_tensor_without_strides(backend: str, kind: str) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    x, y = good_args()
    x = x.to_sparse() if kind == "sparse" else x.to_mkldnn()
    msg = call_error(fn, x, y)
    assert "argument 'x'" in msg and "strided" in msg


@pytest.mark.parametrize("backend", ["auto", "reference"])
def test_a_view_the_arguments_strides_cannot_take(backend: str) -> None:
    """`view` needs a viewable layout, as in torch: the graph is fine for a row-major `x`
    and a CallError naming `x` for a column-major one (torch raises there too)."""
    g = stridec.Graph("viewer")
    a = g.input("a", (4, 6), "float32")
    x = g.input("x", (4, 6), "float32")
    g.output(a.t().contiguous(), x.view(3, 8).contiguous())
    fn = stridec.compile(g, backend=backend)
    col_major = torch.randn(6, 4).t()
    with pytest.raises(RuntimeError):
        col_major.view(3, 8)
    msg = call_error(fn, col_major, col_major)
    assert "argument 'x'" in msg and "[1, 4]" in msg and "view" in msg
    x_ok = torch.randn(4, 6)
    out = fn(col_major, x_ok)  # the same graph still runs where it can
    assert torch.equal(out[1], x_ok.view(3, 8))


# --------------------------------------------------------------------------- backends


def test_triton_backend_with_cpu_tensors() -> None:
    fn = stridec.compile(two_input_graph(), backend="triton")
    msg = call_error(fn, *good_args())
    assert "triton" in msg and "CUDA" in msg and "cpu" in msg


@pytest.mark.parametrize("backend", ["auto", "triton", "interpret", "cpu"])
def test_kernel_backends_with_meta_tensors(backend: str) -> None:
    fn = stridec.compile(two_input_graph(), backend=backend)
    msg = call_error(fn, *good_args("meta"))
    assert "meta" in msg


@pytest.mark.gpu
def test_interpret_backend_with_cuda_tensors() -> None:
    fn = stridec.compile(two_input_graph(), backend="interpret")
    msg = call_error(fn, *good_args("cuda"))
    assert "interpret" in msg and "cuda" in msg


def test_an_unknown_backend() -> None:
    with pytest.raises(UnsupportedError, match="backend must be one of auto, triton, "
                                                "interpret, cpu, reference; got 'cuda'"):
        stridec.compile(two_input_graph(), backend="cuda")


def test_plan_for_on_the_reference_backend() -> None:
    fn = stridec.compile(two_input_graph(), backend="reference")
    with pytest.raises(UnsupportedError, match="reference"):
        fn.plan_for(*good_args())


def test_plan_for_checks_its_arguments_too() -> None:
    fn = stridec.compile(two_input_graph())
    x, y = good_args()
    with pytest.raises(CallError, match="argument 'y'"):
        fn.plan_for(x, y.float())


# --------------------------------------------------------------------------- graphs


def test_a_graph_without_output() -> None:
    g = stridec.Graph("unfinished")
    g.input("x", (2,), "float32").t()
    with pytest.raises(CallError, match="'unfinished' has no output"):
        stridec.compile(g)


def test_not_a_graph() -> None:
    with pytest.raises(CallError, match="expected a stridec.Graph; got str"):
        stridec.compile("graph @g {}")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- no harm done


def test_errors_come_before_any_compile_and_poison_nothing() -> None:
    """Every rejected call leaves the stats untouched; the next good call compiles once
    and gives the right answer."""
    fn = stridec.compile(two_input_graph())
    x, y = good_args()
    bad_calls = [(), (x,), (x.double(), y), (x, y[:2]), (x, 3), (x, y.to("meta"))]
    for args in bad_calls:
        with pytest.raises(CallError):
            fn(*args)
        with pytest.raises(CallError):
            fn.plan_for(*args)
    assert fn.stats.compiles == fn.stats.cache_hits == fn.stats.launches == 0
    assert fn.stats.pipeline_runs == 0
    out_t, out_f = fn(x, y)
    assert torch.equal(out_t, x.t().contiguous())
    assert torch.equal(out_f, y.float())
