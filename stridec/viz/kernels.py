"""Which ops of a lowered graph each kernel carries out, and how an op reads as text in a
picture: shared by the matplotlib pictures and the DOT text. No matplotlib here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stridec.ir.graph import Graph, Op
from stridec.ir.printer import format_attr_value, value_names

__all__ = ["KernelBox", "kernel_boxes", "op_lines"]


@dataclass(frozen=True)
class KernelBox:
    """The ops (positions in the lowered graph) of one or more launches drawn as one box:
    launches that share an op (a fill merged into the copies of its parts) share a box.
    `title` names each launch's kernel, kind and strategy."""

    launches: tuple[int, ...]
    ops: tuple[int, ...]
    title: str


def kernel_boxes(program: Any) -> list[KernelBox]:
    """One box per set of launches of `program` that share ops, in launch order."""
    groups: list[tuple[list[int], set[int]]] = []
    for number, launch in enumerate(program.launches):
        ops = set(launch.ops)
        joined = [g for g in groups if g[1] & ops]
        launches, members = [number], set(ops)
        for g in joined:
            launches = g[0] + launches
            members |= g[1]
            groups.remove(g)
        groups.append((sorted(launches), members))
    groups.sort(key=lambda g: g[0][0])
    boxes = []
    for launches, members in groups:
        lines = []
        for number in launches:
            launch = program.launches[number]
            k = program.kernels[launch.kernel]
            strategy = f", {k.strategy}" if k.strategy else ""
            again = f" (launch {number})" if number != launch.kernel else ""
            lines.append(f"kernel {launch.kernel}{again}: {k.kind}{strategy}, grid {list(k.grid)}")
        boxes.append(KernelBox(tuple(launches), tuple(sorted(members)), "\n".join(lines)))
    return boxes


MAX_LINE = 64


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def op_lines(graph: Graph, op: Op, names: dict[int, str] | None = None,
             clip: bool = True) -> list[str]:
    """An op as a few short lines: ``%1 = permute %x``, one line per attribute, then each
    result's type with its layout over its storage, spelled out also where it is the
    contiguous one the text IR leaves out; with `clip`, a line is cut at `MAX_LINE`
    characters (pictures wrap them instead)."""
    cut = _clip if clip else str
    names = value_names(graph) if names is None else names
    head = op.name
    if op.results:
        head = ", ".join(names[id(r)] for r in op.results) + " = " + head
    if op.operands:
        head += " " + ", ".join(names.get(id(v), "%?") for v in op.operands)
    lines = [head]
    for key, value in op.printed_attrs().items():
        lines.append(cut(f"  {key} = {format_attr_value(value)}"))
    for r in op.results:
        # The layout even where the text IR leaves it out (contiguous from offset 0).
        layout = "" if not r.type.has_default_layout() else f" {r.type.layout}"
        lines.append(cut(f": {r.type}{layout}"))
    return lines


def is_view(op: Op) -> bool:
    """Views are free (a stride rewrite); pictures draw them dashed."""
    return op.aliases_operand()
