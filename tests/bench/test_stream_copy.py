"""The CPU race's streaming copy and streaming write (`bench/stream_copy.py`): the fastest
plain copy and write, the yardsticks of "bound × eager". They must write exactly the bytes
asked, no more."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stream_copy import stream_copy, stream_fill  # noqa: E402
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 4096 * 3 + 17, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shift", [0, 5])
def test_copies_every_byte_and_nothing_else(n: int, threads: int, shift: int) -> None:
    gen = torch.Generator().manual_seed(n)
    pool = torch.randint(0, 256, (n + 64 + 2 * shift,), dtype=torch.uint8, generator=gen)
    src = pool[shift:shift + n]
    storage = torch.full((n + 128,), 0xA5, dtype=torch.uint8)
    dst = storage[64 - shift:64 - shift + n]  # unaligned starts: heads and tails
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        stream_copy(dst, src)()
    finally:
        torch.set_num_threads(before)
    assert torch.equal(dst, src)
    assert bool((storage[:64 - shift] == 0xA5).all())
    assert bool((storage[64 - shift + n:] == 0xA5).all())


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 4096 * 3 + 17, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shift", [0, 5])
def test_writes_every_byte_and_nothing_else(n: int, threads: int, shift: int) -> None:
    storage = torch.full((n + 128,), 0xA5, dtype=torch.uint8)
    dst = storage[64 - shift:64 - shift + n]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        stream_fill(dst)()
    finally:
        torch.set_num_threads(before)
    assert torch.equal(dst, torch.full_like(dst, 7))
    assert bool((storage[:64 - shift] == 0xA5).all())
    assert bool((storage[64 - shift + n:] == 0xA5).all())


def test_refuses_unequal_or_strided_buffers() -> None:
    a = torch.zeros(10, dtype=torch.uint8)
    with pytest.raises(ValueError, match="stream_copy"):
        stream_copy(a, torch.zeros(11, dtype=torch.uint8))
    with pytest.raises(ValueError, match="stream_copy"):
        stream_copy(a, torch.zeros(20, dtype=torch.uint8)[::2])
    with pytest.raises(ValueError, match="stream_fill"):
        stream_fill(torch.zeros(20, dtype=torch.uint8)[::2])
