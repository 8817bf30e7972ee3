"""Rewrite patterns and the sweep that applies them (MLIR's greedy driver, simplified).

A pattern looks at one op (and the ops defining its operands) and either rewrites it
through the `Rewriter` or returns a reason why it does not apply (MLIR's
`notifyMatchFailure`): `None` means success, a string means no match.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.ops import (
    CopyOp,
    InputOp,
    OutputOp,
    PhiloxOp,
    PhiloxUniformOp,
    WriteOp,
    explicit_copy_op,
    has_effects,
)

__all__ = [
    "Pattern",
    "Rewriter",
    "apply_patterns",
    "build",
    "explicit_copy",
    "overwritten",
    "written_into",
]


class Rewriter:
    """Collects the ops of the graph being rebuilt in one forward sweep: each visited op is
    kept (`keep`), replaced (`replace`) or erased (`erase`); new ones are inserted before
    it. The pass then installs `ops` (`graph.set_ops(rw.ops)`)."""

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

    def keep(self, op: Op) -> None:
        """Keep the visited op, after what was inserted before it."""
        self.ops.append(op)

    def replace(self, op: Op, values: Sequence[Value]) -> None:
        """Redirect every use of `op`'s results to `values`, then erase `op`."""
        for old, new in zip(op.results, values, strict=True):
            if old is not new:
                old.replace_all_uses_with(new)
        self.erase(op)

    def erase(self, op: Op) -> None:
        """Drop `op`, whose results nobody reads any more (or only ops erased with it):
        its operands forget its uses and it leaves the graph."""
        op.drop_uses()
        op.graph = None
        self.changed = True

    def erase_all(self, ops: Collection[Op]) -> None:
        """`erase` each of `ops` (read by nothing but each other), every operand's use
        list filtered once: one at a time, a value read by n of them would have its use
        list searched n times (n²/2 comparisons)."""
        dropped = {id(op) for op in ops}
        read = {id(v): v for op in ops for v in op.operands}
        for v in read.values():
            v.uses[:] = [use for use in v.uses if id(use[0]) not in dropped]
        for op in ops:
            op.graph = None
        self.changed = True


def build(cls: type[Op], operands: Sequence[Value], attrs: dict[str, Any]) -> Op:
    return cls(operands, attrs)


def explicit_copy(
    rw: Rewriter,
    source: Value | None,
    *,
    layout: Layout,
    dtype: Any,
    space: tuple[int, ...],
    src: Layout | None,
    dst: Layout,
    masks: Any = None,
    fill: Any = None,
    into: Value | None = None,
) -> Value:
    """Emit one explicit copy, of the type its attributes call for (`copy_type`), reading
    `source`'s root storage through `src`, in elements of `source`'s dtype: its operand is
    the root, or -- where a `bitcast` reads the root's bytes as another type -- `source`
    itself, never the root, whose elements would be converted, not reinterpreted."""
    operands: list[Value] = []
    if source is not None:
        root = source.root()
        operands.append(root if root.type.dtype == source.type.dtype else source)
    if into is not None:
        operands.append(into)
    attrs = {
        "layout": layout,
        "dtype": dtype,
        "space": tuple(space),
        "src": src,
        "dst": dst,
        "masks": masks,
        "fill": fill,
    }
    return rw.insert(explicit_copy_op(operands, attrs)).result


def written_into(op: Op) -> bool:
    """Whether an op writes over a result of `op` in place (`copy %src, %buffer`: cat and
    pad fill one buffer piece by piece; `write %x, ...`: an in-place write into a tensor).
    Such a buffer has exactly one writer after `op`; a pass must neither drop `op` for
    another value, nor give the buffer a second reader, nor move a read of it past the
    write (`stridec.ir.verifier` refuses a read of memory after a write over it)."""
    return any((isinstance(user, (CopyOp, PhiloxOp, PhiloxUniformOp)) and i == 1)
               or (isinstance(user, WriteOp) and i == 0)
               for r in op.results for user, i in r.uses)


def overwritten(value: Value) -> bool:
    """Whether some op writes over the memory `value` reads (its root version), directly
    or through a view of it. A read of `value` moved to a later place, or a copy fused to
    read it there instead of an earlier copy of it, could then run after that write and
    see the new contents (`stridec.ir.verifier` refuses such a read)."""
    root = value.root()
    pending = [root]
    while pending:
        for user, i in pending.pop().uses:
            if user.written_root() is root:
                return True
            if i == 0 and user.aliases_operand():
                pending.extend(user.results)
    return False


class Pattern:
    """One rewrite of the ops of `op_classes`: `rewrite(op, rewriter)` returns None on
    success, else why not."""

    name: ClassVar[str] = "pattern"
    op_classes: ClassVar[tuple[type[Op], ...]] = ()

    def rewrite(self, op: Op, rewriter: Rewriter) -> str | None:
        raise NotImplementedError


def _dead(op: Op) -> bool:
    return (
        not isinstance(op, (InputOp, OutputOp))
        and bool(op.results)
        and all(not r.uses for r in op.results)
        and not has_effects(op)
    )


def apply_patterns(graph: Graph, patterns: Sequence[Pattern], max_sweeps: int = 16) -> int:
    """Sweep the graph in order, applying patterns to a fixpoint; returns rewrites done.

    Each sweep is linear: a pattern only inspects an op and its operands' producers, which
    the sweep has already visited, so chains collapse in one sweep; later sweeps catch
    what new ops enable. Ops whose results lose all their uses are dropped on the way.
    """
    by_class: dict[type[Op], list[Pattern]] = {}
    for p in patterns:
        for cls in p.op_classes:
            by_class.setdefault(cls, []).append(p)
    total = 0
    for _ in range(max_sweeps):
        rw = Rewriter(graph)
        done = 0
        for op in graph.ops:
            for p in by_class.get(type(op), ()):
                if p.rewrite(op, rw) is None:
                    done += 1
                    break
            if op.graph is None:  # erased by the rewrite
                continue
            if _dead(op):
                rw.erase(op)
                continue
            rw.keep(op)
        graph.set_ops(rw.ops)
        total += done
        if not done:
            break
    return total
