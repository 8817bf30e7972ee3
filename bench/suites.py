"""The copy suites on the CPU: `python bench/run.py --cpu --suite ttc|models|random|symbolic`
(rows: `bench/cases.py`; how to read them: bench/README.md#the-copy-suites).

Every row runs the race's machinery (`bench/run.py`): stridec, torch eager and
torch.compile (Inductor's C++ backend, static shapes) of the same function, a same-run
memcpy and streaming copy of the row's bytes, called in turn in a rotating order,
`--cpu-repeats` rounds, caches flushed before every timed call, medians. Before any timing
the row's graph is traced from the torch function with `stridec.trace`, compiled for the
`cpu` backend and its output compared with the function's, element for element; a row
stridec cannot trace yet is timed without it and says so. Where torch can write the
result into memory it already has (`Case.into`), every system writes into one set of
preallocated outputs laid out as eager's result is (stridec through `out=`).

With `--tune [SECONDS]` every row also times stridec compiled with `tune=SECONDS`
(measured choice of copy plans: docs/cpu.md) as a system of its own, "tuned", in the
same rounds: the row's `tuned_vs_untuned` is the untuned plan's median over the tuned
one's, and `tune` says what its first call did (copies timed, choices from the wisdom,
seconds, whether any copy runs another plan than the model's).

A symbolic row times two stridec plans of one function side by side: traced with a
symbolic batch (dim 0 of the first input) and traced static, both called at the same
size, with the kernels each launches per call.

`--runs N` repeats the whole suite N times in one process (N files' worth of rows in one
file, the spread between runs in the tables). The JSON is rewritten after every row.
`python bench/suites.py FILE.json` writes a run's .md and .png again from its JSON.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import stridec  # noqa: E402
from bench import cases as suite_cases  # noqa: E402
from bench.cases import Case  # noqa: E402
from bench.run import (  # noqa: E402
    SCHEMA,
    Progress,
    Session,
    _error,
    _time_interleaved,
    device_text,
    environment,
    wall_timer,
)
from bench.workloads import Mismatch, assert_same  # noqa: E402
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402

__all__ = ["TARGETS", "markdown", "rewrite", "run_suite", "select_cases", "size_class",
           "summarize", "tune_summary"]

DASH = "—"
MiB = 1 << 20
# Issue 33's targets, same-run ratios on 2 cores.
TARGETS = {
    "ttc": "geomean ≥ 1.5× torch.compile and ≥ 0.8 of memcpy; no row below 1.0× torch.compile",
    "models": "every row ≥ 1.0× eager and ≥ 1.0× torch.compile; geomean ≥ 1.5× both",
    "random": "every row ≥ 1.0× eager and ≥ 1.0× torch.compile; geomean ≥ 1.5× both",
    "symbolic": "symbolic plan within 5 % of the static plan (≥ 0.95×), kernel counts equal",
}


# --------------------------------------------------------------------------- one row


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _expected(case: Case, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The function's outputs, on copies of the inputs (a cache update writes its first)."""
    return _as_tuple(case.fn(*[t.clone() for t in inputs]))


def _check(got: Any, want: tuple[torch.Tensor, ...], what: str) -> None:
    got = _as_tuple(got)
    if len(got) != len(want):
        raise Mismatch(f"{what}: {len(got)} outputs, expected {len(want)}")
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_same(g, w, f"{what} output {k}")


def _new_row(case: Case) -> dict[str, Any]:
    return {"kind": "symbolic" if case.dynamic is not None else "suite", "name": case.name,
            "load": os.getloadavg()[0],
            "suite": case.suite, "group": case.group, "size": case.size,
            "description": case.description, "source": case.source, "note": case.note,
            "shape_text": case.shape_text, "dtype": case.dtype, "info": case.info,
            "status": "error", "error": None, "kernels": None, "preallocated": None,
            "bytes_read": None, "bytes_written": None, "bytes_total": None, "systems": {},
            "copy": None, "stream": None, "stream_fill": None, "vs_eager": None,
            "vs_compile": None, "bound_vs_eager": None}


def _first_call(fn: Any, inputs: list[torch.Tensor],
                outs: tuple[torch.Tensor, ...] | None) -> tuple[int, Any]:
    """One call of compiled graph `fn` (into `outs` where given): the kernels it launched
    and what it returned."""
    before = fn.stats.launches
    got = fn(*inputs) if outs is None else fn(*inputs, out=outs)
    return fn.stats.launches - before, got


def _stridec(case: Case, inputs: list[torch.Tensor], backend: str, row: dict[str, Any],
             dynamic: Any = False, tune: float | None = None) -> Any:
    """Trace, compile and run the row's function; the compiled graph, or None where a stage
    failed (the row says which: `untraceable` where `stridec.trace` refused it)."""
    try:
        graph = stridec.trace(case.fn, *inputs, dynamic=dynamic)
    except Exception as e:  # StridecError, or the function's own code refusing a Proxy
        row["status"], row["error"] = "untraceable", f"{type(e).__name__}: {e}"
        return None
    try:
        return stridec.compile(graph, backend=backend,
                               tune=False if tune is None else tune)
    except Exception as e:
        row["error"] = _error(e, "compile")
        return None


def _program_calls(fn: Any, inputs: list[torch.Tensor],
                   outs: tuple[torch.Tensor, ...] | None) -> list[Any]:
    """The C calls (symbol, arguments, argument block) of the program a call runs."""
    plan = fn.plan_for(*inputs) if outs is None else fn.plan_for(*inputs, out=outs)
    return [call for k in plan.program.kernels for call in getattr(k, "calls", ())]


def _add_tuned(case: Case, inputs: list[torch.Tensor], outs: tuple[torch.Tensor, ...] | None,
               expected: tuple[torch.Tensor, ...], untuned: Any, s: Session,
               row: dict[str, Any], calls: dict[str, Callable[[], Any]]) -> None:
    """The row's stridec compiled with `tune=s.tune` as system "tuned" (module docstring);
    its first call, which measures, checked against the function like stridec's."""
    entry = row["systems"].setdefault("tuned", {})
    scratch: dict[str, Any] = {}
    fn = _stridec(case, inputs, s.backend, scratch, tune=s.tune)
    if fn is None:
        entry["error"] = scratch.get("error") or "not traced"
        return
    try:
        t0 = time.perf_counter()
        _, got = _first_call(fn, inputs, outs)
        first_s = time.perf_counter() - t0
        _check(outs if outs is not None else (inputs[0] if case.mutates else got), expected,
               "stridec tuned")
    except Exception as e:
        entry["error"] = _error(e, "tuned run")
        return
    st = fn.stats
    row["tune"] = {"measured": st.tuned, "wisdom": st.wisdom_hits,
                   "seconds": st.tune_seconds, "first_call_s": first_s,
                   "changed": _program_calls(fn, inputs, outs)
                   != _program_calls(untuned, inputs, outs)}
    calls["tuned"] = ((lambda: fn(*inputs, out=outs)) if outs is not None
                      else (lambda: fn(*inputs)))


def _compile_torch(fn: Callable[..., Any], args: list[Any], check: Callable[[], None],
                   row: dict[str, Any]) -> Callable[..., Any] | None:
    """torch.compile (Inductor, static shapes) of `fn`, its first call (the compilation)
    timed apart as `compile_s`; `check()` then compares what it wrote or returned."""
    torch._dynamo.reset()  # fresh caches: rows share code objects
    entry = row["systems"].setdefault("compile", {})
    try:
        compiled = torch.compile(fn, dynamic=False)
        t0 = time.perf_counter()
        got = compiled(*args)
        entry["compile_s"] = time.perf_counter() - t0
        check(got)
        entry["correct"] = True
    except Mismatch as e:
        entry["correct"], entry["mismatch"] = False, str(e)
    except Exception as e:
        entry["error"] = _error(e, "torch.compile")
        return None
    return compiled


def _finish(row: dict[str, Any]) -> None:
    """stridec's fraction of the same-run memcpy and streaming copy."""
    st = row["systems"].get("stridec", {})
    for key, base in (("frac_memcpy", "copy"), ("frac_stream", "stream")):
        ms = (row.get(base) or {}).get("ms")
        row[key] = ms / st["ms"] if ms and st.get("ms") else None


def measure_case(case: Case, s: Session, progress: Progress, smoke: bool) -> dict[str, Any]:
    row = _new_row(case)
    inputs = case.inputs()
    expected = _expected(case, inputs)
    read, written = case.bytes_moved(inputs, expected)
    row.update(bytes_read=read, bytes_written=written, bytes_total=read + written)
    fn = _stridec(case, inputs, s.backend, row)
    outs = None
    if case.into is not None:  # one set of outputs, laid out as eager's, for every system
        outs = tuple(torch.empty_like(e) for e in expected)
        try:
            case.into(outs, *inputs)
            _check(outs, expected, "eager into")
        except (Mismatch, RuntimeError) as e:
            row["status"], row["error"] = "error", f"the row's eager `into`: {e}"
            return row
    row["preallocated"] = outs is not None
    calls: dict[str, Callable[[], Any]] = {}
    if fn is not None:
        try:
            row["kernels"], got = _first_call(fn, inputs, outs)
            if outs is not None:
                _check(outs, expected, "stridec out=")
                calls["stridec"] = lambda: fn(*inputs, out=outs)
            else:
                _check(inputs[0] if case.mutates else got, expected, "stridec")
                calls["stridec"] = lambda: fn(*inputs)
            row["status"], row["error"] = "ok", None
        except Mismatch as e:
            row["status"], row["error"] = "mismatch", str(e)
        except Exception as e:
            row["status"], row["error"] = "error", _error(e, "run")
    if s.tune is not None and row["status"] == "ok":
        _add_tuned(case, inputs, outs, expected, fn, s, row, calls)
    progress.step("+" if row["status"] == "ok" else "!")
    if smoke:
        return row
    if outs is not None:
        into = case.into
        calls["eager"] = lambda: into(outs, *inputs)
    else:
        calls["eager"] = lambda: case.fn(*inputs)
    if s.torch_compile:
        if outs is not None:
            compiled = _compile_torch(case.into, [outs, *inputs],
                                      lambda _: _check(outs, expected, "torch.compile"), row)
            if compiled is not None:
                calls["compile"] = lambda: compiled(outs, *inputs)
        else:
            compiled = _compile_torch(
                case.fn, inputs,
                lambda got: _check(inputs[0] if case.mutates else got, expected,
                                   "torch.compile"), row)
            if compiled is not None:
                calls["compile"] = lambda: compiled(*inputs)
        progress.step("i")
    _time_interleaved(calls, read + written, written, s, row, progress)
    _finish(row)
    untuned = (row["systems"].get("stridec") or {}).get("ms")
    tuned = (row["systems"].get("tuned") or {}).get("ms")
    row["tuned_vs_untuned"] = untuned / tuned if untuned and tuned else None
    return row


def measure_symbolic(case: Case, s: Session, progress: Progress, smoke: bool,
                     static_first: bool = False) -> dict[str, Any]:
    """The function traced with a symbolic batch against the same function traced static,
    at the same size: time of each, kernels each call launches. Each is compiled twice, in
    the order first, second, second, first, and its time is the median of both graphs'
    calls: two graphs compiled alike read up to 10 % apart at 64 KiB, and which one reads
    faster follows neither the kind nor the order. `static_first`: the static graph is
    the first (run_suite alternates)."""
    row = _new_row(case)
    row["compiled_first"] = "static" if static_first else "symbolic"
    inputs = case.inputs()
    expected = _expected(case, inputs)
    read, written = case.bytes_moved(inputs, expected)
    row.update(bytes_read=read, bytes_written=written, bytes_total=read + written)
    outs = None
    if case.into is not None:
        outs = tuple(torch.empty_like(e) for e in expected)
    row["preallocated"] = outs is not None
    calls: dict[str, Callable[[], Any]] = {}
    kernels: dict[str, int] = {}
    systems = (("symbolic", case.dynamic), ("static", False))
    first, second = systems[::-1] if static_first else systems
    instances: dict[str, str] = {}
    for k, (system, dynamic) in enumerate((first, second, second, first)):
        instance = f"{system} {1 + k // 2}"
        instances[instance] = system
        fn = _stridec(case, inputs, s.backend, row, dynamic=dynamic)
        if fn is None:
            row["error"] = f"{system}: {row['error']}"
            progress.step("!")
            return row
        try:
            launched, got = _first_call(fn, inputs, outs)
            kernels[system] = max(launched, kernels.get(system, 0))
            _check(outs if outs is not None else got, expected, f"stridec {system}")
            calls[instance] = ((lambda f=fn: f(*inputs, out=outs)) if outs is not None
                               else (lambda f=fn: f(*inputs)))
        except Mismatch as e:
            row["status"], row["error"] = "mismatch", f"{system}: {e}"
            return row
        except Exception as e:
            row["error"] = _error(e, f"{system} run")
            return row
    row["status"], row["error"] = "ok", None
    row["kernels"] = kernels["symbolic"]
    row["kernels_static"] = kernels["static"]
    progress.step("+")
    if smoke:
        return row
    into = case.into
    calls["eager"] = ((lambda: into(outs, *inputs)) if outs is not None and into is not None
                      else (lambda: case.fn(*inputs)))
    _time_interleaved(calls, read + written, written, s, row, progress, instances)
    sym = row["systems"].get("symbolic", {}).get("ms")
    static = row["systems"].get("static", {}).get("ms")
    eager = row["systems"].get("eager", {}).get("ms")
    row["vs_static"] = static / sym if sym and static else None
    row["vs_eager"] = eager / sym if sym and eager else None
    return row


# --------------------------------------------------------------------------- selection


def select_cases(rows: list[Case], patterns: list[str] | None) -> list[Case]:
    """The rows whose name matches any pattern (fnmatch, or a plain substring)."""
    if not patterns:
        return rows
    return [c for c in rows if any(fnmatch.fnmatch(c.name, p) or p in c.name for p in patterns)]


# --------------------------------------------------------------------------- summary


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _num(value: float | None, fmt: str) -> str:
    return DASH if value is None else format(value, fmt)


def _measured(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == "ok" and r.get(key)]


def summarize(suite: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's geomeans, worst rows and targets (issue 33)."""
    if suite == "symbolic":
        timed = _measured(rows, "vs_static")
        ratios = [r["vs_static"] for r in timed]
        unequal = [r["name"] for r in rows if r["status"] == "ok"
                   and r.get("kernels") != r.get("kernels_static")]
        slow = [r["name"] for r in timed if r["vs_static"] < 0.95]
        return {"rows": len(rows), "timed": len(timed),
                "geomean_vs_static": _geomean(ratios),
                "min_vs_static": min(ratios, default=None),
                "kernels_unequal": unequal, "below_0_95": slow,
                "met": bool(timed) and not slow and not unequal
                and len(timed) == len(rows)}
    eager = [r["vs_eager"] for r in _measured(rows, "vs_eager")]
    compiled = [r["vs_compile"] for r in _measured(rows, "vs_compile")]
    memcpy = [r["frac_memcpy"] for r in _measured(rows, "frac_memcpy")]
    not_ok = [r["name"] for r in rows if r["status"] != "ok"]
    out = {"rows": len(rows), "timed": len(eager), "not_ok": not_ok,
           "geomean_vs_eager": _geomean(eager), "geomean_vs_compile": _geomean(compiled),
           "geomean_frac_memcpy": _geomean(memcpy),
           "min_vs_eager": min(eager, default=None),
           "min_vs_compile": min(compiled, default=None),
           "below_1_eager": [r["name"] for r in _measured(rows, "vs_eager")
                             if r["vs_eager"] < 1.0],
           "below_1_compile": [r["name"] for r in _measured(rows, "vs_compile")
                               if r["vs_compile"] < 1.0]}
    out["q20"] = {key: _geomean([v for r in rows if r["status"] == "ok"
                                 if (v := _q20_ratio(r, key)) is not None])
                  for key in ("vs_eager", "vs_compile", "frac_memcpy")}
    g_e, g_c, g_m = out["geomean_vs_eager"], out["geomean_vs_compile"], out["geomean_frac_memcpy"]
    complete = not not_ok and bool(compiled)
    if suite == "ttc":
        out["met"] = (complete and g_c is not None and g_c >= 1.5 and g_m is not None
                      and g_m >= 0.8 and not out["below_1_compile"])
    else:
        out["met"] = (complete and g_e is not None and g_e >= 1.5 and g_c is not None
                      and g_c >= 1.5 and not out["below_1_eager"]
                      and not out["below_1_compile"])
    return out


def _q20_ratio(row: dict[str, Any], key: str) -> float | None:
    """A ratio of the row's 20th-percentile times instead of its medians: the calls least
    slowed by other processes' work."""
    systems = row.get("systems") or {}
    st = (systems.get("stridec") or {}).get("ms_q20")
    other = ((systems.get({"vs_eager": "eager", "vs_compile": "compile"}[key]) or {})
             if key != "frac_memcpy" else (row.get("copy") or {})).get("ms_q20")
    return other / st if st and other else None


def _spread(runs: list[list[dict[str, Any]]], key: str) -> dict[str, float]:
    """Per row, the largest over smallest of `key` across runs (1.0: the runs agree)."""
    spread = {}
    for name in [r["name"] for r in runs[0]]:
        values = [r[key] for rows in runs for r in rows if r["name"] == name and r.get(key)]
        if len(values) == len(runs) and len(values) > 1:
            spread[name] = max(values) / min(values)
    return spread


# --------------------------------------------------------------------------- markdown


def _row_cells(suite: str, by_run: list[dict[str, Any]]) -> list[str]:
    r = by_run[0]

    def each(key: str, fmt: str, scale: float = 1.0) -> str:
        return " / ".join(_num(x.get(key) * scale if x.get(key) else None, fmt) for x in by_run)

    check = "ok" if r["status"] == "ok" else f"**{r['status']}**"
    mb = _num(r["bytes_total"] / 1e6 if r.get("bytes_total") else None, ",.4g")
    if suite == "symbolic":
        ms = " / ".join(_num((x["systems"].get("symbolic") or {}).get("ms"), ".3g")
                        for x in by_run)
        static = " / ".join(_num((x["systems"].get("static") or {}).get("ms"), ".3g")
                            for x in by_run)
        return [f"`{r['name']}`", r["shape_text"].replace("x", "×"), r["dtype"], mb,
                _num(r.get("kernels"), "d"), _num(r.get("kernels_static"), "d"), ms, static,
                each("vs_static", ".2f"), each("vs_eager", ".2f"), check]
    ms = " / ".join(_num((x["systems"].get("stridec") or {}).get("ms"), ".3g") for x in by_run)
    return [f"`{r['name']}`", r["shape_text"].replace("x", "×"), r["dtype"], mb,
            _num(r.get("kernels"), "d"), ms, each("vs_eager", ".2f"), each("vs_compile", ".2f"),
            each("frac_memcpy", ".2f"), each("frac_stream", ".2f"),
            each("bound_vs_eager", ".2f"), check]


def _rows_table(suite: str, runs: list[list[dict[str, Any]]]) -> list[str]:
    if suite == "symbolic":
        head = ["row", "shape", "dtype", "MB moved", "kernels symbolic", "kernels static",
                "symbolic ms", "static ms", "× static", "× eager", "check"]
    else:
        head = ["row", "shape", "dtype", "MB moved", "kernels", "stridec ms", "× eager",
                "× compile", "of memcpy", "of stream", "bound × eager", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, r in enumerate(runs[0]):
        by_run = [rows[k] for rows in runs if k < len(rows) and rows[k]["name"] == r["name"]]
        lines.append("| " + " | ".join(_row_cells(suite, by_run)) + " |")
    return lines


def size_class(row: dict[str, Any]) -> str:
    """The row's size: its model size (64K, 1M, 64M), else its largest tensor's bytes in
    one of three classes."""
    if row.get("size"):
        return row["size"]
    largest = max(row.get("bytes_read") or 0, row.get("bytes_written") or 0)
    return "< 1 MiB" if largest < MiB else "1-16 MiB" if largest < 16 * MiB else ">= 16 MiB"


def _by_size_table(runs: list[list[dict[str, Any]]]) -> list[str]:
    """Geomeans per size class, run by run: on a loaded machine a call that wakes a second
    thread waits for the scheduler, which weighs on the small rows most."""
    classes = list(dict.fromkeys(size_class(r) for r in runs[0]))
    lines = ["| size | rows | geomean × eager | geomean × compile | geomean of memcpy | "
             "median load |", "|---|---|---|---|---|---|"]
    for c in classes:
        members = [[r for r in rows if size_class(r) == c] for rows in runs]
        cells = []
        for key in ("vs_eager", "vs_compile", "frac_memcpy"):
            cells.append(" / ".join(_num(_geomean([r[key] for r in _measured(m, key)]), ".2f")
                                    for m in members))
        loads = [r["load"] for m in members for r in m if r.get("load") is not None]
        load = _num(statistics.median(loads) if loads else None, ".1f")
        lines.append(f"| {c} | {len(members[0])} | " + " | ".join(cells) + f" | {load} |")
    return lines


def _worst(rows: list[dict[str, Any]], key: str, n: int = 5) -> str:
    timed = sorted(_measured(rows, key), key=lambda r: r[key])[:n]
    return ", ".join(f"`{r['name']}` {r[key]:.2f}" for r in timed) or DASH


def _summary_lines(suite: str, runs: list[list[dict[str, Any]]]) -> list[str]:
    sums = [summarize(suite, rows) for rows in runs]
    lines = [f"Target (issue 33): {TARGETS[suite]}.", ""]
    if suite == "symbolic":
        lines += ["| run | compiled first | rows timed | geomean × static | lowest × static "
                  "| kernel counts unequal | target met |", "|---|---|---|---|---|---|---|"]
        for k, m in enumerate(sums):
            first = {r.get("compiled_first", "symbolic") for r in runs[k]}
            lines.append(f"| {k + 1} | {', '.join(sorted(first))} | {m['timed']}/{m['rows']} "
                         f"| {_num(m['geomean_vs_static'], '.2f')} "
                         f"| {_num(m['min_vs_static'], '.2f')} "
                         f"| {', '.join(f'`{n}`' for n in m['kernels_unequal']) or 'none'} "
                         f"| {'yes' if m['met'] else 'no'} |")
        spread = _spread(runs, "vs_static") if len(runs) > 1 else {}
    else:
        lines += ["| run | rows timed | geomean × eager | geomean × compile | geomean of "
                  "memcpy | lowest × eager | lowest × compile | rows < 1.0× eager "
                  "| rows < 1.0× compile | target met |", "|" + "---|" * 10]
        for k, m in enumerate(sums):
            lines.append(f"| {k + 1} | {m['timed']}/{m['rows']} "
                         f"| {_num(m['geomean_vs_eager'], '.2f')} "
                         f"| {_num(m['geomean_vs_compile'], '.2f')} "
                         f"| {_num(m['geomean_frac_memcpy'], '.2f')} "
                         f"| {_num(m['min_vs_eager'], '.2f')} "
                         f"| {_num(m['min_vs_compile'], '.2f')} "
                         f"| {len(m['below_1_eager'])} | {len(m['below_1_compile'])} "
                         f"| {'yes' if m['met'] else 'no'} |")
        lines += ["", "The same from each system's 20th-percentile time (the rounds least "
                  "slowed by other processes), run by run: geomean × eager "
                  + " / ".join(_num(m["q20"]["vs_eager"], ".2f") for m in sums)
                  + ", × compile " + " / ".join(_num(m["q20"]["vs_compile"], ".2f") for m in sums)
                  + ", of memcpy " + " / ".join(_num(m["q20"]["frac_memcpy"], ".2f")
                                                for m in sums) + "."]
        lines += [""] + _by_size_table(runs)
        spread = _spread(runs, "vs_compile") if len(runs) > 1 else {}
        rows = runs[0]
        lines += ["", f"Worst rows × torch.compile (run 1): {_worst(rows, 'vs_compile')}.",
                  f"Worst rows × eager (run 1): {_worst(rows, 'vs_eager')}.",
                  f"Lowest fractions of memcpy (run 1): {_worst(rows, 'frac_memcpy')}."]
        not_ok = [r for r in rows if r["status"] != "ok"]
        if not_ok:
            lines.append("Rows without a stridec time: " + ", ".join(
                f"`{r['name']}` ({r['status']})" for r in not_ok) + ".")
    if spread:
        values = sorted(spread.values())
        worst = max(spread, key=spread.get)
        lines.append("")
        lines.append(f"Spread between the runs (largest over smallest ratio, per row): median "
                     f"{values[len(values) // 2]:.3f}, largest {spread[worst]:.3f} "
                     f"(`{worst}`).")
    return lines


def tune_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's measured choice: geomean of untuned over tuned, over every timed row and
    over the rows whose plan it changed, and the lowest and highest."""
    timed = _measured(rows, "tuned_vs_untuned")
    changed = [r for r in timed if (r.get("tune") or {}).get("changed")]
    ratios = [r["tuned_vs_untuned"] for r in timed]
    return {"timed": len(timed), "changed": len(changed),
            "geomean": _geomean(ratios),
            "geomean_changed": _geomean([r["tuned_vs_untuned"] for r in changed]),
            "min": min(ratios, default=None), "max": max(ratios, default=None),
            "tune_seconds": sum((r.get("tune") or {}).get("seconds") or 0.0 for r in timed)}


def _tune_lines(report: dict[str, Any]) -> list[str]:
    """`--tune`: what measured choice gained, run by run, and row by row."""
    runs = report["runs"]
    if report["suite"] == "symbolic" or not any(r.get("tune") for rows in runs for r in rows):
        return []
    budget = (report.get("settings") or {}).get("tune")
    lines = ["", "## Measured choice", "",
             f"stridec compiled with `tune={budget}` (\"tuned\") against the same graph "
             "untuned, in the same rounds: × untuned is the untuned median over the tuned "
             "one (above 1: tuning gained). Changed: rows where some copy runs another plan "
             "than the model's first; on the others the two programs are the same, and their "
             "ratio is the noise of the measurement.", "",
             "| run | rows timed | changed | geomean × untuned | geomean × untuned, changed "
             "rows | lowest | highest | seconds measuring |", "|" + "---|" * 8]
    for k, rows in enumerate(runs):
        m = tune_summary(rows)
        lines.append(f"| {k + 1} | {m['timed']} | {m['changed']} | {_num(m['geomean'], '.3f')} "
                     f"| {_num(m['geomean_changed'], '.3f')} | {_num(m['min'], '.3f')} "
                     f"| {_num(m['max'], '.3f')} | {m['tune_seconds']:.1f} |")
    spread = _spread(runs, "tuned_vs_untuned") if len(runs) > 1 else {}
    if spread:
        values = sorted(spread.values())
        lines += ["", f"Spread between the runs (largest over smallest × untuned, per row): "
                  f"median {values[len(values) // 2]:.3f}, largest {max(values):.3f}."]
    lines += ["", "| row | copies timed | from wisdom | changed | seconds | × untuned |",
              "|---|---|---|---|---|---|"]
    for k, r in enumerate(runs[0]):
        by_run = [rows[k] for rows in runs if k < len(rows) and rows[k]["name"] == r["name"]]
        t = r.get("tune") or {}
        ratio = " / ".join(_num(x.get("tuned_vs_untuned"), ".3f") for x in by_run)
        lines.append(f"| `{r['name']}` | {t.get('measured', DASH)} | {t.get('wisdom', DASH)} "
                     f"| {'yes' if t.get('changed') else 'no' if t else DASH} "
                     f"| {_num(t.get('seconds'), '.2f')} | {ratio} |")
    return lines


def _cores() -> int:
    return os.cpu_count() or 1


def _load_text(runs: list[list[dict[str, Any]]], clock: str | None) -> str:
    loads = [r["load"] for rows in runs for r in rows if r.get("load") is not None]
    if not loads:
        return "not recorded"
    timed = ("times are the calling thread's CPU time" if clock == "thread"
             else "times are wall-clock")
    return (f"median {statistics.median(loads):.1f}, {min(loads):.1f}–{max(loads):.1f}; above "
            f"{_cores()} other processes were running: {timed}, ratios same-run")


def markdown(report: dict[str, Any]) -> str:
    """The suite's results: environment, targets and geomeans per run, then every row
    (values of the runs separated by `/`)."""
    dev, ver, st = report["device"], report["versions"], report["settings"]
    suite, runs = report["suite"], report["runs"]
    lines = [
        f"# stridec copy suite `{suite}` — {dev['name']} — {report['date']}",
        "",
        f"- device: {dev['name']} ({dev.get('isa', DASH)}; {dev.get('threads')} threads)",
        f"- versions: stridec {ver['stridec']} ({ver.get('stridec_commit') or 'no git'}), "
        f"torch {ver['torch']}, Python {ver['python']}",
        f"- command: `{st['command']}`" + (f"; seed {report['seed']}"
                                          if report.get("seed") is not None else ""),
        f"- timing: {st['timer']}; {len(runs)} run(s), values of each run separated by `/`",
        f"- machine load (1-minute load average at each row's start, {_cores()} cores): "
        + _load_text(runs, st.get("clock")),
        "- × eager, × compile: their median time over stridec's (above 1: stridec is "
        "faster); of memcpy, of stream: the same-run `dst.copy_(src)` of the row's bytes "
        "and the streaming copy (non-temporal stores), their time over stridec's; bound × "
        "eager: eager's time over the streaming copy's (or streaming write's).",
        "",
        "## Summary",
        "",
    ]
    lines += _summary_lines(suite, runs)
    lines += _tune_lines(report)
    lines += ["", "## Rows", ""] + _rows_table(suite, runs)
    notes = [(r["name"], r["note"]) for r in runs[0] if r.get("note")]
    problems = [(r["name"], r["error"]) for r in runs[0] if r.get("error")]
    problems += [(r["name"], f"{s}: {m['error']}") for r in runs[0]
                 for s, m in r["systems"].items() if m.get("error")]
    problems += [(r["name"], f"torch.compile differs from eager: {m['mismatch']}")
                 for r in runs[0] for m in [r["systems"].get("compile") or {}]
                 if m.get("mismatch")]
    if notes:
        lines += ["", "## Notes", ""] + [f"- `{n}`: {t}" for n, t in notes]
    if problems:
        lines += ["", "## Not measured or failed", ""] + [f"- `{n}`: {t}" for n, t in problems]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- chart


def write_chart(report: dict[str, Any], path: Path) -> str | None:
    """Per-row ratios: × eager and × torch.compile (log scale) and the fraction of memcpy,
    one bar per row and run; returns why it was skipped, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no chart"
    suite, runs = report["suite"], report["runs"]
    keys = ([("vs_static", "× static plan (symbolic over static)")] if suite == "symbolic"
            else [("vs_eager", "× torch eager"), ("vs_compile", "× torch.compile"),
                  ("frac_memcpy", "of same-run memcpy")])
    names = [r["name"] for r in runs[0]]
    if not any(r.get(keys[0][0]) for rows in runs for r in rows):
        return "no timed rows: no chart"
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys) + 2, 0.16 * len(names) * len(runs)
                                                    + 1.8), sharey=True, squeeze=False)
    height = 0.8 / len(runs)
    for ax, (key, label) in zip(axes[0], keys, strict=True):
        ratio = key != "frac_memcpy"  # ratios: bars from 1 on a log scale, either way
        measured = []
        for k, rows in enumerate(runs):
            by_name = {r["name"]: r for r in rows}
            values = [(by_name.get(n) or {}).get(key) for n in names]
            measured += [v for v in values if v]
            ys = [i + (k - (len(runs) - 1) / 2) * height for i in range(len(names))]
            if ratio:
                ax.barh(ys, [v - 1.0 if v else 0.0 for v in values], height, left=1.0,
                        label=f"run {k + 1}")
            else:
                ax.barh(ys, [v or 0.0 for v in values], height, label=f"run {k + 1}")
        ax.axvline(1.0, color="black", linewidth=0.8)
        target = {"vs_compile": 1.5, "vs_eager": 1.5, "frac_memcpy": 0.8, "vs_static": 0.95}[key]
        ax.axvline(target, color="gray", linestyle="--", linewidth=0.8)
        if ratio and measured:
            ax.set_xscale("log")
            lo, hi = min(0.5, min(measured) / 1.2), max(2.0, max(measured) * 1.2)
            ax.set_xlim(lo, hi)
            ax.set_xticks([2.0**k for k in range(-6, 10) if lo <= 2.0**k <= hi])
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
                lambda v, _: f"{v:g}×"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(label)
        ax.tick_params(axis="y", labelsize=6)
    axes[0][0].set_yticks(range(len(names)), names)
    axes[0][0].set_ylim(len(names) - 0.5, -0.5)  # first row on top, no margins
    axes[0][-1].legend(loc="lower right", fontsize=7)
    h = fig.get_figheight()
    fig.suptitle(f"stridec suite {suite} — {report['device']['name']} — {report['date'][:10]}",
                 y=1 - 0.15 / h)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / h))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


# --------------------------------------------------------------------------- run


def result_stem(report: dict[str, Any], folder: Path) -> Path:
    """`<folder>/<date>-cpu-<suite>`, with `-2`, `-3` … where that day's file exists."""
    st = report.get("settings") or {}
    base = (f"{report['date'][:10]}-cpu-{report['suite']}"
            + ("-smoke" if report["smoke"] else "")
            + (f"-{st['threads']}t" if st.get("threads_given") else "")
            + ("-cputime" if st.get("clock") == "thread" else "")
            + ("-tune" if st.get("tune") is not None else ""))
    stem, k = folder / base, 1
    while any(stem.with_suffix(ext).exists() for ext in (".json", ".md", ".png")):
        k += 1
        stem = folder / f"{base}-{k}"
    return stem


def run_suite(args: argparse.Namespace) -> int:
    """`bench/run.py --cpu --suite NAME` (or `--smoke --suite NAME`): every row of the
    suite, `--runs` times; writes `<date>-cpu-<suite>.{json,md,png}`."""
    smoke = args.smoke
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    rows = select_cases(suite_cases.cases(args.suite, seed, smoke, args.random_rows), args.only)
    if args.list:
        for c in rows:
            print(f"{c.name:<44} {c.shape_text:<28} {c.dtype:<9} {c.description}")
        return 0
    backend = "cpu" if cpu_backend.available() else "interpret"
    if not smoke and backend != "cpu":
        print("bench: the suites time the cpu backend, which needs a C compiler",
              file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)  # before any compile: Inductor reads it then
    if args.clock == "thread" and torch.get_num_threads() != 1:
        print("bench: --clock thread times the calling thread; it goes with --threads 1",
              file=sys.stderr)
        return 2
    repeats = args.cpu_repeats
    timer = None if smoke else wall_timer(repeats)
    torch_compile = (not smoke) if args.torch_compile is None else args.torch_compile
    s = Session(torch.device("cpu"), "cpu", backend, timer, torch_compile, tune=args.tune,
                interleave=0 if smoke else repeats, flush_mb=0 if smoke else args.cpu_flush_mb,
                clock=time.thread_time if args.clock == "thread" else time.perf_counter)
    info, versions = environment(s.device)
    clock = ("the calling thread's CPU time (time.thread_time)" if args.clock == "thread"
             else "host clock")
    how = ("none (smoke: tiny sizes, correctness only)" if smoke else
           f"{clock}; the row's systems, a same-run memcpy and streaming copy interleaved, "
           f"orders balanced, {repeats} rounds, medians; "
           + (f"caches flushed before each timed call (a {args.cpu_flush_mb} MB read); "
              if args.cpu_flush_mb else "caches not flushed (warm); ")
           + f"{torch.get_num_threads()} threads")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    if args.suite == "random":
        print(f"random suite: seed {seed} (repeat it with --seed {seed})")
    print(f"stridec suite {args.suite}: {device_text(info)}, torch {versions['torch']}, "
          f"stridec {versions['stridec']}; {len(rows)} rows x {args.runs} run(s)"
          + ("; smoke: tiny sizes, no timing" if smoke else ""))
    report: dict[str, Any] = {
        "schema": SCHEMA, "suite": args.suite, "smoke": smoke,
        "seed": seed if args.suite == "random" else None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": "cpu", "backend": backend, "device": info, "versions": versions,
        "settings": {"timer": how, "repeats": repeats, "flush_mb": args.cpu_flush_mb,
                     "threads": torch.get_num_threads(), "clock": args.clock,
                     "threads_given": args.threads is not None,
                     "torch_compile": torch_compile, "runs": args.runs, "command": command,
                     "tune": args.tune},
        "runs": [],
    }
    out = args.out if args.out is not None else (None if smoke else
                                                 Path(__file__).resolve().parent / "results")
    out = out or None  # --quick: False, nothing written
    stem = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        stem = result_stem(report, out)
    for run in range(args.runs):
        progress = Progress(len(rows))
        report["runs"].append([])
        for case in rows:
            progress.begin(case.name, f"({case.shape_text} {case.dtype})")
            if args.suite == "symbolic":  # odd runs compile the static graph first
                row = measure_symbolic(case, s, progress, smoke, static_first=run % 2 == 1)
            else:
                row = measure_case(case, s, progress, smoke)
            s.release()
            report["runs"][-1].append(row)
            progress.end(_line(row))
            if stem is not None:  # a long run that stops keeps what it measured
                stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n",
                                                     encoding="utf-8")
        if args.runs > 1:
            print(f"run {run + 1} of {args.runs} done")
    report["summary"] = [summarize(args.suite, rows_) for rows_ in report["runs"]]
    page = markdown(report)
    print()
    print(page)
    if stem is not None:
        stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n",
                                             encoding="utf-8")
        stem.with_suffix(".md").write_text(page, encoding="utf-8")
        print(f"wrote {stem.with_suffix('.json')}")
        print(f"wrote {stem.with_suffix('.md')}")
        skipped = None if smoke else write_chart(report, stem.with_suffix(".png"))
        if skipped is None and not smoke:
            print(f"wrote {stem.with_suffix('.png')}")
        elif skipped:
            print(f"chart skipped: {skipped}")
    failed = [r["name"] for rows_ in report["runs"] for r in rows_
              if r["status"] not in ("ok", "untraceable")]
    if failed:
        print(f"FAILED rows: {', '.join(sorted(set(failed)))}", file=sys.stderr)
        return 1
    return 0


def _line(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        text = f"{row['status'].upper()}: {row['error']}"
        eager = (row["systems"].get("eager") or {}).get("ms")
        return text + (f"  (eager {eager:.3g} ms)" if eager else "")
    if row["kind"] == "symbolic":
        text = f"ok  kernels {row['kernels']} symbolic, {row['kernels_static']} static"
        if row.get("vs_static"):
            text += f"  x{row['vs_static']:.2f} vs static"
        return text
    text = f"ok  ({row['kernels']} kernel{'s' if row['kernels'] != 1 else ''})"
    for key, label in (("vs_eager", "eager"), ("vs_compile", "compile")):
        if row.get(key):
            text += f"  x{row[key]:.2f} vs {label}"
    if row.get("frac_memcpy"):
        text += f"  {row['frac_memcpy']:.2f} of memcpy"
    if row.get("tuned_vs_untuned"):
        changed = "changed" if (row.get("tune") or {}).get("changed") else "same plan"
        text += f"  tuned x{row['tuned_vs_untuned']:.3f} vs untuned ({changed})"
    return text


def rewrite(json_path: Path) -> list[Path]:
    """The `.md` and `.png` of a suite's JSON written again beside it (after a change to
    how they are drawn: the numbers are the JSON's)."""
    report = json.loads(json_path.read_text(encoding="utf-8"))
    md = json_path.with_suffix(".md")
    md.write_text(markdown(report), encoding="utf-8")
    written = [md]
    if not report.get("smoke") and write_chart(report, json_path.with_suffix(".png")) is None:
        written.append(json_path.with_suffix(".png"))
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write a copy suite's .md and .png again from "
                                            "its .json (runs: bench/run.py --cpu --suite)")
    p.add_argument("json", type=Path, nargs="+", help="bench/results/<date>-cpu-<suite>.json")
    for path in p.parse_args(argv).json:
        for written in rewrite(path):
            print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
