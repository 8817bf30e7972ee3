"""Kernel counts are a property of the graph: the layout programs below launch as many
kernels as their materialized outputs need (docs/passes.md), whatever the channel count,
and with the values, strides and storage sharing torch gives (the reference backend
where torch has no such op: packs)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch_oracle import check_against_torch

import stridec
from bench import cases


def _launches(fn: stridec.CompiledGraph, *args: torch.Tensor) -> int:
    return fn.plan_for(*args).launches


# -- a copy before a pack (issue: 2 kernels with C = 5, 1 with C = 8) ---------------------


@pytest.mark.parametrize("channels", [1, 5, 8, 9])
@pytest.mark.parametrize("fmt", ["NCHW4", "NCHW32", "CHWN4"])
@pytest.mark.parametrize("before", ["cast", "transpose", "slice"])
def test_a_copy_then_a_pack_is_one_kernel(before: str, fmt: str, channels: int) -> None:
    g = stridec.Graph("copy_then_pack")
    # the cast: float64 -> int8, one of the suite's cast libraries (tests/cast_pairs.py)
    dtype = "float64" if before == "cast" else "float32"
    x = g.input("x", (2, channels, 3, 4), dtype)
    if before == "cast":
        y = x.to("int8")
    elif before == "transpose":
        y = x.transpose(2, 3).contiguous()
    else:
        y = x[:, :, 1:].contiguous()
    g.output(y.pack(fmt))
    fn = stridec.compile(g, backend="cpu")
    t = (torch.randn(2, channels, 3, 4) * 40).to(getattr(torch, dtype))
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


# -- symbolic plans launch the static plan's kernels ---------------------------------------


def _window_partition(x: torch.Tensor, ws: int = 2) -> torch.Tensor:  # Swin
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, c)


def _roll_partition(x: torch.Tensor) -> torch.Tensor:  # Swin's shifted windows
    return _window_partition(torch.roll(x, shifts=(-1, -1), dims=(1, 2)))


def _reverse_roll(w: torch.Tensor) -> torch.Tensor:  # Swin: windows back, then the roll
    b, _, ws, _, c = w.shape
    x = w.view(b, 2, 3, ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous()
    return torch.roll(x.view(b, 2 * ws, 3 * ws, c), shifts=(1, 1), dims=(1, 2))


def _im2col_unfold(x: torch.Tensor) -> torch.Tensor:  # 3x3 patches, padding 1
    b, c, h, w = x.shape
    p = F.pad(x, (1, 1, 1, 1)).unfold(2, 3, 1).unfold(3, 3, 1)
    return p.permute(0, 2, 3, 1, 4, 5).reshape(b, h * w, c * 9)


def _repeat_kv(k: torch.Tensor) -> torch.Tensor:  # LLaMA grouped-query attention
    b, h, t, d = k.shape
    return k[:, :, None, :, :].expand(b, h, 3, t, d).reshape(b, h * 3, t, d)


def _pixel_shuffle(x: torch.Tensor) -> torch.Tensor:
    return F.pixel_shuffle(x, 2)


def _kv_cat(past: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    return torch.cat([past, new], dim=2)


SYMBOLIC_PATTERNS = {
    "window_partition": (_window_partition, [(3, 4, 6, 5)]),
    "roll_partition": (_roll_partition, [(3, 4, 6, 5)]),
    "reverse_roll": (_reverse_roll, [(3, 6, 2, 2, 5)]),
    "cyclic_shift": (lambda x: torch.roll(x, shifts=(-1, -2), dims=(1, 2)), [(3, 4, 5, 2)]),
    "im2col_unfold": (_im2col_unfold, [(3, 2, 4, 3)]),
    "im2col_functional": (lambda x: F.unfold(x, 3, padding=1), [(3, 2, 4, 5)]),
    "repeat_kv": (_repeat_kv, [(3, 2, 5, 4)]),
    "pixel_shuffle": (_pixel_shuffle, [(3, 8, 3, 2)]),
    "channel_shuffle": (lambda x: _channel_shuffle(x, 3), [(3, 6, 2, 3)]),
    "kv_cat": (_kv_cat, [(3, 2, 7, 4), (3, 2, 1, 4)]),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC_PATTERNS))
def test_a_symbolic_plan_launches_the_static_plans_kernels(name: str) -> None:
    """Traced with a symbolic batch and traced static, a pattern's plans launch the same
    number of kernels at each size (docs/symbolic.md), with and without a fresh out=, and
    every call is torch's."""
    fn, shapes = SYMBOLIC_PATTERNS[name]
    examples = [torch.randn(*s) for s in shapes]
    symbolic = stridec.compile(
        stridec.trace(fn, *examples, dynamic={i: [0] for i in range(len(shapes))}),
        backend="cpu",
    )
    for n in (2, 3, 5, 16):
        args = tuple(torch.randn(n, *s[1:]) for s in shapes)
        static = stridec.compile(stridec.trace(fn, *args), backend="cpu")
        assert _launches(symbolic, *args) == _launches(static, *args), f"N = {n}"
        check_against_torch(symbolic(*args), fn(*args), args)
        out = torch.empty_like(fn(*args))
        assert (symbolic.plan_for(*args, out=out).launches
                == static.plan_for(*args, out=out).launches), f"N = {n}, out="
        assert symbolic(*args, out=out) is out and torch.equal(out, fn(*args))
    assert symbolic.stats.pipeline_runs == 1


# -- a cat, pad or roll into out= is one pass into the caller's memory ----------------------


def _patch_merging(x: torch.Tensor) -> torch.Tensor:  # Swin
    b, _, _, c = x.shape
    parts = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]
    return torch.cat(parts, -1).view(b, -1, 4 * c)


def _window_reverse_roll(w: torch.Tensor) -> torch.Tensor:  # Swin, windows of 3 rows
    x = w.view(-1, 2, 2, 3, 3, w.shape[-1]).permute(0, 1, 3, 2, 4, 5).contiguous()
    return torch.roll(x.view(-1, 6, 6, w.shape[-1]), shifts=(2, 2), dims=(1, 2))


def _swin_reverse_roll(w: torch.Tensor) -> torch.Tensor:  # Swin's stage 1: 8x8 windows of 7
    b, c = w.shape[0] // 64, w.shape[-1]
    x = w.view(b, 8, 8, 7, 7, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(b, 56, 56, c)
    return torch.roll(x, shifts=(3, 3), dims=(1, 2))


INTO_OUT = {
    "patch_merging": (_patch_merging, (2, 6, 4, 3)),
    "patch_merging_no_view": (lambda x: torch.cat([x[:, ::2], x[:, 1::2]], -1), (2, 6, 4, 3)),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), (2, 3, 5)),
    "pad_then_view": (lambda x: F.pad(x, (1, 2)).view(x.shape[0], -1), (2, 3, 5)),
    "roll": (lambda x: torch.roll(x, shifts=(1, -2), dims=(1, 2)), (2, 5, 6, 3)),
    "roll_then_view": (lambda x: torch.roll(x, 2, 1).view(x.shape[0], -1), (2, 5, 3)),
    "window_reverse_roll": (_window_reverse_roll, (8, 3, 3, 2)),
    # the roll reads rows 0..53 of 8 windows of 7: cut after the 7 whole windows, then
    # rows 49..53 (a cut after each window is more pieces than one kernel takes: 2 kernels)
    "swin_reverse_roll": (_swin_reverse_roll, (128, 7, 7, 2)),
    # a roll's pieces write windows {0, 4}, {1, 5}, ... of the out's dim 0: boxes of it
    # split as (2, 2, 2), so one batch (9 kernels otherwise)
    "roll_partition": (lambda x: _window_partition(torch.roll(x, (-3, -3), (1, 2)), 7),
                       (2, 14, 14, 3)),
    # Swin's stage 1, 8x8 windows: pieces of several window rows and of one (row 7) batch
    # in dim 0 split as (8, 8) (4 kernels otherwise)
    "roll_partition_8x8_windows": (
        lambda x: _window_partition(torch.roll(x, (-3, -3), (1, 2)), 7), (1, 56, 56, 2)),
}


@pytest.mark.parametrize("name", sorted(INTO_OUT))
def test_a_cat_pad_or_roll_into_out_is_one_kernel(name: str) -> None:
    """Into a fresh `out` and into a window of a wider buffer (rows of a pitch): one launch
    writes the caller's memory, with torch's values, and nothing outside the window."""
    fn, shape = INTO_OUT[name]
    x = torch.randn(*shape)
    compiled = stridec.compile(stridec.trace(fn, x), backend="cpu")
    want = fn(x)
    assert _launches(compiled, x) == 1
    out = torch.empty_like(want)
    assert compiled.plan_for(x, out=out).launches == 1
    got = compiled(x, out=out)
    assert got is out and torch.equal(out, want)
    wide = torch.full((*want.shape[:-1], want.shape[-1] + 3), -7.0)
    window = wide[..., 1 : 1 + want.shape[-1]]
    assert compiled(x, out=window) is window
    assert torch.equal(window, want)
    outside = torch.cat([wide[..., :1], wide[..., 1 + want.shape[-1] :]], -1)
    assert bool((outside == -7.0).all())
    check_against_torch(compiled(x), want, (x,))


# -- the symbolic suite's rows (bench/cases.py SYMBOLIC): the patterns as benchmarked ------


def _suite_rows() -> dict[str, tuple[Any, tuple[tuple[int, ...], ...], torch.dtype]]:
    return {name: (fn(sizes["tiny"]), sizes["tiny"], dtype)
            for name, _, sizes, dtype, fn, _ in cases.SYMBOLIC}


@pytest.mark.parametrize("name", sorted(_suite_rows()))
def test_the_symbolic_suites_rows_launch_the_static_plans_kernels(name: str) -> None:
    """Each row of `bench/run.py --cpu --suite symbolic` (Swin's 7x7 windows after a roll
    of 3, F.unfold with padding, repeat_kv of 4) traced with a symbolic batch, against the
    same function traced static at each batch: equal kernel counts planned and launched,
    with and without out=, on the first calls and on cached ones, and torch's values
    each call."""
    fn, shapes, dtype = _suite_rows()[name]
    examples = [torch.randn(*s).to(dtype) for s in shapes]
    symbolic = stridec.compile(stridec.trace(fn, *examples, dynamic={0: [0]}), backend="cpu")
    for n in (2, 3, 5, 16):
        args = tuple(torch.randn(n, *s[1:]).to(dtype) for s in shapes)
        static = stridec.compile(stridec.trace(fn, *args), backend="cpu")
        want = fn(*args)
        assert _launches(symbolic, *args) == _launches(static, *args), f"N = {n}"
        out = torch.empty_like(want)
        assert (symbolic.plan_for(*args, out=out).launches
                == static.plan_for(*args, out=out).launches), f"N = {n}, out="
        for into in (None, out) * 3:  # (later calls of a key are cached calls)
            counts = []
            for f in (symbolic, static):
                before = f.stats.launches
                got = f(*args) if into is None else f(*args, out=into)
                counts.append(f.stats.launches - before)
                check_against_torch(got, want, args)
            assert counts[0] == counts[1], f"N = {n}, out={into is not None}"
    assert symbolic.stats.pipeline_runs == 1


# -- a pad of a transposed view over a symbolic dim (issue: 2 kernels, static 1) ----------
# The padded buffer's rows are N + 2 elements apart; the copy's first element, N + 3, is
# row 1, column 1 of it: a quotient by a symbolic stride that is not exact.


@pytest.mark.parametrize(("sizes", "perm"), [
    (("N", 7), (1, 0)),          # the symbol padded, the rows N + 2 apart
    ((5, 7, "N"), (1, 0, 2)),    # the symbol padded, innermost
    ((5, "N", 6), (0, 2, 1)),    # the symbol padded, the rows N + 2 apart
    ((5, "N", 6), (2, 0, 1)),
])
def test_a_symbolic_pad_of_a_transposed_view_launches_the_static_plans_kernels(
        sizes: tuple, perm: tuple[int, ...]) -> None:
    def graph(shape: tuple) -> stridec.Graph:
        g = stridec.Graph("pad_of_transpose")
        x = g.input("x", shape, "float32")
        g.output(stridec.pad(x.permute(*perm), (1, 1, 1, 1), value=-2.0))
        return g

    symbolic = stridec.compile(graph(sizes), backend="cpu")
    for n in (3, 6):
        shape = tuple(n if s == "N" else s for s in sizes)
        x = torch.randn(shape)
        static = stridec.compile(graph(shape), backend="cpu")
        assert _launches(symbolic, x) == _launches(static, x) == 1, f"N = {n}"
        check_against_torch(symbolic(x), F.pad(x.permute(*perm), (1, 1, 1, 1), value=-2.0),
                            (x,))
