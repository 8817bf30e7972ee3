"""`stridec.compile(graph)` → `CompiledGraph`: validate, specialize, cache, launch
(docs/design.md#execution-and-backends).

fn = stridec.compile(graph)          # backend "auto": triton on CUDA, cpu (native) on CPU
out = fn(x)                          # one tensor, or a tuple for several outputs
plan = fn.plan_for(x)                # the kernels and lowered IR, without running
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch
from torch.utils._python_dispatch import _disable_current_modes

from stridec.compiler.codegen.program import KernelInfo, Program
from stridec.errors import CallError, LayoutError, StridecError, UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.ops import AsStridedOp, CopyOp, WriteOp, storage_root
from stridec.ir.symbols import compile_template, evaluate
from stridec.ir.types import TensorType
from stridec.runtime import launch
from stridec.runtime.backends.reference import run_reference
from stridec.runtime.cache import MEMORY_CACHE, cache_key
from stridec.runtime.call_path import (
    ClassCall,
    ClassOutHit,
    Hit,
    OutHit,
    bump_versions,
    cached_call,
    into_outs,
    out_key,
    written_shared,
)
from stridec.runtime.lru import Lru
from stridec.runtime.outs import OutCall, check_out_tensors, check_outs
from stridec.runtime.symbolic import (
    FastBinding,
    bind_call,
    binding_class,
    degenerate,
    derived_sizes,
    fast_binder,
    graph_symbols,
    refused_views,
    views_at,
)
from stridec.runtime.tensors import (
    AlignedStandIns,
    FakeTensor,
    active_fake_mode,
    dispatch_modes,
    misaligned,
    without_memory,
)
from stridec.version import __version__

__all__ = ["compile", "check_arguments", "CompiledGraph", "Plan", "Stats", "BACKENDS",
           "set_autograd_factory", "set_torch_op_factory", "TorchOperator"]

BACKENDS = ("auto", "triton", "interpret", "cpu", "reference")
logger = logging.getLogger(__name__)
# Specializations one CompiledGraph keeps at hand (the shared MEMORY_CACHE holds more).
LOCAL_CAPACITY = 64
# Cached calls one CompiledGraph remembers (`_hits`, `CompiledGraph._remember`).
HITS_CAPACITY = 4 * LOCAL_CAPACITY


@dataclass
class Stats:
    """Counters of one CompiledGraph: specializations compiled (pipeline + codegen),
    cache hits (in memory or on disk), disk hits alone, and kernel launches; with
    `tune` (measured choice, `runtime/tune.py`), the copies whose plans were timed, those
    whose choice came from the wisdom, and the seconds spent timing."""

    compiles: int = 0
    cache_hits: int = 0
    disk_hits: int = 0
    launches: int = 0
    pipeline_runs: int = 0
    codegen_runs: int = 0
    tuned: int = 0
    wisdom_hits: int = 0
    tune_seconds: float = 0.0


@dataclass(frozen=True)
class Plan:
    """What one specialization runs: its kernels, one per launch in launch order (each
    with `.kind`, `.strategy` and `.source`, its whole source), `ir` (the graph after the
    passes) and `backend`, the backend that runs them ("cpu", "triton" or "interpret":
    `auto` resolved); `graph` is the graph as written, for pictures.

    `print(plan)` shows the IR and one line per kernel (`kernel_lines`); `repr(plan)` is
    one line. A kernel's full source is `plan.kernels[i].source`.

    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> fn = stridec.compile(g)
    >>> plan = stridec.compile(g, backend="cpu").plan_for(torch.randn(2, 3))
    >>> plan.backend, len(plan.kernels), plan.kernels[0].kind
    ('cpu', 1, 'copy')
    >>> print(plan.ir, end="")
    graph @t {
      %x = input {name = "x"} : tensor<2x3xf32>
      %0 = copy %x {layout = strided<[2, 1], offset: 0>, space = [3, 2], src = strided<[1, 3...
      output %0
    }
    """

    kernels: list[KernelInfo]
    ir: str
    program: Program = field(repr=False)
    graph: Graph | None = field(default=None, repr=False, compare=False)
    backend: str = ""

    def _repr_svg_(self) -> str | None:
        """The picture of `stridec.draw` for notebooks; None without matplotlib."""
        from stridec.viz import svg_or_none

        return svg_or_none(self)

    @property
    def launches(self) -> int:
        """The number of kernel launches a call runs.

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (2, 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> fn.plan_for(torch.randn(2, 3)).launches
        1
        """
        return self.program.launch_count

    @property
    def name(self) -> str:
        """The name of the graph it runs.

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (2, 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> fn.plan_for(torch.randn(2, 3)).name
        't'
        """
        if self.graph is not None:
            return self.graph.name
        head = self.ir.split("{", 1)[0]
        return head.removeprefix("graph @").strip().strip('"')

    def kernel_lines(self) -> list[str]:
        """One line per kernel: its number, kind and strategy, the values it reads and
        writes (names and shapes of the lowered IR), its language, and where its source is
        kept on disk once built or loaded (the file is named by its cache key), e.g.

            kernel 0: copy tiled_transpose, %x 2x8x6x5xf16 -> %0 2x6x5x8xf16, C on cpu,
              2,299 lines in ~/.cache/stridec/kernels/c/3d99….c (plan.kernels[0].source)

        (on one line).

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (6, 8), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> (line,) = stridec.compile(g, backend="cpu").plan_for(torch.randn(6, 8)).kernel_lines()
        >>> line.split(", ")[:3]
        ['kernel 0: copy tiled_transpose', '%x 6x8xf32 -> %0 8x6xf32', 'C on cpu']
        """
        from stridec.ir.parser import parse

        try:
            lowered = parse(self.ir)
        except StridecError:  # an IR text the parser refuses: lines without shapes
            lowered = None
        lines = []
        for number, (kernel, step) in enumerate(
                zip(self.kernels, self.program.launches, strict=True)):
            strategy = f" {kernel.strategy}" if kernel.strategy else ""
            shapes = "" if lowered is None else _launch_shapes(lowered, step.ops)
            lines.append(f"kernel {number}: {kernel.kind}{strategy}, {shapes}"
                         f"{kernel.language} on {self.backend or '?'}, "
                         f"{_source_place(kernel, self.backend, number)}")
        return lines

    def __str__(self) -> str:
        count = len(self.kernels)
        head = (f"plan of @{self.name} on backend {self.backend!r}: {count} "
                f"kernel{'s' if count != 1 else ''}")
        return "\n".join([head, self.ir.rstrip("\n"), *self.kernel_lines()]) + "\n"

    def __repr__(self) -> str:
        kernels = ", ".join(f"{k.kind} {k.strategy}".strip() for k in self.kernels)
        return f"<Plan {self.name!r} backend={self.backend!r} kernels=[{kernels}]>"


def _shape(value: Any) -> str:
    """`2x8x6x5xf16`: a value's sizes and dtype as the text IR writes them."""
    from stridec.ir.symbols import format_size

    dims = "".join(f"{format_size(n, dim=True)}x" for n in value.type.sizes)
    return f"{dims}{value.type.dtype.short}"


def _launch_shapes(lowered: Graph, positions: Sequence[int]) -> str:
    """"%x 2x8x6x5xf16 -> %0 2x6x5x8xf16 ": what the ops at `positions` of the lowered
    graph read (operands made outside them) and write (results no other of them takes)."""
    from stridec.ir.printer import value_names

    if not positions or max(positions) >= len(lowered.ops):
        return ""
    names = value_names(lowered)
    ops = [lowered.ops[i] for i in positions]
    made = {id(r) for op in ops for r in op.results}
    taken = {id(v) for op in ops for v in op.operands}
    reads: list[Any] = []
    writes: list[Any] = []
    for op in ops:
        for v in op.operands:
            if id(v) not in made and all(v is not r for r in reads):
                reads.append(v)
        writes += [r for r in op.results if id(r) not in taken]

    def text(values: list[Any]) -> str:
        return ", ".join(f"{names.get(id(v), '%?')} {_shape(v)}" for v in values)

    return f"{text(reads) or 'nothing'} -> {text(writes)}, "


def _source_place(kernel: KernelInfo, backend: str, number: int) -> str:
    """"2,301 lines in <file> (plan.kernels[0].source)": where the backend keeps a kernel's
    source once built or loaded, home as `~`."""
    lines = kernel.source.count("\n") + (not kernel.source.endswith("\n"))
    where = ""
    if backend in ("cpu", "triton", "interpret"):
        module = "cpu" if kernel.lang == "c" else "triton"
        from importlib import import_module

        files = import_module(f"stridec.runtime.backends.{module}").source_files(kernel.source)
        if files:
            home = str(Path.home())
            first = files[0]
            if first.startswith(home + "/"):
                first = "~" + first[len(home):]
            more = f" and {len(files) - 1} more" if len(files) > 1 else ""
            where = f" in {first}{more}"
    return f"{lines:,} lines{where} (plan.kernels[{number}].source)"


@functools.cache
def _versions() -> dict[str, str]:
    """The versions a cached plan depends on. stridec's own is its release number plus a
    hash of its sources, so a changed compiler never reuses plans of an older one."""
    from stridec.runtime.backends import triton_version

    digest = hashlib.sha256()
    package = Path(__file__).parent.parent  # the stridec package
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return {
        "stridec": f"{__version__}+{digest.hexdigest()[:16]}",
        "torch": torch.__version__,
        "triton": triton_version() or "none",
    }


INT64_MAX = 2**63 - 1


def _check_runnable(graph: Graph) -> None:
    """What the IR can state but no kernel can run, refused before anything compiles:

    - a value of more than 2^63 - 1 elements, or addressing an element past 2^63 - 1
      (torch sizes and kernel offsets are int64): `UnsupportedError`;
    - a `copy` whose result layout may give two elements one address (`copy_to` with a
      stride 0, or strides (1, 1) on sizes (2, 3): addresses 0+0, 0+1, 1+0 … collide),
      where the order of the writes would decide the result: `LayoutError`. The rule is
      `Layout.may_overlap`: sorted by stride, each stride exceeds the span inside it.
    """
    for position, op in enumerate(graph.ops):
        where = f"op #{position} '{op.name}'"
        for r in op.results:
            top = r.type.layout.max_index()
            if r.type.numel > INT64_MAX or (top is not None and top > INT64_MAX):
                raise UnsupportedError(
                    f"{where}: result {r.index} of sizes {list(r.type.sizes)} has "
                    f"{r.type.numel} elements and reaches element {top}; the limit is "
                    f"2^63 - 1 = {INT64_MAX}"
                )
        if isinstance(op, CopyOp) and not op.is_explicit and op.layout.may_overlap():
            layout = op.layout
            raise LayoutError(
                f"{where}: result layout {layout} of sizes {list(layout.sizes)} may write "
                "two elements to one address; expected each stride, smallest first, to "
                "exceed the span of the dims inside it"
            )


def _declared_inputs(graph: Graph) -> list[tuple[int, Layout, int | None, bool]]:
    """Per input declared with a layout or storage: its position, layout, storage and
    whether the graph reads its storage directly (an `as_strided`, or an explicit copy
    of text IR, over it), so that its meaning depends on the declared layout."""
    raw: set[int] = set()
    for op in graph.ops:
        if isinstance(op, AsStridedOp) or (isinstance(op, CopyOp) and op.is_explicit
                                           and op.operands):
            raw.add(id(op.operands[0].root()))
    return [
        (i, v.type.layout, v.owner.storage, id(v) in raw)
        for i, v in enumerate(graph.inputs)
        if v.owner.declared
    ]


_fallback_warned: list[bool] = []


def _cpu_backend() -> str:
    """What `auto` runs CPU tensors on: `cpu` when C kernels build here, else `interpret`
    (warned once per process); neither (no C compiler, no Triton): `UnsupportedError`
    naming both."""
    from stridec.runtime.backends import TRITON_EXTRA, triton_version
    from stridec.runtime.backends.cpu import available, compiler

    if available():
        return "cpu"
    if triton_version() is None:
        raise UnsupportedError(
            f"backend 'auto' on CPU tensors: no working C compiler ({compiler()!r}; set "
            "STRIDEC_CC or CC) for the cpu backend, and no Triton for the interpreter "
            f"(install the triton extra: {TRITON_EXTRA})"
        )
    if not _fallback_warned:
        _fallback_warned.append(True)
        warnings.warn(
            f"stridec: no working C compiler ({compiler()!r}; set STRIDEC_CC or CC): backend "
            "'auto' runs CPU tensors through Triton's interpreter ('interpret'), which is slow",
            RuntimeWarning,
            stacklevel=4,
        )
    return "interpret"


def _capability(device: torch.device) -> str:
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"cuda-sm{major}{minor}"
    return device.type


# What a lazily made attribute holds before it is made, and a cache's answer for a key it
# lacks, where None is an answer (a class that no plan serves).
_UNBUILT: Any = object()


def _as_outs(out: Any) -> tuple[Any, ...]:
    """The tensors of an `out=` argument (a tensor, or a tuple or list of them); anything
    else as a tuple of itself, for `check_outs` to name."""
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _as_results(results: Any) -> tuple[Any, ...]:
    return results if type(results) is tuple else (results,)


def _no_kernel(*args: Any, **keywords: Any) -> None:
    """The launcher of every kernel of a fake call (`CompiledGraph._fake_call`)."""


def _as_fake(t: Any, name: str, mode: Any, convert: bool = True) -> Any:
    """`t` as a FakeTensor of `mode`: itself, or a real tensor converted where the mode
    takes real tensors (`convert`, `allow_non_fake_inputs`); `CallError` naming the
    argument otherwise, as torch refuses to mix them."""
    if isinstance(t, FakeTensor):
        if t.fake_mode is not mode:
            raise CallError(f"argument '{name}': expected a FakeTensor of the active "
                            "FakeTensorMode; got one of another mode")
        return t
    if convert and mode.allow_non_fake_inputs:
        return mode.from_tensor(t)
    raise CallError(
        f"argument '{name}': expected a FakeTensor under the active FakeTensorMode; got a "
        f"{type(t).__name__} (convert it with mode.from_tensor(t), or make the mode with "
        "allow_non_fake_inputs=True)"
    )


class _SymbolicPlan(NamedTuple):
    """What `_symbolic_plan` finds for a call the class plan serves."""

    program: Program
    runner: launch.SymbolicRunner
    values: list[int]  # the symbols' values, in the program's `symbols` order
    device: torch.device
    bindings: dict[str, int]


def check_arguments(where: str, inputs: Sequence[tuple[str, TensorType]],
                    tensors: Sequence[Any], *, data: bool = True,
                    sizes: bool = True) -> torch.device | None:
    """The arguments of a call to a graph of `inputs` (name, type), checked: their count
    (`where` names the callee), type, layout, dtype, sizes and one device for all; with
    `data`, also that each tensor has memory a kernel can address (`without_memory`), is
    no neg view and its storage holds its layout (tensors without data — fake or meta —
    skip those). Without `sizes` the sizes are left to the
    caller (symbolic ones: `bind_call`). Returns the tensors' device (None without
    tensors); raises `CallError` naming the argument."""
    if len(tensors) != len(inputs):
        names = ", ".join(n for n, _ in inputs)
        raise CallError(
            f"{where}: expected {len(inputs)} tensor argument(s) ({names}); got {len(tensors)}"
        )
    device = None
    for (name, t_type), t in zip(inputs, tensors, strict=True):
        if not isinstance(t, torch.Tensor):
            raise CallError(f"argument '{name}': expected a torch.Tensor; got {type(t).__name__}")
        if t.is_nested:
            raise CallError(f"argument '{name}': expected a strided tensor; got a nested tensor")
        if t.layout != torch.strided:
            # Sparse and opaque (mkldnn) tensors have no strides or storage to specialize on.
            raise CallError(
                f"argument '{name}': expected a strided tensor; got layout {t.layout}"
            )
        if t.dtype != t_type.dtype.torch:
            raise CallError(f"argument '{name}': expected dtype {t_type.dtype}; got {t.dtype}")
        if sizes:
            shape = tuple(t.shape) if data else tuple(int(n) for n in t.shape)
            if shape != t_type.sizes:
                raise CallError(
                    f"argument '{name}': expected sizes {list(t_type.sizes)}; got {list(shape)}"
                )
        if data and t.is_neg():
            # A neg view (`z.conj().imag`) stores x and means -x: kernels read storage.
            raise CallError(
                f"argument '{name}': expected a tensor without a pending negation; got a "
                "neg view (pass it through .resolve_neg() first)"
            )
        missing = without_memory(t) if data else None
        if missing is not None:
            raise CallError(
                f"argument '{name}': expected a tensor with memory of its own; got {missing}"
            )
        if device is None:
            device = t.device
        elif t.device != device:
            raise CallError(f"argument '{name}': expected device {device}; got {t.device}")
        if data and t.numel():
            # torch strides and offsets are >= 0: the lowest index is the offset, the
            # highest offset + Σ (n_k - 1)·stride_k. (Plain ints: this runs every call.)
            strides, offset = t.stride(), t.storage_offset()
            last = offset + sum((n - 1) * st for n, st in zip(t.shape, strides, strict=True))
            storage = t.untyped_storage().nbytes() // t.element_size()
            if last >= storage:
                layout = Layout(tuple(t.shape), tuple(strides), offset)
                raise CallError(
                    f"argument '{name}': layout {layout} reaches element {last}, past its "
                    f"storage of {storage} elements"
                )
    return device


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


def _requires_grad(tensors: tuple[Any, ...]) -> bool:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            return True
    return False


class CompiledGraph:
    """A graph compiled once per specialization (argument strides, offset, dtype, device);
    a graph over symbolic sizes once per class of bindings (`_class_program`).

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
        # Symbolic input sizes: one plan per class of bindings (`_call_symbolic`); the
        # limits below need static sizes, so they are checked on each bound graph.
        self.symbols = graph_symbols([t.sizes for _, t in self._inputs])
        if not self.symbols:
            _check_runnable(graph)
        from stridec.compiler.pass_manager import DEFAULT_PIPELINE, parse_pipeline

        self.graph = graph
        self.backend = backend
        self.pipeline = pipeline or DEFAULT_PIPELINE
        if pipeline:
            # An unknown pass fails here, not at the first call. The default pipeline needs
            # no check, and its pass modules load only when a specialization compiles: a
            # process whose plans all come from the disk cache never imports them.
            parse_pipeline(pipeline)
        self.graph_text = str(graph)
        self.stats = Stats()
        # Every cache below is an `Lru` of LOCAL_CAPACITY entries (`_hits`: HITS_CAPACITY),
        # written under `_lock`; the call paths read their `data` without it.
        # Symbolic graphs: the static CompiledGraph of a binding, where no class plan
        # serves (`_bound_graph`), and the class plans (`_class_program`).
        self._bound: Lru[tuple, CompiledGraph] = Lru(LOCAL_CAPACITY)
        self._classes: Lru[tuple, Program | None] = Lru(LOCAL_CAPACITY)
        # Class plans a call reaches straight from `fast_binder`'s answer: (class, device)
        # -> `ClassCall`, for the classes whose program is `_classes`' entry
        # (`_call_symbolic`); emptied with any eviction from `_classes`.
        self._class_calls: Lru[tuple, ClassCall] = Lru(LOCAL_CAPACITY)
        # How often a class plan's entry served each call key (`_class_hit`): the third
        # time, the key enters `_hits` with the class runner bound to its values.
        self._seen: Lru[tuple, int] = Lru(HITS_CAPACITY)
        # `out=` calls over symbolic sizes that passed every check: `out_key` ->
        # `ClassOutHit`. A hit still binds the inputs (`fast_binder`) and runs the
        # class's `_class_calls` entry.
        self._class_out_hits: Lru[tuple, ClassOutHit] = Lru(LOCAL_CAPACITY)
        self._sorted_symbols = tuple(sorted(self.symbols))
        # Sizes of the graph's values that are expressions of the symbols: a binding that
        # makes one 0 or 1 is planned alone (`derived_sizes`).
        self._derived = derived_sizes(v.type for op in graph for v in op.results)
        # Reshapes the class plan copies that view for some values: such a graph has no
        # fast binder, and a binding where one views is planned alone (`views_at`).
        self._refused_views = refused_views(graph)
        self._pipelined: Lru[tuple[tuple[str, int], ...], Graph | None] = Lru(LOCAL_CAPACITY)
        self._declared_fn: Callable[..., tuple] | None = None
        # `fast_binder`'s function of the tensors, built on first use (None: none).
        self._fast_bind: Any = _UNBUILT
        self._declared_sizes = [(n, t.sizes) for n, t in self._inputs]
        self._output_types = [v.type for v in graph.outputs]
        self._declared = _declared_inputs(graph)
        # Per-graph front of MEMORY_CACHE (no hashing of the graph text on a hit), bounded
        # like it: a caller cycling through strides must not grow memory without limit. A
        # cached call stamps its program's entry through the cell its `Hit` holds,
        # without hashing the entry's key again.
        self._programs: Lru[tuple, Program] = Lru(LOCAL_CAPACITY)
        self._specializable: Lru[tuple, None] = Lru(LOCAL_CAPACITY)
        # Cached calls: `plain_call_key`'s key → `Hit`, `out_call_key`'s → `OutHit`, each as
        # recent as its program (they share its cell). Only calls that passed every check
        # enter, under the lock and while their program is in `_programs`; any eviction
        # from `_programs` replaces `_hits` by an empty one, so a hit read from the one
        # that is still `_hits` (checked under the lock) is a call the full path would
        # answer from `_programs` (same program, same stats). Keys hold storage bytes.
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
        # sizes: a key its class plan served three times, `_class_hit`).
        self._keyed = backend != "reference"

    def _after_fork_in_child(self) -> None:
        """A lock another thread held at the fork stays held in the child, where no thread
        will release it: a new one. What it guarded may be half updated: caches only,
        emptied."""
        if self._lock.locked():
            for cache in (self._programs, self._hits, self._bound, self._classes,
                          self._class_calls, self._class_out_hits, self._pipelined,
                          self._specializable, self._seen):
                cache.clear()
        self._lock = threading.Lock()

    # -- arguments -----------------------------------------------------------------------
    def _check(self, tensors: tuple[Any, ...]) -> torch.device:
        device = check_arguments(self.graph.name, self._inputs, tensors)
        for i, layout, storage, raw in self._declared:
            self._check_declared(tensors[i], self._inputs[i][0], layout, storage, raw)
        if device is None:  # a graph without inputs runs where its backend runs
            device = torch.device("cuda" if self.backend == "triton" else "cpu")
        return device

    @staticmethod
    def _check_declared(
        t: torch.Tensor, name: str, layout: Layout, storage: int | None, raw: bool
    ) -> None:
        """An input declared with a layout or storage: with that layout, its storage must
        hold the declared elements; with another, the graph must not read its storage
        directly (as_strided), whose meaning the declared layout fixed."""
        actual = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
        if actual.same_addresses(layout):
            held = t.untyped_storage().nbytes() // t.element_size()
            if storage is not None and held < storage:
                raise CallError(
                    f"argument '{name}': expected a storage of at least {storage} elements "
                    f"(declared); got {held}"
                )
        elif raw:
            raise CallError(
                f"argument '{name}': the graph reads this input's storage (as_strided) as "
                f"declared, layout {layout}; got strides {list(actual.strides)}, offset "
                f"{actual.offset}"
            )

    def _target(self, device: torch.device) -> str:
        backend = self.backend
        if backend == "auto":
            backend = "triton" if device.type == "cuda" else _cpu_backend()
        # Every argument is on `device` (`check_arguments`): the message names the first.
        where = f"argument '{self._inputs[0][0]}': " if self._inputs else ""
        if backend == "triton" and device.type != "cuda":
            raise CallError(f"{where}backend 'triton' runs CUDA tensors; got tensors on "
                            f"{device}")
        if backend in ("interpret", "cpu") and device.type != "cpu":
            raise CallError(f"{where}backend {backend!r} runs CPU tensors; got tensors on "
                            f"{device}")
        if backend not in self._ran:
            self._ran.append(backend)
        return backend

    @staticmethod
    def _specialization(tensors: tuple[torch.Tensor, ...]) -> tuple:
        return tuple((tuple(t.stride()), t.storage_offset()) for t in tensors)

    # -- compiling -----------------------------------------------------------------------
    def _specialize(self, spec: tuple) -> Graph:
        """The graph over the callers' layouts; CallError naming the argument whose
        layout the graph cannot take (`specialize_inputs`)."""
        from stridec.compiler.driver import specialize_inputs

        return specialize_inputs(self.graph, self._layouts(spec))

    def _layouts(self, spec: tuple) -> dict[str, Layout]:
        """The inputs' layouts, by name, of specialization `spec`."""
        return {
            name: Layout(t_type.sizes, strides, offset)
            for (name, t_type), (strides, offset) in zip(self._inputs, spec, strict=True)
        }

    def _check_specializable(self, tensors: tuple[torch.Tensor, ...]) -> None:
        """For the reference backend: the same CallError as a compiled backend gives."""
        spec = self._specialization(tensors)
        with self._lock:
            if spec in self._specializable:
                self._specializable.get(spec)  # stamped used
                return
        self._specialize(spec)
        with self._lock:
            self._specializable.put(spec, None)

    def _compile(
        self, spec: tuple, device: torch.device, target: str, outs: OutCall | None = None
    ) -> tuple[Program, bool]:
        """The program of a specialization, and whether it may be kept on disk (not where
        measured choice ran out of budget: a later process with more measures again)."""
        from stridec.compiler.driver import compile_program, kernel_language

        tuner = None
        if self.tune is not None and kernel_language(target) == "c":
            from stridec.runtime.tune import Tuner

            tuner = Tuner(self.tune)
        program = compile_program(
            self.graph, self._layouts(spec), target, pipeline=self.pipeline,
            copy_aliased_outputs=self.copy_aliased_outputs,
            outs=None if outs is None else (outs.storages, outs.targets), chooser=tuner)
        self.stats.pipeline_runs += 1
        self.stats.codegen_runs += 1
        if tuner is None:
            return program, True
        self.stats.tuned += sum(c.how == "measured" for c in tuner.choices)
        self.stats.wisdom_hits += sum(c.how == "wisdom" for c in tuner.choices)
        self.stats.tune_seconds += tuner.seconds
        return program, tuner.complete

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
        program, _ = self._lookup(spec, device, target)
        return program

    def _program(
        self, tensors: tuple[torch.Tensor, ...], device: torch.device, target: str,
        outs: OutCall | None = None,
    ) -> Program:
        program, _ = self._lookup(self._specialization(tensors), device, target, outs)
        return program

    def _lookup(
        self, spec: tuple, device: torch.device, target: str, outs: OutCall | None = None
    ) -> tuple[Program, tuple]:
        """The program of this specialization and its key in `_programs`."""
        out_key = None if outs is None else outs.key
        local_key = (spec, str(device), target, out_key)
        with self._lock:
            program = self._programs.get(local_key)
            if program is not None:
                self.stats.cache_hits += 1
                return program, local_key
            key = cache_key(
                {
                    "graph": self.graph_text,
                    "spec": spec,
                    "target": target,
                    "device": _capability(device),
                    "pipeline": self.pipeline,
                    "copy_aliased": self.copy_aliased_outputs,
                    "outs": out_key,
                    **_versions(),
                    # A tuned plan depends on the threads it was measured with.
                    **({} if self.tune is None or target != "cpu"
                       else {"tune": torch.get_num_threads()}),
                }
            )
            program = MEMORY_CACHE.get_memory(key)
            if program is not None:
                self.stats.cache_hits += 1
                logger.debug("graph %r for %s: plan %s from the memory cache",
                             self.graph.name, target, key[:16])
            else:
                program = MEMORY_CACHE.get_disk(key)
                if program is not None:
                    self.stats.cache_hits += 1
                    self.stats.disk_hits += 1
                else:
                    start = time.perf_counter()
                    program, keep = self._compile(spec, device, target, outs)
                    self.stats.compiles += 1
                    logger.info("graph %r compiled for %s in %.1f ms: %d kernel(s), "
                                "plan %s", self.graph.name, target,
                                1e3 * (time.perf_counter() - start), program.launch_count,
                                key[:16])
                    if keep:
                        MEMORY_CACHE.put_disk(key, program)
                MEMORY_CACHE.put_memory(key, program)
            if self._programs.put(local_key, program):
                self._hits = Lru(HITS_CAPACITY)  # a hit may name the evicted program
            return program, local_key

    # -- symbolic sizes --------------------------------------------------------------------
    def _bindings(self, tensors: tuple[Any, ...]) -> dict[str, int]:
        """Each symbol's value in this call; `CallError` naming the argument and dim."""
        if len(tensors) != len(self._inputs):
            check_arguments(self.graph.name, self._inputs, tensors)  # names the count
        for (name, _), t in zip(self._inputs, tensors, strict=True):
            if not isinstance(t, torch.Tensor):
                raise CallError(
                    f"argument '{name}': expected a torch.Tensor; got {type(t).__name__}"
                )
        return bind_call([(n, t.sizes) for n, t in self._inputs],
                         [tuple(t.shape) for t in tensors])

    def _bound_graph(self, tensors: tuple[Any, ...]) -> CompiledGraph:
        """The compiled static graph of this call's sizes, sharing this graph's `stats`:
        where no class plan serves (inputs in other layouts than declared, a kernel not
        generated for every value of its class, the reference backend)."""
        key = tuple(tuple(t.shape) for t in tensors)
        found = self._bound.data.get(key)
        if found is not None:
            return found
        bindings = self._bindings(tensors)
        inner = CompiledGraph(self.graph.bind(bindings), self.backend, self.pipeline,
                              copy_aliased_outputs=self.copy_aliased_outputs,
                              bump_versions=self.bump_versions, tune=self.tune)
        inner.stats = self.stats
        inner._ran = self._ran
        inner._reviews = ()  # (this graph's `_call_reviewing` applies them)
        with self._lock:
            self._bound.put(key, inner)
        return inner

    def _declared_layouts(self, tensors: tuple[torch.Tensor, ...],
                          values: Sequence[int]) -> bool:
        """Whether every argument has its input's declared (symbolic) layout at `values`
        (the symbols' values, in `symbols` order): then the symbolic graph, planned once
        per class, is this call's."""
        if self._declared_fn is None:
            self._declared_fn = compile_template(
                tuple((t.layout.strides, t.layout.offset) for _, t in self._inputs),
                self.symbols,
            )
        for (strides, offset), t in zip(self._declared_fn(*values), tensors, strict=True):
            if strides != t.stride() or offset != t.storage_offset():
                return False
        return True

    def _class_program(self, bindings: dict[str, int], device: torch.device,
                       target: str, cls: tuple | None = None) -> Program | None:
        """The plan of the class of `bindings` (`binding_class`: each symbol 0, 1, a
        multiple of 16 or none, fitting int32 or not), built once: the pipeline on the
        symbolic graph, kernels for the class (`lower_to_program`'s hint). None where the
        graph cannot be planned symbolically (then each binding is compiled alone).
        `cls`: `binding_class(bindings)` where the caller has it (`fast_binder`)."""
        key = (binding_class(bindings) if cls is None else cls, device, target)
        program = self._classes.data.get(key, _UNBUILT)  # (a dict read: no lock)
        if program is not _UNBUILT and (program is None or program.fits(bindings)):
            self.stats.cache_hits += 1
            return program  # type: ignore[return-value]
        with self._lock:
            if key in self._classes:
                program = self._classes.get(key)
                if program is None or program.fits(bindings):
                    self.stats.cache_hits += 1
                    return program
                key += ("wide",)  # indices past int32 at these sizes: an int64 plan
                if key in self._classes:
                    self.stats.cache_hits += 1
                    return self._classes.get(key)
            from stridec.compiler.driver import lower_class

            # A symbol at 0 or 1 decides what no other value does -- as torch does, a
            # `contiguous` of a (3, N) transpose is the input itself at N = 1 -- so its
            # classes run the pipeline with it set.
            graph = self._symbolic_pipeline(
                {k: v for k, v in bindings.items() if v in (0, 1)})
            program: Program | None = None
            if graph is not None:
                start = time.perf_counter()
                program = lower_class(graph, target, bindings)
                if program is not None:
                    self.stats.codegen_runs += 1
                    self.stats.compiles += 1
                    logger.info("graph %r compiled for %s in %.1f ms: %d kernel(s) "
                                "serving every size of the class of %s", self.graph.name,
                                target, 1e3 * (time.perf_counter() - start),
                                program.launch_count,
                                ", ".join(f"{k}={v}" for k, v in bindings.items()))
            if self._classes.put(key, program):
                # a hit may name the evicted class's program (see `_hits`)
                self._class_calls.clear()
                self._seen.clear()
                self._hits = Lru(HITS_CAPACITY)
            return program

    def _symbolic_pipeline(self, fixed: Mapping[str, int] | None = None) -> Graph | None:
        """The pass pipeline run once on the symbolic graph with the symbols of `fixed`
        set (what every class of those values lowers: the passes take no other binding),
        or None where it cannot run for every value of the others (a view decided only
        per value). Callers hold `_lock`."""
        from stridec.compiler.driver import symbolic_pipeline

        key = tuple(sorted((fixed or {}).items()))
        if key not in self._pipelined:
            graph = symbolic_pipeline(self.graph, dict(key), pipeline=self.pipeline,
                                      copy_aliased_outputs=self.copy_aliased_outputs)
            if graph is not None:
                self.stats.pipeline_runs += 1
            self._pipelined.put(key, graph)
            return graph
        return self._pipelined.get(key)

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
        if not self.symbols:
            return None
        with self._lock:
            graph = self._symbolic_pipeline()
        if graph is None:
            return None
        return tuple((v.type.layout.sizes, v.type.layout.strides) for v in graph.outputs)

    def bindings(self, tensors: Sequence[Any]) -> dict[str, int]:
        """Each symbol's value in a call with `tensors`; `CallError` naming the argument
        and dim that does not fit the graph's sizes.

        >>> g = stridec.Graph("b")
        >>> x = g.input("x", ("N", 3), "float32")
        >>> g.output(x.t().contiguous())
        >>> stridec.compile(g).bindings([torch.zeros(5, 3)])
        {'N': 5}
        """
        return self._bindings(tuple(tensors))

    def _symbolic_plan(self, tensors: tuple[Any, ...]) -> _SymbolicPlan | None:
        """The class program of a call and its runner, where the class plan serves the
        call; None where it does not
        (see `_bound_graph`). Every check at once
        first (`fast_binder`); where one fails, the full checks name it. Makes the class's
        entry of `_class_calls`, which later calls of the class take."""
        found = self._fast(tensors)
        cls = None
        if found is not None:
            device, bindings, cls, values = found
        else:
            device = check_arguments(self.graph.name, self._inputs, tensors, sizes=False)
            bindings = bind_call(self._declared_sizes, [t.shape for t in tensors])  # sizes
            values = [bindings[n] for n in self.symbols]
            if (device is None or self._declared or degenerate(self._derived, bindings)
                    or views_at(self._refused_views, bindings)
                    or not self._declared_layouts(tensors, values)):
                # An input declared with a layout or storage, a size of the graph 0 or 1
                # that the class plan takes for any value, or a reshape that views at
                # these values where the class plan copies: planned per binding.
                return None
            values = [bindings[n] for n in self._sorted_symbols]
        target = self._target(device)
        program = self._class_program(bindings, device, target, cls)
        if program is None:
            return None
        # The class's runner, built once (a caller that runs it binds these values).
        symbolic = launch.symbolic_runner(program, target)
        if program.symbols != self._sorted_symbols:
            values = [bindings[n] for n in program.symbols]
        elif cls is not None and self._classes.data.get((cls, device, target)) is program:
            # The class's entry: later calls of the class go straight to its runner.
            with self._lock:
                self._class_calls.put((cls, device), ClassCall(
                    program.launch_count, symbolic.call, program, symbolic))
        return _SymbolicPlan(program, symbolic, values, device, bindings)

    def _fast(self, tensors: tuple[Any, ...]) -> FastBinding | None:
        """`fast_binder`'s answer for a call (values in sorted symbol order, the order of
        a class program's `symbols`); None where some check fails or there is no such
        function."""
        fast = self._fast_bind
        if fast is _UNBUILT:
            fast = self._fast_bind = None if self._declared or self._refused_views else (
                fast_binder(self._inputs, self._sorted_symbols, derived=self._derived))
        return None if fast is None else fast(tensors)

    def _call_symbolic(self, tensors: tuple[Any, ...],
                       called: tuple[tuple, list[int]] | None = None) -> Any:
        """A call of a graph over symbolic sizes. Every call, at a size seen before or
        not, takes one path: `fast_binder` checks the arguments and gives the class and
        the symbols' values, the class's entry gives its runner's `call`, which runs the
        program with every number of the binding computed inline -- so a new size costs
        what a cached call does. The first call of a class, or any call a check refuses
        or the class plan does not serve, takes the full path (`_symbolic_plan`). A call
        key (`called`) the class's entry serves three times enters `_hits`
        (`_class_hit`)."""
        fast = self._fast_bind
        found = self._fast(tensors) if fast is _UNBUILT else fast(tensors) if fast else None
        if found is not None:
            entry = self._class_calls.data.get((found.cls, found.device))
            if entry is not None:
                result = entry.call(tensors, found.device, found.values)
                if result is not launch.MISS:
                    self.stats.cache_hits += 1
                    self.stats.launches += entry.launches
                    if called is not None:
                        key, _ = called
                        self._class_hit(key, found, entry, len(tensors), None, None)
                    return self._finish(tensors, result) if self._after else result
        elif _requires_grad(tensors) and torch.is_grad_enabled():
            return self._autograd(tensors, None, {})  # (`fast_binder` refuses such calls)
        found = self._symbolic_plan(tensors)
        if found is None:
            return self._bound_graph(tensors)(*tensors)
        program, symbolic, values, device, _ = found
        outs = launch.run_with(symbolic.bind(values), tensors, device)
        self.stats.launches += program.launch_count
        return self._finish(tensors, outs[0] if len(outs) == 1 else tuple(outs))

    def _symbolic_outs(self, tensors: tuple[Any, ...], out: Any, device: torch.device,
                       bindings: Mapping[str, int], program: Program) -> OutCall:
        """`check_outs` against the sizes of the class `program`'s outputs at `bindings`:
        every `out=` check of a static call, each failure naming `out` or `out[i]`. (The
        class's sizes, not the graph's: `x[1:]` of a dim N is N - 1 long for N >= 1, and
        empty in the class N = 0.)"""
        types = [TensorType(evaluate(o.sizes, bindings), t.dtype)
                 for o, t in zip(program.outputs, self._output_types, strict=True)]
        return check_outs(self.graph.name, types, out, tensors, device)

    def _call_symbolic_out(self, tensors: tuple[Any, ...], out: Any,
                           called: tuple[tuple, list[int]] | None = None) -> Any:
        """`fn(*tensors, out=...)` on the class plan: the outs checked as a static call
        checks them, then the class's program run with each out that no input's memory
        meets written straight where the plan allows it (`SymbolicRunner.call`: an output
        that is a buffer of its own, the out of its strides); every other result is copied
        into its out afterwards. Every result is computed before any out that an input
        meets is written (a result that is a view of such an input is copied apart first),
        and nothing outside each out view is written. A call whose `out_key` was
        seen on a good call of a class skips the out checks (their answer is a function of
        the key) and the class lookup, as a plain call does; MISS where the class plan
        does not serve the call. `called`: `out_call_key`'s answer where the caller has it;
        a key served three times with every out written straight enters `_hits`
        (`_class_hit`)."""
        if called is None:
            key = out_key(tensors, out)
        else:
            key, _ = called
        if _requires_grad(tensors):
            key = None
            if torch.is_grad_enabled():
                self._autograd(tensors, out, {})  # raises: out= is not differentiable
        hit = self._class_out_hits.data.get(key) if key is not None else None
        if hit is not None:
            found = self._fast(tensors)
            entry = None
            if found is not None and found.cls == hit.cls and found.device == hit.device:
                entry = self._class_calls.data.get((hit.cls, hit.device))
            if entry is not None:
                outs = (out,) if type(out) is torch.Tensor else out
                direct = tuple(o if d else None for o, d in zip(outs, hit.writes, strict=True))
                results = entry.call(tensors, hit.device, found.values, direct)
                if results is not launch.MISS:
                    self.stats.cache_hits += 1
                    self.stats.launches += entry.launches
                    self._bump_written(tensors)
                    if all(r is o for r, o in zip(_as_results(results), outs, strict=True)):
                        self._class_hit(key, found, entry, len(tensors), outs, results)
                    return into_outs(outs, results, self.bump_versions)
        found = self._symbolic_plan(tensors)
        if found is None:
            return launch.MISS
        program, symbolic, values, device, bindings = found
        call = self._symbolic_outs(tensors, out, device, bindings, program)
        storages = call.storages
        writes = tuple(not storages[t.storage].staged for t in call.targets)
        direct = tuple(o if d else None for o, d in zip(call.outs, writes, strict=True))
        results = symbolic.call(tensors, device, values, direct)
        self.stats.launches += program.launch_count
        cls = binding_class(bindings)  # as `fast_binder` gives it, which a hit needs
        if key is not None and self._class_calls.data.get((cls, device)) is not None:
            with self._lock:
                self._class_out_hits.put(key, ClassOutHit(cls, device, writes))
        self._bump_written(tensors)
        return into_outs(call.outs, results, self.bump_versions)

    def _class_hit(self, key: tuple, found: FastBinding, entry: ClassCall, n_inputs: int,
                   outs: tuple[torch.Tensor, ...] | None, results: Any) -> None:
        """Note that the class plan of `entry` (`_class_calls`) served call `key` at
        `found` (`fast_binder`'s answer); the third time, the key enters `_hits` with the
        class's runner bound to these values (`SymbolicRunner.bind`), so a size a caller
        keeps calling costs what a static graph's cached call does, while sizes called
        once or twice (a growing sequence) bind no runner and keep the class path's cost.
        Every check the class path makes is a function of the key, as a static call's
        are; `results` is what the call returned into `outs` (each out written
        straight)."""
        with self._lock:
            served = self._seen.get(key, 0)
            if served < 2:
                self._seen.put(key, served + 1)
                return
        program = entry.program
        runner = entry.runner.bind(found.values)
        if outs is None:
            hit: Any = Hit(program, runner, found.device, (), entry.launches, [0],
                            runner.direct(n_inputs))
        else:
            into = {j: (k, outs[k].storage_offset() * outs[k].element_size())
                    for k, j in launch.direct_outputs(program).items()}
            if len(into) != len(outs):
                return
            bound = runner.bound_into(n_inputs, len(outs), into)
            if bound is None:
                return
            hit = OutHit(Hit(program, runner, found.device, (), entry.launches, [0], None),
                          (), bound)
        with self._lock:
            if self._class_calls.data.get((found.cls, found.device)) is entry:
                self._remember(key, hit)

    # -- calling -------------------------------------------------------------------------
    __call__ = cached_call

    def _call_reviewing(self, tensors: tuple[Any, ...], out: Any,
                        named: dict[str, Any]) -> Any:
        """A call of a graph that re-views arguments in place (`OutputOp.reviews`): the
        call, then each caller's tensor given its hidden result's sizes, strides and
        offset by `as_strided_` (which bumps its version once, as each of torch's in-place
        view methods does); a returned result that is the argument itself is that tensor."""
        if out is not None:
            raise UnsupportedError(
                f"{self.graph.name}: out= with in-place view methods on arguments is not "
                "supported; call it without out="
            )
        if _requires_grad(tensors) and torch.is_grad_enabled():
            names = ", ".join(repr(self._inputs[i][0]) for i, _ in self._reviews)
            raise UnsupportedError(
                f"{self.graph.name}: the graph re-views argument(s) {names} in place, and a "
                "call with an input that requires grad would need its backward through "
                "that, which stridec does not build; call it under torch.no_grad()"
            )
        result = self._call(tensors, None, named)
        results = result if type(result) is tuple else (result,)
        shown = len(results) - len(self._reviews)
        for (i, _), view in zip(self._reviews, results[shown:], strict=True):
            x = tensors[i]
            if view.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
                raise StridecError(
                    f"{self.graph.name}: argument {self._inputs[i][0]!r}'s new view is not a "
                    "view of its memory (a compiler bug)"
                )
            x.as_strided_(view.shape, view.stride(), view.storage_offset())
        outs = list(results[:shown])
        for i, returned in self._reviews:
            for k in returned:
                outs[k] = tensors[i]
        return outs[0] if shown == 1 else tuple(outs)

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

    def _call_under_modes(self, tensors: tuple[Any, ...], out: Any,
                          named: dict[str, Any]) -> Any:
        """A call while torch dispatch modes are active, whose allocations may not be
        memory at all. Under a `FakeTensorMode`: fake results with the metadata the call
        gives (`_fake_call`). Under others (make_fx's, a user's): the call as without
        them, allocating outside them (a kernel writes only memory it owns)."""
        mode = active_fake_mode()
        if mode is None:
            with _disable_current_modes():
                return self._call(tensors, out, named)
        return self._fake_call(tensors, out, named, mode)

    def _call_shared(self, tensors: tuple[Any, ...], out: Any) -> Any:
        """A call where an argument the graph writes in place shares its storage with
        another argument (`f(x, x)`, or `cache` and a view of it): the kernels would read
        memory that the writes change under them, where torch's ops run one after the
        other (`a.copy_(b.flip(0))` reads a copy of b made before the write). It runs as
        the reference does, torch's ops in order on the caller's tensors, so values,
        versions and torch's own refusals (a copy from memory it overwrites) are torch's;
        such a refusal is a `CallError` naming the arguments."""
        self._check(tensors)
        self._check_specializable(tensors)
        call = None
        if out is not None:
            call = check_outs(self.graph.name, self._output_types, out, tensors,
                              tensors[0].device if tensors else None)
        try:
            results = run_reference(self.graph, *tensors)
        except RuntimeError as e:
            if isinstance(e, StridecError):
                raise
            names = ", ".join(repr(n) for n, _ in self._inputs)
            raise CallError(
                f"{self.graph.name}: arguments {names} share memory that the graph writes in "
                f"place, and torch refuses the write: {e}"
            ) from None
        if call is None:
            return results[0] if len(results) == 1 else tuple(results)
        for o, r in zip(call.outs, results, strict=True):
            o.copy_(r)
        return call.outs[0] if len(call.outs) == 1 else call.outs

    def _call_aligned(self, tensors: tuple[Any, ...], out: Any, named: dict[str, Any]) -> Any:
        """A call with a tensor whose data pointer is not a multiple of its element size
        (`misaligned`): the call on aligned stand-ins of the storages such tensors live
        in (`AlignedStandIns`), then the bytes of each out and of each input the graph
        writes in place written back (versions bumped), each result that is a view of a
        stand-in made the same view of the original and each that is an input itself
        that input, so values, strides, aliasing and versions are the call's on aligned
        tensors."""
        outs = None if out is None else _as_outs(out)
        stand_ins = AlignedStandIns((*tensors, *(outs or ())))
        staged = tuple(map(stand_ins.of, tensors))
        written = tuple(tensors[i] for i in self._written)
        if outs is None:
            result = self._call(staged, None, named)
            stand_ins.write_back(written)
            self._bump_written(tensors)
            if type(result) is not tuple:
                return tensors[self._itself[0][1]] if self._itself else stand_ins.original(
                    result)
            results = list(map(stand_ins.original, result))
            for k, i in self._itself:
                results[k] = tensors[i]
            return tuple(results)
        inner = (stand_ins.of(out) if isinstance(out, torch.Tensor) else
                 tuple(map(stand_ins.of, outs)) if isinstance(out, (tuple, list)) else out)
        self._call(staged, inner, named)
        stand_ins.write_back((*outs, *written))
        if self.bump_versions:
            bump_versions(outs)
        self._bump_written(tensors)
        return outs[0] if len(outs) == 1 else outs

    def _fake_call(self, tensors: tuple[Any, ...], out: Any, named: dict[str, Any],
                   mode: Any) -> Any:
        """A call under `mode`, a `FakeTensorMode`: the arguments checked as far as
        metadata goes (each a FakeTensor of the mode, or a real tensor where the mode
        takes them: `allow_non_fake_inputs`), no kernel run. Without `out=`, the results
        are what the call gives -- the program's outputs over fake buffers, views of
        inputs where the call returns views -- with no data; with `out=`, the outs,
        their versions bumped."""
        if named:
            self._refuse_keywords(named)
        check_arguments(self.graph.name, self._inputs, tensors, data=False,
                        sizes=not self.symbols)
        tensors = tuple(_as_fake(t, name, mode) for (name, _), t in zip(self._inputs, tensors,
                                                                         strict=True))
        if self.symbols:
            return self._bound_graph(tensors)._fake_call(tensors, out, named, mode)
        device = check_arguments(self.graph.name, self._inputs, tensors, data=False)
        if device is None:
            device = torch.device("cuda" if self.backend == "triton" else "cpu")
        if out is not None:
            outs = check_out_tensors(self.graph.name, self._output_types, out, device,
                                     data=False)[0]
            for i, t in enumerate(outs):
                _as_fake(t, "out" if len(outs) == 1 else f"out[{i}]", mode, convert=False)
            if self.bump_versions:
                bump_versions(outs)
            return outs[0] if len(outs) == 1 else outs
        target = "interpret" if self.backend == "reference" else self._target(device)
        program, _ = self._lookup(self._specialization(tensors), device, target)
        runner = launch.Runner.of(program, [_no_kernel] * len(program.kernels))
        results = runner.run(tensors, device)
        return self._finish(tensors, results[0] if len(results) == 1 else tuple(results))

    def _refuse_keywords(self, named: dict[str, Any]) -> None:
        raise CallError(
            f"{self.graph.name}: expected tensors by position "
            f"({', '.join(n for n, _ in self._inputs)}); got keyword argument(s) "
            f"{', '.join(map(repr, named))}"
        )

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

    def _stamp(self, hits: dict[tuple, Any], hit: Hit) -> bool:
        """Count a hit read from `hits` and stamp its entry's recency cell, as a hit in
        `_programs` is counted and made its most recent entry; False where `hits` is no
        longer `_hits` (an eviction since the read: the hit may name the evicted program,
        and the call takes the full path)."""
        with self._lock:
            if self._hits is not hits:
                return False
            programs = self._programs  # (`Lru.touch`, inline: this is every cached call)
            programs.clock += 1
            hit.used[0] = programs.clock
            self.stats.cache_hits += 1
            return True

    def _call(self, tensors: tuple[Any, ...], out: Any, named: dict[str, Any],
              called: tuple[tuple, list[int]] | None = None) -> Any:
        """A call that is not a cached one: symbolic sizes, keyword arguments, the
        reference backend, a key not seen, or arguments without one (`plain_call_key`:
        `called`, its answer where there is one). A good call of a static graph on a
        kernel backend with a key enters `_hits`; a call with an input that requires
        grad never does, and with grad mode on it is differentiable (`_autograd`). Under
        torch dispatch modes, `_call_under_modes`."""
        if dispatch_modes() and not (torch.is_grad_enabled() and _requires_grad(tensors)):
            return self._call_under_modes(tensors, out, named)
        if (misaligned(tensors) or out is not None and misaligned(_as_outs(out))) and not (
                torch.is_grad_enabled() and _requires_grad(tensors)):
            return self._call_aligned(tensors, out, named)
        if (self._written_args and not named and written_shared(tensors, self._written_args)
                and not (torch.is_grad_enabled() and _requires_grad(tensors))):
            return self._call_shared(tensors, out)
        if self.symbols:
            if not named and self.backend != "reference":
                if out is None:
                    return self._call_symbolic(tensors, called)
                result = self._call_symbolic_out(tensors, out, called)
                if result is not launch.MISS:
                    return result
            return self._bound_graph(tensors)(*tensors, out=out, **named)
        if _requires_grad(tensors):
            called = None
            if torch.is_grad_enabled():
                return self._autograd(tensors, out, named)
        if out is not None:
            if named:
                self.__call__(*tensors, **named)  # raises the keyword-argument error
            return self._call_out(tensors, out, None)
        if named:
            self._refuse_keywords(named)
        device = self._check(tensors)
        if self.backend == "reference":
            self._check_specializable(tensors)
            outs = list(run_reference(self.graph, *tensors))  # (torch bumps its writes)
            return outs[0] if len(outs) == 1 else tuple(outs)
        target = self._target(device)
        program, local_key = self._lookup(self._specialization(tensors), device, target)
        runner = launch.runner(program, target)
        if called is not None:
            key, _ = called
            direct = runner.direct(len(tensors))
            with self._lock:
                hit = self._hit(program, runner, device, local_key, direct)
                if hit is not None:
                    self._remember(key, hit)
        outs = launch.run_with(runner, tensors, device)
        self.stats.launches += program.launch_count
        return self._finish(tensors, outs[0] if len(outs) == 1 else tuple(outs))

    def _call_out(self, tensors: tuple[torch.Tensor, ...], out: Any,
                  called: tuple[tuple, list[int]] | None) -> Any:
        """`fn(*tensors, out=...)` that is not a cached call (`__call__` runs those: a
        call whose `out_call_key` key was seen on a good call runs that call's program,
        where its C kernels offer it (`Runner.bound`) straight on the storages' data
        pointers the key read): each output written in place into its `out` tensor,
        which are returned (see `stridec.runtime.outs` and `stridec.compiler.outputs`).
        `called`: `out_call_key`'s answer, None where there is none."""
        key = None
        if called is not None:
            key, _ = called
        if _requires_grad(tensors):
            key = None
            if torch.is_grad_enabled():
                self._autograd(tensors, out, {})  # raises: out= is not differentiable
        device = self._check(tensors)
        call = check_outs(self.graph.name, self._output_types, out, tensors, device)
        if self.backend == "reference":
            self._check_specializable(tensors)
            # The reference computes every output before writing any: nothing is staged.
            for o, r in zip(call.outs, run_reference(self.graph, *tensors), strict=True):
                o.copy_(r)
        else:
            target = self._target(device)
            program, local_key = self._lookup(self._specialization(tensors), device, target,
                                              call)
            runner = launch.runner(program, target)
            if key is not None:
                positions = {id(t): i for i, t in reversed(list(enumerate(call.outs)))}
                storage_outs = tuple(positions[id(t)] for t in call.storage_tensors)
                # Runner slot -> index in `out_call_key`'s pointers (the inputs', the outs').
                n = len(tensors)
                bound = runner.bound([*range(n), *(n + i for i in storage_outs)],
                                     n + len(call.outs))
                with self._lock:
                    hit = self._hit(program, runner, device, local_key, None)
                    if hit is not None:
                        self._remember(key, OutHit(hit, storage_outs, bound))
            launch.run_with(runner, (*tensors, *call.storage_tensors), device)
            self.stats.launches += program.launch_count
            if self.bump_versions:
                bump_versions(call.outs)
            self._bump_written(tensors)
        return call.outs[0] if len(call.outs) == 1 else call.outs

    def _hit(self, program: Program, runner: launch.Runner, device: torch.device,
             local_key: tuple, direct: Callable[..., Any] | None) -> Hit | None:
        """The `Hit` of a call that passed every check and found `program` under
        `local_key`, or None where the program has left `_programs` since (evicted, or
        evicted and refilled: then the entry's cell is another). Callers hold `_lock`."""
        if self._programs.data.get(local_key) is not program:
            return None
        return Hit(program, runner, device, local_key, program.launch_count,
                    self._programs.cell(local_key), direct)

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
        >>> x = g.input("x", (6, 8), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> plan = stridec.compile(g, backend="cpu").plan_for(torch.randn(6, 8))
        >>> plan
        <Plan 't' backend='cpu' kernels=[copy tiled_transpose]>
        >>> [k.strategy for k in plan.kernels]
        ['tiled_transpose']
        """
        if self.symbols:
            found = None
            if self.backend != "reference":
                found = self._symbolic_plan(tensors)
            if found is None:
                return self._bound_graph(tensors).plan_for(*tensors, out=out)
            if out is not None:  # the class plan, whose results are copied into the outs
                self._symbolic_outs(tensors, out, found.device, found.bindings, found.program)
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
        program = self._program(tensors, device, target, call)
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
