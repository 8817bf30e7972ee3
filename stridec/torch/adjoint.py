"""The adjoint (backward) of a layout graph, built as another stridec graph
(docs/design.md#torch-integration).

Every layout op is linear in its operands: each result element is one operand element (or
a constant fill). So the gradient of the graph's inputs is the transpose of that map
applied to the gradients of its outputs, and it can be built op by op, in reverse:

- a permutation, flip or reshape maps back by the inverse view;
- a slice, select, unfold (step >= size) or a split piece is *scattered into zeros*: the
  gradient is placed where the forward read it, zeros where the forward dropped elements.
  One `pad` places it: for a slice ``x[start::s]`` of a dim of length n,
  ``g[j]`` must land at ``start + j*s``; with ``a = ceil(start/s)`` leading empty blocks and
  ``c = a*s - start``, pad ``g.unsqueeze(d+1)`` to blocks of s (``(0, s-1)`` on the new dim,
  ``(a, b)`` on d), flatten the two dims and view ``[c : c+n]``:
  ``(a + j)*s - c == start + j*s``;
- a pad is undone by the opposite pad (crops where the forward padded), a pack by the
  unpack and an unpack by the pack (the padded channels get no gradient), a cat by
  slicing, a cast by the cast back, a contiguous copy is the identity.

Where the forward reads an element more than once the gradient is a **sum**, and stridec
has no reduction kernel. Instead of summing, the adjoint keeps the terms apart in leading
*accumulation dims* that are summed in torch at the very end (`Adjoint.accumulate`):

- a broadcast (`expand`) becomes the gradient with the broadcast dims moved to the front;
- an unfold with overlapping windows (step < size) splits its windows into
  ``q = ceil(size/step)`` classes ``w ≡ r (mod q)``; windows of one class do not overlap,
  so each class is one scatter, and the q results are summed;
- a value used twice gets one term per use.

Each term is one output of the adjoint graph (a `Contribution`: the forward input it adds
to and how many leading dims to sum). A term with no accumulation dims that is the only one
of its input is the gradient itself: nothing runs in torch.

Not differentiable (no gradient flows): integer and bool values (a cast to an integer type
stops the gradient, as in torch), `philox` / `philox_uniform` (random bits), `full`
(constants). `as_strided` and explicit-form `copy` (IR after lowering) raise
`UnsupportedError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import stridec.ir.builder as B
from stridec.errors import CallError, UnsupportedError
from stridec.ir import ops as O
from stridec.ir.formats import Format, get_format
from stridec.ir.graph import Graph, Op, Value

__all__ = ["Adjoint", "Contribution", "adjoint"]


@dataclass(frozen=True)
class Contribution:
    """One output of the adjoint graph: a term of the gradient of forward input
    `input_index`. Its value has `acc_dims` leading dims to sum over, then the input's
    sizes: ``grad[input] = Σ_terms term.sum(dims=range(acc_dims))``."""

    input_index: int
    acc_dims: int


@dataclass(frozen=True)
class Adjoint:
    """The backward of `forward` as a stridec graph.

    `graph` has one input ``grad<j>`` per differentiable forward output j (listed in
    `grad_outputs`) and one output per `Contribution`. It is None when no gradient reaches
    any input (every output is random bits, a constant or an integer value).
    """

    forward: Graph
    graph: Graph | None
    grad_outputs: tuple[int, ...]
    contributions: tuple[Contribution, ...]

    @property
    def needs_torch(self) -> bool:
        """Whether `accumulate` sums anything in torch (a broadcast, overlapping windows
        or an input used more than once)."""
        counts: dict[int, int] = {}
        for c in self.contributions:
            counts[c.input_index] = counts.get(c.input_index, 0) + 1
        return any(c.acc_dims for c in self.contributions) or any(n > 1 for n in counts.values())

    def accumulate(self, terms: Sequence[torch.Tensor]) -> tuple[torch.Tensor | None, ...]:
        """The gradient of every forward input from the adjoint graph's outputs (None
        where no gradient flows): each term summed over its accumulation dims, the terms
        of one input added."""
        if len(terms) != len(self.contributions):
            raise CallError(
                f"{self.forward.name} adjoint: expected {len(self.contributions)} term(s); "
                f"got {len(terms)}"
            )
        grads: list[torch.Tensor | None] = [None] * len(self.forward.inputs)
        for c, t in zip(self.contributions, terms, strict=True):
            if c.acc_dims:
                t = t.sum(dim=tuple(range(c.acc_dims)))
            current = grads[c.input_index]
            grads[c.input_index] = t if current is None else current + t
        return tuple(grads)


@dataclass(frozen=True)
class _Term:
    """A gradient term of a forward value inside the adjoint graph: `value` has `acc`
    leading accumulation dims, then the forward value's sizes."""

    value: Value
    acc: int

    @property
    def acc_sizes(self) -> tuple[int, ...]:
        return self.value.shape[: self.acc]


def _differentiable(v: Value) -> bool:
    return v.type.dtype.is_floating


def _wrap(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def _pad_pairs(rank: int, pads: dict[int, tuple[int, int]]) -> list[int]:
    """F.pad's list (pairs from the last dim backwards) padding dim d by `pads[d]`."""
    first = min(pads)
    out: list[int] = []
    for d in range(rank - 1, first - 1, -1):
        out.extend(pads.get(d, (0, 0)))
    return out


def _place(v: Value, dim: int, block: int, offset: int, length: int) -> Value:
    """Scatter into zeros: dims `dim` (W windows) and `dim+1` (k < size <= block) of `v`
    become one dim of `length` holding element (j, k) at ``offset + j*block + k``.

    ``a = ceil(offset/block)`` empty blocks go in front and the first ``c = a*block -
    offset`` positions are cut, so ``(a + j)*block + k - c == offset + j*block + k``; the
    pad is the only materialization (one masked copy), the rest are views.
    """
    windows, size = v.shape[dim], v.shape[dim + 1]
    a = -(-offset // block)
    c = a * block - offset
    blocks = max(a + windows, -(-(length + c) // block))
    pads = {dim: (a, blocks - a - windows), dim + 1: (0, block - size)}
    if any(pads[dim]) or any(pads[dim + 1]):
        v = B.pad(v, _pad_pairs(v.ndim, pads))
    flat = v.flatten(dim, dim + 1)
    if flat.shape[dim] == length and c == 0:
        return flat
    return flat.slice(dim, c, c + length)


class _Builder:
    """Walks the forward graph backwards, mapping gradient terms through each op."""

    def __init__(self, forward: Graph) -> None:
        self.forward = forward
        self.graph = Graph(f"{forward.name}_adjoint")
        self.terms: dict[int, list[_Term]] = {}

    def add(self, value: Value, term: _Term | None) -> None:
        if term is None or not _differentiable(value) or value.numel() == 0:
            return
        self.terms.setdefault(id(value), []).append(term)

    def build(self) -> Adjoint:
        fwd = self.forward
        if fwd.output_op is None:
            raise CallError(f"adjoint: graph {fwd.name!r} has no output op")
        grad_outputs: list[int] = []
        for j, v in enumerate(fwd.outputs):
            if not _differentiable(v):
                continue
            g = self.graph.input(f"grad{j}", v.shape, v.type.dtype)
            grad_outputs.append(j)
            self.add(v, _Term(g, 0))
        index_of_input = {id(v): i for i, v in enumerate(fwd.inputs)}
        results: list[Value] = []
        contributions: list[Contribution] = []
        for op in reversed(fwd.ops[:-1]):
            if isinstance(op, O.InputOp):
                for term in self.terms.get(id(op.result), []):
                    results.append(term.value)
                    contributions.append(Contribution(index_of_input[id(op.result)], term.acc))
                continue
            incoming = [self.terms.get(id(r), []) for r in op.results]
            if not any(incoming):
                continue
            self.visit(op, incoming)
        if not results:
            return Adjoint(fwd, None, tuple(grad_outputs), ())
        # Outputs in forward-input order: the terms were met walking backwards.
        order = sorted(range(len(results)), key=lambda k: contributions[k].input_index)
        self.graph.output(*[results[k] for k in order])
        return Adjoint(fwd, self.graph, tuple(grad_outputs),
                       tuple(contributions[k] for k in order))

    # -- dispatch ------------------------------------------------------------------------
    def visit(self, op: Op, incoming: list[list[_Term]]) -> None:
        if isinstance(op, (O.FullOp, O.PhiloxOp, O.PhiloxUniformOp)):
            return  # constants and random bits: no gradient
        if isinstance(op, O.SplitOp):
            self.split(op, incoming)
            return
        if isinstance(op, O.CatOp):
            for term in incoming[0]:
                self.cat(op, term)
            return
        if isinstance(op, O.UnfoldOp):
            for term in incoming[0]:
                self.unfold(op, term)
            return
        rule = _RULES.get(type(op))
        explicit = isinstance(op, O.CopyOp) and (op.is_explicit or op.writes_into)
        if rule is None or explicit:
            raise UnsupportedError(
                f"adjoint: op '{op.name}' has no adjoint in stridec "
                f"(supported: views, contiguous, copy, pack, unpack, pad, cast, cat, split)"
            )
        x = op.operands[0]
        for term in incoming[0]:
            self.add(x, rule(self, op, term))

    # -- views ---------------------------------------------------------------------------
    def op_permute(self, op: Op, t: _Term) -> _Term:
        rank = op.result.ndim
        dims = [_wrap(d, rank) for d in op.dims]
        inverse = [0] * rank
        for i, d in enumerate(dims):
            inverse[d] = i
        n = t.acc
        return _Term(t.value.permute(*range(n), *(n + i for i in inverse)), n)

    def op_transpose(self, op: O.TransposeOp, t: _Term) -> _Term:
        rank = op.result.ndim
        d0, d1 = _wrap(op.dim0, rank), _wrap(op.dim1, rank)
        return _Term(t.value.transpose(t.acc + d0, t.acc + d1), t.acc)

    def op_flip(self, op: Op, t: _Term) -> _Term:
        rank = op.result.ndim
        return _Term(t.value.flip(*(t.acc + _wrap(d, rank) for d in op.dims)), t.acc)

    def _reshaped(self, op: Op, t: _Term) -> _Term:
        return _Term(t.value.reshape(*t.acc_sizes, *op.operands[0].shape), t.acc)

    op_reshape = op_view = op_flatten = op_squeeze = op_unsqueeze = _reshaped

    def op_expand(self, op: Op, t: _Term) -> _Term:
        """Broadcast dims (new leading ones, and size-1 dims that grew) move to the
        accumulation dims; the size-1 dims of the operand are put back as views."""
        xs, ys = op.operands[0].shape, op.result.shape
        lead = len(ys) - len(xs)
        grown = [i for i in range(lead, len(ys)) if xs[i - lead] == 1 and ys[i] != 1]
        if lead == 0 and not grown:
            return t
        n = t.acc
        kept = [i for i in range(lead, len(ys)) if i not in grown]
        order = [*range(n), *(n + i for i in range(lead)), *(n + i for i in grown),
                 *(n + i for i in kept)]
        v = t.value.permute(*order)
        acc = n + lead + len(grown)
        for i in grown:  # in increasing order, so earlier insertions keep later positions
            v = v.unsqueeze(acc + i - lead)
        return _Term(v, acc)

    def op_slice(self, op: Op, t: _Term) -> _Term | None:
        x = op.operands[0]
        dim = _wrap(op.dim, x.ndim)
        length = x.shape[dim]
        start, _, step = slice(op.start, op.stop, op.step).indices(length)
        count = op.result.shape[dim]
        if count == 0:
            return None
        d = t.acc + dim
        if step == 1:
            pads = {d: (start, length - start - count)}
            return _Term(B.pad(t.value, _pad_pairs(t.value.ndim, pads)), t.acc)
        return _Term(_place(t.value.unsqueeze(d + 1), d, step, start, length), t.acc)

    def op_select(self, op: Op, t: _Term) -> _Term:
        x = op.operands[0]
        dim = _wrap(op.dim, x.ndim)
        length = x.shape[dim]
        index = op.index % length
        d = t.acc + dim
        v = t.value.unsqueeze(d)
        return _Term(B.pad(v, _pad_pairs(v.ndim, {d: (index, length - 1 - index)})), t.acc)

    def split(self, op: Op, incoming: list[list[_Term]]) -> None:
        """The pieces' gradients concatenated (zeros for a piece without one) when each
        piece has at most one term of the same accumulation sizes; else each term is
        scattered into zeros on its own."""
        x = op.operands[0]
        dim = _wrap(op.dim, x.ndim)
        sections = op.sections(x.type.layout)
        flat = [t for terms in incoming for t in terms]
        acc_sizes = {t.acc_sizes for t in flat}
        if all(len(terms) <= 1 for terms in incoming) and len(acc_sizes) == 1:
            (sizes,) = acc_sizes
            pieces = []
            for terms, r in zip(incoming, op.results, strict=True):
                if terms:
                    pieces.append(terms[0].value)
                elif r.numel() > 0:
                    pieces.append(self.graph.full((*sizes, *r.shape), 0, r.type.dtype))
            value = pieces[0] if len(pieces) == 1 else B.cat(pieces, len(sizes) + dim)
            self.add(x, _Term(value, len(sizes)))
            return
        for terms, (start, stop) in zip(incoming, sections, strict=True):
            for t in terms:
                d = t.acc + dim
                pads = {d: (start, x.shape[dim] - stop)}
                self.add(x, _Term(B.pad(t.value, _pad_pairs(t.value.ndim, pads)), t.acc))

    def unfold(self, op: Op, t: _Term) -> None:
        """Windows ``w ≡ r (mod q)``, q = ceil(size/step), do not overlap: one scatter per
        class, placing window w at ``w*step`` (``r*step + j*q*step`` for w = r + j*q)."""
        x = op.operands[0]
        if x.ndim == 0:
            raise UnsupportedError("adjoint: unfold of a rank-0 value has no adjoint in stridec")
        dim = _wrap(op.dim, x.ndim)
        size, step, length = op.size, op.step, x.shape[dim]
        d = t.acc + dim
        v = t.value
        if v.ndim - 1 != d + 1:
            v = v.movedim(v.ndim - 1, d + 1)  # [..., W, size, ...]
        windows = v.shape[d]
        q = -(-size // step)
        for r in range(min(q, windows)):
            cls = v if q == 1 else v.slice(d, r, None, q)
            self.add(x, _Term(_place(cls, d, q * step, r * step, length), t.acc))

    # -- materializations ----------------------------------------------------------------
    def op_contiguous(self, op: Op, t: _Term) -> _Term:
        return t

    def op_pixel_shuffle(self, op: Op, t: _Term) -> _Term:
        """The gradient unshuffled (the accumulation dims lead: they batch)."""
        return _Term(B.pixel_unshuffle(t.value, op.factor), t.acc)

    def op_pixel_unshuffle(self, op: Op, t: _Term) -> _Term:
        if not op.operands[0].numel():  # an empty input: its clone
            return t
        return _Term(B.pixel_shuffle(t.value, op.factor), t.acc)

    def op_copy(self, op: Op, t: _Term) -> _Term | None:
        return self.op_cast(op, t)

    def op_cast(self, op: Op, t: _Term) -> _Term | None:
        x = op.operands[0]
        if not _differentiable(x):
            return None
        if t.value.type.dtype == x.type.dtype:
            return t
        return _Term(t.value.to(x.type.dtype), t.acc)

    def op_pad(self, op: Op, t: _Term) -> _Term:
        return _Term(B.pad(t.value, [-p for p in op.pad]), t.acc)

    def cat(self, op: Op, t: _Term) -> None:
        dim = _wrap(op.dim, op.result.ndim)
        start = 0
        for x in op.operands:
            n = x.shape[dim]
            if n:
                self.add(x, _Term(t.value.narrow(t.acc + dim, start, n), t.acc))
            start += n

    def op_pack(self, op: Op, t: _Term) -> _Term:
        x = op.operands[0]
        fmt = get_format(op.format)
        channels = x.shape[1] if isinstance(fmt, Format) else x.shape[-1]
        if t.acc == 0 or not isinstance(fmt, Format):
            return _Term(t.value.unpack(fmt.name, channels), t.acc)
        # Accumulation dims join N: a batch of [A, N] logical tensors is one of A*N.
        n, acc_sizes = t.acc, t.acc_sizes
        physical = op.result.shape
        p = fmt.split_order(x.ndim).index(0)  # where N sits among the physical dims
        v = t.value.movedim(tuple(range(n)), tuple(range(p, p + n)))
        v = v.reshape(*physical[:p], math.prod(acc_sizes) * physical[p], *physical[p + 1 :])
        v = v.unpack(fmt.name, channels)
        return _Term(v.reshape(*acc_sizes, *x.shape), n)

    def op_unpack(self, op: Op, t: _Term) -> _Term:
        x = op.operands[0]
        fmt = get_format(op.format)
        if t.acc == 0 or not isinstance(fmt, Format):
            return _Term(t.value.pack(fmt.name), t.acc)
        n, acc_sizes = t.acc, t.acc_sizes
        logical = op.result.shape
        p = fmt.split_order(len(logical)).index(0)
        v = t.value.reshape(math.prod(acc_sizes) * logical[0], *logical[1:]).pack(fmt.name)
        physical = x.shape
        v = v.reshape(*physical[:p], *acc_sizes, *physical[p:])
        return _Term(v.movedim(tuple(range(p, p + n)), tuple(range(n))), n)


#: The adjoint of each one-operand op class, by class (`_Builder.visit`).
_RULES: dict[type[Op], Callable[[_Builder, Any, _Term], _Term | None]] = {
    O.PermuteOp: _Builder.op_permute,
    O.TransposeOp: _Builder.op_transpose,
    O.FlipOp: _Builder.op_flip,
    O.ReshapeOp: _Builder.op_reshape,
    O.ViewShapeOp: _Builder.op_view,
    O.FlattenOp: _Builder.op_flatten,
    O.SqueezeOp: _Builder.op_squeeze,
    O.UnsqueezeOp: _Builder.op_unsqueeze,
    O.ExpandOp: _Builder.op_expand,
    O.SliceOp: _Builder.op_slice,
    O.SelectOp: _Builder.op_select,
    O.ContiguousOp: _Builder.op_contiguous,
    O.ToFormatOp: _Builder.op_contiguous,
    O.PixelShuffleOp: _Builder.op_pixel_shuffle,
    O.PixelUnshuffleOp: _Builder.op_pixel_unshuffle,
    O.CopyOp: _Builder.op_copy,
    O.CastOp: _Builder.op_cast,
    O.PadOp: _Builder.op_pad,
    O.PackOp: _Builder.op_pack,
    O.UnpackOp: _Builder.op_unpack,
}


def adjoint(graph: Graph) -> Adjoint:
    """The backward of `graph` as a stridec graph (see the module docstring).

        adj = adjoint(g)
        terms = stridec.compile(adj.graph)(*grads_of_outputs)   # tensors, in order
        grads_of_inputs = adj.accumulate(terms if isinstance(terms, tuple) else (terms,))
    """
    if not isinstance(graph, Graph):
        raise CallError(f"adjoint: expected a stridec.Graph; got {type(graph).__name__}")
    graph.verify()
    return _Builder(graph).build()
