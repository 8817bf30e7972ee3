"""A cached `out=` call of a models-suite row with cold caches, and its parts one by one
(docs/cpu.md, "What is left below 1.0×"; a benchmark, never a timed test).

    python bench/cold_call.py                                # to_channels_last_64K
    python bench/cold_call.py kv_cache_cat_64K --calls 300
    python bench/cold_call.py from_channels_last_64K --parts stridec eager nothing

The row's function (bench/cases.py) is traced, compiled for the cpu backend and called
into preallocated outs twice (the second call is a cached one); then each part is called
in turn, the order rotated each round, a `--flush-mb` read (64 MB) before every call, as
`bench/run.py --cpu --suite models` times its rows; one thread (`torch.set_num_threads(1)`)
and the calling thread's CPU time (`time.thread_time`), as `--threads 1 --clock thread`.
Each number is the median of `--calls` calls in µs, with the 20th and 80th percentiles:

- **stridec**: `fn(*inputs, out=outs)`; **eager**: the row's `into(outs, *inputs)`
  (`out.copy_(view)`, `torch.cat(..., out=)`);
- **nothing**: a call of an empty Python function: the floor of every row here, the
  clock and the call included;
- **key**: the call key (`call_path.read_out_key`: the builtin one where it loaded);
- **kernel**: the hit's `bound` function on the key's pointers (the C copy, its bytes
  included);
- **threads**: `torch.get_num_threads()`; **bump**: the outs' version bump;
  **modes**: the dispatch-mode check (`dispatch_modes`).

A part's time alone is an upper bound on what it adds to the call: there, some of what it
touches is already warm.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import stridec  # noqa: E402
from bench.cases import model_cases  # noqa: E402
from stridec.runtime import call_path, launch  # noqa: E402
from stridec.runtime.tensors import dispatch_modes  # noqa: E402

PARTS = ("stridec", "eager", "nothing", "key", "kernel", "threads", "bump", "modes")


def parts_of(row: str) -> dict[str, Callable[[], Any]]:
    """The row's calls and parts (module docstring), its outs checked against torch."""
    case = next((c for c in model_cases() if c.name == row), None)
    if case is None or case.into is None:
        raise SystemExit(f"cold_call: {row!r} is not a models row with preallocated outs")
    inputs = tuple(case.make_inputs(torch.Generator().manual_seed(0)))
    fn = stridec.compile(stridec.trace(case.fn, *inputs), backend="cpu")
    expected = case.fn(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    outs = tuple(torch.empty(e.shape, dtype=e.dtype) for e in expected)
    for _ in range(2):
        fn(*inputs, out=outs)
    if not all(torch.equal(o, e) for o, e in zip(outs, expected, strict=True)):
        raise SystemExit(f"cold_call: {row}: stridec's outs differ from torch's")
    key, pointers = call_path.read_out_key(inputs, outs)
    bound = fn._hits.data[key].bound
    into = case.into

    def kernel() -> None:
        bound(list(pointers), 1)

    def nothing() -> None:
        pass

    return {"stridec": lambda: fn(*inputs, out=outs), "eager": lambda: into(outs, *inputs),
            "nothing": nothing, "key": lambda: call_path.read_out_key(inputs, outs),
            "kernel": kernel, "threads": torch.get_num_threads,
            "bump": lambda: launch.bump_versions(outs), "modes": dispatch_modes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("row", nargs="?", default="to_channels_last_64K")
    p.add_argument("--calls", type=int, default=200, help="calls of each part")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--flush-mb", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    every = parts_of(args.row)
    names = list(args.parts)
    flush = torch.ones(args.flush_mb << 17, dtype=torch.int64)
    samples: dict[str, list[float]] = {name: [] for name in names}
    clock = time.thread_time
    for r in range(args.calls):
        for name in names[r % len(names):] + names[:r % len(names)]:
            flush.sum()
            t0 = clock()
            every[name]()
            samples[name].append((clock() - t0) * 1e6)
    print(f"{args.row}: µs per call, medians of {args.calls} (20th-80th percentile), "
          f"a {args.flush_mb} MB read before each")
    for name in names:
        s = sorted(samples[name])
        print(f"  {name:8s} {statistics.median(s):7.1f}  ({s[len(s) // 5]:.1f}-"
              f"{s[4 * len(s) // 5]:.1f})")
    if "stridec" in samples and "eager" in samples:
        ratio = statistics.median(samples["eager"]) / statistics.median(samples["stridec"])
        print(f"  eager / stridec {ratio:.3f}")


if __name__ == "__main__":
    main()
