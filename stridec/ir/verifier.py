"""Two-stage verification: structural checks for every op, then the op's own `verify_`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stridec.errors import StridecError, VerificationError

if TYPE_CHECKING:
    from stridec.ir.graph import Graph

__all__ = ["verify_graph"]


def verify_graph(graph: Graph) -> None:
    """Raise `VerificationError` naming the op (by position and name) and the operand at fault.

    Structure: every operand is defined earlier in the same graph; use lists agree with
    operands, both ways; input names are unique; `output`, if present, is the last op and
    appears once; each op has as many operands as it takes, attributes valid for them, and
    stored result types equal to what it infers from its operands and attributes.
    """
    defined: set[int] = set()
    input_names: set[str] = set()
    last = len(graph.ops) - 1
    for position, op in enumerate(graph.ops):
        where = f"op #{position} '{op.name}'"
        if op.graph is not graph:
            raise VerificationError(f"{where}: is not owned by graph {graph.name!r}")
        for i, v in enumerate(op.operands):
            if id(v) not in defined:
                raise VerificationError(
                    f"{where}: operand {i} is not defined before its use (by '{v.owner.name}')"
                )
            if (op, i) not in v.uses:
                raise VerificationError(f"{where}: operand {i} is missing from its use list")
        if op.num_operands is not None and len(op.operands) != op.num_operands:
            raise VerificationError(
                f"{where}: expected {op.num_operands} operand(s); got {len(op.operands)}"
            )
        if op.name == "output" and position != last:
            raise VerificationError(f"{where}: 'output' must be the last op")
        if op.name == "input":
            name = op.attrs["name"]
            if name in input_names:
                raise VerificationError(f"{where}: input name {name!r} is used twice")
            input_names.add(name)
        if op.name != "input":
            types = [v.type for v in op.operands]
            try:
                op.normalize(dict(op.attrs), types)  # attributes still fit the operands
                inferred = op.infer_types(types)
            except StridecError as e:
                raise VerificationError(f"{where}: {e}") from e
            stored = [r.type for r in op.results]
            if inferred != stored:
                raise VerificationError(
                    f"{where}: result types {[str(t) for t in stored]} differ from the "
                    f"inferred {[str(t) for t in inferred]}"
                )
        try:
            op.verify_()
        except StridecError as e:
            raise VerificationError(f"{where}: {e}") from e
        for r in op.results:
            for user, i in r.uses:
                if user.graph is not graph or i >= len(user.operands) or user.operands[i] is not r:
                    raise VerificationError(
                        f"{where}: result {r.index} lists a use by '{user.name}' (operand {i}) "
                        "that is not in the graph or does not read it"
                    )
            defined.add(id(r))
