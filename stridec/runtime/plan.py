"""What one specialization runs, for a reader: `Plan` (`CompiledGraph.plan_for`), its
kernels, the lowered IR and the backend that runs them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stridec.compiler.codegen.program import KernelInfo, Program
from stridec.errors import StridecError
from stridec.ir.graph import Graph

__all__ = ["Plan"]


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
      %0 = strided_copy %x {layout = strided<[2, 1], offset: 0>, space = [3, 2], src = ...
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

            kernel 0: copy interleave, %x 2x8x6x5xf16 -> %0 2x6x5x8xf16, C on cpu,
              2,299 lines in ~/.cache/stridec/kernels/c/3d99….c (plan.kernels[0].source)

        (on one line).

        >>> g = stridec.Graph("t")
        >>> x = g.input("x", (12, 10), "float32")
        >>> g.output(x.t().contiguous())
        >>> fn = stridec.compile(g)
        >>> (line,) = stridec.compile(g, backend="cpu").plan_for(torch.randn(12, 10)).kernel_lines()
        >>> line.split(", ")[:3]
        ['kernel 0: copy tiled_transpose', '%x 12x10xf32 -> %0 10x12xf32', 'C on cpu']
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
