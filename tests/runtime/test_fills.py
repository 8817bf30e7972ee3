"""Fills (pad, pack, full, full_like; builder, text IR and trace): the same rule
everywhere, torch's — a fill torch refuses for a dtype is a `ShapeError` naming the fill
and the dtype, never a silent wrap — and an accepted fill writes torch's bits.

The oracle for acceptance is torch itself: `F.pad` must accept the value and
`torch.full` must store it without wrapping (`torch.full` wraps -1 into uint8 as 255,
which `F.pad` refuses; a fill never wraps in stridec).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.errors import ParseError, ShapeError
from stridec.ir.dtypes import DTYPES
from stridec.runtime.compile import BACKENDS

CPU_BACKENDS = [b for b in BACKENDS if b in ("interpret", "reference", "cpu")]

VALUES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 65504, 65505, 70000, 2**31 - 1, 2**31,
          -(2**31), -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63), 2**64 - 1,
          2**64, -(2**63) - 1, 0.0, -0.0, 1.5, -1.5, -0.5, 255.0, 255.5, 127.9, -128.5,
          65504.0, 65504.5, 65519.0, 3.3895313892515355e38, 3.39e38, 3.4028234663852886e38,
          3.41e38, 1e300, float(2**63), math.inf, -math.inf, math.nan, True, False]


def torch_accepts(value: object, dtype: torch.dtype) -> bool:
    try:
        full = torch.full((2,), value, dtype=dtype)
        F.pad(torch.zeros(1, dtype=dtype), (1, 0), value=value)
    except (RuntimeError, OverflowError):
        return False
    if dtype.is_floating_point or dtype == torch.bool:
        return True
    return full[0].item() == math.trunc(value)  # no wrap


def stridec_accepts(value: object, dtype: str) -> bool:
    outcomes = []
    for build in (
        lambda g, x: stridec.pad(x, (1, 1), value=value),
        lambda g, x: x.pack("pitched<16>", fill=value),
        lambda g, x: g.full((2,), value, dtype),
    ):
        g = stridec.Graph("fill")
        x = g.input("x", (2, 3), dtype)
        try:
            build(g, x)
            outcomes.append(True)
        except ShapeError as e:
            assert f"= {value!r} does not fit dtype {dtype}" in str(e)
            outcomes.append(False)
    assert len(set(outcomes)) == 1, f"pad, pack and full disagree on {value!r}: {outcomes}"
    return outcomes[0]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_a_fill_fits_exactly_where_torch_takes_it(dtype: str) -> None:
    wrong = [v for v in VALUES
             if stridec_accepts(v, dtype) != torch_accepts(v, DTYPES[dtype].torch)]
    assert not wrong, f"{dtype}: stridec and torch disagree on {wrong}"


def test_the_issue_example_is_refused_everywhere_a_fill_is_taken() -> None:
    """-1 into uint8: F.pad refuses it; pad, pack, full, the text IR and trace too."""
    t = torch.zeros(2, 3, dtype=torch.uint8)
    with pytest.raises(RuntimeError):
        F.pad(t, (1, 1), value=-1)
    assert not stridec_accepts(-1, "uint8")
    text = 'graph @g {\n  %0 = full {sizes = [2], value = -1, dtype = ui8} : tensor<2xui8>\n' \
           '  output %0\n}\n'
    with pytest.raises(ParseError, match="2:8: ShapeError: full: attribute 'value' = -1 does "
                                         "not fit dtype uint8"):
        stridec.parse(text)
    with pytest.raises(ShapeError, match="pad: attribute 'value' = -1 does not fit dtype uint8"):
        stridec.trace(lambda x: F.pad(x, (1, 1), value=-1), t)
    with pytest.raises(ShapeError, match="full: attribute 'value' = -1 does not fit dtype uint8"):
        stridec.trace(lambda x: torch.full_like(x, -1), t)


FILLS = [("int32", 1.5), ("int32", -1.5), ("uint8", 255.0), ("int8", -128), ("float16", 65504),
         ("float16", math.nan), ("bfloat16", -math.inf), ("float32", -0.0), ("bool", 7),
         ("bool", math.nan), ("int64", 2**63 - 1), ("uint32", 2**32 - 1),
         ("int16", np.int64(-3)), ("float32", np.float32(2.5)), ("uint8", np.uint8(9)),
         ("float64", True)]


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize(("dtype", "value"), FILLS)
def test_an_accepted_fill_writes_torchs_bits(dtype: str, value: object, backend: str) -> None:
    tdtype = DTYPES[dtype].torch
    t = torch.ones(2, 3, dtype=tdtype)
    g = stridec.Graph("fill")
    x = g.input("x", (2, 3), dtype)
    g.output(stridec.pad(x, (1, 2, 0, 1), value=value), g.full((3,), value, dtype))
    padded, full = stridec.compile(g, backend=backend)(t)
    want_full = torch.full((3,), value, dtype=tdtype)
    if dtype == "int64":  # F.pad reads an int64 fill through a double: 2^63 - 1 wraps
        want_pad = torch.full((3, 6), value, dtype=tdtype)
        want_pad[:2, 1:4] = t
    else:
        want_pad = F.pad(t, (1, 2, 0, 1), value=value)
    for got, want in ((padded, want_pad), (full, want_full)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.view(torch.uint8), want.contiguous().view(torch.uint8)), (got, want)
