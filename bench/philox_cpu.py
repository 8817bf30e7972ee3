"""Philox float32 uniforms on the native CPU backend against `torch.rand`, same sizes, one run
(the target: at least as fast as `torch.rand`, docs/design.md's performance targets; a
benchmark, never a timed test).

    python bench/philox_cpu.py                      # sizes 2^16 … 2^24, 15 repetitions
    python bench/philox_cpu.py --sizes 65536 1048576 --repeats 31 --threads 1

Each row compiles `g.philox_uniform(state, (n,), "float32")` for `backend="cpu"`, calls it
once to build and check it (bit for bit against `stridec.run_reference` for sizes up to
2^20), then times, interleaved in one loop of `--repeats` rounds, one call of each:

- **stridec cpu**: `fn(state, out=(values, new_state))` into preallocated tensors;
- **torch.rand**: `torch.rand(n, out=values)` into the same tensor (torch's CPU generator,
  a different stream of numbers: the same amount of work, not the same values).

The table gives the median time of each, elements per ns, and torch's median over
stridec's (above 1.0: stridec is faster). `--threads` sets `torch.set_num_threads` (the
cpu backend runs on `torch.get_num_threads()` threads; `torch.rand` uses one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's stridec

import stridec
from stridec.runtime.backends.reference_philox import make_state


def _state() -> torch.Tensor:
    return torch.from_numpy(make_state(2**64 - 5, 0x1234_5678_9ABC_DEF0).view("int32").copy())


def _row(n: int, repeats: int) -> tuple[float, float]:
    g = stridec.Graph(f"uniform_{n}")
    s = g.input("s", (6,), "int32")
    values, new_state = g.philox_uniform(s, (n,), "float32")
    g.output(values, new_state)
    fn = stridec.compile(g, backend="cpu")
    state = _state()
    out_values = torch.empty(n, dtype=torch.float32)
    out_state = torch.empty(6, dtype=torch.int32)
    fn(state, out=(out_values, out_state))
    if n <= 1 << 20:
        expected, expected_state = stridec.run_reference(g, state)
        assert torch.equal(out_values.view(torch.int32), expected.view(torch.int32)), n
        assert torch.equal(out_state, expected_state), n
    torch.rand(n, out=out_values)
    ours, theirs = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(state, out=(out_values, out_state))
        t1 = time.perf_counter()
        torch.rand(n, out=out_values)
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats} interleaved repetitions\n")
    print("| elements | stridec cpu (ms) | torch.rand (ms) | stridec elem/ns | speed-up |")
    print("|---------:|-----------------:|----------------:|----------------:|---------:|")
    for n in args.sizes:
        ours, theirs = _row(n, args.repeats)
        print(f"| {n:>8} | {ours * 1e3:16.3f} | {theirs * 1e3:15.3f} | "
              f"{n / ours / 1e9:15.2f} | {theirs / ours:7.2f}x |")


if __name__ == "__main__":
    main()
