"""The executable form of a compiled graph: storage slots, kernel launches and outputs.

A `Program` is plain data (it round-trips through JSON for the on-disk cache), so a
cached specialization runs without the pass pipeline or code generation:

- slots `0 … n_inputs-1` are the inputs' storages (flat 1-D views from element 0);
- each further slot is a buffer of `elements` elements allocated with `torch.empty`;
- each launch runs kernel `kernel` with the storages of `args` (in the kernel's
  parameter order), each viewed as `views[i]` when the kernel reads raw bits;
- output `k` is `torch.as_strided(slot storage, sizes, strides, offset)` — a view of an
  input when its slot is an input's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from stridec.ir.dtypes import as_dtype

__all__ = ["Program", "KernelInfo", "Launch", "BufferSpec", "OutputSpec", "flat_storage"]

PROGRAM_FORMAT = 1


def flat_storage(t: torch.Tensor) -> torch.Tensor:
    """A 1-D tensor over the whole storage of `t`, starting at storage element 0."""
    elements = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(t, (elements,), (1,), 0)


@dataclass(frozen=True)
class KernelInfo:
    """One generated kernel: `kind` is "copy" or "philox"; `source` is its Triton module."""

    kind: str
    name: str
    source: str
    grid: tuple[int, ...]
    constexprs: dict[str, int]
    num_warps: int = 4
    strategy: str = ""
    index_bits: int = 32


@dataclass(frozen=True)
class Launch:
    kernel: int
    args: tuple[int, ...]
    views: tuple[str | None, ...]


@dataclass(frozen=True)
class BufferSpec:
    elements: int
    dtype: str


@dataclass(frozen=True)
class OutputSpec:
    slot: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass
class Program:
    n_inputs: int
    buffers: list[BufferSpec]
    kernels: list[KernelInfo]
    launches: list[Launch]
    outputs: list[OutputSpec]
    ir: str
    _handles: list[Any] | None = field(default=None, repr=False, compare=False)
    _runner: _Runner | None = field(default=None, repr=False, compare=False)

    # -- serialization -------------------------------------------------------------------
    def to_json(self) -> str:
        data = {
            "format": PROGRAM_FORMAT,
            "n_inputs": self.n_inputs,
            "buffers": [asdict(b) for b in self.buffers],
            "kernels": [asdict(k) for k in self.kernels],
            "launches": [asdict(lch) for lch in self.launches],
            "outputs": [asdict(o) for o in self.outputs],
            "ir": self.ir,
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Program:
        """Rebuild a program; raises ValueError/KeyError/TypeError on a malformed entry."""
        data = json.loads(text)
        if data.get("format") != PROGRAM_FORMAT:
            raise ValueError(f"program format {data.get('format')!r} is not {PROGRAM_FORMAT}")
        return cls(
            n_inputs=int(data["n_inputs"]),
            buffers=[BufferSpec(int(b["elements"]), str(b["dtype"])) for b in data["buffers"]],
            kernels=[
                KernelInfo(
                    kind=str(k["kind"]), name=str(k["name"]), source=str(k["source"]),
                    grid=tuple(int(g) for g in k["grid"]),
                    constexprs={str(a): int(b) for a, b in k["constexprs"].items()},
                    num_warps=int(k["num_warps"]), strategy=str(k["strategy"]),
                    index_bits=int(k["index_bits"]),
                )
                for k in data["kernels"]
            ],
            launches=[
                Launch(int(x["kernel"]), tuple(int(a) for a in x["args"]),
                       tuple(None if v is None else str(v) for v in x["views"]))
                for x in data["launches"]
            ],
            outputs=[
                OutputSpec(int(o["slot"]), tuple(int(n) for n in o["sizes"]),
                           tuple(int(s) for s in o["strides"]), int(o["offset"]))
                for o in data["outputs"]
            ],
            ir=str(data["ir"]),
        )._validated()

    def _validated(self) -> Program:
        """Self; raises ValueError when an index points nowhere (a damaged entry)."""
        slots = self.n_inputs + len(self.buffers)
        if self.n_inputs < 0 or any(b.elements < 1 for b in self.buffers):
            raise ValueError("program: negative input count or an empty buffer")
        for launch in self.launches:
            if not 0 <= launch.kernel < len(self.kernels):
                raise ValueError(
                    f"program: launch of kernel {launch.kernel} of {len(self.kernels)}"
                )
            if len(launch.args) != len(launch.views) or any(
                not 0 <= a < slots for a in launch.args
            ):
                raise ValueError(f"program: launch arguments {launch.args} outside {slots} slots")
        for o in self.outputs:
            if not 0 <= o.slot < slots or len(o.sizes) != len(o.strides):
                raise ValueError(f"program: output over slot {o.slot} of {slots}")
        return self

    # -- execution -----------------------------------------------------------------------
    def handles(self) -> list[Any]:
        if self._handles is None:  # loaded once (an empty list too: a program of views)
            from stridec.compiler.codegen.loader import load_kernel

            self._handles = [load_kernel(k.source, k.name) for k in self.kernels]
        return self._handles

    def runner(self) -> _Runner:
        """This program with everything a call needs resolved once: torch dtypes, kernel
        handles, keyword arguments. Built on first use; two threads building it at once
        build equal ones, and either may stay."""
        runner = self._runner
        if runner is None:
            runner = self._runner = _Runner.of(self, self.handles())
        return runner

    def run(self, tensors: tuple[torch.Tensor, ...], device: torch.device) -> list[torch.Tensor]:
        runner = self._runner or self.runner()
        if (runner.launches and device.type == "cuda" and device.index is not None
                and device.index != torch.cuda.current_device()):
            # Triton launches on the current device and its current stream: make that the
            # tensors' device, or a kernel would get another GPU's pointers.
            with torch.cuda.device(device):
                return runner.run(tensors, device)
        return runner.run(tensors, device)

    @property
    def launch_count(self) -> int:
        return len(self.launches)


@dataclass(frozen=True)
class _Runner:
    """A `Program` in the form one call runs it, every lookup done ahead:

    - `flat_inputs`: the input slots some launch reads, passed as `flat_storage`;
    - `buffers`: (elements, torch dtype) of each buffer slot;
    - `launches`: (handle, grid, ((slot, torch dtype to view it as, or None), …), keyword
      arguments: `num_warps` and the constexprs);
    - `outputs`: (slot, sizes, strides, offset) of each output.

    An output over an input slot is `torch.as_strided(input, sizes, strides, offset)`:
    `as_strided` takes an offset into the storage, not into the view, so over the caller's
    tensor it is the same view as over its flat storage (element `offset + Σ i_k·s_k` of
    the storage), one `as_strided` cheaper when no launch reads that input.
    """

    flat_inputs: tuple[int, ...]
    buffers: tuple[tuple[int, torch.dtype], ...]
    launches: tuple[tuple[Any, tuple[int, ...], tuple[tuple[int, torch.dtype | None], ...],
                          dict[str, int]], ...]
    outputs: tuple[tuple[int, tuple[int, ...], tuple[int, ...], int], ...]

    @classmethod
    def of(cls, program: Program, handles: list[Any]) -> _Runner:
        launches = []
        for launch in program.launches:
            k = program.kernels[launch.kernel]
            args = tuple(
                (s, None if v is None else getattr(torch, v))
                for s, v in zip(launch.args, launch.views, strict=True)
            )
            launches.append((handles[launch.kernel], k.grid, args,
                             {"num_warps": k.num_warps, **k.constexprs}))
        read = {s for launch in program.launches for s in launch.args}
        return cls(
            flat_inputs=tuple(s for s in range(program.n_inputs) if s in read),
            buffers=tuple((b.elements, as_dtype(b.dtype).torch) for b in program.buffers),
            launches=tuple(launches),
            outputs=tuple((o.slot, o.sizes, o.strides, o.offset) for o in program.outputs),
        )

    def run(self, tensors: tuple[torch.Tensor, ...], device: torch.device) -> list[torch.Tensor]:
        slots: list[torch.Tensor] = list(tensors)
        for s in self.flat_inputs:
            slots[s] = flat_storage(tensors[s])
        for elements, dtype in self.buffers:
            slots.append(torch.empty(elements, dtype=dtype, device=device))
        for handle, grid, args, kwargs in self.launches:
            handle.run(grid, *[slots[s] if v is None else slots[s].view(v) for s, v in args],
                       **kwargs)
        outs = []
        for s, sizes, strides, offset in self.outputs:  # a loop: no comprehension to create
            outs.append(torch.as_strided(slots[s], sizes, strides, offset))
        return outs
