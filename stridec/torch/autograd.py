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
from stridec.ir.layout import Layout
from stridec.ir.ops import AsStridedOp
from stridec.runtime.compile import CompiledGraph, check_arguments, set_autograd_factory
from stridec.torch.adjoint import Adjoint, adjoint

__all__ = ["Differentiable"]

# The adjoint, its compiled graph and the error that stands for them where there is none.
_Built = tuple[Adjoint | None, CompiledGraph | None, StridecError | None]

# Adjoints kept per caller layout, for graphs whose adjoint depends on it (`as_strided`).
_MAX_LAYOUTS = 64


class Differentiable:
    """The autograd form of one CompiledGraph: `apply(*tensors)` runs it through
    `_Function`. The adjoint graph is built on the first differentiable call, before the
    program runs: a graph without one (an op whose adjoint is refused, or symbolic sizes
    no gradient dim binds) raises the `UnsupportedError` saying why at that call, not at
    a later backward. The adjoint of a graph that reads an input's storage directly
    (`as_strided`) depends on the caller's strides and offsets: it is built per layout."""

    def __init__(self, compiled: CompiledGraph) -> None:
        self.compiled = compiled
        self._adjoints: dict[tuple, _Built] = {}
        self._lock = threading.Lock()
        graph = compiled.graph
        self._inputs = [(v.owner.arg_name, v.type) for v in graph.inputs]
        self._per_layout = not compiled.symbols and any(
            isinstance(op, AsStridedOp) for op in graph.ops)

    def adjoint(self, tensors: tuple[torch.Tensor, ...] = ()
                ) -> tuple[Adjoint | None, CompiledGraph | None]:
        """The adjoint of the graph as called with `tensors` (their layouts matter only
        where `as_strided` reads them) and its compiled graph."""
        layouts: dict[str, Layout] = {}
        if self._per_layout:
            for v, t in zip(self.compiled.graph.inputs, tensors, strict=True):
                layout = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
                if not layout.same_addresses(v.type.layout):
                    layouts[v.owner.arg_name] = layout
        key = tuple(sorted(layouts.items(), key=lambda item: item[0]))
        with self._lock:
            found = self._adjoints.get(key)
            if found is None:
                if len(self._adjoints) >= _MAX_LAYOUTS:
                    self._adjoints.pop(next(iter(self._adjoints)))
                found = self._adjoints[key] = self._build(layouts)
        adj, backward, error = found
        if error is not None:
            raise UnsupportedError(
                f"{self.compiled.graph.name} backward: {error} (an input requires grad; "
                "call under torch.no_grad() or with detached inputs to run it without "
                "autograd)")
        return adj, backward

    def _build(self, layouts: dict[str, Layout]) -> _Built:
        from stridec.torch.custom_op import _check_symbolic_adjoint

        graph = self.compiled.graph
        try:
            adj = adjoint(graph.specialize(layouts) if layouts else graph)
            if self.compiled.symbols and adj.graph is not None:
                _check_symbolic_adjoint(graph, adj.graph)
        except UnsupportedError as e:
            return None, None, e
        if adj.graph is None:
            return adj, None, None
        backward = CompiledGraph(adj.graph, self.compiled.backend, self.compiled.pipeline,
                                 tune=self.compiled.tune)
        return adj, backward, None

    def apply(self, *tensors: torch.Tensor) -> Any:
        """The call, differentiable: the program runs once (grad mode off); an output that
        is a view of an input is that view taken again with grad mode on
        (`torch.as_strided` of the input: a torch view, its backward torch's, in-place
        writes into it tracked as into any view); the others are the outputs of one
        `_Function`, whose backward is the adjoint graph."""
        check_arguments(self.compiled.graph.name, self._inputs, tensors,
                        sizes=not self.compiled.symbols)
        built = self.adjoint(tensors)  # refuses before anything runs
        with torch.no_grad():
            outs = self.compiled(*tensors)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        storages = {t.untyped_storage().data_ptr(): t for t in tensors if t.numel()}
        tracked = built[0].differentiable_outputs([t.requires_grad for t in tensors])
        fresh = []
        for k, o in enumerate(outs):
            base = storages.get(o.untyped_storage().data_ptr()) if o.numel() else None
            if base is not None:
                if base.dtype == o.dtype:
                    outs[k] = torch.as_strided(base, o.shape, o.stride(), o.storage_offset())
                # else the input's bytes read as another type (torch's view(dtype), which
                # autograd does not differentiate): as it is
            elif o.is_floating_point() and k in tracked:
                fresh.append(k)
        if fresh:
            shapes = [(o.shape, o.dtype, o.device) for o in outs]
            done = _Function.apply(built, shapes, fresh, [outs[k] for k in fresh], *tensors)
            for k, o in zip(fresh, done, strict=True):
                outs[k] = o
        return outs[0] if len(outs) == 1 else tuple(outs)


class _Function(torch.autograd.Function):
    """Attaches the adjoint to outputs computed already (`Differentiable.apply`): its
    forward hands them back, its backward runs the adjoint graph on their gradients (zero
    for every other output: views of inputs have torch's own backward)."""

    @staticmethod
    def forward(ctx: Any, built: tuple[Adjoint | None, CompiledGraph | None], shapes: list,
                positions: list[int], outs: list[torch.Tensor], *tensors: torch.Tensor) -> tuple:
        ctx.built = built  # the adjoint and its compiled graph
        ctx.shapes = shapes  # of every output: (sizes, dtype, device)
        ctx.positions = positions  # which outputs `outs` are
        ctx.inputs = [(t.shape, t.dtype, t.device) for t in tensors]
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple:
        needs = ctx.needs_input_grad[4:]
        if not any(needs):
            return (None,) * (len(needs) + 4)
        adj, backward = ctx.built
        if adj is None or backward is None:
            return (None, None, None, None, *_zeros(ctx.inputs, needs, [None] * len(needs)))
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
        return (None, None, None, None, *_zeros(ctx.inputs, needs, adj.accumulate(terms)))


def _zeros(inputs: list, needs: tuple[bool, ...], grads: Any) -> list[torch.Tensor | None]:
    """The gradient of each input that needs one: zeros where none reached it (an empty
    diagonal reads nothing), as torch's own backward gives."""
    return [None if not need else g if g is not None else torch.zeros(shape, dtype=dtype,
                                                                      device=device)
            for (shape, dtype, device), need, g in zip(inputs, needs, grads, strict=True)]


set_autograd_factory(lambda compiled: Differentiable(compiled).apply)
