"""The cast pairs the suite's cpu tests build libraries for.

The cpu backend builds one planned-copy library for each pair of dtypes it casts between
(a unit of about 150 KB: 5-12 s of gcc at -O3, most of the suite's compile time). The
suite's cpu tests of casts take their pairs from `SUITE_CASTS`, so that together they
build each of these libraries once (CI's three test runs share one build cache); a test
that also draws other pairs runs them on the cpu backend with `-m slow` only
(`cpu_marks`), and on the others in the suite. The fuzzers draw their casts from these
pairs too, and from every pair with `--fuzz-long`. Every pair's conversions are checked in
the suite all the same, in one build of them all (tests/compiler/test_copy_plan_casts.py),
and every pair through the cpu backend with `-m slow` (tests/runtime/test_cast_bits.py).

Every dtype is a source and a destination here: the vector paths of float32 <-> float16 /
bfloat16, float64 -> float16 (rounded through float32, as torch does), the widest widening
and narrowing (int8 <-> float64), float -> unsigned, `.double()` and `.int()` of float32,
bool both ways (every width bool casts to in tests/reliability/test_odd_bools.py).
"""

from __future__ import annotations

import pytest

SUITE_CASTS: frozenset[tuple[str, str]] = frozenset({
    ("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
    ("bfloat16", "float32"), ("float64", "float16"), ("int8", "float64"),
    ("float64", "int8"), ("int8", "float32"), ("int16", "float64"), ("uint8", "int32"),
    ("int64", "int32"), ("int32", "uint32"), ("uint32", "float32"), ("float32", "uint32"),
    ("float32", "float64"), ("float32", "int32"), ("float32", "bool"), ("bfloat16", "bool"),
    ("bool", "float32"), ("bool", "float16"), ("bool", "bfloat16"), ("bool", "uint8"),
    ("bool", "int64"), ("bool", "int16"),
})


def cpu_marks(backend: str, src: str, dst: str) -> list[pytest.MarkDecorator]:
    """`slow` for a pair outside `SUITE_CASTS` on the cpu backend, else nothing."""
    return [pytest.mark.slow] if backend == "cpu" and (src, dst) not in SUITE_CASTS else []
