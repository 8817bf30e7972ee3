"""The C Philox kernels (`stridec.compiler.codegen.c.philox`) against Random123's known-answer
vectors and the numpy reference (`stridec.runtime.backends.reference_philox`), bit for bit.

The compile unit is built once per module and flavour (native: `-O3 -march=native`;
portable: `-O2`, plain C; avx2: the AVX2 intrinsics path), then every case runs its
calls through ctypes on torch storages. Expected storages are built as in
`test_codegen_philox`: the reference values scattered through `torch.as_strided` into a
sentinel-filled storage, so an element the kernel must not touch has to come back
unchanged.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math

import numpy as np
import pytest
import torch

from stridec.compiler.codegen.c.philox import (
    PHILOX_C_SOURCE,
    advance_params,
    call_fits,
    generate_c_philox,
    philox_params,
    run_calls,
)
from stridec.compiler.codegen.philox import PhiloxSpec
from stridec.compiler.codegen.spec import MaskBound
from stridec.errors import ShapeError, UnsupportedError
from stridec.ir.dtypes import DTYPES, DType
from stridec.runtime.backends.reference_philox import make_state, philox_bits, uniform_from_bits
from tests.compiler.c_build import AVX2, NATIVE, PORTABLE, build_shared, host_has, needs_gcc
from tests.compiler.test_codegen_philox import (
    KEY,
    NCHW4,
    STRIDED_LAYOUTS,
    contiguous_strides,
    load_kat,
    packed_nchw4_expected,
    packed_nchw4_spec,
    plain_spec,
    same_bits,
    scatter,
    sentinel_storage,
    values,
)

pytestmark = needs_gcc

u32, i32, f32 = DTYPES["uint32"], DTYPES["int32"], DTYPES["float32"]
f16, bf16 = DTYPES["float16"], DTYPES["bfloat16"]
CARRY_COUNTERS = [
    0,
    2**32 - 3,  # carry out of word 0 inside the output
    2**64 - 2,  # carry into word 2
    2**96 - 1,  # carry into word 3
    2**128 - 3,  # wrap-around to 0
    0xFFFFFFFF_FFFFFFFF_FFFFFFFF_FFFFFFF0,
]


@pytest.fixture(
    scope="module", params=[NATIVE, PORTABLE, AVX2], ids=["native", "portable", "avx2"]
)
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    if request.param == AVX2 and not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    folder = tmp_path_factory.mktemp("c_philox")
    return build_shared(PHILOX_C_SOURCE, folder, "philox", request.param)


def state_tensor(state: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(state.view(np.int32).copy())


def run(
    lib: ctypes.CDLL, spec: PhiloxSpec, state: np.ndarray, storage: int, nthreads: int = 1
) -> tuple[torch.Tensor, np.ndarray]:
    """Run `spec`'s calls; return the destination storage and the new state."""
    kernel = generate_c_philox(spec)
    dst = sentinel_storage(storage, spec.dst_dtype)
    new_state = torch.full((6,), -1, dtype=torch.int32)
    run_calls(lib, kernel.calls, (state_tensor(state), dst, new_state), nthreads)
    return dst, new_state.numpy().view(np.uint32)


def test_every_kat_line(lib: ctypes.CDLL) -> None:
    for counter, key, expected in load_kat():
        dst, _ = run(lib, plain_spec((4,)), make_state(counter, key), 4)
        assert [int(w) for w in dst.view(torch.int32).numpy().view(np.uint32)] == expected


@pytest.mark.parametrize("counter", CARRY_COUNTERS, ids=hex)
@pytest.mark.parametrize("sizes", [(), (1,), (3,), (5,), (7, 9), (2, 3, 5), (1001,), (0,)])
def test_plain_output_equals_reference(lib: ctypes.CDLL, counter: int, sizes) -> None:
    state = make_state(counter, KEY)
    spec = plain_spec(sizes)
    numel = math.prod(sizes)
    dst, new_state = run(lib, spec, state, max(numel, 1))
    bits, ref_state = philox_bits(state, sizes)
    expected = scatter(max(numel, 1), u32, (numel,), (1,), 0, values(bits.reshape(-1), spec))
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)


# 2^21 + 13 elements: 524292 blocks, above the kernel's one-thread limit (2^19 blocks or
# positions), with an odd tail; the gather form writes the first 2^21 transposed.
LARGE_ROWS, LARGE_COLS = 32768, 64
LARGE_STATE = make_state(2**64 - 1000, KEY)


@functools.cache
def large_expected(linear: bool) -> tuple[PhiloxSpec, torch.Tensor, np.ndarray]:
    rows, cols = LARGE_ROWS, LARGE_COLS
    if linear:
        spec = plain_spec((rows * cols + 13,))
        bits, ref_state = philox_bits(LARGE_STATE, spec.sizes)
        return spec, values(bits, spec), ref_state
    # a (rows, cols) output stored column-major
    spec = PhiloxSpec((rows, cols), (cols, 1), 0, (1, rows), 0, rows * cols, u32)
    bits, ref_state = philox_bits(LARGE_STATE, (rows, cols))
    expected = scatter(rows * cols, u32, (rows, cols), (1, rows), 0, values(bits, spec))
    return spec, expected, ref_state


@pytest.mark.parametrize("nthreads", [1, 2, 3])
@pytest.mark.parametrize("linear", [True, False], ids=["linear", "gather"])
def test_threads_split_large_outputs_exactly(lib: ctypes.CDLL, nthreads: int, linear: bool):
    spec, expected, ref_state = large_expected(linear)
    dst, new_state = run(lib, spec, LARGE_STATE, spec.numel, nthreads)
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)


@pytest.mark.parametrize("counter", [2**32 - 2, 2**128 - 1], ids=hex)
@pytest.mark.parametrize(
    "sizes,dst_strides,dst_offset,storage",
    [*STRIDED_LAYOUTS, ((5, 7, 3), (1, 15, 5), 0, 105)],  # and odd sizes, fully permuted
)
def test_strided_outputs_equal_scattered_reference(
    lib: ctypes.CDLL, counter: int, sizes, dst_strides, dst_offset: int, storage: int
) -> None:
    state = make_state(counter, KEY)
    spec = PhiloxSpec(
        sizes, contiguous_strides(sizes), 0, dst_strides, dst_offset, math.prod(sizes), u32
    )
    dst, new_state = run(lib, spec, state, storage)
    bits, ref_state = philox_bits(state, sizes)
    expected = scatter(storage, u32, sizes, dst_strides, dst_offset, values(bits, spec))
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)
    assert generate_c_philox(spec).strategy == "gather"


def test_slice_of_an_output_uses_its_logical_indices(lib: ctypes.CDLL) -> None:
    # bits[1:3, 2:5] of a (4, 6) output, written contiguously; new_state still advances
    # by the whole output's ⌈24/4⌉ = 6 blocks. Index of (1, 2): 1·6 + 2 = 8.
    state = make_state(2**32 - 1, KEY)
    spec = PhiloxSpec((2, 3), (6, 1), 8, (3, 1), 0, 24, u32)
    dst, new_state = run(lib, spec, state, 6)
    bits, ref_state = philox_bits(state, (4, 6))
    assert same_bits(dst, values(bits[1:3, 2:5].reshape(-1), spec))
    np.testing.assert_array_equal(new_state, ref_state)


@pytest.mark.parametrize("dtype,fill", [(u32, 0xFFFFFFFE), (i32, -7), (f32, -0.5), (f16, 2.0),
                                        (bf16, -3.0)])
def test_nchw4_packing_of_three_channels_fills_the_fourth(lib: ctypes.CDLL, dtype: DType, fill):
    spec = packed_nchw4_spec(dtype, fill)
    state = make_state(2**64 - 7, KEY)
    dst, new_state = run(lib, spec, state, math.prod(NCHW4) // 3 * 4)
    expected, ref_state = packed_nchw4_expected(state, spec, fill)
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)


def test_masked_out_lanes_may_index_outside_the_output(lib: ctypes.CDLL) -> None:
    # F.pad-like: a (6,) output written at [2, 8) of a (10,) space, two masks.
    state = make_state(5, KEY)
    spec = PhiloxSpec((10,), (1,), -2, (1,), 0, 6, i32,
                      masks=(MaskBound((1,), 2, 100), MaskBound((1,), -5, 8)), fill=9)
    dst, _ = run(lib, spec, state, 10)
    bits, _ = philox_bits(state, (6,))
    expected = torch.cat([torch.full((2,), 9), values(bits, spec).long(), torch.full((2,), 9)])
    assert torch.equal(dst.long(), expected)


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-2.5, 3.25), (1e-3, 1e4), (-1e30, 1e30)])
@pytest.mark.parametrize("counter", [2**32 - 9, 2**128 - 5], ids=hex)
def test_uniform_equals_reference_bit_for_bit(
    lib: ctypes.CDLL, dtype: DType, low: float, high: float, counter: int
) -> None:
    state = make_state(counter, KEY)
    sizes = (37, 29)
    bits, ref_state = philox_bits(state, sizes)
    ref = values(bits, plain_spec(sizes, dtype, distribution="uniform", low=low, high=high))
    for dst_strides in ((29, 1), (1, 37)):
        spec = PhiloxSpec(sizes, (29, 1), 0, dst_strides, 0, 37 * 29, dtype, "uniform", low,
                          high)
        dst, new_state = run(lib, spec, state, 37 * 29)
        assert same_bits(dst, scatter(37 * 29, dtype, sizes, dst_strides, 0, ref))
        np.testing.assert_array_equal(new_state, ref_state)


def test_slice_deep_into_a_huge_output(lib: ctypes.CDLL) -> None:
    # The last 10 elements of an output of 2^36 + 10: block indices ⌊i/4⌋ ≈ 2^34 carry
    # into counter word 1 and beyond (element 2^36 + j is word j % 4 of block 2^34 + j//4).
    numel = 2**36 + 10
    counter = 2**64 - 2**33
    state = make_state(counter, KEY)
    spec = PhiloxSpec((10,), (1,), 2**36, (1,), 0, numel, u32)
    dst, new_state = run(lib, spec, state, 10)
    bits, _ = philox_bits(make_state(counter + 2**34, KEY), (10,))
    assert same_bits(dst, values(bits, spec))
    np.testing.assert_array_equal(new_state, make_state(counter + -(-numel // 4), KEY))


def test_uniform_half_types_take_their_digits(lib: ctypes.CDLL) -> None:
    # float16 / bfloat16 take the top 11 / 8 bits (torch's uniform_real), not float32's
    # value rounded: the reference's transform, bit for bit.
    state = make_state(123, KEY)
    spec32 = plain_spec((4096,), f32, distribution="uniform", low=-4.0, high=4.0)
    bits, _ = philox_bits(state, (4096,))
    for half in (f16, bf16):
        b, _ = run(lib, dataclasses.replace(spec32, dst_dtype=half), state, 4096)
        assert same_bits(b, uniform_from_bits(bits, half, -4.0, 4.0))


def test_state_views_and_in_place_new_state(lib: ctypes.CDLL) -> None:
    # The state's 6 words at stride 3 from element 2 of a storage, and new_state written
    # over the same words (an in-place `out=` state): the bits use the old counter.
    state = make_state(2**64 - 3, KEY)
    storage = torch.full((20,), 77, dtype=torch.int32)
    words = [2 + 3 * k for k in range(6)]
    storage[words] = state_tensor(state)
    spec = plain_spec((3, 7))
    kernel = generate_c_philox(spec, state_words=words, new_state_words=words)
    dst = sentinel_storage(21, u32)
    run_calls(lib, kernel.calls, (storage, dst, storage), 1)
    bits, ref_state = philox_bits(state, (3, 7))
    assert same_bits(dst, values(bits.reshape(-1), spec))
    np.testing.assert_array_equal(storage[words].numpy().view(np.uint32), ref_state)
    untouched = [k for k in range(20) if k not in words]
    assert torch.equal(storage[untouched], torch.full((14,), 77, dtype=torch.int32))


def test_two_calls_through_new_state_equal_one_call(lib: ctypes.CDLL) -> None:
    state = make_state(2**32 - 5, KEY)
    first, _ = run(lib, plain_spec((8,)), state, 8)
    _, mid = run(lib, plain_spec((8,)), state, 8)
    second, _ = run(lib, plain_spec((13,)), mid, 13)
    both, _ = run(lib, plain_spec((21,)), state, 21)
    assert same_bits(torch.cat([first, second]), both)


STRIDED_LAYOUT_SPEC = PhiloxSpec((2, 3, 4), (12, 4, 1), 0, (1, 8, 2), 0, 24, u32)


def test_params_layout() -> None:
    # (2, 3) at index offset 8 of a 24-element output, written with pitch 4 at offset 1:
    # header, sizes (2, 3), index strides (6, 1), dst strides (4, 1).
    spec = PhiloxSpec((2, 3), (6, 1), 8, (4, 1), 1, 24, u32)
    p = philox_params(spec, state_words=range(10, 16))
    assert p[:7] == (2, 24, 8, 1, 0, 0, 0)
    assert p[9:15] == tuple(range(10, 16))
    assert p[16:] == (2, 3, 6, 1, 4, 1)
    assert advance_params(24) == (0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6)
    assert advance_params(25)[-1] == 7  # ⌈25/4⌉


def test_call_fits_accepts_generated_calls_only() -> None:
    spec = packed_nchw4_spec(f16, 2.0)
    for s in (spec, plain_spec(()), plain_spec((5, 3)), STRIDED_LAYOUT_SPEC):
        for symbol, _, _, params in generate_c_philox(s).calls:
            assert call_fits(symbol, params)
            assert not call_fits(symbol, params[:-1])
            assert not call_fits("stridec_copy_linear", params)
    symbol, _, _, params = generate_c_philox(spec).calls[0]
    assert not call_fits(symbol, (9, *params[1:]))  # rank 9
    assert not call_fits(symbol, (*params[:9], -1, *params[10:]))  # a state word at -1


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ShapeError, match="state words"):
        generate_c_philox(plain_spec((4,)), state_words=(0, 1, 2))
    with pytest.raises(ShapeError, match="new_state words"):
        generate_c_philox(plain_spec((4,)), new_state_words=(0, 1, 2, 3, 4, -1))
    with pytest.raises(UnsupportedError, match="masks"):
        generate_c_philox(dataclasses.replace(
            plain_spec((4,)), masks=tuple(MaskBound((1,), 0, 4) for _ in range(17))))
    with pytest.raises(UnsupportedError, match="dst_dtype"):
        generate_c_philox(plain_spec((4,), f16))


def test_native_build_multiplies_with_vpmuludq() -> None:
    """Where the CPU has AVX2, the cached Philox library (built -march=native) does its
    32 x 32 -> 64-bit products with vpmuludq, not gcc's widened vpmullq."""
    import shutil
    import subprocess

    from stridec.runtime.backends import cpu

    objdump = shutil.which("objdump")
    if objdump is None or not host_has("avx2"):
        pytest.skip("needs objdump and an AVX2 CPU")
    path = cpu.load_unit(PHILOX_C_SOURCE)._name
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", path], capture_output=True,
                          text=True, check=True).stdout
    assert text.count("vpmuludq") >= 4  # two products a round, even and odd lanes
