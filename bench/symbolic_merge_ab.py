"""Symbolic copies whose dims merge at the first binding only (rows of N written into rows
of a constant width, one run where N is that width): the strategies' kernel of
`codegen/c/copy.py` against the planned library's, both symbolic, called straight for
bindings of the class, one thread, thread CPU time, caches flushed, alternating; medians
(a benchmark, never a timed test).

    python bench/symbolic_merge_ab.py
"""

from __future__ import annotations

import statistics
import time

import torch

from stridec.compiler.codegen import symbolic_c
from stridec.compiler.codegen.spec import CopySpec
from stridec.ir.dtypes import DTYPES
from stridec.ir.symbols import evaluate, symbol
from stridec.runtime.backends import cpu

N = symbol("N")
torch.set_num_threads(1)
clock = time.thread_time
f32 = DTYPES["float32"]
flush = torch.ones(16 << 20)

def kernel(spec, hint, library):
    if library:
        return symbolic_c.generate_c_copy_symbolic([spec], [(0, 1)], hint)
    saved = symbolic_c._planned_call
    symbolic_c._planned_call = lambda canon, at: None
    try:
        return symbolic_c.generate_c_copy_symbolic([spec], [(0, 1)], hint)
    finally:
        symbolic_c._planned_call = saved

for rows, width, hint, ns in ((4096, 1024, 1024, (1024, 1008, 512)), (65536, 64, 64, (64, 48))):
    spec = CopySpec((rows, N), (N, 1), 0, (width, 1), 0, f32, f32)
    ks = {lib: kernel(spec, {"N": hint}, lib) for lib in (False, True)}
    for n in ns:
        runs = {}
        for lib, k in ks.items():
            ((name, s, d, params),) = k.calls
            bound = [(name, s, d, tuple(evaluate(p, {"N": n}) for p in params))]
            runs[lib] = (k.strategy, cpu.load_c_kernel(k.name, k.source, bound))
        src = torch.randn(rows * n)
        dst = torch.zeros(rows * width)
        times = {False: [], True: []}
        for r in range(15):
            for lib in ((False, True) if r % 2 == 0 else (True, False)):
                flush.sum()
                t0 = clock()
                runs[lib][1](None, src, dst)
                times[lib].append(clock() - t0)
        old, new = (statistics.median(times[x]) for x in (False, True))
        print(f"({rows}, N) into ({rows}, {width}) hint {hint}, N={n}: old {runs[False][0]} "
              f"{old * 1e3:.3f} ms new {runs[True][0]} {new * 1e3:.3f} ms old/new {old / new:.2f}",
              flush=True)
