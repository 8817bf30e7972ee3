"""A graph over symbolic sizes called again at a size it served before runs as a static
graph's cached call does (`ClassPlans.class_hit`, docs/symbolic.md): the call key
enters `_hits` with the class runner bound to its values, the C kernels run on the
pointers the key read. Every answer is torch's: values, strides, storage sharing, the
caller's `out` written in place with its version bumped, nothing outside an out window."""

from __future__ import annotations

import pytest
import torch
from torch_oracle import check_against_torch

import stridec
from stridec.runtime import compile as compile_module


def _roll_partition(x: torch.Tensor) -> torch.Tensor:  # Swin: a roll, then 2x2 windows
    y = torch.roll(x, shifts=(-1, -1), dims=(1, 2))
    b, h, w, c = y.shape
    y = y.view(b, h // 2, 2, w // 2, 2, c)
    return y.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, 2, 2, c)


def _repeat_kv(k: torch.Tensor) -> torch.Tensor:  # LLaMA, n_rep = 3
    b, h, t, d = k.shape
    return k[:, :, None].expand(b, h, 3, t, d).reshape(b, h * 3, t, d)


def _split_heads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # a view and a copy
    b, t, _ = x.shape
    heads = x.view(b, t, 2, 3)
    return heads, heads.transpose(1, 2).contiguous()


PATTERNS = {
    "roll_partition": (_roll_partition, (3, 4, 6, 5)),
    "repeat_kv": (_repeat_kv, (3, 2, 5, 4)),
    "split_heads": (_split_heads, (3, 4, 6)),
}


def _symbolic(name: str) -> tuple[stridec.CompiledGraph, object]:
    fn, shape = PATTERNS[name]
    return stridec.compile(stridec.trace(fn, torch.randn(*shape), dynamic={0: [0]}),
                           backend="cpu"), fn


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_a_size_served_again_is_a_cached_call(name: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A key the class's entry served three times (the first call plans the class) enters
    `_hits`; later calls of it run no `fast_binder` and no class lookup, count their
    launches, and give torch's outputs on new tensors."""
    compiled, fn = _symbolic(name)
    shape = PATTERNS[name][1]
    for call in range(4):
        assert len(compiled._hits) == 0, f"call {call}"
        x = torch.randn(5, *shape[1:])
        check_against_torch(compiled(x), fn(x), (x,))
    assert len(compiled._hits) == 1
    launches = compiled.plan_for(x).launches
    monkeypatch.setattr(compiled._symbolic, "fast", lambda tensors: pytest.fail("full path"))
    for _ in range(3):
        x = torch.randn(5, *shape[1:])
        before = compiled.stats.launches
        check_against_torch(compiled(x), fn(x), (x,))
        assert compiled.stats.launches - before == launches


def test_new_sizes_do_not_enter_the_cache() -> None:
    """Sizes called once or twice each (a sequence growing by one, then again) keep the
    class path: no runner is bound per size, and `_hits` stays empty."""
    compiled, fn = _symbolic("repeat_kv")
    for _ in range(2):
        for n in range(2, 12):
            x = torch.randn(n, 2, 5, 4)
            check_against_torch(compiled(x), fn(x), (x,))
    assert len(compiled._hits) == 0


@pytest.mark.parametrize("where", ["fresh", "offset", "pitched", "transposed"])
def test_out_calls_served_again_write_the_out_in_place(where: str) -> None:
    """repeat_kv into `out`: a fresh tensor, one at an offset into a larger storage,
    pitched rows of a wider buffer or a transposed tensor (the last two not the class
    plan's strides: its result is copied in, and the key stays on the class path).
    Every call writes the out and nothing outside it, returns it, and bumps its version
    once."""
    compiled, fn = _symbolic("repeat_kv")
    wide = torch.full((4, 6, 5, 7), -7.0)
    if where == "fresh":
        out = torch.empty(4, 6, 5, 4)
    elif where == "offset":
        out = wide.view(-1)[9 : 9 + 480].view(4, 6, 5, 4)
    elif where == "pitched":
        out = wide[..., 2:6]
    else:
        out = torch.empty(4, 6, 4, 5).transpose(2, 3)
    for call in range(6):
        x = torch.randn(4, 2, 5, 4)
        version = out._version
        assert compiled(x, out=out) is out
        assert torch.equal(out, fn(x)), f"call {call}"
        assert out._version == version + 1
        expected = torch.full_like(wide, -7.0)
        if where == "offset":
            expected.view(-1)[9 : 9 + 480] = fn(x).reshape(-1)
        elif where == "pitched":
            expected[..., 2:6] = fn(x)
        if where in ("offset", "pitched"):
            assert torch.equal(wide, expected), f"call {call}: written outside the out"
    assert len(compiled._hits) == (1 if where in ("fresh", "offset") else 0)


def test_an_out_that_meets_an_input_is_not_cached_as_written_straight() -> None:
    """The out is the input's own memory for two calls, then a tensor of its own: the key
    differs by which tensors share a storage; each answer is torch's."""
    g = stridec.Graph("flip_into")
    x = g.input("x", ("N", 6), "float32")
    g.output(x.flip(1))
    compiled = stridec.compile(g, backend="cpu")
    for _ in range(4):
        t = torch.randn(3, 6)
        want = t.flip(1)
        assert compiled(t, out=t) is t and torch.equal(t, want)
        o = torch.empty(3, 6)
        assert compiled(t, out=o) is o and torch.equal(o, t.flip(1))


def test_evicting_a_class_empties_the_cached_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two classes (N = 3, N = 16) through a per-graph front of one class: every hit
    names a program still among the classes, and every result is torch's."""
    monkeypatch.setattr(compile_module, "LOCAL_CAPACITY", 1)
    compiled, fn = _symbolic("roll_partition")
    for n in [3, 3, 3, 3, 16, 16, 16, 16, 3, 3, 3, 16]:
        x = torch.randn(n, 4, 6, 5)
        check_against_torch(compiled(x), fn(x), (x,))
        programs = {id(p) for p in compiled._symbolic.classes.values()}
        assert all(id(hit.program) in programs for hit in compiled._hits.values())
