"""Specialize a graph to the caller's input layouts (strides and storage offset).

The graph is rebuilt op by op with type inference, so every view's layout over its root
is recomputed from the actual input strides: the same Python graph compiles to different
stride rewrites for a contiguous input and for a transposed or sliced one.
"""

from __future__ import annotations

from collections.abc import Mapping

from stridec.errors import StridecError, VerificationError
from stridec.ir.graph import Graph, Value
from stridec.ir.layout import Layout

__all__ = ["specialize"]


def specialize(graph: Graph, layouts: Mapping[str, Layout]) -> Graph:
    """A copy of `graph` whose inputs have `layouts` (by input name; others unchanged)."""
    new = Graph(graph.name)
    mapping: dict[int, Value] = {}
    for op in graph.ops:
        attrs = dict(op.attrs)
        if op.name == "input" and op.attrs["name"] in layouts:
            layout = layouts[op.attrs["name"]]
            attrs["layout"] = None if layout == Layout.contiguous(layout.sizes) else layout
        operands = [mapping[id(v)] for v in op.operands]
        try:
            rebuilt = type(op)(operands, attrs)
        except StridecError as e:
            raise VerificationError(f"specializing {op.name}: {e}") from e
        new.append(rebuilt)
        for a, b in zip(op.results, rebuilt.results):
            mapping[id(a)] = b
    return new
