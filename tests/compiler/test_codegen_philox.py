"""Philox kernel generation: generated kernels against the numpy reference.

Every kernel runs on CPU tensors, the Triton kernel through Triton's interpreter and,
where a test takes `backend`, the C kernel (`codegen.c.philox`) of the cpu backend too
(tests marked `gpu` repeat a few on CUDA). The expected destination storage is built from
the reference bits (`stridec.runtime.backends.reference_philox`) with torch: padded to the
iteration space where masks apply, then scattered through `torch.as_strided` with the
destination strides into a storage that starts filled with a sentinel, so an element the
kernel must not touch has to come back unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from stridec.compiler.codegen.c.philox import generate_c_philox
from stridec.compiler.codegen.philox import (
    PhiloxKernel,
    PhiloxSpec,
    generate_philox,
)
from stridec.compiler.codegen.spec import MaskBound
from stridec.errors import CallError, ShapeError, UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DTYPES, DType
from stridec.runtime.backends.cpu import available as cpu_backend_available
from stridec.runtime.backends.interpret import interpreter_fma_is_exact
from stridec.runtime.backends.reference_philox import (
    make_state,
    philox_bits,
    state_words,
    uniform_from_bits,
)
from stridec.runtime.launch import launch_philox

u32, i32, f32 = DTYPES["uint32"], DTYPES["int32"], DTYPES["float32"]
f16, bf16 = DTYPES["float16"], DTYPES["bfloat16"]
KAT_FILE = Path(__file__).parent.parent / "data" / "random123_kat_philox4x32_10.txt"
SENTINEL_BITS = 0x5A5A5A5A
MASK128 = (1 << 128) - 1


# --------------------------------------------------------------------------- helpers


def contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def plain_spec(sizes: tuple[int, ...], dtype: DType = u32, **kw) -> PhiloxSpec:
    strides = contiguous_strides(sizes)
    return PhiloxSpec(sizes, strides, 0, strides, 0, math.prod(sizes), dtype, **kw)


def state_tensor(state: np.ndarray, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    t = torch.from_numpy(state.view(np.int32).copy())
    return t.view(torch.uint32) if dtype == torch.uint32 else t


def sentinel_storage(n: int, dtype: DType) -> torch.Tensor:
    if dtype.itemsize == 4:
        s = torch.full((n,), SENTINEL_BITS, dtype=torch.int32)
    else:
        s = torch.full((n,), SENTINEL_BITS & 0x7FFF, dtype=torch.int16)
    return s.view(dtype.torch)


# Where a test runs a kernel: the Triton kernel on the interpreter, the C kernel natively.
needs_cpu_backend = pytest.mark.skipif(
    not cpu_backend_available(), reason="the cpu backend needs a C compiler"
)
BACKENDS = ["interpret", pytest.param("cpu", marks=needs_cpu_backend)]


def generate(spec: PhiloxSpec, backend: str = "interpret", block: int | None = None) -> Any:
    """The kernel of `spec` for a CPU backend: the Triton kernel the interpreter runs, or
    the C kernel (no blocks: one call covers the output)."""
    if backend == "cpu":
        assert block is None
        return generate_c_philox(spec)
    return generate_philox(spec, "cpu", block=block)


def run(
    spec: PhiloxSpec, state: np.ndarray, storage: int, block: int | None = None,
    backend: str = "interpret",
) -> tuple[torch.Tensor, np.ndarray, PhiloxKernel]:
    """Launch the CPU kernel for `spec`; return the destination storage and new state."""
    kernel = generate(spec, backend, block)
    dst = sentinel_storage(storage, spec.dst_dtype)
    new_state = torch.full((6,), -1, dtype=torch.int32)
    launch_philox(kernel, state_tensor(state), dst, new_state)
    return dst, new_state.numpy().view(np.uint32), kernel


def values(bits: np.ndarray, spec: PhiloxSpec) -> torch.Tensor:
    """The reference values of the philox output (bits or uniforms) as a torch tensor."""
    if spec.distribution == "uniform":
        return uniform_from_bits(bits, spec.dst_dtype, spec.low, spec.high)
    t = torch.from_numpy(bits.astype(np.uint32).view(np.int32).copy())
    return t if spec.dst_dtype.name == "int32" else t.view(torch.uint32)


def scatter(storage: int, dtype: DType, sizes, strides, offset, data: torch.Tensor) -> torch.Tensor:
    """A sentinel storage with `data` written through `as_strided(sizes, strides, offset)`."""
    out = sentinel_storage(storage, dtype)
    view_dtype = torch.int32 if dtype.name == "uint32" else dtype.torch
    target = out.view(view_dtype)
    src = data.view(torch.int32) if data.dtype == torch.uint32 else data
    torch.as_strided(target, sizes, strides, offset).copy_(src)
    return out


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    assert a.dtype == b.dtype and a.shape == b.shape
    bits = {4: torch.int32, 2: torch.int16}[a.element_size()]
    return torch.equal(a.view(bits), b.view(bits))


def load_kat() -> list[tuple[int, tuple[int, int], list[int]]]:
    rows = []
    for line in KAT_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            v = [int(w, 16) for w in line.split()[2:]]
            counter = v[0] | v[1] << 32 | v[2] << 64 | v[3] << 96
            rows.append((counter, (v[4], v[5]), v[6:]))
    return rows


KEY = (0xA4093822, 0x299F31D0)
COUNTERS = [
    0,
    2**32 - 3,  # carry out of word 0 inside the output
    2**64 - 2,  # carry into word 2
    2**96 - 1,  # carry into word 3
    2**128 - 3,  # wrap-around to 0
]


# --------------------------------------------------------------------------- KAT


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_reproduces_every_kat_line(backend: str) -> None:
    kernel = generate(plain_spec((4,)), backend)
    for counter, key, expected in load_kat():
        dst = torch.zeros(4, dtype=torch.uint32)
        new_state = torch.zeros(6, dtype=torch.uint32)
        launch_philox(kernel, state_tensor(make_state(counter, key), torch.uint32), dst, new_state)
        assert dst.view(torch.int32).numpy().view(np.uint32).tolist() == expected
        assert state_words(new_state) == ((counter + 1) & MASK128, key)


# --------------------------------------------------------------------------- plain outputs


@pytest.mark.parametrize("counter", COUNTERS, ids=hex)
@pytest.mark.parametrize("sizes", [(37,), (), (0,), (3, 5), (2, 1, 3, 1, 2, 1, 1, 3)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_output_equals_reference(backend: str, counter: int, sizes: tuple[int, ...]) -> None:
    state = make_state(counter, KEY)
    spec = plain_spec(sizes)
    numel = math.prod(sizes)
    dst, new_state, kernel = run(spec, state, numel + 3, backend=backend)
    bits, ref_state = philox_bits(state, sizes)
    expected = scatter(numel + 3, u32, (numel,), (1,), 0, values(bits.reshape(-1), spec))
    assert same_bits(dst, expected)  # the 3 extra elements keep the sentinel
    np.testing.assert_array_equal(new_state, ref_state)
    assert kernel.kind == "philox"
    assert kernel.strategy == ("empty" if numel == 0 else "linear")


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_output_writes_only_the_state(backend: str) -> None:
    state = make_state(2**128 - 1, KEY)
    spec = dataclasses.replace(plain_spec((4, 0, 3)), numel=0)
    dst, new_state, kernel = run(spec, state, 5, backend=backend)
    assert kernel.grid == (1,) and kernel.strategy == "empty"
    assert same_bits(dst, sentinel_storage(5, u32))
    np.testing.assert_array_equal(new_state, state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank0_output_is_one_word_and_one_block(backend: str) -> None:
    dst, new_state, _ = run(plain_spec(()), make_state(0, 0), 1, backend=backend)
    assert dst.view(torch.int32).numpy().view(np.uint32).tolist() == [0x6627E8D5]
    assert state_words(new_state) == (1, (0, 0))


@pytest.mark.parametrize("dtype", [u32, i32])
@pytest.mark.parametrize("block", [None, 4, 16, 64, 1024])
def test_block_size_does_not_change_the_bits(dtype: DType, block: int | None) -> None:
    state = make_state(2**64 - 5, KEY)
    sizes = (7, 9)
    bits, ref_state = philox_bits(state, sizes)
    # Linear path (block = counters per program) and gather path (a transposed output).
    for spec in (plain_spec(sizes, dtype), transposed_spec(sizes, dtype)):
        dst, new_state, kernel = run(spec, state, 63, block=block)
        expected = scatter(63, dtype, sizes, spec_dst_strides(spec, sizes), 0, values(bits, spec))
        assert same_bits(dst, expected), (kernel.strategy, block)
        np.testing.assert_array_equal(new_state, ref_state)
        if block is not None:
            assert dict(kernel.constexprs)["BLOCK"] == block


def transposed_spec(sizes: tuple[int, int], dtype: DType = u32, **kw) -> PhiloxSpec:
    """Iterate the output in column-major order and store it column-major."""
    rows, cols = sizes
    # Space (cols, rows): coordinate (c, r) is logical (r, c), stored at c·rows + r.
    return PhiloxSpec((cols, rows), (1, cols), 0, (rows, 1), 0, rows * cols, dtype, **kw)


def spec_dst_strides(spec: PhiloxSpec, sizes: tuple[int, int]) -> tuple[int, int]:
    """The destination strides in logical (row, col) order for the two specs above."""
    return (sizes[1], 1) if spec.index_strides == contiguous_strides(sizes) else (1, sizes[0])


# --------------------------------------------------------------------------- layouts


# (sizes, dst_strides, dst_offset, storage) of outputs written through strides
STRIDED_LAYOUTS = [
    ((3, 5), (1, 3), 0, 15),  # column-major (transposed)
    ((3, 5), (8, 1), 2, 26),  # padded rows (pitch 8) at an offset
    ((2, 3, 4), (1, 8, 2), 0, 24),  # permuted, NHWC-like
    ((2, 3, 4), (24, 8, 1), 1, 49),  # padded middle dim
    ((6,), (3,), 1, 17),  # strided 1-D
]


@pytest.mark.parametrize("counter", [2**32 - 2, 2**128 - 1], ids=hex)
@pytest.mark.parametrize("sizes,dst_strides,dst_offset,storage", STRIDED_LAYOUTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_outputs_equal_scattered_reference(
    backend: str, counter: int, sizes, dst_strides, dst_offset: int, storage: int
) -> None:
    state = make_state(counter, KEY)
    spec = PhiloxSpec(
        sizes, contiguous_strides(sizes), 0, dst_strides, dst_offset, math.prod(sizes), u32
    )
    dst, new_state, kernel = run(spec, state, storage, backend=backend)
    bits, ref_state = philox_bits(state, sizes)
    expected = scatter(storage, u32, sizes, dst_strides, dst_offset, values(bits, spec))
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)
    assert kernel.strategy == "gather"
    assert kernel.dst_elements <= storage


@pytest.mark.parametrize("backend", BACKENDS)
def test_iteration_order_is_free_of_the_logical_order(backend: str) -> None:
    # The same column-major output, iterated row by row or column by column.
    state = make_state(2**96 - 2, KEY)
    sizes = (5, 6)
    by_rows = PhiloxSpec(sizes, (6, 1), 0, (1, 5), 0, 30, u32)
    by_cols = PhiloxSpec((6, 5), (1, 6), 0, (5, 1), 0, 30, u32)
    a, _, _ = run(by_rows, state, 30, backend=backend)
    b, _, _ = run(by_cols, state, 30, backend=backend)
    bits, _ = philox_bits(state, sizes)
    assert same_bits(a, b)
    assert same_bits(a, scatter(30, u32, sizes, (1, 5), 0, values(bits, by_rows)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_of_an_output_uses_its_logical_indices(backend: str) -> None:
    # bits[1:3, 2:5] of a (4, 6) output, written contiguously; new_state still advances
    # by the whole output's ⌈24/4⌉ = 6 blocks. Index of (1, 2): 1·6 + 2 = 8.
    state = make_state(2**32 - 1, KEY)
    spec = PhiloxSpec((2, 3), (6, 1), 8, (3, 1), 0, 24, u32)
    dst, new_state, _ = run(spec, state, 6, backend=backend)
    bits, ref_state = philox_bits(state, (4, 6))
    assert same_bits(dst, values(bits[1:3, 2:5].reshape(-1), spec))
    np.testing.assert_array_equal(new_state, ref_state)


NCHW4 = (2, 3, 3, 5)  # n, c, h, w


def packed_nchw4_spec(dtype: DType, fill) -> PhiloxSpec:
    """The logical (N, 3, H, W) output packed NCHW4: space (n, co, ci, h, w) over
    (N, 1, 4, H, W), logical index 3HW·n + 4HW·co + HW·ci + W·h + w, valid where
    4·co + ci < 3, stored row-major in (N, 1, H, W, 4): offset 4HW·n + 4HW·co + 4W·h + 4·w + ci."""
    n, c, h, w = NCHW4
    hw = h * w
    return PhiloxSpec(
        sizes=(n, 1, 4, h, w),
        index_strides=(3 * hw, 4 * hw, hw, w, 1),
        index_offset=0,
        dst_strides=(4 * hw, 4 * hw, 1, 4 * w, 4),
        dst_offset=0,
        numel=n * c * hw,
        dst_dtype=dtype,
        distribution="uniform" if dtype.is_floating else "bits",
        low=-1.0,
        high=3.0,
        masks=(MaskBound((0, 4, 1, 0, 0), 0, 3),),
        fill=fill,
    )


def packed_nchw4_expected(
    state: np.ndarray, spec: PhiloxSpec, fill
) -> tuple[torch.Tensor, np.ndarray]:
    """The packed storage of `packed_nchw4_spec` (the fourth channel all `fill`) and new state."""
    n, c, h, w = NCHW4
    bits, ref_state = philox_bits(state, (n, c, h, w))
    logical = values(bits, spec)
    padded = torch.cat([logical, torch.full((n, 1, h, w), fill).to(logical.dtype)], dim=1)
    return padded.reshape(n, 1, 4, h, w).permute(0, 1, 3, 4, 2).reshape(-1), ref_state


@pytest.mark.parametrize("dtype,fill", [(u32, 0xFFFFFFFE), (i32, -7), (f32, -0.5), (f16, 2.0)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_nchw4_packing_of_three_channels_fills_the_fourth(
    backend: str, dtype: DType, fill
) -> None:
    spec = packed_nchw4_spec(dtype, fill)
    state = make_state(2**64 - 7, KEY)
    dst, new_state, kernel = run(spec, state, math.prod(NCHW4) // 3 * 4, backend=backend)
    expected, ref_state = packed_nchw4_expected(state, spec, fill)
    assert same_bits(dst, expected)
    np.testing.assert_array_equal(new_state, ref_state)  # ⌈90/4⌉ = 23 blocks, not 30
    assert kernel.strategy == "gather"


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_out_lanes_may_index_outside_the_output(backend: str) -> None:
    # F.pad-like: a (6,) output written at [2, 8) of a (10,) space; the left padding
    # has logical indices -2, -1 and the right ones 6, 7: all masked, never computed on.
    state = make_state(5, KEY)
    spec = PhiloxSpec((10,), (1,), -2, (1,), 0, 6, i32, masks=(MaskBound((1,), 2, 8),), fill=9)
    dst, _, _ = run(spec, state, 10, backend=backend)
    bits, _ = philox_bits(state, (6,))
    expected = torch.cat([torch.full((2,), 9), values(bits, spec).long(), torch.full((2,), 9)])
    assert torch.equal(dst.long(), expected)


# --------------------------------------------------------------------------- uniforms


INEXACT_FMA = "this Triton's interpreter rounds tl.fma twice (Triton < 3.9): float32 "
INEXACT_FMA += "uniforms may differ in the last bit (the interpret backend warns)"


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-2.5, 3.25), (1e-3, 1e4)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_equals_reference_bit_for_bit(
    backend: str, dtype: DType, low: float, high: float
) -> None:
    if backend == "interpret" and dtype == f32 and not interpreter_fma_is_exact():
        pytest.skip(INEXACT_FMA)
    state = make_state(2**32 - 9, KEY)
    sizes = (5, 11)
    bits, ref_state = philox_bits(state, sizes)
    for spec in (
        plain_spec(sizes, dtype, distribution="uniform", low=low, high=high),
        transposed_spec(sizes, dtype, distribution="uniform", low=low, high=high),
    ):
        dst, new_state, _ = run(spec, state, 55, backend=backend)
        ref = uniform_from_bits(bits, dtype, low, high)
        assert ref.dtype == dtype.torch
        expected = scatter(55, dtype, sizes, spec_dst_strides(spec, sizes), 0, ref)
        assert same_bits(dst, expected)
        np.testing.assert_array_equal(new_state, ref_state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_half_types_take_their_digits(backend: str) -> None:
    # float16 / bfloat16 take the top 11 / 8 bits (torch's uniform_real), not float32's
    # value rounded: the reference's transform, bit for bit.
    state = make_state(123, KEY)
    spec32 = plain_spec((64,), f32, distribution="uniform", low=-4.0, high=4.0)
    bits, _ = philox_bits(state, (64,))
    for half in (f16, bf16):
        b, _, _ = run(dataclasses.replace(spec32, dst_dtype=half), state, 64, backend=backend)
        assert same_bits(b, uniform_from_bits(bits, half, -4.0, 4.0))


# --------------------------------------------------------------------------- chaining


@pytest.mark.parametrize("first,second", [(8, 13), (16, 1), (4, 0), (0, 6)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_calls_through_new_state_equal_one_call(backend: str, first: int, second: int) -> None:
    state = make_state(2**128 - 4, KEY)  # the combined call wraps the counter
    a, mid, _ = run(plain_spec((first,)), state, first, backend=backend)
    b, end, _ = run(plain_spec((second,)), mid, second, backend=backend)
    whole, whole_end, _ = run(plain_spec((first + second,)), state, first + second,
                              backend=backend)
    assert same_bits(torch.cat([a, b]), whole)
    np.testing.assert_array_equal(end, whole_end)
    ref_a, ref_mid = philox_bits(state, (first,))
    ref_b, ref_end = philox_bits(ref_mid, (second,))
    np.testing.assert_array_equal(mid, ref_mid)
    np.testing.assert_array_equal(end, ref_end)
    assert same_bits(whole, values(np.concatenate([ref_a, ref_b]), plain_spec((1,))))


@pytest.mark.parametrize("backend", BACKENDS)
def test_chained_kernels_on_device_state_without_host_round_trip(backend: str) -> None:
    # new_state of one launch is the state of the next, as tensors only.
    state = state_tensor(make_state(2**64 - 1, KEY))
    k = generate(plain_spec((6,)), backend)  # 6 words: 2 blocks per call
    outs = []
    for _ in range(3):
        dst = torch.empty(6, dtype=torch.uint32)
        new_state = torch.empty(6, dtype=torch.int32)
        launch_philox(k, state, dst, new_state)
        outs.append(dst)
        state = new_state
    bits, _ = philox_bits(make_state(2**64 - 1, KEY), (24,))
    expected = bits.reshape(3, 8)[:, :6].reshape(-1)  # each call skips 2 words of its last block
    assert same_bits(torch.cat(outs), values(expected, plain_spec((1,))))
    assert state_words(state) == (2**64 - 1 + 6, KEY)


# --------------------------------------------------------------------------- int64 indexing


def test_int64_indexing_for_a_slice_deep_into_a_huge_output() -> None:
    # The last 10 elements of an output of 2^36 + 10 elements: logical indices near 2^36
    # need int64, block indices ⌊i/4⌋ ≈ 2^34 carry into counter word 1 and beyond.
    numel = 2**36 + 10
    offset = 2**36  # a multiple of 4: element offset + j is word j % 4 of block 2^34 + j//4
    counter = 2**64 - 2**33
    state = make_state(counter, KEY)
    spec = PhiloxSpec((10,), (1,), offset, (1,), 0, numel, u32)
    dst, new_state, kernel = run(spec, state, 10)
    assert kernel.index_bits == 64
    assert "tl.program_id(0).to(tl.int64)" in kernel.source
    shifted = make_state(counter + offset // 4, KEY)
    bits, _ = philox_bits(shifted, (10,))
    assert same_bits(dst, values(bits, spec))
    assert state_words(new_state) == ((counter + -(-numel // 4)) & MASK128, KEY)


def test_int32_indexing_when_everything_fits() -> None:
    kernel = generate_philox(plain_spec((1000,)), "cuda")
    assert kernel.index_bits == 32
    assert "int64" not in kernel.source


# --------------------------------------------------------------------------- source


def test_source_is_deterministic_and_names_are_hashes() -> None:
    spec = transposed_spec((4, 6))
    a = generate_philox(spec, "cuda")
    b = generate_philox(dataclasses.replace(spec), "cuda")
    assert a == b and a.source == b.source and a.name == b.name
    assert a.name.startswith("philox_") and f"def {a.name}(" in a.source
    assert "import triton\n" in a.source and "import triton.language as tl" in a.source
    assert "@triton.jit" in a.source and "tl.umulhi" in a.source
    c = generate_philox(dataclasses.replace(spec, dst_offset=1), "cuda")
    assert c.name != a.name
    assert generate_philox(plain_spec((7,)), "cpu").grid == (1,)  # big CPU blocks


def test_uniform_source_uses_an_explicit_fma() -> None:
    spec = plain_spec((8,), f32, distribution="uniform", low=-1.0, high=1.0)
    assert "tl.fma(u, 2.0, -1.0)" in generate_philox(spec, "cuda").source


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "state",
    [
        torch.zeros(5, dtype=torch.int32),
        torch.zeros(7, dtype=torch.int32),
        torch.zeros(6, dtype=torch.float32),
        torch.zeros(6, dtype=torch.int64),
        torch.zeros(12, dtype=torch.int32)[::2],
        np.zeros(6, dtype=np.int32),
    ],
    ids=["len5", "len7", "f32", "i64", "strided", "numpy"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_state_is_a_call_error_naming_state(backend: str, state) -> None:
    kernel = generate(plain_spec((4,)), backend)
    with pytest.raises(CallError, match="state"):
        launch_philox(kernel, state, torch.zeros(4, dtype=torch.uint32),
                      torch.zeros(6, dtype=torch.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliasing_state_and_new_state_is_refused(backend: str) -> None:
    kernel = generate(plain_spec((4,)), backend)
    state = state_tensor(make_state(0, 0))
    with pytest.raises(CallError, match="overlap"):
        launch_philox(kernel, state, torch.zeros(4, dtype=torch.uint32), state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_destination_is_a_call_error_naming_dst(backend: str) -> None:
    kernel = generate(plain_spec((4,)), backend)
    state = state_tensor(make_state(0, 0))
    new_state = torch.zeros(6, dtype=torch.int32)
    for dst in (torch.zeros(3, dtype=torch.uint32), torch.zeros(4, dtype=torch.float32)):
        with pytest.raises(CallError, match="dst"):
            launch_philox(kernel, state, dst, new_state)


def test_bad_specs() -> None:
    with pytest.raises(UnsupportedError, match="rank"):
        generate_philox(plain_spec((1,) * (MAX_RANK + 1)))
    with pytest.raises(ShapeError, match="index_strides"):
        generate_philox(PhiloxSpec((2, 2), (2,), 0, (2, 1), 0, 4, u32))
    with pytest.raises(ShapeError, match="logical indices"):
        generate_philox(PhiloxSpec((4,), (1,), 1, (1,), 0, 4, u32))  # index 4 of 4
    with pytest.raises(UnsupportedError, match="bits"):
        generate_philox(plain_spec((4,), f32))
    with pytest.raises(UnsupportedError, match="uniform"):
        generate_philox(plain_spec((4,), i32, distribution="uniform"))
    with pytest.raises(UnsupportedError, match="block"):
        generate_philox(plain_spec((4,)), block=48)
    with pytest.raises(UnsupportedError, match="2\\^63"):
        generate_philox(PhiloxSpec((4,), (1,), 0, (1,), 0, 2**64, u32))
    with pytest.raises(UnsupportedError, match="target"):
        generate_philox(plain_spec((4,)), target="rocm")


# --------------------------------------------------------------------------- CUDA


def nchw4_spec(dtype: DType = bf16) -> PhiloxSpec:
    hw = 6
    return PhiloxSpec(
        (2, 1, 4, 2, 3), (3 * hw, 4 * hw, hw, 3, 1), 0, (4 * hw, 4 * hw, 1, 12, 4), 0,
        2 * 3 * hw, dtype, "uniform", -1.0, 3.0, (MaskBound((0, 4, 1, 0, 0), 0, 3),), float("nan"),
    )  # fmt: skip


@pytest.mark.parametrize(
    "spec",
    [
        plain_spec((1000,)),
        plain_spec((1000,), f32, distribution="uniform", low=-1.0, high=2.0),
        nchw4_spec(),
        PhiloxSpec((10,), (1,), 2**36, (1,), 0, 2**36 + 10, u32),
        plain_spec((0,)),
    ],
    ids=["linear-bits", "linear-f32", "gather-nchw4-bf16", "int64", "empty"],
)
def test_kernels_compile_for_cuda_without_a_device(spec: PhiloxSpec) -> None:
    # The interpreter does not type-check like the compiler (a name rebound with another
    # type inside `if`, say); compiling for sm_90 catches that on machines without a GPU.
    compiler = pytest.importorskip("triton.compiler")
    from triton.backends.compiler import GPUTarget

    from stridec.runtime.backends.triton import load_jit, signature

    kernel = generate_philox(spec, "cuda")
    dst = {"uint32": "*i32", "int32": "*i32", "float32": "*fp32", "float16": "*fp16"}
    jit = load_jit(kernel.source, kernel.name)
    pointers = ["*i32", dst.get(spec.dst_dtype.name, "*bf16"), "*i32"]
    types = signature(jit, pointers, kernel.args, dict(kernel.constexprs))
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs))
    # FP fusion on (Triton 3.9's default): the explicit fma must not depend on it.
    compiled = compiler.compile(
        source, target=GPUTarget("cuda", 90, 32), options={"enable_fp_fusion": True}
    )
    ptx = compiled.asm["ptx"]
    assert ("mul.hi.u32" in ptx) == (kernel.strategy != "empty")
    if spec.distribution == "uniform":
        assert "fma.rn.f32" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("counter", COUNTERS, ids=hex)
def test_cuda_kernels_equal_reference(counter: int) -> None:
    state = make_state(counter, KEY)
    sizes = (3, 1000)
    bits, ref_state = philox_bits(state, sizes)
    specs = [
        plain_spec(sizes),
        transposed_spec(sizes),
        plain_spec(sizes, f32, distribution="uniform", low=-2.5, high=3.25),
        transposed_spec(sizes, bf16, distribution="uniform", low=-2.5, high=3.25),
    ]
    for spec in specs:
        kernel = generate_philox(spec, "cuda")
        dst = sentinel_storage(3000, spec.dst_dtype).cuda()
        new_state = torch.empty(6, dtype=torch.int32, device="cuda")
        launch_philox(kernel, state_tensor(state).cuda(), dst, new_state)
        expected = scatter(
            3000, spec.dst_dtype, sizes, spec_dst_strides(spec, sizes), 0, values(bits, spec)
        )
        assert same_bits(dst.cpu(), expected), kernel.strategy
        np.testing.assert_array_equal(new_state.cpu().numpy().view(np.uint32), ref_state)


def test_interpret_uniforms_warn_when_the_interpreter_fma_rounds_twice(monkeypatch) -> None:
    """On a Triton whose interpreter computes tl.fma as multiply-then-add, loading a
    uniform kernel into the interpret backend says so; bits kernels never warn, and
    neither does code generation (it runs no kernel)."""
    import warnings

    import stridec.runtime.backends.interpret as interpret

    monkeypatch.setattr(interpret, "interpreter_fma_is_exact", lambda: False)
    uniform = plain_spec((4, 4), f32, distribution="uniform")
    bits = plain_spec((4, 4), DTYPES["uint32"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = generate_philox(uniform, "cpu")
        generate_philox(uniform, "cuda")
        interpret.interpreted(generate_philox(bits, "cpu").source,
                              generate_philox(bits, "cpu").name)
    with pytest.warns(RuntimeWarning, match="rounds tl.fma twice"):
        interpret.interpreted(kernel.source, kernel.name)


def test_fma_probe_agrees_with_numpy_double_rounding() -> None:
    """The probe's two answers differ: float64 gives the single rounding, float32 the double."""
    a, c = np.float32(1 + 2**-12), np.float32(-(1 + 2**-11))
    once = np.float32(np.float64(a) * np.float64(a) + np.float64(c))
    twice = np.float32(a * a) + c
    assert once == np.float32(2**-24) and twice == 0
    assert interpreter_fma_is_exact() in (True, False)
