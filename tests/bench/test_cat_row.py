"""The `cat_channels_fp16` row: three NCHW inputs joined along C in one kernel.

Its bytes are every input read once and the output written once; at full size the plan
is one launch of a batch of three linear copies whose global accesses are all 16 bytes
wide on sm_90 (the rows of every input and of the output are whole 16-byte multiples:
C_k·H·W·2 bytes), read off the PTX Triton compiles for Hopper, no GPU needed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import stridec  # noqa: E402
from bench.workloads import by_name  # noqa: E402
from stridec.compiler.codegen.lower import lower_to_program  # noqa: E402
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager  # noqa: E402
from stridec.runtime.backends.triton import load_jit, signature  # noqa: E402

ROW = by_name("cat_channels_fp16")


def test_bytes_moved_reads_every_input_once_and_writes_the_output_once() -> None:
    inputs = ROW.inputs("tiny", "cpu")
    assert len(inputs) == 3 and all(t.dtype == torch.float16 for t in inputs)
    out = stridec.compile(ROW.graph("tiny"))(*inputs)
    assert torch.equal(out, torch.cat(inputs, 1))
    read, written = ROW.bytes_moved(inputs, (out,))
    assert read == sum(t.numel() * 2 for t in inputs)
    assert written == out.numel() * 2 == read  # a cat writes what it reads


def test_full_size_plan_is_one_launch_of_16_byte_accesses() -> None:
    compiler = pytest.importorskip("triton.compiler")
    gpu_target = pytest.importorskip("triton.backends.compiler").GPUTarget
    graph = ROW.graph("full")
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    program = lower_to_program(graph, "cuda")
    (launch,) = program.launches
    (kernel,) = program.kernels
    assert kernel.strategy == "batch(linear,linear,linear)"
    assert len(launch.args) == 4  # the output buffer, then the three inputs
    jit = load_jit(kernel.source, kernel.name)
    pointers = ["*fp16"] * len(launch.args)
    types = signature(jit, pointers, kernel.args, kernel.constexprs)
    aligned = {(k,): [["tt.divisibility", 16]] for k in range(len(pointers))}  # torch allocations
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs), attrs=aligned)
    ptx = compiler.compile(
        source, target=gpu_target("cuda", 90, 32), options={"num_warps": kernel.num_warps}
    ).asm["ptx"]
    accesses = set(re.findall(r"\b(ld\.global[\w.]*|st\.global[\w.]*)", ptx))
    assert accesses == {"ld.global.v4.b32", "st.global.v4.b32"}, accesses
