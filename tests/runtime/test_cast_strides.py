"""A cast lays out its result as torch's `preserve_format` does, on every backend.

`x.to(dtype)` keeps a non-overlapping and dense input's strides (a transpose stays
transposed) and packs any other input densely in its own dim order (torch's
`infer_dense_strides`). Oracles: torch's `.to()` strides for the layout rule
(`Layout.preserved`), and torch running the same code for whole programs, traced and
built, on inputs that are contiguous, transposed, stepped, expanded and offset.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec
from stridec.ir.layout import Layout
from stridec.runtime.compile import BACKENDS

CPU_BACKENDS = [b for b in BACKENDS if b in ("interpret", "reference", "cpu")]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0, 1, 2, 3, 4, 6, 12, 20, 60])),
                max_size=5))
def test_preserved_layout_is_torchs(dims: list[tuple[int, int]]) -> None:
    sizes = tuple(s for s, _ in dims)
    strides = tuple(st_ for _, st_ in dims)
    x = torch.zeros(6000).as_strided(sizes, strides)
    assert Layout(sizes, strides).preserved() == Layout(sizes, tuple(x.to(torch.float16).stride()))


def _arrangements(sizes: tuple[int, int]) -> dict[str, torch.Tensor]:
    rows, cols = sizes
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(2 * rows * cols + 3, generator=gen)
    return {
        "contiguous": base[: rows * cols].view(rows, cols),
        "transposed": base[: rows * cols].view(cols, rows).t(),
        "stepped": base[: 2 * rows * cols].view(rows, 2 * cols)[:, ::2],
        "expanded": base[:cols].expand(rows, cols),
        "offset": base[3 : 3 + rows * cols].view(rows, cols),
    }


PROGRAMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "t_bf16": lambda x: x.t().to(torch.bfloat16),
    "step_half": lambda x: x[:, ::2].half(),
    "t_step_double": lambda x: x.t()[::2].double(),
    "flip_t_f16": lambda x: x.flip(0).t().to(torch.float16),
    "mT_int": lambda x: x.mT.int(),
    "expand_permute": lambda x: x.unsqueeze(1).expand(6, 3, 4).permute(2, 1, 0).bfloat16(),
    "to_dtype_kw": lambda x: x.transpose(0, 1).to(dtype=torch.float64),
    "type_as": lambda x: x.t().type(torch.float64),
    "cast_chain": lambda x: x.t().half().float(),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_traced_casts_have_torchs_strides(program: str, backend: str) -> None:
    fn = PROGRAMS[program]
    graph = stridec.trace(fn, torch.zeros(6, 4))
    compiled = stridec.compile(graph, backend=backend)
    for arrangement, x in _arrangements((6, 4)).items():
        want = fn(x)
        got = compiled(x)
        assert got.stride() == want.stride(), (arrangement, got.stride(), want.stride())
        assert torch.equal(got, want), arrangement


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_built_casts_have_torchs_strides(backend: str) -> None:
    g = stridec.Graph("casts")
    x = g.input("x", (6, 4), "float32")
    g.output(x.t().to("bfloat16"), x.slice(1, None, None, 2).to("float16"),
             x.permute(1, 0).flip(1).to("float64"))
    compiled = stridec.compile(g, backend=backend)
    for arrangement, t in _arrangements((6, 4)).items():
        wants = (t.t().to(torch.bfloat16), t[:, ::2].half(), t.t().flip(1).double())
        for got, want in zip(compiled(t), wants, strict=True):
            assert got.stride() == want.stride(), (arrangement, got.stride(), want.stride())
            assert torch.equal(got, want), arrangement


def test_cast_strides_through_the_torch_op() -> None:
    """The custom op's fake implementation and its kernel agree with torch's strides."""
    fn = PROGRAMS["t_bf16"]
    op = stridec.compile(stridec.trace(fn, torch.zeros(6, 4))).as_torch_op("stridec_test::t_bf16")
    for arrangement, x in _arrangements((6, 4)).items():
        got = op(x)
        assert got.stride() == fn(x).stride(), arrangement
        assert torch.equal(got, fn(x)), arrangement
