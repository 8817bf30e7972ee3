"""Tensors of every kind torch has, as inputs and as `out=`: none crashes the process and
none lets a raw torch exception escape.

- `FakeTensor`s under their `FakeTensorMode`: fake results with the metadata the call
  gives real tensors (sizes, strides, offset, dtype, device, and views of inputs exactly
  where the real call returns views); `out=` returns the outs, versions bumped, nothing
  written. Outside the mode: `CallError` naming the argument (before, the C kernel read
  the fake's null data pointer: SIGSEGV).
- Tensors without memory a kernel can address -- meta, sparse, nested, quantized,
  mkldnn, wrapper subclasses (`TwoTensor`), a storage resized to 0 -- `CallError`
  naming the argument; a plain subclass holds real memory and runs.
- Other dispatch modes (a user's `TorchDispatchMode`): the call runs as without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import TorchDispatchMode

import stridec
from stridec.errors import CallError, StridecError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BACKENDS = ["cpu", "interpret", "reference"]


def graphs() -> dict[str, tuple[stridec.Graph, Callable[[], tuple[torch.Tensor, ...]]]]:
    """Graphs and their arguments: copies, views of the input, several outputs, a cast,
    a cat, Philox."""
    found = {}
    g = stridec.Graph("copy_and_view")
    x = g.input("x", (3, 4), "float32")
    g.output(x.t().contiguous(), x.t(), x[1:, ::2], x.to("float16"))
    found["copy_and_view"] = (g, lambda: (torch.randn(3, 4),))
    g = stridec.Graph("cat_pack")
    a = g.input("a", (2, 3, 4, 5), "float16")
    b = g.input("b", (2, 3, 4, 5), "float16")
    g.output(stridec.cat([a, b], 1), a.pack("NCHW4"), b.permute(0, 2, 3, 1).contiguous())
    found["cat_pack"] = (g, lambda: (torch.randn(2, 3, 4, 5).half(),
                                     torch.randn(2, 5, 4, 3).half().permute(0, 3, 2, 1)))
    g = stridec.Graph("rng")
    s = g.input("state", (6,), "uint32")
    g.output(*g.philox(s, (5, 7)))
    found["rng"] = (g, lambda: (torch.zeros(6, dtype=torch.uint32),))
    return found


def metadata(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device,
            t.untyped_storage().nbytes())


def shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors (real or fake) have one storage."""
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def as_tuple(r: Any) -> tuple:
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["copy_and_view", "cat_pack", "rng"])
def test_fake_results_have_the_real_calls_metadata(backend: str, name: str) -> None:
    g, make = graphs()[name]
    fn = stridec.compile(g, backend=backend)
    args = make()
    real = as_tuple(fn(*args))
    mode = FakeTensorMode()
    fakes = tuple(mode.from_tensor(t) for t in args)
    with mode:
        fake = as_tuple(fn(*fakes))
        again = as_tuple(fn(*fakes))  # a second call: no cached path may run a kernel
    assert len(fake) == len(real) == len(again)
    for r, f, f2 in zip(real, fake, again, strict=True):
        assert isinstance(f, FakeTensor) and isinstance(f2, FakeTensor)
        assert metadata(f) == metadata(r) == metadata(f2)
        for x, xf in zip(args, fakes, strict=True):
            assert shares(f, xf) == shares(r, x)


def test_fake_results_after_real_calls_were_cached() -> None:
    g, make = graphs()["copy_and_view"]
    fn = stridec.compile(g, backend="cpu")
    args = make()
    for _ in range(2):
        fn(*args)  # the call's key is now a hit
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = fn(*args)  # real tensors, converted by the mode
    assert all(isinstance(f, FakeTensor) for f in fake)
    assert [metadata(f) for f in fake] == [metadata(r) for r in fn(*args)]


def test_fake_out_returns_the_outs_written_by_nothing() -> None:
    g = stridec.Graph("out")
    x = g.input("x", (3, 4), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend="cpu")
    mode = FakeTensorMode()
    with mode:
        x, out = torch.randn(3, 4), torch.empty(4, 3)
        got = fn(x, out=out)
        assert got is out and out._version == 1
        with pytest.raises(CallError, match="out: expected sizes"):
            fn(x, out=torch.empty(3, 4))


def test_symbolic_graphs_under_fake_mode() -> None:
    g = stridec.Graph("sym")
    x = g.input("x", ("N", 4), "float32")
    g.output(x.t().contiguous(), x[1:])
    fn = stridec.compile(g, backend="cpu")
    for n in (3, 16):
        real = fn(torch.randn(n, 4))
        with FakeTensorMode():
            fake = fn(torch.randn(n, 4))
        assert [metadata(f) for f in fake] == [metadata(r) for r in real]


@pytest.mark.parametrize("backend", [*BACKENDS, "auto"])
def test_fake_tensors_outside_their_mode_are_refused(backend: str) -> None:
    g, make = graphs()["copy_and_view"]
    fn = stridec.compile(g, backend=backend)
    (x,) = make()
    fn(x)
    fn(x)  # cached
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
        fake_out = torch.empty(4, 3)
    with pytest.raises(CallError, match="argument 'x': expected a tensor with memory of its "
                                        "own; got a FakeTensor"):
        fn(fake)
    g2 = stridec.Graph("one")
    y = g2.input("y", (3, 4), "float32")
    g2.output(y.t().contiguous())
    fn2 = stridec.compile(g2, backend=backend)
    fn2(x, out=torch.empty(4, 3))
    with pytest.raises(CallError, match="out: expected a tensor with memory of its own"):
        fn2(x, out=fake_out)


def test_real_tensors_under_a_strict_fake_mode_are_refused() -> None:
    g, make = graphs()["copy_and_view"]
    fn = stridec.compile(g, backend="cpu")
    (x,) = make()
    with FakeTensorMode(), pytest.raises(CallError, match="argument 'x': expected a "
                                                          "FakeTensor under the active"):
        fn(x)


def _resized(t: torch.Tensor) -> torch.Tensor:
    t.untyped_storage().resize_(0)
    return t


def _quantized() -> torch.Tensor:
    return torch.quantize_per_tensor(torch.randn(3, 4), 0.1, 0, torch.qint8)


KINDS: dict[str, Callable[[], torch.Tensor]] = {
    "meta": lambda: torch.empty(3, 4, device="meta"),
    "sparse_coo": lambda: torch.randn(3, 4).to_sparse(),
    "sparse_csr": lambda: torch.randn(3, 4).to_sparse_csr(),
    "nested": lambda: torch.nested.nested_tensor([torch.randn(4), torch.randn(4),
                                                  torch.randn(4)]),
    "quantized": _quantized,
    "mkldnn": lambda: torch.randn(3, 4).to_mkldnn(),
    "wrapper_subclass": lambda: TwoTensor(torch.randn(3, 4), torch.randn(3, 4)),
    "storage_resized_to_0": lambda: _resized(torch.randn(3, 4)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", [*BACKENDS, "auto"])
def test_tensors_without_usable_memory_are_refused_naming_the_argument(
        kind: str, backend: str) -> None:
    g = stridec.Graph("kinds")
    x = g.input("x", (3, 4), "float32")
    g.output(x.flip(1).contiguous())
    fn = stridec.compile(g, backend=backend)
    t = KINDS[kind]()
    if backend == "reference" and kind == "meta":
        pytest.skip("the reference backend runs torch ops, which take meta tensors")
    with pytest.raises(StridecError, match="argument 'x'"):
        fn(t)
    out = KINDS[kind]()
    real = torch.randn(3, 4)
    with pytest.raises(StridecError, match=r"\bout\b"):
        fn(real, out=out)


class Sub(torch.Tensor):
    """A plain subclass: real memory, torch's own dispatch."""


def test_a_plain_subclass_runs_on_its_memory() -> None:
    g = stridec.Graph("sub")
    x = g.input("x", (3, 4), "float32")
    g.output(x.flip(1).contiguous())
    fn = stridec.compile(g, backend="cpu")
    t = torch.randn(3, 4)
    assert torch.equal(fn(t.as_subclass(Sub)), t.flip(1))
    out = torch.empty(3, 4).as_subclass(Sub)
    fn(t, out=out)
    assert torch.equal(out, t.flip(1))


class Counting(TorchDispatchMode):
    """A user's dispatch mode that counts the torch ops it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_calls_under_another_dispatch_mode_run_as_without_it(backend: str) -> None:
    g, make = graphs()["copy_and_view"]
    fn = stridec.compile(g, backend=backend)
    (x,) = make()
    want = fn(x)
    with Counting():
        got = fn(x)
        got_again = fn(x)
    for w, a, b in zip(want, got, got_again, strict=True):
        assert type(a) is torch.Tensor and torch.equal(a, w) and torch.equal(b, w)
        assert metadata(a) == metadata(w)
