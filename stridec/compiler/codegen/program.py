"""The executable form of a compiled graph: storage slots, kernel launches and outputs.

A `Program` is plain data (it round-trips through JSON for the on-disk cache), so a
cached specialization runs without the pass pipeline or code generation; running it is
the runtime's (`stridec.runtime.launch`):

- slots `0 … n_inputs-1` are the inputs' storages (flat 1-D views from element 0);
- each further slot is a buffer of `elements` elements allocated with `torch.empty`;
- each launch runs kernel `kernel` with the storages of `args` (in the kernel's
  parameter order), each viewed as `views[i]` when the kernel reads raw bits;
- output `k` is `torch.as_strided(slot storage, sizes, strides, offset)` — a view of an
  input when its slot is an input's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["Program", "KernelInfo", "Launch", "BufferSpec", "OutputSpec"]

PROGRAM_FORMAT = 3


@dataclass(frozen=True)
class KernelInfo:
    """One generated kernel: `kind` is "copy" or "philox"; `source` is its Triton module,
    or for `lang == "c"` its C compile units, run as `calls` (see `CCopyKernel`). A Triton
    kernel takes the runtime scalars `params` (after its pointers) with the values
    `args` (`codegen.copy.KernelParams`): one source serves every copy of its class, each
    launch passes its own sizes, strides and offsets."""

    kind: str
    name: str
    source: str
    grid: tuple[int, ...]
    constexprs: dict[str, int]
    num_warps: int = 4
    strategy: str = ""
    index_bits: int = 32
    lang: str = "triton"
    calls: tuple[tuple[str, int, int, tuple[int, ...]], ...] = ()
    params: tuple[str, ...] = ()
    args: tuple[int, ...] = ()
    detail: str = ""  # the canonical sizes, strides, masks and tiles, for people

    @property
    def arguments(self) -> dict[str, int]:
        """Each runtime scalar parameter's value, by name."""
        return dict(zip(self.params, self.args, strict=True))


def _call_fits(call: tuple, n_args: int) -> bool:
    """A C call's arguments name launch arguments, and its params are whole parameters of
    its symbol (`codegen/c/copy.py`, `codegen/c/philox.py`)."""
    from stridec.compiler.codegen.c import copy, philox

    symbol, src_arg, dst_arg, params = call
    if not (0 <= src_arg < n_args and 0 <= dst_arg < n_args):
        return False
    if symbol.startswith("stridec_philox_"):
        return philox.call_fits(symbol, params)
    return copy.call_fits(symbol, params)


@dataclass(frozen=True)
class Launch:
    """Kernel `kernel` run over the slots `args`; `ops` are the positions, in the lowered
    graph (`Program.ir`), of the ops it carries out (what pictures and DOT box together)."""

    kernel: int
    args: tuple[int, ...]
    views: tuple[str | None, ...]
    ops: tuple[int, ...] = ()


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
                    index_bits=int(k["index_bits"]), lang=str(k["lang"]),
                    calls=tuple(
                        (str(c[0]), int(c[1]), int(c[2]), tuple(int(p) for p in c[3]))
                        for c in k["calls"]
                    ),
                    params=tuple(str(n) for n in k["params"]),
                    args=tuple(int(a) for a in k["args"]),
                    detail=str(k["detail"]),
                )
                for k in data["kernels"]
            ],
            launches=[
                Launch(int(x["kernel"]), tuple(int(a) for a in x["args"]),
                       tuple(None if v is None else str(v) for v in x["views"]),
                       tuple(int(i) for i in x.get("ops", ())))
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
            kernel = self.kernels[launch.kernel]
            if len(kernel.params) != len(kernel.args):
                raise ValueError(f"program: kernel {kernel.name} has {len(kernel.params)} "
                                 f"parameters and {len(kernel.args)} arguments")
            for call in kernel.calls:
                if not _call_fits(call, len(launch.args)):
                    raise ValueError(f"program: C call {call[0]} does not fit its launch")
        for o in self.outputs:
            if not 0 <= o.slot < slots or len(o.sizes) != len(o.strides):
                raise ValueError(f"program: output over slot {o.slot} of {slots}")
        return self

    @property
    def launch_count(self) -> int:
        return len(self.launches)
