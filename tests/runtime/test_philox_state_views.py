"""A Philox state in any layout: a row of a (k, 6) tensor, a strided column, a flipped or
in-graph view (`s.view(2, 6)[1]`). Every backend reads the six words through the
state's layout, bit for bit as the reference backend and as the same state passed as a
contiguous tensor (whose bits `tests/ir` checks against the Random123 vectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.runtime.backends.reference_philox import make_state
from stridec.runtime.compile import BACKENDS

CPU_BACKENDS = [b for b in BACKENDS if b in ("interpret", "reference", "cpu")]


def _words(counter: int, key: int) -> torch.Tensor:
    return torch.from_numpy(make_state(counter, key).astype("uint32").reshape(-1)).view(
        torch.int32
    )


def _states(k: int) -> torch.Tensor:
    """(k, 6) int32 states, row i: counter 2^32·i + 2^32 - 2 (a carry inside), key i."""
    return torch.stack([_words(2**32 * i + 2**32 - 2, 0x9E37_79B9_7F4A_7C15 + i)
                        for i in range(k)])


def _same(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        bits = (lambda t: t.view(torch.int32)) if g.dtype == torch.uint32 else (lambda t: t)
        assert torch.equal(bits(g.contiguous()), bits(w.contiguous()))


def _graph(draw: Callable, shape: tuple[int, ...], view: Callable | None = None,
           dtype: str = "int32") -> stridec.Graph:
    g = stridec.Graph("state_view")
    s = g.input("s", shape, dtype)
    state = s if view is None else view(s)
    values, new_state = draw(g, state)
    g.output(values, new_state)
    return g


DRAWS = {
    "bits": lambda g, s: g.philox(s, (3, 5)),
    "uniform_bf16": lambda g, s: g.philox_uniform(s, (2, 9), "bfloat16", -1.0, 2.0),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("draw", list(DRAWS))
def test_rows_of_a_state_table(backend: str, draw: str) -> None:
    """states[i], storage offset 6·i: each row gives what its contiguous copy gives."""
    states = _states(4)
    fn = stridec.compile(_graph(DRAWS[draw], (6,)), backend=backend)
    for i in range(4):
        row = states[i]
        assert row.storage_offset() == 6 * i
        want = stridec.compile(_graph(DRAWS[draw], (6,)), backend="reference")(row.clone())
        _same(fn(row), want)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("draw", list(DRAWS))
def test_strided_and_4d_states(backend: str, draw: str) -> None:
    states = _states(3)
    column = states.t().contiguous().t()[1]  # (6,) with stride 3, offset 1
    assert column.stride() == (3,) and column.storage_offset() == 1
    fn = stridec.compile(_graph(DRAWS[draw], (6,)), backend=backend)
    reference = stridec.compile(_graph(DRAWS[draw], (6,)), backend="reference")
    _same(fn(column), reference(column.clone()))
    four_d = torch.empty(2, 1, 1, 12, dtype=torch.int32)[1:, :, :, ::2]  # strides (12, .., 2)
    four_d.copy_(states[2].reshape(1, 1, 1, 6))
    fn4 = stridec.compile(_graph(DRAWS[draw], (1, 1, 1, 6)), backend=backend)
    reference4 = stridec.compile(_graph(DRAWS[draw], (1, 1, 1, 6)), backend="reference")
    _same(fn4(four_d), reference4(four_d.clone()))


VIEWS = {
    "view_row": ((12,), lambda s: s.view(2, 6)[1]),
    "slice": ((10,), lambda s: s[3:9]),
    "step": ((12,), lambda s: s[::2]),
    "flip": ((6,), lambda s: s.flip(0)),
    "select_4d": ((2, 1, 1, 6), lambda s: s[1:]),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("view", list(VIEWS))
def test_in_graph_state_views(backend: str, view: str) -> None:
    shape, make = VIEWS[view]
    words = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.int32) * 0x1F1F1F1F
    words = words.reshape(shape)
    g = _graph(DRAWS["bits"], shape, make)
    want = stridec.compile(g, backend="reference")(words)
    _same(stridec.compile(g, backend=backend)(words), want)
    # ... and as the viewed words passed contiguously
    direct = stridec.compile(_graph(DRAWS["bits"], tuple(make(words).shape)), backend=backend)
    _same(direct(make(words).contiguous()), want)


def test_state_view_through_the_torch_op() -> None:
    states = _states(3)
    g = _graph(DRAWS["bits"], (6,))
    op = stridec.compile(g).as_torch_op("stridec_test::philox_state_row")
    want = stridec.compile(g, backend="reference")(states[2].clone())
    _same(tuple(op(states[2])), want)
