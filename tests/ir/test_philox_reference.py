"""The numpy Philox4x32-10 reference (stridec.runtime.backends.reference_philox) against
Random123 and the definition in docs/design.md#philox.

The block function is checked against Random123's known-answer vectors; everything
built on it (counter arithmetic, new_state, uniforms) against scalar Python-int and
exact-rational computations written out here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from stridec.errors import CallError, ShapeError, UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.runtime.backends.reference_philox import (
    make_state,
    philox4x32_10,
    philox_bits,
    state_words,
    uniform_from_bits,
)

KAT_FILE = Path(__file__).parent.parent / "data" / "random123_kat_philox4x32_10.txt"


def load_kat() -> list[tuple[list[int], list[int], list[int]]]:
    """`(counter words, key words, expected words)` of every data line of the KAT file."""
    rows = []
    for line in KAT_FILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, rounds, *words = line.split()
        assert (name, rounds) == ("philox4x32", "10"), line
        values = [int(w, 16) for w in words]
        assert len(values) == 10, line
        rows.append((values[:4], values[4:6], values[6:]))
    return rows


KAT = load_kat()
MASK128 = (1 << 128) - 1


def test_kat_file_holds_the_spec_vector() -> None:
    assert len(KAT) >= 3
    assert ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]) in KAT


@pytest.mark.parametrize("ctr,key,expected", KAT, ids=[f"kat{n}" for n in range(len(KAT))])
def test_block_function_matches_random123(ctr: list[int], key: list[int], expected: list[int]):
    out = philox4x32_10(np.array([ctr], dtype=np.uint32), np.array(key, dtype=np.uint32))
    assert out.dtype == np.uint32
    assert [int(w) for w in out[0]] == expected


def test_block_function_vectorized_rows_and_per_row_keys() -> None:
    ctrs = np.array([c for c, _, _ in KAT], dtype=np.uint32)
    keys = np.array([k for _, k, _ in KAT], dtype=np.uint32)
    expected = np.array([e for _, _, e in KAT], dtype=np.uint32)
    np.testing.assert_array_equal(philox4x32_10(ctrs, keys), expected)


@pytest.mark.parametrize("ctr,key,expected", KAT[:3], ids=["zero", "ones", "pi"])
def test_philox_bits_of_one_block_is_the_kat(ctr, key, expected) -> None:
    counter = ctr[0] | ctr[1] << 32 | ctr[2] << 64 | ctr[3] << 96
    bits, new_state = philox_bits(make_state(counter, tuple(key)), (4,))
    assert [int(b) for b in bits] == expected
    assert state_words(new_state) == ((counter + 1) & MASK128, tuple(key))


def scalar_bits(counter: int, key: tuple[int, int], numel: int) -> list[int]:
    """docs/design.md#philox element by element: word i mod 4 of
    Philox(counter + ⌊i/4⌋ mod 2^128, key)."""
    out = []
    for i in range(numel):
        c = (counter + i // 4) & MASK128
        words = [(c >> (32 * k)) & 0xFFFFFFFF for k in range(4)]
        block = philox4x32_10(np.array([words], dtype=np.uint32), np.array(key, dtype=np.uint32))
        out.append(int(block[0, i % 4]))
    return out


COUNTERS = [
    0,
    2**32 - 3,  # carry into word 1
    2**64 - 2,  # carry into word 2
    2**96 - 1,  # carry into word 3
    2**128 - 2,  # wraps to 0
    0x48656C6C_6F46726F_6D536561_74746C65,  # DirectML's example counter
]


@pytest.mark.parametrize("counter", COUNTERS, ids=hex)
@pytest.mark.parametrize("sizes", [(13,), (2, 3), (3, 1, 3), (1, 1, 1, 1, 1, 1, 1, 5)])
def test_philox_bits_elementwise(counter: int, sizes: tuple[int, ...]) -> None:
    key = (0xA4093822, 0x299F31D0)
    bits, new_state = philox_bits(make_state(counter, key), sizes)
    numel = math.prod(sizes)
    assert bits.shape == sizes and bits.dtype == np.uint32
    assert [int(b) for b in bits.reshape(-1)] == scalar_bits(counter, key, numel)
    # ⌈numel/4⌉ blocks consumed, mod 2^128; key unchanged.
    assert state_words(new_state) == ((counter + -(-numel // 4)) & MASK128, key)


def test_rank0_is_one_element_and_one_block() -> None:
    bits, new_state = philox_bits(make_state(0, 0), ())
    assert bits.shape == () and int(bits) == 0x6627E8D5
    assert state_words(new_state) == (1, (0, 0))


@pytest.mark.parametrize("sizes", [(0,), (3, 0, 2)])
def test_empty_output_keeps_the_state(sizes) -> None:
    state = make_state(2**128 - 1, 0xDEADBEEF_12345678)
    bits, new_state = philox_bits(state, sizes)
    assert bits.shape == sizes
    np.testing.assert_array_equal(new_state, state)


def test_directml_increment_example() -> None:
    # DirectML's text: an output of sizes {3,3,20,7219} advances the counter by
    # ceil(1299420 / 4) = 324855. (The final counter value the text prints,
    # ...746f776e, does not follow from its own arithmetic: 0x74746c65 + 324855 is
    # 0x7479615c; we check the rule, which both agree on.)
    counter = 0x48656C6C_6F46726F_6D536561_74746C65
    _, new_state = philox_bits(make_state(counter, 7), (3, 3, 20, 7219))
    assert state_words(new_state)[0] - counter == 324855
    assert int(new_state[0]) == 0x7479615C


@pytest.mark.parametrize("first,second", [(8, 13), (4, 1), (12, 0), (0, 9)])
def test_chained_calls_equal_one_call_when_first_fills_blocks(first: int, second: int) -> None:
    state = make_state(2**64 - 3, (1, 2))
    a, mid = philox_bits(state, (first,))
    b, end = philox_bits(mid, (second,))
    whole, whole_end = philox_bits(state, (first + second,))
    np.testing.assert_array_equal(np.concatenate([a, b]), whole)
    np.testing.assert_array_equal(end, whole_end)


def test_chained_calls_skip_the_rest_of_a_partial_block() -> None:
    # A first call of 5 consumes blocks 0 and 1 (words 0..7); the next call starts at 8.
    state = make_state(2**32 - 1, 9)
    a, mid = philox_bits(state, (5,))
    b, _ = philox_bits(mid, (6,))
    whole, _ = philox_bits(state, (14,))
    np.testing.assert_array_equal(a, whole[:5])
    np.testing.assert_array_equal(b, whole[8:])


# ------------------------------------------------------------------------ state words


def test_state_words_reads_dtypes_and_shapes() -> None:
    words = [0xFFFFFFFF, 1, 0x80000000, 3, 0x12345678, 0xFEDCBA98]
    counter = 0xFFFFFFFF | 1 << 32 | 0x80000000 << 64 | 3 << 96
    expected = (counter, (0x12345678, 0xFEDCBA98))
    u32 = np.array(words, dtype=np.uint32)
    i32 = u32.view(np.int32)  # bit patterns: negative ints
    assert i32.min() < 0
    candidates = [
        u32,
        i32,
        u32.reshape(1, 1, 1, 6),
        torch.from_numpy(i32.copy()),
        torch.from_numpy(i32.copy()).view(torch.uint32),
        torch.from_numpy(i32.copy()).reshape(1, 1, 1, 6),
    ]
    for state in candidates:
        assert state_words(state) == expected
    np.testing.assert_array_equal(make_state(*expected), u32)


@pytest.mark.parametrize(
    "state",
    [
        np.zeros(5, dtype=np.uint32),
        np.zeros(7, dtype=np.uint32),
        np.zeros((2, 6), dtype=np.uint32),
        np.zeros((1, 1, 1, 5), dtype=np.uint32),
        np.zeros(6, dtype=np.float32),
        np.zeros(6, dtype=np.int64),
        torch.zeros(6, dtype=torch.float32),
        torch.zeros(6, dtype=torch.int64),
        torch.zeros(12, dtype=torch.int32),
        [0, 0, 0, 0, 0, 0],
    ],
    ids=["len5", "len7", "2x6", "1x1x1x5", "f32", "i64", "torch-f32", "torch-i64", "len12", "list"],
)
def test_bad_state_is_a_call_error_naming_state(state) -> None:
    with pytest.raises(CallError, match="state"):
        state_words(state)
    with pytest.raises(CallError, match="state"):
        philox_bits(state, (4,))


def test_bad_sizes() -> None:
    with pytest.raises(ShapeError, match="sizes"):
        philox_bits(make_state(0, 0), (2, -1))
    with pytest.raises(UnsupportedError, match="rank"):
        philox_bits(make_state(0, 0), (1,) * (MAX_RANK + 1))


# ------------------------------------------------------------------------ uniforms


def round_to_f32(x: Fraction) -> np.float32:
    """The float32 nearest to the exact rational `x` (ties to even)."""
    c = np.float32(float(x))
    candidates = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
    return min(
        candidates,
        key=lambda f: (abs(Fraction(float(f)) - x), int(np.array(f).view(np.uint32)) & 1),
    )


def test_uniform_default_is_top_24_bits_times_2_pow_minus_24() -> None:
    bits = np.array([0, 0xFF, 0x100, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    u = uniform_from_bits(bits, "float32")
    assert u.dtype == torch.float32
    assert u.tolist() == [0.0, 0.0, 2.0**-24, 0.5, 1.0 - 2.0**-24]


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-2.5, 3.25), (1e-3, 7.0), (-1e6, -1.0)])
def test_uniform_is_one_rounding_of_u_times_scale_plus_low(low: float, high: float) -> None:
    bits, _ = philox_bits(make_state(5, 6), (257,))
    got = uniform_from_bits(bits, "float32", low, high).numpy()
    low32, high32 = np.float32(low), np.float32(high)
    scale32 = np.float32(high32 - low32)
    for b, g in zip(bits.reshape(-1), got, strict=True):
        exact = Fraction(int(b) >> 8, 2**24) * Fraction(float(scale32)) + Fraction(float(low32))
        assert np.array(g).view(np.uint32) == np.array(round_to_f32(exact)).view(np.uint32)


def test_uniform_rounds_once_where_float64_would_round_twice() -> None:
    # u = 0x555557 · 2^-24 and scale 1.5: u·scale sits exactly halfway between two
    # float32s, so the tiny low = 2^-100 decides the rounding (up). Summing in float64
    # first loses the 2^-100 and rounds the tie to even (down).
    bits = np.array([0x555557 << 8], dtype=np.uint32)
    got = uniform_from_bits(bits, "float32", 2.0**-100, 1.5).numpy()
    assert int(got.view(np.uint32)[0]) == 0x3F000003
    naive = np.float32(np.float64(0x555557 * 2.0**-24) * 1.5 + 2.0**-100)
    assert int(np.array(naive).view(np.uint32)) == 0x3F000002


@pytest.mark.parametrize("dtype,digits", [(torch.float16, 11), (torch.bfloat16, 8)])
def test_uniform_half_types_take_their_own_digits(dtype: torch.dtype, digits: int) -> None:
    # As torch's uniform_real: u = (bits >> (32 - d))·2^-d with d the type's digits, then
    # one float32 rounding of u·scale + low, then the type's rounding to nearest even.
    bits, _ = philox_bits(make_state(11, 12), (3, 33))
    half = uniform_from_bits(bits, dtype, -1.0, 2.0)
    assert half.dtype == dtype and half.shape == (3, 33)
    exact = [round_to_f32(Fraction(int(b) >> (32 - digits), 2**digits) * 3 - 1)
             for b in bits.reshape(-1)]
    want = torch.from_numpy(np.array(exact, dtype=np.float32)).to(dtype).reshape(3, 33)
    assert torch.equal(half.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("dtype,digits", [(torch.float16, 11), (torch.bfloat16, 8)])
def test_uniform_half_types_stay_below_one(dtype: torch.dtype, digits: int) -> None:
    # The largest words: 24 bits of u round up to 1.0 in float16 and bfloat16; the type's
    # own digits give 1 - 2^-d, as torch.rand's largest value.
    bits = np.array([0, 0xFFFFFFFF, 0xFFFFFF00, 0xFFE00000, 0x80000000], dtype=np.uint32)
    u = uniform_from_bits(bits, dtype)
    assert u.tolist() == [0.0, 1 - 2.0**-digits, 1 - 2.0**-digits, 1 - 2.0**-digits, 0.5]


def test_uniform_accepts_torch_bits_and_rejects_int_dtypes() -> None:
    bits, _ = philox_bits(make_state(1, 2), (8,))
    from_torch = uniform_from_bits(torch.from_numpy(bits.view(np.int32).copy()), "float32")
    assert torch.equal(from_torch, uniform_from_bits(bits, "float32"))
    with pytest.raises(UnsupportedError, match="dtype"):
        uniform_from_bits(bits, "int32")
