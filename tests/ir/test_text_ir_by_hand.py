"""Text IR written by hand: result types may be left to the parser where the op infers
them (the printer still writes them), and what is missing at the end of a line is
reported on that line."""

# ruff: noqa: E501 -- the IR lines are as the printer writes them, one op a line

from __future__ import annotations

import pytest

import stridec
from stridec.compiler.pass_manager import parse_pipeline
from stridec.errors import ParseError, UnsupportedError

TYPED = """\
graph @g {
  %x = input {name = "x"} : tensor<2x3x4x5xf16>
  %0 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>
  %1 = contiguous %0 : tensor<2x4x5x3xf16>
  %2, %3 = split %1 {sizes = [1, 1], dim = 0} : tensor<1x4x5x3xf16>, tensor<1x4x5x3xf16, strided<[60, 15, 3, 1], offset: 60>>
  %4 = pad %2 {pad = [1, 1], value = 0} : tensor<1x4x5x5xf16>
  %5 = cast %3 {dtype = f32} : tensor<1x4x5x3xf32>
  %s = input {name = "s"} : tensor<6xi32>
  %6, %7 = philox %s {sizes = [2]} : tensor<2xui32>, tensor<6xi32>
  output %4, %5, %6, %7
}
"""


def _untyped(text: str) -> str:
    """Every result type dropped but the input's."""
    lines = text.splitlines(keepends=True)
    return "".join(line if "input" in line or " : " not in line
                   else line.split(" : ")[0] + "\n" for line in lines)


def test_types_left_out_are_inferred_and_printed() -> None:
    untyped = _untyped(TYPED)
    assert untyped.count(" : tensor") == 2  # the inputs'
    assert str(stridec.parse(untyped)) == str(stridec.parse(TYPED)) == TYPED


def test_a_wrong_type_is_still_refused_when_given() -> None:
    text = _untyped(TYPED.split("  %2,")[0] + "  output %1\n}\n").replace(
        "%1 = contiguous %0", "%1 = contiguous %0 : tensor<2x4x5x3xf32>")
    with pytest.raises(ParseError, match="should be tensor<2x4x5x3xf16>"):
        stridec.parse(text)


def _where(text: str, needle: str, after: bool = False) -> tuple[int, int]:
    at = text.index(needle) + (len(needle) if after else 0)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


@pytest.mark.parametrize("text, needle, words", [
    # an input's type gives its sizes: reported after the `}` of its line
    ('graph @g {\n  %x = input {name = "x"}\n  output %x\n}\n', '{name = "x"}',
     ["'input' needs its result type", "got none"]),
    # a '>' missing at the end of a line
    ('graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32\n  output %x\n}\n',
     "tensor<2x3xf32", ["expected '>'"]),
    # a '}' missing at the end of a line
    ('graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
     '  %0 = permute %x {dims = [1, 0]\n  output %0\n}\n', "dims = [1, 0]",
     ["expected '}' or ','", "'output'"]),
])
def test_what_a_line_lacks_is_reported_on_that_line(text: str, needle: str,
                                                     words: list[str]) -> None:
    with pytest.raises(ParseError) as info:
        stridec.parse(text)
    assert (info.value.line, info.value.column) == _where(text, needle, after=True)
    for w in words:
        assert w in info.value.reason


def test_a_copy_layout_needs_the_type_and_result_names_match_results() -> None:
    text = ('graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            '  %0 = copy %x {layout = strided<[1, 2], offset: 0>}\n  output %0\n}\n')
    with pytest.raises(ParseError, match="'layout' attribute needs a result type") as info:
        stridec.parse(text)
    assert (info.value.line, info.value.column) == _where(text, "strided<")
    text = ('graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            '  %0, %1 = permute %x {dims = [1, 0]}\n  output %0\n}\n')
    with pytest.raises(ParseError, match="'permute' has 1 result.*got 2 result name") as info:
        stridec.parse(text)
    assert (info.value.line, info.value.column) == _where(text, "%0, %1")
    text = ('graph @g {\n  %x = input {name = "x"} : tensor<2x3xf32>\n'
            '  %0 = permute %x {dims = [1, 0]} tensor<3x2xf32>\n  output %0\n}\n')
    with pytest.raises(ParseError, match="expected ':' before the result types; got 'tensor'"):
        stridec.parse(text)


@pytest.mark.parametrize("text", ["builtin.module(canonicalize,fold-views)",
                                  " builtin.module( canonicalize , fold-views ) "])
def test_mlir_opts_anchored_pipeline_is_the_same_list(text: str) -> None:
    assert parse_pipeline(text) == parse_pipeline("canonicalize,fold-views")


@pytest.mark.parametrize("text", ["builtin.module(func.func(cse))", "func.func(cse)",
                                  "any(canonicalize)"])
def test_nested_pipelines_are_refused_saying_what_is_expected(text: str) -> None:
    with pytest.raises(UnsupportedError, match="no nested ops.*builtin.module\\(canonicalize"):
        parse_pipeline(text)
