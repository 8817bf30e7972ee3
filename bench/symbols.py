"""The symbolic-size arithmetic of `stridec.ir.symbols` against sympy (a benchmark, never a
timed test): why stridec keeps its own exact polynomial form (docs/symbolic.md).

    python bench/symbols.py

Rows: one add-and-multiply (``64*N + 3``), a product of sums expanded and compared
(the check `==` makes exactly), evaluating a stride at call time (by name, and compiled to
a Python function of the values), and the cost of importing each. Best of 5 runs, µs per
operation. sympy is optional here (torch depends on it); without it only stridec's
column prints.
"""

from __future__ import annotations

import subprocess
import sys
import timeit
from collections.abc import Callable

from stridec.ir.symbols import evaluate, symbol


def best(fn: Callable[[], object], number: int = 20_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def import_ms(module: str) -> float:
    """Milliseconds the import of `module` takes, with what it imports first
    (`python -X importtime`'s cumulative column), best of 3."""
    runs = []
    for _ in range(3):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                              capture_output=True, text=True, check=True)
        for line in done.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                runs.append(int(parts[1]) / 1e3)
    return min(runs)


def main() -> None:
    n, m = symbol("N"), symbol("M")
    stride = 3136 * n + 56 * m + (n + 1) // 2
    compiled = stride.compile(["N", "M"])
    ours = {
        "64*N + 3": best(lambda: n * 64 + 3),
        "expand (N+1)*(N+3) and compare": best(lambda: (n + 1) * (n + 3) == n * n + 4 * n + 3),
        "evaluate a stride by name": best(lambda: evaluate(stride, {"N": 7, "M": 3})),
        "evaluate it compiled": best(lambda: compiled(7, 3)),
    }
    theirs: dict[str, float] = {}
    try:
        import sympy
    except ImportError:  # pragma: no cover - sympy comes with torch
        sympy = None
    if sympy is not None:
        s, t = sympy.symbols("N M", integer=True, positive=True)
        expr = 3136 * s + 56 * t + sympy.floor((s + 1) / 2)
        fast = sympy.lambdify([s, t], expr)
        theirs = {
            "64*N + 3": best(lambda: s * 64 + 3),
            "expand (N+1)*(N+3) and compare": best(
                lambda: sympy.expand((s + 1) * (s + 3)) == s * s + 4 * s + 3, 2_000
            ),
            "evaluate a stride by name": best(lambda: expr.subs({s: 7, t: 3}), 2_000),
            "evaluate it compiled": best(lambda: fast(7, 3)),
        }
    print(f"{'operation':<34} {'stridec µs':>11} {'sympy µs':>9}")
    for key, value in ours.items():
        other = f"{theirs[key]:9.2f}" if key in theirs else f"{'-':>9}"
        print(f"{key:<34} {value:11.2f} {other}")
    line = f"{'import (ms)':<34} {import_ms('stridec.ir.symbols'):11.2f}"
    if sympy is not None:
        line += f" {import_ms('sympy'):9.2f}"
    print(line)


if __name__ == "__main__":
    main()
