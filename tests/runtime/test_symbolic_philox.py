"""Philox over symbolic sizes: one plan per class of bindings, as for copies.

A `philox` / `philox_uniform` of sizes `("N", ...)` is planned once per class (each
symbol 0, 1, a multiple of 16 or none, indices within int32 or not): the generator's
iteration space, strides, offsets, element count and state advance ⌈numel/4⌉ are
expressions evaluated per call. Every output -- the values packed, permuted, sliced,
cast, and the new states -- is compared bit for bit with the reference backend (numpy
Philox, the oracle) and with the static plan of the same sizes, on the `cpu` (C) and
`interpret` (Triton) backends; the code generations are counted on `fn.stats`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import stridec
from stridec.compiler.codegen.c.philox import generate_c_philox
from stridec.compiler.codegen.lower import lower_to_program
from stridec.compiler.codegen.philox import PhiloxSpec, generate_philox
from stridec.compiler.pass_manager import PassManager
from stridec.errors import CallError
from stridec.ir.dtypes import as_dtype
from stridec.ir.symbols import symbol
from stridec.runtime.backends.interpret import interpreter_fma_is_exact
from stridec.runtime.backends.reference_philox import make_state, state_words
from stridec.runtime.launch import launch_philox
from stridec.runtime.symbolic import binding_class

BACKENDS = ["cpu", "interpret"]
DTYPES = ["bits", "float32", "float16", "bfloat16"]
STATES = ["own", "row", "last_row"]
KAT_FILE = Path(__file__).parent.parent / "data" / "random123_kat_philox4x32_10.txt"
MASK128 = (1 << 128) - 1
# Counters whose sums carry out of word 0, 1, 2 or wrap past 2^128 inside one call.
COUNTERS = [0, 2**32 - 3, 2**64 - 5, 2**96 - 2, 2**128 - 7]


def philox_graph(dtype: str, state: str) -> stridec.Graph:
    """Two chained generators over a batch N (bound by the input `x`), their values packed
    (NCHW4 and CHWN4: C = 3, the padding masks' extent grows with N), permuted, sliced
    and cast; the state its own input, a row of a (3, 6) tensor, or the last row of a
    (K, 6) one (its words at 6·(K - 1) …)."""
    g = stridec.Graph(f"philox_{dtype}_{state}")
    if state == "own":
        s = g.input("state", (6,), "uint32")
    elif state == "row":
        s = g.input("states", (3, 6), "int32")[1]
    else:
        s = g.input("states", ("K", 6), "uint32")[-1]
    x = g.input("x", ("N", 3, 4, 5), "float16")
    if dtype == "bits":
        v, s1 = g.philox(s, ("N", 3, 4, 5))
    else:
        v, s1 = g.philox_uniform(s, ("N", 3, 4, 5), dtype, -2.0, 3.0)
    w, s2 = g.philox_uniform(s1, ("N", 7), "float16", 0.5, 1.5)  # 7·N: N odd ends mid-block
    g.output(
        v.pack("NCHW4"), v.pack("CHWN4"), v.permute(0, 2, 3, 1).contiguous(),
        v[:, 1:, ::2].contiguous(), s1,
        w.t().contiguous(), w[::2].to("float32"), w[1:].contiguous(), s2,
        x.permute(0, 2, 3, 1).contiguous(),
    )
    return g


def skip_inexact_fma(backend: str, dtype: str) -> None:
    if backend == "interpret" and dtype != "bits" and not interpreter_fma_is_exact():
        pytest.skip("this Triton's interpreter rounds tl.fma twice (Triton < 3.9)")


def state_tensor(state: str, counter: int, key: int, k: int) -> torch.Tensor:
    """The state argument: 6 words, or k rows of 6 (the row read: 1, or the last)."""
    rows = [make_state((counter + 977 * j) & MASK128, key ^ j).astype("uint32")
            for j in range(1 if state == "own" else k)]
    # The row read holds `counter`: row 1, or the last.
    rows = rows[1:2] + rows[:1] + rows[2:] if state == "row" else rows[::-1]
    words = torch.from_numpy(np.stack(rows).reshape(len(rows), 6).copy())
    if state == "own":
        return words.reshape(6)
    return words.view(torch.int32) if state == "row" else words


def as_bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])


def assert_same(got: tuple, want: tuple, what: str) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, k, a.shape, b.shape)
        # A class plan's layouts are torch's except for the strides of size-1 dims,
        # which address nothing (docs/symbolic.md, "Views").
        assert all(x == y for x, y, size in zip(a.stride(), b.stride(), a.shape, strict=True)
                   if size > 1), (what, k, a.stride(), b.stride())
        assert torch.equal(as_bits(a), as_bits(b)), (what, k)


# One compiled graph per (backend, dtype, state): hypothesis calls it at many sizes.
_COMPILED: dict[tuple[str, str, str], tuple[stridec.Graph, stridec.CompiledGraph, set]] = {}


def compiled(backend: str, dtype: str, state: str):
    key = (backend, dtype, state)
    if key not in _COMPILED:
        g = philox_graph(dtype, state)
        _COMPILED[key] = (g, stridec.compile(g, backend=backend), set())
    return _COMPILED[key]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 40),
    counter=st.one_of(st.sampled_from(COUNTERS), st.integers(0, MASK128)),
    key=st.integers(0, 2**64 - 1),
    k=st.integers(2, 5),
    backend=st.sampled_from(BACKENDS),
    dtype=st.sampled_from(DTYPES),
    state=st.sampled_from(STATES),
)
@example(n=0, counter=2**32 - 3, key=1, k=2, backend="cpu", dtype="bits", state="own")
@example(n=1, counter=2**32 - 3, key=1, k=2, backend="interpret", dtype="bits", state="own")
@example(n=7, counter=2**64 - 5, key=9, k=3, backend="cpu", dtype="float16", state="last_row")
@example(n=16, counter=2**128 - 7, key=3, k=4, backend="interpret", dtype="bfloat16",
         state="row")
def test_class_plan_equals_reference_and_static_plan(
    n: int, counter: int, key: int, k: int, backend: str, dtype: str, state: str
) -> None:
    skip_inexact_fma(backend, "float16")
    g, fn, classes = compiled(backend, dtype, state)
    if state != "last_row":
        k = 3
    args = (state_tensor(state, counter, key, k), torch.randn(n, 3, 4, 5).half())
    bindings = {"N": n, "K": k} if state == "last_row" else {"N": n}
    got = fn(*args)
    assert_same(got, stridec.run_reference(g.bind(bindings), *args), "reference")
    static = stridec.compile(g.bind(bindings), backend=backend)
    assert_same(got, static(*args), "static plan")
    # The states: counter + ⌈60·N/4⌉, then + ⌈7·N/4⌉ more, mod 2^128; the key kept.
    s1, s2 = got[4], got[8]
    first = (counter + -(-60 * n // 4)) & MASK128
    assert state_words(s1.view(torch.uint32)) == (first, state_words(
        args[0].reshape(-1, 6)[1 if state == "row" else -1].view(torch.uint32))[1])
    assert state_words(s2.view(torch.uint32))[0] == (first + -(-7 * n // 4)) & MASK128
    # One plan per class, never per size -- but at N = 2, where the rows `[::2]` are one
    # row (a size computed from N at 1), the binding is planned for its own sizes.
    classes.add(("alone", tuple(a.shape for a in args)) if n == 2 else binding_class(bindings))
    assert fn.stats.codegen_runs <= len(classes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_sixteen_batch_sizes_cost_at_most_two_code_generations(backend: str, dtype: str) -> None:
    skip_inexact_fma(backend, dtype)
    g = philox_graph(dtype, "own")
    fn = stridec.compile(g, backend=backend)
    # 16 is a class of its own (a multiple of 16); N = 2 would be planned alone (the rows
    # [::2] are one row there), so the 16 sizes start at 3
    for n in range(3, 19):
        args = (state_tensor("own", 2**32 - 5 * n, 0x1234, 1), torch.randn(n, 3, 4, 5).half())
        assert_same(fn(*args), stridec.run_reference(g.bind({"N": n}), *args), "reference")
    assert fn.stats.codegen_runs == 2 and fn.stats.pipeline_runs == 1
    assert fn.stats.cache_hits >= 14


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_plan_generators_read_random123_vectors(backend: str) -> None:
    """Bits of sizes (N, 4) from each known-answer counter and key: row 0 is Random123's
    block of that counter; the class plan (N >= 2) serves every line."""
    g = stridec.Graph("kat_rows")
    s = g.input("state", (6,), "uint32")
    x = g.input("x", ("N",), "float32")
    bits, new_state = g.philox(s, ("N", 4))
    g.output(bits, new_state, x.flip(0))
    fn = stridec.compile(g, backend=backend)
    lines = [line.split()[2:] for line in KAT_FILE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(lines) >= 3
    for n, words in enumerate(lines, start=2):
        v = [int(w, 16) for w in words]
        counter = v[0] | v[1] << 32 | v[2] << 64 | v[3] << 96
        state = torch.from_numpy(make_state(counter, (v[4], v[5])).astype("uint32"))
        got, new, _ = fn(state.reshape(6), torch.zeros(n))
        assert got[0].view(torch.int32).numpy().view(np.uint32).tolist() == v[6:10]
        assert state_words(new) == ((counter + n) & MASK128, (v[4], v[5]))
    assert fn.stats.codegen_runs <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_and_a_state_advanced_in_place_bind_the_class_plan(backend: str) -> None:
    """`out=` with the class plan: the values written into the caller's tensors, and the
    state as its own out (advanced in place), equal the reference at every size."""
    g = stridec.Graph("noise_into")
    s = g.input("state", (6,), "uint32")
    g.input("x", ("N", 5), "float32")  # binds N
    values, new_state = g.philox_uniform(s, ("N", 5), "bfloat16", -1.0, 1.0)
    g.output(values.t().contiguous(), new_state)
    fn = stridec.compile(g, backend=backend)
    for n in (2, 3, 7, 9, 13):
        state = state_tensor("own", 2**32 - 2, 3, 1)
        want = stridec.run_reference(g.bind({"N": n}), state, torch.zeros(n, 5))
        values_out = torch.empty(5, n, dtype=torch.bfloat16)
        fn(state, torch.zeros(n, 5), out=(values_out, state))
        assert_same((values_out, state), want, "out")
    assert fn.stats.codegen_runs == 1


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_generators_cat_along_symbolic_dims(backend: str, fused: bool) -> None:
    """Two chained generators of N and M rows, cat with inputs along dim 0 (sizes
    2·N + 2·M) and their transposes along dim 1 (N + M): a generator written straight
    into its slice of the cat's buffer where it has one reader (`fused`), else copied
    there; every output and the final state as the reference's, one plan per class."""
    g = stridec.Graph("noise_cat")
    s = g.input("state", (6,), "uint32")
    x, y = g.input("x", ("N", 4), "float32"), g.input("y", ("M", 4), "float32")
    a, s1 = g.philox_uniform(s, ("N", 4), "float32", -1.0, 1.0)
    b, s2 = g.philox(s1, ("M", 4))
    if fused:
        g.output(stridec.cat([a, x], 0), stridec.cat([y, b.to("float32")], 0), s2)
    else:
        g.output(stridec.cat([a, x, b.to("float32"), y], 0),
                 stridec.cat([a.t(), b.t().to("float32")], 1).contiguous(), s2)
    fn = stridec.compile(g, backend=backend)
    sizes = [(2, 3), (5, 7), (9, 2), (3, 3), (17, 5), (13, 11)]
    for n, m in sizes:
        args = (state_tensor("own", 2**32 - 1 - n, 3, 1), torch.randn(n, 4), torch.randn(m, 4))
        got = fn(*args)
        bound = g.bind({"N": n, "M": m})
        assert_same(got, stridec.run_reference(bound, *args), "reference")
        assert_same(got, stridec.compile(bound, backend=backend)(*args), "static plan")
    assert fn.stats.codegen_runs == 1  # every size above: the class ("n", "n")
    # Fused: the first generator's values are the cat's (2·N, 4) buffer, rows 0 … N-1.
    line = next(t for t in fn.plan_for(*args).ir.splitlines() if "philox_uniform" in t)
    assert ("tensor<(2*N)x4xf32>, tensor<6xui32>" in line) == fused


@pytest.mark.parametrize("target", ["cpu", "cuda", "c"])
def test_index_width_is_a_class_bit(target: str) -> None:
    """Kernels planned at a binding within int32 index in int32 and say for which
    bindings that holds (`Program.fits`); a binding past it is another class, planned
    with int64 indices. The C kernels index in int64 always."""
    graph = philox_graph("float16", "own")
    PassManager.parse(verify_each=True).run(graph)
    small = lower_to_program(graph, target, hint={"N": 5})
    wide = lower_to_program(graph, target, hint={"N": 2**26 + 3})
    philox_kernels = [k for k in small.kernels if k.kind == "philox"]
    assert len(philox_kernels) == 2 and small.symbols == ("N",)
    assert small.fits({"N": 40}) and small.fits({"N": 1000})
    if target == "c":
        assert all(k.lang == "c" for k in small.kernels) and wide.fits({"N": 2**26 + 3})
        return
    assert {k.index_bits for k in philox_kernels} == {32}
    assert not small.fits({"N": 2**26 + 3})
    # At N = 2^26 + 3 the 60·N values pass 2^31, the 7·N ones do not.
    assert sorted(k.index_bits for k in wide.kernels if k.kind == "philox") == [32, 64]
    assert wide.fits({"N": 2**26 + 3})


@pytest.mark.parametrize("target", ["cpu", "c"])
def test_a_symbolic_generator_alone_is_refused_naming_its_sizes(target: str) -> None:
    """A generator kernel over symbolic sizes runs in its program, which binds them; run
    alone it is a `CallError`, never a launch with unbound sizes."""
    n = symbol("N")
    spec = PhiloxSpec((n, 4), (4, 1), 0, (4, 1), 0, 4 * n, as_dtype("uint32"))
    kernel = (generate_c_philox(spec, hint={"N": 5}) if target == "c"
              else generate_philox(spec, target, hint={"N": 5}))
    assert kernel.strategy == "linear" and kernel.numel == 4 * n
    words = torch.zeros(6, dtype=torch.int32)
    with pytest.raises(CallError, match="its sizes are symbolic"):
        launch_philox(kernel, words, torch.zeros(20, dtype=torch.int32),
                      torch.zeros(6, dtype=torch.int32))


def _half_batch() -> object:
    return (symbol("N") + 1) // 2


@pytest.mark.parametrize("n", [2, 3, 32, 2**27 + 1])
@pytest.mark.parametrize("case", ["linear", "gather-masked", "gather-half"])
def test_class_kernels_compile_for_cuda_at_every_binding(case: str, n: int) -> None:
    """The class's Triton source compiles for sm_90 (no device needed) with the argument
    types a launch at each binding gives: an argument of 1 (the half batch at N = 2, the
    increment of one block) is passed by Triton's JIT as a constexpr, a plain int."""
    compiler = pytest.importorskip("triton.compiler")
    from triton.backends.compiler import GPUTarget

    from stridec.ir.affine import MaskBound
    from stridec.ir.symbols import evaluate
    from stridec.runtime.backends.triton import load_jit, signature

    h = _half_batch()
    spec = {
        "linear": PhiloxSpec((h,), (1,), 0, (1,), 0, h, as_dtype("uint32")),
        "gather-masked": PhiloxSpec(
            (symbol("N"), 1, 4, 2, 3), (18, 24, 6, 3, 1), 0, (24, 24, 1, 12, 4), 0,
            18 * symbol("N"), as_dtype("bfloat16"), "uniform", -1.0, 3.0,
            (MaskBound((0, 4, 1, 0, 0), 0, 3),), float("nan")),
        "gather-half": PhiloxSpec((3, h), (2 * h, 1), 0, (h, 1), 0, 6 * h,
                                  as_dtype("float16"), "uniform"),
    }[case]
    hint = {"N": 5 if n < 2**27 else n}
    kernel = generate_philox(spec, "cuda", hint=hint)
    jit = load_jit(kernel.source, kernel.name)
    dst = {"uint32": "*i32", "float16": "*fp16", "bfloat16": "*bf16"}[spec.dst_dtype.name]
    args = evaluate(kernel.args, {"N": n})
    types = signature(jit, ["*i32", dst, "*i32"], args, dict(kernel.constexprs))
    constexprs = dict(kernel.constexprs)
    for name, value in zip(kernel.params, args, strict=True):
        if value == 1:  # as Triton's JIT specializes it
            types[name], constexprs[name] = "constexpr", 1
    source = compiler.ASTSource(jit, types, constexprs=constexprs)
    ptx = compiler.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "mul.hi.u32" in ptx
    assert kernel.index_bits == (64 if hint["N"] > 2**26 and case == "gather-masked" else 32)
