"""In-place view methods on a traced function's arguments (`x.t_()`, `x.unsqueeze_(0)`,
`x.as_strided_(...)`, ...): torch changes the caller's tensor's sizes, strides and offset
(same storage) and bumps its version once per call. Each case runs on every CPU backend
against the same torch code on copies of the same tensors: every output's values, strides,
offset, storage sharing and identity, and each argument afterwards -- its values, sizes,
strides, offset, storage and version."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.errors import ParseError, UnsupportedError
from stridec.runtime.backends import cpu as cpu_backend

BACKENDS = ["reference", "interpret"] + (["cpu"] if cpu_backend.available() else [])


def _copy(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in new storage, `t`'s sizes, strides and offset."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage().__copy__(),
                                              t.storage_offset(), t.shape, t.stride())


def _meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset()


def _check(fn: Callable, *example: torch.Tensor, **trace_kw) -> None:
    """Trace `fn` on `example`; call the compiled graph on copies of it, twice (the second
    call a cached one where there is one), and compare with torch on copies of its own."""
    graph = stridec.trace(fn, *example, **trace_kw)
    for backend in BACKENDS:
        compiled = stridec.compile(graph, backend=backend)
        for _ in range(2):
            ours = [_copy(t) for t in example]
            theirs = [_copy(t) for t in example]
            storages = [t.untyped_storage().data_ptr() for t in ours]
            want = fn(*theirs)
            got = compiled(*ours)
            want = want if isinstance(want, tuple) else (want,)
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(want), backend
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                assert torch.equal(g, w), (backend, k)
                assert _meta(g) == _meta(w), (backend, k)
                for t_ours, t_theirs in zip(ours, theirs, strict=True):
                    shares = g.untyped_storage().data_ptr() == t_ours.untyped_storage().data_ptr()
                    assert shares == (w.untyped_storage().data_ptr()
                                      == t_theirs.untyped_storage().data_ptr()), (backend, k)
                    assert (g is t_ours) == (w is t_theirs), (backend, k)
            for i, (t_ours, t_theirs) in enumerate(zip(ours, theirs, strict=True)):
                assert _meta(t_ours) == _meta(t_theirs), (backend, i)
                assert torch.equal(t_ours, t_theirs), (backend, i)
                assert t_ours.untyped_storage().data_ptr() == storages[i], (backend, i)
                assert t_ours._version == t_theirs._version, (backend, i)


METHODS = {
    "unsqueeze_": lambda x: x.unsqueeze_(0),
    "unsqueeze_-1": lambda x: x.unsqueeze_(-1),
    # A view of the argument: its metadata changes, the argument's only bumps its version
    # (a view shares its base's version counter).
    "squeeze_view": lambda x: x[:, :1].squeeze_(),
    "unsqueeze_view": lambda x: (x[1].unsqueeze_(0), x)[1],
    "clone_": lambda x: x.clone().t_(),  # new memory: no bump
    "transpose_": lambda x: x.transpose_(0, 1),
    "swapdims_": lambda x: x.swapdims_(1, 0),
    "swapaxes_": lambda x: x.swapaxes_(0, 1),
    "t_": lambda x: x.t_(),
    "as_strided_": lambda x: x.as_strided_((3, 2), (1, 3)),
    "as_strided_offset": lambda x: x.as_strided_((2, 2), (1, 2), 3),
    "t_twice": lambda x: x.t_().t_(),
    "t_then_view": lambda x: x.t_()[1:],
    "view_not_returned": lambda x: (x.t_(), x.clone())[1],
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_in_place_views_of_an_argument_change_the_callers_tensor(name: str) -> None:
    _check(METHODS[name], torch.arange(12.0).reshape(3, 4))


def test_squeeze_of_an_argument() -> None:
    _check(lambda x: x.squeeze_(), torch.arange(6.0).reshape(2, 1, 3, 1))
    _check(lambda x: x.squeeze_(1), torch.arange(6.0).reshape(2, 1, 3))
    _check(lambda x: x.squeeze_(0), torch.arange(6.0).reshape(2, 1, 3))  # no change: a bump


def test_caller_layouts_other_than_declared() -> None:
    # The new view follows the caller's strides and offset (as_strided_'s default offset
    # is the tensor's own).
    base = torch.arange(40.0)
    _check(lambda x: x.t_(), base[4:].view(4, 9)[:, 1:5].t())
    _check(lambda x: x.as_strided_((2, 2), (1, 2)), base[2:14])
    _check(lambda x: x.unsqueeze_(1), base.view(5, 8)[::2, 1::3])


def test_returned_argument_is_the_callers_tensor() -> None:
    def f(x, y):
        y.unsqueeze_(0)
        x.t_()
        return y, x, x.contiguous(), x.unsqueeze(0)

    _check(f, torch.arange(6.0).reshape(2, 3), torch.arange(4.0))


def test_a_write_after_the_in_place_view() -> None:
    def f(x, y):
        x.t_()
        x[0] = y
        return x

    _check(f, torch.arange(12.0).reshape(3, 4), torch.tensor([-1.0, -2.0, -3.0]))

    def g(x, y):
        x[1:, ::2] = 0
        x.unsqueeze_(1)
        x.copy_(y)  # broadcast into the new view
        return x.squeeze(1)[0]

    _check(g, torch.arange(12.0).reshape(3, 4), torch.tensor([-1.0, -2.0, -3.0, -4.0]))


def test_detach_of_an_argument_changes_nothing() -> None:
    _check(lambda x: x.detach_().t(), torch.arange(6.0).reshape(2, 3))


def test_symbolic_sizes() -> None:
    def f(x):
        x.transpose_(0, 1).unsqueeze_(0)
        return x[0, 1:]

    graph = stridec.trace(f, torch.zeros(4, 3), dynamic=True)
    compiled = stridec.compile(graph, backend="cpu" if cpu_backend.available() else "reference")
    for rows in (5, 2, 0):
        ours, theirs = torch.randn(rows, 3), None
        theirs = ours.clone()
        got, want = compiled(ours), f(theirs)
        assert torch.equal(got, want) and _meta(got) == _meta(want)
        assert _meta(ours) == _meta(theirs) and ours._version == theirs._version


def test_text_form_round_trips_and_is_checked() -> None:
    graph = stridec.trace(lambda x: x.t_()[0], torch.zeros(2, 3))
    text = str(graph)
    assert 'output %1, %0 {reviews = ["x"]}' in text
    assert str(stridec.parse(text)) == text
    # A hidden result that is not a view of the argument it names is refused.
    bad = text.replace("%1 = select %0 {dim = 0, index = 0} : tensor<2xf32, strided<[3], "
                       "offset: 0>>", "%1 = clone %0 : tensor<3x2xf32, strided<[1, 3], offset: 0>>")
    stridec.parse(bad)
    with pytest.raises(ParseError, match="re-viewing argument 'x' must be a view"):
        stridec.parse(bad.replace("output %1, %0", "output %0, %1"))
    with pytest.raises(ParseError, match="expected fewer than the 1 results"):
        stridec.parse(text.replace("output %1, %0", "output %0"))


def test_refusals() -> None:
    graph = stridec.trace(lambda x: x.t_(), torch.zeros(2, 3))
    with pytest.raises(UnsupportedError, match=r"as_torch_op: .*argument\(s\) 'x' in place.*"
                                               r"custom operator"):
        stridec.compile(graph).as_torch_op("stridec_test_inplace_views::t")
    compiled = stridec.compile(graph, backend="reference")
    x = torch.zeros(2, 3)
    with pytest.raises(UnsupportedError, match="out="):
        compiled(x, out=torch.empty(3, 2))
    with pytest.raises(UnsupportedError, match="'x' in place.*requires grad"):
        compiled(torch.zeros(2, 3, requires_grad=True))
    assert _meta(x) == ((2, 3), (3, 1), 0) and x._version == 0
