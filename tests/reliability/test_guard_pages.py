"""Inputs and outputs against guard pages: each tensor's storage is placed so that the byte
just past its end (or just before its start) lies on a `PROT_NONE` page, and, for
element-misaligned data pointers, so that its address is 1 ... size - 1 bytes off its
element size (and 4 bytes off 8: float32 and int32 aligned to their elements but not to
8 bytes, staged too: a copy of runs of 8 bytes moves them as 8-byte elements). A kernel
that reads or writes one byte outside a storage faults; a kernel that assumed aligned
elements would write rotated bytes (a streamed fill's pattern) or fault on an aligned
vector access. Every copy
strategy (linear rows, tiled transposes of 1/2/4/8-byte elements, gathers, batched cats),
fills (pad, pack, full; masked rows, transposes, interleaves and flips of the planned
library), casts (plain, transposing, from bool, through the lane kernels, flips and
gathers) and Philox (bits, uniform, the state updated in place), streamed and not, on one
and three threads, against torch.
A misaligned tensor is staged through an aligned copy
(`stridec.runtime.tensors.AlignedStandIns`): the results are torch's and the bytes around
each out are untouched.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec
from stridec.ir.builder import full_like
from stridec.runtime.backends import cpu

pytestmark = [pytest.mark.skipif(not cpu.available(), reason="needs a C compiler"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
PAGE = mmap.PAGESIZE
_MAPS: list[mmap.mmap] = []  # kept mapped for the process: tensors point into them


def guarded_storage(nbytes: int, where: str, shift: int = 0) -> torch.Tensor:
    """`nbytes` bytes (a uint8 tensor; its storage exactly these bytes) between PROT_NONE
    pages: ending at the next page (`where="end"`; its start `shift` bytes past a multiple
    of 8 when the length allows it) or starting at the end of the previous one
    (`where="start"`)."""
    inner = -(-(nbytes + 8) // PAGE) * PAGE
    m = mmap.mmap(-1, inner + 2 * PAGE)
    _MAPS.append(m)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    for at in (base, base + PAGE + inner):
        if _libc.mprotect(at, PAGE, 0) != 0:  # PROT_NONE
            raise OSError(ctypes.get_errno(), "mprotect")
    start = PAGE + (inner - nbytes if where == "end" else 0)
    assert where == "start" or (base + start) % 8 == shift % 8
    return torch.frombuffer(m, dtype=torch.uint8, count=nbytes, offset=start)


def placed(sizes: tuple[int, ...], dtype: torch.dtype, where: str, shift: int = 0,
           values: torch.Tensor | None = None) -> torch.Tensor:
    """A contiguous tensor of `sizes` whose storage touches a guard page at `where`, its
    data pointer `shift` bytes off a multiple of 8 (a storage ending at the guard is
    then `shift` bytes longer than its elements: the last element ends before the
    guard, closer than one element), holding `values` where given."""
    es = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for n in sizes:
        numel *= n
    # Ending at the guard, the storage starts `shift` past a multiple of 8.
    tail = (-shift - numel * es) % 8 if where == "end" else 0
    raw = guarded_storage(numel * es + tail, where, shift)
    t = torch.empty(0, dtype=dtype).set_(raw.untyped_storage(), 0, sizes)
    if values is not None:
        t.copy_(values)
    return t


PLACES = [("start", 0), ("end", 0), ("end", 1), ("end", 2), ("end", 3), ("end", 4), ("end", 5)]


def _ids(place: tuple[str, int]) -> str:
    return f"{place[0]}{'+' + str(place[1]) if place[1] else ''}"


def _graph(name: str, sizes: tuple[int, ...], dtype: str,
           build: Callable[[Any], Any]) -> stridec.Graph:
    g = stridec.Graph(name)
    outs = build(g.input("x", sizes, dtype))
    g.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return g


# name: (input sizes, dtype, the graph's function of x, torch's) -- one output each
CASES: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "linear": ((37, 130), "float32", lambda x: x[:, 3:].contiguous()),
    "transpose_1": ((70, 130), "int8", lambda x: x.t().contiguous()),
    "transpose_2": ((70, 130), "float16", lambda x: x.t().contiguous()),
    "transpose_4": ((70, 130), "float32", lambda x: x.t().contiguous()),
    "transpose_8": ((70, 66), "float64", lambda x: x.t().contiguous()),
    "nhwc": ((2, 19, 9, 33), "float16", lambda x: x.permute(0, 2, 3, 1).contiguous()),
    "gather": ((40, 66), "int32", lambda x: x[::2, ::3].t().contiguous()),
    "pad": ((20, 64), "float32", lambda x: stridec.pad(x, (3, 300, 1, 2), value=1.5)),
    "pack": ((2, 5, 9, 31), "float32", lambda x: x.pack("NCHW4", fill=-2.5)),
    "pack_c3": ((2, 3, 9, 31), "int16", lambda x: x.pack("NCHW32", fill=3)),
    # masked transposes (a mixed block staged with the fill), flips and fills of the
    # planned library
    "pad_transpose": ((70, 130), "float32",
                      lambda x: stridec.pad(x.t(), (5, 40, 17, 3), value=-1.0)),
    "pad_flip": ((20, 130), "float64", lambda x: stridec.pad(x.flip(1), (9, 70), value=2.0)),
    "full": ((37, 130), "int16", lambda x: full_like(x, 7)),
    "cast": ((37, 130), "float32", lambda x: x.to("float16")),
    "cast_transpose": ((70, 130), "float32", lambda x: x.t().to("bfloat16").contiguous()),
    "cast_int": ((37, 130), "int8", lambda x: x.to("float64")),
    # casts through the planned library's lane kernels, flips and gathers
    "cast_deinterleave": ((2, 9, 31, 3), "int8",
                          lambda x: x.permute(0, 3, 1, 2).to("float32").contiguous()),
    "cast_interleave": ((2, 3, 9, 31), "float32",
                        lambda x: x.permute(0, 2, 3, 1).to("float16").contiguous()),
    "cast_flip": ((37, 130), "float32", lambda x: x.flip(1).to("float16").contiguous()),
    "cast_slice": ((37, 130), "float16", lambda x: x[:, ::2].to("float32").contiguous()),
    "cast_gather": ((40, 66), "int16", lambda x: x[::2, ::3].t().to("float64").contiguous()),
    "cat": ((20, 64), "float32", lambda x: stridec.cat([x, x.flip(0), x[:, ::2]], 1)),
}


def _torch(name: str, x: torch.Tensor) -> torch.Tensor:
    """torch's result of case `name`."""
    f = torch.nn.functional
    return {
        "linear": lambda: x[:, 3:].contiguous(),
        "transpose_1": lambda: x.t().contiguous(),
        "transpose_2": lambda: x.t().contiguous(),
        "transpose_4": lambda: x.t().contiguous(),
        "transpose_8": lambda: x.t().contiguous(),
        "nhwc": lambda: x.permute(0, 2, 3, 1).contiguous(),
        "gather": lambda: x[::2, ::3].t().contiguous(),
        "pad": lambda: f.pad(x, (3, 300, 1, 2), value=1.5),
        "pack": lambda: f.pad(x, (0, 0, 0, 0, 0, 3), value=-2.5).reshape(2, 2, 4, 9, 31)
        .permute(0, 1, 3, 4, 2).contiguous(),
        "pack_c3": lambda: f.pad(x, (0, 0, 0, 0, 0, 29), value=3).reshape(2, 1, 32, 9, 31)
        .permute(0, 1, 3, 4, 2).contiguous(),
        "pad_transpose": lambda: f.pad(x.t(), (5, 40, 17, 3), value=-1.0),
        "pad_flip": lambda: f.pad(x.flip(1), (9, 70), value=2.0),
        "full": lambda: torch.full_like(x, 7),
        "cast": lambda: x.half(),
        "cast_transpose": lambda: x.t().bfloat16().contiguous(),
        "cast_int": lambda: x.double(),
        "cast_deinterleave": lambda: x.permute(0, 3, 1, 2).float().contiguous(),
        "cast_interleave": lambda: x.permute(0, 2, 3, 1).half().contiguous(),
        "cast_flip": lambda: x.flip(1).half(),
        "cast_slice": lambda: x[:, ::2].float().contiguous(),
        "cast_gather": lambda: x[::2, ::3].t().double().contiguous(),
        "cat": lambda: torch.cat([x, x.flip(0), x[:, ::2]], 1),
    }[name]()


def _values(sizes: tuple[int, ...], dtype: str) -> torch.Tensor:
    t = stridec.as_dtype(dtype).torch
    x = torch.arange(1, 1 + torch.Size(sizes).numel(), dtype=torch.float64).reshape(sizes)
    return (x % 113 - 50).to(t) if not t.is_floating_point else (x * 0.25 - 7).to(t)


@pytest.fixture(params=[(1, False), (3, True)], ids=["1-thread", "3-threads-streamed"])
def threads_and_streaming(request: pytest.FixtureRequest) -> Any:
    threads, stream = request.param
    saved = torch.get_num_threads()
    previous = cpu.set_stream_threshold(0 if stream else -1)
    torch.set_num_threads(threads)
    yield
    torch.set_num_threads(saved)
    cpu.set_stream_threshold(previous)


@pytest.mark.parametrize("place", PLACES, ids=_ids)
@pytest.mark.parametrize("name", sorted(CASES))
def test_inputs_and_outs_against_guard_pages(name: str, place: tuple[str, int],
                                             threads_and_streaming: Any) -> None:
    sizes, dtype, build = CASES[name]
    fn = stridec.compile(_graph(name, sizes, dtype, build), backend="cpu")
    values = _values(sizes, dtype)
    want = _torch(name, values)
    where, shift = place
    x = placed(sizes, values.dtype, where, shift, values)
    got = fn(x)
    assert torch.equal(got, want), f"{name}: input at {place}"
    assert torch.equal(x, values), f"{name}: the input changed"
    out = placed(tuple(want.shape), want.dtype, where, shift)
    around = out.untyped_storage().nbytes() - out.numel() * out.element_size()
    assert fn(x, out=out) is out and torch.equal(out, want), f"{name}: out at {place}"
    if around:  # the tail between the last element and the guard is left as it was
        tail = torch.empty(0, dtype=torch.uint8).set_(out.untyped_storage())[-around:]
        assert bool((tail == 0).all())
    assert torch.equal(fn(x, out=out), want)  # a cached call: the same


@pytest.mark.parametrize("place", PLACES, ids=_ids)
def test_philox_against_guard_pages(place: tuple[str, int], threads_and_streaming: Any) -> None:
    g = stridec.Graph("rng_guard")
    s = g.input("state", (6,), "uint32")
    bits, new_state = g.philox(s, (37, 65))
    uniform, _ = g.philox_uniform(s, (33, 7), "float16")
    g.output(bits.t().contiguous(), uniform, new_state)
    fn = stridec.compile(g, backend="cpu")
    start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
    want = fn(start.clone())
    where, shift = place
    state = placed((6,), torch.uint32, where, shift, start)
    got = fn(state)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    outs = tuple(placed(tuple(w.shape), w.dtype, where, shift) for w in want[:2])
    fn(state, out=(*outs, state))  # the state updated in place
    assert all(torch.equal(a, b) for a, b in zip(outs, want[:2], strict=True))
    assert torch.equal(state, want[2])


def test_a_program_run_directly_stages_misaligned_tensors() -> None:
    """`stridec.runtime.launch.run` on the cpu backend (a program run without its
    CompiledGraph) stages a misaligned input as a compiled call does."""
    from stridec.runtime import launch

    sizes, dtype, build = CASES["cast_transpose"]
    fn = stridec.compile(_graph("cast_transpose", sizes, dtype, build), backend="cpu")
    values = _values(sizes, dtype)
    x = placed(sizes, values.dtype, "end", 1, values)
    program = fn.plan_for(x).program
    (got,) = launch.run(program, [x], torch.device("cpu"), "cpu")
    assert torch.equal(got, _torch("cast_transpose", values))


def test_misaligned_inputs_under_autograd_and_the_torch_operator() -> None:
    """A misaligned input that requires grad (the adjoint's kernels run on stand-ins
    too), and through the torch operator, give torch's values and gradients."""
    g = _graph("pad_grad", (20, 64), "float32",
               lambda x: stridec.pad(x, (3, 300, 1, 2), value=1.5))
    fn = stridec.compile(g, backend="cpu")
    values = _values((20, 64), "float32")
    x = placed((20, 64), torch.float32, "end", 1, values).requires_grad_()
    y = fn(x)
    assert torch.equal(y.detach(), _torch("pad", values))
    weights = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape)
    (y * weights).sum().backward()
    reference = values.clone().requires_grad_()
    (torch.nn.functional.pad(reference, (3, 300, 1, 2), value=1.5) * weights).sum().backward()
    assert torch.equal(x.grad, reference.grad)
    op = fn.as_torch_op("stridec_test::pad_misaligned")
    assert torch.equal(op(x.detach()), _torch("pad", values))


def _interleave(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x[..., ::2] = a
    x[..., 1::2] = b
    return x


def _kv_write(cache: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    cache[:, 3:8] = x
    return cache[:, :8].transpose(0, 1)


@pytest.mark.parametrize("fn", [_interleave, _kv_write], ids=["interleave", "kv_write"])
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_in_place_writes_into_misaligned_arguments(fn: Callable[..., Any], shift: int,
                                                   threads_and_streaming: Any) -> None:
    """A graph writing in place into its argument, the argument misaligned: the
    argument's bytes afterwards, the result (the argument itself, or a view of it) and
    the version counter are torch's."""
    example = ((torch.zeros(6, 64), torch.randn(6, 32), torch.randn(6, 32))
               if fn is _interleave else (torch.randn(4, 16, 8), torch.randn(4, 5, 8)))
    compiled = stridec.compile(stridec.trace(fn, *example), backend="cpu")
    for _ in range(2):  # the second call as the first: such calls are never cached
        theirs = [t.clone() for t in example]
        want = fn(*theirs)
        first = placed(tuple(example[0].shape), torch.float32, "end", shift, example[0])
        ours = [first, *(t.clone() for t in example[1:])]
        before = first._version
        got = compiled(*ours)
        assert torch.equal(first, theirs[0]), "the argument afterwards"
        assert torch.equal(got, want) and got.stride() == want.stride()
        assert (got is first) == (want is theirs[0])
        assert got.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        assert first._version - before == theirs[0]._version
