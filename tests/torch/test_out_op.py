"""The `out=` overload of a registered operator (`<ns>::<name>.out`, `mutates_args`):
opcheck-clean, correct against torch into strided outs, traceable by
`torch.compile(fullgraph=True)`, and refusing bad outs."""

from __future__ import annotations

import pytest
import torch

import stridec
import stridec.torch  # noqa: F401 -- registers as_torch_op
from stridec.errors import CallError

NS = "stridec_out_tests"


def _op(name: str):
    g = stridec.Graph(name)
    x = g.input("x", (2, 3, 4, 5), "float32")
    g.output(x.permute(0, 2, 3, 1).contiguous(), x[:, 1:].to("float16"))
    return stridec.compile(g).as_torch_op(f"{NS}::{name}")


def _outs():
    nhwc = torch.empty(2, 3, 4, 5).permute(0, 2, 3, 1)        # channels-first memory
    base = torch.full((2, 3, 4, 6), -1.0, dtype=torch.float16)
    window = base[:, :2, :, 1:]                                # a window, pitched rows
    return nhwc, window, base


def test_out_overload_schema_and_opcheck() -> None:
    op = _op("two")
    assert str(op.out_overload._schema) == (
        f"{NS}::two.out(Tensor x, Tensor(a0!) out0, Tensor(a1!) out1) -> ()"
    )
    x = torch.randn(2, 3, 4, 5)
    nhwc, window, _ = _outs()
    result = torch.library.opcheck(op.out_overload, (x, nhwc, window))
    assert set(result.values()) == {"SUCCESS"}, result


def test_out_overload_writes_torch_results_in_place() -> None:
    op = _op("inplace")
    x = torch.randn(2, 3, 4, 5)
    nhwc, window, base = _outs()
    before = base.clone()
    assert op(x, out=(nhwc, window)) == (nhwc, window)
    assert torch.equal(nhwc, x.permute(0, 2, 3, 1))
    assert torch.equal(window, x[:, 1:].to(torch.float16))
    untouched = torch.ones_like(base, dtype=torch.bool)
    untouched[:, :2, :, 1:] = False
    assert torch.equal(base[untouched], before[untouched])


def test_out_overload_under_torch_compile() -> None:
    _op("compiled")

    def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        torch.ops.stridec_out_tests.compiled.out(x, a, b)
        return a.sum() + b.float().sum()

    x = torch.randn(2, 3, 4, 5)
    nhwc, window, _ = _outs()
    got = torch.compile(f, fullgraph=True)(x, nhwc, window)
    assert torch.equal(nhwc, x.permute(0, 2, 3, 1))
    assert torch.equal(window, x[:, 1:].to(torch.float16))
    torch.testing.assert_close(got, x.permute(0, 2, 3, 1).sum() + x[:, 1:].half().float().sum())


def test_out_overload_refuses_bad_outs() -> None:
    op = _op("bad")
    x = torch.randn(2, 3, 4, 5)
    nhwc, window, _ = _outs()
    with pytest.raises(CallError, match="expected 2; got 1"):
        op(x, out=(nhwc,))
    with pytest.raises(CallError, match=r"out\[1\]: expected dtype float16"):
        op(x, out=(nhwc, torch.empty(2, 2, 4, 5)))
