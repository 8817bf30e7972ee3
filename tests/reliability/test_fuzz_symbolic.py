"""The symbolic fuzzer: random chains of torch layout ops, traced with a symbolic batch
(`stridec.trace(..., dynamic=...)`, perhaps a second dim symbolic too), compiled once and
called at many sizes -- 0, 1, multiples of 16, sizes where a slice of the batch has one
row, and the rest -- each call against torch running the same function on the same
tensor: dtype, sizes, values bit for bit, strides, storage offset and which inputs each
output shares memory with (`check_against_torch`); some calls also with `out=`. One class
plan serves many sizes, so what the class plan assumes for every size of its class is
checked against what torch does at each.

Runs under the graph fuzzer's profiles (`conftest.py`) with a third of its examples: 100
in CI, 3,333 with `--fuzz-long`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from torch_oracle import check_against_torch

import stridec
from stridec.errors import StridecError
from tests.cast_pairs import cpu_marks

DTYPES = (torch.float32, torch.float16, torch.int32, torch.uint8)
SIZES = (0, 1, 2, 3, 4, 5, 7, 9, 16, 17, 32)


@dataclass(frozen=True)
class Step:
    """One torch op of a chain: its name and arguments, applied alike to a real tensor
    and to `stridec.trace`'s proxy."""

    op: str
    args: tuple[Any, ...] = ()

    def __call__(self, v: Any) -> Any:
        a = self.args
        if self.op == "permute":
            return v.permute(*a)
        if self.op == "transpose":
            return v.transpose(*a)
        if self.op == "slice":
            dim, start, step = a
            return v[(slice(None),) * dim + (slice(start, None, step),)]
        if self.op == "flip":
            return v.flip(a[0])
        if self.op == "select":
            return v.select(*a)
        if self.op == "unsqueeze_expand":
            sizes = [2 if i == a[0] else -1 for i in range(v.dim() + 1)]
            return v.unsqueeze(a[0]).expand(*sizes)
        if self.op == "cat":
            return torch.cat([v, v], a[0])
        if self.op == "pad":
            return torch.nn.functional.pad(v, a)
        if self.op == "reshape":
            return v.reshape(*a)
        if self.op == "flatten":
            return v.flatten(a[0])
        if self.op == "to":
            return v.to(a[0])
        return getattr(v, self.op)()  # contiguous, clone

    def __str__(self) -> str:
        return f"{self.op}{self.args if self.args else '()'}"


@st.composite
def steps(draw: Any, rank: int, dims: tuple[int, ...], symbolic: tuple[int, ...],
          dtype: torch.dtype, casts: Callable[[torch.dtype, torch.dtype], bool]) -> list[Step]:
    """1 to 5 steps on a tensor of `rank` dims whose example sizes are `dims` (the dims
    `symbolic` symbolic: dim 0, the batch, and perhaps dim 1) and whose dtype is `dtype`;
    slices and flips of the batch dim drawn often; a cast to a dtype that `casts` takes
    from the one before it."""
    chain: list[Step] = []
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(
            ["permute", "transpose", "slice", "slice", "flip", "contiguous", "contiguous",
             "clone", "reshape", "flatten", "to", "unsqueeze_expand", "cat", "pad", "select"]))
        if op == "permute":
            step = Step(op, tuple(draw(st.permutations(range(rank)))))
        elif op == "transpose":
            step = Step(op, (draw(st.integers(0, rank - 1)), draw(st.integers(0, rank - 1))))
        elif op == "slice":
            dim = draw(st.sampled_from([0, 0] + list(range(rank))))
            step = Step(op, (dim, draw(st.integers(0, 2)), draw(st.integers(1, 3))))
        elif op == "flip":
            step = Step(op, (draw(st.sampled_from([0] + list(range(rank)))),))
        elif op in ("contiguous", "clone"):
            step = Step(op)
        elif op == "reshape":
            step, rank = Step(op, (-1,)), 1
        elif op == "flatten":
            if rank < 2:
                continue
            start = draw(st.integers(0, rank - 2))
            step, rank = Step(op, (start,)), start + 1
        elif op == "to":
            dtype = draw(st.sampled_from([d for d in DTYPES if d == dtype or casts(dtype, d)]))
            step = Step(op, (dtype,))
        elif op == "unsqueeze_expand":
            if rank >= 5:
                continue
            step, rank = Step(op, (draw(st.integers(0, rank)),)), rank + 1
        elif op == "cat":
            step = Step(op, (draw(st.integers(0, rank - 1)),))
        elif op == "pad":
            step = Step(op, (draw(st.integers(0, 2)), draw(st.integers(0, 2))))
        else:  # select a static dim: a symbolic one may be too short for any index
            static = [d for d in range(1, rank) if d not in symbolic]
            if not static or rank != len(dims):
                continue
            dim = draw(st.sampled_from(static))
            step, rank = Step(op, (dim, draw(st.integers(0, dims[dim] - 1)))), rank - 1
            dims = dims[:dim] + dims[dim + 1:]
        chain.append(step)
    return chain


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _function(chain: list[Step], keep: int | None) -> Any:
    """The chain as a function of one tensor: its last result, and the result of step
    `keep` too where given (two outputs, which may share memory)."""

    def layout_chain(x: Any) -> Any:
        v, kept = x, None
        for i, step in enumerate(chain):
            v = step(v)
            if i == keep:
                kept = v
        return v if kept is None else (kept, v)

    return layout_chain


def test_fuzz_symbolic_graphs_against_torch(fuzz_settings: settings, fuzz_stats: Counter,
                                            pytestconfig: pytest.Config) -> None:
    """Counted in the terminal summary: `symbolic examples` (graphs traced and compiled),
    `symbolic calls` (calls compared with torch), `symbolic untraceable` (chains the
    tracer does not take over a symbolic batch: rejected)."""

    examples = max(fuzz_settings.max_examples // 3, 10)
    # The cpu backend's casts: every pair with --fuzz-long; else the suite's cast libraries
    # (tests/cast_pairs.py), each built once for the whole suite.
    long = bool(pytestconfig.getoption("--fuzz-long", default=False))

    @settings(fuzz_settings, max_examples=examples)
    @given(data=st.data())
    def run(data: Any) -> None:
        dims = (9, *data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
        symbolic = data.draw(st.sampled_from([(0,), (0,), (0, 1)]))
        if 1 in symbolic:
            dims = (9, 7, *dims[2:])
        dtype = data.draw(st.sampled_from(DTYPES))
        backend = data.draw(st.sampled_from(["cpu", "cpu", "cpu", "interpret"]))
        chain = data.draw(steps(len(dims), dims, symbolic, dtype,
                                lambda a, b: long or not cpu_marks(backend, _name(a), _name(b))))
        keep = data.draw(st.none() | st.integers(0, len(chain) - 2)) if len(chain) > 1 else None
        sizes = data.draw(st.lists(st.tuples(st.sampled_from(SIZES), st.sampled_from(SIZES)),
                                   min_size=3, max_size=7))
        note(f"input {dims} {dtype}, symbolic dims {symbolic}, {backend}: "
             + ", ".join(map(str, chain)) + f"; keep {keep}; sizes {sizes}")
        f = _function(chain, keep)
        example = torch.zeros(dims, dtype=dtype)
        try:
            f(example)
            graph = stridec.trace(f, example, dynamic={0: list(symbolic)})
        except (StridecError, RuntimeError, IndexError):
            fuzz_stats["symbolic untraceable"] += 1
            assume(False)
        fn = stridec.compile(graph, backend=backend)
        fuzz_stats["symbolic examples"] += 1
        gen = torch.Generator().manual_seed(len(sizes))
        for n, m in sizes:
            shape = (n, m, *dims[2:]) if 1 in symbolic else (n, *dims[1:])
            x = (torch.randn(shape, generator=gen) * 50).to(dtype)
            try:
                want = f(x)
            except (RuntimeError, IndexError):
                continue  # torch refuses this size (a select past the end): so may we
            check_against_torch(fn(x), want, (x,))
            fuzz_stats["symbolic calls"] += 1
            if data.draw(st.booleans()):
                wants = want if isinstance(want, tuple) else (want,)
                outs = tuple(torch.full_like(w, 3, memory_format=torch.contiguous_format)
                             for w in wants)
                if len({o.untyped_storage().data_ptr() for o in outs}) < len(outs):
                    continue
                fn(x, out=outs if isinstance(want, tuple) else outs[0])
                for o, w in zip(outs, wants, strict=True):
                    assert torch.equal(o, w), f"out= at sizes {shape}"

    run()
