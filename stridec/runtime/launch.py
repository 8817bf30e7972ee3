"""The one place kernels are launched: a `Program` run over the caller's tensors, and the
single generated kernels (`launch_copy`, `launch_copy_batch`, `launch_philox`) run on
storages the caller gives.

A program runs through a `Runner`: the program with every lookup done ahead (torch
dtypes, the backend's launchers, keyword arguments), built once per program and backend
and kept in `_RUNNERS` for as long as the program lives (`runner`). Per call it

- views each input some launch reads as its flat storage (`flat_storage`): slots
  `0 … n_inputs-1`; with `inputs_as_given` (the torch op under tracing, whose kernels
  take each input's data pointer and whose plan assumes storage offset 0) the inputs
  themselves;
- allocates each buffer slot with `torch.empty`;
- calls `launchers[launch.kernel](grid, *slot storages, *args, num_warps=…,
  **constexprs)` for each launch, a storage viewed as another dtype where the kernel
  reads raw bits, `args` the kernel's runtime scalars (sizes, strides, offsets);
- returns each output as `torch.as_strided(slot, sizes, strides, offset)`.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stridec.compiler.codegen.batch import CopyBatchKernel
from stridec.compiler.codegen.copy import CopyKernel
from stridec.compiler.codegen.philox import PhiloxKernel
from stridec.compiler.codegen.program import Program
from stridec.compiler.outputs import direct_outputs
from stridec.errors import CallError
from stridec.ir.dtypes import DType, as_dtype
from stridec.ir.host_code import HostFunction
from stridec.ir.symbols import _py_source, is_static
from stridec.runtime.backends import Backend, CallForm, Launcher, backend, kernel_backend
from stridec.runtime.tensors import AlignedStandIns, misaligned

__all__ = [
    "Runner",
    "reinterpret",
    "MISS",
    "bump_versions",
    "SymbolicRunner",
    "flat_storage",
    "launch_copy",
    "launch_copy_batch",
    "launch_philox",
    "planned_copy_runs",
    "run",
    "runner",
    "symbolic_runner",
]


def flat_storage(t: torch.Tensor) -> torch.Tensor:
    """A 1-D tensor over the whole storage of `t`, starting at storage element 0."""
    elements = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(t, (elements,), (1,), 0)


def reinterpret(t: torch.Tensor, dtype: torch.dtype, from_data: bool = False) -> torch.Tensor:
    """The storage of `t` as a flat 1-D tensor of `dtype`, sharing it: its bytes read as
    that type (a `bitcast`), its whole elements of that size, from the storage's first
    byte -- or, with `from_data`, from `t`'s first element, which must then start a
    whole element of `dtype`."""
    storage = t.untyped_storage()
    flat = torch.empty(0, dtype=dtype, device=t.device)
    size = flat.element_size()
    start = t.storage_offset() * t.element_size() if from_data else 0
    if start % size:
        raise CallError(f"a tensor read as {dtype} starts at byte {start} of its storage, "
                        f"inside an element of {size} bytes")
    return flat.set_(storage, start // size, ((storage.nbytes() - start) // size,), (1,))


def _reads(program: Program) -> tuple[list[tuple[tuple[int, torch.dtype | None], ...]],
                                     tuple[tuple[int, torch.dtype], ...]]:
    """Each launch's (slot, torch dtype to view it as, or None), and the storages read as
    elements of another size (a `bitcast` of other width): those are extra slots, after
    the buffers, `(slot, dtype)` each, made once a call (`reinterpret`); a launch names
    them (with no view)."""
    held = [*(program.input_dtypes or (None,) * program.n_inputs),
            *(b.dtype for b in program.buffers)]
    first = program.n_inputs + len(program.buffers)
    derived: dict[tuple[int, str], int] = {}
    reads = []
    for launch in program.launches:
        args: list[tuple[int, torch.dtype | None]] = []
        for s, v in zip(launch.args, launch.views, strict=True):
            if v is None:
                args.append((s, None))
            elif held[s] is None or as_dtype(held[s]).itemsize == as_dtype(v).itemsize:
                args.append((s, getattr(torch, v)))
            else:
                args.append((derived.setdefault((s, v), first + len(derived)), None))
        reads.append(tuple(args))
    return reads, tuple((s, getattr(torch, v)) for s, v in derived)


def _output_dtype(name: str | None) -> torch.dtype | None:
    return None if name is None else as_dtype(name).torch


@dataclass(frozen=True)
class Runner:
    """A `Program` in the form one call runs it, every lookup done ahead:

    - `flat_inputs`: the input slots some launch reads, passed as `flat_storage`;
    - `buffers`: (elements, torch dtype) of each buffer slot;
    - `launches`: (launcher, grid, ((slot, torch dtype to view it as, or None), …),
      runtime scalars, keyword arguments: `num_warps` and the constexprs);
    - `outputs`: (slot, sizes, strides, offset, torch dtype or None) of each output: the
      slot's storage read as that dtype where it is given (`reinterpret`);
    - `inputs_as_given`: inputs are passed as they are, and an output over an input
      counts its offset from the input's storage offset (see the module docstring);
    - `derived`: (slot, torch dtype) of each storage read as elements of another size,
      an extra slot after the buffers (`_reads`).

    An output over an input slot is `torch.as_strided(input, sizes, strides, offset)`:
    `as_strided` takes an offset into the storage, not into the view, so over the caller's
    tensor it is the same view as over its flat storage (element `offset + Σ i_k·s_k` of
    the storage), one `as_strided` cheaper when no launch reads that input.
    """

    flat_inputs: tuple[int, ...]
    buffers: tuple[tuple[int, torch.dtype], ...]
    launches: tuple[tuple[Launcher, tuple[int, ...],
                          tuple[tuple[int, torch.dtype | None], ...], tuple[int, ...],
                          dict[str, int]], ...]
    outputs: tuple[tuple[int, tuple[int, ...], tuple[int, ...], int, torch.dtype | None], ...]
    inputs_as_given: bool = False
    # Every launcher reads its storages' data pointers only (`pointers_only`, the C
    # kernels): an input is passed as its untyped storage, not a flat view of it.
    pointers: bool = False
    derived: tuple[tuple[int, torch.dtype], ...] = ()

    @classmethod
    def of(cls, program: Program, launchers: Sequence[Launcher],
           inputs_as_given: bool = False) -> Runner:
        launches = []
        reads, derived = _reads(program)
        for launch, args in zip(program.launches, reads, strict=True):
            k = program.kernels[launch.kernel]
            if k.grid and k.grid[0] == 0:
                continue  # no program: a symbolic extent that is 0 for this binding
            launches.append((launchers[launch.kernel], k.grid, args, k.args,
                             {"num_warps": k.num_warps, **k.constexprs}))
        read = {s for launch in program.launches for s in launch.args}
        pointers = bool(launches) and all(
            getattr(launch[0], "pointers_only", False) for launch in launches)
        return cls(
            flat_inputs=() if inputs_as_given else tuple(
                s for s in range(program.n_inputs) if s in read
            ),
            buffers=tuple((b.elements, as_dtype(b.dtype).torch) for b in program.buffers),
            launches=tuple(launches),
            outputs=tuple((o.slot, o.sizes, o.strides, o.offset, _output_dtype(o.dtype))
                          for o in program.outputs),
            inputs_as_given=inputs_as_given,
            pointers=pointers and not inputs_as_given,
            derived=derived,
        )

    def launch(self, tensors: Sequence[torch.Tensor],
               device: torch.device) -> list[torch.Tensor | torch.UntypedStorage]:
        """The launches alone (an `out=` call, whose outputs are its outs): the slots."""
        slots: list[Any] = list(tensors)
        if self.pointers:  # a storage's data pointer, without a view built over it
            for s in self.flat_inputs:
                slots[s] = tensors[s].untyped_storage()
            for elements, dtype in self.buffers:
                slots.append(torch.empty(elements, dtype=dtype, device=device))
            for s, _ in self.derived:  # the same data pointer, whatever it is read as
                slots.append(slots[s])
            for launcher, grid, args, scalars, kwargs in self.launches:
                launcher(grid, *[slots[s] for s, _ in args], *scalars, **kwargs)
            return slots
        for s in self.flat_inputs:
            slots[s] = flat_storage(tensors[s])
        for elements, dtype in self.buffers:
            slots.append(torch.empty(elements, dtype=dtype, device=device))
        for s, dtype in self.derived:
            slots.append(reinterpret(slots[s], dtype, self.inputs_as_given))
        for launcher, grid, args, scalars, kwargs in self.launches:
            launcher(grid, *[slots[s] if v is None else slots[s].view(v) for s, v in args],
                     *scalars, **kwargs)
        return slots

    def bound(self, pointer_of_slot: Sequence[int],
              n_pointers: int) -> Callable[[list[int], int], None] | None:
        """The launches as one function of a list of `n_pointers` data pointers and the
        thread count, where slot `s` is `pointers[pointer_of_slot[s]]` (and buffer slot
        `j` a fresh buffer's, appended after them): for launchers that read data pointers
        only and offer it (`bound`, the C kernels); else None."""
        if self.derived:
            return None
        where = [*pointer_of_slot, *range(n_pointers, n_pointers + len(self.buffers))]
        ordered, buffers = self._bound_runs(where), self.buffers
        if ordered is None:
            return None
        if not buffers and len(ordered) == 1:
            return ordered[0]

        advised = tuple((n, dtype, _fresh_buffer(n, dtype)) for n, dtype in buffers)

        def run_all(pointers: list[int], threads: int) -> None:
            held = [torch.empty(n, dtype=dtype, device="cpu") for n, dtype, _ in advised]
            pointers = [*pointers, *(b.data_ptr() for b in held)]
            for (_, _, advise), address in zip(advised, pointers[len(pointers) - len(held):],
                                               strict=True):
                if advise is not None:
                    advise(address)
            for run in ordered:
                run(pointers, threads)
        return run_all

    def bound_into(self, n_inputs: int, n_outs: int, into: Mapping[int, tuple[int, int]]
                   ) -> Callable[[list[int], int], None] | None:
        """`bound` for a symbolic program's call with `out=` that writes every out
        straight (`SymbolicRunner.call` with its `outs`): the function of the inputs'
        then the outs' storages' data pointers (`n_inputs + n_outs`, the list extended)
        and the thread count, where buffer `j` in `into` is out `k`'s memory from byte
        `b` of its storage (`into[j] = (k, b)`) and every other buffer a fresh one. None
        where `bound` is."""
        if self.derived:
            return None  # (a storage read as another type: `launch` and `run` make it)
        if all(into.get(j, (0, 1))[1] == 0 for j in range(len(self.buffers))):
            # Every buffer an out from its storage's first byte (most copies): the kernels
            # bound to the outs' pointers themselves, no Python between the call and C.
            ordered = self._bound_runs([*range(n_inputs), *(n_inputs + into[j][0]
                                                            for j in range(len(self.buffers)))])
            if ordered is None or len(ordered) == 1:
                return None if ordered is None else ordered[0]

            def run_each(pointers: list[int], threads: int) -> None:
                for run in ordered:
                    run(pointers, threads)
            return run_each
        n = n_inputs + n_outs
        ordered = self._bound_runs([*range(n_inputs), *range(n, n + len(self.buffers))])
        if ordered is None:
            return None
        plan = tuple((None, 0, elements, dtype) if j not in into else (n_inputs + into[j][0],
                     into[j][1], 0, None) for j, (elements, dtype) in enumerate(self.buffers))
        if len(plan) == 1 and plan[0][0] is not None and len(ordered) == 1:
            # One kernel writing one out (most copies): no loop, no list.
            ((at, byte, _, _),), (run,) = plan, ordered

            def run_one(pointers: list[int], threads: int) -> None:
                pointers.append(pointers[at] + byte)
                run(pointers, threads)
            return run_one

        def run_all(pointers: list[int], threads: int) -> None:
            held = []
            for at, byte, elements, dtype in plan:
                if at is None:
                    held.append(torch.empty(elements, dtype=dtype, device="cpu"))
                    pointers.append(held[-1].data_ptr())
                else:
                    pointers.append(pointers[at] + byte)
            for run in ordered:
                run(pointers, threads)
        return run_all

    def _bound_runs(self, where: Sequence[int]) -> tuple[Callable[[list[int], int], None],
                                                         ...] | None:
        """Each launch's `bound` function, slot `s` at `pointers[where[s]]`; None where
        some launcher does not read data pointers only or offers none, or nothing runs."""
        if not self.pointers:
            return None
        runs = []
        for launcher, _grid, args, scalars, kwargs in self.launches:
            bind = getattr(launcher, "bound", None)
            # (a symbolic program's C kernel: this binding's parameters, `SymbolicRunner`)
            run = (bind([where[s] for s, _ in args], kwargs.get("params"))
                   if bind and not scalars else None)
            if run is None:
                return None
            runs.append(run)
        return tuple(runs) or None

    def direct(self, n_inputs: int, itself: Sequence[tuple[int, int]] = (),
               written: Sequence[int] = ()) -> Callable[[Sequence[torch.Tensor], list[int],
                                                         int], Any] | None:
        """`run` as one function of the `n_inputs` tensors, their storages' data pointers
        (one per tensor, in order; the list is extended) and the thread count, returning
        the call's result as a compiled graph does (one tensor, or a tuple), for launchers
        that read data pointers only and offer `bound` (the C kernels): each buffer
        allocated, the launches run on the pointers, the outputs viewed as `run` views
        them. A cached call that read the storages for its key runs it, and builds no
        storage objects again. A buffer that is one output alone, at offset 0, spanning
        the whole buffer (`_whole_outputs`) is allocated as that output
        (`torch.empty_strided`: the same sizes, strides, offset and storage bytes as the
        view of a flat buffer, one tensor fewer to build, about 2 µs a call here). None
        where `bound` is.

        A compiled graph's result is finished here as `CompiledGraph._finish` finishes
        it: output `k` of each `(k, i)` of `itself` is input `i` itself (no view of it
        built), and the version of input `i` of each entry of `written` is bumped after
        the launches, once per entry."""
        if self.inputs_as_given or self.derived or any(o[4] is not None for o in self.outputs):
            return None  # (a storage read as another type: `launch` and `run` make it)
        ordered = self._bound_runs(range(n_inputs + len(self.buffers)))
        if ordered is None:
            return None
        whole = _whole_outputs(self.outputs, self.buffers, n_inputs)
        empty, empty_strided, as_strided = torch.empty, torch.empty_strided, torch.as_strided
        inputs = dict(itself)
        bump = bump_versions
        if (len(ordered) == 1 and not self.buffers and len(written) == 1
                and inputs.keys() == set(range(len(self.outputs)))):
            # One kernel writing into an input that the call returns (a cache update):
            # no buffer, no view, one version bump.
            run, at, returned = ordered[0], written[0], tuple(inputs.values())
            first = returned[0] if len(returned) == 1 else None

            def call_in_place(tensors: Sequence[torch.Tensor], pointers: list[int],
                              threads: int) -> Any:
                run(pointers, threads)
                bump((tensors[at],))
                if first is not None:
                    return tensors[first]
                return tuple(tensors[i] for i in returned)
            return call_in_place
        if (len(ordered) == 1 and len(self.buffers) == 1 and len(self.outputs) == 1
                and whole == {0: 0} and not inputs and not written):
            # One kernel writing one fresh output (most copies): no loop, no list.
            run = ordered[0]
            (_, sizes, strides, _, _), ((elements, dtype),) = self.outputs[0], self.buffers
            advise = _fresh_buffer(elements, dtype)

            def call_one(tensors: Sequence[torch.Tensor], pointers: list[int],
                         threads: int) -> torch.Tensor:
                out = empty_strided(sizes, strides, dtype=dtype)  # the C kernels': CPU
                address = out.data_ptr()
                if advise is not None:
                    advise(address)
                pointers.append(address)
                run(pointers, threads)
                return out
            return call_one
        buffers = tuple(
            (elements, dtype, None if j not in whole else self.outputs[whole[j]][1:3],
             _fresh_buffer(elements, dtype))
            for j, (elements, dtype) in enumerate(self.buffers))
        outputs, one = self.outputs, len(self.outputs) == 1

        def call(tensors: Sequence[torch.Tensor], pointers: list[int], threads: int) -> Any:
            slots = list(tensors)
            for elements, dtype, layout, advise in buffers:  # the C kernels': on the CPU
                buffer = (empty(elements, dtype=dtype) if layout is None
                          else empty_strided(*layout, dtype=dtype))
                slots.append(buffer)
                pointers.append(buffer.data_ptr())
                if advise is not None:
                    advise(pointers[-1])
            for run in ordered:
                run(pointers, threads)
            if written:
                bump(tuple(tensors[i] for i in written))
            outs = []
            for k, (s, sizes, strides, offset, _) in enumerate(outputs):  # (no comprehension)
                slot = slots[s]
                outs.append(tensors[inputs[k]] if k in inputs else slot
                            if s >= n_inputs and buffers[s - n_inputs][2] is not None
                            else as_strided(slot, sizes, strides, offset))
            return outs[0] if one else tuple(outs)
        return call

    def run(self, tensors: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        slots = self.launch(tensors, device)
        n_inputs = len(tensors)
        outs = []
        if self.inputs_as_given:
            for s, sizes, strides, offset, dtype in self.outputs:
                base = slots[s]
                if s < n_inputs:
                    given = tensors[s]
                    offset += given.storage_offset() * given.element_size() // (
                        given.element_size() if dtype is None else dtype.itemsize)
                if dtype is not None:
                    base = reinterpret(base, dtype)
                outs.append(torch.as_strided(base, sizes, strides, offset))
            return outs
        # `as_strided` counts the offset from the storage's start: over an input, the
        # caller's tensor gives the same view as its flat storage
        for s, sizes, strides, offset, dtype in self.outputs:  # a loop: no comprehension
            base = tensors[s] if s < n_inputs else slots[s]
            if dtype is not None:  # the storage's bytes read as `dtype` (a bitcast)
                base = reinterpret(base, dtype)
            outs.append(torch.as_strided(base, sizes, strides, offset))
        return outs


# Runners by program identity, then by (backend name, inputs_as_given); an entry goes
# with its program (programs are plain data, not hashable: they hold lists). A program
# over symbolic sizes keeps its `SymbolicRunner` there.
_RUNNERS: dict[int, dict[tuple[str, bool], Any]] = {}
_RUNNERS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would stay held in the child forever.
    global _RUNNERS_LOCK
    _RUNNERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forget(program_id: int) -> None:
    # No lock: this runs when the program is freed, maybe inside a collection triggered
    # while this thread holds `_RUNNERS_LOCK`; a dict pop is atomic.
    _RUNNERS.pop(program_id, None)


class SymbolicRunner:
    """A program over symbolic sizes in the form its calls run it: the launchers loaded
    once (a kernel's source serves its whole class; only its numbers depend on the
    binding), and every number that does depend on it -- buffer elements, each kernel's
    grid, runtime scalars and C call parameters, the outputs' sizes, strides and offsets
    -- given by one generated function of the symbols' values, `bind(values)` (one int
    per symbol, in `symbols` order), which returns the `Runner` of that binding: its
    numbers, and for C kernels one parameter array per kernel; no pass, no code
    generation, no loading."""

    __slots__ = ("symbols", "bind", "call")

    def __init__(self, program: Program, launchers: Sequence[Launcher],
                 forms: Sequence[CallForm], inputs_as_given: bool = False) -> None:
        self.symbols = program.symbols
        where = {n: f"_{i}" for i, n in enumerate(program.symbols)}
        scope: dict[str, Any] = {"_Runner": Runner, "_array": array}
        read = {s for launch in program.launches for s in launch.args}
        scope["_flat"] = () if inputs_as_given else tuple(
            s for s in range(program.n_inputs) if s in read
        )
        buffers = []
        for i, b in enumerate(program.buffers):
            scope[f"_d{i}"] = as_dtype(b.dtype).torch
            buffers.append(f"({_source(b.elements, where)}, _d{i}), ")
        launches = []
        reads, scope["_derived"] = _reads(program)
        for j, launch in enumerate(program.launches):
            k = program.kernels[launch.kernel]
            form = forms[launch.kernel]
            scope[f"_l{j}"] = launchers[launch.kernel]
            scope[f"_a{j}"] = reads[j]
            scope[f"_k{j}"] = dict(form.options)
            keywords = f"_k{j}"
            if form.arrays:  # numbers the launcher reads from int64 arrays (the C params)
                keywords = (f"{{**_k{j}, {_arrays(form, where, ': ')}}}" if form.options
                            else f"{{{_arrays(form, where, ': ')}}}")
            entry = (f"(_l{j}, {_source(form.grid, where)}, _a{j}, "
                     f"{_source(form.args, where)}, {keywords})")
            if not k.grid or (type(k.grid[0]) is int and k.grid[0]):
                launches.append(f"{entry}, ")
            elif type(k.grid[0]) is not int:  # no program where the extent is 0
                launches.append(f"*(({entry},) if {_source(k.grid[0], where)} else ()), ")
        outputs = []
        for k, o in enumerate(program.outputs):
            scope[f"_o{k}"] = _output_dtype(o.dtype)
            outputs.append(f"({_source((o.slot, o.sizes, o.strides, o.offset), where)[1:-1]}"
                           f"_o{k}), ")
        # As `Runner.of`: storages passed as data pointers where every launcher reads
        # those only (the C kernels), so a cached call binds them (`Runner.direct`).
        scope["_pointers"] = not inputs_as_given and all(
            getattr(launchers[launch.kernel], "pointers_only", False)
            for launch in program.launches)
        bind = HostFunction("bind", "values", scope)
        bind.add(f"{''.join(f'{a}, ' for a in where.values())}= values",
                 f"launches = ({''.join(launches)})",
                 f"return _Runner(_flat, ({''.join(buffers)}), launches, "
                 f"({''.join(outputs)}), {bool(inputs_as_given)}, _pointers and bool(launches), "
                 f"derived=_derived)")
        # `bind(values)`: the runner of the binding `values` (one int per symbol, in
        # `symbols` order): one generated function.
        self.bind: Callable[[Sequence[int]], Runner] = bind.build()
        self.call: Callable[[Sequence[torch.Tensor], torch.device, Sequence[int]], Any] = (
            _call_function(program, launchers, forms, inputs_as_given, where))


def _fresh_buffer(elements: int, dtype: torch.dtype) -> Callable[[int], None] | None:
    """What a C kernels' call runs on a fresh buffer of `elements` of `dtype` before they
    write it (`backends.cpu.fresh_buffer`: huge pages for a large one), or None."""
    from stridec.runtime.backends import cpu

    return cpu.fresh_buffer(elements * dtype.itemsize)


def _huge_pages() -> tuple[Callable[[int, int], None], int] | None:
    """(`huge(address, nbytes)`, the least bytes it is asked for) of the C kernels'
    fresh buffers (`backends.cpu.huge_pages`), or None where that is off."""
    from stridec.runtime.backends import cpu

    return cpu.huge_pages()


def _whole_outputs(outputs: Sequence[tuple[int, tuple[int, ...], tuple[int, ...], int,
                                          torch.dtype | None]],
                   buffers: Sequence[tuple[int, torch.dtype]], n_inputs: int) -> dict[int, int]:
    """{buffer: output} of the buffers a fresh tensor of one output's sizes and strides
    can stand for (`torch.empty_strided`): the buffer is that output alone, at offset 0,
    with strides >= 0 and exactly as many elements as the layout reaches
    (`1 + Σ (n_k - 1)·stride_k`, 0 for an empty output), so the tensor's storage is the
    buffer's, byte for byte, and the output is the tensor itself."""
    slots = [o[0] for o in outputs]
    found: dict[int, int] = {}
    for k, (slot, sizes, strides, offset, dtype) in enumerate(outputs):
        j = slot - n_inputs
        if (j < 0 or slots.count(slot) != 1 or offset != 0 or min(strides, default=0) < 0
                or dtype is not None):
            continue
        span = 0 if 0 in sizes else 1 + sum((n - 1) * st for n, st in zip(sizes, strides,
                                                                          strict=True))
        if buffers[j][0] == span:
            found[j] = k
    return found


# What a `SymbolicRunner.call` returns where the binding's indices do not fit its int32
# kernels (`Program.fits`).
MISS = object()


def _call_function(program: Program, launchers: Sequence[Launcher],
                   forms: Sequence[CallForm], inputs_as_given: bool,
                   where: Mapping[str, str]) -> Callable[..., Any]:
    """`call(tensors, device, values, outs=None per output)`: the program run at the
    binding `values` (one int per symbol, in `program.symbols` order), as
    `bind(values).run(tensors, device)` runs it and returning its outputs as a compiled
    graph's call does (one tensor, or a tuple), or `MISS` where `program.fits` refuses
    the values -- one generated function with every number of the binding written inline
    as an expression of the values: nothing built per binding but the tensors and the C
    kernels' parameter arrays, so a call at a new size costs what a call at a size seen
    before does.

    `outs[k]`, a caller's tensor of output k's sizes and dtype that no input's memory
    meets (the caller's to check: `check_outs`), is written straight where output k is
    a buffer of its own that its layout covers exactly (`direct_outputs`) and the
    tensor has that layout's strides: the buffer is then the tensor's memory, and output
    k is the tensor itself. Any other output is returned as without `outs`, for the
    caller to copy."""
    scope: dict[str, Any] = {"_array": array, "_as_strided": torch.as_strided,
                             "_empty": torch.empty, "_MISS": MISS, "_torch": torch,
                             "_reinterpret": reinterpret}
    body = [f"if not ({program.fits_source(where)}): return _MISS"]
    read = {s for launch in program.launches for s in launch.args}
    slot: dict[int, str] = {}
    for s in range(program.n_inputs):
        slot[s] = f"t{s}"
        body.append(f"t{s} = ts[{s}]")
        if s in read and not inputs_as_given:  # `flat_storage`
            slot[s] = f"f{s}"
            body.append(f"f{s} = _as_strided(t{s}, (t{s}.untyped_storage().nbytes() "
                        f"// t{s}.element_size(),), (1,), 0)")
    direct = direct_outputs(program)
    for k in direct:  # the caller's out, where it is this buffer's layout
        o = program.outputs[k]
        body.append(f"o{k} = outs[{k}]")
        body.append(f"if o{k} is not None and o{k}.stride() != "
                    f"{_source(o.strides, where)}: o{k} = None")
    # A fresh buffer the C kernels write gets huge pages where it is large, as a static
    # program's does (`_fresh_buffer`); its size is known only at the call.
    huge = _huge_pages() if program.launches and all(
        getattr(launchers[launch.kernel], "pointers_only", False)
        for launch in program.launches) else None
    if huge is not None:
        scope["_huge"], scope["_HUGE_BYTES"] = huge
    for j, b in enumerate(program.buffers):
        s = program.n_inputs + j
        slot[s] = f"b{j}"
        scope[f"_d{j}"] = as_dtype(b.dtype).torch
        elements = _source(b.elements, where)
        new = f"_empty({elements}, dtype=_d{j}, device=device)"
        outputs = [k for k, v in direct.items() if v == j]
        if outputs:
            k = outputs[0]
            new = (f"{new} if o{k} is None else _as_strided(o{k}, "
                   f"({elements},), (1,), o{k}.storage_offset())")
        body.append(f"b{j} = {new}")
        if huge is not None:
            nbytes = f"({elements}) * {as_dtype(b.dtype).torch.itemsize}"
            fresh = f" and o{outputs[0]} is None" if outputs else ""
            body.append(f"if {nbytes} >= _HUGE_BYTES{fresh}: "
                        f"_huge(b{j}.data_ptr(), {nbytes})")
    reads, derived = _reads(program)
    first = program.n_inputs + len(program.buffers)
    for j, (s, dtype) in enumerate(derived):  # a storage read as elements of another size
        slot[first + j] = f"r{j}"
        scope[f"_r{j}"] = dtype
        body.append(f"r{j} = _reinterpret({slot[s]}, _r{j}, {inputs_as_given})")
    for j, launch in enumerate(program.launches):
        k = program.kernels[launch.kernel]
        scope[f"_l{j}"] = launchers[launch.kernel]
        storages = []
        for s, v in reads[j]:
            if v is None:
                storages.append(f"{slot[s]}, ")
            else:
                scope[f"_v{j}_{s}"] = v
                storages.append(f"{slot[s]}.view(_v{j}_{s}), ")
        form = forms[launch.kernel]
        parts = [f"{_source(form.grid, where)}, ", *storages]
        if form.args:
            parts.append(f"*{_source(form.args, where)}, ")
        if form.options:
            scope[f"_k{j}"] = dict(form.options)
            parts.append(f"**_k{j}, ")
        if form.arrays:
            parts.append(_arrays(form, where, "="))
        text = f"_l{j}({''.join(parts).removesuffix(', ')})"
        if k.grid and type(k.grid[0]) is not int:  # no program where the extent is 0
            body.append(f"if {_source(k.grid[0], where)}: {text}")
        elif not k.grid or k.grid[0]:
            body.append(f"{text}")
    outs = []
    for k, o in enumerate(program.outputs):
        offset = _source(o.offset, where)
        base = slot[o.slot]
        if o.dtype is not None:  # the storage's bytes read as `dtype` (a bitcast)
            scope[f"_od{k}"] = _output_dtype(o.dtype)
            base = f"_reinterpret({base}, _od{k})"
        if inputs_as_given and o.slot < program.n_inputs:
            t = f"t{o.slot}"
            offset = (f"{offset} + {t}.storage_offset()" if o.dtype is None else
                      f"{offset} + {t}.storage_offset() * {t}.element_size() // "
                      f"_od{k}.itemsize")
        view = (f"_as_strided({base}, {_source(o.sizes, where)}, "
                f"{_source(o.strides, where)}, {offset})")
        outs.append(f"({view} if o{k} is None else o{k})" if k in direct else view)
    body.append(f"return {outs[0]}" if len(outs) == 1 else
                f"return ({''.join(f'{o}, ' for o in outs)})")
    names = "".join(f"{a}, " for a in where.values())
    scope["_NO_OUTS"] = (None,) * len(program.outputs)
    call = HostFunction("call", "ts, device, values, outs=_NO_OUTS", scope)
    call.add(f"{names}= values")
    if program.launches:  # Triton launches on the current device (see `run_with`)
        call.add("if device.type == 'cuda' and device.index is not None and "
                 "device.index != _torch.cuda.current_device():",
                 f"    with _torch.cuda.device(device): return _body(ts, device, outs, {names})",
                 f"return _body(ts, device, outs, {names})")
        call.helper("_body", f"ts, device, outs, {names}").add(*body)
    else:
        call.add(*body)
    return call.build()


def _arrays(form: CallForm, where: Mapping[str, str], sign: str) -> str:
    """`form.arrays` as keyword arguments (`sign` "=") or dict entries (": "), each an
    int64 `array` of expressions of the symbols named as in `where`."""
    quote = "'" if sign != "=" else ""
    return ", ".join(f"{quote}{name}{quote}{sign}_array('q', {_source(values, where)})"
                     for name, values in form.arrays.items())


def _source(x: Any, where: Mapping[str, str]) -> str:
    """Python source of `x` (a size, or nested tuples of sizes and None) over the symbols
    named as in `where`."""
    if isinstance(x, (tuple, list)):
        return "(" + "".join(f"{_source(v, where)}, " for v in x) + ")"
    if x is None or isinstance(x, bool):
        return repr(x)
    return _py_source(x, where)


def runner(program: Program, on: str | Backend, *, inputs_as_given: bool = False,
           bindings: Mapping[str, int] | None = None) -> Runner:
    """The runner of `program` on backend `on` (a kernel backend's name, or a backend
    object), built on first use; two threads building it at once build equal ones, and
    either may stay. A program over symbolic sizes runs with `bindings` (a value for each
    of `program.symbols`): its `SymbolicRunner`, built once, bound to those values."""
    if program.symbols:
        if bindings is None or not set(program.symbols) <= bindings.keys():
            raise CallError(
                f"program over the symbols {', '.join(program.symbols)}: expected a value "
                f"for each; got {dict(bindings or {})}"
            )
        symbolic = symbolic_runner(program, on, inputs_as_given=inputs_as_given)
        return symbolic.bind(tuple(bindings[n] for n in program.symbols))
    return _built(program, on, inputs_as_given, False)  # type: ignore[return-value]


def symbolic_runner(program: Program, on: str | Backend, *,
                    inputs_as_given: bool = False) -> SymbolicRunner:
    """The `SymbolicRunner` of a program over symbolic sizes on backend `on`, built on
    first use and kept for as long as the program lives."""
    return _built(program, on, inputs_as_given, True)  # type: ignore[return-value]


def _built(program: Program, on: str | Backend, inputs_as_given: bool,
           symbolic: bool) -> Runner | SymbolicRunner:
    kernels = backend(on) if isinstance(on, str) else on
    key = (kernels.name, inputs_as_given)
    found = _RUNNERS.get(id(program))
    if found is not None:
        hit = found.get(key)
        if hit is not None:
            return hit
    launchers = kernels.load(program)
    built: Runner | SymbolicRunner = (
        SymbolicRunner(program, launchers, [kernels.call_form(k) for k in program.kernels],
                       inputs_as_given) if symbolic
        else Runner.of(program, launchers, inputs_as_given)
    )
    with _RUNNERS_LOCK:
        entry = _RUNNERS.get(id(program))
        if entry is None:
            entry = _RUNNERS[id(program)] = {}
            weakref.finalize(program, _forget, id(program))
        entry[key] = built
    return built


def run(program: Program, tensors: Sequence[torch.Tensor], device: torch.device,
        on: str | Backend | None = None,
        bindings: Mapping[str, int] | None = None) -> list[torch.Tensor]:
    """Run `program` over `tensors` (all on `device`): its outputs. `on` defaults to the
    backend of the device (triton on CUDA, interpret on the CPU); `bindings` gives the
    values of a symbolic program's symbols. A tensor whose data pointer is not a multiple
    of its element size runs on an aligned stand-in (`AlignedStandIns`), as a compiled
    call's."""
    if on is None:
        on = "triton" if device.type == "cuda" else "interpret"
    run_on = runner(program, on, bindings=bindings)
    if not misaligned(tensors):
        return run_with(run_on, tensors, device)
    stand_ins = AlignedStandIns(tensors)
    outs = run_with(run_on, [stand_ins.of(t) for t in tensors], device)
    return [stand_ins.original(o) for o in outs]


def run_with(runner: Runner, tensors: Sequence[torch.Tensor],
             device: torch.device) -> list[torch.Tensor]:
    """`runner.run`, with the tensors' CUDA device made current when it is not: Triton
    launches on the current device and its current stream, so a kernel would otherwise
    get another GPU's pointers."""
    if (runner.launches and device.type == "cuda" and device.index is not None
            and device.index != torch.cuda.current_device()):
        with torch.cuda.device(device):
            return runner.run(tensors, device)
    return runner.run(tensors, device)


def launch_with(runner: Runner, tensors: Sequence[torch.Tensor], device: torch.device) -> None:
    """`runner.launch` (no output views built) on the device as `run_with`: an `out=`
    call, whose outputs are the outs the launches wrote."""
    if device.type == "cuda" and runner.launches:
        run_with(runner, tensors, device)
        return
    runner.launch(tensors, device)


# -- single kernels ----------------------------------------------------------------------
# Bumps the version counter of each tensor of a tuple, as torch's in-place and out= ops
# do, after a kernel wrote caller memory through its data pointer.
bump_versions = torch._C._increment_version


def _launcher(kernel: Any, what: str, device: torch.device) -> Launcher:
    """The launcher of a generated `kernel` (a copy, a batch or a philox: `what`) for
    tensors on `device`: the backend that runs its language there loads it
    (`kernel_backend`)."""
    return kernel_backend(kernel.lang, device.type, f"{what} {kernel.name}").load_kernel(kernel)


def _launch(launcher: Launcher, device: torch.device, grid: tuple[int, ...],
            *args: Any, **keywords: Any) -> None:
    """Call `launcher` once over tensors on `device`, that CUDA device made current first
    (as `run_with` does): Triton launches on the current device."""
    if (device.type == "cuda" and device.index is not None
            and device.index != torch.cuda.current_device()):
        with torch.cuda.device(device):
            launcher(grid, *args, **keywords)
        return
    launcher(grid, *args, **keywords)


def check_storage(what: str, t: torch.Tensor, dtype: DType, span: tuple[int, int] | None) -> None:
    """A flat contiguous storage of `dtype` holding the addresses `span` (lowest, highest)."""
    # Unsigned words may come as their int32 bit patterns (the kernel bitcasts them).
    if t.dtype != dtype.torch and not (dtype.name == "uint32" and t.dtype == torch.int32):
        raise CallError(f"copy: {what} must have dtype {dtype}; got {t.dtype}")
    if t.dim() != 1 or (t.numel() > 1 and t.stride(0) != 1):
        raise CallError(
            f"copy: {what} must be a flat contiguous 1-D tensor; "
            f"got sizes {tuple(t.shape)} strides {t.stride()}"
        )
    if span is not None and (span[0] < 0 or span[1] >= t.numel()):
        raise CallError(
            f"copy: {what} holds {t.numel()} elements but the copy addresses [{span[0]}, {span[1]}]"
        )


def launch_copy(kernel: CopyKernel, src_storage: torch.Tensor,
                dst_storage: torch.Tensor, bindings: Mapping[str, int] | None = None) -> None:
    """Run a generated copy kernel from `src_storage` into `dst_storage` (flat 1-D
    storages of the spec's dtypes, on one device: CUDA compiled, CPU interpreted); a
    kernel over symbolic sizes with the sizes of `bindings`, which its class must hold
    (`CopyKernel.valid_for`)."""
    grid, args = kernel.grid, kernel.args
    src_span, dst_span = kernel.src_span, kernel.dst_span
    if kernel.symbolic:
        if bindings is None or not kernel.plan.hint.keys() <= bindings.keys():
            raise CallError(
                f"copy {kernel.name}: its sizes are symbolic "
                f"({', '.join(kernel.plan.hint)}); expected bindings of them; got {bindings}"
            )
        if not kernel.valid_for(bindings):
            raise CallError(
                f"copy {kernel.name}: planned for the class of {dict(kernel.plan.hint)}; "
                f"the bindings {dict(bindings)} are of another (0, 1, a multiple of 16, "
                "or an index past int32)"
            )
        grid, args, (src_span, dst_span) = kernel.bound(bindings)
        if grid[0] == 0:
            return
    elif kernel.numel == 0 or kernel.grid == (0,):
        return
    check_storage("src_storage", src_storage, kernel.spec.src_dtype, src_span)
    check_storage("dst_storage", dst_storage, kernel.spec.dst_dtype, dst_span)
    if src_storage.device != dst_storage.device:
        raise CallError(
            f"copy {kernel.name}: src_storage and dst_storage must share a device; "
            f"got {src_storage.device} and {dst_storage.device}"
        )
    _launch(_launcher(kernel, "copy", dst_storage.device), dst_storage.device,
            grid, src_storage, dst_storage, *args, **kernel.constexprs,
            num_warps=kernel.num_warps)
    bump_versions((dst_storage,))


def planned_copy_runs(elem_bytes: int, blocks: Sequence[tuple[int, ...]],
                      src_storage: torch.Tensor, dst_storage: torch.Tensor,
                      cast: tuple[str, str] = ()) -> list[Callable[[], None]]:
    """One function per argument block of `blocks` that runs the planned copies' library
    of `elem_bytes`-byte elements, or of the cast `cast` (`codegen/c/plan.py`), on it,
    from `src_storage` into `dst_storage` (flat CPU storages holding every address the
    blocks name), on
    `torch.get_num_threads()` threads: the plans measured choice times (`runtime/tune.py`)."""
    from stridec.compiler.codegen.c.plan import plan_symbol, plan_unit_source
    from stridec.runtime.backends.cpu import load_c_kernel

    source, symbol = plan_unit_source(elem_bytes, tuple(cast)), plan_symbol(elem_bytes, tuple(cast))
    runs = []
    for k, block in enumerate(blocks):
        kernel = load_c_kernel(f"{symbol}_choice{k}", source, [(symbol, 0, 1, tuple(block))])
        runs.append(functools.partial(kernel, None, src_storage, dst_storage))
    return runs


def launch_copy_batch(kernel: CopyBatchKernel, dst_storage: torch.Tensor,
                      *src_storages: torch.Tensor,
                      bindings: Mapping[str, int] | None = None) -> None:
    """Run a generated batch of copies into one `dst_storage`, member j reading
    `src_storages[j]` (with the sizes of `bindings` where members are symbolic)."""
    if len(src_storages) != len(kernel.specs):
        raise CallError(
            f"copy batch {kernel.name}: expected {len(kernel.specs)} source storages; "
            f"got {len(src_storages)}"
        )
    grid, args = kernel.grid, kernel.args
    spans = tuple(zip(kernel.src_spans, kernel.dst_spans, strict=True))
    if kernel.symbolic:
        if bindings is None or not kernel.valid_for(bindings):
            raise CallError(
                f"copy batch {kernel.name}: its sizes are symbolic; expected bindings of "
                f"the class it was planned for; got {bindings}"
            )
        grid, args, spans = kernel.bound(bindings)
    if grid[0] == 0:
        return
    for j, (spec, t) in enumerate(zip(kernel.specs, src_storages, strict=True)):
        check_storage(f"src_storages[{j}]", t, spec.src_dtype, spans[j][0])
        check_storage("dst_storage", dst_storage, spec.dst_dtype, spans[j][1])
        if t.device != dst_storage.device:
            raise CallError(
                f"copy batch {kernel.name}: src_storages[{j}] and dst_storage must share a "
                f"device; got {t.device} and {dst_storage.device}"
            )
    _launch(_launcher(kernel, "copy batch", dst_storage.device), dst_storage.device,
            grid, dst_storage, *src_storages, *args, **kernel.constexprs,
            num_warps=kernel.num_warps)
    bump_versions((dst_storage,))


def launch_philox(kernel: PhiloxKernel, state: torch.Tensor, dst_storage: torch.Tensor,
                  new_state: torch.Tensor) -> None:
    """Run a generated philox kernel: fill `dst_storage` from `state`, write the advanced
    `new_state`.

    `state` and `new_state` hold 6 int32 / uint32 words each (contiguous, any shape of
    6 elements) and must not overlap; `dst_storage` is the flat 1-D output storage of
    the spec's dtype. The backend of the kernel's language on the tensors' device runs
    it (`kernel_backend`): a Triton kernel compiled on CUDA tensors, through Triton's
    interpreter on CPU tensors; a C kernel (`codegen.c.philox.generate_c_philox`)
    natively on CPU tensors. Nothing is synchronized with the host.
    """
    if not is_static((kernel.grid, getattr(kernel, "args", ()), getattr(kernel, "calls", ()))):
        raise CallError(
            f"philox {kernel.name}: its sizes are symbolic; expected a static kernel (a "
            "symbolic one runs in its program, whose call binds the sizes: "
            "`runner(program, backend, bindings=...)`)"
        )
    state_words = _state_view(state, "state")
    new_words = _state_view(new_state, "new_state")
    dst = _philox_dst_view(kernel, dst_storage)
    devices = {state_words.device, new_words.device, dst.device}
    if len(devices) != 1:
        raise CallError(
            f"philox: state, dst and new_state must be on one device; got "
            f"{state.device}, {dst_storage.device}, {new_state.device}"
        )
    for (a, a_name), (b, b_name) in (
        ((state_words, "state"), (new_words, "new_state")),
        ((state_words, "state"), (dst, "dst")),
        ((new_words, "new_state"), (dst, "dst")),
    ):
        if _overlap(a, b):
            raise CallError(
                f"philox: {a_name} and {b_name} overlap in memory; every program reads "
                f"state while the kernel writes dst and new_state, so they must be distinct"
            )
    launcher = _launcher(kernel, "philox", dst.device)
    storages = (state_words, dst, new_words)
    # A launcher that reads data pointers (the C kernels') runs misaligned tensors on
    # aligned stand-ins, written back after (as `run`).
    stand_ins = (AlignedStandIns(storages) if getattr(launcher, "pointers_only", False)
                 and misaligned(storages) else None)
    if stand_ins is not None:
        storages = tuple(map(stand_ins.of, storages))
    _launch(launcher, dst.device, kernel.grid, *storages, *getattr(kernel, "args", ()),
            num_warps=kernel.num_warps, **dict(kernel.constexprs))
    if stand_ins is not None:
        stand_ins.write_back((dst, new_words))
    bump_versions((dst_storage, new_state))


def _philox_dst_view(kernel: PhiloxKernel, dst_storage: Any) -> torch.Tensor:
    want = kernel.dst_dtype
    if not isinstance(dst_storage, torch.Tensor):
        raise CallError(f"dst: expected a torch.Tensor; got {type(dst_storage).__name__}")
    if dst_storage.dtype != want.torch:
        raise CallError(f"dst: expected dtype {want.name}; got {dst_storage.dtype}")
    if dst_storage.dim() != 1 or not dst_storage.is_contiguous():
        raise CallError(
            f"dst: expected a flat contiguous 1-D storage; got sizes "
            f"{tuple(dst_storage.shape)} strides {tuple(dst_storage.stride())}"
        )
    if dst_storage.numel() < kernel.dst_elements:
        raise CallError(
            f"dst: the output layout addresses {kernel.dst_elements} elements; the storage "
            f"holds {dst_storage.numel()}"
        )
    # uint32 is stored as its int32 bit pattern (same bytes).
    return dst_storage.view(torch.int32) if want.name == "uint32" else dst_storage


def _state_view(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise CallError(f"{what}: expected a torch.Tensor of 6 words; got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.uint32):
        raise CallError(f"{what}: expected dtype uint32 or int32; got {t.dtype}")
    if t.numel() != 6 or not t.is_contiguous():
        raise CallError(
            f"{what}: expected 6 contiguous words; got sizes {tuple(t.shape)} "
            f"strides {tuple(t.stride())}"
        )
    flat = t.reshape(6)
    return flat.view(torch.int32) if flat.dtype == torch.uint32 else flat


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0 = a.data_ptr()
    b0 = b.data_ptr()
    a1 = a0 + a.numel() * a.element_size()
    b1 = b0 + b.numel() * b.element_size()
    return a0 < b1 and b0 < a1
