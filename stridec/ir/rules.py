"""Per-op-class rules that live above the IR (xDSL's `impl` registrations): the reference
executor's meaning of each op (`stridec.runtime.backends.reference.RULES`) and its adjoint
(`stridec.torch.adjoint.ADJOINTS`) need torch, so they cannot sit on the op classes; each
layer keeps an `OpRules` table, filled beside each rule's definition:

    @RULES.register(O.DiagonalOp)
    def _diagonal(run, op, t):
        return (torch.diagonal(t, op.offset, op.dim1, op.dim2),)

    ADJOINTS.declare_none(O.SomeOp, "why there is no adjoint")

A table answers for the op's own class only (a subclass is another op and decides for
itself), and every op class must have a rule or a statement that it has none: `undecided`
names the classes that have neither (tests/ir/test_op_rules.py asks it of every table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

__all__ = ["OpRules"]

R = TypeVar("R")


class OpRules(Generic[R]):
    """One rule of kind `kind` per op class, or the statement that a class has none."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._rules: dict[type, R] = {}
        self._none: dict[type, str] = {}

    def register(self, *classes: type) -> Callable[[R], R]:
        """Decorator: `rule` is the rule of each of `classes`."""

        def add(rule: R) -> R:
            for cls in classes:
                self._check_new(cls)
                self._rules[cls] = rule
            return rule

        return add

    def declare_none(self, cls: type, why: str) -> None:
        """`cls` has no rule of this kind, for the reason `why` (said to whoever asks)."""
        self._check_new(cls)
        self._none[cls] = why

    def _check_new(self, cls: type) -> None:
        if cls in self._rules or cls in self._none:
            raise TypeError(f"{self.kind}: op class {cls.__name__} is registered twice")

    def lookup(self, cls: type) -> R | None:
        """The rule of op class `cls`; None when it has none (see `why_none`)."""
        return self._rules.get(cls)

    def why_none(self, cls: type) -> str | None:
        """Why op class `cls` has no rule, where that was declared; else None."""
        return self._none.get(cls)

    def undecided(self, classes: Iterable[type]) -> list[type]:
        """The classes among `classes` with neither a rule nor a statement of none."""
        return [c for c in classes if c not in self._rules and c not in self._none]
