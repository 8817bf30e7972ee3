"""Every builder method on a value of symbolic size (N, 4): it either builds -- and the
graph, planned once and bound to N = 1, 2, 5, computes what the graph built with that N
computes -- or it is refused with a `StridecError` naming N, never a bug."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from stridec.compiler.pass_manager import PassManager
from stridec.errors import StridecError
from stridec.ir import builder as B
from stridec.ir.graph import Graph, Value
from stridec.runtime.backends.reference import run_reference

CALLS: dict[str, Any] = {
    "diagonal": lambda x: x.diagonal(),
    "unfold": lambda x: x.unfold(1, 2, 1),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 2)),
    "squeeze-dim": lambda x: x.unsqueeze(1).squeeze(1),
    "squeeze-all": lambda x: x.squeeze(),
    "split-sections": lambda x: x.split([1, 3], 1)[0],
    "chunk": lambda x: x.chunk(2, 1)[1],
    "chunk-rows": lambda x: x.chunk(2, 0)[0],
    "unbind": lambda x: x.unbind(1)[0],
    "unbind-rows": lambda x: x.unbind(0)[0],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "narrow-rows": lambda x: x.narrow(0, 0, 1),
    "movedim": lambda x: x.movedim(0, 1),
    "flatten": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (2, 2)),
    "repeat": lambda x: x.repeat(2, 1),
    "tile": lambda x: x.tile((1, 2)),
    "roll-rows": lambda x: x.roll(1, 0),
    "roll": lambda x: x.roll(1, 1),
    "repeat_interleave": lambda x: x.repeat_interleave(2, 0),
    "clone": lambda x: x.t().clone(),
    "flip": lambda x: x.flip(0),
    "expand_as": lambda x: x[:, :1].expand_as(x),
    "stack": lambda x: B.stack([x, x], 1),
    "hstack": lambda x: B.hstack([x, x]),
    "vstack": lambda x: B.vstack([x, x.flip(0)]),
    "getitem": lambda x: x[..., None, 1:3],
    "last-row": lambda x: x[-1],
    "pad-crop": lambda x: B.pad(x, (0, 0, -1, 0)),
    "pack": lambda x: x.unsqueeze(2).unsqueeze(3).pack("CHWN4"),
    "cast": lambda x: x.to("float16").t().contiguous(),
    "slice-of-slice": lambda x: x[::2][1::2].contiguous(),
}
REFUSED = {"diagonal", "squeeze-all", "chunk-rows", "unbind-rows", "roll-rows"}


def _graph(n: Any, call: Any) -> tuple[Graph, Value]:
    g = Graph("surface")
    x = g.input("x", (n, 4), "float32")
    g.output(call(x))
    return g, x


@pytest.mark.parametrize("name", sorted(CALLS))
def test_symbolic_surface(name: str) -> None:
    try:
        graph, _ = _graph("N", CALLS[name])
        PassManager.parse(verify_each=True).run(graph)
    except StridecError as e:
        assert "N" in str(e), str(e)
        assert name in REFUSED, str(e)
        return
    assert name not in REFUSED
    for n in (1, 2, 5):
        try:
            static, _ = _graph(n, CALLS[name])
        except StridecError:
            continue  # not valid at this size (pad-crop of 1 row is still valid: 0 rows)
        x = torch.randn(n, 4)
        (want,) = run_reference(static, x)
        (got,) = run_reference(graph.bind({"N": n}), x)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=0)
