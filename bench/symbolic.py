"""What runtime sizes cost: each row's kernels with their sizes, strides and offsets as
runtime arguments (how stridec runs them) against the same kernels with those arguments
baked in as compile-time constants, for the same shapes, on the CPU (`cpu` backend).

    python bench/symbolic.py                  # every row, 15 rounds
    python bench/symbolic.py --rows pack      # rows whose name contains "pack"
    python bench/symbolic.py --rounds 31 --threads 2

A `cpu` kernel is a C function `symbol(src, dst, params, nthreads)` of its class, reading
every size, stride, offset and mask bound from the int64 array `params`. The baked
variant is a second library built from the very same C unit plus one wrapper,
`baked(src, dst)`, that calls `symbol` with a `static const` copy of this call's
`params` and a constant thread count, under `__attribute__((flatten))`: every call below
it is inlined, so the compiler sees the sizes as constants and folds them (divisions by
constants, unrolled inner loops) as a kernel specialized to the shape would. Both are
called through ctypes, the two alternate round by round, and each side's median is kept;
before timing, each side alone must give the outputs stridec gives.
The target: runtime arguments within 5 % of baked ones.

Rows: the shapes of `bench/workloads.py`'s CPU rows (preallocated outputs, `out=`), so the
copies are the ones the CPU race times. With `--host`, a second table: the host time of
a call at a batch size not seen before, in a class already planned (a graph over a
symbolic N: no pass, no code generation, the plan bound to the new N), against a cached
call. The Triton side is checked statically instead
(tests/bench/test_access_widths.py: the SASS access widths of runtime-argument kernels).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stridec  # noqa: E402
from stridec.compiler.codegen.c.copy import UNIT_SEPARATOR  # noqa: E402
from stridec.runtime.backends import cpu  # noqa: E402

_WRAPPER = """
static const int64_t stridec_baked_params[] = {{{params}}};
__attribute__((flatten)) void stridec_baked(const void* src, void* dst) {{
    {symbol}(src, dst, stridec_baked_params, {threads});
}}
"""


def _baked(unit: str, symbol: str, params: tuple[int, ...], threads: int, folder: str) -> object:
    """The library of `unit` with `stridec_baked(src, dst)` calling `symbol` on constant
    `params` and `threads`."""
    source = unit + _WRAPPER.format(params=", ".join(map(str, params)), symbol=symbol,
                                    threads=threads)
    name = f"baked_{abs(hash((source, threads))):x}"
    source_path = os.path.join(folder, f"{name}.c")
    lib_path = os.path.join(folder, f"{name}.so")
    with open(source_path, "w", encoding="utf-8") as f:
        f.write(source)
    cpu._build(cpu.compiler(), source_path, lib_path)
    lib = ctypes.CDLL(lib_path)
    fn = lib.stridec_baked
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    fn.restype = None
    return fn


def _runtime(unit: str, symbol: str) -> object:
    fn = getattr(cpu.load_unit(unit), symbol)
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    fn.restype = None
    return fn


def measure(name: str, graph: stridec.Graph, inputs: list[torch.Tensor], rounds: int,
            threads: int, folder: str) -> tuple[float, float] | None:
    """(median ms with runtime arguments, median ms baked) of the row's copies, each call
    of each kernel run once per round; None when the row runs no C copy."""
    fn = stridec.compile(graph, backend="cpu")
    plan = fn.plan_for(*inputs)
    program = plan.program
    outs = fn(*inputs)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    slots = [launch_storage(t) for t in inputs]
    # Buffers of the program, allocated once (the outputs' storages serve as well).
    for b in program.buffers:
        slots.append(torch.empty(b.elements, dtype=getattr(torch, b.dtype)))
    runtime_calls, baked_calls = [], []
    for launch in program.launches:
        kernel = program.kernels[launch.kernel]
        if kernel.lang != "c" or kernel.kind != "copy":
            continue
        units = kernel.source.split(UNIT_SEPARATOR)
        for symbol, src_arg, dst_arg, params in kernel.calls:
            unit = next(u for u in units if f"void {symbol}(" in u)
            src = slots[launch.args[src_arg]].data_ptr()
            dst = slots[launch.args[dst_arg]].data_ptr()
            array = (ctypes.c_int64 * len(params))(*params)
            runtime_calls.append((_runtime(unit, symbol), src, dst, array))
            baked_calls.append((_baked(unit, symbol, params, threads, folder), src, dst))
    if not runtime_calls:
        return None

    def run_runtime() -> None:
        for f, src, dst, array in runtime_calls:
            f(src, dst, ctypes.addressof(array), threads)

    def run_baked() -> None:
        for f, src, dst in baked_calls:
            f(src, dst)

    for run in (run_baked, run_runtime):  # each side alone gives stridec's outputs
        for slot in slots[len(inputs):]:
            slot.zero_()
        run()
        for o, want in zip(program.outputs, outs, strict=True):
            got = torch.as_strided(slots[o.slot], o.sizes, o.strides, o.offset)
            if not torch.equal(got, want):
                raise AssertionError(f"{name}: {run.__name__} differs from stridec's output")
    times: dict[str, list[float]] = {"runtime": [], "baked": []}
    for r in range(rounds):
        order = [("runtime", run_runtime), ("baked", run_baked)]
        for label, call in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            call()
            times[label].append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times["runtime"]), statistics.median(times["baked"])


def launch_storage(t: torch.Tensor) -> torch.Tensor:
    from stridec.runtime.launch import flat_storage

    return flat_storage(t)


def rows(scale: str) -> list[tuple[str, stridec.Graph, list[torch.Tensor]]]:
    """The CPU rows of bench/workloads.py at `scale` ("cpu": the race's sizes)."""
    from bench.workloads import WORKLOADS

    found = []
    for w in WORKLOADS:
        if scale not in w.shapes:
            continue
        found.append((w.name, w.graph(scale), w.inputs(scale, "cpu")))
    return found


def host_graphs() -> list[tuple[str, stridec.Graph, Callable[[int], tuple[torch.Tensor, ...]]]]:
    """(name, graph over a symbolic batch N, arguments at N) of the `--host` rows: NCHW ->
    NHWC of (N, 8, 6, 5) float16 (copies), and float16 Philox noise of those sizes, NHWC,
    with its new state (a generator's sizes and state advance in N)."""
    from stridec.runtime.backends.reference_philox import make_state

    nhwc = stridec.Graph("nhwc_any_batch")
    x = nhwc.input("x", ("N", 8, 6, 5), "float16")
    nhwc.output(x.permute(0, 2, 3, 1).contiguous())
    noise = stridec.Graph("noise_any_batch")
    state = noise.input("state", (6,), "uint32")
    x = noise.input("x", ("N", 8, 6, 5), "float16")
    values, new_state = noise.philox_uniform(state, ("N", 8, 6, 5), "float16")
    noise.output(values.permute(0, 2, 3, 1).contiguous(), new_state)
    words = torch.from_numpy(make_state(5, 7).astype("uint32"))
    return [
        ("nhwc", nhwc, lambda n: (torch.randn(n, 8, 6, 5).half(),)),
        ("philox", noise, lambda n: (words, torch.randn(n, 8, 6, 5).half())),
    ]


def host_times(sizes: int = 48, rounds: int = 5,
               warm: int = 64) -> list[tuple[str, str, float, float, float]]:
    """(graph, backend, µs of a cached call, µs of a call at a size not seen before in a
    known class, the same in the first calls of a graph) of each graph of `host_graphs`:
    per round a new CompiledGraph plans the class at N = 3 and is called `warm` more
    times there (a process that has run a while: the generated functions of the graph
    and of its class are new code objects, which CPython 3.11 specializes only after some
    60 runs), then calls N = 4, 5, … (`sizes` of them, skipping multiples of 16: another
    class) once each -- every call a new size -- and then again -- every call cached: the
    same kernels, so the difference is host time (each input is read once just before the
    first pass, so both find the inputs as recently read). The last figure is the first
    pass of a graph called only once before (no `warm` calls). Each a mean per call; the
    median over `rounds`."""
    batches = [n for n in range(4, 16 * sizes) if n % 16][:sizes]
    rows = []
    for name, graph, arguments in host_graphs():
        tensors = {n: arguments(n) for n in [3, *batches]}

        def per_call(fn: stridec.CompiledGraph) -> float:
            t0 = time.perf_counter()
            for n in batches:
                fn(*tensors[n])  # noqa: B023 - run before the loop moves on
            return (time.perf_counter() - t0) / len(batches) * 1e6

        for backend in ("cpu",):
            cached, fresh, cold = [], [], []
            for _ in range(rounds):
                fn = stridec.compile(graph, backend=backend)
                for _ in range(1 + warm):
                    fn(*tensors[3])
                for n in batches:  # each input read once, as the cached pass finds them
                    for t in tensors[n]:
                        t.clone()
                fresh.append(per_call(fn))  # new sizes first, then the same sizes again
                cached.append(per_call(fn))
                assert fn.stats.codegen_runs == 1, fn.stats
                fn = stridec.compile(graph, backend=backend)
                fn(*tensors[3])
                cold.append(per_call(fn))
            rows.append((name, backend, statistics.median(cached), statistics.median(fresh),
                         statistics.median(cold)))
    return rows


def out_times(batch: int = 1024, calls: int = 50,
              rounds: int = 7) -> list[tuple[str, float, float]]:
    """(out, µs of `fn(x)`, µs of `fn(x, out=o)`) for the `nhwc` graph of `host_graphs`
    at N = `batch` on the `cpu` backend, one thread, both sides alternating round by
    round, medians of `rounds` means over `calls` calls, in CPU time of the process (on
    a VM shared with other jobs, wall time swings several-fold): `o` dense (the class
    plan's strides: the kernels write it), and `o` with pitched rows (copied into after
    the plan runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _out_times(batch, calls, rounds)
    finally:
        torch.set_num_threads(threads)


def _out_times(batch: int, calls: int, rounds: int) -> list[tuple[str, float, float]]:
    _, graph, arguments = host_graphs()[0]
    (x,) = arguments(batch)
    fn = stridec.compile(graph, backend="cpu")
    dense = torch.empty(batch, 6, 5, 8, dtype=torch.float16)
    pitched = torch.empty(batch, 6, 5, 12, dtype=torch.float16)[..., :8]
    rows = []
    for name, o in (("dense", dense), ("pitched", pitched)):
        plain, into = [], []
        for _ in range(rounds):
            for times, kwargs in ((plain, {}), (into, {"out": o})):
                fn(x, **kwargs)
                t0 = time.process_time()
                for _ in range(calls):
                    fn(x, **kwargs)
                times.append((time.process_time() - t0) / calls * 1e6)
        rows.append((name, statistics.median(plain), statistics.median(into)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="", help="only rows whose name contains this")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of every kernel call (both sides alike)")
    parser.add_argument("--scale", default="cpu", help="workload scale (bench/workloads.py)")
    parser.add_argument("--host", action="store_true",
                        help="also the host time of a new batch size of a planned class "
                             "against a cached call (a graph over a symbolic batch N)")
    parser.add_argument("--out", action="store_true",
                        help="also a call with out= against one without, over a symbolic "
                             "batch (a dense out, an out with pitched rows)")
    args = parser.parse_args(argv)
    if not cpu.available():
        print("no working C compiler: the cpu backend cannot run here")
        return 1
    print(f"{'row':34} {'runtime ms':>11} {'baked ms':>9} {'runtime/baked':>14}")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="stridec-baked-") as folder:
        for name, graph, inputs in rows(args.scale):
            if args.rows not in name:
                continue
            result = measure(name, graph, inputs, args.rounds, args.threads, folder)
            if result is None:
                continue
            runtime, baked = result
            ratios.append(runtime / baked)
            print(f"{name:34} {runtime:11.3f} {baked:9.3f} {runtime / baked:14.3f}", flush=True)
    if ratios:
        geomean = statistics.geometric_mean(ratios)
        print(f"{'geomean':34} {'':11} {'':9} {geomean:14.3f}   (target <= 1.05)")
    if args.host:
        print(f"\n{'graph':8} {'backend':10} {'cached call us':>15} "
              f"{'new size in class us':>21} {'new/cached':>11} {'new size, first calls us':>25}")
        for name, backend, cached, fresh, cold in host_times():
            print(f"{name:8} {backend:10} {cached:15.1f} {fresh:21.1f} {fresh / cached:11.2f} "
                  f"{cold:25.1f}")
    if args.out:
        print(f"\n{'out':8} {'fn(x) us':>9} {'fn(x, out=o) us':>16}")
        for name, plain, into in out_times():
            print(f"{name:8} {plain:9.1f} {into:16.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
