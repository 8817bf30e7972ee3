"""stridec's benchmark suite (docs/design.md#performance-targets), one command.

    python bench/run.py                      # on a GPU: every row; results in bench/results/
    python bench/run.py --only 'pack_*'      # some rows (fnmatch patterns or substrings)
    python bench/run.py --smoke              # on the CPU: tiny sizes, interpret backend,
                                             # every output checked against torch, no timing
    python bench/run.py --cpu                # the native cpu backend on the CPU rows
    python bench/run.py --list               # the rows
    python bench/run.py --cpu --suite ttc    # a copy suite: ttc, models, random, symbolic
    python bench/run.py --cpu --suite models --quick --only 'swin_roll_*'  # a row, quickly

On a GPU each row runs side by side in this one process: stridec, torch eager, torch.compile
(Inductor) of the same eager function, and a `dst.copy_(src)` of the same byte count (the
practical bandwidth limit). Times are medians of `triton.testing.do_bench` (CUDA events,
L2 flushed before every repeat, warm-up excluded). Each row's output is checked against its
oracle before it is timed. Then the host overhead of a cached call on a tiny tensor, and
the compile time of a new specialization in a fresh process with an empty cache (cold) and
in a second fresh process over the same cache (warm). Writes
`bench/results/<date>-<gpu>.{json,md,png}`; bench/README.md explains every column.

With `--cpu` the rows that have a CPU shape run on the CPU through the `cpu` backend,
outputs preallocated, beside torch eager, torch.compile (Inductor's C++ backend) and a
same-run `dst.copy_(src)` of the row's bytes (memcpy) and the same copy with streaming
stores (the fastest plain copy, `bench/stream_copy.py`; for a row that writes more than it
reads, also a streaming write of its output's bytes): the calls of a row alternate, in a
rotating order, for `--cpu-repeats` rounds, and each system's median is reported.
Before every timed call the caches are flushed by reading a buffer twice the size of the
last-level cache (`--cpu-flush-mb`), so every system starts cold, after the same
predecessor, whatever ran before it.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import hashlib
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import stridec  # noqa: E402
from bench import report as reporting  # noqa: E402
from bench.cases import RANDOM_ROWS, SUITES  # noqa: E402
from bench.stream_copy import stream_copy, stream_fill  # noqa: E402
from bench.workloads import (  # noqa: E402
    COMPILE_WORKLOAD,
    HOST_OVERHEAD,
    WORKLOADS,
    Mismatch,
    Workload,
    assert_same,
    by_name,
)
from stridec.compiler.host import read_caches  # noqa: E402
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402

RESULTS = ROOT / "bench" / "results"
# Progress marks: a system timed (stridec, eager, torch.compile; a suite's symbolic and
# static stridec plans).
MARKS = {"stridec": "s", "eager": "e", "compile": "t", "symbolic": "y", "static": "p",
         "tuned": "u"}
COMPILE_ROW = "compile_time"
QUANTILES = (0.2, 0.5, 0.8)
SCHEMA = "stridec-bench/1"


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Milliseconds per call: the median and the 20th / 80th percentiles (the spread)."""

    ms: float
    q20: float
    q80: float


Timer = Callable[[Callable[[], Any]], Timing]


def cuda_timer(warmup_ms: float, rep_ms: float) -> Timer:
    """`triton.testing.do_bench`: one call, `warmup_ms` of untimed calls, then `rep_ms` of
    calls each between two CUDA events with a 256 MB buffer zeroed before it (L2 flush)."""
    import triton.testing

    def time_it(fn: Callable[[], Any]) -> Timing:
        q = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=list(QUANTILES))
        return Timing(ms=q[1], q20=q[0], q80=q[2])

    return time_it


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def wall_timer(repeats: int) -> Timer:
    """The host clock around each call, after one untimed call (CPU runs only: there is no
    asynchronous device, and no cache flush)."""

    def time_it(fn: Callable[[], Any]) -> Timing:
        fn()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return Timing(statistics.median(samples), _quantile(samples, 0.2), _quantile(samples, 0.8))

    return time_it


@dataclass
class Session:
    """What every row of one run shares: device, scale, backend, timer, baselines."""

    device: torch.device
    scale: str
    backend: str
    timer: Timer | None
    torch_compile: bool
    host_calls: int = 200
    host_batches: int = 15
    interleave: int = 0  # > 0: rounds of interleaved wall-clock timing (CPU runs)
    flush_mb: int = 0  # > 0: MB read before each interleaved timed call (cache flush)
    # The clock of interleaved timing: the host's, or the calling thread's CPU time (a
    # suite run on one thread, not slowed by the time other processes hold the core).
    clock: Callable[[], float] = time.perf_counter
    # Seconds of measured choice (`stridec.compile(tune=...)`) for a second stridec
    # system of each suite row, "tuned"; None: not timed.
    tune: float | None = None
    baselines: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def release(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def baseline(self, kind: str, total_bytes: int) -> dict[str, Any]:
        """The same-run limit for `total_bytes` moved, measured once per size:
        "copy" = `dst.copy_(src)` of total/2 bytes each way (read + write = total);
        "fill" = `dst.fill_(7)` of total bytes (write only, for the Philox rows)."""
        key = (kind, total_bytes)
        if key not in self.baselines:
            assert self.timer is not None
            gen = torch.Generator(device=self.device).manual_seed(1)
            if kind == "copy":
                n = max(total_bytes // 2, 1)
                src = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen,
                                    device=self.device)
                dst = torch.empty_like(src)
                t = self.timer(lambda: dst.copy_(src))
                moved = 2 * n
                del src, dst
            else:
                dst = torch.empty(max(total_bytes, 1), dtype=torch.uint8, device=self.device)
                t = self.timer(lambda: dst.fill_(7))
                moved = dst.numel()
                del dst
            self.release()
            self.baselines[key] = {"kind": kind, "bytes": moved, "ms": t.ms, "ms_q20": t.q20,
                                   "ms_q80": t.q80, "gbps": moved / (t.ms * 1e6)}
        return self.baselines[key]


# --------------------------------------------------------------------------- progress


class Progress:
    """One line per row: a bar of rows done, the row, a mark per stage, then its summary."""

    def __init__(self, total: int, width: int = 20) -> None:
        self.total, self.done, self.width = total, 0, width
        self.started = time.perf_counter()

    def begin(self, name: str, detail: str) -> None:
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        print(f"[{bar}] {self.done + 1:>2}/{self.total} {name:<28} {detail} ", end="", flush=True)
        self.row_started = time.perf_counter()

    def step(self, mark: str) -> None:
        print(mark, end="", flush=True)

    def end(self, summary: str) -> None:
        self.done += 1
        row_s = time.perf_counter() - self.row_started
        total_s = time.perf_counter() - self.started
        print(f" {summary}  [{row_s:.1f} s, {total_s / 60:.1f} min]", flush=True)


# --------------------------------------------------------------------------- rows


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def _error(e: BaseException, stage: str) -> str:
    return f"{stage}: {type(e).__name__}: {e}"


def _time_system(call: Callable[[], Any], s: Session, total: int) -> dict[str, Any]:
    try:
        assert s.timer is not None
        t = s.timer(call)
    except Exception as e:  # a system that fails to run is reported, the row goes on
        return {"error": _error(e, "timing")}
    return {"ms": t.ms, "ms_q20": t.q20, "ms_q80": t.q80, "gbps": total / (t.ms * 1e6)}


def _compiled(eager: Callable[..., Any], inputs: list[Any], w: Workload, s: Session,
              entry: dict[str, Any], returns: bool = True) -> Callable[..., Any] | None:
    """torch.compile (Inductor, default mode) of the eager function; its first call (the
    compilation) is timed apart, and its output checked against eager's (an `into`
    function, `returns=False`, is checked by its first argument, the outputs)."""
    torch._dynamo.reset()  # fresh caches: rows share eager code objects
    try:
        compiled = torch.compile(eager)
        t0 = time.perf_counter()
        out = compiled(*inputs)
        s.sync()
        entry["compile_s"] = time.perf_counter() - t0
    except Exception as e:
        entry["error"] = _error(e, "torch.compile")
        return None
    if w.oracle == "eager":
        try:
            if not returns:
                got_all = tuple(o.clone() for o in inputs[0])
                eager(*inputs)
                out, want_all = got_all, tuple(inputs[0])
            else:
                want_all = _as_tuple(eager(*inputs))
            for k, (got, want) in enumerate(zip(_as_tuple(out), want_all, strict=True)):
                assert_same(got, want, f"torch.compile output {k}")
            entry["correct"] = True
        except (Mismatch, ValueError) as e:
            entry["correct"], entry["mismatch"] = False, str(e)
    return compiled


def _new_row(kind: str, w: Workload, s: Session) -> dict[str, Any]:
    return {"kind": kind, "name": w.name, "description": w.description,
            "shape": list(w.shape(s.scale)), "shape_text": w.shape_text(w.shape(s.scale)),
            "dtype": w.dtype, "note": w.note,
            "oracle": w.oracle, "status": "error", "error": None, "kernels": None,
            "strategies": [], "index_bits": [], "systems": {}}


def _run_stridec(w: Workload, s: Session, row: dict[str, Any]) -> tuple | None:
    """Build, compile, run and check the row's graph; (fn, inputs, outputs) or None when a
    stage failed (the row then says which stage, with the error)."""
    stage = "build"
    try:
        graph = w.graph(s.scale)
        stage = "inputs"
        inputs = w.inputs(s.scale, s.device)
        stage = "compile"
        fn = stridec.compile(graph, backend=s.backend)
        plan = fn.plan_for(*inputs)
        row["kernels"] = plan.launches
        row["strategies"] = [k.strategy for k in plan.kernels]
        row["index_bits"] = [k.index_bits for k in plan.kernels]
        stage = "run"
        outputs = _as_tuple(fn(*inputs))
        s.sync()
        stage = "check"
        w.check(s.scale, graph, inputs, outputs)
        row["status"] = "ok"
    except Mismatch as e:
        row["status"], row["error"] = "mismatch", str(e)
    except Exception as e:
        row["error"] = _error(e, stage)
        return None
    if row["status"] == "ok" and row["kernels"] != w.kernels:
        row["status"] = "kernels"
        row["error"] = f"{row['kernels']} kernel launches; expected {w.kernels}"
    return fn, inputs, outputs


def _preallocated(w: Workload, s: Session, fn: Any, inputs: list[torch.Tensor],
                  outputs: tuple[torch.Tensor, ...], row: dict[str, Any]) -> dict | None:
    """The row's calls with outputs preallocated, once checked against the oracle: stridec
    `fn(*inputs, out=outs)`, eager `into(outs, *inputs)` (`out.copy_(view)`), and the same
    `into` for torch.compile; one set of contiguous outputs shared by all three (each
    system overwrites it). A fresh output costs page faults, not bandwidth: on a CPU a
    50 MB allocation costs more than the copy. None where the row has no `into` (the
    systems then allocate, as the row's `preallocated` says)."""
    into = w.into_fn(s.scale)
    if into is None:
        row["preallocated"] = False
        return None
    outs = tuple(torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs)
    if w.state_in_place:  # the state is its own out: a loop that updates it in place
        state = inputs[0].clone()
        fn(state, *inputs[1:], out=(*outs[:-1], state))
        w.check(s.scale, w.graph(s.scale), [inputs[0]], (*outs[:-1], state))
        stridec_outs = (*outs[:-1], inputs[0])
    else:
        fn(*inputs, out=outs)
        s.sync()
        w.check(s.scale, w.graph(s.scale), inputs, outs)
        stridec_outs = outs
    if w.oracle == "eager":
        into(outs, *inputs)
        s.sync()
        w.check(s.scale, w.graph(s.scale), inputs, outs)
    row["preallocated"] = True
    return {"stridec": lambda: fn(*inputs, out=stridec_outs),
            "eager": lambda: into(outs, *inputs),
            "compile_of": (into, outs)}


def measure_bandwidth(w: Workload, s: Session, progress: Progress) -> dict[str, Any]:
    row = _new_row("bandwidth", w, s)
    row.update(bytes_read=None, bytes_written=None, bytes_total=None, copy=None, fill=None,
               stream=None, stream_fill=None, pct_fill=None, vs_eager=None, vs_compile=None,
               bound_vs_eager=None)
    ran = _run_stridec(w, s, row)
    progress.step("+" if row["status"] == "ok" else "!")
    if ran is None:
        return row
    fn, inputs, outputs = ran
    read, written = w.bytes_moved(inputs, outputs)
    total = read + written
    row.update(bytes_read=read, bytes_written=written, bytes_total=total)
    try:
        pre = _preallocated(w, s, fn, inputs, outputs, row)
    except Mismatch as e:
        row["status"], row["error"] = "mismatch", f"out=: {e}"
        return row
    del ran, outputs  # up to 6.4 GiB (NCHW64 of C = 3): not kept through the timing
    eager = w.eager_fn(s.scale)
    calls: dict[str, Callable[[], Any]] = {"stridec": lambda: fn(*inputs),
                                           "eager": lambda: eager(*inputs)}
    if pre is not None:
        calls = {"stridec": pre["stridec"], "eager": pre["eager"]}
    compile_entry: dict[str, Any] = {}
    if s.torch_compile:
        if pre is not None:
            into, outs = pre["compile_of"]
            compiled = _compiled(into, [outs, *inputs], w, s, compile_entry, returns=False)
        else:
            compiled = _compiled(eager, inputs, w, s, compile_entry)
        progress.step("i")
        if compiled is not None:
            if pre is not None:
                calls["compile"] = lambda: compiled(outs, *inputs)
            else:
                calls["compile"] = lambda: compiled(*inputs)
    if s.interleave:
        _time_interleaved(calls, total, written, s, row, progress)
    elif s.timer is not None:
        copy = s.baseline("copy", total)
        row["copy"] = {"ms": copy["ms"], "gbps": copy["gbps"], "bytes": copy["bytes"]}
        for name, call in calls.items():
            entry = _time_system(call, s, total)
            if "gbps" in entry:
                entry["pct_copy"] = 100.0 * entry["gbps"] / copy["gbps"]
            row["systems"][name] = entry
            progress.step(MARKS[name])
        if w.baseline == "fill":
            fill = s.baseline("fill", total)
            row["fill"] = {"ms": fill["ms"], "gbps": fill["gbps"], "bytes": fill["bytes"]}
            if "gbps" in row["systems"]["stridec"]:
                row["pct_fill"] = 100.0 * row["systems"]["stridec"]["gbps"] / fill["gbps"]
        base = row["systems"]["stridec"].get("ms")
        for name, key in (("eager", "vs_eager"), ("compile", "vs_compile")):
            other = row["systems"].get(name, {}).get("ms")
            row[key] = other / base if other and base else None
    if compile_entry:
        row["systems"].setdefault("compile", {}).update(compile_entry)
    return row


def last_level_cache_mb() -> int:
    """The largest cache in MB as sysfs reports it (`host.read_caches`: the whole L3, not
    the share the planner counts on, so that a flush evicts all of it), or 32 where
    unknown."""
    caches = read_caches()
    size = (caches.l3 or caches.l2) if caches is not None else 0
    return max(size >> 20, 1) if size else 32


def _flush_buffer(mb: int) -> torch.Tensor | None:
    """An int64 buffer of `mb` MB, written once; reading it evicts the row's tensors."""
    return torch.ones(mb << 17, dtype=torch.int64) if mb > 0 else None


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of `n` systems for successive rounds in which every system runs right after
    every other one equally often (a Williams design): the flush before each call empties
    the caches, not the branch predictors, so a system timed after one running the same
    code would otherwise gain on the others for the whole row."""
    base, lo, hi = [0], 1, n - 1
    while len(base) < n:
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    orders = [[(b + i) % n for b in base] for i in range(n)]
    return orders if n % 2 == 0 else orders + [order[::-1] for order in orders]


def _time_interleaved(calls: dict[str, Callable[[], Any]], total: int, written: int,
                      s: Session, row: dict[str, Any], progress: Progress,
                      instances: dict[str, str] | None = None) -> None:
    """CPU timing: every system of the row, a `dst.copy_(src)` of `total / 2` bytes
    each way (memcpy) and the same copy with streaming stores (`bench/stream_copy.py`)
    called in turn, each round in another order of `balanced_orders`, `s.interleave`
    rounds after one untimed call each; medians, each system's ratios to memcpy, eager and
    torch.compile, and eager's time over the streaming copy's (the most a copy of the
    row's bytes could gain on eager). A row that writes more than it reads (`written` of
    `total` bytes) also times a streaming write of its `written` bytes, and its bound is
    eager's time over the slower of the two: no kernel writes those bytes faster.
    `instances` maps calls that are instances of one system (graphs compiled alike) to
    its name: their samples are pooled under it, each instance's median kept in its
    entry's `instances`."""
    n = max(total // 2, 1)
    src = torch.randint(0, 256, (n,), dtype=torch.uint8)
    dst = torch.empty_like(src)
    everything = {**calls, "memcpy": lambda: dst.copy_(src)}
    if src.device.type == "cpu" and cpu_backend.available():
        everything["stream"] = stream_copy(dst, src)
        if 2 * written > total:
            out = torch.empty(written, dtype=torch.uint8)
            everything["stream_fill"] = stream_fill(out)
    names = list(everything)
    samples: dict[str, list[float]] = {name: [] for name in names}
    failed: dict[str, str] = {}
    for name in names:
        try:
            everything[name]()
        except Exception as e:  # a system that fails to run is reported, the row goes on
            failed[name] = _error(e, "timing")
    names = [name for name in names if name not in failed]
    flush = _flush_buffer(s.flush_mb)
    orders = balanced_orders(len(names))
    for r in range(s.interleave):
        for name in (names[i] for i in orders[r % len(orders)]):
            if flush is not None:
                flush.sum()  # clean lines only: nothing dirty left for the timed call to write back
            t0 = s.clock()
            everything[name]()
            samples[name].append((s.clock() - t0) * 1e3)
    of_instances: dict[str, dict[str, float]] = {}
    for name, system in (instances or {}).items():
        if name in names:
            of_instances.setdefault(system, {})[name] = statistics.median(samples[name])
            samples.setdefault(system, []).extend(samples.pop(name))
    names = list(dict.fromkeys((instances or {}).get(name, name) for name in names))
    for name in names:
        ms = statistics.median(samples[name])
        entry = {"ms": ms, "ms_q20": _quantile(samples[name], 0.2),
                 "ms_q80": _quantile(samples[name], 0.8), "gbps": total / (ms * 1e6)}
        if name in of_instances:
            entry["instances"] = of_instances[name]
        if name == "stream_fill":
            row["stream_fill"] = {**entry, "gbps": written / (ms * 1e6), "bytes": written}
        elif name in ("memcpy", "stream"):
            row["copy" if name == "memcpy" else "stream"] = {**entry, "bytes": 2 * n}
        else:
            row["systems"][name] = entry
            progress.step(MARKS[name])
    for name, error in failed.items():
        row["systems"][name] = {"error": error}
    copy_gbps = (row.get("copy") or {}).get("gbps")
    for entry in row["systems"].values():
        if copy_gbps and "gbps" in entry:
            entry["pct_copy"] = 100.0 * entry["gbps"] / copy_gbps
    base = row["systems"].get("stridec", {}).get("ms")
    for name, key in (("eager", "vs_eager"), ("compile", "vs_compile")):
        other = row["systems"].get(name, {}).get("ms")
        row[key] = other / base if other and base else None
    floors = [(row.get(key) or {}).get("ms") for key in ("stream", "stream_fill")]
    stream_ms = max((ms for ms in floors if ms), default=None)
    eager_ms = row["systems"].get("eager", {}).get("ms")
    row["bound_vs_eager"] = eager_ms / stream_ms if eager_ms and stream_ms else None


def _host_us(call: Callable[[], Any], s: Session) -> float:
    """Median over batches of host microseconds per call: `host_calls` back-to-back calls
    between two host clock reads (launches are asynchronous; the device is synchronized
    after each batch, outside the clock)."""
    call()
    s.sync()
    samples = []
    for _ in range(s.host_batches):
        t0 = time.perf_counter()
        for _ in range(s.host_calls):
            call()
        samples.append((time.perf_counter() - t0) / s.host_calls * 1e6)
        s.sync()
    return statistics.median(samples)


def measure_host_overhead(w: Workload, s: Session, progress: Progress) -> dict[str, Any]:
    row = _new_row("host_overhead", w, s)
    ran = _run_stridec(w, s, row)
    progress.step("+" if row["status"] == "ok" else "!")
    if ran is None or s.timer is None:
        return row
    fn, inputs, outputs = ran
    eager = w.eager_fn(s.scale)
    calls: dict[str, Callable[[], Any]] = {"stridec": lambda: fn(*inputs),
                                           "eager": lambda: eager(*inputs)}
    pre = _preallocated(w, s, fn, inputs, outputs, row)
    if pre is not None:  # both: the allocating call and the one into `out=`
        calls["stridec_out"] = pre["stridec"]
        calls["eager_out"] = pre["eager"]
    if s.torch_compile:
        entry: dict[str, Any] = {}
        compiled = _compiled(eager, inputs, w, s, entry)
        row["systems"]["compile"] = entry
        if compiled is not None:
            calls["compile"] = lambda: compiled(*inputs)
    for name, call in calls.items():
        try:
            row["systems"].setdefault(name, {})["us_per_call"] = _host_us(call, s)
        except Exception as e:
            row["systems"].setdefault(name, {})["error"] = _error(e, "timing")
        progress.step(MARKS.get(name, "o"))
    return row


# --------------------------------------------------------------------------- compile time

_WARM_KERNEL_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def bench_warm_up(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)
"""


def _warm_up_runtime(device: torch.device) -> float:
    """Load the CUDA context and Triton's driver utilities with a kernel that is not
    stridec's, so the cold and warm times are those of the new specialization, not of
    the process (ms spent; 0 on the CPU, where nothing is compiled)."""
    if device.type != "cuda":  # the cpu backend's probe library (built once per machine)
        from stridec.runtime.backends.cpu import available

        t0 = time.perf_counter()
        available()
        return (time.perf_counter() - t0) * 1e3
    from stridec.runtime.backends.triton import CompiledKernel, load_jit

    t0 = time.perf_counter()
    x = torch.zeros(1, device=device)
    CompiledKernel(load_jit(_WARM_KERNEL_SOURCE, "bench_warm_up"))((1,), x)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


# Imported before the clock starts in the compile-time processes: a one-time cost of any
# process that compiles (reported apart as `imports_ms`), not of a new specialization.
_LAZY_MODULES = ("triton", "stridec.compiler.pass_manager", "stridec.compiler.codegen.lower",
                 "stridec.compiler.specialize", "stridec.runtime.backends.triton",
                 "stridec.runtime.backends.cpu")


def compile_child(name: str, scale: str, device: str, backend: str) -> int:
    """In a fresh process: time `stridec.compile` + `plan_for` (passes and code generation,
    or a disk hit) and the first call (Triton compile or Triton's disk cache, then the
    launch); print one `RESULT {json}` line."""
    dev = torch.device(device)
    sources = _sources_hash()
    w = by_name(name)
    graph = w.graph(scale)
    inputs = w.inputs(scale, dev)
    t0 = time.perf_counter()
    for module in _LAZY_MODULES:
        importlib.import_module(module)
    imports_ms = (time.perf_counter() - t0) * 1e3
    warm_up_ms = _warm_up_runtime(dev)
    t0 = time.perf_counter()
    fn = stridec.compile(graph, backend=backend)
    plan = fn.plan_for(*inputs)
    t1 = time.perf_counter()
    from stridec.runtime import launch

    launch.runner(plan.program, fn._target(dev))  # load the kernels (build C if new)
    t_load = time.perf_counter()
    outputs = _as_tuple(fn(*inputs))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t2 = time.perf_counter()
    w.check(scale, graph, inputs, outputs)
    result = {"sources": sources, "plan_ms": (t1 - t0) * 1e3, "load_ms": (t_load - t1) * 1e3,
              "first_call_ms": (t2 - t1) * 1e3,
              "total_ms": (t2 - t0) * 1e3, "compiles": fn.stats.compiles,
              "disk_hits": fn.stats.disk_hits, "imports_ms": imports_ms,
              "runtime_warm_up_ms": warm_up_ms}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def _child(w: Workload, s: Session, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--compile-child", w.name,
               "--scale", s.scale, "--device", str(s.device), "--backend", s.backend]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-6:]
    raise RuntimeError(f"child exited {done.returncode}: " + " | ".join(tail))


def measure_compile_time(w: Workload, s: Session, progress: Progress) -> dict[str, Any]:
    """Cold: a fresh process with empty STRIDEC_CACHE_DIR and TRITON_CACHE_DIR. Warm: a
    second fresh process over the same folders (a disk hit: no passes, no Triton compile)."""
    row: dict[str, Any] = {
        "kind": "compile_time", "name": COMPILE_ROW, "workload": w.name,
        "shape": list(w.shape(s.scale)), "shape_text": w.shape_text(w.shape(s.scale)),
        "dtype": w.dtype, "status": "error", "error": None,
        "cold": None, "warm": None,
        "note": "each in a new process, timed after Triton and stridec's compiler modules "
                "are imported and the CUDA context and Triton's driver are loaded by an "
                "unrelated kernel (imports_ms, runtime_warm_up_ms in the JSON); the warm run "
                "must be a disk hit",
    }
    with tempfile.TemporaryDirectory(prefix="stridec-bench-cache-") as tmp:
        env = dict(os.environ, STRIDEC_CACHE_DIR=os.path.join(tmp, "stridec"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"))
        for run in ("cold", "warm"):
            try:
                row[run] = _child(w, s, env)
            except Exception as e:
                row["error"] = _error(e, f"{run} process")
                return row
            progress.step(run[0].upper())
    cold, warm = row["cold"], row["warm"]
    if cold["sources"] != warm["sources"]:
        row["status"] = "sources-changed"
        row["error"] = ("stridec's sources changed between the cold and the warm process "
                        "(the plan cache key hashes them): measure again")
    elif cold["compiles"] != 1 or warm["compiles"] != 0 or warm["disk_hits"] != 1:
        row["status"] = "cache"
        row["error"] = (f"cold compiled {cold['compiles']}x; warm compiled {warm['compiles']}x "
                        f"with {warm['disk_hits']} disk hit(s) (expected 1, 0, 1)")
    else:
        row["status"] = "ok"
    return row


# --------------------------------------------------------------------------- environment


def _driver_version() -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 else None
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=30)
        return done.stdout.strip() or None if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _sources_hash() -> str:
    """sha256 of stridec's Python sources: names the exact compiler that ran."""
    digest = hashlib.sha256()
    package = Path(stridec.__file__).parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _cpu_fields() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _cpu_model() -> str:
    return _cpu_fields().get("model name") or platform.machine()


def _cpu_isa() -> str:
    """The CPU's family and model and the vector extensions the C kernels are built for
    (`-march=native`): results taken with and without AVX-512 run different code."""
    fields = _cpu_fields()
    if not fields:
        return platform.machine()
    flags = set(fields.get("flags", "").split())
    avx512 = {"avx512f", "avx512bw", "avx512vl"} <= flags
    vector = "AVX-512 (F, BW, VL)" if avx512 else "AVX2" if "avx2" in flags else "SSE2"
    extra = [name.upper() for name in ("fma", "f16c") if name in flags]
    model = f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    return (f"{platform.machine()}, {model}, {' + '.join([vector, *extra])}"
            + ("" if avx512 else ", no AVX-512"))


def environment(device: torch.device) -> tuple[dict[str, Any], dict[str, Any]]:
    import triton

    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "triton": triton.__version__, "stridec": stridec.__version__,
                "stridec_commit": _git_commit(), "stridec_sources": _sources_hash()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info = {"name": p.name, "capability": f"{p.major}.{p.minor}",
                "driver": _driver_version(), "cuda": torch.version.cuda,
                "memory_gib": p.total_memory / 2**30, "multiprocessors": p.multi_processor_count}
    else:
        info = {"name": f"cpu {_cpu_model()}".strip(), "capability": None, "driver": None,
                "cuda": None, "memory_gib": None, "threads": torch.get_num_threads(),
                "processor": platform.processor() or platform.machine(), "isa": _cpu_isa()}
    return info, versions


# --------------------------------------------------------------------------- main


def _items() -> list[tuple[str, Workload]]:
    rows = [("bandwidth", w) for w in WORKLOADS]
    return rows + [("host_overhead", HOST_OVERHEAD), ("compile_time", COMPILE_WORKLOAD)]


def _item_name(kind: str, w: Workload) -> str:
    return COMPILE_ROW if kind == "compile_time" else w.name


def select(patterns: list[str] | None) -> list[tuple[str, Workload]]:
    """The rows whose name matches any pattern (fnmatch, or a plain substring)."""
    items = _items()
    if not patterns:
        return items
    return [(k, w) for k, w in items
            if any(fnmatch.fnmatch(_item_name(k, w), p) or p in _item_name(k, w)
                   for p in patterns)]


def _summary(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status'].upper()}: {row['error']}"
    if row["kind"] == "compile_time":
        c, w = row["cold"], row["warm"]
        return f"ok  cold {c['total_ms']:.0f} ms, warm {w['total_ms']:.1f} ms"
    st = row["systems"].get("stridec", {})
    if row["kind"] == "host_overhead":
        us = st.get("us_per_call")
        return "ok" if us is None else f"ok  {us:.1f} us per call"
    if "gbps" not in st:
        return f"ok  ({row['kernels']} kernel{'s' if row['kernels'] != 1 else ''})"
    gbps = f"{st['gbps']:,.0f}" if st["gbps"] >= 100 else f"{st['gbps']:.3g}"
    text = f"ok  {gbps} GB/s = {st['pct_copy']:.1f}% of copy"
    for key, label in (("vs_eager", "eager"), ("vs_compile", "compile")):
        if row.get(key):
            text += f"  x{row[key]:.2f} vs {label}"
    return text


def device_text(info: dict[str, Any]) -> str:
    """`NVIDIA H200 (driver 570.1)`, or the name alone where there is no driver (the CPU)."""
    return info["name"] + (f" (driver {info['driver']})" if info.get("driver") else "")


def _detail(kind: str, w: Workload, s: Session) -> str:
    shape = w.shape_text(w.shape(s.scale))
    return f"({shape} {w.dtype})" if kind != "compile_time" else f"({w.name})"


def run(args: argparse.Namespace,
        after_row: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Measure the selected rows; `after_row(report)` is called with the report so far
    after each row (main writes its JSON then)."""
    smoke, cpu = args.smoke, args.cpu
    device = torch.device("cpu" if smoke or cpu else "cuda")
    backend = "interpret" if smoke else ("cpu" if cpu else "triton")
    if cpu:
        timer, how = wall_timer(args.cpu_repeats), (
            f"host clock; the row's systems, a same-run memcpy and streaming copy "
            f"interleaved, orders balanced, {args.cpu_repeats} rounds, medians; "
            + (f"caches flushed before each timed call (a {args.cpu_flush_mb} MB read); "
               if args.cpu_flush_mb else "caches not flushed (warm); ")
            + f"{torch.get_num_threads()} threads")
    elif smoke:
        timer, how = (wall_timer(args.cpu_repeats), "host clock, median (CPU interpreter: "
                      "says nothing about a GPU)") if args.cpu_timing else (
            None, "none (smoke: correctness only)")
    else:
        timer = cuda_timer(args.warmup_ms, args.rep_ms)
        how = (f"triton.testing.do_bench: CUDA events, L2 flushed before each repeat, "
               f"{args.warmup_ms:g} ms warm-up excluded, median of {args.rep_ms:g} ms of repeats")
    torch_compile = (not smoke) if args.torch_compile is None else args.torch_compile
    scale = "cpu" if cpu else ("tiny" if smoke else "full")
    s = Session(device, scale, backend, timer, torch_compile,
                host_calls=args.host_calls, host_batches=args.host_batches,
                interleave=args.cpu_repeats if cpu else 0,
                flush_mb=args.cpu_flush_mb if cpu else 0)
    info, versions = environment(device)
    print(f"stridec bench: {device_text(info)}, torch "
          f"{versions['torch']}, triton {versions['triton']}, stridec {versions['stridec']}; "
          f"{'smoke: tiny sizes on the CPU, interpret backend' if smoke else ''}"
          f"{'CPU sizes, cpu backend' if cpu else ''}{'' if smoke or cpu else 'full sizes'}")
    items = [(k, w) for k, w in select(args.only) if scale in w.shapes]
    progress = Progress(len(items))
    rows: list[dict[str, Any]] = []
    report = {
        "schema": SCHEMA,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": "smoke" if smoke else ("cpu" if cpu else "gpu"), "scale": s.scale,
        "backend": backend,
        "device": info, "versions": versions,
        "settings": {"timer": how, "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms,
                     "quantiles": list(QUANTILES), "torch_compile": torch_compile,
                     "host_calls": args.host_calls, "host_batches": args.host_batches,
                     "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])},
        "baselines": [],
        "rows": rows,
        "failures": [],
        # False until the last row is measured: the file written after each row says
        # whether the run got to the end.
        "complete": False,
    }
    measure = {"bandwidth": measure_bandwidth, "host_overhead": measure_host_overhead,
               "compile_time": measure_compile_time}
    for kind, w in items:
        progress.begin(_item_name(kind, w), _detail(kind, w, s))
        row = measure[kind](w, s, progress)
        s.release()  # the row's tensors are gone with its frame
        rows.append(row)
        progress.end(_summary(row))
        report["baselines"] = list(s.baselines.values())
        report["failures"] = [r["name"] for r in rows if r["status"] != "ok"]
        if after_row is not None:
            after_row(report)
    report["complete"] = True
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes on the CPU through the interpret backend; checks every "
                        "row's output against torch and times nothing")
    p.add_argument("--cpu", action="store_true",
                   help="the native cpu backend on the CPU rows, beside torch eager, "
                        "torch.compile and a same-run memcpy, interleaved; writes results")
    p.add_argument("--only", nargs="+", metavar="PATTERN",
                   help="run only rows whose name matches (fnmatch pattern or substring)")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for the .json/.md/.png (default bench/results; in smoke "
                        "mode nothing is written unless --out is given)")
    p.add_argument("--torch-compile", action=argparse.BooleanOptionalAction, default=None,
                   help="time torch.compile too (default: on for GPU runs, off for --smoke)")
    p.add_argument("--warmup-ms", type=float, default=100.0, help="do_bench warm-up (ms)")
    p.add_argument("--rep-ms", type=float, default=500.0, help="do_bench repeats (ms)")
    p.add_argument("--host-calls", type=int, default=200, help="calls per host-overhead batch")
    p.add_argument("--host-batches", type=int, default=15, help="host-overhead batches")
    p.add_argument("--cpu-timing", action="store_true",
                   help="with --smoke: time with the host clock, to exercise the report path "
                        "(CPU interpreter numbers, not results)")
    p.add_argument("--cpu-repeats", type=int, default=None,
                   help="rounds of CPU timing (default: 15 with --cpu, 3 with --smoke)")
    p.add_argument("--cpu-flush-mb", type=int, default=2 * last_level_cache_mb(),
                   help="with --cpu: MB read before each timed call to flush the caches, so "
                        "every system starts cold (default: twice the last-level cache, "
                        "%(default)s here; 0: no flush, warm caches)")
    p.add_argument("--suite", choices=SUITES, default=None,
                   help="with --cpu: a copy suite instead of the race (bench/cases.py): the "
                        "TTC transpositions, model layout code, random permutations, or "
                        "symbolic against static plans; with --smoke: its tiny rows, "
                        "checked, untimed")
    p.add_argument("--seed", type=int, default=None,
                   help="with --suite random: the seed that draws the rows (default: a new "
                        "one, printed and recorded)")
    p.add_argument("--random-rows", type=int, default=RANDOM_ROWS,
                   help="with --suite random: how many rows (default %(default)s)")
    p.add_argument("--runs", type=int, default=1,
                   help="with --suite: run the whole suite this many times in one process, "
                        "each run's values side by side (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="with --suite: 5 rounds, no torch.compile, no files (unless --out): "
                        "for timing a row or two with --only while working on a kernel")
    p.add_argument("--tune", type=float, nargs="?", const=3.0, default=None, metavar="SECONDS",
                   help="with --suite: time stridec also compiled with tune=SECONDS (measured "
                        "choice of copy plans; default 3) beside the untuned plan")
    p.add_argument("--threads", type=int, default=None,
                   help="with --suite: torch.set_num_threads(N) first (stridec, eager, "
                        "torch.compile and the yardsticks all run on N threads)")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="with --suite: time by the host clock (default) or, with --threads 1, "
                        "by the calling thread's CPU time, which the time other processes "
                        "hold the core does not count in")
    p.add_argument("--compile-child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--scale", default="full", help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="auto", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.suite is not None:
        return _suite(args)
    if args.cpu_repeats is None:
        args.cpu_repeats = 15 if args.cpu else 3
    if args.compile_child:
        return compile_child(args.compile_child, args.scale, args.device, args.backend)
    if args.list:
        for kind, w in _items():
            print(f"{_item_name(kind, w):<30} {kind:<14} {w.description}")
        return 0
    if not args.smoke and not args.cpu and not torch.cuda.is_available():
        print("bench: no CUDA device here; run `python bench/run.py --smoke` for the CPU "
              "correctness run", file=sys.stderr)
        return 2
    if args.cpu_timing and not args.smoke:
        print("bench: --cpu-timing goes with --smoke", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else (None if args.smoke else RESULTS)
    stem: list[Path] = []

    def keep(report: dict[str, Any]) -> None:
        # The JSON after every row: a run stopped by a time limit keeps what it measured.
        if not stem:
            out.mkdir(parents=True, exist_ok=True)
            stem.append(reporting.result_stem(report, out))
        reporting.write_json(report, stem[0])

    report = run(args, keep if out is not None else None)
    print()
    print(reporting.markdown(report))
    if out is not None:
        written, skipped = reporting.write_report(report, out, stem[0] if stem else None)
        for path in written:
            print(f"wrote {path}")
        if skipped:
            print(f"chart skipped: {skipped}")
    if report["failures"]:
        print(f"FAILED rows: {', '.join(report['failures'])}", file=sys.stderr)
        return 1
    return 0


def _suite(args: argparse.Namespace) -> int:
    """`--suite NAME` with `--cpu` (timed) or `--smoke` (tiny rows, checked): bench/suites.py."""
    from bench.suites import run_suite

    if not (args.cpu or args.smoke or args.list):
        print("bench: --suite goes with --cpu (timed) or --smoke (checked)", file=sys.stderr)
        return 2
    if args.quick:
        args.cpu_repeats = args.cpu_repeats or 5
        args.torch_compile = False if args.torch_compile is None else args.torch_compile
        args.out = args.out or False
    if args.cpu_repeats is None:
        args.cpu_repeats = 15
    return run_suite(args)


if __name__ == "__main__":
    sys.exit(main())
