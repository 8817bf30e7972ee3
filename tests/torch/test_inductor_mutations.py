"""What Inductor believes each generated kernel writes (the torch.compile path on CUDA).

Under `torch.compile`, a CUDA call of a stridec operator launches its kernels through
`torch.library.wrap_triton`; functionalization then asks
`torch._higher_order_ops.triton_kernel_wrap.identify_accessed_tensors` (in torch 2.11
`identify_mutated_tensors`), which reads from each kernel's Triton IR which arguments it
stores to, and clones those first. A kernel whose stores it could not follow would be
taken to write every argument (inputs cloned on every call: correct, and slow). This
runs that same analysis here, with Triton told the target is Hopper (it needs no GPU to
build the IR), on every kind of kernel stridec emits: each must be seen to write only
its destination (and Philox its new state).
"""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec.compiler.codegen.lower import lower_to_program
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends.triton import load_jit

triton = pytest.importorskip("triton")
wrap = pytest.importorskip("torch._higher_order_ops.triton_kernel_wrap")
GPUTarget = pytest.importorskip("triton.backends.compiler").GPUTarget


class _HopperTarget:
    """Only what Inductor's analysis asks of Triton's driver: the target to build for."""

    def get_current_target(self) -> object:
        return GPUTarget("cuda", 90, 32)


def _accesses(jit: object, kwargs: dict[str, object]) -> tuple[set[str], set[str] | None]:
    """The pointer arguments functionalization takes `jit` to write, and to read: torch 2.13
    names both (`identify_accessed_tensors`), torch 2.11 the written ones alone
    (`identify_mutated_tensors`; reads None)."""
    if hasattr(wrap, "identify_accessed_tensors"):
        accessed = wrap.identify_accessed_tensors(jit, kwargs, {})
        return ({dep.name for dep in accessed.read_writes.writes},
                {dep.name for dep in accessed.read_writes.reads})
    return set(wrap.identify_mutated_tensors(jit, kwargs, {})), None


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    # `reset_active()` would look for a real driver (none without a GPU): put back
    # whatever was there, a real driver or none yet.
    monkeypatch.setattr(triton.runtime.driver, "_active", _HopperTarget())


def _graphs() -> list[stridec.Graph]:
    g = stridec.Graph("layouts")
    a = g.input("a", (2, 3, 4), "float16")
    b = g.input("b", (2, 5, 4), "float16")
    g.output(
        stridec.cat([a, b.flip(2)], 1),  # a batch of two copies
        a.permute(2, 0, 1).contiguous(),  # a tiled transpose
        stridec.pad(a, (1, 2), value=1.0),  # a fill merged into a box copy
        b.reshape(10, 4).to("float32"),  # a linear copy with a cast
    )
    p = stridec.Graph("random")
    s = p.input("s", (6,), "uint32")
    bits, s1 = p.philox(s, (4, 3, 8, 8))
    values, s2 = p.philox_uniform(s1, (64, 16), "float32")
    p.output(bits.pack("NCHW4"), values.t().contiguous(), s2)
    return [g, p]


def _cast_graphs() -> list[stridec.Graph]:
    """One cast per pair of dtypes: each builds for the GPU target (its bit manipulations
    type-check in Triton's front end, which the interpreter does not do)."""
    graphs = []
    for src in DTYPES:
        g = stridec.Graph(f"casts_from_{src}")
        x = g.input("x", (4, 6), src)
        g.output(*(x.to(dst) for dst in DTYPES if dst != src))
        graphs.append(g)
    return graphs


@pytest.mark.parametrize("graph", _graphs() + _cast_graphs(), ids=lambda g: g.name)
def test_each_kernel_is_seen_to_write_only_its_outputs(graph: stridec.Graph, hopper: None):
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    program = lower_to_program(graph, "cuda")
    assert program.launches
    inputs = [v.type.dtype.torch for v in graph.inputs]
    buffers = [getattr(torch, b.dtype) for b in program.buffers]
    for launch in program.launches:
        kernel = program.kernels[launch.kernel]
        jit = load_jit(kernel.source, kernel.name)
        params = [p.name for p in jit.params if not p.is_constexpr]
        pointers = params[: len(params) - len(kernel.args)]  # then the runtime scalars
        # Each pointer gets the element type its launch hands it (a cast reads one type
        # and writes another, bitcasting each).
        dtypes = [(inputs + buffers)[s] if v is None else getattr(torch, v)
                  for s, v in zip(launch.args, launch.views, strict=True)]
        args = {p: torch.empty(64, dtype=d) for p, d in zip(pointers, dtypes, strict=True)}
        writes, reads = _accesses(jit, {**args, **kernel.arguments, **kernel.constexprs})
        want = {"dst_ptr", "new_state_ptr"} if kernel.kind == "philox" else {"dst_ptr"}
        assert writes == want, (kernel.strategy, writes)
        sources = [p for p in pointers if p.startswith(("src_ptr", "state_ptr"))]
        assert sources and (reads is None or set(sources) <= reads), (kernel.strategy, reads)


_WRITES_ITS_SOURCE = """import triton
import triton.language as tl


@triton.jit
def writes_its_source(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs)
    tl.store(dst_ptr + offs, x)
    tl.store(src_ptr + offs, x + 1)
"""


def test_the_analysis_sees_a_store_to_a_source(hopper: None) -> None:
    """The check above can fail: a kernel that also stores to its source is seen doing so."""
    jit = load_jit(_WRITES_ITS_SOURCE, "writes_its_source")
    args = {p: torch.empty(16, dtype=torch.int32) for p in ("src_ptr", "dst_ptr")}
    writes, _ = _accesses(jit, {**args, "BLOCK": 16})
    assert writes == {"src_ptr", "dst_ptr"}
