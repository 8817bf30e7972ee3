"""Copies over symbolic sizes run on the planned library as static copies of the same size
do (`codegen/symbolic_c.py`): the plan the model takes at the class's first binding, with
the symbolic extents and strides, checked to hold for every value. Compared with torch on
bindings other than the one planned, and the library calls with the static plan's."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stridec

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TORCH = {"int8": torch.int8, "float16": torch.float16, "float32": torch.float32,
         "float64": torch.float64}


def _graph(sizes: tuple, dtype: str, perm: tuple[int, ...]) -> stridec.Graph:
    g = stridec.Graph("permute")
    x = g.input("x", sizes, dtype)
    g.output(x.permute(*perm).contiguous())
    return g


def _calls(fn: stridec.CompiledGraph, x: torch.Tensor) -> list[str]:
    return [call[0] for k in fn.plan_for(x).program.kernels for call in k.calls]


def _data(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.int64) % 251).to(TORCH[dtype]).reshape(shape)


# (sizes with the symbol N, dtype, permutation): a transpose, one of grouped sides
# (rank 6), a deinterleave, an interleave, the innermost dim symbolic.
CASES = [
    (("N", 40, 50), "float32", (0, 2, 1)),
    (("N", 5, 15, 8, 15, 4), "float32", (5, 2, 0, 4, 1, 3)),
    (("N", 20, 30, 3), "float16", (0, 3, 1, 2)),
    (("N", 3, 20, 30), "float64", (0, 2, 3, 1)),
    ((7, "N", 30), "float32", (2, 1, 0)),
    ((33, 65, "N"), "int8", (2, 0, 1)),
]


@pytest.mark.parametrize(("sizes", "dtype", "perm"), CASES)
def test_symbolic_copies_call_the_library_the_static_plan_calls(
        sizes: tuple, dtype: str, perm: tuple[int, ...]) -> None:
    fn = stridec.compile(_graph(sizes, dtype, perm), backend="cpu")
    for n in (6, 2, 17, 40):  # 6 plans the class; the others bind its plan
        shape = tuple(n if s == "N" else s for s in sizes)
        x = _data(shape, dtype)
        got, want = fn(x), x.permute(*perm).contiguous()
        assert got.stride() == want.stride() and torch.equal(got, want)
        static = stridec.compile(_graph(shape, dtype, perm), backend="cpu")
        if n == 6:
            assert _calls(fn, x) == _calls(static, x)


@pytest.mark.parametrize(("sizes", "perm", "masked"), [
    ((5, 7, "N"), (2, 0, 1), False), ((5, "N", 40), (0, 2, 1), False),
    ((2, "N", 9, 31), (0, 2, 3, 1), True)])
def test_a_plan_whose_lanes_are_the_symbol_at_the_hint_holds_for_other_values(
        sizes: tuple, perm: tuple[int, ...], masked: bool) -> None:
    # At N = 3 the copy is a deinterleave (an interleave) of 3 lanes; at N = 5 it is not:
    # the symbolic plan must not take the hint's lanes for every N, and takes another of
    # the library's (a transpose, or the gather), never a kernel of its own.
    for dtype in ("float32", "int8"):
        g = stridec.Graph("lanes")
        x = g.input("x", sizes, dtype)
        y = x.permute(*perm)
        g.output(stridec.pad(y, (0, 1), value=-3.0) if masked else y.contiguous())
        fn = stridec.compile(g, backend="cpu")
        for n in (3, 5, 4, 2, 9):
            t = _data(tuple(n if s == "N" else s for s in sizes), dtype)
            want = t.permute(*perm)
            want = (torch.nn.functional.pad(want, (0, 1), value=-3.0) if masked
                    else want.contiguous())
            assert torch.equal(fn(t), want), (dtype, n)
            assert all(c.startswith("stridec_plan") for c in _calls(fn, t)), (dtype, n)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_symbolic_permutations_against_torch(data: st.DataObject) -> None:
    rank = data.draw(st.integers(2, 5), label="rank")
    sizes = [data.draw(st.integers(2, 9), label="extent") for _ in range(rank)]
    where = data.draw(st.integers(0, rank - 1), label="symbolic dim")
    perm = tuple(data.draw(st.permutations(range(rank)), label="perm"))
    dtype = data.draw(st.sampled_from(sorted(TORCH)), label="dtype")
    values = data.draw(st.lists(st.integers(2, 40), min_size=2, max_size=3), label="N")
    symbolic = tuple("N" if k == where else s for k, s in enumerate(sizes))
    fn = stridec.compile(_graph(symbolic, dtype, perm), backend="cpu")
    for n in values:
        shape = tuple(n if k == where else s for k, s in enumerate(sizes))
        x = _data(shape, dtype)
        got, want = fn(x), x.permute(*perm).contiguous()
        assert got.stride() == want.stride() and torch.equal(got, want)


# (sizes with the symbol N, dtype, the graph's function, torch's): masked copies -- pads
# (rows, a transposed source: a masked transpose, which the symbolic pipeline leaves a
# fill and a copy: kernel counts, issue 33 item 3), a pack (a masked interleave), the pad
# along the symbolic dim itself
MASKED = [
    (("N", 3, 20, 30), "float32", lambda x: stridec.pad(x, (1, 2, 3, 4), value=1.5),
     lambda x: torch.nn.functional.pad(x, (1, 2, 3, 4), value=1.5)),
    (("N", 40), "float16", lambda x: stridec.pad(x.t(), (5, 6, 1, 2), value=-1.0),
     lambda x: torch.nn.functional.pad(x.t(), (5, 6, 1, 2), value=-1.0)),
    (("N", 3, 9, 31), "float32", lambda x: x.pack("NCHW4", fill=-2.5),
     lambda x: torch.nn.functional.pad(x, (0, 0, 0, 0, 0, 1), value=-2.5)
     .reshape(x.shape[0], 1, 4, 9, 31).permute(0, 1, 3, 4, 2).contiguous()),
    ((7, "N"), "float64", lambda x: stridec.pad(x, (3, 4), value=2.0),
     lambda x: torch.nn.functional.pad(x, (3, 4), value=2.0)),
]


@pytest.mark.parametrize(("sizes", "dtype", "build", "reference"), MASKED)
def test_symbolic_masked_copies_call_the_library_the_static_plan_calls(
        sizes: tuple, dtype: str, build, reference) -> None:
    def graph(shape: tuple) -> stridec.Graph:
        g = stridec.Graph("masked")
        g.output(build(g.input("x", shape, dtype)))
        return g

    fn = stridec.compile(graph(sizes), backend="cpu")
    for n in (6, 2, 17, 40):  # 6 plans the class; the others bind its plan
        shape = tuple(n if s == "N" else s for s in sizes)
        x = _data(shape, dtype)
        got, want = fn(x), reference(x)
        assert got.stride() == want.stride() and torch.equal(got, want), n
        if n == 6:
            static = _calls(stridec.compile(graph(shape), backend="cpu"), x)
            calls = _calls(fn, x)
            assert all(c.startswith("stridec_plan") for c in calls + static)
            assert calls == static or (len(calls), len(static)) == (2, 1)
