"""Sweep each benchmark row's kernel plan on a GPU: strategy, tile and warps (the targets:
docs/design.md#performance-targets).

    python bench/tune.py                     # every row at full size, on the GPU
    python bench/tune.py --only 'pack_*'     # some rows (as bench/run.py selects them)
    python bench/tune.py --smoke             # CPU: tiny sizes through Triton's interpreter,
                                             # every variant's output checked, no timing

For each row the graph is lowered as `stridec.compile` lowers it, then again with each
`Tuning` of a small neighbourhood of stridec's own choice:

- every strategy that can run the copy (the default, `gather` always, `tiled_transpose` or
  `linear` where they apply), each with its default tile;
- around each such tile: one axis halved or doubled, both halved or doubled, and the other
  warp count (4 <-> 8).

Every variant's output is checked against the row's oracle before it is timed (a wrong
variant is reported and never wins). Times are `triton.testing.do_bench` medians (CUDA
events, L2 flushed, warm-up excluded) of the program alone, beside a same-run `copy_` of
the same byte count. Printed: per row, stridec's default and the best variant with their
% of copy bandwidth; written: `bench/results/tune-<date>-<gpu>.json` (every variant).
The defaults in `stridec/compiler/codegen/copy.py` and `philox.py` are then set by hand
from these tables: a sweep informs the heuristics, it does not replace them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.run import RESULTS, Session, cuda_timer, environment, select  # noqa: E402
from bench.workloads import Mismatch, Workload, assert_same  # noqa: E402
from stridec.compiler.codegen.lower import lower_to_program  # noqa: E402
from stridec.compiler.codegen.program import Program  # noqa: E402
from stridec.compiler.codegen.spec import Tuning  # noqa: E402
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager  # noqa: E402
from stridec.errors import StridecError  # noqa: E402
from stridec.runtime import launch  # noqa: E402

STRATEGIES = ("linear", "tiled_transpose", "gather")


def program_for(w: Workload, scale: str, tuning: Tuning | None) -> Program:
    """The row's program for CUDA, as `stridec.compile` builds it (contiguous inputs), with
    `tuning`'s overrides. The CUDA plan is kept on the CPU too: the interpreter runs it."""
    graph = w.graph(scale)
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    return lower_to_program(graph, "cuda", tuning)


def _signature(program: Program) -> tuple[str, tuple[int, ...], int]:
    """(strategy, blocks, warps) of a program's kernels (the first, for the table)."""
    k = program.kernels[0]
    return k.strategy, tuple(k.constexprs.values()), k.num_warps


def variants(w: Workload, scale: str) -> Iterator[tuple[Tuning | None, Program]]:
    """The default program, then each distinct variant of the neighbourhood (see above)."""
    default = program_for(w, scale, None)
    yield None, default
    if not default.kernels:
        return
    seen = {_signature(default)}
    strategy = default.kernels[0].strategy
    philox = default.kernels[0].kind == "philox"
    bases = [strategy] if philox else [strategy] + [s for s in STRATEGIES if s != strategy]
    for base in bases:
        try:
            start = program_for(w, scale, Tuning(strategy=None if philox else base))
        except StridecError:  # the strategy cannot run this copy
            continue
        _, blocks, warps = _signature(start)
        candidates = [blocks]
        for a in range(len(blocks)):
            for factor in (0.5, 2):
                candidates.append(tuple(
                    max(1, int(b * factor)) if k == a else b for k, b in enumerate(blocks)
                ))
        if len(blocks) == 2:
            candidates += [tuple(max(1, b // 2) for b in blocks), tuple(b * 2 for b in blocks)]
        for cand in candidates:
            for nw in (warps, 8 if warps == 4 else 4) if cand == blocks else (warps,):
                tuning = Tuning(None if philox else base, cand, nw)
                try:
                    program = program_for(w, scale, tuning)
                except StridecError:
                    continue
                sig = _signature(program)
                if sig not in seen:
                    seen.add(sig)
                    yield tuning, program


def _describe(tuning: Tuning | None, program: Program) -> str:
    strategy, blocks, warps = _signature(program)
    tag = "default " if tuning is None else ""
    return f"{tag}{strategy} {'x'.join(map(str, blocks))} w{warps}"


def _checker(w: Workload, s: Session, inputs: list) -> Callable[[list], None]:
    """Raises `Mismatch` unless a variant's outputs are the row's: against the eager
    outputs, computed once for all variants (not once each: at full size that is most of
    a sweep's time), or through the row's own check (Philox: the reference's windows)."""
    graph = w.graph(s.scale)
    if w.check_fn is not None:
        return lambda outputs: w.check(s.scale, graph, inputs, outputs)
    expected = w.eager_fn(s.scale)(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)

    def check(outputs: list) -> None:
        if len(outputs) != len(expected):
            raise Mismatch(f"{w.name}: {len(outputs)} outputs, expected {len(expected)}")
        for k, (got, want) in enumerate(zip(outputs, expected, strict=True)):
            assert_same(got, want, f"{w.name} output {k}")

    return check


def tune_row(w: Workload, s: Session) -> dict[str, Any]:
    inputs = w.inputs(s.scale, s.device)
    check = _checker(w, s, inputs)
    row: dict[str, Any] = {"name": w.name, "variants": [], "copy": None}
    total = None
    for tuning, program in variants(w, s.scale):
        entry: dict[str, Any] = {
            "tuning": None if tuning is None else asdict(tuning),
            "plan": _describe(tuning, program),
            "kernels": len(program.launches),
        }
        try:
            outputs = launch.run(program, tuple(inputs), s.device)
            s.sync()
            check(outputs)
            entry["correct"] = True
        except (Mismatch, StridecError, RuntimeError) as e:
            entry["correct"], entry["error"] = False, f"{type(e).__name__}: {e}"
            row["variants"].append(entry)
            print(f"    {entry['plan']:36} WRONG: {entry['error'][:120]}", flush=True)
            continue
        if total is None:
            read, written = w.bytes_moved(inputs, outputs)
            total = read + written
            if s.timer is not None:
                row["copy"] = s.baseline("fill" if w.baseline == "fill" else "copy", total)
        del outputs
        if s.timer is not None:
            t = s.timer(lambda program=program: launch.run(program, tuple(inputs), s.device))
            entry.update(ms=t.ms, ms_q20=t.q20, ms_q80=t.q80, gbps=total / (t.ms * 1e6))
            entry["pct_limit"] = 100.0 * entry["gbps"] / row["copy"]["gbps"]
            print(f"    {entry['plan']:36} {t.ms:8.3f} ms  {entry['pct_limit']:5.1f} %", flush=True)
        else:
            print(f"    {entry['plan']:36} ok", flush=True)
        row["variants"].append(entry)
    del check
    s.release()
    timed = [v for v in row["variants"] if "ms" in v]
    if timed:
        row["default"] = timed[0] if timed[0]["tuning"] is None else None
        row["best"] = min(timed, key=lambda v: v["ms"])
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| row | default plan | % of limit | best plan | % of limit | speed-up |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for r in rows:
        d, b = r.get("default"), r.get("best")
        if not d or not b:
            continue
        lines.append(
            f"| {r['name']} | {d['plan']} | {d['pct_limit']:.1f} | {b['plan']} | "
            f"{b['pct_limit']:.1f} | {d['ms'] / b['ms']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="rows to sweep (fnmatch patterns)")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, no timing")
    parser.add_argument("--out", default=None, help="folder for the JSON (bench/results)")
    parser.add_argument("--warmup-ms", type=float, default=25.0)
    parser.add_argument("--rep-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    if args.smoke:
        device, scale, timer = torch.device("cpu"), "tiny", None
    elif not torch.cuda.is_available():
        print("bench/tune.py: no CUDA device; use --smoke on the CPU", file=sys.stderr)
        return 2
    else:
        device, scale = torch.device("cuda"), "full"
        timer = cuda_timer(args.warmup_ms, args.rep_ms)
    s = Session(device=device, scale=scale, backend="auto", timer=timer, torch_compile=False)
    rows = []
    failed = 0
    started = time.perf_counter()
    items = [w for kind, w in select(args.only) if kind == "bandwidth"]
    for i, w in enumerate(items):
        print(f"[{i + 1}/{len(items)}] {w.name}", flush=True)
        row = tune_row(w, s)
        failed += sum(not v["correct"] for v in row["variants"])
        rows.append(row)
    print(f"{sum(len(r['variants']) for r in rows)} variants, {failed} wrong, "
          f"{time.perf_counter() - started:.0f} s")
    if timer is not None:
        gpu_info, versions = environment(device)
        doc = {
            "schema": "stridec-tune/1",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "gpu": gpu_info,
            "versions": versions,
            "rows": rows,
        }
        out = Path(args.out) if args.out else RESULTS
        out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        gpu = str(gpu_info["name"]).replace(" ", "-")
        path = out / f"tune-{stamp}-{gpu}.json"
        path.write_text(json.dumps(doc, indent=1, default=str))
        print(table(rows))
        print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
