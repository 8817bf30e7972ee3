"""Compile time of the default pass pipeline on generated graphs (a benchmark, never a
timed test; the target is in docs/design.md#performance-targets).

    python bench/compile_time.py            # 100, 1,000 and 10,000 ops
    python bench/compile_time.py --profile  # and a cProfile of the 1,000-op graph
    python bench/compile_time.py --sizes 1000 --lower cuda   # and the kernels' generation
    python bench/compile_time.py --sizes 1000 --lower cuda --against ../old  # A/B, below

Each graph is a mix of what real layout programs do: per block, one or two inputs go through
a chain of views (permute, slice, unsqueeze, expand, flip, transpose, reshape), then
materializations (contiguous, a cast, a pack to NCHW4 and back, a pad, a cat of two
blocks), and some results become outputs. Blocks are independent of each other except
for the cat, so the op count grows linearly with the number of blocks. Reported: the best
of a few runs in CPU ms (the target is about CPU time; wall time is shown too, and grows
when other processes share the cores), CPU µs per op, and the growth factor from one size
to the next -- linear growth is about 10x for 10x the ops. `PassManager.run` itself pauses
Python's cyclic garbage collector (its full collections walk the whole heap, so their cost
grew with the graph and bent the curve upwards at 10,000 ops); the last columns also keep
it paused around the whole timed call, as `timeit` does, which should now change little.
Target: <= 100 ms at 1,000 ops. `--lower TARGET` also times `lower_to_program(graph,
TARGET)` after the pipeline ("cuda": Triton source, "cpu": Triton for the interpreter,
"c": C), the rest of a first `stridec.compile` short of building the kernels.

`--against PATH` compares with another checkout of stridec (an older commit, say, from
`git worktree add`): the same measurement runs in a new process for each tree in turn,
`--rounds` times (this tree first, then PATH, and so on), each process importing its own
tree's stridec (`--root`); the table shows each round's best CPU ms and, per tree, the
median and the best of the rounds, and the ratio of the medians. Alternating rounds in
one run is what makes a few per cent visible on a machine other processes share.

Where the time goes (`--profile`): the passes themselves, lower-formats and fuse-copies
first, and the verification after each of the eight passes, which re-infers only what a
pass changed (`verify_graph(graph, incremental=True)`: about 40 % of the run, down from
60 % when every op was re-inferred after every pass). With the collector paused the
10,000-op graph still takes 11-12x the 1,000-op one: the work per op is constant, but
a bigger graph misses the CPU caches more often (even `dce`, one loop over the ops, costs
about 0.4 us per op at 500 ops and 1 us at 14,000).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _root(argv: list[str]) -> Path:
    """The checkout whose stridec is timed: `--root PATH` when given, else this one."""
    for i, arg in enumerate(argv):
        if arg == "--root" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if arg.startswith("--root="):
            return Path(arg.partition("=")[2]).resolve()
    return HERE


sys.path.insert(0, str(_root(sys.argv)))

import stridec  # noqa: E402
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager  # noqa: E402

SIZES = (100, 1_000, 10_000)


def _block(g: stridec.Graph, r: random.Random, k: int, previous: stridec.Value | None) -> list:
    """About 20 ops: views, materializations, and the outputs to keep."""
    n, c, h, w = r.choice((1, 2, 4)), r.choice((3, 4, 8, 16)), r.choice((4, 7, 8)), 8
    x = g.input(f"x{k}", (n, c, h, w), r.choice(("float32", "float16")))
    v = x.permute(0, 2, 3, 1)[:, 1:, ::2].unsqueeze(0)           # 3 views
    v = v.transpose(1, 2).flip(4).squeeze(0)                        # 3 views
    nhwc = v.contiguous()                                           # copy
    back = nhwc.permute(0, 3, 1, 2).reshape(n, c, -1)               # view + non-viewable reshape
    cast = back.to("float32")                                       # copy (fused)
    packed = x.pack("NCHW4")                                        # copy
    unpacked = packed.unpack("NCHW4", c)                            # copy (fused)
    padded = stridec.pad(x[:, :, 1:], (1, 1))                       # fill + copy
    wide = x.expand(2, n, c, h, w)[1].contiguous()                  # view + copy (eliminated)
    outs = [cast, unpacked, padded.transpose(2, 3), wide]
    if previous is not None and previous.shape == x.shape and previous.dtype == x.dtype:
        outs.append(stridec.cat([previous, x], 1))                 # two copies into a buffer
    return outs, x


def make_graph(ops: int, seed: int = 0) -> stridec.Graph:
    """A graph of `ops` ops or up to one block (about 20 ops) more; the count is reported."""
    r = random.Random(seed)
    g = stridec.Graph(f"bench{ops}")
    outs: list = []
    previous = None
    k = 0
    while len(g.ops) + 1 < ops:  # + 1: the output op
        block_outs, previous = _block(g, r, k, previous)
        outs.extend(block_outs)
        k += 1
    g.output(*outs)
    return g


def time_pipeline(
    ops: int, repeats: int, gc_off: bool = False, lower: str | None = None
) -> tuple[int, float, float, float]:
    """Op count, the best CPU time and best wall time of the pipeline, and the best CPU
    time of `lower_to_program(graph, lower)` after it (0 without `lower`), in seconds.

    CPU time (`time.process_time`) is what the target is about; wall time is shown too, as
    it grows when other processes share the cores. With `gc_off` the cyclic garbage
    collector is paused while the pipeline and the lowering run, as `timeit` does.
    """
    if lower is not None:
        from stridec.compiler.codegen.lower import lower_to_program
    cpu = wall = lowering = float("inf")
    count = 0
    for _ in range(repeats):
        g = make_graph(ops)
        count = len(g.ops)
        gc.collect()
        if gc_off:
            gc.disable()
        try:
            c0, w0 = time.process_time(), time.perf_counter()
            PassManager.parse(DEFAULT_PIPELINE).run(g)
            c1 = time.process_time()
            cpu = min(cpu, c1 - c0)
            wall = min(wall, time.perf_counter() - w0)
            if lower is not None:
                lower_to_program(g, lower)
                lowering = min(lowering, time.process_time() - c1)
        finally:
            gc.enable()
    return count, cpu, wall, (lowering if lower is not None else 0.0)


def measure(sizes: list[int], repeats: int, lower: str | None) -> list[dict[str, float]]:
    """Per size: the op count and the best CPU ms of the pipeline and of the lowering."""
    rows = []
    for size in sizes:
        count, cpu, _, lowering = time_pipeline(size, repeats if size < 10_000 else 1,
                                                lower=lower)
        rows.append({"ops": count, "pipeline_ms": cpu * 1e3, "lower_ms": lowering * 1e3})
    return rows


def against(args: argparse.Namespace) -> int:
    """Rounds of this tree and `args.against` in turn, each in a new process (module
    docstring); prints every round and the summary."""
    trees = {"this": HERE, "other": Path(args.against).resolve()}
    command = [sys.executable, str(Path(__file__).resolve()), "--json", "--sizes",
               *map(str, args.sizes), "--repeats", str(args.repeats)]
    if args.lower:
        command += ["--lower", args.lower]
    results: dict[str, list[list[dict[str, float]]]] = {name: [] for name in trees}
    print(f"this:  {trees['this']}\nother: {trees['other']}")
    print(f"pipeline: {DEFAULT_PIPELINE}; best of {args.repeats} per round, CPU ms")
    for r in range(args.rounds):
        for name, root in trees.items():
            out = subprocess.run(command + ["--root", str(root)], check=True,
                                 capture_output=True, text=True).stdout
            report = json.loads(out.strip().splitlines()[-1])
            if Path(report["stridec"]).resolve().parents[1] != root:
                raise SystemExit(f"{name}: timed the stridec of {report['stridec']}, not {root}")
            rows = report["rows"]
            results[name].append(rows)
            shown = "  ".join(f"{row['ops']} ops: {row['pipeline_ms']:.1f}"
                              + (f" + {row['lower_ms']:.1f}" if args.lower else "")
                              for row in rows)
            print(f"round {r + 1} {name:<5} {shown}")
    columns = ["pipeline_ms"] + (["lower_ms", "total_ms"] if args.lower else [])
    print(f"\n{'ops':>8} {'':<7}" + "".join(f" {c + ' median':>17} {'best':>7}"
                                             for c in columns))
    for k in range(len(args.sizes)):
        medians: dict[str, dict[str, float]] = {}
        for name in trees:
            rows = [rounds[k] for rounds in results[name]]
            values = {c: [row.get(c, row["pipeline_ms"] + row["lower_ms"]) for row in rows]
                      for c in columns}
            medians[name] = {c: statistics.median(v) for c, v in values.items()}
            print(f"{rows[0]['ops']:>8} {name:<7}" + "".join(
                f" {statistics.median(v):17.1f} {min(v):7.1f}" for v in values.values()))
        print(f"{'':>8} {'ratio':<7}" + "".join(
            f" {medians['this'][c] / medians['other'][c]:17.3f} {'':>7}" for c in columns))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="cProfile the 1,000-op graph")
    p.add_argument("--lower", choices=("cuda", "cpu", "c"),
                   help="also time lower_to_program(graph, LOWER) after the pipeline")
    p.add_argument("--against", metavar="PATH",
                   help="compare with the stridec checkout at PATH, in alternating rounds")
    p.add_argument("--rounds", type=int, default=5, help="rounds per tree with --against")
    p.add_argument("--root", metavar="PATH", help="the checkout whose stridec is timed "
                   "(read before the import; default: this script's)")
    p.add_argument("--json", action="store_true",
                   help="print only JSON: the stridec timed and {ops, pipeline_ms, "
                   "lower_ms} per size")
    args = p.parse_args(argv)
    if args.against:
        return against(args)
    if args.json:
        print(json.dumps({"stridec": stridec.__file__,
                          "rows": measure(args.sizes, args.repeats, args.lower)}))
        return 0

    print(f"stridec {stridec.__version__}, Python {platform.python_version()}, "
          f"{platform.processor() or platform.machine()}")
    print(f"pipeline: {DEFAULT_PIPELINE}")
    lowered = f" {'lower ms':>9} {'total ms':>9}" if args.lower else ""
    print(f"{'ops':>8} {'cpu ms':>9} {'growth':>7} {'wall ms':>9} {'us/op':>7}"
          f" {'cpu ms, gc off':>15} {'growth':>7}{lowered}")
    previous: tuple[float, float] | None = None
    for size in args.sizes:
        repeats = args.repeats if size < 10_000 else 1
        count, cpu, wall, lowering = time_pipeline(size, repeats, lower=args.lower)
        _, cpu_nogc, _, _ = time_pipeline(size, repeats, gc_off=True)
        growth = ("", "") if previous is None else (
            f"{cpu / previous[0]:6.1f}x", f"{cpu_nogc / previous[1]:6.1f}x")
        lowered = (f" {lowering * 1e3:9.1f} {(cpu + lowering) * 1e3:9.1f}"
                   if args.lower else "")
        print(f"{count:>8} {cpu * 1e3:9.1f} {growth[0]:>7} {wall * 1e3:9.1f}"
              f" {cpu * 1e6 / count:7.1f} {cpu_nogc * 1e3:15.1f} {growth[1]:>7}{lowered}")
        previous = (cpu, cpu_nogc)
    if args.profile:
        g = make_graph(1_000)
        prof = cProfile.Profile()
        prof.enable()
        pm = PassManager.parse(DEFAULT_PIPELINE)
        pm.run(g)
        prof.disable()
        print()
        print(pm.timing_report())
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
