"""The cpu backend's builtin call functions (`runtime/backends/calls.c`, loaded by
`backends.cpu.calls_module`): a cached call's key read by them is the key
`call_path.out_call_key` / `plain_call_key` read in Python, for every kind of argument;
the kernels they run give what torch gives, with the builtins and without them (ctypes);
and malformed arguments raise instead of touching memory."""

from __future__ import annotations

import os

import pytest
import torch

import stridec
from stridec.runtime import call_path
from stridec.runtime.backends import cpu

pytestmark = pytest.mark.skipif(not cpu.available(), reason="needs a C compiler")


@pytest.fixture(scope="module")
def calls():
    module = cpu.calls_module()
    if module is None:
        pytest.skip("no Python headers to build the builtin calls with")
    return module


def _misaligned() -> torch.Tensor:
    """A float32 tensor whose storage starts 4 bytes past an 8-byte boundary."""
    raw = bytearray(64)
    view = torch.frombuffer(raw, dtype=torch.uint8)
    shift = (-view.data_ptr()) % 8 + 4
    return torch.frombuffer(raw, dtype=torch.float32, offset=shift, count=8)


def _arguments() -> list[tuple[tuple, object]]:
    base = torch.randn(6, 8)
    z = torch.complex(torch.randn(2, 3), torch.randn(2, 3))
    shrunk = torch.randn(12)
    view = shrunk[4:10]
    shrunk.untyped_storage().resize_(32)
    grad = torch.randn(3, requires_grad=True)
    out = torch.empty(8, 6)
    return [
        ((base,), None), ((base.t(),), out), ((base[1:, ::2],), (out, out[:2])),
        ((base, base[2:]), None), ((base, base), (base,)), ((z.conj().imag,), None),
        ((z.imag,), z.conj()), ((view,), None), ((grad,), None), ((grad,), out),
        ((base,), ()), ((base,), [out]), ((base,), 3), ((base, 1.5), None),
        ((torch.randn(2).to_sparse(),), None), ((torch.nn.Parameter(torch.randn(2)),), None),
        ((_misaligned(),), None), ((base,), _misaligned()), ((), None), ((), out),
        ((torch.empty(0),), torch.empty(0, 3)), ((torch.randn(4)[::2],), torch.empty(2)),
        ((torch.zeros(2, 3, dtype=torch.bool).expand(4, 2, 3),), None),
    ]


@pytest.fixture
def getters(calls):
    """The builtin keys read through torch's getters (the TensorImpl reader off where it
    is on: `STRIDEC_TENSOR_FIELDS=1`), for one test."""
    on = list(cpu.fields_on)
    if on:
        calls.fields(0, None, 0, torch._C._increment_version)
    yield calls
    if on:
        calls.fields(*on[0])


@pytest.mark.parametrize("case", range(len(_arguments())))
def test_builtin_keys_are_the_python_keys(getters, case):
    tensors, out = _arguments()[case]
    if out is None:
        assert getters.plain_key(tensors) == call_path.plain_call_key(tensors)
    else:
        assert getters.out_key(tensors, out) == call_path.out_call_key(tensors, out)


def test_cached_calls_read_the_builtin_keys(calls):
    assert call_path.read_out_key is calls.out_key
    assert call_path.read_plain_key is calls.plain_key


def _graphs() -> list[tuple[stridec.CompiledGraph, list[torch.Tensor], torch.Tensor]]:
    g = stridec.Graph("builtin_transpose")
    x = g.input("x", (40, 24), "float32")
    g.output(x.t().contiguous())
    xt = torch.randn(40, 24)
    at, bt = torch.randn(3, 7, 16).half(), torch.randn(3, 1, 16).half()
    return [(stridec.compile(g), [xt], xt.t().contiguous()),
            (stridec.compile(stridec.trace(lambda p, q: torch.cat([p, q], 1), at, bt)),
             [at, bt], torch.cat([at, bt], 1))]


@pytest.mark.parametrize("builtin", [True, False])
def test_kernel_calls_with_and_without_the_builtins(calls, monkeypatch, builtin):
    if not builtin:  # the ctypes calls and the Python keys
        monkeypatch.setattr(cpu, "_calls", [None])
        monkeypatch.setattr(call_path, "read_out_key", call_path.out_call_key)
        monkeypatch.setattr(call_path, "read_plain_key", call_path.plain_call_key)
    ran = set()
    for fn, inputs, want in _graphs():
        out = torch.empty_like(want)
        for _ in range(3):  # the first call compiles; the others hit the cache
            assert torch.equal(fn(*inputs), want)
            out.zero_()
            assert fn(*inputs, out=out) is out
            assert torch.equal(out, want)
        hit = next(v for k, v in fn._hits.data.items() if k[0] == "out")
        runs = getattr(hit.bound, "func", None)
        assert (runs in (calls.run, calls.batch)) == builtin
        ran.add(runs)
    assert ran == ({calls.run, calls.batch} if builtin else {None})  # a copy, a batch


def test_malformed_arguments_raise(calls):
    src, dst = torch.randn(4), torch.empty(4)
    pointers = [src.data_ptr(), dst.data_ptr()]
    with pytest.raises(TypeError):
        calls.run(b"", (1, 2), 1)
    with pytest.raises(ValueError, match="whole records"):
        calls.run(b"\0" * 24, pointers, 1)
    with pytest.raises(IndexError, match="slot 5"):
        calls.run(bytes(torch.tensor([0, 0, 5, 0]).numpy()), pointers, 1)
    with pytest.raises(IndexError, match="slot -1"):
        calls.run(bytes(torch.tensor([0, -1, 0, 0]).numpy()), pointers, 1)
    with pytest.raises(ValueError, match="malformed batch"):
        calls.batch(b"\0" * 8, pointers, 1)
    with pytest.raises(ValueError, match="malformed batch"):  # n = 1, but no call follows
        calls.batch(bytes(torch.tensor([0, 1, 0, 0, 64]).numpy()), pointers, 1)
    with pytest.raises(ValueError, match="malformed batch"):  # a job past the jobs' bytes
        calls.batch(bytes(torch.tensor([0, 1, 0, 0, 64, 0, 1, 0, 128]).numpy()), pointers, 1)
    with pytest.raises(IndexError):
        calls.batch(bytes(torch.tensor([0, 1, 0, 0, 64, 0, 9, 0, 0]).numpy()), pointers, 1)
    with pytest.raises(TypeError):
        calls.out_key([src], None)
    with pytest.raises(TypeError):
        calls.plain_key(src)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "symbolic"])
def test_large_fresh_buffers_ask_for_huge_pages(calls, monkeypatch, dynamic):
    """A plain call's fresh output of at least HUGE_PAGE_BYTES is advised before the kernel
    writes it (its address and bytes), a smaller one is not; the values are torch's. The
    same over symbolic sizes, where the buffer's size is known only at the call."""
    advised: list[tuple[int, int]] = []

    def spy(huge, nbytes: int, address: int) -> None:
        advised.append((address, nbytes))
        huge(address, nbytes)

    monkeypatch.setattr(cpu, "_advise", spy)
    monkeypatch.setattr(cpu, "HUGE_PAGE_BYTES", 1 << 20)
    for sizes, expected in (((512, 600), True), ((64, 60), False)):
        advised.clear()
        t = torch.randn(*sizes)
        fn = stridec.compile(stridec.trace(lambda x: x.t().contiguous(), t, dynamic=dynamic))
        for _ in range(2):
            got = fn(t)
            assert torch.equal(got, t.t())
        want = [(got.untyped_storage().data_ptr(), got.untyped_storage().nbytes())]
        assert (advised[-1:] == want) == expected and bool(advised) == expected


def test_huge_takes_any_range(calls):
    buffer = torch.empty(5 << 20, dtype=torch.uint8)
    for address, nbytes in ((buffer.data_ptr(), buffer.numel()), (buffer.data_ptr() + 3, 100),
                            (0, 0), (buffer.data_ptr(), -1)):
        calls.huge(address, nbytes)  # a hint over whole pages inside the range: no error
    with pytest.raises(TypeError):
        calls.huge(buffer.data_ptr())


@pytest.fixture
def fields(calls, monkeypatch):
    """The builtin keys read from the tensors' TensorImpls (`cpu._load_fields`, a C++ build
    against torch's headers: the long tail), for one test; the getters' keys after it
    where the run read those before."""
    if not os.path.exists(os.path.join(os.path.dirname(torch.__file__), "include", "c10")):
        pytest.skip("no torch C++ headers")
    was = list(cpu.fields_on)
    if not was:
        monkeypatch.setenv("STRIDEC_TENSOR_FIELDS", "1")
        assert cpu._load_fields(calls)
    yield calls
    if not was:
        calls.fields(0, None, 0, torch._C._increment_version)
        cpu.fields_on.clear()


def _more_arguments() -> list[tuple[tuple, object]]:
    """Tensors the TensorImpl reader leaves to the getters, or reads from odd places."""
    shared = torch.randn(4, 5)
    with torch.inference_mode():
        inference = torch.randn(3, 2)
    return [
        ((torch._lazy_clone(shared),), None),  # copy-on-write: the getters materialize it
        ((inference,), torch.empty(2, 3)), ((torch.empty(2, 3, device="meta"),), None),
        ((torch.randn(1, 2, 3, 4).contiguous(memory_format=torch.channels_last),), None),
        ((torch.randn(5).expand(3, 5)[:, 1:],), torch.empty(3, 4, dtype=torch.float64)),
        ((torch.ones(3, dtype=torch.complex64).conj(),), None), ((torch.tensor(True),), None),
    ]


def test_keys_read_from_the_tensor_fields_tell_calls_apart_as_the_getters(fields):
    """The same calls with the same keys (a bytes object of the fields) as the getters'
    keys, the same pointers, None for the same calls; a call of a plain CPU tensor gets
    the fields' key, and another size, stride, offset, dtype, bit or storage another."""
    cases = _arguments() + _more_arguments()
    x = torch.randn(4, 6)
    for other in (x[:, :5], x[:, 1:], x.t(), x.double(), x.view(torch.int32), x._neg_view(),
                  x.detach().requires_grad_(), torch.randn(5, 6)[:4]):
        cases += [((x,), None), ((other,), None), ((x,), x.clone()), ((x,), other.clone())]
    keys = [fields.plain_key(t) if out is None else fields.out_key(t, out) for t, out in cases]
    python = [call_path.plain_call_key(t) if out is None else call_path.out_call_key(t, out)
              for t, out in cases]
    assert cpu.same_calls(keys, python)
    assert type(fields.plain_key((x,))[0]) is bytes
    assert fields.out_key((x,), x)[0][0] == "out"
    assert len({k[0] for k in keys[-31::4]} | {keys[-32][0]}) == 9  # x and each other


def test_versions_bumped_through_the_tensor_fields(fields):
    assert call_path.bump_versions is fields.bump
    x = torch.randn(4, 3)
    view, grad = x[1:], torch.randn(2, requires_grad=True)
    with torch.inference_mode():
        inference = torch.ones(2)
    fields.bump((view, grad, inference, torch.nn.Parameter(torch.ones(1))))
    assert (x._version, view._version, grad._version) == (1, 1, 1)
    with pytest.raises(RuntimeError, match="tensor"):
        fields.bump((x, 1))
    assert x._version == 2  # (torch's answer too: the items before a refused one bumped)


def test_cached_calls_on_keys_from_the_tensor_fields(fields):
    for fn, inputs, want in _graphs():
        out = torch.empty_like(want)
        for _ in range(3):
            assert torch.equal(fn(*inputs), want)
            out.zero_()
            version = out._version
            assert fn(*inputs, out=out) is out
            assert torch.equal(out, want) and out._version > version
        assert fn.stats.cache_hits >= 4
