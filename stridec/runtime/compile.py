"""`stridec.compile(graph)` → `CompiledGraph`: validate, specialize, cache, launch
(docs/design.md#execution-and-backends).

fn = stridec.compile(graph)          # backend "auto": triton on CUDA, cpu (native) on CPU
out = fn(x)                          # one tensor, or a tuple for several outputs
plan = fn.plan_for(x)                # the kernels and lowered IR, without running
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from stridec.compiler.codegen.program import Program
from stridec.compiler.driver import check_runnable
from stridec.errors import CallError, UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.ops import WriteOp, storage_root
from stridec.runtime import launch
from stridec.runtime.arguments import (
    check_arguments,
    check_declared,
    declared_inputs,
    resolve_backend,
)
from stridec.runtime.call_path import (
    Hit,
    OutHit,
    bump_versions,
    cached_call,
    call_aligned,
    call_out,
    call_reviewing,
    call_shared,
    call_under_modes,
    fake_call,
    full_call,
    refuse_keywords,
)
from stridec.runtime.class_plans import ClassPlans, call_bindings
from stridec.runtime.lru import Lru
from stridec.runtime.outs import (
    OutCall,
    check_outs,
)
from stridec.runtime.plan import Plan
from stridec.runtime.specialization import Specializations, Specialized, Stats
from stridec.runtime.symbolic import (
    graph_symbols,
)

__all__ = ["compile", "check_arguments", "CompiledGraph", "Plan", "Stats", "BACKENDS",
           "set_autograd_factory", "set_torch_op_factory", "TorchOperator"]

BACKENDS = ("auto", "triton", "interpret", "cpu", "reference")
# Specializations one CompiledGraph keeps at hand (the shared MEMORY_CACHE holds more).
LOCAL_CAPACITY = 64
# Cached calls one CompiledGraph remembers (`_hits`, `CompiledGraph._remember`).
HITS_CAPACITY = 4 * LOCAL_CAPACITY


@runtime_checkable
class TorchOperator(Protocol):
    """What `CompiledGraph.as_torch_op` returns, a `stridec.torch.TorchOp` (defined in the
    torch layer, above the runtime): call it as `torch.ops.<ns>.<name>`; `overload` is the
    `torch._ops.OpOverload`, `compiled` the CompiledGraph it runs.

    >>> import stridec.torch
    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> op = stridec.compile(g).as_torch_op("doc::protocol")
    >>> isinstance(op, stridec.runtime.compile.TorchOperator), type(op).__name__
    (True, 'TorchOp')
    """

    qualname: str
    compiled: CompiledGraph
    overload: Any

    def __call__(self, *tensors: Any, out: Any = None) -> Any: ...


# What `CompiledGraph.as_torch_op` calls: set by `stridec.torch` when it loads (the torch
# integration sits above the runtime, which never imports it).
_torch_op_factory: Callable[[CompiledGraph, str], TorchOperator] | None = None


# Every CompiledGraph of the process, for `_after_fork_in_child`.
_GRAPHS: weakref.WeakSet[CompiledGraph] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for graph in list(_GRAPHS):
        graph._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def set_torch_op_factory(factory: Callable[[CompiledGraph, str], TorchOperator]) -> None:
    """Install what `CompiledGraph.as_torch_op(qualname)` returns: `factory(self, qualname)`."""
    global _torch_op_factory
    _torch_op_factory = factory


# What a call with an input that requires grad runs (grad mode on): `factory(self)` gives
# the differentiable call (`stridec.torch.autograd`), made once per CompiledGraph.
_autograd_factory: Callable[[CompiledGraph], Callable[..., Any]] | None = None


def set_autograd_factory(factory: Callable[[CompiledGraph], Callable[..., Any]]) -> None:
    """Install the differentiable form of a compiled call (`stridec.torch` does)."""
    global _autograd_factory
    _autograd_factory = factory


def _writes(graph: Graph,
            copy_aliased: bool) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """(the input of each in-place write into an input's memory, in order; (output k, input
    i) for each output that is input i itself, at the version the graph returns: no view,
    its whole memory -- none under the custom-op contract, which copies it)."""
    position = {id(v): i for i, v in enumerate(graph.inputs)}
    written = tuple(position[id(root)] for op in graph.ops
                    if isinstance(op, WriteOp)
                    and id(root := storage_root(op.storage)) in position)
    itself: list[tuple[int, int]] = []
    if not copy_aliased:
        for k, v in enumerate(graph.outputs):
            root = storage_root(v)
            if (v.root() is v and id(root) in position
                    and v.type.layout == root.type.layout):
                itself.append((k, position[id(root)]))
    return written, tuple(itself)


def _reviews(graph: Graph) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Per hidden result of `OutputOp.reviews`, in order: (the input it re-views, the
    visible outputs that are that input's final view itself -- `return x` after
    `x.t_()` -- which a call returns as the caller's tensor)."""
    op = graph.output_op
    reviews = op.reviews or ()
    if not reviews:
        return ()
    position = {v.owner.arg_name: i for i, v in enumerate(graph.inputs)}
    visible = op.visible
    hidden = op.operands[len(visible):]
    final = {name: v for name, v in zip(reviews, hidden, strict=True)}
    return tuple(
        (position[name], tuple(k for k, v in enumerate(visible) if v is final[name]))
        for name in reviews)


class CompiledGraph:
    """A graph compiled once per specialization (argument strides, offset, dtype, device);
    a graph over symbolic sizes once per class of bindings. It holds the graph's state and
    its public methods; what compiling is lives in the compile driver
    (`stridec.compiler.driver`), the programs by specialization in
    `stridec.runtime.specialization`, the class plans of symbolic sizes in
    `stridec.runtime.class_plans`, and the calls in `stridec.runtime.call_path`.

    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> fn = stridec.compile(g)
    >>> t = torch.arange(6.0).view(2, 3)
    >>> fn(t)
    tensor([[0., 3.],
            [1., 4.],
            [2., 5.]])
    >>> fn(t.t().contiguous().t())    # other strides: another specialization
    tensor([[0., 3.],
            [1., 4.],
            [2., 5.]])
    >>> fn.stats.compiles
    2
    """

    def __init__(self, graph: Graph, backend: str = "auto", pipeline: str | None = None, *,
                 copy_aliased_outputs: bool = False, bump_versions: bool = True,
                 tune: bool | float | None = False) -> None:
        """`copy_aliased_outputs`: the custom-op contract — the `plan-memory` pass of the
        pipeline copies an output that would be a view of an input. `bump_versions`: a
        call with `out=` bumps each out's version counter, as torch's out= ops do (False
        for a caller that bumps them itself: torch's dispatcher, for an operator's
        mutated arguments). `tune`: measured choice of copy plans (`compile`); kept as
        `self.tune`, the budget in seconds, None when off."""
        if not isinstance(graph, Graph):
            raise CallError(f"compile: expected a stridec.Graph; got {type(graph).__name__}")
        if backend not in BACKENDS:
            raise UnsupportedError(
                f"compile: backend must be one of {', '.join(BACKENDS)}; got {backend!r}"
            )
        if backend in ("interpret", "triton"):
            from stridec.runtime.backends import require_triton

            require_triton(f"compile: backend {backend!r}")
        if graph.output_op is None:
            raise CallError(
                f"compile: graph {graph.name!r} has no output op (call graph.output(...))"
            )
        if pipeline is not None and not isinstance(pipeline, str):
            raise CallError(
                f"compile: pipeline must be a string of pass names; got {type(pipeline).__name__}"
            )
        self.tune: float | None = None
        if tune is not False and tune is not None:
            from stridec.runtime.tune import tune_budget

            self.tune = tune_budget(tune)
        graph.verify()
        self._inputs = [(v.owner.arg_name, v.type) for v in graph.inputs]
        # Symbolic input sizes: one plan per class of bindings (`ClassPlans`); the limits
        # below need static sizes, so they are checked on each bound graph.
        self.symbols = graph_symbols([t.sizes for _, t in self._inputs])
        if not self.symbols:
            check_runnable(graph)
        from stridec.compiler.pass_manager import DEFAULT_PIPELINE, parse_pipeline

        self.graph = graph
        self.backend = backend
        self.pipeline = pipeline or DEFAULT_PIPELINE
        if pipeline:
            # An unknown pass fails here, not at the first call. The default pipeline needs
            # no check, and its pass modules load only when a specialization compiles: a
            # process whose plans all come from the disk cache never imports them.
            parse_pipeline(pipeline)
        self.stats = Stats()
        self._output_types = [v.type for v in graph.outputs]
        self._declared = declared_inputs(graph)
        # Every cache is an `Lru` of LOCAL_CAPACITY entries (`_hits`: HITS_CAPACITY),
        # written under `_lock`; the call paths read their `data` without it.
        # Symbolic sizes: the class plans (`stridec.runtime.class_plans`).
        self._symbolic = None if not self.symbols else ClassPlans(
            graph, has_declared=bool(self._declared), capacity=LOCAL_CAPACITY,
            hits_capacity=HITS_CAPACITY)
        # Per-graph front of MEMORY_CACHE (no hashing of the graph text on a hit), bounded
        # like it: a caller cycling through strides must not grow memory without limit. A
        # cached call stamps its program's entry through the cell its `Hit` holds,
        # without hashing the entry's key again.
        self._specs = Specializations(graph, self._inputs, pipeline=self.pipeline,
                                      stats=self.stats, capacity=LOCAL_CAPACITY,
                                      copy_aliased_outputs=copy_aliased_outputs, tune=self.tune)
        self._programs = self._specs.programs
        self.graph_text = self._specs.graph_text
        # Cached calls: `plain_call_key`'s key → `Hit`, `out_call_key`'s → `OutHit`, each as
        # recent as its program (they share its cell). Only calls that passed every check
        # enter, under the lock and while their program is in `_programs`; any eviction
        # from `_programs` replaces `_hits` by an empty one, so a hit read from the one
        # that is still `_hits` (checked with no call before the hit's stores: under the
        # GIL no eviction runs between them) is a call the full path would answer from
        # `_programs` (same program, same stats). Keys hold storage bytes.
        self._hits: Lru[tuple, Hit | OutHit] = Lru(HITS_CAPACITY)
        self._lock = threading.Lock()
        _GRAPHS.add(self)
        self.copy_aliased_outputs = copy_aliased_outputs
        # The backends calls and plans resolved to so far (`ran_on`).
        self._ran: list[str] = []
        self.bump_versions = bump_versions
        # In-place writes into inputs: the input of each (one entry per write, as torch
        # bumps a version per in-place op), and the outputs that are an input itself.
        self._written, self._itself = _writes(graph, copy_aliased_outputs)
        # The arguments written in place, on every backend (`_call_shared`).
        self._written_args = tuple(sorted(set(self._written)))
        # Whether a call's result needs `_finish` (the reference's torch ops bump theirs).
        self._after = bool(self._itself) or (
            bool(self._written) and bump_versions and backend != "reference")
        if backend == "reference":
            self._written = ()
        # Arguments re-viewed in place (`OutputOp.reviews`): `_call_reviewing`.
        self._reviews = _reviews(graph)
        if self._reviews and copy_aliased_outputs:
            raise UnsupportedError(
                f"compile: graph {graph.name!r} re-views argument(s) in place (x.t_(), "
                "x.unsqueeze_(0), ...), which needs its outputs to be views of the caller's "
                "tensors; copy_aliased_outputs copies them"
            )
        # The differentiable call (`_autograd_factory`), made on first use.
        self._differentiable: Callable[..., Any] | None = None
        # Whether calls may be cached (`_hits`): a graph on a kernel backend (over symbolic
        # sizes: a key its class plan served three times, `ClassPlans.class_hit`).
        self._keyed = backend != "reference"

    def _after_fork_in_child(self) -> None:
        """A lock another thread held at the fork stays held in the child, where no thread
        will release it: a new one. What it guarded may be half updated: caches only,
        emptied."""
        if self._lock.locked():
            caches = () if self._symbolic is None else self._symbolic.caches()
            for cache in (self._programs, self._hits, self._specs.specializable, *caches):
                cache.clear()
        self._lock = threading.Lock()

    # -- arguments -----------------------------------------------------------------------
    def _check(self, tensors: tuple[Any, ...]) -> torch.device:
        device = check_arguments(self.graph.name, self._inputs, tensors)
        for i, layout, storage, raw in self._declared:
            check_declared(tensors[i], self._inputs[i][0], layout, storage, raw)
        if device is None:  # a graph without inputs runs where its backend runs
            device = torch.device("cuda" if self.backend == "triton" else "cpu")
        return device

    def _target(self, device: torch.device) -> str:
        backend = resolve_backend(self.backend, device, self._inputs)
        if backend not in self._ran:
            self._ran.append(backend)
        return backend

    # -- compiling -----------------------------------------------------------------------
    def _check_specializable(self, tensors: tuple[torch.Tensor, ...]) -> None:
        """For the reference backend: the same CallError as a compiled backend gives."""
        spec = self._specs.key_of(tensors)
        with self._lock:
            self._specs.check(spec)

    def _forget_hits(self) -> None:
        """Empty `_hits`: a program or class plan was evicted, which a hit may name.
        Callers hold `_lock`."""
        self._hits = Lru(HITS_CAPACITY)

    def _lookup(self, spec: tuple, device: torch.device, target: str,
                outs: OutCall | None = None) -> Specialized:
        """The program of specialization `spec` and its key in `_programs`."""
        with self._lock:
            found = self._specs.lookup(spec, device, target, outs)
            if found.evicted:
                self._forget_hits()
        return found

    def program_for_layouts(
        self, layouts: Sequence[tuple[Sequence[int], int]], device: torch.device | str
    ) -> Program:
        """The program for arguments of these (strides, storage offset), one per input, on
        `device`, for the kernel backend of that device (triton on CUDA; on the CPU this
        graph's backend, interpret for the reference backend); compiled on first use, no
        kernel runs. For callers whose tensors carry no data to check (fake tensors under
        tracing); the layouts must fit the inputs' sizes.

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (2, 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> program = fn.program_for_layouts([((1, 2), 0)], "cpu")   # x given transposed
        >>> program.launch_count                # its .t() is contiguous: a view, no kernel
        0
        """
        device = torch.device(device)
        if self.symbols:
            raise UnsupportedError(
                f"program_for_layouts: graph {self.graph.name!r} has symbolic sizes "
                f"({', '.join(self.symbols)}); call it, or plan_for, with tensors"
            )
        if len(layouts) != len(self._inputs):
            raise CallError(
                f"{self.graph.name}: expected {len(self._inputs)} layout(s); got {len(layouts)}"
            )
        spec = tuple((tuple(int(s) for s in strides), int(offset)) for strides, offset in layouts)
        target = "triton" if device.type == "cuda" else self._target(device)
        if target == "reference":  # plans (for a fake) as the interpreter's
            target = "interpret"
        return self._lookup(spec, device, target).program

    # -- symbolic sizes (`stridec.runtime.class_plans`) ---------------------------------
    def symbolic_outputs(self) -> tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...] | None:
        """(sizes, strides) of each output of the plan every class shares, over the
        symbols (`stridec.ir.symbols`; evaluate them with a call's bindings), for inputs
        in their declared layouts; None where the graph cannot be planned symbolically,
        or has no symbols.

        >>> g = stridec.Graph("s")
        >>> x = g.input("x", ("N", 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> ((sizes, strides),) = stridec.compile(g).symbolic_outputs()
        >>> [str(n) for n in sizes], [str(s) for s in strides]
        (['3', 'N'], ['N', '1'])
        """
        if self._symbolic is None:
            return None
        return self._symbolic.outputs(self)

    def bindings(self, tensors: Sequence[Any]) -> dict[str, int]:
        """Each symbol's value in a call with `tensors`; `CallError` naming the argument
        and dim that does not fit the graph's sizes.

        >>> g = stridec.Graph("b")
        >>> x = g.input("x", ("N", 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> stridec.compile(g).bindings([torch.zeros(5, 3)])
        {'N': 5}
        """
        return call_bindings(self.graph.name, self._inputs, tuple(tensors))

    # -- calling (`stridec.runtime.call_path`) ------------------------------------------
    __call__ = cached_call
    _call = full_call
    _call_out = call_out
    _call_reviewing = call_reviewing
    _call_under_modes = call_under_modes
    _call_shared = call_shared
    _call_aligned = call_aligned
    _fake_call = fake_call
    _refuse_keywords = refuse_keywords

    def _autograd(self, tensors: tuple[Any, ...], out: Any, named: dict[str, Any]) -> Any:
        """A call with an input that requires grad, grad mode on: differentiable through
        the adjoint graph (`stridec.torch.autograd`), never a silently detached result.
        `out=` writes outside autograd, as torch's out= arguments, and is refused."""
        if out is not None:
            name = next(n for (n, _), t in zip(self._inputs, tensors, strict=False)
                        if isinstance(t, torch.Tensor) and t.requires_grad)
            raise CallError(
                f"{self.graph.name}: out= writes in place, outside autograd, but argument "
                f"'{name}' requires grad (as torch's out= functions refuse); call without "
                "out= for a differentiable result, or under torch.no_grad()"
            )
        if named:
            return self._call(tensors, None, named)  # raises the keyword-argument error
        if self._written:
            names = ", ".join(repr(self._inputs[i][0]) for i in sorted(set(self._written)))
            raise UnsupportedError(
                f"{self.graph.name}: the graph writes in place into argument(s) {names}, "
                "and a call with an input that requires grad would need its backward through "
                "those writes, which stridec does not build; call it under torch.no_grad()"
            )
        if self._differentiable is None:
            if _autograd_factory is None:
                raise UnsupportedError(
                    f"{self.graph.name}: an argument requires grad, and the torch "
                    "integration that differentiates a call is not loaded; import "
                    "stridec.torch (or use stridec.compile(graph).as_torch_op(...))"
                )
            self._differentiable = _autograd_factory(self)
        return self._differentiable(*tensors)

    def _bump_written(self, tensors: tuple[Any, ...]) -> None:
        """Bump the version of each input the program wrote in place, once per write, as
        torch's in-place ops do (not where the caller bumps: an operator's dispatcher)."""
        if self._written and self.bump_versions:
            bump_versions(tuple(tensors[i] for i in self._written))

    def _finish(self, tensors: tuple[Any, ...], result: Any) -> Any:
        """A program's result as the call returns it: the written inputs' versions bumped,
        and each output that is an input itself (the graph returns it, maybe after
        writing into it: `x.copy_(y)` returns `x`) that very tensor, as torch returns it."""
        self._bump_written(tensors)
        if not self._itself:
            return result
        if type(result) is not tuple:
            return tensors[self._itself[0][1]]
        outs = list(result)
        for k, i in self._itself:
            outs[k] = tensors[i]
        return tuple(outs)

    def _hit(self, program: Program, runner: launch.Runner, device: torch.device,
             local_key: tuple, direct: Callable[..., Any] | None, threads: int = 0
             ) -> Hit | None:
        """The `Hit` of a call that passed every check and found `program` under
        `local_key`, or None where the program has left `_programs` since (evicted, or
        evicted and refilled: then the entry's cell is another). Callers hold `_lock`."""
        if self._programs.data.get(local_key) is not program:
            return None
        return Hit(program, runner, device, local_key, program.launch_count,
                    self._programs.cell(local_key), direct, threads)

    def _remember(self, key: tuple, entry: Hit | OutHit) -> None:
        """`_hits[key] = entry`, as recent as its program (keys hold storage bytes, so a
        caller cycling through storages of many sizes makes many). Callers hold `_lock`."""
        hit = entry.hit if isinstance(entry, OutHit) else entry
        self._hits.put(key, entry, hit.used)

    def plan_for(self, *tensors: torch.Tensor, out: Any = None) -> Plan:
        """The plan of this specialization (compiled if needed), without running it;
        with `out=`, the plan that writes into those tensors. For a graph over symbolic
        sizes, the plan of the call's class (its kernels' arguments symbolic) where one
        serves the call.

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (12, 10), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> plan = stridec.compile(g, backend="cpu").plan_for(torch.randn(12, 10))
        >>> plan
        <Plan 't' backend='cpu' kernels=[copy tiled_transpose]>
        >>> [k.strategy for k in plan.kernels]
        ['tiled_transpose']
        """
        if self.symbols:
            found = None
            if self.backend != "reference":
                found = self._symbolic.plan(self, tensors)
            if found is None:
                return self._symbolic.bound_graph(self, tensors).plan_for(*tensors, out=out)
            if out is not None:  # the class plan, whose results are copied into the outs
                self._symbolic.checked_outs(self, tensors, out, found.device, found.bindings,
                                            found.program)
            program = found.program
            kernels = [program.kernels[launch.kernel] for launch in program.launches]
            return Plan(kernels=kernels, ir=program.ir, program=program, graph=self.graph,
                        backend=self._target(found.device))
        device = self._check(tensors)
        call = None
        if out is not None:
            call = check_outs(self.graph.name, self._output_types, out, tensors, device)
        if self.backend == "reference":
            raise UnsupportedError("plan_for: the reference backend runs no kernels")
        target = self._target(device)
        program = self._lookup(self._specs.key_of(tensors), device, target, call).program
        kernels = [program.kernels[launch.kernel] for launch in program.launches]
        return Plan(kernels=kernels, ir=program.ir, program=program, graph=self.graph,
                    backend=target)

    def as_torch_op(self, qualname: str) -> TorchOperator:
        """Register this graph as the torch operator `qualname` ("namespace::name"),
        callable as `torch.ops.<namespace>.<name>`; returns its `stridec.torch.TorchOp`
        (see `stridec.torch.register`).

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (2, 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> op = fn.as_torch_op("doc::to_columns")
        >>> t = torch.randn(2, 3)
        >>> torch.equal(torch.ops.doc.to_columns(t), t.t().contiguous())
        True
        """
        if _torch_op_factory is None:
            raise UnsupportedError(
                "as_torch_op: the torch integration is not loaded; import stridec.torch "
                "(or stridec) first"
            )
        return _torch_op_factory(self, qualname)

    @property
    def ran_on(self) -> tuple[str, ...]:
        """The kernel backends this graph's calls and plans have run on so far, in order
        of first use: what `backend="auto"` resolved to ("cpu" or "interpret" for CPU
        tensors, "triton" for CUDA ones).

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (2, 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> fn.ran_on
        ()
        >>> y = fn(torch.randn(2, 3))
        >>> fn.ran_on in (("cpu",), ("interpret",))
        True
        """
        return tuple(self._ran)

    def __repr__(self) -> str:
        ran = "".join(f", ran on {b!r}" for b in self.ran_on[:1])
        ran += "".join(f" and {b!r}" for b in self.ran_on[1:])
        if self.backend == "reference":
            ran = ""
        return f"<CompiledGraph {self.graph.name!r} backend={self.backend!r}{ran}>"


def compile(graph: Graph, backend: str = "auto", pipeline: str | None = None, *,
            tune: bool | float = False) -> CompiledGraph:
    """Compile `graph`; kernels are generated per call specialization, on first use.

    `tune` (the `cpu` backend): measured choice of copy plans. Where the planner's model
    ranks several plans of a copy, the first call of a specialization times them on
    scratch memory and runs the fastest, keeping the choice in the disk cache for later
    calls and processes (FFTW's wisdom). `True` measures for up to 3 seconds a
    specialization, a number for up to that many seconds, `0` only reads choices made
    before; `False` (the default) runs the model's plans and times nothing
    (docs/cpu.md, "Measured choice").

    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> fn = stridec.compile(g)
    >>> fn
    <CompiledGraph 't' backend='auto'>
    >>> t = torch.randn(2, 3)
    >>> torch.equal(fn(t), t.t().contiguous())
    True
    >>> fn
    <CompiledGraph 't' backend='auto', ran on 'cpu'>
    """
    return CompiledGraph(graph, backend, pipeline, tune=tune)
