"""torch's element conversions, bit for bit: the rules the CPU backends follow for `cast`
(on a GPU, torch's CUDA conversions: docs/semantics.md#casts).

torch's CPU `.to()` gives different bits for the same value depending on the path it
takes (vectorized body, scalar tail, strided loop): float32 NaN -> bfloat16 is `0xFFFF`
in its vector loop and `0x7FC0` in its scalar one. stridec follows one of them everywhere
— the vector loop of a long contiguous tensor on x86 (AVX2 / AVX-512), the common case —
whatever the layout, the size and the backend:

- NaN -> float16 / float32 / float64: sign kept, quiet bit set, the payload's top bits
  kept (x86's conversion instructions): float32 `0x7F800001` -> float16 `0x7E00`,
  float16 `0x7C01` -> float32 `0x7FC02000`. bfloat16 widens exactly (a signalling NaN
  stays signalling); float64 narrows to float16 and bfloat16 through float32.
- NaN -> bfloat16: `0xFFFF` from float32 and float64, `0x7FC0` from float16.
- Finite values round to nearest even (float64 -> float16 / bfloat16 twice, through
  float32, as c10 converts); subnormals are kept.
- float -> int64 / int32: truncation, and the minimum for NaN, ±inf and values out of
  range (x86's `cvtt`). int16 / int8 take the int32 result's low bits, uint8 the int64
  result's (c10 goes through int64 for uint8). uint32:
  `x >= 2^31 ? int32(x - 2^31) + 2^31 : int32(x)` modulo 2^32 (from float16: through
  int64).
- float -> bool: `x != 0` (NaN is true); integers convert as C does (wrapping).

`cast` is the reference implementation (the Triton kernels emit the same rules in
`compiler/codegen/copy.py`); the tests compare both with torch on every bit pattern of
float16 and bfloat16 and on the special float32 / float64 values.
"""

from __future__ import annotations

import torch

__all__ = ["cast"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
         torch.float32: torch.int32, torch.float64: torch.int64}


def _nan_bits(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The bits (as int64) of the NaN each NaN of `t` becomes in `dtype`."""
    src = t.dtype
    if dtype == torch.bfloat16:
        return torch.full(t.shape, 0x7FC0 if src == torch.float16 else 0xFFFF, dtype=torch.int64)
    # Sign, and the payload as a 52-bit-aligned fraction (bfloat16 widens exactly).
    raw = t.view(_BITS[src]).to(torch.int64)
    if src == torch.float16:
        sign, frac = raw & 0x8000, (raw & 0x3FF) << 42
        sign = sign << 48
        quiet = True
    elif src == torch.bfloat16:
        sign, frac = (raw & 0x8000) << 48, (raw & 0x7F) << 45
        quiet = False
    elif src == torch.float32:
        sign, frac = (raw & 0x80000000) << 32, (raw & 0x7FFFFF) << 29
        quiet = True
    else:
        sign, frac = raw & (-(2**63)), raw & ((1 << 52) - 1)
        quiet = True
    qbit = 1 << 51
    if quiet or dtype != torch.float32:
        frac = frac | qbit
    if dtype == torch.float64:
        return sign | 0x7FF0000000000000 | frac
    if dtype == torch.float32:
        return (sign >> 32) | 0x7F800000 | (frac >> 29)
    return (sign >> 48) | 0x7C00 | (frac >> 42)


def _float_to_int32(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float64)  # exact; the bounds compare in float16 would be inf
    bad = x.isnan() | (x >= 2.0**31) | (x < -(2.0**31))
    return torch.where(bad, -(2**31), x.masked_fill(bad, 0).to(torch.int64)).to(torch.int32)


def _float_to_int64(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float64)
    bad = x.isnan() | (x >= 2.0**63) | (x < -(2.0**63))
    return torch.where(bad, -(2**63), x.masked_fill(bad, 0).to(torch.int64))


def cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`t.to(dtype)` with the rules above, whatever `t`'s layout (`t` itself for its own
    dtype, else a new contiguous tensor). On a GPU, torch's own `.to()` there: each backend
    gives torch's bits on the device it runs on (docs/semantics.md#casts), and torch's CUDA
    conversion is one rule whatever the layout."""
    src = t.dtype
    if src == dtype:
        return t
    t = t.contiguous()
    if t.device.type != "cpu":
        return t.to(dtype)
    if src in _FLOATS and dtype in _FLOATS:
        out = t.to(torch.float32).to(dtype) if src == torch.float64 and dtype in (
            torch.float16, torch.bfloat16) else t.to(dtype)
        nan = t.isnan()
        if bool(nan.any()):
            width = _BITS[dtype]
            bits = _nan_bits(t, dtype)
            narrow = (bits & 0xFFFF) if width == torch.int16 else bits
            if width == torch.int16:
                narrow = torch.where(narrow >= 0x8000, narrow - 0x10000, narrow)
            elif width == torch.int32:
                narrow = torch.where(narrow >= 2**31, narrow - 2**32, narrow)
            out = out.view(width).clone()
            out[nan] = narrow[nan].to(width)
            out = out.view(dtype)
        return out
    if src in _FLOATS and dtype not in _FLOATS and dtype != torch.bool:
        if dtype == torch.int64:
            return _float_to_int64(t)
        if dtype == torch.uint32:
            if src == torch.float16:
                wide = _float_to_int64(t)
            else:
                x = t.to(torch.float64)
                high = x >= 2.0**31
                wide = _float_to_int32(torch.where(high, x - 2.0**31, x)).to(torch.int64)
                wide = wide + high.to(torch.int64) * 2**31
            return (wide & 0xFFFFFFFF).to(torch.uint32)
        if dtype == torch.uint8:
            return _float_to_int64(t).to(dtype)
        narrow = _float_to_int32(t)
        return narrow if dtype == torch.int32 else narrow.to(dtype)
    return t.to(dtype)
