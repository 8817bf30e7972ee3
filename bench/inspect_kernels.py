"""What the GPU would run, read without a GPU: every full-size row compiled for sm_90.

    python bench/inspect_kernels.py                 # table of every row of bench/workloads
    python bench/inspect_kernels.py --rows pack     # rows whose name contains "pack"
    python bench/inspect_kernels.py --sass ROW      # and the SASS of ROW's kernels
    python bench/inspect_kernels.py --rows c3 --strategy gather --warps 4   # a variant

Each benchmark row is lowered exactly as `stridec.compile` lowers it for a CUDA tensor
(default pipeline, `lower_to_program(graph, "cuda")`), each kernel is compiled by Triton
for Hopper (sm_90: PTX, then ptxas to a cubin, all on the CPU), and the cubin is read with
the `cuobjdump` that Triton's package carries. Reported per kernel:

- strategy, tile (the block constexprs), warps and programs;
- registers, shared memory and local (spill) bytes of one program;
- the global loads and stores in the SASS by width (e.g. `LDG 16B×4` = four 128-bit loads
  per thread) — copy kernels have no loops, so this is what every thread issues (for a
  batched kernel, a `cat`, the counts add up every member's branch; a program runs one);
- per row, the GB it moves (read + written, as `bench/run.py` counts them) and the floor:
  the least time any kernel can take at `--tbps` of copy bandwidth (4.3 TB/s, what a
  device-to-device `copy_` reached on this workplace's H200s) — the number a GPU run's
  time is judged against (METHOD.md: "two numbers first").

This is no timing and claims none: it shows whether the accesses are as wide as the data
allows (HOPPER.md: 16-byte accesses per thread, coalesced across the warp), which is the
first thing to check before a GPU run. Pointers are specialized as 16-byte aligned, as the
runtime's storages (whole allocations) always are.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stridec.compiler.codegen.lower import lower_to_program  # noqa: E402
from stridec.compiler.codegen.program import KernelInfo, Program  # noqa: E402
from stridec.compiler.codegen.spec import Tuning  # noqa: E402
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager  # noqa: E402
from stridec.ir.graph import Graph  # noqa: E402
from stridec.runtime.backends.triton import load_jit, signature  # noqa: E402

if TYPE_CHECKING:
    from bench.workloads import Workload

#: Triton's pointer type for each storage dtype (uint32 storages travel as int32 bits).
POINTER = {
    "float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
    "int8": "*i8", "uint8": "*u8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
    "uint32": "*i32", "bool": "*i1",
}  # fmt: skip
# SASS global memory instructions: LDG.E.128, LDG.E.U8.CONSTANT, STG.E.64, ...
_GLOBAL = re.compile(r"\b(LDG|STG)(?:\.E)?((?:\.[A-Z0-9]+)*)\b")
_WIDTHS = {"128": 16, "64": 8, "U16": 2, "S16": 2, "U8": 1, "S8": 1}
_RESOURCES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


@dataclass(frozen=True)
class KernelReport:
    """One compiled kernel, read off its cubin."""

    name: str
    strategy: str
    tile: dict[str, int]
    num_warps: int
    programs: int
    registers: int
    shared: int
    local: int
    loads: Counter  # access width in bytes -> instructions per thread
    stores: Counter
    sass: str

    @property
    def load_bytes(self) -> int:
        return sum(w * n for w, n in self.loads.items())

    @property
    def store_bytes(self) -> int:
        return sum(w * n for w, n in self.stores.items())

    @property
    def widest_load(self) -> int:
        return max(self.loads, default=0)

    @property
    def widest_store(self) -> int:
        return max(self.stores, default=0)

    @property
    def narrowest_store(self) -> int:
        return min(self.stores, default=0)


def access_counts(sass: str) -> tuple[Counter, Counter]:
    """(loads, stores): SASS global accesses per thread, keyed by width in bytes."""
    loads: Counter = Counter()
    stores: Counter = Counter()
    for kind, mods in _GLOBAL.findall(sass):
        width = 4
        for m in mods.split("."):
            width = _WIDTHS.get(m, width)
        (loads if kind == "LDG" else stores)[width] += 1
    return loads, stores


def compile_kernel(kernel: KernelInfo, pointer_dtypes: list[str], arch: int = 90) -> KernelReport:
    """Compile one generated kernel for `sm_<arch>` and read its cubin."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler import compile as triton_compile

    jit = load_jit(kernel.source, kernel.name)
    # Pointers, in order, then the runtime scalars typed by value (their divisibility by 16
    # is in the source: `codegen.copy.KernelParams`).
    types = signature(jit, [POINTER[d] for d in pointer_dtypes], kernel.args, kernel.constexprs)
    aligned = {(k,): [["tt.divisibility", 16]] for k in range(len(pointer_dtypes))}
    source = ASTSource(jit, types, constexprs=dict(kernel.constexprs), attrs=aligned)
    compiled = triton_compile(
        source, target=GPUTarget("cuda", arch, 32), options={"num_warps": kernel.num_warps}
    )
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        sass = subprocess.run(
            [_tool("cuobjdump"), "-sass", cubin], check=True, capture_output=True, text=True
        ).stdout
        usage = subprocess.run(
            [_tool("cuobjdump"), "-res-usage", cubin], check=True, capture_output=True, text=True
        ).stdout
    m = _RESOURCES.search(usage)
    registers, _stack, _static, local = (int(x) for x in m.groups()) if m else (0, 0, 0, 0)
    shared = int(compiled.metadata.shared)  # Triton's shared memory is dynamic
    loads, stores = access_counts(sass)
    return KernelReport(
        name=kernel.name,
        strategy=kernel.strategy or kernel.kind,
        tile=dict(kernel.constexprs),
        num_warps=kernel.num_warps,
        programs=kernel.grid[0] if kernel.grid else 0,
        registers=registers,
        shared=shared,
        local=local,
        loads=loads,
        stores=stores,
        sass=sass,
    )


def tile_text(tile: dict[str, int]) -> str:
    """The block constexprs as `64x64`; a batched kernel's members (`M0_BLOCK_R`, ...) as
    `3×1x8192` when they share one tile, else one tile per member joined by `/`."""
    members: dict[str, list[str]] = {}
    for name, value in tile.items():
        m = re.match(r"(M\d+)_", name)
        members.setdefault(m.group(1) if m else "", []).append(str(value))
    tiles = ["x".join(values) for values in members.values()]
    if len(tiles) > 1 and len(set(tiles)) == 1:
        return f"{len(tiles)}×{tiles[0]}"
    return "/".join(tiles)


def strategy_text(strategy: str) -> str:
    """`batch(linear,linear,linear)` as `batch 3×linear`; other strategies as they are."""
    m = re.fullmatch(r"batch\((.*)\)", strategy)
    if m is None:
        return strategy
    parts = m.group(1).split(",")
    return f"batch {len(parts)}×{parts[0]}" if len(set(parts)) == 1 else f"batch {'/'.join(parts)}"


def lower(graph: Graph, tuning: Tuning | None = None) -> Program:
    """The program `stridec.compile` runs for `graph`'s declared (contiguous) inputs on CUDA
    (with `tuning`'s overrides, if any)."""
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    return lower_to_program(graph, "cuda", tuning)


def inspect_program(graph: Graph, program: Program) -> list[KernelReport]:
    slot_dtypes = [v.type.dtype.name for v in graph.inputs] + [b.dtype for b in program.buffers]
    reports = []
    for launch in program.launches:
        kernel = program.kernels[launch.kernel]
        dtypes = [v or slot_dtypes[s] for s, v in zip(launch.args, launch.views, strict=True)]
        reports.append(compile_kernel(kernel, dtypes))
    return reports


def floor_ms(w: Workload, tbps: float) -> tuple[float, float]:
    """(GB moved, the least milliseconds a run can take): the row's bytes read + written
    at full size (as `bench/run.py` counts them), over `tbps` TB/s of copy bandwidth.
    Tensors are `meta` tensors of the graph's input and output types: nothing is allocated."""
    graph = w.graph("full")
    inputs = [torch.empty(v.type.sizes, dtype=v.type.dtype.torch, device="meta")
              for v in graph.inputs]
    outputs = [torch.empty(v.type.sizes, dtype=v.type.dtype.torch, device="meta")
               for v in graph.outputs]
    read, written = w.bytes_moved(inputs, outputs)
    total = read + written
    return total / 1e9, total / (tbps * 1e12) * 1e3


def _widths(counts: Counter) -> str:
    return " ".join(f"{w}B×{n}" for w, n in sorted(counts.items(), reverse=True)) or "-"


def main(argv: list[str] | None = None) -> int:
    from bench.workloads import WORKLOADS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="", help="only rows whose name contains this")
    parser.add_argument("--sass", default=None, help="print the SASS of this row's kernels")
    parser.add_argument("--strategy", default=None, help="force a copy strategy (Tuning)")
    parser.add_argument("--blocks", default=None, help="tile, e.g. 64x64 (Tuning)")
    parser.add_argument("--warps", type=int, default=None, help="warps per program (Tuning)")
    parser.add_argument("--tbps", type=float, default=4.3,
                        help="copy bandwidth for the floor column, TB/s read + written "
                             "(4.3: a device-to-device copy_ on this workplace's H200s)")
    args = parser.parse_args(argv)
    tuning = None
    if args.strategy or args.blocks or args.warps:
        blocks = tuple(int(b) for b in args.blocks.split("x")) if args.blocks else None
        tuning = Tuning(args.strategy, blocks, args.warps)
    header = (
        f"{'row':34} {'strategy':16} {'tile':>12} {'warps':>5} {'programs':>9} "
        f"{'regs':>4} {'smem':>6} {'spill':>5}  {'loads/thread':18} {'stores/thread':18}"
        f" {'GB':>6} {'floor ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for w in WORKLOADS:
        if args.rows not in w.name:
            continue
        graph = w.graph("full")
        program = lower(graph, tuning)
        gb, floor = floor_ms(w, args.tbps)
        for k, r in enumerate(inspect_program(graph, program)):
            tile, strategy = tile_text(r.tile), strategy_text(r.strategy)
            moved = f" {gb:6.2f} {floor:8.3f}" if k == 0 else ""
            print(
                f"{w.name:34} {strategy:16} {tile:>12} {r.num_warps:>5} {r.programs:>9} "
                f"{r.registers:>4} {r.shared:>6} {r.local:>5}  {_widths(r.loads):18} "
                f"{_widths(r.stores):18}{moved}",
                flush=True,
            )
            if args.sass and args.sass == w.name:
                print(r.sass)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
