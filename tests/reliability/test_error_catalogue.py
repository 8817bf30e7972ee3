"""The bad-input catalogue (docs/errors.md), one test per row.

`ROWS` is the table: where the mistake is made (build, text IR, compile, call), what the
user did (a one-line reproduction), the `StridecError` subclass it gets, and what the
message must name (the op or argument, and what was given). Each row runs its mistake
in this process -- none may crash it, and none reaches a kernel: every call row is
refused by the argument checks before any launch -- and checks

- the error class (a `StridecError` subclass, so `except stridec.StridecError` catches it),
- that the message names the op or argument and the value given,
- that docs/errors.md shows this row with exactly this message (the docs quote a real run:
  regenerate the table with `python tests/reliability/test_error_catalogue.py`).

Rows that a more thorough test already proves name it in `see` (and the docs); a test
checks that every such test still exists. Cache faults are not errors (stridec recovers:
see the second table in the docs, proven by test_cache_faults.py and test_cache.py).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
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
from stridec.ir.affine import MAX_RANK, MaskBound

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "errors.md"
ABOVE = MAX_RANK + 1
TOO_MANY = (1,) * (MAX_RANK - 1) + (2, 3)  # rank MAX_RANK + 1


@dataclass(frozen=True)
class Row:
    id: str
    where: str  # build / text IR / compile / call
    what: str  # what the user did, as code
    error: type[StridecError]
    run: Callable[[], Any]
    names: tuple[str, ...]  # the message must contain each
    see: str = ""  # a test elsewhere that proves the row more thoroughly
    marks: tuple = field(default=())
    #: For a row that cannot run everywhere (a GPU row): the message the docs show, which
    #: the row checks where it runs.
    doc_message: str = ""


# --------------------------------------------------------------------------- helpers


def x23() -> Any:
    """A fresh graph with input x of sizes (2, 3), float32."""
    return Graph("g").input("x", (2, 3), "float32")


def x16() -> Any:
    return Graph("g").input("x", (1, 3, 2, 2), "float16")


def state(dtype: str = "uint32", sizes: tuple[int, ...] = (6,)) -> tuple[Graph, Any]:
    g = Graph("g")
    return g, g.input("state", sizes, dtype)


def finished(build: Callable[[Any], Any], sizes: tuple[int, ...] = (2, 3),
             dtype: str = "float32", name: str = "g") -> Graph:
    g = Graph(name)
    g.output(build(g.input("x", sizes, dtype)))
    return g


def flip_graph() -> Graph:
    """x (2, 3) float32 → x.flip(1), materialized."""
    return finished(lambda x: x.flip(1).contiguous())


def call(*args: Any, graph: Callable[[], Graph] = flip_graph, backend: str = "auto",
         **named: Any) -> Any:
    return stridec.compile(graph(), backend=backend)(*args, **named)


def shrunk_view(offset: int) -> torch.Tensor:
    """A (2, 3) int8 view at `offset` whose storage was shrunk to 8 bytes afterwards
    (torch.empty reserves the big storage without touching it)."""
    base = torch.empty(offset + 16, dtype=torch.int8)
    view = base[offset : offset + 6].view(2, 3)
    base.untyped_storage().resize_(8)
    return view


def text(body: str) -> str:
    return "graph @g {\n" + body + "}\n"


X_TEXT = '  %x = input {name = "x"} : tensor<2x3xf32>\n'


def parse(source: str) -> Graph:
    return stridec.parse(source)


def two_graph_cat() -> Any:
    a, b = x23(), x23()
    return stridec.cat([a, b])


def duplicate_inputs() -> Graph:
    g = Graph("g")
    a, b = g.input("x", (2, 3)), g.input("x", (2, 3))
    g.output(a.contiguous(), b.contiguous())
    return g


def view_graph() -> Graph:
    return finished(lambda x: x.view(3, 2).contiguous(), (2, 3))


# --------------------------------------------------------------------------- the table

E = "tests/ir/test_errors.py::"
C = "tests/runtime/test_call_errors.py::"
K = "tests/reliability/test_tensor_kinds.py::"
R = "tests/reliability/test_regressions.py::"

ROWS: list[Row] = [
    # -- build: the Python builder --------------------------------------------------------
    Row("permute-not-a-permutation", "build", "x.permute(0, 0)", LayoutError,
        lambda: x23().permute(0, 0), ("permute", "(0, 0)"), E + "test_perm_not_a_permutation"),
    Row("dim-out-of-range", "build", "x.transpose(0, 2)", LayoutError,
        lambda: x23().transpose(0, 2), ("transpose", "dim 2"), E + "test_dim_out_of_range"),
    Row("expand-incompatible", "build", "x.expand(4, 3)", LayoutError,
        lambda: x23().expand(4, 3), ("expand", "4", "2"),
        E + "test_expand_to_an_incompatible_size"),
    Row("slice-step", "build", "x[:, ::0]", LayoutError,
        lambda: x23()[:, ::0], ("slice", "step", "0"), E + "test_slice_step_not_positive"),
    Row("select-index", "build", "x.select(0, 2)", LayoutError,
        lambda: x23().select(0, 2), ("select", "index 2"), E + "test_select_index_out_of_range"),
    Row("select-index-above-int64", "build", "x.select(0, 2**70)", LayoutError,
        lambda: x23().select(0, 2**70), ("select", str(2**70))),
    Row("index-type", "build", 'x["a"]', LayoutError,
        lambda: x23()["a"], ("index", "str")),
    Row("view-not-viewable", "build", "x.t().view(6)", LayoutError,
        lambda: x23().t().view(6), ("view", "[6]", "strided<[1, 3]"), E + "test_view_not_viewable"),
    Row("reshape-element-count", "build", "x.reshape(4, -1)", ShapeError,
        lambda: x23().reshape(4, -1), ("reshape", "[4, -1]", "6"),
        E + "test_view_of_the_wrong_element_count"),
    Row("split-sections", "build", "x.split([1, 3], 1)", LayoutError,
        lambda: x23().split([1, 3], 1), ("split", "[1, 3]")),
    Row("unfold-size", "build", "x.unfold(1, 4, 1)", LayoutError,
        lambda: x23().unfold(1, 4, 1), ("unfold", "size 4")),
    Row("as-strided-outside-storage", "build", "x.as_strided((7,), (1,))", LayoutError,
        lambda: x23().as_strided((7,), (1,)), ("as_strided", "6 elements"),
        E + "test_as_strided_outside_its_storage"),
    Row("as-strided-stride-above-int64", "build", "x.as_strided((2,), (2**63,))", LayoutError,
        lambda: x23().as_strided((2,), (2**63,)), ("as_strided", str(2**63))),
    Row("as-strided-negative-offset", "build", "x.as_strided((2,), (1,), -1)", LayoutError,
        lambda: x23().as_strided((2,), (1,), -1), ("as_strided", "-1"),
        E + "test_as_strided_before_the_start_of_storage"),
    Row("copy-to-other-sizes", "build", "x.copy_to(Layout((3, 2), (2, 1)))", ShapeError,
        lambda: x23().copy_to(Layout((3, 2), (2, 1))), ("copy", "[3, 2]", "[2, 3]")),
    Row("copy-to-negative-stride", "build", "x.copy_to((3, -1), offset=2)", LayoutError,
        lambda: x23().copy_to((3, -1), offset=2), ("copy", "[3, -1]")),
    Row("unknown-dtype", "build", 'x.to("float8")', UnsupportedError,
        lambda: x23().to("float8"), ("cast", "'float8'"), E + "test_unknown_dtype"),
    Row("unknown-format", "build", 'x.pack("NCHW8")', UnsupportedError,
        lambda: x23().pack("NCHW8"), ("format", "'NCHW8'"), E + "test_unknown_format"),
    Row("pack-rank", "build", 'x.pack("NHWC")  # rank 2', ShapeError,
        lambda: x23().pack("NHWC"), ("NHWC", "(2, 3)")),
    Row("unpack-channels", "build", 'x5.unpack("NCHW4", 9)  # x5: (1, 1, 2, 3, 4)', ShapeError,
        lambda: Graph("g").input("x5", (1, 1, 2, 3, 4)).unpack("NCHW4", 9),
        ("unpack", "9 channels")),
    Row("fill-overflow", "build", 'x16.pack("NCHW4", fill=70000.0)  # float16', ShapeError,
        lambda: x16().pack("NCHW4", fill=70000.0), ("pack", "fill", "70000.0", "float16"),
        R + "test_a_fill_float16_cannot_hold_is_refused"),
    Row("pad-pairs", "build", "stridec.pad(x, (1,))", ShapeError,
        lambda: stridec.pad(x23(), (1,)), ("pad", "[1]")),
    Row("pad-crop", "build", "stridec.pad(x, (-2, -2))", ShapeError,
        lambda: stridec.pad(x23(), (-2, -2)), ("pad", "[-2, -2]", "size 3")),
    Row("pad-mode", "build", 'stridec.pad(x, (1, 1), mode="reflect")', UnsupportedError,
        lambda: stridec.pad(x23(), (1, 1), mode="reflect"), ("pad", "'reflect'"),
        E + "test_unsupported_requests"),
    Row("cat-sizes", "build", "stridec.cat([x, x.t()])", ShapeError,
        lambda: (lambda x: stridec.cat([x, x.t()]))(x23()), ("cat", "operand 1", "[3, 2]")),
    Row("cat-dtype", "build", 'stridec.cat([x.to("uint32"), x.to("int8")])', ShapeError,
        lambda: (lambda x: stridec.cat([x.to("uint32"), x.to("int8")]))(x23()),
        ("cat", "uint32", "int8")),
    Row("cat-empty", "build", "stridec.cat([])", ShapeError,
        lambda: stridec.cat([]), ("cat", "none")),
    Row("cat-dim", "build", "stridec.cat([x, x], 2)", LayoutError,
        lambda: (lambda x: stridec.cat([x, x], 2))(x23()), ("cat", "dim 2"),
        E + "test_dim_out_of_range_in_cat_and_layout"),
    Row("operand-not-a-value", "build", "stridec.cat([x, torch.zeros(2, 3)])", VerificationError,
        lambda: stridec.cat([x23(), torch.zeros(2, 3)]), ("cat", "Tensor")),
    Row("operand-of-another-graph", "build", "stridec.cat([x, x_of_another_graph])",
        VerificationError, two_graph_cat, ("cat", "another graph")),
    Row("attribute-type", "build", 'x.permute("ab")', VerificationError,
        lambda: x23().permute("ab"), ("permute", "'dims'", "'ab'")),
    Row("input-negative-size", "build", 'g.input("y", (-1,))', ShapeError,
        lambda: Graph("g").input("y", (-1,)), ("input", "[-1]")),
    Row("input-size-not-int", "build", 'g.input("y", (2.5,))', VerificationError,
        lambda: Graph("g").input("y", (2.5,)), ("input", "2.5")),
    Row("input-empty-name", "build", 'g.input("", (2,))', VerificationError,
        lambda: Graph("g").input("", (2,)), ("input", "name")),
    Row("rank-above-max", "build", f"g.input(\"y\", (1,) * {MAX_RANK - 1} + (2, 3))",
        UnsupportedError, lambda: Graph("g").input("y", TOO_MANY),
        ("input", f"rank {ABOVE}", str(MAX_RANK)), E + "test_rank_above_max"),
    Row("rank-above-max-by-a-view", "build",
        f"x{MAX_RANK}.unsqueeze(0)  # x{MAX_RANK} of rank {MAX_RANK}", UnsupportedError,
        lambda: Graph("g").input("x", TOO_MANY[1:]).unsqueeze(0), ("unsqueeze", f"rank {ABOVE}"),
        E + "test_rank_above_max"),
    Row("philox-state-dtype", "build", 'g.philox(<float32 (6,) state>, (4,))', VerificationError,
        lambda: (lambda g, s: g.philox(s, (4,)))(*state("float32")),
        ("philox", "state", "float32")),
    Row("philox-state-shape", "build", "g.philox(<uint32 (5,) state>, (4,))", VerificationError,
        lambda: (lambda g, s: g.philox(s, (4,)))(*state("uint32", (5,))), ("philox", "(5,)")),
    Row("philox-uniform-dtype", "build", 'g.philox_uniform(s, (4,), "int32")', VerificationError,
        lambda: (lambda g, s: g.philox_uniform(s, (4,), "int32"))(*state()),
        ("philox_uniform", "int32")),
    Row("op-after-output", "build", "g.output(x); x.t()", VerificationError,
        lambda: (lambda x: (x.graph.output(x), x.t()))(x23()), ("transpose", "output")),
    Row("output-twice", "build", "g.output(x); g.output(x)", VerificationError,
        lambda: (lambda x: (x.graph.output(x), x.graph.output(x)))(x23()), ("output", "already")),
    Row("layout-float-sizes", "build", "Layout((2.5,), (1,))", VerificationError,
        lambda: Layout((2.5,), (1,)), ("layout sizes", "2.5"),
        E + "test_each_kind_of_mistake_raises_its_class"),
    Row("mask-coeffs-not-ints", "build", 'MaskBound((1, "a"), 0, 3)', VerificationError,
        lambda: MaskBound((1, "a"), 0, 3), ("mask", "coeffs", "'a'")),

    # -- text IR: stridec.parse -----------------------------------------------------------
    Row("text-unknown-op", "text IR", "%0 = permuet %x {dims = [1, 0]} …", ParseError,
        lambda: parse(text(X_TEXT + "  %0 = permuet %x {dims = [1, 0]} : tensor<3x2xf32>\n"
                           "  output %0\n")), ("3:8", "permuet"), E + "test_malformed_ir_text"),
    Row("text-undefined-value", "text IR", "output %9", ParseError,
        lambda: parse(text(X_TEXT + "  output %9\n")), ("3:10", "%9"),
        E + "test_malformed_ir_text"),
    Row("text-redefined-value", "text IR", "%x defined twice", ParseError,
        lambda: parse(text(X_TEXT + '  %x = input {name = "y"} : tensor<2xf32>\n  output %x\n')),
        ("3:3", "%x")),
    Row("text-duplicate-input-name", "text IR", 'two inputs {name = "x"}', ParseError,
        lambda: parse(text(X_TEXT + '  %y = input {name = "x"} : tensor<2x3xf32>\n'
                           "  output %x, %y\n")), ("3:8", '"x"')),
    Row("text-wrong-result-type", "text IR", "permute printed with the operand's type",
        ParseError,
        lambda: parse(text(X_TEXT + "  %0 = permute %x {dims = [1, 0]} : tensor<2x3xf32>\n"
                           "  output %0\n")), ("3:37", "permute", "tensor<2x3xf32>")),
    Row("text-not-a-permutation", "text IR", "permute %x {dims = [1, 1]}", ParseError,
        lambda: parse(text(X_TEXT + "  %0 = permute %x {dims = [1, 1]} : tensor<3x2xf32>\n"
                           "  output %0\n")), ("3:8", "permute"), E + "test_malformed_ir_text"),
    Row("text-unknown-dtype", "text IR", "tensor<2x3xf8>", ParseError,
        lambda: parse(text('  %x = input {name = "x"} : tensor<2x3xf8>\n  output %x\n')),
        ("2:40", "'f8'"), E + "test_malformed_ir_text"),
    Row("text-negative-size", "text IR", "tensor<-2xf32>", ParseError,
        lambda: parse(text('  %x = input {name = "x"} : tensor<-2xf32>\n  output %x\n')),
        ("2:36", "'-2'")),
    Row("text-rank-above-max", "text IR", f"tensor<{'1x' * ABOVE}f32>", ParseError,
        lambda: parse(text(f'  %x = input {{name = "x"}} : tensor<{"1x" * ABOVE}f32>\n'
                           "  output %x\n")), ("2:29", f"rank {ABOVE}")),
    Row("text-as-strided-outside", "text IR", "as_strided %x {sizes = [7], strides = [1]}",
        ParseError,
        lambda: parse(text(X_TEXT + "  %0 = as_strided %x {sizes = [7], strides = [1]} : "
                           "tensor<7xf32, strided<[1], offset: 0>>\n  output %0\n")),
        ("3:8", "as_strided", "6 elements")),
    Row("text-unterminated-string", "text IR", '{name = "x}', ParseError,
        lambda: parse(text('  %x = input {name = "x} : tensor<2xf32>\n  output %x\n')),
        ("2:22", "unterminated")),
    Row("text-nested-too-deep", "text IR", "dims = [[[[…]]]] (100 levels)", ParseError,
        lambda: parse(text(X_TEXT + "  %0 = permute %x {dims = " + "[" * 100 + "]" * 100
                           + "} : tensor<2x3xf32>\n  output %0\n")), ("3:", "32 levels")),
    Row("text-empty", "text IR", 'stridec.parse("")', ParseError,
        lambda: parse(""), ("1:1", "end of input")),
    Row("text-truncated", "text IR", "the closing } missing", ParseError,
        lambda: parse(text(X_TEXT + "  output %x\n")[:-2]), ("4:1", "end of input"),
        E + "test_malformed_ir_text_at_the_end"),
    Row("text-not-a-string", "text IR", "stridec.parse(3)", ParseError,
        lambda: parse(3), ("parse", "int")),  # type: ignore[arg-type]

    # -- compile: stridec.compile ---------------------------------------------------------
    Row("compile-not-a-graph", "compile", 'stridec.compile("graph @g {}")', CallError,
        lambda: stridec.compile("graph @g {}"), ("compile", "str"), C + "test_not_a_graph"),
    Row("compile-without-output", "compile", "stridec.compile(g)  # no g.output(...)", CallError,
        lambda: stridec.compile(Graph("unfinished")), ("'unfinished'", "output"),
        C + "test_a_graph_without_output"),
    Row("compile-unknown-backend", "compile", 'stridec.compile(g, backend="cuda")',
        UnsupportedError, lambda: stridec.compile(flip_graph(), backend="cuda"),
        ("backend", "'cuda'"), C + "test_an_unknown_backend"),
    Row("compile-unknown-pass", "compile", 'stridec.compile(g, pipeline="canonicalize,fold")',
        UnsupportedError, lambda: stridec.compile(flip_graph(), pipeline="canonicalize,fold"),
        ("pass", "'fold'")),
    Row("compile-duplicate-input-names", "compile", 'g.input("x", …) twice; stridec.compile(g)',
        VerificationError, lambda: stridec.compile(duplicate_inputs()), ("input", "'x'")),
    Row("compile-broadcast-copy", "compile", "x.copy_to((0, 1)); stridec.compile(g)", LayoutError,
        lambda: stridec.compile(finished(lambda x: x.copy_to((0, 1)))),
        ("copy", "strided<[0, 1]", "one address")),
    Row("compile-overlapping-copy", "compile", "x.copy_to((1, 1)); stridec.compile(g)",
        LayoutError, lambda: stridec.compile(finished(lambda x: x.copy_to((1, 1)))),
        ("copy", "strided<[1, 1]", "one address")),
    Row("compile-above-int64", "compile", "g.full((2**63,), 0, \"int8\"); stridec.compile(g)",
        UnsupportedError,
        lambda: stridec.compile((lambda g: (g.output(g.full((2**63,), 0, "int8")), g)[1])(
            Graph("g"))), ("full", str(2**63), "2^63 - 1")),
    Row("compile-text-size-above-int64", "compile",
        "stridec.compile(stridec.parse(… tensor<99999999999999999999xf32> …))", UnsupportedError,
        lambda: stridec.compile(parse(text(
            '  %x = input {name = "x"} : tensor<99999999999999999999xf32>\n'
            "  %0 = contiguous %x : tensor<99999999999999999999xf32>\n  output %0\n"))),
        ("input", "99999999999999999999")),

    # -- call: fn(*tensors) ---------------------------------------------------------------
    Row("call-count", "call", "fn()  # fn takes x", CallError,
        lambda: call(), ("(x)", "expected 1", "got 0"),
        C + "test_wrong_argument_count_names_the_inputs"),
    Row("call-keyword", "call", "fn(x=t)", CallError,
        lambda: call(x=torch.zeros(2, 3)), ("x", "keyword")),
    Row("call-not-a-tensor", "call", "fn([[0.0] * 3] * 2)", CallError,
        lambda: call([[0.0] * 3] * 2), ("argument 'x'", "list"), C + "test_a_non_tensor_argument"),
    Row("call-dtype", "call", "fn(t.double())", CallError,
        lambda: call(torch.zeros(2, 3, dtype=torch.float64)), ("argument 'x'", "float64"),
        C + "test_wrong_dtype"),
    Row("call-sizes", "call", "fn(t.t())", CallError,
        lambda: call(torch.zeros(3, 2)), ("argument 'x'", "[3, 2]"), C + "test_wrong_sizes"),
    Row("call-rank-above-max", "call", f"fn(t.reshape((1,) * {MAX_RANK - 1} + (2, 3)))",
        CallError, lambda: call(torch.zeros(TOO_MANY)),
        ("argument 'x'", str(list(TOO_MANY)))),
    Row("call-two-devices", "call", 'fn(cpu_x, y.to("meta"))', CallError,
        lambda: call(torch.zeros(2, 3), torch.zeros(3, device="meta"),
                     graph=lambda: _two_inputs()), ("argument 'y'", "meta"),
        C + "test_arguments_on_two_devices"),
    Row("call-cuda-and-cpu", "call", "fn(x.cuda(), y)", CallError,
        lambda: call(torch.zeros(2, 3, device="cuda"), torch.zeros(3), graph=lambda: _two_inputs()),
        ("argument 'y'", "cpu"), C + "test_arguments_on_cpu_and_cuda", marks=(pytest.mark.gpu,),
        doc_message="argument 'y': expected device cuda:0; got cpu"),
    Row("call-storage-too-small", "call", "fn(view_of_a_shrunk_storage)", CallError,
        lambda: call(shrunk_view(4), graph=lambda: finished(lambda x: x.flip(1).contiguous(),
                                                               dtype="int8")),
        ("argument 'x'", "8 elements"), C + "test_a_layout_past_the_end_of_its_storage"),
    Row("call-storage-too-small-past-2^31", "call",
        "fn(view at offset 2**31 + 4 of a storage shrunk to 8 bytes)", CallError,
        lambda: call(shrunk_view(2**31 + 4),
                     graph=lambda: finished(lambda x: x.flip(1).contiguous(), dtype="int8")),
        ("argument 'x'", str(2**31 + 4 + 3 + 2), "8 elements")),
    Row("call-sparse", "call", "fn(t.to_sparse())", CallError,
        lambda: call(torch.zeros(2, 3).to_sparse()), ("argument 'x'", "sparse"),
        C + "test_a_tensor_without_strides"),
    Row("call-nested", "call", "fn(torch.nested.nested_tensor([…]))", CallError,
        lambda: call(_nested()), ("argument 'x'", "nested")),
    Row("call-neg-view", "call", "fn(z.conj().imag)  # a neg view", CallError,
        lambda: call(torch.zeros(2, 3, dtype=torch.complex64).conj().imag),
        ("argument 'x'", "neg view")),
    Row("call-quantized", "call", "fn(torch.quantize_per_tensor(…, torch.qint8))", CallError,
        lambda: call(_quantized(),
                     graph=lambda: finished(lambda x: x.flip(1).contiguous(), dtype="int8")),
        ("argument 'x'", "qint8")),
    Row("call-view-the-strides-cannot-take", "call", "fn(column_major)  # graph has x.view(3, 2)",
        CallError, lambda: call(torch.zeros(3, 2).t(), graph=view_graph),
        ("argument 'x'", "[1, 2]", "view"), C + "test_a_view_the_arguments_strides_cannot_take"),
    Row("call-triton-with-cpu-tensors", "call", 'stridec.compile(g, backend="triton")(cpu_t)',
        CallError, lambda: call(torch.zeros(2, 3), backend="triton"), ("triton", "cpu"),
        C + "test_triton_backend_with_cpu_tensors"),
    Row("call-meta-tensors", "call", 'fn(torch.zeros(2, 3, device="meta"))', CallError,
        lambda: call(torch.zeros(2, 3, device="meta")), ("cpu", "meta"),
        C + "test_kernel_backends_with_meta_tensors"),
    Row("call-storage-resized-to-0", "call", "t.untyped_storage().resize_(0); fn(t)", CallError,
        lambda: call(_resized()), ("argument 'x'", "storage of 0 elements")),
    Row("call-fake-tensor", "call", "fn(fake)  # a FakeTensor, its FakeTensorMode not active",
        CallError, lambda: call(_fake()), ("argument 'x'", "FakeTensor"),
        K + "test_fake_tensors_outside_their_mode_are_refused"),
    Row("call-fake-out", "call", "fn(t, out=fake)  # a FakeTensor, its mode not active",
        CallError, lambda: call(torch.zeros(2, 3), out=_fake()), ("out", "FakeTensor"),
        K + "test_fake_tensors_outside_their_mode_are_refused"),
    Row("call-real-tensor-under-fake-mode", "call", "with FakeTensorMode(): fn(real_t)",
        CallError, lambda: _under_fake_mode(torch.zeros(2, 3)),
        ("argument 'x'", "FakeTensorMode"),
        K + "test_real_tensors_under_a_strict_fake_mode_are_refused"),
    Row("call-wrapper-subclass", "call", "fn(TwoTensor(a, b))  # a __torch_dispatch__ wrapper",
        CallError, lambda: call(_two_tensor()), ("argument 'x'", "TwoTensor"),
        K + "test_tensors_without_usable_memory_are_refused_naming_the_argument"),
    Row("call-plan-for-reference", "call", 'stridec.compile(g, backend="reference").plan_for(t)',
        UnsupportedError,
        lambda: stridec.compile(flip_graph(), backend="reference").plan_for(torch.zeros(2, 3)),
        ("plan_for", "reference"), C + "test_plan_for_on_the_reference_backend"),
]


def _two_inputs() -> Graph:
    g = Graph("g")
    x, y = g.input("x", (2, 3)), g.input("y", (3,))
    g.output(x.t().contiguous(), y.flip(0).contiguous())
    return g


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():  # "nested tensors are in prototype stage"
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.zeros(2, 3)])


def _resized() -> torch.Tensor:
    t = torch.zeros(2, 3)
    t.untyped_storage().resize_(0)
    return t


def _fake() -> torch.Tensor:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return torch.zeros(2, 3)


def _under_fake_mode(t: torch.Tensor) -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return call(t)


def _two_tensor() -> torch.Tensor:
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(torch.zeros(2, 3), torch.zeros(2, 3))


def _quantized() -> torch.Tensor:
    with warnings.catch_warnings():  # "quantized tensor creation functions are deprecated"
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.zeros(2, 3), 0.1, 0, torch.qint8)


# --------------------------------------------------------------------------- the docs table

HEADER = (
    "| # | where | what the user did | error | example message (from a real run) | proven by |\n"
    "|---|---|---|---|---|---|\n"
)


def _cell(s: str) -> str:
    return s.replace("|", "\\|")


def render_row(number: int, row: Row, message: str) -> str:
    what = f"`{_cell(row.what)}`"
    test = f"`{row.see}`" if row.see else "—"
    return (f"| {number} | {row.where} | {what} | `{row.error.__name__}` | "
            f"`{_cell(message)}` | {test} |")


def message_of(row: Row) -> str:
    try:
        row.run()
    except StridecError as e:
        return str(e)
    raise AssertionError(f"row {row.id}: no StridecError")


def render_table() -> str:
    """The catalogue table as docs/errors.md shows it (rows that need a GPU, or whose
    error is not yet a StridecError, show the message the row expects to see)."""
    lines = []
    for number, row in enumerate(ROWS, 1):
        try:
            message = row.doc_message or message_of(row)
        except Exception as e:  # noqa: BLE001 - shown as it is, for the open rows
            message = f"{type(e).__name__}: {e}"
        lines.append(render_row(number, row, message))
    return HEADER + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id, marks=r.marks) for r in ROWS])
def test_row(row: Row) -> None:
    with pytest.raises(row.error) as info:
        row.run()
    message = str(info.value)
    assert isinstance(info.value, StridecError)
    for name in row.names:
        assert name in message, f"{row.id}: {name!r} not in {message!r}"
    if row.doc_message:
        assert message == row.doc_message
    number = ROWS.index(row) + 1
    assert render_row(number, row, message) in DOCS.read_text(), (
        f"docs/errors.md does not show row {number} ({row.id}) with the message it gets:\n"
        f"{render_row(number, row, message)}\n"
        f"(regenerate: python {Path(__file__).relative_to(ROOT)})"
    )


def test_rows_are_distinct_and_complete() -> None:
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    assert {r.where for r in ROWS} == {"build", "text IR", "compile", "call"}
    documented = re.findall(r"^\| (\d+) \| (build|text IR|compile|call) \|", DOCS.read_text(), re.M)
    assert [int(n) for n, _ in documented] == list(range(1, len(ROWS) + 1))


@pytest.mark.parametrize("row", [r for r in ROWS if r.see], ids=[r.id for r in ROWS if r.see])
def test_referenced_tests_exist(row: Row) -> None:
    path, name = row.see.split("::")
    assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), row.see


def test_cache_rows_reference_existing_tests() -> None:
    """The docs' cache table names the tests that prove each recovery."""
    cache_section = DOCS.read_text().split("## Cache faults", 1)[1]
    refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", cache_section)
    assert len(refs) >= 5
    for path, name in refs:
        assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), name


if __name__ == "__main__":
    print(render_table(), end="")


def test_every_kind_of_mistake_has_a_row() -> None:
    """Each class of the table of kinds at the top of docs/errors.md is some row's error
    (`BuildError` needs a C compiler that fails: tests/ir/test_errors.py has it)."""
    text = DOCS.read_text()
    table = text[text.index("| kind of mistake |"):].split("\n\n")[0].splitlines()[2:]
    classes = {row.split("|")[2].strip().strip("`") for row in table}
    assert classes - {r.error.__name__ for r in ROWS} == {"BuildError"}
