"""Masked copies and fills on the planned library (`codegen/c/lib`, `copy_plan.py`): pads
of rank 1 to 6 (the source read at negative offsets that the masks keep it from reading),
padded packs (NCHW4/32/64, CHWN4), masks on a transposed or flipped source, and fills,
on every element size, on 1 and 3 threads, streamed and not, against torch (`F.pad`,
`torch.full`): every candidate plan the planner gives, and the kernel the C target builds.
"""

from __future__ import annotations

import ctypes
import dataclasses
import random

import pytest
import torch
import torch.nn.functional as F

from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.c.copy import generate_c_copy
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.compiler.copy_plan import PlanMask, candidate_plans
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.compiler.test_codegen_c_copy import _team, run_c
from tests.compiler.test_copy_plan import _library

pytestmark = pytest.mark.skipif(not cpu.available(), reason="needs a C compiler")

DTYPE_NAMES = ("int8", "bool", "float16", "int16", "float32", "float64", "int64")


def _values(shape, name: str, gen: torch.Generator) -> torch.Tensor:
    if name == "bool":
        return torch.randint(0, 2, shape, generator=gen).bool()
    x = torch.randint(-100, 100, shape, generator=gen)
    return x.to(DTYPES[name].torch)


def _fill(name: str, rng: random.Random):
    if name == "bool":
        return True
    return rng.choice([0, 3, -2] if name != "float16" else [0, 1.5, -2.0])


def pad_case(rng: random.Random, name: str, rank: int):
    """(x, torch's pad of x, the pad's spec on x's storage, the output's strides): the
    output contiguous or a permutation of it, x contiguous or a transposed or flipped view."""
    shape = tuple(rng.randint(1, 7) for _ in range(rank))
    pads = tuple((rng.randint(0, 3), rng.randint(0, 3)) for _ in range(rank))
    fill = _fill(name, rng)
    gen = torch.Generator().manual_seed(rng.randint(0, 1 << 30))
    base = _values(shape, name, gen)
    view, kind = base, rng.choice(["plain", "transposed", "flipped"])
    strides, offset = base.stride(), 0
    if kind == "transposed" and rank >= 2:
        base = base.transpose(0, rank - 1).contiguous()
        view = base.transpose(0, rank - 1)
        strides = view.stride()
    elif kind == "flipped":  # x.flip(-1) as a view: the last stride negated
        view = base.flip(rank - 1)
        strides = (*strides[:-1], -strides[-1])
        offset = (shape[-1] - 1) * base.stride()[-1]
    flat = [v for lo, hi in reversed(pads) for v in (lo, hi)]
    want = F.pad(view, flat, value=fill)
    out_shape = tuple(want.shape)
    perm = list(range(rank))
    if rng.random() < 0.5:
        rng.shuffle(perm)
    out_strides = torch.empty([out_shape[p] for p in perm]).permute(
        *[perm.index(k) for k in range(rank)]).stride()
    offset -= sum(lo * s for (lo, _), s in zip(pads, strides, strict=True))
    masks = tuple(MaskBound(tuple(int(j == k) for j in range(rank)), lo, lo + n)
                  for k, (n, (lo, hi)) in enumerate(zip(shape, pads, strict=True)) if lo or hi)
    dtype = DTYPES[name]
    spec = CopySpec(out_shape, strides, offset, out_strides, 0, dtype, dtype, masks, fill)
    return base, want, spec, out_strides


def pack_case(rng: random.Random, name: str, k: int, chwn: bool = False):
    """NCHW -> NCHW<k> (or CHWN<k>) with the channels padded to a multiple of k."""
    n, c, h, w = rng.randint(1, 3), rng.randint(1, 2 * k + 1), rng.randint(1, 9), rng.randint(1, 40)
    cb = -(-c // k)
    fill = _fill(name, rng)
    gen = torch.Generator().manual_seed(rng.randint(0, 1 << 30))
    x = _values((n, c, h, w), name, gen)
    padded = F.pad(x, (0, 0, 0, 0, 0, cb * k - c), value=fill).reshape(n, cb, k, h, w)
    order = (1, 3, 4, 0, 2) if chwn else (0, 1, 3, 4, 2)  # CHWN<k>: (C/k, H, W, N, k)
    want = padded.permute(*order).contiguous()
    out_strides = torch.empty(want.shape).stride()
    dst = [0] * 5
    for j, dim in enumerate(order):
        dst[dim] = out_strides[j]
    dtype = DTYPES[name]
    spec = CopySpec((n, cb, k, h, w), (c * h * w, k * h * w, h * w, w, 1), 0, tuple(dst), 0,
                    dtype, dtype, (MaskBound((0, k, 1, 0, 0), 0, c),), fill)
    return x, want, spec, out_strides


def _run_block(params, src: torch.Tensor, dst: torch.Tensor, size: int, threads: int) -> None:
    words = (ctypes.c_int64 * len(params))(*params)
    _library(size)(src.data_ptr(), dst.data_ptr(), words, threads)


def check(x: torch.Tensor, want: torch.Tensor, spec: CopySpec, out_strides, threads: int
          ) -> None:
    """Every candidate plan of `spec` (at most 3) run on x's storage into an output of
    `out_strides`, in bytes of 0x5A with an element of them either side, equals torch,
    and the bytes either side are left as they were."""
    size = spec.dst_dtype.itemsize
    plans = candidate_plans(spec, limit=3)
    assert plans, spec
    for plan in plans:
        plan = dataclasses.replace(plan, parallel=threads)
        raw = torch.full(((want.numel() + 2) * size,), 0x5A, dtype=torch.uint8)
        out = raw[size:-size].view(want.dtype)
        _run_block(cplan.plan_params(plan), x, out, size, threads)
        got = torch.as_strided(out, want.shape, out_strides)
        assert torch.equal(got, want), (plan.describe(), spec)
        assert bool((raw[:size] == 0x5A).all()) and bool((raw[-size:] == 0x5A).all())


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_random_pads_match_torch(name, stream, threads):
    rng = random.Random(f"{name}{stream}{threads}")
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        with _team(True, threads):
            for rank in range(1, 7):
                for _ in range(3):
                    x, want, spec, out_strides = pad_case(rng, name, rank)
                    check(x, want, spec, out_strides, threads)
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("name", ("int8", "float16", "float32", "float64"))
def test_packs_match_torch(name, stream):
    rng = random.Random(f"pack{name}{stream}")
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        with _team(True, 3):
            for k, chwn in ((4, False), (32, False), (64, False), (4, True)):
                for _ in range(2):
                    x, want, spec, out_strides = pack_case(rng, name, k, chwn)
                    check(x, want, spec, out_strides, 3)
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("shift", [0, 1, 3])
@pytest.mark.parametrize("name", ("int8", "float16", "float32", "float64"))
def test_fills_at_any_alignment(name, shift, stream):
    # Rows of a fill at a destination `shift` bytes off its elements: each byte of the
    # fill where its element puts it (the streamed lines' pattern follows the address).
    dtype = DTYPES[name]
    size = dtype.itemsize
    fill = -3.25 if dtype.is_floating else -3
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for sizes, strides in (((3000,), (1,)), ((37, 301), (310, 1)), ((40, 33), (70, 2))):
            spec = CopySpec(sizes, (0,) * len(sizes), 0, strides, 0, dtype, dtype,
                            (MaskBound((0,) * len(sizes), 1, 1),), fill)
            n = 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
            raw = torch.full((n * size + shift + 16,), 0x5A, dtype=torch.uint8)
            (plan,) = candidate_plans(spec, limit=1)
            assert plan.kernel == "fill"
            base = raw.data_ptr() + shift
            params = cplan.plan_params(plan)
            words = (ctypes.c_int64 * len(params))(*params)
            _library(size)(None, base, words, 3)
            want = torch.full((n,), 0x5A, dtype=torch.uint8).repeat_interleave(size)
            filled = torch.as_strided(torch.zeros(n, dtype=dtype.torch), sizes, strides)
            filled.fill_(fill)
            mask = torch.zeros(n, dtype=torch.bool)
            torch.as_strided(mask, sizes, strides).fill_(True)
            bytes_of = torch.zeros(n, dtype=dtype.torch)
            torch.as_strided(bytes_of, sizes, strides).copy_(filled)
            as_bytes = bytes_of.view(torch.uint8)
            keep = mask.repeat_interleave(size)
            want[keep] = as_bytes[keep]
            got = raw[shift:shift + n * size]
            assert torch.equal(got, want), (name, sizes, shift)
            assert bool((raw[:shift] == 0x5A).all())
            assert bool((raw[shift + n * size:] == 0x5A).all())
    finally:
        cpu.set_stream_threshold(previous)


def test_the_c_target_runs_pads_packs_and_fills_on_the_library():
    rng = random.Random(5)
    _, _, pad, _ = pad_case(rng, "float32", 3)
    _, _, pack, _ = pack_case(rng, "float32", 4)
    fill = CopySpec((50, 70), (0, 0), 0, (70, 1), 0, DTYPES["float32"], DTYPES["float32"],
                    (MaskBound((0, 0), 1, 1),), 2.5)
    for spec in (pad, pack, fill):
        kernel = generate_c_copy(spec)
        assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(4)], spec
    assert generate_c_copy(fill).strategy == "fill"


def test_masks_the_library_does_not_take_by_a_kernel():
    # A masked deinterleave: its transposes take it.
    f32 = DTYPES["float32"]
    unpack = CopySpec((2, 4, 9, 31), (1116, 1, 124, 4), 0, (837, 279, 31, 1), 0, f32, f32,
                      (MaskBound((0, 1, 0, 0), 0, 3),), None)
    assert candidate_plans(unpack)
    assert all(p.kernel != "deinterleave" for p in candidate_plans(unpack))


@pytest.mark.parametrize("fill", [0, None])
def test_more_masks_than_the_block_holds_run_on_the_library_in_pieces(fill):
    # 65 masks of one direction are one; of 65 directions, more than an argument block
    # holds: the copies of halves of the dims, each with the masks that do not hold on
    # all of it, every one on the library, together the copy.
    f32 = DTYPES["float32"]
    one = CopySpec((70,), (1,), 0, (1,), 0, f32, f32,
                   tuple(MaskBound((1,), k, 70 + k) for k in range(1, 66)), fill)
    assert len(one.masks) > 64 and candidate_plans(one)[0].masks == (PlanMask(65, 71, 0, (1,)),)
    assert [call[0] for call in generate_c_copy(one).calls] == [cplan.plan_symbol(4)]
    for many in (CopySpec((70, 2), (2, 1), 0, (2, 1), 0, f32, f32,
                          tuple(MaskBound((1, k), 0, 68 + k) for k in range(1, 66)), fill),
                 CopySpec((9, 8, 7), (1, 63, 9), 3, (56, 7, 1), 0, f32, f32,
                          tuple(MaskBound((1, k % 5 + 1, k), k // 4, 6 * k + 24 + k % 3)
                                for k in range(70)), fill)):
        assert len(many.masks) > 64 and candidate_plans(many) == []
        kernel = run_c(many)
        assert len(kernel.calls) > 1
        assert all(call[0] == cplan.plan_symbol(4) for call in kernel.calls)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("name", ("int8", "float32"))
def test_chwn4_packs_are_masked_by_rows(name, stream):
    # CHWN4 of 3 channels: the 4 lanes and the batch are one b side (128 bytes of int8 a
    # row for a batch of 32), each source row valid or masked whole: masked rows are read
    # from a row of the fill, or with no fill their columns are left as they were;
    # staged and prefetched as a large copy's blocks are, or not.
    n, c, h, w, k = 6, 3, 5, 37, 4
    gen = torch.Generator().manual_seed(7)
    x = _values((n, c, h, w), name, gen)
    dtype = DTYPES[name]
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for fill in (-2, None):
            out_shape = (1, h, w, n, k)
            spec = CopySpec((n, 1, k, h, w), (c * h * w, k * h * w, h * w, w, 1), 0,
                            (k, n * k * h * w, 1, w * n * k, n * k), 0, dtype, dtype,
                            (MaskBound((0, k, 1, 0, 0), 0, c),), fill)
            plans = [p for p in candidate_plans(spec, limit=8) if len(p.b_side) > 1]
            assert plans and plans[0] == candidate_plans(spec, limit=1)[0], spec
            want = torch.full(out_shape, 5, dtype=dtype.torch)
            want[0, :, :, :, :c] = x.permute(2, 3, 0, 1)
            if fill is not None:
                want[0, :, :, :, c:] = fill
            for plan in plans:
                for extra in ({}, {"stage": True, "prefetch": True}):
                    run = dataclasses.replace(plan, parallel=3, **extra)
                    out = torch.full(out_shape, 5, dtype=dtype.torch)
                    with _team(True, 3):
                        _run_block(cplan.plan_params(run), x, out, dtype.itemsize, 3)
                    assert torch.equal(out, want), (run.describe(), fill)
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_byte_packs_of_few_channels_match_torch(stream):
    # NCHW16/32/64 packs of 1 to 5 int8 channels into an output on a line: the valid
    # channels' bytes as words (byte_words, and byte_lines where the rows make whole
    # lines), 5 channels through the transpose; 38 pixels: two blocks of 16 and a rest.
    gen = torch.Generator().manual_seed(3)
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for k, c in ((16, 3), (16, 4), (32, 3), (64, 1), (64, 4), (32, 5), (128, 3)):
            n, h, w = 2, 2, 19
            x = _values((n, c, h, w), "int8", gen)
            padded = F.pad(x, (0, 0, 0, 0, 0, k - c), value=-7).reshape(n, 1, k, h, w)
            want = padded.permute(0, 1, 3, 4, 2).contiguous()
            spec = CopySpec((n, 1, k, h, w), (c * h * w, k * h * w, h * w, w, 1), 0,
                            (h * w * k, h * w * k, 1, w * k, k), 0, DTYPES["int8"],
                            DTYPES["int8"], (MaskBound((0, k, 1, 0, 0), 0, c),), -7)
            for plan in candidate_plans(spec, limit=3):
                out = torch.full(want.shape, 5, dtype=torch.int8)
                assert out.data_ptr() % 64 == 0
                _run_block(cplan.plan_params(dataclasses.replace(plan, parallel=1)), x, out,
                           1, 1)
                assert torch.equal(out, want), (plan.describe(), k, c)
    finally:
        cpu.set_stream_threshold(previous)
