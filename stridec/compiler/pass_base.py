"""What a pass is, and the registry of passes by pipeline name.

Apart from `pass_manager` so that the pass modules import it and the pass manager
imports them (to fill the registry) without a cycle.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, TypeVar

try:
    from typing import dataclass_transform
except ImportError:  # Python 3.10: the decorator only informs type checkers

    def dataclass_transform(**_: object):  # type: ignore[no-redef]
        return lambda f: f

from stridec.ir.graph import Graph

__all__ = ["Pass", "PASS_REGISTRY", "register_pass"]

PASS_REGISTRY: dict[str, type[Pass]] = {}

P = TypeVar("P", bound="type[Pass]")


class Pass:
    """Base of every pass: subclasses are dataclasses with a `name` and `run(graph)`."""

    name: ClassVar[str] = "pass"

    def run(self, graph: Graph) -> None:
        raise NotImplementedError(self.name)


@dataclass_transform()
def register_pass(cls: P) -> P:
    """Make `cls` a dataclass (its fields are the pass's options) and register it under
    its pipeline `name`."""
    if "__dataclass_fields__" not in cls.__dict__:
        cls = dataclasses.dataclass(cls)
    PASS_REGISTRY[cls.name] = cls
    return cls
