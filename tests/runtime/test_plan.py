"""What a compiled graph runs, read through `plan_for` (never through timing): how many
kernels, of which kind and strategy, with which index width, and that the generated
source is deterministic.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec
from stridec.compiler.codegen import copy as copy_codegen
from stridec.compiler.codegen import philox as philox_codegen
from stridec.compiler.codegen.lower import lower_to_program
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
from stridec.compiler.specialize import specialize
from stridec.ir.layout import Layout
from stridec.runtime.cache import MEMORY_CACHE

# (backend, device) pairs; the plan tests that read Triton source use "interpret".
BACKENDS = [
    pytest.param(("interpret", "cpu"), id="interpret"),
    pytest.param(("cpu", "cpu"), id="cpu"),
    pytest.param(("triton", "cuda"), id="cuda", marks=pytest.mark.gpu),
]
INT32_MAX = 2**31 - 1


@pytest.fixture
def fresh_caches(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An empty plan cache in memory and on disk, so that code generation really runs."""
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    yield tmp_path
    MEMORY_CACHE.clear_memory()


def graph_of(name: str, inputs: list[tuple[str, tuple[int, ...], str]],
             build: Callable[..., Any]) -> stridec.Graph:
    g = stridec.Graph(name)
    values = [g.input(n, s, d) for n, s, d in inputs]
    out = build(g, *values)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g


def plan(graph: stridec.Graph, *tensors: torch.Tensor) -> stridec.Plan:
    """The plan of the Triton kernels (the interpreter's on CPU tensors)."""
    backend = "triton" if tensors and tensors[0].is_cuda else "interpret"
    return stridec.compile(graph, backend=backend).plan_for(*tensors)


def names_its_kernel(k: Any) -> bool:
    """A Triton kernel defines `k.name`; a C kernel's units, built, export every symbol it
    calls (Philox's variants are named by macros: the text alone does not say)."""
    if k.lang == "c":
        from stridec.compiler.codegen.c.copy import UNIT_SEPARATOR
        from stridec.runtime.backends import cpu

        libs = [cpu.load_unit(unit) for unit in k.source.split(UNIT_SEPARATOR)]
        return bool(k.calls) and all(any(hasattr(lib, c[0]) for lib in libs)
                                     for c in k.calls)
    return f"@triton.jit\ndef {k.name}(" in k.source


def kinds(p: stridec.Plan) -> list[tuple[str, str]]:
    return [(k.kind, k.strategy) for k in p.kernels]


# --------------------------------------------------------------------------- kernel counts

F32 = "float32"
COUNTS: list[tuple[str, list, Callable[..., Any], list[tuple[str, str]]]] = [
    # A view of an input is a stride rewrite: nothing runs.
    ("view_only", [("x", (4, 6), F32)], lambda g, x: x.t()[1:, ::2].unsqueeze(0), []),
    ("reshape_view", [("x", (4, 6), F32)], lambda g, x: x.reshape(2, 3, 4), []),
    ("contiguous_of_contiguous", [("x", (4, 6), F32)], lambda g, x: x.contiguous(), []),
    # Undone chains move nothing, but torch's result is new memory: one copy, never x.
    ("transpose_back", [("x", (4, 6), F32)], lambda g, x: x.t().contiguous().t().contiguous(),
     [("copy", "linear")]),
    ("flip_flip", [("x", (4, 6), F32)], lambda g, x: x.flip(1).flip(1), [("copy", "linear")]),
    # Materializations: one kernel per materialized output.
    ("nchw_to_nhwc", [("x", (2, 3, 8, 8), F32)], lambda g, x: x.pack("NHWC"),
     [("copy", "tiled_transpose")]),
    ("transpose_2d", [("x", (64, 48), F32)], lambda g, x: x.t().contiguous(),
     [("copy", "tiled_transpose")]),
    ("cast_same_layout", [("x", (4, 6), F32)], lambda g, x: x.to("float16"),
     [("copy", "linear")]),
    ("row_slice", [("x", (8, 6), F32)], lambda g, x: x[1:7:2].contiguous(),
     [("copy", "linear")]),
    ("flip_columns", [("x", (4, 6), F32)], lambda g, x: x.flip(1).contiguous(),
     [("copy", "gather")]),
    ("copy_then_cast", [("x", (4, 6), F32)], lambda g, x: x.t().contiguous().to("float16"),
     [("copy", "tiled_transpose")]),
    ("pack_unpack", [("x", (2, 5, 3, 4), "int8")],
     lambda g, x: x.pack("NCHW4").unpack("NCHW4", 5), [("copy", "linear")]),
    ("nchw4_padded", [("x", (2, 3, 4, 5), "int8")], lambda g, x: x.pack("NCHW4"),
     [("copy", "tiled_transpose")]),
    # One copy per input into disjoint rows of one buffer: one batched kernel, as torch.
    ("cat_three", [("a", (2, 3), F32), ("b", (1, 3), F32), ("c", (4, 3), F32)],
     lambda g, a, b, c: stridec.cat([a, b, c]), [("copy", "batch(linear,linear,linear)")]),
    ("full", [], lambda g: g.full((3, 4), 1.5), [("copy", "linear")]),
    ("size0", [("x", (0, 6), F32)], lambda g, x: x.t().contiguous(), []),
    ("size0_full", [], lambda g: g.full((0, 4), 1.0), []),
    ("philox", [("s", (6,), "int32")], lambda g, s: g.philox(s, (4, 5)),
     [("philox", "linear")]),
    ("philox_packed", [("s", (6,), "int32")],
     lambda g, s: g.philox(s, (2, 3, 4, 4))[0].pack("NCHW4"), [("philox", "gather")]),
    ("shared_copy", [("x", (4, 6), F32)],
     lambda g, x: (lambda y: (y, y.t(), y[1]))(x.t().contiguous()), [("copy", "tiled_transpose")]),
    # Two equal copies, both returned: torch gives independent tensors, so two kernels.
    ("duplicate_copies", [("x", (4, 6), F32)],
     lambda g, x: (x.t().contiguous(), x.t().contiguous()),
     [("copy", "tiled_transpose"), ("copy", "tiled_transpose")]),
]


# Where the C backend's copy planner takes another walk: a dim of 2 .. 4 on one side of a
# transpose is the lanes of an interleave (codegen/c/lib/copy_lanes.h), padding included;
# a copy that only writes its fill is the library's fill.
C_STRATEGIES = {
    "nchw_to_nhwc": [("copy", "interleave")],
    "nchw4_padded": [("copy", "interleave")],
    "full": [("copy", "fill")],
    "shared_copy": [("copy", "interleave")],
    "duplicate_copies": [("copy", "interleave"), ("copy", "interleave")],
    "copy_then_cast": [("copy", "interleave")],  # 4 rows: a cast's interleave of 4 lanes
    "flip_columns": [("copy", "reverse")],  # runs read backwards, an element at a time
}


@pytest.mark.parametrize(("name", "inputs", "build", "expected"), COUNTS,
                         ids=[c[0] for c in COUNTS])
@pytest.mark.parametrize("target", BACKENDS)
def test_kernel_counts_kinds_and_strategies(name: str, inputs: list, build: Callable[..., Any],
                                            expected: list, target: tuple[str, str]) -> None:
    backend, device = target
    g = graph_of(name, inputs, build)
    tensors = [torch.zeros(s, dtype=getattr(torch, d), device=device) for _, s, d in inputs]
    fn = stridec.compile(g, backend=backend)
    p = fn.plan_for(*tensors)
    if backend == "cpu":
        expected = C_STRATEGIES.get(name, expected)
    assert kinds(p) == expected
    assert p.launches == len(expected)
    assert all(names_its_kernel(k) for k in p.kernels)
    assert all((k.lang == "c") == (backend == "cpu") for k in p.kernels)
    assert fn.stats.launches == 0  # plan_for runs nothing
    fn(*tensors)
    assert fn.stats.launches == len(expected)


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_a_chain_of_k_layout_ops_runs_in_one_kernel(k: int) -> None:
    """docs/design.md#performance-targets: k views, then one materialization: exactly one
    kernel, and it agrees with torch on a transposed, offset argument."""
    steps: list[tuple[Callable[[Any], Any], Callable[[torch.Tensor], torch.Tensor]]] = [
        (lambda v: v.permute(2, 0, 1), lambda t: t.permute(2, 0, 1)),
        (lambda v: v.flip(0), lambda t: t.flip(0)),
        (lambda v: v[:, 1:, ::2], lambda t: t[:, 1:, ::2]),
        (lambda v: v.transpose(1, 2), lambda t: t.transpose(1, 2)),
        (lambda v: v.unsqueeze(0), lambda t: t.unsqueeze(0)),
        (lambda v: v.squeeze(0), lambda t: t.squeeze(0)),
    ]
    g = stridec.Graph(f"chain{k}")
    v = g.input("x", (4, 6, 8), "float32")
    base = torch.randn(8, 6, 4)
    t = base.permute(2, 1, 0)  # strides (1, 4, 24)
    want = t
    for view_step, torch_step in steps[:k]:
        v, want = view_step(v), torch_step(want)
    g.output(v.contiguous())
    fn = stridec.compile(g)
    assert len(fn.plan_for(t).kernels) == 1
    assert torch.equal(fn(t), want.contiguous())


def test_specialization_changes_the_plan(fresh_caches: Any) -> None:
    """The same graph, `x.t().contiguous()`, for three arguments: row-major needs a
    transpose; column-major already is `x.t()` row-major, so the output is a view of the
    argument and nothing runs; rows of pitch 8 (strides (8, 1)) transpose too, but from
    another layout. Each specialization compiles once."""
    g = graph_of("t", [("x", (4, 6), F32)], lambda g, x: x.t().contiguous())
    fn = stridec.compile(g, backend="interpret")
    row_major = torch.randn(4, 6)
    col_major = torch.randn(6, 4).t()
    pitched = torch.randn(4, 8)[:, :6]
    assert kinds(fn.plan_for(row_major)) == [("copy", "tiled_transpose")]
    assert kinds(fn.plan_for(col_major)) == []
    pitched_plan = fn.plan_for(pitched)
    assert kinds(pitched_plan) == [("copy", "tiled_transpose")]
    assert pitched_plan.kernels[0].source != fn.plan_for(row_major).kernels[0].source
    for _ in range(2):
        for t in (row_major, col_major, pitched):
            assert torch.equal(fn(t), t.t().contiguous())
    assert fn.stats.compiles == fn.stats.pipeline_runs == 3
    assert fn.stats.launches == 4


def test_compiles_once_per_specialization(fresh_caches: Any) -> None:
    """Strides and storage offset form the key; the data and the storage size do not."""
    g = graph_of("spec", [("x", (4, 6), F32)], lambda g, x: x.t().contiguous())
    fn = stridec.compile(g)
    storage = torch.randn(40)
    a = torch.as_strided(storage, (4, 6), (6, 1), 0)
    b = torch.as_strided(torch.randn(30), (4, 6), (6, 1), 0)  # same key, other storage
    c = torch.as_strided(storage, (4, 6), (6, 1), 5)  # another offset
    d = torch.as_strided(storage, (4, 6), (8, 1), 0)  # other strides (rows of pitch 8)
    for t in (a, b, a, c, d, c, d):
        assert torch.equal(fn(t), t.t().contiguous())
    assert fn.stats.compiles == 3
    assert fn.stats.pipeline_runs == fn.stats.codegen_runs == 3
    assert fn.stats.cache_hits == 4
    assert fn.stats.launches == 7


# --------------------------------------------------------------------------- coalescing


def kernel_dims(kernel: Any) -> tuple[int, ...]:
    """The canonical loop sizes of a copy kernel (runtime arguments: its `detail` says them)."""
    m = re.search(r"dims \(outer -> inner\): sizes \(([0-9, ]*)\)", kernel.detail)
    assert m is not None, kernel.detail
    return tuple(int(n) for n in m.group(1).split(",") if n.strip())


def test_dims_are_coalesced_jointly_and_size1_dims_dropped() -> None:
    """NCHW (2, 3, 4, 5) → NHWC: H and W are adjacent on both sides (source strides 5, 1;
    destination 15, 3; 15 == 3·5 and 5 == 1·5), so the copy runs over (N, H·W, C) =
    (2, 20, 3). Size-1 dims never reach a kernel."""
    g = graph_of("nhwc", [("x", (2, 3, 4, 5), F32)], lambda g, x: x.pack("NHWC"))
    (k,) = plan(g, torch.zeros(2, 3, 4, 5)).kernels
    assert kernel_dims(k) == (2, 20, 3)

    g = graph_of("ones", [("x", (1, 3, 1, 5, 1), F32)],
                 lambda g, x: x.permute(4, 3, 2, 1, 0).contiguous())
    (k,) = plan(g, torch.zeros(1, 3, 1, 5, 1)).kernels
    assert kernel_dims(k) == (5, 3)

    # A contiguous copy of a row slice: rows and columns stay apart on the source side
    # (stride 12 != 6·1), so two dims remain; a full contiguous cast collapses to one.
    g = graph_of("slice", [("x", (4, 12), F32)],
                 lambda g, x: (x[:, :6].contiguous(), x.to("float64")))
    k0, k1 = plan(g, torch.zeros(4, 12)).kernels
    assert kernel_dims(k0) == (4, 6)
    assert kernel_dims(k1) == (48,)


def test_cpu_grids_stay_small() -> None:
    """On the CPU (Triton's interpreter, ~1 ms a program) a kernel takes at most 16
    programs for a tensor of a few hundred thousand elements."""
    g = graph_of("big", [("x", (64, 96, 32), F32)],
                 lambda g, x: (x.permute(2, 0, 1).contiguous(), x.flip(2).contiguous(),
                               x.to("float16")))
    for k in plan(g, torch.zeros(64, 96, 32)).kernels:
        programs = 1
        for n in k.grid:
            programs *= n
        assert 1 <= programs <= 16, (k.strategy, k.grid)


# --------------------------------------------------------------------------- determinism


def test_same_graph_gives_byte_identical_source(fresh_caches: Any) -> None:
    """Two graphs built alike, compiled with empty caches (code generation runs twice):
    the same sources, kernel names and IR; another specialization gives other calls."""

    def build() -> stridec.Graph:
        return graph_of("det", [("x", (2, 5, 3, 4), "float16")],
                        lambda g, x: (x.pack("NCHW4"), x.flip(3).permute(0, 2, 3, 1).contiguous()))

    x = torch.zeros(2, 5, 3, 4, dtype=torch.float16)
    for backend in ("interpret", "cpu"):
        fn1 = stridec.compile(build(), backend=backend)
        first = fn1.plan_for(x)
        MEMORY_CACHE.clear_memory()
        for path in (fresh_caches / "plans").glob("*.json"):
            path.unlink()
        fn2 = stridec.compile(build(), backend=backend)
        second = fn2.plan_for(x)
        assert fn1.stats.codegen_runs == fn2.stats.codegen_runs == 1
        assert [k.source for k in first.kernels] == [k.source for k in second.kernels]
        assert [k.calls for k in first.kernels] == [k.calls for k in second.kernels]
        assert [k.name for k in first.kernels] == [k.name for k in second.kernels]
        assert first.ir == second.ir
        assert all(names_its_kernel(k) for k in first.kernels)

    other = fn2.plan_for(torch.zeros(2, 4, 3, 5, dtype=torch.float16).permute(0, 3, 2, 1))
    # another copy: another argument block (the planned library of its element size is
    # one unit for every copy of that size)
    assert [k.calls for k in other.kernels] != [k.calls for k in first.kernels]


def test_plan_ir_is_the_lowered_graph() -> None:
    g = graph_of("ir", [("x", (2, 3, 4, 5), "int8")], lambda g, x: (x.pack("NCHW4"), x[0]))
    p = plan(g, torch.zeros(2, 3, 4, 5, dtype=torch.int8))
    assert p.ir.count(" = masked_copy ") == len(p.kernels) == 1
    assert "pack" not in p.ir  # lowered to an explicit copy with a fill mask
    assert "masks" in p.ir
    assert p.ir.strip().splitlines()[-2].lstrip().startswith("output")


# --------------------------------------------------------------------------- index width


def lowered(layout: Layout, build: Callable[..., Any], dtype: str = "float16") -> Any:
    """`lower_to_program` of a one-input graph specialized to `layout`, without running it."""
    g = graph_of("wide", [("x", layout.sizes, dtype)], build)
    s = specialize(g, {"x": layout})
    PassManager.parse(DEFAULT_PIPELINE).run(s)
    return lower_to_program(s, "cuda")


@pytest.mark.parametrize(
    ("strides", "offset", "bits"),
    [
        # max source address = offset + 1·S + 5·1 (sizes (2, 6)):
        ((INT32_MAX - 5, 1), 0, 32),   # 0 + (2^31 - 6) + 5 = 2^31 - 1: still int32
        ((INT32_MAX - 5, 1), 1, 64),   # one more: 2^31
        ((2**30, 1), 2**30, 64),       # 2^30 + 2^30 + 5
        ((6, 1), 2**31, 64),           # a huge offset alone
        ((1, 2**29), 0, 64),           # 1 + 5·2^29 > 2^31 - 1
        ((1, 2**28), 0, 32),           # 1 + 5·2^28 < 2^31 - 1
    ],
)
def test_int64_indexing_when_an_address_passes_int32(strides: tuple[int, int], offset: int,
                                                     bits: int) -> None:
    prog = lowered(Layout((2, 6), strides, offset), lambda g, x: x.t().contiguous())
    (k,) = prog.kernels
    assert k.index_bits == bits
    assert ("tl.int64" in k.source) == (bits == 64)


def test_int64_indexing_for_a_huge_destination() -> None:
    """An expand to 2^31 + 8 elements writes addresses up to 2^31 + 7 (never allocated)."""
    prog = lowered(Layout.contiguous((1,)), lambda g, x: x.expand(2**31 + 8).contiguous())
    (k,) = prog.kernels
    assert k.index_bits == 64
    assert prog.buffers[0].elements == 2**31 + 8


def nchw4(t: torch.Tensor) -> torch.Tensor:
    """NCHW4 in torch for any number of spatial dims: pad C to a multiple of 4, split it,
    move the block of 4 innermost."""
    n, c, *spatial = t.shape
    cp = -(-c // 4) * 4
    split = torch.nn.functional.pad(t, (0, 0) * len(spatial) + (0, cp - c))
    split = split.reshape(n, cp // 4, 4, *spatial)
    return split.permute(0, 1, *range(3, split.dim()), 2).contiguous()


def test_int64_kernels_compute_the_same_values(fresh_caches: Any,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With the int32 limit lowered to 16, small graphs take the int64 code path; run them
    through the interpreter against torch (a copy, a packing with a fill mask) and the
    reference backend (philox)."""
    monkeypatch.setattr(copy_codegen, "INT32_MAX", 16)
    monkeypatch.setattr(philox_codegen, "_INT32_LIMIT", 16)
    g = graph_of("wide_run", [("x", (4, 6), F32), ("s", (6,), "int32")],
                 lambda g, x, s: (x.t().contiguous(), x.t().flip(1).unsqueeze(0).pack("NCHW4"),
                                  g.philox(s, (3, 7))[0].t().contiguous()))
    x = torch.randn(4, 6)
    s = torch.tensor([3, 0, 0, 0, 9, 1], dtype=torch.int32)
    fn = stridec.compile(g)
    # Three kernels: the transpose, the flip fused into the padded pack, the philox.
    assert [k.index_bits for k in fn.plan_for(x, s).kernels] == [64, 64, 64]
    got = fn(x, s)
    want = stridec.compile(g, backend="reference")(x, s)
    assert torch.equal(got[0], x.t().contiguous())
    assert torch.equal(got[1], nchw4(x.t().flip(1).unsqueeze(0)))  # C = 6: two padded channels
    assert torch.equal(got[2].view(torch.int32), want[2].view(torch.int32))


def test_plan_and_kernel_print_short_and_say_where_the_source_is() -> None:
    """`repr(plan)` and `repr(kernel)` are one short line each (a kernel's source runs to
    thousands of lines); `str(plan)` is the lowered IR and one line per kernel: kind,
    strategy, what it reads and writes, language and backend, the file its source is kept
    in (named by its cache key, there once the kernel is built) and how to get it whole."""
    g = stridec.Graph("t2x3")
    x = g.input("x", (2, 3), "float32")
    s = g.input("s", (6,), "int32")
    bits, state = g.philox(s, (4, 4))
    g.output(x.t().contiguous(), bits, state)
    args = (torch.randn(2, 3), torch.zeros(6, dtype=torch.int32))
    for backend, lang, suffix in (("cpu", "C", ".c"), ("interpret", "Triton", ".py")):
        fn = stridec.compile(g, backend=backend)
        plan = fn.plan_for(*args)
        assert plan.backend == backend
        assert len(repr(plan)) < 120 and "\n" not in repr(plan)
        assert repr(plan).startswith(f"<Plan 't2x3' backend={backend!r} kernels=[")
        for k in plan.kernels:
            assert len(repr(k)) < 120 and k.kind in repr(k) and k.strategy in repr(k)
        text = str(plan)
        assert text.count("\n") < 20 and plan.ir in text
        lines = plan.kernel_lines()
        assert text.rstrip("\n").splitlines()[-len(lines):] == lines
        by_kind = {k.kind: line for k, line in zip(plan.kernels, lines, strict=True)}
        assert "%x 2x3xf32 -> %" in by_kind["copy"] and "3x2xf32" in by_kind["copy"]
        assert "%s 6xi32 -> %0 4x4xui32, %1 6xi32" in by_kind["philox"]
        for i, (k, line) in enumerate(zip(plan.kernels, lines, strict=True)):
            assert f"{lang} on {backend}" in line and f"(plan.kernels[{i}].source)" in line
            assert f", {len(k.source.splitlines()):,} lines in " in line
            path = re.search(r" in (\S+?) \(plan", line).group(1)
            assert path.startswith(os.environ["STRIDEC_CACHE_DIR"]) and path.endswith(suffix)
        fn(*args)  # built or loaded: now the file holds the kernel's source
        for k, line in zip(plan.kernels, lines, strict=True):
            path = re.search(r" in (\S+?) \(plan", line).group(1)
            with open(path, encoding="utf-8") as f:
                assert f.read() in k.source


def test_repr_of_a_compiled_graph_says_which_backend_ran() -> None:
    """`backend="auto"` resolves per device: `repr(fn)` and `fn.ran_on` say what it
    resolved to once a call or a plan has, as `plan.backend` does."""
    g = stridec.Graph("auto_t")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g)
    assert repr(fn) == "<CompiledGraph 'auto_t' backend='auto'>" and fn.ran_on == ()
    plan = fn.plan_for(torch.randn(2, 3))
    assert fn.ran_on == (plan.backend,) and plan.backend in ("cpu", "interpret")
    assert repr(fn) == f"<CompiledGraph 'auto_t' backend='auto', ran on {plan.backend!r}>"


def test_a_unit_loaded_before_under_another_cache_keeps_its_source_in_this_one(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kernel_lines` names the source file in the current cache folder: a unit this
    process loaded while STRIDEC_CACHE_DIR named another folder writes it there too."""
    from stridec.compiler.codegen.c.plan import plan_unit_source
    from stridec.runtime.backends import cpu

    source = plan_unit_source(4)
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path / "first"))
    cpu.load_unit(source)
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path / "second"))
    cpu.load_unit(source)
    assert source in [p.read_text() for p in (tmp_path / "second").rglob("*.c")]
