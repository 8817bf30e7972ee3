"""A new size in a planned class: every call of a graph over symbolic sizes takes one path
(`CompiledGraph._call_symbolic`): `fast_binder` checks the arguments and gives the class
and the symbols' values, and the class's `SymbolicRunner.call` runs the program with the
binding's numbers computed inline. No runner, no plan and no full check per size; values
against torch, checks against a graph that has planned nothing yet."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_symbolic_plans import _bad_calls, compound_graph

import stridec
from stridec.errors import CallError
from stridec.ir.symbols import symbol
from stridec.runtime import launch
from stridec.runtime.compile import CompiledGraph
from stridec.runtime.symbolic import binding_class


def cats_graph() -> stridec.Graph:
    """Symbols in first-appearance order N, M (a class program's are sorted: M, N)."""
    g = stridec.Graph("cats_nm")
    x = g.input("x", ("N", 4, 6), "float32")
    y = g.input("y", ("M", 4, 6), "float32")
    w = g.input("w", (2 * symbol("N") + 1, 3), "float32")
    z = stridec.cat([x, y], 0)
    g.output(z.transpose(0, 2).contiguous(), x[::2].flip(0), w.t().contiguous(), y)
    return g


def want(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z = torch.cat([a, b])
    return z.transpose(0, 2).contiguous(), a[::2].flip(0), c.t().contiguous(), b


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=6,
                      max_size=12))
def test_new_sizes_equal_torch_and_plan_once_per_class(sizes: list[tuple[int, int]]) -> None:
    """Many sizes, classes 0, 1, 16k and the rest among them: each call equals torch
    (values and strides), and each class is planned and takes the full path once."""
    full: list[object] = []
    plan = CompiledGraph._symbolic_plan
    fn = stridec.compile(cats_graph(), backend="cpu")
    classes = set()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CompiledGraph, "_symbolic_plan",
                   lambda self, ts: full.append(ts) or plan(self, ts))
        for n, m in sizes:
            a, b, c = torch.randn(n, 4, 6), torch.randn(m, 4, 6), torch.randn(2 * n + 1, 3)
            got = fn(a, b, c)
            for o, w in zip(got, want(a, b, c), strict=True):
                assert o.shape == w.shape and torch.equal(o, w)
                assert all(a == b for a, b, k in zip(o.stride(), w.stride(), w.shape,
                                                     strict=True) if k > 1)
            classes.add(binding_class({"M": m, "N": n}))
    assert len(full) == len(classes) == fn.stats.codegen_runs
    assert fn.stats.cache_hits == len(sizes) - len(classes)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_the_class_call_runs_no_runner_per_size(backend: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After the class's first call, new sizes bind no `Runner` (`SymbolicRunner.bind`)
    and load nothing: the class's `call` computes the numbers inline."""
    fn = stridec.compile(cats_graph(), backend=backend)
    fn(torch.randn(3, 4, 6), torch.randn(5, 4, 6), torch.randn(7, 3))
    (program,) = [p for p in fn._classes.values() if p is not None]
    symbolic = launch.symbolic_runner(program, backend)
    built = []
    monkeypatch.setattr(launch.Runner, "__init__",
                        lambda *a, **k: built.append(a) or pytest.fail("a Runner was built"))
    for n, m in ((5, 3), (7, 9), (13, 2)):
        a, b, c = torch.randn(n, 4, 6), torch.randn(m, 4, 6), torch.randn(2 * n + 1, 3)
        for o, w in zip(fn(a, b, c), want(a, b, c), strict=True):
            assert torch.equal(o, w) and o.stride() == w.stride()
    assert not built and fn.stats.codegen_runs == 1 and fn.stats.cache_hits == 3
    assert launch.symbolic_runner(program, backend) is symbolic


def test_a_binding_past_the_int32_kernels_is_a_miss() -> None:
    """`SymbolicRunner.call` checks `Program.fits` before anything else: a binding whose
    indices leave int32 gets `MISS` (the call then plans the class's int64 program)."""
    g = stridec.Graph("fits")
    x = g.input("x", ("N", 8, 6, 5), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    fn = stridec.compile(g, backend="interpret")  # (the C kernels index in int64)
    t = torch.randn(3, 8, 6, 5).half()
    fn(t)
    (program,) = [p for p in fn._classes.values() if p is not None]
    call = launch.symbolic_runner(program, "interpret").call
    assert call((t,), t.device, (2**31 - 1,)) is launch.MISS
    assert torch.equal(call((t,), t.device, (3,)), t.permute(0, 2, 3, 1).contiguous())


def _outcome(fn: stridec.CompiledGraph, args: tuple[torch.Tensor, ...]) -> object:
    try:
        return fn(*args)
    except CallError as e:
        return str(e)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 20), st.integers(1, 20))
def test_checks_of_a_planned_class_name_what_a_fresh_graph_names(n: int, m: int) -> None:
    """Every bad call of a class already planned is refused with the message a graph that
    has planned nothing gives (or, a layout not declared, gets the same values)."""
    warm = stridec.compile(compound_graph(), backend="cpu")
    good = (torch.randn(n, 2 * m + 1).half(), torch.randn(m, 3).half())
    warm(*good)
    for bad in _bad_calls(n, m):
        fresh = stridec.compile(compound_graph(), backend="cpu")
        got, expected = _outcome(warm, bad), _outcome(fresh, bad)
        if isinstance(expected, str):
            assert got == expected
        else:
            for o, w in zip(got, expected, strict=True):
                assert torch.equal(o, w)
    with pytest.raises(CallError, match=r"argument 'x': dim 1 is 2\*M\+1 = "):
        warm(good[0], torch.randn(m + 1, 3).half())
