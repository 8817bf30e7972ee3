"""Philox4x32-10 with DirectML `DML_RANDOM_GENERATOR` semantics: the numpy reference
(docs/design.md#philox).

This module is the oracle the Triton kernel (`stridec.compiler.codegen.philox`) is tested
against, so it shares no code with it: plain numpy, 32-bit words held in `uint64` arrays so
that a 32 × 32-bit product is exact, masked back to 32 bits after every step.

The generator state is six 32-bit words::

    word      0        1        2        3        4        5
            |--------|--------|--------|--------|--------|--------|
             <------ 128-bit counter, word 0 low -> <- key, word 4 low ->

The element with row-major logical index `i` of an output is word `i mod 4` of
`Philox4x32-10(counter + ⌊i/4⌋, key)`, the counter sum taken mod 2^128 (the carry runs
through all four words). After a call the counter has advanced by `⌈numel/4⌉`, so two
chained calls produce the same words as one call of their combined size whenever the
first size is a multiple of 4.

Worked example: counter 2^32 − 1 (words `ffffffff 0 0 0`), element `i = 9` uses block
`⌊9/4⌋ = 2`, counter `2^32 − 1 + 2 = 2^32 + 1` (words `00000001 00000001 0 0`), word
`9 mod 4 = 1` of that block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from stridec.errors import CallError, ShapeError, UnsupportedError
from stridec.ir.affine import MAX_RANK, checked_ints
from stridec.ir.dtypes import DType, as_dtype
from stridec.runtime.backends.reference_casts import cast

__all__ = [
    "PHILOX_M4x32_0",
    "PHILOX_M4x32_1",
    "PHILOX_W32_0",
    "PHILOX_W32_1",
    "PHILOX_ROUNDS",
    "philox4x32_10",
    "state_words",
    "make_state",
    "philox_bits",
    "uniform_from_bits",
    "uniform_scale",
    "UNIFORM_BITS",
]

# Random123 `philox.h`: round multipliers and the Weyl sequence that bumps the key.
PHILOX_M4x32_0 = 0xD2511F53
PHILOX_M4x32_1 = 0xCD9E8D57
PHILOX_W32_0 = 0x9E3779B9  # golden ratio
PHILOX_W32_1 = 0xBB67AE85  # sqrt(3) - 1
PHILOX_ROUNDS = 10

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def philox4x32_10(counters: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Random123's Philox4x32-10 block function, one block per row.

    `counters` is `(n, 4)` (word 0 first, as Random123's `ctr.v[0]`), `keys` is `(n, 2)` or
    a single `(2,)` key for every row; both are 32-bit words (any integer dtype whose values
    lie in `[0, 2^32)`). Returns the `(n, 4)` uint32 output words.

    One round, with `hi/lo` the halves of the 64-bit product::

        (x0, x1, x2, x3) -> (hi(M1·x2) ^ x1 ^ k0,  lo(M1·x2),  hi(M0·x0) ^ x3 ^ k1,  lo(M0·x0))

    and the key advances by `(W0, W1)` (mod 2^32) between rounds: ten rounds, nine bumps.
    """
    ctr = np.asarray(counters)
    key = np.asarray(keys)
    if ctr.ndim != 2 or ctr.shape[1] != 4:
        raise ShapeError(f"philox4x32_10: counters must have shape (n, 4); got {ctr.shape}")
    if key.shape != (2,) and key.shape != (ctr.shape[0], 2):
        raise ShapeError(
            f"philox4x32_10: keys must have shape (2,) or ({ctr.shape[0]}, 2); got {key.shape}"
        )
    x0, x1, x2, x3 = (ctr[:, k].astype(np.uint64) & _MASK32 for k in range(4))
    k0 = key[..., 0].astype(np.uint64) & _MASK32
    k1 = key[..., 1].astype(np.uint64) & _MASK32
    m0 = np.uint64(PHILOX_M4x32_0)
    m1 = np.uint64(PHILOX_M4x32_1)
    for r in range(PHILOX_ROUNDS):
        if r > 0:
            k0 = (k0 + np.uint64(PHILOX_W32_0)) & _MASK32
            k1 = (k1 + np.uint64(PHILOX_W32_1)) & _MASK32
        p0 = m0 * x0  # < 2^64: exact in uint64
        p1 = m1 * x2
        x0, x1, x2, x3 = (
            (p1 >> _SHIFT32) ^ x1 ^ k0,
            p1 & _MASK32,
            (p0 >> _SHIFT32) ^ x3 ^ k1,
            p0 & _MASK32,
        )
    return np.stack([x0, x1, x2, x3], axis=1).astype(np.uint32)


def _state_array(state: Any) -> np.ndarray:
    """The six state words as a uint32 numpy array, or `CallError` naming "state"."""
    if isinstance(state, torch.Tensor):
        if state.dtype not in (torch.int32, torch.uint32):
            raise CallError(f"state: expected dtype uint32 or int32; got {state.dtype}")
        shape = tuple(state.shape)
        t = state.detach().to("cpu")
        if t.dtype == torch.uint32:
            t = t.view(torch.int32)
        words = t.contiguous().numpy().view(np.uint32)
    elif isinstance(state, np.ndarray):
        if state.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
            raise CallError(f"state: expected dtype uint32 or int32; got {state.dtype}")
        shape = state.shape
        words = np.ascontiguousarray(state).view(np.uint32)
    else:
        raise CallError(
            f"state: expected a numpy array or torch tensor of 6 uint32 words; "
            f"got {type(state).__name__}"
        )
    # DirectML (feature level 4.0): sizes {[1], ..., [1], 6}, 1 to 8 dims; this admits the
    # (6,) and (1, 1, 1, 6) of docs/design.md#philox.
    if not (1 <= len(shape) <= MAX_RANK and shape[-1] == 6 and all(s == 1 for s in shape[:-1])):
        raise CallError(f"state: expected shape (6,) or (1, 1, 1, 6) (6 words); got {shape}")
    return words.reshape(6)


def state_words(state: Any) -> tuple[int, tuple[int, int]]:
    """Split a 6-word state into `(counter, (k0, k1))`; `counter` is a 128-bit Python int.

    Accepts numpy arrays and torch tensors of dtype uint32 or int32 (read as bit
    patterns) with shape `(6,)` or `(1, 1, 1, 6)` (any `(1, …, 1, 6)` of rank ≤ 8, as
    DirectML); anything else raises `CallError` naming "state".
    """
    w = [int(x) for x in _state_array(state)]
    counter = w[0] | (w[1] << 32) | (w[2] << 64) | (w[3] << 96)
    return counter, (w[4], w[5])


def make_state(counter: int, key: int | tuple[int, int]) -> np.ndarray:
    """The `(6,)` uint32 state for a counter (taken mod 2^128) and a key.

    `key` is a 64-bit int (word 4 = low half) or the pair `(k0, k1)`.
    """
    if isinstance(key, tuple):
        k0, k1 = key
    else:
        k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    c = counter % (1 << 128)
    words = [(c >> (32 * k)) & 0xFFFFFFFF for k in range(4)] + [k0 & 0xFFFFFFFF, k1 & 0xFFFFFFFF]
    return np.array(words, dtype=np.uint32)


def _check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    out = checked_ints(sizes, "sizes", "philox")
    if len(out) > MAX_RANK:
        raise UnsupportedError(f"philox: rank at most {MAX_RANK} is supported; got sizes {out}")
    if any(s < 0 for s in out):
        raise ShapeError(f"philox: sizes must be >= 0; got {out}")
    return out


def _add_counters(counter: int, n: int) -> np.ndarray:
    """`(n, 4)` uint32 words of `counter + j mod 2^128` for `j = 0 … n−1`."""
    j = np.arange(n, dtype=np.uint64)
    lo = np.uint64(counter & 0xFFFFFFFFFFFFFFFF)
    hi = np.uint64((counter >> 64) & 0xFFFFFFFFFFFFFFFF)
    lo_sum = lo + j  # wraps mod 2^64
    carry = (lo_sum < lo).astype(np.uint64)
    hi_sum = hi + carry  # wraps mod 2^64: the 2^128 wrap-around
    return np.stack(
        [lo_sum & _MASK32, lo_sum >> _SHIFT32, hi_sum & _MASK32, hi_sum >> _SHIFT32], axis=1
    ).astype(np.uint32)


def philox_bits(state: Any, sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The `bits` and `new_state` outputs of the `philox` op (docs/design.md#philox).

    Returns a uint32 array of shape `sizes` (rank 0 gives one element) whose element with
    row-major index `i` is word `i mod 4` of Philox4x32-10(counter + ⌊i/4⌋, key), and the
    `(6,)` uint32 new state: counter + ⌈numel/4⌉ mod 2^128, key unchanged. A size-0 output
    leaves the state as it was.
    """
    counter, key = state_words(state)
    shape = _check_sizes(sizes)
    numel = math.prod(shape)
    blocks = -(-numel // 4)
    words = philox4x32_10(_add_counters(counter, blocks), np.array(key, dtype=np.uint32))
    bits = words.reshape(-1)[:numel].reshape(shape)
    return bits, make_state(counter + blocks, key)


# The random bits a uniform of each dtype takes, as torch's `uniform_real` does
# (`std::numeric_limits<T>::digits`): `u = k·2^-d` with `k < 2^d` is exact in the target
# type, so `[0, 1)` gives values below 1 in float16 and bfloat16 too, never a rounded 1.0.
UNIFORM_BITS = {"float32": 24, "float16": 11, "bfloat16": 8}


def uniform_scale(low: float, high: float) -> tuple[np.float32, np.float32]:
    """`(low, high − low)` as the float32 pair the uniform transform uses.

    `low` and `high` are each rounded to float32 first, then subtracted in float32 (one
    rounding). The Triton kernel bakes the same two constants into its source.
    """
    low32 = np.float32(low)
    high32 = np.float32(high)
    with np.errstate(over="ignore", invalid="ignore"):
        scale32 = np.float32(high32 - low32)
    return low32, scale32


def _fma_f32(a: np.ndarray, b: np.float32, c: np.float32) -> np.ndarray:
    """Correctly rounded float32 `a·b + c` (one rounding, as `fma.rn.f32`).

    Valid when `a·b` is exact in float64, which holds here: `a` carries at most 24
    significant bits (`(bits >> (32 - d))·2^-d`, d <= 24) and `b` is a float32 (24
    bits), so the product has at most 48. The float64 sum `s` is rounded once more to
    float32; that double rounding can only go wrong when `s` lands exactly on a float32
    halfway point while the exact sum does not, and the exact error of the float64
    addition (TwoSum) says which way to go then.
    """
    p = a.astype(np.float64) * np.float64(b)
    c64 = np.float64(c)
    with np.errstate(over="ignore", invalid="ignore"):
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)  # s + err == p + c exactly
        r = s.astype(np.float32)
        toward = np.where(s > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(r, toward.astype(np.float32))
        halfway = (r.astype(np.float64) + other.astype(np.float64)) == 2.0 * s
        fix = halfway & (err != 0) & np.isfinite(s)
        # On a halfway point, round toward the side the exact sum lies on.
        up = np.maximum(r, other)
        down = np.minimum(r, other)
        fixed = np.where(err > 0, up, down)
    return np.where(fix, fixed, r).astype(np.float32)


def uniform_from_bits(
    bits: np.ndarray | torch.Tensor,
    dtype: DType | str | torch.dtype = "float32",
    low: float = 0.0,
    high: float = 1.0,
) -> torch.Tensor:
    """The `philox_uniform` transform of 32-bit words, as a CPU torch tensor of `dtype`.

    Exact order of operations, all in float32 (the Triton kernel does the same):

    1. `u = float32(bits >> (32 - d)) · 2^-d`, with `d = UNIFORM_BITS[dtype]` the
       significand bits of the target type (24, 11 for float16, 8 for bfloat16, as
       torch's `uniform_real` takes): exact, `u ∈ [0, 1 − 2^-d]`, and exact in the target
       type too.
    2. `(low32, scale32) = uniform_scale(low, high)`: `float32(low)` and
       `float32(high) − float32(low)`.
    3. `r = fma(u, scale32, low32)`: the exact `u·scale32 + low32` rounded once to float32
       (a fused multiply-add, so a compiler cannot change the result by contracting a
       separate multiply and add). With the default `[0, 1)` this is `u` itself.
    4. float16 / bfloat16: `r` rounded to nearest-even into the target type.

    With the default `[0, 1)` every value is `u` itself, below 1 in every dtype (as
    `torch.rand`); over other bounds rounding can make a value equal `high`.
    """
    target = as_dtype(dtype, "uniform dtype")
    if target.name not in ("float32", "float16", "bfloat16"):
        raise UnsupportedError(
            f"philox_uniform: dtype must be float32, float16 or bfloat16; got {target.name}"
        )
    if isinstance(bits, torch.Tensor):
        t = bits.detach().to("cpu")
        if t.dtype == torch.uint32:
            t = t.view(torch.int32)
        words = t.contiguous().numpy().view(np.uint32)
    else:
        words = np.asarray(bits)
        if words.dtype == np.int32:
            words = words.view(np.uint32)
        words = words.astype(np.uint32)
    d = UNIFORM_BITS[target.name]
    u = (words >> np.uint32(32 - d)).astype(np.float32) * np.float32(2.0**-d)
    low32, scale32 = uniform_scale(low, high)
    r = _fma_f32(u.reshape(-1), scale32, low32).reshape(u.shape)
    return cast(torch.from_numpy(np.ascontiguousarray(r)), target.torch)
