"""`canonicalize`: local rewrites to a fixpoint. Step 1 of the default pipeline
(docs/design.md#passes).

Every pattern keeps the value's layout exactly: the rewritten result must have the
same type (sizes, dtype and layout over the root) as the op it replaces.
"""

from __future__ import annotations

from typing import ClassVar

from stridec.compiler.pass_base import Pass, register_pass
from stridec.compiler.rewriting import Pattern, Rewriter, apply_patterns
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.symbols import Sym

__all__ = ["Canonicalize", "PATTERNS"]


def _replace_checked(op: Op, new: Value, rw: Rewriter) -> str | None:
    if new.type != op.result.type:
        return f"rewritten type {new.type} differs from {op.result.type}"
    rw.replace(op, [new])
    return None


class IdentityView:
    """A view whose result has exactly its operand's type is the operand.

      %1 = permute %0 {dims = [0, 1]} : tensor<2x3xf32>      (identity permute)
      %2 = expand %0 {sizes = [2, 3]} : tensor<2x3xf32>      (no dim grows)
      %3 = slice %0 {dim = 1, start = 0, stop = 3} : ...     (the whole dim)
      %4 = reshape %0 {sizes = [2, 3]} : tensor<2x3xf32>
    →  uses of %1 … %4 become %0
    """

    name = "identity-view"
    op_classes: ClassVar[tuple[type[Op], ...]] = (
        O.PermuteOp,
        O.TransposeOp,
        O.ExpandOp,
        O.SliceOp,
        O.SqueezeOp,
        O.UnsqueezeOp,
        O.ReshapeOp,
        O.ViewShapeOp,
        O.FlattenOp,
        O.AsStridedOp,
        O.BitcastOp,
    )

    def rewrite(self, op: Op, rw: Rewriter) -> str | None:
        if not op.aliases_operand():
            return "not a view (a reshape that copies)"
        source = op.operands[0]
        if op.result.type != source.type:
            return "the view changes sizes or strides"
        rw.replace(op, [source])
        return None


class TransposeToPermute:
    """`transpose` is the permute that swaps two dims.

      %1 = transpose %0 {dim0 = 0, dim1 = 2} : tensor<5x4x3xf32, strided<[1, 5, 20], offset: 0>>
    → %1 = permute %0 {dims = [2, 1, 0]} : (same type)
    """

    name = "transpose-to-permute"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.TransposeOp,)

    def rewrite(self, op: O.TransposeOp, rw: Rewriter) -> str | None:
        rank = op.operands[0].type.rank
        d0, d1 = op.dim0 % max(rank, 1), op.dim1 % max(rank, 1)
        dims = list(range(rank))
        if rank:
            dims[d0], dims[d1] = dims[d1], dims[d0]
        new = rw.create(O.PermuteOp, op.operands, {"dims": tuple(dims)})
        return _replace_checked(op, new.result, rw)


class PermuteOfPermute:
    """Two permutes compose: result dim i of the outer reads inner dim p2[i], which reads
    source dim p1[p2[i]].

        %1 = permute %0 {dims = [0, 2, 3, 1]}
        %2 = permute %1 {dims = [0, 3, 1, 2]}
      → %2 = permute %0 {dims = [0, 1, 2, 3]}   (p1[p2] = [0, 1, 2, 3]; then identity-view)
    """

    name = "permute-of-permute"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.PermuteOp,)

    def rewrite(self, op: O.PermuteOp, rw: Rewriter) -> str | None:
        inner = op.operands[0].owner
        if not isinstance(inner, O.PermuteOp):
            return "operand is not a permute"
        rank = op.operands[0].type.rank
        p1 = [d % rank for d in inner.dims]
        p2 = [d % rank for d in op.dims]
        new = rw.create(O.PermuteOp, inner.operands, {"dims": tuple(p1[d] for d in p2)})
        return _replace_checked(op, new.result, rw)


class SliceOfSlice:
    """Two slices of the same dim compose into one.

      %1 = slice %0 {dim = 0, start = 2, stop = 10, step = 2}   (indices 2, 4, 6, 8)
      %2 = slice %1 {dim = 0, start = 1, step = 2}              (of those: 4, 8)
    → %2 = slice %0 {dim = 0, start = 4, stop = 9, step = 4}    (2 + 1·2 = 4; step 2·2 = 4)
    """

    name = "slice-of-slice"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.SliceOp,)

    def rewrite(self, op: O.SliceOp, rw: Rewriter) -> str | None:
        inner = op.operands[0].owner
        if not isinstance(inner, O.SliceOp):
            return "operand is not a slice"
        source = inner.operands[0]
        rank = source.type.rank
        dim = op.dim % rank
        if inner.dim % rank != dim:
            return "the slices cut different dims"
        if isinstance(source.type.sizes[dim], Sym):
            return "the dim is symbolic (its clamped bounds depend on the value)"
        first = range(source.type.sizes[dim])[inner.start : inner.stop : inner.step]
        both = first[op.start : op.stop : op.step]
        step = both.step
        start = both.start if len(both) else 0
        stop = both[-1] + 1 if len(both) else 0
        new = rw.create(
            O.SliceOp, [source], {"dim": dim, "start": start, "stop": stop, "step": step}
        )
        return _replace_checked(op, new.result, rw)


class FlipOfFlip:
    """Flipping a dim twice restores it: flip(flip(x, A), B) = flip(x, A xor B), and a
    flip of no dim left is a clone (torch's flip gives new memory, so never `x` itself).

      %1 = flip %0 {dims = [0, 1]}
      %2 = flip %1 {dims = [1]}
    → %2 = flip %0 {dims = [0]}
    """

    name = "flip-of-flip"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.FlipOp,)

    def rewrite(self, op: O.FlipOp, rw: Rewriter) -> str | None:
        inner = op.operands[0].owner
        if not isinstance(inner, O.FlipOp):
            return "operand is not a flip"
        source = inner.operands[0]
        rank = max(source.type.rank, 1)
        dims = {d % rank for d in inner.dims} ^ {d % rank for d in op.dims}
        if not dims:
            new = rw.create(O.CloneOp, [source], {})
        else:
            new = rw.create(O.FlipOp, [source], {"dims": tuple(sorted(dims))})
        return _replace_checked(op, new.result, rw)


class SqueezeOfUnsqueeze:
    """Squeezing exactly the dim just inserted gives the source back.

      %1 = unsqueeze %0 {dim = 1} : tensor<2x1x3xf32>
      %2 = squeeze %1 {dims = [1]} : tensor<2x3xf32>
    → uses of %2 become %0
    """

    name = "squeeze-of-unsqueeze"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.SqueezeOp,)

    def rewrite(self, op: O.SqueezeOp, rw: Rewriter) -> str | None:
        inner = op.operands[0].owner
        if not isinstance(inner, O.UnsqueezeOp):
            return "operand is not an unsqueeze"
        rank = op.operands[0].type.rank
        dims = op.dims
        if dims is None or len(dims) != 1 or dims[0] % rank != inner.dim % rank:
            return "squeezes other dims than the one inserted"
        return _replace_checked(op, inner.operands[0], rw)


class CastToSameType:
    """A cast to the dtype the value already has is the value (torch's `.to` returns
    `self`: a view, sharing its memory).

      %1 = cast %0 {dtype = f16} : tensor<4xf16>   where %0 : tensor<4xf16>
    → uses of %1 become %0
    """

    name = "cast-to-same-type"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.CastOp,)

    def rewrite(self, op: O.CastOp, rw: Rewriter) -> str | None:
        source = op.operands[0]
        if op.dtype != source.type.dtype:
            return "the cast changes the dtype"
        return _replace_checked(op, source, rw)


class DiagonalOfPermute:
    """A diagonal of a permuted value is a diagonal of the value itself, its dims named
    through the permutation (`dims[d]`), lower dim first (swapping them negates the
    offset), followed by the permute that puts the remaining dims back in order (none
    when they already are):

      %1 = permute %x {dims = [1, 0]} : tensor<5x4xf32, strided<[1, 5], offset: 0>>
      %2 = diagonal %1 {offset = 1} : tensor<4xf32, strided<[6], offset: 5>>
    → %2 = diagonal %x {offset = -1} : tensor<4xf32, strided<[6], offset: 5>>

    (%1[i, i + 1] is %x[i + 1, i]: the diagonal below, offset -1; both read
    5 + 6·i.)
    """

    name = "diagonal-of-permute"
    op_classes: ClassVar[tuple[type[Op], ...]] = (O.DiagonalOp,)

    def rewrite(self, op: O.DiagonalOp, rw: Rewriter) -> str | None:
        inner = op.operands[0].owner
        if not isinstance(inner, O.PermuteOp):
            return "operand is not a permute"
        rank = op.operands[0].type.rank
        p = [d % rank for d in inner.dims]
        d1, d2 = op.dim1 % rank, op.dim2 % rank
        e1, e2, offset = p[d1], p[d2], op.offset
        if e1 > e2:  # diagonal(x, k, b, a) is diagonal(x, -k, a, b)
            e1, e2, offset = e2, e1, -offset
        new = rw.create(O.DiagonalOp, inner.operands,
                        {"offset": offset, "dim1": e1, "dim2": e2}).result
        # The operand's other dims, in the order the permute gave them, by their
        # position among the source's other dims (where the new diagonal leaves them).
        rest = [e for e in range(rank) if e not in (e1, e2)]
        order = [rest.index(p[i]) for i in range(rank) if i not in (d1, d2)]
        if order != sorted(order):
            new = rw.create(O.PermuteOp, [new], {"dims": (*order, rank - 2)}).result
        return _replace_checked(op, new, rw)


PATTERNS: tuple[Pattern, ...] = (
    IdentityView(),
    TransposeToPermute(),
    PermuteOfPermute(),
    DiagonalOfPermute(),
    SliceOfSlice(),
    FlipOfFlip(),
    SqueezeOfUnsqueeze(),
    CastToSameType(),
)  # type: ignore[assignment]


@register_pass
class Canonicalize(Pass):
    """Local rewrites to a fixpoint: identities removed, view pairs composed."""

    name: ClassVar[str] = "canonicalize"
    max_sweeps: int = 16

    def run(self, graph: Graph) -> None:
        apply_patterns(graph, PATTERNS, self.max_sweeps)  # type: ignore[arg-type]
