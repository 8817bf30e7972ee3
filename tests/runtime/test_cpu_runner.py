"""The `cpu` backend's runner passes storages by their data pointers (`Runner.pointers`:
every launcher is a C kernel, which reads `data_ptr()` only): inputs go in as untyped
storages, not as flat views, and an `out=` call on the cached path launches without
building output views (`Runner.launch`). Torch is the oracle: inputs at storage offsets,
outputs that view an input, outs filled with a sentinel before every call."""

from __future__ import annotations

import torch

import stridec
from stridec.runtime import launch


def graph() -> stridec.Graph:
    g = stridec.Graph("cpu_pointers")
    x = g.input("x", (6, 10), "float32")
    y = g.input("y", (4, 6), "int16")
    g.output(x.t().contiguous(), x[:, 2:7], y.to("float32").t().contiguous())
    return g


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    xb = torch.randn(80, generator=g)
    yb = torch.randint(-1000, 1000, (40,), dtype=torch.int16, generator=g)
    return xb[7:67].view(6, 10), yb[5:29].view(4, 6)  # both at a storage offset


def expected(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.t().contiguous(), x[:, 2:7], y.to(torch.float32).t().contiguous()


def test_the_cpu_runner_passes_pointers_and_matches_torch() -> None:
    fn = stridec.compile(graph(), backend="cpu")
    x, y = inputs()
    got = fn(x, y)
    for a, b in zip(got, expected(x, y), strict=True):
        assert torch.equal(a, b)
    assert got[1].data_ptr() == x[:, 2:7].data_ptr()  # still a view of x
    runners = [r for entry in launch._RUNNERS.values() for r in entry.values()
               if isinstance(r, launch.Runner) and r.launches
               and type(r.launches[0][0]).__name__ == "CpuKernel"]
    assert runners and all(r.pointers for r in runners)


def test_repeated_out_calls_write_every_out() -> None:
    fn = stridec.compile(graph(), backend="cpu")
    x, y = inputs()
    want = expected(x, y)
    outs = (torch.empty(10, 6), torch.empty(6, 5), torch.empty(6, 4))
    for k in range(4):  # the first call takes the full path, the others the cached one
        for o in outs:
            o.fill_(-7.5 - k)
        got = fn(x, y, out=outs)
        assert all(a is b for a, b in zip(got, outs, strict=True))
        for a, b in zip(outs, want, strict=True):
            assert torch.equal(a, b)
        x.add_(1.0)  # new values at the same addresses: nothing is stale
        want = expected(x, y)
