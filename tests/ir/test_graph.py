"""The graph structure: `verify()` catches broken IR (each case built by hand, past the
builder's checks), use lists stay consistent through `replace_all_uses_with` and
`erase`, `clone()` and `specialize()` copy faithfully, and printing is deterministic.
"""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec import Graph, Layout, TensorType
from stridec.errors import VerificationError
from stridec.ir import ops as O
from stridec.ir.graph import Op, Value


def consistent(g: Graph) -> None:
    """Use lists agree with operands both ways, by brute force (and `verify` agrees)."""
    expected: dict[int, list[tuple[Op, int]]] = {}
    for op in g.ops:
        for i, v in enumerate(op.operands):
            expected.setdefault(id(v), []).append((op, i))
    for op in g.ops:
        for r in op.results:
            got = sorted((id(o), i) for o, i in r.uses)
            assert got == sorted((id(o), i) for o, i in expected.get(id(r), []))
    g.verify()


def sample() -> tuple[Graph, dict[str, Value]]:
    g = Graph("sample")
    x = g.input("x", (2, 3, 4), "float16")
    y = g.input("y", (4, 3), "float32")
    p = x.permute(2, 1, 0)
    c = stridec.cat([p[..., 0].to("float32"), y], 1)
    s = c.split(2, 0)
    out = [s[0].contiguous(), s[1], x.flip(0)]
    g.output(*out)
    return g, {"x": x, "y": y, "p": p, "c": c}


# -- verify() catches broken IR -----------------------------------------------------------


def test_a_built_graph_verifies() -> None:
    g, _ = sample()
    g.verify()
    consistent(g)


def test_operand_defined_after_use() -> None:
    g, _ = sample()
    ops = list(g.ops)
    i = next(k for k, op in enumerate(ops) if op.name == "permute")
    ops[i], ops[i + 1] = ops[i + 1], ops[i]  # the select of p now comes before p
    g.set_ops(ops)
    with pytest.raises(VerificationError, match=r"op #\d+ 'select': operand 0 is not defined "
                                                r"before its use \(by 'permute'\)"):
        g.verify()


def test_operand_from_another_graph() -> None:
    g, h = Graph("g"), Graph("h")
    x = g.input("x", (2,), "float32")
    foreign = O.FlipOp([x], {"dims": (0,)})
    h.input("y", (2,), "float32")
    h.insert(1, foreign)  # insert does not check; verify must
    with pytest.raises(VerificationError, match=r"op #1 'flip': operand 0 is not defined"):
        h.verify()


def test_output_not_last() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t())
    extra = O.FlipOp([x], {"dims": (0,)})  # g.append refuses ops after output: by hand
    g.set_ops([*g.ops, extra])
    with pytest.raises(VerificationError, match=r"op #2 'output': 'output' must be the last op"):
        g.verify()


def test_two_outputs() -> None:
    g = Graph("g")
    x = g.input("x", (2,), "float32")
    g.output(x)
    with pytest.raises(VerificationError, match="output: graph 'g' already has an output op"):
        g.output(x)
    g.insert(1, O.OutputOp([x], {}))
    with pytest.raises(VerificationError, match="'output' must be the last op"):
        g.verify()


def test_duplicate_input_names() -> None:
    g = Graph("g")
    x = g.input("x", (2,), "float32")
    y = g.input("x", (3,), "float32")
    g.output(x, y)
    with pytest.raises(VerificationError, match=r"op #1 'input': input name 'x' is used twice"):
        g.verify()


def test_result_type_mismatch() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    wrong = [TensorType((3, 2), "float32")]  # the layout should be strided<[1, 3]>
    g.append(O.PermuteOp([x], {"dims": (1, 0)}, wrong))
    with pytest.raises(VerificationError, match=r"op #1 'permute': result types .* differ from "
                                                r"the inferred .*strided<\[1, 3\], offset: 0>"):
        g.verify()


@pytest.mark.parametrize("dtype", ["float16", "int32"])
def test_result_dtype_mismatch(dtype: str) -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    g.append(O.CastOp([x], {"dtype": "bfloat16"}, [TensorType((2, 3), dtype)]))
    with pytest.raises(VerificationError, match=r"op #1 'cast': result types"):
        g.verify()


def test_wrong_operand_count() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    op = g.append(O.PermuteOp([x], {"dims": (1, 0)}))
    op.operands.append(x)  # by hand, past the constructor's check
    x.uses.append((op, 1))
    with pytest.raises(VerificationError, match=r"op #1 'permute': expected 1 operand\(s\); got 2"):
        g.verify()


def test_variadic_op_without_operands() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    op = g.append(O.CatOp([x], {"dim": 0}))
    op.operands.clear()
    x.uses.clear()
    with pytest.raises(VerificationError, match=r"op #1 'cat': cat: expected at least one tensor"):
        g.verify()


def test_attributes_that_no_longer_fit_the_operands() -> None:
    """After a by-hand operand swap, pad's pairs exceed the new operand's rank."""
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    s = g.input("s", (), "float32")
    op = g.append(O.PadOp([x], {"pad": (1, 1, 1, 1)}))
    op.set_operand(0, s)
    with pytest.raises(VerificationError, match=r"op #2 'pad': pad: 'pad' must hold pairs"):
        g.verify()


def test_use_list_out_of_step() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    t = x.t()
    x.uses.clear()
    with pytest.raises(VerificationError, match=r"op #1 'transpose': operand 0 is missing from "
                                                r"its use list"):
        g.verify()
    x.uses.append((t.owner, 0))
    g.verify()
    stray = O.FlipOp([x], {"dims": (0,)})  # built, never appended: a use outside the graph
    with pytest.raises(VerificationError, match=r"op #0 'input': result 0 lists a use by 'flip'"):
        g.verify()
    stray.drop_uses()
    g.verify()


def test_op_not_owned_by_the_graph() -> None:
    g = Graph("g")
    x = g.input("x", (2,), "float32")
    g.ops.append(O.FullOp([], {"sizes": (2,), "value": 0, "dtype": "int8"}))  # behind its back
    g.output(x)
    with pytest.raises(VerificationError, match=r"op #1 'full': is not owned by graph 'g'"):
        g.verify()


def test_as_strided_outside_its_root_storage_fails_verification() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    g.append(O.AsStridedOp([x], {"sizes": (7,), "strides": (1,), "offset": 0}))
    with pytest.raises(VerificationError, match=r"op #1 'as_strided': as_strided: .*outside a "
                                                r"storage of 6 elements"):
        g.verify()


# -- use lists --------------------------------------------------------------------------


def test_replace_all_uses_with() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    a = x.t().t()  # the same type as x
    assert a.type == x.type
    b = stridec.cat([a, a, x], 0)  # `a` used twice by one op
    c = a.contiguous()
    g.output(b, c, a)
    consistent(g)
    assert len(a.uses) == 4 and {op.name for op in a.users} == {"cat", "contiguous", "output"}
    a.replace_all_uses_with(x)
    assert a.uses == []
    assert b.owner.operands == [x, x, x] and c.owner.operands == [x] and g.outputs[2] is x
    consistent(g)
    # the two transposes are dead now: erase them, last first
    inner = a.owner.operands[0]
    g.erase(a.owner)
    g.erase(inner.owner)
    assert x.uses and all(op.graph is g for op in x.users)
    consistent(g)
    t = torch.randn(2, 3)
    got_b, got_c, got_a = stridec.run_reference(g, t)
    assert torch.equal(got_b, torch.cat([t, t, t], 0)) and torch.equal(got_c, t)
    assert torch.equal(got_a, t)


def test_erase_refuses_an_op_in_use() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    y = x.t()
    g.output(y)
    with pytest.raises(VerificationError, match=r"transpose: cannot erase, result 0 still used"):
        g.erase(y.owner)
    consistent(g)


def test_erase_drops_the_uses() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    dead = stridec.cat([x, x.flip(1)], 1)
    g.output(x)
    cat, flip = dead.owner, dead.owner.operands[1].owner
    g.erase(cat)
    assert cat.graph is None and cat not in g.ops
    assert x.uses == [(flip, 0), (g.output_op, 0)]
    g.erase(flip)
    assert x.uses == [(g.output_op, 0)]
    consistent(g)


def test_set_operand() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3), "float32")
    y = g.input("y", (2, 3), "float32")
    s = stridec.cat([x, x], 0)
    s.owner.set_operand(1, y)
    assert x.uses == [(s.owner, 0)] and y.uses == [(s.owner, 1)]
    g.output(s)
    consistent(g)


def test_a_value_of_a_refused_op_leaves_no_use() -> None:
    g, h = Graph("g"), Graph("h")
    x = g.input("x", (2,), "float32")
    y = h.input("y", (2,), "float32")
    with pytest.raises(VerificationError, match="belongs to another graph"):
        stridec.cat([x, y])
    assert x.uses == [] and y.uses == []


def test_root_walks_back_through_views_only() -> None:
    g = Graph("g")
    x = g.input("x", (2, 3, 4), "float32")
    v = x.permute(2, 0, 1)[1:]
    assert v.root() is x
    copied = v.reshape(-1)  # not viewable: a copy, its own root
    assert copied.root() is copied and copied[2:].root() is copied
    assert x.reshape(-1).root() is x
    flipped = v.flip(0)  # torch's flip is new memory: its own root, as a copy is
    assert flipped.root() is flipped and flipped[1:].root() is flipped
    assert x.contiguous().root() is x and v.contiguous().root() is not x


# -- clone, specialize, printing ----------------------------------------------------------


def test_clone_prints_identically_and_is_independent() -> None:
    g, _ = sample()
    c = g.clone()
    assert str(c) == str(g)
    assert all(a is not b for a, b in zip(g.ops, c.ops, strict=True))
    c.verify()
    consistent(c)
    for op in c.ops:  # every value of the clone belongs to the clone
        for v in op.operands:
            assert v.owner.graph is c
    c.erase(c.ops[-1])  # the clone's output op
    assert g.output_op is not None and str(g) != str(c)
    x = torch.randn(2, 3, 4).to(torch.float16)
    y = torch.randn(4, 3)
    for a, b in zip(stridec.run_reference(g, x, y), stridec.run_reference(g.clone(), x, y),
                    strict=True):
        assert torch.equal(a, b)


def test_specialize_rewrites_the_view_layouts() -> None:
    g = Graph("g")
    x = g.input("x", (3, 4), "float32")
    v = x.t()[1:]
    g.output(v)
    layout = Layout((3, 4), (1, 3), 2)  # column-major at offset 2
    s = g.specialize({"x": layout})
    s.verify()
    assert s.inputs[0].type.layout == layout
    t = torch.arange(20.0).as_strided((3, 4), (1, 3), 2)
    e = t.t()[1:]
    assert s.outputs[0].type.layout == Layout(e.shape, e.stride(), e.storage_offset())
    assert str(g.specialize({})) == str(g)
    assert g.inputs[0].type.layout == Layout.contiguous((3, 4))  # the original is unchanged


def test_printing_is_deterministic() -> None:
    texts = {str(sample()[0]) for _ in range(3)}
    assert len(texts) == 1
    g, _ = sample()
    assert str(g) == str(g)
    text = str(g)
    # the names are positional: values print as %x, %y, then %0, %1, ... in order
    assert "%x = input" in text and "%y = input" in text and "%0 = permute %x" in text
    assert text.startswith("graph @sample {\n") and text.endswith("}\n")


def test_printing_does_not_depend_on_construction_details() -> None:
    """The same program built through the builder and through op classes prints the same."""
    g = Graph("same")
    x = g.input("x", (2, 3), "int8")
    g.output(x.t().contiguous())
    h = Graph("same")
    hx = h.append(O.InputOp([], {"name": "x", "sizes": (2, 3), "dtype": "i8"})).result
    ht = h.append(O.TransposeOp([hx], {"dim0": 0, "dim1": 1})).result
    hc = h.append(O.ContiguousOp([ht], {})).result
    h.append(O.OutputOp([hc], {}))
    assert str(g) == str(h)


def test_ops_after_output_are_refused() -> None:
    g = Graph("g")
    x = g.input("x", (2,), "float32")
    g.output(x)
    with pytest.raises(VerificationError, match="output"):
        x.flip(0)
    assert x.uses == [(g.output_op, 0)]
    consistent(g)
