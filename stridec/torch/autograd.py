"""Autograd for a plain compiled graph: `stridec.compile(graph)(x)` with an input that
requires grad (and grad mode on) is differentiable, its backward the adjoint graph
(`stridec.torch.adjoint`), as the torch operator's is (docs/torch.md#autograd).

The call runs through one `torch.autograd.Function`: its forward is the plain call (the
same kernels, the same outputs: views of inputs stay views, as torch's), its backward the
adjoint graph compiled by the same backend and pipeline, called on the output gradients.
That call is a plain compiled call too, so under `create_graph=True` it is itself
differentiable: double backward is the adjoint of the adjoint. A call where no input
requires grad, or under `torch.no_grad()`, never enters this module.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from stridec.errors import StridecError, UnsupportedError
from stridec.runtime.compile import CompiledGraph, set_autograd_factory
from stridec.torch.adjoint import Adjoint, adjoint

__all__ = ["Differentiable"]

# The adjoint, its compiled graph and the error that stands for them where there is none.
_Built = tuple[Adjoint | None, CompiledGraph | None, StridecError | None]


class Differentiable:
    """The autograd form of one CompiledGraph: `apply(*tensors)` runs it through
    `_Function`. The adjoint graph is built on the first backward; a graph without one
    (an `as_strided`, or symbolic sizes no gradient dim binds) runs its forward, and its
    backward raises the `UnsupportedError` saying why."""

    def __init__(self, compiled: CompiledGraph) -> None:
        self.compiled = compiled
        self._adjoint: _Built | None = None
        self._lock = threading.Lock()

    def adjoint(self) -> tuple[Adjoint | None, CompiledGraph | None]:
        with self._lock:
            if self._adjoint is None:
                self._adjoint = self._build()
        adj, backward, error = self._adjoint
        if error is not None:
            raise UnsupportedError(f"{self.compiled.graph.name} backward: {error}")
        return adj, backward

    def _build(self) -> _Built:
        from stridec.torch.custom_op import _check_symbolic_adjoint

        graph = self.compiled.graph
        try:
            adj = adjoint(graph)
            if self.compiled.symbols and adj.graph is not None:
                _check_symbolic_adjoint(graph, adj.graph)
        except UnsupportedError as e:
            return None, None, e
        if adj.graph is None:
            return adj, None, None
        backward = CompiledGraph(adj.graph, self.compiled.backend, self.compiled.pipeline)
        return adj, backward, None

    def apply(self, *tensors: torch.Tensor) -> Any:
        """The call, differentiable: the program runs once (grad mode off); an output that
        is a view of an input is that view taken again with grad mode on
        (`torch.as_strided` of the input: a torch view, its backward torch's, in-place
        writes into it tracked as into any view); the others are the outputs of one
        `_Function`, whose backward is the adjoint graph."""
        with torch.no_grad():
            outs = self.compiled(*tensors)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        storages = {t.untyped_storage().data_ptr(): t for t in tensors if t.numel()}
        fresh = []
        for k, o in enumerate(outs):
            base = storages.get(o.untyped_storage().data_ptr()) if o.numel() else None
            if base is not None:
                outs[k] = torch.as_strided(base, o.shape, o.stride(), o.storage_offset())
            elif o.is_floating_point():
                fresh.append(k)
        if fresh:
            shapes = [(o.shape, o.dtype, o.device) for o in outs]
            done = _Function.apply(self, shapes, fresh, [outs[k] for k in fresh], *tensors)
            for k, o in zip(fresh, done, strict=True):
                outs[k] = o
        return outs[0] if len(outs) == 1 else tuple(outs)


class _Function(torch.autograd.Function):
    """Attaches the adjoint to outputs computed already (`Differentiable.apply`): its
    forward hands them back, its backward runs the adjoint graph on their gradients (zero
    for every other output: views of inputs have torch's own backward)."""

    @staticmethod
    def forward(ctx: Any, owner: Differentiable, shapes: list, positions: list[int],
                outs: list[torch.Tensor], *tensors: torch.Tensor) -> tuple:
        ctx.owner = owner
        ctx.shapes = shapes  # of every output: (sizes, dtype, device)
        ctx.positions = positions  # which outputs `outs` are
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple:
        n = len(ctx.needs_input_grad) - 4
        nothing = (None,) * (n + 4)
        if not any(ctx.needs_input_grad[4:]):
            return nothing
        adj, backward = ctx.owner.adjoint()
        if adj is None or backward is None:
            return nothing
        by_output = dict(zip(ctx.positions, grads, strict=True))
        args = []
        for j in adj.grad_outputs:
            g = by_output.get(j)
            if g is None:  # an output the loss did not use, or a view of an input
                shape, dtype, device = ctx.shapes[j]
                g = torch.zeros(shape, dtype=dtype, device=device)
            args.append(g)
        terms = backward(*args)  # differentiable itself where the grads require grad
        terms = terms if isinstance(terms, tuple) else (terms,)
        grads_in = adj.accumulate(terms)
        return (None, None, None, None, *(g if need else None for g, need in
                                          zip(grads_in, ctx.needs_input_grad[4:], strict=True)))


set_autograd_factory(lambda compiled: Differentiable(compiled).apply)
