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

- a diagonal is placed on a plane of zeros; an `as_strided` sends its gradient to the
  storage it reads (its operand's root), as torch's `as_strided_backward` does.

Not differentiable (no gradient flows): integer and bool values (a cast to an integer type
stops the gradient, as in torch), `philox` / `philox_uniform` (random bits), `full`
(constants). The explicit-form `copy` (IR after lowering) has no adjoint.

Each op class has its adjoint registered beside it in `ADJOINTS` (or the statement that
it has none, with why); tests/ir/test_op_rules.py checks that every op class has one.
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
from stridec.ir.affine import invert_strided
from stridec.ir.formats import Format, get_format
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.rules import OpRules
from stridec.ir.symbols import is_static

__all__ = ["ADJOINTS", "Adjoint", "Contribution", "Term", "adjoint", "adjoint_of", "pad_pairs",
           "place"]


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

    def differentiable_outputs(self, requires_grad: Sequence[bool]) -> frozenset[int]:
        """The forward outputs autograd tracks when the inputs flagged in `requires_grad`
        require grad, as torch's `requires_grad` spreads: a float value that such an input
        reaches through ops that carry a gradient -- not through a `bitcast` (torch's
        `view(dtype)` is not differentiable), nor from a constant or random bits
        (`NO_GRADIENT`)."""
        carries: set[int] = set()
        flags = iter(requires_grad)
        for op in self.forward.ops:
            if op.is_argument:
                reached = next(flags)
            else:
                reached = not isinstance(op, NO_GRADIENT) and any(
                    id(v) in carries for v in op.operands)
            for r in op.results:
                if reached and _differentiable(r):
                    carries.add(id(r))
        return frozenset(j for j, v in enumerate(self.forward.outputs) if id(v) in carries)

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
class Term:
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


def pad_pairs(rank: int, pads: dict[int, tuple[int, int]]) -> list[int]:
    """F.pad's list (pairs from the last dim backwards) padding dim d by `pads[d]`."""
    first = min(pads)
    out: list[int] = []
    for d in range(rank - 1, first - 1, -1):
        out.extend(pads.get(d, (0, 0)))
    return out


def place(v: Value, dim: int, block: int, offset: int, length: int) -> Value:
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
        v = B.pad(v, pad_pairs(v.ndim, pads))
    flat = v.flatten(dim, dim + 1)
    if flat.shape[dim] == length and c == 0:
        return flat
    return flat.slice(dim, c, c + length)


class _Builder:
    """Walks the forward graph backwards, mapping gradient terms through each op by the
    op class's adjoint (`ADJOINTS`)."""

    def __init__(self, forward: Graph) -> None:
        self.forward = forward
        self.graph = Graph(f"{forward.name}_adjoint")
        self.terms: dict[int, list[Term]] = {}
        self.grad_outputs: list[int] = []
        self.results: list[Value] = []
        self.contributions: list[Contribution] = []

    def add(self, value: Value, term: Term | None) -> None:
        if term is None or not _differentiable(value) or value.numel() == 0:
            return
        self.terms.setdefault(id(value), []).append(term)

    def build(self) -> Adjoint:
        fwd = self.forward
        if fwd.output_op is None:
            raise CallError(f"adjoint: graph {fwd.name!r} has no output op")
        for op in reversed(fwd.ops):
            incoming = [self.terms.get(id(r), []) for r in op.results]
            if op.results and not any(incoming):
                continue
            rule = ADJOINTS.lookup(type(op))
            if rule is None:
                why = ADJOINTS.why_none(type(op)) or "none is registered (ADJOINTS)"
                raise UnsupportedError(f"adjoint: op '{op.name}' has no adjoint in stridec: {why}")
            rule(self, op, incoming)
        if not self.results:
            return Adjoint(fwd, None, tuple(self.grad_outputs), ())
        # Outputs in forward-input order: the terms were met walking backwards.
        results, contributions = self.results, self.contributions
        order = sorted(range(len(results)), key=lambda k: contributions[k].input_index)
        self.graph.output(*[results[k] for k in order])
        return Adjoint(fwd, self.graph, tuple(self.grad_outputs),
                       tuple(contributions[k] for k in order))


#: The adjoint of each op class (docs/adding-an-op.md): `rule(b, op, incoming)` is given
#: the gradient terms `incoming[k]` of result k and adds the terms of the values the op
#: read (`b.add(value, term)`), building their ops in `b.graph`. Registered beside each
#: rule; a class without an adjoint says why (`ADJOINTS.declare_none`), and building the
#: adjoint of a graph that needs it raises `UnsupportedError` with that reason.
ADJOINTS: OpRules[Callable[[_Builder, Any, list[list[Term]]], None]] = OpRules("adjoint")


def adjoint_of(*classes: type[Op]) -> Callable[[Callable[[_Builder, Any, Term],
                                                           Term | None]], Any]:
    """Register the adjoint of one-operand, one-result op classes as a map of one gradient
    term of the result to one term of operand 0 (None: no gradient reaches it)."""

    def add(term_map: Callable[[_Builder, Any, Term], Term | None]) -> Any:
        def rule(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
            x = op.operands[0]
            for t in incoming[0]:
                b.add(x, term_map(b, op, t))

        rule.__name__ = rule.__qualname__ = term_map.__name__
        rule.__doc__ = term_map.__doc__
        ADJOINTS.register(*classes)(rule)
        return term_map

    return add


# -- the graph's boundary ------------------------------------------------------------------
@ADJOINTS.register(O.OutputOp)
def _output(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """Each differentiable output j gets the adjoint graph's input ``grad<j>``."""
    for j, v in enumerate(op.operands):
        if not _differentiable(v):
            continue
        g = b.graph.input(f"grad{j}", v.shape, v.type.dtype)
        b.grad_outputs.append(j)
        b.add(v, Term(g, 0))


@ADJOINTS.register(O.InputOp)
def _input(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """Each term of an input is an output of the adjoint graph (a `Contribution`)."""
    index = b.forward.inputs.index(op.result)
    for term in incoming[0]:
        b.results.append(term.value)
        b.contributions.append(Contribution(index, term.acc))


#: The op classes through which no gradient flows.
NO_GRADIENT: tuple[type[Op], ...] = (O.FullOp, O.PhiloxOp, O.PhiloxUniformOp, O.BitcastOp)


@ADJOINTS.register(*NO_GRADIENT)
def _constant(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """Constants, random bits and bits read as another type: no gradient flows (a
    `full_like` reads no values; torch's `view(dtype)` is not differentiable)."""


# -- views ---------------------------------------------------------------------------------
@adjoint_of(O.PermuteOp)
def _permute(b: _Builder, op: Any, t: Term) -> Term:
    rank = op.result.ndim
    dims = [_wrap(d, rank) for d in op.dims]
    inverse = [0] * rank
    for i, d in enumerate(dims):
        inverse[d] = i
    n = t.acc
    return Term(t.value.permute(*range(n), *(n + i for i in inverse)), n)


@adjoint_of(O.TransposeOp)
def _transpose(b: _Builder, op: Any, t: Term) -> Term:
    rank = op.result.ndim
    d0, d1 = _wrap(op.dim0, rank), _wrap(op.dim1, rank)
    return Term(t.value.transpose(t.acc + d0, t.acc + d1), t.acc)


@adjoint_of(O.FlipOp)
def _flip(b: _Builder, op: Any, t: Term) -> Term:
    rank = op.result.ndim
    return Term(t.value.flip(*(t.acc + _wrap(d, rank) for d in op.dims)), t.acc)


@adjoint_of(O.ReshapeOp, O.ViewShapeOp, O.FlattenOp, O.SqueezeOp, O.UnsqueezeOp)
def _reshaped(b: _Builder, op: Any, t: Term) -> Term:
    """The gradient reshaped back to the operand's sizes."""
    return Term(t.value.reshape(*t.acc_sizes, *op.operands[0].shape), t.acc)


@adjoint_of(O.ExpandOp)
def _expand(b: _Builder, op: Any, t: Term) -> Term:
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
    return Term(v, acc)


@adjoint_of(O.SliceOp)
def _slice(b: _Builder, op: Any, t: Term) -> Term | None:
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
        return Term(B.pad(t.value, pad_pairs(t.value.ndim, pads)), t.acc)
    return Term(place(t.value.unsqueeze(d + 1), d, step, start, length), t.acc)


@adjoint_of(O.SelectOp)
def _select(b: _Builder, op: Any, t: Term) -> Term:
    x = op.operands[0]
    dim = _wrap(op.dim, x.ndim)
    length = x.shape[dim]
    index = op.index % length
    d = t.acc + dim
    v = t.value.unsqueeze(d)
    return Term(B.pad(v, pad_pairs(v.ndim, {d: (index, length - 1 - index)})), t.acc)


@adjoint_of(O.DiagonalOp)
def _diagonal(b: _Builder, op: Any, t: Term) -> Term | None:
    """The gradient placed on the diagonal of zeros: of the (n1, n2) plane of `dim1` and
    `dim2`, row-major, diagonal element i sits at ``start + i·(n2 + 1)``, ``start`` = k
    for an offset k >= 0 (above), ``-k·n2`` below (a scatter into zeros, `place`); the
    plane's two dims then go back where `dim1` and `dim2` were."""
    x = op.operands[0]
    rank = x.ndim
    d1, d2 = _wrap(op.dim1, rank), _wrap(op.dim2, rank)
    n1, n2 = x.shape[d1], x.shape[d2]
    if op.result.shape[-1] == 0:
        return None
    k = op.offset
    start = k if k >= 0 else -k * n2
    v = t.value.unsqueeze(-1)  # [..., L, 1]: one element per diagonal block of n2 + 1
    plane = place(v, v.ndim - 2, n2 + 1, start, n1 * n2).unflatten(-1, (n1, n2))
    return Term(plane.movedim((-2, -1), (t.acc + d1, t.acc + d2)), t.acc)


@ADJOINTS.register(O.AsStridedOp)
def _as_strided(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """torch's `as_strided_backward`: the gradient goes to the storage the op reads --
    its operand's root -- not through the views between them. Each term is scattered into
    zeros over the storage's addresses (`_into_storage`), where the root reads it back
    through its own layout. Addresses the result reads more than once add up: the dims
    that make them (broadcast, overlapping windows) become accumulation dims, as an
    `expand`'s do."""
    root = op.operands[0].root()
    if not _differentiable(root):
        return
    layout, into = op.result.type.layout, root.type.layout
    if not is_static((layout, into)):
        raise UnsupportedError("adjoint: as_strided over symbolic sizes has no adjoint in "
                               "stridec")
    if into.numel and invert_strided(into.sizes, into.strides, into.offset) is None:
        raise UnsupportedError(
            f"adjoint: as_strided reads the storage of a value whose elements share "
            f"memory (layout {into}); torch divides its gradient among them, and stridec "
            "computes no quotients")
    for t in incoming[0]:
        b.add(root, _into_storage(t, layout, into))


def _into_storage(t: Term, layout: Layout, into: Layout) -> Term | None:
    """The term `t` of a value that reads storage through `layout`, as a term of the value
    that reads the same storage through `into`: at each address, the sum of what was read
    from it (0 for none).

    The dims of `layout` split into a *kept* set that reads each address once (the
    nesting of `invert_strided`: smallest |stride| first, each exceeding the reach of the
    ones inside it) and *moved* dims, which become accumulation dims. The kept dims are
    scattered, innermost first, into a row P of E elements (`_spread`): P[q] at address
    ``base + Σ_moved m_j·s_j + q``. Each row is padded to W elements with ``lead`` zeros
    in front, so that row m holds address ``a`` at ``a - base - Σ m_j·s_j + lead`` for
    every address `into` reads; then `into` reads them as one view:

        as_strided(Ppad, (*acc, *M, *into.sizes), (*acc_strides, *(R_j - s_j),
                   *into.strides), lead - base + into.offset)

    with R_j the row-major stride of moved dim j over Ppad.
    """
    if layout.numel == 0 or into.numel == 0:
        return None
    n = t.acc
    v = t.value
    rank = layout.rank
    kept: list[int] = []
    moved: list[int] = []
    reach = 0
    for stride, d in sorted((abs(layout.strides[d]), d) for d in range(rank)
                            if layout.sizes[d] > 1):
        if stride > reach:
            kept.append(d)
            reach += (layout.sizes[d] - 1) * stride
        else:
            moved.append(d)
    kept.reverse()  # outermost (largest stride) first
    ones = [d for d in range(rank) if layout.sizes[d] == 1]
    moved.sort()
    v = v.permute(*range(n), *(n + d for d in (*moved, *kept, *ones)))
    if ones:
        v = v.squeeze(tuple(range(v.ndim - len(ones), v.ndim)))
    base = layout.offset
    flipped = []
    for j, d in enumerate(kept):
        if layout.strides[d] < 0:  # read backwards: flipped, it starts at its far end
            base += (layout.sizes[d] - 1) * layout.strides[d]
            flipped.append(n + len(moved) + j)
    if flipped:
        v = v.flip(*flipped)
    row, extent = _spread(v, [abs(layout.strides[d]) for d in kept])
    shifts = [layout.strides[d] for d in moved]
    counts = [layout.sizes[d] for d in moved]
    low = sum(min(0, (c - 1) * s) for c, s in zip(counts, shifts, strict=True))
    high = sum(max(0, (c - 1) * s) for c, s in zip(counts, shifts, strict=True))
    first = into.offset + sum(min(0, (c - 1) * s) for c, s in zip(into.sizes, into.strides,
                                                                     strict=True))
    last = into.offset + sum(max(0, (c - 1) * s) for c, s in zip(into.sizes, into.strides,
                                                                    strict=True))
    lead = max(0, base + high - first)
    width = max(lead + extent, last + lead - (base + low) + 1)
    row = B.pad(row, [lead, width - lead - extent])
    acc_sizes = row.shape[:n]
    sizes = (*acc_sizes, *counts, *into.sizes)
    dense = B._fresh(row)  # a buffer of its own: the view below reads its storage
    strides = list(dense.type.layout.strides[: n + len(moved)])
    for j, s in enumerate(shifts):
        strides[n + j] -= s
    read = dense.as_strided(sizes, (*strides, *into.strides), lead - base + into.offset)
    return Term(read, n + len(moved))


def _spread(v: Value, strides: Sequence[int]) -> tuple[Value, int]:
    """Scatter into zeros the last ``len(strides)`` dims of `v`, of strides decreasing
    and nesting (each exceeds the reach of the ones after it): one dim of E elements,
    element (k_1, ..., k_c) at ``Σ k_j·strides_j``. Returns it and E. Innermost first,
    dim j of n_j elements becomes n_j blocks of ``strides_j`` (the inner extent padded to
    it) flattened, cut to ``(n_j - 1)·strides_j + inner``."""
    if not strides:
        return v.unsqueeze(-1), 1
    extent = 1
    v = v.unsqueeze(-1)
    for stride in reversed(strides):
        d = v.ndim - 2
        count = v.shape[d]
        if stride > extent:
            v = B.pad(v, [0, stride - extent])
        v = v.flatten(d, d + 1)
        extent = (count - 1) * stride + extent
        if v.shape[-1] != extent:
            v = v.narrow(-1, 0, extent)
    return v, extent


@ADJOINTS.register(O.SplitOp)
def _split(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
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
                pieces.append(b.graph.full((*sizes, *r.shape), 0, r.type.dtype))
        value = pieces[0] if len(pieces) == 1 else B.cat(pieces, len(sizes) + dim)
        b.add(x, Term(value, len(sizes)))
        return
    for terms, (start, stop) in zip(incoming, sections, strict=True):
        for t in terms:
            d = t.acc + dim
            pads = {d: (start, x.shape[dim] - stop)}
            b.add(x, Term(B.pad(t.value, pad_pairs(t.value.ndim, pads)), t.acc))


@ADJOINTS.register(O.UnfoldOp)
def _unfold(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """Windows ``w ≡ r (mod q)``, q = ceil(size/step), do not overlap: one scatter per
    class, placing window w at ``w*step`` (``r*step + j*q*step`` for w = r + j*q)."""
    x = op.operands[0]
    if x.ndim == 0:
        raise UnsupportedError("adjoint: unfold of a rank-0 value has no adjoint in stridec")
    dim = _wrap(op.dim, x.ndim)
    size, step, length = op.size, op.step, x.shape[dim]
    for t in incoming[0]:
        d = t.acc + dim
        v = t.value
        if v.ndim - 1 != d + 1:
            v = v.movedim(v.ndim - 1, d + 1)  # [..., W, size, ...]
        windows = v.shape[d]
        q = -(-size // step)
        for r in range(min(q, windows)):
            cls = v if q == 1 else v.slice(d, r, None, q)
            b.add(x, Term(place(cls, d, q * step, r * step, length), t.acc))


# -- materializations ------------------------------------------------------------------
@adjoint_of(O.ContiguousOp, O.ToFormatOp, O.CloneOp)
def _same_elements(b: _Builder, op: Any, t: Term) -> Term:
    """The same elements in other memory: the gradient itself."""
    return t


@adjoint_of(O.PixelShuffleOp)
def _pixel_shuffle(b: _Builder, op: Any, t: Term) -> Term:
    """The gradient unshuffled (the accumulation dims lead: they batch)."""
    return Term(B.pixel_unshuffle(t.value, op.factor), t.acc)


@adjoint_of(O.PixelUnshuffleOp)
def _pixel_unshuffle(b: _Builder, op: Any, t: Term) -> Term:
    if not op.operands[0].numel():  # an empty input: its clone
        return t
    return Term(B.pixel_shuffle(t.value, op.factor), t.acc)


@adjoint_of(O.NaturalCopyOp)
def _copy(b: _Builder, op: Any, t: Term) -> Term | None:
    """A natural copy is a cast (to its own dtype or not); one into a buffer is IR after
    lowering, which autograd never sees."""
    if op.writes_into:
        raise UnsupportedError(
            "adjoint: op 'copy' into a buffer has no adjoint in stridec (IR after "
            "lowering; differentiate the graph before the passes)")
    return _cast(b, op, t)


for _explicit in (O.StridedCopyOp, O.MaskedCopyOp, O.FramedCopyOp, O.FillOp):
    ADJOINTS.declare_none(
        _explicit, "an explicit copy is IR after lowering, which autograd never sees; "
        "differentiate the graph before the passes")


@adjoint_of(O.CastOp)
def _cast(b: _Builder, op: Any, t: Term) -> Term | None:
    """The gradient cast back to the operand's dtype; none into an integer operand."""
    x = op.operands[0]
    if not _differentiable(x):
        return None
    if t.value.type.dtype == x.type.dtype:
        return t
    return Term(t.value.to(x.type.dtype), t.acc)


@adjoint_of(O.PadOp)
def _pad(b: _Builder, op: Any, t: Term) -> Term:
    """The opposite pad: crops where the forward padded, pads where it cropped."""
    return Term(B.pad(t.value, [-p for p in op.pad]), t.acc)


ADJOINTS.declare_none(
    O.WriteOp, "an in-place write is not differentiated: its backward would have to see "
    "through the memory's versions, which the adjoint does not build; call it under "
    "torch.no_grad()")


@ADJOINTS.register(O.CatOp)
def _cat(b: _Builder, op: Any, incoming: list[list[Term]]) -> None:
    """Each operand's slice of the gradient."""
    dim = _wrap(op.dim, op.result.ndim)
    for t in incoming[0]:
        start = 0
        for x in op.operands:
            n = x.shape[dim]
            if n:
                b.add(x, Term(t.value.narrow(t.acc + dim, start, n), t.acc))
            start += n


@adjoint_of(O.PackOp)
def _pack(b: _Builder, op: Any, t: Term) -> Term:
    x = op.operands[0]
    fmt = get_format(op.format)
    channels = x.shape[1] if isinstance(fmt, Format) else x.shape[-1]
    if t.acc == 0 or not isinstance(fmt, Format):
        return Term(t.value.unpack(fmt.name, channels), t.acc)
    # Accumulation dims join N: a batch of [A, N] logical tensors is one of A*N.
    n, acc_sizes = t.acc, t.acc_sizes
    physical = op.result.shape
    p = fmt.split_order(x.ndim).index(0)  # where N sits among the physical dims
    v = t.value.movedim(tuple(range(n)), tuple(range(p, p + n)))
    v = v.reshape(*physical[:p], math.prod(acc_sizes) * physical[p], *physical[p + 1 :])
    v = v.unpack(fmt.name, channels)
    return Term(v.reshape(*acc_sizes, *x.shape), n)


@adjoint_of(O.UnpackOp)
def _unpack(b: _Builder, op: Any, t: Term) -> Term:
    x = op.operands[0]
    fmt = get_format(op.format)
    if t.acc == 0 or not isinstance(fmt, Format):
        return Term(t.value.pack(fmt.name), t.acc)
    n, acc_sizes = t.acc, t.acc_sizes
    logical = op.result.shape
    p = fmt.split_order(len(logical)).index(0)
    v = t.value.reshape(math.prod(acc_sizes) * logical[0], *logical[1:]).pack(fmt.name)
    physical = x.shape
    v = v.reshape(*physical[:p], *acc_sizes, *physical[p:])
    return Term(v.movedim(tuple(range(p, p + n)), tuple(range(n))), n)


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
