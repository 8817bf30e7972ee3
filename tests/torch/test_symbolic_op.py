"""A graph over symbolic sizes as a torch custom operator: the fake implementation returns
sizes and strides over the caller's SymInts, so under `torch.compile(dynamic=True)` new
batch sizes neither retrace the torch graph nor plan stridec again. Values and strides are
compared with torch (and with the operator of the graph bound to each size)."""

from __future__ import annotations

import uuid

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dynamo.testing import CompileCounterWithBackend

import stridec
from stridec.errors import CallError, UnsupportedError
from stridec.torch import TorchOp, register

NS = "stridec_test_symbolic_op"


def _name(stem: str) -> str:
    return f"{NS}::{stem}_{uuid.uuid4().hex[:8]}"


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


def layouts_graph(dtype: str = "float32") -> stridec.Graph:
    """NCHW -> NHWC, a cat along channels, a view of the input (copied: the custom-op
    contract), and an NCHW4 pack whose padded channels are masked, over a batch N."""
    g = stridec.Graph("symbolic_layouts")
    x = g.input("x", ("N", 8, 6, 5), dtype)
    y = g.input("y", ("N", 3, 6, 5), dtype)
    g.output(x.permute(0, 2, 3, 1).contiguous(), stridec.cat([x, y], 1),
             x[:, 2:].transpose(1, 3), y.pack("NCHW4"))
    return g


def layouts_torch(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n = x.shape[0]
    packed = torch.zeros(n, 1, 6, 5, 4, dtype=y.dtype)
    packed[:, 0, :, :, :3] = y.permute(0, 2, 3, 1)
    return (x.permute(0, 2, 3, 1).contiguous(), torch.cat([x, y], 1),
            x[:, 2:].transpose(1, 3), packed)


def cat_graph() -> stridec.Graph:
    """A cat along the symbolic dim: the output's batch is N + M; the strides of the
    transposed copy are in N + M."""
    g = stridec.Graph("symbolic_cat")
    x = g.input("x", ("N", 4, 3), "float32")
    y = g.input("y", ("M", 4, 3), "float32")
    z = stridec.cat([x, y], 0)
    g.output(z.transpose(0, 2).contiguous(), z)
    return g


def cat_torch(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z = torch.cat([x, y], 0)
    return z.transpose(0, 2).contiguous(), z


def _inputs(n: int, dtype=torch.float32, requires_grad=False):
    x = torch.randn(n, 8, 6, 5, dtype=dtype, requires_grad=requires_grad)
    y = torch.randn(n, 3, 6, 5, dtype=dtype, requires_grad=requires_grad)
    return x, y


def _static_op(graph: stridec.Graph, bindings: dict[str, int]) -> TorchOp:
    return register(graph.bind(bindings), _name("static"))


@pytest.fixture(scope="module")
def layouts_op() -> TorchOp:
    return register(layouts_graph(), _name("layouts"))


@pytest.fixture(scope="module")
def layouts_op64() -> TorchOp:
    return register(layouts_graph("float64"), _name("layouts64"))


@pytest.fixture(scope="module")
def cat_op() -> TorchOp:
    return register(cat_graph(), _name("cat"))


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_opcheck(layouts_op64, n):
    """All of opcheck's tests (schema, autograd registration, fake against real, aot
    dispatch with dynamic shapes), at sizes of several classes (1, a multiple of 16)."""
    result = torch.library.opcheck(layouts_op64.overload,
                                   _inputs(n, torch.float64, requires_grad=True))
    assert set(result.values()) == {"SUCCESS"}, result


def test_opcheck_cat_along_the_symbolic_dim(cat_op):
    for n, m in ((2, 3), (5, 1), (4, 4)):
        args = (torch.randn(n, 4, 3), torch.randn(m, 4, 3))
        result = torch.library.opcheck(cat_op.overload, args)
        assert set(result.values()) == {"SUCCESS"}, result


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40))
def test_values_and_strides_match_torch_and_the_static_op(layouts_op, n):
    """Outputs that are new memory in torch have torch's strides; every output has the
    strides of the operator compiled for these sizes alone."""
    x, y = _inputs(n)
    got = _tuple(layouts_op(x, y))
    want = layouts_torch(x, y)
    static = _tuple(_static_op(layouts_graph(), {"N": n})(x, y))
    for k, (g, w, s) in enumerate(zip(got, want, static, strict=True)):
        assert g.shape == w.shape and torch.equal(g, w), k
        assert g.stride() == s.stride(), k
        assert g.untyped_storage().data_ptr() not in (x.untyped_storage().data_ptr(),
                                                      y.untyped_storage().data_ptr())
    assert got[0].stride() == want[0].stride() and got[1].stride() == want[1].stride()


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 20), m=st.integers(1, 20))
def test_cat_along_the_symbolic_dim_matches_torch(cat_op, n, m):
    x, y = torch.randn(n, 4, 3), torch.randn(m, 4, 3)
    for g, w in zip(_tuple(cat_op(x, y)), cat_torch(x, y), strict=True):
        assert g.shape == w.shape and g.stride() == w.stride() and torch.equal(g, w)


def _count_compiles(op: TorchOp, fn, backend: str, sizes, make, reference):
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(fn, dynamic=True, backend=counter)
    before = op.compiled.stats.codegen_runs
    for n in sizes:
        args = make(n)
        got, want = _tuple(compiled(*args)), _tuple(reference(*args))
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and torch.equal(g, w), (backend, n)
            if w.is_contiguous():
                assert g.stride() == w.stride(), (backend, n)
    return counter.frame_count, op.compiled.stats.codegen_runs - before


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_torch_compile_dynamic_compiles_once_for_every_batch_size(backend):
    """Five batch sizes, one Dynamo frame, at most two stridec code generations (the
    sizes here are of one class: none is 0, 1 or a multiple of 16)."""
    op = register(layouts_graph(), _name(f"compiled_{backend}"))

    def fn(x, y):
        a, b, c, d = op(x, y)
        return a * 2, b, c + 1, d

    def reference(x, y):
        a, b, c, d = layouts_torch(x, y)
        return a * 2, b, c + 1, d

    frames, codegens = _count_compiles(op, fn, backend, (2, 3, 5, 7, 9, 33), _inputs,
                                       reference)
    assert frames == 1
    assert codegens <= 2
    assert op.compiled.stats.pipeline_runs == 1


def test_torch_compile_dynamic_with_two_symbols():
    """(The first call's batches differ from the static dims 4 and 3: Dynamo gives equal
    sizes of its first trace one symbol, and the static dim's guard would fix both.)"""
    op = register(cat_graph(), _name("compiled_cat"))
    frames, codegens = _count_compiles(
        op, lambda x, y: _tuple(op(x, y)), "aot_eager", ((2, 5), (4, 7), (3, 2), (9, 11)),
        lambda nm: (torch.randn(nm[0], 4, 3), torch.randn(nm[1], 4, 3)), cat_torch,
    )
    assert frames == 1 and codegens <= 2


def test_autograd_matches_torch_and_compiles_once():
    op = register(layouts_graph("float64"), _name("grad"))
    x, y = _inputs(3, torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, y), fast_mode=True)

    def loss(fn, x, y):
        outs = fn(x, y)
        return sum((o * (k + 1)).sum() for k, o in enumerate(outs[:3])) + outs[3].sum()

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, y: loss(op, x, y), dynamic=True, backend=counter)
    for n in (2, 3, 6, 11):
        x, y = _inputs(n, torch.float64, requires_grad=True)
        gx, gy = torch.autograd.grad(compiled(x, y), (x, y))
        wx, wy = torch.autograd.grad(loss(layouts_torch, x, y), (x, y))
        assert torch.equal(gx, wx) and torch.equal(gy, wy), n
    assert counter.frame_count == 1


def test_unused_output_gets_a_zero_gradient_of_its_symbolic_size():
    op = register(layouts_graph("float64"), _name("grad_unused"))
    x, y = _inputs(4, torch.float64, requires_grad=True)
    gx, gy = torch.autograd.grad(op(x, y)[1].sum(), (x, y))
    assert torch.equal(gx, torch.ones_like(x)) and torch.equal(gy, torch.ones_like(y))


def test_a_backward_that_cannot_bind_its_symbols_is_refused():
    """The gradient of a strided slice is sized (N+1)//2: N cannot be read back from it.
    The forward runs without autograd; a call that autograd would record is refused,
    before anything runs."""
    g = stridec.Graph("every_other")
    x = g.input("x", ("N", 3), "float32")
    g.output(x[::2].contiguous())
    op = register(g, _name("every_other"))
    a = torch.randn(5, 3, requires_grad=True)
    with torch.no_grad():
        out = op(a)
    assert torch.equal(out, a[::2])
    assert isinstance(op.adjoint_error, UnsupportedError)
    with pytest.raises(UnsupportedError, match=r"no backward over the symbolic sizes \(N\)"):
        op(a)


def test_a_backward_binds_its_symbols_from_a_multiple():
    """The gradient of a cat of x with itself is sized 2*N: N is half of it."""
    g = stridec.Graph("doubled")
    x = g.input("x", ("N", 3), "float32")
    g.output(stridec.cat([x, x], 0))
    op = register(g, _name("doubled"))
    assert op.adjoint_error is None
    for n in (2, 5):
        a = torch.randn(n, 3, requires_grad=True)
        b = a.detach().clone().requires_grad_()
        w = torch.randn(2 * n, 3)
        (op(a) * w).sum().backward()
        (torch.cat([b, b]) * w).sum().backward()
        assert torch.equal(a.grad, b.grad)


def test_bad_arguments_name_the_argument_and_dim(layouts_op):
    with pytest.raises(CallError, match=r"argument 'x': dim 1 has the static size 8; got 7"):
        layouts_op(torch.zeros(2, 7, 6, 5), torch.zeros(2, 3, 6, 5))
    with pytest.raises(CallError, match=r"argument 'y': dim 0 is N, which argument 'x' dim 0 "
                                        r"binds to 3; got 5"):
        layouts_op(torch.zeros(3, 8, 6, 5), torch.zeros(5, 3, 6, 5))
    with pytest.raises(CallError, match=r"argument 'x': expected dtype float32"):
        layouts_op(torch.zeros(3, 8, 6, 5, dtype=torch.float64), torch.zeros(3, 3, 6, 5))
    # The fake implementation checks the same (meta tensors carry no data).
    with pytest.raises(CallError, match=r"argument 'x': dim 1 has the static size 8; got 7"):
        layouts_op(torch.zeros(2, 7, 6, 5, device="meta"), torch.zeros(2, 3, 6, 5,
                                                                       device="meta"))


def test_fake_strides_are_expressions_of_the_batch():
    """Under dynamic shapes the fake outputs' sizes and strides are SymInts in the batch:
    a layout that nests N inside other dims has strides in N."""
    g = stridec.Graph("n_inner")
    x = g.input("x", ("N", 4, 3), "float32")
    g.output(x.permute(1, 2, 0).contiguous().permute(2, 0, 1))
    op = register(g, _name("n_inner"))
    seen = []

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "call_function" and "n_inner" in str(node.target):
                seen.append(node.meta["example_value"])
        return gm

    compiled = torch.compile(lambda x: op(x), dynamic=True, backend=backend)
    for n in (2, 3, 7):
        a = torch.randn(n, 4, 3)
        out = compiled(a)
        want = a.permute(1, 2, 0).contiguous().permute(2, 0, 1)
        assert out.stride() == want.stride() and torch.equal(out, want)
    (fake,) = seen
    assert isinstance(fake.shape[0], torch.SymInt)
    assert isinstance(fake.stride(2), torch.SymInt)  # 1 * N ... (the N-inner layout)
    assert fake.stride(0) == 1


def test_out_overload_writes_every_size(layouts_op):
    for n in (2, 5):
        x, y = _inputs(n)
        want = layouts_torch(x, y)
        outs = tuple(torch.empty_like(w) for w in want)
        layouts_op(x, y, out=outs)
        for o, w in zip(outs, want, strict=True):
            assert torch.equal(o, w)
    x, y = _inputs(3)
    outs = tuple(torch.empty_like(w) for w in layouts_torch(x, y))
    result = torch.library.opcheck(layouts_op.out_overload, (x, y, *outs))
    assert set(result.values()) == {"SUCCESS"}, result
    bad = (torch.empty(4, 6, 5, 8), *outs[1:])
    with pytest.raises(CallError, match=r"out\[0\]: expected sizes \[3, 6, 5, 8\]; got \[4"):
        layouts_op(x, y, out=bad)
    meta = [t.to("meta") for t in (x, y, *bad)]
    with pytest.raises(CallError, match=r"'out0' must have sizes \[3, 6, 5, 8\]"):
        layouts_op(*meta[:2], out=tuple(meta[2:]))


def test_a_philox_graph_is_planned_once_per_class():
    """Philox over symbolic sizes is planned per class, as copies are: the operator, eager
    and under torch.compile, equals the operator of the graph bound to each size, and
    the sizes of one class cost one code generation."""
    g = stridec.Graph("philox_any_batch")
    x = g.input("x", ("N", 4), "float32")
    state = g.input("state", (6,), "int32")
    bits, new_state = g.philox(state, ("N", 4))
    g.output(x.t().contiguous(), bits, new_state)
    op = register(g, _name("philox"))
    s = torch.tensor([1, 2, 3, 4, 0, 0], dtype=torch.int32)
    result = torch.library.opcheck(op.overload, (torch.randn(3, 4), s))
    assert set(result.values()) == {"SUCCESS"}, result
    compiled = torch.compile(op, dynamic=True, backend="aot_eager")
    for n in (2, 3, 5):
        a = torch.randn(n, 4)
        want = _static_op(g, {"N": n})(a, s)
        for call in (op, compiled):
            for o, w in zip(call(a, s), want, strict=True):
                assert o.shape == w.shape and o.stride() == w.stride() and torch.equal(o, w)
    assert op.compiled.stats.codegen_runs == 1  # N = 2, 3, 5: one class
