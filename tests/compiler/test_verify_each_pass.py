"""Verification after every pass is incremental (`verify_graph(graph, incremental=True)`)
and still catches what the full check catches, naming the pass: an op a pass creates with
a wrong type, attributes rewritten on an op no pass touched since it was verified, an
operand redirected, a class swapped, a view chain re-rooted under an `as_strided`. A
property test holds the incremental verdict to the full one on randomly damaged graphs;
counting `infer_types` calls shows what is skipped. Last, the use-list upkeep made linear
for speed (`replace_all_uses_with`, `dce`, Philox fusion, `plan-memory`) keeps results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_draw import Draw
from test_semantics import _random_case

import stridec
from stridec.compiler.pass_manager import (
    DEFAULT_PIPELINE,
    PASS_REGISTRY,
    Pass,
    PassManager,
    parse_pipeline,
)
from stridec.compiler.passes.dce import DeadCodeElimination
from stridec.errors import InternalError, VerificationError
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op
from stridec.ir.layout import Layout
from stridec.ir.types import TensorType
from stridec.ir.verifier import verify_graph


def _nhwc() -> Graph:
    g = stridec.Graph("nhwc")
    x = g.input("x", (2, 3, 4, 5))
    g.output(x.permute(0, 2, 3, 1).contiguous())
    return g


def _first(graph: Graph, name: str) -> Op:
    return next(op for op in graph.ops if op.name == name)


#: A wrong type for `x.permute(0, 2, 3, 1)` of a contiguous (2, 3, 4, 5) x: right sizes,
#: but row-major strides where the permute has [60, 5, 1, 20].
_WRONG = TensorType((2, 4, 5, 3), "float32")


def _test_pass(name: str, action: Callable[[Graph], None]) -> type[Pass]:
    """A registered-on-demand pass named `name` that applies `action` to the graph."""

    @dataclass
    class _Action(Pass):
        def run(self, graph: Graph) -> None:
            action(graph)

    _Action.name = name  # type: ignore[misc]
    return _Action


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, Callable], None]]:
    parse_pipeline("")  # loads the real passes first

    def add(name: str, action: Callable[[Graph], None]) -> None:
        monkeypatch.setitem(PASS_REGISTRY, name, _test_pass(name, action))

    yield add


# -- (a) a pass that creates an op with a wrong type ---------------------------------------
def _insert_permute(graph: Graph, op: Op) -> None:
    """Put `op` (a permute of x) right after x and make the contiguous read it."""
    graph.insert(1, op)
    _first(graph, "contiguous").set_operand(0, op.result)


def test_a_new_op_given_a_wrong_type_is_caught_naming_the_pass(register: Any) -> None:
    def create(graph: Graph) -> None:
        x = graph.inputs[0]
        _insert_permute(graph, O.PermuteOp([x], {"dims": (0, 2, 3, 1)}, [_WRONG]))

    register("test-creates-wrong-type", create)
    pm = PassManager.parse("canonicalize,fold-views,test-creates-wrong-type,dce")
    with pytest.raises(
        InternalError,
        match=r"after pass 'test-creates-wrong-type': op #1 'permute': result types .* differ "
        r"from the inferred",
    ):
        pm.run(_nhwc())


def test_a_new_op_retyped_after_inference_is_caught_naming_the_pass(register: Any) -> None:
    def create(graph: Graph) -> None:
        op = O.PermuteOp([graph.inputs[0]], {"dims": (0, 2, 3, 1)})  # inferred: right
        op.results[0].type = _WRONG  # then overwritten
        _insert_permute(graph, op)

    register("test-retypes-new-op", create)
    error = r"after pass 'test-retypes-new-op': op #1 'permute'"
    with pytest.raises(InternalError, match=error):
        PassManager.parse("canonicalize,test-retypes-new-op").run(_nhwc())


# -- (b) a pass that rewrites attributes of an op verified earlier --------------------------
@pytest.mark.parametrize(
    ("attrs", "error"),
    [
        ({"dims": (0, 3, 1, 2)}, r"result types .* differ from the inferred"),  # valid, wrong
        ({"dims": (0, 0, 1, 2)}, r"permute"),  # not a permutation
    ],
)
def test_attributes_rewritten_on_a_verified_op_are_caught(
    register: Any, attrs: dict, error: str
) -> None:
    def rewrite(graph: Graph) -> None:
        _first(graph, "permute").attrs = MappingProxyType(attrs)

    register("test-rewrites-attrs", rewrite)
    pm = PassManager.parse("canonicalize,dce,test-rewrites-attrs")  # two verifications first
    where = r"after pass 'test-rewrites-attrs': op #1 'permute': "
    with pytest.raises(InternalError, match=where + error):
        pm.run(_nhwc())


def test_an_equal_attribute_of_another_type_is_a_change(register: Any) -> None:
    """dim0 = 1 becomes True: 1 == True, so only comparing identities sees it, and the
    attribute check refuses a bool."""
    g = stridec.Graph("t")
    g.output(g.input("x", (2, 3, 4)).transpose(1, 2).contiguous())

    def rewrite(graph: Graph) -> None:
        op = _first(graph, "transpose")
        op.attrs = MappingProxyType({**op.attrs, "dim0": True})

    register("test-bool-attr", rewrite)
    with pytest.raises(
        InternalError,
        match=r"after pass 'test-bool-attr': op #1 'transpose': .*'dim0' must be an int; got True",
    ):
        PassManager.parse("dce,test-bool-attr").run(g)


def test_a_change_through_a_kept_attribute_dict_is_caught(register: Any) -> None:
    """The mapping is the same object; the value behind it is not."""
    behind: dict[str, Any] = {"dims": (0, 2, 3, 1)}

    def share(graph: Graph) -> None:
        _first(graph, "permute").attrs = MappingProxyType(behind)

    def change(graph: Graph) -> None:
        behind["dims"] = (0, 3, 1, 2)

    register("test-shares-attrs", share)
    register("test-changes-behind", change)
    pm = PassManager.parse("canonicalize,test-shares-attrs,dce,test-changes-behind")
    error = r"after pass 'test-changes-behind': op #1 'permute'"
    with pytest.raises(InternalError, match=error):
        pm.run(_nhwc())


def test_a_list_attribute_changed_in_place_is_caught(register: Any) -> None:
    """An op holding a list is never stamped, so an in-place change is checked too."""
    dims = [0, 2, 3, 1]

    def share(graph: Graph) -> None:
        _first(graph, "permute").attrs = MappingProxyType({"dims": dims})

    def change(graph: Graph) -> None:
        dims[1:] = [3, 1, 2]

    register("test-list-attr", share)
    register("test-changes-list", change)
    pm = PassManager.parse("canonicalize,test-list-attr,dce,test-changes-list")
    with pytest.raises(InternalError, match=r"after pass 'test-changes-list': op #1 'permute'"):
        pm.run(_nhwc())


# -- other changes to ops no pass rebuilt ----------------------------------------------------
def test_an_operand_redirected_to_another_type_is_caught(register: Any) -> None:
    g = stridec.Graph("two")
    x = g.input("x", (2, 3))
    y = g.input("y", (3, 2))
    g.output(x.t().contiguous(), y.contiguous())

    def redirect(graph: Graph) -> None:
        _first(graph, "transpose").set_operand(0, graph.inputs[1])

    register("test-redirects", redirect)
    with pytest.raises(InternalError, match=r"after pass 'test-redirects': op #2 'transpose'"):
        PassManager.parse("dce,test-redirects").run(g)


def test_a_swapped_op_class_is_caught(register: Any) -> None:
    def swap(graph: Graph) -> None:
        _first(graph, "permute").__class__ = O.FlipOp  # flip dims [0, 2, 3, 1]: other strides

    register("test-swaps-class", swap)
    with pytest.raises(InternalError, match=r"after pass 'test-swaps-class': op #1 'flip'"):
        PassManager.parse("canonicalize,test-swaps-class").run(_nhwc())


def test_a_view_chain_re_rooted_under_an_as_strided_is_caught(register: Any) -> None:
    """x[0:3] of a 6-element x and of a 3-element y have the same type, strides [1] at
    offset 0: the as_strided reading it keeps its operand and types, yet its 6 elements
    (0 + 5·1 = index 5) no longer fit the root storage. Only its `verify_` hook sees that."""
    g = stridec.Graph("reroot")
    x = g.input("x", (6,))
    y = g.input("y", (3,))
    head = x[0:3]
    view = g.append(O.AsStridedOp([head], {"sizes": (6,), "strides": (1,)}))
    g.output(view.result, y)

    def reroot(graph: Graph) -> None:
        _first(graph, "slice").set_operand(0, graph.inputs[1])

    register("test-reroots", reroot)
    with pytest.raises(
        InternalError,
        match=r"after pass 'test-reroots': op #3 'as_strided': .*outside a storage of 3 elements",
    ):
        PassManager.parse("dce,test-reroots").run(g)


def test_a_stray_use_left_on_a_verified_op_is_caught(register: Any) -> None:
    """Structure is checked in full every time: a flip built and never placed still
    lists itself among the uses of x, which no pass rebuilt."""

    def forget(graph: Graph) -> None:
        O.FlipOp([graph.inputs[0]], {"dims": (0,)})

    register("test-forgets-an-op", forget)
    error = r"after pass 'test-forgets-an-op': op #0 'input': result 0 lists a use by 'flip'"
    with pytest.raises(InternalError, match=error):
        PassManager.parse("canonicalize,dce,test-forgets-an-op").run(_nhwc())


def test_ops_put_out_of_order_are_caught(register: Any) -> None:
    def reorder(graph: Graph) -> None:
        ops = list(graph.ops)
        ops[1], ops[2] = ops[2], ops[1]  # the contiguous before the permute it reads
        graph.set_ops(ops)

    register("test-reorders", reorder)
    error = r"after pass 'test-reorders': op #1 'contiguous': operand 0 is not defined before"
    with pytest.raises(InternalError, match=error):
        PassManager.parse("canonicalize,dce,test-reorders").run(_nhwc())


# -- the incremental verdict is the full one --------------------------------------------------
def _outcome(check: Callable[[], None]) -> tuple[type, str] | None:
    try:
        check()
    except Exception as e:  # noqa: BLE001 -- any failure must be the same failure
        return type(e), str(e)
    return None


def _damage(d: Draw, graph: Graph) -> None:
    """One random change of the kinds a buggy pass makes, or none."""
    ops = [op for op in graph.ops if op.name not in ("input", "output")]
    if not ops:
        return
    op = d.choice(ops)
    position = graph.ops.index(op)
    earlier = [v for other in graph.ops[:position] for v in other.results]
    kind = d.choice(("retype", "same-type-anew", "swap-attrs", "redirect", "none"))
    if kind == "retype" and op.results:
        values = [v for other in graph.ops for v in other.results]
        op.results[d.int(0, len(op.results) - 1)].type = d.choice(values).type
    elif kind == "same-type-anew" and op.results:  # an equal type, another object: no change
        r = op.results[d.int(0, len(op.results) - 1)]
        r.type = TensorType(r.type.sizes, r.type.dtype, r.type.layout)
    elif kind == "swap-attrs":
        twin = d.choice([other for other in ops if type(other) is type(op)])
        op.attrs, twin.attrs = twin.attrs, op.attrs
    elif kind == "redirect" and op.operands and earlier:
        op.set_operand(d.int(0, len(op.operands) - 1), d.choice(earlier))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_incremental_verdict_is_the_full_one(data: Any) -> None:
    """Random graphs, partly compiled, then damaged again and again: after each change,
    the incremental check fails exactly where and how the full one fails, or passes."""
    d = Draw(data)
    case = _random_case(d)
    if case is None:
        return
    g, _ = case
    if d.chance(0.3):
        g = g.clone()  # result types given, not inferred by the constructors
    passes = DEFAULT_PIPELINE.split(",")
    PassManager.parse(",".join(passes[: d.int(0, len(passes))])).run(g)
    verify_graph(g, incremental=True)  # stamps every op
    for _ in range(3):
        _damage(d, g)
        full = _outcome(lambda: verify_graph(g))
        assert _outcome(lambda: verify_graph(g, incremental=True)) == full
        event("rejected" if full is not None else "accepted")
        if full is not None:
            break


# -- what is skipped ---------------------------------------------------------------------------
@pytest.fixture
def inferences(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the view ops whose `infer_types` runs, in order."""
    calls: list[str] = []
    infer = O.ViewOp.infer_types

    def counted(self: Op, operand_types: Any) -> Any:
        calls.append(self.name)
        return infer(self, operand_types)

    monkeypatch.setattr(O.ViewOp, "infer_types", counted)
    return calls


def test_what_its_constructor_inferred_is_not_inferred_again(inferences: list[str]) -> None:
    g = _nhwc()
    inferences.clear()
    verify_graph(g, incremental=True)
    verify_graph(g, incremental=True)
    assert inferences == []
    verify_graph(g)  # the full check infers everything, every time
    assert inferences == ["permute"]


def test_a_verified_op_is_not_inferred_again_until_it_changes(inferences: list[str]) -> None:
    g = _nhwc().clone()  # the clone's result types are given, not inferred
    inferences.clear()
    verify_graph(g, incremental=True)
    assert inferences == ["permute"]
    verify_graph(g, incremental=True)
    assert inferences == ["permute"]
    op = _first(g, "permute")
    op.attrs = MappingProxyType(dict(op.attrs))  # equal values, the same objects: no change
    verify_graph(g, incremental=True)
    assert inferences == ["permute"]
    op.attrs = MappingProxyType({"dims": (0, 2, 3, 1)})  # a new tuple: checked again
    verify_graph(g, incremental=True)
    assert inferences == ["permute", "permute"]


def test_graph_verify_stays_a_full_check() -> None:
    """The incremental check trusts frozen values to stay frozen; `graph.verify()` does
    not: a result type changed in place behind `frozen=True` is still found."""
    g = _nhwc()
    verify_graph(g, incremental=True)
    t = _first(g, "permute").result.type
    object.__setattr__(t, "layout", Layout.contiguous(t.sizes))
    with pytest.raises(VerificationError, match=r"op #1 'permute': result types"):
        g.verify()


# -- the linear-time use-list upkeep keeps results -----------------------------------------------
def test_replace_all_uses_with_moves_every_use_in_order() -> None:
    g = stridec.Graph("g")
    x = g.input("x", (2, 3))
    y = g.input("y", (2, 3))
    c = stridec.cat([x, x.flip(0), x], 0)
    g.output(c, x)
    x.replace_all_uses_with(y)
    assert x.uses == []
    uses = [(op.name, i) for op, i in y.uses]
    assert uses == [("flip", 0), ("cat", 0), ("cat", 2), ("output", 1)]
    assert c.owner.operands[0] is y and c.owner.operands[2] is y
    g.verify()


def _wide(readers: int) -> tuple[Graph, list[Op]]:
    """x read by `readers` dead flips between live ones: a wide use list to clean."""
    g = stridec.Graph("wide")
    x = g.input("x", (4, 8))
    live = []
    for k in range(readers):
        x.flip(0)  # dead
        live.append(x[k % 4].contiguous())
    g.output(*live)
    return g, [v.owner for v in live]


def test_dce_drops_many_readers_of_one_value() -> None:
    g, live = _wide(40)
    DeadCodeElimination().run(g)
    assert [op.name for op in g.ops].count("flip") == 0
    assert len(g.ops) == 1 + 2 * 40 + 1
    g.verify()
    x = g.inputs[0]
    assert [op.name for op, _ in x.uses] == ["select"] * 40


def test_dce_on_use_lists_that_disagree_drops_ops_one_at_a_time() -> None:
    """The flip reading p is dead but missing from p's use list: the counts would call p
    dead though the live flip reads it. DCE falls back to dropping uses one op at a time,
    which keeps p, as it always did."""
    g = stridec.Graph("g")
    x = g.input("x", (2, 3))
    p = x.t()
    live = p.flip(0)
    dead = p.flip(1)
    g.output(live)
    p.uses.remove((dead.owner, 0))
    DeadCodeElimination().run(g)
    assert [op.name for op in g.ops] == ["input", "transpose", "flip", "output"]
    assert live.owner.operands[0] is p


def test_several_philox_generators_are_each_placed_and_keep_their_bits() -> None:
    g = stridec.Graph("rng")
    s = g.input("s", (6,), "uint32")
    outs = []
    for _ in range(3):
        bits, s = g.philox(s, (2, 3, 2, 2))
        outs.append(bits.pack("NCHW4"))
    g.output(*outs, s)
    state = torch.tensor([1, 2, 3, 4, 5, 6], dtype=torch.int32).view(torch.uint32)
    expected = stridec.run_reference(g, state)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    placed = [op for op in g.ops if op.name == "philox"]
    assert len(placed) == 3 and all(op.attrs["space"] is not None for op in placed)
    assert not any(isinstance(op, O.CopyOp) for op in g.ops)  # each pack: its generator's writer
    for want, have in zip(expected, stridec.run_reference(g, state), strict=True):
        assert torch.equal(have.view(torch.int32), want.view(torch.int32))


def test_several_flipped_outputs_each_get_one_copy() -> None:
    g = stridec.Graph("flips")
    xs = [g.input(f"x{k}", (3, 4)) for k in range(4)]
    g.output(*(x.t().contiguous().flip(0) for x in xs), xs[0].flip(1))
    tensors = [torch.arange(12.0).reshape(3, 4) + 100 * k for k in range(4)]
    expected = stridec.run_reference(g, *tensors)
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    assert sum(isinstance(op, O.CopyOp) for op in g.ops) == 5  # one per output, none between
    for want, have in zip(expected, stridec.run_reference(g, *tensors), strict=True):
        assert torch.equal(have, want)
