"""Copy code generation: the canonicalizing rewrites and the generated Triton kernels.

Every kernel runs through Triton's interpreter on CPU tensors and is compared with torch
on the whole destination storage, which starts filled with a sentinel: an element the copy
must not touch has to come back unchanged.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stridec.compiler.codegen.copy import (
    CopyKernel,
    emit_copy_source,
    generate_copy,
    plan_copy,
)
from stridec.compiler.codegen.spec import (
    CopySpec,
    MaskBound,
    Tuning,
    canonicalize_copy,
    coalesce_copy_dims,
    drop_unit_dims,
    linear_span,
    order_for_writes,
    orient_for_writes,
    simplify_masks,
)
from stridec.errors import CallError, LayoutError, UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DTYPES, DType
from stridec.runtime.backends.interpret import interpreted
from stridec.runtime.launch import launch_copy

f16, bf16, f32, f64 = DTYPES["float16"], DTYPES["bfloat16"], DTYPES["float32"], DTYPES["float64"]
i8, u8, i32, i64 = DTYPES["int8"], DTYPES["uint8"], DTYPES["int32"], DTYPES["int64"]
b1 = DTYPES["bool"]


# --------------------------------------------------------------------------- helpers


def contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def order_strides(sizes: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a packed layout whose dims, outermost first, are `order` (NHWC: 0,2,3,1)."""
    strides = [0] * len(sizes)
    acc = 1
    for k in reversed(order):
        strides[k] = acc
        acc *= sizes[k]
    return tuple(strides)


def index_grid(sizes, strides, offset) -> torch.Tensor:
    """`offset + Σ i_k·strides_k` for every coordinate, as an int64 tensor of `sizes`."""
    idx = torch.full(tuple(sizes), offset, dtype=torch.int64)
    for k, (n, s) in enumerate(zip(sizes, strides, strict=True)):
        shape = [1] * len(sizes)
        shape[k] = n
        idx = idx + torch.arange(n, dtype=torch.int64).view(shape) * s
    return idx


def valid_grid(spec: CopySpec) -> torch.Tensor:
    valid = torch.ones(spec.sizes, dtype=torch.bool)
    for m in spec.masks:
        total = index_grid(spec.sizes, m.coeffs, 0)
        valid &= (total >= m.lo) & (total < m.hi)
    return valid


def fill_value(fill, dtype: DType) -> torch.Tensor:
    if isinstance(fill, bool):
        t = torch.tensor(fill)
    elif isinstance(fill, int):
        t = torch.tensor(fill, dtype=torch.int64)
    else:
        t = torch.tensor(fill, dtype=torch.float64)
    return t.to(dtype.torch)


def reference_copy(spec: CopySpec, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """torch's answer: the destination storage after the copy."""
    out = dst.clone()
    if spec.numel == 0:
        return out
    plain = not spec.masks and min(spec.src_strides + spec.dst_strides, default=0) >= 0
    if plain:
        view = torch.as_strided(out, spec.sizes, spec.dst_strides, spec.dst_offset)
        view.copy_(
            torch.as_strided(src, spec.sizes, spec.src_strides, spec.src_offset).to(
                spec.dst_dtype.torch
            )
        )
        return out
    # as_strided takes no negative strides and masked elements may lie outside the source:
    # gather and scatter through explicit index tensors instead.
    valid = valid_grid(spec)
    src_idx = index_grid(spec.sizes, spec.src_strides, spec.src_offset)
    dst_idx = index_grid(spec.sizes, spec.dst_strides, spec.dst_offset)
    if spec.fill is None:  # masked elements are not written
        if bool(valid.any()):
            out[dst_idx[valid]] = src[src_idx[valid]].to(spec.dst_dtype.torch)
        return out
    fill = fill_value(spec.fill, spec.dst_dtype).expand(spec.sizes)
    if bool(valid.any()):
        values = src[torch.where(valid, src_idx, src_idx[valid][0])].to(spec.dst_dtype.torch)
        values = torch.where(valid, values, fill)
    else:
        values = fill
    out[dst_idx.reshape(-1)] = values.reshape(-1)
    return out


def random_storage(dtype: DType, n: int, gen: torch.Generator) -> torch.Tensor:
    if dtype.name == "bool":
        return torch.randint(0, 2, (n,), generator=gen).bool()
    if dtype.is_floating:
        x = torch.randn(n, generator=gen, dtype=torch.float64) * 10
        x[::5] = 0.0  # zeros matter for bool casts
        return x.to(dtype.torch)
    low = 0 if not dtype.is_signed else -100
    return torch.randint(low, 100, (n,), generator=gen).to(dtype.torch)


def sentinel(dtype: DType, n: int) -> torch.Tensor:
    value = True if dtype.name == "bool" else (-77 if dtype.is_signed else 77)
    return torch.full((n,), value, dtype=dtype.torch)


def span(spec: CopySpec, strides, offset) -> int:
    """One past the largest address over the whole box (masked elements included)."""
    if spec.numel == 0:
        return 0
    low, high = linear_span(spec.sizes, strides)
    assert offset + low >= 0, "test spec addresses a negative index"
    return offset + high + 1


def run_and_check(
    spec: CopySpec,
    target: str = "cpu",
    *,
    src: torch.Tensor | None = None,
    dst_slack: int = 3,
    seed: int = 0,
    tuning: Tuning | None = None,
) -> CopyKernel:
    kernel = generate_copy(spec, target, tuning)
    gen = torch.Generator().manual_seed(seed)
    if src is None:
        src = random_storage(spec.src_dtype, span(spec, spec.src_strides, spec.src_offset), gen)
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + dst_slack)
    expected = reference_copy(spec, src, dst)
    launch_copy(kernel, src, dst)
    assert torch.equal(dst, expected), (kernel.source, dst, expected)
    return kernel


def permute_spec(sizes, perm, src_dtype=f32, dst_dtype=None, **kw) -> CopySpec:
    """`x.permute(perm).contiguous()` for a contiguous x of `sizes`."""
    src = contiguous_strides(sizes)
    out_sizes = tuple(sizes[p] for p in perm)
    return CopySpec(
        out_sizes,
        tuple(src[p] for p in perm),
        kw.pop("src_offset", 0),
        contiguous_strides(out_sizes),
        kw.pop("dst_offset", 0),
        src_dtype,
        dst_dtype or src_dtype,
        **kw,
    )


def address_map(spec: CopySpec) -> dict[int, int | None]:
    """Destination address -> source address (None: fill), enumerated element by element."""
    out: dict[int, int | None] = {}
    for i in itertools.product(*(range(n) for n in spec.sizes)):
        ok = all(
            m.lo <= sum(c * x for c, x in zip(m.coeffs, i, strict=True)) < m.hi for m in spec.masks
        )
        d = spec.dst_offset + sum(x * s for x, s in zip(i, spec.dst_strides, strict=True))
        s = spec.src_offset + sum(x * s for x, s in zip(i, spec.src_strides, strict=True))
        out[d] = s if ok else None
    return out


# --------------------------------------------------------------------------- spec rewrites


def test_coalesce_merges_only_when_it_holds_on_both_sides():
    # src (4, 8) contiguous: 8 == 8·1; dst strides (16, 2): 16 == 8·2 -> one dim of 32.
    spec = CopySpec((4, 8), (8, 1), 0, (16, 2), 0, f32, f32)
    merged = coalesce_copy_dims(spec)
    assert (merged.sizes, merged.src_strides, merged.dst_strides) == ((32,), (1,), (2,))
    # A transpose on one side only: dst 16 != 8·1 ... no merge.
    spec = CopySpec((4, 8), (8, 1), 0, (1, 4), 0, f32, f32)
    assert coalesce_copy_dims(spec) == spec


def test_coalesce_respects_mask_coeffs():
    # Both sides merge, but the mask coeffs (1, 0) do not satisfy 1 == 0·8.
    spec = CopySpec((4, 8), (8, 1), 0, (8, 1), 0, f32, f32, (MaskBound((1, 0), 0, 3),))
    assert coalesce_copy_dims(spec).sizes == (4, 8)
    # Coeffs (8, 1) do: 8 == 1·8, and the mask becomes j < 24 over the merged dim.
    spec = CopySpec((4, 8), (8, 1), 0, (8, 1), 0, f32, f32, (MaskBound((8, 1), 0, 24),))
    merged = coalesce_copy_dims(spec)
    assert merged.sizes == (32,) and merged.masks == (MaskBound((1,), 0, 24),)


def test_drop_unit_dims_drops_their_strides_and_coeffs():
    spec = CopySpec((1, 3, 1), (99, 1, 7), 2, (5, 1, 3), 0, f32, f32, (MaskBound((4, 1, 9), 0, 2),))
    out = drop_unit_dims(spec)
    assert out.sizes == (3,) and out.src_strides == (1,) and out.dst_strides == (1,)
    assert out.masks == (MaskBound((1,), 0, 2),)


def test_orient_flips_negative_destination_strides():
    # dst runs backwards: i -> 4 - i; offset moves to the last element: 10 + 4·(-2) = 2.
    spec = CopySpec((5,), (3,), 1, (-2,), 10, f32, f32, (MaskBound((1,), 0, 2),))
    out = orient_for_writes(spec)
    assert out.dst_strides == (2,) and out.dst_offset == 2
    assert out.src_strides == (-3,) and out.src_offset == 1 + 4 * 3
    assert out.masks == (MaskBound((-1,), -4, -2),)
    assert address_map(out) == address_map(spec)


def test_order_puts_smallest_destination_stride_innermost():
    spec = CopySpec((2, 3, 4), (12, 4, 1), 0, (1, 8, 2), 0, f32, f32)
    out = order_for_writes(spec)
    assert out.dst_strides == (8, 2, 1) and out.sizes == (3, 4, 2)
    assert address_map(out) == address_map(spec)


def test_simplify_masks():
    sizes = (3, 4)
    always = MaskBound((1, 1), 0, 100)
    never = MaskBound((1, 1), 50, 100)
    some = MaskBound((1, 0), 0, 2)
    spec = CopySpec(sizes, (4, 1), 0, (4, 1), 0, f32, f32, (always, some, some))
    assert simplify_masks(spec).masks == (some,)
    spec = CopySpec(sizes, (4, 1), 0, (4, 1), 0, f32, f32, (some, never))
    assert simplify_masks(spec).masks == (MaskBound((0, 0), 0, 0),)
    # masks of one direction are one: 1 <= i + j < 5, i + j < 4, -(i + j) >= -3
    rows = (MaskBound((1, 1), 1, 5), MaskBound((1, 1), -9, 4), MaskBound((-1, -1), -3, 9),
            some)
    spec = CopySpec(sizes, (4, 1), 0, (4, 1), 0, f32, f32, rows)
    assert simplify_masks(spec).masks == (MaskBound((1, 1), 1, 4), some)
    apart = (MaskBound((1, 0), 0, 1), MaskBound((1, 0), 2, 3))  # i < 1 and i >= 2: none
    spec = CopySpec(sizes, (4, 1), 0, (4, 1), 0, f32, f32, apart)
    assert simplify_masks(spec).masks == (MaskBound((0, 0), 0, 0),)


def test_canonical_nchw_to_nhwc_is_a_transpose_of_two_dims_over_n():
    n, c, h, w = 2, 3, 4, 5
    spec = CopySpec(
        (n, c, h, w),
        contiguous_strides((n, c, h, w)),
        0,
        order_strides((n, c, h, w), (0, 2, 3, 1)),
        0,
        f32,
        f32,
    )
    canon = canonicalize_copy(spec)
    # (H, W) merge on both sides: src 5 == 5·1, dst 15 == 5·3.
    assert canon.sizes == (n, h * w, c)
    assert canon.src_strides == (c * h * w, 1, h * w)
    assert canon.dst_strides == (h * w * c, c, 1)


@st.composite
def small_specs(draw, max_rank: int = 4, max_size: int = 4):
    rank = draw(st.integers(0, max_rank))
    sizes = tuple(draw(st.integers(1, max_size)) for _ in range(rank))
    strides = st.integers(-6, 6)
    src = tuple(draw(strides) for _ in range(rank))
    dst = tuple(draw(strides) for _ in range(rank))
    masks = tuple(
        MaskBound(
            tuple(draw(st.integers(-2, 2)) for _ in range(rank)),
            draw(st.integers(-4, 4)),
            draw(st.integers(-4, 8)),
        )
        for _ in range(draw(st.integers(0, 2)))
    )
    return CopySpec(sizes, src, 100, dst, 100, f32, f32, masks)


@settings(max_examples=150, deadline=None)
@given(small_specs())
def test_canonicalize_keeps_the_address_map(spec):
    # Only meaningful when each destination address is written once.
    if len(address_map(spec)) != spec.numel:
        return
    canon = canonicalize_copy(spec)
    assert address_map(canon) == address_map(spec)
    assert all(s >= 0 for s in canon.dst_strides)
    assert all(n > 1 for n in canon.sizes)


def test_spec_validation():
    with pytest.raises(UnsupportedError, match="rank"):
        over = (1,) * (MAX_RANK + 1)
        CopySpec(over, over, 0, over, 0, f32, f32)
    with pytest.raises(LayoutError, match="src_strides"):
        CopySpec((2, 3), (1,), 0, (3, 1), 0, f32, f32)
    with pytest.raises(LayoutError, match="sizes"):
        CopySpec((-1,), (1,), 0, (1,), 0, f32, f32)
    with pytest.raises(LayoutError, match="mask"):
        CopySpec((2,), (1,), 0, (1,), 0, f32, f32, (MaskBound((1, 1), 0, 1),))
    # Lists, numpy-free ints, names of dtypes and foreign mask objects are accepted.

    @dataclasses.dataclass
    class ForeignMask:
        coeffs: tuple
        lo: int
        hi: int

    spec = CopySpec([2], [1], 0, [1], 0, "float32", torch.float16, (ForeignMask((1,), 0, 1),))
    assert spec == CopySpec((2,), (1,), 0, (1,), 0, f32, f16, (MaskBound((1,), 0, 1),))
    with pytest.raises(UnsupportedError):
        generate_copy(spec, "tpu")


# --------------------------------------------------------------------------- workloads


def test_contiguous_copy_is_one_flat_offset():
    spec = CopySpec((37, 129), (129, 1), 0, (129, 1), 0, f32, f32)
    kernel = run_and_check(spec)
    assert kernel.strategy == "linear"
    assert "//" not in kernel.source and "%" not in kernel.source
    run_and_check(spec, "cuda")


@pytest.mark.parametrize("dtype", [f32, f16, i8])
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_2d_transpose(dtype, target):
    kernel = run_and_check(permute_spec((70, 45), (1, 0), dtype), target)
    assert kernel.strategy == "tiled_transpose"


def test_transpose_tiles_follow_itemsize():
    big = (4096, 4096)
    assert plan_copy(permute_spec(big, (1, 0), f32)).blocks == (64, 64)
    assert plan_copy(permute_spec(big, (1, 0), f16)).blocks == (64, 128)
    assert plan_copy(permute_spec(big, (1, 0), i8)).blocks == (128, 128)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_nchw_to_nhwc(target):
    kernel = run_and_check(permute_spec((2, 5, 6, 7), (0, 2, 3, 1), f16), target)
    assert kernel.strategy == "tiled_transpose"


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_nhwc_to_nchw_with_three_channels(target):
    n, h, w, c = 2, 9, 10, 3
    kernel = run_and_check(permute_spec((n, h, w, c), (0, 3, 1, 2), f32), target)
    assert kernel.strategy == "tiled_transpose"


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_permute_0213_is_linear_over_rows(target):
    kernel = run_and_check(permute_spec((2, 6, 5, 16), (0, 2, 1, 3), bf16), target)
    assert kernel.strategy == "linear"
    assert set(kernel.constexprs) == {"BLOCK_R", "BLOCK_C"}


def test_flip_negative_strides():
    # x.flip(0, 1) of a contiguous (6, 7): first element at 41, strides (-7, -1).
    spec = CopySpec((6, 7), (-7, -1), 41, (7, 1), 0, f32, f32)
    run_and_check(spec)
    # A flipped destination instead: written backwards, read forwards.
    spec = CopySpec((6, 7), (7, 1), 0, (1, -6), 36, f32, f16)
    run_and_check(spec)
    # A flip of one dim inside a transpose.
    run_and_check(CopySpec((5, 9), (1, -5), 40, (9, 1), 2, f32, f32))


def test_broadcast_source():
    # x of (5, 1) expanded to (5, 8): the source's unit dim is the outer one.
    kernel = run_and_check(CopySpec((5, 8), (1, 0), 0, (8, 1), 0, f32, f32))
    assert kernel.strategy == "tiled_transpose"
    # (1, 8) expanded to (5, 8): unit stride innermost on both sides.
    assert run_and_check(CopySpec((5, 8), (0, 1), 0, (8, 1), 0, i32, i32)).strategy == "linear"
    # A scalar expanded to (3, 4, 5): the dims merge into one of source stride 0.
    kernel = run_and_check(CopySpec((3, 4, 5), (0, 0, 0), 2, (20, 5, 1), 0, f16, f32))
    assert kernel.strategy == "gather"


def test_offsets_on_both_sides():
    spec = CopySpec((4, 6), (6, 1), 13, (1, 4), 7, f32, f32)
    run_and_check(spec)
    run_and_check(CopySpec((4, 6), (12, 2), 5, (6, 1), 11, i8, i8))


CASTS = [
    (f32, f16),
    (f16, f32),
    (f32, i32),
    (i32, f32),
    (f32, b1),
    (i8, f32),
    (f32, bf16),
    (bf16, f32),
    (bf16, f16),
    (bf16, i32),
    (bf16, b1),
    (i32, bf16),
    (f64, bf16),
    (b1, f32),
    (b1, bf16),
    (i64, i32),
    (u8, f16),
    (f16, i8),
    (i32, b1),
    (f64, f32),
]


@pytest.mark.parametrize(("src", "dst"), CASTS, ids=[f"{a.short}-{b.short}" for a, b in CASTS])
def test_casts_fused_in_a_transpose(src, dst):
    run_and_check(permute_spec((9, 13), (1, 0), src, dst))


def test_bfloat16_rounds_to_nearest_even():
    # 1 + 2^-8 lies halfway between two bf16 values: ties go to the even mantissa (1.0);
    # 1 + 3·2^-8 goes up to 1 + 2^-6; NaN and infinities survive.
    src = torch.tensor(
        [
            1 + 2**-8,
            1 + 3 * 2**-8,
            1 + 2**-9,
            float("inf"),
            -float("inf"),
            3.0e38,
            -1.00390625,
            0.0,
        ],
        dtype=torch.float32,
    )
    spec = CopySpec((8,), (1,), 0, (1,), 0, f32, bf16)
    run_and_check(spec, src=src)
    dst = torch.empty(1, dtype=torch.bfloat16)
    launch_copy(generate_copy(CopySpec((1,), (1,), 0, (1,), 0, f32, bf16)), 
        torch.tensor([float("nan")]), dst
    )
    assert torch.isnan(dst).all()


def test_float_to_int_truncates_like_torch():
    src = torch.tensor([2.7, -2.7, 0.5, -0.5, 99.99, -100.0], dtype=torch.float32)
    run_and_check(CopySpec((6,), (1,), 0, (1,), 0, f32, i32), src=src)
    run_and_check(CopySpec((3, 2), (1, 3), 0, (2, 1), 0, f32, i8), src=src)


def test_nchw_to_nchw4_pads_channels_with_fill():
    n, c, h, w = 2, 3, 5, 6
    # Split space (N, C/4, 4, H, W); source channel co·4 + ci, destination [N, 1, H, W, 4].
    spec = CopySpec(
        (n, 1, 4, h, w),
        (c * h * w, 4 * h * w, h * w, w, 1),
        0,
        (4 * h * w, 4 * h * w, 1, 4 * w, 4),
        0,
        f32,
        f32,
        (MaskBound((0, 4, 1, 0, 0), 0, 3),),
        0,
    )
    gen = torch.Generator().manual_seed(1)
    src = random_storage(f32, n * c * h * w, gen)  # exactly the source: channel 3 is not there
    kernel = run_and_check(spec, src=src)
    assert kernel.strategy == "tiled_transpose"
    # Padding is never read: the load is masked by the fill mask.
    (load,) = [line for line in kernel.source.splitlines() if "tl.load" in line]
    assert "valid" in load
    expected = torch.nn.functional.pad(src.view(n, c, h, w), (0, 0, 0, 0, 0, 1))
    dst = torch.empty(n * 4 * h * w)
    launch_copy(kernel, src, dst)
    assert torch.equal(dst, expected.permute(0, 2, 3, 1).reshape(-1))
    # Same packing on the GPU tiles, with a non-zero fill cast to the destination dtype.
    run_and_check(dataclasses.replace(spec, fill=-1.5, dst_dtype=f16), "cuda", src=src)


def test_fill_none_leaves_masked_elements_unwritten():
    # Copy only the even columns' first 3 rows of a transpose; the rest keeps the sentinel.
    spec = permute_spec(
        (6, 8),
        (1, 0),
        f32,
        f16,
        masks=(MaskBound((1, 0), 0, 5), MaskBound((0, 1), 0, 3)),
        fill=None,
    )
    kernel = run_and_check(spec)
    assert "tl.where(valid" not in kernel.source  # masked lanes are not stored at all
    # All masked and nothing written: nothing is launched.
    spec = dataclasses.replace(spec, masks=(MaskBound((0, 0), 1, 1),))
    kernel = run_and_check(spec, src=torch.empty(0))
    assert kernel.grid == (0,) and "pass" in kernel.source


def test_uint32_words_may_arrive_as_int32():
    u32 = DTYPES["uint32"]
    words = torch.tensor([0, 1, 2**31 - 1, -(2**31), -1, 12345], dtype=torch.int32)
    kernel = generate_copy(CopySpec((2, 3), (1, 2), 0, (3, 1), 0, u32, f64))
    out = torch.zeros(6, dtype=torch.float64)
    launch_copy(kernel, words, out)
    unsigned = (words.to(torch.int64) & 0xFFFFFFFF).to(torch.float64)
    assert torch.equal(out, unsigned.view(3, 2).t().reshape(-1))
    # As real uint32 storages too (torch has no index_put for them: checked by hand).
    src = torch.tensor([4000000000, 1, 2, 3, 4], dtype=torch.int64).to(torch.uint32)
    dst = torch.zeros(5, dtype=torch.uint32)
    spec = CopySpec((5,), (1,), 0, (1,), 0, u32, u32, (MaskBound((1,), 0, 3),), 2**32 - 1)
    launch_copy(generate_copy(spec), src, dst)
    assert dst.to(torch.int64).tolist() == [4000000000, 1, 2, 2**32 - 1, 2**32 - 1]
    back = torch.zeros(6, dtype=torch.int32)
    launch_copy(generate_copy(CopySpec((6,), (1,), 0, (1,), 0, f64, u32)), unsigned, back)
    assert torch.equal(back, words)


def test_mask_that_never_holds_only_fills():
    spec = CopySpec((4, 5), (5, 1), 0, (5, 1), 0, f32, i32, (MaskBound((1, 1), 10, 20),), 7)
    kernel = run_and_check(spec, src=torch.empty(0))
    assert "tl.load" not in kernel.source


def test_rank_0_single_element():
    spec = CopySpec((), (), 3, (), 2, f32, f16)
    kernel = run_and_check(spec)
    assert kernel.numel == 1 and kernel.grid == (1,)


def test_size_0_launches_nothing():
    spec = CopySpec((3, 0, 4), (0, 4, 1), 0, (0, 4, 1), 0, f32, f32)
    kernel = generate_copy(spec)
    assert kernel.numel == 0 and kernel.grid == (0,)
    launch_copy(kernel, torch.empty(0), torch.empty(0))  # nothing to check, nothing raised


def test_rank_8():
    sizes = (2, 1, 3, 2, 1, 2, 3, 2)
    perm = (7, 2, 0, 5, 1, 3, 6, 4)
    run_and_check(permute_spec(sizes, perm, f32))
    # No two dims merge here: every dim is reordered on the destination side.
    spec = CopySpec(sizes, contiguous_strides(sizes), 0, order_strides(sizes, perm), 0, f16, f32)
    run_and_check(spec)


def test_cpu_grid_stays_small():
    for spec in (
        permute_spec((64, 3, 32, 32), (0, 2, 3, 1)),
        permute_spec((64, 32, 32, 3), (0, 3, 1, 2)),
        permute_spec((8, 64, 12, 64), (0, 2, 1, 3)),
        CopySpec((300, 400), (800, 2), 0, (400, 1), 0, f32, f32),
        CopySpec((1 << 20,), (1,), 0, (1,), 0, f32, f32),
    ):
        assert generate_copy(spec, "cpu").grid[0] <= 16


# --------------------------------------------------------------------------- selection


def test_strategy_selection():
    def strategy(spec):
        return generate_copy(spec).strategy

    assert strategy(CopySpec((4, 8), (8, 1), 0, (8, 1), 0, f32, f32)) == "linear"
    assert strategy(CopySpec((4, 8), (16, 1), 0, (10, 1), 3, f32, f32)) == "linear"
    assert strategy(permute_spec((16, 32), (1, 0))) == "tiled_transpose"
    assert strategy(permute_spec((2, 3, 4, 5), (0, 2, 3, 1))) == "tiled_transpose"
    assert strategy(permute_spec((2, 3, 4, 5), (0, 2, 1, 3))) == "linear"
    # Strided on the source only (x[:, ::2]) and strided on the destination only.
    assert strategy(CopySpec((4, 8), (16, 2), 0, (8, 1), 0, f32, f32)) == "gather"
    assert strategy(CopySpec((4, 8), (8, 1), 0, (16, 2), 0, f32, f32)) == "gather"
    # Size-1 dims and flips do not hide a contiguous copy.
    assert strategy(CopySpec((1, 4, 1, 8), (5, 8, 3, 1), 0, (9, 8, 7, 1), 0, f32, f32)) == "linear"
    flipped_both = CopySpec((4, 8), (-8, -1), 31, (-8, -1), 31, f32, f32)
    assert strategy(flipped_both) == "linear"
    assert "//" not in generate_copy(flipped_both).source


# --------------------------------------------------------------------------- index width


def test_index_bits_switch_to_64_past_int32():
    # Three elements 2^30 apart: the last source address is 2·2^30 = 2^31 > 2^31 - 1.
    big = CopySpec((3,), (1 << 30,), 0, (1,), 0, i8, i8)
    kernel = generate_copy(big)
    assert kernel.index_bits == 64
    assert "tl.program_id(0).to(tl.int64)" in kernel.source
    # Two elements: the last is 2^31 - 2, which still fits.
    under = CopySpec((2,), ((1 << 31) - 2,), 0, (1,), 0, i8, i8)
    kernel = generate_copy(under)
    assert kernel.index_bits == 32
    assert "int64" not in kernel.source
    # A flat copy whose last (padded) flat index would pass 2^31 - 1.
    n = (1 << 31) - 1
    assert generate_copy(CopySpec((n,), (1,), 0, (1,), 0, i8, i8)).index_bits == 64
    n = (1 << 31) - (1 << 20)
    assert generate_copy(CopySpec((n,), (1,), 0, (1,), 0, i8, i8), "cpu").index_bits == 32
    # An offset alone can push the addresses over.
    assert generate_copy(CopySpec((4,), (1,), 1 << 31, (1,), 0, i8, i8)).index_bits == 64


def test_int64_kernel_runs():
    """The int64 variant of a kernel gives the same result (forced on a small tensor)."""
    spec = permute_spec(
        (3, 10, 7), (0, 2, 1), f32, f16, masks=(MaskBound((0, 1, 0), 0, 5),), fill=2.5
    )
    plan = dataclasses.replace(plan_copy(spec, "cuda"), index_bits=64)
    source, params = emit_copy_source(plan, "copy64")
    assert "tl.program_id(0).to(tl.int64)" in source
    gen = torch.Generator().manual_seed(3)
    src = random_storage(f32, 210, gen)
    dst = sentinel(f16, 213)
    expected = reference_copy(spec, src, dst)
    interpreted(source, "copy64")(plan.grid, src, dst, *params.values, **plan.constexprs)
    assert torch.equal(dst, expected)


# --------------------------------------------------------------------------- determinism


def test_same_spec_same_source():
    def make():
        return CopySpec(
            (2, 3, 4, 5),
            (60, 1, 15, 3),
            0,
            (60, 20, 5, 1),
            0,
            f32,
            f16,
            (MaskBound((0, 1, 0, 0), 0, 2),),
            1.0,
        )

    a, b = generate_copy(make()), generate_copy(make())
    assert a.source == b.source and a.name == b.name and a == b
    assert a.name in a.source and a.source.startswith("# stridec copy kernel")
    assert generate_copy(make(), "cpu").source == generate_copy(make(), "cpu").source
    other = dataclasses.replace(make(), fill=2.0)
    assert generate_copy(other).source != a.source


def test_launch_checks_its_storages():
    kernel = generate_copy(CopySpec((4, 4), (1, 4), 0, (4, 1), 0, f32, f32))
    with pytest.raises(CallError, match="dtype"):
        launch_copy(kernel, torch.zeros(16, dtype=torch.float16), torch.zeros(16))
    with pytest.raises(CallError, match="holds 15 elements"):
        launch_copy(kernel, torch.zeros(16), torch.zeros(15))
    with pytest.raises(CallError, match="contiguous"):
        launch_copy(kernel, torch.zeros(32)[::2], torch.zeros(16))


# --------------------------------------------------------------------------- random specs

DTYPE_PAIRS = [
    (f32, f32),
    (f16, f16),
    (i8, i8),
    (f32, f16),
    (f16, f32),
    (bf16, f32),
    (f32, bf16),
    (i8, f32),
    (f32, i32),
    (f32, b1),
    (b1, b1),
    (i64, i64),
]


@st.composite
def copy_specs(draw):
    rank = draw(st.integers(0, 5))
    empty = draw(st.integers(0, 9)) == 0
    sizes = tuple(draw(st.integers(0 if empty else 1, 5)) for _ in range(rank))
    # Destination: a packed layout in a random dim order, maybe padded, maybe flipped.
    order = draw(st.permutations(range(rank)))
    padded = tuple(n + draw(st.sampled_from((0, 0, 0, 1))) for n in sizes)
    dst_strides = list(order_strides(padded, tuple(order)))
    # Source: another permuted layout, or free strides (overlap and broadcast allowed).
    if draw(st.integers(0, 3)):
        src_strides = list(order_strides(sizes, tuple(draw(st.permutations(range(rank))))))
    else:
        src_strides = [draw(st.integers(-4, 7)) for _ in range(rank)]
    for strides in (dst_strides, src_strides):
        for k in range(rank):
            if draw(st.integers(0, 4)) == 0:
                strides[k] = -strides[k]

    def offset_for(strides):
        low = (
            sum(min(0, (n - 1) * s) for n, s in zip(sizes, strides, strict=True))
            if all(sizes)
            else 0
        )
        return -low + draw(st.integers(0, 3))

    def mask():
        coeffs = tuple(draw(st.sampled_from((0, 0, 1, 1, -1, 2))) for _ in range(rank))
        lo = draw(st.integers(-2, 2))
        return MaskBound(coeffs, lo, lo + draw(st.integers(1, 8)))

    masks = tuple(mask() for _ in range(draw(st.sampled_from((0, 0, 1, 2)))))
    src_dtype, dst_dtype = draw(st.sampled_from(DTYPE_PAIRS))
    fill = draw(st.sampled_from((0, 1, -2.5, True, None)))
    return CopySpec(
        sizes,
        tuple(src_strides),
        offset_for(src_strides),
        tuple(dst_strides),
        offset_for(dst_strides),
        src_dtype,
        dst_dtype,
        masks,
        fill,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_specs(), st.sampled_from(["cpu", "cuda"]))
def test_random_specs_match_torch(spec, target):
    kernel = run_and_check(spec, target)
    if target == "cpu":
        assert kernel.grid[0] <= 16
    assert kernel.strategy in ("linear", "tiled_transpose", "gather")
    assert kernel.index_bits == 32
    assert math.prod(spec.sizes) == kernel.numel


# --------------------------------------------------------------------------- tuning


@st.composite
def tunings(draw, spec: CopySpec) -> Tuning:
    """A strategy that can run `spec`, random power-of-two blocks of its arity, warps."""
    strategy = draw(st.sampled_from(("linear", "tiled_transpose", "gather")))
    try:
        arity = len(plan_copy(spec, "cuda", Tuning(strategy=strategy)).blocks)
    except UnsupportedError:
        strategy, arity = "gather", 1
    blocks = tuple(draw(st.sampled_from((1, 2, 4, 8, 16, 64))) for _ in range(arity))
    return Tuning(strategy, blocks, draw(st.sampled_from((1, 2, 4, 8))))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_tuning_copies_like_torch(data):
    """A sweep may pick any variant: every strategy that accepts a copy, with any tile,
    must copy exactly what the default does (the interpreter runs the CUDA plan)."""
    spec = data.draw(copy_specs())
    tuning = data.draw(tunings(spec))
    kernel = run_and_check(spec, "cuda", tuning=tuning)
    if spec.numel and kernel.grid != (0,) and len(kernel.constexprs) == len(tuning.blocks):
        assert tuple(kernel.constexprs.values()) == tuning.blocks
        assert kernel.num_warps == tuning.num_warps


def test_forced_strategies_that_cannot_run_say_why():
    flip = permute_spec((8, 6), (1, 0))  # a transpose: not linear
    with pytest.raises(UnsupportedError, match="strategy 'linear' cannot run this copy"):
        plan_copy(flip, "cuda", Tuning(strategy="linear"))
    row = CopySpec((4, 6), (6, 1), 0, (6, 1), 0, f32, f32)  # a flat copy: no transpose
    with pytest.raises(UnsupportedError, match="strategy 'tiled_transpose' cannot run"):
        plan_copy(row, "cuda", Tuning(strategy="tiled_transpose"))
    with pytest.raises(UnsupportedError, match="strategy must be one of"):
        plan_copy(row, "cuda", Tuning(strategy="diagonal"))
    with pytest.raises(UnsupportedError, match=r"1 power\(s\) of two \(BLOCK\); got \(3,\)"):
        plan_copy(row, "cuda", Tuning(strategy="gather", blocks=(3,)))
    with pytest.raises(UnsupportedError, match="num_warps must be 1, 2, 4"):
        plan_copy(row, "cuda", Tuning(num_warps=6))


def test_the_interpreter_target_ignores_tuning():
    spec = permute_spec((8, 6), (1, 0))
    assert plan_copy(spec, "cpu", Tuning("gather", (2,), 2)) == plan_copy(spec, "cpu")


def test_row_major_axes_index_as_one_flat_offset():
    """A gather whose destination is row-major over the iteration space writes at `offs`
    itself (consecutive lanes, consecutive addresses: Triton can vectorize the store),
    not at a sum of div/mod coordinates."""
    spec = permute_spec((2, 3, 5, 7), (0, 2, 3, 1), f16)  # NCHW -> NHWC with C = 3
    kernel = run_and_check(spec, "cuda", tuning=Tuning(strategy="gather"))
    assert "dst_idx = offs\n" in kernel.source
