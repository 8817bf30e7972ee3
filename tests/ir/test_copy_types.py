"""The copy types (`stridec.ir.ops.CopyOp`): each takes the attributes it needs and no
others, and the one `copy` of older text is read as the type its attributes call for."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import stridec
from stridec.errors import StridecError, VerificationError
from stridec.ir import ops as O
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout

ROWS = Layout.contiguous((2, 3))
SPACE = (2, 3)
STRIDED = {"space": SPACE, "src": ROWS, "dst": ROWS}
MASKS = [((0, 1), 0, 2)]
FILL = {"layout": ROWS, "dtype": "float32", "space": SPACE, "dst": ROWS, "fill": 1.5}

# (type, operands: "x" a source, "" none; attributes) that each type accepts.
VALID: list[tuple[type, str, dict[str, Any]]] = [
    (O.NaturalCopyOp, "x", {"layout": Layout((2, 3), (1, 2))}),
    (O.StridedCopyOp, "x", dict(STRIDED)),
    (O.MaskedCopyOp, "x", {**STRIDED, "masks": MASKS}),
    (O.MaskedCopyOp, "x", {**STRIDED, "masks": MASKS, "fill": 0.0}),
    (O.FramedCopyOp, "x", {**STRIDED, "layout": Layout.contiguous((2, 5)),
                           "dst": Layout(SPACE, (5, 1), 1), "fill": 0.0,
                           "frame": [(0, 0), (1, 1)]}),
    (O.FillOp, "", dict(FILL)),
]

# (type, operands, attributes, the error's words): an attribute a type needs is missing,
# or one it must not have is given; each error names the attribute.
INVALID: list[tuple[type, str, dict[str, Any], str]] = [
    (O.NaturalCopyOp, "x", {"space": SPACE}, r"copy: takes no 'space' \(strided_copy or "
     r"masked_copy or framed_copy or fill does\)"),
    (O.NaturalCopyOp, "x", {"fill": 0.0}, r"copy: takes no 'fill'"),
    (O.StridedCopyOp, "x", {"space": SPACE, "src": ROWS}, r"strided_copy: missing attribute 'dst'"),
    (O.StridedCopyOp, "x", {"space": SPACE, "dst": ROWS}, r"strided_copy: missing attribute 'src'"),
    (O.StridedCopyOp, "x", {"src": ROWS, "dst": ROWS}, r"strided_copy: missing attribute 'space'"),
    (O.StridedCopyOp, "x", {**STRIDED, "masks": MASKS},
     r"strided_copy: takes no 'masks' \(masked_copy or framed_copy does\)"),
    (O.StridedCopyOp, "x", {**STRIDED, "fill": 0.0}, r"strided_copy: takes no 'fill'"),
    (O.StridedCopyOp, "x", {**STRIDED, "frame": [(1, 0), (0, 0)]},
     r"strided_copy: takes no 'frame' \(framed_copy does\)"),
    (O.StridedCopyOp, "", dict(STRIDED), r"strided_copy: expected a source"),
    (O.MaskedCopyOp, "x", dict(STRIDED), r"masked_copy: missing attribute 'masks'"),
    (O.MaskedCopyOp, "x", {**STRIDED, "masks": []}, r"masked_copy: 'masks' must hold at least one"),
    (O.MaskedCopyOp, "x", {**STRIDED, "masks": MASKS, "frame": [(1, 0), (0, 0)]},
     r"masked_copy: takes no 'frame'"),
    (O.FramedCopyOp, "x", {**STRIDED, "fill": 0.0}, r"framed_copy: missing attribute 'frame'"),
    (O.FramedCopyOp, "x", {**STRIDED, "frame": [(1, 0), (0, 0)]},
     r"framed_copy: missing attribute 'fill'"),
    (O.FramedCopyOp, "x", {**STRIDED, "fill": 0.0, "frame": [(0, 0), (0, 0)]},
     r"framed_copy: 'frame' \[\[0, 0\], \[0, 0\]\] frames nothing"),
    (O.FramedCopyOp, "x", {**STRIDED, "fill": 0.0, "frame": [(1, 1)]},
     r"framed_copy: 'frame' must be one \[before, after\] per space dim \(2\)"),
    (O.FillOp, "", {k: v for k, v in FILL.items() if k != "fill"},
     r"fill: missing attribute 'fill'"),
    (O.FillOp, "", {k: v for k, v in FILL.items() if k != "layout"},
     r"fill: missing attribute 'layout'"),
    (O.FillOp, "", {k: v for k, v in FILL.items() if k != "dtype"},
     r"fill: missing attribute 'dtype'"),
    (O.FillOp, "", {**FILL, "src": ROWS}, r"fill: takes no 'src' \(strided_copy or masked_copy "
     r"or framed_copy does\)"),
    (O.FillOp, "", {**FILL, "masks": MASKS}, r"fill: takes no 'masks'"),
    (O.FillOp, "x", dict(FILL), r"fill: expected no operand; got 1 operand\(s\)"),
    (O.FillOp, "", {**FILL, "dtype": "int8", "fill": 300},
     r"fill: attribute 'fill' = 300 does not fit dtype int8"),
]


def _operands(g: Graph, which: str) -> list:
    return [g.input("x", (2, 3), "float32")] if which else []


@pytest.mark.parametrize("cls, which, attrs", VALID, ids=[c.name for c, *_ in VALID])
def test_each_type_takes_its_attributes(cls: type, which: str, attrs: dict) -> None:
    g = Graph("ok")
    op = g.append(cls(_operands(g, which), attrs))
    g.output(op.result)
    g.verify()
    assert isinstance(op, O.CopyOp) and type(op) is O.copy_type(len(op.operands), attrs)
    parsed = stridec.parse(str(g))
    assert type(parsed.ops[-2]) is cls and str(parsed) == str(g)


@pytest.mark.parametrize("cls, which, attrs, words", INVALID,
                         ids=[f"{c.name}-{i}" for i, (c, *_) in enumerate(INVALID)])
def test_a_wrong_attribute_set_is_refused_by_name(
    cls: type, which: str, attrs: dict, words: str
) -> None:
    g = Graph("bad")
    with pytest.raises(StridecError, match=words):
        cls(_operands(g, which), attrs)


def test_the_base_classes_are_no_ops_of_the_text() -> None:
    names = {c.name for c in O.COPY_TYPES}
    assert names == {"copy", "strided_copy", "masked_copy", "framed_copy", "fill"}
    for base in (O.CopyOp, O.ExplicitCopyOp):
        assert base not in stridec.ir.graph.OP_REGISTRY.values()


OLD = """graph @old {
  %x = input {name = "x"} : tensor<2x3xf32>
  %0 = copy %x {layout = strided<[1, 2], offset: 0>} : tensor<2x3xf32, strided<[1, 2], offset: 0>>
  %1 = copy %x {layout = strided<[2, 1], offset: 0>, space = [3, 2],
                src = strided<[1, 3], offset: 0>, dst = strided<[2, 1], offset: 0>}
                : tensor<3x2xf32>
  %2 = copy %x {layout = strided<[4, 1], offset: 0>, space = [2, 4],
                src = strided<[3, 1], offset: 0>, dst = strided<[4, 1], offset: 0>,
                masks = [[[0, 1], 0, 3]], fill = -1.0} : tensor<2x4xf32>
  %3 = copy %x {layout = strided<[5, 1], offset: 0>, space = [2, 3],
                src = strided<[3, 1], offset: 0>, dst = strided<[5, 1], offset: 1>,
                fill = 0.5, frame = [[0, 0], [1, 1]]} : tensor<2x5xf32>
  %4 = copy {layout = strided<[3, 1], offset: 0>, dtype = f32, space = [2, 3],
             dst = strided<[3, 1], offset: 0>, fill = 2.0} : tensor<2x3xf32>
  %5 = copy %x, %4 {space = [1, 3], src = strided<[3, 1], offset: 0>,
                    dst = strided<[3, 1], offset: 3>, fill = 9.0, frame = [[0, 0], [0, 0]]}
  output %0, %1, %2, %3, %5
}
"""


def test_the_old_spelling_reads_as_the_types() -> None:
    """Text written with one `copy` for every form: each op is the type its attributes
    call for; an all-zero frame and a fill no point gets (no masks) are what the old op
    made of them, nothing."""
    g = stridec.parse(OLD)
    assert [op.name for op in g.ops[1:-1]] == [
        "copy", "strided_copy", "masked_copy", "framed_copy", "fill", "strided_copy"]
    assert "fill" not in g.ops[6].attrs and "frame" not in g.ops[6].attrs
    assert str(stridec.parse(str(g))) == str(g)
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    natural, transposed, masked, framed, filled = stridec.run_reference(g, x)
    assert torch.equal(natural, x) and natural.stride() == (1, 2)
    assert torch.equal(transposed, x.t())
    assert torch.equal(masked, torch.nn.functional.pad(x, (0, 1), value=-1.0))
    assert torch.equal(framed, torch.nn.functional.pad(x, (1, 1), value=0.5))
    assert torch.equal(filled, torch.cat([torch.full((1, 3), 2.0), x[:1]]))


def test_the_old_spelling_still_refuses_what_no_type_takes() -> None:
    with pytest.raises(stridec.ParseError, match="fill: takes no 'src'"):
        stridec.parse(
            'graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            "  %0 = copy {layout = strided<[3, 1], offset: 0>, dtype = f32, space = [2, 3], "
            "src = strided<[3, 1], offset: 0>, dst = strided<[3, 1], offset: 0>, fill = 1.0} "
            ": tensor<2x3xf32>\n  output %0\n}\n")
    with pytest.raises(stridec.ParseError, match="unknown attribute 'index' for 'copy'"):
        stridec.parse(
            'graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            "  %0 = copy %x {index = 1}\n  output %0\n}\n")


def test_a_new_name_refuses_the_attributes_of_another_type() -> None:
    """Only `copy` reads the old spelling: `strided_copy` with masks is refused."""
    with pytest.raises(stridec.ParseError, match="unknown attribute 'masks' for 'strided_copy'"):
        stridec.parse(
            'graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            "  %0 = strided_copy %x {space = [2, 3], src = strided<[3, 1], offset: 0>, "
            "dst = strided<[3, 1], offset: 0>, masks = [[[0, 1], 0, 2]]} : tensor<2x3xf32>\n"
            "  output %0\n}\n")


def test_the_base_is_no_op_to_build() -> None:
    g = Graph("base")
    x = g.input("x", (2, 3), "float32")
    for base in (O.CopyOp, O.ExplicitCopyOp):
        with pytest.raises(VerificationError, match="the base of the copy types"):
            base([x], {})
    assert x.uses == []
