"""The values the cast tests convert (tests/compiler/test_copy_plan_casts.py and its
neighbours): every float16 and bfloat16 pattern, float32/float64 special values (NaN
payloads of both signs, signalling NaNs, infinities, subnormals, rounding ties, integer
range edges) and random values, each dtype's in a contiguous tensor whose length is a
multiple of 64, so every element takes torch's vector loop (the module docstring of
`stridec.compiler.codegen.c.casts` says where torch's scalar tail differs)."""

from __future__ import annotations

import torch

from stridec.ir.dtypes import DTYPES

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _pad64(t: torch.Tensor) -> torch.Tensor:
    pad = -t.numel() % 64
    return torch.cat([t, t[:pad]]) if pad else t


def _bits_tensor(words: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of `dtype` from unsigned bit patterns."""
    size = torch.empty((), dtype=dtype).element_size()
    as_int = _BITS[size]
    width = 8 * size
    signed = [w - (1 << width) if w >= 1 << (width - 1) and as_int != torch.uint8 else w
              for w in words]
    return torch.tensor(signed, dtype=as_int).view(dtype)


def special_values(src: str) -> torch.Tensor:
    """The test values of `src` (contiguous, length a multiple of 64)."""
    g = torch.Generator().manual_seed(1234)
    dtype = DTYPES[src].torch
    if src in ("float16", "bfloat16"):
        return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)
    if src == "bool":
        return _pad64(torch.tensor([True, False] * 32))
    if src in ("float32", "float64"):
        return _pad64(torch.cat([_special_floats(src), _random_floats(src, g)]))
    info = torch.iinfo(dtype)
    edges = [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max, 2**24 + 1,
             2**24 + 2**16 + 1, 65519, 65520, 2**53 + 1]
    edges = [e for e in edges if info.min <= e <= info.max]
    wide = torch.randint(info.min, info.max, (20000,), generator=g, dtype=torch.int64)
    small = torch.randint(-70000, 70000, (20000,), generator=g, dtype=torch.int64)
    small = small.clamp(info.min, info.max)
    return _pad64(torch.cat([torch.tensor(edges, dtype=torch.int64), wide, small]).to(dtype))


def _special_floats(src: str) -> torch.Tensor:
    if src == "float32":
        patterns = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA12345, 0xFFA12345,
                    0x7FFFFFFF, 0xFFFFFFFF, 0x7F802000, 0x7FC0FFFF, 0x7FE00001, 0x7F800000,
                    0xFF800000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80000000,
                    0x00000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x33000000, 0x33000001, 0x387FE000,
                    0x387FF000, 0x38800000, 0x477FEFFF, 0x477FF000, 0x477FE000, 0x3F808000,
                    0x3F818000, 0x3F808001, 0x7F7F8000, 0x7F7F7FFF, 0x4F000000, 0xCF000000,
                    0x4F800000, 0x5F000000, 0xDF000000, 0x4EFFFFFF, 0xCF000001]
        bits = _bits_tensor(patterns, torch.float32)
    else:
        patterns = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
                    0xFFF0000000000001, 0x7FF4000000000000, 0xFFF7FFFFFFFFFFFF,
                    0x7FFC2468A0000000, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000,
                    0xFFF0000000000000, 0x0000000000000001, 0x8000000000000001,
                    0x000FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF, 0x36A0000000000000]
        bits = _bits_tensor(patterns, torch.float64)
    dtype = DTYPES[src].torch
    values = [2.0**31, -(2.0**31), 2.0**31 - 1, -(2.0**31) - 1, -(2.0**31) - 0.5, 2.0**32,
              2.0**32 - 1, 2.0**32 + 1, 2.0**63, -(2.0**63), 2.0**64, 3e9, -3e9, 5e9, 1e19,
              -1e19, 255.9, 256.0, 256.5, -0.5, -0.9, 0.9, -1.5, -129.5, 127.5, 128.0,
              65504.0, 65519.99, 65520.0, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40,
              2**-25 + 2**-50, 2**-24, 2**-25, 3 * 2**-26, 2**-14 - 2**-25, 1e-40, -0.0]
    return torch.cat([bits, torch.tensor(values, dtype=torch.float64).to(dtype)])


def _random_floats(src: str, g: torch.Generator) -> torch.Tensor:
    """Random bit patterns (every exponent, NaN payloads too) and values in the ranges where
    the integer and half-precision rules change."""
    dtype = DTYPES[src].torch
    n = 30000
    width = torch.int32 if src == "float32" else torch.int64
    info = torch.iinfo(width)
    bits = torch.randint(info.min, info.max, (n,), generator=g, dtype=width).view(dtype)
    pieces = [bits]
    for scale in (2.0**66, 2.0**34, 2.0**17, 300.0, 2.0**-13):
        u = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
        pieces.append((u * scale).to(dtype))
    # Float16 and bfloat16 ties and their neighbours: the exact midpoint of two adjacent
    # half values, and one float32 step either side of it.
    for half in (torch.float16, torch.bfloat16):
        h = torch.randint(-(1 << 15), 1 << 15, (n,), generator=g, dtype=torch.int32)
        lo = h.to(torch.int16).view(half).to(torch.float64)
        hi = (h + 1).to(torch.int16).view(half).to(torch.float64)
        mid = ((lo + hi) / 2).to(torch.float32)
        mid = torch.where(torch.isfinite(mid), mid, torch.zeros_like(mid))
        mbits = mid.view(torch.int32)
        pieces += [mid.to(dtype), (mbits + 1).view(torch.float32).to(dtype),
                   (mbits - 1).view(torch.float32).to(dtype)]
    return torch.cat(pieces)
