"""A compiled layout graph as a torch custom operator (docs/design.md#torch-integration).

    op = stridec.compile(graph).as_torch_op("mylib::to_nhwc")   # or stridec.torch.register
    y = op(x)                         # the same as torch.ops.mylib.to_nhwc(x)

The operator has one Tensor argument per graph input (named after it) and returns one
Tensor or a tuple, one per graph output. It has:

- a **fake** implementation that needs no data: the output sizes, strides and dtypes of
  the plan for the fake inputs' strides (the pass pipeline and code generation run, the
  kernels do not), so `torch.compile` sees the exact layouts the kernels write;
- a **CPU** kernel running the `cpu` backend (native kernels), defined with
  `torch.library.Library` so that a plain call costs one Python function over the
  compiled call (`TorchOp._define_cpu`), and on a machine with CUDA a
  `torch.library.triton_op` whose function launches the generated Triton kernels through
  `wrap_triton`, so Inductor sees them (eager CUDA calls launch them directly);
- **autograd** through the adjoint graph (`stridec.torch.adjoint`), itself registered as
  the operator ``<name>__adjoint`` (whose backward is registered on first use, so double
  backward works too).

The custom-op contract: outputs never alias inputs or each other. An output that is a pure
view of an input is copied (`plan-memory{copy-aliased-outputs=true}`), and every output is
a fresh tensor with the plan's strides and storage offset 0.
"""

from __future__ import annotations

import inspect
import keyword
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

import torch
from torch._library.triton import is_wrap_triton_enabled
from torch.utils._python_dispatch import _disable_current_modes

from stridec.compiler.codegen.program import Program
from stridec.errors import CallError, StridecError, UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.ops import AsStridedOp
from stridec.ir.symbols import Sym, compile_template, evaluate, free_symbols
from stridec.runtime import launch
from stridec.runtime.backends import grid_call_form
from stridec.runtime.backends.triton import load_jit
from stridec.runtime.compile import CompiledGraph, check_arguments, set_torch_op_factory
from stridec.runtime.symbolic import bind_call
from stridec.torch.adjoint import Adjoint, adjoint

__all__ = ["TorchOp", "register"]

_QUALNAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)")
# Words the schema parser reads as types or values, never as argument names.
_SCHEMA_WORDS = {"Tensor", "int", "float", "bool", "str", "None", "Scalar", "Any", "Device",
                 "Layout", "ScalarType", "SymInt", "Storage", "Stream", "Generator"}
_REGISTRY: dict[str, TorchOp] = {}
# What an Autograd kernel is called with for plain CPU tensors and nothing else (no
# dispatch mode, tensor subclass, functorch layer or fake tensor): below autograd, the
# CPU kernel is then what the dispatcher reaches.
_PLAIN_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU).add(
    torch._C.DispatchKey.AutogradCPU).raw_repr()
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_REGISTRY_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would stay held in the child forever.
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _TracedTriton:
    """The Triton backend as the torch op launches it: each kernel through torch's
    traceable wrapper, so that under `torch.compile` Inductor sees every launch.

    The runner is built once per program and kept, so its launchers must not depend on
    the call that built it: `torch.library.wrap_triton` hands back the bare kernel while
    triton_op runs an eager CUDA call (wrap_triton disabled), and a runner built then
    would launch bare kernels on fake tensors under a later `torch.compile`. Each
    launcher holds both and picks per launch (`_WrappedKernel`)."""

    name = "triton-wrapped"
    language = "triton"
    device = "cuda"
    call_form = staticmethod(grid_call_form)

    def load(self, program: Program) -> list[Any]:
        return [self.load_kernel(k) for k in program.kernels]

    def load_kernel(self, kernel: Any) -> _WrappedKernel:
        return _WrappedKernel(load_jit(kernel.source, kernel.name))


class _WrappedKernel:
    """One kernel as the torch op launches it: through the traceable wrapper while
    wrap_triton is enabled (tracing: the launch becomes a node Inductor sees), else the
    `JITFunction` itself (triton_op's eager CUDA call; no wrapper built per launch)."""

    __slots__ = ("jit", "wrapped")

    def __init__(self, jit: Any) -> None:
        from torch._higher_order_ops.triton_kernel_wrap import TraceableTritonKernelWrapper

        self.jit = jit
        # What `wrap_triton(jit)` returns while enabled, whatever the mode now.
        self.wrapped = TraceableTritonKernelWrapper(jit, None, None)

    def __call__(self, grid: tuple[int, ...], *args: Any, **keywords: Any) -> None:
        if is_wrap_triton_enabled():
            self.wrapped[grid](*args, **keywords)
        else:
            self.jit[grid](*args, **keywords)


_TRACED_TRITON = _TracedTriton()


def _arg_names(graph: Graph) -> list[str]:
    """Schema argument names: the graph's input names where they are identifiers the
    schema parser accepts, else ``arg<i>``."""
    names: list[str] = []
    for i, v in enumerate(graph.inputs):
        name = v.owner.arg_name
        if (not name.isidentifier() or keyword.iskeyword(name) or name in _SCHEMA_WORDS
                or name.startswith("_") or name in names):
            name = f"arg{i}"
        while name in names:
            name = f"{name}_"
        names.append(name)
    return names


def _out_names(names: Sequence[str], outputs: int) -> list[str]:
    """Names of the out overload's outputs: `out`, or `out0`, `out1`, … (suffixed with `_`
    where an input takes the name)."""
    wanted = ["out"] if outputs == 1 else [f"out{k}" for k in range(outputs)]
    taken = set(names)
    result = []
    for n in wanted:
        while n in taken:
            n += "_"
        taken.add(n)
        result.append(n)
    return result


def _signature(names: Sequence[str], outputs: int,
               mutated: Sequence[str] = ()) -> tuple[inspect.Signature, str]:
    """The Python signature (for triton_op's schema inference) and the schema string, each
    argument of `mutated` (written in place) annotated `Tensor(a<k>!)`."""
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=torch.Tensor) for n in names]
    if outputs == 1:
        returns: Any = torch.Tensor
        schema_out = "Tensor"
    else:
        returns = tuple.__class_getitem__((torch.Tensor,) * outputs)
        schema_out = "(" + ", ".join(["Tensor"] * outputs) + ")"
    marks = {n: f"Tensor(a{k}!)" for k, n in enumerate(mutated)}
    schema = "(" + ", ".join(f"{marks.get(n, 'Tensor')} {n}" for n in names) + f") -> {schema_out}"
    return inspect.Signature(params, return_annotation=returns), schema


class TorchOp:
    """A registered operator: call it like `torch.ops.<ns>.<name>`.

    `overload` is the `torch._ops.OpOverload` (what `torch.library.opcheck` takes),
    `compiled` the CompiledGraph it runs (the graph under the custom-op contract; its
    `stats` count specializations), `adjoint` its backward graph (None when no gradient
    flows), `backward_op` the registered adjoint operator.
    """

    def __init__(self, qualname: str, compiled: CompiledGraph, use_triton_op: bool) -> None:
        self.qualname = qualname
        self.compiled = compiled
        self.graph = compiled.graph
        self.use_triton_op = use_triton_op
        self.arg_names = _arg_names(compiled.graph)
        # The arguments the graph writes in place (`mutates_args`), and their positions.
        self._mutated_index = tuple(sorted(set(compiled._written)))
        self.mutated = tuple(self.arg_names[i] for i in self._mutated_index)
        self._inputs = [v.type for v in compiled.graph.inputs]
        self._named_inputs = list(zip(self.arg_names, self._inputs, strict=True))
        self._outputs = [v.type for v in compiled.graph.outputs]
        # A graph over symbolic sizes: its outputs' sizes and strides over the symbols
        # (`_output_layouts`), found on first use.
        self.symbols = compiled.symbols
        self._symbolic_outputs: Any = None
        self.adjoint: Adjoint | None = None
        self.adjoint_error: StridecError | None = None
        try:
            self.adjoint = adjoint(compiled.graph)
            if self.symbols and self.adjoint.graph is not None:
                _check_symbolic_adjoint(compiled.graph, self.adjoint.graph)
        except UnsupportedError as e:
            # The forward still works; a backward through it raises this error.
            if self.symbols:
                e = UnsupportedError(
                    f"graph {compiled.graph.name!r}: no backward over the symbolic sizes "
                    f"({', '.join(self.symbols)}): {e}"
                )
            self.adjoint_error = e
        self._backward_op: TorchOp | None = None
        # `_run_compiled`'s path for a static graph on a kernel backend.
        self._kernels = not self.symbols and compiled.backend != "reference"
        self._reads_storage = any(isinstance(op, AsStridedOp) for op in compiled.graph.ops)
        self._bound: dict[tuple, CompiledGraph] = {}
        self._layouts: dict[tuple, list[tuple[tuple, tuple]]] = {}
        self._lib: Any = None  # the Library the CPU form is defined in (kept alive)
        self.overload = self._define()
        self.out_names = _out_names(self.arg_names, len(self._outputs))
        self.out_op = self._define_out()
        self.out_overload = self.out_op._opoverload

    def __call__(self, *tensors: torch.Tensor, out: Any = None) -> Any:
        if out is None:
            return self.overload(*tensors)
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        if len(outs) != len(self.out_names):
            raise CallError(
                f"{self.qualname}: 'out' must give one tensor per output: expected "
                f"{len(self.out_names)}; got {len(outs)}"
            )
        self.out_overload(*tensors, **dict(zip(self.out_names, outs, strict=True)))
        return out

    def __repr__(self) -> str:
        return f"<stridec TorchOp {self.qualname} graph={self.graph.name!r}>"

    # -- definition ----------------------------------------------------------------------
    def _define(self) -> Any:
        """The operator's `OpOverload`: on a machine with CUDA a `torch.library.triton_op`
        (or, over symbolic sizes, a `custom_op` for both devices), else the CPU form
        (`_define_cpu`)."""
        signature, schema = _signature(self.arg_names, len(self._outputs), self.mutated)
        name = self.qualname.split("::")[1]
        if not self.use_triton_op:
            return self._define_cpu(name, schema)

        def cpu_impl(*tensors: torch.Tensor) -> Any:
            return self._run_compiled(tensors)

        def cuda_impl(*tensors: torch.Tensor) -> Any:
            return self._run_triton(tensors)

        for fn in (cpu_impl, cuda_impl):
            fn.__signature__ = signature  # type: ignore[attr-defined]
            fn.__name__ = fn.__qualname__ = name
        try:
            if self.use_triton_op and not self.symbols:
                op = torch.library.triton_op(self.qualname, cuda_impl,
                                             mutates_args=self.mutated)
                op.register_kernel("cpu", cpu_impl)
                self._decompose_cuda_only(op)
            else:
                # Symbolic sizes: one opaque call on every device, running the class plan
                # whose kernels take the sizes at run time (`_run_compiled`).
                devices = ("cpu", "cuda") if self.use_triton_op else "cpu"
                op = torch.library.custom_op(self.qualname, cpu_impl,
                                             mutates_args=self.mutated,
                                             device_types=devices, schema=schema)
        except RuntimeError as e:
            raise CallError(
                f"as_torch_op: cannot define operator '{self.qualname}' (is the name taken "
                f"by another library?): {e}"
            ) from e
        op.register_fake(self._fake)
        op.register_autograd(self._backward, setup_context=self._setup_context)
        return op._opoverload

    def _define_cpu(self, name: str, schema: str) -> Any:
        """The operator for CPU tensors, defined with `torch.library.Library` and two
        kernels, so that a call costs one Python function over the plain call
        (docs/torch.md#what-a-call-costs): a CPU kernel, and an Autograd kernel that, called
        with plain CPU tensors none of which requires grad (the dispatch keys are CPU and
        AutogradCPU alone: no mode, subclass, functorch layer or fake tensor), runs the
        CPU kernel's work itself instead of redispatching. A call that needs grad runs
        through `_OpFunction` (the adjoint graph), anything else is redispatched below
        autograd as `torch.library.custom_op`'s autograd kernel does. The fake is
        `_fake`; the schema is tagged pt2-compliant, as `custom_op` tags its ops."""
        namespace = self.qualname.split("::")[0]
        lib = torch.library.Library(namespace, "FRAGMENT")
        try:
            lib.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
        except RuntimeError as e:
            raise CallError(
                f"as_torch_op: cannot define operator '{self.qualname}' (is the name taken "
                f"by another library?): {e}"
            ) from e
        self._lib = lib
        overload = getattr(getattr(torch.ops, namespace), name).default
        run, redispatch, apply = self._run_compiled, overload.redispatch, _OpFunction.apply
        plain, after, grad_enabled = _PLAIN_CPU, _AFTER_AUTOGRAD, torch.is_grad_enabled
        if self.mutated:
            # No ADInplaceOrView kernel bumps a Library operator's written arguments (as
            # custom_op's does): the kernel bumps each once, as torch's ops bump theirs.
            run = self._run_and_bump

        def cpu_kernel(*tensors: torch.Tensor) -> Any:
            return run(tensors)

        def autograd_kernel(keyset: Any, *tensors: torch.Tensor) -> Any:
            if keyset.raw_repr() == plain:
                for t in tensors:
                    if t.requires_grad:
                        break
                else:
                    return run(tensors)  # what the redispatch would reach
            below = keyset & after
            if grad_enabled() and any(t.requires_grad for t in tensors):
                return apply(self, below, *tensors)
            return redispatch(below, *tensors)

        lib.impl(name, cpu_kernel, "CPU")
        lib.impl(name, autograd_kernel, "Autograd", with_keyset=True)
        torch.library.register_fake(self.qualname, self._fake, lib=lib)
        return overload

    def _define_out(self) -> Any:
        """The `out=` overload `<ns>::<name>.out`: one `Tensor(a!)` argument per output
        (`out`, or `out0`, `out1`, …), each written in place (`mutates_args`), returning
        nothing. It runs `CompiledGraph.__call__(..., out=...)` on every device (the kernels
        write the caller's tensors, whatever their strides); its fake checks the outs."""
        written = {n: f"Tensor(b{k}!)" for k, n in enumerate(self.mutated)}
        ins = ", ".join(f"{written.get(n, 'Tensor')} {n}" for n in self.arg_names)
        outs = ", ".join(f"Tensor(a{k}!) {n}" for k, n in enumerate(self.out_names))
        schema = f"({ins}, {outs}) -> ()"
        n_in = len(self.arg_names)

        def split(args: tuple, named: dict) -> tuple[tuple, tuple]:
            given = (*args, *(named[n] for n in (*self.arg_names, *self.out_names)
                              if n in named))
            return given[:n_in], given[n_in:]

        def out_impl(*args: torch.Tensor, **named: torch.Tensor) -> None:
            tensors, outs = split(args, named)
            self.compiled(*tensors, out=outs)

        def out_fake(*args: torch.Tensor, **named: torch.Tensor) -> None:
            tensors, outs = split(args, named)
            bindings = self._check_args(tensors)
            self._check_outs(outs, tensors[0].device, bindings)

        try:
            op = torch.library.custom_op(f"{self.qualname}.out", out_impl,
                                         mutates_args=(*self.mutated, *self.out_names),
                                         schema=schema)
        except RuntimeError as e:
            raise CallError(
                f"as_torch_op: cannot define operator '{self.qualname}.out': {e}"
            ) from e
        op.register_fake(out_fake)
        return op

    def _check_outs(self, outs: Sequence[torch.Tensor], device: torch.device,
                    bindings: dict[str, Any]) -> None:
        """The out checks that need no data: sizes (symbolic ones at `bindings`), dtype,
        device (fake tensors)."""
        for t, ty, name in zip(outs, self._outputs, self.out_names, strict=True):
            sizes = evaluate(ty.sizes, bindings) if self.symbols else ty.sizes
            if tuple(t.shape) != sizes or t.dtype != ty.dtype.torch or t.device != device:
                raise CallError(
                    f"{self.qualname}.out: '{name}' must have sizes {list(sizes)}, dtype "
                    f"{ty.dtype} and device {device}; got {list(t.shape)}, {t.dtype}, {t.device}"
                )

    def _decompose_cuda_only(self, op: Any) -> None:
        """triton_op inlines its function into the graph under functionalization (so
        Inductor sees the kernels). Only CUDA calls may be inlined: on CPU the op stays
        opaque and runs the `cpu` backend."""
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

        def rule(mode: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
            from torch.export._trace import custom_triton_ops_decomposition_disabled

            on_cuda = any(isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in args)
            if not on_cuda or custom_triton_ops_decomposition_disabled():
                return mode.__torch_dispatch__(func, types, args, kwargs)
            known = (torch.Tensor, FunctionalTensor)
            if any(t not in known and not issubclass(t, FakeTensor) for t in types):
                return NotImplemented
            with mode:
                return self._run_triton(tuple(args))

        op.register_torch_dispatch(FunctionalTensorMode, rule)

    # -- specialization ------------------------------------------------------------------
    def _check_args(self, tensors: Sequence[torch.Tensor]) -> dict[str, Any]:
        """The runtime's argument checks, for tensors without data (fake or meta); the
        symbols' bindings (empty for static sizes). Under `torch.compile(dynamic=True)`
        a fake tensor's sizes are `SymInt`s: the symbols bind to them, and each size
        check is a guard (a static dim equal to its size, two dims of one symbol equal),
        never a specialization of the symbols."""
        if not self.symbols:
            check_arguments(self.qualname, self._named_inputs, tensors, data=False)
            return {}
        check_arguments(self.qualname, self._named_inputs, tensors, data=False, sizes=False)
        return bind_call([(n, t.sizes) for n, t in self._named_inputs],
                         [tuple(t.shape) for t in tensors], exact=False)

    def _output_layouts(self, tensors: Sequence[torch.Tensor],
                        bindings: dict[str, Any]) -> list[tuple[tuple, tuple]]:
        """(sizes, strides) of each output, for the fake and the real implementation
        alike. Static sizes: the plan's for the inputs' strides. Symbolic sizes: the
        class plan's layouts over the symbols (for inputs in their declared layouts),
        evaluated at `bindings` — ints, or the `SymInt`s of a fake call (torch evaluates
        the sums, products and floor divisions symbolically), so the strides are the same
        expression for every batch size. Where the graph has no symbolic plan (its passes
        cannot run for every value), the plan of the bound sizes: under torch.compile
        each size is then specialized."""
        if not self.symbols:
            return [(o.sizes, o.strides) for o in self.program_for(tensors).outputs]
        if self._symbolic_outputs is None:
            with _disable_current_modes():
                found = self.compiled.symbolic_outputs()
            # One generated function of the symbols' values (plain arithmetic: it takes
            # SymInts as well as ints).
            self._symbolic_outputs = (
                None if found is None else compile_template(found, self.symbols),
            )
        numbers = self._symbolic_outputs[0]
        if numbers is not None:
            return list(numbers(*(bindings[n] for n in self.symbols)))
        values = {k: int(v) for k, v in bindings.items()}
        bound = self._bound_compiled(values)
        device = tensors[0].device
        layouts = [(tuple(int(s) for s in t.stride()), int(t.storage_offset())) for t in tensors]
        with _disable_current_modes():
            program = bound.program_for_layouts(layouts, device)
        return [(o.sizes, o.strides) for o in program.outputs]

    def _bound_compiled(self, values: dict[str, int]) -> CompiledGraph:
        """The static CompiledGraph of one binding (the custom-op contract), cached by the
        symbolic one."""
        key = tuple(values.items())
        found = self._bound.get(key)
        if found is None:
            found = CompiledGraph(self.graph.bind(values), self.compiled.backend,
                                  self.compiled.pipeline, copy_aliased_outputs=True,
                                  tune=self.compiled.tune)
            found.stats = self.compiled.stats
            if len(self._bound) >= 64:
                self._bound.clear()
            self._bound[key] = found
        return found

    def program_for(self, tensors: Sequence[torch.Tensor]) -> Program:
        """The program of this call's specialization (compiled on first use; no kernel
        runs). On CUDA the kernels get each input's data pointer, so the specialization
        takes storage offset 0 there. Over symbolic sizes, the plan of the call's class
        (`CompiledGraph.plan_for`: tensors with data)."""
        if self.symbols:
            return self.compiled.plan_for(*tensors).program
        device = tensors[0].device
        cuda = device.type == "cuda"
        layouts = [(tuple(int(s) for s in t.stride()), 0 if cuda else int(t.storage_offset()))
                   for t in tensors]
        # Code generation evaluates fill values with small torch tensors: keep them out of
        # the fake or tracing modes of the caller (they are compile-time constants).
        with _disable_current_modes():
            return self.compiled.program_for_layouts(layouts, device)

    def _fresh(self, program: Program) -> list[bool]:
        """Which outputs must be copied into a tensor of their own: those over an input's
        storage, over a buffer an earlier output already returns, or at an offset."""
        seen: set[int] = set()
        fresh = []
        for o in program.outputs:
            fresh.append(o.slot < program.n_inputs or o.slot in seen or o.offset != 0)
            seen.add(o.slot)
        return fresh

    def _pack(self, outs: Sequence[torch.Tensor]) -> Any:
        return outs[0] if len(outs) == 1 else tuple(outs)

    # -- implementations -----------------------------------------------------------------
    def _fake(self, *tensors: torch.Tensor) -> Any:
        bindings = self._check_args(tensors)
        device = tensors[0].device
        return self._pack([
            torch.empty_strided(sizes, strides, dtype=t.dtype.torch, device=device)
            for (sizes, strides), t in zip(self._output_layouts(tensors, bindings),
                                           self._outputs, strict=True)
        ])

    def _run_and_bump(self, tensors: tuple[torch.Tensor, ...]) -> Any:
        """`_run_compiled`, then each written argument's version bumped once."""
        outs = self._run_compiled(tensors)
        launch.bump_versions(tuple(tensors[i] for i in self._mutated_index))
        return outs

    def _run_compiled(self, tensors: tuple[torch.Tensor, ...]) -> Any:
        """Eager run through the CompiledGraph (the `cpu` backend on CPU), outputs
        brought to the fake implementation's strides, never aliasing. A static graph on a
        kernel backend needs no layout lookup: its program is the fake's (one
        specialization: the inputs' strides and offsets), its outputs have the fake's
        strides, and none is over an input's storage (`copy-aliased-outputs`); an output
        at an offset, or over a buffer an earlier one returns, is copied (`_fresh`)."""
        outs = self.compiled(*tensors)
        if self._kernels:
            if type(outs) is torch.Tensor:
                if not outs.storage_offset():
                    return outs
                return torch.empty_strided(outs.shape, outs.stride(),
                                           dtype=outs.dtype).copy_(outs)
            outs = list(outs)
            seen: set[int] = set()
            for k, o in enumerate(outs):
                ptr = o.untyped_storage().data_ptr()
                if o.storage_offset() or ptr in seen:
                    outs[k] = torch.empty_strided(o.shape, o.stride(), dtype=o.dtype,
                                                  device=o.device).copy_(o)
                seen.add(ptr)
            return tuple(outs)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        if self.symbols:
            # The layouts are functions of the sizes (of the strides too, for a graph
            # without a symbolic plan).
            key = tuple((t.shape, t.stride(), t.storage_offset()) for t in tensors)
            layouts = self._layouts.get(key)
            if layouts is None:
                layouts = self._output_layouts(tensors, self.compiled.bindings(tensors))
                if len(self._layouts) >= 64:
                    self._layouts.clear()
                self._layouts[key] = layouts
        else:
            layouts = self._output_layouts(tensors, {})
        taken = {t.untyped_storage().data_ptr() for t in tensors if t.numel()}
        for k, (out, (sizes, strides)) in enumerate(zip(outs, layouts, strict=True)):
            ptr = out.untyped_storage().data_ptr() if out.numel() else None
            if (ptr in taken or out.storage_offset() != 0
                    or (out.numel() and tuple(out.stride()) != strides)
                    or (self.symbols and tuple(out.stride()) != strides)):
                fresh = torch.empty_strided(sizes, strides, dtype=out.dtype, device=out.device)
                outs[k] = fresh.copy_(out)
                ptr = fresh.untyped_storage().data_ptr() if out.numel() else None
            if ptr is not None:
                taken.add(ptr)
        return self._pack(outs)

    def _run_triton(self, tensors: tuple[torch.Tensor, ...]) -> Any:
        """Launch the plan's Triton kernels with `wrap_triton` (traceable: under
        torch.compile, Inductor sees each kernel). Inputs are passed as they are (the
        kernel gets their data pointer); buffers are fresh `torch.empty`."""
        self._check_args(tensors)
        program = self.program_for(tensors)
        device = tensors[0].device
        runner = launch.runner(program, _TRACED_TRITON, inputs_as_given=True)
        # Triton launches on the current device: make it the tensors' device.
        with torch.cuda.device(device if device.index is not None else torch.cuda.current_device()):
            outs = runner.run(tensors, device)
        for k, (o, fresh) in enumerate(zip(program.outputs, self._fresh(program), strict=True)):
            if fresh:
                outs[k] = torch.empty_strided(o.sizes, o.strides, dtype=outs[k].dtype,
                                              device=device).copy_(outs[k])
        return self._pack(outs)

    # -- autograd ------------------------------------------------------------------------
    @property
    def backward_op(self) -> TorchOp | None:
        """The adjoint graph as an operator ``<qualname>__adjoint`` (registered on first
        use; None when no gradient flows)."""
        adj = self.adjoint
        if self._backward_op is None and adj is not None and adj.graph is not None:
            self._backward_op = _register(
                CompiledGraph(adj.graph, self.compiled.backend, self.compiled.pipeline,
                              copy_aliased_outputs=True, tune=self.compiled.tune),
                f"{self.qualname}__adjoint", self.use_triton_op,
            )
        return self._backward_op

    def _setup_context(self, ctx: Any, inputs: tuple, output: Any) -> None:
        """Runs in a forward call autograd records (an input requires grad): a graph
        without adjoint is refused here, before any backward."""
        if self.adjoint_error is not None:
            raise UnsupportedError(f"{self.qualname} backward: {self.adjoint_error} (an input "
                                   "requires grad; call it under torch.no_grad() or with "
                                   "detached inputs to run it without autograd)")
        if self._reads_storage:
            # The adjoint of an `as_strided` reads the storage as the declared layouts lay
            # it out; `stridec.compile(graph)` builds one per caller layout instead.
            for (name, t_type), t in zip(self._named_inputs, inputs, strict=True):
                layout = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
                if not layout.same_addresses(t_type.layout):
                    raise UnsupportedError(
                        f"{self.qualname} backward: as_strided reads argument '{name}' with "
                        f"strides {list(layout.strides)} and offset {layout.offset}; the "
                        f"operator's backward is built for the declared {t_type.layout} "
                        "(call stridec.compile(graph) directly, whose backward follows the "
                        "caller's layout, or pass the argument so laid out)")
        if self.adjoint is not None:  # outputs torch would not track (bits, constants)
            outs = output if isinstance(output, (tuple, list)) else (output,)
            tracked = self.adjoint.differentiable_outputs(
                [isinstance(t, torch.Tensor) and t.requires_grad for t in inputs])
            untracked = [o for k, o in enumerate(outs) if k not in tracked]
            if untracked:
                ctx.mark_non_differentiable(*untracked)
        ctx.device = inputs[0].device  # the adjoint is linear: it needs no saved tensors
        # The symbols' values (SymInts under torch.compile), for the zero gradients of
        # outputs the loss did not use.
        ctx.bindings = bind_call([(n, t.sizes) for n, t in self._named_inputs],
                                 [tuple(t.shape) for t in inputs],
                                 exact=False) if self.symbols else {}

    def _backward(self, ctx: Any, *grads: torch.Tensor | None) -> Any:
        return self._input_grads(ctx, grads, ctx.needs_input_grad)

    def _input_grads(self, ctx: Any, grads: Sequence[torch.Tensor | None],
                     needs: Sequence[bool]) -> tuple[torch.Tensor | None, ...]:
        """The gradient of each input (`needs`: which need one) from the outputs'."""
        n = len(self._inputs)
        if self.adjoint_error is not None:
            raise UnsupportedError(f"{self.qualname} backward: {self.adjoint_error}")
        adj = self.adjoint
        if adj is None or adj.graph is None or not any(needs):
            return (None,) * n
        args = []
        for j in adj.grad_outputs:
            g = grads[j]
            if g is None:  # an output the loss did not use
                t = self._outputs[j]
                g = torch.zeros(evaluate(t.sizes, ctx.bindings), dtype=t.dtype.torch,
                                device=ctx.device)
            args.append(g)
        op = self.backward_op
        assert op is not None  # adj.graph is not None
        terms = op.overload(*args)
        terms = terms if isinstance(terms, tuple) else (terms,)
        return adj.accumulate(terms)


class _OpFunction(torch.autograd.Function):
    """The CPU operator's autograd (`TorchOp._define_cpu`), as `torch.library.custom_op`'s:
    the forward redispatches below autograd (`keyset`), the backward is the adjoint."""

    @staticmethod
    def forward(op: TorchOp, keyset: Any, *tensors: torch.Tensor) -> Any:
        if op.mutated:
            raise UnsupportedError(
                f"{op.qualname}: writes in place into {', '.join(op.mutated)}; a call with an "
                "input that requires grad is not differentiable here (call it under "
                "torch.no_grad())"
            )
        return op.overload.redispatch(keyset, *tensors)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        op = inputs[0]
        op._setup_context(ctx, inputs[2:], output)
        ctx.op = op

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
        return (None, None, *ctx.op._input_grads(ctx, grads, ctx.needs_input_grad[2:]))


def _check_symbolic_adjoint(forward: Graph, backward: Graph) -> None:
    """The backward of a graph over symbolic sizes binds its symbols from the gradients'
    sizes: each symbol must be some gradient dim alone, or a multiple of one (2*N: N is
    half of it). `UnsupportedError` where one is not (every output sized by `(N+1)//2`,
    say): such a backward is refused."""
    alone = {d.scaled[0] for v in backward.inputs for d in v.type.sizes
             if isinstance(d, Sym) and d.scaled is not None}
    needed = set(free_symbols([v.type.sizes for v in backward.inputs]))
    for op in backward.ops:
        for r in op.results:
            needed |= free_symbols(r.type.sizes)
    missing = sorted(needed - alone)
    if missing:
        sizes = ", ".join(f"{list(v.type.sizes)}" for v in backward.inputs)
        raise UnsupportedError(
            f"the backward binds its symbols from the gradients' sizes, and no gradient "
            f"dim is {', '.join(missing)} alone or a multiple of it (gradient sizes "
            f"{sizes}); give graph {forward.name!r} an output with such a dim, or static "
            "sizes"
        )


def _register(compiled: CompiledGraph, qualname: str, use_triton_op: bool) -> TorchOp:
    with _REGISTRY_LOCK:
        existing = _REGISTRY.get(qualname)
        if existing is not None:
            same = (existing.compiled.graph_text == compiled.graph_text
                    and existing.compiled.backend == compiled.backend
                    and existing.compiled.pipeline == compiled.pipeline)
            if not same:
                raise CallError(
                    f"as_torch_op: '{qualname}' is already registered for graph "
                    f"{existing.graph.name!r}; expected a new name for graph "
                    f"{compiled.graph.name!r}"
                )
            return existing
        op = TorchOp(qualname, compiled, use_triton_op)
        _REGISTRY[qualname] = op
        return op


def register(
    graph: Graph | CompiledGraph,
    qualname: str,
    *,
    backend: str = "auto",
    pipeline: str | None = None,
    use_triton_op: bool | None = None,
) -> TorchOp:
    """Register `graph` as the torch operator `qualname` ("namespace::name").

    The operator runs its own CompiledGraph (same graph, backend, pipeline and `tune` as a
    given CompiledGraph) under the custom-op contract: outputs never alias inputs.
    Registering the same graph under the same name again returns the existing operator;
    another graph under a taken name raises `CallError`. `use_triton_op` (default:
    whether CUDA is available) defines it through `torch.library.triton_op` (CUDA calls
    inline their kernels for Inductor; CPU calls run the backend as without it: with
    "auto", the `cpu` backend's C kernels) instead of a CPU-only `torch.library.custom_op`.
    """
    tune = None
    if isinstance(graph, CompiledGraph):
        backend, pipeline, tune, graph = graph.backend, graph.pipeline, graph.tune, graph.graph
    if not isinstance(graph, Graph):
        raise CallError(f"as_torch_op: expected a stridec.Graph or CompiledGraph; got "
                        f"{type(graph).__name__}")
    if not isinstance(qualname, str) or not _QUALNAME.fullmatch(qualname):
        raise CallError(
            f"as_torch_op: qualname must look like 'namespace::name' (identifiers); got "
            f"{qualname!r}"
        )
    if graph.output_op is not None and graph.output_op.reviews:
        raise UnsupportedError(
            f"as_torch_op: graph {graph.name!r} changes the sizes and strides of argument(s) "
            f"{', '.join(map(repr, graph.output_op.reviews))} in place (x.t_(), "
            "x.unsqueeze_(0), ...), which a torch custom operator cannot do to its "
            "arguments; use the view methods (x.t(), x.unsqueeze(0)) and return the view"
        )
    # The dispatcher bumps the versions of the `.out` overload's mutated arguments itself.
    compiled = CompiledGraph(graph, backend, pipeline, copy_aliased_outputs=True,
                             bump_versions=False, tune=tune)
    if not graph.inputs:
        raise UnsupportedError(
            f"as_torch_op: graph {graph.name!r} has no inputs; a torch operator needs a "
            "tensor argument to take its device from"
        )
    if not graph.outputs:
        raise UnsupportedError(f"as_torch_op: graph {graph.name!r} has no outputs")
    if use_triton_op is None:
        use_triton_op = torch.cuda.is_available()
    if use_triton_op:
        from stridec.runtime.backends import require_triton

        require_triton("as_torch_op(use_triton_op=True): torch.library.triton_op")
    op = _register(compiled, qualname, use_triton_op)
    op.backward_op  # noqa: B018 -- define the backward now, not while a backward is traced
    return op


set_torch_op_factory(register)
