"""The deterministic text form of a graph (grammar: docs/text-ir.md).

    graph @nchw_to_nhwc {
      %x = input {name = "x"} : tensor<2x3x4x5xf16>
      %0 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>
      %1 = contiguous %0 : tensor<2x4x5x3xf16>
      output %1
    }

Inputs print under their own name when it is an identifier; every other result is
numbered in order of definition, so the same graph always prints the same text.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from stridec.ir.dtypes import DType
from stridec.ir.layout import Layout
from stridec.ir.symbols import Sym, format_size

if TYPE_CHECKING:  # the core (`stridec.ir.graph`) calls this module: types only
    from stridec.ir.graph import Graph, Value

__all__ = ["print_graph", "format_attr_value", "value_names"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def format_attr_value(value: Any) -> str:
    """One attribute value: ints, floats (repr), JSON-quoted strings, bools, dtypes, layouts
    and lists of these."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Sym):
        return format_size(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, DType):
        return value.short
    if isinstance(value, Layout):
        return str(value)
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def value_names(graph: Graph) -> dict[int, str]:
    """`id(value)` → printed name: `%name` for identifier-named inputs, else `%0`, `%1`, …"""
    names: dict[int, str] = {}
    taken: set[str] = set()
    for op in graph.ops:
        if op.is_argument and _IDENT.match(op.arg_name):
            names[id(op.result)] = "%" + op.arg_name
            taken.add(op.arg_name)
    counter = 0
    for op in graph.ops:
        for r in op.results:
            if id(r) in names:
                continue
            while str(counter) in taken:
                counter += 1
            names[id(r)] = f"%{counter}"
            counter += 1
    return names


def _name(names: dict[int, str], v: Value) -> str:
    return names.get(id(v), "%<undefined>")


def print_graph(graph: Graph) -> str:
    names = value_names(graph)
    lines = [
        f"graph @{graph.name} {{"
        if _IDENT.match(graph.name)
        else f"graph @{json.dumps(graph.name)} {{"
    ]
    for op in graph.ops:
        text = op.name
        if op.results:
            text = ", ".join(_name(names, r) for r in op.results) + " = " + text
        if op.operands:
            text += " " + ", ".join(_name(names, v) for v in op.operands)
        attrs = op.printed_attrs()
        if attrs:
            text += (
                " {" + ", ".join(f"{k} = {format_attr_value(v)}" for k, v in attrs.items()) + "}"
            )
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        lines.append("  " + text)
    lines.append("}")
    return "\n".join(lines) + "\n"
