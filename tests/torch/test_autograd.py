"""Autograd through adjoint graphs: gradcheck (float64) on the registered operators, the
adjoint graphs themselves (what they compile to), and adjoints of random view chains
against torch autograd."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_layout_cases import FIVE, MORE

import stridec
from stridec.errors import UnsupportedError
from stridec.torch import adjoint, register

NS = "stridec_test_autograd"


def _op(case, dtype="float64"):
    return register(case.graph(dtype), f"{NS}::{case.name}_{dtype}")


@pytest.mark.parametrize("case", FIVE + MORE, ids=[c.name for c in FIVE + MORE])
def test_gradcheck_float64(case):
    op = _op(case)
    inputs = case.inputs(torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, inputs, fast_mode=True)


@pytest.mark.parametrize("case", FIVE + MORE, ids=[c.name for c in FIVE + MORE])
def test_gradients_equal_torch(case):
    """The op's gradient against torch autograd on the oracle, on the same tensors."""
    op = _op(case)
    xs = case.inputs(torch.float64, requires_grad=True)
    ys = op(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(y.shape, dtype=y.dtype, generator=gen) for y in ys]
    got = torch.autograd.grad(ys, xs, grads)
    ref_xs = [x.detach().clone().requires_grad_() for x in xs]
    ref_ys = case.torch_fn(*ref_xs)
    ref_ys = ref_ys if isinstance(ref_ys, tuple) else (ref_ys,)
    want = torch.autograd.grad(ref_ys, ref_xs, grads)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)  # sums may add in another order


def _adjoint_kernels(case):
    """The kernels the registered backward operator launches (custom-op contract)."""
    op = _op(case)
    adj = op.adjoint
    grads = [torch.zeros(op.graph.outputs[j].shape, dtype=torch.float64)
             for j in adj.grad_outputs]
    return adj, op.backward_op.compiled.plan_for(*grads).kernels


def test_adjoint_of_permute_is_one_swapped_copy():
    """The NCHW -> NHWC copy reads strided and writes contiguous; its adjoint is one copy
    the other way round: the same index pairs, source and destination swapped."""
    case = FIVE[0]
    adj, kernels = _adjoint_kernels(case)
    assert [op.name for op in adj.graph.ops] == ["input", "permute", "output"]
    assert len(kernels) == 1 and kernels[0].kind == "copy"
    assert not adj.needs_torch
    forward = stridec.compile(case.graph("float64")).plan_for(*case.inputs(torch.float64))
    assert len(forward.kernels) == 1


@pytest.mark.parametrize(
    "name,ops,kernels,needs_torch",
    [
        ("nchw4", ["input", "unpack", "output"], 1, False),  # unpack drops the padded channels
        ("broadcast", ["input", "permute", "unsqueeze", "output"], 1, True),  # sum dims first
        ("slice_step", None, 2, False),  # per sliced dim: one copy, zeros outside the slice
        ("cat", ["input", "slice", "slice", "output"], 2, False),  # one copy per operand
        ("pad", ["input", "pad", "output"], 1, False),  # the opposite pad: one masked copy
        # 3 window classes: windows 0, 3 tile the row (one copy); 1 and 4, 2 and 5 leave
        # gaps (one copy each, zeros in the gaps)
        ("unfold_overlap", None, 3, True),
        ("unfold_gaps", None, 1, False),  # windows do not overlap: one scatter, zeros between
        ("flip", ["input", "flip", "output"], 1, False),
    ],
)
def test_adjoint_graph_kernels(name, ops, kernels, needs_torch):
    case = next(c for c in FIVE + MORE if c.name == name)
    adj, launched = _adjoint_kernels(case)
    if ops is not None:
        assert [op.name for op in adj.graph.ops] == ops, str(adj.graph)
    assert len(launched) == kernels, str(adj.graph)
    assert all(k.kind == "copy" for k in launched)
    assert adj.needs_torch is needs_torch


def test_broadcast_adjoint_keeps_sum_dims_in_front():
    case = FIVE[2]  # (3, 1) expanded to (2, 3, 4)
    adj = adjoint(case.graph("float64"))
    (c,) = adj.contributions
    assert c.acc_dims == 2  # the new leading dim and the grown dim 1
    out = adj.graph.outputs[0]
    assert out.shape == (2, 4, 3, 1)


def test_double_backward():
    op = _op(FIVE[0])
    x = FIVE[0].inputs(torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(op, x, fast_mode=True)


def test_philox_has_no_gradient():
    g = stridec.Graph("philox_and_copy")
    x = g.input("x", (2, 3), "float64")
    state = g.input("state", (6,), "int32")
    u, new_state = g.philox_uniform(state, (2, 2))
    g.output(x.t().contiguous(), u, new_state)
    adj = adjoint(g)
    assert adj.grad_outputs == (0, 1)  # new_state is int32: no gradient input
    assert [c.input_index for c in adj.contributions] == [0]
    op = register(g, f"{NS}::philox_and_copy")
    xt = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    st_ = torch.zeros(6, dtype=torch.int32)
    out, values, _ = op(xt, st_)
    (grad,) = torch.autograd.grad(out.sum() + values.sum(), [xt])
    assert torch.equal(grad, torch.ones(2, 3, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda t: op(t, st_)[0], [xt], fast_mode=True)


def test_integer_cast_stops_the_gradient():
    g = stridec.Graph("int_cast")
    x = g.input("x", (3,), "float64")
    g.output(x.to("int32").to("float64"), x.to("float32"))
    adj = adjoint(g)
    assert [c.input_index for c in adj.contributions] == [0]  # only through float32
    assert [op.name for op in adj.graph.ops] == ["input", "input", "cast", "output"]


def test_an_op_without_adjoint_is_refused_at_the_recorded_call():
    """An explicit copy (IR after lowering) has no adjoint: the operator runs without
    autograd, and a call autograd would record is refused then, not at backward."""
    g = stridec.parse(
        "graph @lowered {\n"
        '  %x = input {name = "x"} : tensor<2x3xf64>\n'
        "  %0 = copy %x {layout = strided<[2, 1], offset: 0>, space = [3, 2], "
        "src = strided<[1, 3], offset: 0>, dst = strided<[2, 1], offset: 0>} : tensor<3x2xf64>\n"
        "  output %0\n"
        "}\n")
    op = register(g, f"{NS}::lowered_copy")
    assert op.adjoint is None and op.adjoint_error is not None
    t = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.equal(op(t.detach()), t.detach().t())
    with pytest.raises(UnsupportedError, match="'strided_copy' has no adjoint"):
        op(t)


# -- adjoints of random view chains, against torch autograd ------------------------------
_VIEWS = ["permute", "transpose", "flip", "slice", "select", "unsqueeze", "expand", "unfold",
          "pad", "cat", "flatten"]


@st.composite
def _chains(draw):
    rank = draw(st.integers(1, 3))
    sizes = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    steps = draw(st.lists(st.tuples(st.sampled_from(_VIEWS), st.randoms(use_true_random=False)),
                          min_size=1, max_size=4))
    return sizes, steps


def _apply(kind, rnd, t):
    """One view step, on a stridec Value or a torch tensor alike (None: not applicable)."""
    shape = tuple(t.shape)
    rank = len(shape)
    if kind == "permute" and rank:
        perm = list(range(rank))
        rnd.shuffle(perm)
        return t.permute(*perm)
    if kind == "transpose" and rank >= 2:
        return t.transpose(rnd.randrange(rank), rnd.randrange(rank))
    if kind == "flip" and rank:
        return t.flip(rnd.randrange(rank))
    if kind == "slice" and rank:
        d = rnd.randrange(rank)
        start = rnd.randrange(shape[d]) if shape[d] else 0
        index = [slice(None)] * d + [slice(start, None, rnd.randrange(1, 4))]
        return t[tuple(index)]
    if kind == "select" and rank >= 2:
        d = rnd.randrange(rank)
        return t.select(d, rnd.randrange(shape[d])) if shape[d] else None
    if kind == "unsqueeze" and rank < 4:
        return t.unsqueeze(rnd.randrange(rank + 1))
    if kind == "expand" and rank < 4:
        grown = [2 if s == 1 and rnd.random() < 0.7 else s for s in shape]
        return t.expand(rnd.randrange(1, 3), *grown)
    if kind == "unfold" and rank and rank < 4:
        d = rnd.randrange(rank)
        if not shape[d]:  # no window fits an empty dim
            return None
        size = rnd.randrange(1, shape[d] + 1)
        return t.unfold(d, size, rnd.randrange(1, 3))
    if kind == "pad" and rank:
        pads = [rnd.randrange(-1, 3) if shape[-1 - k // 2] > 1 else rnd.randrange(0, 3)
                for k in range(2 * min(rank, 2))]
        return stridec.pad(t, pads) if isinstance(t, stridec.Value) else F.pad(t, pads)
    if kind == "cat" and rank:
        d = rnd.randrange(rank)
        parts = [t, t.flip(d)]
        return stridec.cat(parts, d) if isinstance(t, stridec.Value) else torch.cat(parts, d)
    if kind == "flatten" and rank >= 2:
        return t.flatten(rnd.randrange(rank - 1))
    return None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_chains())
def test_adjoint_of_view_chains_matches_autograd(chain):
    sizes, steps = chain
    g = stridec.Graph("chain")
    v = g.input("x", sizes, "float64")
    x = torch.randn(sizes, dtype=torch.float64, requires_grad=True)
    t = x
    for kind, rnd in steps:
        state = rnd.getstate()
        nv = _apply(kind, rnd, v)
        rnd.setstate(state)
        nt = _apply(kind, rnd, t)
        if nv is not None:
            v, t = nv, nt
    g.output(v.contiguous())
    adj = adjoint(g)
    grad_out = torch.randn(t.shape, dtype=torch.float64)
    (want,) = torch.autograd.grad(t, x, grad_out)
    if adj.graph is None:  # nothing of x reaches the output (cropped away)
        assert not want.any()
        return
    terms = stridec.compile(adj.graph)(grad_out)
    (got,) = adj.accumulate(terms if isinstance(terms, tuple) else (terms,))
    assert torch.allclose(got, want)
