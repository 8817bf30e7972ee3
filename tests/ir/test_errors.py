"""Bad input, row by row of the issue (docs/design.md#errors): each raises the right `StridecError`
subclass through the public builder API (and `stridec.Layout`), with a message naming the
op or argument and what was given, and a refused op leaves the graph as it was.

The torch counterpart of each row is checked to refuse the same input, so the rows are
errors by torch's rules, not by ours.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec
from stridec import Graph, Layout
from stridec.errors import (
    CallError,
    LayoutError,
    ParseError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir.affine import MAX_RANK


def fresh() -> tuple[Graph, Any, Any]:
    g = Graph("errors")
    x = g.input("x", (2, 3), "float32")
    xmax = g.input("xmax", (1, 2) + (1,) * (MAX_RANK - 3) + (3,), "float32")  # at the limit
    return g, x, xmax


def refuses(error: type, pattern: str, build: Callable[[Any, Any], Any],
            torch_build: Callable[[torch.Tensor], Any] | None = None) -> None:
    """`build(x, xmax)` raises `error` matching `pattern`, and the refused op leaves no trace
    (the ops built before it in a chain stay, and the graph still verifies, use lists
    included); `torch_build(t)`, if given, fails in torch too."""
    g, x, xmax = fresh()
    with pytest.raises(error, match=pattern):
        build(x, xmax)
    assert all(user.graph is g for v in (x, xmax) for user, _ in v.uses)
    g.verify()
    if torch_build is not None:
        with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
            torch_build(torch.zeros(2, 3))


def test_the_hierarchy() -> None:
    for e in (LayoutError, ShapeError, VerificationError, ParseError, CallError, UnsupportedError):
        assert issubclass(e, StridecError)
        assert e.__name__ in stridec.__all__
    assert issubclass(StridecError, Exception)
    # A bug in stridec is no mistake of the caller: not a StridecError.
    assert not issubclass(stridec.InternalError, StridecError)
    assert "InternalError" in stridec.__all__


# -- perm not a permutation ---------------------------------------------------------------


@pytest.mark.parametrize("dims", [(0, 0), (1, -1), (0,), (0, 1, 2), (0, 2)])
def test_perm_not_a_permutation(dims: tuple[int, ...]) -> None:
    refuses(LayoutError, r"permute: (dims|dim)", lambda x, _: x.permute(*dims),
            lambda t: t.permute(*dims))
    with pytest.raises(LayoutError, match=r"permute: dim"):
        Layout.contiguous((2, 3)).permute(dims)


def test_movedim_with_a_repeated_dim() -> None:
    refuses(LayoutError, r"movedim: repeated dim", lambda x, _: x.movedim((0, 1), (1, 1)),
            lambda t: t.movedim((0, 1), (1, 1)))


# -- dim out of range ---------------------------------------------------------------------

DIM_OUT_OF_RANGE = [
    ("transpose", lambda v: v.transpose(0, 2), r"transpose: dim 2 out of range"),
    ("transpose-neg", lambda v: v.transpose(-3, 0), r"transpose: dim -3 out of range"),
    ("select", lambda v: v.select(2, 0), r"select: dim 2 out of range"),
    ("slice", lambda v: v.narrow(-3, 0, 1), r"narrow: dim -3 out of range"),
    ("squeeze", lambda v: v.squeeze(2), r"squeeze: dim 2 out of range"),
    ("unsqueeze", lambda v: v.unsqueeze(3), r"unsqueeze: dim 3 out of range"),
    ("flip", lambda v: v.flip(2), r"flip: dim 2 out of range"),
    ("unfold", lambda v: v.unfold(2, 1, 1), r"unfold: dim 2 out of range"),
    ("flatten", lambda v: v.flatten(0, 2), r"flatten: dim 2 out of range"),
    ("unflatten", lambda v: v.unflatten(2, (1,)), r"unflatten: dim 2 out of range"),
    ("movedim", lambda v: v.movedim(0, 2), r"movedim: dim 2 out of range"),
    ("split", lambda v: v.split(1, 2), r"split: dim 2 out of range"),
    ("chunk", lambda v: v.chunk(2, -3), r"chunk: dim -3 out of range"),
    ("index", lambda v: v[0, 0, 0], r"index: too many indices \(3\)"),
]


@pytest.mark.parametrize("build, pattern", [c[1:] for c in DIM_OUT_OF_RANGE],
                         ids=[c[0] for c in DIM_OUT_OF_RANGE])
def test_dim_out_of_range(build: Callable, pattern: str) -> None:
    refuses(LayoutError, pattern, lambda x, _: build(x), build)


def test_dim_out_of_range_in_cat_and_layout() -> None:
    refuses(LayoutError, r"cat: dim 2 out of range for rank 2",
            lambda x, _: stridec.cat([x, x], 2), lambda t: torch.cat([t, t], 2))
    with pytest.raises(LayoutError, match=r"transpose: dim 5 out of range"):
        Layout.contiguous((2, 3)).transpose(0, 5)
    with pytest.raises(LayoutError, match=r"select: dim -3 out of range"):
        Layout.contiguous((2, 3)).select(-3, 0)


# -- expand to an incompatible size -----------------------------------------------------


@pytest.mark.parametrize("sizes, pattern", [
    ((4, 3), r"expand: the expanded size 4 must match the existing size 2"),
    ((2, 5), r"expand: the expanded size 5 must match the existing size 3"),
    ((3,), r"expand: target sizes \(3,\) have rank 1"),
    ((-1, 2, 3), r"expand: -1 is not allowed for the new leading dim"),
    ((2, -2), r"expand: size -2"),
])
def test_expand_to_an_incompatible_size(sizes: tuple[int, ...], pattern: str) -> None:
    refuses(LayoutError, pattern, lambda x, _: x.expand(*sizes), lambda t: t.expand(*sizes))
    with pytest.raises(LayoutError, match=pattern):
        Layout.contiguous((2, 3)).expand(sizes)


def test_expand_as_an_incompatible_value() -> None:
    def build(x: Any, _: Any) -> Any:
        return x.expand_as(x.t())

    refuses(LayoutError, r"expand: the expanded size 2 must match the existing size 3", build)


# -- slice step <= 0 ----------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, -1, -3])
def test_slice_step_not_positive(step: int) -> None:
    refuses(LayoutError, rf"slice: step must be >= 1; got {step}",
            lambda x, _: x[:, ::step], lambda t: t[:, ::step])
    refuses(LayoutError, rf"slice: step must be >= 1; got {step}",
            lambda x, _: x.slice(0, 0, 2, step))
    with pytest.raises(LayoutError, match=rf"slice: step must be >= 1; got {step}"):
        Layout.contiguous((2, 3)).slice(1, None, None, step)


def test_unfold_step_not_positive() -> None:
    refuses(LayoutError, r"unfold: step must be >= 1; got 0", lambda x, _: x.unfold(1, 2, 0),
            lambda t: t.unfold(1, 2, 0))


# -- select index out of range ------------------------------------------------------------


@pytest.mark.parametrize("dim, index", [(0, 2), (0, -3), (1, 3), (-1, -4), (1, 100)])
def test_select_index_out_of_range(dim: int, index: int) -> None:
    pattern = rf"select: index {index} out of range for dim {dim} of size \d"
    refuses(LayoutError, pattern, lambda x, _: x.select(dim, index), lambda t: t.select(dim, index))
    with pytest.raises(LayoutError, match=pattern):
        Layout.contiguous((2, 3)).select(dim, index)


def test_index_out_of_range() -> None:
    refuses(LayoutError, r"select: index 2 out of range for dim 0", lambda x, _: x[2],
            lambda t: t[2])
    refuses(LayoutError, r"select: index -4 out of range for dim 1", lambda x, _: x[..., -4],
            lambda t: t[..., -4])


def test_narrow_past_the_end() -> None:
    refuses(LayoutError, r"narrow: start 2 and length 2 exceed dim 1 of size 3",
            lambda x, _: x.narrow(1, 2, 2), lambda t: t.narrow(1, 2, 2))


# -- view not viewable --------------------------------------------------------------------


@pytest.mark.parametrize("build", [
    lambda v: v.t().view(6),
    lambda v: v.t().view(-1),
    lambda v: v[:, ::2].view(4),
    lambda v: v.t().flatten().view(2, 3).t().view(6),  # flatten copied; .t() again breaks it
])
def test_view_not_viewable(build: Callable) -> None:
    refuses(LayoutError, r"view: sizes \[\d+\] are not viewable from layout strided<", 
            lambda x, _: build(x), build)


def test_view_of_the_wrong_element_count() -> None:
    refuses(ShapeError, r"view: shape \[4\] is invalid for input of size 6",
            lambda x, _: x.view(4), lambda t: t.view(4))
    refuses(ShapeError, r"reshape: shape \[4, -1\] is invalid for input of size 6",
            lambda x, _: x.reshape(4, -1), lambda t: t.reshape(4, -1))
    with pytest.raises(LayoutError, match=r"view: sizes \(4,\)"):
        Layout.contiguous((2, 3)).view((4,))


# -- as_strided outside its storage -------------------------------------------------------


@pytest.mark.parametrize("build, pattern", [
    (lambda v: v.as_strided((7,), (1,)), r"offset 0 address indices up to 6"),
    (lambda v: v.as_strided((2,), (1,), 5), r"offset 5 address indices up to 6"),
    (lambda v: v.as_strided((2, 2), (3, 3), 0), r"address indices up to 6"),
    (lambda v: v[1].as_strided((4,), (1,)), r"offset 3 address indices up to 6"),
    (lambda v: v.t()[2].as_strided((3,), (2,)), r"offset 2 address indices up to 6"),
])
def test_as_strided_outside_its_storage(build: Callable, pattern: str) -> None:
    refuses(LayoutError, r"as_strided: .*" + pattern + r".*outside a storage of 6 elements",
            lambda x, _: build(x), build)


def test_as_strided_before_the_start_of_storage() -> None:
    refuses(LayoutError, r"as_strided: offset must be >= 0; got -1",
            lambda x, _: x.as_strided((2,), (1,), -1))
    refuses(LayoutError, r"as_strided.*before the start of storage",
            lambda x, _: x.as_strided((2,), (-1,), 0))


def test_as_strided_outside_a_storage_in_layout() -> None:
    with pytest.raises(LayoutError, match=r"as_strided: .* outside a storage of 6 elements"):
        Layout.contiguous((2, 3)).as_strided((7,), (1,), storage_size=6)


def test_as_strided_inside_a_materialized_storage() -> None:
    """The storage of a copy is its layout's: a pitched copy of (2, 3) holds 8 elements."""
    g, x, _ = fresh()
    c = x.copy_to((4, 1))  # rows of pitch 4: indices 0..6, a storage of 7 elements
    c.as_strided((7,), (1,), 0)
    with pytest.raises(LayoutError, match=r"as_strided: .*outside a storage of 7 elements"):
        c.as_strided((8,), (1,), 0)


# -- unknown dtype or format --------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float8", "complex64", torch.complex64, "f8", "", 3, "Float32"])
def test_unknown_dtype(dtype: Any) -> None:
    refuses(UnsupportedError, r"cast: dtype: expected one of float16, .*; got ",
            lambda x, _: x.to(dtype))
    g = Graph("dtype")
    with pytest.raises(UnsupportedError, match=r"input: dtype: expected one of .*; got "):
        g.input("y", (2,), dtype)
    with pytest.raises(UnsupportedError, match=r"full: dtype: expected one of"):
        g.full((2,), 0, dtype)
    with pytest.raises(UnsupportedError, match=r"dtype: expected one of"):
        Layout.contiguous((2,)).buffer_bytes(dtype)
    with pytest.raises(UnsupportedError, match=r"dtype: expected one of"):
        stridec.as_dtype(dtype)
    assert g.ops == []


@pytest.mark.parametrize("name", ["NCHW8", "nhwc", "pitched<0>", "pitched<x>", "CHWN8", ""])
def test_unknown_format(name: str) -> None:
    def pack(x: Any, _: Any) -> Any:
        return x.unsqueeze(0).unsqueeze(0).pack(name)

    refuses(UnsupportedError, rf"format: expected one of NCHW, .*; got '{name}'", pack)
    refuses(UnsupportedError, rf"format: expected one of .*; got '{name}'",
            lambda x, _: x.unpack(name, 3))
    with pytest.raises(UnsupportedError, match=rf"format: expected one of .*; got '{name}'"):
        stridec.get_format(name)


def test_unsupported_requests() -> None:
    refuses(UnsupportedError, r"pad: mode must be 'constant'; got 'replicate'",
            lambda x, _: stridec.pad(x, (1, 1), mode="replicate"))


# -- rank above the limit (MAX_RANK) ------------------------------------------------------

ABOVE = MAX_RANK + 1
TOO_MANY = (1,) * (MAX_RANK - 1) + (2, 3)  # rank MAX_RANK + 1

RANK_ABOVE_MAX = [
    ("unsqueeze", lambda x, xmax: xmax.unsqueeze(0), rf"unsqueeze: .*rank {ABOVE}"),
    ("index-None", lambda x, xmax: xmax[None], rf"unsqueeze: .*rank {ABOVE}"),
    ("unfold", lambda x, xmax: xmax.unfold(MAX_RANK - 1, 1, 1), rf"unfold: .*rank {ABOVE}"),
    ("expand", lambda x, xmax: x.expand(*TOO_MANY), rf"expand: rank {ABOVE}"),
    ("reshape", lambda x, xmax: x.reshape(TOO_MANY), rf"reshape: rank {ABOVE}"),
    ("view", lambda x, xmax: x.view(TOO_MANY), rf"view: rank {ABOVE}"),
    ("unflatten", lambda x, xmax: xmax.unflatten(0, (1, 1)), rf"rank {ABOVE}"),
    ("as_strided", lambda x, xmax: x.as_strided(TOO_MANY, (0,) * ABOVE),
     rf"as_strided: rank {ABOVE}"),
    ("full", lambda x, xmax: x.graph.full(TOO_MANY, 0), rf"full: rank {ABOVE}"),
    ("input", lambda x, xmax: x.graph.input("y", TOO_MANY, "float32"), rf"input: rank {ABOVE}"),
    ("philox", lambda x, xmax: x.graph.philox(x.graph.input("s", (6,), "uint32"), TOO_MANY),
     rf"philox: rank {ABOVE}"),
]


@pytest.mark.parametrize("build, pattern", [c[1:] for c in RANK_ABOVE_MAX],
                         ids=[c[0] for c in RANK_ABOVE_MAX])
def test_rank_above_max(build: Callable, pattern: str) -> None:
    g, x, xmax = fresh()
    before = len(g.ops)
    with pytest.raises(UnsupportedError, match=pattern + rf".*maximum.*{MAX_RANK}"):
        build(x, xmax)
    assert len(g.ops) <= before + 1  # at most the state input of the philox row
    assert x.uses == [] and xmax.uses == []


def test_rank_above_max_in_layout() -> None:
    with pytest.raises(UnsupportedError,
                       match=rf"layout: rank {ABOVE} is above the supported maximum"):
        Layout.contiguous(TOO_MANY)
    with pytest.raises(UnsupportedError, match=rf"layout: rank {ABOVE}"):
        Layout(TOO_MANY, (1,) * ABOVE, 0)
    with pytest.raises(UnsupportedError, match=rf"layout: rank {ABOVE}"):
        Layout.contiguous(TOO_MANY[1:]).unsqueeze(0)


def test_rank_max_is_supported() -> None:
    g, _, xmax = fresh()
    reverse = tuple(reversed(range(MAX_RANK)))
    v = xmax.permute(reverse).contiguous()
    g.output(v)
    t = torch.arange(6.0).reshape(xmax.shape)
    x = torch.zeros(2, 3)
    (got,) = stridec.run_reference(g, x, t)
    assert torch.equal(got, t.permute(reverse).contiguous())


# -- malformed IR text (line:col) --------------------------------------------------------


def parse_or_skip() -> Callable[[str], Any]:
    try:
        return importlib.import_module("stridec.ir.parser").parse
    except ImportError as e:  # the parser is another engineer's; it may not import yet
        pytest.skip(f"stridec.ir.parser does not import: {e}")


def position(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, column) of `needle` in `text`, computed by the test."""
    offset = text.index(needle)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


GOOD = (
    "graph @g {\n"
    '  %x = input {name = "x"} : tensor<2x3xf32>\n'
    "  %0 = permute %x {dims = [1, 0]} : tensor<3x2xf32, strided<[1, 3], offset: 0>>\n"
    "  %1 = contiguous %0 : tensor<3x2xf32>\n"
    "  output %1\n"
    "}\n"
)


@pytest.mark.parametrize("old, new, at", [
    ("= permute", "= permuet", "permuet"),  # unknown op
    ("contiguous %0", "contiguous %9", "%9"),  # undefined value
    ("dims = [1, 0]", "dims = [1, 1]", "permute"),  # not a permutation: at the op
    ("tensor<2x3xf32>", "tensor<2x3xf8>", "f8>"),  # unknown dtype
    ("{dims", "{dimz", "dimz"),  # unknown attribute
    ("  output %1\n", "  output %1 $\n", "$"),  # garbage
])
def test_malformed_ir_text(old: str, new: str, at: str) -> None:
    parse = parse_or_skip()
    assert str(parse(GOOD)) == GOOD
    text = GOOD.replace(old, new)
    line, column = position(text, at)
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    assert (e.line, e.column) == (line, column), str(e)
    assert str(e).startswith(f"{line}:{column}: ")


def test_malformed_ir_text_at_the_end() -> None:
    parse = parse_or_skip()
    text = GOOD[: GOOD.rindex("}")]
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.line == text.count("\n") + 1


# -- one class per kind of mistake (the table at the top of docs/errors.md) --------------------
def _graph_with_output() -> Graph:
    g = Graph("finished")
    g.output(g.input("x", (2, 3), "float32").t())
    return g


def _a_pass_that_breaks_the_ir() -> None:
    from stridec.compiler.pass_manager import Pass, PassManager

    class BreaksTypes(Pass):
        name = "breaks-types"

        def run(self, graph: Graph) -> None:
            from stridec.ir.types import TensorType

            op = graph.ops[1]  # the transpose: (3, 2) with strides (1, 3)
            op.results[0].type = TensorType((3, 2), "float32", Layout.contiguous((3, 2)))

    PassManager([BreaksTypes()]).run(_graph_with_output())


def _a_pass_that_crashes() -> None:
    from stridec.compiler.pass_manager import Pass, PassManager

    class Crashes(Pass):
        name = "crashes"

        def run(self, graph: Graph) -> None:
            raise KeyError("no such op")

    PassManager([Crashes()]).run(_graph_with_output())


def _tensor_type(sizes: Any, layout: Layout | None = None) -> Any:
    from stridec.ir.types import TensorType

    return TensorType(sizes, "float32", layout)


def _kernel_backend(name: str) -> Any:
    from stridec.runtime.backends import backend

    return backend(name)


def _called_with_two_tensors() -> None:
    fn = stridec.compile(_graph_with_output(), backend="reference")
    fn(torch.zeros(2, 3), torch.zeros(2, 3))


def _build_a_bad_c_unit() -> None:
    from stridec.runtime.backends import cpu

    if not cpu.available():
        pytest.skip("no C compiler")
    cpu.load_unit("this is not C")


# Per row of the table (by the start of its first column): the class, then mistakes of that
# kind, each with the message it must give. Several sites per kind, so that a site that
# raises another class for the same kind of mistake fails here.
KINDS: dict[str, tuple[type, list[tuple[Callable[[], Any], str]]]] = {
    "a value of the wrong type": (VerificationError, [
        (lambda: Layout((2.5,), (1,)), r"layout sizes: expected a sequence of ints"),
        (lambda: Layout((2,), (1,), "0"), r"layout offset: expected an int; got '0'"),
        (lambda: fresh()[1].permute("ab"), r"permute: attribute 'dims' must be an int"),
        (lambda: fresh()[0].input("y", (2.5,)), r"input: attribute 'sizes' must be an int"),
        (lambda: stridec.ir.affine.MaskBound((1, "a"), 0, 3), r"mask: coeffs must be an int"),
        (lambda: stridec.ir.affine.MaskBound(3, 0, 3),
         r"mask: coeffs must be a sequence of ints; got 3"),
        (lambda: stridec.ir.formats.get_format("NCHW4").packing((2, 3.5, 3, 3)),
         r"NCHW4: sizes must be an int; got 3.5"),
        (lambda: stridec.ir.formats.PitchedRows(2.0), r"align_bytes must be an int; got 2.0"),
        (lambda: _tensor_type(("a",)), r"tensor type: sizes must be a sequence of ints"),
    ]),
    "IR that breaks an invariant": (VerificationError, [
        (lambda: stridec.cat([fresh()[1], fresh()[1]]), r"cat: operand .* belongs to another"),
        (lambda: _graph_with_output().ops[0].result.t(), r"graph 'finished' is complete"),
    ]),
    "a view rule that cannot apply": (LayoutError, [
        (lambda: fresh()[1].permute(0, 0), r"permute: dims \(0, 0\) is not a permutation"),
        (lambda: Layout((2,), (1,), -1), r"layout: offset must be >= 0; got -1"),
    ]),
    "sizes, dtypes or values that do not fit an op": (ShapeError, [
        (lambda: fresh()[1].reshape(4, -1), r"reshape: shape \[4, -1\] is invalid"),
        (lambda: _tensor_type((2,), Layout((3,), (1,))), r"layout sizes \(3,\) differ"),
    ]),
    "malformed text IR": (ParseError, [
        (lambda: stridec.parse("graph @g {"), r"expected"),
        (lambda: stridec.parse(3), r"parse: expected the text IR as a str; got int"),
    ]),
    "`stridec.compile` given something other": (CallError, [
        (lambda: stridec.compile("graph @g {}"), r"compile: expected a stridec.Graph; got str"),
        (_called_with_two_tensors, r"expected 1 tensor argument"),
    ]),
    "a well-formed request stridec does not do": (UnsupportedError, [
        (lambda: fresh()[1].to("float8"), r"cast: dtype: expected one of"),
        (lambda: fresh()[0].input("y", (1,) * ABOVE),
         rf"rank {ABOVE} is above the maximum {MAX_RANK}"),
        (lambda: _kernel_backend("cuda"), r"no kernel backend 'cuda'"),
    ]),
    "a native kernel the C compiler refuses": (stridec.errors.BuildError, [
        (_build_a_bad_c_unit, r"C compiler .* failed"),
    ]),
}

INTERNAL = [
    (_a_pass_that_crashes, r"^bug in stridec: pass 'crashes' raised KeyError", KeyError),
    (_a_pass_that_breaks_the_ir, r"^bug in stridec: after pass 'breaks-types': op #1",
     VerificationError),
]


def _table_kinds() -> list[tuple[str, str]]:
    """(kind, class name) of each row of the class table in docs/errors.md."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    table = text[text.index("| kind of mistake |"):].split("\n\n")[0].splitlines()[2:]
    return [(cells[1].strip(), cells[2].strip().strip("`"))
            for cells in (row.split("|") for row in table)]


def test_the_table_has_one_tested_kind_per_row() -> None:
    rows = _table_kinds()
    assert len(rows) == len(KINDS)
    for kind, cls_name in rows:
        keys = [k for k in KINDS if kind.startswith(k)]
        assert len(keys) == 1, f"docs/errors.md row {kind!r} has no entry in KINDS"
        assert KINDS[keys[0]][0].__name__ == cls_name, kind


@pytest.mark.parametrize(
    "kind, index",
    [(k, i) for k, (_, cases) in KINDS.items() for i in range(len(cases))],
)
def test_each_kind_of_mistake_raises_its_class(kind: str, index: int) -> None:
    error, cases = KINDS[kind]
    make, pattern = cases[index]
    with pytest.raises(StridecError) as info:
        make()
    assert type(info.value) is error, f"{kind}: {type(info.value).__name__}: {info.value}"
    assert re.search(pattern, str(info.value)), str(info.value)


@pytest.mark.parametrize("make, pattern, cause", INTERNAL, ids=["crash", "broken-ir"])
def test_a_bug_in_a_pass_is_an_internal_error(
    make: Callable[[], None], pattern: str, cause: type
) -> None:
    with pytest.raises(stridec.InternalError, match=pattern) as info:
        make()
    assert not isinstance(info.value, StridecError)
    assert type(info.value.__cause__) is cause
    assert info.value.__cause__.__traceback__ is not None  # where the bug is
