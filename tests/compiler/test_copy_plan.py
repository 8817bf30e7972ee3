"""The copy planner (`stridec.compiler.copy_plan`) and the C library it drives
(`codegen/c/lib`, `codegen/c/plan.py`): the planner's decisions on the patterns it was
built for, the argument block's one description, and every micro-kernel of the library
against torch -- on every element size, at odd extents, from flipped, broadcast and
overlapping sources, on 1 and 3 threads, streamed and not, built natively and for the
instruction sets this machine may not be (plain C, AVX2: no masked loads there)."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import math
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler import copy_plan
from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.c.copy import call_fits, generate_c_copy
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.compiler.copy_plan import (
    KERNELS,
    CopyPlan,
    Loop,
    candidate_plans,
    plan_copy,
    plan_cost,
)
from stridec.compiler.host import LLC_PER_CPU, MIN_TLB_PAGES, Caches, read_caches
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from stridec.runtime.tensors import misaligned
from tests.compiler.c_build import AVX2, PORTABLE, build_shared, host_has, needs_gcc
from tests.compiler.test_codegen_c_copy import _team
from tests.compiler.test_codegen_copy import (
    contiguous_strides,
    copy_specs,
    permute_spec,
    random_storage,
    reference_copy,
    sentinel,
    span,
)

i8, i16, f32, f64 = DTYPES["int8"], DTYPES["int16"], DTYPES["float32"], DTYPES["float64"]
SIZES = (i8, i16, f32, f64)
CACHES = Caches(32 << 10, 1 << 20, 32 << 20, 8, 8, 64, True)  # the decisions' machine


@pytest.fixture
def streaming():
    previous = cpu.set_stream_threshold(0)
    try:
        yield
    finally:
        cpu.set_stream_threshold(previous)


def _library(size: int, lib=None):
    lib = lib or cpu.load_unit(cplan.plan_unit_source(size))
    fn = getattr(lib, cplan.plan_symbol(size))
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    fn.restype = None
    return fn


def run_plan(plan: CopyPlan, spec: CopySpec, threads: int = 1, fn=None, seed: int = 0) -> None:
    """`plan` of `spec` run by the library (`fn`: a build of it) against torch, on the whole
    destination storage, which starts as a sentinel."""
    gen = torch.Generator().manual_seed(seed)
    src = random_storage(spec.src_dtype, span(spec, spec.src_strides, spec.src_offset), gen)
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + 3)
    expected = reference_copy(spec, src, dst)
    params = cplan.plan_params(plan)
    words = (ctypes.c_int64 * len(params))(*params)
    (fn or _library(plan.elem_bytes))(src.data_ptr(), dst.data_ptr(), words, threads)
    assert torch.equal(dst, expected), (plan.describe(), spec, threads)


def _run_every(plans, spec: CopySpec, streams=(False, True)) -> None:
    """Each of `plans` of `spec` against torch (`run_plan`) on 1 and 3 threads, its stores
    streamed or not (`streams`)."""
    for plan, threads, stream in itertools.product(plans, (1, 3), streams):
        previous = cpu.set_stream_threshold(0 if stream else -1)
        try:
            with _team(True, threads):
                run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)
        finally:
            cpu.set_stream_threshold(previous)


def _spec(sizes, src_strides, src_offset=0, dtype=f32, dst_offset=0):
    return CopySpec(sizes, src_strides, src_offset, contiguous_strides(sizes), dst_offset,
                    dtype, dtype)


# --------------------------------------------------------------------------- the block


def test_the_argument_block_is_described_once_in_the_header():
    text = (cplan.resources.files("stridec.compiler.codegen.c") / "lib" / "copy_abi.h").read_text()
    header = re.search(r"#define STRIDEC_COPY_HEADER\(X\)((?:.*\\\n)*.*)", text).group(1)
    assert cplan.ABI.header == tuple(re.findall(r"X\((\w+)\)", re.sub(r"/\*.*?\*/", "", header)))
    assert set(cplan.ABI.kernels) == set(KERNELS)
    plan = plan_copy(permute_spec((6, 40, 50), (0, 2, 1)), CACHES)
    params = cplan.plan_params(plan)
    sides = len(plan.a_side) + len(plan.b_side)
    assert len(params) == len(cplan.ABI.header) + 4 * len(plan.loops) + 2 * sides
    assert params[cplan.ABI.index("abi")] == cplan.ABI.version
    assert params[cplan.ABI.index("kernel")] == cplan.ABI.kernels["transpose"]
    assert call_fits(cplan.plan_symbol(4), params)
    assert not call_fits(cplan.plan_symbol(4), params[:-1])
    wrong = list(params)
    wrong[cplan.ABI.index("abi")] += 1
    assert not call_fits(cplan.plan_symbol(4), wrong)


def test_a_block_the_library_does_not_read_writes_nothing():
    spec = permute_spec((40, 50), (1, 0))
    plan = plan_copy(spec, CACHES)
    fn = _library(4)
    for change in ({"loops": 0}, {"kernel": 99}, {"abi": 0}, {"lanes": 9}, {"c_loop": 0}):
        params = list(cplan.plan_params(plan))
        for field, value in change.items():
            params[cplan.ABI.index(field)] = value
        if "lanes" in change:
            params[cplan.ABI.index("kernel")] = cplan.ABI.kernels["deinterleave"]
        dst = torch.full((2000,), 7.0)
        fn(torch.randn(2000).data_ptr(), dst.data_ptr(), (ctypes.c_int64 * len(params))(*params), 1)
        assert torch.equal(dst, torch.full((2000,), 7.0)), change



def test_the_runtime_refuses_to_load_a_block_the_library_does_not_read():
    # A refused block moves nothing (above): the runtime asks the library (`<symbol>_check`)
    # as it loads each kernel, so that a plan it cannot read is a bug found at once, not
    # an output silently left as it was.
    spec = permute_spec((40, 50), (1, 0))
    good = list(cplan.plan_params(plan_copy(spec, CACHES)))
    source, symbol = cplan.plan_unit_source(4), cplan.plan_symbol(4)
    check = cpu._checker(cpu.load_unit(source), symbol)

    def takes(params) -> bool:
        block = (ctypes.c_int64 * len(params))(*params)  # held while the library reads it
        return bool(check(ctypes.addressof(block)))

    # an empty copy is one it reads (it moves nothing, rightly): a symbolic size bound to 0
    empty = list(cplan.plan_params(plan_copy(_spec((40, 50), (100, 2)), CACHES)))
    empty[len(cplan.ABI.header) + cplan.ABI.loop.index("extent")] = 0
    assert takes(good) and takes(empty)
    cpu.load_c_kernel("fine", source, [(symbol, 0, 1, tuple(good))])
    for field, value in (("loops", 0), ("kernel", 99), ("abi", 0), ("c_loop", 0)):
        params = list(good)
        params[cplan.ABI.index(field)] = value
        assert not takes(params), field
        with pytest.raises(stridec.InternalError, match="refuses"):
            cpu.load_c_kernel("refused", source, [(symbol, 0, 1, tuple(params))])


# --------------------------------------------------------------------------- decisions


@pytest.mark.parametrize(
    ("spec", "kernel"),
    [
        (_spec((64, 900), (1000, 1), 3), "rows"),                         # x[:, 3:903]
        (permute_spec((300, 500), (1, 0)), "transpose"),
        (permute_spec((8, 512, 512, 3), (0, 3, 1, 2)), "deinterleave"),    # NHWC -> NCHW, C = 3
        (permute_spec((8, 3, 512, 512), (0, 2, 3, 1)), "interleave"),      # NCHW -> NHWC, C = 3
        (_spec((64, 4000), (16000, 2)), "compress"),                     # x[:, ::2]
        (CopySpec((64, 100), (100, 1), 0, (300, 3), 0, f32, f32), "gather"),  # out[:, ::3] = x
        (CopySpec((64, 900), (900, -1), 899, (900, 1), 0, f32, f32), "reverse"),  # x.flip(1)
    ],
    ids=["slice", "transpose", "deinterleave", "interleave", "compress", "strided_dst", "flip"],
)
def test_the_micro_kernel_follows_the_pattern(spec, kernel):
    assert plan_copy(spec, CACHES).kernel == kernel


def test_space_to_depth_is_a_deinterleave_of_pairs():
    # x.view(N, C, H/2, 2, W/2, 2).permute(0, 3, 5, 1, 2, 4): every other pixel of a row
    # to one plane, the others to the next.
    n, c, h, w = 4, 16, 128, 256
    spec = permute_spec((n, c, h // 2, 2, w // 2, 2), (0, 3, 5, 1, 2, 4))
    plan = plan_copy(spec, CACHES)
    assert (plan.kernel, plan.lanes) == ("deinterleave", 2)


def test_a_whole_flip_is_one_reversed_run():
    # x.flip(0, 1) of a contiguous x: both dims fuse into one run read backwards.
    plan = plan_copy(CopySpec((64, 900), (-900, -1), 64 * 900 - 1, (900, 1), 0, f32, f32),
                     CACHES)
    assert (plan.kernel, [loop.extent for loop in plan.loops]) == ("reverse", [64 * 900])


def test_small_dims_join_a_transposes_sides():
    # (32, 15, 15, 32, 15, 4).permute(5, 2, 0, 4, 1, 3): the source's innermost dim of 4
    # and the 15 beside it make one side of 60 contiguous source elements, the destination's
    # innermost 32 and the 15 beside it one of 480: whole 8 x 8 blocks where a side of 4
    # would leave them half empty.
    plan = plan_copy(permute_spec((32, 15, 15, 32, 15, 4), (5, 2, 0, 4, 1, 3)), CACHES)
    assert plan.kernel == "transpose"
    assert [n for n, _ in plan.a_side] == [4, 15]
    assert [n for n, _ in plan.b_side] == [32, 15]


@pytest.mark.parametrize(("sizes", "perm", "dtype", "a_dims", "b_dims"), [
    # the random suite's (3, 27, 199, 3, 147, 7).permute(5, 2, 1, 4, 0, 3) of bytes: sides
    # of 7 and 3 alone are blocks of 21 bytes; the 147 that continues both makes 9-byte
    # destination rows that follow on, 7 runs of 1323 bytes a block of 1029 x 9
    ((3, 27, 199, 3, 147, 7), (5, 2, 1, 4, 0, 3), "int8", 2, 2),
    ((3, 5, 7, 3, 21, 7), (5, 2, 1, 4, 0, 3), "int8", 2, 2),
    # (3, 3, 3, 217, 85, 3).permute(3, 5, 2, 4, 0, 1) of bfloat16: not 3 x 9 blocks
    ((3, 3, 3, 217, 85, 3), (3, 5, 2, 4, 0, 1), "bfloat16", 4, 1),
    ((3, 3, 3, 17, 15, 3), (3, 5, 2, 4, 0, 1), "bfloat16", 4, 1),
])
def test_short_rows_that_follow_on_are_one_run(sizes, perm, dtype, a_dims, b_dims):
    spec = permute_spec(sizes, perm, DTYPES[dtype])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose"
    assert (len(plan.a_side), len(plan.b_side)) == (a_dims, b_dims)
    if math.prod(sizes) < 1 << 16:  # meaning: the library against torch
        run_plan(plan, spec)


@pytest.mark.parametrize(("sizes", "perm"), [
    # the random suite's (495, 3, 9, 3, 49).permute(4, 0, 2, 3, 1) float32: a side of 3
    # beside one of 49, blocks of 49 x 3 whose 49 destination rows of 12 bytes lie 160 KB
    # apart; the b side grown over the 27 and 495 that continue it makes rows of 128
    ((495, 3, 9, 3, 49), (4, 0, 2, 3, 1)),
    ((15, 3, 9, 3, 49), (4, 0, 2, 3, 1)),
    # (5, 201, 45).permute(2, 1, 0) float32 (seed 3's rand31): blocks of 45 x 5
    ((5, 201, 45), (2, 1, 0)),
])
def test_many_short_rows_at_once_are_not_priced_as_going_on(sizes, perm):
    # A block of more runs shorter than a line than the prefetchers follow: each starts
    # over, though the next block goes on with it (a side of 3: 4.9x slower, docs/cpu.md).
    spec = permute_spec(sizes, perm)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose" and len(plan.b_side) > 1, plan.describe()
    if math.prod(sizes) < 1 << 16:  # meaning: the library against torch
        run_plan(plan, spec)


def test_a_destination_side_grown_whole_takes_the_dim_both_sides_continue():
    # The random suite's (3, 5, 379, 103, 3).permute(3, 4, 2, 1, 0) float64 (seed
    # 1335759423's rand15): destination rows of 3 x 5 continue into the 379 that also
    # continues the source's 309. Grown a dim at a time in turn, the source's side took it
    # and the blocks wrote rows of 120 bytes 45 KB apart (12.5 ms); on the destination's
    # side it makes rows of 5685 elements (3.6 ms, docs/cpu.md).
    plan = plan_copy(permute_spec((3, 5, 379, 103, 3), (3, 4, 2, 1, 0), f64), CACHES)
    assert plan.kernel == "transpose", plan.describe()
    assert (plan.a_side, [n for n, _ in plan.b_side]) == (((309, 5685),), [3, 5, 379])
    # the same sides at a size the library runs here against torch
    spec = permute_spec((3, 5, 37, 13, 3), (3, 4, 2, 1, 0), f64)
    grown = [p for p in candidate_plans(spec, CACHES, limit=64)
             if p.kernel == "transpose" and [n for n, _ in p.b_side] == [3, 5, 37]]
    assert grown
    for p in grown:
        run_plan(p, spec)


@pytest.mark.parametrize(("sizes", "perm", "blocks"), [
    # the random suite's (5, 15, 77, 9, 3).permute(1, 4, 3, 2, 0) int32: 10395 blocks of
    # 3 x 5 (0.90 ms) or sides grown over the dims that continue them (0.19 ms)
    ((5, 15, 77, 9, 3), (1, 4, 3, 2, 0), 10395),
    # (7, 117, 35, 19, 13).permute(1, 4, 2, 3, 0) float32: 77805 blocks of 13 x 7
    ((7, 117, 35, 19, 13), (1, 4, 2, 3, 0), 77805),
])
def test_a_transpose_block_has_a_fixed_cost(sizes, perm, blocks):
    # A block's own work (its offsets, the next block's prefetch, a register tile's
    # edges) is more than a tiny block's traffic: not tens of thousands of them.
    plan = plan_copy(permute_spec(sizes, perm, DTYPES["int32"]), CACHES)
    assert plan.kernel == "transpose"
    assert math.prod(loop.count for loop in plan.loops) < blocks // 10, plan.describe()


def test_the_candidates_are_distinct():
    # Sides shorter than every tile make one plan of each tiling: the `limit` best are
    # distinct plans, so measured choice has more than one to time.
    plans = candidate_plans(permute_spec((7, 117, 35, 19, 13), (1, 4, 2, 3, 0)), CACHES,
                            limit=8)
    assert len(plans) == 8 and len(set(plans)) == 8


def test_a_batch_of_small_matrices_is_permuted_a_matrix_at_a_time():
    # The random suite's (39, 94235, 3, 3).permute(0, 1, 3, 2) float16: 3.7 million 3 x 3
    # transposes, each 18 bytes contiguous on both sides; as interleaves of 3 lanes, a
    # block of 3 (118 ms, eager 69), a matrix at a time one byte permute (14 ms).
    spec = permute_spec((39, 94235, 3, 3), (0, 1, 3, 2), DTYPES["float16"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "permute", plan.describe()
    assert [loop.extent for loop in plan.loops[plan.a_loop:]] == [3, 3], plan.describe()


@pytest.mark.parametrize(("sizes", "perm", "matrix"), [
    ((37, 3, 3), (0, 2, 1), 9),           # matrices one after the other: whole vectors stored
    ((5, 7, 3, 3), (1, 0, 3, 2), 9),      # the outer dims permuted too: each matrix exact
    ((4, 5, 3, 7), (0, 1, 3, 2), 21),
    ((6, 9, 33), (0, 2, 1), 297),         # beyond a vector: none (in L2)
    ((3, 2, 3, 5, 2), (0, 4, 2, 3, 1), 60),  # a vector of int8 only
    ((300, 9, 33), (0, 2, 1), 297),       # through the table (beyond L2), not for bytes
    ((80, 13, 47, 3), (0, 3, 2, 1), 1833),  # a slab reversed: streamed
    ((90, 9, 240), (0, 2, 1), 2160),      # beyond the table's elements: none
])
def test_permuted_matrices_match_torch(sizes, perm, matrix):
    # Every permute plan, each element size, 1 and 3 threads; streamed where the plan says.
    for dtype in SIZES:
        size = dtype.itemsize
        spec = permute_spec(sizes, perm, dtype)
        every = [p for p in candidate_plans(spec, CACHES, limit=64) if p.kernel == "permute"]
        plans = [p for p in every if _dense_matrix(p)]  # not gathered
        table = (size > 1 and matrix * size <= copy_plan.PERMUTE_TABLE_BYTES
                 and matrix <= copy_plan.PERMUTE_TABLE_ELEMENTS
                 and spec.numel * size * 2 > CACHES.l2)
        assert bool(plans) == (matrix * size <= 64 or table), (sizes, dtype)
        assert all((p.stream_bytes > 0) == (matrix * size >= copy_plan.LONG_RUN_BYTES)
                   for p in plans), (sizes, dtype)
        _run_every(every, spec)


def test_narrow_transposes_gather_where_the_cpu_gathers_vectors():
    # The random suite's (13, 3, 16871).permute(1, 2, 0) int32 of seed 550211740: 13-element
    # destination rows. With AVX-512's gathers, 16 table elements in one instruction, the
    # table took 0.63-0.66 ms against the transpose's 0.97-0.99 (eager 0.90); an element at
    # a time the transpose is the faster. Its int16 twin, twice the elements a line for the
    # same gathers, keeps the transpose.
    spec = permute_spec((13, 3, 16871), (1, 2, 0), DTYPES["int32"])
    gathers = dataclasses.replace(CACHES, gathers=True)
    assert plan_copy(spec, CACHES).kernel == "transpose"
    plan = plan_copy(spec, gathers)
    assert plan.kernel == "permute" and not _dense_matrix(plan), plan.describe()
    half = permute_spec((13, 3, 16871), (1, 2, 0), DTYPES["int16"])
    assert plan_copy(half, gathers).kernel != "permute"


def test_slow_gathers_price_the_table_dearer():
    # On a Cascade Lake VM a 16-lane gather took 19 ns under the GDS microcode: TTC's
    # (13, 13, 13, 26, 5, 64).permute(2, 0, 4, 1, 5, 3) float32 took 28 ms as a transpose
    # against 36 through the table, and (171, 185, 7).permute(1, 0, 2) float32 (a fresh
    # seed's) 0.40 ms as rows against 0.66; batches of small transposes, (10331, 25, 9)
    # and (12445, 67, 11).permute(0, 2, 1) of uint8 and int32 (another fresh seed's), 2.4
    # and 15.6 ms transposed against 3.0 and 19.5. Where gathers are fast all gather.
    gathers = dataclasses.replace(CACHES, gathers=True)
    slow = dataclasses.replace(gathers, slow_gathers=True)
    for sizes, perm, dtype, kernel in (
            ((13, 13, 13, 26, 5, 64), (2, 0, 4, 1, 5, 3), f32, "transpose"),
            ((171, 185, 7), (1, 0, 2), f32, "rows"),
            ((10331, 25, 9), (0, 2, 1), i8, "transpose"),
            ((12445, 67, 11), (0, 2, 1), DTYPES["int32"], "transpose")):
        spec = permute_spec(sizes, perm, dtype)
        assert plan_copy(spec, gathers).kernel == "permute", sizes
        assert plan_copy(spec, slow).kernel == kernel, sizes


def test_lane_gathers_price_the_table_between():
    # On a Zen 5 VM a 16-lane gather from L1 took 6.3 ns: random rows of fresh seeds,
    # (55, 6639).permute(1, 0) float32 0.73 -> 0.17 ms transposed, (173, 3, 3, 21, 3, 29)
    # .permute(0, 4, 2, 5, 1, 3) bfloat16 3.4 -> 0.9, TTC's (2,0,4,1,5,3) float32 16.7 ->
    # 7.2; batches of small transposes of bytes stay gathered (1.1-1.4x as long
    # transposed at the Cascade Lake's price).
    gathers = dataclasses.replace(CACHES, gathers=True)
    lane = dataclasses.replace(gathers, lane_gathers=True)
    slow = dataclasses.replace(gathers, slow_gathers=True)
    for sizes, perm, dtype in (((55, 6639), (1, 0), f32),
                               ((173, 3, 3, 21, 3, 29), (0, 4, 2, 5, 1, 3), DTYPES["bfloat16"]),
                               ((13, 13, 13, 26, 5, 64), (2, 0, 4, 1, 5, 3), f32)):
        spec = permute_spec(sizes, perm, dtype)
        assert plan_copy(spec, gathers).kernel == "permute", sizes
        assert plan_copy(spec, lane).kernel == "transpose", sizes
    spec = permute_spec((10331, 25, 9), (0, 2, 1), i8)
    assert plan_copy(spec, lane).kernel == "permute" != plan_copy(spec, slow).kernel
    spec = permute_spec((55, 6639), (1, 0), f32)
    run_plan(plan_copy(spec, lane), spec)


def test_copies_in_l2_gather_where_the_cpu_gathers_vectors():
    # The random suite's (3, 3, 3, 3, 1153, 3).permute(2, 1, 3, 5, 4, 0) float16 of seed
    # 321289196 (here half its size, in L2 by this model's caches): destination rows of
    # 3 x 3 transposes of stride-3 runs. Transposed in blocks of 512 x 3 it took 0.87-0.90
    # ms (eager 0.36-0.44); gathered through the table, 16 elements an instruction, 0.24.
    spec = permute_spec((3, 3, 3, 3, 577, 3), (2, 1, 3, 5, 4, 0), DTYPES["float16"])
    gathers = dataclasses.replace(CACHES, gathers=True)
    assert spec.numel * 2 * 2 <= CACHES.l2
    assert plan_copy(spec, CACHES).kernel == "transpose"  # an element at a time: no table
    plan = plan_copy(spec, gathers)
    assert plan.kernel == "permute" and not _dense_matrix(plan), plan.describe()
    # A lane kernel's copy keeps its kernel (3 int8 lanes interleaved: 1.67x as long
    # gathered), a flip's (vectors reversed in registers) and a copy of runs (a row slice).
    lanes = permute_spec((3, 3067, 43), (1, 2, 0), DTYPES["int8"])
    flip = CopySpec((30, 16), (64, -1), 15, (16, 1), 0, f32, f32)
    rows = CopySpec((3, 6), (12, 1), 6, (6, 1), 0, f32, f32)
    for spec in (lanes, flip, rows):
        assert all(p.kernel != "permute" for p in candidate_plans(spec, gathers, limit=64))
    # Destination rows as wide as a register tile keep the transposes (64 x 64 float32,
    # hot: 4.2x as long gathered).
    wide = permute_spec((64, 64), (1, 0), f32)
    assert all(p.kernel != "permute" for p in candidate_plans(wide, gathers, limit=64))


def test_gathered_blocks_keep_to_the_tables_offsets():
    # The long tail's guard-page seed 1005: a block of 12 x 7 int16 whose outer dim strides
    # 2494800 elements. The library's table holds 32-bit offsets and refuses such a matrix
    # (copy_plan.c's permute_table), and the plan then moved nothing; the planner offers
    # none (its strides at most TABLE_STRIDE), and what it offers is right.
    spec = CopySpec((7, 17, 1, 12, 22, 3), (70, -2, 92400, 2494800, 2100, 277200), 32,
                    (1, 84, 125664, 7, -5712, 1428), 119952, DTYPES["int16"], DTYPES["int16"])
    small = dataclasses.replace(CACHES, l2=64, gathers=True)  # gathered blocks planned
    plans = candidate_plans(spec, small, limit=64)
    assert all(abs(loop.src_stride) <= copy_plan.TABLE_STRIDE
               for p in plans if p.kernel == "permute" for loop in copy_plan._matrix_loops(p))
    _run_every(plans[:4], spec, streams=(False,))


def _dense_matrix(plan: CopyPlan) -> bool:
    """Whether a permute plan's matrix is contiguous in the source too (not gathered)."""
    block = copy_plan._matrix_loops(plan)
    return copy_plan._dense([(loop.step, loop.src_stride) for loop in block])


def test_destination_rows_of_small_transposes_are_gathered_through_the_table():
    # The random suite's (1871, 15, 3, 73, 3, 3).permute(1, 4, 3, 0, 5, 2) uint8 of seed
    # 550211740: each destination row of 1871 x 3 x 3 bytes is 3 x 3 transposes from 3
    # source runs of 3 bytes, 1871 of them 29 KB apart; no matrix is contiguous on both
    # sides. As transposes of 657 x 3 blocks it took 138-244 ms (torch.compile 130, eager
    # 600); gathered through the table in blocks of 8 x 3 x 3 bytes, 62-96 ms.
    spec = permute_spec((1871, 15, 3, 73, 3, 3), (1, 4, 3, 0, 5, 2), DTYPES["uint8"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "permute" and not _dense_matrix(plan), plan.describe()
    block = copy_plan._matrix_loops(plan)
    assert [loop.dst_stride for loop in block] == [9, 3, 1], plan.describe()
    assert plan.c_loop >= 0 and block[0].step < 1871, plan.describe()



def test_pixels_a_later_block_reads_on_in_l2_are_gathered():
    # (49, 3, 29, 3, 111, 3).permute(4, 3, 0, 2, 1, 5) float16 (`rand30_r6_float16` of seed
    # 628843782), here with 13 for 49: 6-byte pixels, each destination run of 29 x 3
    # pixels gathered from 87 source lines, which the block one pixel on (111 of them,
    # the blocks in between 0.8 MB) reads again from L2. Priced as 87 runs starting over
    # at every block, rows blocks of 3 x 111 pixels looked cheaper: they took 5x as long.
    spec = permute_spec((13, 3, 29, 3, 111, 3), (4, 3, 0, 2, 1, 5), DTYPES["float16"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "permute", plan.describe()
    assert [loop.dst_stride for loop in copy_plan._matrix_loops(plan)] == [9, 3, 1], plan.describe()
    assert any(loop.src_stride == 3 and loop.count == 111 for loop in plan.loops), plan.describe()
    run_plan(plan, spec)

@pytest.mark.parametrize(("sizes", "perm"), [
    ((37, 2, 3, 11, 3, 3), (1, 4, 3, 0, 5, 2)),  # the suite's row, small: 37 = 4 x 8 + 5
    ((301, 13), (1, 0)),                          # a transpose of 13 rows, tiles of 301
    ((7, 5, 3, 3), (1, 3, 0, 2)),                 # blocks of the whole inner dims
])
def test_gathered_matrices_match_torch(sizes, perm):
    # Every gathered plan (each place of a tiled loop, each tile, its last tile shorter),
    # each element size, 1 and 3 threads, planned as if the copy were larger than L2.
    small = dataclasses.replace(CACHES, l2=64)
    for dtype in SIZES:
        spec = permute_spec(sizes, perm, dtype)
        plans = [p for p in candidate_plans(spec, small, limit=256)
                 if p.kernel == "permute" and not _dense_matrix(p)]
        assert plans, (sizes, dtype)
        _run_every(plans, spec, streams=(False,))


def test_a_slab_reversed_is_permuted_through_the_table():
    # The random suite's (3, 541, 13, 47, 3).permute(0, 1, 4, 3, 2) float64 of seed
    # 321289196: slabs of 3 x 47 x 13 elements (14.6 KB) contiguous on both sides, reversed;
    # as transposes of 141 x 13 blocks 7.4-8.7 ms called straight, through the table and
    # streamed 4.2 (eager 7.3). Bytes are not (a table entry for each byte moved).
    for dtype, kernel in ((DTYPES["float64"], "permute"), (DTYPES["int8"], "transpose")):
        plan = plan_copy(permute_spec((3, 541, 13, 47, 3), (0, 1, 4, 3, 2), dtype), CACHES)
        assert plan.kernel == kernel, plan.describe()


def test_rows_are_read_in_the_sources_order():
    # (384, 384, 89).permute(1, 0, 2): rows of 89 elements; walked in the source's order the
    # source is one stream, in the destination's every row starts a new one.
    spec = permute_spec((384, 384, 89), (1, 0, 2))
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows"
    outer = [loop.src_stride for loop in plan.loops[:-1]]
    assert outer == sorted(outer, key=abs, reverse=True)


def _halves_swapped(rows: int, half: int, dtype) -> CopySpec:
    """LLaMA's rotate_half without its sign: cat((x2, x1), -1) of rows of 2 x `half`."""
    return CopySpec((2, rows, half), (-half, 2 * half, 1), half, (half, 2 * half, 1), 0,
                    dtype, dtype)


def test_swapped_halves_are_blocked_along_the_rows():
    # rotate_half_halves_64M of the models suite, 4 x 32 x 2048 rows of 2 x 64 float16: a
    # block a row (two runs of 128 bytes) took 21-23 ms, eager 20, memcpy 13; blocks of
    # 64 rows, 16 KiB contiguous on both sides, 15-16.
    plan = plan_copy(_halves_swapped(4 * 32 * 2048, 64, DTYPES["float16"]), CACHES)
    assert plan.kernel == "rows" and plan.c_loop >= 0, plan.describe()
    assert plan.loops[plan.c_loop].step > 1 and plan.loops[plan.a_loop].step == 2
    for dtype in SIZES:
        spec = _halves_swapped(301, 24, dtype)
        plans = [p for p in candidate_plans(spec, dataclasses.replace(CACHES, l2=1024),
                                            limit=32) if p.kernel == "rows" and p.c_loop >= 0]
        assert plans, dtype
        _run_every(plans, spec)


def test_short_rows_are_blocked_along_a_second_dim():
    # (38, 22, 22, 38, 26).permute(1, 3, 2, 0, 4), a TTC permutation: rows of 104 bytes.
    # One row a block, each starts over on one side; a block of the 38 rows that follow
    # on in the destination is one run there (streamed whole), and the loops in the
    # source's order go on with each of its runs in the source.
    spec = permute_spec((38, 22, 22, 38, 26), (1, 3, 2, 0, 4))
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.a_loop >= 0, plan.describe()
    a = plan.loops[plan.a_loop]
    assert a.dst_stride == 26 and a.step == 38 and plan.stream_bytes > 0, plan.describe()
    inner = [loop.src_stride for loop in plan.loops[:-1] if loop is not a]
    assert inner == sorted(inner, reverse=True) and inner[-1] == 26, plan.describe()



def test_rows_whose_destination_runs_are_shorter_than_two_lines_do_not_stream():
    # (3, 3, 489, 213, 19).permute(1, 3, 2, 0, 4) uint8 (`rand20_r5_uint8` of seed
    # 404552431), scaled: runs of 19 bytes, 3 of them one 57-byte run in the destination.
    # The library streams a run's whole lines only: such a run was built in a buffer in L1
    # and then written through the cache all the same, 2.2x as long as not streamed.
    spec = permute_spec((3, 3, 49, 21, 19), (1, 3, 2, 0, 4), i8)
    plans = [p for p in candidate_plans(spec, CACHES, limit=64) if p.kernel == "rows"]
    assert plans
    for plan in plans:  # (a block of runs that is one run of 2 lines or more streams:
        # test_short_rows_are_blocked_along_a_second_dim)
        assert plan.stream_bytes <= 0 or copy_plan._sides_of(plan)[1].run >= 128, plan.describe()
    assert plans[0].loops[plans[0].a_loop].dst_stride == 19, plans[0].describe()
    _run_every(plans[:2], spec, streams=(False,))


def test_rows_written_through_the_cache_keep_few_runs_at_once():
    # Attention's head merge, (B, H, S, D).permute(0, 2, 1, 3) with runs of 128-256 bytes:
    # blocks of 32 runs along S (one source run, 32 destination runs 4-8 KB apart) took
    # twice the time of blocks of 8, or of the heads (one destination run), where the
    # stores go through the cache (the copies here are under the streaming threshold).
    for shape, dtype in (((1, 16, 256, 64), f32), ((4, 16, 1024, 64), f32),
                         ((8, 16, 1024, 64), DTYPES["float16"]), ((1, 32, 512, 32), f32)):
        spec = permute_spec(shape, (0, 2, 1, 3), dtype)
        plan = plan_copy(spec, CACHES)
        assert plan.kernel == "rows" and not copy_plan._stores_stream(plan, CACHES)
        _, dst = copy_plan._sides_of(plan)
        assert copy_plan._streams(dst) <= copy_plan.CACHED_STORE_STREAMS, plan.describe()
        run_plan(plan, spec)


def test_tiny_runs_pay_their_copies_and_go_on_in_their_lines():
    # Runs under TINY_RUN_BYTES: each is a copy of its own, and a later block that goes on
    # with it lands in the line it ended in. (3, 3, 489, 213, 19).permute(1, 3, 2, 0, 4)
    # uint8 (`rand20_r5_uint8` of seed 404552431; here 49 for 489): its blocks are the
    # 3 x 49 runs of 19 bytes that make one destination run, a 32-byte word each with the
    # next block's asked for (rows_words), 0.33-0.37 of the time of blocks of the 213 runs
    # that follow on in the source (which took 0.71-0.88 of the time of 3 x 213 runs, a
    # call for every 3); (35, 9, 9, 759, 3).permute(0, 1, 3, 2, 4) float32
    # (`rand24_r5_float32` of seed 321289196; here 7 for 35): its 12-byte pixels gathered,
    # 0.79-0.95 of the time of rows blocks of them.
    spec = permute_spec((3, 3, 49, 213, 19), (1, 3, 2, 0, 4), i8)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.c_loop >= 0 and plan.prefetch, plan.describe()
    a, c = plan.loops[plan.a_loop], plan.loops[plan.c_loop]
    assert (a.step, a.dst_stride, c.step, c.dst_stride) == (3, 19, 49, 57), plan.describe()
    run_plan(plan, spec)
    spec = permute_spec((7, 9, 9, 759, 3), (0, 1, 3, 2, 4), f32)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "permute", plan.describe()
    matrix = copy_plan._matrix_loops(plan)
    assert [loop.dst_stride for loop in matrix] == [27, 3, 1], plan.describe()
    run_plan(plan, spec)


def test_tiny_runs_that_follow_on_in_the_destination_go_a_word_each():
    # (121, 409, 3).permute(1, 0, 2) float16 (`rand00_r3_float16` of seed 849175564): a
    # transpose of 6-byte pixels. Blocks of the 121 pixels that make one destination run go
    # a word a pixel (tile_rows' gather_runs): 0.6 ns a pixel in L2 against 3.6 for blocks
    # of the 409 that follow on in the source, each pixel a copy of its own; cold, 1.04-1.47x
    # as fast. The model priced every tiny run as a copy.
    spec = permute_spec((121, 409, 3), (1, 0, 2), DTYPES["float16"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.loops[plan.b_loop].step == 3, plan.describe()
    a = plan.loops[plan.a_loop]
    assert (a.step, a.dst_stride) == (121, 3), plan.describe()
    assert copy_plan._runs_as_words(plan, CACHES)
    run_plan(plan, spec)


def test_runs_less_than_a_line_apart_are_one_stream():
    # (7, 63807, 3, 15).permute(2, 1, 0, 3) float16 (`rand18_r4_float16` of seed 812352816;
    # here 6381 for 63807): runs of 30 bytes, 90 apart in each of 7 source planes. A block
    # of 7 x 266 of them, one destination run, reads every line of the 266 runs' span in
    # order, a stream the prefetchers follow, not 266 runs each starting over: it took
    # 0.44-0.55 of the time of the blocks of 7 x 3 runs the model chose before (about
    # memcpy's time).
    spec = permute_spec((7, 6381, 3, 15), (2, 1, 0, 3), DTYPES["float16"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.c_loop >= 0, plan.describe()
    a, c = plan.loops[plan.a_loop], plan.loops[plan.c_loop]
    assert (a.step, c.src_stride, c.dst_stride) == (7, 45, 105), plan.describe()
    src, _ = copy_plan._sides_of(plan)
    assert src.runs > 7 * 200 and copy_plan._streams(src) == 7  # runs: a mean over the blocks
    run_plan(plan, spec)


@pytest.mark.parametrize("shape, perm", [
    ((74, 57, 57, 74), (3, 2, 1, 0)),  # TTC (3,2,1,0) on 96x75x75x96, scaled
    ((22, 22, 4, 38, 284), (2, 0, 4, 1, 3)),  # TTC (1,3,0,4,2) on 352x48x4x28x28, scaled
])
def test_many_destination_rows_are_long_rows(shape, perm):
    # A transpose block of 256 or 284 destination rows, each on pages of its own: more
    # rows than the prefetchers follow, so each block's piece of a row starts over even
    # where the next block goes on with it. Rows of 512 or 152 bytes took 1.3-3x the time
    # of the same blocks' rows of 1 KiB or 896 bytes (a Xeon, the plans called straight);
    # priced as continued, they looked the cheapest.
    spec = permute_spec(shape, perm, f32)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose", plan.describe()
    assert plan.loops[plan.b_loop].step * 4 >= 896, plan.describe()
    run_plan(plan, spec)


def test_rows_shorter_than_a_line_are_blocked_along_two_dims():
    # (13, 13, 26, 13, 26, 14).permute(4, 1, 0, 3, 2, 5), a TTC permutation: rows of 56
    # bytes. Blocked along one dim, one side's runs stay 56 bytes apart; a block of the 26
    # rows that follow on in the destination by the 26 that follow on in the source is
    # runs of 1456 bytes on both sides, and the loop inside goes on with all of them.
    spec = permute_spec((13, 13, 26, 13, 26, 14), (4, 1, 0, 3, 2, 5))
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.a_loop >= 0 and plan.c_loop >= 0, plan.describe()
    a, c = plan.loops[plan.a_loop], plan.loops[plan.c_loop]
    assert (a.dst_stride, a.step, c.src_stride, c.step) == (14, 26, 14, 26), plan.describe()
    assert plan.loops[-2].src_stride == plan.loops[-2].dst_stride == 26 * 14, plan.describe()


def test_destination_rows_that_follow_on_along_an_outer_dim_are_one_run():
    # (11, 3, 5, 3, N, 15).permute(1, 5, 2, 4, 3, 0) float32: destination rows of 11
    # elements along the 15-dim are 271 KB apart (N = 411), but 15 rows on, along the N-dim,
    # each row follows on from the one before. Priced as rows, blocks of 15 x 11 looked
    # cheaper; the sides of 15 x N and 11 x 3, blocks of 256 x 33 whose destination is 15
    # runs of 8 rows, take 0.5-0.7 of their time (the plans called straight).
    spec = permute_spec((11, 3, 1, 3, 41, 15), (1, 5, 2, 4, 3, 0), f32)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose", plan.describe()
    assert [n for n, _ in plan.a_side] == [15, 41], plan.describe()
    assert [n for n, _ in plan.b_side] == [11, 3], plan.describe()
    run_plan(plan, spec)


def test_source_rows_of_a_few_lines_that_follow_on_along_an_outer_dim_are_one_run():
    # (5, 3, N, 5, 3).permute(3, 1, 4, 2, 0) float64: source rows of 15 elements (120
    # bytes) along the b side's 5-dim are 72 KB apart (N = 199), but 5 rows on, along the
    # N-dim, each follows on from the one before. Priced as rows, blocks of 3 x 5 looked
    # cheaper; blocks of 15 x 256 over the sides 3 x 5 and 5 x N, whose source is 5
    # streams, take 0.6 of their time (the plans called straight).
    spec = permute_spec((5, 3, 40, 5, 3), (3, 1, 4, 2, 0), f64)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose", plan.describe()
    assert [n for n, _ in plan.a_side] == [3, 5], plan.describe()
    assert [n for n, _ in plan.b_side] == [5, 40], plan.describe()


def test_blocks_whose_source_runs_come_back_to_their_pages_run_in_the_destinations_order():
    # (31, N, 21, 3, 9, 3).permute(5, 3, 2, 0, 1, 4) float16: a deinterleave of 3 lanes,
    # each block one source run of 54 bytes. In the destination's order the next block's
    # run is 3.4 KB on, and the loop outside it comes back to the same pages while the
    # TLB holds them; priced as pages each block touches anew, the source's order (18-byte
    # destination runs that start over) looked cheaper and took 3.5-3.7 times as long
    # (N = 13, the plans called straight).
    spec = permute_spec((31, 5, 21, 3, 9, 3), (5, 3, 2, 0, 1, 4), DTYPES["float16"])
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "deinterleave", plan.describe()
    outer = [loop.dst_stride for loop in plan.loops[:-1]]
    assert outer == sorted(outer, reverse=True) and outer[-1] == 9, plan.describe()


def test_transposes_whose_source_rows_are_a_few_streams_are_not_prefetched():
    # (7, N, 35, 19, 13).permute(1, 4, 2, 3, 0) float32: a side of 13 elements, a b side
    # of 7 x 665 whose source rows of 52 bytes follow on along the 665: the whole b side
    # is 7 streams, each next block along b goes on with them. A software prefetch of the
    # next block only adds work (16 random rows re-planned, geomean 1.30-1.34x as fast
    # without it, the plans called straight). A side of a line or more keeps it.
    spec = permute_spec((7, 3, 35, 19, 13), (1, 4, 2, 3, 0), f32)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "transpose" and not plan.prefetch, plan.describe()
    assert [n for n, _ in plan.b_side] == [7, 665], plan.describe()
    run_plan(plan, spec)
    assert plan_copy(permute_spec((700, 700), (1, 0), f32), CACHES).prefetch


@pytest.mark.parametrize(("sizes", "perm", "dtype", "wide"), [
    ((64, 48, 4), (1, 0, 2), "uint8", 4),  # RGBA pixels transposed
    ((3, 40, 70, 2), (0, 2, 1, 3), "float32", 8),  # complex-like pairs
    ((33, 17, 2), (1, 0, 2), "int8", 2),
    ((5, 33, 17, 2), (2, 0, 1, 3), "bfloat16", 4),
    ((9, 31, 4), (1, 0, 2), "int16", 8),
    ((7, 3, 5, 2), (2, 1, 0, 3), "int32", 8),  # a permute of small matrices of pairs
])
def test_runs_of_a_library_size_move_as_elements(sizes, perm, dtype, wide):
    # Runs of 2, 4 or 8 bytes kept innermost are also planned as the copy of elements that
    # wide (the library of that size), every candidate equal to torch; not where a stride
    # or an offset is no whole run, nor for a cast.
    spec = permute_spec(sizes, perm, DTYPES[dtype])
    plans = candidate_plans(spec, CACHES, limit=8)
    assert any(p.elem_bytes == wide for p in plans), [p.describe() for p in plans]
    for candidate in plans:
        run_plan(candidate, spec)
    odd = dataclasses.replace(spec, src_offset=1)
    assert all(p.elem_bytes == DTYPES[dtype].itemsize for p in candidate_plans(odd, CACHES))
    cast = dataclasses.replace(spec, dst_dtype=DTYPES["float64"])
    assert all(p.elem_bytes == DTYPES[dtype].itemsize for p in candidate_plans(cast, CACHES))


@pytest.mark.parametrize(("sizes", "perm", "dtype", "wide"), [
    ((1024, 1024, 4), (1, 0, 2), "uint8", 4), ((3, 1000, 700, 2), (0, 2, 1, 3), "float32", 8)])
def test_a_transpose_of_pixels_or_pairs_moves_them_as_elements(sizes, perm, dtype, wide):
    # RGBA pixels and complex-like pairs transposed: the transpose of 4- and 8-byte
    # elements, not the rows plan that moved each run alone (1024 x 1024 x 4 uint8: 6.6 ms
    # against 0.67, eager 3.9; the float32 pairs 22 ms against 1.8, eager 5.9).
    spec = permute_spec(sizes, perm, DTYPES[dtype])
    plan = plan_copy(spec, CACHES)
    assert (plan.kernel, plan.elem_bytes) == ("transpose", wide), plan.describe()
    ranked = cplan.ranked_plans(spec)
    assert all(p.elem_bytes == ranked[0].elem_bytes for p in ranked)


def test_wide_elements_from_a_storage_off_8_bytes():
    # The library of the wide elements reads them at the storage's pointer: a storage 3 (or
    # 4) bytes past a multiple of 8 is staged in an aligned copy for the call.
    raw = bytearray(64 * 48 * 4 + 16)
    shift = (-torch.frombuffer(raw, dtype=torch.uint8).data_ptr()) % 8 + 3
    x = torch.frombuffer(raw, dtype=torch.uint8, offset=shift, count=64 * 48 * 4)
    x = x.view(64, 48, 4)
    x.copy_(torch.randint(0, 256, (64, 48, 4), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(0)))
    pairs = torch.frombuffer(raw, dtype=torch.float32, offset=shift + 1, count=2 * 5 * 7)
    assert misaligned([x]) and misaligned([pairs]) and not misaligned([x.clone()])
    for t, fn in ((x, lambda t: t.permute(1, 0, 2).contiguous()),
                  (pairs.view(5, 7, 2), lambda t: t.transpose(0, 1).contiguous())):
        compiled = stridec.compile(stridec.trace(fn, t), backend="cpu")
        # bit for bit: the float32 pairs are random bytes, NaNs among them
        assert torch.equal(compiled(t).view(torch.uint8), fn(t).view(torch.uint8))


def test_long_rows_are_not_blocked():
    # Swin's window_partition, (56, 8, 7, 8, 672).permute(0, 1, 3, 2, 4): runs of 2688
    # bytes, each of whole lines. A block of 7 x 3 windows' rows restarts 7 source streams
    # at every block (0.8-1.0 of memcpy); walked in the source's order the source is one
    # stream and every run streams straight out (1.4-1.6).
    spec = permute_spec((56, 8, 7, 8, 672), (0, 1, 3, 2, 4))
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.a_loop == plan.c_loop == -1, plan.describe()
    assert not plan.prefetch and plan.stream_bytes > 0, plan.describe()
    outer = [loop.src_stride for loop in plan.loops[:-1]]
    assert outer == sorted(outer, reverse=True), plan.describe()


def test_rows_blocks_the_prefetchers_follow_are_not_prefetched():
    # Three planes interleaved by runs of 33 bytes ((3, N, 37, 33).permute(1, 2, 0, 3)
    # uint8): a block reads 3 source streams of short runs in turn, each going on in the
    # next block; the hardware follows them, and the next block's software prefetch only
    # adds work (1.45-1.49x the time). One stream (attention heads split: 32 rows of 256
    # bytes that follow on) the same (1.18-1.27x). Three planes of 1062-byte runs, or the
    # heads merged (32 streams), keep it (0.69-0.78x and 0.88x the time without).
    u8, bf16, f16 = DTYPES["uint8"], DTYPES["bfloat16"], DTYPES["float16"]
    for shape, perm, dtype, prefetched in (((3, 400, 37, 33), (1, 2, 0, 3), u8, False),
                                           ((4, 2048, 32, 128), (0, 2, 1, 3), f16, False),
                                           ((3, 1001, 531), (1, 0, 2), bf16, True),
                                           ((4, 32, 2048, 128), (0, 2, 1, 3), f16, True)):
        plan = plan_copy(permute_spec(shape, perm, dtype), CACHES)
        assert plan.kernel == "rows" and plan.a_loop >= 0, plan.describe()
        assert plan.prefetch == prefetched, plan.describe()
    spec = permute_spec((3, 400, 37, 33), (1, 2, 0, 3), u8)
    run_plan(plan_copy(spec, CACHES), spec)


def test_long_rows_that_end_inside_lines_prefetch_the_next_run():
    # A TTC (0,3,2,1) permutation, (62, 49, 10, 298).permute(2, 1, 0, 3) in float64:
    # runs of 2384 bytes, each starting and ending inside a line, scattered in the
    # destination. Each run a block, so that the library asks for the next run's source
    # and its destination's edge lines a run ahead (1.16-1.20 of memcpy against 0.88-0.96).
    spec = permute_spec((62, 49, 10, 298), (2, 1, 0, 3), f64)
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.prefetch, plan.describe()
    assert plan.a_loop == plan.b_loop - 1 and plan.loops[plan.a_loop].step == 1, plan.describe()


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_long_rows_a_run_a_block_match_torch(stream):
    # That plan's shape at a size the library is run against torch on: runs of 298
    # elements a block, the next run and its destination's edges prefetched, an odd
    # destination offset, 1 and 3 threads.
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for dtype in SIZES:
            spec = permute_spec((5, 4, 3, 298), (2, 1, 0, 3), dtype, dst_offset=1)
            plan = next(p for p in candidate_plans(spec, CACHES, limit=16) if p.a_loop < 0)
            plan = dataclasses.replace(plan, a_loop=plan.b_loop - 1, prefetch=True)
            for threads in (1, 3):
                with _team(True, threads):
                    run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


def test_a_block_of_two_dims_of_rows_fits_l1():
    # (234, 22, 22, 6, 26).permute(1, 3, 2, 0, 4), a TTC (0,4,2,1,3) permutation: runs of
    # 104 bytes, a block of runs along the 234 that follow on in the destination by the 6
    # that follow on in the source. The block reads each of its source runs once a part
    # (along the 6), so their lines stay in L1 from part to part only where the block
    # about fits there: all 234 (146 KiB) 0.62-0.74 of memcpy, blocks of 18-78 0.80-1.04.
    spec = permute_spec((234, 22, 22, 6, 26), (1, 3, 2, 0, 4))
    plan = plan_copy(spec, CACHES)
    assert plan.kernel == "rows" and plan.a_loop >= 0, plan.describe()
    block = math.prod(plan.loops[k].step for k in (plan.a_loop, plan.c_loop) if k >= 0)
    assert 1 < block and block * 26 * 4 <= 2 * CACHES.l1, plan.describe()
    # Runs of 5 bytes share lines with their neighbours along a: their block stays larger
    # (the random suite's rand22 of seed 39223671, 3x slower at twice L1).
    spec = permute_spec((13, 99, 13, 75, 5, 5), (0, 3, 4, 2, 1, 5), i8)
    plan = plan_copy(spec, CACHES)
    block = math.prod(plan.loops[k].step for k in (plan.a_loop, plan.c_loop) if k >= 0)
    assert plan.kernel == "rows" and block * 5 > 2 * CACHES.l1, plan.describe()


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_blocked_rows_match_torch(stream):
    # Every blocked candidate of row-keeping permutations (along one dim and along two),
    # each element size, runs shorter and longer than a vector, blocks whole and cut
    # (edges), prefetching, 1 and 3 threads.
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for dtype in SIZES:
            for sizes, perm in (((7, 9, 5, 13), (2, 1, 0, 3)), ((5, 3, 33, 3), (2, 0, 1, 3)),
                                ((6, 17, 70), (1, 0, 2)), ((4, 5, 3, 250), (1, 2, 0, 3)),
                                ((5, 3, 9, 64), (2, 0, 1, 3)), ((3, 40, 7, 33), (1, 2, 0, 3))):
                spec = permute_spec(sizes, perm, dtype)
                plans = [p for p in candidate_plans(spec, CACHES, limit=16)
                         if p.a_loop >= 0 and p.kernel == "rows"]
                assert plans, spec
                for plan, threads in itertools.product(plans, (1, 3)):
                    cut = tuple(dataclasses.replace(loop, step=min(loop.step, 3))
                                for loop in plan.loops)
                    for loops in (plan.loops, cut):
                        with _team(True, threads):
                            run_plan(dataclasses.replace(plan, loops=loops, parallel=threads,
                                                         prefetch=True), spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


def test_joined_runs_of_whole_lines_match_torch():
    # LLaMA's rotate_half halves, merged into one copy (a dim of 2, source stride -h): a
    # rows block along both dims whose destination is one run. Streamed, runs of whole
    # lines that start on one go line by line from the source (lib/copy_plan.c,
    # tile_rows_joined); runs of a line and a half, or starting inside a line, through
    # L1. Every element size, blocks whole and cut along c, prefetching or not, 1 and 3
    # threads, streamed and not.
    for dtype, run_bytes, dst_offset in itertools.product(SIZES, (64, 128, 96), (0, 64, 8)):
        h = run_bytes // dtype.itemsize
        spec = CopySpec((301, 2, h), (2 * h, -h, 1), h, (2 * h, h, 1),
                        dst_offset // dtype.itemsize, dtype, dtype)
        plans = [p for p in candidate_plans(spec, CACHES, limit=16)
                 if p.kernel == "rows" and p.a_loop >= 0 and p.c_loop >= 0]
        assert plans, spec
        plan = plans[0]
        c = plan.loops[plan.c_loop]
        for step, prefetch in itertools.product((c.step, 7), (False, True)):
            loops = list(plan.loops)
            loops[plan.c_loop] = dataclasses.replace(c, step=min(step, c.step))
            _run_every([dataclasses.replace(plan, loops=tuple(loops), prefetch=prefetch)],
                       spec)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_short_runs_of_a_block_that_is_one_run_match_torch(stream):
    # (A, C, n).permute(1, 0, 2) with runs of n elements shorter than 32 bytes (the random
    # suite's rand16_r3_int8 of seed 393691538, 9 x 64255 x 3 int8: a transpose of 3-byte
    # elements): a block of runs along both dims whose destination is one run moves each
    # run as one word (lib/copy_plan.c, rows_words; streamed, through L1); its last runs'
    # words would pass the block's destination (a thread's neighbour's) or the source's
    # end. Every element size, 1 and 3 threads, blocks whole and cut along c; streamed,
    # blocks of more parts than L1's buffer takes at once (2001 of 9 runs: several fills)
    # and blocks that end inside the line they start in (2 x 3 runs).
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for dtype, (runs, parts) in itertools.product(SIZES, ((9, 301), (9, 2001), (2, 3))):
            for n in range(1, 32 // dtype.itemsize):
                if dtype.itemsize * n in (1, 2, 4, 8):
                    continue  # whole elements of the library's sizes
                spec = permute_spec((runs, parts, n), (1, 0, 2), dtype, dst_offset=1)
                plans = [p for p in candidate_plans(spec, CACHES, limit=16)
                         if p.kernel == "rows" and p.a_loop >= 0 and p.c_loop >= 0]
                assert plans, spec
                for plan, threads in itertools.product(plans[:1], (1, 3)):
                    a, c = plan.loops[plan.a_loop], plan.loops[plan.c_loop]
                    assert a.step == a.extent and a.dst_stride == n
                    assert c.dst_stride == a.extent * n, plan.describe()
                    for step in (c.step, 7):
                        loops = list(plan.loops)
                        loops[plan.c_loop] = dataclasses.replace(c, step=min(step, c.step))
                        with _team(True, threads):
                            run_plan(dataclasses.replace(plan, loops=tuple(loops),
                                                         parallel=threads), spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("threads", [1, 3])
def test_lane_blocks_walked_along_a_loop_match_torch(streaming, threads):
    # MAE's unpatchify, x.view(n, h, w, p, q, c).permute(0, 5, 1, 3, 2, 4) (a deinterleave
    # of c lanes), and its patchify (the interleave back), for 2, 3 and 4 lanes of every
    # element size: blocks of one run of q pixels walked along the loop outside them, each
    # lane's run one or two whole lines from a line (streamed from the registers) or, at
    # a destination offset of one element, not; on 3 threads a thread's blocks start and
    # end inside that loop.
    for dtype, lanes in itertools.product(SIZES, (2, 3, 4)):
        for q, offset in ((64 // dtype.itemsize, 0), (128 // dtype.itemsize, 0),
                          (64 // dtype.itemsize, 1)):
            for sizes, perm, kernel in (((2, 3, 5, 4, q, lanes), (0, 5, 1, 3, 2, 4),
                                         "deinterleave"),
                                        ((2, lanes, 3, 4, 5, q), (0, 2, 4, 3, 5, 1),
                                         "interleave")):
                spec = permute_spec(sizes, perm, dtype, dst_offset=offset)
                plan = plan_copy(spec, CACHES)
                assert plan.kernel == kernel, plan.describe()
                with _team(True, threads):
                    run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)


@pytest.mark.parametrize(
    ("sizes", "perm"),
    [((16, 16, 2, 2, 128, 128), (0, 1, 4, 2, 5, 3)),   # F.pixel_shuffle(x, 2)
     ((16, 16, 2, 3, 96, 128), (0, 1, 4, 2, 5, 3)),    # two rows of three lanes
     ((8, 3, 2, 2, 64, 100), (0, 1, 4, 2, 5, 3))],
    ids=["pixel_shuffle", "three_lanes", "odd"],
)
def test_interleaved_rows_are_written_in_the_destinations_order(sizes, perm):
    # Each destination row interleaves lanes of a source plane, and the planes of a row
    # pair (the dim of 2 beside the rows) lie far apart in the source. Walked with that
    # dim outside the rows, every destination row starts a new stream, half a page from
    # the last; inside them, the destination is one stream and the source a few, each
    # going on where it left off two blocks before.
    plan = plan_copy(permute_spec(sizes, perm), CACHES)
    assert plan.kernel == "interleave"
    outer = [loop.dst_stride for loop in plan.loops[:-1]]
    assert outer == sorted(outer, reverse=True), plan.describe()


@pytest.mark.parametrize(
    ("sizes", "perm"),
    [((4, 3, 56, 4, 56, 4), (0, 3, 5, 1, 2, 4)),   # TResNet's space-to-depth, block 4
     ((2, 16, 64, 2, 64, 2), (0, 1, 3, 5, 2, 4)),  # F.pixel_unshuffle(x, 2)
     ((3, 5, 30, 3, 41, 3), (0, 3, 5, 1, 2, 4))],
    ids=["space_to_depth", "pixel_unshuffle", "odd"],
)
def test_deinterleaved_rows_are_read_in_the_sources_order(sizes, perm):
    # The reverse: each source row holds the lanes of K destination planes, the next
    # source row those of K more. Walked with the rows outside, the source is one stream
    # and the destination 2K, each going on where it left off K blocks before.
    plan = plan_copy(permute_spec(sizes, perm), CACHES)
    assert plan.kernel == "deinterleave"
    outer = [loop.src_stride for loop in plan.loops[:-1]]
    assert outer == sorted(outer, reverse=True), plan.describe()


@pytest.mark.parametrize("stream", [False, True])
def test_five_to_eight_lanes_match_torch(monkeypatch, stream):
    # K = 5 .. 8 lanes (a chain of K - 1 two-source permutes an output vector) at every
    # element size, both directions, including the pairs the planner leaves to the
    # transpose (LANE_LOSSES): whole vectors and a tail, a lane starting a line or not,
    # a run of whole lines streamed from the registers, on 1 and 3 threads.
    monkeypatch.setattr(copy_plan, "LANE_LOSSES", frozenset())
    previous = cpu.set_stream_threshold(0 if stream else None)
    try:
        for dtype, k in itertools.product(SIZES, range(5, 9)):
            line = 64 // dtype.itemsize
            for sizes, perm, kernel, offset in (((2, 3 * line, k), (0, 2, 1), "deinterleave", 0),
                                                ((3, 37, k), (2, 0, 1), "deinterleave", 1),
                                                ((2, k, 3 * line), (0, 2, 1), "interleave", 0),
                                                ((k, 3, 37), (1, 2, 0), "interleave", 1)):
                spec = permute_spec(sizes, perm, dtype, dst_offset=offset)
                plan = plan_copy(spec, CACHES)
                assert (plan.kernel, plan.lanes) == (kernel, k), plan.describe()
                for threads in (1, 3):
                    with _team(True, threads):
                        run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


def test_five_to_eight_lanes_are_planned_where_they_win():
    # A 7-lane byte deinterleave (the random suite's 2641869 x 3 x 7 .permute(2, 0, 1)) and
    # its interleave are lane kernels; a pair measured slower than the transpose
    # (LANE_LOSSES), a cast (its library has 4 lanes), a masked copy and a stride-7 slice
    # (compress takes 4 lanes at most) are not.
    seven = permute_spec((1000, 3, 7), (2, 0, 1), i8)
    assert (plan_copy(seven, CACHES).kernel, plan_copy(seven, CACHES).lanes) == ("deinterleave", 7)
    back = permute_spec((7, 3, 1000), (1, 2, 0), i8)
    assert (plan_copy(back, CACHES).kernel, plan_copy(back, CACHES).lanes) == ("interleave", 7)
    for kernel, size, k in copy_plan.LANE_LOSSES:
        dtype = next(d for d in SIZES if d.itemsize == size)
        spec = (permute_spec((1000, k), (1, 0), dtype) if kernel == "deinterleave"
                else permute_spec((k, 1000), (1, 0), dtype))
        assert plan_copy(spec, CACHES).kernel == "transpose", (kernel, size, k)
    cast = permute_spec((1000, 6), (1, 0), f32, DTYPES["float16"])
    assert plan_copy(cast, CACHES).kernel == "transpose"
    masked = dataclasses.replace(back, masks=(MaskBound((0, 0, 1), 0, 5),), fill=0)
    assert all(p.kernel != "interleave" for p in candidate_plans(masked, CACHES, limit=50))
    sliced = CopySpec((64, 100), (1400, 7), 0, (100, 1), 0, f32, f32)
    assert plan_copy(sliced, CACHES).kernel != "compress"


def test_a_transpose_streams_only_blocks_of_whole_lines():
    # Streamed, a destination row that starts or ends inside a line writes that line through
    # the cache between streamed ones: slower than no streaming (docs/cpu.md). Rows of
    # whole lines, or a block's rows that make one run, stream.
    for sizes, dst_offset, streams in (((2048, 1024), 0, True), ((2048, 1024), 3, False),
                                       ((2050, 1030), 0, False), ((100, 4000), 0, True)):
        spec = permute_spec(sizes, (1, 0), f32, dst_offset=dst_offset)
        # the best transpose (a matrix of 100 rows may gather through the table as fast)
        plan = next(p for p in candidate_plans(spec, CACHES, limit=64)
                    if p.kernel == "transpose")
        assert (plan.stream_bytes > 0) == streams, (sizes, dst_offset, plan.describe())
        # A copy larger than L2 prefetches each next block's source; a small one does not.
        assert plan.prefetch
        # Where the CPU streams partial lines well (Intel) every block streams, but the
        # model prices those lines as written through the cache: the same plans, ranked
        # the same, only streamed.
        partial = dataclasses.replace(CACHES, partial_streams=True)
        plans = candidate_plans(spec, CACHES, limit=64)
        again = candidate_plans(spec, partial, limit=64)
        assert [dataclasses.replace(p, stream_bytes=0) for p in plans] == \
               [dataclasses.replace(p, stream_bytes=0) for p in again]
        assert all(p.stream_bytes > 0 for p in again if p.kernel == "transpose"
                   and p.loops[p.b_loop].step * 4 >= copy_plan.PARTIAL_STREAM_BYTES
                   and p.loops[p.a_loop].step * 4 > copy_plan.LINE_BYTES)
        assert all(p.cost == plan_cost(p, partial) for p in again)
    # Rows shorter than PARTIAL_STREAM_BYTES do not stream there either (pitched, not one
    # run).
    short = CopySpec((1 << 16, 21), (1, 1 << 16), 0, (24, 1), 1, f32, f32)
    plans = [p for p in candidate_plans(short, partial, limit=64) if p.kernel == "transpose"]
    assert plans and all(p.stream_bytes < 0 for p in plans)
    # Nor does a skinny matrix's transpose, whose blocks' source rows are a line or shorter
    # (15 columns of float32, 31 of float16), or, where streams built in L1 are slow, whose
    # source block is one run with a side under THIN_JOINED_BYTES (48 columns of float32);
    # 96 columns of float32 stream.
    slow = dataclasses.replace(partial, slow_streams=True)
    for cols, dtype, host, streams in ((15, f32, partial, False),
                                       (31, DTYPES["float16"], partial, False),
                                       (48, f32, slow, False), (48, f32, partial, True),
                                       (96, f32, slow, True)):
        spec = permute_spec(((1 << 22) // cols, cols), (1, 0), dtype)
        plan = next(p for p in candidate_plans(spec, host, limit=64)
                    if p.kernel == "transpose")
        assert (plan.stream_bytes > 0) == streams, (cols, dtype, plan.describe())
    assert not plan_copy(permute_spec((100, 30), (1, 0), f32), CACHES).prefetch


def test_rows_blocks_of_runs_not_whole_lines_write_through_the_cache(monkeypatch):
    # A rows block whose destination is its runs joined, runs shorter than LONG_RUN_BYTES
    # and not whole lines: streamed, the library builds it in a buffer in L1 and streams
    # that, for less than streaming saves where such streams are slow (TTC's (0,2,1) on
    # 266 x 266 x 254 float32: 1.15x as long streamed on a Cascade Lake, docs/cpu.md).
    # Priced as before, so the same plans win; runs of whole lines (streamed straight from
    # the source) and long runs stream as they did, and every one streams elsewhere.
    slow = dataclasses.replace(CACHES, slow_streams=True)
    for sizes, streams in (((300, 300, 254), False), ((300, 300, 256), True),
                           ((60, 300, 600), True), ((3000, 30, 254), False)):
        spec = permute_spec(sizes, (1, 0, 2), f32)
        plan = plan_copy(spec, slow)
        assert plan.kernel == "rows", plan.describe()
        assert (plan.stream_bytes > 0) == streams, (sizes, plan.describe())
        assert copy_plan._rows_buffered(plan, slow) == (not streams and plan.a_loop >= 0)
        assert plan_copy(spec, CACHES) == dataclasses.replace(
            plan, stream_bytes=plan_copy(spec, CACHES).stream_bytes)
        assert plan_copy(spec, CACHES).stream_bytes > 0
        plans = candidate_plans(spec, slow, limit=64)
        with monkeypatch.context() as m:
            m.setattr(copy_plan, "_rows_buffered", lambda plan, caches: False)
            before = candidate_plans(spec, slow, limit=64)
            assert plan_copy(spec, slow).stream_bytes > 0  # streamed before
        assert [dataclasses.replace(p, stream_bytes=0) for p in plans] == \
               [dataclasses.replace(p, stream_bytes=0) for p in before]
    spec = permute_spec((16, 30, 254), (1, 0, 2), f32)
    run_plan(plan_copy(spec, slow), spec)


@pytest.mark.parametrize("caches", [CACHES, dataclasses.replace(CACHES, partial_streams=True)])
def test_thin_transpose_blocks_one_run_on_a_side_write_through_the_cache(caches, monkeypatch):
    # A block one run on one side (the destination's rows, or the source's, follow on)
    # with a side shorter than THIN_JOINED_BYTES: streamed, it went through a buffer in L1
    # for less than that saved (TTC's (2,0,4,1,5,3) on 13 x 13 x 13 x 26 x 13 x 26 float32:
    # 30.5 ms streamed, 23.1 through the cache, docs/cpu.md). Priced as before, so the same
    # plans win; bytes, sides of THIN_JOINED_BYTES or more and destination rows of whole
    # lines (64 channels of float32) stream as they did.
    fast, caches = caches, dataclasses.replace(caches, slow_streams=True)
    streamed_elsewhere = 0
    i8, f64 = DTYPES["int8"], DTYPES["float64"]
    for sizes, perm, dtype, streams in (((40, 1 << 20), (1, 0), f32, False),
                                        ((999999, 40), (1, 0), f32, False),
                                        ((3000, 26, 338), (0, 2, 1), f32, False),
                                        ((100, 1 << 20), (1, 0), f32, True),
                                        ((1 << 20, 40), (1, 0), f64, True),
                                        ((40, 1 << 20), (1, 0), i8, True),
                                        ((64, 1 << 20), (1, 0), f32, True)):
        spec = permute_spec(sizes, perm, dtype)
        plan = plan_copy(spec, caches)
        assert plan.kernel == "transpose", plan.describe()
        assert (plan.stream_bytes > 0) == streams, (sizes, dtype, plan.describe())
        assert copy_plan._thin_joined(plan, caches) == (not streams)
        # where such streams are not slow (`Caches.slow_streams`), the same plan, streamed
        # unless it is a skinny matrix's (the test above)
        elsewhere = plan_copy(spec, fast)
        assert elsewhere == dataclasses.replace(plan, stream_bytes=elsewhere.stream_bytes)
        streamed_elsewhere += elsewhere.stream_bytes > 0 and not streams
        plans = candidate_plans(spec, caches, limit=64)
        with monkeypatch.context() as m:
            m.setattr(copy_plan, "_thin_joined", lambda plan, caches: False)
            before = candidate_plans(spec, caches, limit=64)
        # the same plans at the same prices, in the same order: only their stores differ
        assert [dataclasses.replace(p, stream_bytes=0) for p in plans] == \
               [dataclasses.replace(p, stream_bytes=0) for p in before]
    assert streamed_elsewhere >= 1
    spec = permute_spec((64, 26, 338), (0, 2, 1), f32)
    run_plan(plan_copy(spec, caches), spec)


def test_a_deinterleave_streams_only_lanes_that_start_on_a_line():
    # (N, 3) -> (3, N): each lane's run is streamed in pieces of a few KiB; where a lane
    # starts inside a line (N odd), so does every piece, written through the cache.
    for n, dst_offset, streams in ((1 << 20, 0, True), ((1 << 20) + 1, 0, False),
                                   (1 << 20, 3, False)):
        plan = plan_copy(permute_spec((n, 3), (1, 0), f32, dst_offset=dst_offset), CACHES)
        assert plan.kernel == "deinterleave"
        assert (plan.stream_bytes > 0) == streams, (n, dst_offset, plan.describe())


def test_an_interleave_streams_only_runs_that_are_long_or_whole_lines():
    # Each block's destination run is built in L1 and streamed: 7 pixels of 3 float64
    # lanes (168 bytes) would stream partial lines; 8192 pixels stream, and so do runs
    # under a line (21 bytes), which through the cache would read a line each.
    short = (53, 15, 3, 325, 7), (1, 3, 0, 4, 2)
    for sizes, perm, dtype, streams in ((*short, DTYPES["float64"], False),
                                        (*short, DTYPES["uint8"], True),
                                        ((3, 1 << 20), (1, 0), DTYPES["float64"], True)):
        lanes = [p for p in candidate_plans(permute_spec(sizes, perm, dtype), CACHES, limit=64)
                 if p.kernel == "interleave"]
        assert lanes, (sizes, dtype)
        assert all((p.stream_bytes > 0) == streams for p in lanes), (sizes, dtype)


def test_plans_are_data_and_the_same_for_the_same_copy():
    spec = permute_spec((6, 40, 50), (2, 0, 1))
    first, again = candidate_plans(spec, CACHES), candidate_plans(spec, CACHES)
    assert first == again and len(first) > 1
    assert all(dataclasses.is_dataclass(p) and hash(p) for p in first)
    assert [p.cost for p in first] == sorted(p.cost for p in first)
    assert first[0].cost == plan_cost(first[0], CACHES)


def test_the_planner_leaves_symbols_and_unwritten_masked_blocks_alone():
    from stridec.compiler.codegen.spec import MaskBound
    from stridec.ir.symbols import symbol

    spec = permute_spec((40, 50), (1, 0))
    masked = dataclasses.replace(spec, masks=(MaskBound((1, 0), 0, 3),))
    assert [p.kernel for p in candidate_plans(masked)][:1] == ["transpose"]
    # Masked points left unwritten: an interleave writes its lanes together (a transpose
    # takes it), a deinterleave takes no masks.
    pack = permute_spec((3, 4, 37, 41), (0, 2, 3, 1), masks=(MaskBound((0, 1, 0, 0), 0, 3),),
                        fill=None)
    assert {p.kernel for p in candidate_plans(pack)} == {"transpose"}
    cast = permute_spec((40, 50), (1, 0), f32, DTYPES["float16"])  # a masked cast: taken
    masked_cast = candidate_plans(dataclasses.replace(cast, masks=(MaskBound((1, 0), 0, 3),)))
    assert masked_cast[0].kernel == "transpose" and masked_cast[0].masks
    n = symbol("N")
    assert candidate_plans(CopySpec((n, 50), (50, 1), 0, (1, n), 0, f32, f32)) == []


def test_routed_copies_run_on_the_library():
    kernel = generate_c_copy(permute_spec((300, 500), (1, 0)))
    assert kernel.strategy == "tiled_transpose"
    assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(4)]
    assert kernel.source == cplan.plan_unit_source(4)


def test_byte_casts_transposed_run_on_the_library():
    for dst in ("float32", "int32", "float16", "bfloat16", "int16", "float64", "int64"):
        spec = permute_spec((300, 500), (1, 0), DTYPES["uint8"], DTYPES[dst])
        kernel = generate_c_copy(spec)
        assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(1, ("uint8", dst))]


def test_byte_transposes_run_on_the_library():
    kernel = generate_c_copy(permute_spec((300, 500), (1, 0), DTYPES["int8"]))
    assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(1)]


def test_padded_byte_transposes_of_few_lanes_run_on_the_library():
    # A masked transpose into rows of 16 or 32 bytes holding 3 valid ones (NCHW16 and
    # NCHW32 packs of 3 channels), of 2-byte elements, and rows holding 30 valid bytes.
    for dtype, rows, valid in ((DTYPES["int8"], 32, 3), (DTYPES["int8"], 16, 3),
                               (DTYPES["float16"], 32, 3), (DTYPES["int8"], 32, 30)):
        spec = dataclasses.replace(permute_spec((rows, 300), (1, 0), dtype),
                                   masks=(MaskBound((0, 1), 0, valid),))
        plan = candidate_plans(spec)[0]
        assert plan.kernel == "transpose" and plan.masks
        kernel = generate_c_copy(spec)
        assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(dtype.itemsize)]


def test_a_chosen_candidate_is_the_call_of_that_plan():
    # What a measured choice does: take another candidate, get its block, run it.
    spec = permute_spec((7, 300, 45), (2, 1, 0), i16)
    plans = candidate_plans(spec, CACHES)
    assert len(plans) >= 2 and plans[0].cost <= plans[1].cost
    assert cplan.planned_call(spec)[1] == cplan.plan_params(plan_copy(spec))
    cls, params = cplan.planned_call(spec, plans[1])
    assert (cls.symbol, params) == (cplan.plan_symbol(2), cplan.plan_params(plans[1]))
    run_plan(plans[1], spec)


def test_flips_and_gathers_run_on_the_library():
    # flips of runs of a vector (a vector reversed in a register) and shorter (an element
    # at a time), gathers: library calls
    for size, dtype in ((1, i8), (4, f32)):
        for spec in (CopySpec((30, 64 // size), (64, -1), 64 // size - 1, (64 // size, 1), 0,
                              dtype, dtype),
                     CopySpec((30, 7), (7, -1), 6, (7, 1), 0, dtype, dtype),
                     CopySpec((19, 23), (50, 7), 1, (23, 1), 0, dtype, dtype)):
            kernel = generate_c_copy(spec)
            assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(size)]
            assert kernel.strategy == ("gather" if spec.src_strides[1] == 7 else "reverse")


@pytest.mark.parametrize("threads", [1, 3])
def test_gathers_and_short_flips_go_an_element_at_a_time(threads):
    # work_elements: the blocks along the innermost loop of several walked by additions,
    # the odometer moved at the end of them, a thread's share starting and ending inside
    # such a walk (blocks of one row: 1 and 3 threads, several blocks a thread); runs cut
    # into blocks (no walk); a flip inside a third dim, and a cast's gather
    for dtype in SIZES:
        specs = [CopySpec((5, 37, 7), (300, 7, -1), 6, (259, 7, 1), 0, dtype, dtype),
                 CopySpec((3, 41, 13), (-700, 17, 5), 2000, (533, 13, 1), 0, dtype, dtype),
                 CopySpec((4, 9), (-2, -29), 300, (1, 4), 0, dtype, dtype)]
        for spec in specs:
            plan = plan_copy(spec, CACHES)
            assert plan.kernel in ("gather", "reverse"), plan.describe()
            run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)
            b = plan.loops[plan.b_loop]
            cut = tuple(dataclasses.replace(loop, step=min(loop.extent, 3)) if loop == b
                        else loop for loop in plan.loops)
            run_plan(dataclasses.replace(plan, parallel=threads, loops=cut), spec, threads)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_long_rows_run_in_groups_on_the_library(stream):
    # Runs longer than 4 KiB apart in the source (a slice's rows): blocks of runs along the
    # loop outside them, streamed four at a time line by line; 11 rows leave a partial
    # group, blocks of 4 and 8 rows prefetch the next block's runs, an odd destination
    # offset gives every run a head before its first whole line.
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for dtype in SIZES:
            n = 4096 // dtype.itemsize + 5
            spec = _spec((11, n), (n + 7, 1), 3, dtype, dst_offset=1)
            plan = plan_copy(spec, CACHES)
            assert plan.kernel == "rows" and plan.a_loop == 0, plan.describe()
            kernel = generate_c_copy(spec)
            assert [call[0] for call in kernel.calls] == [cplan.plan_symbol(dtype.itemsize)]
            for rows in (4, 8, 11):
                loops = (dataclasses.replace(plan.loops[0], step=rows), plan.loops[1])
                for threads in (1, 3):
                    run_plan(dataclasses.replace(plan, loops=loops, prefetch=True,
                                                 parallel=threads), spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


def test_caches_are_read_from_sysfs(tmp_path):
    for index, (level, kind, size, ways) in enumerate(
            [(1, "Data", "48K", 12), (1, "Instruction", "32K", 8), (2, "Unified", "2048K", 16),
             (3, "Unified", "96M", 16)]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("ways_of_associativity", ways), ("coherency_line_size", 64)):
            (folder / name).write_text(f"{value}\n")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nTLB size\t: 3584 4K pages\n\nprocessor\t: 1\n")
    assert read_caches(str(tmp_path), str(cpuinfo)) == Caches(48 << 10, 2 << 20, 96 << 20, 12,
                                                             16, 64, True, 3584)
    assert read_caches(str(tmp_path), str(tmp_path / "none")).tlb_pages == Caches().tlb_pages
    # Fewer pages than any last-level TLB holds: an L1 TLB's (a VM's CPUID), not read.
    for pages, read in ((MIN_TLB_PAGES - 1, Caches().tlb_pages), (MIN_TLB_PAGES, MIN_TLB_PAGES),
                        (192, Caches().tlb_pages)):
        cpuinfo.write_text(f"processor\t: 0\nTLB size\t: {pages} 4K pages\n")
        assert read_caches(str(tmp_path), str(cpuinfo)).tlb_pages == read, pages
    assert read_caches(str(tmp_path / "none")) is None
    # AVX-512 (its vector gathers) from the first processor's flags alone.
    for flags, gathers in (("fpu sse2 avx2 avx512f avx512bw", True), ("fpu sse2 avx2", False)):
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n"
                           "processor\t: 1\nflags\t\t: avx512f\n")
        assert read_caches(str(tmp_path), str(cpuinfo)).gathers == gathers
    # Slow gathers and streams: Intel's AVX-512 without its FP16 (before Sapphire Rapids).
    for vendor, flags, slow in (("GenuineIntel", "avx2 avx512f avx512bw", True),
                                ("GenuineIntel", "avx512f avx512_fp16 amx_tile", False),
                                ("GenuineIntel", "avx2", False),
                                ("AuthenticAMD", "avx2 avx512f avx512bw", False)):
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n\n"
                           "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: avx512f\n")
        caches = read_caches(str(tmp_path), str(cpuinfo))
        assert caches.slow_gathers == caches.slow_streams == slow, (vendor, flags)
        # Gathers a lane a cycle: AMD's with AVX-512.
        assert caches.lane_gathers == (vendor == "AuthenticAMD" and "avx512f" in flags)
    # Streamed partial lines from the first processor's vendor (Intel's).
    for vendor, partial in (("GenuineIntel", True), ("AuthenticAMD", False)):
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\n\n"
                           "processor\t: 1\nvendor_id\t: GenuineIntel\n")
        assert read_caches(str(tmp_path), str(cpuinfo)).partial_streams == partial
    cpuinfo.write_text("processor\t: 0\nTLB size\t: 3584 4K pages\n\nprocessor\t: 1\n")
    # The L3 counts at most LLC_PER_CPU for each CPU that shares it.
    for cpus, cpu_list in ((2, "0-1\n"), (8, "0,2-4,6-9\n")):
        (tmp_path / "index3" / "shared_cpu_list").write_text(cpu_list)
        caches = read_caches(str(tmp_path), str(cpuinfo))
        assert caches.l3_cpus == cpus and caches.l3 == 96 << 20
        assert caches.last_level == min(96 << 20, cpus * LLC_PER_CPU)
    (tmp_path / "index3" / "shared_cpu_list").write_text("garbage\n")
    assert read_caches(str(tmp_path), str(cpuinfo)).last_level == 96 << 20


# --------------------------------------------------------------------------- the kernels


def _kernel_cases() -> list[tuple[str, CopySpec]]:
    """A copy of each micro-kernel, each element size, odd extents."""
    cases = []
    for dtype in SIZES:
        cases += [
            ("rows", _spec((37, 301), (405, 1), 2, dtype)),
            ("transpose", permute_spec((133, 71), (1, 0), dtype, dst_offset=1)),
            # destination rows of whole lines, each starting one: streamed from registers
            ("transpose_lines", permute_spec((128, 200), (1, 0), dtype)),
            ("transpose_lines_off", permute_spec((128, 200), (1, 0), dtype, dst_offset=64)),
            ("transpose_small", permute_spec((5, 3, 67, 2), (0, 3, 2, 1), dtype)),
            ("transpose_sides", permute_spec((6, 5, 7, 3, 4), (4, 2, 0, 3, 1), dtype)),
            ("flipped", CopySpec((40, 70), (-1, -40), 2799, (70, 1), 0, dtype, dtype)),
            ("broadcast", CopySpec((31, 45, 3), (0, 1, 45), 0, (135, 3, 1), 0, dtype, dtype)),
            ("overlap", CopySpec((50, 33), (3, 1), 0, (33, 1), 0, dtype, dtype)),  # unfold
            ("overlap_transpose", CopySpec((50, 40), (1, 3), 0, (40, 1), 0, dtype, dtype)),
            ("gather", CopySpec((19, 23), (50, 3), 1, (23, 1), 0, dtype, dtype)),
            ("reverse", CopySpec((19, 77), (80, -1), 76, (77, 1), 0, dtype, dtype)),  # flip
            ("reverse_short", CopySpec((40, 5), (7, -1), 4, (5, 1), 0, dtype, dtype)),
            ("reverse_all", CopySpec((9, 131), (-131, -1), 9 * 131 - 1, (131, 1), 0, dtype,
                                     dtype)),
            ("strided_dst", CopySpec((19, 23), (23, 1), 0, (70, 3), 1, dtype, dtype)),
            # a batch of 2 x 3 matrices, each contiguous on both sides
            ("permute", permute_spec((37, 5, 2, 3), (0, 1, 3, 2), dtype)),
        ]
        for k in (2, 3, 4):
            cases += [
                (f"deinterleave{k}", permute_spec((3, 37, 41, k), (0, 3, 1, 2), dtype)),
                (f"interleave{k}", permute_spec((3, k, 37, 41), (0, 2, 3, 1), dtype)),
                (f"compress{k}", _spec((9, 101), (101 * k + 5, k), 1, dtype)),
            ]
        # masked: the fill outside a box (a pad), a pack's padded lanes, masks along two
        # dims of a transpose's block (staged), a diagonal band (coefficients of 2 and -3),
        # masked points left unwritten (fill None), and a fill alone
        rows, cols = MaskBound((1, 0), 3, 30), MaskBound((0, 1), 5, 290)
        cases += [
            ("masked_rows", _masked(_spec((37, 301), (405, 1), 2, dtype), (rows, cols), 7)),
            ("masked_rows_unwritten", _masked(_spec((37, 301), (405, 1), 2, dtype),
                                              (rows, cols), None)),
            ("masked_band", _masked(_spec((37, 301), (405, 1), 2, dtype),
                                    (MaskBound((2, -3), -500, 20),), -1)),
            ("masked_transpose", _masked(permute_spec((133, 71), (1, 0), dtype),
                                         (MaskBound((1, 0), 9, 60), MaskBound((0, 1), 2, 120)),
                                         5)),
            ("masked_transpose_band", _masked(permute_spec((133, 71), (1, 0), dtype),
                                              (MaskBound((1, 1), 30, 150),), 5)),
            ("masked_transpose_cols", _masked(permute_spec((133, 71), (1, 0), dtype),
                                              (MaskBound((0, 1), 40, 100),), 5)),
            ("masked_transpose_unwritten", _masked(permute_spec((133, 71), (1, 0), dtype),
                                                   (MaskBound((1, 1), 30, 150),
                                                    MaskBound((1, 0), 0, 60)), None)),
            ("masked_unpack_unwritten", _masked(permute_spec((2, 9, 31, 8), (0, 3, 1, 2), dtype),
                                                (MaskBound((0, 1, 0, 0), 0, 5),), None)),
            ("masked_pack", _masked(permute_spec((2, 8, 9, 31), (0, 2, 3, 1), dtype),
                                    (MaskBound((0, 0, 0, 1), 0, 5),), 3)),
            ("masked_interleave", _masked(permute_spec((3, 4, 37, 41), (0, 2, 3, 1), dtype),
                                          (MaskBound((0, 1, 0, 1), 0, 3),), 3)),
            ("masked_interleave_both", _masked(permute_spec((3, 4, 37, 41), (0, 2, 3, 1), dtype),
                                               (MaskBound((0, 0, 1, 1), 4, 30),), 3)),
            ("masked_gather", _masked(CopySpec((19, 23), (50, 5), 1, (23, 1), 0, dtype, dtype),
                                      (MaskBound((1, 1), 4, 30),), 2)),
            ("masked_reverse", _masked(CopySpec((19, 77), (80, -1), 76, (77, 1), 0, dtype, dtype),
                                       (MaskBound((0, 1), 10, 60),), 2)),
            ("masked_compress", _masked(_spec((9, 101), (101 * 3 + 5, 3), 1, dtype),
                                        (MaskBound((0, 1), 10, 60),), 2)),
            ("fill", CopySpec((37, 301), (0, 0), 0, (301, 1), 0, dtype, dtype,
                              (MaskBound((0, 0), 1, 1),), 9)),
            ("fill_strided", CopySpec((37, 30), (0, 0), 0, (70, 2), 1, dtype, dtype,
                                      (MaskBound((0, 0), 1, 1),), 9)),
        ]
    return cases


def _masked(spec: CopySpec, masks, fill) -> CopySpec:
    return dataclasses.replace(spec, masks=tuple(masks), fill=fill)


KERNEL_CASES = _kernel_cases()


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize(("name", "spec"), KERNEL_CASES,
                         ids=[f"{n}-{s.src_dtype.name}" for n, s in KERNEL_CASES])
def test_every_kernel_matches_torch(name, spec, stream, threads):
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        plans = candidate_plans(spec, CACHES, limit=3)
        assert plans
        with _team(True, threads):
            for plan in plans:
                # Force threads even on a small copy: several blocks per thread.
                run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)
                if stream and plan.stream_bytes < 0:  # the planner would not stream it
                    run_plan(dataclasses.replace(plan, parallel=threads, stream_bytes=1),
                             spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


def test_each_kernel_is_met():
    met = {plan_copy(spec, CACHES).kernel for _, spec in KERNEL_CASES}
    assert met == set(KERNELS)


@pytest.mark.parametrize("size", [4, 8])
def test_blocks_of_every_shape(size):
    # Every extent 1 .. 20 on both sides of a 2-D transpose (whole blocks, parts, edges of
    # both), with tiles of a few blocks: the masked (or overlapped) edges of each.
    dtype = f32 if size == 4 else f64
    for rows, cols in itertools.product(range(1, 21), range(1, 21)):
        spec = permute_spec((rows, cols), (1, 0), dtype)
        plan = plan_copy(spec, CACHES)
        loops = tuple(dataclasses.replace(loop, step=min(loop.extent, 9)) for loop in plan.loops)
        run_plan(dataclasses.replace(plan, loops=loops), spec)


def _planned(spec: CopySpec) -> bool:
    return spec.src_dtype == spec.dst_dtype and not spec.masks


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_specs().filter(_planned), st.sampled_from([1, 3]))
def test_random_copies_match_torch(spec, threads):
    for plan in candidate_plans(spec, CACHES, limit=2):
        run_plan(dataclasses.replace(plan, parallel=threads), spec, threads)


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_staged_and_prefetched_transposes(stream):
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for dtype in SIZES:
            for spec in (permute_spec((70, 3, 300), (2, 1, 0), dtype),
                         permute_spec((6, 5, 7, 3, 4), (4, 2, 0, 3, 1), dtype)):
                for plan in candidate_plans(spec, CACHES, limit=2):
                    small = tuple(dataclasses.replace(loop, step=min(loop.step, 5))
                                  for loop in plan.loops)  # several blocks to prefetch
                    for stage, loops in itertools.product((False, True), (plan.loops, small)):
                        run_plan(dataclasses.replace(plan, stage=stage, prefetch=True,
                                                     loops=loops, stream_bytes=1), spec)
    finally:
        cpu.set_stream_threshold(previous)


@needs_gcc
@pytest.mark.parametrize("flags", [PORTABLE, AVX2], ids=["portable", "avx2"])
@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_builds_without_avx512(tmp_path, flags, dtype):
    """Built without AVX-512 the blocks at an edge have no masked loads: a block that
    overlaps the one before where the edge allows, else a block through L1."""
    if flags == AVX2 and not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    size = dtype.itemsize
    lib = build_shared(cplan.plan_unit_source(size), tmp_path, f"plan{size}", flags)
    fn = _library(size, lib)
    specs = [spec for _, spec in KERNEL_CASES if spec.src_dtype == dtype]
    specs += [permute_spec((rows, cols), (1, 0), dtype) for rows, cols in ((5, 7), (9, 17))]
    # deinterleaves and interleaves of 5 .. 8 lanes (chains of two-source permutes)
    specs += [permute_spec((rows, cols), (1, 0), dtype)
              for rows, cols in ((67, 5), (6, 70), (61, 7), (8, 66))]
    # blocks of 3 pixels joined along a loop (lanes_joined), a deinterleave and back
    specs += [permute_spec((3, 5, 7, 5, 3, 3), (5, 0, 2, 3, 1, 4), dtype),
              permute_spec((3, 3, 35, 5, 3), (1, 3, 2, 4, 0), dtype)]
    # destination rows of two dims whose last strip overlaps the one before (the walk
    # along them steps back)
    specs += [permute_spec((3, 13, 5, 7), (3, 2, 0, 1), dtype),
              permute_spec((5, 3, 9, 7), (2, 3, 1, 0), dtype)]
    previous = cpu.set_stream_threshold(-1)
    try:
        for spec, threads, stream in itertools.product(specs, (1, 3), (False, True)):
            cpu.set_stream_threshold(0 if stream else -1)
            for plan in candidate_plans(spec, CACHES, limit=2):
                assert plan.elem_bytes == size, "the build is of one element size"
                run_plan(dataclasses.replace(plan, parallel=threads), spec, threads, fn)
    finally:
        cpu.set_stream_threshold(previous)


def test_rank_up_to_the_limit():
    # The nest has no rank of its own: a permutation of rank 8, and a gather over sixteen
    # dims of 2, plan and run as any other copy; so does a copy of MAX_RANK dims.
    sizes = (3, 2, 2, 2, 2, 2, 2, 5)
    spec = permute_spec(sizes, (7, 1, 6, 2, 5, 3, 4, 0))
    run_plan(plan_copy(spec, CACHES), spec)
    loops = tuple(Loop(k, 2, 1, 2 ** k, 2 ** (15 - k)) for k in range(16))
    plan = CopyPlan("gather", 4, loops, 0, 0, b_loop=15)
    src = torch.arange(2 ** 16, dtype=torch.int32)
    dst = torch.zeros(2 ** 16, dtype=torch.int32)
    params = cplan.plan_params(plan)
    _library(4)(src.data_ptr(), dst.data_ptr(), (ctypes.c_int64 * len(params))(*params), 1)
    # Element i of the destination is the source element at i's bits reversed.
    expected = torch.tensor([int(f"{i:016b}"[::-1], 2) for i in range(2 ** 16)],
                            dtype=torch.int32)
    assert torch.equal(dst, expected)
    sizes = (2,) * 5 + (1,) * (MAX_RANK - 10) + (3,) * 5
    perm = tuple(range(MAX_RANK))[::-1]
    spec = permute_spec(sizes, perm)
    plan = plan_copy(spec, CACHES)
    assert len(plan.loops) <= MAX_RANK
    run_plan(plan, spec)


def test_of_plans_priced_the_same_the_one_whose_writes_go_on_wins(monkeypatch):
    # 63 x 197 blocks of 3 x 3 runs of 100 bytes, each block 900 bytes on both sides: read
    # in turn and written 177 KB apart, or the other way round, priced the same. Writes that
    # start over each block took 1.3x as long (a store that misses holds the ones after
    # it; loads run ahead: docs/cpu.md), so the tie goes to the plan whose writes go on.
    i32 = DTYPES["int32"]
    spec = permute_spec((197, 63, 3, 3, 25), (1, 0, 3, 2, 4), i32)
    plans = candidate_plans(spec, CACHES, limit=2)
    assert plans[0].cost == plans[1].cost, [p.describe() for p in plans]
    assert [copy_plan._writes_restart(p) for p in plans] == [False, True]
    inner = [loop for loop in plans[0].loops if loop.count > 1][-1]
    assert inner.dst_stride == 3 * 3 * 25, plans[0].describe()
    with monkeypatch.context() as m:  # without the tie-break the other one wins
        m.setattr(copy_plan, "_writes_restart", lambda plan: False)
        before = candidate_plans(spec, CACHES, limit=2)
    assert [p.cost for p in before] == [p.cost for p in plans]
    assert copy_plan._writes_restart(before[0])
    # bytes keep the order the pricing gives them (measured level or slower)
    i8 = DTYPES["int8"]
    assert not any(copy_plan._writes_restart(p)
                   for p in candidate_plans(permute_spec((197, 63, 3, 3, 25),
                                                         (1, 0, 3, 2, 4), i8), CACHES))
    run_plan(plans[0], spec)
