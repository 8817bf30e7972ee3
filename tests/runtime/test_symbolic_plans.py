"""One plan per class: a graph over symbolic sizes is planned once per class of bindings
(each symbol 0, 1, a multiple of 16 or none, fitting int32 or not) — the passes on the
symbolic graph, kernels whose arguments and grids are expressions — and every call of
the class binds that plan (`Program.bind`). Values and strides are compared with the
reference backend (the torch oracle) on interpret, cpu and reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_oracle import check_against_torch

import stridec
from stridec.compiler.codegen.program import Program
from stridec.errors import CallError
from stridec.ir.symbols import symbol
from stridec.runtime.symbolic import binding_class

BACKENDS = ["interpret", "cpu", "reference"]


def layout_graph() -> stridec.Graph:
    """NCHW -> NHWC, a cat along channels, a pad and an NCHW4 pack (its padding mask), all
    over a batch N."""
    g = stridec.Graph("batch")
    x = g.input("x", ("N", 8, 6, 5), "float16")
    y = g.input("y", ("N", 3, 6, 5), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous(), stridec.cat([x, y], 1),
             stridec.pad(x, (1, 2)), y.pack("NCHW4"))
    return g


def check(fn: stridec.CompiledGraph, ref: stridec.CompiledGraph, *args: torch.Tensor) -> None:
    got, want = fn(*args), ref(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for o, w in zip(got, want, strict=True):
        assert o.shape == w.shape and o.stride() == w.stride()
        assert torch.equal(o, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sixteen_batch_sizes_cost_at_most_two_code_generations(backend: str) -> None:
    fn = stridec.compile(layout_graph(), backend=backend)
    ref = stridec.compile(layout_graph(), backend="reference")
    for n in range(2, 18):  # 16 is a class of its own (a multiple of 16)
        check(fn, ref, torch.randn(n, 8, 6, 5).half(), torch.randn(n, 3, 6, 5).half())
    assert fn.stats.codegen_runs <= 2
    if backend != "reference":
        # The passes take no binding: they run once, each class lowers their result.
        assert fn.stats.codegen_runs == 2 and fn.stats.pipeline_runs == 1
        assert fn.stats.cache_hits >= 14


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_one_plan_serves_the_class_and_binds_per_call(backend: str) -> None:
    fn = stridec.compile(layout_graph(), backend=backend)
    plans = [fn.plan_for(torch.zeros(n, 8, 6, 5).half(), torch.zeros(n, 3, 6, 5).half())
             for n in (2, 5, 9)]
    assert plans[0].program is plans[1].program is plans[2].program
    program = plans[0].program
    assert program.symbols == ("N",)
    assert Program.from_json(program.to_json()).to_json() == program.to_json()
    bound = program.bind({"N": 5})
    assert not bound.symbols and all(isinstance(b.elements, int) for b in bound.buffers)


def test_calls_whose_sizes_do_not_fit_name_the_argument_and_dim() -> None:
    fn = stridec.compile(layout_graph(), backend="interpret")
    with pytest.raises(CallError, match=r"argument 'x': dim 1 has the static size 8; got 7"):
        fn(torch.zeros(2, 7, 6, 5).half(), torch.zeros(2, 3, 6, 5).half())
    with pytest.raises(CallError, match=r"argument 'y': dim 0 is N, which argument 'x' dim 0 "
                                        r"binds to 3; got 5"):
        fn(torch.zeros(3, 8, 6, 5).half(), torch.zeros(5, 3, 6, 5).half())
    with pytest.raises(CallError, match=r"expected dtype float16"):
        fn(torch.zeros(3, 8, 6, 5), torch.zeros(3, 3, 6, 5).half())


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_an_input_in_another_layout_is_planned_for_its_sizes(backend: str) -> None:
    """A channels-last argument is not the declared (contiguous) layout at any N: that
    call is compiled for its own sizes and strides, and still equals the reference."""
    fn = stridec.compile(layout_graph(), backend=backend)
    ref = stridec.compile(layout_graph(), backend="reference")
    x = torch.randn(3, 6, 5, 8).half().permute(0, 3, 1, 2)
    check(fn, ref, x, torch.randn(3, 3, 6, 5).half())


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 40), m=st.integers(1, 40), backend=st.sampled_from(["interpret", "cpu"]))
def test_a_cat_along_symbolic_dims_equals_torch(n: int, m: int, backend: str) -> None:
    """cat([x (N, 4, 6), y (M, 4, 6)], 0), then a transpose made contiguous: sizes N + M."""
    g = stridec.Graph("cat")
    x = g.input("x", ("N", 4, 6), "float32")
    y = g.input("y", ("M", 4, 6), "float32")
    z = stridec.cat([x, y], 0)
    g.output(z, z.transpose(0, 2).contiguous())
    fn = stridec.compile(g, backend=backend)
    a, b = torch.randn(n, 4, 6), torch.randn(m, 4, 6)
    z = torch.cat([a, b], 0)
    got = fn(a, b)
    assert torch.equal(got[0], z) and torch.equal(got[1], z.transpose(0, 2).contiguous())


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 20), min_size=3, max_size=3),
       backend=st.sampled_from(["interpret", "cpu"]))
def test_packs_with_symbolic_batches_over_many_sizes_equal_the_reference(
    sizes: list[int], backend: str
) -> None:
    """Several calls of one compiled graph: NCHW4 and CHWN4 packs of a C = 3 tensor (the
    padding masks' extent grows with N) and their unpack; at most one plan per class."""
    g = stridec.Graph("packs")
    x = g.input("x", ("N", 3, 4, 5), "int8")
    g.output(x.pack("NCHW4"), x.pack("CHWN4"), x.pack("NCHW4").unpack("NCHW4", 3))
    fn = stridec.compile(g, backend=backend)
    ref = stridec.compile(g, backend="reference")
    for n in sizes:
        check(fn, ref, torch.randint(-9, 9, (n, 3, 4, 5), dtype=torch.int8))
    assert fn.stats.codegen_runs <= len({binding_class({"N": n}) for n in sizes})


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_a_new_size_in_a_class_loads_no_kernel(backend: str, monkeypatch) -> None:
    """The class's kernels are loaded once (`SymbolicRunner`); a new size only evaluates
    its numbers: no kernel is loaded, built or planned again."""
    from stridec.runtime.backends import backend as kernel_backend

    loads = []
    kernels = kernel_backend(backend)
    load = kernels.load
    monkeypatch.setattr(kernels, "load", lambda program: loads.append(program) or load(program))
    fn = stridec.compile(layout_graph(), backend=backend)
    ref = stridec.compile(layout_graph(), backend="reference")
    for n in (2, 3, 5, 7, 9, 2, 3):
        check(fn, ref, torch.randn(n, 8, 6, 5).half(), torch.randn(n, 3, 6, 5).half())
    assert len(loads) == 1 and loads[0].symbols == ("N",)
    assert fn.stats.codegen_runs == 1


def test_a_symbolic_c_kernel_needs_its_parameters() -> None:
    from stridec.runtime.backends import cpu

    fn = stridec.compile(layout_graph(), backend="cpu")
    x, y = torch.randn(3, 8, 6, 5).half(), torch.randn(3, 3, 6, 5).half()
    program = fn.plan_for(x, y).program
    (launcher, *_) = cpu.BACKEND.load(program)
    with pytest.raises(CallError, match=r"its parameters are symbolic; expected params="):
        launcher((1,), torch.empty(1), torch.empty(1))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 10**6), m=st.integers(0, 10**6))
def test_compiled_templates_equal_evaluate(n: int, m: int) -> None:
    """`compile_template` (what a call evaluates at a new size) against `evaluate`."""
    from stridec.ir.symbols import compile_template, evaluate, symbol

    N, M = symbol("N"), symbol("M")
    template = ((N, 4, N * M - 3), [(N + 1) // 2, 7 * M**2], None, (), N - (M + 5) // 3)
    want = evaluate(template, {"N": n, "M": m})
    got = compile_template(template, ["M", "N"])(m, n)
    assert got == want


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 40), m=st.integers(1, 40))
def test_symbolic_cats_batch_into_one_launch_as_static_ones_do(n: int, m: int) -> None:
    """The copies of a cat write disjoint boxes of one buffer for every N and M (proven
    on the symbolic layouts): on the `cpu` backend they are one launch, as in the plan of
    the same sizes compiled statically, and the values are torch's."""
    g = stridec.Graph("cats")
    x = g.input("x", ("N", 4, 6), "float32")
    y = g.input("y", ("M", 4, 6), "float32")
    w = g.input("w", ("N", 3, 6), "float32")
    z = stridec.cat([x, y], 0)
    g.output(z.transpose(0, 2).contiguous(), z, stridec.cat([x, w, x], 1))
    fn = stridec.compile(g, backend="cpu")
    a, b, c = torch.randn(n, 4, 6), torch.randn(m, 4, 6), torch.randn(n, 3, 6)
    got = fn(a, b, c)
    want = (torch.cat([a, b]).transpose(0, 2).contiguous(), torch.cat([a, b]),
            torch.cat([a, c, a], 1))
    for o, w_ in zip(got, want, strict=True):
        assert o.stride() == w_.stride() and torch.equal(o, w_)
    plan = fn.plan_for(a, b, c)
    assert plan.program.symbols == ("M", "N")
    static = stridec.compile(g.bind({"N": n, "M": m}), backend="cpu").plan_for(a, b, c)
    assert plan.launches == static.launches == 3


def _bad_calls(n: int, m: int) -> list[tuple[torch.Tensor, ...]]:
    """Calls of `compound_graph` that some check refuses, one check each."""
    x = torch.randn(n, 2 * m + 1, dtype=torch.float16)
    y = torch.randn(m, 3, dtype=torch.float16)
    shrunk = torch.randn(n, 2 * m + 1, dtype=torch.float16)
    shrunk.untyped_storage().resize_(2)
    bad = [
        (x,),  # the count
        (x.float(), y),  # dtype
        (x, torch.randn(3, m, dtype=torch.float16).t()),  # another layout: planned per binding
        (x[:, :-1], y),  # compound size 2*M + 1
        (x, torch.randn(m, 4, dtype=torch.float16)),  # static dim
        (x.unsqueeze(0), y),  # rank
        (torch.randn(n, 2 * m + 3, dtype=torch.float16), y),  # M bound inconsistently
        (x, y._neg_view()),  # a pending negation
        (x, torch.randn(m, 6, dtype=torch.float16)[:, :3]),  # strides not declared
    ]
    return bad + [(shrunk, y)] if n else bad  # a storage smaller than the layout


def compound_graph() -> stridec.Graph:
    g = stridec.Graph("compound")
    x = g.input("x", ("N", 2 * symbol("M") + 1), "float16")
    y = g.input("y", ("M", 3), "float16")
    g.output(x.t().contiguous(), y.t().contiguous())
    return g


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 20), st.integers(1, 20))
def test_the_fast_binder_agrees_with_the_full_checks(n: int, m: int) -> None:
    """`fast_binder` answers a good call with `bind_call`'s bindings and the tensors'
    device, and every call a check refuses with None (the full path then decides)."""
    from stridec.runtime.compile import check_arguments
    from stridec.runtime.symbolic import bind_call, binding_class, fast_binder

    fn = stridec.compile(compound_graph(), backend="cpu")
    fast = fast_binder(fn._inputs, fn.symbols)
    x = torch.randn(n, 2 * m + 1, dtype=torch.float16)
    y = torch.randn(m, 3, dtype=torch.float16)
    want = bind_call(fn._symbolic.declared_sizes, [x.shape, y.shape])
    values = tuple(want[s] for s in fn.symbols)
    assert fast((x, y)) == (x.device, want, binding_class(want), values)
    assert list(want.items()) == list(fast((x, y))[1].items())  # the same order
    for bad in _bad_calls(n, m):
        assert fast(bad) is None
        try:
            check_arguments("compound", fn._inputs, bad, sizes=False)
            bind_call(fn._symbolic.declared_sizes, [t.shape for t in bad])
        except CallError:
            continue
        assert not fn._symbolic.declared_layouts(bad, [bind_call(
            fn._symbolic.declared_sizes, [t.shape for t in bad])[s] for s in fn.symbols])


def test_compound_sizes_call_like_the_reference() -> None:
    fn = stridec.compile(compound_graph(), backend="cpu")
    ref = stridec.compile(compound_graph(), backend="reference")
    for n, m in [(2, 3), (5, 2), (3, 4), (7, 16)]:
        check(fn, ref, torch.randn(n, 2 * m + 1).half(), torch.randn(m, 3).half())


# Functions whose result is the input itself (or a view of it) exactly where a symbol is 0
# or 1, as torch decides: a transposed (N, 3) is contiguous at N = 1, viewable as one row.
_DEGENERATE = {
    "t_contiguous": lambda y: y.t().contiguous(),
    "t_reshape": lambda y: y.t().reshape(-1),
    "permute_contiguous": lambda y: y.permute(1, 0, 2).contiguous(),
}


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", sorted(_DEGENERATE))
def test_symbols_at_zero_and_one_alias_where_torch_does(name: str, backend: str) -> None:
    """The classes of a symbol at 0 or 1 are planned with it set: the result is the input
    (values, strides, offset and storage) exactly where torch's is, not a copy the generic
    class would make."""
    f = _DEGENERATE[name]
    rank3 = name.startswith("permute")
    example = torch.randn(4, 3, 2) if rank3 else torch.randn(4, 3)
    fn = stridec.compile(stridec.trace(f, example, dynamic={0: [0]}), backend=backend)
    for n in (1, 0, 2, 5, 1, 16):
        x = torch.randn((n, 3, 2) if rank3 else (n, 3))
        check_against_torch(fn(x), f(x), (x,))


# The same where a size computed from a symbol is 0 or 1 while the symbol is not: every
# other row at N = 2 or 3, the rows after the first at N = 2, a quarter of them at N = 4..7.
_DERIVED = {
    "even_rows_contiguous": lambda y: y[::2].contiguous(),
    "odd_rows_t_contiguous": lambda y: y[1::2].t().contiguous(),
    "tail_t_reshape": lambda y: y[1:].t().reshape(-1),
    "quarter_permute_contiguous": lambda y: y[::4].permute(1, 0, 2).contiguous(),
}


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", sorted(_DERIVED))
def test_sizes_of_a_symbol_at_zero_and_one_alias_where_torch_does(
    name: str, backend: str,
) -> None:
    """A binding that makes a size computed from the symbols 0 or 1 (`N // 2` at N = 2)
    is planned for its own sizes: the result is the input, or a copy, with torch's
    strides exactly where torch's is; the other sizes of the class keep sharing its
    plan."""
    f = _DERIVED[name]
    rank3 = name.startswith("quarter")
    example = torch.randn(9, 3, 2) if rank3 else torch.randn(9, 3)
    fn = stridec.compile(stridec.trace(f, example, dynamic={0: [0]}), backend=backend)
    for n in (2, 3, 1, 4, 5, 7, 9, 2, 11, 13, 3, 17):
        x = torch.randn((n, 3, 2) if rank3 else (n, 3))
        check_against_torch(fn(x), f(x), (x,))
    # the class of 9, 11, 13, 17 (and 4..7 where no size of it is 1): planned once
    assert fn.stats.codegen_runs <= 8


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_out_calls_bind_the_class_plan_and_fill_the_callers_tensors(backend: str) -> None:
    """`out=` over 9 batch sizes: the class plan (at most 2 code generations), each
    result written into the caller's tensor (pitched, one transposed), whose padding
    keeps its bytes; the values and strides are torch's."""
    fn = stridec.compile(layout_graph(), backend=backend)
    ref = stridec.compile(layout_graph(), backend="reference")
    for n in (2, 3, 5, 7, 9, 11, 13, 17, 32):
        x, y = torch.randn(n, 8, 6, 5).half(), torch.randn(n, 3, 6, 5).half()
        want = ref(x, y)
        pitched = torch.full((n, 6, 5, 10), -1.0).half()     # rows of pitch 10, width 8
        outs = (pitched[..., :8],
                torch.empty(11, 6, 5, n).half().permute(3, 0, 1, 2),  # N inmost
                torch.empty(*want[2].shape).half().mT.contiguous().mT,
                torch.empty(*want[3].shape).half())
        before = [(o.stride(), o.storage_offset(), o.untyped_storage().data_ptr())
                  for o in outs]
        got = fn(x, y, out=outs)
        assert all(g is o for g, o in zip(got, outs, strict=True))
        for o, w, b in zip(outs, want, before, strict=True):
            assert (o.stride(), o.storage_offset(), o.untyped_storage().data_ptr()) == b
            assert o.shape == w.shape and torch.equal(o, w)
        assert torch.equal(pitched[..., 8:], torch.full((n, 6, 5, 2), -1.0).half())
    assert fn.stats.codegen_runs <= 2
    plan = fn.plan_for(x, y, out=outs)
    assert plan.program.symbols == ("N",)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_an_out_over_its_own_input_gets_the_values_of_the_inputs_before_the_call(
    backend: str,
) -> None:
    """An out sharing memory with an input (a transpose written over that input) is
    written after every result is computed, as a static call stages it."""
    g = stridec.Graph("swap")
    x = g.input("x", ("N", "N"), "float32")
    g.output(x.t(), x.flip(0))
    fn = stridec.compile(g, backend=backend)
    for n in (2, 3, 5, 7, 9, 12, 17, 20):
        x = torch.randn(n, n)
        want = (x.t().clone(), x.flip(0).clone())
        other = torch.empty(n, n)
        got = fn(x, out=(x, other))
        assert got[0] is x and got[1] is other
        assert torch.equal(x, want[0]) and torch.equal(other, want[1])
    assert fn.stats.codegen_runs <= 2


def test_out_errors_of_a_symbolic_graph_name_the_out() -> None:
    fn = stridec.compile(layout_graph(), backend="interpret")
    x, y = torch.zeros(3, 8, 6, 5).half(), torch.zeros(3, 3, 6, 5).half()
    want = stridec.compile(layout_graph(), backend="reference")(x, y)
    outs = [torch.empty(*w.shape).half() for w in want]
    with pytest.raises(CallError, match=r"out\[1\]: expected sizes \[3, 11, 6, 5\]; "
                                        r"got \[4, 11, 6, 5\]"):
        fn(x, y, out=(outs[0], torch.empty(4, 11, 6, 5).half(), *outs[2:]))
    with pytest.raises(CallError, match=r"out\[0\]: expected dtype float16"):
        fn(x, y, out=(torch.empty(*want[0].shape), *outs[1:]))
    with pytest.raises(CallError, match=r"out\[3\]: shares memory with out\[2\]"):
        fn(x, y, out=(*outs[:3], outs[2].flatten()[: want[3].numel()].view(want[3].shape)))
    with pytest.raises(CallError, match=r"argument 'y': dim 0 is N"):
        fn(x, y[:2], out=outs)
    with pytest.raises(CallError, match=r"'out' must give one tensor per output"):
        fn(x, y, out=outs[:3])


def test_program_fits_agrees_with_its_limits() -> None:
    """`Program.fits` (one generated expression) answers as the kernels' int32 limits
    evaluated one by one do, on both sides of the int32 range."""
    from stridec.compiler.codegen.program import INT32_MAX
    from stridec.ir.symbols import evaluate

    g = stridec.Graph("fits")
    x = g.input("x", ("N", 8, 6, 5), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    fn = stridec.compile(g, backend="interpret")  # (the C kernels index in int64)
    fn(torch.randn(3, 8, 6, 5).half())
    programs = [p for p in fn._symbolic.classes.values() if p is not None]
    limits = [lim for p in programs for k in p.kernels for lim in k.limits]
    assert programs and limits
    for n in (2, 3, 1000, 2**20, 2**22, 2**23, 2**24, 2**25, 2**31):
        want = all(sum(abs(evaluate(t, {"N": n})) for t in lim) <= INT32_MAX
                   for lim in limits)
        assert programs[0].fits({"N": n}) == want, n
    assert not programs[0].fits({"N": 2**31})


# Slices that start past the end of a short batch: torch clamps them to empty.
_PAST_THE_END = {
    "tail": lambda y: y[1:],
    "tail_reshape": lambda y: y[1:].reshape(-1),
    "odd_rows_t_reshape": lambda y: y[1::2].t().reshape(-1),
}


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", sorted(_PAST_THE_END))
def test_a_slice_past_the_end_of_the_batch_is_empty_as_torchs(name: str, backend: str) -> None:
    """`x[1:]` of a batch of 0 rows is empty in torch, and a `reshape(-1)` of it too: the
    class N = 0 plans the graph bound at 0 (the reshape's size, resolved over N for N >= 1,
    taken as torch's -1 again), and an `out=` call checks its outs against that plan's
    sizes."""
    f = _PAST_THE_END[name]
    fn = stridec.compile(stridec.trace(f, torch.randn(9, 3), dynamic={0: [0]}),
                         backend=backend)
    for n in (0, 1, 2, 5, 0):
        x = torch.randn(n, 3)
        want = f(x)
        check_against_torch(fn(x), want, (x,))
        out = torch.full(want.shape, 7.0)
        assert fn(x, out=out) is out and torch.equal(out, want)
