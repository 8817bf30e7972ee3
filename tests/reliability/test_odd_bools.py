"""bool tensors whose bytes are 2 … 255 (a uint8 tensor viewed as bool, `frombuffer`,
numpy): torch reads every byte but 0 as true, so a cast gives 1 (1.0, True) for each.
Before, the C casts converted the raw byte (2 → 2.0). Every path: contiguous runs,
gathers, tiled transposes, streamed and not, on one and three threads, a fused cast in a
pack with a fill and in a cat that promotes, into `out=`, on the cpu and interpret
backends. A same-dtype bool copy moves bytes (torch's copies mostly write 1 for a true
byte; its flip keeps some bytes as they are): the truth values are torch's either way.
"""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.cast_pairs import cpu_marks

pytestmark = pytest.mark.skipif(not cpu.available(), reason="needs a C compiler")

TARGETS = [d for d in DTYPES if d != "bool"]


def odd_bools(*sizes: int) -> torch.Tensor:
    """A bool tensor of `sizes` whose bytes run through 0 … 255 (most of them 2 … 255)."""
    n = 1
    for k in sizes:
        n *= k
    return (torch.arange(n) * 7 % 256).to(torch.uint8).view(torch.bool).reshape(sizes)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize(("dst", "backend"), [
    pytest.param(dst, backend, id=f"{backend}-{dst}", marks=cpu_marks(backend, "bool", dst))
    for dst in TARGETS for backend in ("cpu", "interpret")])
def test_odd_bool_bytes_cast_to_one_as_torch(dst: str, backend: str) -> None:
    sizes = (37, 70) if backend == "cpu" else (5, 9)
    x = odd_bools(*sizes)
    g = stridec.Graph("odd_bools")
    v = g.input("x", sizes, "bool")
    g.output(v.to(dst), v.t().to(dst).contiguous(), v[:, ::3].to(dst).contiguous())
    fn = stridec.compile(g, backend=backend)
    want = (x.to(DTYPES[dst].torch), x.t().to(DTYPES[dst].torch).contiguous(),
            x[:, ::3].to(DTYPES[dst].torch).contiguous())
    for got, w in zip(fn(x), want, strict=True):
        assert same_bits(got, w), f"bool -> {dst}"


@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16", "uint8", "int64"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "cached"])
def test_odd_bool_bytes_on_every_c_path(dst: str, threads: int, stream: bool) -> None:
    previous = cpu.set_stream_threshold(0 if stream else -1)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for sizes in ((300, 1100), (2, 64, 40, 3)):
            x = odd_bools(*sizes)
            g = stridec.Graph("odd_bools_paths")
            v = g.input("x", sizes, "bool")
            g.output(v.to(dst), v.transpose(-1, -2).to(dst).contiguous(),
                     v.flip(-1)[..., ::2].to(dst).contiguous())
            fn = stridec.compile(g, backend="cpu")
            t = DTYPES[dst].torch
            want = (x.to(t), x.transpose(-1, -2).to(t).contiguous(),
                    x.flip(-1)[..., ::2].to(t).contiguous())
            for got, w in zip(fn(x), want, strict=True):
                assert same_bits(got, w), f"bool -> {dst}, {sizes}"
            o = torch.empty(x.numel() + 3, dtype=t)[3:].view(sizes)
            stridec.compile(_cast(sizes, dst), backend="cpu")(x, out=o)
            assert same_bits(o, x.to(t)), f"bool -> {dst} into an out= at an offset"
    finally:
        torch.set_num_threads(saved)
        cpu.set_stream_threshold(previous)


def _cast(sizes: tuple[int, ...], dst: str) -> stridec.Graph:
    g = stridec.Graph("odd_bools_cast")
    g.output(g.input("x", sizes, "bool").to(dst))
    return g


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_odd_bool_bytes_in_fused_casts(backend: str) -> None:
    x = odd_bools(2, 5, 3, 4)
    h = torch.randn(2, 5, 3, 4).half()
    g = stridec.Graph("odd_bools_fused")
    v = g.input("x", (2, 5, 3, 4), "bool")
    w = g.input("h", (2, 5, 3, 4), "float16")
    g.output(v.to("float16").pack("NCHW4", fill=0.5), stridec.cat([v, w], 1),
             v.permute(0, 2, 3, 1).to("int64").contiguous())
    packed, cat, nhwc = stridec.compile(g, backend=backend)(x, h)
    ref_pack = torch.nn.functional.pad(x.half(), (0, 0, 0, 0, 0, 3), value=0.5)
    ref_pack = ref_pack.reshape(2, 2, 4, 3, 4).permute(0, 1, 3, 4, 2)
    assert same_bits(packed, ref_pack.contiguous())
    assert same_bits(cat, torch.cat([x, h], 1))
    assert same_bits(nhwc, x.permute(0, 2, 3, 1).to(torch.int64).contiguous())


def test_bool_copies_keep_torchs_truth_values() -> None:
    """A bool copy moves bytes (torch's copies mostly write 1 for a true byte, its flip
    keeps some as they are): the values, true or false, are torch's."""
    x = odd_bools(37, 70)
    g = stridec.Graph("odd_bools_copy")
    v = g.input("x", (37, 70), "bool")
    g.output(v.flip(1).contiguous(), v.t().contiguous(), v.clone())
    got = stridec.compile(g, backend="cpu")(x)
    for a, b in zip(got, (x.flip(1), x.t().contiguous(), x.clone()), strict=True):
        assert torch.equal(a.view(torch.uint8) != 0, b.view(torch.uint8) != 0)
