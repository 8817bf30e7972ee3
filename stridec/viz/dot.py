"""A graph as Graphviz DOT text (`stridec-opt --emit=dot`): one node per op, labelled with
its results' types; an edge per operand; the ops of each kernel in a cluster.

    digraph "chain" {
      n0 [label="%x = input\\l  name = \\"x\\"\\l: tensor<2x3xf32>\\l"];
      subgraph cluster_0 {
        label="launch 0: copy, tiled_transpose, grid [1]";
        n1;
      }
      n0 -> n1;
    }

Pure text: no graphviz is needed to write it (its `dot` program renders it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from stridec.ir.graph import Graph
from stridec.ir.ops import InputOp, OutputOp
from stridec.ir.printer import value_names
from stridec.viz.kernels import KernelBox, is_view, op_lines

__all__ = ["graph_to_dot"]


def _quote(text: str) -> str:
    """A DOT string: JSON's escaping of quotes and backslashes is DOT's too."""
    return json.dumps(text, ensure_ascii=False)


def _label(lines: Sequence[str]) -> str:
    # \l ends a left-justified line; the text's own backslashes are escaped first.
    body = "".join(line.replace("\\", "\\\\").replace('"', '\\"') + "\\l" for line in lines)
    return '"' + body + '"'


def graph_to_dot(graph: Graph, boxes: Sequence[KernelBox] = (), note: str | None = None) -> str:
    """DOT text of `graph`; `boxes` (from `kernel_boxes`) become clusters. `note` is
    written as a comment (why there are no clusters, say)."""
    names = value_names(graph)
    node = {id(op): f"n{k}" for k, op in enumerate(graph.ops)}
    lines = [f"digraph {_quote(graph.name)} {{"]
    if note:
        lines.append("  // " + note.replace("\n", " "))
    lines.append('  node [shape=box, fontname="monospace", fontsize=10];')
    boxed: dict[int, int] = {}
    for b, box in enumerate(boxes):
        for position in box.ops:
            boxed.setdefault(position, b)
    for k, op in enumerate(graph.ops):
        if k in boxed:
            continue
        lines.append(f"  {node[id(op)]} [{_attrs(graph, op, names)}];")
    for b, box in enumerate(boxes):
        lines.append(f"  subgraph cluster_{b} {{")
        lines.append(f"    label={_label(box.title.splitlines())};")
        lines.append('    style="rounded"; color="#1f77b4"; fontname="monospace";')
        for position in box.ops:
            if boxed.get(position) == b:
                op = graph.ops[position]
                lines.append(f"    {node[id(op)]} [{_attrs(graph, op, names)}];")
        lines.append("  }")
    for op in graph.ops:
        for v in op.operands:
            lines.append(f"  {node[id(v.owner)]} -> {node[id(op)]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _attrs(graph: Graph, op, names: dict[int, str]) -> str:
    attrs = [f"label={_label(op_lines(graph, op, names))}"]
    if is_view(op):
        attrs.append('style="dashed"')
    if isinstance(op, (InputOp, OutputOp)):
        attrs.append('style="filled", fillcolor="#eeeeee"')
    return ", ".join(attrs)
