"""The default pipeline's guarantees, counted on the IR it leaves.

After the pipeline every materialization is an explicit copy between two strided layouts
(optionally masked and casting) or a philox, and every view is one `as_strided` of a root
(an input or a buffer). Each graph is also run before and after the pipeline with the
reference executor and compared with torch doing the same thing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
from stridec.ir.graph import Graph, Op
from stridec.ir.layout import Layout
from stridec.ir.ops import CopyOp

EXPLICIT = ("strided_copy", "masked_copy", "framed_copy", "fill")
ROOTS = ("input", *EXPLICIT, "philox", "philox_uniform")


def check_lowered(g: Graph) -> None:
    """What the pipeline promises about every op it leaves."""
    for op in g.ops:
        if op.name in ("input", "output", "philox", "philox_uniform"):
            continue
        if op.name in EXPLICIT:  # a `copy` (natural) left is an error below
            assert op.attrs["dst"].sizes == op.attrs["space"]
            if op.operands:
                assert op.operands[0].owner.name in ROOTS, f"a copy reads a view:\n{g}"
                assert op.attrs["src"].sizes == op.attrs["space"]
            for user, i in op.result.uses:  # a buffer written in place has that one user
                if user.name in EXPLICIT and i == 1:
                    assert len(op.result.uses) == 1, f"a shared in-place buffer:\n{g}"
        elif op.name == "as_strided":
            assert op.operands[0].owner.name in ROOTS, f"a view of a view:\n{g}"
            assert op.result.type.layout != op.operands[0].type.layout, f"an identity view:\n{g}"
        else:
            raise AssertionError(f"'{op.name}' is left after the pipeline:\n{g}")


def lowered(build: Callable[[Graph], None]) -> Graph:
    g = stridec.Graph("g")
    build(g)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    check_lowered(g)
    return g


def copies(g: Graph) -> list[Op]:
    return [op for op in g.ops if isinstance(op, CopyOp)]


def arange(*sizes: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    n = 1
    for s in sizes:
        n *= s
    return torch.arange(n, dtype=torch.float64).reshape(sizes).to(dtype)


def run_both(build: Callable[[Graph], None], *tensors: torch.Tensor) -> tuple[Graph, tuple]:
    """The lowered graph, and its outputs on `tensors` (checked against the unlowered one)."""
    g = stridec.Graph("g")
    build(g)
    expected = stridec.run_reference(g, *tensors)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    check_lowered(g)
    got = stridec.run_reference(g, *tensors)
    for a, b in zip(expected, got, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0, equal_nan=True)
    return g, got


# -- the guarantees of the issue ---------------------------------------------------------
def test_a_graph_of_only_views_produces_no_copy() -> None:
    def build(g: Graph) -> None:
        x = g.input("x", (2, 3, 4, 5))
        v = x.permute(0, 2, 3, 1)[:, 1:, ::2].unsqueeze(0).expand(3, 2, 3, 3, 3)
        g.output(v.transpose(3, 4).select(0, 1).unfold(1, 2, 1), x.reshape(6, 20)[1])

    t = arange(2, 3, 4, 5)
    g, (a, b) = run_both(build, t)
    assert copies(g) == []
    views = [op for op in g.ops if op.name == "as_strided"]
    assert len(views) == 2 and all(v.operands[0] is g.inputs[0] for v in views)
    v = t.permute(0, 2, 3, 1)[:, 1:, ::2].unsqueeze(0).expand(3, 2, 3, 3, 3)
    torch.testing.assert_close(a, v.transpose(3, 4)[1].unfold(1, 2, 1))
    torch.testing.assert_close(b, t.reshape(6, 20)[1])


def test_permute_contiguous_is_one_copy() -> None:
    t = arange(2, 3, 4, 5)
    g, (y,) = run_both(
        lambda g: g.output(g.input("x", (2, 3, 4, 5)).permute(0, 2, 3, 1).contiguous()), t
    )
    assert len(copies(g)) == 1
    torch.testing.assert_close(y, t.permute(0, 2, 3, 1).contiguous())


def test_permute_contiguous_reshape_permute_contiguous_is_one_copy() -> None:
    def build(g: Graph) -> None:
        x = g.input("x", (2, 3, 4, 5))
        g.output(x.permute(0, 2, 3, 1).contiguous().reshape(2, 20, 3).permute(2, 0, 1).contiguous())

    t = arange(2, 3, 4, 5)
    g, (y,) = run_both(build, t)
    (copy,) = copies(g)
    assert copy.operands[0] is g.inputs[0]  # reads x itself, not an intermediate buffer
    nhwc = t.permute(0, 2, 3, 1).contiguous()
    torch.testing.assert_close(y, nhwc.reshape(2, 20, 3).permute(2, 0, 1).contiguous())


def test_a_chain_that_undoes_itself_is_one_copy_into_new_memory() -> None:
    # permute(0, 3, 1, 2) of the NHWC copy, flattened, is x.reshape(2, 3, 20): the two
    # copies fuse into one that moves nothing, but torch's result is new memory (its last
    # contiguous() copies a permuted tensor), so the one copy stays.
    def build(g: Graph) -> None:
        x = g.input("x", (2, 3, 4, 5))
        g.output(x.permute(0, 2, 3, 1).contiguous().reshape(2, 20, 3).permute(0, 2, 1).contiguous())

    t = arange(2, 3, 4, 5)
    g, (y,) = run_both(build, t)
    (copy,) = copies(g)
    assert copy.attrs["src"].coalesce() == copy.attrs["dst"].coalesce()
    assert y.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    ("fmt", "channels"),
    [("NCHW4", 3), ("NCHW4", 8), ("NCHW4", 5), ("NCHW32", 40), ("NCHW32", 64), ("NCHW64", 64),
     ("NCHW64", 1), ("CHWN4", 6), ("CHWN4", 4), ("NHWC", 3)],
)
def test_pack_then_unpack_is_one_copy_into_new_memory(fmt: str, channels: int) -> None:
    # unpack gives new memory: the pair is one copy (fused), never the input handed back.
    t = arange(2, channels, 3, 4)
    g, (y,) = run_both(
        lambda g: g.output(g.input("x", tuple(t.shape)).pack(fmt).unpack(fmt, channels)), t
    )
    assert len(copies(g)) == 1, str(g)
    torch.testing.assert_close(y, t)
    assert y.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_contiguous_of_a_contiguous_value_is_no_copy() -> None:
    def build(g: Graph) -> None:
        x = g.input("x", (2, 3, 4))
        g.output(x.contiguous(), x[1:].contiguous().contiguous())

    t = arange(2, 3, 4)
    g, (y, z) = run_both(build, t)
    assert copies(g) == []
    assert g.outputs[0] is g.inputs[0]
    torch.testing.assert_close(z, t[1:])


def test_a_non_viewable_reshape_is_exactly_one_copy() -> None:
    t = arange(2, 3, 4)
    g, (y,) = run_both(
        lambda g: g.output(g.input("x", (2, 3, 4)).transpose(1, 2).reshape(2, 12)), t
    )
    assert len(copies(g)) == 1
    torch.testing.assert_close(y, t.transpose(1, 2).reshape(2, 12))


def test_an_output_that_is_a_pure_view_of_an_input_stays_a_view() -> None:
    def build(g: Graph) -> None:
        x = g.input("x", (4, 6))
        g.output(x.t()[1:], x.unsqueeze(0).expand(2, 4, 6), x)

    g, outs = run_both(build, arange(4, 6))
    assert copies(g) == []
    assert [p.aliases_input for p in g.memory_plan] == ["x", "x", "x"]
    assert g.memory_plan[0].layout == Layout((5, 4), (1, 6), 1)


# -- one kernel per materialized output ----------------------------------------------------
def test_a_flipped_copy_is_materialized_in_one_copy() -> None:
    # torch cannot return the negative stride, so plan-memory copies; it reads x, not the
    # transposing copy's buffer.
    t = arange(2, 3)
    g, (y,) = run_both(lambda g: g.output(g.input("x", (2, 3)).t().contiguous().flip(0)), t)
    (copy,) = copies(g)
    assert copy.operands[0] is g.inputs[0]
    torch.testing.assert_close(y, t.t().flip(0))


def test_a_cast_fuses_into_the_transposing_copy() -> None:
    t = arange(4, 6, dtype=torch.float16)
    g, (y,) = run_both(
        lambda g: g.output(g.input("x", (4, 6), "float16").to("float32").t().contiguous()), t
    )
    assert len(copies(g)) == 1
    torch.testing.assert_close(y, t.float().t().contiguous())


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "int32", "bool"])
def test_a_fill_fused_across_a_cast_is_the_stored_fill(dtype: str) -> None:
    # The pack stores 0.1 as f32 (0.10000000149011612); the cast reads that back.
    t = arange(1, 3, 2, 2)
    g, (y,) = run_both(
        lambda g: g.output(g.input("x", (1, 3, 2, 2)).pack("NCHW4", fill=0.1).to(dtype)), t
    )
    assert len(copies(g)) == 1
    padded = torch.full((1, 1, 2, 2, 4), 0.1)
    padded[..., :3] = t.permute(0, 2, 3, 1).unsqueeze(1)
    torch.testing.assert_close(y, padded.to(stridec.as_dtype(dtype).torch), rtol=0, atol=0)


def test_contiguous_of_a_caller_offset_view_keeps_the_offset() -> None:
    # The caller's x is storage[6:12]: x.contiguous() is x, and x.contiguous().t() a view of
    # x at offset 6 -- not of storage[0:6].
    from stridec.compiler.specialize import specialize

    g = stridec.Graph("g")
    x = g.input("x", (2, 3))
    g.output(x.contiguous().t(), x.contiguous()[1:].to("float16"))
    layout = Layout((2, 3), (3, 1), 6)
    g = specialize(g, {"x": layout})
    t = torch.as_strided(torch.arange(12.0), layout.sizes, layout.strides, layout.offset)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    check_lowered(g)
    view, cast = stridec.run_reference(g, t)
    torch.testing.assert_close(view, t.t())
    torch.testing.assert_close(cast, t[1:].half())
    assert g.memory_plan[0].layout == Layout((3, 2), (1, 3), 6)


def test_two_cats_sharing_a_part_do_not_share_a_buffer() -> None:
    def build(g: Graph) -> None:
        x, y, z = (g.input(n, (2, 3)) for n in "xyz")
        g.output(stridec.cat([x, y], 0), stridec.cat([x, z], 0))

    x, y, z = (torch.full((2, 3), float(v)) for v in (1, 2, 3))
    g, _ = run_both(build, x, y, z)
    assert len(copies(g)) == 4  # check_lowered: each in-place buffer has one writer


def test_two_cats_sharing_a_part_run_correctly_compiled() -> None:
    g = stridec.Graph("two_cats")
    x, y, z = (g.input(n, (2, 3)) for n in "xyz")
    g.output(stridec.cat([x, y], 0), stridec.cat([x, z], 0))
    a, b, c = (torch.full((2, 3), float(v)) for v in (1, 2, 3))
    for backend in ("interpret", "cpu"):
        first, second = stridec.compile(g, backend=backend)(a, b, c)
        torch.testing.assert_close(first, torch.cat([a, b]))
        torch.testing.assert_close(second, torch.cat([a, c]))


def test_equal_materialized_outputs_stay_independent() -> None:
    """torch returns two independent tensors for two equal `contiguous()` calls; so does
    a compiled graph: cse must not merge materializations that both reach the caller."""
    import torch

    g = stridec.Graph("two_copies")
    x = g.input("x", (3, 4), "float32")
    g.output(x.t().contiguous(), x.t().contiguous())
    t = torch.randn(3, 4)
    a, b = stridec.compile(g)(t)
    assert torch.equal(a, t.t()) and torch.equal(b, t.t())
    a.zero_()
    assert torch.equal(b, t.t())
