"""`Draw`: `random.Random`-like draws from a hypothesis `data` object, shared by the graph
generators of the semantics property test and the fuzzer, so they read plainly and still
shrink; `SeededDraw`: the same from a seed. Importable from any test module: `tests/` is
on sys.path through its conftest."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st


class Draw:
    """`random.Random`-like draws from hypothesis, so the generators read plainly."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, items: Any) -> Any:
        return self.data.draw(st.sampled_from(list(items)))

    def chance(self, p: float) -> bool:
        return self.data.draw(st.integers(0, 99)) < 100 * p

    def permutation(self, n: int) -> list[int]:
        return self.data.draw(st.permutations(list(range(n))))

    def factor(self, numel: int, rank: int) -> tuple[int, ...]:
        """Random sizes of `rank` whose product is `numel` (a 0 somewhere when it is 0)."""
        if rank == 0:
            return ()
        if numel == 0:
            sizes = [self.int(0, 3) for _ in range(rank)]
            sizes[self.int(0, rank - 1)] = 0
            return tuple(sizes)
        sizes = [1] * rank
        for p in prime_factors(numel):
            sizes[self.int(0, rank - 1)] *= p
        return tuple(sizes)


class SeededDraw(Draw):
    """The same draws from `random.Random(seed)`: for guards that a generator reaches
    every op over a fixed set of seeds, outside hypothesis."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, items: Any) -> Any:
        return self.rng.choice(list(items))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def permutation(self, n: int) -> list[int]:
        return self.rng.sample(range(n), n)


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out
