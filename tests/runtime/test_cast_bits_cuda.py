"""Casts on a GPU give torch's CUDA bits (docs/semantics.md#casts), which differ from its
CPU ones: CUDA converts floats to integers as `cvt.rzi` does (NaN -> 0, out of range ->
the nearest limit; int8 / int16 the low bits of that int32, uint8 of that int64) where x86
gives the minimum, and its NaNs are the conversion instructions'.

On the GPU (`gpu` tests), every dtype pair of stridec's kernels against torch's `.to()`
on the same device, bit for bit, NaNs included, and the model below against torch there.
On the CPU, the kernels generated for CUDA run through Triton's interpreter against the
model: every bit of every value whose result is not a NaN (a NaN's bits come from the
GPU's conversion instruction, as torch's do: the interpreter has none), and a NaN where
the model has one; and the kernels compile for sm_90 to the conversion instructions
torch's CUDA kernels use.
"""

from __future__ import annotations

import re

import pytest
import torch
from test_cast_bits import NAMES, assert_same_bits, cast_graph, patterns

import stridec
from stridec.compiler.codegen.copy import generate_copy
from stridec.compiler.codegen.spec import CopySpec
from stridec.ir.dtypes import DTYPES
from stridec.runtime.launch import launch_copy

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
PAIRS = [(s, d) for s in NAMES for d in NAMES if s != d]


def _saturated(v: torch.Tensor, bits: int) -> torch.Tensor:
    """float64 `v` truncated to int<bits> as `cvt.rzi`: NaN -> 0, out of range -> the
    nearest limit (as int64)."""
    high, low = v >= 2.0 ** (bits - 1), v < -(2.0 ** (bits - 1))
    out = torch.where(high | low | v.isnan(), 0.0, v).trunc().to(torch.int64)
    out = out.masked_fill(high, 2 ** (bits - 1) - 1)
    return out.masked_fill(low, -(2 ** (bits - 1)))


def cuda_model(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's CUDA `.to(dtype)` of `x`, computed on the CPU, and where its result is a
    NaN whose bits are the GPU's (not modelled). c10 converts through float32 where it
    widens float16 / bfloat16 or narrows float64 to them and where an integer becomes a
    float16 / bfloat16; finite values round to nearest even as on the CPU."""
    src = x.dtype
    nan = torch.zeros(x.shape, dtype=torch.bool)
    if dtype == torch.bool:
        return x != 0, nan
    if src in FLOATS and dtype in FLOATS:
        nan = x.isnan()
        f = x.to(torch.float32) if src != torch.float32 and (
            src in (torch.float16, torch.bfloat16) or dtype in (torch.float16, torch.bfloat16)
        ) else x
        return f.to(dtype), nan
    if src in FLOATS:
        v = x.to(torch.float64)
        if dtype == torch.uint32:
            out = torch.where(v.isnan() | (v < 0), 0.0, v).clamp(max=2.0**32 - 1).trunc()
            return out.to(torch.int64).to(torch.uint32), nan
        wide = _saturated(v, 64 if dtype in (torch.int64, torch.uint8) else 32)
        return wide.to(dtype), nan  # integer narrowing keeps the low bits
    if dtype in (torch.float16, torch.bfloat16):
        return x.to(torch.float32).to(dtype), nan
    return x.to(dtype), nan


def _check(got: torch.Tensor, want: torch.Tensor, nan: torch.Tensor, x: torch.Tensor,
           what: str, nans: bool = True) -> None:
    """Every bit where the result is no NaN; a NaN where it is one (`nans`)."""
    if nans:
        assert bool(got[nan].isnan().all()), f"{what}: a NaN became a number"
    assert_same_bits(got[~nan], want[~nan], x[~nan], what)


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_kernels_for_cuda_follow_torchs_cuda_casts(src: str, dst: str) -> None:
    """The kernel generated for CUDA, run by Triton's interpreter, against the model."""
    x = patterns(src)
    kernel = generate_copy(CopySpec((x.numel(),), (1,), 0, (1,), 0, DTYPES[src], DTYPES[dst]),
                           "cuda")
    out = torch.empty(x.numel(), dtype=DTYPES[dst].torch)
    launch_copy(kernel, x.view(torch.int32) if src == "uint32" else x,
                out.view(torch.int32) if dst == "uint32" else out)
    want, nan = cuda_model(x, DTYPES[dst].torch)
    # The interpreter narrows a NaN to bfloat16 by truncation (a payload in the low bits
    # gives inf); the GPU's instruction gives a NaN, which the gpu tests check.
    _check(out, want, nan, x, f"{src} -> {dst} (CUDA kernel, interpreted)",
           nans=dst != "bfloat16")


def test_cuda_and_cpu_kernels_differ_where_torch_does() -> None:
    """The values the two devices convert differently: float32 -> int32 of NaN, 3e9 and
    -inf, -> int8 of 3e9, -> uint8 of -1."""
    x = torch.tensor([float("nan"), 3e9, -float("inf"), -1.0])
    cuda = {d: cuda_model(x, DTYPES[d].torch)[0].tolist() for d in ("int32", "int8", "uint8")}
    assert cuda == {"int32": [0, 2**31 - 1, -(2**31), -1], "int8": [0, -1, 0, -1],
                    "uint8": [0, 0, 0, 255]}
    for d, want in cuda.items():
        spec = CopySpec((4,), (1,), 0, (1,), 0, DTYPES["float32"], DTYPES[d])
        for target, expected in (("cuda", want), ("cpu", x.to(DTYPES[d].torch).tolist())):
            out = torch.empty(4, dtype=DTYPES[d].torch)
            launch_copy(generate_copy(spec, target), x, out)
            assert out.tolist() == expected, (target, d)


# The conversion instructions torch's sm_90 kernels use (c10's Half, BFloat16, double):
# `__float2half`, `__float2bfloat16`, `__half2float`, `__bfloat162float`; each kernel
# generated for CUDA must convert with them (packed forms count), so its NaNs are torch's.
INSTRUCTIONS = {
    ("float32", "float16"): r"cvt\.rn\.f16(x2)?\.f32",
    ("float32", "bfloat16"): r"cvt\.rn\.bf16(x2)?\.f32",
    ("float16", "float32"): r"cvt\.f32\.f16",
    ("bfloat16", "float32"): r"cvt\.f32\.bf16",
    ("float64", "float32"): r"cvt\.rn\.f32\.f64",
    ("float32", "float64"): r"cvt\.f64\.f32",
    ("float64", "bfloat16"): r"cvt\.rn\.bf16(x2)?\.f32",
}


@pytest.mark.parametrize(("src", "dst"), list(INSTRUCTIONS))
def test_cuda_casts_use_torchs_conversion_instructions(src: str, dst: str) -> None:
    compiler = pytest.importorskip("triton.compiler")
    gpu_target = pytest.importorskip("triton.backends.compiler").GPUTarget
    from stridec.runtime.backends.triton import load_jit, signature

    pointer = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64"}
    kernel = generate_copy(CopySpec((4096,), (1,), 0, (1,), 0, DTYPES[src], DTYPES[dst]), "cuda")
    jit = load_jit(kernel.source, kernel.name)
    types = signature(jit, [pointer[src], pointer[dst]], kernel.args, kernel.constexprs)
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs))
    ptx = compiler.compile(source, target=gpu_target("cuda", 90, 32)).asm["ptx"]
    assert re.search(INSTRUCTIONS[(src, dst)], ptx), f"{src} -> {dst}: no such cvt in the PTX"


# -- on a GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "reference"])
@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_cast_on_cuda_matches_torch_bit_for_bit(src: str, dst: str, backend: str) -> None:
    x = patterns(src).cuda()
    got = stridec.compile(cast_graph(tuple(x.shape), src, dst), backend=backend)(x)
    assert_same_bits(got.cpu(), x.to(DTYPES[dst].torch).cpu(), x.cpu(), f"{src} -> {dst}")


@pytest.mark.gpu
@pytest.mark.parametrize(("src", "dst"), [("float32", "bfloat16"), ("float32", "int8"),
                                          ("float64", "float16"), ("bfloat16", "float32"),
                                          ("float32", "uint32"), ("float16", "uint8")])
def test_cast_bits_on_cuda_do_not_depend_on_the_layout(src: str, dst: str) -> None:
    """Strided, offset, transposed and one-element inputs: torch's bits."""
    x = patterns(src)[:4096].cuda()
    want = x.to(DTYPES[dst].torch)
    store = torch.stack([x, x, x], 1)  # column 1: stride 3, offset 1
    fn = stridec.compile(cast_graph(tuple(x.shape), src, dst))
    assert_same_bits(fn(store[:, 1]).cpu(), want.cpu(), x.cpu(), f"{src} -> {dst}, strided")
    square = x.reshape(64, 64)
    t = stridec.compile(cast_graph((64, 64), src, dst))(square.t())
    assert_same_bits(t.cpu(), square.t().to(DTYPES[dst].torch).cpu(), square.t().cpu(),
                     f"{src} -> {dst}, transposed")
    one = stridec.compile(cast_graph((1,), src, dst))
    for k in range(0, 4096, 257):
        assert_same_bits(one(x[k:k + 1]).cpu(), want[k:k + 1].cpu(), x[k:k + 1].cpu(),
                         f"{src} -> {dst}, one element")


@pytest.mark.gpu
@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_the_model_is_torchs_cuda_cast(src: str, dst: str) -> None:
    """The CPU tests' model against torch on the GPU: where this fails, the kernels'
    rules (and the model) misread CUDA."""
    x = patterns(src)
    want, nan = cuda_model(x, DTYPES[dst].torch)
    _check(x.cuda().to(DTYPES[dst].torch).cpu(), want, nan, x, f"model of {src} -> {dst}")

