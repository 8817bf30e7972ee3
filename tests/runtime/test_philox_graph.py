"""Philox through the whole stack: builder → passes (fusion into layouts) → kernels, against
the numpy reference executor, bit for bit."""

from __future__ import annotations

import pytest
import torch

import stridec
from stridec.runtime.backends.interpret import interpreter_fma_is_exact
from stridec.runtime.backends.reference_philox import make_state

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _state(counter: int, key: int, dtype: torch.dtype = torch.uint32) -> torch.Tensor:
    words = torch.from_numpy(make_state(counter, key).astype("uint32").reshape(-1))
    return words.view(dtype) if dtype != torch.uint32 else words


def _check(g: stridec.Graph, *inputs: torch.Tensor, kernels: int | None = None) -> None:
    """Each kernel backend of the inputs' device (on the CPU: the native `cpu` one and
    the interpreter) against the reference."""
    expected = stridec.run_reference(g, *[t.cpu() for t in inputs])
    cuda = bool(inputs) and inputs[0].is_cuda
    for backend in ("triton",) if cuda else ("cpu", "interpret"):
        fn = stridec.compile(g, backend=backend)
        got = fn(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        for e, o in zip(expected, got, strict=True):
            assert o.shape == e.shape and o.dtype == e.dtype
            assert torch.equal(o.cpu().view(torch.int32) if o.dtype == torch.uint32 else o.cpu(),
                               e.view(torch.int32) if e.dtype == torch.uint32 else e), backend
        if kernels is not None:
            assert len(fn.plan_for(*inputs).kernels) == kernels


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("counter", [0, 2**32 - 3, 2**64 - 2, 2**96 - 1, 2**128 - 5])
def test_bits_and_state_match_reference(device: str, counter: int) -> None:
    g = stridec.Graph("bits")
    s = g.input("s", (6,), "uint32")
    bits, new_state = g.philox(s, (3, 7))
    g.output(bits, new_state)
    _check(g, _state(counter, 0x1234_5678_9ABC_DEF0).to(device), kernels=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["NCHW4", "NHWC", "CHWN4", "NCHW32"])
def test_bits_packed_in_one_kernel(device: str, fmt: str) -> None:
    # pack(philox) is folded into the generator: one kernel writes the packed layout,
    # padded channels (C = 3) get the fill value.
    g = stridec.Graph("packed")
    s = g.input("s", (1, 1, 1, 6), "int32")
    bits, new_state = g.philox(s, (2, 3, 4, 5))
    g.output(bits.pack(fmt), new_state)
    state = _state(99, 7, torch.int32).reshape(1, 1, 1, 6).to(device)
    _check(g, state, kernels=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_uniform_transposed_and_sliced(device: str, dtype: str) -> None:
    if device == "cpu" and dtype == "float32" and not interpreter_fma_is_exact():
        pytest.skip("this Triton's interpreter rounds tl.fma twice (Triton < 3.9)")
    g = stridec.Graph("uniform")
    s = g.input("s", (6,), "uint32")
    values, new_state = g.philox_uniform(s, (6, 9), dtype, -2.0, 3.0)
    g.output(values.t().contiguous(), values[1::2, ::3].contiguous(), new_state)
    _check(g, _state(5, 11).to(device))


@pytest.mark.parametrize("device", DEVICES)
def test_chained_calls_equal_one_call(device: str) -> None:
    # 12 elements use 3 whole counters, so the second call continues exactly where one
    # call of 12 + 8 elements would.
    g = stridec.Graph("two")
    s = g.input("s", (6,), "uint32")
    a, s1 = g.philox(s, (3, 4))
    b, s2 = g.philox(s1, (8,))
    g.output(a, b, s2)
    h = stridec.Graph("one")
    t = h.input("s", (6,), "uint32")
    ab, t2 = h.philox(t, (20,))
    h.output(ab, t2)
    state = _state(2**64 - 2, 3).to(device)
    a_out, b_out, s2_out = stridec.compile(g)(state)
    ab_out, t2_out = stridec.compile(h)(state)
    joined = torch.cat([a_out.reshape(-1).view(torch.int32), b_out.view(torch.int32)])
    assert torch.equal(joined, ab_out.view(torch.int32))
    assert torch.equal(s2_out.view(torch.int32), t2_out.view(torch.int32))


@pytest.mark.parametrize("sizes", [(), (0,), (3, 0, 2), (5,), (1, 1, 1, 1, 1, 1, 1, 3)])
def test_rank_and_empty_sizes(sizes: tuple[int, ...]) -> None:
    g = stridec.Graph("sizes")
    s = g.input("s", (6,), "uint32")
    bits, new_state = g.philox(s, sizes)
    g.output(bits, new_state)
    _check(g, _state(2**32 - 1, 1))


def test_bad_state_at_build_and_call() -> None:
    g = stridec.Graph("bad")
    with pytest.raises(stridec.VerificationError, match="state"):
        g.philox(g.input("f", (6,), "float32"), (4,))
    with pytest.raises(stridec.VerificationError, match="state"):
        g.philox(g.input("short", (5,), "uint32"), (4,))
    h = stridec.Graph("ok")
    s = h.input("s", (6,), "uint32")
    h.output(*h.philox(s, (4,)))
    fn = stridec.compile(h)
    with pytest.raises(stridec.CallError, match="'s'"):
        fn(torch.zeros(6, dtype=torch.float32))
    with pytest.raises(stridec.CallError, match="'s'"):
        fn(torch.zeros(5, dtype=torch.uint32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,digits", [("float16", 11), ("bfloat16", 8), ("float32", 24)])
def test_uniform_is_below_one_in_every_dtype(device: str, dtype: str, digits: int) -> None:
    if device == "cpu" and dtype == "float32" and not interpreter_fma_is_exact():
        pytest.skip("this Triton's interpreter rounds tl.fma twice (Triton < 3.9)")
    # 2^16 values: rounding 24 bits of u to bfloat16 would give about 120 values of 1.0.
    # Each value is the top `digits` of its word times 2^-digits, as torch's rand takes
    # its type's digits, on every backend (the words from the `philox` op alongside).
    g = stridec.Graph("unit")
    s = g.input("s", (6,), "uint32")
    u, _ = g.philox_uniform(s, (256, 256), dtype)
    bits, _ = g.philox(s, (256, 256))
    g.output(u, bits)
    state = _state(2**32 - 7, 0xDEAD_BEEF).to(device)
    _check(g, state)
    got, words = stridec.compile(g)(state)
    top = (words.cpu().view(torch.int32).to(torch.int64) & 0xFFFFFFFF) >> (32 - digits)
    want = (top.to(torch.float64) * 2.0**-digits).to(getattr(torch, dtype))
    assert torch.equal(got.cpu(), want)
    assert float(got.max()) < 1 and float(got.min()) >= 0
    if digits < 24:  # reached: the value 24 bits would have rounded to 1.0
        assert float(got.max()) == 1 - 2.0**-digits
