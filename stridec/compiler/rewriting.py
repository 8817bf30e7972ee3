"""Rewrite patterns and the sweep that applies them (MLIR's greedy driver, simplified).

A pattern looks at one op (and the ops defining its operands) and either rewrites it
through the `Rewriter` or returns a reason why it does not apply (MLIR's
`notifyMatchFailure`): `None` means success, a string means no match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from stridec.ir.graph import Graph, Op, Value
from stridec.ir.ops import CopyOp, PhiloxOp, PhiloxUniformOp

__all__ = ["Pattern", "Rewriter", "apply_patterns", "build", "written_into"]


class Rewriter:
    """Collects the ops of the graph being rebuilt in one forward sweep."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.ops: list[Op] = []
        self.changed = False

    def insert(self, op: Op) -> Op:
        """Place a new op before the op being visited."""
        op.graph = self.graph
        self.ops.append(op)
        return op

    def create(self, cls: type[Op], operands: Sequence[Value], attrs: dict[str, Any]) -> Op:
        return self.insert(cls(operands, attrs))

    def replace(self, op: Op, values: Sequence[Value]) -> None:
        """Redirect every use of `op`'s results to `values`; `op` is then dropped."""
        for old, new in zip(op.results, values, strict=True):
            if old is not new:
                old.replace_all_uses_with(new)
        self.changed = True


def build(cls: type[Op], operands: Sequence[Value], attrs: dict[str, Any]) -> Op:
    return cls(operands, attrs)


def written_into(op: Op) -> bool:
    """Whether a copy writes into a result of `op` in place (`copy %src, %buffer`: cat and
    pad fill one buffer piece by piece). Such a buffer has exactly one writer after `op`;
    a pass must neither drop `op` for another value nor give the buffer a second reader."""
    return any(isinstance(user, (CopyOp, PhiloxOp, PhiloxUniformOp)) and i == 1
               for r in op.results for user, i in r.uses)


class Pattern:
    """One rewrite: `rewrite(op, rewriter)` returns None on success, else why not."""

    name: ClassVar[str] = "pattern"
    op_names: ClassVar[tuple[str, ...]] = ()

    def rewrite(self, op: Op, rewriter: Rewriter) -> str | None:
        raise NotImplementedError


def _dead(op: Op) -> bool:
    return (
        op.name not in ("input", "output")
        and bool(op.results)
        and all(not r.uses for r in op.results)
    )


def apply_patterns(graph: Graph, patterns: Sequence[Pattern], max_sweeps: int = 16) -> int:
    """Sweep the graph in order, applying patterns to a fixpoint; returns rewrites done.

    Each sweep is linear: a pattern only inspects an op and its operands' producers, which
    the sweep has already visited, so chains collapse in one sweep; later sweeps catch
    what new ops enable. Ops whose results lose all their uses are dropped on the way.
    """
    by_name: dict[str, list[Pattern]] = {}
    for p in patterns:
        for n in p.op_names:
            by_name.setdefault(n, []).append(p)
    total = 0
    for _ in range(max_sweeps):
        rw = Rewriter(graph)
        done = 0
        for op in graph.ops:
            for p in by_name.get(op.name, ()):
                if p.rewrite(op, rw) is None:
                    done += 1
                    break
            if _dead(op):
                op.drop_uses()
                op.graph = None
                continue
            rw.ops.append(op)
        graph.set_ops(rw.ops)
        total += done
        if not done:
            break
    return total
