"""The benchmark workloads: one row each, at GPU ("full"), interpreter ("tiny") or native
CPU ("cpu") scale (the targets: docs/design.md#performance-targets).

A `Workload` carries everything a row needs:

- `build(shape)` — the stridec `Graph` of the row;
- `make_inputs(shape, generator, device)` — random inputs (never zeros: zeros hide
  unwritten outputs and wrong indexing);
- `eager_fn(scale)(*inputs)` — the same computation written as a PyTorch user would write
  it; it is also what `torch.compile` compiles, and the oracle of the row's output unless the row
  is a Philox draw (`oracle="reference"`: `stridec.run_reference`, which follows the
  Random123 known answers; `torch.rand` then serves only as a speed comparison);
- `bytes_moved(inputs, outputs)` — bytes read + bytes written, counting each element the
  output depends on once (see `bench/README.md`);
- `check(graph, inputs, outputs)` — raises `Mismatch`, naming the output and the first
  differing element, when stridec's outputs differ from the oracle.

Full shapes make every tensor at least 256 MiB; e.g. the 2-D fp32 transpose moves
16384 * 16384 * 4 = 1 GiB in and 1 GiB out. Tiny shapes keep Triton's interpreter
(~1 ms per program instance) to a few programs per row. CPU shapes (`bench/run.py --cpu`)
move 16-64 MiB per tensor, past a 32 MiB last-level cache so memory bandwidth shows,
small enough that a run of every row takes minutes; a row without one (above 2^31
elements) is not a CPU row.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

import stridec

__all__ = [
    "COMPILE_WORKLOAD",
    "HOST_OVERHEAD",
    "SCALES",
    "WORKLOADS",
    "Mismatch",
    "Shape",
    "Workload",
    "advance_state",
    "assert_same",
    "by_name",
]

SCALES = ("full", "tiny", "cpu")
Shape = tuple[int, ...]
Tensors = Sequence[torch.Tensor]
# Elements of a Philox draw compared with the reference at each end of a full-size draw
# (the numpy reference of a whole 2^27-word draw would take minutes).
PHILOX_WINDOW = 4096


class Mismatch(Exception):
    """stridec's output differs from the oracle (the message names output and element)."""


# --------------------------------------------------------------------------- helpers


def _bits(t: torch.Tensor) -> torch.Tensor:
    # uint32 has few kernels in torch (no `equal`, no `!=` on some builds): compare patterns.
    return t.view(torch.int32) if t.dtype == torch.uint32 else t


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Exact equality of sizes, dtype and every element (any strides); `Mismatch` otherwise."""
    if tuple(got.shape) != tuple(want.shape):
        raise Mismatch(f"{what}: sizes {list(got.shape)}, expected {list(want.shape)}")
    if got.dtype != want.dtype:
        raise Mismatch(f"{what}: dtype {got.dtype}, expected {want.dtype}")
    g, w = _bits(got), _bits(want.to(got.device))
    if torch.equal(g, w):
        return
    g, w = g.cpu().contiguous(), w.cpu().contiguous()
    differ = (g != w).reshape(-1)
    flat = int(differ.nonzero()[0, 0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), g.shape)] if g.ndim else []
    raise Mismatch(
        f"{what}: {int(differ.sum())} of {g.numel()} elements differ; first at {index}: "
        f"got {g.reshape(-1)[flat].item()}, expected {w.reshape(-1)[flat].item()}"
    )


def random_tensor(
    sizes: Sequence[int], dtype: str, generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Random data of `dtype`: normal floats, integers over the whole int8 range."""
    torch_dtype = stridec.as_dtype(dtype).torch
    if torch_dtype.is_floating_point:
        return torch.randn(tuple(sizes), dtype=torch_dtype, generator=generator, device=device)
    info = torch.iinfo(torch_dtype)
    return torch.randint(info.min, info.max + 1, tuple(sizes), dtype=torch_dtype,
                         generator=generator, device=device)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def input_bytes(inputs: Tensors, outputs: Tensors) -> int:
    """Every input element is read once."""
    return sum(_nbytes(t) for t in inputs)


def output_elements_read(inputs: Tensors, outputs: Tensors) -> int:
    """Only the input elements an output copies are read (slices): one per output element."""
    return sum(o.numel() for o in outputs) * inputs[0].element_size()


def dims_text(sizes: Shape) -> str:
    """`(2, 3, 4)` as `2x3x4`."""
    return "x".join(str(n) for n in sizes)


@dataclass(frozen=True)
class Workload:
    """One benchmark row. `shapes` maps a scale ("full", "tiny") to the shape parameter
    that `build`, `make_inputs` and `eager` take; `oracle` is "eager" (outputs equal the
    eager function's) or "reference" (`check_fn` compares with `stridec.run_reference`);
    `baseline` "fill" adds a write-only limit (Philox); `kernels` is the launch count the
    plan must have (one per materialized output); `shape_text` shows a shape parameter
    (the input sizes, where they are not the parameter itself)."""

    name: str
    description: str
    dtype: str
    shapes: Mapping[str, Shape]
    build: Callable[[Shape], stridec.Graph]
    make_inputs: Callable[[Shape, torch.Generator, torch.device], list[torch.Tensor]]
    eager: Callable[[Shape], Callable[..., Any]]
    oracle: str = "eager"
    read_bytes: Callable[[Tensors, Tensors], int] = input_bytes
    baseline: str = "copy"
    kernels: int = 1
    note: str = ""
    check_fn: Callable[[Workload, stridec.Graph, Tensors, Tensors], None] | None = field(
        default=None, repr=False
    )
    # `into(shape)(outs, *inputs)`: the row written into preallocated outputs as a torch
    # user would (`out.copy_(view)`, `torch.cat(..., out=)`); what eager and torch.compile
    # run when outputs are preallocated (stridec then runs `fn(*inputs, out=outs)`).
    into: Callable[[Shape], Callable[..., None]] | None = field(default=None, repr=False)
    # The row's state output is its state input, updated in place (Philox loops).
    state_in_place: bool = False
    shape_text: Callable[[Shape], str] = field(default=dims_text, repr=False)

    def shape(self, scale: str) -> Shape:
        if scale not in self.shapes:
            raise ValueError(
                f"{self.name}: scale must be one of {list(self.shapes)}; got {scale!r}"
            )
        return self.shapes[scale]

    def graph(self, scale: str) -> stridec.Graph:
        return self.build(self.shape(scale))

    def inputs(self, scale: str, device: torch.device | str, seed: int = 0) -> list[torch.Tensor]:
        device = torch.device(device)
        generator = torch.Generator(device=device).manual_seed(seed)
        return self.make_inputs(self.shape(scale), generator, device)

    def eager_fn(self, scale: str) -> Callable[..., Any]:
        """The torch function of this row at `scale` (what eager and torch.compile run)."""
        return self.eager(self.shape(scale))

    def into_fn(self, scale: str) -> Callable[..., None] | None:
        """The row written into preallocated outputs, or None where torch cannot."""
        return None if self.into is None else self.into(self.shape(scale))

    def bytes_moved(self, inputs: Tensors, outputs: Tensors) -> tuple[int, int]:
        """(bytes read, bytes written): each element the outputs depend on read once, each
        output element (padding included) written once."""
        return self.read_bytes(inputs, outputs), sum(_nbytes(o) for o in outputs)

    def check(self, scale: str, graph: stridec.Graph, inputs: Tensors, outputs: Tensors) -> None:
        """Raise `Mismatch` unless stridec's `outputs` equal the oracle's, element for element."""
        if self.check_fn is not None:
            self.check_fn(self, graph, inputs, outputs)
            return
        expected = self.eager_fn(scale)(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        if len(outputs) != len(expected):
            raise Mismatch(f"{self.name}: {len(outputs)} outputs, expected {len(expected)}")
        for k, (got, want) in enumerate(zip(outputs, expected, strict=True)):
            assert_same(got, want, f"{self.name} output {k}")


def _copy_into(view: Callable[..., torch.Tensor]) -> Callable[[Shape], Callable[..., None]]:
    """`out.copy_(view(x))`: how torch writes a layout change into memory it already has."""
    return lambda s: lambda outs, x: outs[0].copy_(view(x))


def _one_input(dtype: str, physical: Callable[[Shape], Shape] = lambda s: s) -> Callable:
    def make(shape: Shape, generator: torch.Generator, device: torch.device) -> list[torch.Tensor]:
        return [random_tensor(physical(shape), dtype, generator, device)]

    return make


def _graph(
    name: str, sizes: Shape, dtype: str, body: Callable[[stridec.Value], Any]
) -> stridec.Graph:
    g = stridec.Graph(name)
    out = body(g.input("x", sizes, dtype))
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g


# --------------------------------------------------------------------------- layout rows


def transpose2d(dtype: str, full: Shape = (16384, 16384), tiny: Shape = (37, 70),
                name: str | None = None, note: str = "") -> Workload:
    name = name or f"transpose2d_{stridec.as_dtype(dtype).name}"
    return Workload(
        name=name, description="2-D transpose x.t().contiguous()", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.t().contiguous()),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: x.t().contiguous(), note=note,
        into=_copy_into(lambda x: x.t()),
    )


def _nhwc_of(s: Shape) -> Shape:
    n, c, h, w = s
    return (n, h, w, c)


def nchw_to_nhwc(name: str, full: Shape, tiny: Shape, dtype: str = "float16") -> Workload:
    return Workload(
        name=name, description="NCHW -> NHWC x.permute(0, 2, 3, 1).contiguous()", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.permute(0, 2, 3, 1).contiguous()),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: x.permute(0, 2, 3, 1).contiguous(),
        into=_copy_into(lambda x: x.permute(0, 2, 3, 1)),
    )


def nhwc_to_nchw(name: str, full: Shape, tiny: Shape, dtype: str = "float16") -> Workload:
    """`shape` is the logical NCHW shape; the input is the physical NHWC tensor."""
    return Workload(
        name=name, description="NHWC -> NCHW x.permute(0, 3, 1, 2).contiguous()", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, _nhwc_of(s), dtype,
                               lambda x: x.permute(0, 3, 1, 2).contiguous()),
        make_inputs=_one_input(dtype, _nhwc_of),
        eager=lambda s: lambda x: x.permute(0, 3, 1, 2).contiguous(),
        into=_copy_into(lambda x: x.permute(0, 3, 1, 2)),
    )


def attention_permute(full: Shape = (32, 4096, 32, 64), tiny: Shape = (2, 9, 4, 8),
                      dtype: str = "float16") -> Workload:
    """(batch, seq, heads, head_dim) -> (batch, heads, seq, head_dim)."""
    name = "attention_permute_0213"
    return Workload(
        name=name, description="attention layout x.permute(0, 2, 1, 3).contiguous()",
        dtype=dtype, shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.permute(0, 2, 1, 3).contiguous()),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: x.permute(0, 2, 1, 3).contiguous(),
        into=_copy_into(lambda x: x.permute(0, 2, 1, 3)),
    )


def batched_transpose(full: Shape = (1024, 512, 512), tiny: Shape = (3, 9, 14),
                      dtype: str = "float32") -> Workload:
    """A batch of matrices transposed: x.transpose(1, 2).contiguous() of (B, M, N)."""
    name = f"batched_transpose_{stridec.as_dtype(dtype).name}"
    return Workload(
        name=name, description="batched transpose x.transpose(1, 2).contiguous()",
        dtype=dtype, shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.transpose(1, 2).contiguous()),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: x.transpose(1, 2).contiguous(),
        into=_copy_into(lambda x: x.transpose(1, 2)),
    )


# Physical dim order of each blocked format over the split sizes (N, C/x, x, H, W).
_BLOCKED = {"NCHW4": (4, (0, 1, 3, 4, 2)), "NCHW32": (32, (0, 1, 3, 4, 2)),
            "NCHW64": (64, (0, 1, 3, 4, 2)), "CHWN4": (4, (1, 3, 4, 0, 2))}


def pack_eager(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """torch's way to pack: pad C to a multiple of the block, split it, permute, copy.
    For NCHW4 of C = 6: pad to 8, view (N, 2, 4, H, W), permute to (N, 2, H, W, 4)."""
    block, order = _BLOCKED[fmt]
    n, c, h, w = x.shape
    padded = -(-c // block) * block
    if padded != c:
        x = F.pad(x, (0, 0, 0, 0, 0, padded - c))
    return x.reshape(n, padded // block, block, h, w).permute(order).contiguous()


def pack_into(out: torch.Tensor, x: torch.Tensor, fmt: str) -> None:
    """`pack_eager` into a preallocated physical tensor: the whole blocks as one copy of a
    view, the last partial block's channels and its zero padding apart."""
    block, order = _BLOCKED[fmt]
    n, c, h, w = x.shape
    inverse = [order.index(k) for k in range(len(order))]
    blocks = out.permute(inverse)                      # (N, C/x, x, H, W) over `out`
    whole = c // block
    if whole:
        blocks[:, :whole].copy_(x[:, : whole * block].view(n, whole, block, h, w))
    if whole * block != c:
        rest = c - whole * block
        blocks[:, whole, :rest].copy_(x[:, whole * block:])
        blocks[:, whole, rest:].zero_()


def pack(fmt: str, full: Shape, tiny: Shape, suffix: str = "", dtype: str = "int8") -> Workload:
    name = f"pack_{fmt.lower()}{suffix}_{dtype}"
    return Workload(
        name=name, description=f"NCHW -> {fmt} x.pack({fmt!r}), C padded with 0", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.pack(fmt)),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: pack_eager(x, fmt),
        into=lambda s: lambda outs, x: pack_into(outs[0], x, fmt),
    )


def _nchw32_of(s: Shape) -> Shape:
    n, c, h, w = s
    return (n, -(-c // 32), h, w, 32)


def unpack_nchw32(full: Shape = (384, 256, 56, 56), tiny: Shape = (2, 64, 3, 5),
                  dtype: str = "int8") -> Workload:
    """`shape` is the logical NCHW shape (C a multiple of 32); the input is NCHW32."""
    name = f"unpack_nchw32_{dtype}"

    def eager(x: torch.Tensor) -> torch.Tensor:
        n, cb, h, w, b = x.shape
        return x.permute(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)

    return Workload(
        name=name, description="NCHW32 -> NCHW x.unpack('NCHW32', C)", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, _nchw32_of(s), dtype, lambda x: x.unpack("NCHW32", s[1])),
        make_inputs=_one_input(dtype, _nchw32_of), eager=lambda s: eager,
        into=lambda s: lambda outs, x: outs[0].view(x.shape[0], x.shape[1], x.shape[4],
                                                   x.shape[2], x.shape[3]).copy_(
            x.permute(0, 1, 4, 2, 3)),
    )


def pitched_rows(full: Shape = (16384, 9000), tiny: Shape = (5, 13), align: int = 256,
                 dtype: str = "float16") -> Workload:
    """DirectML padding: every row padded to a multiple of `align` bytes (fp16, 256 B:
    a pitch of 128 elements; 9000 -> 9088), padding filled with 0."""
    fmt = f"pitched<{align}>"
    name = f"pitched_rows_{dtype}"

    def eager(x: torch.Tensor) -> torch.Tensor:
        quantum = align // math.gcd(align, x.element_size())
        return F.pad(x, (0, -(-x.shape[-1] // quantum) * quantum - x.shape[-1]))

    def into(outs: Tensors, x: torch.Tensor) -> None:
        width = x.shape[-1]
        outs[0][..., :width].copy_(x)
        outs[0][..., width:].zero_()

    return Workload(
        name=name, description=f"rows padded to {align} bytes x.pack({fmt!r})", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: x.pack(fmt)),
        make_inputs=_one_input(dtype), eager=lambda s: eager, into=lambda s: into,
    )


def _slice_margin(s: Shape) -> int:
    return max(s[-1] // 32, 1)


def strided_slice(full: Shape = (4, 8192, 8192), tiny: Shape = (2, 9, 40),
                  dtype: str = "float32") -> Workload:
    """Every other row, a margin of W/32 columns cut on each side: x[:, 1::2, m:-m]."""
    name = f"strided_slice_{dtype}"

    def take(x: Any, s: Shape) -> Any:
        m = _slice_margin(s)
        return x[:, 1::2, m:s[-1] - m]

    return Workload(
        name=name, description="x[:, 1::2, m:-m].contiguous(), m = W/32", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, dtype, lambda x: take(x, s).contiguous()),
        make_inputs=_one_input(dtype), eager=lambda s: lambda x: take(x, s).contiguous(),
        into=lambda s: lambda outs, x: outs[0].copy_(take(x, s)),
        read_bytes=output_elements_read,
    )


def expand_rows(full: Shape = (8192, 16384), tiny: Shape = (7, 33),
                dtype: str = "float32") -> Workload:
    """`shape` = (rows, cols): a (1, cols) row broadcast to every row and materialized."""
    name = f"expand_{dtype}"
    return Workload(
        name=name, description="x.expand(R, W).contiguous() of a (1, W) row", dtype=dtype,
        shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, (1, s[1]), dtype, lambda x: x.expand(s).contiguous()),
        make_inputs=lambda s, gen, dev: [random_tensor((1, s[1]), dtype, gen, dev)],
        eager=lambda s: lambda x: x.expand(s).contiguous(),
        into=lambda s: lambda outs, x: outs[0].copy_(x.expand(s)),
    )


def cast_transpose(full: Shape = (16384, 16384), tiny: Shape = (37, 70)) -> Workload:
    name = "cast_transpose_fp32_fp16"
    return Workload(
        name=name, description="x.t().to(float16).contiguous() from float32: one pass in "
                                "stridec (the cast alone keeps the transposed strides)",
        dtype="float32", shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, "float32", lambda x: x.t().to("float16").contiguous()),
        make_inputs=_one_input("float32"),
        eager=lambda s: lambda x: x.t().to(torch.float16).contiguous(),
        into=_copy_into(lambda x: x.t()),  # copy_ casts as it copies
    )


def chain3(full: Shape = (128, 256, 64, 64), tiny: Shape = (2, 16, 6, 5)) -> Workload:
    """Three materializing steps, one output: NHWC copy, cast to float32, every other
    row of H copied again. Eager runs three kernels; stridec must run exactly one."""
    name = "chain3_nhwc_cast_slice"

    def body(x: Any) -> Any:
        return x.permute(0, 2, 3, 1).contiguous().to("float32")[:, ::2].contiguous()

    return Workload(
        name=name, description="x.permute(0,2,3,1).contiguous().float()[:, ::2].contiguous()",
        dtype="float16", shapes={"full": full, "tiny": tiny},
        build=lambda s: _graph(name, s, "float16", body),
        make_inputs=_one_input("float16"),
        eager=lambda s: lambda x: x.permute(0, 2, 3, 1).contiguous().float()[:, ::2].contiguous(),
        into=_copy_into(lambda x: x.permute(0, 2, 3, 1)[:, ::2]),
        read_bytes=output_elements_read,
    )


def _cat_inputs(s: Shape) -> list[Shape]:
    """(N, C0, C1, C2, H, W) -> the three NCHW input sizes (N, Ck, H, W)."""
    n, *channels, h, w = s
    return [(n, c, h, w) for c in channels]


def cat_channels(full: Shape = (256, 64, 32, 96, 64, 64), tiny: Shape = (2, 3, 1, 4, 5, 7),
                 dtype: str = "float16") -> Workload:
    """`shape` = (N, C0, C1, C2, H, W): three NCHW inputs of C0, C1 and C2 channels joined
    along C, as a network joins its branches. Three copies into slices of one buffer,
    launched as one kernel (torch's cat is one kernel too)."""
    name = "cat_channels_fp16"

    def build(s: Shape) -> stridec.Graph:
        g = stridec.Graph(name)
        xs = [g.input(f"x{k}", sizes, dtype) for k, sizes in enumerate(_cat_inputs(s))]
        g.output(stridec.cat(xs, 1))
        return g

    def make(s: Shape, generator: torch.Generator, device: torch.device) -> list[torch.Tensor]:
        return [random_tensor(sizes, dtype, generator, device) for sizes in _cat_inputs(s)]

    return Workload(
        name=name, description="torch.cat([a, b, c], 1) of NCHW tensors", dtype=dtype,
        shapes={"full": full, "tiny": tiny}, build=build, make_inputs=make,
        eager=lambda s: lambda a, b, c: torch.cat([a, b, c], 1),
        into=lambda s: lambda outs, a, b, c: torch.cat([a, b, c], 1, out=outs[0]),
        shape_text=lambda s: ", ".join(dims_text(sizes) for sizes in _cat_inputs(s)),
    )


# --------------------------------------------------------------------------- philox rows


def advance_state(state: torch.Tensor, blocks: int) -> torch.Tensor:
    """The 6-word state with its 128-bit counter (words 0-3, word 0 least significant)
    advanced by `blocks` mod 2^128; the key (words 4-5) unchanged. Same dtype as `state`."""
    words = [int(w) & 0xFFFFFFFF for w in _bits(state.cpu()).tolist()]
    counter = sum(w << (32 * k) for k, w in enumerate(words[:4]))
    counter = (counter + blocks) % (1 << 128)
    new = [(counter >> (32 * k)) & 0xFFFFFFFF for k in range(4)] + words[4:]
    signed = torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in new], dtype=torch.int32)
    return signed.view(state.dtype) if state.dtype == torch.uint32 else signed.to(state.dtype)


def _state_input(shape: Shape, generator: torch.Generator, device: torch.device) -> list:
    """A random key and a counter whose word 0 is near its carry (exercises the carry)."""
    seed = int(torch.randint(0, 1 << 30, (1,), generator=generator, device=device).item())
    r = random.Random(seed)
    words = [0xFFFFFFFF - r.randrange(1 << 10)] + [r.getrandbits(32) for _ in range(5)]
    signed = [w - (1 << 32) if w >= 1 << 31 else w for w in words]
    return [torch.tensor(signed, dtype=torch.int32, device=device)]


def _philox_graph(name: str, draw: Callable[[stridec.Graph, stridec.Value, Shape], tuple],
                  sizes: Shape) -> stridec.Graph:
    g = stridec.Graph(name)
    s = g.input("state", (6,), "int32")
    g.output(*draw(g, s, sizes))
    return g


def _check_philox(draw: Callable) -> Callable:
    def check(w: Workload, graph: stridec.Graph, inputs: Tensors, outputs: Tensors) -> None:
        """Values against `stridec.run_reference` over the whole draw when it is small, else
        over a window at each end (the element at row-major index i is word i mod 4 of
        block counter + i/4, so a window starting at 4k is a draw from counter + k);
        new_state = counter + ceil(numel / 4)."""
        state = inputs[0].cpu()
        values, new_state = outputs
        n = values.numel()
        flat = _bits(values).reshape(-1)  # uint32 words as int32: slices and copies work
        if n <= 2 * PHILOX_WINDOW:
            windows = [(0, n)]
        else:
            last = (n - PHILOX_WINDOW) // 4 * 4
            windows = [(0, PHILOX_WINDOW), (last, n - last)]
        for start, count in windows:
            ref = _philox_graph(f"{w.name}_window", draw, (count,))
            want, _ = stridec.run_reference(ref, advance_state(state, start // 4))
            assert_same(flat[start:start + count].cpu(), _bits(want),
                        f"{w.name} values [{start}, {start + count})")
        assert_same(new_state.cpu(), advance_state(state, -(-n // 4)), f"{w.name} new_state")

    return check


def philox_bits(full: Shape = (8192, 16384), tiny: Shape = (5, 37)) -> Workload:
    name = "philox_bits_uint32"

    def draw(g: stridec.Graph, s: stridec.Value, sizes: Shape) -> tuple:
        return g.philox(s, sizes)

    return Workload(
        name=name, description="g.philox(state, sizes): uint32 bits and the new state",
        dtype="uint32", shapes={"full": full, "tiny": tiny},
        build=lambda s: _philox_graph(name, draw, s), make_inputs=_state_input,
        # torch has no Philox4x32 bits op: int32 random_() is the nearest comparison (speed only).
        eager=lambda s: lambda state: torch.empty(
            s, dtype=torch.int32, device=state.device).random_(),
        into=lambda s: lambda outs, state: outs[0].view(torch.int32).random_(),
        state_in_place=True, oracle="reference", baseline="fill", check_fn=_check_philox(draw),
        note="eager/compile: torch int32 random_() (speed only); values checked against "
             "stridec.run_reference",
    )


def philox_uniform(full: Shape = (8192, 16384), tiny: Shape = (5, 37)) -> Workload:
    name = "philox_uniform_float32"

    def draw(g: stridec.Graph, s: stridec.Value, sizes: Shape) -> tuple:
        return g.philox_uniform(s, sizes, "float32")

    return Workload(
        name=name, description="g.philox_uniform(state, sizes, 'float32') vs torch.rand",
        dtype="float32", shapes={"full": full, "tiny": tiny},
        build=lambda s: _philox_graph(name, draw, s), make_inputs=_state_input,
        eager=lambda s: lambda state: torch.rand(s, device=state.device),
        into=lambda s: lambda outs, state: outs[0].uniform_(),
        state_in_place=True, oracle="reference", baseline="fill", check_fn=_check_philox(draw),
        note="eager/compile: torch.rand (speed only); values checked against "
             "stridec.run_reference",
    )


# --------------------------------------------------------------------------- the suite


def _build_suite() -> list[Workload]:
    nchw_full, nchw_tiny = (256, 256, 64, 64), (2, 16, 5, 7)
    c3_full, c3_tiny = (256, 3, 512, 512), (2, 3, 6, 7)
    # int8 packing: the 64x256x56x56 with the batch raised to 384 so the tensor is
    # >= 256 MiB (docs/design.md#performance-targets); the C = 3 rows use 640x640 images for
    # the same reason.
    packed_full, packed_tiny = (384, 256, 56, 56), (2, 64, 3, 5)
    pad3_full, pad3_tiny = (256, 3, 640, 640), (2, 3, 4, 5)
    rows = [
        transpose2d("float32"),
        transpose2d("float16"),
        transpose2d("int8"),
        nchw_to_nhwc("nchw_to_nhwc_fp16", nchw_full, nchw_tiny),
        nchw_to_nhwc("nchw_to_nhwc_c3_fp16", c3_full, c3_tiny),
        nhwc_to_nchw("nhwc_to_nchw_fp16", nchw_full, nchw_tiny),
        nhwc_to_nchw("nhwc_to_nchw_c3_fp16", c3_full, c3_tiny),
        attention_permute(),
    ]
    for fmt in ("NCHW4", "NCHW32", "NCHW64", "CHWN4"):
        rows.append(pack(fmt, packed_full, packed_tiny))
    for fmt in ("NCHW4", "NCHW32", "NCHW64", "CHWN4"):
        rows.append(pack(fmt, pad3_full, pad3_tiny, suffix="_c3"))
    rows += [
        batched_transpose(),
        nchw_to_nhwc("nchw_to_nhwc_int8", nchw_full, nchw_tiny, dtype="int8"),
        nhwc_to_nchw("nhwc_to_nchw_int8", nchw_full, nchw_tiny, dtype="int8"),
        unpack_nchw32(),
        pitched_rows(),
        strided_slice(),
        expand_rows(),
        cast_transpose(),
        chain3(),
        cat_channels(),
        transpose2d(
            "int8", full=(49152, 49152), tiny=(37, 45), name="above_2e31_transpose_int8",
            note="49152^2 = 2,415,919,104 elements > 2^31: 64-bit indexing; the tiny row only "
                 "checks values (tests/bench checks the full-size plan's index width)",
        ),
        transpose2d(
            "int8", full=(16385, 16387), tiny=(37, 45), name="transpose2d_int8_odd",
            note="rows of an odd number of bytes start at every alignment, so no access can "
                 "be wider than one byte: the unaligned case, beside the aligned int8 row",
        ),
        philox_bits(),
        philox_uniform(),
    ]
    return [_with_cpu_shape(w) for w in rows]


# The "cpu" scale of each row (absent: not a CPU row). 32 MiB or so per tensor.
CPU_SHAPES: dict[str, Shape] = {
    "transpose2d_float32": (2048, 4096),
    "transpose2d_float16": (4096, 4096),
    "transpose2d_int8": (4096, 8192),
    "nchw_to_nhwc_fp16": (16, 256, 64, 64),
    "nchw_to_nhwc_c3_fp16": (16, 3, 512, 512),
    "nhwc_to_nchw_fp16": (16, 256, 64, 64),
    "nhwc_to_nchw_c3_fp16": (16, 3, 512, 512),
    "attention_permute_0213": (8, 1024, 32, 64),
    "batched_transpose_float32": (64, 256, 512),
    "nchw_to_nhwc_int8": (32, 256, 64, 64),
    "nhwc_to_nchw_int8": (32, 256, 64, 64),
    "pack_nchw4_int8": (32, 256, 64, 64),
    "pack_nchw32_int8": (32, 256, 64, 64),
    "pack_nchw64_int8": (32, 256, 64, 64),
    "pack_chwn4_int8": (32, 256, 64, 64),
    "pack_nchw4_c3_int8": (32, 3, 512, 512),
    "pack_nchw32_c3_int8": (4, 3, 512, 512),
    "pack_nchw64_c3_int8": (2, 3, 512, 512),
    "pack_chwn4_c3_int8": (32, 3, 512, 512),
    "unpack_nchw32_int8": (32, 256, 64, 64),
    "pitched_rows_float16": (4096, 4500),
    "strided_slice_float32": (4, 2048, 2048),
    "expand_float32": (2048, 4096),
    "cast_transpose_fp32_fp16": (2048, 4096),
    "chain3_nhwc_cast_slice": (16, 256, 64, 64),
    "cat_channels_fp16": (16, 64, 32, 96, 32, 64),
    "transpose2d_int8_odd": (4097, 4099),
    "philox_bits_uint32": (2048, 4096),
    "philox_uniform_float32": (2048, 4096),
}


def _with_cpu_shape(w: Workload) -> Workload:
    shape = CPU_SHAPES.get(w.name)
    if shape is None:
        return w
    return dataclasses.replace(w, shapes={**w.shapes, "cpu": shape})


WORKLOADS: list[Workload] = _build_suite()

# The host overhead of a cached call: one tiny transpose, where launch cost is everything.
HOST_OVERHEAD = dataclasses.replace(
    transpose2d("float32", full=(16, 16), tiny=(16, 16), name="host_overhead_16x16"),
    shapes={"full": (16, 16), "tiny": (16, 16), "cpu": (16, 16)},
)
# The graph whose cold and warm compile time is measured in fresh processes.
COMPILE_WORKLOAD_NAME = "nchw_to_nhwc_fp16"


def by_name(name: str) -> Workload:
    for w in [*WORKLOADS, HOST_OVERHEAD]:
        if w.name == name:
            return w
    raise KeyError(f"no workload named {name!r}; have {[w.name for w in WORKLOADS]}")


COMPILE_WORKLOAD = by_name(COMPILE_WORKLOAD_NAME)
