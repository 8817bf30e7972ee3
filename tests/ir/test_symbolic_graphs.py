"""Graphs with symbolic sizes: random graphs built on inputs sized by N and M print and
parse back to the same text, and bound to concrete values (`Graph.bind`) they print as the
graph built with those sizes from the start -- every type and layout is the symbolic one
evaluated (the static layouts themselves are checked against torch in test_layout). The
pass pipeline plans each symbolic graph once; that plan, bound to each value, computes
what the reference backend computes for the static graph."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis_draw import Draw

from stridec.compiler.pass_manager import PassManager
from stridec.errors import LayoutError, ParseError, StridecError, UnsupportedError
from stridec.ir import builder as B
from stridec.ir.graph import Graph
from stridec.ir.parser import parse
from stridec.ir.symbols import Sym, evaluate, symbol
from stridec.runtime.backends.reference import run_reference

N, M = symbol("N"), symbol("M")


def _step(d: Draw, v: Any) -> Any:
    """One random op on `v`, as a function of the bindings (None: symbolic)."""
    r = v.ndim
    kind = d.choice(
        ["permute", "unsqueeze", "contiguous", "pad", "cat", "pack", "cast"]
        + (["slice", "select", "view", "flip", "transpose"] if r else [])
    )
    if kind == "permute":
        dims = tuple(d.permutation(r))
        return lambda x, b: x.permute(dims)
    if kind == "transpose":
        a, c = d.int(0, r - 1), d.int(0, r - 1)
        return lambda x, b: x.transpose(a, c)
    if kind == "unsqueeze":
        k = d.int(0, r)
        return lambda x, b: x.unsqueeze(k)
    if kind == "contiguous":
        return lambda x, b: x.contiguous()
    if kind == "cast":
        return lambda x, b: x.to("float16")
    if kind == "flip":
        k = d.int(0, r - 1)
        return lambda x, b: x.flip(k)
    if kind == "slice":
        k, start, step = d.int(0, r - 1), d.choice([None, 1]), d.int(1, 3)
        sl = (slice(None),) * k + (slice(start, None, step),)
        return lambda x, b: x[sl]
    if kind == "select":
        k = d.int(0, r - 1)
        return lambda x, b: x.select(k, 0)
    if kind == "view":
        return lambda x, b: x.reshape(-1)
    if kind == "pad":
        widths = tuple(d.int(0, 2) for _ in range(2 * min(r, 2)))
        return lambda x, b: B.pad(x, widths)
    if kind == "cat":
        k = d.int(0, r - 1) if r else 0
        return lambda x, b: B.cat([x, x.flip(k) if r else x], k) if r else x
    packable = r == 4 and not isinstance(v.shape[1], Sym)  # a blocked C must be static
    fmt = d.choice(["NCHW4", "CHWN4", "NHWC"])
    return lambda x, b: x.pack(fmt) if packable else x


def _build(steps: list, sizes: tuple, bindings: dict[str, int] | None) -> Graph:
    g = Graph("random")
    shape = sizes if bindings is None else evaluate(sizes, bindings)
    x = g.input("x", shape, "float32")
    for step in steps:
        x = step(x, bindings)
    g.output(x)
    return g


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_symbolic_graphs_round_trip_and_bind_to_the_static_graph(data: Any) -> None:
    d = Draw(data)
    rank = d.int(1, 4)
    sizes: list[Any] = [d.choice([1, 2, 3, 4]) for _ in range(rank)]
    sizes[d.int(0, rank - 1)] = N
    if rank > 1 and d.chance(0.3):
        sizes[d.int(0, rank - 1)] = M
    sizes_t = tuple(sizes)
    steps: list = []
    g: Graph | None = None
    for _ in range(d.int(1, 5)):
        probe = _build(steps, sizes_t, None)
        steps.append(_step(d, probe.outputs[0]))
        try:
            g = _build(steps, sizes_t, None)
        except (LayoutError, UnsupportedError) as e:
            assert "N" in str(e) or "M" in str(e) or "rank" in str(e), str(e)
            event("refused")
            steps.pop()
            break
    if g is None:
        return
    text = str(g)
    try:
        again = parse(text)
    except ParseError as e:  # pragma: no cover - the failure message shows the text
        pytest.fail(f"{e}\n{text}")
    assert str(again) == text
    planned = parse(text)
    try:
        PassManager.parse(verify_each=True).run(planned)
    except UnsupportedError as e:  # a plan that would depend on the values, named
        assert "N" in str(e) or "M" in str(e), str(e)
        event("pipeline refused")
        planned = None
    for n, m in [(1, 1), (2, 3), (5, 2)]:
        bindings = {"N": n, "M": m}
        try:
            static = _build(steps, sizes_t, bindings)
        except StridecError:
            continue  # e.g. select(0) of an empty dim
        assert str(g.bind(bindings)) == str(static)
        event("bound")
        if planned is not None:
            x = torch.randn(evaluate(sizes_t, bindings))
            (want,) = run_reference(static, x)
            (got,) = run_reference(planned.bind(bindings), x)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
            event("planned values agree")


@pytest.mark.parametrize(
    "text",
    [
        "tensor<Nx64x56x56xf16>",
        "tensor<(N+2)x3xf32>",
        "tensor<((N+1)//2)x3xf32, strided<[6, 1], offset: 0>>",
        "tensor<3x(batch_x)xf32, strided<[1, 3], offset: 0>>",
        "tensor<4x(M+N+2)xf32>",
        "tensor<2x5x7xNx4xf16>",
        "tensor<Nx3xf32, strided<[1, (N)], offset: 0>>",
        "tensor<5xNx4xf16, strided<[4, 20, 1], offset: (2*N+1)>>",
    ],
)
def test_symbolic_types_parse_and_print(text: str) -> None:
    g = parse(f'graph @g {{\n  %x = input {{name = "x"}} : {text}\n  output %x\n}}\n')
    assert str(g.inputs[0].type) == text


def test_bad_symbolic_sizes_are_parse_errors() -> None:
    for text, message in [
        ("tensor<(N+)x3xf32>", "bad size expression"),
        ("tensor<(N+1x3xf32>", "unclosed"),
        ("tensor<Nx3xf32, strided<[(3*N), 1], offset: (N-)>>", "bad size expression"),
    ]:
        with pytest.raises(ParseError, match=message):
            parse(f'graph @g {{\n  %x = input {{name = "x"}} : {text}\n  output %x\n}}\n')
