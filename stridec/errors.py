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
    """Base class of every error stridec raises on bad input."""


class LayoutError(StridecError, ValueError):
    """A view rule cannot apply to a layout (bad dims, sizes out of range, ...)."""


class ShapeError(StridecError, ValueError):
    """Operand sizes or dtypes do not fit an op (cat of mismatched sizes, ...)."""


class VerificationError(StridecError):
    """The IR breaks an invariant, or a value of the wrong type is given where an op, a
    layout, a mask or a format takes it ("'dims' must be a list of ints"); the message
    names the op or argument."""


class ParseError(StridecError):
    """Malformed text IR; carries the 1-based line and column of the fault."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.reason = message


class CallError(StridecError, TypeError):
    """A compiled graph was called with arguments that do not match it."""


class UnsupportedError(StridecError, NotImplementedError):
    """A well-formed request stridec does not support (rank above 25, unknown dtype, format,
    pass or backend, ...)."""


class BuildError(StridecError, RuntimeError):
    """A native kernel could not be built: the message names the tool (the C compiler)
    and the kept source file."""


class InternalError(RuntimeError):
    """A bug in stridec, not a mistake of the caller (so not a `StridecError`): an
    exception no check anticipated, raised inside a pass, or a pass that leaves IR that
    does not verify. The message starts "bug in stridec:" and says where; the original
    exception, with its traceback, is the `__cause__`."""
