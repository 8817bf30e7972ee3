"""Generated kernels compile for CUDA (sm_90) on a machine without a GPU.

The interpreter runs the generated source with numpy and does not type-check it as the
compiler does; compiling every strategy, index width, mask form and cast for Hopper here
catches code the interpreter accepts but `triton.compile` would reject on a real device.
"""

from __future__ import annotations

import pytest

from stridec.compiler.codegen.copy import generate_copy
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import as_dtype
from stridec.runtime.backends.triton import load_jit, signature

compiler = pytest.importorskip("triton.compiler")
GPUTarget = pytest.importorskip("triton.backends.compiler").GPUTarget

#: Triton's pointer type for each storage dtype (uint32 storages travel as int32 bits).
POINTER = {
    "float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
    "int8": "*i8", "uint8": "*u8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
    "uint32": "*i32", "bool": "*i1",
}  # fmt: skip


def _transpose(n: int, m: int, src: str, dst: str) -> CopySpec:
    # (n, m) read column-major: source strides (1, n), destination row-major (m, 1).
    return CopySpec((n, m), (1, n), 0, (m, 1), 0, as_dtype(src), as_dtype(dst))


def _nchw4(c: int) -> CopySpec:
    # Pack (2, c, 5, 6) into NCHW4: space (N, C/4, 4, H, W), c = 4·co + ci masked to < c.
    blocks = -(-c // 4)
    hw = 30
    return CopySpec(
        (2, blocks, 4, 5, 6), (c * hw, 4 * hw, hw, 6, 1), 0,
        (blocks * hw * 4, hw * 4, 1, 24, 4), 0, as_dtype("int8"), as_dtype("int8"),
        (MaskBound((0, 4, 1, 0, 0), 0, c),), 0,
    )  # fmt: skip


SPECS = {
    "linear-1d": CopySpec((4096,), (1,), 0, (1,), 0, as_dtype("float32"), as_dtype("float32")),
    "linear-rows": CopySpec(
        (64, 100), (128, 1), 7, (100, 1), 0, as_dtype("float16"), as_dtype("float16")
    ),
    "transpose-f32": _transpose(256, 256, "float32", "float32"),
    "transpose-f16": _transpose(256, 128, "float16", "float16"),
    "transpose-i8": _transpose(128, 256, "int8", "int8"),
    "transpose-cast-f32-bf16": _transpose(64, 64, "float32", "bfloat16"),
    "nhwc": CopySpec(
        (2, 6, 7, 3),
        (126, 7, 1, 42),
        0,
        (126, 21, 3, 1),
        0,
        as_dtype("float16"),
        as_dtype("float16"),
    ),
    "gather-flip": CopySpec(
        (5, 7, 3), (-21, 3, 1), 84, (21, 1, 7), 0, as_dtype("float32"), as_dtype("float32")
    ),
    # Strided on both sides (every other column of both): no unit stride anywhere.
    "gather-strided": CopySpec(
        (6, 5), (20, 2), 1, (10, 2), 0, as_dtype("float16"), as_dtype("float32")
    ),
    "broadcast": CopySpec((16, 32), (0, 1), 0, (32, 1), 0, as_dtype("int32"), as_dtype("int32")),
    "nchw4-padded": _nchw4(3),
    "unpack-restricted": CopySpec(
        (2, 1, 4, 5, 6),
        (120, 120, 1, 24, 4),
        0,
        (90, 120, 30, 6, 1),
        0,
        as_dtype("int8"),
        as_dtype("int8"),
        (MaskBound((0, 4, 1, 0, 0), 0, 3),),
        None,
    ),  # type: ignore[arg-type]
    "fill-only": CopySpec(
        (8, 9),
        (0, 0),
        0,
        (9, 1),
        0,
        as_dtype("float32"),
        as_dtype("float32"),
        (MaskBound((0, 0), 1, 1),),
        2.5,
    ),
    "cast-f64-f16": CopySpec((100,), (1,), 0, (1,), 0, as_dtype("float64"), as_dtype("float16")),
    "cast-f32-bool": CopySpec((100,), (1,), 0, (1,), 0, as_dtype("float32"), as_dtype("bool")),
    "cast-u32-f32": CopySpec((100,), (1,), 0, (1,), 0, as_dtype("uint32"), as_dtype("float32")),
    "int64-index": CopySpec((4, 8), (2**30, 1), 0, (8, 1), 0, as_dtype("int8"), as_dtype("int8")),
}


def _rank_spec(rank: int) -> CopySpec:
    """Canonical rank `rank`: every dim of size 2, the source strides a permutation of the
    destination's powers of two (nothing merges)."""
    return CopySpec(
        (2,) * rank, tuple(2 ** ((7 * k) % rank) for k in range(rank)), 0,
        tuple(2 ** (rank - 1 - k) for k in range(rank)), 0, as_dtype("int8"), as_dtype("int8"),
    )


# Triton's compile time grows with the canonical rank (PTX for sm_90: rank 12 ~5 s, 16
# ~22 s, 25 ~60 s on this machine): the default suite compiles rank 10, `-m slow` the limit.
SPECS["rank-10"] = _rank_spec(10)


@pytest.mark.parametrize("name", list(SPECS))
def test_copy_kernel_compiles_for_sm90(name: str) -> None:
    _compiles_for_sm90(name, SPECS[name])


@pytest.mark.slow
def test_copy_kernel_of_the_highest_rank_compiles_for_sm90() -> None:
    _compiles_for_sm90("rank-max", _rank_spec(MAX_RANK))


def _compiles_for_sm90(name: str, spec: CopySpec) -> None:
    kernel = generate_copy(spec, "cuda")
    assert kernel.numel == spec.numel
    jit = load_jit(kernel.source, kernel.name)
    types = signature(
        jit, [POINTER[spec.src_dtype.name], POINTER[spec.dst_dtype.name]], kernel.args,
        kernel.constexprs,
    )
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs))
    compiled = compiler.compile(source, target=GPUTarget("cuda", 90, 32))
    ptx = compiled.asm["ptx"]
    assert ".entry" in ptx and kernel.name in ptx
    if name == "int64-index":
        assert kernel.index_bits == 64
    if name.startswith("rank-"):
        assert f"canonical rank {spec.rank}" in kernel.source


def test_every_strategy_is_compiled() -> None:
    strategies = {generate_copy(spec, "cuda").strategy for spec in SPECS.values()}
    assert strategies >= {"linear", "tiled_transpose", "gather"}


def _graphs() -> dict[str, object]:
    import stridec

    graphs = {}
    g = stridec.Graph("nchw_to_nhwc")
    x = g.input("x", (8, 64, 28, 28), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous())
    graphs[g.name] = g
    g = stridec.Graph("packs")
    x = g.input("x", (4, 3, 14, 14), "int8")
    g.output(
        x.pack("NCHW4"), x.pack("NCHW32"), x.pack("CHWN4"), x.pack("NCHW64").unpack("NCHW64", 3)
    )
    graphs[g.name] = g
    g = stridec.Graph("chain_and_cast")
    x = g.input("x", (64, 32, 16), "float32")
    y = x.permute(2, 0, 1).contiguous().reshape(16, 64 * 32).t().to("bfloat16").contiguous()
    g.output(y, stridec.cat([x[:, ::2], x.flip(1)[:, :5]], 1), stridec.pad(x, (1, 2), value=-1.0))
    graphs[g.name] = g
    g = stridec.Graph("philox")
    s = g.input("s", (6,), "uint32")
    bits, s1 = g.philox(s, (4, 3, 8, 8))
    values, s2 = g.philox_uniform(s1, (256, 64), "float16", -1.0, 1.0)
    g.output(bits.pack("NCHW4"), values.t().contiguous(), s2)
    graphs[g.name] = g
    return graphs


@pytest.mark.parametrize("name", list(_graphs()))
def test_whole_programs_compile_for_sm90(name: str) -> None:
    """Every kernel of a lowered program (GPU tile sizes, fused Philox placements, fills)
    compiles for Hopper; pointer types follow the storages the runtime passes."""
    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager

    graph = _graphs()[name]
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    program = lower_to_program(graph, "cuda")
    slot_dtypes = [v.type.dtype.name for v in graph.inputs] + [b.dtype for b in program.buffers]
    assert program.launches
    for launch in program.launches:
        kernel = program.kernels[launch.kernel]
        pointers = [
            POINTER[view or slot_dtypes[slot]]
            for slot, view in zip(launch.args, launch.views, strict=True)
        ]
        jit = load_jit(kernel.source, kernel.name)
        # The pointer parameters in order: (src, dst) for a copy, (dst, src_0, …) for a
        # batch of copies (a cat), (state, dst, new_state) for Philox; then the scalars.
        types = signature(jit, pointers, kernel.args, kernel.constexprs)
        source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs))
        ptx = compiler.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
        assert kernel.name in ptx
