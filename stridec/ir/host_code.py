"""Host code: the Python functions stridec generates for what a call computes on the host
(a symbolic plan's numbers at a binding, the checks of a call's arguments, an expression
of sizes), described as functions of named parameters over a body of statements and the
objects the text names. This is the one place such a description becomes a function;
the kernels' own source (Triton, C) is generated and loaded by the code generators and
the backends.

    f = HostFunction("scaled", "n, k")
    t = f.constant(2, "_two")
    f.add(f"return n * k * {t}")
    f.build()(3, 4)                       # 24

A generated function costs what its text costs: every lookup is a local or a constant of
its scope, nothing is interpreted per call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["HostFunction", "expression_function"]


class HostFunction:
    """A generated function being described: its `name`, its parameter list (Python text:
    `"ts, device, values, outs=_NO_OUTS"`), its body (statements, one a line; a nested
    block indents its lines with four spaces more), the objects the text names (its
    scope), and helper functions defined beside it (`helper`), which it may call."""

    __slots__ = ("name", "params", "body", "scope", "_helpers", "_built")

    def __init__(self, name: str, params: str, scope: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.params = params
        self.body: list[str] = []
        self.scope: dict[str, Any] = dict(scope or {})
        self._helpers: list[HostFunction] = []
        self._built: Callable[..., Any] | None = None

    def constant(self, value: Any, name: str) -> str:
        """`name`, naming `value` in the generated text (a dtype, a launcher, a record
        type); the same name given twice must name the same object."""
        held = self.scope.setdefault(name, value)
        if held is not value:
            raise ValueError(f"host code {self.name}: {name!r} names two objects")
        return name

    def add(self, *lines: str) -> None:
        """Statements appended to the body, one a line (relative indentation kept)."""
        self.body.extend(lines)

    def helper(self, name: str, params: str) -> HostFunction:
        """A function defined with this one, sharing its scope: the body it returns is
        filled by the caller (`_call_function`'s device switch calls its `_body`)."""
        helper = HostFunction(name, params)
        helper.scope = self.scope
        self._helpers.append(helper)
        return helper

    def source(self) -> str:
        """The text of the function and its helpers."""
        parts = []
        for f in (self, *self._helpers):
            lines = f.body or ["pass"]
            parts.append(f"def {f.name}({f.params}):\n"
                         + "".join(f"    {line}\n" for line in lines))
        return "".join(parts)

    def build(self) -> Callable[..., Any]:
        """The function, generated on first use."""
        if self._built is None:
            self._built = _define(self.source(), self.scope, self.name)
        return self._built


def expression_function(params: Sequence[str], expression: str,
                        scope: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The function of `params` (positional) returning `expression` (Python text over
    them and the names of `scope`): `lambda p0, p1: expression`."""
    f = HostFunction("expression", ", ".join(params), scope)
    f.add(f"return {expression}")
    return f.build()


def _define(source: str, scope: dict[str, Any], name: str) -> Callable[..., Any]:
    exec(compile(source, f"<stridec host code {name}>", "exec"), scope)  # noqa: S102 - our own text
    return scope[name]  # type: ignore[no-any-return]
