"""The lane micro-kernels of planned copies (`codegen/c/lib/copy_lanes.h`): deinterleave,
interleave and compress of K = 2, 3 and 4 lanes at every element size, against torch --
the model patterns they serve (pixel shuffle and unshuffle, space-to-depth, YOLOv5 Focus,
complex-like pairs, NHWC <-> NCHW with C = 3, transposes of 2, 3 and 4 rows, strided
slices) traced from torch code, and the kernels alone at every extent around a vector,
from and to addresses one element off, streamed and not, on 1 and 3 threads. The planner
must pick them for those patterns: a stride-2 slice or a transpose of a dim of 2 is one
pass, not a tiled transpose or a gather."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.c.copy import generate_c_copy
from stridec.compiler.codegen.spec import CopySpec
from stridec.compiler.copy_plan import PERMUTE_BYTES, candidate_plans, plan_copy
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.compiler.test_codegen_c_copy import _team, run_c
from tests.compiler.test_codegen_copy import contiguous_strides
from tests.compiler.test_copy_plan import run_plan

DTYPE_NAMES = ("bool", "int8", "float16", "bfloat16", "float32", "int64", "float64")


def _random(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen) * 10).to(dtype)
    return torch.randint(-100, 100, shape, generator=gen).to(dtype)


def _focus(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                      x[..., 1::2, 1::2]], 1)


def _space_to_depth(x: torch.Tensor, bs: int) -> torch.Tensor:
    n, c, h, w = x.shape
    x = x.view(n, c, h // bs, bs, w // bs, bs).permute(0, 3, 5, 1, 2, 4).contiguous()
    return x.view(n, c * bs * bs, h // bs, w // bs)


def _strided_conv_stem(x: torch.Tensor) -> torch.Tensor:
    # einops' rearrange(x, "b c (h p1) (w p2) -> b (p1 p2 c) h w", p1=2, p2=2)
    b, c, h, w = x.shape
    return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 3, 5, 1, 2, 4).reshape(
        b, 4 * c, h // 2, w // 2)


# (name, function, input shape, the planned kernels' strategy)
PATTERNS = [
    ("pixel_unshuffle2", lambda x: F.pixel_unshuffle(x, 2), (2, 5, 14, 38), "deinterleave"),
    ("pixel_unshuffle3", lambda x: F.pixel_unshuffle(x, 3), (1, 3, 15, 99), "deinterleave"),
    ("pixel_unshuffle4", lambda x: F.pixel_unshuffle(x, 4), (1, 3, 12, 136), "deinterleave"),
    ("pixel_shuffle2", lambda x: F.pixel_shuffle(x, 2), (2, 12, 7, 67), "interleave"),
    ("pixel_shuffle3", lambda x: F.pixel_shuffle(x, 3), (1, 18, 5, 41), "interleave"),
    ("pixel_shuffle4", lambda x: F.pixel_shuffle(x, 4), (1, 32, 3, 35), "interleave"),
    ("space_to_depth4", lambda x: _space_to_depth(x, 4), (2, 3, 8, 132), "deinterleave"),
    ("strided_conv_stem", _strided_conv_stem, (2, 3, 6, 130), "deinterleave"),
    ("focus", _focus, (2, 3, 10, 134), "deinterleave"),  # one copy: codegen/merge.py
    ("pairs_split", lambda x: x.view(-1, 2).t().contiguous(), (3, 77, 2), "deinterleave"),
    ("pairs_join", lambda x: x.t().contiguous(), (2, 301), "interleave"),
    ("real_part", lambda x: x[..., 0].contiguous(), (5, 67, 2), "compress"),
    ("transpose3", lambda x: x.t().contiguous(), (257, 3), "deinterleave"),
    ("transpose4", lambda x: x.t().contiguous(), (4, 263), "interleave"),
    ("nhwc3_to_nchw", lambda x: x.permute(0, 3, 1, 2).contiguous(), (2, 9, 71, 3),
     "deinterleave"),
    ("nchw_to_nhwc3", lambda x: x.permute(0, 2, 3, 1).contiguous(), (2, 3, 9, 71),
     "interleave"),
    ("slice2", lambda x: x[:, 1::2].contiguous(), (7, 301), "compress"),
    ("slice3", lambda x: x[:, ::3].contiguous(), (7, 301), "compress"),
]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize(("name", "fn", "shape", "strategy"), PATTERNS,
                         ids=[p[0] for p in PATTERNS])
def test_model_patterns_are_lane_kernels_equal_to_torch(name, fn, shape, strategy, dtype):
    x = _random(shape, getattr(torch, dtype))
    compiled = stridec.compile(stridec.trace(fn, x), backend="cpu")
    (kernel,) = compiled.plan_for(x).kernels
    assert kernel.strategy == strategy
    assert all(call[0] == cplan.plan_symbol(x.element_size()) for call in kernel.calls)
    got, want = compiled(x), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got, want)


def _lanes_spec(kind: str, n: int, k: int, dtype, src_offset: int, dst_offset: int,
                rows: int = 3) -> CopySpec:
    """`rows` copies of n pixels of k lanes: deinterleaved ((n, k) -> (k, n)), interleaved
    ((k, n) -> (n, k)) or compressed (every k-th of n*k)."""
    if kind == "deinterleave":
        sizes, src = (rows, k, n), (n * k + 5, 1, k)
    elif kind == "interleave":
        sizes, src = (rows, n, k), (n * k + 5, 1, n + 3)
    else:
        sizes, src = (rows, n), (n * k + 5, k)
    return CopySpec(sizes, src, src_offset, contiguous_strides(sizes), dst_offset, dtype, dtype)


# Extents around the vectors of every element size (16, 32 and 64 bytes).
EXTENTS = (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 200)


@pytest.mark.parametrize("kind", ["deinterleave", "interleave", "compress"])
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["int8", "int16", "float32", "float64"])
def test_every_extent_and_an_element_off(kind, k, dtype):
    for n in EXTENTS:
        for src_offset, dst_offset in ((0, 0), (1, 3)):
            spec = _lanes_spec(kind, n, k, DTYPES[dtype], src_offset, dst_offset)
            # n <= 4 pixels of k lanes are also k pixels of n lanes (the other kernel)
            plans = [p for p in candidate_plans(spec, limit=100)
                     if p.kernel == kind or (n <= 4 and p.kernel in cplan.LANE_KERNELS)]
            assert plans or n == 1  # one pixel of k lanes is a row of k
            for plan in plans:
                run_plan(plan, spec, seed=n)
            if n >= 8:  # a short enough run may go another way; a long one may not
                plan = plan_copy(spec)
                if kind == "deinterleave" and k * n * spec.src_dtype.itemsize <= PERMUTE_BYTES:
                    # a row of k x n is a matrix contiguous on both sides: permuted whole
                    assert plan.kernel == "permute", (n, plan.describe())
                else:
                    assert (plan.kernel, plan.lanes) == (kind, k), (n, plan.describe())
                run_c(spec, seed=n)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", ["uint8", "bfloat16", "float32", "int64"])
def test_streamed_on_threads(threads, dtype):
    previous = cpu.set_stream_threshold(0)
    try:
        with _team(True, threads):
            for kind in ("deinterleave", "interleave", "compress"):
                for k in (2, 3, 4):
                    # Runs longer than the 4 KiB a streamed run is built in, and cut by
                    # the threads' shares.
                    spec = _lanes_spec(kind, 5000 + k, k, DTYPES[dtype], 1, 1, rows=9)
                    kernel = run_c(spec)
                    assert kernel.strategy == kind
    finally:
        cpu.set_stream_threshold(previous)


def test_a_size_2_transpose_is_not_a_tiled_transpose():
    # (N, 2) -> (2, N) and x[:, ::2]: the strategies before the planner took a tiled
    # transpose over a dim of 2 and a gather.
    pairs = CopySpec((2, 1000), (1, 2), 0, (1000, 1), 0, DTYPES["float32"], DTYPES["float32"])
    assert generate_c_copy(pairs).strategy == "deinterleave"
    half = CopySpec((10, 500), (1000, 2), 0, (500, 1), 0, DTYPES["float16"], DTYPES["float16"])
    assert generate_c_copy(half).strategy == "compress"


def _short_spec(kind: str, n: int, k: int, dtype, q: int, offset: int) -> CopySpec:
    """q blocks of n pixels of k lanes whose lanes' runs follow on along q: a deinterleave
    whose source pixels are q runs apart (a gap between them), or an interleave into pixel
    runs q apart (a gap between them): the blocks the library joins in L1."""
    if kind == "deinterleave":
        sizes, src, dst = (k, q, n), (1, k * n + 5, k), (q * n, n, 1)
    else:
        sizes, src, dst = (q, n, k), (n, 1, q * n), (k * n + 3, k, 1)
    return CopySpec(sizes, src, offset, dst, offset, dtype, dtype)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("kind", ["deinterleave", "interleave"])
def test_short_blocks_joined_along_the_loop(kind, streamed, threads):
    # rand05_r6_bfloat16 of the random suite's seed 1440765935: a deinterleave of 3
    # pixels a block, 64155 blocks along loops whose lanes' runs follow on
    previous = cpu.set_stream_threshold(0 if streamed else -1)
    try:
        for dtype in ("int8", "int16", "float32", "float64"):
            for k in (2, 3, 4):
                for n, q in ((2, 600), (3, 300), (5, 9)):
                    spec = _short_spec(kind, n, k, DTYPES[dtype], q, n % 2)
                    plans = candidate_plans(spec, limit=100)
                    plan = next(p for p in plans if p.kernel == kind)
                    # blocks of n pixels along a loop that moves the lanes' runs n on
                    inner, along = plan.loops[-1], plan.loops[-2]
                    assert inner.extent == inner.step == n, plan.describe()
                    assert (along.dst_stride if kind == "deinterleave"
                            else along.src_stride) == n, plan.describe()
                    run_plan(plan, spec, threads, seed=n)
    finally:
        cpu.set_stream_threshold(previous)
