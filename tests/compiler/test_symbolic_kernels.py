"""Copies over symbolic sizes: one kernel per class of bindings (`plan_copy`'s `hint`),
its arguments and grid symbolic, evaluated per binding; and programs of such kernels,
bound per call by one precompiled evaluation (`Program.bind`). Results are compared
with torch over many sizes on the interpret backend."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.compiler.codegen.copy import generate_copy, symbolic_divisibility_bits
from stridec.compiler.codegen.program import BufferSpec, Launch, OutputSpec, Program
from stridec.compiler.codegen.spec import CopySpec, MaskBound, bind_copy
from stridec.compiler.codegen.targets import target
from stridec.errors import CallError, UnsupportedError
from stridec.ir.dtypes import DTYPES
from stridec.ir.symbols import symbol
from stridec.runtime import launch
from stridec.runtime.symbolic import binding_class

N, M = symbol("N"), symbol("M")
f16, i8 = DTYPES["float16"], DTYPES["int8"]


def nhwc_spec() -> CopySpec:
    """NCHW (N, 8, 6, 5) -> NHWC over the space (n, c, h, w)."""
    return CopySpec((N, 8, 6, 5), (240, 30, 5, 1), 0, (240, 1, 40, 8), 0, f16, f16)


def test_sixteen_batch_sizes_take_two_kernels() -> None:
    """N = 2 … 17: the class of 16 (a multiple of 16) and the class of the others; each
    kernel generated once, launched with each N's arguments, equals torch."""
    kernels: dict[tuple, object] = {}
    for n in range(2, 18):
        cls = binding_class({"N": n})
        if cls not in kernels:
            kernels[cls] = generate_copy(nhwc_spec(), "cpu", hint={"N": n})
        kernel = kernels[cls]
        assert kernel.valid_for({"N": n})
        x = torch.randn(n, 8, 6, 5).half()
        dst = torch.full((n * 240,), -1.0, dtype=torch.float16)
        launch.launch_copy(kernel, x.reshape(-1), dst, {"N": n})
        assert torch.equal(dst.view(n, 6, 5, 8), x.permute(0, 2, 3, 1))
    assert len(kernels) == 2
    assert len({k.source for k in kernels.values()}) == 2


def test_arguments_evaluate_to_the_static_kernels_sizes() -> None:
    """The symbolic kernel's canonical dims are the static kernel's at every N."""
    kernel = generate_copy(nhwc_spec(), "cpu", hint={"N": 3})
    for n in (2, 5, 9):
        static = generate_copy(bind_copy(nhwc_spec(), {"N": n}), "cpu")
        grid, args, _ = kernel.bound({"N": n})
        assert dict(zip(kernel.params, args, strict=True))["ext0"] == 30 * n
        bound = kernel.detail.replace("30*N", str(30 * n)).replace("(N,", f"({n},")
        # The same canonical dims, strides and offsets (the tile is the hint's).
        assert static.detail.splitlines()[:3] == bound.splitlines()[:3]


def test_a_binding_of_another_class_is_refused() -> None:
    kernel = generate_copy(nhwc_spec(), "cpu", hint={"N": 3})
    assert not kernel.valid_for({"N": 32})
    x = torch.zeros(32 * 240, dtype=torch.float16)
    with pytest.raises(CallError, match="planned for the class of"):
        launch.launch_copy(kernel, x, x.clone(), {"N": 32})
    with pytest.raises(CallError, match="expected bindings"):
        launch.launch_copy(kernel, x, x.clone())
    with pytest.raises(UnsupportedError, match="need a binding of the class"):
        generate_copy(nhwc_spec(), "cpu")


def test_divisibility_holds_for_every_binding_of_the_class() -> None:
    assert symbolic_divisibility_bits(30 * N, {"N": 32}) == 4  # 480·N'
    assert symbolic_divisibility_bits(30 * N, {"N": 3}) == 1
    assert symbolic_divisibility_bits(64 * N + 8, {"N": 3}) == 3
    assert symbolic_divisibility_bits(N * M, {"N": 16, "M": 3}) == 4


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 12), c=st.integers(1, 9), hint=st.integers(2, 12))
def test_a_pack_whose_channels_are_symbolic_equals_torch(n: int, c: int, hint: int) -> None:
    """NCHW4 packing of (2, C, 3, 4) with C = M symbolic: the space (2, ⌈M/4⌉, 4, 3, 4)
    and the mask 4·co + ci < M, whose bound is the symbol. One kernel per class."""
    if binding_class({"M": c, "N": n}) != binding_class({"M": hint, "N": n}) or c < 2:
        return
    blocks = (M + 3) // 4
    hw = 12
    spec = CopySpec(
        (N, blocks, 4, 3, 4), (M * hw, 4 * hw, hw, 4, 1), 0,
        (blocks * hw * 4, hw * 4, 1, 16, 4), 0, i8, i8, (MaskBound((0, 4, 1, 0, 0), 0, M),), 0,
    )
    kernel = generate_copy(spec, "cpu", hint={"N": n, "M": hint})
    x = torch.randint(-100, 100, (n, c, 3, 4), dtype=torch.int8)
    nb = -(-c // 4)
    dst = torch.full((n * nb * 4 * hw,), 99, dtype=torch.int8)
    launch.launch_copy(kernel, x.reshape(-1), dst, {"N": n, "M": c})
    padded = torch.zeros(n, nb * 4, 3, 4, dtype=torch.int8)
    padded[:, :c] = x
    assert torch.equal(dst.view(n, nb, 3, 4, 4), padded.view(n, nb, 4, 3, 4).permute(0, 1, 3, 4, 2))


def symbolic_program(hint: int) -> Program:
    """A program of one symbolic kernel: x (N, 8, 6, 5) -> a new NHWC buffer of N·240."""
    interpreter = target("cpu")
    kernel = interpreter.copy(nhwc_spec(), hint={"N": hint})
    return Program(
        n_inputs=1, buffers=[BufferSpec(240 * N, "float16")], kernels=[interpreter.info(kernel)],
        launches=[Launch(0, (0, 1), (None, None))],
        outputs=[OutputSpec(1, (N, 6, 5, 8), (240, 40, 8, 1), 0)], ir="", symbols=("N",),
    )


def test_a_symbolic_program_runs_every_size_of_its_class() -> None:
    """Bound per call (one precompiled evaluation), round-tripped through JSON."""
    program = Program.from_json(symbolic_program(3).to_json())
    assert program.symbols == ("N",) and program.buffers[0].elements == 240 * N
    for n in (2, 3, 5, 7, 9):
        x = torch.randn(n, 8, 6, 5).half()
        (out,) = launch.run(program, [x], torch.device("cpu"), "interpret", {"N": n})
        assert torch.equal(out, x.permute(0, 2, 3, 1).contiguous())
    with pytest.raises(CallError, match="expected a value for each"):
        launch.runner(program, "interpret")


def cat_specs(dim: int) -> list[CopySpec]:
    """cat([a, b], dim) of a (N, 16, 32) and b (M, 16, 32) along dim 0 (then M·16·32
    lands after N·16·32), or of a (N, 16, 32) and b (N, 48, 32) along dim 1."""
    f32 = DTYPES["float32"]
    if dim == 0:
        return [CopySpec((N, 16, 32), (512, 32, 1), 0, (512, 32, 1), 0, f32, f32),
                CopySpec((M, 16, 32), (512, 32, 1), 0, (512, 32, 1), 512 * N, f32, f32)]
    return [CopySpec((N, 16, 32), (512, 32, 1), 0, (2048, 32, 1), 0, f32, f32),
            CopySpec((N, 48, 32), (1536, 32, 1), 0, (2048, 32, 1), 512, f32, f32)]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), m=st.integers(2, 40), dim=st.sampled_from([0, 1]))
def test_a_cat_along_a_symbolic_dim_equals_torch(n: int, m: int, dim: int) -> None:
    """One batch kernel (one launch) for the class of (n, m): the ends of the members'
    programs are expressions too."""
    from stridec.compiler.codegen.batch import generate_copy_batch

    bindings = {"N": n, "M": m} if dim == 0 else {"N": n}
    hint = {k: 16 if v % 16 == 0 else 3 for k, v in bindings.items()}  # of its class
    kernel = generate_copy_batch(cat_specs(dim), "cpu", hint=hint)
    assert kernel.symbolic and kernel.valid_for(bindings)
    a = torch.randn(n, 16, 32)
    b = torch.randn(m, 16, 32) if dim == 0 else torch.randn(n, 48, 32)
    want = torch.cat([a, b], dim)
    dst = torch.full((want.numel(),), -1.0)
    launch.launch_copy_batch(kernel, dst, a.reshape(-1), b.reshape(-1), bindings=bindings)
    assert torch.equal(dst.view(want.shape), want)


@pytest.mark.parametrize("hint", [3, 32])
def test_a_symbolic_kernel_compiles_for_sm90_with_16_byte_accesses(hint: int) -> None:
    """The CUDA kernel of NCHW -> NHWC (N, 64, 28, 28) float16, N symbolic: its arguments
    typed as a launch at the hint types them; the stores stay 16 bytes wide (the source's
    divisibility marks hold for the whole class)."""
    import re

    compiler = pytest.importorskip("triton.compiler")
    gpu_target = pytest.importorskip("triton.backends.compiler").GPUTarget
    from stridec.runtime.backends.triton import load_jit, signature

    spec = CopySpec((N, 64, 28, 28), (50176, 784, 28, 1), 0, (50176, 1, 1792, 64), 0,
                    f16, f16)
    kernel = generate_copy(spec, "cuda", hint={"N": hint})
    assert kernel.symbolic
    _, args, _ = kernel.bound({"N": hint})
    jit = load_jit(kernel.source, kernel.name)
    types = signature(jit, ["*fp16", "*fp16"], args, kernel.constexprs)
    aligned = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs), attrs=aligned)
    ptx = compiler.compile(source, target=gpu_target("cuda", 90, 32),
                           options={"num_warps": kernel.num_warps}).asm["ptx"]
    stores = set(re.findall(r"\bst\.global[\w.]*", ptx))
    assert any(".v4" in s for s in stores), stores


def test_dims_that_merge_at_the_hint_only_stay_on_the_library() -> None:
    """Rows of N written into rows of 64: at N = 64 one contiguous run (the dims merge),
    at N = 48 rows 64 apart. The symbolic copy is planned on its dims unmerged, so one
    library call serves both."""
    from stridec.compiler.codegen.symbolic_c import generate_c_copy_symbolic
    from stridec.ir.symbols import evaluate
    from stridec.runtime.backends import cpu

    f32 = DTYPES["float32"]
    spec = CopySpec((5, N), (N, 1), 0, (64, 1), 0, f32, f32)
    kernel = generate_c_copy_symbolic([spec], [(0, 1)], {"N": 64})
    ((name, src_arg, dst_arg, params),) = kernel.calls
    assert name == "stridec_plan_bits4"
    for n in (64, 48, 16):
        bound = [(name, src_arg, dst_arg, tuple(evaluate(p, {"N": n}) for p in params))]
        x = torch.randn(5, n)
        dst = torch.full((5 * 64,), -1.0)
        cpu.load_c_kernel(kernel.name, kernel.source, bound)(None, x.reshape(-1), dst)
        want = torch.full((5, 64), -1.0)
        want[:, :n] = x
        assert torch.equal(dst.view(5, 64), want)


@pytest.mark.parametrize(("lo", "hi", "fill"), [(0, 40, -1.0), (40, 99, -1.0), (40, 99, None)])
def test_masks_that_hold_everywhere_or_nowhere_at_the_hint_only_stay_on_the_library(
        lo: int, hi: int, fill: float | None) -> None:
    """Rows of N whose columns [lo, hi) are copied, the others the fill (or left): at N =
    32 the mask holds on every element, or on none (the static copy there has no mask, or
    is a fill); at N = 64 neither. The symbolic copy is planned with its mask as it is, so
    one library call serves every N."""
    from stridec.compiler.codegen.symbolic_c import generate_c_copy_symbolic
    from stridec.ir.symbols import evaluate
    from stridec.runtime.backends import cpu

    f32 = DTYPES["float32"]
    spec = CopySpec((5, N), (N, 1), 0, (N, 1), 0, f32, f32, (MaskBound((0, 1), lo, hi),), fill)
    kernel = generate_c_copy_symbolic([spec], [(0, 1)], {"N": 32})
    ((name, src_arg, dst_arg, params),) = kernel.calls
    assert name == "stridec_plan_bits4"
    for n in (32, 64, 48):
        bound = [(name, src_arg, dst_arg, tuple(evaluate(p, {"N": n}) for p in params))]
        x = torch.randn(5, n)
        dst = torch.full((5 * n,), 7.0)
        cpu.load_c_kernel(kernel.name, kernel.source, bound)(None, x.reshape(-1), dst)
        want = torch.full((5, n), 7.0 if fill is None else fill)
        want[:, lo:hi] = x[:, lo:hi]
        assert torch.equal(dst.view(5, n), want)


@pytest.mark.parametrize("dim", [0, 1])
def test_a_symbolic_batch_streams_as_the_static_one(dim: int) -> None:
    """The members of a batch stream or not together, by the batch's total bytes: over
    symbolic sizes each call's word (an expression) is, at a binding, the static batch's
    number there, not the member's own bytes."""
    from stridec.compiler.codegen.c.copy import generate_c_copy_batch
    from stridec.compiler.codegen.symbolic_c import generate_c_copy_symbolic
    from stridec.ir.symbols import evaluate

    for bindings in ({"N": 5, "M": 7}, {"N": 4096, "M": 1}):
        bindings = bindings if dim == 0 else {"N": bindings["N"]}
        hint = {k: 16 if v % 16 == 0 else 3 for k, v in bindings.items()}
        symbolic = generate_c_copy_symbolic(cat_specs(dim), [(1, 0), (2, 0)], hint)
        static = generate_c_copy_batch([bind_copy(s, bindings) for s in cat_specs(dim)])
        words = [evaluate(p[6], bindings) for _, _, _, p in symbolic.calls]
        assert words == [p[6] for _, _, _, p in static.calls]
