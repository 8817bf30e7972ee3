"""Numbers converted to dtypes without torch (`stridec.ir.dtypes.fits`, `convert`,
`bit_pattern`) agree with torch itself, the oracle: `torch.full((2,), v, dtype=…)`
accepting or refusing `v`, `torch.tensor(v).to(dtype).item()`, and the bits of that
element read through an integer view."""

from __future__ import annotations

import math
import platform

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.ir.dtypes import DTYPES, as_dtype, bit_pattern, convert, fits

SPECIAL = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, -255, -256, 65504, 65505, 70000,
           2**31 - 1, 2**31, -(2**31), 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63),
           -(2**63) - 1, 2**64, True, False, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 0.1,
           65504.0, 65519.0, 65520.0, 1e10, -1e10, 3.4028234663852886e38, 3.5e38, 1e300,
           float("inf"), float("-inf"), float("nan"), 300.7, -300.7, 2.0**63, 1 / 3]
BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def torch_fits(value: object, dtype: torch.dtype) -> bool:
    try:
        torch.full((2,), value, dtype=dtype)
    except (RuntimeError, OverflowError):
        return False
    return True


def torch_convert(value: object, dtype: torch.dtype) -> torch.Tensor:
    source = torch.bool if isinstance(value, bool) else (
        torch.int64 if isinstance(value, int) else torch.float64)
    return torch.tensor(value, dtype=source).to(dtype)


def check(value: object) -> None:
    for d in DTYPES.values():
        assert fits(value, d) == torch_fits(value, d.torch), (value, d)
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            continue  # torch.tensor cannot hold it as int64
        if (isinstance(value, float) and not d.is_floating and d.name != "bool"
                and not fits(value, d) and platform.machine() not in ("x86_64", "AMD64")):
            continue  # undefined in C++: `convert` follows x86-64, where torch is checked
        want = torch_convert(value, d.torch)
        got = convert(value, d)
        item = want.item()
        if isinstance(item, float) and math.isnan(item):
            assert math.isnan(got), (value, d)
        else:
            assert got == item and type(got) is type(item), (value, d, got, item)
        bits = want.reshape(1).view(BITS[d.itemsize]).item() if d.name != "bool" else int(item)
        assert bit_pattern(value, d) == bits, (value, d)


@pytest.mark.parametrize("value", SPECIAL, ids=repr)
def test_special_values_convert_as_torch(value: object) -> None:
    check(value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                 st.integers(min_value=-(2**64), max_value=2**64), st.booleans()))
def test_numbers_convert_as_torch(value: object) -> None:
    check(value)


def test_torch_dtypes_map_without_a_table_of_torch_objects() -> None:
    assert all(as_dtype(d.torch) is d for d in DTYPES.values())
    assert as_dtype(torch.half) is DTYPES["float16"] and as_dtype(torch.long) is DTYPES["int64"]
