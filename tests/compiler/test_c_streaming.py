"""Streaming (non-temporal) stores in the C copy kernels: forced on small copies through
the threshold (`cpu.set_stream_threshold(0)`: every call streams), each copy compared with
torch on the whole destination storage, which starts filled with a sentinel, so a line
store that strayed before a run's head or past its tail shows. Covers unaligned heads and
tails, rows shorter than a line and of odd byte counts, broadcast rows, the members of a
batch (a cat), fills, casts, 1/2/4/8-byte elements, and both thread paths (torch's OpenMP
team and the pool's own workers)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch

from stridec.compiler.codegen.c.copy import generate_c_copy, generate_c_copy_batch
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.errors import VerificationError
from stridec.runtime.backends import cpu
from tests.compiler.c_build import host_has
from tests.compiler.test_codegen_c_copy import launch, run_c
from tests.compiler.test_codegen_copy import bf16, f16, f32, f64, i8, permute_spec, sentinel

SIZES = [i8, f16, f32, f64]


@pytest.fixture
def streaming():
    """Every call streams while the test runs; the threshold is restored after."""
    previous = cpu.set_stream_threshold(0)
    try:
        yield
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("rows", "width", "src_pitch", "dst_pitch", "src_off", "dst_off"),
    [
        (9, 1000, 1000, 1000, 0, 0),    # one contiguous run, aligned
        (9, 1000, 1003, 1001, 5, 3),    # every row's head and tail unaligned
        (40, 7, 9, 11, 1, 2),           # rows shorter than a line
        (17, 333, 335, 341, 0, 1),      # rows of odd byte counts
        (5, 130, 130, 192, 0, 64),      # rows of exactly whole lines plus a bit
    ],
)
def test_rows_stream_within_their_runs(streaming, dtype, rows, width, src_pitch, dst_pitch,
                                      src_off, dst_off):
    kernel = run_c(CopySpec((rows, width), (src_pitch, 1), src_off, (dst_pitch, 1), dst_off,
                            dtype, dtype))
    assert kernel.strategy == "linear"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "ordinary"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_row_groups(stream, threads, dtype):
    # Rows of 1 KiB or more that the source holds apart (slices), streamed: copied 4 at
    # a time, line by line in turn, each row's source prefetched 16 lines ahead, on into
    # the next group's rows (stream_rows).
    # Row counts that leave a partial group, at the end and in every run of an outer dim;
    # heads and tails unaligned, and differing from row to row; a source walked backwards
    # (a flip); the rows of a broadcast (not grouped). Ordinary stores: the same copies.
    previous = cpu.set_stream_threshold(0 if stream else -1)
    old_threads = torch.get_num_threads()
    w = 1100 // dtype.itemsize  # a row of 1100 bytes (not whole lines)
    big = 4100 // dtype.itemsize
    try:
        torch.set_num_threads(threads)
        for spec in [
            CopySpec((19, w), (2 * w, 1), w, (w, 1), 0, dtype, dtype),  # x[1::2]
            CopySpec((45, big), (big + 5, 1), 1, (big + 3, 1), 3, dtype, dtype),
            CopySpec((4, 10, w), (30 * w, 3 * w, 1), 7, (10 * w, w, 1), 0, dtype, dtype),
            CopySpec((3, 10, big), (25 * big, 2 * big, 1), 64, (10 * big, big, 1), 1, dtype,
                     dtype),
            CopySpec((17, w), (-(w + 7), 1), 16 * (w + 7), (w, 1), 0, dtype, dtype),
            CopySpec((8, w), (w + 64, 1), 0, (w, 1), 0, dtype, dtype),  # one group exactly
            CopySpec((30, w), (0, 1), 2, (w + 1, 1), 1, dtype, dtype),  # broadcast
        ]:
            assert run_c(spec).strategy == "linear"
    finally:
        torch.set_num_threads(old_threads)
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [i8, f32], ids=lambda d: d.name)
@pytest.mark.parametrize("rows", [1, 3, 4, 5, 7, 8, 9, 13])
@pytest.mark.parametrize("row_bytes", [1024, 1088, 1100, 2047, 7680])
def test_row_group_edges(streaming, threads, dtype, rows, row_bytes):
    # stream_rows at its edges: row counts under a group of 4 (not grouped), one group
    # exactly, just over one and two groups (the rest row by row); rows of exactly the 16
    # lines the prefetch runs ahead (its cursor starts on the next group's rows), of a
    # line more, of a partial last line and of odd byte counts, and the race's 7.5 KiB
    # rows; odd margins (the row starts unaligned on both sides). The source's storage ends
    # where its last row ends (run_c), the destination's is filled with a sentinel.
    w = row_bytes // dtype.itemsize
    old_threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        for pitch, src_off, dst_pitch, dst_off in [
            (2 * w + 2, w + 1, w, 0),      # x[1::2, 1:-1] of rows w + 2 wide
            (w + 37, 5, w + 3, 3),         # odd margins, destination rows unaligned
            (-(w + 20), (rows - 1) * (w + 20), w, 0),  # the rows walked backwards
        ]:
            spec = CopySpec((rows, w), (pitch, 1), src_off, (dst_pitch, 1), dst_off, dtype,
                            dtype)
            assert run_c(spec, seed=rows).strategy == "linear"
        # a 3-d slice x[:, 1::2, m:-m] whose outer dim splits the rows into runs of 5
        spec = CopySpec((3, 5, w), (12 * (w + 6), 2 * (w + 6), 1), (w + 6) + 3,
                        (5 * w, w, 1), 0, dtype, dtype)
        assert run_c(spec).strategy == "linear"
    finally:
        torch.set_num_threads(old_threads)


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_broadcast_rows(streaming, dtype):
    # expand: the same source row to every destination row, rows unaligned.
    run_c(CopySpec((23, 301), (0, 1), 2, (305, 1), 1, dtype, dtype))
    run_c(CopySpec((4, 6, 97), (0, 97, 1), 0, (6 * 97, 97, 1), 0, dtype, dtype))


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_fills_and_masked_rows(streaming, dtype):
    fill = 3 if dtype == i8 else 2.5
    # Rows with long fill runs either side of the copied part (pitched rows, pads).
    run_c(CopySpec((11, 700), (650, 1), 0, (701, 1), 3, dtype, dtype,
                   (MaskBound((0, 1), 40, 650),), fill))
    # Fill only: nothing is read.
    run_c(CopySpec((13, 517), (0, 0), 0, (519, 1), 1, dtype, dtype,
                   (MaskBound((0, 1), 600, 700),), fill))
    # Fill runs shorter than a line and than the threshold of a streamed fill.
    run_c(CopySpec((30, 40), (40, 1), 0, (41, 1), 1, dtype, dtype,
                   (MaskBound((0, 1), 3, 37),), fill))


@pytest.mark.parametrize(("src", "dst"), [(f32, f16), (f16, f32), (f32, bf16), (bf16, f32),
                                          (i8, f64), (f64, i8)], ids=lambda d: d.name)
def test_casts(streaming, src, dst):
    # Converting runs streamed: float32 <-> float16 / bfloat16 line by line from the
    # registers, the others through a buffer in L1: long rows (several
    # chunks of the buffer) and short ones, unaligned, and rows of whole lines.
    run_c(CopySpec((3, 5000), (5001, 1), 1, (5003, 1), 3, src, dst))
    run_c(CopySpec((4, 4096), (4096, 1), 0, (4096, 1), 0, src, dst))
    run_c(CopySpec((20, 90), (91, 1), 0, (93, 1), 5, src, dst,
                   (MaskBound((0, 1), 10, 80),), 1.0))


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_cat_members(streaming, dtype):
    # A batch into one buffer: three members of a cat along dim 1 (the second unaligned).
    n, widths = 7, (129, 3, 250)
    total = sum(widths)
    specs, starts = [], 0
    for w in widths:
        specs.append(CopySpec((n, w), (w, 1), 0, (total, 1), starts, dtype, dtype))
        starts += w
    kernel = generate_c_copy_batch(specs)
    gen = torch.Generator().manual_seed(1)
    srcs = [torch.randint(-100, 100, (n * w,), generator=gen).to(dtype.torch) for w in widths]
    dst = sentinel(dtype, n * total + 5)
    expected = dst.clone()
    expected[: n * total] = torch.cat([s.view(n, w) for s, w in zip(srcs, widths, strict=True)],
                                      1).reshape(-1)
    launch(kernel, dst, *srcs)
    assert torch.equal(dst, expected)
    # Every member's call carries the batch's destination bytes (they stream together),
    # but a member whose plan never streams (-1: short runs that start or end inside a
    # line, copy_plan._blocked_rows).
    words = {params[6] for _, _, _, params in kernel.calls}
    assert words <= {n * total * dtype.itemsize, -1}, words


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_short_row_tiles(streaming, dtype):
    # Attention's permute(0, 2, 1, 3): short rows in tiles of two dims, walked in the
    # source's order; their whole lines streamed, heads and tails of rows that are not
    # whole lines (24 elements, odd byte counts, offsets) ordinary.
    run_c(permute_spec((3, 37, 7, 64 // dtype.itemsize), (0, 2, 1, 3), dtype))
    run_c(permute_spec((3, 37, 7, 24), (0, 2, 1, 3), dtype))
    run_c(permute_spec((2, 19, 5, 13), (0, 2, 1, 3), dtype, dst_offset=3))


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "ordinary"])
@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
def test_short_row_tiles_sizes(stream, torch_openmp):
    # Rows of 2 to 1024 bytes; head counts that fill a 4 KiB page's tile, fall short of it
    # or leave a partial tile (33 rows of 128 bytes); sequences that leave a partial block;
    # source and destination offsets (rows of whole lines that start on a line, streamed
    # line by line, and not); large enough to run on three threads.
    previous = cpu.set_stream_threshold(0 if stream else -1)
    threads = torch.get_num_threads()
    try:
        cpu.use_torch_openmp(torch_openmp)
        torch.set_num_threads(3)
        for sizes, dtype, offsets in [
            ((2, 300, 33, 64), f16, (0, 0)),
            ((2, 300, 33, 64), f16, (3, 32)),  # whole lines from a line on: stream_line
            ((3, 130, 40, 1), f16, (0, 0)),  # 2-byte rows: a transpose
            ((3, 130, 40, 2), f16, (0, 1)),
            ((2, 70, 9, 256), f32, (5, 0)),
            ((2, 90, 17, 12), f64, (0, 1)),
            ((1, 257, 64, 48), i8, (7, 3)),
            ((4, 65, 3, 64), f16, (0, 0)),
        ]:
            kernel = run_c(permute_spec(sizes, (0, 2, 1, 3), dtype,
                                        src_offset=offsets[0], dst_offset=offsets[1]))
            assert kernel.strategy == ("linear" if sizes[-1] > 1 else "tiled_transpose")
    finally:
        torch.set_num_threads(threads)
        cpu.use_torch_openmp(True)
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
def test_streaming_on_both_thread_paths(streaming, torch_openmp):
    # Past PARALLEL_BYTES, threads take shares of the rows; each ends its share with a
    # store fence. Rows of 16000 float32 unaligned, a broadcast, a fill and a cast.
    threads = torch.get_num_threads()
    try:
        cpu.use_torch_openmp(torch_openmp)
        torch.set_num_threads(3)
        run_c(CopySpec((40, 16000), (16001, 1), 1, (16003, 1), 3, f32, f32))
        run_c(CopySpec((1 << 19,), (1,), 0, (1,), 0, f16, f16))
        run_c(CopySpec((300, 1000), (0, 1), 0, (1001, 1), 1, f32, f32))
        run_c(CopySpec((300, 1000), (1000, 1), 0, (1000, 1), 0, f32, f32,
                       (MaskBound((1, 1), 100, 1500),), 3.0))
        run_c(CopySpec((64, 5000), (5000, 1), 0, (5001, 1), 1, f32, f16))
        run_c(permute_spec((4, 300, 16, 32), (0, 2, 1, 3), f16))
    finally:
        torch.set_num_threads(threads)
        cpu.use_torch_openmp(True)


def test_threshold_default_and_knob(monkeypatch):
    llc = cpu.last_level_cache_bytes()
    monkeypatch.delenv("STRIDEC_STREAM_BYTES", raising=False)
    assert cpu.default_stream_threshold() == (-1 if llc is None else llc // 2)
    monkeypatch.setenv("STRIDEC_STREAM_BYTES", "12345")
    assert cpu.default_stream_threshold() == 12345
    monkeypatch.setenv("STRIDEC_STREAM_BYTES", "lots")
    with pytest.raises(VerificationError, match="STRIDEC_STREAM_BYTES"):
        cpu.default_stream_threshold()
    monkeypatch.delenv("STRIDEC_STREAM_BYTES")
    previous = cpu.set_stream_threshold(-1)
    try:
        assert cpu.stream_threshold() == -1
        # Never streaming still copies right.
        run_c(CopySpec((9, 1000), (1003, 1), 5, (1001, 1), 3, f32, f32))
        with pytest.raises(VerificationError, match="set_stream_threshold"):
            cpu.set_stream_threshold(-5)
        with pytest.raises(VerificationError, match="set_stream_threshold"):
            cpu.set_stream_threshold(1.5)
    finally:
        cpu.set_stream_threshold(previous)
    assert cpu.stream_threshold() == previous


def test_generated_code_has_streaming_stores():
    objdump = shutil.which("objdump")
    if objdump is None or not host_has("avx2"):
        pytest.skip("needs objdump and an x86 CPU with AVX2")
    kernel = generate_c_copy(CopySpec((4, 8), (8, 1), 0, (8, 1), 0, f32, f32))
    lib = cpu.load_unit(kernel.source)
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", lib._name],
                          capture_output=True, text=True, check=True).stdout
    width = "zmm" if host_has("avx512f") else "ymm"
    assert any("vmovntdq" in line and width in line for line in text.splitlines())
    assert "sfence" in text
    assert os.path.exists(lib._name)
