"""`fuse-copies`: a copy that reads another copy's buffer reads its source instead. Step 4
of the default pipeline (docs/design.md#passes).
See `stridec.compiler.copy_fusion` for an example.

A copy reading a Philox op's bits is placed into the generator instead. The rewrites, and
when they do not apply, are in `stridec.compiler.copy_fusion`; `plan-memory` applies the
same ones to the copies it adds.
"""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.copy_fusion import fuse_into_generator, fuse_with_writers, new_op
from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.passes.dce import DeadCodeElimination
from stridec.compiler.rewriting import Rewriter
from stridec.ir import ops as O
from stridec.ir.graph import Graph

__all__ = ["FuseCopies"]


@register_pass
class FuseCopies(Pass):
    """Fuse every copy into the copies that read its buffer (through any views)."""

    name: ClassVar[str] = "fuse-copies"

    def run(self, graph: Graph) -> None:
        # Views left unused by fold-views would pin producers: clear them first.
        DeadCodeElimination().run(graph)
        rw = Rewriter(graph)
        ops = rw.ops  # ops move to earlier places too: a placed generator takes its own
        generators: dict[int, int] = {}  # id of a Philox op -> its index in `ops`
        for op in graph.ops:
            if isinstance(op, (O.PhiloxOp, O.PhiloxUniformOp)):
                generators[id(op)] = len(ops)
            rw.keep(op)
            if not isinstance(op, O.ExplicitCopyOp) or isinstance(op, O.FillOp):
                continue
            producer = op.operands[0].owner
            if not isinstance(producer, (O.PhiloxOp, O.PhiloxUniformOp)):
                fuse_with_writers(op, rw, generators)
                continue
            placed = fuse_into_generator(op, producer)
            if isinstance(placed, str):
                continue
            operands, attrs = placed
            generator = new_op(rw, type(producer), operands, attrs)
            index = generators.pop(id(producer))
            generators[id(generator)] = index
            ops[index] = generator
            ops.pop()
            rw.replace(op, [generator.results[0]])
            rw.replace(producer, generator.results)
        graph.set_ops(ops)
