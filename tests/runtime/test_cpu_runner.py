"""The `cpu` backend's runner passes storages by their data pointers (`Runner.pointers`:
every launcher is a C kernel, which reads `data_ptr()` only): inputs go in as untyped
storages, not as flat views, and an `out=` call on the cached path launches without
building output views: its C kernels run straight on the data pointers its call key read
(`Runner.bound`). Torch is the oracle: inputs at storage offsets,
outputs that view an input, outs filled with a sentinel before every call."""

from __future__ import annotations

import torch

import stridec
from stridec.runtime import launch


def graph() -> stridec.Graph:
    g = stridec.Graph("cpu_pointers")
    x = g.input("x", (6, 10), "float32")
    y = g.input("y", (4, 6), "int8")
    g.output(x.t().contiguous(), x[:, 2:7], y.to("float32").t().contiguous())
    return g


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    xb = torch.randn(80, generator=g)
    yb = torch.randint(-128, 128, (40,), dtype=torch.int8, generator=g)
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


def _bound_entries(fn: object) -> list:
    return [entry[2] for key, entry in fn._hits.items() if key[0] == "out"]


def test_cached_out_calls_run_bound_kernels_on_new_storages() -> None:
    """The cached `out=` path of C kernels runs `Runner.bound`'s function: outs at a storage
    offset, one out a window of another tensor's storage, and other storages of the same
    layouts later (same key but for the pointers' values): every call writes its own outs
    and nothing else."""
    fn = stridec.compile(graph(), backend="cpu")
    for k in range(3):
        x, y = inputs()
        x.mul_(k + 1)
        big = torch.full((200,), -1.0)
        outs = (big[3:63].view(10, 6), torch.empty(6, 5), big[100:124].view(6, 4))
        for o in outs:
            o.fill_(-7.5)
        got = fn(x, y, out=outs)
        assert all(a is b for a, b in zip(got, outs, strict=True))
        for a, b in zip(outs, expected(x, y), strict=True):
            assert torch.equal(a, b)
        assert bool((big[:3] == -1).all()) and bool((big[63:100] == -1).all())
        assert bool((big[124:] == -1).all())
    assert fn.stats.compiles == 1
    assert _bound_entries(fn) and all(b is not None for b in _bound_entries(fn))


def test_cached_out_calls_of_a_batch_and_of_philox_run_bound() -> None:
    """A cat (one batch kernel of three copies) and Philox bits: their cached `out=` calls
    also run bound, and match torch's cat and the first call's bits."""
    g = stridec.Graph("cpu_bound_cat")
    xs = [g.input(f"x{k}", (2, c, 3, 5), "float16") for k, c in enumerate((3, 1, 4))]
    g.output(stridec.cat(xs, 1))
    fn = stridec.compile(g, backend="cpu")
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        ts = [torch.randn(2, c, 3, 5, generator=gen).half() for c in (3, 1, 4)]
        out = torch.full((2, 8, 3, 5), -3.0, dtype=torch.float16)
        assert fn(*ts, out=out) is out
        assert torch.equal(out, torch.cat(ts, 1))
    assert all(b is not None for b in _bound_entries(fn))

    g = stridec.Graph("cpu_bound_philox")
    state = g.input("s", (6,), "uint32")
    g.output(*g.philox(state, (4, 33)))
    rng = stridec.compile(g, backend="cpu")
    oracle = stridec.compile(g, backend="reference")
    state = torch.tensor([5, 0, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
    bits, new_state = torch.zeros(4, 33, dtype=torch.uint32), torch.zeros_like(state)
    for _ in range(3):
        want_bits, want_state = oracle(state)
        rng(state, out=(bits, new_state))
        assert torch.equal(bits, want_bits) and torch.equal(new_state, want_state)
        state = new_state.clone()
    assert all(b is not None for b in _bound_entries(rng))
    # The state as its own out (the new state staged in a buffer slot, then copied):
    # bound too, a fresh buffer per call.
    expect_state = state.clone()
    for _ in range(2):
        want_bits, expect_state = oracle(expect_state)
        rng(state, out=(bits, state))
        assert torch.equal(bits, want_bits) and torch.equal(state, expect_state)
    runners = [entry[0].runner for key, entry in rng._hits.items() if key[0] == "out"]
    assert len(runners) == 2 and all(r.buffers for r in runners)
    assert all(b is not None for b in _bound_entries(rng))


def test_cached_plain_calls_run_direct_and_match_torch() -> None:
    """A cached `fn(*xs)` of C kernels runs them through the runner's `direct` function on
    the storage pointers its checks read: fresh outputs every call (never the last
    call's memory), views of an input still views, inputs at offsets and of other
    storages each time; a graph without kernels has no `direct` and still answers."""
    fn = stridec.compile(graph(), backend="cpu")
    x, y = inputs()
    first = fn(x, y)
    for k in range(3):
        x2, y2 = (t.clone() + k for t in (x, y)) if k else (x, y)
        got = fn(x2, y2)
        for a, b in zip(got, expected(x2, y2), strict=True):
            assert torch.equal(a, b)
        assert got[1].data_ptr() == x2[:, 2:7].data_ptr()
        assert got[0].data_ptr() != first[0].data_ptr()  # a buffer of its own
    for a, b in zip(first, expected(x, y), strict=True):  # untouched by later calls
        assert torch.equal(a, b)
    plain = [hit for key, hit in fn._hits.items() if key[0] != "out"]
    assert plain and all(hit.direct is not None for hit in plain)
    assert fn.stats.cache_hits >= 3

    g = stridec.Graph("cpu_direct_view")
    g.output(g.input("x", (6, 10), "float32").t())
    view = stridec.compile(g, backend="cpu")
    for _ in range(2):
        assert torch.equal(view(x), x.t()) and view(x).data_ptr() == x.data_ptr()
    assert all(hit.direct is None for hit in view._hits.values())


def test_cached_out_calls_of_a_batch_from_two_threads_at_once() -> None:
    """Two Python threads make cached `out=` calls of one cat (a batch kernel, run bound):
    each thread fills arrays of its own (`_Batch.calls`), so every result is torch's."""
    import threading

    g = stridec.Graph("cpu_bound_cat_threads")
    xs = [g.input(f"x{k}", (64, c, 32), "float32") for k, c in enumerate((3, 5, 2))]
    g.output(stridec.cat(xs, 1))
    fn = stridec.compile(g, backend="cpu")
    failures: list[int] = []
    barrier = threading.Barrier(2)

    def work(seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        barrier.wait(timeout=60)
        for _ in range(60):
            ts = [torch.randn(64, c, 32, generator=gen) for c in (3, 5, 2)]
            out = torch.full((64, 10, 32), -1.0)
            if fn(*ts, out=out) is not out or not torch.equal(out, torch.cat(ts, 1)):
                failures.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == []
    assert all(b is not None for b in _bound_entries(fn))


def _layout(t: torch.Tensor) -> tuple:
    return (t.dtype, t.shape, t.stride(), t.storage_offset(), t.untyped_storage().nbytes())


def test_cached_plain_calls_allocate_as_the_full_path_does() -> None:
    """A cached `fn(*xs)` allocates an output that is a whole buffer as that output
    (`torch.empty_strided`, `launch._whole_outputs`): every output has the values, sizes,
    strides, offset and storage bytes of the full path's (the first call), for a plain
    transpose, a cast keeping a permuted input's strides, several outputs (one a view of
    an input) and a cat, 1 and 3 threads."""
    x = torch.randn(2, 5, 3, 7)
    cases = [
        ("t", lambda g: [g.input("x", (33, 20), "float32").t().contiguous()],
         [torch.randn(33, 20)]),
        ("cast_keeps_strides", lambda g: [g.input("x", (2, 5, 3, 7), "float32")
                                          .permute(0, 2, 3, 1).to("float16")],
         [x]),
        ("several", lambda g: list(expected_graph_outputs(g)), list(inputs())),
        ("cat", lambda g: [stridec.cat([g.input("a", (2, 3, 5), "float16"),
                                        g.input("b", (2, 4, 5), "float16")], 1)],
         [torch.randn(2, 3, 5).half(), torch.randn(2, 4, 5).half()]),
    ]
    threads = torch.get_num_threads()
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            for name, build, args in cases:
                g = stridec.Graph(f"cpu_fresh_{name}")
                g.output(*build(g))
                fn = stridec.compile(g, backend="cpu")
                want = stridec.compile(g, backend="reference")(*args)
                first = fn(*args)  # the full path
                assert fn._hits, name
                for _ in range(2):
                    got = fn(*args)  # cached
                    pairs = zip(*(t if isinstance(t, tuple) else (t,)
                                  for t in (got, first, want)), strict=True)
                    for a, b, w in pairs:
                        assert torch.equal(a, w) and _layout(a) == _layout(b), name
                        assert a.stride() == w.stride(), name
    finally:
        torch.set_num_threads(threads)


def expected_graph_outputs(g: stridec.Graph) -> tuple[stridec.Value, ...]:
    x = g.input("x", (6, 10), "float32")
    y = g.input("y", (4, 6), "int8")
    return x.t().contiguous(), x[:, 2:7], y.to("float32").t().contiguous()


def test_a_changed_argument_leaves_the_cached_path(monkeypatch) -> None:
    """After a cached call, an argument that differs in its storage's size, its strides,
    its dtype or its neg bit has another key (`plain_call_key`): the call takes the full
    checks (counted here), which run it or refuse it as a fresh graph's would; a new
    storage of the same size under the same key is read at its own address."""
    import pytest

    from stridec.errors import CallError

    g = stridec.Graph("cpu_changed")
    g.output(g.input("x", (6, 10), "float32").t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    checks: list[int] = []
    full_check = fn._check
    monkeypatch.setattr(fn, "_check", lambda ts: checks.append(1) or full_check(ts))
    base = torch.randn(80)
    x = base[7:67].view(6, 10)
    for _ in range(2):
        assert torch.equal(fn(x), x.t().contiguous())
    assert len(checks) == 1
    other = torch.randn(80)[7:67].view(6, 10)  # same key, another storage
    assert torch.equal(fn(other), other.t().contiguous()) and len(checks) == 1
    grown = torch.randn(200)[7:67].view(6, 10)  # a bigger storage: a new key
    assert torch.equal(fn(grown), grown.t().contiguous()) and len(checks) == 2
    shrunk = torch.randn(80)[7:67].view(6, 10)
    shrunk.untyped_storage().resize_(4 * 66)  # reaches element 66: past the storage
    with pytest.raises(CallError, match="past its storage"):
        fn(shrunk)
    assert len(checks) == 3
    strided = torch.randn(10, 6).t()
    assert torch.equal(fn(strided), strided.t().contiguous()) and len(checks) == 4
    with pytest.raises(CallError, match="float64"):
        fn(x.double())
    with pytest.raises(CallError, match="pending negation"):
        fn(torch.randn(6, 10, dtype=torch.complex64).conj().imag)
    assert len(checks) == 6
    assert torch.equal(fn(x), x.t().contiguous()) and len(checks) == 6  # still cached


def test_cached_keys_are_bounded(monkeypatch) -> None:
    """Keys hold storage bytes, so a caller cycling through storages of many sizes makes
    many keys: `_hits` holds at most `HITS_CAPACITY` (the least recently used leave),
    and every call stays right and counted."""
    from stridec.runtime import compile as compile_module

    monkeypatch.setattr(compile_module, "HITS_CAPACITY", 2)
    g = stridec.Graph("cpu_bounded_keys")
    g.output(g.input("x", (3, 4), "float32").t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    for n in [12, 13, 14, 15, 12, 16, 13, 12]:
        x = torch.randn(n)[:12].view(3, 4)
        for _ in range(2):
            assert torch.equal(fn(x), x.t().contiguous())
        assert len(fn._hits) <= 2
    assert fn.stats.compiles + fn.stats.cache_hits == 16


def test_cached_calls_of_copies_too_small_to_split_ask_no_thread_count(monkeypatch) -> None:
    """A cached call of C copies that move fewer bytes together than any of them splits
    (`call_path.one_thread`) runs them on the calling thread without asking torch for
    its thread count; one that could split asks on every call (a later
    `torch.set_num_threads` counts). Both match torch, with and without `out=`, and a
    cat (one batch) too."""
    from stridec.compiler.copy_plan import PARALLEL_BYTES

    asked = []
    real = torch.get_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: asked.append(1) or real())
    # float32 transpose: each element read and written, 8 bytes; rows of 16 elements.
    small_rows = PARALLEL_BYTES // 8 // 16 - 1
    for rows, splits in ((small_rows, False), (small_rows + 2, True)):
        g = stridec.Graph(f"cpu_threads_{rows}")
        g.output(g.input("x", (rows, 16), "float32").t().contiguous())
        fn = stridec.compile(g, backend="cpu")
        x = torch.randn(rows, 16)
        out = torch.full((16, rows), -1.0)
        fn(x), fn(x, out=out)  # the full path, each remembered
        asked.clear()
        for _ in range(2):
            assert torch.equal(fn(x), x.t().contiguous())
            out.fill_(-1.0)
            assert fn(x, out=out) is out and torch.equal(out, x.t().contiguous())
        assert len(asked) == (4 if splits else 0)
    # A cat of three members in one batch, into out=, small.
    g = stridec.Graph("cpu_threads_cat")
    xs = [g.input(f"x{k}", (2, c, 3, 5), "float16") for k, c in enumerate((3, 1, 4))]
    g.output(stridec.cat(xs, 1))
    fn = stridec.compile(g, backend="cpu")
    ts = [torch.randn(2, c, 3, 5).half() for c in (3, 1, 4)]
    out = torch.empty(2, 8, 3, 5, dtype=torch.float16)
    fn(*ts, out=out)
    asked.clear()
    out.zero_()
    assert fn(*ts, out=out) is out and torch.equal(out, torch.cat(ts, 1))
    assert asked == []


def test_symbolic_cached_calls_ask_the_thread_count_as_static_ones(monkeypatch) -> None:
    """A graph over a symbolic batch, called again at a size it served (its key in
    `_hits`, `ClassPlans.class_hit`), asks torch for its thread count exactly where the
    static graph of that size does (`call_path.one_thread` of the binding's buffers):
    never at a size too small to split, on every call at one that could; into `out=`
    and not, each matching torch."""
    from stridec.compiler.copy_plan import PARALLEL_BYTES

    asked = []
    real = torch.get_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: asked.append(1) or real())
    fn = stridec.compile(stridec.trace(lambda x: x.transpose(1, 2).contiguous(),
                                       torch.randn(2, 16, 16), dynamic={0: [0]}),
                         backend="cpu")
    small = PARALLEL_BYTES // 8 // 256 - 1  # float32 (16, 16) planes, 8 bytes an element
    for batch, splits in ((small, False), (small + 2, True)):
        x = torch.randn(batch, 16, 16)
        out = torch.full((batch, 16, 16), -1.0)
        for _ in range(4):  # the fourth call of a key is a cached one
            fn(x), fn(x, out=out)
        asked.clear()
        for _ in range(2):
            assert torch.equal(fn(x), x.transpose(1, 2).contiguous())
            out.fill_(-1.0)
            assert fn(x, out=out) is out and torch.equal(out, x.transpose(1, 2).contiguous())
        assert len(asked) == (4 if splits else 0), batch


def test_cached_calls_writing_in_place_ask_the_thread_count_by_size(monkeypatch) -> None:
    """A graph that writes into its argument (a KV-cache write) too small to split runs
    its cached calls on the calling thread (`call_path.one_thread`, the written argument
    counted whole); one that could split asks torch on every call. Both write what torch
    writes, and bump the argument's version."""
    from stridec.compiler.copy_plan import PARALLEL_BYTES

    def write(cache: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        cache[:, 1 : 1 + x.shape[1]] = x
        return cache

    asked = []
    real = torch.get_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: asked.append(1) or real())
    small = PARALLEL_BYTES // 8 // 64 // 2 - 1  # float32 rows of 64: (small, 64) caches
    for rows, splits in ((small, False), (16 * small, True)):
        cache, x = torch.zeros(rows, 64), torch.randn(rows, 8)
        fn = stridec.compile(stridec.trace(write, cache.clone(), x), backend="cpu")
        fn(cache, x)  # the full path, remembered
        asked.clear()
        for _ in range(2):
            version = cache._version
            want = write(cache.clone(), x)
            assert fn(cache, x) is not None and torch.equal(cache, want)
            assert cache._version > version
        assert len(asked) == (2 if splits else 0), rows
