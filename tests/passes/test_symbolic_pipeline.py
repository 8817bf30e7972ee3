"""The pass pipeline on graphs with symbolic sizes: torch functions traced with symbolic
dims (and builder graphs with packs, pads and cats along a symbolic dim) are planned once;
the plan, bound to many values of the symbols (`Graph.bind`) and run by the reference
backend, gives torch's values at each. Where the pipeline cannot plan a symbolic graph it
raises a `StridecError` naming a symbol, never a bug."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler.pass_manager import PassManager
from stridec.errors import LayoutError, StridecError, UnsupportedError
from stridec.ir import builder as B
from stridec.ir.graph import Graph
from stridec.ir.parser import parse
from stridec.ir.symbols import evaluate
from stridec.runtime.backends.reference import pack_reference, run_reference

CASES: dict[str, tuple[Any, tuple[int, ...]]] = {
    "nhwc": (lambda x: x.permute(0, 2, 3, 1).contiguous(), (2, 3, 4, 5)),
    "transpose-copy": (lambda x: x.t().contiguous(), (3, 4)),
    "step-slice": (lambda x: x[::2, 1:].contiguous(), (5, 4)),
    "tail": (lambda x: x[1:].flip(0), (5, 4)),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1)), (3, 4)),
    "cat-self": (lambda x: torch.cat([x, x.flip(0)], 0).t().contiguous(), (3, 2)),
    "reshape": (lambda x: x.transpose(0, 1).reshape(-1, 2), (3, 4)),
    "view-heads": (lambda x: x.view(x.shape[0], 2, -1).transpose(1, 2).contiguous(), (3, 4)),
    "expand": (lambda x: x[:, :1].expand(-1, 3).contiguous(), (3, 4)),
    "cast": (lambda x: x.t().to(torch.float16).contiguous(), (3, 4)),
    "unfold": (lambda x: x.unfold(1, 2, 2).contiguous(), (3, 6)),
    "chain": (lambda x: x.permute(2, 0, 1).contiguous().transpose(0, 1).contiguous(), (2, 3, 4)),
    "split": (lambda x: x.split(2, 1)[1].contiguous(), (3, 4)),
    "stack": (lambda x: torch.stack([x, x], 1).flatten(0, 1), (3, 4)),
}


# Refused with every dim symbolic: the view or the chunk count depends on the values
# (an odd s0*s1 has no half; s1 may not be even; split's chunk count depends on s1; a
# window of 2 needs s1 >= 2).
REFUSED = {("reshape", "all"), ("view-heads", "all"), ("split", "all"), ("unfold", "all")}


def _plan(graph: Graph) -> Graph:
    planned = parse(str(graph))
    PassManager.parse(verify_each=True).run(planned)
    assert str(parse(str(planned))) == str(planned)
    return planned


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dynamic", ["batch", "all"])
@settings(max_examples=8, deadline=None)
@given(values=st.lists(st.integers(1, 6), min_size=4, max_size=4))
def test_one_plan_gives_torch_values_at_every_size(
    name: str, dynamic: str, values: list[int]
) -> None:
    fn, example_sizes = CASES[name]
    example = torch.randn(example_sizes)
    try:
        graph = stridec.trace(fn, example, dynamic={0: [0]} if dynamic == "batch" else True)
        assert graph.symbols()
        planned = _plan(graph)
    except StridecError as e:
        # A refusal: a rule whose answer depends on the symbols' values, named.
        assert isinstance(e, (LayoutError, UnsupportedError)), e
        assert any(f"s{k}" in str(e) for k in range(4)), e
        assert (name, dynamic) in REFUSED, e
        return
    assert (name, dynamic) not in REFUSED
    bindings = dict(zip(graph.symbols(), values, strict=False))
    sizes = evaluate(graph.inputs[0].type.sizes, bindings)
    x = torch.randn(sizes)
    try:
        want = fn(x)
    except RuntimeError:
        return  # not a valid size for the function in torch either (e.g. x[:, 1:] of 1)
    (got,) = run_reference(planned.bind(bindings), x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def _packed(fmt: str, channels: int) -> Graph:
    g = Graph("packed")
    x = g.input("x", ("N", channels, 3, 2), "float32")
    g.output(x.pack(fmt).unpack(fmt, channels).permute(0, 2, 3, 1).contiguous(), x.pack(fmt))
    return g


@pytest.mark.parametrize("fmt", ["NCHW4", "CHWN4", "NHWC"])
@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 9), channels=st.sampled_from([3, 4, 6]))
def test_packs_with_a_symbolic_batch(fmt: str, n: int, channels: int) -> None:
    """The padding mask's extent grows with N; the plan is the same for every N."""
    graph = _packed(fmt, channels)
    planned = _plan(graph)
    x = torch.randn(n, channels, 3, 2)
    round_trip, packed = run_reference(planned.bind({"N": n}), x)
    torch.testing.assert_close(round_trip, x.permute(0, 2, 3, 1), rtol=0, atol=0)
    want = pack_reference(stridec.get_format(fmt), x)
    torch.testing.assert_close(packed.reshape(want.shape), want, rtol=0, atol=0)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 7), m=st.integers(1, 7))
def test_cat_along_a_symbolic_dim(n: int, m: int) -> None:
    g = Graph("cats")
    x = g.input("x", ("N", 3), "float32")
    y = g.input("y", ("M", 3), "float32")
    padded = B.pad(x, (0, 1, 2, 0))
    z = B.cat([padded, B.pad(y, (0, 1))], 0)
    g.output(z.t().contiguous(), z[::2])
    assert str(g.outputs[0].type) == "tensor<4x(M+N+2)xf32>"
    planned = _plan(g)
    a, b = torch.randn(n, 3), torch.randn(m, 3)
    want = torch.cat([F.pad(a, (0, 1, 2, 0)), F.pad(b, (0, 1))], 0)
    got_t, got_step = run_reference(planned.bind({"N": n, "M": m}), a, b)
    torch.testing.assert_close(got_t, want.t(), rtol=0, atol=0)
    torch.testing.assert_close(got_step, want[::2], rtol=0, atol=0)
