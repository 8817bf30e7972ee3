"""Copies into disjoint boxes of one buffer run as one kernel (`codegen.batch`).

Graph level: `cat` of 2 to 5 inputs along every dim, with transposed, sliced, flipped,
broadcast and cast inputs and empty pieces, is one launch and equals `torch.cat`. Groups
that must not be one kernel (a copy that reads the buffer the group writes, boxes that
overlap) stay apart and stay correct; a cat of pads or of packed tensors is correct
whatever its kernel count. Spec level (hypothesis): a batch of random disjoint boxes with
random source layouts, run by Triton's interpreter, leaves the destination storage exactly
as the copies run one by one leave it (`reference_copy`, torch's answer). The batch kernel
compiles for sm_90.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codegen_copy import random_storage, reference_copy, sentinel

import stridec
from stridec.compiler.codegen.batch import generate_copy_batch
from stridec.compiler.codegen.copy import generate_copy
from stridec.compiler.codegen.lower import MAX_BATCH, lower_to_program
from stridec.compiler.codegen.program import Program
from stridec.compiler.codegen.spec import CopySpec, MaskBound, Tuning, dst_box
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
from stridec.errors import UnsupportedError
from stridec.ir.dtypes import DTYPES
from stridec.runtime import launch
from stridec.runtime.backends.triton import load_jit, signature
from stridec.runtime.launch import launch_copy_batch

f16, bf16, f32, f64 = DTYPES["float16"], DTYPES["bfloat16"], DTYPES["float32"], DTYPES["float64"]
i8, i32, i64 = DTYPES["int8"], DTYPES["int32"], DTYPES["int64"]
CPU = torch.device("cpu")


def contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


# --------------------------------------------------------------------------- cat graphs

# A piece of a cat: (declared input sizes, dtype, stridec view, torch view), made from the
# sizes the piece must have. Each reads its input through another layout.
Piece = tuple[tuple[int, ...], str, Callable[[Any], Any], Callable[[torch.Tensor], Any]]


def plain(s: tuple[int, ...]) -> Piece:
    return s, "float32", lambda v: v, lambda t: t


def transposed(s: tuple[int, ...]) -> Piece:
    # Declared (s2, s1, s0), read back through permute(2, 1, 0): source strides reversed.
    return s[::-1], "float32", lambda v: v.permute(2, 1, 0), lambda t: t.permute(2, 1, 0)


def sliced(s: tuple[int, ...]) -> Piece:
    # Every other row of dim 1, from offset 1: x[:, 1::2].
    big = (s[0], 2 * s[1] + 1, s[2])
    return big, "float32", lambda v: v[:, 1::2], lambda t: t[:, 1::2]


def flipped(s: tuple[int, ...]) -> Piece:
    return s, "float32", lambda v: v.flip(0, 2), lambda t: t.flip(0, 2)


def broadcast(s: tuple[int, ...]) -> Piece:
    # A (s0, 1, s2) input expanded along dim 1: source stride 0 there.
    one = (s[0], 1, s[2])
    return one, "float32", lambda v: v.expand(s), lambda t: t.expand(s)


def cast(s: tuple[int, ...]) -> Piece:
    # float16 read, float32 written: the cast copy fuses into the cat's copy.
    return s, "float16", lambda v: v.to("float32"), lambda t: t.to(torch.float32)


KINDS = [plain, transposed, sliced, flipped, broadcast, cast]


def cat_case(dim: int, lengths: list[int], first_kind: int) -> tuple[stridec.Graph, Any, list]:
    """A cat along `dim` of pieces of `lengths` there (the other sizes (3, 4, 5)), piece k
    of kind `KINDS[(first_kind + k) % 6]`; returns the graph, the torch function and inputs."""
    pieces = []
    for k, n in enumerate(lengths):
        sizes = tuple(n if d == dim else (3, 4, 5)[d] for d in range(3))
        pieces.append(KINDS[(first_kind + k) % len(KINDS)](sizes))
    g = stridec.Graph(f"cat{dim}")
    values = [g.input(f"x{k}", p[0], p[1]) for k, p in enumerate(pieces)]
    g.output(stridec.cat([p[2](v) for p, v in zip(pieces, values, strict=True)], dim))
    gen = torch.Generator().manual_seed(dim * 10 + len(lengths))
    inputs = [torch.randn(p[0], generator=gen).to(getattr(torch, p[1])) for p in pieces]

    def torch_fn(*ts: torch.Tensor) -> torch.Tensor:
        return torch.cat([p[3](t) for p, t in zip(pieces, ts, strict=True)], dim)

    return g, torch_fn, inputs


CASES = [
    (dim, lengths, first)
    for dim in range(3)
    for first, lengths in enumerate([[2, 3], [1, 2, 3], [2, 0, 1, 3, 1]])
]


@pytest.mark.parametrize(("dim", "lengths", "first"), CASES)
def test_cat_along_every_dim_is_one_kernel_equal_to_torch(
    dim: int, lengths: list[int], first: int
) -> None:
    g, torch_fn, inputs = cat_case(dim, lengths, first)
    fn = stridec.compile(g)
    plan = fn.plan_for(*inputs)
    assert plan.launches == 1
    (kernel,) = plan.kernels
    pieces = sum(n > 0 for n in lengths)
    assert kernel.kind == "copy" and kernel.strategy.startswith("batch(")
    assert kernel.strategy.count(",") == pieces - 1
    out = fn(*inputs)
    assert torch.equal(out, torch_fn(*inputs))


def test_cat_with_one_nonempty_piece_is_a_plain_copy() -> None:
    g, torch_fn, inputs = cat_case(1, [0, 3, 0], 0)
    fn = stridec.compile(g)
    (kernel,) = fn.plan_for(*inputs).kernels
    assert not kernel.strategy.startswith("batch")
    assert torch.equal(fn(*inputs), torch_fn(*inputs))


def test_cat_of_more_pieces_than_a_batch_holds() -> None:
    """Each batch takes at most MAX_BATCH copies: 40 rows are two launches, still one cat."""
    n = MAX_BATCH + 8
    g = stridec.Graph("wide_cat")
    xs = [g.input(f"x{k}", (1, 3), "int32") for k in range(n)]
    g.output(stridec.cat([x.flip(1) if k % 2 else x for k, x in enumerate(xs)], 0))
    inputs = [torch.full((1, 3), k, dtype=torch.int32) + torch.arange(3, dtype=torch.int32)
              for k in range(n)]
    fn = stridec.compile(g)
    assert fn.plan_for(*inputs).launches == 2
    want = torch.cat([t.flip(1) if k % 2 else t for k, t in enumerate(inputs)], 0)
    assert torch.equal(fn(*inputs), want)


def nchw4(t: torch.Tensor) -> torch.Tensor:
    """NCHW4 in torch: C padded with zeros to a multiple of 4, split, the block innermost."""
    n, c, h, w = t.shape
    blocks = -(-c // 4)
    padded = F.pad(t, (0, 0, 0, 0, 0, 4 * blocks - c))
    return padded.reshape(n, blocks, 4, h, w).permute(0, 1, 3, 4, 2).contiguous()


def test_cat_of_pads_and_of_packed_tensors_equals_torch() -> None:
    g = stridec.Graph("cat_of_formats")
    x = g.input("x", (2, 3, 4, 5), "float32")
    y = g.input("y", (1, 3, 4, 5), "float32")
    padded = stridec.cat([stridec.pad(x, (1, 0), value=2.0), stridec.pad(y.flip(3), (0, 1))], 0)
    packed = stridec.cat([x.pack("NCHW4"), y.pack("NCHW4")], 0)
    mixed = stridec.cat([x.pack("NCHW4").unpack("NCHW4", 3), y], 0)
    g.output(padded, packed, mixed)
    gen = torch.Generator().manual_seed(5)
    tx, ty = torch.randn(2, 3, 4, 5, generator=gen), torch.randn(1, 3, 4, 5, generator=gen)
    got = stridec.compile(g)(tx, ty)
    want = (
        torch.cat([F.pad(tx, (1, 0), value=2.0), F.pad(ty.flip(3), (0, 1))], 0),
        torch.cat([nchw4(tx), nchw4(ty)], 0),
        torch.cat([tx, ty], 0),
    )
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


def shared_piece() -> stridec.Graph:
    g = stridec.Graph("shared_piece")
    x = g.input("x", (3, 4), "float32")
    y = g.input("y", (4, 2), "float32")
    t = x.t().contiguous()
    g.output(t, stridec.cat([t, y.flip(0), t[:, :1]], 1))
    return g


def test_a_piece_that_is_an_output_and_the_program_round_trip() -> None:
    """A piece that is itself an output stays its own buffer (its copy is not fused); the
    cat still batches, and its program survives the JSON round trip of the disk cache."""
    tx, ty = torch.randn(3, 4), torch.randn(4, 2)
    want = torch.cat([tx.t(), ty.flip(0), tx.t()[:, :1]], 1)
    fn = stridec.compile(shared_piece())
    assert fn.plan_for(tx, ty).launches == 2
    out_t, out = fn(tx, ty)
    assert torch.equal(out_t, tx.t()) and torch.equal(out, want)

    graph = shared_piece()
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    program = lower_to_program(graph, "cpu")
    again = Program.from_json(program.to_json())
    assert again.launches == program.launches and again.kernels == program.kernels
    assert [len(launch.args) for launch in again.launches] == [2, 4]  # (dst, 3 sources)
    assert torch.equal(launch.run(again, (tx, ty), CPU)[1], want)


# --------------------------------------------------------------------------- what is not batched

BUFFER = "strided<[3, 1], offset: 0>"


def lowered(body: str) -> stridec.Graph:
    """A graph already in the lowered form (`lower_to_program` runs on it directly, so no
    pass can rewrite which storage a copy reads)."""
    return stridec.parse(
        "graph @g {\n"
        '  %x = input {name = "x"} : tensor<2x3xf32>\n' + body + "}\n"
    )


def run_lowered(graph: stridec.Graph, x: torch.Tensor) -> tuple[Program, torch.Tensor]:
    program = lower_to_program(graph, "cpu")
    (out,) = launch.run(program, (x,), CPU)
    return program, out


def test_a_copy_reading_the_buffer_is_not_batched() -> None:
    """Rows 0..1 = x and rows 2..3 = flip(x) batch; rows 4..5 are read back from rows 0..1
    of the same buffer, so that copy must wait for the batch: a second launch."""
    graph = lowered(
        f"  %0 = strided_copy %x {{layout = {BUFFER}, space = [2, 3], src = {BUFFER}, "
        f"dst = {BUFFER}}}"
        " : tensor<6x3xf32>\n"
        "  %1 = strided_copy %x, %0 {space = [2, 3], src = strided<[-3, 1], offset: 3>,"
        " dst = strided<[3, 1], offset: 6>} : tensor<6x3xf32>\n"
        "  %2 = strided_copy %1, %1 {space = [2, 3], src = strided<[3, 1], offset: 0>,"
        " dst = strided<[3, 1], offset: 12>} : tensor<6x3xf32>\n"
        "  output %2\n"
    )
    x = torch.randn(2, 3)
    program, out = run_lowered(graph, x)
    assert [len(launch.args) for launch in program.launches] == [3, 2]
    assert program.kernels[0].strategy.startswith("batch(")
    assert torch.equal(out, torch.cat([x, x.flip(0), x], 0))


def test_overlapping_boxes_are_not_batched() -> None:
    """Rows 0..1 then rows 1..2 of one buffer: the second copy overwrites row 1, so the two
    may not run in one launch (whose programs run in any order)."""
    graph = lowered(
        f"  %0 = strided_copy %x {{layout = {BUFFER}, space = [2, 3], src = {BUFFER}, "
        f"dst = {BUFFER}}}"
        " : tensor<3x3xf32>\n"
        "  %1 = strided_copy %x, %0 {space = [2, 3], src = strided<[-3, 1], offset: 3>,"
        " dst = strided<[3, 1], offset: 3>} : tensor<3x3xf32>\n"
        "  output %1\n"
    )
    x = torch.randn(2, 3)
    program, out = run_lowered(graph, x)
    assert program.launch_count == 2
    assert torch.equal(out, torch.cat([x[:1], x.flip(0)], 0))


def test_dst_box_finds_slices_and_refuses_other_shapes() -> None:
    # Rows 2..3 of a contiguous (6, 3): offset 6 = 2·3 + 0·1.
    rows = CopySpec((2, 3), (3, 1), 0, (3, 1), 6, f32, f32)
    assert dst_box(rows, (6, 3), (3, 1), 0) == ((2, 4), (0, 3))
    # Column 2 of a (6, 3), whose size-1 dim may carry any stride: offset 2 = 0·3 + 2·1.
    column = CopySpec((6, 1), (1, 1), 0, (3, 99), 2, f32, f32)
    assert dst_box(column, (6, 3), (3, 1), 0) == ((0, 6), (2, 3))
    # Two columns from column 2 would run past the row: not a box of the layout.
    assert dst_box(CopySpec((6, 2), (1, 1), 0, (3, 1), 2, f32, f32), (6, 3), (3, 1), 0) is None
    # Other strides (every other row) or another rank: not a box either.
    assert dst_box(CopySpec((2, 3), (3, 1), 0, (6, 1), 0, f32, f32), (6, 3), (3, 1), 0) is None
    assert dst_box(CopySpec((18,), (1,), 0, (1,), 0, f32, f32), (6, 3), (3, 1), 0) is None


# --------------------------------------------------------------------------- spec level


def source_strides(draw: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a permuted row-major tensor (a transpose), or any strides at all."""
    if draw(st.booleans()):
        order = draw(st.permutations(range(len(shape))))
        packed = contiguous(tuple(shape[k] for k in order))
        strides = [0] * len(shape)
        for j, k in enumerate(order):
            strides[k] = packed[j]
        return tuple(strides)
    return tuple(draw(st.integers(-4, 7)) for _ in shape)


@st.composite
def disjoint_batches(draw: Any) -> tuple[int, list[CopySpec]]:
    """A contiguous buffer of random sizes at a random offset, cut into a grid of boxes
    (cuts per dim), and copies into some of its cells, in random order; returns the
    buffer's element count and the copies."""
    rank = draw(st.integers(1, 3))
    sizes = tuple(draw(st.integers(1, 6)) for _ in range(rank))
    offset = draw(st.integers(0, 2))
    strides = contiguous(sizes)
    dst_dtype = draw(st.sampled_from([f32, f16, i32, bf16]))
    edges = [sorted({0, n, *draw(st.lists(st.integers(1, n), min_size=1, max_size=2))})
             for n in sizes]
    cells = [()]
    for e in edges:
        cells = [c + ((lo, hi),) for c in cells for lo, hi in zip(e, e[1:], strict=False)]
    boxes = draw(st.lists(st.sampled_from(cells), min_size=min(2, len(cells)), max_size=6,
                          unique=True))
    specs = []
    for box in boxes:
        shape = tuple(hi - lo for lo, hi in box)
        dst_offset = offset + sum(lo * s for (lo, _), s in zip(box, strides, strict=True))
        if draw(st.integers(0, 5)) == 0:  # a fill: nothing read
            specs.append(CopySpec(shape, (0,) * rank, 0, strides, dst_offset, dst_dtype,
                                  dst_dtype, (MaskBound((0,) * rank, 1, 1),), -2))
            continue
        src_strides = source_strides(draw, shape)
        low = sum(min(0, (n - 1) * s) for n, s in zip(shape, src_strides, strict=True))
        masks: tuple[MaskBound, ...] = ()
        fill: Any = 0
        if draw(st.integers(0, 3)) == 0:
            coeffs = tuple(draw(st.sampled_from((0, 1, -1, 2))) for _ in range(rank))
            lo = draw(st.integers(-1, 2))
            masks = (MaskBound(coeffs, lo, lo + draw(st.integers(1, 4))),)
            fill = draw(st.sampled_from((None, 3, 0)))
        specs.append(CopySpec(
            shape, src_strides, -low + draw(st.integers(0, 2)), strides, dst_offset,
            draw(st.sampled_from([f32, f16, i32, i8, f64])), dst_dtype, masks, fill,
        ))
    buffer = offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) + 1
    return buffer, specs


def src_span(spec: CopySpec) -> int:
    high = sum(max(0, (n - 1) * s) for n, s in zip(spec.sizes, spec.src_strides, strict=True))
    return spec.src_offset + high + 1


# Every assignment in a branch binds a name of its member (`m3_x0`); only `program` is shared.
ASSIGNED = re.compile(r"^ +(\w+) = ", re.M)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=disjoint_batches(), target=st.sampled_from(["cpu", "cuda"]), seed=st.integers(0, 9))
def test_a_batch_equals_its_copies_one_by_one(case: Any, target: str, seed: int) -> None:
    buffer, specs = case
    gen = torch.Generator().manual_seed(seed)
    sources = [random_storage(s.src_dtype, src_span(s), gen) for s in specs]
    dst_dtype = specs[0].dst_dtype
    want = sentinel(dst_dtype, buffer + 2)
    for spec, src in zip(specs, sources, strict=True):
        want = reference_copy(spec, src, want)

    kernel = generate_copy_batch(specs, target)
    again = generate_copy_batch(specs, target)
    assert again.source == kernel.source and again.name == kernel.name  # deterministic
    assert f"def {kernel.name}(" in kernel.source
    assert all(n == "program" or re.match(r"m\d+_", n) for n in ASSIGNED.findall(kernel.source))
    assert kernel.grid == (sum(generate_copy(s, target).grid[0] for s in specs),)
    got = sentinel(dst_dtype, buffer + 2)
    launch_copy_batch(kernel, got, *sources)
    assert torch.equal(got, want), kernel.source


def test_members_keep_their_own_index_width() -> None:
    """A member whose source lies past 2^31 indexes in int64; its neighbour stays int32."""
    small = CopySpec((4, 8), (8, 1), 0, (16, 1), 0, i8, i8)
    wide = CopySpec((4, 8), (2**30, 1), 0, (16, 1), 8, i8, i8)
    kernel = generate_copy_batch([small, wide], "cuda")
    assert kernel.index_bits == 64
    assert "m0_pid = program\n" in kernel.source
    assert "m1_pid = (program - end0).to(tl.int64)" in kernel.source
    assert kernel.arguments["end0"] == 1  # member 0 runs one program


def test_tuning_is_split_over_the_members() -> None:
    """`bench/tune.py` passes one `Tuning` per program: "batch(gather,linear)" forces each
    member's strategy, and blocks listing every member's tile axes give each its own."""
    # Columns 0..7 and 8..15 of a (4, 16) buffer: the first flipped, the second a cast.
    flip = CopySpec((4, 8), (-8, -1), 31, (16, 1), 0, f32, f32)
    rows = CopySpec((4, 8), (8, 1), 0, (16, 1), 8, f16, f32)
    tuned = generate_copy_batch(
        [flip, rows], "cuda", Tuning("batch(gather,linear)", (16, 2, 8), 8)
    )
    assert tuned.strategy == "batch(gather,linear)" and tuned.num_warps == 8
    assert tuned.constexprs == {"M0_BLOCK": 16, "M1_BLOCK_R": 2, "M1_BLOCK_C": 8}
    gen = torch.Generator().manual_seed(1)
    sources = [random_storage(f32, 32, gen), random_storage(f16, 32, gen)]
    want = reference_copy(rows, sources[1], reference_copy(flip, sources[0], sentinel(f32, 64)))
    got = sentinel(f32, 64)
    launch_copy_batch(tuned, got, *sources)
    assert torch.equal(got, want)
    same = generate_copy_batch([flip, rows], "cuda", Tuning("gather", (32,)))
    assert same.constexprs == {"M0_BLOCK": 32, "M1_BLOCK": 32}
    with pytest.raises(UnsupportedError, match=r"one strategy per copy \(2\); got 1"):
        generate_copy_batch([flip, rows], "cuda", Tuning("batch(gather)"))


# --------------------------------------------------------------------------- sm_90

compiler = pytest.importorskip("triton.compiler")
GPUTarget = pytest.importorskip("triton.backends.compiler").GPUTarget
POINTER = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
           "int8": "*i8", "int32": "*i32", "int64": "*i64"}


def compile_sm90(kernel: Any, pointer_dtypes: list[str]) -> str:
    jit = load_jit(kernel.source, kernel.name)
    types = signature(jit, [POINTER[d] for d in pointer_dtypes], kernel.args, kernel.constexprs)
    source = compiler.ASTSource(jit, types, constexprs=dict(kernel.constexprs))
    options = {"num_warps": kernel.num_warps}
    return compiler.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


def test_a_batch_of_every_strategy_compiles_for_sm90() -> None:
    """Linear, tiled transpose, gather, a fill, a masked pack-like copy, a bfloat16 cast and
    an int64 member, as one kernel into disjoint row blocks of a (40, 64) float32 buffer."""
    def rows(start: int) -> tuple[tuple[int, ...], int]:  # dst strides and offset of row `start`
        return (64, 1), start * 64

    members = [
        CopySpec((4, 64), (64, 1), 0, *rows(0), f32, f32),  # linear
        CopySpec((8, 64), (1, 8), 0, *rows(4), f16, f32),  # tiled transpose, cast
        CopySpec((4, 64), (-64, -1), 255, *rows(12), f32, f32),  # gather (flip)
        CopySpec((4, 64), (0, 0), 0, *rows(16), f32, f32, (MaskBound((0, 0), 1, 1),), 1.5),
        CopySpec((8, 64), (64, 1), 0, *rows(20), bf16, f32,
                 (MaskBound((1, 0), 0, 5),), 0.0),  # masked rows, bf16 widened
        CopySpec((4, 64), (2**30, 1), 0, *rows(28), f32, f32),  # int64 indexing
        CopySpec((8, 64), (64, 1), 0, *rows(32), f64, f32),
    ]
    kernel = generate_copy_batch(members, "cuda")
    assert kernel.strategy.startswith("batch(linear,tiled_transpose,gather,linear")
    assert kernel.index_bits == 64
    dtypes = ["float32"] + [m.src_dtype.name for m in members]
    ptx = compile_sm90(kernel, dtypes)
    assert ".entry" in ptx and kernel.name in ptx


def test_cat_graph_kernel_compiles_for_sm90() -> None:
    g, _, _ = cat_case(1, [2, 0, 1, 3, 1], 1)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    program = lower_to_program(g, "cuda")
    (launch,) = program.launches
    slot_dtypes = [v.type.dtype.name for v in g.inputs] + [b.dtype for b in program.buffers]
    ptx = compile_sm90(program.kernels[0], [slot_dtypes[s] for s in launch.args])
    assert program.kernels[0].name in ptx


@pytest.mark.gpu
@pytest.mark.parametrize(("dim", "lengths", "first"), CASES)
def test_cat_is_one_launch_on_cuda(dim: int, lengths: list[int], first: int) -> None:
    """The same cats compiled by Triton for the GPU: the `if/elif` on the program id has
    only run in the interpreter otherwise."""
    g, torch_fn, inputs = cat_case(dim, lengths, first)
    inputs = [t.cuda() for t in inputs]
    fn = stridec.compile(g)
    assert fn.plan_for(*inputs).launches == 1
    out = fn(*inputs)
    torch.cuda.synchronize()
    assert out.is_cuda and torch.equal(out, torch_fn(*inputs))


@pytest.mark.parametrize("bindings", [{"N": 5, "M": 7}, {"N": 32, "M": 3}])
def test_a_symbolic_cat_class_batch_compiles_for_sm90(bindings: dict[str, int]) -> None:
    """A cat along N + M (float16) lowered for the class of `bindings`: one launch of a
    batch kernel whose members' sizes, strides and program ranges are runtime arguments;
    typed as a launch at `bindings` types them, it compiles for sm_90 with 16-byte stores
    (each member's rows start at multiples of 512 elements for every N)."""
    from stridec.ir.symbols import evaluate

    g = stridec.Graph("cat_any_batch")
    x = g.input("x", ("N", 8, 64), "float16")
    y = g.input("y", ("M", 8, 64), "float16")
    g.output(stridec.cat([x, y], 0))
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    program = lower_to_program(g, "cuda", hint=bindings)
    assert program.symbols == ("M", "N")
    (launch_,) = program.launches
    kernel = program.kernels[launch_.kernel]
    assert kernel.name.startswith("stridec_copy_batch_")
    args = evaluate(kernel.args, bindings)
    assert args != kernel.args  # sizes and program ranges are runtime arguments
    jit = load_jit(kernel.source, kernel.name)
    types = signature(jit, ["*fp16"] * 3, args, kernel.constexprs)
    constexprs = dict(kernel.constexprs)
    for name, value in zip(kernel.params, args, strict=True):
        if value == 1:  # as Triton's JIT specializes it
            types[name], constexprs[name] = "constexpr", 1
    aligned = {(k,): [["tt.divisibility", 16]] for k in range(3)}  # torch's allocations
    source = compiler.ASTSource(jit, types, constexprs=constexprs, attrs=aligned)
    ptx = compiler.compile(source, target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": kernel.num_warps}).asm["ptx"]
    assert ".entry" in ptx and kernel.name in ptx
    assert any(".v4" in s for s in re.findall(r"\bst\.global[\w.]*", ptx))
