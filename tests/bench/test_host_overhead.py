"""`bench/host_overhead.py --cold`: the cached calls it times with cold caches (a small
slice and a small cat, `fn(*xs)` and `fn(*xs, out=o)`, against eager) equal torch, and the
mode runs end to end (a few calls, no flush: nothing here is timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import host_overhead  # noqa: E402
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")


def test_cold_cases_equal_torch_and_run_cached() -> None:
    """Each case's calls equal eager's, repeated calls included (the cached path: after
    the first call each is a hit of the call-key cache)."""
    for name, fn, inputs, eager, into, out in host_overhead.cold_cases():
        want = eager(*inputs)
        hits = fn.stats.cache_hits
        for _ in range(3):
            assert torch.equal(fn(*inputs), want), name
            out.fill_(-1)
            assert fn(*inputs, out=out) is out and torch.equal(out, want), name
        assert fn.stats.cache_hits >= hits + 6, name
        expected = torch.full_like(out, -1)
        into(expected, *inputs)
        assert torch.equal(expected, want), name


def test_cold_mode_prints_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert host_overhead.main(["--cold", "--rounds", "3", "--flush-mb", "1"]) == 0
    out = capsys.readouterr().out
    for call in ("stridec fn(*xs)", "stridec fn(*xs, out=o)", "eager", "eager into o"):
        assert out.count(call) >= 2, out
    assert "slice 64x64 f32" in out and "cat of 3, f16" in out


def test_torch_op_mode_runs_and_checks_against_torch(capsys: pytest.CaptureFixture[str]) -> None:
    """`--torch-op` without Inductor (aot_eager only): every call it times is checked
    against torch first; the table has every row."""
    assert host_overhead.main(["--torch-op", "--no-inductor", "--rounds", "2",
                               "--calls", "2"]) == 0
    out = capsys.readouterr().out
    for row in ("eager torch code", "stridec fn(x)", "op(x)", "compiled: op(x), aot_eager",
                "floor: Library op doing nothing"):
        assert row in out
