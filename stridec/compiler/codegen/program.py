"""The executable form of a compiled graph: storage slots, kernel launches and outputs.

A `Program` is plain data (it round-trips through JSON for the on-disk cache), so a
cached specialization runs without the pass pipeline or code generation; running it is
the runtime's (`stridec.runtime.launch`):

- slots `0 … n_inputs-1` are the inputs' storages (flat 1-D views from element 0);
- each further slot is a buffer of `elements` elements allocated with `torch.empty`;
- each launch runs kernel `kernel` with the storages of `args` (in the kernel's
  parameter order), each viewed as `views[i]` when the kernel reads raw bits or reads
  the storage as elements of another type (a `bitcast`: `input_dtypes` and the buffers'
  dtypes say what each slot holds);
- output `k` is `torch.as_strided(slot storage, sizes, strides, offset)` — a view of an
  input when its slot is an input's — over the storage read as `dtype` where it is given.

A program over symbolic sizes (`symbols`: the names a call binds, in order) holds
symbolic sizes (`stridec.ir.symbols.Sym`) where its numbers depend on them: kernel
arguments and grids, buffer elements, output sizes, strides and offsets. `bind(values)`
is the static program of one binding, every expression evaluated by one function
compiled once per program; in JSON a symbolic size is its text (`format_size`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from stridec.ir.host_code import expression_function
from stridec.ir.symbols import Sym, _py_source, format_size, parse_size

INT32_MAX = 2**31 - 1

__all__ = ["Program", "KernelInfo", "Launch", "BufferSpec", "OutputSpec"]

PROGRAM_FORMAT = 4


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
    # A symbolic int32 kernel: groups of terms whose absolute values must sum within
    # 2^31 - 1 for a binding it runs (`codegen.copy.index_limits`).
    limits: tuple[tuple[int | Sym, ...], ...] = ()

    @property
    def arguments(self) -> dict[str, int]:
        """Each runtime scalar parameter's value, by name."""
        return dict(zip(self.params, self.args, strict=True))

    @property
    def language(self) -> str:
        """What its source is written in, for people: "C" or "Triton"."""
        return "C" if self.lang == "c" else "Triton"

    def __repr__(self) -> str:
        # Short: the source runs to thousands of lines (`kernel.source` has it whole).
        strategy = f" {self.strategy}" if self.strategy else ""
        lines = self.source.count("\n") + (not self.source.endswith("\n"))
        return (f"<KernelInfo {self.kind}{strategy} ({self.language}) {self.name}: "
                f"{lines:,} lines of source>")


def _call_fits(call: tuple, n_args: int) -> bool:
    """A C call's arguments name launch arguments, and its params are whole parameters of
    its symbol (`codegen/c/copy.py`, `codegen/c/plan.py`, `codegen/c/philox.py`)."""
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
    dtype: str | None = None  # the slot's bytes read as this type (a `bitcast`); None: its own


def _size(x: object) -> int | Sym:
    """A number of a program read back: an int, or a symbolic size's text."""
    return parse_size(x) if isinstance(x, str) else int(x)  # type: ignore[arg-type]


def _jsonable(x: Any) -> Any:
    """`x` with every symbolic size as its text."""
    if isinstance(x, Sym):
        return format_size(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


@dataclass
class Program:
    n_inputs: int
    buffers: list[BufferSpec]
    kernels: list[KernelInfo]
    launches: list[Launch]
    outputs: list[OutputSpec]
    ir: str
    symbols: tuple[str, ...] = ()
    input_dtypes: tuple[str, ...] = ()  # the dtype of each input slot's storage
    _evaluator: Callable[..., list[int]] | None = field(default=None, repr=False,
                                                         compare=False)
    _fits: Callable[..., bool] | None = field(default=None, repr=False, compare=False)

    # -- symbolic sizes ------------------------------------------------------------------
    def _expressions(self) -> list[Sym]:
        """Every symbolic size of the program, in the order `bind` substitutes them."""
        found: list[Sym] = []

        def visit(x: Any) -> None:
            if isinstance(x, Sym):
                found.append(x)
            elif isinstance(x, (tuple, list)):
                for v in x:
                    visit(v)

        for b in self.buffers:
            visit(b.elements)
        for k in self.kernels:
            visit(k.grid)
            visit(k.args)
            visit([call[3] for call in k.calls])
        for o in self.outputs:
            visit((o.sizes, o.strides, o.offset))
        return found

    def fits(self, values: Mapping[str, int]) -> bool:
        """Whether every int32 kernel keeps its indices within int32 for `values` (one
        generated function of the symbols' values, built on first use: a call asks)."""
        if self._fits is None:
            where = {n: f"_{i}" for i, n in enumerate(self.symbols)}
            self._fits = expression_function(list(where.values()), self.fits_source(where))
        return self._fits(*[values[n] for n in self.symbols])

    def fits_source(self, where: Mapping[str, str]) -> str:
        """`fits` as one Python expression over the symbols named as in `where`."""
        tests = " and ".join(
            "(" + " + ".join(f"abs({_py_source(term, where)})" for term in limit)
            + f") <= {INT32_MAX}"
            for k in self.kernels for limit in k.limits if limit
        )
        return tests or "True"

    def bind(self, values: Mapping[str, int]) -> Program:
        """The static program of the binding `values` (a value for each of `symbols`)."""
        if not self.symbols:
            return self
        if self._evaluator is None:
            functions = [e.compile(self.symbols) for e in self._expressions()]
            self._evaluator = lambda *v: [f(*v) for f in functions]
        numbers = iter(self._evaluator(*(values[n] for n in self.symbols)))

        def sub(x: Any) -> Any:
            if isinstance(x, Sym):
                return next(numbers)
            if isinstance(x, tuple):
                return tuple(sub(v) for v in x)
            return x

        buffers = [BufferSpec(sub(b.elements), b.dtype) for b in self.buffers]
        kernels = [
            replace(k, grid=sub(k.grid), args=sub(k.args), limits=(),
                    calls=tuple((c[0], c[1], c[2], sub(c[3])) for c in k.calls))
            for k in self.kernels
        ]
        outputs = [OutputSpec(o.slot, sub(o.sizes), sub(o.strides), sub(o.offset), o.dtype)
                   for o in self.outputs]
        return Program(self.n_inputs, buffers, kernels, self.launches, outputs, self.ir,
                       input_dtypes=self.input_dtypes)

    # -- serialization -------------------------------------------------------------------
    def to_json(self) -> str:
        data = {
            "format": PROGRAM_FORMAT,
            "n_inputs": self.n_inputs,
            "buffers": [_jsonable(asdict(b)) for b in self.buffers],
            "kernels": [_jsonable(asdict(k)) for k in self.kernels],
            "launches": [asdict(lch) for lch in self.launches],
            "outputs": [_jsonable(asdict(o)) for o in self.outputs],
            "ir": self.ir,
            "symbols": list(self.symbols),
            "input_dtypes": list(self.input_dtypes),
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
            buffers=[BufferSpec(_size(b["elements"]), str(b["dtype"])) for b in data["buffers"]],
            kernels=[
                KernelInfo(
                    kind=str(k["kind"]), name=str(k["name"]), source=str(k["source"]),
                    grid=tuple(_size(g) for g in k["grid"]),
                    constexprs={str(a): int(b) for a, b in k["constexprs"].items()},
                    num_warps=int(k["num_warps"]), strategy=str(k["strategy"]),
                    index_bits=int(k["index_bits"]), lang=str(k["lang"]),
                    calls=tuple(
                        (str(c[0]), int(c[1]), int(c[2]), tuple(_size(p) for p in c[3]))
                        for c in k["calls"]
                    ),
                    params=tuple(str(n) for n in k["params"]),
                    args=tuple(_size(a) for a in k["args"]),
                    detail=str(k["detail"]),
                    limits=tuple(tuple(_size(t) for t in lim) for lim in k.get("limits", ())),
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
                OutputSpec(int(o["slot"]), tuple(_size(n) for n in o["sizes"]),
                           tuple(_size(s) for s in o["strides"]), _size(o["offset"]),
                           None if o.get("dtype") is None else str(o["dtype"]))
                for o in data["outputs"]
            ],
            ir=str(data["ir"]),
            symbols=tuple(str(n) for n in data.get("symbols", ())),
            input_dtypes=tuple(str(d) for d in data.get("input_dtypes", ())),
        )._validated()

    def _validated(self) -> Program:
        """Self; raises ValueError when an index points nowhere (a damaged entry)."""
        slots = self.n_inputs + len(self.buffers)
        if self.n_inputs < 0 or any(
            isinstance(b.elements, int) and b.elements < 1 for b in self.buffers
        ):
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
        named = set(self.symbols)
        for e in self._expressions():
            if not e.free_symbols <= named:
                raise ValueError(f"program: size {e} names symbols outside {self.symbols}")
        return self

    @property
    def launch_count(self) -> int:
        return len(self.launches)
