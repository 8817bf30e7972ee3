"""Disk faults under the cache, run by tests/reliability/test_cache_faults.py as
`python cache_fault_scenarios.py <scenario>`, each in a process of its own (the C units
this process loaded stay loaded: a new process is what finds the disk as it is). The
folders are the caller's: STRIDEC_CACHE_DIR and TMPDIR (a tmpfs mounted full, read-only
or noexec, where the test could mount one). The process compiles and runs graphs on the
cpu backend, checks every result against torch, and prints each RuntimeWarning it got
as `WARNING: ...` and a StridecError as `ERROR: <class>: ...`; exit status 0 unless a
result is wrong or something other than a StridecError escapes.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch

import stridec
from stridec.errors import StridecError
from stridec.runtime.backends import cpu


def run_graphs() -> None:
    """A graph of two C units (the pool and Philox's: two small builds, so that each
    scenario costs a few seconds), checked against the reference backend."""
    g = stridec.Graph("faults")
    bits, state = g.philox(g.input("state", (6,), "uint32"), (37, 70))
    g.output(bits, state)
    fn = stridec.compile(g, backend="cpu")
    start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
    got, want = fn(start.clone()), stridec.run_reference(g, start.clone())
    if not all(torch.equal(a.view(torch.int32), b.view(torch.int32))
               for a, b in zip(got, want, strict=True)):
        raise SystemExit("wrong result")


def main(scenario: str) -> None:
    if scenario == "no_room_check":  # the writes themselves find the disk full
        cpu.MIN_FREE_BYTES = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run_graphs()
            run_graphs()  # again: each warning once
        except StridecError as e:
            print(f"ERROR: {type(e).__name__}: {e}", flush=True)
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            print(f"WARNING: {w.message}", flush=True)
    print(f"BUILDS: {cpu.BUILD_STATS.compiler_runs} LOADS: {cpu.BUILD_STATS.disk_loads}",
          flush=True)
    print("DONE", os.environ.get("STRIDEC_CACHE_DIR"), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
