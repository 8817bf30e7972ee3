"""`stridec.trace(..., dynamic=...)`: which dims become symbols, how torch's equalities
(cat, stack) unify them, and that the symbolic trace bound to the example's sizes is the
static trace of the same function."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.errors import CallError, LayoutError
from stridec.ir.symbols import Sym, symbol

FUNCTIONS = {
    "nhwc": (lambda x: x.permute(0, 2, 3, 1).contiguous(), [(2, 3, 4, 5)]),
    "heads": (lambda x: x.view(x.shape[0], x.shape[1], 2, -1).transpose(1, 2), [(3, 5, 8)]),
    "pad": (lambda x: F.pad(x, (1, 1)).t().contiguous(), [(4, 3)]),
    "cat": (lambda x, y: torch.cat([x, y], 1), [(2, 3), (2, 5)]),
    "stack": (lambda x, y: torch.stack([x, y.flip(0)], 2), [(3, 4), (3, 4)]),
    "steps": (lambda x: x[::2, 1:].flip(1), [(5, 4)]),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_bound_symbolic_trace_is_the_static_trace(name: str) -> None:
    fn, shapes = FUNCTIONS[name]
    examples = [torch.randn(s) for s in shapes]
    graph = stridec.trace(fn, *examples, dynamic={i: [0] for i in range(len(examples))})
    assert graph.symbols() and isinstance(graph.inputs[0].type.sizes[0], Sym)
    bindings = {graph.symbols()[0]: shapes[0][0]}
    assert str(graph.bind(bindings)) == str(stridec.trace(fn, *examples))


def test_dynamic_true_marks_every_dim_above_one() -> None:
    g = stridec.trace(lambda x: x.t(), torch.randn(3, 1, 4).squeeze(1), dynamic=True)
    assert g.inputs[0].type.sizes == (symbol("s0"), symbol("s1"))
    g = stridec.trace(lambda x: x.flatten(), torch.randn(1, 4), dynamic=True)
    assert g.inputs[0].type.sizes == (1, symbol("s0"))


def test_named_symbols_and_input_names() -> None:
    g = stridec.trace(lambda x, y: torch.cat([x, y]), torch.randn(2, 3), torch.randn(4, 3),
                      dynamic={"x": {0: "N"}, 1: {0: "M"}})
    assert g.inputs[0].type.sizes == (symbol("N"), 3)
    assert str(g.outputs[0].type) == "tensor<(M+N)x3xf32>"


def test_cat_and_stack_unify_the_sizes_torch_requires_equal() -> None:
    g = stridec.trace(lambda x, y: torch.cat([x, y], 1), torch.randn(2, 3), torch.randn(2, 5),
                      dynamic=True)
    assert g.symbols() == ("s0", "s1", "s3")  # y's rows are x's: s2 became s0
    assert str(g.outputs[0].type) == "tensor<s0x(s1+s3)xf32>"
    g = stridec.trace(lambda x, y: torch.cat([x, y], 1), torch.randn(2, 3), torch.randn(2, 5),
                      dynamic={0: [0]})
    assert g.symbols() == ()  # torch requires x's rows to be y's static 2
    assert g.inputs[0].type.sizes == (2, 3)
    g = stridec.trace(lambda x, y: torch.stack([x, y]), torch.randn(2, 3), torch.randn(2, 3),
                      dynamic=True)
    assert g.symbols() == ("s0", "s1")


def test_expand_unifies_a_size_with_its_target() -> None:
    def fn(x, y):
        return x.expand_as(y).contiguous(), x.broadcast_to(y.shape)

    g = stridec.trace(fn, torch.randn(3, 1), torch.randn(3, 4), dynamic=True)
    assert g.symbols() == ("s0", "s2")  # x's rows are y's: s1 (y's rows) became s0
    assert str(g.outputs[0].type) == "tensor<s0xs2xf32>"


def test_shape_holds_the_symbols() -> None:
    seen = []

    def fn(x):
        seen.append(x.shape)
        return x.reshape(x.shape[0] * x.shape[1], -1)

    g = stridec.trace(fn, torch.randn(2, 3, 4), dynamic={0: [0, 1]})
    assert seen[-1] == (symbol("s0"), symbol("s1"), 4)
    assert g.outputs[0].type.sizes == (symbol("s0") * symbol("s1"), 4)
    static = stridec.trace(fn, torch.randn(2, 3, 4))
    assert isinstance(seen[-1], torch.Size) and str(static) == str(g.bind({"s0": 2, "s1": 3}))


def test_a_view_valid_only_for_some_values_is_refused() -> None:
    with pytest.raises(LayoutError, match="s0"):
        stridec.trace(lambda x: x.view(-1, 4), torch.randn(2, 6), dynamic={0: [0]})
    with pytest.raises(LayoutError, match="s0"):
        stridec.trace(lambda x: x.squeeze(0), torch.randn(2, 6), dynamic={0: [0]})


@pytest.mark.parametrize(
    "dynamic, message",
    [
        ({3: [0]}, "neither an input index"),
        ({"z": [0]}, "neither an input index"),
        ({0: [2]}, "out of range for its rank 2"),
        ("yes", "must be True, False or a mapping"),
    ],
)
def test_bad_dynamic_arguments(dynamic: object, message: str) -> None:
    with pytest.raises(CallError, match=message):
        stridec.trace(lambda x: x.t(), torch.randn(2, 3), dynamic=dynamic)
