"""Kernel counts are a property of the graph: the layout programs below launch as many
kernels as their materialized outputs need (docs/passes.md), whatever the channel count,
and with the values, strides and storage sharing torch gives (the reference backend
where torch has no such op: packs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_oracle import check_against_torch

import stridec


def _launches(fn: stridec.CompiledGraph, *args: torch.Tensor) -> int:
    return fn.plan_for(*args).launches


# -- a copy before a pack (issue: 2 kernels with C = 5, 1 with C = 8) ---------------------


@pytest.mark.parametrize("channels", [1, 5, 8, 9])
@pytest.mark.parametrize("fmt", ["NCHW4", "NCHW32", "CHWN4"])
@pytest.mark.parametrize("before", ["cast", "transpose", "slice"])
def test_a_copy_then_a_pack_is_one_kernel(before: str, fmt: str, channels: int) -> None:
    g = stridec.Graph("copy_then_pack")
    x = g.input("x", (2, channels, 3, 4), "float32")
    if before == "cast":
        y = x.to("int8")
    elif before == "transpose":
        y = x.transpose(2, 3).contiguous()
    else:
        y = x[:, :, 1:].contiguous()
    g.output(y.pack(fmt))
    fn = stridec.compile(g, backend="cpu")
    t = torch.randn(2, channels, 3, 4) * 40
    assert _launches(fn, t) == 1
    got, (want,) = fn(t), stridec.run_reference(g, t)
    assert torch.equal(got, want) and got.stride() == want.stride()


def _channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


@pytest.mark.parametrize("groups", [2, 3])
@pytest.mark.parametrize("pad", [(1, 1, 1, 1), (0, 2), (2, 0, 1, 0)])
def test_a_channel_shuffle_then_a_pad_of_h_and_w_is_one_kernel(
    pad: tuple[int, ...], groups: int
) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.pad(_channel_shuffle(x, groups), pad, value=-1.5)

    t = torch.randn(2, 6, 3, 4)
    fn = stridec.compile(stridec.trace(f, t), backend="cpu")
    assert _launches(fn, t) == 1
    check_against_torch(fn(t), f(t), (t,))


def test_a_channel_shuffle_then_a_pad_of_the_channels_is_two_kernels() -> None:
    """The documented exception (docs/passes.md, merge-fills): channels 1..6 of 8 written
    as 2·c + g + 1 are no box of any split of the channel dim."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.pad(_channel_shuffle(x, 2), (0, 0, 0, 0, 1, 1))

    t = torch.randn(2, 6, 3, 4)
    fn = stridec.compile(stridec.trace(f, t), backend="cpu")
    assert _launches(fn, t) == 2
    check_against_torch(fn(t), f(t), (t,))
