"""What a pass is, and the registry of passes by pipeline name.

Apart from `pass_manager` so that the pass modules import it and the pass manager
imports them (to fill the registry) without a cycle.
"""

from __future__ import annotations

from typing import ClassVar

from stridec.ir.graph import Graph

__all__ = ["Pass", "PASS_REGISTRY", "register_pass"]

PASS_REGISTRY: dict[str, type[Pass]] = {}


class Pass:
    """Base of every pass: subclasses are dataclasses with a `name` and `run(graph)`."""

    name: ClassVar[str] = "pass"

    def run(self, graph: Graph) -> None:
        raise NotImplementedError(self.name)


def register_pass(cls: type[Pass]) -> type[Pass]:
    PASS_REGISTRY[cls.name] = cls
    return cls
