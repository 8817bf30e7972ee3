"""Streaming stores in the C kernels' transposes and packs (tiles): forced on small copies
through the threshold (`cpu.set_stream_threshold(0)`), each copy compared with torch on
the whole destination storage, which starts filled with a sentinel, so a line store that
strayed outside a tile's runs shows. Covers the 16×16 `zmm` blocks streamed straight from
the registers (aligned destinations), the tiles staged through a buffer (unaligned
destinations, partial tiles, 1- and 2-byte staged tiles), casts, narrow interleaves (NCHW4)
and deinterleaves (NHWC -> NCHW of a few channels), wide padded rows (NCHW32/64 of a
few channels, int8 ones built as words in registers), merged CHWN4 tiles, and both thread
paths."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import platform
import shutil
import subprocess

import pytest
import torch

import stridec
from stridec.compiler.codegen.c.copy import (
    CopyClass,
    _strategy_plan,
    assemble_kernel,
    emit_class_source,
    generate_c_copy,
)
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.runtime.backends import cpu
from tests.compiler.c_build import AVX2, NATIVE, PORTABLE, build_shared, host_has
from tests.compiler.test_c_casts import special_values
from tests.compiler.test_c_streaming import streaming  # noqa: F401  (a fixture)
from tests.compiler.test_codegen_c_copy import _pack_spec, _team, launch, run_c
from tests.compiler.test_codegen_copy import (
    bf16,
    contiguous_strides,
    f16,
    f32,
    f64,
    i8,
    permute_spec,
    random_storage,
    reference_copy,
    sentinel,
    span,
)
from tests.runtime.test_backends import arrange, assert_same, chwn4, sample

SIZES = [i8, f16, f32, f64]
# Every call of every test here streams (the threshold is restored after each test).
pytestmark = pytest.mark.usefixtures("streaming")


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize("dst_offset", [0, 1, 5])
@pytest.mark.parametrize("sizes", [(64, 64), (70, 45), (129, 257), (300, 130), (16, 200)])
def test_transposes_stream_whole_lines(dtype, dst_offset, sizes):
    # 64·64 and 129·257 hold whole blocks on line-aligned rows (streamed from the
    # registers, 4- and 8-byte elements), 70·45 rows that are no whole number of lines,
    # 300·130 whole staged tiles of 1- and 2-byte elements and their partial neighbours;
    # a destination offset of 1 or 5 elements puts every row's head mid-line.
    kernel = run_c(permute_spec(sizes, (1, 0), dtype, dst_offset=dst_offset))
    assert kernel.strategy == "tiled_transpose"
    run_c(permute_spec((3, *sizes), (0, 2, 1), dtype, dst_offset=dst_offset))


@pytest.mark.parametrize(("src", "dst"), [(f32, f16), (f16, f32), (f32, bf16), (bf16, f32),
                                          (i8, f64), (f64, i8)], ids=lambda d: d.name)
def test_transposing_casts(src, dst):
    # float32 <-> float16 / bfloat16 convert their blocks in registers (CAST_A x CAST_B),
    # into a buffer whose rows are streamed: whole blocks (64 x 64), tails on both sides,
    # strips (source rows past 4 KiB), destination rows that start mid-line (offset 3).
    for sizes in ((129, 257), (64, 64), (48, 2100), (3, 45, 70)):
        for dst_offset in (0, 3):
            perm = (1, 0) if len(sizes) == 2 else (0, 2, 1)
            run_c(permute_spec(sizes, perm, src, dst, dst_offset=dst_offset))


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize("c", [3, 4, 8])
def test_narrow_packs(dtype, c):
    """NCHW4 packs (interleaves into contiguous rows of 4, through a buffer) and NHWC with
    C = c both ways, pixels past a run of 256 and a remainder (H·W = 601)."""
    src = random_storage(dtype, 2 * c * 601, torch.Generator().manual_seed(c))
    for fill in (0, -3, None):
        spec = _pack_spec(2, c, 601, 4, dtype, fill)
        run_c(spec, src=src)
        run_c(dataclasses.replace(spec, dst_offset=1), src=src)
    run_c(permute_spec((2, c, 7, 91), (0, 2, 3, 1), dtype, dst_offset=2))
    run_c(permute_spec((2, 7, 91, c), (0, 3, 1, 2), dtype, dst_offset=2))



@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
def test_narrow_packs_prefetch_the_next_tile(torch_openmp, threads, dtype):
    """A thread's tiles run one behind its walk, each told where the next one's source rows
    start when it has as many rows and columns (the NCHW4 pack's interleaves prefetch them):
    several tiles of pixels a group of channels and a shorter last one (H·W = 2·4096 + 601),
    several groups and images, groups whose padding is masked (C = 6, the next tile's
    columns not all copied) and not (C = 8), 1 and 3 threads: every tile written, once."""
    previous = torch.get_num_threads()
    try:
        cpu.use_torch_openmp(torch_openmp)
        torch.set_num_threads(threads)
        for c, fill in ((8, None), (6, 0), (6, None)):
            spec = _pack_spec(2, c, 2 * 4096 + 601, 4, dtype, fill)
            run_c(spec)
            run_c(dataclasses.replace(spec, dst_offset=1))
    finally:
        torch.set_num_threads(previous)
        cpu.use_torch_openmp(True)


def _deinterleave_spec(n, c, hw, dtype, plane, *, src_offset=0, dst_offset=0):
    """NHWC -> NCHW of (n, hw, c) pixels into planes `plane` elements apart (a gap after
    each plane of hw where plane > hw)."""
    return CopySpec((n, c, hw), (hw * c, 1, c), src_offset, (c * plane, plane, 1), dst_offset,
                    dtype, dtype)


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize("c", [2, 3, 4])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "ordinary"])
def test_deinterleaves(dtype, c, stream):
    """NHWC -> NCHW with C = 2 … 4 (`narrow_split`): planes of whole lines (H·W = 3072, a
    few tiles; contiguous or a line apart) streamed straight from the registers, at
    destination offsets 0, 1 and 5 elements (each tile's rows start and end mid-line: those
    partial lines stored as usual); planes that are not whole lines (H·W = 3072 with a gap
    of 3 elements, H·W = 1515: partial tiles and vectors) through a buffer in L1; sources
    at an offset; on 1, 2 and 3 threads (12 images: past the single-thread size)."""
    if not stream:
        cpu.set_stream_threshold(-1)  # the fixture restores it
    gen = torch.Generator().manual_seed(c)
    saved = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            for hw, plane in ((3072, 3072), (3072, 3072 + 64), (3072, 3075), (1515, 1515)):
                src = random_storage(dtype, 12 * hw * c + 1, gen)
                for dst_offset in (0, 1, 5):
                    spec = _deinterleave_spec(12, c, hw, dtype, plane, dst_offset=dst_offset,
                                              src_offset=dst_offset % 2)
                    assert _run_strategy(spec, src).strategy == "tiled_transpose"
    finally:
        torch.set_num_threads(saved)


@pytest.mark.parametrize("march", ["x86-64", "x86-64-v3"])
def test_deinterleaves_built_for_other_isas(monkeypatch, march):
    """The units built for CPUs without AVX-512 (x86-64: SSE2, 16-byte vectors; x86-64-v3:
    AVX2, 32-byte ones) deinterleave and pad rows (NCHW32 of a few channels) alike,
    streamed and not: the other variants of the interleaves, of `stream_vec` and of
    `padded_rows`."""
    if platform.machine() != "x86_64" or (march == "x86-64-v3" and not host_has("avx2")):
        pytest.skip(f"-march={march} code needs an x86-64 CPU that runs it")
    flags = tuple(f"-march={march}" if f == "-march=native" else f for f in cpu.CFLAGS)
    monkeypatch.setattr(cpu, "CFLAGS", flags)
    monkeypatch.setattr(cpu, "_toolchain", {})  # the libraries' key covers the flags
    gen = torch.Generator().manual_seed(1)
    for threshold in (0, -1):
        cpu.set_stream_threshold(threshold)
        for dtype in SIZES:
            for c in (2, 3, 4):
                src = random_storage(dtype, 2 * 1536 * c, gen)
                for plane, dst_offset in ((1536, 0), (1536, 3), (1539, 0)):
                    run_c(_deinterleave_spec(2, c, 1536, dtype, plane, dst_offset=dst_offset),
                          src=src)
                run_c(_pack_spec(2, c, 150, 32, dtype, -2), src=src)  # padded rows


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize(("c", "block"), [(3, 32), (3, 64), (1, 32), (2, 16), (35, 64)])
def test_wide_padded_rows(dtype, c, block):
    """NCHW32/64 of a few channels: rows of the fill and their channels assembled in a
    buffer, streamed 4 KiB at a time (rows of whole lines up to 256 bytes: 64-byte rows of
    int8 NCHW64, 32 of float16 NCHW32 ...; the others not streamed), H·W = 1000 pixels."""
    src = random_storage(dtype, 3 * c * 1000, torch.Generator().manual_seed(c))
    for fill in (0, -2, None):
        spec = _pack_spec(3, c, 1000, block, dtype, fill)
        run_c(spec, src=src)
        run_c(dataclasses.replace(spec, dst_offset=3), src=src)


@pytest.mark.parametrize("nb", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "ordinary"])
def test_padded_rows_built_as_words(nb, stream):
    """int8 rows of nb bytes, each the fill but for k = 1 … 4 channels at byte `lo`
    (`padded_words` with AVX-512: 16 rows as 4-byte words permuted into whole lines):
    channels at the start (a pack), at other multiples of 4 (past the first line of a
    long row: lo = 72) and at lo = 6 (not a word: the other path); destinations aligned
    (straight from the registers) and at an offset of 3 (the other path); H·W = 150: tiles
    with a remainder of fewer than 16 rows."""
    if not stream:
        cpu.set_stream_threshold(-1)  # the fixture restores it
    hw = 150
    src = random_storage(i8, 2 * nb * hw, torch.Generator().manual_seed(nb))
    for lo in (0, 4, 6, 72):
        for k in (1, 2, 3, 4):
            if lo + k > nb:
                continue
            for fill in (0, -2):
                spec = CopySpec((2, hw, nb), (nb * hw, 1, hw), 0, (hw * nb, nb, 1), 0, i8, i8,
                                (MaskBound((0, 0, 1), lo, lo + k),), fill)
                run_c(spec, src=src)
                run_c(dataclasses.replace(spec, dst_offset=64), src=src)
                run_c(dataclasses.replace(spec, dst_offset=3), src=src)


@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
@pytest.mark.parametrize(("n", "c", "hw"), [(9, 3, 77), (40, 4, 300), (32, 5, 140)])
def test_chwn4_merged_tiles(dtype, n, c, hw):
    src = random_storage(dtype, n * c * hw, torch.Generator().manual_seed(n))
    for fill in (0, 7, None):
        spec = _pack_spec(n, c, hw, 4, dtype, fill, chwn=True)
        run_c(spec, src=src)
        run_c(dataclasses.replace(spec, dst_offset=1), src=src)


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "float32"])
@pytest.mark.parametrize("how", ["contiguous", "offset", "transposed", "padded"])
def test_chwn4_packs_of_graphs(torch_openmp, dtype, how):
    """x.pack("CHWN4") through the cpu backend against torch's pack, streamed, on both
    thread paths: N = 32 (destination rows of 128 bytes for 1-byte elements, whole lines:
    the groups' words are streamed from the registers) and 33 (rows off the lines), C = 3
    and 7 (padding lanes), odd H·W, inputs laid out contiguous, at an offset, transposed
    (column-major) or with gaps; sizes past the copies that run on one thread."""
    threads = torch.get_num_threads()
    has_openmp = "parallel backend: OpenMP" in torch.__config__.parallel_info()
    try:
        assert cpu.use_torch_openmp(torch_openmp) == (torch_openmp and has_openmp)
        torch.set_num_threads(2)
        for sizes in ((32, 3, 41, 43), (33, 7, 13, 29)):
            t = sample(sizes, dtype, seed=sizes[0])
            g = stridec.Graph("chwn4")
            x = g.input("x", sizes, dtype)
            g.output(x.pack("CHWN4"), x.pack("CHWN4", fill=7))
            got = stridec.compile(g, backend="cpu")(arrange(t, how, "cpu"))
            for out, fill in zip(got, (0, 7), strict=True):
                assert_same(out, chwn4(t, fill), f"CHWN4 {sizes} {dtype} {how} fill {fill}")
    finally:
        torch.set_num_threads(threads)
        cpu.use_torch_openmp(True)


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
def test_streamed_tiles_on_both_thread_paths(torch_openmp):
    # Past PARALLEL_BYTES the tiles (walked along the source's rows first when the call
    # streams) are shared between threads; each thread fences its streamed lines.
    assert cpu.stream_threshold() == 0  # every call streams
    threads = torch.get_num_threads()
    has_openmp = "parallel backend: OpenMP" in torch.__config__.parallel_info()
    try:
        assert cpu.use_torch_openmp(torch_openmp) == (torch_openmp and has_openmp)
        torch.set_num_threads(3)
        run_c(permute_spec((3, 300, 500), (0, 2, 1), f32))
        run_c(permute_spec((700, 900), (1, 0), i8, dst_offset=1))
        run_c(permute_spec((500, 300), (1, 0), f32, f16))
        run_c(_pack_spec(32, 8, 1100, 4, i8, 0, chwn=True))
        run_c(_pack_spec(8, 3, 9000, 32, i8, 0))
    finally:
        torch.set_num_threads(threads)
        cpu.use_torch_openmp(True)


def test_tile_kernels_have_streaming_stores():
    """The tile code streams: the source calls the streaming primitives on its tiles' runs,
    and with AVX-512 the 4- and 8-byte units store a block's rows with `vmovntdq` on `zmm`
    straight from the registers (16 and 8 in the function that holds the block)."""
    for size in (1, 2, 4, 8):
        source = emit_class_source(CopyClass("tiled_transpose", f"bits{size}", f"bits{size}"))
        assert "stream_tile(J," in source and "stream_copy(d + b0, buf" in source
    objdump = shutil.which("objdump")
    if objdump is None or not host_has("avx512f"):
        pytest.skip("needs objdump and an AVX-512 CPU")
    for size, lanes in ((4, 16), (8, 8)):
        source = emit_class_source(CopyClass("tiled_transpose", f"bits{size}", f"bits{size}"))
        assert "tr_block_nt(" in source
        path = cpu.load_unit(source)._name
        text = subprocess.run([objdump, "-d", "--no-show-raw-insn", path], capture_output=True,
                              text=True, check=True).stdout
        per_function: dict[str, int] = {}
        name = ""
        for line in text.splitlines():
            if line.endswith(">:"):
                name = line.split("<", 1)[1][:-2]
            elif "vmovntdq" in line and "zmm" in line:
                per_function[name] = per_function.get(name, 0) + 1
        assert max(per_function.values(), default=0) >= lanes, per_function


def _instructions(path: str) -> dict[str, list[str]]:
    """The instructions of each function of the library at `path` (objdump -d)."""
    text = subprocess.run([shutil.which("objdump") or "objdump", "-d", "--no-show-raw-insn",
                           path], capture_output=True, text=True, check=True).stdout
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.endswith(">:"):
            name = line.split("<", 1)[1][:-2]
            out[name] = []
        elif "\t" in line and name:
            out[name].append(line.split("\t", 1)[1].strip())
    return out


# Per pair: the block's permutes (mnemonic prefix, register), its conversion instruction
# and whether its rows (whole lines of float32) are streamed straight from the registers.
_REGISTER_CONVERSIONS = {
    ("float32", "float16"): (("vperm", "zmm"), "vcvtps2ph", False),
    ("float32", "bfloat16"): (("vperm", "zmm"), "vpmovdw", False),
    ("float16", "float32"): (("vperm", "ymm"), "vcvtph2ps", True),
    ("bfloat16", "float32"): (("vperm", "ymm"), "vpmovzxwd", True),
}


@pytest.mark.parametrize(("src", "dst"), list(_REGISTER_CONVERSIONS),
                         ids=[f"{s}-{d}" for s, d in _REGISTER_CONVERSIONS])
def test_casts_convert_their_blocks_in_registers(src, dst):
    """With AVX-512, one function of a transposing cast's unit holds its block (tr_cast):
    the 64 two-source permutes of its 4 rounds of interleaves, 16 conversions of `zmm`
    (one per transposed row: the conversion between the shuffles and the stores) and,
    where the rows are float32, 16 streamed stores of `zmm`."""
    if shutil.which("objdump") is None or not host_has("avx512bw"):
        pytest.skip("needs objdump and an AVX-512 CPU")
    (permute, register), conversion, streamed = _REGISTER_CONVERSIONS[(src, dst)]
    source = emit_class_source(CopyClass("tiled_transpose", src, dst))
    functions = _instructions(cpu.load_unit(source)._name)

    def count(body: list[str], prefix: str, operand: str) -> int:
        return sum(1 for i in body if i.startswith(prefix) and operand in i)

    blocks = [name for name, body in functions.items()
              if count(body, permute, register) >= 64 and count(body, conversion, "zmm") >= 16
              and (not streamed or count(body, "vmovntdq", "zmm") >= 16)]
    assert blocks, {name: (count(body, permute, register), count(body, conversion, "zmm"))
                    for name, body in functions.items()}


def _masked_transpose(sizes, dtype, fill, dst_offset=0):
    """`x.t()` of a contiguous (rows, cols) x into a padded destination: output rows
    past `cols - 3` and output columns before 5 masked (the fill, or left alone)."""
    rows, cols = sizes
    spec = permute_spec(sizes, (1, 0), dtype, dst_offset=dst_offset)
    return dataclasses.replace(spec, masks=(MaskBound((1, 0), 0, cols - 3),
                                            MaskBound((0, 1), 5, rows)), fill=fill)


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_streamed_strips(torch_openmp, threads, dtype):
    """Streamed tiles walked in strips along the source's rows (4 KiB of them, then the next
    tiles along the destination's rows): sources rows longer than several strips with a
    partial last strip (2100 and 4500 elements), destination rows of whole lines (48 and 64
    elements) and not (45, or an offset of 1), partial tiles on both sides, a batch dim, and
    masks with and without the fill, on 1 to 3 threads of either team: the threads' shares
    of tiles end inside strips."""
    with _team(torch_openmp, threads):
        for sizes in ((48, 2100), (45, 2100), (64, 4500)):
            for dst_offset in (0, 1):
                run_c(permute_spec(sizes, (1, 0), dtype, dst_offset=dst_offset))
            run_c(permute_spec((3, *sizes), (0, 2, 1), dtype))
        for fill in (0, None):
            run_c(_masked_transpose((48, 2100), dtype, fill))
            run_c(_masked_transpose((45, 1300), dtype, fill, dst_offset=1))


@pytest.mark.parametrize("flags", [PORTABLE, AVX2], ids=["portable", "avx2"])
@pytest.mark.parametrize("dtype", SIZES, ids=lambda d: d.name)
def test_streamed_strips_of_other_isas(tmp_path, flags, dtype):
    """The transpose unit built without AVX-512 (plain C at -O2, and AVX2): the tile sides
    and blocks of those builds (2-byte elements walked in strips too, and 1-byte ones in
    the plain C build, where AVX-512 and AVX2 stage their tiles instead; 2-byte strips
    into destination rows of whole lines in AVX2's whole-line blocks, `tr_block_nt`),
    streamed, on 1 and 3 threads, against torch."""
    if flags == AVX2 and not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    specs = [permute_spec((48, 2100), (1, 0), dtype), permute_spec((3, 45, 700), (0, 2, 1), dtype),
             permute_spec((64, 4500), (1, 0), dtype),
             permute_spec((64, 4500), (1, 0), dtype, dst_offset=1),
             _masked_transpose((48, 2100), dtype, -1)]
    _run_built(tmp_path, flags, specs)


def _avx2_functions(folder, bits: str, dst: str | None = None) -> dict[str, list[str]]:
    """The disassembled functions (name: lines) of the `bits` transpose unit (a cast's from
    `bits` to `dst`) built for AVX2 without AVX-512."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("needs objdump")
    source = emit_class_source(CopyClass("tiled_transpose", bits, dst or bits))
    lib = build_shared(source, folder, f"avx2_{bits}_{dst or bits}", AVX2)
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", lib._name], capture_output=True,
                          text=True, check=True).stdout
    bodies: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.endswith(">:"):
            name = line.split("<", 1)[1][:-2]
        elif name:
            bodies.setdefault(name, []).append(line)
    return bodies


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
def test_int8_tiles_of_the_avx2_build(tmp_path, stream):
    """The 1-byte transpose unit built for AVX2 without AVX-512 (what runs on such a CPU,
    tested here on any AVX2 one): the staged tiles' blocks on `ymm` (two 16×16 byte blocks
    a vector, `tr_wide`), streamed with their source rows staged in L2 (`staged_tile`) or
    not, and CHWN4's groups as 32-bit words (8 columns of 16 groups a block, `tr_words`),
    staged too when streamed: whole staged tiles and partial ones on both sides (a last
    block under 32 source elements, under 16 source rows), destinations off the lines,
    pack lanes of 16 … 64 channels (NCHW32/64), CHWN4 with lanes of the fill (C = 3) and
    without, whole-line destination rows (N = 16, 32) and not (N = 9), on 1 and 3 threads,
    against torch."""
    if not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    if not stream:
        cpu.set_stream_threshold(-1)
    specs = [permute_spec((300, 1100), (1, 0), i8), permute_spec((256, 1024), (1, 0), i8),
             permute_spec((257, 2100), (1, 0), i8, dst_offset=1),
             permute_spec((2, 70, 45), (0, 2, 1), i8),
             dataclasses.replace(permute_spec((320, 1100), (1, 0), i8),
                                 src_strides=(1, 1100 + 37), src_offset=5),
             _masked_transpose((600, 1100), i8, 0), _masked_transpose((600, 1100), i8, None)]
    for block, hw in ((32, 4096 + 5), (64, 8192 + 64 + 3), (16, 600)):
        specs += [_pack_spec(2, 2 * block, hw, block, i8, 0),
                  _pack_spec(2, block + 5, hw, block, i8, 0)]
    for n, c, hw in ((32, 4, 2048 + 3), (16, 3, 2047), (9, 8, 300), (33, 5, 129)):
        for fill in (0, 7, None):
            specs.append(_pack_spec(n, c, hw, 4, i8, fill, chwn=True))
        specs.append(dataclasses.replace(_pack_spec(n, c, hw, 4, i8, 0, chwn=True),
                                         dst_offset=1))
    _run_built(tmp_path, AVX2, specs)


def test_int8_blocks_of_the_avx2_build_are_ymm(tmp_path):
    """Built for AVX2 without AVX-512, the staged 1-byte tiles (`staged_tile`) transpose by
    in-lane byte interleaves of `ymm` registers (`vpunpcklbw`, `vpunpckhbw`) and the merged
    CHWN4 tiles (`tile_merged`) build their words by `vpmovzxbd` of `ymm` (each from
    memory: a byte vector assembled on the stack instead stalls every load on a failed
    store forwarding) and transpose them by `vperm2i128`, streamed (`vmovntdq`)."""
    bodies = _avx2_functions(tmp_path, "bits1")
    staged, merged = bodies.get("staged_tile", []), bodies.get("tile_merged", [])
    assert staged and merged, sorted(bodies)
    for op in ("vpunpcklbw", "vpunpckhbw"):
        assert any(op in line and "ymm" in line for line in staged), op
    assert any("stridec_pool_scratch_v1" in line for line in staged)
    words = [line for line in merged if "vpmovzxbd" in line and "ymm" in line]
    assert len(words) >= 64 and all("(" in line for line in words), words[:4]
    for op in ("vperm2i128", "vmovntdq"):
        assert any(op in line and "ymm" in line for line in merged), op


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
def test_float16_tiles_of_the_avx2_build(tmp_path, stream):
    """The 2-byte transpose unit built for AVX2 without AVX-512 (what runs on such a CPU,
    tested here on any AVX2 one): its tiles of 64 source elements by 128 source rows,
    transposed by `tr_wide` on `ymm` (two 8×8 blocks of halves a vector), streamed with
    their source rows staged in L2 (`staged_tile`, 1024 by 128) or not: whole staged tiles
    and partial ones on both sides, destinations off the lines, source rows with gaps,
    masked tiles with and without the fill, a batch dim, packs into lanes of 8 … 64
    channels (whole blocks, NCHW8 … NCHW64 of float16) with and without padding lanes,
    on 1 and 3 threads, against torch."""
    if not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    if not stream:
        cpu.set_stream_threshold(-1)
    specs = [permute_spec((b, a), (1, 0), f16, dst_offset=offset)
             for (a, b), offset in zip(_STAGED_SIDES["float16"], (0, 1, 0, 5, 0, 1), strict=True)]
    specs += [permute_spec((2, 70, 45), (0, 2, 1), f16),
              dataclasses.replace(permute_spec((160, 1100), (1, 0), f16),
                                  src_strides=(1, 1100 + 37), src_offset=5),
              _masked_transpose((600, 1100), f16, 0), _masked_transpose((600, 1100), f16, None)]
    for block, hw in ((8, 4096 + 5), (16, 2048 + 3), (32, 8192 + 64 + 3), (64, 600)):
        specs += [_pack_spec(2, 2 * block, hw, block, f16, 0),
                  _pack_spec(2, block + 5, hw, block, f16, 0)]
    _run_built(tmp_path, AVX2, specs)


def test_float16_staged_tiles_of_the_avx2_build_are_ymm(tmp_path):
    """Built for AVX2 without AVX-512, the staged 2-byte tiles (`staged_tile`) copy their
    source rows into the thread's scratch buffer and transpose them from there by in-lane
    interleaves of halves in `ymm` registers (`vpunpcklwd`, `vpunpckhwd`)."""
    staged = _avx2_functions(tmp_path, "bits2").get("staged_tile", [])
    assert staged, "no staged_tile in the AVX2 build"
    for op in ("vpunpcklwd", "vpunpckhwd"):
        assert any(op in line and "ymm" in line for line in staged), op
    assert any("stridec_pool_scratch_v1" in line for line in staged)



@pytest.mark.parametrize(("src", "dst"), [("bits1", None), ("bits2", None), ("bits4", None),
                                        ("bits8", None), ("float32", "float16"),
                                        ("float16", "float32"), ("float32", "bfloat16")])
def test_tiles_built_at_o2_keep_their_blocks_inline(tmp_path, src, dst):
    """A transpose without a cast, or a cast converting in registers, builds its tile
    functions at -O2 (`TILE_FN`, for the build's time) and its blocks always inline
    (`BLOCK_FN`): in the tiles, as at -O3, no block or staging copy is a call of its own."""
    bodies: dict[str, list[str]] = {}
    for name, lines in _avx2_functions(tmp_path, src, dst).items():  # clones: f.isra.0
        bodies.setdefault(name.split(".")[0], []).extend(lines)
    blocks = ("tr_block", "tr_block_nt", "tr_block_rows", "tr_wide", "tr_wide_regs",
              "tr_lines", "tr_words", "stage_rows", "stage_run", "stream_vec", "tr_cast",
              "tr_cast_lines")
    if dst is not None:
        tiles = ("tile", "staged_cast")
    else:
        staged = ("staged_tile",) if src in ("bits1", "bits2") else ()  # 1, 2 bytes staged
        tiles = ("tile", "tile_merged", "stream_tile", *staged)
    for name in tiles:
        assert bodies.get(name), f"no {name} in the AVX2 build of {src} -> {dst or src}"
        called = {line.rsplit("<", 1)[-1].split("+")[0].split(".")[0].rstrip(">")
                  for line in bodies[name] if "call" in line.split()}
        assert not called & set(blocks), (name, called)

def _strategy_kernel(spec):
    """The kernel of `spec` on the strategies of `codegen/c/copy.py`, even where the copy
    planner's library takes the copy."""
    return assemble_kernel([spec], [(0, 1)], "copy", _strategy_plan)


def _run_strategy(spec, src):
    """`run_c` on the strategies' kernel (`_strategy_kernel`): the destination storage
    against torch's."""
    kernel = _strategy_kernel(spec)
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + 3)
    expected = reference_copy(spec, src, dst)
    launch(kernel, src, dst)
    assert torch.equal(dst, expected), (kernel.strategy, spec)
    return kernel


def _run_built(folder, flags, specs, edit=None) -> None:
    """The unit of `specs` (one class) built with `flags` (its source changed by `edit`),
    each spec run on 1 and 3 threads against torch."""
    kernel = _strategy_kernel(specs[0])
    assert kernel.strategy == "tiled_transpose"
    source = kernel.source if edit is None else edit(kernel.source)
    lib = build_shared(source, folder, kernel.strategy, flags)
    for spec, threads in itertools.product(specs, (1, 3)):
        (symbol, _, _, params), = _strategy_kernel(spec).calls
        gen = torch.Generator().manual_seed(threads)
        src = random_storage(spec.src_dtype, span(spec, spec.src_strides, spec.src_offset), gen)
        dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + 3)
        expected = reference_copy(spec, src, dst)
        words = (ctypes.c_int64 * len(params))(*params)
        getattr(lib, symbol)(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
                             words, ctypes.c_int64(threads))
        assert torch.equal(dst, expected), (flags, spec, threads)


@pytest.mark.parametrize("flags", [PORTABLE, AVX2], ids=["portable", "avx2"])
@pytest.mark.parametrize(("src", "dst"), [(f32, f16), (f16, f32), (f32, bf16), (bf16, f32)],
                         ids=lambda d: d.name)
def test_transposing_casts_of_other_isas(tmp_path, flags, src, dst):
    """The casts that convert their blocks in registers, built without AVX-512: as plain C
    at -O2 (their tiles go through the buffer and convert a row at a time) and for AVX2
    with F16C (the 8-lane blocks, `_cast_block_8`), streamed, against torch."""
    if flags == AVX2 and not host_has("avx2"):
        pytest.skip("the AVX2 build needs an AVX2 CPU to run")
    specs = [permute_spec((48, 2100), (1, 0), src, dst),
             permute_spec((3, 45, 70), (0, 2, 1), src, dst),
             permute_spec((129, 257), (1, 0), src, dst, dst_offset=3)]
    _run_built(tmp_path, flags, specs)


def _chain_spec(sizes, src, dst, step=2, dst_offset=0, gap=0):
    """`x.permute(0, 2, 3, 1).to(dst)[:, ::step]` of an NCHW x of `sizes` whose planes lie
    H·W + `gap` elements apart: NHWC of every step-th row of H, converted."""
    n, c, h, w = sizes
    plane = h * w + gap
    out = (n, -(-h // step), w, c)
    return CopySpec(out, (c * plane, step * w, 1, plane), 0, contiguous_strides(out),
                    dst_offset, src, dst)


# The casts whose tiles are staged in L2 when streamed (`staged_cast`), by pair.
_STAGED_CASTS = [(f32, f16), (f16, f32), (f32, bf16), (bf16, f32)]


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("src", "dst"), _STAGED_CASTS, ids=lambda d: d.name)
def test_casts_staged_in_l2(torch_openmp, threads, src, dst):
    """Streamed transposing casts whose tiles' source rows are first copied into the
    thread's scratch buffer (`staged_cast`). Source rows past 4 KiB (tiles of 128 rows by
    2 KiB of each): whole tiles, tails of a tile along both sides (44 rows: a block of 32
    and 12 more), destination rows of whole lines (whole-line blocks of halves, float32
    rows streamed from the registers) and not (300 elements, an offset of 3: through a
    buffer), pitched source rows, a batch dim. Short source rows that dim R-3 continues
    in their plane (NHWC of every other H row, as `chain3_nhwc_cast_slice`): tiles of 64
    planes by up to 4 KiB of each plane's rows, groups of rows cut short (45 rows of 128
    bytes: 32 and 13), channels that are no whole block (70), rows back to back (step 1),
    planes apart by more than H·W, odd widths, the rows of H walked backwards; a batch of
    short planes, whose rows dim R-3 does not continue (not grouped). On 1 to 3 threads
    of either team."""
    with _team(torch_openmp, threads):
        for sizes in ((256, 1100), (300, 1100), (129, 2100)):
            for dst_offset in (0, 3):
                run_c(permute_spec(sizes, (1, 0), src, dst, dst_offset=dst_offset))
        pitched = permute_spec((130, 1100), (1, 0), src, dst)
        run_c(dataclasses.replace(pitched, src_strides=(1, 1200)))
        run_c(permute_spec((3, 64, 1100), (0, 2, 1), src, dst))
        for sizes, step in (((2, 130, 90, 64), 2), ((2, 70, 10, 24), 2), ((3, 96, 20, 40), 1),
                            ((2, 64, 41, 17), 3)):
            for dst_offset in (0, 1):
                run_c(_chain_spec(sizes, src, dst, step, dst_offset))
            run_c(_chain_spec(sizes, src, dst, step, gap=9))
            spec = _chain_spec(sizes, src, dst, step)  # the rows of H walked backwards
            sn, sh, _, sc = spec.src_strides
            run_c(dataclasses.replace(spec, src_strides=(sn, -sh, 1, sc),
                                      src_offset=(spec.sizes[1] - 1) * sh))
        run_c(permute_spec((6, 64, 70), (0, 2, 1), src, dst))  # a batch of planes: not grouped


def _special_storage(dtype, n: int) -> torch.Tensor:
    """`n` elements (and up to 63 more) of the conversion tests' values of `dtype` (every
    float16 and bfloat16 pattern; float32 NaN payloads, infinities, subnormals, rounding
    ties of the halves and random bit patterns), repeated, shifted by one for each repeat
    so that a value meets every block position."""
    values = special_values(dtype.name)
    reps = -(-(n + 64) // values.numel())
    return torch.cat([values.roll(k) for k in range(reps)])[: -(-n // 64) * 64]


def _bit_exact(lib, spec, threads) -> None:
    """`spec` run by `lib` (the unit of its class; None: the backend's own build) on
    `threads` threads from a storage of special values, against torch's `.to()` of that
    whole storage (contiguous, a multiple of 64 elements: torch's vector loop, on one
    thread) moved by `as_strided`, bit for bit."""
    kernel = generate_c_copy(spec)
    src = _special_storage(spec.src_dtype, span(spec, spec.src_strides, spec.src_offset))
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + 3)
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    converted = src.to(spec.dst_dtype.torch)
    torch.set_num_threads(saved)
    expected = dst.clone()
    torch.as_strided(expected, spec.sizes, spec.dst_strides, spec.dst_offset).copy_(
        torch.as_strided(converted, spec.sizes, spec.src_strides, spec.src_offset))
    if lib is None:
        with _team(True, threads):
            launch(kernel, src, dst)
    else:
        (symbol, _, _, params), = kernel.calls
        words = (ctypes.c_int64 * len(params))(*params)
        getattr(lib, symbol)(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
                             words, ctypes.c_int64(threads))
    bits = {2: torch.int16, 4: torch.int32}[dst.element_size()]
    assert torch.equal(dst.view(bits), expected.view(bits)), (spec, threads)


def _special_specs(src, dst):
    """Transposing casts through each of their blocks: long source rows (staged in tiles of
    128 rows when streamed), whole tiles and tails, destination rows of whole lines and
    not (offset 3), short rows grouped along dim R-3 (NHWC of every other H row), a
    batch of small planes."""
    return [permute_spec((256, 1100), (1, 0), src, dst),
            permute_spec((129, 2100), (1, 0), src, dst, dst_offset=3),
            permute_spec((3, 45, 70), (0, 2, 1), src, dst),
            _chain_spec((2, 130, 90, 64), src, dst), _chain_spec((2, 70, 10, 24), src, dst, 1, 1)]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
@pytest.mark.parametrize(("src", "dst"), _STAGED_CASTS, ids=lambda d: d.name)
def test_transposing_casts_keep_torchs_bits(src, dst, stream):
    """The blocks that convert in registers (`tr_cast`, `tr_cast_lines`: F16C and AVX2
    without AVX-512, AVX-512 where the host has it) give torch's bits for NaN payloads,
    infinities, subnormals and rounding ties, streamed (staged in L2) and not, on 1 and 3
    threads."""
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for spec, threads in itertools.product(_special_specs(src, dst), (1, 3)):
            _bit_exact(None, spec, threads)
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.parametrize(("src", "dst"), _STAGED_CASTS, ids=lambda d: d.name)
def test_transposing_casts_keep_torchs_bits_on_avx2(tmp_path, src, dst):
    """The same with the unit built for AVX2 and F16C (its 8-lane blocks), streamed."""
    if not host_has("avx2") or not host_has("f16c"):
        pytest.skip("the AVX2 build needs an AVX2 CPU with F16C to run")
    lib = build_shared(generate_c_copy(_special_specs(src, dst)[0]).source, tmp_path, "cast", AVX2)
    for spec, threads in itertools.product(_special_specs(src, dst), (1, 3)):
        _bit_exact(lib, spec, threads)


@pytest.mark.parametrize(("src", "dst"), _STAGED_CASTS, ids=lambda d: d.name)
def test_staged_casts_without_a_scratch_buffer(tmp_path, src, dst):
    """A thread without a scratch buffer (its allocation failed) converts the staged cast
    tiles straight from the source: the unit built with the buffer's address replaced by
    a null pointer, streamed, on 1 and 3 threads, against torch."""
    if not (host_has("avx512bw") and host_has("avx512vl")) and not (
            host_has("avx2") and host_has("f16c")):
        pytest.skip("the staged casts are built for AVX-512 (BW, VL) or AVX2 with F16C")
    call = "(src_t*)stridec_pool_scratch_v1()"

    def without(source: str) -> str:
        assert source.count(call) == 1
        return source.replace(call, "(src_t*)0")

    specs = [permute_spec((300, 1100), (1, 0), src, dst),
             permute_spec((256, 1100), (1, 0), src, dst, dst_offset=3),
             _chain_spec((2, 130, 90, 64), src, dst), _chain_spec((2, 70, 10, 24), src, dst)]
    _run_built(tmp_path, NATIVE, specs, edit=without)


def test_staged_casts_convert_whole_lines_in_zmm():
    """With AVX-512, a streamed cast's staged tiles (`staged_cast`) take the thread's
    scratch buffer, prefetch the source rows they copy into it, and convert from there:
    float32 -> float16 in blocks of 32 rows whose rows are whole lines of halves (32
    `vcvtps2ph` of `zmm`, 64 permutes of 16-bit lanes on `zmm`, 16 streamed stores of
    `zmm`), float16 -> float32 in blocks whose rows of float32 are streamed from the
    registers (the block inlined or called)."""
    objdump = shutil.which("objdump")
    if objdump is None or not (host_has("avx512bw") and host_has("avx512vl")):
        pytest.skip("needs objdump and an AVX-512 (BW, VL) CPU")
    for src, dst, conversion, permute, converts in (("float32", "float16", "vcvtps2ph", "w", 32),
                                                    ("float16", "float32", "vcvtph2ps", "", 16)):
        source = emit_class_source(CopyClass("tiled_transpose", src, dst))
        functions = _instructions(cpu.load_unit(source)._name)
        body = functions.get("staged_cast", [])
        assert body, "no staged_cast in the unit"
        for callee in [i.split("<", 1)[1][:-1] for i in body if i.startswith("call")]:
            body = body + functions.get(callee, [])  # a block gcc left out of line
        assert any("stridec_pool_scratch_v1" in i for i in body)
        assert any(i.startswith("prefetcht0") for i in body)
        assert sum(i.startswith(conversion) and "zmm" in i for i in body) >= converts
        assert sum(i.startswith("vmovntdq") and "zmm" in i for i in body) >= 16
        if permute:
            assert sum(i.startswith(("vpermt2w", "vpermi2w")) and "zmm" in i
                       for i in body) >= 64, src


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [i8, f16], ids=lambda d: d.name)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
def test_packs_of_staged_blocks(torch_openmp, threads, dtype, stream):
    """Packs into contiguous rows of whole staged blocks narrower than a staged tile (NCHW32
    and NCHW64 of int8 on AVX-512: long tiles of the blocks into a buffer, one run out):
    rows of 1 to 4 blocks (16 … 64 int8 lanes, 8 … 64 float16), every lane a channel, the
    last group's lanes partly padding (mixed tiles: another path), H·W a whole number of
    tiles or not, on 1 and 3 threads, streamed and not."""
    if not stream:
        cpu.set_stream_threshold(-1)
    k = 16 // dtype.itemsize
    with _team(torch_openmp, threads):
        for block in (k, 2 * k, 3 * k, 64):
            for c, hw in ((2 * block, 4096), (2 * block, 1000), (block + 5, 600)):
                src = random_storage(dtype, 2 * c * hw, torch.Generator().manual_seed(block))
                for fill in (0, None):
                    run_c(_pack_spec(2, c, hw, block, dtype, fill), src=src)
                run_c(dataclasses.replace(_pack_spec(2, c, hw, block, dtype, -1),
                                          dst_offset=block), src=src)


# The staged transposes' sides and sizes around them, (source elements a, source rows b):
# a tile of 1024 by 256 int8 (1024 by 128 float16, staged on AVX2 alone); one under and
# over it; several tiles with a remainder of less than a block (64) and of less than a
# line; a source row of a block and one, destination rows of several tiles.
_STAGED_SIDES = {
    "int8": ((1024, 256), (1023, 255), (1025, 257), (2048 + 64 + 5, 512 + 16 + 3), (65, 300),
             (3000, 700)),
    "float16": ((1024, 128), (1023, 127), (1025, 129), (2048 + 32 + 5, 256 + 8 + 3), (65, 150),
                (3000, 350)),
}


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [i8, f16], ids=lambda d: d.name)
def test_transposes_staged_in_l2(torch_openmp, threads, dtype):
    """Streamed transposes whose tiles' source rows are first copied into the thread's
    scratch buffer (`staged_tile`: tiles of 1024 source elements by 256 source rows of
    int8, by 128 of float16 on AVX2 without AVX-512): source rows of one whole staged
    tile, one element under and over it, several tiles with a remainder of less than a
    block (64) and of less than a line; destination rows of exactly a tile, one under
    (not staged) and over, a last tile of less than a block; destinations off the lines;
    source rows with gaps between them from an odd offset (strides that are not the
    contiguous ones); a batch dim; masked tiles with and without the fill; on 1 and 3
    threads of either team."""
    with _team(torch_openmp, threads):
        for a, b in _STAGED_SIDES[dtype.name]:
            for dst_offset in (0, 1):
                run_c(permute_spec((b, a), (1, 0), dtype, dst_offset=dst_offset))
            spec = permute_spec((b, a), (1, 0), dtype)
            run_c(dataclasses.replace(spec, src_strides=(1, a + 37), src_offset=5))
        run_c(permute_spec((2, 300, 1100), (0, 2, 1), dtype, dst_offset=3))
        for fill in (0, None):
            run_c(_masked_transpose((1100, 600), dtype, fill))


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
def test_staged_tiles_into_whole_lines(torch_openmp, threads):
    """Staged int8 tiles whose destination rows are whole lines (on a line, a whole
    number of lines apart) go out as 64 × 64 blocks straight from the registers
    (`tr_lines`), the rest of a tile (a last block of under 64 source elements, rows past
    the last whole line) through the buffer: source rows of a tile and a block and 5
    more; destination rows of 2 tiles, of a tile and one line (320), and of 300 elements
    300 or 320 apart; destination offsets of a line, of none and of 1 (off the lines);
    a batch dim; source rows with gaps from an odd offset; on 1 and 3 threads of either
    team."""
    with _team(torch_openmp, threads):
        for b, a in ((512, 1024 + 64 + 5), (320, 2048 + 64), (300, 1100)):
            for dst_offset in (0, 64, 1):
                run_c(permute_spec((b, a), (1, 0), i8, dst_offset=dst_offset))
            spec = permute_spec((b, a), (1, 0), i8)
            run_c(dataclasses.replace(spec, src_strides=(1, a + 37), src_offset=5))
            pitch = -(-b // 64) * 64  # destination rows whole lines apart
            run_c(dataclasses.replace(spec, dst_strides=(pitch, 1), dst_offset=64))
        run_c(permute_spec((3, 320, 1100), (0, 2, 1), i8))
        run_c(permute_spec((2, 256, 4096), (0, 2, 1), i8, dst_offset=64))


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
def test_packs_staged_in_l2(torch_openmp, threads):
    """Streamed int8 packs into contiguous lanes of 16 … 128 channels (NCHW32, NCHW64)
    whose tiles' source rows are first copied into the thread's scratch buffer
    (`staged_tile`: 16 unstaged tiles' worth of H·W, 256 KiB of source rows): H·W of one
    staged tile, one under and over it, several tiles with a remainder of less than a
    block (64) and of more, just over one unstaged tile; the last group's lanes partly
    padding (mixed tiles, another path); fill 0 and none; destinations off the lines;
    planes with gaps between them from an odd offset; on 1 and 3 threads of either team."""
    with _team(torch_openmp, threads):
        for block in (16, 32, 48, 64, 128):
            tile = 64 * (256 // block) * 16  # H·W of a staged tile
            for hw in (tile, tile - 1, tile + 1, 2 * tile + 64 + 5, tile + 200,
                       64 * (256 // block) + 1):
                c = 2 * block
                gap = hw + 9  # planes hw + 9 elements apart
                src = random_storage(i8, 2 * c * gap + 5, torch.Generator().manual_seed(hw))
                for fill in (0, None):
                    run_c(_pack_spec(2, c, hw, block, i8, fill), src=src)
                spec = _pack_spec(2, c, hw, block, i8, 0)
                run_c(dataclasses.replace(spec, dst_offset=1), src=src)
                run_c(dataclasses.replace(spec, src_strides=(c * gap, block * gap, 1, gap),
                                          src_offset=5), src=src)
            run_c(_pack_spec(2, block + 5, tile + 3, block, i8, 0))


@pytest.mark.parametrize("torch_openmp", [True, False], ids=["torch_openmp", "own_pool"])
@pytest.mark.parametrize("threads", [1, 3])
def test_chwn4_tiles_staged_in_l2(torch_openmp, threads):
    """Streamed int8 CHWN4 packs whose merged tiles (2048 pixels by the 128 rows of 32
    images' lanes) first copy their source rows into the thread's scratch buffer: H·W of
    one staged tile, one under and over it, past one unstaged tile (129) and several with
    a remainder; N = 32 (one tile of rows), 33 and 40 (a second, partial one); C = 3 and 5
    (lanes of the fill), 4 and 8; fill 0, 7 and none; destinations off the lines; planes
    with gaps between them; on 1 and 3 threads of either team."""
    with _team(torch_openmp, threads):
        for n, c, hw in ((32, 4, 2048), (32, 3, 2047), (33, 8, 2049), (40, 3, 4100 + 17),
                         (32, 5, 129)):
            src = random_storage(i8, n * c * (hw + 9), torch.Generator().manual_seed(hw))
            for fill in (0, 7, None):
                run_c(_pack_spec(n, c, hw, 4, i8, fill, chwn=True), src=src)
            spec = _pack_spec(n, c, hw, 4, i8, 0, chwn=True)
            run_c(dataclasses.replace(spec, dst_offset=1), src=src)
            gap = hw + 9  # planes hw + 9 elements apart
            run_c(dataclasses.replace(spec, src_strides=(c * gap, 4 * gap, 1, gap)), src=src)


def test_staged_tiles_transpose_in_zmm():
    """The 1-byte tiles staged in L2 (`staged_tile`, AVX-512) take the thread's scratch
    buffer from the pool's library and transpose from it by in-lane byte interleaves on
    `zmm` registers (`vpunpcklbw`, `vpunpckhbw`: the staged tiles' blocks, `tr_wide`),
    regrouping 128-bit lanes (`vshufi64x2`) into whole destination lines that it streams
    (`tr_lines`)."""
    source = emit_class_source(CopyClass("tiled_transpose", "bits1", "bits1"))
    assert "stridec_pool_scratch_v1()" in source and "staged_tile(J," in source
    objdump = shutil.which("objdump")
    if objdump is None or not (host_has("avx512bw") and host_has("avx512vl")):
        pytest.skip("needs objdump and an AVX-512 (BW, VL) CPU")
    path = cpu.load_unit(source)._name
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", path], capture_output=True,
                          text=True, check=True).stdout
    body: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.endswith(">:"):
            inside = line.split("<", 1)[1].startswith("staged_tile")
        elif inside:
            body.append(line)
    assert body, "no staged_tile in the unit"
    for op in ("vpunpcklbw", "vpunpckhbw"):
        assert any(op in line and "zmm" in line for line in body), op
    # Whole destination lines (tr_lines): 128-bit lanes regrouped across zmm, streamed.
    for op in ("vshufi64x2", "vmovntdq"):
        assert any(op in line and "zmm" in line for line in body), op
    assert any("stridec_pool_scratch_v1" in line for line in body)
