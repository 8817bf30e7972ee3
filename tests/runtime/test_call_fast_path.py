"""The cached-call fast path of `CompiledGraph.__call__`
(docs/design.md#execution-and-backends): a call whose key —
dtype, sizes, strides, storage offset, device and neg bit of each plain strided tensor —
was seen on a call that passed every check skips the checks, and gives exactly what the
full path gives. The oracle is a fresh `CompiledGraph` of the same graph, whose calls all
take the full path: after any sequence of calls the fast path answers each call with the
same outputs, or the same `CallError` message, as it does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stridec
from stridec import CallError
from stridec.runtime import call_path
from stridec.runtime import compile as compile_module
from stridec.runtime.cache import MEMORY_CACHE


def pair_graph() -> stridec.Graph:
    """x (2, 3) float32 → its transpose materialized and x itself (a view: no kernel);
    y (3,) int8 → y as float32 (a kernel)."""
    g = stridec.Graph("fast_pair")
    x = g.input("x", (2, 3), "float32")
    y = g.input("y", (3,), "int8")
    g.output(x.t().contiguous(), x, y.to("float32"))
    return g


def y_arg() -> torch.Tensor:
    return torch.arange(3, dtype=torch.int8)


def shrunk(offset: int = 4) -> torch.Tensor:
    """A (2, 3) view at `offset` (strides (3, 1)) of a storage shrunk to 8 elements after
    the view was made: its last element is offset + 3 + 2 = 9 ≥ 8."""
    base = torch.randn(12)
    x = base[offset:offset + 6].view(2, 3)
    base.untyped_storage().resize_(8 * base.element_size())
    return x


def neg_pair() -> tuple[torch.Tensor, torch.Tensor]:
    """Two float32 (2, 3) tensors with the same strides (6, 2) and offset 1, one of them a
    neg view (`z.conj().imag` stores b and means -b)."""
    z = torch.complex(torch.randn(2, 3), torch.randn(2, 3))
    twin, neg = z.imag, z.conj().imag
    assert (twin.stride(), twin.storage_offset()) == (neg.stride(), neg.storage_offset())
    assert neg.is_neg() and not twin.is_neg()
    return twin, neg


# Arguments for x, by name: valid ones of several specializations, and bad ones that share
# a valid one's key except in one property.
X_ARGS: dict[str, Callable[[], Any]] = {
    "row": lambda: torch.randn(2, 3),
    "col": lambda: torch.randn(3, 2).t(),
    "offset4": lambda: torch.randn(12)[4:10].view(2, 3),
    "shrunk": shrunk,
    "negtwin": lambda: neg_pair()[0],
    "neg": lambda: neg_pair()[1],
    "float64": lambda: torch.randn(2, 3, dtype=torch.float64),
    "sizes": lambda: torch.randn(3, 2),
    "meta": lambda: torch.randn(2, 3, device="meta"),
    "grad": lambda: torch.randn(2, 3, requires_grad=True),
    "parameter": lambda: torch.nn.Parameter(torch.randn(2, 3)),
    "sparse": lambda: torch.randn(2, 3).to_sparse(),
    "list": lambda: [[0.0] * 3] * 2,
    "int": lambda: 3,
}


def outcome(fn: stridec.CompiledGraph, args: tuple[Any, ...], **named: Any) -> Any:
    """What a call gives: the error's type and message, or each output's values, sizes,
    strides, offset, storage and whether it requires grad."""
    try:
        outs = fn(*args, **named)
    except CallError as e:
        return ("error", str(e))
    outs = outs if isinstance(outs, tuple) else (outs,)
    return ("ok", [
        (o.detach().clone(), tuple(o.shape), o.stride(), o.storage_offset(),
         o.untyped_storage().data_ptr(), o.requires_grad)
        for o in outs
    ])


def same(a: Any, b: Any, args: tuple[Any, ...]) -> bool:
    """Equal outcomes: the same error message, or outputs of equal values and layouts,
    each over the same argument's storage or over a fresh buffer in both."""
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return a[1] == b[1]
    inputs = {t.untyped_storage().data_ptr() for t in args}
    return len(a[1]) == len(b[1]) and all(
        torch.equal(p[0], q[0]) and p[1:4] == q[1:4] and p[5] == q[5]
        and (p[4] == q[4] if p[4] in inputs else q[4] not in inputs)
        for p, q in zip(a[1], b[1], strict=True)
    )


# A good call, then one that shares its key but for one property (or is a new key).
PAIRS = [("offset4", "shrunk"), ("negtwin", "neg"), ("row", "col"), ("col", "offset4"),
         *[("row", bad) for bad in ["float64", "sizes", "meta", "grad", "parameter", "sparse",
                                    "list", "int", "missing", "keyword"]]]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PAIRS), min_size=1, max_size=4))
def test_every_call_answers_as_the_full_path(pairs: list[tuple[str, str]]) -> None:
    """After any sequence of calls (cached keys, then a call differing in one property),
    each answer equals a fresh CompiledGraph's, and every good call is a compile or a
    cache hit."""
    fn = stridec.compile(pair_graph())
    good = 0
    for name in [name for pair in pairs for name in pair]:
        named: dict[str, Any] = {}
        if name == "missing":
            args: tuple[Any, ...] = (torch.randn(2, 3),)
        elif name == "keyword":
            args, named = (), {"x": torch.randn(2, 3), "y": y_arg()}
        else:
            args = (X_ARGS[name](), y_arg())
        got = outcome(fn, args, **named)
        want = outcome(stridec.compile(pair_graph()), args, **named)
        assert same(got, want, (*args, *named.values())), name
        good += got[0] == "ok"
    assert fn.stats.compiles + fn.stats.cache_hits == good


def test_a_repeated_key_skips_the_full_checks(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """The second call of a key runs no `_check`; a new stride does, and compiles."""
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(pair_graph())
    fn(torch.randn(2, 3), y_arg())
    checks: list[int] = []
    full_check = fn._check
    monkeypatch.setattr(fn, "_check", lambda tensors: checks.append(1) or full_check(tensors))
    x = torch.randn(2, 3)
    out_t, out_x, out_y = fn(x, y_arg())
    assert checks == []
    assert torch.equal(out_t, x.t().contiguous()) and torch.equal(out_y, y_arg().float())
    assert out_x.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    col = torch.randn(3, 2).t()
    out_t, _, _ = fn(col, y_arg())
    assert checks == [1] and torch.equal(out_t, col.t().contiguous())
    assert (fn.stats.compiles, fn.stats.cache_hits) == (2, 1)


def test_a_shrunk_storage_under_a_cached_key_is_refused() -> None:
    """A view at offset 4 runs; the same view after its storage shrank to 8 elements has
    the same key, and is refused with the full path's message."""
    fn = stridec.compile(pair_graph())
    x = torch.randn(12)[4:10].view(2, 3)
    assert torch.equal(fn(x, y_arg())[0], x.t().contiguous())
    with pytest.raises(CallError) as info:
        fn(shrunk(4), y_arg())
    assert str(info.value) == (
        "argument 'x': layout strided<[3, 1], offset: 4> reaches element 9, past its "
        "storage of 8 elements"
    )


def test_a_neg_view_under_a_cached_strides_is_refused() -> None:
    twin, neg = neg_pair()
    fn = stridec.compile(pair_graph())
    assert torch.equal(fn(twin, y_arg())[0], twin.t().contiguous())
    with pytest.raises(CallError, match="pending negation"):
        fn(neg, y_arg())


def test_gradients_flow_through_a_cached_view_output() -> None:
    """The output `x` is a view of the argument: its gradient reaches the argument as
    torch's own view would, on the full path and on a cached call alike."""
    g = stridec.Graph("fast_view")
    g.output(g.input("x", (2, 3), "float32").t())
    fn = stridec.compile(g)
    weights = torch.arange(6.0).reshape(3, 2)
    for _ in range(2):
        x = torch.randn(2, 3, requires_grad=True)
        (fn(x) * weights).sum().backward()
        assert torch.equal(x.grad, weights.t())


def test_evictions_keep_every_hit_in_the_local_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five offsets through a per-graph front of 2 entries: every remembered key names a
    program still in `_programs`, so a cached call counts and finds what the full path
    would; results stay right."""
    monkeypatch.setattr(compile_module, "LOCAL_CAPACITY", 2)
    fn = stridec.compile(pair_graph())
    storage = torch.randn(20)
    for offset in [0, 1, 0, 2, 3, 0, 4, 4, 1]:
        x = torch.as_strided(storage, (2, 3), (3, 1), offset)
        assert torch.equal(fn(x, y_arg())[0], x.t().contiguous())
        assert len(fn._programs) <= 2
        for hit in fn._hits.values():
            assert fn._programs.get(hit.local_key) is hit.program
    assert fn.stats.compiles + fn.stats.cache_hits == 9


def test_threads_hitting_and_evicting_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight threads, two stride patterns, a per-graph front of one entry: hits race with
    evictions. Every view is right and every call is counted once, as a compile or a hit."""
    monkeypatch.setattr(compile_module, "LOCAL_CAPACITY", 1)
    g = stridec.Graph("fast_threads")
    g.output(g.input("x", (4, 6), "float32").t())
    fn = stridec.compile(g)
    args = [torch.randn(4, 6), torch.randn(6, 4).t()]
    calls, failures = 200, []
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        barrier.wait(timeout=60)
        for k in range(calls):
            x = args[(i + k // 7) % 2]
            out = fn(x)
            if not (out.stride() == x.t().stride() and torch.equal(out, x.t())):
                failures.append(f"thread {i}, call {k}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == []
    assert fn.stats.compiles + fn.stats.cache_hits == 8 * calls


def _nested(sizes: tuple[int, int]) -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # "the nested tensor API is in prototype stage"
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.randn(sizes), torch.randn(sizes)])


def _sparse(kind: str) -> Callable[[tuple[int, int]], torch.Tensor]:
    def make(sizes: tuple[int, int]) -> torch.Tensor:
        import warnings

        with warnings.catch_warnings():  # "sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            x = torch.randn(sizes)
            return x.to_sparse() if kind == "coo" else x.to_sparse(
                layout=getattr(torch, f"sparse_{kind}"),
                blocksize=(1, 1) if kind in ("bsr", "bsc") else None)
    return make


# Plain `torch.Tensor`s of another layout than strided, or nested: by (sizes) -> tensor.
OTHER_LAYOUTS: dict[str, Callable[[tuple[int, int]], torch.Tensor]] = {
    **{kind: _sparse(kind) for kind in ("coo", "csr", "csc", "bsr", "bsc")},
    "nested": _nested,
    **({"mkldnn": lambda sizes: torch.randn(sizes).to_mkldnn()}
       if torch.backends.mkldnn.is_available() else {}),
}


@pytest.mark.parametrize("kind", list(OTHER_LAYOUTS))
def test_out_call_keys_refuse_tensors_of_other_layouts(kind: str) -> None:
    """`out_call_key` tells a `torch.Tensor` that is not plain strided by what it refuses (no
    storage, no sizes) instead of reading its layout: no key for it as an input or as an
    out, so even after a cached call of the same sizes its call takes the full checks and
    raises their `CallError`."""
    g = stridec.Graph("fast_layouts")
    g.output(g.input("x", (2, 3), "float32").t().contiguous())
    fn = stridec.compile(g)
    x, o = torch.randn(2, 3), torch.empty(3, 2)
    bad_x, bad_o = OTHER_LAYOUTS[kind]((2, 3)), OTHER_LAYOUTS[kind]((3, 2))
    assert type(bad_x) is torch.Tensor and (bad_x.layout != torch.strided or bad_x.is_nested)
    assert call_path.out_call_key((bad_x,), o) is None
    assert call_path.out_call_key((x,), bad_o) is None
    assert call_path.out_call_key((x,), (o, bad_o)) is None
    for _ in range(2):  # the second call is cached
        assert torch.equal(fn(x, out=o), x.t())
    with pytest.raises(CallError, match="argument 'x': expected a strided tensor"):
        fn(bad_x, out=o)
    with pytest.raises(CallError, match="out: expected a strided tensor"):
        fn(x, out=bad_o)
