"""A new size in a planned class: every call of a graph over symbolic sizes takes one path
(`ClassPlans.call`): `fast_binder` checks the arguments and gives the class
and the symbols' values, and the class's `SymbolicRunner.call` runs the program with the
binding's numbers computed inline. No runner, no plan and no full check per size; values
against torch, checks against a graph that has planned nothing yet."""

from __future__ import annotations

import tempfile

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_symbolic_plans import _bad_calls, compound_graph

import stridec
from stridec.errors import CallError
from stridec.ir.symbols import symbol
from stridec.runtime import launch
from stridec.runtime.cache import MEMORY_CACHE
from stridec.runtime.class_plans import ClassPlans
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


def _shared(t: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> list[bool]:
    """Which of `inputs` share memory with `t` (none for an empty `t`)."""
    ptr = t.untyped_storage().data_ptr()
    return [bool(t.numel()) and ptr == i.untyped_storage().data_ptr() for i in inputs]


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=6,
                      max_size=12))
@example(sizes=[(0, 0)] * 5 + [(2, 21)])  # sizes planned per binding: 0 and N = 2
def test_new_sizes_equal_torch_and_plan_once_per_class(sizes: list[tuple[int, int]]) -> None:
    """Many sizes, classes 0, 1, 16k and the rest among them: each call equals torch
    (values, strides and which outputs share an input's memory), and each class is
    planned and takes the full path once. At N = 2, `x[::2]` has one row: torch's
    `contiguous` of it is the view itself, which a plan for every N of the class does
    not know, so that size is planned alone (once per shape, the full path each call).
    Empty plan caches (memory and disk) for each example: a size planned per binding by
    an earlier example or test would otherwise come from them, not from code generation."""
    full: list[object] = []
    plan = ClassPlans.plan
    fn = stridec.compile(cats_graph(), backend="cpu")
    classes, alone = set(), set()
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as cache_dir:
        mp.setenv("STRIDEC_CACHE_DIR", cache_dir)
        MEMORY_CACHE.clear_memory()
        mp.setattr(ClassPlans, "plan",
                   lambda self, compiled, ts: full.append(ts) or plan(self, compiled, ts))
        for n, m in sizes:
            a, b, c = torch.randn(n, 4, 6), torch.randn(m, 4, 6), torch.randn(2 * n + 1, 3)
            got = fn(a, b, c)
            for o, w in zip(got, want(a, b, c), strict=True):
                assert o.shape == w.shape and o.stride() == w.stride() and torch.equal(o, w)
                assert _shared(o, (a, b, c)) == _shared(w, (a, b, c))
            if n == 2:
                alone.add((n, m))
            else:
                classes.add(binding_class({"M": m, "N": n}))
    calls_alone = sum(1 for n, _ in sizes if n == 2)
    assert len(full) == len(classes) + calls_alone
    assert fn.stats.codegen_runs == len(classes) + len(alone)
    assert fn.stats.cache_hits == len(sizes) - len(classes) - len(alone)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_the_class_call_runs_no_runner_per_size(backend: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After the class's first call, new sizes bind no `Runner` (`SymbolicRunner.bind`)
    and load nothing: the class's `call` computes the numbers inline."""
    fn = stridec.compile(cats_graph(), backend=backend)
    fn(torch.randn(3, 4, 6), torch.randn(5, 4, 6), torch.randn(7, 3))
    (program,) = [p for p in fn._symbolic.classes.values() if p is not None]
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
    (program,) = [p for p in fn._symbolic.classes.values() if p is not None]
    call = launch.symbolic_runner(program, "interpret").call
    assert call((t,), t.device, (2**31 - 1,)) is launch.MISS
    assert torch.equal(call((t,), t.device, (3,)), t.permute(0, 2, 3, 1).contiguous())


def _outcome(fn: stridec.CompiledGraph, args: tuple[torch.Tensor, ...],
             out: object = None) -> object:
    try:
        return fn(*args) if out is None else fn(*args, out=out)
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


def nhwc_graph() -> stridec.Graph:
    g = stridec.Graph("nhwc_out")
    x = g.input("x", ("N", 4, 3, 5), "float32")
    g.output(x.permute(0, 2, 3, 1).contiguous(), x[:, :2].flip(1))
    return g


def _copies(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    seen: list[torch.Tensor] = []
    copy = torch.Tensor.copy_
    monkeypatch.setattr(torch.Tensor, "copy_",
                        lambda self, src, *a, **k: seen.append(self) or copy(self, src, *a, **k))
    return seen


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_outs_of_the_plans_strides_are_written_straight(
    backend: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An out with the class plan's strides, anywhere in its storage (here rows of a
    larger tensor, behind an offset), is the plan's buffer: written by the kernels, no
    copy after (the flipped slice too: the plan copies it into a buffer of its own); an
    out with pitched rows is copied into. Values against torch, the rest of the storage
    untouched."""
    fn = stridec.compile(nhwc_graph(), backend=backend)
    seen = _copies(monkeypatch)
    for n in (2, 3, 5, 7, 9):
        x = torch.randn(n, 4, 3, 5)
        big = torch.full((n + 3, 3, 5, 4), -1.0)
        second = torch.full((n, 2, 3, 5), -2.0)
        got = fn(x, out=(big[1:n + 1], second))
        assert got[0].data_ptr() == big[1].data_ptr() and got[1] is second
        assert torch.equal(big[1:n + 1], x.permute(0, 2, 3, 1))
        assert torch.equal(second, x[:, :2].flip(1))
        assert (big[0] == -1).all() and (big[n + 1:] == -1).all()
        assert seen == []
        pitched = torch.full((n, 2, 3, 7), -2.0)
        fn(x, out=(big[1:n + 1], pitched[..., :5]))
        assert torch.equal(pitched[..., :5], x[:, :2].flip(1)) and (pitched[..., 5:] == -2).all()
        assert len(seen) == 1 and seen[0].stride() == pitched.stride()
        seen.clear()
    assert fn.stats.codegen_runs == 1


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 20), pitch=st.integers(0, 4), offset=st.integers(0, 3))
def test_pitched_and_offset_outs_equal_torch(n: int, pitch: int, offset: int) -> None:
    """Outs whose rows have a pitch (another layout than the plan's: copied into) or sit
    behind an offset (the plan's layout: written straight), over many sizes, equal torch;
    memory outside each out stays as it was."""
    fn = stridec.compile(nhwc_graph(), backend="cpu")
    x = torch.randn(n, 4, 3, 5)
    flat = torch.full((offset + n * 60 + 8,), -1.0)
    first = torch.as_strided(flat, (n, 3, 5, 4), (60, 20, 4, 1), offset)
    rows = torch.full((n, 2, 3, 5 + pitch), -2.0)
    got = fn(x, out=(first, rows[..., :5]))
    assert got[0] is first
    assert torch.equal(first, x.permute(0, 2, 3, 1))
    assert torch.equal(rows[..., :5], x[:, :2].flip(1))
    assert (rows[..., 5:] == -2).all()
    assert (flat[:offset] == -1).all() and (flat[offset + n * 60:] == -1).all()


def test_an_out_over_an_input_is_still_copied_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """An out that an input's memory meets is never a buffer of the plan: the kernels
    would write it while others still read the input. It gets the result computed from
    the input as it was, copied after."""
    g = stridec.Graph("swap_into")
    sq = g.input("x", ("N", "N"), "float32")
    g.output(sq.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    seen = _copies(monkeypatch)
    for n in (2, 3, 5, 7):
        t = torch.randn(n, n)
        want_t = t.t().clone()
        assert fn(t, out=t) is t and torch.equal(t, want_t)
        assert seen == [t]
        seen.clear()
        other = torch.empty(n, n)
        assert fn(t, out=other) is other and torch.equal(other, t.t())
        assert seen == []


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_repeated_out_calls_skip_the_checks_and_equal_torch(
    backend: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An `out=` call whose inputs and outs (sizes, strides, offsets, storages shared)
    repeat a good call's takes the class's call straight: no out check, no class lookup.
    New input values each time, straight outs, pitched outs copied into and an out over
    its own input all equal torch, as on the first call."""
    fn = stridec.compile(nhwc_graph(), backend=backend)
    g = stridec.Graph("swap_again")
    sq = g.input("x", ("N", "N"), "float32")
    g.output(sq.t().contiguous())
    swap = stridec.compile(g, backend=backend)
    checks: list[int] = []
    check_outs = ClassPlans.checked_outs
    monkeypatch.setattr(ClassPlans, "checked_outs",
                        lambda self, *a: checks.append(1) or check_outs(self, *a))
    for n in (3, 5, 3, 5):
        first = torch.full((n, 3, 5, 4), -1.0)
        rows = torch.full((n, 2, 3, 7), -2.0)
        for _ in range(3):
            x = torch.randn(n, 4, 3, 5)
            got = fn(x, out=(first, rows[..., :5]))
            assert got[0] is first and torch.equal(first, x.permute(0, 2, 3, 1))
            assert torch.equal(rows[..., :5], x[:, :2].flip(1)) and (rows[..., 5:] == -2).all()
        t = torch.randn(n, n)
        for _ in range(3):
            t.copy_(torch.randn(n, n))
            want_t = t.t().clone()
            assert swap(t, out=t) is t and torch.equal(t, want_t)
    # one full check per (inputs, outs) seen: the first call of each of n = 3 and n = 5
    # (the outs are new tensors each round, but their sizes, strides and storage bytes
    # repeat: one key per size), on each graph
    assert len(checks) == 4
    assert fn.stats.codegen_runs <= 2 and swap.stats.codegen_runs <= 2


def test_a_repeated_out_call_is_refused_as_a_fresh_one_when_an_input_changed() -> None:
    """The skipped checks are a function of the call's key; what the key does not hold is
    still checked: an input whose storage shrank since, or of another size, gets the
    message a graph that has planned nothing gives."""
    warm = stridec.compile(nhwc_graph(), backend="cpu")
    x = torch.randn(4, 4, 3, 5)
    outs = (torch.empty(4, 3, 5, 4), torch.empty(4, 2, 3, 5))
    warm(x, out=outs)
    warm(x, out=outs)
    bad = torch.randn(4, 4, 3, 5)
    bad.untyped_storage().resize_(16)
    fresh = stridec.compile(nhwc_graph(), backend="cpu")
    assert _outcome(warm, (bad,), outs) == _outcome(fresh, (bad,), outs)
    assert "argument 'x'" in _outcome(fresh, (bad,), outs)
    other = torch.randn(5, 4, 3, 5)
    assert _outcome(warm, (other,), outs) == _outcome(fresh, (other,), outs)
    assert "out[0]" in _outcome(fresh, (other,), outs)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", ["flatten", "reshape", "transposed"])
def test_a_reshape_that_views_for_some_values_is_planned_alone_there(
        backend: str, name: str) -> None:
    """`x[:, ::2].flatten()` of an (N, M) input views where M is even (its rows then
    continue each other, M = 2 * ceil(M / 2)) and copies where M is odd; the class plan,
    planned for every M, copies. A binding where torch views is planned alone: every call
    equals torch in values, strides, offset and the memory it shares, plain and `out=`.
    The transposed reshape never views: it is the class plan's copy throughout."""
    from torch_oracle import check_against_torch

    fun = {"flatten": lambda x: x[:, ::2].flatten(0),
           "reshape": lambda x: x[:, ::2].reshape(-1),
           "transposed": lambda x: x.t().reshape(-1)}[name]
    graph = stridec.trace(fun, torch.zeros(9, 7, dtype=torch.float16), dynamic={0: [0, 1]})
    fn = stridec.compile(graph, backend=backend)
    gen = torch.Generator().manual_seed(7)
    for sizes in [(16, 7), (2, 16), (7, 32), (1, 32), (2, 3), (2, 2), (3, 1), (16, 7), (2, 16)]:
        x = torch.randn(sizes, generator=gen).half()
        want = fun(x)
        check_against_torch(fn(x), want, (x,))
        out = torch.full_like(want, -1.0).contiguous()
        assert fn(x, out=out) is out
        assert torch.equal(out, want)
