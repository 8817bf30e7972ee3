"""Tensors at the rank limit (`MAX_RANK`, 25: the dims torch's CUDA kernels index) run on
every backend and match torch; one more dim is an `UnsupportedError` (tests/ir/test_errors.py).

A copy's canonical space drops dims of size 1 and merges contiguous ones, so a space of
rank `MAX_RANK` needs `2**MAX_RANK` elements: the C kernels' fixed-size arrays (`c[MAXR]`)
are checked on one such int8 copy (`-m slow`: 2**25 elements) and at rank 18 by default;
the traced graphs keep their logical rank at the limit with fewer elements."""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec.compiler.codegen.c.plan import ABI, LANE_KERNELS, SYMBOL_PREFIX
from stridec.compiler.codegen.spec import CopySpec
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import as_dtype
from tests.compiler.test_codegen_c_copy import run_c

# 2 x 3 x 1 x 2 x ...: 2**8 * 3**8 elements would be too many; 12 dims of 2 or 3, the rest 1.
SIZES = tuple((2, 3, 1, 1)[k % 4] if k < 24 else 2 for k in range(MAX_RANK))
PERM = tuple(range(1, MAX_RANK, 2)) + tuple(range(0, MAX_RANK, 2))


def layout_chain(x):
    y = x.permute(PERM)
    return y.contiguous(), y[..., 1:].flip(0).clone(), x.transpose(0, -1)


@pytest.mark.parametrize("backend", ["reference", "cpu", "interpret"])
def test_a_traced_graph_at_the_limit_matches_torch(backend: str) -> None:
    x = torch.randn(SIZES)
    assert x.ndim == MAX_RANK
    graph = stridec.trace(layout_chain, x)
    got = stridec.compile(graph, backend=backend)(x)
    for out, ref in zip(got, layout_chain(x), strict=True):
        assert torch.equal(out, ref) and out.stride() == ref.stride()
    assert got[2].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_text_ir_at_the_limit_round_trips() -> None:
    graph = stridec.trace(layout_chain, torch.randn(SIZES))
    text = str(graph)
    assert str(stridec.parse(text)) == text


def _c_copy_of_canonical_rank(rank: int) -> None:
    # Every dim of size 2, every stride a different power of two on each side: nothing
    # merges, so the C kernel walks all `rank` dims.
    perm = tuple(range(1, rank, 2)) + tuple(range(0, rank, 2))
    src = tuple(2 ** (rank - 1 - p) for p in perm)
    dst = tuple(2 ** (rank - 1 - k) for k in range(rank))
    i8 = as_dtype("int8")
    kernel = run_c(CopySpec((2,) * rank, src, 0, dst, 0, i8, i8))
    symbol, params = kernel.calls[0][0], kernel.calls[0][3]
    if symbol.startswith(SYMBOL_PREFIX):
        # The planned library: the loops of its nest, plus the lanes' dim of a lane kernel.
        words = dict(zip(ABI.header, params, strict=False))
        lanes = words["kernel"] in [ABI.kernels[k] for k in LANE_KERNELS]
        assert words["loops"] + lanes == rank
    else:
        assert params[0] == rank  # the rank word of the call's parameters


def test_c_copy_of_canonical_rank_18() -> None:
    _c_copy_of_canonical_rank(18)  # torch's deepest view test; 2**18 elements


@pytest.mark.slow
def test_c_copy_of_canonical_rank_max() -> None:
    _c_copy_of_canonical_rank(MAX_RANK)  # 2**25 elements: ~7 s


def test_philox_at_the_limit_matches_the_reference() -> None:
    g = stridec.Graph("philox_max")
    state = g.input("state", (6,), "uint32")
    values, new_state = g.philox_uniform(state, SIZES[:-1] + (5,), "float32")
    g.output(values.permute(PERM).contiguous(), new_state)
    s = torch.tensor([1, 2, 3, 4, 5, 6], dtype=torch.int32).view(torch.uint32)
    want = stridec.compile(g, backend="reference")(s)
    got = stridec.compile(g, backend="cpu")(s)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b) and a.stride() == b.stride()
