"""Specialize a graph to the caller's input layouts (strides and storage offset).

The graph is rebuilt op by op with type inference (`Graph.specialize`), so every view's
layout over its root is recomputed from the actual input strides: the same Python graph
compiles to different stride rewrites for a contiguous input and for a transposed or
sliced one. Here a layout an op cannot take is reported as a `VerificationError`
naming the op.
"""

from __future__ import annotations

from collections.abc import Mapping

from stridec.errors import StridecError, VerificationError
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.ops import WriteOp

__all__ = ["specialize"]


def specialize(graph: Graph, layouts: Mapping[str, Layout]) -> Graph:
    """A copy of `graph` whose inputs have `layouts` (by input name; others unchanged).
    Its writes are checked for those layouts too: one into an argument whose elements
    share addresses (an expanded one) is refused, as torch refuses it."""
    try:
        new = graph.specialize(layouts)
        for op in new.ops:
            if isinstance(op, WriteOp):
                op.verify_()
        return new
    except StridecError as e:
        raise VerificationError(f"specializing graph {graph.name!r}: {e}") from e
