"""Layouts with symbolic sizes against torch: a random chain of view ops on a layout sized
by the symbols N and M, run once symbolically and once per concrete value of the symbols
on a torch tensor. Wherever the symbolic chain answers, its layout evaluated at each value
addresses exactly what torch's does (`same_addresses`: the strides of size-1 dims and of
empty tensors do not matter), and the view rule answers the same; where it refuses, it is
a `LayoutError` naming a symbol."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis_draw import Draw

from stridec.errors import LayoutError, UnsupportedError
from stridec.ir.formats import get_format
from stridec.ir.layout import Layout, copies_at_every_binding, same_addresses
from stridec.ir.symbols import Sym, evaluate, symbol

N, M = symbol("N"), symbol("M")
VALUES = [{"N": n, "M": m} for n, m in [(1, 1), (2, 3), (3, 2), (4, 4), (5, 1), (7, 6)]]


def _layout_of(t: torch.Tensor) -> Layout:
    return Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())


def _agrees(sym: Layout, t: torch.Tensor, v: dict[str, int]) -> bool:
    return same_addresses(sym.evaluate(v), _layout_of(t))


def _draw_op(d: Draw, lay: Layout) -> tuple[str, tuple, Any]:
    """(name, args, torch function) of a view op that applies to `lay`'s sizes."""
    r = lay.rank
    kinds = ["permute", "unsqueeze", "view_flat"]
    if r:
        kinds += ["slice", "transpose", "select", "view_split", "view_merge", "expand"]
    kind = d.choice(kinds)
    if kind == "permute":
        dims = tuple(d.permutation(r))
        return kind, (dims,), lambda t, v: t.permute(dims)
    if kind == "transpose":
        a, b = d.int(0, r - 1), d.int(0, r - 1)
        return kind, (a, b), lambda t, v: t.transpose(a, b)
    if kind == "unsqueeze":
        k = d.int(0, r)
        return kind, (k,), lambda t, v: t.unsqueeze(k)
    if kind == "slice":
        k = d.int(0, r - 1)
        start = d.choice([None, 0, 1, 2, -1])
        stop = d.choice([None, 3, -1, 100])
        step = d.int(1, 3)
        sl = (slice(None),) * k + (slice(start, stop, step),)
        return kind, (k, start, stop, step), lambda t, v: t[sl]
    if kind == "select":
        k, i = d.int(0, r - 1), d.choice([0, 1, -1])
        return kind, (k, i), lambda t, v: t.select(k, i)
    if kind == "expand":
        ones = [k for k in range(r) if lay.sizes[k] == 1]
        target = list(lay.sizes)
        if ones:
            target[d.choice(ones)] = d.choice([3, N])
        lead = d.choice([(), (2,)])
        target = tuple(lead) + tuple(target)
        return kind, (target,), lambda t, v, target=target: t.expand(evaluate(target, v))
    if kind == "view_flat":
        return "view", ((-1,),), (-1,)
    if kind == "view_merge" and r >= 2:
        k = d.int(0, r - 2)
        new = lay.sizes[:k] + (lay.sizes[k] * lay.sizes[k + 1],) + lay.sizes[k + 2 :]
        return "view", (new,), new
    # view_split: split a dim by a factor of its (generic) size, or add a size-1 dim
    k = d.int(0, r - 1)
    n = lay.sizes[k]
    if isinstance(n, int) and n % 2 == 0 and n:
        parts: tuple = (2, n // 2)
    elif isinstance(n, Sym) and d.chance(0.5):
        parts = (n, 1)
    else:
        parts = (1, -1)
    new = lay.sizes[:k] + parts + lay.sizes[k + 1 :]
    return "view", (new,), new


def _apply(lay: Layout, name: str, args: tuple) -> Layout | None:
    return getattr(lay, name)(*args)


def _torch_view(t: torch.Tensor, fn: Any, v: dict[str, int]) -> torch.Tensor | None:
    """torch's answer; for a view, None where torch refuses it (a copy is needed)."""
    if callable(fn):
        return fn(t, v)
    try:
        return t.view(evaluate(fn, v))
    except RuntimeError:
        return None


def _base(d: Draw) -> Layout:
    rank = d.int(1, 4)
    sizes: list[Any] = [d.choice([1, 2, 3, 4, 6]) for _ in range(rank)]
    sizes[d.int(0, rank - 1)] = N
    if rank > 1 and d.chance(0.3):
        sizes[d.int(0, rank - 1)] = M
    kind = d.choice(["contiguous", "order", "pack"])
    if kind == "order":
        return Layout.for_order(tuple(sizes), tuple(d.permutation(rank)))
    if kind == "pack":
        fmt = d.choice(["NCHW4", "CHWN4", "NHWC"])
        logical = (N, d.choice([3, 4, 8]), d.int(1, 3), d.int(1, 3))
        return get_format(fmt).packing(logical).physical
    return Layout.contiguous(tuple(sizes))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_symbolic_view_chains_agree_with_torch(data: Any) -> None:
    d = Draw(data)
    lay = _base(d)
    tensors = {}
    for i, v in enumerate(VALUES):
        concrete = lay.evaluate(v)
        storage = torch.arange(max(concrete.min_storage_size(), 1))
        tensors[i] = storage.as_strided(concrete.sizes, concrete.strides, concrete.offset)
    for _ in range(d.int(1, 4)):
        name, args, fn = _draw_op(d, lay)
        try:
            out = _apply(lay, name, args)
        except (LayoutError, UnsupportedError) as e:
            # A refusal: either torch refuses at some value too, or the answer depends on
            # the symbols, and the message names one.
            answers = []
            for i, v in enumerate(VALUES):
                try:
                    answers.append(_torch_view(tensors[i], fn, v) is not None)
                except (RuntimeError, IndexError):
                    answers.append(False)
            assert not all(answers) or "N" in str(e) or "M" in str(e), str(e)
            event(f"refused {name}")
            return
        for i, v in enumerate(VALUES):
            try:
                t = _torch_view(tensors[i], fn, v)
            except (RuntimeError, IndexError) as e:
                pytest.fail(
                    f"{name}{args} holds symbolically ({out}) but torch refuses at {v}: {e}"
                )
            if out is None:
                continue  # a copy where some value could view: still right for reshape
            assert t is not None, f"{name}{args}: symbolic view {out}, torch copies at {v}"
            assert _agrees(out, t, v), (name, args, out, out.evaluate(v), _layout_of(t), v)
            tensors[i] = t
        event(f"agreed {name}")
        if out is None:
            return
        lay = out


@pytest.mark.parametrize(
    "sizes, order, expected",
    [
        ((N, 64, 56, 56), (0, 1, 2, 3), (200704, 3136, 56, 1)),
        ((N, 64, 56, 56), (1, 2, 3, 0), (1, 3136 * N, 56 * N, N)),
        ((N, 3, 5), (0, 2, 1), (15, 1, 3)),
        ((4, N, M), (2, 0, 1), (N, 1, 4 * N)),
    ],
)
def test_packed_strides_are_polynomials(sizes: tuple, order: tuple, expected: tuple) -> None:
    lay = Layout.for_order(sizes, order)
    assert lay.strides == expected
    assert lay.is_packed() and not lay.may_overlap()
    for v in VALUES:
        static = Layout.for_order(evaluate(sizes, v), order)
        assert lay.evaluate(v) == static
        t = torch.empty([static.sizes[d] for d in order]).permute(*_inverse(order))
        assert _layout_of(t).strides == static.strides


def _inverse(order: tuple) -> list[int]:
    out = [0] * len(order)
    for k, d in enumerate(order):
        out[d] = k
    return out


def test_refusals_name_the_symbol() -> None:
    lay = Layout.contiguous((N, 6))
    with pytest.raises(LayoutError, match="only for some values of N"):
        lay.view((-1, 4))
    with pytest.raises(LayoutError, match="symbolic size N"):
        lay.squeeze(0)
    with pytest.raises(LayoutError, match="N"):
        lay.slice(0, 2)  # the length is N-2 only for N >= 2
    assert lay.view((-1, 3)) == Layout((2 * N, 3), (3, 1))
    assert lay.transpose(0, 1).view((-1,)) is None  # a copy: (6, N) is not a view for N > 1
    assert lay.slice(0, None, None, 2).sizes == ((N + 1) // 2, 6)
    assert lay.slice(0, 1).sizes == (N - 1, 6)


def test_chwn4_has_strides_in_n() -> None:
    packing = get_format("CHWN4").packing((N, 6, 5, 7))
    assert packing.physical_sizes == (2, 5, 7, N, 4)
    for v in VALUES:
        static = get_format("CHWN4").packing((v["N"], 6, 5, 7))
        assert packing.physical.evaluate(v) == static.physical
        assert packing.logical.evaluate(v) == static.logical
        assert packing.mask == static.mask
    with pytest.raises(UnsupportedError, match="channel count C"):
        get_format("NCHW4").packing((2, N, 5, 7))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_reshape_said_to_copy_at_every_binding_copies_at_each(data: Any) -> None:
    """`copies_at_every_binding`: a view chain over N (and M), then a reshape merging two
    neighbouring dims; where it says the reshape copies at every binding its class serves
    (symbols >= 2, no size of the two layouts 1), torch copies at each such binding."""
    d = Draw(data)
    lay = _base(d)
    for _ in range(d.int(0, 3)):
        name, args, _ = _draw_op(d, lay)
        if name == "view":
            continue
        try:
            lay = _apply(lay, name, args)
        except (LayoutError, UnsupportedError):
            return
    if d.chance(0.5):  # a broadcast dim (repeat_kv's repeats): what breaks chunks most
        j = d.int(0, lay.rank)
        lay = lay.unsqueeze(j)
        lay = lay.expand(lay.sizes[:j] + (d.choice([3, N]),) + lay.sizes[j + 1 :])
    if lay.rank < 2:
        return
    k = d.int(0, lay.rank - 2)
    sizes = lay.sizes[:k] + (lay.sizes[k] * lay.sizes[k + 1],) + lay.sizes[k + 2 :]
    if not copies_at_every_binding(lay, sizes):
        return
    event("copies at every binding")
    for n in range(2, 7):
        for m in range(2, 5):
            v = {"N": n, "M": m}
            concrete, target = lay.evaluate(v), evaluate(sizes, v)
            if any(s <= 1 for s in (*concrete.sizes, *target) if not isinstance(s, int)):
                continue
            if any(evaluate(s, v) <= 1 for s in (*lay.sizes, *sizes) if isinstance(s, Sym)):
                continue
            t = torch.arange(max(concrete.min_storage_size(), 1)).as_strided(
                concrete.sizes, concrete.strides, concrete.offset)
            with pytest.raises(RuntimeError):
                t.view(target)


def test_repeat_kv_copies_at_every_binding_and_a_stepped_flatten_does_not() -> None:
    """repeat_kv's heads and their repeats (stride 0) form no chunk for any N; every
    other column of (N, M) flattens as a view where M is even."""
    heads = Layout((N, 8, 4, 4, 128), (4096, 512, 0, 128, 1))
    assert copies_at_every_binding(heads, (N, 32, 4, 128))
    columns = Layout.contiguous((N, M)).slice(1, 0, None, 2)
    assert not copies_at_every_binding(columns, (N * ((M + 1) // 2),))
    assert not copies_at_every_binding(Layout.contiguous((N, 3)), (3 * N,))  # it views
