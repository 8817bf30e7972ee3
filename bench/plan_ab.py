"""A/B of the copy planner's model on the CPU: which plans of a suite's copies a change to
the host's caches (`Caches`) or to a constant of `copy_plan.py` changes, and how long
those plans take against the model's, called straight on the library.

    python bench/plan_ab.py --suite ttc --b slow_streams=True
    python bench/plan_ab.py --suite random --seed 5151 --b PERMUTE_GATHER_ELEMENT_BYTES=1.25
    python bench/plan_ab.py --suite models --only 'im2col*' --b slow_streams=True --list

Each row of the suite (`bench/cases.py`) is traced and compiled as the suite compiles it,
in a disk cache of its own so that every copy is planned, and the spec of each copy the
planner plans is kept. Each spec is then planned twice by the model (`plan_copy`): A with
the host's caches (or `--a`'s changes), B with `--b`'s; a change `NAME=VALUE` sets the
field of `Caches` or, upper case, the constant of `copy_plan.py`. Where A's and B's plans
differ, both run on scratch storages (`launch.planned_copy_runs`, as measured choice runs
them), their outputs compared, then timed: one thread, the thread's CPU time, a read of
`--flush-mb` MB before each call, A and B alternating, medians of `--reps`. Printed: each
changed copy's times and B/A, and the geomean of B/A (under 1: B is faster). `--list`
prints the changed copies without timing them.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import stridec  # noqa: E402
from bench import cases as suite_cases  # noqa: E402
from bench.run import last_level_cache_mb  # noqa: E402
from bench.suites import _expected, select_cases  # noqa: E402
from stridec.compiler import copy_plan  # noqa: E402
from stridec.compiler.codegen.c import plan as c_plan  # noqa: E402
from stridec.compiler.codegen.spec import CopySpec  # noqa: E402
from stridec.compiler.host import Caches, host_caches  # noqa: E402
from stridec.ir.affine import address_span  # noqa: E402
from stridec.ir.dtypes import DType  # noqa: E402
from stridec.runtime import launch  # noqa: E402
from stridec.runtime.cache import MEMORY_CACHE  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Planned:
    """A copy's plan as the library runs it: its library and argument block."""

    elem_bytes: int
    cast: tuple[str, ...]  # () for a copy, (source, destination) dtypes for a cast
    params: tuple[int, ...]
    kernel: str


def suite_specs(suite: str, seed: int, patterns: list[str] | None,
                smoke: bool = False) -> list[tuple[str, CopySpec]]:
    """(row name, spec) of every copy the planner plans for the suite's rows."""
    found: list[tuple[str, CopySpec]] = []
    row = [""]
    planned = c_plan.plan_copy

    def recording(spec: CopySpec, caches: Caches | None = None):
        found.append((row[0], spec))
        return planned(spec, caches)

    previous = os.environ.get("STRIDEC_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="stridec-plan-ab-") as cache:
        os.environ["STRIDEC_CACHE_DIR"] = cache  # nothing from disk: every copy planned
        MEMORY_CACHE.clear_memory()  # nor from memory
        c_plan.plan_copy = recording
        try:
            for case in select_cases(suite_cases.cases(suite, seed, smoke), patterns):
                row[0] = case.name
                _run_once(case)
        finally:
            c_plan.plan_copy = planned
            if previous is None:
                os.environ.pop("STRIDEC_CACHE_DIR", None)
            else:
                os.environ["STRIDEC_CACHE_DIR"] = previous
    return found


def _run_once(case: suite_cases.Case) -> None:
    """Compile and call the row's graph once (into outputs laid out as eager's where the
    row writes into them), as the suite does."""
    inputs = case.inputs()
    fn = stridec.compile(stridec.trace(case.fn, *inputs), backend="cpu")
    if case.into is None:
        fn(*inputs)
        return
    fn(*inputs, out=tuple(torch.empty_like(t) for t in _expected(case, inputs)))


def parse_changes(items: Sequence[str]) -> dict[str, object]:
    """`NAME=VALUE` pairs, each value a Python literal."""
    changes = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"plan_ab: a change is NAME=VALUE; got {item!r}")
        changes[name] = ast.literal_eval(value)
    return changes


@contextlib.contextmanager
def changed(changes: dict[str, object]) -> Iterator[Caches]:
    """The host's caches with the lower-case changes; the upper-case ones set in
    `copy_plan` meanwhile."""
    fields = {f.name for f in dataclasses.fields(Caches)}
    constants = {k: v for k, v in changes.items() if k.isupper()}
    unknown = [k for k in changes
               if (not hasattr(copy_plan, k) if k in constants else k not in fields)]
    if unknown:
        raise SystemExit(f"plan_ab: no Caches field or copy_plan constant {unknown}")
    saved = {k: getattr(copy_plan, k) for k in constants}
    for k, v in constants.items():
        setattr(copy_plan, k, v)
    try:
        yield dataclasses.replace(host_caches(),
                                  **{k: v for k, v in changes.items() if k in fields})
    finally:
        for k, v in saved.items():
            setattr(copy_plan, k, v)


def plans_of(specs: Sequence[tuple[str, CopySpec]],
             changes: dict[str, object]) -> list[Planned | None]:
    """The model's plan of each spec under `changes` (None: the planner takes none)."""
    out: list[Planned | None] = []
    with changed(changes) as caches:
        for _, spec in specs:
            plan = copy_plan.plan_copy(spec, caches)
            out.append(None if plan is None else Planned(
                plan.elem_bytes, tuple(plan.cast), c_plan.plan_params(plan), plan.kernel))
    return out


def _storages(spec: CopySpec) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat byte storages holding every address the spec reads and writes."""
    def nbytes(strides: tuple[int, ...], offset: int, dtype: DType) -> int:
        _, high = address_span(spec.sizes, strides, offset)
        return (high + 1) * dtype.itemsize
    n = nbytes(spec.src_strides, spec.src_offset, spec.src_dtype)
    # distinct bytes (pages of their own, not the shared zero page), so A and B compare
    src = (torch.arange(n, dtype=torch.int64) % 251).to(torch.uint8)
    dst = torch.zeros(nbytes(spec.dst_strides, spec.dst_offset, spec.dst_dtype),
                      dtype=torch.uint8)
    return src, dst


def time_pair(spec: CopySpec, a: Planned, b: Planned, reps: int,
              flush: torch.Tensor | None) -> tuple[float, float, bool]:
    """Median seconds of A and B on the library, and whether they wrote the same bytes."""
    runs, outs = [], []
    for p in (a, b):
        src, dst = _storages(spec)
        run = launch.planned_copy_runs(p.elem_bytes, [p.params], src, dst, p.cast)[0]
        run()
        runs.append(run)
        outs.append(dst)
    same = torch.equal(outs[0], outs[1])
    times: list[list[float]] = [[], []]
    for r in range(reps):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            if flush is not None:
                flush.sum()
            begin = time.thread_time()
            runs[k]()
            times[k].append(time.thread_time() - begin)
    return statistics.median(times[0]), statistics.median(times[1]), same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=("ttc", "models", "random"), required=True)
    p.add_argument("--seed", type=int, nargs="+", default=[0],
                   help="the random suite's seeds (each its 32 rows)")
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="rows whose name matches")
    p.add_argument("--a", nargs="*", default=[], metavar="NAME=VALUE")
    p.add_argument("--b", nargs="+", required=True, metavar="NAME=VALUE")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--flush-mb", type=int, default=2 * last_level_cache_mb())
    p.add_argument("--list", action="store_true", help="the changed copies, not timed")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compare(args)
    finally:
        torch.set_num_threads(threads)


def _compare(args: argparse.Namespace) -> int:
    """`main`'s work, on one thread."""
    seeds = args.seed if args.suite == "random" else [0]
    specs = [(f"{name}" if len(seeds) == 1 else f"{seed}:{name}", spec)
             for seed in seeds
             for name, spec in suite_specs(args.suite, seed, args.only, args.smoke)]
    plans_a = plans_of(specs, parse_changes(args.a))
    plans_b = plans_of(specs, parse_changes(args.b))
    flush = (torch.ones(args.flush_mb << 17, dtype=torch.int64)
             if args.flush_mb > 0 and not args.list else None)
    ratios, seen = [], set()
    print(f"{len(specs)} copies of {len({n for n, _ in specs})} rows")
    for (name, spec), a, b in zip(specs, plans_a, plans_b, strict=True):
        if a is None or b is None or a == b or (name, a, b) in seen:
            continue
        seen.add((name, a, b))
        if args.list:
            print(f"{name:44s} {a.kernel} -> {b.kernel}")
            continue
        ta, tb, same = time_pair(spec, a, b, args.reps, flush)
        ratios.append(tb / ta)
        print(f"{name:44s} A {ta * 1e3:8.3f} ms  B {tb * 1e3:8.3f} ms  B/A {tb / ta:.3f}  "
              f"{a.kernel} -> {b.kernel}" + ("" if same else "  OUTPUTS DIFFER"), flush=True)
        if not same:
            return 1
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{len(ratios)} copies change plan: B/A geomean {geo:.3f}, "
              f"{min(ratios):.3f}-{max(ratios):.3f}")
    elif not args.list:
        print("no plan changes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
