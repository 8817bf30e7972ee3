"""In-place writes into tensors, traced and built: `cache[:, s:s+n] = x`, `out.copy_(y)`,
`x[..., ::2] = y`, `fill_`, `zero_`. Each runs on every CPU backend against the same torch
code on the same tensors: the values of every output and of every argument afterwards,
output strides and storage sharing, the very tensor where torch returns an argument, and
each argument's version counter."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.runtime.backends import cpu as cpu_backend

BACKENDS = ["reference", "interpret"] + (["cpu"] if cpu_backend.available() else [])


def _check(fn: Callable, *example: torch.Tensor, backends=BACKENDS, **trace_kw) -> None:
    """Trace `fn` on `example`; call the compiled graph on fresh copies of it, twice (the
    second call is a cached one), and compare with torch on copies of its own."""
    graph = stridec.trace(fn, *example, **trace_kw)
    for backend in backends:
        compiled = stridec.compile(graph, backend=backend)
        for _ in range(2):
            ours = [t.clone() for t in example]
            theirs = [t.clone() for t in example]
            before = [t._version for t in ours]
            want = fn(*theirs)
            want_versions = [t._version for t in theirs]  # from 0: fresh clones
            got = compiled(*ours)
            want = want if isinstance(want, tuple) else (want,)
            got = got if isinstance(got, tuple) else (got,)
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                assert torch.equal(g, w), (backend, k)
                assert g.stride() == w.stride() and g.storage_offset() == w.storage_offset()
                for t_ours, t_theirs in zip(ours, theirs, strict=True):
                    shares = g.untyped_storage().data_ptr() == t_ours.untyped_storage().data_ptr()
                    assert shares == (w.untyped_storage().data_ptr()
                                      == t_theirs.untyped_storage().data_ptr()), (backend, k)
                    assert (g is t_ours) == (w is t_theirs), (backend, k)
            for t_ours, t_theirs, b, v in zip(ours, theirs, before, want_versions, strict=True):
                assert torch.equal(t_ours, t_theirs), backend  # the arguments afterwards
                assert t_ours._version - b == v, backend


# -- real code ----------------------------------------------------------------------------
def llama_kv_cache(cache_k, cache_v, xk, xv):
    """Meta's LLaMA attention (model.py): the new keys and values written into the caches
    at start_pos, then the caches up to the end read back (views of the caches)."""
    bsz, seqlen = xk.shape[0], xk.shape[1]
    start_pos = 3
    cache_k[:bsz, start_pos : start_pos + seqlen] = xk
    cache_v[:bsz, start_pos : start_pos + seqlen] = xv
    keys = cache_k[:bsz, : start_pos + seqlen]
    values = cache_v[:bsz, : start_pos + seqlen]
    return keys.transpose(1, 2), values.transpose(1, 2)


def test_llama_kv_cache():
    cache = torch.randn(4, 16, 2, 8)
    _check(llama_kv_cache, cache, cache.clone() + 1, torch.randn(2, 5, 2, 8),
           torch.randn(2, 5, 2, 8))


def test_kv_cache_write_is_one_copy_of_the_new_rows():
    """The write is one kernel over the written rows: every other element of the cache
    keeps its bytes (NaN sentinels included)."""
    def write(cache, x):
        cache[:, 6:9] = x
        return cache

    cache = torch.full((2, 16, 8), float("nan"))
    x = torch.randn(2, 3, 8)
    graph = stridec.trace(write, cache, x)
    fn = stridec.compile(graph, backend=BACKENDS[-1])
    out = cache.clone()
    assert fn(out, x) is out
    assert torch.equal(out[:, 6:9], x)
    assert torch.isnan(out[:, :6]).all() and torch.isnan(out[:, 9:]).all()
    if BACKENDS[-1] == "cpu":
        plan = fn.plan_for(out, x)
        assert len(plan.kernels) == 1 and "%cache" in plan.ir


def t5_shift_right(input_ids):
    """Hugging Face T5's `_shift_right`: a new tensor of zeros, the ids shifted by one
    written into it, the start token into column 0."""
    shifted = torch.zeros_like(input_ids)
    shifted[..., 1:] = input_ids[..., :-1].clone()
    shifted[..., 0] = 7
    return shifted


def test_t5_shift_right():
    _check(t5_shift_right, torch.arange(12, dtype=torch.int64).view(3, 4))


def interleave(x, a, b):
    """Rotary-style interleaving: `x[..., ::2] = a`, `x[..., 1::2] = b`."""
    x[..., ::2] = a
    x[..., 1::2] = b
    return x


def test_strided_writes_return_the_argument_itself():
    _check(interleave, torch.zeros(3, 8), torch.randn(3, 4), torch.randn(3, 4))


def copy_into(out, x):
    out.copy_(x.transpose(0, 1))
    return out


def test_copy_into_an_argument():
    _check(copy_into, torch.empty(5, 3), torch.randn(3, 5))


def test_broadcast_cast_and_numbers_as_torch():
    def f(x, row, ints):
        x[0] = row                      # broadcast over nothing: (4,) into (4,)
        x[1:3] = row                    # broadcast (4,) over two rows
        x[3] = 2.5                      # a number
        ints[:, 1] = x[3, :3]           # float into int32: truncated, as copy_
        ints[0] = 2.7                   # a float number into int32: 2, as torch
        x[..., -1].zero_()
        x[:, 0].fill_(-1)
        return x.clone(), ints

    _check(f, torch.zeros(4, 4), torch.randn(4), torch.zeros(3, 3, dtype=torch.int32))


def test_leading_ones_of_the_value_dropped_as_torch():
    def f(x, y):
        x[0] = y  # y is (1, 4), x[0] is (4,)
        return x

    _check(f, torch.zeros(3, 4), torch.randn(1, 4))


def test_later_reads_see_the_write_and_earlier_copies_do_not():
    def f(x, y):
        row = x[1]                       # a view: sees the write, as torch's
        before = x.t().contiguous()      # a copy: keeps the old values
        kept = x.clone()
        x.copy_(y)
        return row.clone(), before.flip(0).contiguous(), kept[::2], x.t().contiguous()

    _check(f, torch.randn(4, 4), torch.randn(4, 4))


def test_writes_into_new_memory_leave_the_argument_alone():
    """A `flip`, `clone` or copying `reshape` is new memory in torch: a write into it leaves
    the argument as it was (the compiler's flip reads through negative strides, but a
    written flip gets memory of its own). `contiguous()` of a contiguous tensor is the
    tensor itself: a write into it is a write into the argument, as in torch."""
    def f(x):
        flipped = x.flip(0)
        flipped[0] = 5.0
        cloned = x.clone()
        cloned[:, 1].zero_()
        regrouped = x.t().reshape(-1)
        regrouped[:2] = -1.0
        same = x.contiguous()
        same[2, 2] = 9.0
        return flipped, cloned, regrouped, x

    _check(f, torch.randn(3, 4))


def test_disjoint_windows_of_one_tensor():
    def f(x):
        x[::2] = x[1::2]          # odd rows into even rows: no element read is written
        x[:, 1] = x[:, 2]         # column 2 into column 1
        x.copy_(x)                # every element onto itself: nothing changes
        return x

    _check(f, torch.randn(6, 5))


@pytest.mark.parametrize("make,write", [
    (lambda: torch.arange(8.0), lambda x: x[1:].copy_(x[:-1])),
    (lambda: torch.arange(16.0).view(4, 4), lambda x: x.copy_(x.t())),
    (lambda: torch.arange(8.0), lambda x: x[:4].copy_(x[2:6])),
], ids=["shift", "transpose", "overlap"])
def test_partial_overlap_is_refused_as_torch_refuses(make, write):
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        write(make())
    with pytest.raises(stridec.CallError, match="refer to a single memory location"):
        stridec.trace(write, make())


def test_writing_into_a_broadcast_argument_is_refused():
    graph = stridec.trace(lambda x, y: x.copy_(y), torch.zeros(3, 4), torch.ones(3, 4))
    fn = stridec.compile(graph, backend=BACKENDS[-1])
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.zeros(1, 4).expand(3, 4).copy_(torch.ones(3, 4))
    with pytest.raises(stridec.CallError, match="argument 'x'.*one address"):
        fn(torch.zeros(1, 4).expand(3, 4), torch.ones(3, 4))


def test_symbolic_batch():
    graph = stridec.trace(llama_kv_cache, torch.randn(4, 16, 2, 8), torch.randn(4, 16, 2, 8),
                          torch.randn(2, 5, 2, 8), torch.randn(2, 5, 2, 8),
                          dynamic={k: {0: "B"} for k in range(4)})
    fn = stridec.compile(graph, backend=BACKENDS[-1])
    for b in (1, 2, 3, 5):
        caches = [torch.randn(b, 16, 2, 8) for _ in range(2)]
        xs = [torch.randn(b, 5, 2, 8) for _ in range(2)]
        theirs = [t.clone() for t in caches]
        want = llama_kv_cache(*theirs, *xs)
        got = fn(*caches, *xs)
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w) and g.stride() == w.stride()
            assert g.untyped_storage().data_ptr() in {c.untyped_storage().data_ptr()
                                                       for c in caches}
        assert all(torch.equal(c, t) for c, t in zip(caches, theirs, strict=True))
        assert [c._version for c in caches] == [t._version for t in theirs]


def test_out_and_writes_together():
    def f(cache, x):
        cache[:, :2] = x
        return cache[:, :3].contiguous()

    graph = stridec.trace(f, torch.zeros(2, 5), torch.randn(2, 2))
    fn = stridec.compile(graph, backend=BACKENDS[-1])
    cache, x = torch.zeros(2, 5), torch.randn(2, 2)
    out = torch.empty(2, 3)
    assert fn(cache, x, out=out) is out
    assert torch.equal(cache[:, :2], x) and torch.equal(out, cache[:, :3])
    assert cache._version == 1 and out._version == 1


def test_autograd_through_a_write_is_refused():
    graph = stridec.trace(copy_into, torch.empty(5, 3), torch.randn(3, 5))
    fn = stridec.compile(graph, backend=BACKENDS[-1])
    x = torch.randn(3, 5, requires_grad=True)
    with pytest.raises(stridec.UnsupportedError, match="writes in place"):
        fn(torch.empty(5, 3), x)
    with torch.no_grad():
        out = torch.empty(5, 3)
        assert fn(out, x) is out and torch.equal(out, x.t())


# -- the builder --------------------------------------------------------------------------
def test_builder_copy_returns_the_written_view_and_its_root():
    g = stridec.Graph("window")
    cache = g.input("cache", (2, 8), "float32")
    k = g.input("k", (2, 3), "float32")
    layout = cache[:, 2:5].type.layout
    window = cache[:, 2:5].copy_(k)
    assert window.shape == (2, 3) and window.type.layout == layout
    g.output(window.root())
    text = str(g)
    assert "write %cache" in text and str(stridec.parse(text)) == text
    fn = stridec.compile(g, backend=BACKENDS[-1])
    c, kk = torch.zeros(2, 8), torch.randn(2, 3)
    assert fn(c, kk) is c and torch.equal(c[:, 2:5], kk) and c._version == 1


def test_builder_refuses_reading_memory_after_a_write_over_it():
    g = stridec.Graph("stale")
    x = g.input("x", (3,), "float32")
    x.fill_(1.0)
    g.output(x.flip(0))  # x is the memory before the fill
    with pytest.raises(stridec.VerificationError, match="wrote over in place"):
        g.verify()
    h = stridec.Graph("setitem")
    y = h.input("y", (3,), "float32")
    with pytest.raises(stridec.VerificationError, match=r"copy_\(y\)"):
        y[0] = 1.0


# -- as a torch operator ------------------------------------------------------------------
def test_operator_declares_its_writes_and_passes_opcheck():
    def write(cache, x):
        cache[:, 2:5] = x
        return cache[:, :5].t()

    cache, x = torch.zeros(3, 8), torch.randn(3, 3)
    op = stridec.compile(stridec.trace(write, cache, x)).as_torch_op("stridec_test_inplace::kv")
    assert "Tensor(a0!) cache" in str(op.overload._schema)
    assert "Tensor(b0!) cache" in str(op.out_overload._schema)
    ours, theirs = cache.clone(), cache.clone()
    got, want = op(ours, x), write(theirs, x)
    assert torch.equal(ours, theirs) and torch.equal(got, want)
    assert got.untyped_storage().data_ptr() != ours.untyped_storage().data_ptr()  # contract
    assert ours._version == 1
    result = torch.library.opcheck(op.overload, (cache.clone(), x))
    assert all(v == "SUCCESS" for v in result.values()), result
    compiled = torch.compile(lambda c, t: op(c, t) * 2, fullgraph=True, backend="aot_eager")
    ours, theirs = cache.clone(), cache.clone()
    assert torch.equal(compiled(ours, x), write(theirs, x) * 2)
    assert torch.equal(ours, theirs)
    with pytest.raises(stridec.UnsupportedError, match="writes in place"):
        op(cache.clone(), x.clone().requires_grad_())


# -- arguments that share memory ----------------------------------------------------------
def reverse_into(a, b):
    a.copy_(b.flip(0))
    return a


def shift_window(cache, new):
    cache[:, :3] = new.flip(1)
    return cache


@pytest.mark.parametrize("fn,make", [
    (reverse_into, lambda: (lambda x: (x, x))(torch.arange(6.0))),
    (shift_window, lambda: (lambda c: (c, c[:, 1:]))(torch.arange(12.0).view(3, 4))),
], ids=["same-tensor", "a-view-of-it"])
def test_arguments_sharing_memory_with_a_written_one_run_as_torch(fn, make):
    """torch's ops run in order: `b.flip(0)` is a copy made before the write. The kernels
    would read memory the write changes under them; such a call runs as torch's ops do,
    after a cached call on separate tensors too."""
    separate = [t.clone() for t in make()]
    graph = stridec.trace(fn, *separate)
    for backend in BACKENDS:
        compiled = stridec.compile(graph, backend=backend)
        compiled(*[t.clone() for t in separate])  # a cached call of separate tensors
        for _ in range(2):
            ours, theirs = make(), make()
            got, want = compiled(*ours), fn(*theirs)
            assert torch.equal(got, want) and got is ours[0], backend
            assert torch.equal(ours[0], theirs[0]) and ours[0]._version == theirs[0]._version


def test_arguments_sharing_memory_torch_refuses_are_refused():
    def shift(a, b):
        a[1:] = b[:-1]
        return a

    graph = stridec.trace(shift, torch.zeros(6), torch.zeros(6))
    x = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        shift(x, x)
    for backend in BACKENDS:
        fn = stridec.compile(graph, backend=backend)
        fn(torch.zeros(6), torch.ones(6))
        x = torch.arange(6.0)
        with pytest.raises(stridec.CallError, match="arguments 'a', 'b' share memory.*single "
                                                    "memory location"):
            fn(x, x)
