"""The generated C under AddressSanitizer and UndefinedBehaviorSanitizer: run by
tests/reliability/test_sanitized.py in a process whose C units are built with
`STRIDEC_SANITIZE=address,undefined` and which has the sanitizers' runtime preloaded
(`LD_PRELOAD`). Any finding (a read or write outside an allocation, a misaligned access,
an overflow the C standard leaves undefined) aborts the process with the sanitizer's
report; a wrong result exits 1.

    python sanitized_run.py [--graphs N] [--dtypes float32,int8 | all] [--seed S]
                            [--cases linear,pad,... | all] [--places all]

1. The guard-page cases (tests/reliability/test_guard_pages.py: every copy strategy,
   fill and cast with `--cases all`) and Philox, inputs and outs against a guard page
   and misaligned by 1 byte (`--places all`: every placement of the tests), on one
   thread and on three with every store streamed.
2. N graphs of the fuzzer (tests/reliability/test_fuzz.py, seeds S, S+1, ...), their
   inputs and casts drawn from the given dtypes (fewer dtypes, fewer C units to build),
   the cpu backend against the reference; each graph on one or three threads, streamed
   or not, in turn.

It prints how many cases and graphs ran clean.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import torch  # noqa: E402

from stridec.runtime.backends import cpu  # noqa: E402

# The guard-page cases and placements of the small profile (CI): pads (masked rows and
# a masked transpose: the planned library's masks), a pack (a masked interleave) and a
# cast of float32, which the small profile's fuzzer graphs share, ending at a guard page
# aligned and one byte off: few C units to build (each takes seconds with the sanitizers).
SMALL_CASES = ("pad", "pad_transpose", "pack", "cast")
SMALL_PLACES = (("end", 0), ("end", 1))


def guard_page_cases(names: tuple[str, ...], places: tuple[tuple[str, int], ...]) -> int:
    import test_guard_pages as guard

    ran = 0
    for threads, stream in ((1, False), (3, True)):
        torch.set_num_threads(threads)
        cpu.set_stream_threshold(0 if stream else -1)
        for name in names:
            for place in places:
                guard.test_inputs_and_outs_against_guard_pages(name, place, None)
                ran += 1
        for place in places:
            guard.test_philox_against_guard_pages(place, None)
            ran += 1
    return ran


def fuzz_graphs(count: int, dtypes: tuple[str, ...], seed: int) -> int:
    import test_fuzz as fuzz
    from hypothesis_draw import SeededDraw

    fuzz.backends_for = lambda graph: ("cpu",)  # the C kernels alone
    clean = 0
    for k in range(count):
        torch.set_num_threads(3 if k % 2 else 1)
        cpu.set_stream_threshold(0 if k % 4 >= 2 else -1)
        case = fuzz.random_case(SeededDraw(seed + k), dtypes)
        try:
            fuzz.check_case(case)
        except AssertionError as e:
            raise SystemExit(f"graph of seed {seed + k}: {e}\n{case.describe()}") from e
        clean += 1
    return clean


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--graphs", type=int, default=4)
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", default=",".join(SMALL_CASES),
                        help="guard-page cases (names of test_guard_pages.CASES, or all)")
    parser.add_argument("--places", default="small",
                        help="small (aligned and 1 byte off, at the end) or all")
    args = parser.parse_args()
    if not cpu.sanitize_flags():
        raise SystemExit("STRIDEC_SANITIZE is not set: the C units would not be sanitized")
    import test_fuzz as fuzz

    dtypes = fuzz.DTYPES if args.dtypes == "all" else tuple(args.dtypes.split(","))
    import test_guard_pages as guard

    names = tuple(sorted(guard.CASES)) if args.cases == "all" else tuple(args.cases.split(","))
    places = tuple(guard.PLACES) if args.places == "all" else SMALL_PLACES
    cases = guard_page_cases(names, places)
    print(f"sanitized: {cases} guard-page cases ran clean", flush=True)
    clean = fuzz_graphs(args.graphs, dtypes, args.seed)
    print(f"sanitized: {clean} of {args.graphs} fuzzer graphs ran clean "
          f"(dtypes {', '.join(dtypes)}; STRIDEC_SANITIZE={os.environ['STRIDEC_SANITIZE']})",
          flush=True)


if __name__ == "__main__":
    main()
