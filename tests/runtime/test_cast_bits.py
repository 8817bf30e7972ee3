"""Casts bit for bit against torch's CPU `.to()`, every dtype pair, every CPU backend (the
cpu backend's 110 pair libraries with -m slow; in the suite, those of tests/cast_pairs.py).

The oracle is torch's vector loop: each input value sits at a multiple of 64 in a
contiguous tensor whose length is a multiple of 64, so torch converts it in its vectorized
body (its scalar tail and its strided loop give other NaN bits, e.g. float32 NaN ->
bfloat16 is 0xFFFF in the first and 0x7FC0 in the others; stridec follows the first
whatever the layout). Inputs: all 65,536 float16 and bfloat16 bit patterns, every int8 /
uint8 / int16 value, and for the wider types their specials (NaN payloads, signalling
NaNs, ±inf, subnormals, rounding ties, the int32 / int64 / uint32 limits) plus random
bit patterns.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from stridec.runtime.backends.reference_casts import cast
from stridec.runtime.compile import BACKENDS
from tests.cast_pairs import cpu_marks

# The interpreter's numpy warns when it converts a signalling NaN; the bits are checked.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")
CPU_BACKENDS = [b for b in BACKENDS if b in ("interpret", "reference", "cpu")]
NAMES = list(DTYPES)

_F32 = [0x0, 0x1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FA00000,
        0x7FC00000, 0x7FC02000, 0x7FFFFFFF, 0x33800000, 0x33800001, 0x387FC000, 0x477FF000,
        0x477FEFFF, 0x477FE000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x4F000000, 0x5F000000,
        0x437F0000, 0x43800000, 0x3FC00000, 0x40200000, 0x40600000, 0x4F800000, 0x4F7FFFFF,
        0x4F400000]
_F64 = [0x0, 0x1, 0x7FF0000000000000, 0x7FF0000000000001, 0x7FF8000000000000,
        0x7FF8000020000000, 0x7FF4000000000000, 0x7FFFFFFFFFFFFFFF, 0x3FF0000010000000,
        0x3FF0000010000001, 0x40EFFFE000000000, 0x40EFFFF000000000, 0x36A0000000000000,
        0x3E70000000000000, 0x3810000000000000, 0x41E0000000000000, 0x41EFFFFFFFE00000,
        0x41F0000000000000, 0x43E0000000000000]
_INTS = [0, 1, -1, 2**24 + 1, 2**24 + 3, 2**31 - 1, -(2**31), 65504, 65519, 65520, 2**53 + 1,
         2**62 + 2**39 + 1, 2**63 - 1, -(2**63), 0x7FFFFFBF, 2**32 - 1]


def patterns(name: str) -> torch.Tensor:
    """The inputs of one source dtype (see the module docstring)."""
    dtype = DTYPES[name].torch
    gen = torch.Generator().manual_seed(0)
    if name in ("float16", "bfloat16", "int16"):
        return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dtype)
    if name in ("int8", "uint8"):
        return torch.arange(256, dtype=torch.int32).to(dtype)
    if name == "bool":
        return torch.tensor([False, True])
    if name == "float32":
        special = torch.tensor(_F32 + [b | 0x80000000 for b in _F32], dtype=torch.int64)
        random = torch.randint(-(2**31), 2**31, (1024,), generator=gen, dtype=torch.int64)
        return torch.cat([special, random]).to(torch.int32).view(torch.float32)
    if name == "float64":
        special = torch.tensor(_F64 + [b - 2**63 for b in _F64], dtype=torch.int64)
        random = torch.randint(-(2**63), 2**63 - 1, (1024,), generator=gen, dtype=torch.int64)
        return torch.cat([special, random]).view(torch.float64)
    info = torch.iinfo(dtype)
    special = torch.tensor([v for v in _INTS if info.min <= v <= info.max], dtype=torch.int64)
    random = torch.randint(info.min, info.max, (1024,), generator=gen, dtype=torch.int64)
    return torch.cat([special, random]).to(dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bit pattern of every element, as int64."""
    if t.dtype == torch.bool:
        return t.to(torch.int64)
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width).to(torch.int64)


def torch_vector_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's `.to(dtype)` of each element of `x` as its vector loop converts it."""
    return x.reshape(-1).repeat_interleave(64).to(dtype)[::64].reshape(x.shape)


def cast_graph(sizes: tuple[int, ...], src: str, dst: str) -> stridec.Graph:
    g = stridec.Graph("cast")
    g.output(g.input("x", sizes, src).to(dst))
    return g


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    bad = (bits(got) != bits(want)).reshape(-1).nonzero().reshape(-1)
    if len(bad):
        i = bad[:4]
        raise AssertionError(
            f"{what}: {len(bad)} of {want.numel()} differ, e.g. input bits "
            f"{[hex(v) for v in bits(x).reshape(-1)[i].tolist()]}: got "
            f"{[hex(v) for v in bits(got).reshape(-1)[i].tolist()]}, torch "
            f"{[hex(v) for v in bits(want).reshape(-1)[i].tolist()]}"
        )


# Every pair on the interpreter; on the cpu backend, which builds a library per pair, the
# suite's pairs (tests/cast_pairs.py) and all 110 with -m slow. Every pair's conversion
# code is checked in the suite, in one build, by tests/compiler/test_copy_plan_casts.py.
PAIRS = [(s, d) for s in NAMES for d in NAMES if s != d]


def _cast_cases() -> list:
    cases = []
    for src, dst in PAIRS:
        for backend in CPU_BACKENDS:
            cases.append(pytest.param(src, dst, backend, id=f"{src}-{dst}-{backend}",
                                      marks=cpu_marks(backend, src, dst)))
    return cases


@pytest.mark.parametrize(("src", "dst", "backend"), _cast_cases())
def test_cast_matches_torch_bit_for_bit(src: str, dst: str, backend: str) -> None:
    x = patterns(src)
    got = stridec.compile(cast_graph(tuple(x.shape), src, dst), backend=backend)(x)
    assert_same_bits(got, torch_vector_cast(x, DTYPES[dst].torch), x, f"{src} -> {dst}")


LAYOUT_PAIRS = [("float32", "bfloat16"), ("float32", "float16"), ("float16", "float32"),
                ("float64", "bfloat16"), ("float32", "uint32"), ("bfloat16", "float16")]


@pytest.mark.parametrize(("src", "dst", "backend"), [
    pytest.param(src, dst, backend, id=f"{src}-{dst}-{backend}",
                 marks=cpu_marks(backend, src, dst))
    for src, dst in LAYOUT_PAIRS for backend in CPU_BACKENDS])
def test_cast_bits_do_not_depend_on_the_layout(src: str, dst: str, backend: str) -> None:
    """A strided, an offset and a one-element input give the bits of the vector loop
    (torch's own strided loop and scalar tail would not)."""
    x = patterns(src)[:2048]
    store = torch.stack([x, x, x], 1)  # (n, 3): column 1 is stepped, at offset 1
    want = torch_vector_cast(x, DTYPES[dst].torch)
    strided = stridec.compile(cast_graph(tuple(x.shape), src, dst), backend=backend)
    assert_same_bits(strided(store[:, 1]), want, x, f"{src} -> {dst}, stride 3 offset 1")
    one = stridec.compile(cast_graph((1,), src, dst), backend=backend)
    for k in range(0, 64):
        assert_same_bits(one(x[k : k + 1]), want[k : k + 1], x[k : k + 1], f"{src} -> {dst}")


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_issue_nan_examples(backend: str) -> None:
    """float32 NaN -> bfloat16 and the signalling NaN 0x7F800001 -> float16, as torch."""
    for src_bits, dst in ((0x7FC00000, "bfloat16"), (0x7F800001, "float16"),
                          (0x7F800001, "bfloat16"), (0xFFC00001, "float16")):
        x = torch.tensor([src_bits], dtype=torch.int64).to(torch.int32).view(torch.float32)
        got = stridec.compile(cast_graph((1,), "float32", dst), backend=backend)(x)
        assert_same_bits(got, torch_vector_cast(x, DTYPES[dst].torch), x, f"f32 -> {dst}")


# The transposing casts whose C blocks convert in registers (AVX-512 builds; other builds
# convert through a buffer): every pattern of `patterns` through a transpose of whole
# blocks (256 x 256), tails on both sides (37 x 70, 129 x 250), strips of source rows
# longer than 4 KiB into destination rows of whole lines and not (64 x 2100, 48 x 2100;
# streamed: tiles staged in L2, whole and cut short on both sides, 300 x 1100), a batch of
# transposes, each streamed and not.
TRANSPOSING = [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"),
               ("bfloat16", "float32")]


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend cannot build here")
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
@pytest.mark.parametrize(("src", "dst"), TRANSPOSING)
def test_transposing_casts_match_torch_bit_for_bit(src: str, dst: str, stream: bool) -> None:
    x = patterns(src)
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for sizes in ((256, 256), (37, 70), (129, 250), (64, 2100), (48, 2100), (300, 1100),
                      (3, 45, 70)):
            n = 1
            for k in sizes:
                n *= k
            flat = x.repeat(-(-n // x.numel()))[:n]
            t = flat.reshape(sizes)
            g = stridec.Graph("cast_t")
            v = g.input("x", sizes, src)
            g.output(v.transpose(-1, -2).to(dst).contiguous())
            got = stridec.compile(g, backend="cpu")(t)
            want = torch_vector_cast(t, DTYPES[dst].torch).transpose(-1, -2).contiguous()
            assert_same_bits(got, want, t.transpose(-1, -2).contiguous(),
                             f"{src} -> {dst}, {sizes} transposed")
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend cannot build here")
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
@pytest.mark.parametrize(("src", "dst"), TRANSPOSING)
def test_nhwc_slices_cast_match_torch_bit_for_bit(src: str, dst: str, stream: bool) -> None:
    """`x.permute(0, 2, 3, 1).to(dst)[:, ::2]` (one copy: NHWC of every other H row,
    converted; streamed, its tiles span several H rows of 64 planes, staged in L2), every
    pattern, rows of whole blocks and not, into destination rows of whole lines and not."""
    x = patterns(src)
    previous = cpu.set_stream_threshold(0 if stream else -1)
    try:
        for sizes in ((2, 64, 40, 64), (2, 70, 9, 24)):
            n = sizes[0] * sizes[1] * sizes[2] * sizes[3]
            t = x.repeat(-(-n // x.numel()))[:n].reshape(sizes)
            g = stridec.Graph("nhwc_cast_slice")
            v = g.input("x", sizes, src)
            g.output(v.permute(0, 2, 3, 1).to(dst)[:, ::2].contiguous())
            got = stridec.compile(g, backend="cpu")(t)
            moved = t.permute(0, 2, 3, 1)[:, ::2].contiguous()
            assert_same_bits(got, torch_vector_cast(moved, DTYPES[dst].torch), moved,
                             f"{src} -> {dst}, {sizes} NHWC, every other row")
    finally:
        cpu.set_stream_threshold(previous)


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend cannot build here")
@pytest.mark.parametrize(("src", "dst"), TRANSPOSING)
def test_streamed_converting_runs_match_torch_bit_for_bit(src: str, dst: str) -> None:
    """Contiguous casts, streamed: float32 <-> float16 / bfloat16 convert each whole line
    of the destination in registers; every pattern, into a fresh output and into an
    `out=` that starts mid-line (a head and a tail converted one by one)."""
    x = patterns(src)
    want = torch_vector_cast(x, DTYPES[dst].torch)
    previous = cpu.set_stream_threshold(0)
    try:
        fn = stridec.compile(cast_graph(tuple(x.shape), src, dst), backend="cpu")
        assert_same_bits(fn(x), want, x, f"{src} -> {dst}, streamed")
        o = torch.empty(x.numel() + 5, dtype=DTYPES[dst].torch)[5:]
        fn(x, out=o)
        assert_same_bits(o, want, x, f"{src} -> {dst}, streamed into an offset out=")
    finally:
        cpu.set_stream_threshold(previous)


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8),
    src=st.sampled_from(["float32", "float64"]),
    dst=st.sampled_from(NAMES),
)
def test_reference_cast_matches_torch_on_any_bits(raw: list[int], src: str, dst: str) -> None:
    """The reference rules (`stridec.runtime.backends.reference_casts.cast`) on any
    float32 / float64 bits."""
    if src == "float32":
        x = torch.tensor([r & 0xFFFFFFFF for r in raw], dtype=torch.int64)
        x = x.to(torch.int32).view(torch.float32)
    else:
        x = torch.tensor([r - 2**63 for r in raw], dtype=torch.int64).view(torch.float64)
    want = torch_vector_cast(x, DTYPES[dst].torch)
    assert_same_bits(cast(x, DTYPES[dst].torch), want, x, f"{src} -> {dst}")


def test_philox_uniform_bounds_are_torchs() -> None:
    """As `uniform_`: finite bounds, low <= high, a finite float32 range — so no NaN."""
    for low, high in ((0.0, float("inf")), (float("nan"), 1.0), (2.0, 1.0), (-3e38, 3e38)):
        with pytest.raises(RuntimeError):
            torch.empty(4).uniform_(low, high)
        g = stridec.Graph("u")
        s = g.input("s", (6,), "int32")
        with pytest.raises(stridec.ShapeError, match="philox_uniform"):
            g.philox_uniform(s, (4,), "float32", low, high)
