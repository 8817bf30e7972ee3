"""C copy kernels (the `cpu` backend): each compared with torch on the whole destination
storage, which starts filled with a sentinel (an element the copy must not touch comes
back unchanged). Helpers and random specs are those of the Triton kernels' tests."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import subprocess
from collections.abc import Iterator

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from stridec.compiler.codegen.c.copy import generate_c_copy, generate_c_copy_batch
from stridec.compiler.codegen.c.parts import PARTS_DECLARATION, unit_parts
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.errors import BuildError
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu as build
from tests.compiler.test_codegen_copy import (
    b1,
    bf16,
    copy_specs,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    permute_spec,
    random_storage,
    reference_copy,
    sentinel,
    span,
)

u8, i16, u32 = DTYPES["uint8"], DTYPES["int16"], DTYPES["uint32"]


def launch(kernel, *storages: torch.Tensor) -> None:
    build.load_c_kernel(kernel.name, kernel.source, kernel.calls)((1,), *storages)


def run_c(spec: CopySpec, *, src: torch.Tensor | None = None, seed: int = 0, slack: int = 3):
    kernel = generate_c_copy(spec)
    gen = torch.Generator().manual_seed(seed)
    if src is None:
        src = random_storage(spec.src_dtype, span(spec, spec.src_strides, spec.src_offset), gen)
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + slack)
    expected = reference_copy(spec, src, dst)
    launch(kernel, src, dst)
    assert torch.equal(dst, expected), (kernel.strategy, spec)
    return kernel


@pytest.mark.parametrize("dtype", [i8, f16, f32, f64])
@pytest.mark.parametrize("sizes", [(70, 45), (16, 32), (3, 200), (129, 257), (300, 130)])
def test_transpose_every_element_size(dtype, sizes):
    # Shapes cover whole V×V blocks (16·32), block remainders on both sides and tiles of
    # several blocks (129·257 crosses the 128-element tile of 1-byte elements); 300·130
    # holds whole staged tiles of 1- and 2-byte elements (64 × 256 and 64 × 128) and their
    # partial neighbours.
    kernel = run_c(permute_spec(sizes, (1, 0), dtype))
    # a side of 2 .. 4 is the lanes of an interleave (codegen/c/lib/copy_lanes.h)
    assert kernel.strategy == ("interleave" if min(sizes) <= 4 else "tiled_transpose")


@pytest.mark.parametrize(
    ("sizes", "perm", "dtype"),
    [
        ((2, 5, 6, 7), (0, 2, 3, 1), f16),  # NCHW -> NHWC
        ((2, 9, 10, 3), (0, 3, 1, 2), f32),  # NHWC -> NCHW, C = 3
        ((2, 6, 5, 16), (0, 2, 1, 3), bf16),  # permute(0, 2, 1, 3): rows
        ((3, 4, 33, 17), (0, 1, 3, 2), i8),  # batched transpose
        ((2, 1, 3, 2, 1, 2, 3, 2), (7, 2, 0, 5, 1, 3, 6, 4), f32),  # rank 8
    ],
)
def test_permutes(sizes, perm, dtype):
    run_c(permute_spec(sizes, perm, dtype))


def test_strategies():
    assert generate_c_copy(CopySpec((4, 8), (8, 1), 0, (8, 1), 0, f32, f32)).strategy == "linear"
    assert generate_c_copy(permute_spec((16, 32), (1, 0))).strategy == "tiled_transpose"
    assert generate_c_copy(CopySpec((4, 8), (16, 2), 0, (8, 1), 0, f32, f32)).strategy == "compress"
    assert generate_c_copy(CopySpec((4, 8), (40, 5), 0, (8, 1), 0, f32, f32)).strategy == "gather"


def test_nchw_to_nchw4_pads_channels_with_fill():
    n, c, h, w = 2, 3, 5, 6
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
    src = random_storage(f32, n * c * h * w, torch.Generator().manual_seed(1))
    run_c(spec, src=src)  # exactly the source: the padding channel is never read
    run_c(dataclasses.replace(spec, fill=-1.5), src=src)
    run_c(dataclasses.replace(spec, fill=None), src=src)


def _pack_spec(n, c, hw, block, dtype, fill, *, chwn=False):
    """NCHW (H·W flattened) -> NC/block HW block (or CHWN-style C/block HW N block) with the
    channels past `c` masked: the padding of a pack."""
    groups = -(-c // block)
    src = (c * hw, block * hw, 1, hw)  # dims (n, group, hw, lane)
    if chwn:
        dst = (block, hw * n * block, n * block, 1)
    else:
        dst = (groups * hw * block, hw * block, block, 1)
    return CopySpec((n, groups, hw, block), src, 0, dst, 0, dtype, dtype,
                    (MaskBound((0, block, 0, 1), 0, c),), fill)


@pytest.mark.parametrize("dtype", [i8, f16, f32, f64])
@pytest.mark.parametrize("c", [2, 3, 4, 5])
def test_narrow_sides_interleave_in_registers(dtype, c):
    """Tiles with a side of 2 … 4 elements (NHWC with C = 3, NCHW4 packs) take the
    in-register interleaves; 5 (and 1) the column loop. Rows past several vectors and a
    remainder: H·W = 77."""
    run_c(permute_spec((2, c, 7, 11), (0, 2, 3, 1), dtype))  # NCHW -> NHWC: interleave
    run_c(permute_spec((2, 7, 11, c), (0, 3, 1, 2), dtype))  # NHWC -> NCHW: deinterleave
    src = random_storage(dtype, 2 * c * 77, torch.Generator().manual_seed(c))
    for block in (4, 32):
        for fill in (0, -3, None):
            run_c(_pack_spec(2, c, 77, block, dtype, fill), src=src)
            run_c(_pack_spec(2, c, 77, block, dtype, fill, chwn=True), src=src)


@pytest.mark.parametrize("dtype", [i8, f16, f32, f64])
@pytest.mark.parametrize(("n", "c", "hw"), [(9, 3, 77), (40, 4, 300), (5, 5, 140), (2, 1, 33)])
def test_chwn4_tiles_merge_the_batch_with_the_lanes(dtype, n, c, hw):
    """CHWN4: each destination row (one pixel of a group) is the batch times the 4 lanes,
    contiguous, so the tiles span both (the padding lanes read a row of the fill); merged
    sides past a tile (40·4), a block remainder (9·4 = 36), two groups (C = 5) and 1·4 = 4
    (a side shorter than a block: not merged)."""
    src = random_storage(dtype, n * c * hw, torch.Generator().manual_seed(n))
    for fill in (0, 7, None):
        run_c(_pack_spec(n, c, hw, 4, dtype, fill, chwn=True), src=src)


@pytest.mark.parametrize("c", [1, 2, 3, 5, 7])
@pytest.mark.parametrize(("n", "hw"), [(16, 77), (17, 33), (33, 301), (70, 16)])
def test_chwn4_groups_move_as_words(n, c, hw):
    """CHWN4 of 1-byte elements: blocks of 16 columns of 16 groups move as 32-bit words
    (AVX-512). A tile side of exactly 16 groups (N = 16), a remainder of one
    image (17, 33) and of 6 (70 = 4·16 + 6, two tiles of the merged side), columns past
    whole blocks (H·W = 77, 33, 301), one and two groups with padding lanes; the fill 0,
    7 or none (the padding left as it was), and source and destination offsets."""
    # room for the reference's view of the padding lanes past the last channel, + 1
    src = random_storage(i8, n * c * hw + 4 * hw + 1, torch.Generator().manual_seed(n + c))
    for fill in (0, 7, None):
        spec = _pack_spec(n, c, hw, 4, i8, fill, chwn=True)
        run_c(spec, src=src)
        run_c(dataclasses.replace(spec, dst_offset=3, src_offset=1), src=src)


@pytest.mark.parametrize("dtype", [i8, f16, f32, f64])
@pytest.mark.parametrize(("c", "block"), [(3, 32), (3, 64), (1, 32), (2, 16), (4, 64), (35, 64)])
def test_wide_padded_rows(dtype, c, block):
    """NCHW32/64 of a few channels: each pixel's row is the fill as whole vectors, then its
    channels (4 where they fit); with no fill the padding is left as it was."""
    src = random_storage(dtype, 3 * c * 150, torch.Generator().manual_seed(c))
    for fill in (0, -2, None):
        run_c(_pack_spec(3, c, 150, block, dtype, fill), src=src)


def test_fill_none_and_fill_only():
    spec = permute_spec(
        (6, 8), (1, 0), f32, masks=(MaskBound((1, 0), 0, 5), MaskBound((0, 1), 0, 3)), fill=None
    )
    run_c(spec)
    never = dataclasses.replace(spec, masks=(MaskBound((0, 0), 1, 1),))
    assert generate_c_copy(never).calls == () and generate_c_copy(never).numel == 0
    fill = CopySpec((4, 5), (5, 1), 0, (5, 1), 0, f32, i32, (MaskBound((1, 1), 10, 20),), 7)
    run_c(fill, src=torch.empty(0))


def test_flips_offsets_broadcasts_rank_0():
    run_c(CopySpec((6, 7), (-7, -1), 41, (7, 1), 0, f32, f32))
    run_c(CopySpec((6, 7), (7, 1), 0, (1, -6), 36, f32, f32))
    run_c(CopySpec((5, 9), (1, -5), 40, (9, 1), 2, f32, f32))
    run_c(CopySpec((5, 8), (1, 0), 0, (8, 1), 0, f32, f32))
    run_c(CopySpec((3, 4, 5), (0, 0, 0), 2, (20, 5, 1), 0, f16, f16))
    run_c(CopySpec((), (), 3, (), 2, f32, f32))
    run_c(CopySpec((4, 6), (12, 2), 5, (6, 1), 11, i8, i8))


# Widening, narrowing, float <-> int and <-> bool, of the suite's cast libraries
# (tests/cast_pairs.py).
SIMPLE_CASTS = [(i8, f32), (i16, f64), (i64, i32), (f32, f64), (f64, i8), (f32, b1),
                (bf16, b1), (b1, f32), (b1, f16), (b1, bf16), (i32, u32), (u8, i32)]


@pytest.mark.parametrize(("src", "dst"), SIMPLE_CASTS, ids=[f"{a}-{b}" for a, b in SIMPLE_CASTS])
def test_casts_in_every_strategy(src, dst):
    run_c(CopySpec((37, 129), (129, 1), 0, (129, 1), 0, src, dst))
    run_c(permute_spec((9, 13), (1, 0), src, dst))
    run_c(CopySpec((4, 8), (16, 2), 0, (8, 1), 0, src, dst))


REGISTER_CASTS = [(f32, f16), (f32, bf16), (f16, f32), (bf16, f32)]


@pytest.mark.parametrize(("src", "dst"), REGISTER_CASTS,
                         ids=[f"{a}-{b}" for a, b in REGISTER_CASTS])
def test_transposing_casts_convert_in_registers(src, dst):
    """float32 <-> float16 / bfloat16 transposed: on AVX-512 their blocks are converted in
    registers and stored straight to the destination: whole blocks
    (16 x 32, 64 x 64), tails of rows and columns, several tiles, a batch, destination rows
    that start mid-line."""
    for sizes in ((16, 32), (32, 16), (64, 64), (70, 45), (129, 257), (300, 130)):
        for dst_offset in (0, 3):
            run_c(permute_spec(sizes, (1, 0), src, dst, dst_offset=dst_offset))
    run_c(permute_spec((3, 45, 70), (0, 2, 1), src, dst))


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
def test_big_copies_run_on_several_threads_alike(torch_openmp):
    # Past PARALLEL_BYTES each thread takes a share of the units (rows, chunks or tiles),
    # on torch's OpenMP threads where torch has them, else on the pool's own workers.
    threads = torch.get_num_threads()
    has_openmp = "parallel backend: OpenMP" in torch.__config__.parallel_info()
    try:
        assert build.use_torch_openmp(torch_openmp) == (torch_openmp and has_openmp)
        torch.set_num_threads(3)
        run_c(CopySpec((1 << 19,), (1,), 0, (1,), 0, f32, f32))
        run_c(permute_spec((3, 300, 500), (0, 2, 1), f32))
        spec = CopySpec((700, 1000), (1000, 1), 0, (1000, 1), 0, f32, f32,
                        (MaskBound((1, 1), 100, 1500),), 3.0)
        run_c(spec)
    finally:
        torch.set_num_threads(threads)
        build.use_torch_openmp(True)


@pytest.mark.parametrize("threads", [1, 3])
def test_row_runs_cut_anywhere_between_threads(threads):
    # Rows are walked in runs of the innermost outer dim, the threads' shares of rows ending
    # inside runs (1295 rows of 37-row runs in 24 shares), with and without masks, for a
    # memcpy, a converting run and a strided gather; short rows read back to back along
    # another outer dim go in tiles of both dims (7 x 18 rows here: the last tiles partial),
    # with outer dims before, between and after the two.
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        run_c(permute_spec((5, 37, 7, 64), (0, 2, 1, 3), f32))
        run_c(permute_spec((5, 37, 7, 64), (0, 2, 1, 3), f32, f16))
        run_c(permute_spec((3, 5, 37, 7, 16), (0, 3, 1, 2, 4), f32))
        run_c(permute_spec((37, 2, 7, 3, 16), (3, 2, 0, 1, 4), i8))
        run_c(CopySpec((5, 7, 37, 64), (16576, 64, 448, 1), 0, (16576, 2368, 64, 1), 0,
                       f32, f32, (MaskBound((0, 0, 1, 0), 2, 30),), 7.0))
        compress = run_c(CopySpec((5, 7, 37, 32), (16576, 64, 448, 2), 0, (8288, 1184, 32, 1),
                                  0, f32, f32))
        assert compress.strategy == "compress"  # every other element: the lane kernel
        gather = run_c(CopySpec((5, 7, 37, 12), (16576, 64, 448, 5), 0, (3108, 444, 12, 1),
                                0, f32, f32))
        assert gather.strategy == "gather"
        # Long rows in chunks (3 rows of 40000 in 4 chunks each), shares ending mid-row.
        run_c(CopySpec((3, 40000), (40007, 1), 5, (40000, 1), 0, f32, f32))
        run_c(CopySpec((3, 40000), (40007, 1), 5, (40000, 1), 0, f32, f32,
                       (MaskBound((7, 1), 100, 39000),), 2.0))
    finally:
        torch.set_num_threads(saved)


def test_64_bit_mask_sums():
    # Mask sums far past 2^31 over a small tensor: 2^40·i + j must not wrap.
    big = 1 << 40
    masked = CopySpec((4, 5), (5, 1), 0, (5, 1), 0, f32, f32,
                      (MaskBound((big, 1), big, 3 * big),), 9.0)
    run_c(masked)


def test_batch_runs_every_member():
    a = CopySpec((3, 4), (4, 1), 0, (8, 1), 0, f32, f32)
    b = CopySpec((3, 4), (1, 3), 0, (8, 1), 4, f32, f32)
    kernel = generate_c_copy_batch([a, b])
    assert len(kernel.calls) == 2 and kernel.strategy == "batch(linear,deinterleave)"
    src_a = torch.randn(12)
    src_b = torch.randn(12)
    dst = torch.zeros(24)
    launch(kernel, dst, src_a, src_b)
    expected = torch.cat([src_a.view(3, 4), src_b.view(4, 3).t()], 1).reshape(-1)
    assert torch.equal(dst, expected)


@contextlib.contextmanager
def _team(torch_openmp: bool, threads: int) -> Iterator[None]:
    """Kernels run on `threads` threads, on torch's OpenMP team or the pool's own
    workers; both restored after."""
    saved = torch.get_num_threads()
    try:
        build.use_torch_openmp(torch_openmp)
        torch.set_num_threads(threads)
        yield
    finally:
        torch.set_num_threads(saved)
        build.use_torch_openmp(True)


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
def test_batch_members_share_one_parallel_region(torch_openmp, threads):
    # A cat of a row copy and a transpose big enough for threads, and a small member that
    # wants none: every member's units are claimed from one list in one region.
    n, widths = 300, (1000, 500, 4)
    total = sum(widths)
    specs = [
        CopySpec((n, 1000), (1000, 1), 0, (total, 1), 0, f32, f32),
        CopySpec((n, 500), (1, n), 0, (total, 1), 1000, f32, f32),
        CopySpec((n, 4), (4, 1), 0, (total, 1), 1500, f32, f32),
    ]
    kernel = generate_c_copy_batch(specs)
    gen = torch.Generator().manual_seed(3)
    srcs = [torch.randn(n * w, generator=gen) for w in widths]
    with _team(torch_openmp, threads):
        launcher = build.load_c_kernel(kernel.name, kernel.source, kernel.calls)
        assert launcher._batch is not None
        dst = torch.full((n * total + 3,), -7.0)
        launcher((1,), dst, *srcs)
    pieces = [srcs[0].view(n, 1000), srcs[1].view(500, n).t(), srcs[2].view(n, 4)]
    assert torch.equal(dst[: n * total], torch.cat(pieces, 1).reshape(-1))
    assert torch.equal(dst[n * total:], torch.full((3,), -7.0))


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [2, 3, 7])
def test_batch_slices_every_member_between_threads(torch_openmp, threads):
    # Thread t's part is slice t of every member: members of odd unit counts (331 rows;
    # 5 rows of 3 chunks each), members with fewer units than threads (2 rows; 1 row),
    # and a member wanting no thread (negative units), over storage filled with a
    # sentinel: every element written once and nothing past the batch.
    n, widths = 331, (700, 3, 5, 9)
    total = sum(widths)
    specs = [
        CopySpec((n, 700), (700, 1), 0, (total, 1), 0, f32, f32),
        CopySpec((n, 3), (1, n), 0, (total, 1), 700, f32, f32),
        CopySpec((2, 5), (5, 1), 0, (total, 1), 703, f32, f32),
        CopySpec((1, 9), (9, 1), 0, (total, 1), 708, f32, f32),
        CopySpec((5, 40000), (40000, 1), 0, (40000, 1), n * total, f32, f32),
    ]
    kernel = generate_c_copy_batch(specs)
    gen = torch.Generator().manual_seed(threads)
    srcs = [torch.randn(math.prod(s.sizes), generator=gen) for s in specs]
    with _team(torch_openmp, threads):
        launcher = build.load_c_kernel(kernel.name, kernel.source, kernel.calls)
        assert launcher._batch is not None
        dst = torch.full((n * total + 5 * 40000 + 7,), -7.0)
        expected = dst.clone()
        for spec, src in zip(specs, srcs, strict=True):
            view = torch.as_strided(src, spec.sizes, spec.src_strides, spec.src_offset)
            torch.as_strided(expected, spec.sizes, spec.dst_strides, spec.dst_offset).copy_(view)
        for _ in range(3):
            dst.fill_(-7.0)
            launcher((1,), dst, *srcs)
            assert torch.equal(dst, expected)


def test_batch_called_from_two_threads_at_once():
    # Each Python thread sets up the batch's jobs in a buffer of its own.
    import threading

    n, total = 3000, 96
    specs = [CopySpec((n, 32), (32, 1), 0, (total, 1), 0, f32, f32),
             CopySpec((n, 64), (64, 1), 0, (total, 1), 32, f32, f32)]
    kernel = generate_c_copy_batch(specs)
    launcher = build.load_c_kernel(kernel.name, kernel.source, kernel.calls)
    failures = []

    def worker(seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        for _ in range(40):
            a, b = torch.randn(n * 32, generator=gen), torch.randn(n * 64, generator=gen)
            dst = torch.zeros(n * total)
            launcher((1,), dst, a, b)
            if not torch.equal(dst, torch.cat([a.view(n, 32), b.view(n, 64)], 1).reshape(-1)):
                failures.append(seed)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_specs())
def test_random_specs_match_torch(spec):
    kernel = run_c(spec)
    assert kernel.numel in (0, spec.numel)


def test_one_library_serves_every_copy_of_a_class():
    first = generate_c_copy(permute_spec((5, 7), (1, 0), f32))
    second = generate_c_copy(permute_spec((2, 30, 11), (0, 2, 1), i32))
    assert first.source == second.source and first.calls != second.calls


def test_missing_compiler_names_the_tool_and_the_source(monkeypatch, tmp_path):
    monkeypatch.setenv("STRIDEC_CC", "stridec-no-such-cc")
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match=r"'stridec-no-such-cc' not found.*\.c"):
        build.load_unit("int stridec_unit_for_a_missing_compiler;\n")
    assert not build.available()


def test_failed_build_names_the_compiler_and_keeps_the_source(monkeypatch, tmp_path):
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match=r"failed with exit status .* on (\S+\.c)") as info:
        build.load_unit("this is not C;\n")
    path = info.value.args[0].split(" on ")[1].split(":")[0]
    assert open(path).read() == "this is not C;\n"


_PARTS_UNIT = PARTS_DECLARATION + """
#define STRIDEC_PARTS 2
PART_FN long stridec_parts_twice(long x);
#if IN_PART(1)
long stridec_parts_probe(long x) { return stridec_parts_twice(x) + 1; }
#endif
#if IN_PART(2)
PART_FN long stridec_parts_twice(long x) { return 2 * x@BROKEN@; }
#endif
"""


def test_a_unit_in_parts_builds_each_part_once_and_links_them(monkeypatch, tmp_path):
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    source = _PARTS_UNIT.replace("@BROKEN@", "")
    assert unit_parts(source) == 2 and unit_parts("int x;\n") == 1
    runs, processes = build.BUILD_STATS.compiler_runs, build.BUILD_STATS.compiler_processes
    lib = build.load_unit(source)
    assert lib.stridec_parts_probe(20) == 41  # part 1 calls into part 2
    assert build.BUILD_STATS.compiler_runs - runs == 1
    assert build.BUILD_STATS.compiler_processes - processes == 3  # two parts and the link
    assert not hasattr(lib, "stridec_parts_twice")  # a part's function is hidden
    assert not list((tmp_path / "kernels" / "c").glob("*.o"))  # the objects are removed


def test_a_failed_part_names_the_compiler_and_keeps_the_source(monkeypatch, tmp_path):
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    source = _PARTS_UNIT.replace("@BROKEN@", " +")
    with pytest.raises(BuildError, match=r"failed with exit status .* on (\S+\.c)") as info:
        build.load_unit(source)
    path = info.value.args[0].split(" on ")[1].split(":")[0]
    assert open(path).read() == source
    assert not [p for p in (tmp_path / "kernels" / "c").iterdir() if p.suffix in (".o", ".so")]


def test_a_corrupt_cached_library_is_rebuilt(tmp_path):
    source = "long stridec_corrupt_probe(void) { return 7; }\n"
    code = (
        "import sys; from stridec.runtime.backends import cpu as b;"
        f"lib = b.load_unit({source!r}); print(lib.stridec_corrupt_probe(),"
        " b.BUILD_STATS.compiler_runs, b.BUILD_STATS.disk_loads)"
    )
    env = {**__import__("os").environ, "STRIDEC_CACHE_DIR": str(tmp_path)}

    def run() -> str:
        return subprocess.run(["python", "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout.split()

    assert run() == ["7", "1", "0"]  # built
    assert run() == ["7", "0", "1"]  # loaded from disk
    (lib,) = (tmp_path / "kernels" / "c").glob("*.so")
    lib.write_bytes(lib.read_bytes()[:100])  # truncated
    assert run() == ["7", "1", "0"]  # rebuilt
    assert run() == ["7", "0", "1"]


def test_toolchain_key_covers_compiler_flags_and_cpu(monkeypatch):
    key = build._toolchain_key(build.compiler())
    monkeypatch.setattr(build, "_cpu_features", lambda: "another machine")
    monkeypatch.setattr(build, "_toolchain", {})
    assert build._toolchain_key(build.compiler()) != key
    monkeypatch.setattr(build, "CFLAGS", (*build.CFLAGS, "-DX"))
    monkeypatch.setattr(build, "_toolchain", {})
    assert build._toolchain_key(build.compiler()) not in ("", key)


def test_offsets_and_strides_past_2_31_elements():
    """64-bit indexing: a source offset and a source stride past 2^31 int8 elements, in a
    storage of 2^31 + 64 bytes that is allocated but never touched except where read."""
    big = 1 << 31
    try:
        storage = torch.empty(big + 64, dtype=torch.int8)
    except (RuntimeError, MemoryError) as e:  # an address space without overcommit
        pytest.skip(f"cannot reserve 2 GiB: {e}")
    storage[:64] = torch.arange(64, dtype=torch.int8)
    storage[big:] = torch.arange(64, dtype=torch.int8) - 64
    # Rows 0 and 1 of a (2, 8) view with strides (2^31, 1): elements 0..7 and 2^31..2^31+7.
    spec = CopySpec((2, 8), (big, 1), 3, (8, 1), 0, i8, i8)
    out = torch.zeros(16, dtype=torch.int8)
    launch(generate_c_copy(spec), storage, out)
    assert torch.equal(out, torch.cat([storage[3:11], storage[big + 3:big + 11]]))
    # A transpose reading at offset 2^31 + 8.
    spec = CopySpec((4, 6), (1, 4), big + 8, (6, 1), 0, i8, i8)
    out = torch.zeros(24, dtype=torch.int8)
    launch(generate_c_copy(spec), storage, out)
    assert torch.equal(out, storage[big + 8:big + 32].view(6, 4).t().reshape(-1))

