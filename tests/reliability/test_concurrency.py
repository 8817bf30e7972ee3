"""Eight threads, one CompiledGraph, released together by a barrier.

tests/runtime/test_cache.py::test_threads_share_one_compiled_graph has four threads
started one after another; here eight wait on a `threading.Barrier` so the first calls --
the ones that compile -- really do overlap, on two stride patterns (row-major, and a
transposed view of a column-major storage), with `plan_for` mixed in. Every result must
equal torch's, and each specialization compiles exactly once. A second test has eight
threads each build and compile the same graph at once (separate CompiledGraphs sharing
the process-wide plan cache): every result is right.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import stridec
from stridec.runtime.cache import MEMORY_CACHE

THREADS = 8
ROUNDS = 3


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    yield tmp_path
    MEMORY_CACHE.clear_memory()


def graph(name: str) -> stridec.Graph:
    g = stridec.Graph(name)
    x = g.input("x", (6, 10), "float32")
    g.output(x.t().contiguous(), x[:, 1::2].flip(0).contiguous(), x.unsqueeze(0).pack("NHWC"))
    return g


def expected(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return t.t().contiguous(), t[:, 1::2].flip(0), t.unsqueeze(0).permute(0, 2, 1)


def argument(pattern: int, seed: int) -> torch.Tensor:
    """Pattern 0: row-major (strides (10, 1)); 1: column-major (strides (1, 6))."""
    gen = torch.Generator().manual_seed(seed)
    if pattern == 0:
        return torch.randn(6, 10, generator=gen)
    return torch.randn(10, 6, generator=gen).t()


def run_threads(work: Callable[[int], None]) -> list[str]:
    """Run `work(i)` in THREADS threads released together; the failures they saw."""
    barrier = threading.Barrier(THREADS)
    failures: list[str] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            work(i)
        except Exception as e:  # noqa: BLE001 - report every failure of every thread
            failures.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return failures


def check(got: Any, t: torch.Tensor) -> None:
    for have, want in zip(got, expected(t), strict=True):
        if not torch.equal(have, want):
            raise AssertionError("wrong result")


def test_eight_threads_call_one_compiled_graph() -> None:
    fn = stridec.compile(graph("eight"))

    def work(i: int) -> None:
        for r in range(ROUNDS):
            t = argument((i + r) % 2, seed=100 * i + r)
            if i % 4 == 3 and r == 0:
                fn.plan_for(t)
            check(fn(t), t)

    assert run_threads(work) == []
    assert fn.stats.compiles == 2  # one per stride pattern
    plans = THREADS // 4  # threads 3 and 7
    assert fn.stats.cache_hits == THREADS * ROUNDS + plans - fn.stats.compiles
    # Half the calls are row-major: 3 kernels; for the column-major half x.t() is already
    # contiguous (contiguous() returns it, a view), leaving the flipped slice and the NHWC
    # packing (new memory, though in place already): 2 kernels.
    kernels = [len(fn.plan_for(argument(p, 0)).kernels) for p in (0, 1)]
    assert kernels == [3, 2]
    assert fn.stats.launches == THREADS * ROUNDS // 2 * sum(kernels)


def test_eight_threads_compile_the_same_graph() -> None:
    """Each thread builds the graph and compiles it itself, at the same moment."""
    stats: list[Any] = []

    def work(i: int) -> None:
        fn = stridec.compile(graph("eight_compilers"))
        for r in range(ROUNDS):
            t = argument((i + r) % 2, seed=100 * i + r)
            check(fn(t), t)
        stats.append(fn.stats)

    assert run_threads(work) == []
    # Each thread's graph compiles each pattern at most once (others may already have).
    assert all(s.compiles <= 2 and s.compiles + s.cache_hits == ROUNDS for s in stats)
