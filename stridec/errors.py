"""The error hierarchy (docs/design.md#errors).

Which class for which kind of mistake is one table, at the top of docs/errors.md; every
message names the op or argument, what was expected and what was given.
"""

from __future__ import annotations

__all__ = [
    "StridecError",
    "LayoutError",
    "ShapeError",
    "VerificationError",
    "ParseError",
    "CallError",
    "UnsupportedError",
    "BuildError",
    "InternalError",
]


class StridecError(Exception):
    """Base class of every error stridec raises on bad input.

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> try:
    ...     x.permute(0, 0, 1)
    ... except stridec.StridecError as e:
    ...     print(type(e).__name__, e)
    LayoutError permute: dims (0, 0, 1) is not a permutation of range(3) (sizes (2, 3, 4))
    """


class LayoutError(StridecError, ValueError):
    """A view rule cannot apply to a layout (bad dims, sizes out of range, ...).

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> x.transpose(0, 1).view(-1)        # no view has these strides: reshape copies
    Traceback (most recent call last):
        ...
    stridec.errors.LayoutError: view: sizes [24] are not viewable from layout strided<[4, 12...
    """


class ShapeError(StridecError, ValueError):
    """Operand sizes or dtypes do not fit an op (cat of mismatched sizes, ...).

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> y = g.input("y", (2, 2, 3), "float32")
    >>> stridec.cat([x, y], dim=0)
    Traceback (most recent call last):
        ...
    stridec.errors.ShapeError: cat: operand 1 has sizes [2, 2, 3]; expected [2, 3, 4] except...
    """


class VerificationError(StridecError):
    """The IR breaks an invariant, or a value of the wrong type is given where an op, a
    layout, a mask or a format takes it ("'dims' must be a list of ints"); the message
    names the op or argument.

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> x.permute("a", 0, 1)
    Traceback (most recent call last):
        ...
    stridec.errors.VerificationError: permute: attribute 'dims' must be an int; got 'a'
    """


class ParseError(StridecError):
    """Malformed text IR; carries the 1-based line and column of the fault.

    >>> stridec.parse('graph @g { %x = input {name = "x"} : tensor<2x3xf17> }')
    Traceback (most recent call last):
        ...
    stridec.errors.ParseError: 1:49: unknown element type 'f17'; expected one of f16, bf16, ...
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.reason = message


class CallError(StridecError, TypeError):
    """A compiled graph was called with arguments that do not match it.

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> g.output(x.transpose(0, 1).contiguous())
    >>> stridec.compile(g, backend="reference")(torch.zeros(2, 3))
    Traceback (most recent call last):
        ...
    stridec.errors.CallError: argument 'x': expected sizes [2, 3, 4]; got [2, 3]
    """


class UnsupportedError(StridecError, NotImplementedError):
    """A well-formed request stridec does not support (rank above 25, unknown dtype, format,
    pass or backend, ...).

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> stridec.pad(x, (1, 1), mode="reflect")
    Traceback (most recent call last):
        ...
    stridec.errors.UnsupportedError: pad: mode must be 'constant'; got 'reflect'
    """


class BuildError(StridecError, RuntimeError):
    """A native kernel could not be built: the message names the tool (the C compiler)
    and the kept source file.

    >>> issubclass(stridec.BuildError, stridec.StridecError)   # STRIDEC_CC=no-such-cc raises it
    True
    """


class InternalError(RuntimeError):
    """A bug in stridec, not a mistake of the caller (so not a `StridecError`): an
    exception no check anticipated, raised inside a pass, or a pass that leaves IR that
    does not verify. The message starts "bug in stridec:" and says where; the original
    exception, with its traceback, is the `__cause__`.

    >>> issubclass(stridec.InternalError, stridec.StridecError)   # a bug, not the caller's mistake
    False
    """
