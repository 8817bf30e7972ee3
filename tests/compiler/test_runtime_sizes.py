"""Triton kernels take sizes, strides and offsets as runtime arguments: the source depends
only on the kernel's class (strategy, dtypes, canonical rank, which values are 0 or 1,
which power of two up to 16 divides the others, the index width, the tile), so copies of
one class — one graph at several batch sizes — share one source and one Triton compile,
each launch passing its own values. Every result is checked against torch (or, for
Philox, against the reference backend) on the interpret backend."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler.codegen.copy import KernelParams, divisibility_bits, generate_copy
from stridec.compiler.codegen.spec import CopySpec
from stridec.ir.dtypes import DTYPES
from stridec.runtime.launch import launch_copy

f16, f32 = DTYPES["float16"], DTYPES["float32"]


def nhwc_graph(n: int, c: int = 8, h: int = 6, w: int = 5) -> stridec.Graph:
    g = stridec.Graph("nhwc")
    x = g.input("x", (n, c, h, w), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    return g


def test_one_graph_at_several_batch_sizes_runs_one_kernel_source() -> None:
    """NCHW -> NHWC of (N, 8, 6, 5): the batch size reaches the kernel only as the extent
    N·30 of its first tile axis, a multiple of 4 for N = 2, 6, 10 alike: one source, one
    kernel name, other arguments; every result equals torch."""
    sources, arguments = set(), []
    for n in (2, 6, 10):
        x = torch.randn(n, 8, 6, 5).to(torch.float16)
        fn = stridec.compile(nhwc_graph(n), backend="interpret")
        (kernel,) = fn.plan_for(x).kernels
        sources.add((kernel.name, kernel.source))
        arguments.append(kernel.arguments)
        out = fn(x)
        assert torch.equal(out, x.permute(0, 2, 3, 1).contiguous())
        assert out.stride() == x.permute(0, 2, 3, 1).contiguous().stride()
    assert len(sources) == 1
    assert [a["ext0"] for a in arguments] == [60, 180, 300]
    (name, source), = sources
    assert "60" not in source and "180" not in source  # the extent is an argument


def test_another_divisibility_is_another_class() -> None:
    """N = 3 makes the extent 90, a multiple of 2 but not of 4: another source (the hint
    differs), still correct."""
    x2, x3 = torch.randn(2, 8, 6, 5).half(), torch.randn(3, 8, 6, 5).half()
    (k2,) = stridec.compile(nhwc_graph(2), backend="interpret").plan_for(x2).kernels
    fn3 = stridec.compile(nhwc_graph(3), backend="interpret")
    (k3,) = fn3.plan_for(x3).kernels
    assert k2.source != k3.source
    assert "ext0 = (ext0 >> 2) << 2" in k2.source and "ext0 = (ext0 >> 1) << 1" in k3.source
    assert torch.equal(fn3(x3), x3.permute(0, 2, 3, 1).contiguous())


def test_zero_and_one_are_written_in_and_the_rest_are_parameters() -> None:
    params = KernelParams()
    assert params.value("a", 0) == 0 and params.value("b", 1) == 1
    assert params.value("c", 48) == "c" and params.value("d", -7) == "d"
    assert params.value("c", 48) == "c"  # one parameter per name
    assert params.names == ["c", "d"] and params.values == [48, -7]
    assert params.hints == ["c = (c >> 4) << 4  # a multiple of 16"]
    assert [divisibility_bits(v) for v in (3, 2, 12, 40, 48, 64, -32, 0)] == [
        0, 1, 2, 3, 4, 4, 4, 4
    ]


def spec_of(sizes: tuple[int, ...], src_strides: tuple[int, ...], src_offset: int,
            dst_strides: tuple[int, ...]) -> CopySpec:
    return CopySpec(sizes, src_strides, src_offset, dst_strides, 0, f32, f32)


def run_spec(spec: CopySpec, src: torch.Tensor, dst_elements: int) -> torch.Tensor:
    kernel = generate_copy(spec, "cpu")
    dst = torch.full((dst_elements,), -1.0)
    launch_copy(kernel, src, dst)
    return dst


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), m=st.sampled_from([16, 32, 48]), flip=st.booleans())
def test_multiples_of_16_and_negative_strides_keep_their_value(n: int, m: int,
                                                               flip: bool) -> None:
    """A column of rows m apart, read top to bottom or bottom to top: stride ±m (a multiple
    of 16, re-derived as `(s >> 4) << 4`, exact for negatives too)."""
    src = torch.arange(n * m, dtype=torch.float32)
    rows = torch.as_strided(src, (n, 3), (m, 1))
    want = rows.flip(0) if flip else rows
    stride, offset = (-m, (n - 1) * m) if flip else (m, 0)
    got = run_spec(spec_of((n, 3), (stride, 1), offset, (3, 1)), src, n * 3)
    assert torch.equal(got.view(n, 3), want)


def test_a_cat_at_two_batch_sizes_shares_one_batch_kernel() -> None:
    """A cat along channels (a batch of copies, one launch): the programs where each member
    ends are arguments too."""
    def cat_graph(n: int) -> stridec.Graph:
        g = stridec.Graph("cat")
        a = g.input("a", (n, 16, 32), "float32")
        b = g.input("b", (n, 48, 32), "float32")
        g.output(stridec.cat([a, b], 1))
        return g

    kernels = []
    for n in (8, 16):
        a, b = torch.randn(n, 16, 32), torch.randn(n, 48, 32)
        fn = stridec.compile(cat_graph(n), backend="interpret")
        (kernel,) = fn.plan_for(a, b).kernels
        kernels.append(kernel)
        assert torch.equal(fn(a, b), torch.cat([a, b], 1))
    assert kernels[0].strategy.startswith("batch(")
    assert kernels[0].source == kernels[1].source
    assert kernels[0].args != kernels[1].args


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 9))
def test_packs_with_padding_over_many_sizes_equal_torch(n: int, c: int) -> None:
    """NCHW4 packing (channels padded to a multiple of 4 with zeros): the mask bound is
    the argument `mhi0` = C."""
    g = stridec.Graph("pack")
    x = g.input("x", (n, c, 3, 5), "float16")
    g.output(x.pack("NCHW4"))
    t = torch.randn(n, c, 3, 5).half()
    out = stridec.compile(g, backend="interpret")(t)
    blocks = -(-c // 4)
    padded = torch.zeros(n, blocks * 4, 3, 5, dtype=torch.float16)
    padded[:, :c] = t
    want = padded.view(n, blocks, 4, 3, 5).permute(0, 1, 3, 4, 2)
    assert torch.equal(out, want)


def test_philox_at_two_sizes_of_one_class_shares_its_source() -> None:
    """Philox bits of (N, 12, 8) for N = 4 and 12: one source; the bits and the new state
    equal the reference backend's."""
    sources = set()
    for n in (4, 12):
        g = stridec.Graph("rng")
        s = g.input("s", (6,), "uint32")
        bits, s1 = g.philox(s, (n, 12, 8))
        g.output(bits.permute(0, 2, 1).contiguous(), s1)
        state = torch.tensor([5, 0, 0, 0, 7, 9], dtype=torch.int32).view(torch.uint32)
        fn = stridec.compile(g, backend="interpret")
        sources.update(k.source for k in fn.plan_for(state).kernels)
        got = fn(state)
        want = stridec.compile(g, backend="reference")(state)
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    assert len(sources) == 1
