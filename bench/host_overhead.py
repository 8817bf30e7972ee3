"""stridec's own host (CPU) cost of a cached call, split into its parts (the target in
docs/design.md#performance-targets: "the host overhead of a cached one-kernel call is
<= 15 µs"; a benchmark, never a timed test).

    python bench/host_overhead.py                    # 20,000 calls x 5 repeats
    python bench/host_overhead.py --calls 5000 --repeats 3 --no-cuda
    python bench/host_overhead.py --cold             # caches flushed before each call

Two graphs over one 16x16 float32 input (the tensor of bench/run.py's
`host_overhead_16x16` row), each called once to compile, then timed while cached:

- **view** `x.t()`: a view of the input, no kernel;
- **copy** `x.t().contiguous()`: one copy kernel. On the CPU its launch goes through
  Triton's interpreter (about a millisecond of emulation, nothing to do with a GPU), so
  this script replaces the interpret backend's launcher (`InterpretedKernel`) by a
  function that does nothing (`unittest.mock.patch.object`, inside this script only,
  after checking one real result): what remains is stridec's own work around the launch.

Each number is µs per call: a loop of `--calls` back-to-back calls between two
`time.perf_counter` reads, repeated `--repeats` times; the table shows the best and the
median of the repeats. Python's cyclic garbage collector is paused while a loop runs
(after a `gc.collect()`), as `timeit` does, except in the row marked "GC on". The rows
under a cached call time its parts on their own (the same functions the call runs, on the
same arguments): the call key (every argument property the checks read), the cache hit
(dictionary read, the storage re-check, the LRU and stats update under the lock),
the runner (`stridec.runtime.launch`) less its output views (flat storages, buffers,
launch arguments, the stubbed launch), the output views (`torch.as_strided`), and what
is left (the call's own glue). The last rows time the full path a cache miss takes
(`_check`, then `_target` and `_lookup`): what every cached call paid before the
call-key cache.

On a machine with CUDA the same two graphs run for real on a 16x16 CUDA tensor (backend
auto, Triton): the host clock over `--calls` calls (the launches are asynchronous), and
the wall time to one `torch.cuda.synchronize()` after them.

The `fn(x, out=o)` rows time a cached call writing into a preallocated 16x16 tensor
(docs/outputs.md): its call key adds each out's layout and which tensors share a storage
(`out_key`), and no output is allocated. On the CPU only the copy graph has the row
(its launch is stubbed; the view graph's `out=` call launches a real copy).

`--cold` times what the CPU race sees instead (`bench/run.py --cpu` flushes the caches
before every timed call, so the Python side of a call starts cold too): a cached call of
two small graphs on the native backend, a 64 x 64 float32 slice of a 128 x 128 tensor
(`x[::2, 32:96].contiguous()`) and a three-way float16 cat along dim 1, each as
`fn(*xs)`, `fn(*xs, out=o)`, eager allocating and eager into `o` (`o.copy_(view)`,
`torch.cat(..., out=o)`), the four taken in turn, the order rotated each round, a
`--flush-mb` read (64 MB) before every call; µs per call, the best and the median of
`--rounds` calls each (docs/cpu.md, "Where the targets stand", has the numbers).

Measured without a GPU, on the development machine (2 CPU cores, shared; torch 2.13 CPU,
Python 3.11), `python bench/host_overhead.py`: µs per cached call, best of 5 x 20,000:

| cached call                 | before | after |
|-----------------------------|-------:|------:|
| view graph (no launch)      |   8.9  |  4.3  |
| copy graph, launch stubbed  |  12.3  |  8.6  |

After, the 8.6 µs of the copy graph: call key 0.8, cache hit 1.15, the runner less its
output view 4.3 (the input's `flat_storage` about 1.4 and the buffer's `torch.empty`
about 1.0 of it, each with its tensor's release), the output view 1.5, glue 0.85.
Before, every call paid the full path instead of the first two: argument checks 2.5,
specialization key and lookup 2.1. "before" is this script on the tree before the
call-key cache (its fast-path rows print "-"); runs vary by about 5 % here.

The `copy (cpu)` rows time the same copy graph on the native backend, its C kernel run
for real (docs/cpu.md, "Build, cache, load"). On the Zen 3 EPYC without AVX-512 (2 cores
shared with other jobs, load 5), four processes of the tree before and after
alternating, each the best of 60 loops of 1,000 calls: `fn(x)` went from 10.25 to
5.70 µs when a cached call's key became one pass that reads the storages too
(`plain_call_key`, as the `out=` key does), the hit ran in `__call__` itself, and an output
that is a whole buffer came from one `torch.empty_strided` instead of `torch.empty` and
`torch.as_strided`; `fn(x, out=o)` stayed at 6.1 µs.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import stridec  # noqa: E402
from stridec.ir.dtypes import as_dtype  # noqa: E402
from stridec.runtime import compile as compile_module  # noqa: E402

try:
    from stridec.runtime import call_path as call_path_module  # noqa: E402
except ImportError:  # a tree from before the hit path had a module of its own
    call_path_module = None  # type: ignore[assignment]
from stridec.runtime import launch  # noqa: E402
from stridec.runtime.backends.interpret import InterpretedKernel  # noqa: E402

SIZES = (16, 16)


def view_graph() -> stridec.Graph:
    g = stridec.Graph("host_view")
    g.output(g.input("x", SIZES, "float32").t())
    return g


def copy_graph() -> stridec.Graph:
    g = stridec.Graph("host_copy")
    g.output(g.input("x", SIZES, "float32").t().contiguous())
    return g


def per_call_us(call: Callable[[], Any], calls: int, repeats: int,
                gc_off: bool = True) -> tuple[float, float]:
    """(best, median) over `repeats` loops of µs per call: `calls` back-to-back calls
    between two clock reads; the collector paused during each loop when `gc_off`."""
    call()
    samples = []
    for _ in range(repeats):
        gc.collect()
        if gc_off:
            gc.disable()
        try:
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            samples.append((time.perf_counter() - t0) / calls * 1e6)
        finally:
            gc.enable()
    return min(samples), statistics.median(samples)


def _stub_run(self: InterpretedKernel, grid: tuple[int, ...], *args: Any,
              **constexprs: Any) -> None:
    """Stands in for the interpret backend's launcher: the launch itself is not stridec's
    cost."""


Row = tuple[str, str, tuple[float, float | None] | None]  # graph, what, (best, median)


def cpu_rows(name: str, fn: stridec.CompiledGraph, x: torch.Tensor, calls: int,
             repeats: int, with_out: bool = False) -> list[Row]:
    """The rows of one graph on the CPU: the cached call, its parts, the full path."""
    args = (x,)
    device = x.device
    program = fn.plan_for(x).program

    def time_it(call: Callable[[], Any], gc_off: bool = True) -> tuple[float, float]:
        return per_call_us(call, calls, repeats, gc_off)

    def slot(k: int) -> torch.Tensor:
        if k < program.n_inputs:
            return x
        buffer = program.buffers[k - program.n_inputs]
        return torch.empty(buffer.elements, dtype=as_dtype(buffer.dtype).torch)

    slots = {o.slot: slot(o.slot) for o in program.outputs}

    def output_views() -> list[torch.Tensor]:
        return [torch.as_strided(slots[o.slot], o.sizes, o.strides, o.offset)
                for o in program.outputs]

    total = time_it(lambda: fn(*args))
    out = torch.empty(program.outputs[0].sizes, dtype=x.dtype)
    rows: list[Row] = [
        (name, "cached call fn(x)", total),
        ("", "cached call fn(x), GC on", time_it(lambda: fn(*args), gc_off=False)),
        ("", "cached call fn(x, out=o), preallocated",
         time_it(lambda: fn(*args, out=out)) if with_out and _has_out(fn) else None),
    ]
    # Where the call key is: the hit path's module, or (older trees) compile's.
    call_key = (getattr(call_path_module, "plain_call_key", None)
                or getattr(compile_module, "_plain_call", None))
    parts: list[tuple[str, tuple[float, float | None] | None]] = []
    if call_key is not None:
        key = call_key(args)[0]
        hits = fn._hits
        parts += [("call key and pointers (plain_call_key)", time_it(lambda: call_key(args))),
                  ("cache hit (dictionary read)", time_it(lambda: hits.get(key)))]
    else:
        parts += [("call key and pointers (plain_call_key)", None),
                  ("cache hit (dictionary read)", None)]
    runner = launch.runner(program, "interpret")
    run = time_it(lambda: launch.run_with(runner, args, device))
    views = time_it(output_views)
    # A difference is taken of the best loops only (the least disturbed): no median.
    parts += [("runner less output views", (run[0] - views[0], None)),
              ("output views (torch.as_strided)", views)]
    if parts[0][1] is not None and parts[1][1] is not None:
        parts.append(("glue (the rest of __call__)",
                      (total[0] - sum(p[1][0] for p in parts if p[1] is not None), None)))
    rows += [("", f"  {label}", value) for label, value in parts]
    rows += [
        ("", "full path: argument checks (_check)", time_it(lambda: fn._check(args))),
        ("", "full path: spec key + lookup (_target, _lookup)",
         time_it(lambda: fn._lookup(fn._specs.key_of(args), device, fn._target(device)))),
    ]
    return rows


def _has_out(fn: stridec.CompiledGraph) -> bool:
    """Whether this tree's calls take `out=` (absent before it: the row prints "-")."""
    import inspect

    return "out" in inspect.signature(fn.__call__).parameters


def cuda_rows(calls: int, repeats: int) -> list[Row]:
    """The real cached call on a tiny CUDA tensor: host clock, and wall time to a sync."""
    rows: list[Row] = []
    x = torch.randn(SIZES, device="cuda")
    for name, graph, want in [("view (cuda)", view_graph(), lambda t: t.t()),
                              ("copy (cuda)", copy_graph(), lambda t: t.t().contiguous())]:
        fn = stridec.compile(graph)
        if not torch.equal(fn(x), want(x)):
            raise SystemExit(f"{name}: stridec's output differs from torch's")
        for _ in range(100):  # warm: Triton's launcher, CUDA's caches
            fn(x)
        torch.cuda.synchronize()
        host, wall = [], []
        for _ in range(repeats):
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn(x)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
            finally:
                gc.enable()
            host.append((t1 - t0) / calls * 1e6)
            wall.append((t2 - t0) / calls * 1e6)
        rows += [(name, "cached call, host clock", (min(host), statistics.median(host))),
                 ("", "cached call, wall to one sync", (min(wall), statistics.median(wall)))]
        out = torch.empty_like(want(x))
        if _has_out(fn):
            if not torch.equal(fn(x, out=out), want(x)):
                raise SystemExit(f"{name}: stridec's out= result differs from torch's")
            best, median = per_call_us(lambda: fn(x, out=out), calls, repeats)  # noqa: B023
            rows.append(("", "cached call fn(x, out=o), host clock", (best, median)))
    return rows


def native_rows(x: torch.Tensor, calls: int, repeats: int) -> list[Row]:
    """The copy graph on the native backend (`backend="cpu"`, its C kernel run for real:
    a 16 x 16 float32 transpose, one thread's worth), cached: `fn(x)` and `fn(x, out=o)`,
    each checked against torch once; none where no C compiler is found."""
    from stridec.runtime.backends import cpu

    if not cpu.available():
        return []
    fn = stridec.compile(copy_graph(), backend="cpu")
    out = torch.full((16, 16), -1.0)
    if not (torch.equal(fn(x), x.t()) and torch.equal(fn(x, out=out), x.t())):
        raise SystemExit("copy (cpu): stridec's output differs from torch's")
    return [("copy (cpu)", "cached call fn(x)", per_call_us(lambda: fn(x), calls, repeats)),
            ("", "cached call fn(x, out=o), preallocated",
             per_call_us(lambda: fn(x, out=out), calls, repeats))]


def slice_graph() -> stridec.Graph:
    g = stridec.Graph("host_slice")
    g.output(g.input("x", SLICE_SIZES, "float32")[::2, 32:96].contiguous())
    return g


def cat_graph() -> stridec.Graph:
    g = stridec.Graph("host_cat")
    g.output(stridec.cat([g.input(f"x{k}", sizes, "float16")
                          for k, sizes in enumerate(CAT_SIZES)], 1))
    return g


SLICE_SIZES = (128, 128)  # x[::2, 32:96]: a 64 x 64 float32 slice
CAT_SIZES = ((2, 3, 5, 7), (2, 1, 5, 7), (2, 4, 5, 7))  # a three-way float16 cat along dim 1


def cold_cases() -> list[tuple[str, stridec.CompiledGraph, list[torch.Tensor],
                               Callable[..., torch.Tensor], Callable[..., torch.Tensor],
                               torch.Tensor]]:
    """(name, fn, inputs, eager, eager into an out, out) of the small slice and the small
    cat, each checked against torch once (allocating and into `out=`)."""
    x = torch.randn(SLICE_SIZES)
    xs = [torch.randn(sizes).half() for sizes in CAT_SIZES]
    cases = [("slice 64x64 f32", stridec.compile(slice_graph()), [x],
              lambda t: t[::2, 32:96].contiguous(),
              lambda o, t: o.copy_(t[::2, 32:96])),
             ("cat of 3, f16", stridec.compile(cat_graph()), xs,
              lambda *ts: torch.cat(ts, 1),
              lambda o, *ts: torch.cat(ts, 1, out=o))]
    found = []
    for name, fn, inputs, eager, into in cases:
        want = eager(*inputs)
        out = torch.full_like(want, -1)
        if not (torch.equal(fn(*inputs), want) and torch.equal(fn(*inputs, out=out), want)):
            raise SystemExit(f"{name}: stridec's output differs from torch's")
        found.append((name, fn, inputs, eager, into, out))
    return found


def cold_rows(rounds: int, flush_mb: int) -> list[Row]:
    """µs per cached call with cold caches, as the CPU race times its rows: before every
    call a `flush_mb` MB read evicts what the last call left in the caches (Python's
    objects and code included); the calls of a case (stridec `fn(*xs)`, `fn(*xs, out=o)`,
    eager allocating and into `o`) taken in turn, the order rotated each round; the
    median and the best of `rounds` calls each."""
    flush = torch.ones(max(flush_mb, 1) << 17, dtype=torch.int64) if flush_mb else None
    rows: list[Row] = []
    for name, fn, inputs, eager, into, out in cold_cases():
        calls = {"stridec fn(*xs)": lambda: fn(*inputs),  # noqa: B023
                 "stridec fn(*xs, out=o)": lambda: fn(*inputs, out=out),  # noqa: B023
                 "eager": lambda: eager(*inputs),  # noqa: B023
                 "eager into o": lambda: into(out, *inputs)}  # noqa: B023
        names = list(calls)
        samples: dict[str, list[float]] = {n: [] for n in names}
        for call in calls.values():
            call()
        gc.collect()
        gc.disable()
        try:
            for r in range(rounds):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    if flush is not None:
                        flush.sum()
                    t0 = time.perf_counter()
                    calls[n]()
                    samples[n].append((time.perf_counter() - t0) * 1e6)
        finally:
            gc.enable()
        rows += [(name if k == 0 else "", n, (min(samples[n]), statistics.median(samples[n])))
                 for k, n in enumerate(names)]
    return rows


def channel_shuffle(x: torch.Tensor) -> torch.Tensor:
    """ShuffleNet's channel shuffle, as torchvision writes it (2 groups)."""
    b, c, h, w = x.shape
    return x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


def torch_op_rows(calls: int, rounds: int, inductor: bool) -> list[Row]:
    """A cached call of the torch operator against the plain call and eager, on
    ShuffleNet's channel shuffle of a (1, 116, 14, 14) float32 tensor (cpu backend):
    eager torch; `fn(x)`; `op(x)`; `torch.ops.<ns>.<name>(x)`; the floors of torch's
    own dispatch (an operator doing nothing, defined with `torch.library.Library` and
    with `torch.library.custom_op`, with and without autograd); and inside
    `torch.compile(fullgraph=True)`: a function calling the operator (aot_eager, and
    Inductor where `inductor`) against Inductor compiling the torch code, and a compiled
    view (`x.view(-1)`: what a compiled call costs with nothing in it). Each row is the
    best and the median of `rounds` loops of `calls` calls, the rows taken in turn."""
    from stridec.torch import register

    x = torch.randn(1, 116, 14, 14)
    fn = stridec.compile(stridec.trace(channel_shuffle, x), backend="cpu")
    op = register(fn, "host_overhead::channel_shuffle", backend="cpu")
    want = channel_shuffle(x)
    out = fn(x)
    lib = torch.library.Library("host_overhead", "FRAGMENT")
    lib.define("nothing(Tensor x) -> Tensor")
    lib.impl("nothing", lambda t: out, "CPU")

    @torch.library.custom_op("host_overhead::nothing_custom", mutates_args=())
    def nothing_custom(t: torch.Tensor) -> torch.Tensor:
        return out

    @torch.library.custom_op("host_overhead::nothing_autograd", mutates_args=())
    def nothing_autograd(t: torch.Tensor) -> torch.Tensor:
        return out

    nothing_autograd.register_autograd(lambda ctx, g: g)
    calls_of: dict[str, Callable[[], Any]] = {
        "eager torch code": lambda: channel_shuffle(x),
        "stridec fn(x)": lambda: fn(x),
        "op(x)": lambda: op(x),
        "torch.ops.host_overhead.channel_shuffle(x)": lambda: op.overload(x),
        "floor: Library op doing nothing": lambda: torch.ops.host_overhead.nothing(x),
        "floor: custom_op doing nothing": lambda: nothing_custom(x),
        "floor: custom_op + autograd doing nothing": lambda: nothing_autograd(x),
    }
    compiled = [("aot_eager", "compiled: op(x), aot_eager", lambda t: op(t))]
    if inductor:
        compiled += [("inductor", "compiled: op(x), inductor", lambda t: op(t)),
                     ("inductor", "compiled: torch code, inductor", channel_shuffle),
                     ("inductor", "compiled: x.view(-1), inductor", lambda t: t.view(-1))]
    for backend, name, f in compiled:
        calls_of[name] = functools.partial(torch.compile(f, fullgraph=True, backend=backend), x)
    for name, call in calls_of.items():
        got = call()
        if "floor" not in name and "view" not in name and not torch.equal(got, want):
            raise SystemExit(f"{name}: the result differs from torch's")
    samples: dict[str, list[float]] = {n: [] for n in calls_of}
    names = list(calls_of)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                call = calls_of[n]
                t0 = time.perf_counter()
                for _ in range(calls):
                    call()
                samples[n].append((time.perf_counter() - t0) / calls * 1e6)
    finally:
        gc.enable()
    return [("shuffle" if k == 0 else "", n, (min(v), statistics.median(v)))
            for k, (n, v) in enumerate(samples.items())]


def print_table(rows: list[Row], calls: int, repeats: int) -> None:
    print(f"stridec host overhead: µs per call, best and median of {repeats} loops of "
          f"{calls} calls (GC paused while timing unless marked)")
    print(f"{'graph':<14} {'what':<50} {'best':>7} {'median':>7}")
    for graph, what, value in rows:
        best = "-" if value is None else f"{value[0]:.2f}"
        median = "-" if value is None or value[1] is None else f"{value[1]:.2f}"
        print(f"{graph:<14} {what:<50} {best:>7} {median:>7}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000, help="calls per timed loop")
    p.add_argument("--repeats", type=int, default=5, help="timed loops per row")
    p.add_argument("--no-cuda", action="store_true", help="skip the CUDA rows")
    p.add_argument("--cold", action="store_true",
                   help="instead: cached calls with the caches flushed before each (the "
                        "small slice and cat, native C kernels, against eager)")
    p.add_argument("--rounds", type=int, default=100, help="with --cold: calls per system")
    p.add_argument("--flush-mb", type=int, default=64,
                   help="with --cold: MB read before each call (0: no flush, warm)")
    p.add_argument("--torch-op", action="store_true",
                   help="instead: the torch operator's cached call against fn(x) and eager, "
                        "also inside torch.compile (channel shuffle, cpu backend)")
    p.add_argument("--no-inductor", action="store_true",
                   help="with --torch-op: no Inductor rows (each compiles C++ for a while)")
    args = p.parse_args(argv)
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    if args.torch_op:
        calls = min(args.calls, 500)
        rows = torch_op_rows(calls, args.rounds, not args.no_inductor)
        print_table(rows, calls, args.rounds)
        return 0
    if args.cold:
        print(f"cold: a {args.flush_mb} MB read before each call; µs per call, best and "
              f"median of {args.rounds} calls per system, the order rotated each round")
        print(f"{'case':<16} {'call':<28} {'best':>7} {'median':>7}")
        for case, what, value in cold_rows(args.rounds, args.flush_mb):
            assert value is not None and value[1] is not None
            print(f"{case:<16} {what:<28} {value[0]:>7.1f} {value[1]:>7.1f}")
        return 0

    x = torch.randn(SIZES)
    view = stridec.compile(view_graph(), backend="interpret")
    copy = stridec.compile(copy_graph(), backend="interpret")
    # One real call each (the copy through Triton's interpreter), checked against torch.
    if not (torch.equal(view(x), x.t()) and torch.equal(copy(x), x.t().contiguous())):
        raise SystemExit("stridec's output differs from torch's")
    if _has_out(copy):
        for fn in (view, copy):
            o = torch.full((16, 16), -1.0)
            if not torch.equal(fn(x, out=o), x.t()):
                raise SystemExit("stridec's out= result differs from torch's")
    rows = cpu_rows("view", view, x, args.calls, args.repeats)
    with mock.patch.object(InterpretedKernel, "__call__", _stub_run):
        rows += cpu_rows("copy, stubbed", copy, x, args.calls, args.repeats, with_out=True)
    rows += native_rows(x, args.calls, args.repeats)
    if torch.cuda.is_available() and not args.no_cuda:
        rows += cuda_rows(args.calls, args.repeats)
    print_table(rows, args.calls, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
