"""Compiled graphs against two oracles: the reference backend and plain torch.

Every case builds a graph, calls `stridec.compile(g)` (the interpret backend on CPU, triton
on CUDA) and `stridec.compile(g, backend="reference")` on the same arguments, and checks
both against the torch expression of the same computation. Arguments are made with
`torch.as_strided` over a bigger storage that is filled with a sentinel, so they are
offset, transposed (column-major) or padded (gaps between elements and rows), or
broadcast (stride 0): a kernel that reads the wrong element — a gap, or a row of the
wrong dim — produces a sentinel or a wrong value, and fails.

    "padded" sizes (2, 3, 4), offset 2: one gap after every element and every row,
    stride_2 = 2, stride_1 = 4·2 + 1 = 9, stride_0 = 3·9 + 1 = 28,
    so element (1, 2, 3) lives at 2 + 1·28 + 2·9 + 3·2 = 54

Each test runs on "cpu" always and on "cuda" when there is a device (marked gpu).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stridec
from tests.cast_pairs import cpu_marks

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]
ARRANGEMENTS = ("contiguous", "offset", "transposed", "padded")


# --------------------------------------------------------------------------- inputs


def sample(sizes: Sequence[int], dtype: str, seed: int, nonneg: bool = False) -> torch.Tensor:
    """Deterministic test data of `dtype`. Every cast below is defined on it: floats lie in
    (-120, 120) (so they fit int8; `nonneg` makes them fit uint8), int32 values in
    ±30000 (finite in float16, rounded above 2048)."""
    gen = torch.Generator().manual_seed(seed)
    sizes = tuple(sizes)
    td = getattr(torch, dtype)
    if td.is_floating_point:
        values = (torch.randn(sizes, generator=gen, dtype=torch.float64) * 40).clamp(-119, 119)
        if nonneg:
            values = values.abs()
        return values.to(td)
    if td == torch.bool:
        return torch.rand(sizes, generator=gen) > 0.5
    if td == torch.uint32:
        return torch.randint(0, 2**32, sizes, generator=gen, dtype=torch.int64).to(td)
    low, high = {
        torch.int8: (-50, 50), torch.uint8: (0, 250), torch.int16: (-3000, 3000),
        torch.int32: (-30000, 30000), torch.int64: (-10**12, 10**12),
    }[td]
    if nonneg:
        low = 0
    return torch.randint(low, high, sizes, generator=gen, dtype=torch.int64).to(td)


def _sentinel(dtype: torch.dtype) -> Any:
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point:
        return 12345.0 if dtype != torch.float16 else 1234.0
    return 99 if dtype in (torch.int8, torch.uint8) else 12345


def arranged_strides(sizes: Sequence[int], how: str) -> tuple[tuple[int, ...], int]:
    """(strides, storage offset) of an arrangement of `sizes`, in elements."""
    rank = len(sizes)
    strides = [0] * rank
    if how == "transposed":  # column-major: dim 0 fastest
        acc = 1
        for k in range(rank):
            strides[k] = acc
            acc *= max(sizes[k], 1)
        return tuple(strides), 1
    gap = 2 if how == "padded" else 1
    acc = gap
    for k in reversed(range(rank)):
        strides[k] = acc
        acc = acc * max(sizes[k], 1) + (1 if how == "padded" else 0)
    return tuple(strides), {"contiguous": 0, "offset": 3, "padded": 2}[how]


def arrange(t: torch.Tensor, how: str, device: str) -> torch.Tensor:
    """A tensor equal to `t` on `device`, laid out as `how` (see the module docstring)."""
    if how == "contiguous":
        return t.to(device).clone()
    strides, offset = arranged_strides(tuple(t.shape), how)
    span = offset + sum((n - 1) * s for n, s in zip(t.shape, strides, strict=True)) + 1
    if t.numel() == 0:
        span = offset
    storage = torch.full((span + 5,), _sentinel(t.dtype), dtype=t.dtype, device=device)
    view = torch.as_strided(storage, tuple(t.shape), strides, offset)
    view.copy_(t.to(device))
    return view


def broadcast(base: torch.Tensor, sizes: Sequence[int], device: str) -> torch.Tensor:
    """`base` (offset inside a bigger storage) expanded to `sizes`: stride-0 dims."""
    return arrange(base, "offset", device).expand(tuple(sizes))


# --------------------------------------------------------------------------- checking


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert isinstance(got, torch.Tensor), f"{what}: expected a tensor; got {type(got)}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: sizes {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert all(s >= 0 for s in got.stride()), f"{what}: negative strides {got.stride()}"
    got, want = got.cpu(), want.cpu()
    if got.dtype == torch.uint32:  # compare bit patterns
        got, want = got.view(torch.int32), want.view(torch.int32)
    assert torch.equal(got, want), f"{what}: values differ\n got {got}\nwant {want}"


def kernel_backends(tensors: Sequence[torch.Tensor]) -> tuple[str, ...]:
    """The kernel backends for these tensors: triton on CUDA; on the CPU the native `cpu`
    backend (what `auto` picks) and the interpreter of the Triton kernels."""
    if tensors and tensors[0].is_cuda:
        return ("auto",)
    return ("cpu", "interpret")


def run_both(graph: stridec.Graph, tensors: Sequence[torch.Tensor]) -> tuple[tuple, tuple]:
    """Outputs of the default backend and of the reference backend."""
    compiled = _as_tuple(stridec.compile(graph)(*tensors))
    reference = _as_tuple(stridec.compile(graph, backend="reference")(*tensors))
    return compiled, reference


def check_graph(graph: stridec.Graph, tensors: Sequence[torch.Tensor], expected: Any,
                backends: Sequence[str] | None = None) -> None:
    """`graph` on `tensors` by the reference backend and each kernel backend (`backends`,
    else `kernel_backends`), every output `expected`."""
    reference = _as_tuple(stridec.compile(graph, backend="reference")(*tensors))
    expected = _as_tuple(expected)
    device = tensors[0].device if tensors else torch.device("cpu")
    for backend in backends or kernel_backends(tensors):
        compiled = _as_tuple(stridec.compile(graph, backend=backend)(*tensors))
        assert len(compiled) == len(reference) == len(expected)
        for i, (c, r, e) in enumerate(zip(compiled, reference, expected, strict=True)):
            assert_same(r, e, f"{graph.name}: reference output {i}")
            assert_same(c, e, f"{graph.name}: {backend} output {i}")
            assert c.device == device, f"{graph.name}: output {i} on {c.device}, not {device}"



@dataclass(frozen=True)
class Case:
    """A graph over `inputs` (name, sizes, dtype), its builder and its torch expression."""

    id: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    build: Callable[..., Any]
    expect: Callable[..., Any]
    nonneg: bool = False

    def graph(self) -> stridec.Graph:
        g = stridec.Graph(self.id)
        values = [g.input(n, s, d) for n, s, d in self.inputs]
        g.output(*_as_tuple(self.build(g, *values)))
        return g

    def tensors(self, how: str, device: str) -> list[torch.Tensor]:
        return [
            arrange(sample(s, d, seed=i, nonneg=self.nonneg), how, device)
            for i, (_, s, d) in enumerate(self.inputs)
        ]


def _case(id: str, inputs: Any, build: Callable[..., Any], expect: Callable[..., Any],
          **kw: Any) -> Case:
    return Case(id, tuple((n, tuple(s), d) for n, s, d in inputs), build, expect, **kw)


def X(*sizes: int, dtype: str = "float32") -> list:
    return [("x", sizes, dtype)]


# --------------------------------------------------------------------------- op kinds

VIEW_AND_COPY_CASES = [
    _case("permute", X(2, 3, 4, 5), lambda g, x: x.permute(0, 2, 3, 1).contiguous(),
          lambda t: t.permute(0, 2, 3, 1).contiguous()),
    _case("transpose", X(6, 10), lambda g, x: x.transpose(0, 1).contiguous(),
          lambda t: t.transpose(0, 1).contiguous()),
    _case("transpose_3d", X(3, 5, 7, dtype="int16"), lambda g, x: x.transpose(0, 2).contiguous(),
          lambda t: t.transpose(0, 2).contiguous()),
    _case("expand", X(3, 1, 4), lambda g, x: x.expand(2, 3, 5, 4).contiguous(),
          lambda t: t.expand(2, 3, 5, 4).contiguous()),
    _case("slice_steps", X(7, 9), lambda g, x: x[1:6:2, ::3].contiguous(),
          lambda t: t[1:6:2, ::3].contiguous()),
    _case("slice_negative_start", X(5, 8), lambda g, x: x.slice(1, -5, None, 2).contiguous(),
          lambda t: t[:, -5::2].contiguous()),
    _case("select", X(4, 5, 6), lambda g, x: (x.select(1, 2).contiguous(), x[-1].contiguous()),
          lambda t: (t.select(1, 2).contiguous(), t[-1].contiguous())),
    _case("squeeze_unsqueeze", X(3, 1, 4),
          lambda g, x: x.squeeze(1).unsqueeze(0).unsqueeze(2).contiguous(),
          lambda t: t.squeeze(1).unsqueeze(0).unsqueeze(2).contiguous()),
    _case("flip", X(4, 5, 6), lambda g, x: x.flip(0, 2).contiguous(),
          lambda t: t.flip(0, 2)),
    _case("flip_output", X(4, 6), lambda g, x: x.flip(1), lambda t: t.flip(1)),
    _case("flip_transpose_slice", X(6, 8, dtype="float16"),
          lambda g, x: x.flip(0)[::2].t()[1:].contiguous(),
          lambda t: t.flip(0)[::2].t()[1:].contiguous()),
    _case("reshape_view", X(4, 6), lambda g, x: x.reshape(2, 12), lambda t: t.reshape(2, 12)),
    _case("reshape_copy", X(4, 6), lambda g, x: x.t().reshape(24), lambda t: t.t().reshape(24)),
    _case("reshape_infer", X(4, 6), lambda g, x: x.permute(1, 0).reshape(-1, 3),
          lambda t: t.permute(1, 0).reshape(-1, 3)),
    _case("view", X(4, 6), lambda g, x: x.contiguous().view(3, 8).t(),
          lambda t: t.contiguous().view(3, 8).t()),
    _case("flatten", X(2, 3, 4), lambda g, x: x.permute(2, 0, 1).flatten(1),
          lambda t: t.permute(2, 0, 1).flatten(1)),
    _case("unfold", X(10, 6), lambda g, x: (x.unfold(0, 3, 2).contiguous(), x.unfold(1, 2, 1)),
          lambda t: (t.unfold(0, 3, 2).contiguous(), t.unfold(1, 2, 1))),
    _case("as_strided", X(4, 6),
          lambda g, x: x.as_strided((3, 3), (2, 1), 1).contiguous(),
          lambda t: t.as_strided((3, 3), (2, 1), 1).contiguous()),
    _case("as_strided_keeps_offset", X(4, 6),
          lambda g, x: x.as_strided((2, 5), (1, 3)).contiguous(),
          lambda t: t.as_strided((2, 5), (1, 3)).contiguous()),
    _case("split", X(5, 4), lambda g, x: tuple(p.contiguous() for p in x.t().split(2, 1)),
          lambda t: tuple(p.contiguous() for p in t.t().split(2, 1))),
    _case("split_sections", X(6, 3), lambda g, x: x.split([1, 3, 2]),
          lambda t: t.split([1, 3, 2])),
    _case("contiguous_of_contiguous", X(3, 4), lambda g, x: x.contiguous().contiguous(),
          lambda t: t.contiguous()),
    _case("copy_to_strides", X(3, 4), lambda g, x: x.copy_to((1, 3)),
          lambda t: torch.empty_strided((3, 4), (1, 3), dtype=t.dtype, device=t.device).copy_(t)),
    _case("copy_to_dtype", X(3, 4), lambda g, x: x.t().copy_to(None, dtype="float16"),
          lambda t: t.t().to(torch.float16)),
    _case("pad", X(2, 3), lambda g, x: stridec.pad(x, (1, 2, 0, 1), value=5.0),
          lambda t: F.pad(t, (1, 2, 0, 1), value=5.0)),
    _case("pad_crop", X(4, 5), lambda g, x: stridec.pad(x.t(), (-1, 2, 1, -2)),
          lambda t: F.pad(t.t(), (-1, 2, 1, -2))),
    _case("pad_int", X(2, 3, 4, dtype="int32"),
          lambda g, x: stridec.pad(x, (0, 0, 2, 0, 1, 1), value=-7),
          lambda t: F.pad(t, (0, 0, 2, 0, 1, 1), value=-7)),
    _case("cat_rows", [("a", (2, 3), "float32"), ("b", (4, 3), "float32")],
          lambda g, a, b: stridec.cat([a, b.flip(0)], 0),
          lambda a, b: torch.cat([a, b.flip(0)], 0)),
    _case("cat_cols", [("a", (2, 3), "int8"), ("b", (3, 4), "int8"), ("c", (3, 1), "int8")],
          lambda g, a, b, c: stridec.cat([a.t(), b, c], 1),
          lambda a, b, c: torch.cat([a.t(), b, c], 1)),
    _case("full", X(2), lambda g, x: (g.full((3, 4), 2.5), g.full((2, 2), -3, "int8"), x),
          lambda t: (torch.full((3, 4), 2.5), torch.full((2, 2), -3, dtype=torch.int8), t)),
    _case("identity", X(3, 4), lambda g, x: x, lambda t: t),
    _case("several_outputs", X(4, 6),
          lambda g, x: (x.t().contiguous(), x[1:3], x.flip(0), x.t().contiguous().to("float64")),
          lambda t: (t.t().contiguous(), t[1:3], t.flip(0), t.t().to(torch.float64))),
    _case("long_chain", X(4, 6, 8),
          lambda g, x: x[:, 1:, ::2].permute(2, 0, 1).flip(0).reshape(4, 4, 5).contiguous(),
          lambda t: t[:, 1:, ::2].permute(2, 0, 1).flip(0).reshape(4, 4, 5).contiguous()),
    _case("copy_of_copy", X(5, 7),
          lambda g, x: x.t().contiguous().flip(1).contiguous().t().contiguous(),
          lambda t: t.t().contiguous().flip(1).contiguous().t().contiguous()),
]

# Size 0 (no kernel runs, yet the outputs have the right sizes) and rank 0.
EDGE_CASES = [
    _case("size0_transpose", X(0, 6), lambda g, x: x.t().contiguous(),
          lambda t: t.t().contiguous()),
    _case("size0_pack", X(0, 5, 2, 3, dtype="int8"), lambda g, x: x.pack("NCHW4"),
          lambda t: t.new_zeros(0, 2, 2, 3, 4)),
    _case("size0_cat", [("a", (0, 3), "float32"), ("b", (2, 3), "float32")],
          lambda g, a, b: stridec.cat([a, b.flip(1)]), lambda a, b: torch.cat([a, b.flip(1)])),
    _case("size0_pad", X(0, 3), lambda g, x: stridec.pad(x, (1, 1)), lambda t: F.pad(t, (1, 1))),
    _case("size0_full", X(2), lambda g, x: g.full((3, 0), 1.0), lambda t: torch.ones(3, 0)),
    _case("size0_cast", X(2, 0, 3), lambda g, x: x.permute(2, 1, 0).to("int32"),
          lambda t: t.permute(2, 1, 0).to(torch.int32)),
    _case("rank0_contiguous", X(), lambda g, x: x.contiguous(), lambda t: t.clone()),
    _case("rank0_cast", X(), lambda g, x: x.to("float16"), lambda t: t.to(torch.float16)),
    _case("rank0_expand", X(), lambda g, x: x.expand(3, 2).contiguous(),
          lambda t: t.expand(3, 2).contiguous()),
    _case("rank0_unsqueeze", X(), lambda g, x: (x.unsqueeze(0), x), lambda t: (t.unsqueeze(0), t)),
    _case("rank0_from_select", X(3, 4), lambda g, x: x[1, 2].contiguous(),
          lambda t: t[1, 2].clone()),
    _case("rank0_full", X(2), lambda g, x: g.full((), 7, "int64"),
          lambda t: torch.tensor(7, dtype=torch.int64)),
    _case("rank8_permute", X(2, 1, 3, 2, 1, 2, 3, 2),
          lambda g, x: x.permute(7, 6, 5, 4, 3, 2, 1, 0).contiguous(),
          lambda t: t.permute(7, 6, 5, 4, 3, 2, 1, 0).contiguous()),
    _case("rank8_flip_slice", X(2, 3, 2, 3, 2, 3, 2, 3, dtype="int8"),
          lambda g, x: x.flip(1, 4)[:, ::2, :, 1:, :, :, :, ::2].transpose(0, 7).contiguous(),
          lambda t: t.flip(1, 4)[:, ::2, :, 1:, :, :, :, ::2].transpose(0, 7).contiguous()),
    _case("rank7_nchw4", X(2, 5, 2, 1, 2, 1, 3, dtype="int8"), lambda g, x: x.pack("NCHW4"),
          lambda t: nchwx(t, 4)),
]


def _ids(cases: Sequence[Case]) -> list[str]:
    return [c.id for c in cases]


@pytest.mark.parametrize("how", ARRANGEMENTS)
@pytest.mark.parametrize("case", VIEW_AND_COPY_CASES + EDGE_CASES,
                         ids=_ids(VIEW_AND_COPY_CASES + EDGE_CASES))
@pytest.mark.parametrize("device", DEVICES)
def test_op_kinds(case: Case, how: str, device: str) -> None:
    check_graph(case.graph(), case.tensors(how, device),
                case.expect(*case.tensors(how, device)))


# --------------------------------------------------------------------------- casts

CASTS = [
    ("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"),
    ("bfloat16", "float32"), ("bfloat16", "float16"), ("float64", "float32"),
    ("float32", "float64"), ("float32", "int32"), ("float16", "int8"), ("int32", "float32"),
    ("int8", "float16"), ("float32", "bool"), ("bool", "float32"), ("bool", "int64"),
    ("int64", "int8"), ("int32", "int16"), ("uint8", "int32"), ("int32", "uint32"),
    ("uint32", "int64"), ("uint32", "float32"), ("float32", "uint8"), ("int16", "bool"),
]


# Each pair on each kernel backend; on the cpu backend a pair outside the suite's cast
# libraries with -m slow only (tests/cast_pairs.py).
CAST_RUNS = [
    pytest.param(src, dst, device, backend, id=f"{device}-{backend}-{src}-{dst}", marks=marks)
    for src, dst in CASTS
    for device, backend, marks in (("cpu", "cpu", cpu_marks("cpu", src, dst)),
                                   ("cpu", "interpret", []),
                                   ("cuda", "auto", [pytest.mark.gpu]))
]


@pytest.mark.parametrize("how", ("contiguous", "padded"))
@pytest.mark.parametrize(("src", "dst", "device", "backend"), CAST_RUNS)
def test_casts_fused_in_a_copy(src: str, dst: str, device: str, backend: str,
                               how: str) -> None:
    """A cast alone, a cast through a transpose, and a cast of a packing: one kernel each."""
    case = _case(
        f"cast_{src}_{dst}", X(4, 6, dtype=src),
        lambda g, x: (x.to(dst), x.t().to(dst), x.unsqueeze(0).unsqueeze(3).pack("NHWC").to(dst)),
        lambda t: (t.to(getattr(torch, dst)), t.t().to(getattr(torch, dst)),
                   t[None, :, :, None].permute(0, 2, 3, 1).to(getattr(torch, dst))),
        nonneg=dst in ("uint8", "uint32"),
    )
    tensors = case.tensors(how, device)
    check_graph(case.graph(), tensors, case.expect(*tensors), (backend,))


# --------------------------------------------------------------------------- formats


def nchwx(t: torch.Tensor, x: int, fill: float = 0) -> torch.Tensor:
    """NCHWx in torch: pad C to a multiple of x, split it, move the block innermost.
    Works for any number of spatial dims (NCDHW → [N, C/x, D, H, W, x])."""
    n, c, *spatial = t.shape
    cp = -(-c // x) * x
    padded = F.pad(t, (0, 0) * len(spatial) + (0, cp - c), value=fill)
    split = padded.reshape(n, cp // x, x, *spatial)
    rank = split.dim()
    return split.permute(0, 1, *range(3, rank), 2).contiguous()


def chwn4(t: torch.Tensor, fill: float = 0) -> torch.Tensor:
    n, c, h, w = t.shape
    cp = -(-c // 4) * 4
    padded = F.pad(t, (0, 0, 0, 0, 0, cp - c), value=fill)
    return padded.reshape(n, cp // 4, 4, h, w).permute(1, 3, 4, 0, 2).contiguous()


def nhwc(t: torch.Tensor, fill: float = 0) -> torch.Tensor:
    return t.permute(0, *range(2, t.dim()), 1).contiguous()


def pitched(align: int) -> Callable[..., torch.Tensor]:
    def pack(t: torch.Tensor, fill: float = 0) -> torch.Tensor:
        quantum = align // math.gcd(align, t.element_size())
        w = t.shape[-1]
        return F.pad(t, (0, -(-w // quantum) * quantum - w), value=fill)

    return pack


FORMATS: dict[str, Callable[..., torch.Tensor]] = {
    "NCHW": lambda t, fill=0: t.contiguous(),
    "NHWC": nhwc,
    "NCHW4": lambda t, fill=0: nchwx(t, 4, fill),
    "NCHW32": lambda t, fill=0: nchwx(t, 32, fill),
    "NCHW64": lambda t, fill=0: nchwx(t, 64, fill),
    "CHWN4": chwn4,
    "pitched<16>": pitched(16),
    "pitched<6>": pitched(6),
}
# (sizes, dtype): C = 3 and 5 pad every blocked format; C = 8 fills NCHW4 blocks exactly.
FORMAT_SHAPES = [((2, 3, 4, 5), "int8"), ((1, 5, 3, 2), "float16"), ((2, 8, 2, 3), "float32")]


@pytest.mark.parametrize("how", ARRANGEMENTS)
@pytest.mark.parametrize(("sizes", "dtype"), FORMAT_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("device", DEVICES)
def test_pack_and_unpack(fmt: str, sizes: tuple[int, ...], dtype: str, how: str,
                         device: str) -> None:
    """pack (padded channels filled with 0), pack with a fill value, pack of a flipped
    view (fused), then unpack of a torch-packed tensor and a pack → unpack round trip."""
    to_format = FORMATS[fmt]
    t = sample(sizes, dtype, seed=1)
    channels = sizes[-1] if fmt.startswith("pitched") else sizes[1]
    g = stridec.Graph(f"pack_{fmt}")
    x = g.input("x", sizes, dtype)
    g.output(x.pack(fmt), x.pack(fmt, fill=7), x.flip(1).pack(fmt),
             x.pack(fmt).unpack(fmt, channels))
    xs = arrange(t, how, device)
    check_graph(g, [xs], (to_format(t), to_format(t, 7), to_format(t.flip(1)), t))

    packed = to_format(t)
    g = stridec.Graph(f"unpack_{fmt}")
    p = g.input("p", tuple(packed.shape), dtype)
    g.output(p.unpack(fmt, channels))
    check_graph(g, [arrange(packed, how, device)], t)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW4", "NCHW32"])
@pytest.mark.parametrize("device", DEVICES)
def test_formats_with_three_spatial_dims(fmt: str, device: str) -> None:
    """NCDHW: the spatial run stands for D, H, W (NCHW4 → [N, C/4, D, H, W, 4])."""
    t = sample((2, 6, 2, 3, 2), "float32", seed=2)
    g = stridec.Graph("ncdhw")
    x = g.input("x", tuple(t.shape), "float32")
    g.output(x.pack(fmt), x.pack(fmt).unpack(fmt, 6))
    check_graph(g, [arrange(t, "transposed", device)], (FORMATS[fmt](t), t))


# --------------------------------------------------------------------------- broadcast inputs

BROADCAST_INPUTS = [
    ((6,), (4, 6)),        # a row repeated: strides (0, 1)
    ((4, 1), (4, 6)),      # a column repeated: strides (1, 0)
    ((), (4, 6)),          # one element everywhere: strides (0, 0)
    ((1, 3, 1, 2), (2, 3, 4, 2)),
]


@pytest.mark.parametrize(("base", "sizes"), BROADCAST_INPUTS, ids=lambda v: str(v))
@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_inputs(base: tuple[int, ...], sizes: tuple[int, ...], device: str) -> None:
    """Arguments with stride-0 dims: read many times, copied, packed, returned as views."""
    t = broadcast(sample(base, "float32", seed=3), sizes, device)
    g = stridec.Graph("broadcast_input")
    x = g.input("x", sizes, "float32")
    outs = [x.contiguous(), x.transpose(0, 1).contiguous(), x.to("float16"), x[1:]]
    expected = [t.contiguous(), t.transpose(0, 1).contiguous(), t.to(torch.float16), t[1:]]
    if len(sizes) == 4:
        outs.append(x.pack("NCHW4"))
        expected.append(nchwx(t, 4))
    g.output(*outs)
    check_graph(g, [t], tuple(expected))


# --------------------------------------------------------------------------- philox


def _kat_vectors() -> list[tuple[list[int], list[int], list[int]]]:
    """(counter words, key words, expected words) of the Random123 known-answer file."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "data" / "random123_kat_philox4x32_10.txt"
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("philox4x32 10"):
            words = [int(w, 16) for w in line.split()[2:]]
            out.append((words[0:4], words[4:6], words[6:10]))
    return out


def _state(counter: Sequence[int], key: Sequence[int], device: str) -> torch.Tensor:
    words = torch.tensor(list(counter) + list(key), dtype=torch.int64)
    return words.to(torch.uint32).view(torch.int32).to(device)


@pytest.mark.parametrize("kat", _kat_vectors()[:3], ids=["zeros", "ones", "pi"])
@pytest.mark.parametrize("device", DEVICES)
def test_philox_reproduces_random123(kat: tuple, device: str) -> None:
    """One block of four words is Philox4x32-10(counter, key); the counter advances by
    ⌈4/4⌉ = 1, with carry (counter ffffffff×4 + 1 wraps to 0)."""
    counter, key, expected = kat
    g = stridec.Graph("philox_kat")
    s = g.input("s", (6,), "int32")
    g.output(*g.philox(s, (4,)))
    state = _state(counter, key, device)
    value = sum(w << (32 * i) for i, w in enumerate(counter)) + 1
    advanced = [(value >> (32 * i)) & 0xFFFFFFFF for i in range(4)]
    want_bits = torch.tensor(expected, dtype=torch.int64).to(torch.uint32)
    check_graph(g, [state], (want_bits, _state([*advanced], key, "cpu")))


@pytest.mark.parametrize("device", DEVICES)
def test_philox_in_graphs(device: str) -> None:
    """Bits and uniforms, consumed by views and copies, against the reference backend and
    against torch applied to the reference's plain bits; a size-0 draw keeps the state."""
    state = _state([5, 0xFFFFFFFF, 7, 0], [0x12345678, 0x9ABCDEF0], device)
    g = stridec.Graph("philox_plain")
    s = g.input("s", (6,), "int32")
    bits, _ = g.philox(s, (3, 5, 4))
    g.output(bits)
    (plain,), _ = run_both(g, [state])

    g = stridec.Graph("philox_views")
    s = g.input("s", (6,), "int32")
    bits, new_state = g.philox(s, (3, 5, 4))
    uniform, _ = g.philox_uniform(s, (3, 5, 4))
    empty, same_state = g.philox(s, (0, 2))
    g.output(bits.permute(2, 0, 1).contiguous(), bits[1], bits.unsqueeze(0).pack("NCHW4"),
             uniform, new_state, empty, same_state)
    plain64 = plain.cpu().to(torch.int64)
    expected = (
        plain.permute(2, 0, 1).contiguous(), plain[1],
        nchwx(plain64.unsqueeze(0), 4).to(torch.uint32),
        ((plain64 >> 8).to(torch.float32) * 2.0**-24),  # low 0, high 1: u exactly
        _state([5 + 15, 0xFFFFFFFF, 7, 0], [0x12345678, 0x9ABCDEF0], "cpu"),
        torch.zeros(0, 2, dtype=torch.uint32), state.cpu(),
    )
    check_graph(g, [state], expected)


# --------------------------------------------------------------------------- random graphs

FLOATS = ("float32", "float16", "int8", "int32")


@st.composite
def random_graphs(draw: st.DrawFn) -> tuple[stridec.Graph, torch.Tensor, list[torch.Tensor]]:
    """A chain of 1-5 random layout steps over a small input, mirrored on a torch tensor;
    up to three values of the chain become outputs (views or copies)."""
    rank = draw(st.integers(0, 4))
    # Mostly non-empty: a 0 in one dim of six.
    sizes = tuple(draw(st.lists(st.sampled_from((1, 2, 3, 4, 5, 0)), min_size=rank,
                                max_size=rank)))
    dtype = draw(st.sampled_from(FLOATS))
    how = draw(st.sampled_from(ARRANGEMENTS))
    t = arrange(sample(sizes, dtype, seed=draw(st.integers(0, 99))), how, "cpu")
    g = stridec.Graph("random")
    v = g.input("x", sizes, dtype)
    ref = t
    chosen: list[tuple[Any, torch.Tensor]] = []
    for _ in range(draw(st.integers(1, 5))):
        v, ref = _random_step(draw, v, ref)
        if draw(st.booleans()):
            chosen.append((v, ref))
    chosen.append((v, ref))
    chosen = chosen[-3:]
    g.output(*[c[0] for c in chosen])
    return g, t, [c[1] for c in chosen]


def _random_step(draw: st.DrawFn, v: Any, t: torch.Tensor) -> tuple[Any, torch.Tensor]:
    r = t.dim()
    grows = r < 7  # keep every rank (and NCHW4's split space) within 8
    kinds = ["contiguous", "cast"] + ["unsqueeze"] * grows
    if r >= 1:
        kinds += ["flip", "slice", "select", "expand", "reshape", "pad"]
    if r >= 2:
        kinds += ["permute", "transpose"]
    if 3 <= r and grows:
        kinds += ["nchw4"]
    if r and 1 in t.shape:
        kinds += ["squeeze"]
    kind = draw(st.sampled_from(kinds))
    dim = draw(st.integers(0, max(r - 1, 0)))
    if kind == "contiguous":
        return v.contiguous(), t.contiguous()
    if kind == "cast":
        dtype = draw(st.sampled_from(FLOATS))
        if dtype == "int8" and t.dtype != torch.int8:
            return v, t  # out-of-range float → int8 is undefined in C; int32 holds them all
        return v.to(dtype), t.to(getattr(torch, dtype))
    if kind == "unsqueeze":
        d = draw(st.integers(0, r))
        return v.unsqueeze(d), t.unsqueeze(d)
    if kind == "flip":
        return v.flip(dim), t.flip(dim)
    if kind == "slice":
        n = t.shape[dim]
        start = draw(st.integers(0, n))
        stop = draw(st.integers(start, n))
        step = draw(st.integers(1, 3))
        return v.slice(dim, start, stop, step), t.narrow(dim, start, stop - start)[
            (slice(None),) * dim + (slice(None, None, step),)]
    if kind == "select":
        if t.shape[dim] == 0:
            return v, t
        i = draw(st.integers(0, t.shape[dim] - 1))
        return v.select(dim, i), t.select(dim, i)
    if kind == "expand":
        new = tuple(draw(st.integers(1, 3)) if n == 1 else n for n in t.shape)
        lead = draw(st.integers(0, 1)) if grows else 0
        new = (2,) * lead + new
        return v.expand(*new), t.expand(*new)
    if kind == "reshape":
        sizes = (-1,) + tuple(t.shape[dim + 1:])
        if t.numel() == 0:
            return v, t
        return v.reshape(*sizes), t.reshape(*sizes)
    if kind == "pad":
        before, after = draw(st.integers(-1, 2)), draw(st.integers(-1, 2))
        if t.shape[-1] + min(before, 0) + min(after, 0) < 0:
            return v, t
        return stridec.pad(v, (before, after)), F.pad(t, (before, after))
    if kind == "permute":
        order = draw(st.permutations(range(r)))
        return v.permute(*order), t.permute(*order)
    if kind == "transpose":
        d1 = draw(st.integers(0, r - 1))
        return v.transpose(dim, d1), t.transpose(dim, d1)
    if kind == "nchw4":
        return v.pack("NCHW4"), nchwx(t, 4)
    d = [k for k, n in enumerate(t.shape) if n == 1][0]
    return v.squeeze(d), t.squeeze(d)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs(case: tuple[stridec.Graph, torch.Tensor, list[torch.Tensor]]) -> None:
    graph, t, expected = case
    check_graph(graph, [t], tuple(expected))


@pytest.mark.gpu
def test_kernels_run_on_the_current_stream() -> None:
    """Data made on a side stream is copied by kernels queued on that same stream."""
    g = stridec.Graph("stream")
    x = g.input("x", (256, 384), "float32")
    g.output(x.t().contiguous(), x.flip(0).contiguous())
    fn = stridec.compile(g)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.randn(256, 384, device="cuda") * 3 + 1
        out_t, out_f = fn(t)
    side.synchronize()
    assert torch.equal(out_t, t.t().contiguous()) and torch.equal(out_f, t.flip(0))


def test_interpret_backend_needs_no_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter runs the very `@triton.jit` kernels (compiled Triton still usable in
    the same process): TRITON_INTERPRET is neither needed nor set."""
    import os

    import triton

    from stridec.runtime.backends.triton import load_jit

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    g = stridec.Graph("no_env")
    x = g.input("x", (5, 7), "float16")
    g.output(x.t().to("float32"))
    fn = stridec.compile(g, backend="interpret")
    t = sample((5, 7), "float16", seed=4)
    assert torch.equal(fn(t), t.t().float())
    assert "TRITON_INTERPRET" not in os.environ
    (k,) = fn.plan_for(t).kernels
    assert isinstance(load_jit(k.source, k.name), triton.runtime.jit.JITFunction)
