"""Casts on the planned copies' library (`codegen/c/lib/copy_cast.h`, one unit per dtype
pair): the conversion of every pair bit for bit against torch's `.to()` (NaN payloads,
infinities, subnormals, rounding ties, out-of-range float -> int), built natively and for
AVX2 + F16C and plain C; and every micro-kernel converting as it stores, from storages of
those special values, on 1 and 3 threads, streamed and not."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import subprocess

import pytest
import torch

from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.c.casts import C_PRELUDE
from stridec.compiler.codegen.c.copy import generate_c_copy
from stridec.compiler.codegen.spec import CopySpec
from stridec.compiler.copy_plan import KERNELS, CopyPlan, candidate_plans, plan_copy
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.compiler.c_build import AVX2, GCC, NATIVE, PORTABLE, build_shared, host_has, needs_gcc
from tests.compiler.cast_values import special_values
from tests.compiler.test_codegen_c_copy import _team
from tests.compiler.test_codegen_copy import (
    contiguous_strides,
    index_grid,
    permute_spec,
    sentinel,
    span,
)
from tests.compiler.test_copy_plan import CACHES

pytestmark = needs_gcc

NAMES = list(DTYPES)
PAIRS = [(s, d) for s, d in itertools.product(NAMES, NAMES) if s != d]
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# The pairs every kernel runs for: the ones with vector paths of their own (float32 <->
# float16 and bfloat16), and widening, narrowing and float -> int ones on the generic loop.
KERNEL_PAIRS = [("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
                ("bfloat16", "float32"), ("int8", "float32"), ("float64", "int8"),
                ("bool", "float16")]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_BITS[t.element_size()]) if t.dtype != torch.bool else t.view(torch.uint8)


def _to(x: torch.Tensor, dst: str) -> torch.Tensor:
    """torch's `.to()` of a contiguous storage on one thread: its vector loop, the oracle
    (`codegen/c/casts.py`)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return x.to(DTYPES[dst].torch)
    finally:
        torch.set_num_threads(saved)


# --------------------------------------------------------------------------- conversions


def _pair_unit(s: str, d: str) -> str:
    """The conversion of one pair as the library's units build it, and two entry points:
    `one_<s>_<d>` (cast_one in a loop: the gather's) and `run_<s>_<d>` (cast_run: every
    other kernel's)."""
    return "\n".join([
        f"#define CAST_SRC STRIDEC_DT_{s.upper()}", f"#define CAST_DST STRIDEC_DT_{d.upper()}",
        C_PRELUDE, cplan._library_text("copy_cast.h"),
        f"void one_{s}_{d}(const void* s, void* d, int64_t n) {{",
        "    for (int64_t j = 0; j < n; j++) ((dst_t*)d)[j] = cast_one(((const elem_t*)s)[j]);",
        "}",
        f"void run_{s}_{d}(const void* s, void* d, int64_t n) {{",
        "    cast_run((dst_t*)d, (const elem_t*)s, n);", "}"])


@pytest.fixture(scope="module", params=[NATIVE, AVX2, PORTABLE], ids=["native", "avx2", "portable"])
def pairs_lib(request, tmp_path_factory):
    flags = request.param
    if flags == AVX2 and not (host_has("avx2") and host_has("f16c")):
        pytest.skip("the AVX2 build needs an AVX2 CPU with F16C to run")
    folder = tmp_path_factory.mktemp("plan_casts")
    files = []
    for s, d in PAIRS:  # a unit each, as the library builds them, in one gcc run
        path = folder / f"{s}_{d}.c"
        path.write_text(_pair_unit(s, d))
        files.append(str(path))
    so = folder / "pairs.so"
    cmd = [GCC, *flags, "-std=gnu11", "-fno-strict-aliasing", "-shared", "-fPIC", "-o",
           str(so), *files]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(so))


@pytest.mark.parametrize("kind", ["one", "run"])
@pytest.mark.parametrize("src", NAMES)
def test_every_pair_converts_as_torch(pairs_lib, src, kind):
    x = special_values(src).contiguous()
    for dst in NAMES:
        if dst == src:
            continue
        want = _to(x, dst)
        got = torch.empty(x.numel(), dtype=DTYPES[dst].torch)
        fn = getattr(pairs_lib, f"{kind}_{src}_{dst}")
        fn(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(got.data_ptr()),
           ctypes.c_int64(x.numel()))
        bad = (_bits(got) != _bits(want)).nonzero().flatten()
        if bad.numel():
            k = int(bad[0])
            raise AssertionError(f"{kind} {src} -> {dst}: {bad.numel()} of {x.numel()} "
                                 f"differ; first at {k}: {x[k].item()!r} gives "
                                 f"{int(_bits(got)[k]):#x}, torch {int(_bits(want)[k]):#x}")


def _convert(lib, src: str, dst: str, x: torch.Tensor) -> torch.Tensor:
    got = torch.empty(x.numel(), dtype=DTYPES[dst].torch)
    getattr(lib, f"run_{src}_{dst}")(ctypes.c_void_p(x.data_ptr()),
                                     ctypes.c_void_p(got.data_ptr()), ctypes.c_int64(x.numel()))
    return got


def test_half_round_trip_through_float32_is_exact(pairs_lib):
    """Every float16 / bfloat16 pattern widened to float32 and narrowed again is itself,
    NaNs aside (float16 NaNs come back quieted, bfloat16 NaNs as 0xffff, as torch's)."""
    for half in ("float16", "bfloat16"):
        x = special_values(half)
        back = _convert(pairs_lib, "float32", half, _convert(pairs_lib, half, "float32", x))
        want = x.to(torch.float32).to(DTYPES[half].torch)
        assert torch.equal(_bits(back), _bits(want))
        finite = ~torch.isnan(x)
        assert torch.equal(_bits(back)[finite], _bits(x)[finite])


# --------------------------------------------------------------------------- the kernels


def _cast_cases(src: str, dst: str) -> list[tuple[str, CopySpec]]:
    """A copy of each micro-kernel from `src` to `dst` at odd extents (and whole lines)."""
    s, d = DTYPES[src], DTYPES[dst]

    def spec(sizes, src_strides, src_offset=0, dst_offset=0):
        return CopySpec(sizes, src_strides, src_offset, contiguous_strides(sizes), dst_offset,
                        s, d)

    cases = [
        ("rows", spec((37, 301), (405, 1), 2)),
        ("rows_long", spec((3, 5000), (5003, 1), 1, 1)),
        ("transpose", permute_spec((133, 71), (1, 0), s, d, dst_offset=1)),
        ("transpose_lines", permute_spec((128, 200), (1, 0), s, d)),
        ("transpose_long", permute_spec((40, 1100), (1, 0), s, d)),
        ("transpose_sides", permute_spec((6, 5, 7, 3, 4), (4, 2, 0, 3, 1), s, d)),
        ("gather", CopySpec((19, 23), (23, 1), 0, (70, 3), 1, s, d)),
        ("reverse", spec((19, 77), (80, -1), 76)),
        ("reverse_short", spec((40, 5), (7, -1), 4)),
        ("broadcast", CopySpec((31, 45, 3), (0, 1, 45), 0, (135, 3, 1), 0, s, d)),
        # blocks of 3 pixels of 3 lanes joined along the loop outside them (lanes_joined)
        ("deinterleave_joined", permute_spec((3, 5, 7, 5, 3, 3), (5, 0, 2, 3, 1, 4), s, d)),
        ("interleave_joined", permute_spec((3, 3, 35, 5, 3), (1, 3, 2, 4, 0), s, d)),
    ]
    for k in (2, 3, 4):
        cases += [(f"deinterleave{k}", permute_spec((3, 37, 41, k), (0, 3, 1, 2), s, d)),
                  (f"interleave{k}", permute_spec((3, k, 37, 41), (0, 2, 3, 1), s, d)),
                  (f"compress{k}", spec((9, 101), (101 * k + 5, k), 1))]
    return cases


def _special_storage(src: str, n: int) -> torch.Tensor:
    """`n` or more elements (a multiple of 64) of the conversion tests' values of `src`,
    repeated, shifted by one each repeat so that a value meets every lane of a block."""
    values = special_values(src)
    reps = -(-(n + 64) // values.numel())
    return torch.cat([values.roll(k) for k in range(reps)])[: -(-n // 64) * 64]


def run_cast(plan: CopyPlan, spec: CopySpec, threads: int, fn) -> None:
    """`plan` of `spec` run by `fn` (a build of the pair's library) from a storage of
    special values, against torch's `.to()` of that whole storage moved by `as_strided`,
    bit for bit, on the whole destination storage (a sentinel around the copy)."""
    src = _special_storage(spec.src_dtype.name, span(spec, spec.src_strides, spec.src_offset))
    dst = sentinel(spec.dst_dtype, span(spec, spec.dst_strides, spec.dst_offset) + 3)
    converted = _to(src, spec.dst_dtype.name)
    expected = dst.clone()
    src_idx = index_grid(spec.sizes, spec.src_strides, spec.src_offset)
    torch.as_strided(expected, spec.sizes, spec.dst_strides, spec.dst_offset).copy_(
        converted[src_idx])
    params = cplan.plan_params(plan)
    fn(src.data_ptr(), dst.data_ptr(), (ctypes.c_int64 * len(params))(*params), threads)
    assert torch.equal(_bits(dst), _bits(expected)), (plan.describe(), spec, threads)


def _fn(src: str, dst: str, lib=None):
    size = DTYPES[src].itemsize
    lib = lib or cpu.load_unit(cplan.plan_unit_source(size, (src, dst)))
    fn = getattr(lib, cplan.plan_symbol(size, (src, dst)))
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    fn.restype = None
    return fn


def _run_all(src: str, dst: str, fn, threads_list=(1, 3)) -> set[str]:
    met = set()
    previous = cpu.set_stream_threshold(-1)
    try:
        for (_, spec), stream in itertools.product(_cast_cases(src, dst), (False, True)):
            cpu.set_stream_threshold(0 if stream else -1)
            for threads in threads_list:
                with _team(True, threads):
                    for plan in candidate_plans(spec, CACHES, limit=2):
                        met.add(plan.kernel)
                        run_cast(dataclasses.replace(plan, parallel=threads), spec, threads, fn)
    finally:
        cpu.set_stream_threshold(previous)
    return met


@pytest.mark.parametrize(("src", "dst"), KERNEL_PAIRS, ids=lambda n: n)
def test_every_kernel_converts_as_torch(src, dst):
    # fills: copies; permutes (a matrix in one vector): not casts
    assert _run_all(src, dst, _fn(src, dst)) == set(KERNELS) - {"fill", "permute"}


@pytest.mark.parametrize(("src", "dst"), KERNEL_PAIRS[:4], ids=lambda n: n)
def test_kernels_built_for_avx2(tmp_path, src, dst):
    """The float32 <-> half units built for AVX2 and F16C without AVX-512 (8-lane
    conversions, no masked loads): the same bits."""
    if not (host_has("avx2") and host_has("f16c")):
        pytest.skip("the AVX2 build needs an AVX2 CPU with F16C to run")
    size = DTYPES[src].itemsize
    lib = build_shared(cplan.plan_unit_source(size, (src, dst)), tmp_path, "cast", AVX2)
    _run_all(src, dst, _fn(src, dst, lib), (1, 3))


def test_kernels_built_without_vectors(tmp_path):
    lib = build_shared(cplan.plan_unit_source(4, ("float32", "float16")), tmp_path, "cast",
                       PORTABLE)
    _run_all("float32", "float16", _fn("float32", "float16", lib), (1,))


def test_staged_transposes_convert_as_torch():
    spec = permute_spec((70, 3, 300), (2, 1, 0), DTYPES["float32"], DTYPES["bfloat16"])
    fn = _fn("float32", "bfloat16")
    for plan in candidate_plans(spec, CACHES, limit=2):
        run_cast(dataclasses.replace(plan, stage=True, prefetch=True), spec, 1, fn)


# --------------------------------------------------------------------------- planning


def test_a_cast_is_planned_as_its_sources_copy():
    f32, f16 = DTYPES["float32"], DTYPES["float16"]
    cast = plan_copy(permute_spec((300, 200), (1, 0), f32, f16), CACHES)
    assert cast.kernel == "transpose" and cast.cast == ("float32", "float16")
    assert cast.elem_bytes == 4 and cast.dst_bytes == 2
    assert cast.stream_bytes == 300 * 200 * 3  # the mean of 4 bytes read and 2 written
    call = cplan.planned_call(permute_spec((300, 200), (1, 0), f32, f16))
    assert call is not None and call[0].symbol == "stridec_plan_cast_float32_float16"


def test_one_unit_per_pair():
    f32, f16, i8 = DTYPES["float32"], DTYPES["float16"], DTYPES["int8"]
    a = generate_c_copy(permute_spec((30, 20), (1, 0), f32, f16))
    b = generate_c_copy(permute_spec((7, 5, 3), (2, 0, 1), f32, f16))
    c = generate_c_copy(permute_spec((7, 5, 3), (2, 0, 1), i8, f16))
    assert a.source == b.source != c.source
    assert cplan.plan_call_fits(a.calls[0][0], a.calls[0][3])
