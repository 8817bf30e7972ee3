"""Read the text form that `stridec.ir.printer.print_graph` writes (grammar: docs/text-ir.md).

    graph @nchw_to_nhwc {
      %x = input {name = "x"} : tensor<2x3x4x5xf16>
      %0 = permute %x {dims = [0, 2, 3, 1]}
         : tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>
      %1 = contiguous %0 : tensor<2x4x5x3xf16>
      output %1
    }

(Newlines are insignificant; the printer writes each op on one line.)

A hand-written lexer and a recursive-descent parser. The lexer is lazy: the parser asks for
the token at a source offset, which lets a tensor type's sizes (`2x3x4x5xf16`, where the
`x` glues sizes and element type together) be scanned character by character without a
lexer mode. Each op is built with its class's `from_text`, which re-infers the result
types from the operands and attributes and rejects printed types that differ, so a parsed
graph is as checked as a built one.

Every fault is a `ParseError` with the 1-based line and column of the offending token.
Errors raised while building an op (bad attributes, layout rules that do not apply, types
that disagree with inference) keep their message and become a `ParseError` at the op's
name, with the original exception as `__cause__`.
"""

from __future__ import annotations

import bisect
import difflib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from stridec.errors import ParseError, StridecError, VerificationError
from stridec.ir.dtypes import DTYPES, DType
from stridec.ir.graph import OP_REGISTRY, Graph, Op, Value
from stridec.ir.layout import MAX_RANK, Layout
from stridec.ir.symbols import Sym, parse_size
from stridec.ir.types import TensorType

# Importing the op catalogue fills OP_REGISTRY.
from stridec.ir import ops as _ops  # isort: skip

__all__ = ["parse"]

T = TypeVar("T")

#: Element types by their text spelling (`f16`, `ui32`, `i1`, ...).
DTYPES_BY_SHORT: dict[str, DType] = {d.short: d for d in DTYPES.values()}
_DTYPE_LIST = ", ".join(DTYPES_BY_SHORT)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GRAPH_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # as the printer's `_IDENT`
_VALUE_SUFFIX = re.compile(r"[A-Za-z0-9_.]+")
_VALUE_NAME = re.compile(r"[0-9]+|[A-Za-z_][A-Za-z0-9_.]*")
_DIGITS = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?")
_NEG_INF = re.compile(r"-inf(?![A-Za-z0-9_])")
_DTYPE_LIKE = re.compile(r"(bf|f|ui|i|u)[0-9]+")
_PUNCT = frozenset("{}[]<>,=:")
_MAX_LIST_DEPTH = 32

# Attributes of `input` that its result type spells; the text gives only `name`.
@dataclass(frozen=True, slots=True)
class Token:
    """One lexeme: `kind` is ident, value, graph_name, int, float, string, punct or eof."""

    kind: str
    text: str
    start: int
    end: int
    value: Any = None

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        text = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"'{text}'"


@dataclass(frozen=True, slots=True)
class _StridedAttr:
    """A `strided<[...], offset: N>` attribute: the sizes come from the op (`resolve_layouts`)."""

    strides: tuple[int, ...]
    offset: int
    token: Token


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a source offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def error(self, message: str, offset: int) -> NoReturn:
        line, column = self.position(offset)
        raise ParseError(message, line, column)

    def skip_trivia(self, pos: int) -> int:
        """Skip whitespace and `//` comments."""
        text = self.text
        while pos < len(text):
            c = text[pos]
            if c in " \t\r\n\f\v":
                pos += 1
            elif text.startswith("//", pos):
                newline = text.find("\n", pos)
                pos = len(text) if newline < 0 else newline + 1
            else:
                break
        return pos

    def lex(self, pos: int) -> Token:
        """The token that starts at or after `pos`."""
        text = self.text
        pos = self.skip_trivia(pos)
        if pos >= len(text):
            return Token("eof", "", pos, pos)
        c = text[pos]
        if c in _PUNCT:
            return Token("punct", c, pos, pos + 1)
        if c.isascii() and (c.isalpha() or c == "_"):
            m = _IDENT.match(text, pos)
            assert m is not None
            return Token("ident", m.group(), pos, m.end())
        m = _NUMBER.match(text, pos)
        if m is not None:
            literal = m.group()
            if m.group(1) is None and m.group(2) is None:
                return Token("int", literal, pos, m.end(), self.to_int(literal, pos))
            return Token("float", literal, pos, m.end(), float(literal))
        if c == "-" and _NEG_INF.match(text, pos):
            return Token("float", "-inf", pos, pos + 4, -math.inf)
        if c == '"':
            return self.lex_string(pos)
        if c == "%":
            m = _VALUE_SUFFIX.match(text, pos + 1)
            if m is None:
                self.error(f"expected a value name after '%'; got {self._char(pos + 1)}", pos)
            if not _VALUE_NAME.fullmatch(m.group()):
                self.error(
                    f"bad value name '%{m.group()}': expected %<digits> or %<identifier>", pos
                )
            return Token("value", "%" + m.group(), pos, m.end(), m.group())
        if c == "(":
            return self.lex_size(pos)
        if c == "@":
            if pos + 1 < len(text) and text[pos + 1] == '"':
                string = self.lex_string(pos + 1)
                return Token("graph_name", "@" + string.text, pos, string.end, string.value)
            m = _GRAPH_IDENT.match(text, pos + 1)
            if m is None:
                self.error(
                    f"expected a graph name (@ident or @\"quoted\") after '@'; got "
                    f"{self._char(pos + 1)}",
                    pos,
                )
            return Token("graph_name", "@" + m.group(), pos, m.end(), m.group())
        self.error(f"unexpected character {c!r}", pos)

    def lex_size(self, pos: int) -> Token:
        """A symbolic size in parentheses, `(64*N+3)`: a `size` token (an int or a Sym)."""
        end = self.matching_paren(pos)
        literal = self.text[pos:end]
        try:
            value = parse_size(literal[1:-1])
        except StridecError as e:
            self.error(f"bad size expression {literal}: {e}", pos)
        return Token("size", literal, pos, end, value)

    def matching_paren(self, pos: int) -> int:
        """The offset after the ')' closing the '(' at `pos` (on the same line)."""
        depth = 0
        for i in range(pos, len(self.text)):
            c = self.text[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif c == "\n":
                break
        self.error("unclosed '(' in a size expression", pos)

    def to_int(self, literal: str, pos: int) -> int:
        try:
            return int(literal)
        except ValueError:  # beyond Python's limit on int digits (sys.get_int_max_str_digits)
            self.error(f"integer literal of {len(literal)} characters is too long", pos)

    def lex_string(self, pos: int) -> Token:
        """A JSON string literal starting at the quote at `pos`."""
        text = self.text
        i = pos + 1
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                literal = text[pos : i + 1]
                try:
                    value = json.loads(literal)
                except json.JSONDecodeError as e:
                    self.error(f"bad string literal: {e.msg}", pos + e.pos)
                return Token("string", literal, pos, i + 1, value)
            if c == "\n":
                break
            i += 1
        self.error("unterminated string literal (strings end with '\"' on the same line)", pos)

    def _char(self, pos: int) -> str:
        return "end of input" if pos >= len(self.text) else repr(self.text[pos])


class _Parser:
    def __init__(self, text: str) -> None:
        self.lexer = _Lexer(text)
        self.tok = self.lexer.lex(0)
        self.prev_end: int | None = None  # the end of the last token read
        self.graph: Graph | None = None
        self.values: dict[str, tuple[Value, Token]] = {}
        self.input_names: dict[str, Token] = {}

    # -- token helpers ---------------------------------------------------------------------
    def error(self, message: str, at: Token | int | None = None) -> NoReturn:
        if at is None:
            at = self.tok
        self.lexer.error(message, at.start if isinstance(at, Token) else at)

    def advance(self) -> Token:
        tok = self.tok
        self.prev_end = tok.end
        self.tok = self.lexer.lex(tok.end)
        return tok

    def missing_here(self) -> int:
        """Where something missing is reported: the current token, or, when that is on a
        later line, just after the last token read (the line that lacks it)."""
        if self.prev_end is not None and "\n" in self.lexer.text[self.prev_end:self.tok.start]:
            return self.prev_end
        return self.tok.start

    def at_punct(self, p: str) -> bool:
        return self.tok.kind == "punct" and self.tok.text == p

    def expect_punct(self, p: str, context: str) -> Token:
        if not self.at_punct(p):
            self.error(f"expected '{p}' {context}; got {self.tok.describe()}",
                       self.missing_here())
        return self.advance()

    def expect_keyword(self, word: str, context: str) -> Token:
        if self.tok.kind != "ident" or self.tok.text != word:
            self.error(f"expected '{word}' {context}; got {self.tok.describe()}",
                       self.missing_here())
        return self.advance()

    # -- graph -------------------------------------------------------------------------------
    def parse_graph(self) -> Graph:
        header = self.expect_keyword("graph", "at the start of the text")
        if self.tok.kind != "graph_name":
            self.error(f"expected a graph name like @main after 'graph'; got {self.tok.describe()}")
        self.graph = Graph(self.advance().value)
        self.expect_punct("{", "to open the graph body")
        while not self.at_punct("}"):
            if self.tok.kind == "eof":
                self.error("expected '}' to close the graph body; got end of input")
            self.parse_op()
        self.advance()
        if self.tok.kind != "eof":
            self.error(
                f"expected end of input after the graph's closing '}}'; got {self.tok.describe()}"
            )
        try:
            self.graph.verify()
        except VerificationError as e:  # the per-op checks above should leave nothing here
            line, column = self.lexer.position(header.start)
            raise ParseError(f"graph does not verify: {e}", line, column) from e
        return self.graph

    # -- ops ---------------------------------------------------------------------------------
    def parse_value_list(self, parse_one: Callable[[], T], what: str) -> list[T]:
        """`%a, %b, …`: one or more values, each read by `parse_one`; `what` names one in
        the error after a ',' with no value."""
        items = [parse_one()]
        while self.at_punct(","):
            self.advance()
            if self.tok.kind != "value":
                self.error(f"expected {what} like %0 after ','; got {self.tok.describe()}")
            items.append(parse_one())
        return items

    def parse_op(self) -> None:
        assert self.graph is not None
        names: list[Token] = []
        if self.tok.kind == "value":
            names = self.parse_value_list(self.advance, "a result name")
            self.expect_punct("=", "after the result names")
        op_tok = self.tok
        if op_tok.kind != "ident":
            after = "after '='" if names else "or a result name"
            self.error(f"expected an op name {after}; got {op_tok.describe()}")
        cls = OP_REGISTRY.get(op_tok.text)
        if cls is None:
            close = difflib.get_close_matches(op_tok.text, OP_REGISTRY, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.error(f"unknown op '{op_tok.text}'{hint}", op_tok)
        self.advance()
        if self.graph.output_op is not None:
            self.error(f"'output' must be the last op; got '{op_tok.text}' after it", op_tok)
        if cls is _ops.OutputOp and names:
            self.error("'output' has no results, so it takes no result names", names[0])

        operands: list[Value] = []
        if self.tok.kind == "value":
            operands = self.parse_value_list(self.parse_use, "an operand")

        attrs: dict[str, tuple[Any, Token]] = {}
        if self.at_punct("{"):
            attrs = self.parse_attr_dict(cls)

        types: list[TensorType] = []
        type_toks: list[Token] = []  # where each written type starts
        if self.at_punct(":"):
            colon = self.advance()
            if not names:
                self.error(
                    f"'{op_tok.text}' has no result names, so it takes no result types", colon
                )
            first = self.tok
            type_toks.append(first)
            types.append(self.parse_type())
            while self.at_punct(","):
                self.advance()
                type_toks.append(self.tok)
                types.append(self.parse_type())
            if len(types) != len(names):
                self.error(
                    f"expected {len(names)} result type(s), one per result name; got {len(types)}",
                    first,
                )
        elif names:
            # Result types may be left out where the op infers them (the printer always
            # writes them); what follows must then start the next op or close the graph.
            follows = self.tok
            if not (follows.kind == "value" or self.at_punct("}") or follows.kind == "eof"
                    or (follows.kind == "ident" and follows.text in OP_REGISTRY)):
                self.error(f"expected ':' before the result types; got {follows.describe()}")
            if cls is _ops.InputOp:
                self.error(
                    "'input' needs its result type, which gives the input's sizes and dtype "
                    '(as in %x = input {name = "x"} : tensor<2x3xf32>); got none',
                    self.missing_here())

        values = {key: value for key, (value, _) in attrs.items()}
        for key, (value, _) in attrs.items():
            values[key] = self.resolve_layouts(key, value, values, types)
        op = self.build(cls, operands, values, types, op_tok, type_toks)
        if len(names) != len(op.results):
            op.drop_uses()
            self.graph.ops.remove(op)
            self.error(f"'{cls.name}' has {len(op.results)} result(s); got {len(names)} "
                       "result name(s)", names[0] if names else op_tok)
        for name, result in zip(names, op.results, strict=True):
            self.define(name, result)

    def build(
        self,
        cls: type[Op],
        operands: list[Value],
        attrs: dict[str, Any],
        types: list[TensorType],
        op_tok: Token,
        type_toks: list[Token],
    ) -> Op:
        """`cls.from_text`, the op's own checks, and the graph-level ones, as ParseErrors."""
        assert self.graph is not None
        # An op whose types are all inferred is built from operands and attributes alone,
        # so a written type that differs is reported at that type, not at the op's name.
        try:
            cls, attrs = cls.text_form(operands, attrs)
            inferred = types and cls.from_text.__func__ is Op.from_text.__func__
            if types and not inferred:
                op = cls.from_text(operands, attrs, types)
            else:
                op = cls(operands, attrs)
        except StridecError as e:
            self.rethrow(e, op_tok)
        except (TypeError, ValueError, ArithmeticError, LookupError) as e:
            # An op hook that let a Python error through: still the text's fault.
            self.rethrow(e, op_tok, prefix=f"'{cls.name}': bad operands or attributes: ")
        if inferred:
            for given, got, at in zip(types, [v.type for v in op.results], type_toks, strict=False):
                if given != got:
                    op.drop_uses()
                    self.rethrow(VerificationError(
                        f"{cls.name}: result type should be {got}; got {given}"), at)
        try:
            op.verify_()
        except StridecError as e:
            op.drop_uses()
            self.rethrow(e, op_tok)
        if isinstance(op, _ops.InputOp):
            name = op.arg_name
            first = self.input_names.get(name)
            if first is not None:
                op.drop_uses()
                line, _ = self.lexer.position(first.start)
                self.error(f"input name {json.dumps(name)} is already used on line {line}", op_tok)
            self.input_names[name] = op_tok
        self.graph.append(op)
        return op

    def rethrow(self, e: BaseException, at: Token, prefix: str = "") -> NoReturn:
        line, column = self.lexer.position(at.start)
        message = f"{prefix}{type(e).__name__}: {e}"
        raise ParseError(message, line, column) from e

    def parse_use(self) -> Value:
        tok = self.advance()
        found = self.values.get(tok.value)
        if found is None:
            self.error(f"use of undefined value {tok.text}", tok)
        return found[0]

    def define(self, name: Token, value: Value) -> None:
        first = self.values.get(name.value)
        if first is not None:
            line, _ = self.lexer.position(first[1].start)
            self.error(f"redefinition of value {name.text} (first defined on line {line})", name)
        self.values[name.value] = (value, name)

    # -- attributes --------------------------------------------------------------------------
    def parse_attr_dict(self, cls: type[Op]) -> dict[str, tuple[Any, Token]]:
        self.advance()  # '{'
        attrs: dict[str, tuple[Any, Token]] = {}
        allowed = cls.parsed_attr_names
        if self.at_punct("}"):
            self.advance()
            return attrs
        while True:
            key = self.tok
            if key.kind != "ident":
                self.error(f"expected an attribute name; got {key.describe()}")
            if key.text not in allowed:
                if key.text in cls.attr_names:
                    self.error(
                        f"attribute '{key.text}' of '{cls.name}' is given by its result type", key
                    )
                expected = ", ".join(allowed) or "none"
                self.error(
                    f"unknown attribute '{key.text}' for '{cls.name}'; expected one of: {expected}",
                    key,
                )
            if key.text in attrs:
                self.error(f"attribute '{key.text}' is given twice", key)
            self.advance()
            self.expect_punct("=", f"after attribute name '{key.text}'")
            attrs[key.text] = (self.parse_attr_value(), key)
            if self.at_punct(","):
                self.advance()
                continue
            self.expect_punct("}", "or ',' after an attribute value")
            return attrs

    def parse_attr_value(self, depth: int = 0) -> Any:
        tok = self.tok
        if tok.kind in ("int", "float", "string", "size"):
            self.advance()
            return tok.value
        if self.at_punct("["):
            if depth >= _MAX_LIST_DEPTH:  # recursion is bounded, not Python's stack
                self.error(f"lists nested deeper than {_MAX_LIST_DEPTH} levels", tok)
            self.advance()
            items: list[Any] = []
            if self.at_punct("]"):
                self.advance()
                return items
            while True:
                items.append(self.parse_attr_value(depth + 1))
                if self.at_punct(","):
                    self.advance()
                    continue
                self.expect_punct("]", "or ',' in a list")
                return items
        if tok.kind == "ident":
            word = tok.text
            if word == "strided":
                strides, offset = self.parse_strided()
                return _StridedAttr(strides, offset, tok)
            self.advance()
            if word in ("true", "false"):
                return word == "true"
            if word == "none":
                return None
            if word in ("inf", "nan"):
                return float(word)
            dtype = DTYPES_BY_SHORT.get(word)
            if dtype is not None:
                return dtype
            if _DTYPE_LIKE.fullmatch(word):
                self.error(f"unknown dtype '{word}'; expected one of {_DTYPE_LIST}", tok)
        self.error(
            "expected an attribute value (an int, a float, a string, true, false, none, a dtype, "
            f"strided<...> or a list); got {tok.describe()}",
            tok,
        )

    def parse_strided(self) -> tuple[tuple[int, ...], int]:
        """`strided<[s0, s1, ...], offset: N>`; the current token is `strided`."""
        self.advance()
        self.expect_punct("<", "after 'strided'")
        self.expect_punct("[", "to open the strides of strided<...>")
        strides: list[int] = []
        if not self.at_punct("]"):
            strides.append(self.expect_size("a stride"))
            while self.at_punct(","):
                self.advance()
                strides.append(self.expect_size("a stride"))
        self.expect_punct("]", "or ',' in the strides of strided<...>")
        self.expect_punct(",", "after the strides of strided<...>")
        self.expect_keyword("offset", "after the strides of strided<...>")
        self.expect_punct(":", "after 'offset'")
        offset = self.expect_size("the offset")
        self.expect_punct(">", "to close strided<...>")
        return tuple(strides), offset

    def expect_size(self, what: str) -> int | Sym:
        """An int or a symbolic size in parentheses."""
        if self.tok.kind == "size":
            return self.advance().value
        return self.expect_int(what)

    def expect_int(self, what: str) -> int:
        if self.tok.kind != "int":
            self.error(f"expected an integer for {what}; got {self.tok.describe()}")
        return self.advance().value

    def resolve_layouts(
        self, key: str, value: Any, attrs: dict[str, Any], types: list[TensorType]
    ) -> Any:
        """Give a `strided<...>` attribute its sizes, which the text leaves to the context.

        As with MLIR's memref layouts, the strided form carries strides and offset only:
        `layout` takes the sizes of the (first) result type; every other layout attribute
        (`src`, `dst` of the explicit copies, `index`, `dst` of the placed `philox`) those
        of the `space` attribute, the iteration space it maps.
        """
        if isinstance(value, list):
            for item in value:
                if isinstance(item, _StridedAttr):
                    self.error(
                        f"strided<...> cannot appear inside a list (attribute '{key}')", item.token
                    )
                self.resolve_layouts(key, item, attrs, types)
            return value
        if not isinstance(value, _StridedAttr):
            return value
        if key == "layout":
            if not types:
                self.error(
                    "a 'layout' attribute needs a result type to take its sizes from", value.token
                )
            sizes: Any = types[0].sizes
        else:
            sizes = attrs.get("space")
            if not isinstance(sizes, list) or not all(
                isinstance(s, (int, Sym)) and not isinstance(s, bool) for s in sizes
            ):
                self.error(
                    f"attribute '{key}' takes its sizes from a 'space' attribute (a list of ints); "
                    f"got {'no space' if sizes is None else repr(sizes)}",
                    value.token,
                )
        return self.make_layout(sizes, value.strides, value.offset, value.token)

    def make_layout(self, sizes: Any, strides: tuple[int, ...], offset: int, at: Token) -> Layout:
        if len(strides) != len(sizes):
            self.error(
                f"strided<...> has {len(strides)} stride(s) for {len(sizes)} size(s) {list(sizes)}",
                at,
            )
        try:
            return Layout(tuple(sizes), strides, offset)
        except StridecError as e:
            self.rethrow(e, at)

    # -- types -------------------------------------------------------------------------------
    def parse_type(self) -> TensorType:
        """`tensor<2x3xf32>`, `tensor<f32>`, `tensor<3x2xf32, strided<[1, 3], offset: 0>>`."""
        start = self.tok
        if start.kind != "ident" or start.text != "tensor":
            self.error(f"expected a tensor type like tensor<2x3xf32>; got {start.describe()}",
                       self.missing_here())
        self.advance()
        lt = self.expect_punct("<", "after 'tensor'")
        sizes, dtype, end = self.scan_shape(lt.end)
        self.tok, self.prev_end = self.lexer.lex(end), end
        if len(sizes) > MAX_RANK:
            self.error(f"tensor type has rank {len(sizes)}, above the maximum {MAX_RANK}", start)
        layout = None
        if self.at_punct(","):
            self.advance()
            strided = self.tok
            if strided.kind != "ident" or strided.text != "strided":
                self.error(
                    "expected a layout strided<[...], offset: N> after ','; "
                    f"got {strided.describe()}"
                )
            strides, offset = self.parse_strided()
            layout = self.make_layout(sizes, strides, offset, strided)
        self.expect_punct(">", "to close the tensor type")
        return TensorType(sizes, dtype, layout)

    def scan_shape(self, pos: int) -> tuple[tuple[int | Sym, ...], DType, int]:
        """Scan `2x3x4xf16` character by character from `pos`; return sizes, dtype, end."""
        text = self.lexer.text
        pos = self.lexer.skip_trivia(pos)
        sizes: list[int | Sym] = []
        while True:
            # A size: digits, a symbol name (`Nx64`: a name stops at its first 'x'), or a
            # parenthesized expression (`(N+2)x64`; names with an 'x' print so).
            size: int | Sym
            m = _DIGITS.match(text, pos)
            if m is not None:
                end, size = m.end(), self.lexer.to_int(m.group(), pos)
            elif text.startswith("(", pos):
                tok = self.lexer.lex_size(pos)
                end, size = tok.end, tok.value
            else:
                m = _IDENT.match(text, pos)
                if m is None or "x" not in m.group() or m.group().startswith("x"):
                    break
                end = pos + m.group().index("x")
                size = Sym(text[pos:end])
            if not text.startswith("x", end):
                found = self.lexer.lex(end)
                self.error(
                    f"expected 'x' after size {text[pos:end]} in the tensor type (as in "
                    f"tensor<2x3xf32>); got {found.describe()}",
                    end,
                )
            sizes.append(size)
            pos = end + 1
        m = _IDENT.match(text, pos)
        if m is None:
            found = self.lexer.lex(pos)
            what = "a size or an element type" if not sizes else "a size or the element type"
            self.error(f"expected {what} in the tensor type; got {found.describe()}", pos)
        dtype = DTYPES_BY_SHORT.get(m.group())
        if dtype is None:
            self.error(f"unknown element type '{m.group()}'; expected one of {_DTYPE_LIST}", pos)
        return tuple(sizes), dtype, m.end()


def parse(text: str) -> Graph:
    """Parse the text form of one graph (as `str(graph)` prints it) into a `Graph`.

    Raises `ParseError` with the 1-based line and column of the fault.

    >>> g = stridec.parse('''
    ... graph @t {
    ...   %x = input {name = "x"} : tensor<2x3xf32>
    ...   %0 = transpose %x {dim0 = 0, dim1 = 1}
    ...   %1 = contiguous %0
    ...   output %1
    ... }
    ... ''')
    >>> print(g.outputs[0].type)
    tensor<3x2xf32>
    """
    if not isinstance(text, str):
        raise ParseError(f"parse: expected the text IR as a str; got {type(text).__name__}", 1, 1)
    return _Parser(text).parse_graph()
