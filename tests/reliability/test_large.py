"""Tensors above 2^31 elements: int64 indexing, and int32 kept just below
(docs/design.md#passes, #performance-targets).

Sizes (int8, so a tensor of 2^31 elements is 2 GiB):

    copy  ABOVE (32768, 65600): 32768·65600 = 2,149,580,800 > 2^31 = 2,147,483,648
    copy  BELOW (32768, 65535): 32768·65535 = 2,147,450,880 < 2^31: the highest address
          on either side is 2,147,450,879 <= 2^31 - 1
    pack  ABOVE NCHW4 of (2, 3, 16384, 22000): 2·3·16384·22000 = 2,162,688,000 logical
          elements, 2·1·16384·22000·4 = 2,883,584,000 packed (C = 3 padded to 4)
    pack  BELOW NCHW4 of (2, 3, 16384, 16000): 2·1·16384·16000·4 = 2,097,152,000 packed

The copy is a transpose (`x.t().contiguous()`), so both sides' offsets reach the top.

The plans are checked everywhere (planning reads no data: the arguments come from
`torch.empty`, which reserves the storage without touching it) -- on CPU, and on CUDA
where there is a device; the runs, compared with torch element for element, need a GPU
(marked `gpu`: the interpreter would take hours).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec

INT32_MAX = 2**31 - 1
COPY_ABOVE, COPY_BELOW = (32768, 65600), (32768, 65535)
PACK_ABOVE, PACK_BELOW = (2, 3, 16384, 22000), (2, 3, 16384, 16000)

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def transpose_graph(sizes: tuple[int, ...]) -> stridec.Graph:
    g = stridec.Graph("large_transpose")
    g.output(g.input("x", sizes, "int8").t().contiguous())
    return g


def pack_graph(sizes: tuple[int, ...]) -> stridec.Graph:
    g = stridec.Graph("large_pack")
    g.output(g.input("x", sizes, "int8").pack("NCHW4"))
    return g


def empty(sizes: tuple[int, ...], device: str) -> torch.Tensor:
    try:
        return torch.empty(sizes, dtype=torch.int8, device=device)
    except (RuntimeError, MemoryError) as e:  # an address space without overcommit
        pytest.skip(f"cannot reserve {sizes} int8 on {device}: {e}")


CASES = [
    ("copy-above", transpose_graph, COPY_ABOVE, 64),
    ("copy-below", transpose_graph, COPY_BELOW, 32),
    ("pack-above", pack_graph, PACK_ABOVE, 64),
    ("pack-below", pack_graph, PACK_BELOW, 32),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("graph, sizes, bits", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_index_width(graph: Callable[..., stridec.Graph], sizes: tuple[int, ...], bits: int,
                     device: str) -> None:
    numel = 1
    for n in sizes:
        numel *= n
    assert (numel > INT32_MAX) == (sizes in (COPY_ABOVE, PACK_ABOVE))
    backend = "triton" if device == "cuda" else "interpret"  # the Triton kernels' width
    plan = stridec.compile(graph(sizes), backend=backend).plan_for(empty(sizes, device))
    (kernel,) = plan.kernels
    assert kernel.kind == "copy" and kernel.index_bits == bits
    assert f"index_bits={bits}" in kernel.source
    assert ("tl.int64" in kernel.source) == (bits == 64)


def _pattern(sizes: tuple[int, ...], device: str) -> torch.Tensor:
    """Deterministic int8 data with no period that divides a row: i·7 + i//65599 (mod 256),
    built in place so no int64 copy of the whole tensor is needed."""
    x = torch.empty(sizes, dtype=torch.int8, device=device)
    flat = x.view(-1)
    chunk = 1 << 28
    for start in range(0, flat.numel(), chunk):
        i = torch.arange(start, min(start + chunk, flat.numel()), device=device)
        values = ((i * 7 + i // 65599) % 256).to(torch.uint8)
        flat[start : start + i.numel()] = values.view(torch.int8)
    return x


def _nchw4(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    out = torch.zeros((n, 1, h, w, 4), dtype=x.dtype, device=x.device)
    out[:, 0, :, :, :c] = x.permute(0, 2, 3, 1)
    return out


RUNS: list[tuple[str, Callable[..., stridec.Graph], tuple[int, ...], Callable[[Any], Any]]] = [
    ("copy-above", transpose_graph, COPY_ABOVE, lambda x: x.t().contiguous()),
    ("copy-below", transpose_graph, COPY_BELOW, lambda x: x.t().contiguous()),
    ("pack-above", pack_graph, PACK_ABOVE, _nchw4),
    ("pack-below", pack_graph, PACK_BELOW, _nchw4),
]


@pytest.mark.gpu
@pytest.mark.parametrize("graph, sizes, torch_fn", [r[1:] for r in RUNS], ids=[r[0] for r in RUNS])
def test_runs_match_torch(graph: Callable[..., stridec.Graph], sizes: tuple[int, ...],
                          torch_fn: Callable[[Any], Any]) -> None:
    x = _pattern(sizes, "cuda")
    fn = stridec.compile(graph(sizes))
    got = fn(x)
    want = torch_fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert bool((got == want).all())
    # The last elements are where int32 offsets would have wrapped: check them exactly too.
    assert torch.equal(got.reshape(-1)[-4096:], want.reshape(-1)[-4096:])
    del got, want, x
    torch.cuda.empty_cache()


@pytest.mark.parametrize("broadcast", ["column", "row"])
def test_cpu_copy_above_2_31_elements(broadcast: str) -> None:
    """The cpu backend runs a copy whose output has COPY_ABOVE = 2,149,580,800 int8
    elements, cheaply: the source is one column (rows, 1) or one row (1, width) broadcast,
    so only the output is large. The column is a transpose in the C kernel (its unit dim is
    the rows), the row a copy of rows; offsets past 2^31 are computed in 64 bits, or rows
    past 2^31 / width would be written in the wrong place or not at all."""
    rows, width = COPY_ABOVE
    shape = (rows, 1) if broadcast == "column" else (1, width)
    g = stridec.Graph("large_broadcast")
    g.output(g.input("x", shape, "int8").expand(rows, width).contiguous())
    fn = stridec.compile(g, backend="cpu")
    x = (torch.arange(shape[0] * shape[1]) % 251 + 1).to(torch.int8).reshape(shape)
    try:
        got = fn(x)
    except (RuntimeError, MemoryError) as e:  # an address space without overcommit
        pytest.skip(f"cannot allocate {rows}x{width} int8: {e}")
    (kernel,) = fn.plan_for(x).kernels
    assert kernel.strategy == ("tiled_transpose" if broadcast == "column" else "linear")
    assert got.shape == (rows, width) and got.numel() > INT32_MAX
    step = 4096  # compared in slices of 268 MB: no second 2 GiB tensor
    for r0 in range(0, rows, step):
        block = got[r0:r0 + step]
        want = x[r0:r0 + step] if broadcast == "column" else x
        assert torch.equal(block, want.expand_as(block)), r0
    del got
