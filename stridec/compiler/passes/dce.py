"""`dce`: remove ops none of whose results is used (inputs and `output` stay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stridec.compiler.pass_manager import Pass, register_pass
from stridec.ir.graph import Graph

__all__ = ["DeadCodeElimination"]


@register_pass
@dataclass
class DeadCodeElimination(Pass):
    """One backward sweep: an op is dead when every result is unused."""

    name: ClassVar[str] = "dce"

    def run(self, graph: Graph) -> None:
        kept = []
        for op in reversed(graph.ops):
            if op.name in ("input", "output") or any(r.uses for r in op.results):
                kept.append(op)
                continue
            op.drop_uses()
            op.graph = None
        graph.set_ops(reversed(kept))
