"""Autograd on a plain compiled call, `stridec.compile(graph)(x)` with `x.requires_grad`:
differentiable through the adjoint graph as the torch operator is, views of inputs as
torch views, never a silently detached result; the no-grad path unchanged."""

from __future__ import annotations

import pytest
import torch
from torch_layout_cases import FIVE, MORE

import stridec

CASES = FIVE + MORE


def _outputs(ys):
    return ys if isinstance(ys, tuple) else (ys,)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradients_equal_torch(case, backend):
    fn = stridec.compile(case.graph("float64"), backend=backend)
    xs = case.inputs(torch.float64, requires_grad=True)
    ys = _outputs(fn(*xs))
    assert all(y.requires_grad and y.grad_fn is not None for y in ys)
    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(y.shape, dtype=y.dtype, generator=gen) for y in ys]
    got = torch.autograd.grad(ys, xs, grads)
    ref_xs = [x.detach().clone().requires_grad_() for x in xs]
    ref_ys = _outputs(case.torch_fn(*ref_xs))
    want = torch.autograd.grad(ref_ys, ref_xs, grads)
    for y, r in zip(ys, ref_ys, strict=True):
        assert torch.equal(y.detach(), r.detach()) and y.stride() == r.stride()
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)  # sums may add in another order


@pytest.mark.parametrize("case", FIVE, ids=[c.name for c in FIVE])
def test_gradcheck_and_gradgradcheck(case):
    fn = stridec.compile(case.graph("float64", "_plain"))
    xs = case.inputs(torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fn, xs, fast_mode=True)
    assert torch.autograd.gradgradcheck(fn, xs, fast_mode=True)


def test_views_of_inputs_are_torch_views():
    # x[1:, ::2] and x.t() alias x as torch's do: `_base`, version counter, their own
    # backward, in-place writes into them tracked; the copy goes through the adjoint.
    g = stridec.Graph("views")
    x = g.input("x", (3, 4), "float64")
    g.output(x[1:, ::2], x.t(), x.t().contiguous())
    fn = stridec.compile(g)
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    part, t, copy = fn(a)
    want_part, want_t = a[1:, ::2], a.t()
    for got, want in ((part, want_part), (t, want_t)):
        assert got._base is a and got.stride() == want.stride()
        assert got.storage_offset() == want.storage_offset()
        assert got._version == a._version
    assert copy.data_ptr() != a.data_ptr()
    w = torch.randn(2, 2, dtype=torch.float64)
    ((part * w).sum() + t.sum() + copy.sum()).backward()
    want = torch.ones(3, 4, dtype=torch.float64) * 2
    want[1:, ::2] += w
    assert torch.equal(a.grad, want)


def test_in_place_write_into_a_view_output_as_torch():
    g = stridec.Graph("row")
    x = g.input("x", (3, 4), "float64")
    g.output(x[1])
    fn = stridec.compile(g)
    leaf = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    a = leaf * 1  # a non-leaf: torch lets its views be written in place
    row = fn(a)
    row.mul_(3)
    a.sum().backward()
    want = torch.ones(3, 4, dtype=torch.float64)
    want[1] = 3
    assert torch.equal(leaf.grad, want)


def test_no_grad_and_inputs_without_grad_take_the_plain_path():
    g = stridec.Graph("t")
    x = g.input("x", (4, 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    plain = torch.randn(4, 3)
    for _ in range(3):
        y = fn(plain)
        assert not y.requires_grad and y.grad_fn is None
    hits = fn.stats.cache_hits
    fn(plain)
    assert fn.stats.cache_hits == hits + 1  # the cached call
    needs = torch.randn(4, 3, requires_grad=True)
    with torch.no_grad():
        for _ in range(3):
            y = fn(needs)
            assert not y.requires_grad and torch.equal(y, needs.t())
    # A key seen under no_grad is not a cached answer once grad mode is back on.
    y = fn(needs)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    assert torch.equal(needs.grad, torch.ones(4, 3))


def test_out_with_an_input_that_requires_grad_is_refused():
    g = stridec.Graph("t")
    x = g.input("x", (4, 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    needs = torch.randn(4, 3, requires_grad=True)
    out = torch.empty(3, 4)
    with pytest.raises(stridec.CallError, match="argument 'x' requires grad"):
        fn(needs, out=out)
    with torch.no_grad():
        assert fn(needs, out=out) is out and torch.equal(out, needs.t())
        assert fn(needs, out=out) is out  # cached under no_grad
    with pytest.raises(stridec.CallError, match="argument 'x' requires grad"):
        fn(needs, out=out)  # ... and still refused with grad mode on


def test_symbolic_sizes():
    def heads(x):
        b, t, c = x.shape
        return x.view(b, t, 2, c // 2).transpose(1, 2).contiguous()

    graph = stridec.trace(heads, torch.randn(2, 3, 4), dynamic={0: [0]})
    fn = stridec.compile(graph, backend="cpu")
    for n in (1, 2, 5):
        x = torch.randn(n, 3, 4, dtype=torch.float32, requires_grad=True)
        w = torch.randn(n, 2, 3, 2)
        (fn(x) * w).sum().backward()
        ref = x.detach().clone().requires_grad_()
        (heads(ref) * w).sum().backward()
        assert torch.equal(x.grad, ref.grad)


def test_integer_outputs_carry_no_gradient():
    g = stridec.Graph("cast")
    x = g.input("x", (2, 3), "float32")
    g.output(x.to("int32"), x.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    a = torch.randn(2, 3, requires_grad=True)
    ints, t = fn(a)
    assert not ints.requires_grad and t.requires_grad
    t.sum().backward()
    assert torch.equal(a.grad, torch.ones(2, 3))


def test_symbolic_out_with_an_input_that_requires_grad_is_refused():
    g = stridec.Graph("t_any")
    x = g.input("x", ("N", 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    needs = torch.randn(4, 3, requires_grad=True)
    out = torch.empty(3, 4)
    with pytest.raises(stridec.CallError, match="argument 'x' requires grad"):
        fn(needs, out=out)
    with torch.no_grad():
        for _ in range(2):
            assert fn(needs, out=out) is out and torch.equal(out, needs.t())
            assert not fn(needs).requires_grad
    with pytest.raises(stridec.CallError, match="argument 'x' requires grad"):
        fn(needs, out=out)
    assert fn(needs).grad_fn is not None
