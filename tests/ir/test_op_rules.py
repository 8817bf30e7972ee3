"""An op's meaning sits with the op (STYLE.md habit 16, docs/adding-an-op.md): every op
class the parser knows has a reference rule (`stridec.runtime.backends.reference.RULES`),
an adjoint or the stated reason it has none (`stridec.torch.adjoint.ADJOINTS`), and
declares its builder surface (`Op.surface`), each name of which builds that op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec
import stridec.ir.builder as B
from stridec.errors import UnsupportedError
from stridec.ir import ops as O
from stridec.ir.builder import FUNCTIONS, SURFACE
from stridec.ir.graph import OP_REGISTRY, Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.rules import OpRules
from stridec.runtime.backends.reference import RULES
from stridec.torch.adjoint import ADJOINTS, adjoint


def op_classes() -> list[type[Op]]:
    return sorted(set(OP_REGISTRY.values()), key=lambda c: c.name)


@pytest.mark.parametrize("table", [RULES, ADJOINTS], ids=lambda t: t.kind)
def test_every_op_class_has_each_rule(table: OpRules) -> None:
    assert [c.name for c in table.undecided(op_classes())] == []


def test_every_op_class_declares_its_surface() -> None:
    for cls in op_classes():
        assert "surface" in vars(cls) and cls.surface, f"{cls.name}: no surface of its own"
        for entry in cls.surface:
            owner, _, name = entry.partition(".")
            if owner == "Tensor":
                assert name in SURFACE and hasattr(Value, name), entry
            elif owner == "torch":
                assert name in FUNCTIONS and callable(getattr(B, name)), entry
            elif owner == "Graph":
                assert hasattr(Graph, name), entry
            else:
                assert owner == "Value" and hasattr(Value, name), entry
                assert name not in SURFACE, f"{entry}: a torch name is Tensor.{name}"


def _method(name: str) -> Callable[[Any, Graph], Any]:
    return lambda x, g: getattr(x, name)()


# One call per surface name, on a float32 value `x` of sizes (4, 6) (or the sizes given).
BUILDS: dict[str, tuple[Callable[[Any, Graph], Any], tuple[int, ...]]] = {
    "Graph.input": (lambda x, g: x, (4, 6)),
    "Graph.full": (lambda x, g: g.full((2, 3), 1.5), (4, 6)),
    "torch.full_like": (lambda x, g: B.full_like(x, 2.0), (4, 6)),
    "Graph.philox": (lambda x, g: g.philox(g.input("s", (6,), "uint32"), (4,))[0], (4, 6)),
    "Graph.philox_uniform": (
        lambda x, g: g.philox_uniform(g.input("s", (6,), "uint32"), (4,))[0], (4, 6)),
    "Tensor.permute": (lambda x, g: x.permute(1, 0), (4, 6)),
    "Tensor.transpose": (lambda x, g: x.transpose(0, 1), (4, 6)),
    "Tensor.swapaxes": (lambda x, g: x.swapaxes(0, 1), (4, 6)),
    "Tensor.swapdims": (lambda x, g: x.swapdims(0, 1), (4, 6)),
    "Tensor.t": (lambda x, g: x.t(), (4, 6)),
    "Tensor.expand": (lambda x, g: x.expand(2, 4, 6), (4, 6)),
    "Tensor.expand_as": (lambda x, g: x[:1].expand_as(x), (4, 6)),
    "Tensor.broadcast_to": (lambda x, g: x.broadcast_to((3, 4, 6)), (4, 6)),
    "Tensor.narrow": (lambda x, g: x.narrow(1, 1, 2), (4, 6)),
    "Tensor.__getitem__": (lambda x, g: x[1, 2:], (4, 6)),
    "Tensor.select": (lambda x, g: x.select(1, 2), (4, 6)),
    "Tensor.squeeze": (lambda x, g: x.squeeze(0), (1, 6)),
    "Tensor.unsqueeze": (lambda x, g: x.unsqueeze(1), (4, 6)),
    "Tensor.unfold": (lambda x, g: x.unfold(1, 2, 2), (4, 6)),
    "Tensor.diagonal": (lambda x, g: x.diagonal(1), (4, 6)),
    "Tensor.as_strided": (lambda x, g: x.as_strided((2, 2), (1, 6), 1), (4, 6)),
    "Tensor.reshape": (lambda x, g: x.reshape(6, 4), (4, 6)),
    "Tensor.reshape_as": (lambda x, g: x.reshape_as(x.t()), (4, 6)),
    "Tensor.view": (lambda x, g: (x.view(24), x.view("int8")), (4, 6)),
    "Tensor.view_as": (lambda x, g: x.view_as(x.t()), (4, 6)),
    "Tensor.flatten": (lambda x, g: x.flatten(), (4, 6)),
    "Tensor.split": (lambda x, g: x.split(2, 1)[0], (4, 6)),
    "Tensor.split_with_sizes": (lambda x, g: x.split_with_sizes([2, 4], 1)[1], (4, 6)),
    "Tensor.unsafe_split": (lambda x, g: x.unsafe_split(3, 1)[1], (4, 6)),
    "Tensor.contiguous": (lambda x, g: x.t().contiguous(), (4, 6)),
    "Tensor.to": (lambda x, g: (x.to("float16"), x.to(memory_format="contiguous_format")),
                  (4, 6)),
    "torch.pixel_shuffle": (lambda x, g: B.pixel_shuffle(x, 2), (1, 4, 2, 3)),
    "torch.pixel_unshuffle": (lambda x, g: B.pixel_unshuffle(x, 2), (1, 1, 4, 6)),
    "Tensor.clone": (lambda x, g: x.clone(), (4, 6)),
    "Tensor.flip": (lambda x, g: x.flip(0), (4, 6)),
    "Tensor.fliplr": (lambda x, g: x.fliplr(), (4, 6)),
    "Tensor.flipud": (lambda x, g: x.flipud(), (4, 6)),
    "Value.copy_to": (lambda x, g: x.copy_to((1, 4)), (4, 6)),
    "Value.strided_copy": (
        lambda x, g: x.strided_copy((6, 4), Layout((6, 4), (1, 6)), Layout((6, 4), (4, 1))),
        (4, 6)),
    "Value.masked_copy": (
        lambda x, g: x.masked_copy((4, 8), Layout((4, 8), (6, 1)), Layout((4, 8), (8, 1)),
                                   [((0, 1), 0, 6)], 0.0),
        (4, 6)),
    "Value.framed_copy": (
        lambda x, g: x.framed_copy((4, 6), Layout((4, 6), (6, 1)), Layout((4, 6), (8, 1), 1),
                                   [(0, 0), (1, 1)], 0.0, layout=Layout.contiguous((4, 8))),
        (4, 6)),
    "Graph.fill": (lambda x, g: g.fill(Layout((2, 3), (1, 2)), 1.5), (4, 6)),
    "Value.pack": (lambda x, g: x.pack("NCHW4"), (1, 4, 2, 3)),
    "Value.unpack": (lambda x, g: x.unpack("NCHW4", 3), (1, 1, 2, 3, 4)),
    "torch.pad": (lambda x, g: B.pad(x, (1, 1)), (4, 6)),
    "Tensor.type_as": (lambda x, g: x.type_as(x.half()), (4, 6)),
    **{f"Tensor.{m}": (_method(m), (4, 6))
       for m in ("float", "double", "half", "bfloat16", "int", "long", "short", "char",
                 "byte", "bool")},
    "torch.cat": (lambda x, g: B.cat([x, x], 1), (4, 6)),
    "Tensor.copy_": (lambda x, g: x.clone().copy_(x.half()), (4, 6)),
    "Tensor.fill_": (lambda x, g: x.clone()[1:].fill_(2.5), (4, 6)),
    "Tensor.zero_": (lambda x, g: x.clone().zero_(), (4, 6)),
    "Graph.output": (lambda x, g: x, (4, 6)),
}


def test_each_surface_name_builds_its_op() -> None:
    for cls in op_classes():
        for entry in cls.surface:
            call, sizes = BUILDS[entry]
            g = Graph("surface")
            x = g.input("x", sizes, "float32" if entry != "Tensor.float" else "float16")
            out = call(x, g)
            g.output(*(out if isinstance(out, tuple) else (out,)))
            built = {type(op) for op in g.ops}
            assert cls in built, f"{entry} builds {sorted(c.name for c in built)}, not {cls.name}"


# -- the tables can fail ---------------------------------------------------------------------
def test_a_table_refuses_a_class_twice_and_names_the_undecided() -> None:
    table: OpRules[Any] = OpRules("rule")
    table.register(O.PermuteOp)(lambda: None)
    with pytest.raises(TypeError, match="PermuteOp is registered twice"):
        table.declare_none(O.PermuteOp, "why")
    table.declare_none(O.FlipOp, "a reason")
    assert table.why_none(O.FlipOp) == "a reason" and table.lookup(O.FlipOp) is None
    assert table.undecided([O.PermuteOp, O.FlipOp, O.CatOp]) == [O.CatOp]


class _Opaque(O.ViewOp):
    """An op class no table knows (not in the parser's registry either)."""

    name = "opaque"

    def result_layout(self, layout: Layout) -> Layout:
        return layout


ADJOINTS.declare_none(_Opaque, "it hides what it reads")


def test_an_op_without_adjoint_is_refused_with_its_reason() -> None:
    g = Graph("opaque")
    x = g.input("x", (2, 3), "float32")
    y = B.emit(g, _Opaque, (x,), {})
    g.output(y.contiguous())
    with pytest.raises(UnsupportedError, match="'opaque' has no adjoint in stridec: it hides"):
        adjoint(g)


def test_autograd_through_a_refused_op_fails_at_the_call_not_at_backward() -> None:
    """An explicit copy (IR after lowering) has no adjoint: a differentiable call refuses
    before running, and under no_grad the same call runs."""
    g = stridec.parse(
        "graph @lowered {\n"
        '  %x = input {name = "x"} : tensor<2x3xf32>\n'
        "  %0 = copy %x {layout = strided<[2, 1], offset: 0>, space = [3, 2], "
        "src = strided<[1, 3], offset: 0>, dst = strided<[2, 1], offset: 0>} : tensor<3x2xf32>\n"
        "  output %0\n"
        "}\n")
    fn = stridec.compile(g, backend="reference")
    a = torch.randn(2, 3, requires_grad=True)
    with pytest.raises(UnsupportedError, match=r"'strided_copy' has no adjoint.*torch.no_grad\(\)"):
        fn(a)
    with torch.no_grad():
        assert torch.equal(fn(a), a.t())
