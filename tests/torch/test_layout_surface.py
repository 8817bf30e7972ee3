"""The rest of torch's layout surface, on a builder `Value`, traced, and in torch: ravel,
h/v/dsplit, broadcast_tensors, atleast_Nd, H/mH/adjoint, rot90, split_with_sizes,
unsafe_chunk/split, narrow_copy, the `*_copy` view variants, in-place view methods,
einsum as a view, and torch's keyword forms. Each matches torch in values, strides and
storage sharing with the input, on four arrangements of the input's memory; the cases
follow pytorch's test/test_view_ops.py where it has them (views of (5, 5) and (4, 4, 4)
tensors, in-place views of `t.view_as(t)`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import stridec
import stridec.ir.builder as B
from stridec.errors import LayoutError, UnsupportedError

CPU_BACKENDS = ["reference", "cpu", "interpret"]


def _arrangements(shape: tuple[int, ...] = (4, 6)) -> dict[str, torch.Tensor]:
    n = 1
    for s in shape:
        n *= s
    base = torch.arange(4 * n, dtype=torch.float32) * 0.5 - 7
    rev = tuple(reversed(shape))
    perm = tuple(reversed(range(len(shape))))
    return {
        "contiguous": base[:n].view(shape),
        "transposed": base[:n].view(rev).permute(perm),
        "stepped": base[: 2 * n].view(*shape[:-1], 2 * shape[-1])[..., ::2],
        "offset": base[5 : 5 + n].view(shape),
    }


def _flat(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _shares(t: torch.Tensor, x: torch.Tensor) -> bool:
    return t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def _check(got: Any, want: Any, x: torch.Tensor, what: str) -> None:
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, g.shape, w.shape)
        assert torch.equal(g, w), what
        assert g.stride() == w.stride(), (what, g.stride(), w.stride())
        assert _shares(g, x) == _shares(w, x), (what, "storage sharing")


def _build(fn: Callable, x: torch.Tensor) -> stridec.Graph:
    g = stridec.Graph("built")
    out = fn(g.input("x", tuple(x.shape), "float32"))
    g.output(*_flat(out))
    return g


def _run(fn: Callable, backend: str, shape: tuple[int, ...], *, build: bool = True) -> None:
    """`fn` built on a Value (if `build`), traced, and in torch, on every arrangement."""
    example = _arrangements(shape)["contiguous"]
    graphs = {"traced": stridec.trace(fn, example)}
    if build:
        graphs["built"] = _build(fn, example)
    for how, graph in graphs.items():
        compiled = stridec.compile(graph, backend=backend)
        for arrangement, x in _arrangements(shape).items():
            _check(compiled(x), fn(x), x, f"{how} {arrangement}")


# Methods: the same code on a torch tensor, a traced tensor and a builder Value.
METHODS: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "ravel": (lambda x: x.ravel(), (4, 6)),
    "ravel_view": (lambda x: x[1:3].ravel(), (4, 6)),
    "ravel_0d": (lambda x: x[0, 0].ravel(), (4, 6)),  # test_view_ops' test_ravel cases
    "ravel_stepped": (lambda x: x[0, ::2].ravel(), (4, 6)),
    "ravel_t": (lambda x: x.t().ravel(), (5, 5)),
    "hsplit": (lambda x: x.hsplit(2), (4, 4, 4)),
    "hsplit_indices": (lambda x: x.hsplit([1, 3]), (4, 6)),
    "hsplit_1d": (lambda x: x[0].hsplit(3)[1], (4, 6)),
    "vsplit": (lambda x: x.vsplit(2), (4, 4, 4)),
    "dsplit": (lambda x: x.dsplit([1, 2]), (4, 4, 4)),
    "H": (lambda x: x.H, (4, 6)),
    "mH": (lambda x: x.mH, (4, 4, 4)),
    "scalar_H": (lambda x: (x[0, 0].H, x[0, 0].mH, x[0, 0].mT, x[0, 0].adjoint()), (4, 6)),
    "conj": (lambda x: x.t().conj().resolve_conj().resolve_neg(), (4, 6)),
    "adjoint": (lambda x: x.adjoint().contiguous(), (4, 4, 4)),
    "rot90": (lambda x: x.rot90(), (4, 6)),
    "rot90_2": (lambda x: x.rot90(2), (4, 6)),
    "rot90_3": (lambda x: x.rot90(-1, [1, 2]), (4, 4, 4)),
    "rot90_0": (lambda x: x.rot90(4, (1, 0)), (4, 6)),
    "split_with_sizes": (lambda x: x.split_with_sizes([2, 4], 1), (4, 6)),
    "unsafe_split": (lambda x: x.unsafe_split(4, 1), (4, 6)),
    "unsafe_chunk": (lambda x: x.unsafe_chunk(3, 0), (4, 6)),
    "narrow_copy": (lambda x: x.narrow_copy(1, 1, 3), (4, 6)),
    # torch's keyword forms
    "kw_reshape": (lambda x: x.reshape(shape=(6, 4)), (4, 6)),
    "kw_view": (lambda x: x.view(size=(4, 2, 3)), (4, 6)),
    "kw_permute": (lambda x: x.permute(dims=(2, 0, 1)), (4, 4, 4)),
    "kw_transpose": (lambda x: x.transpose(dim0=1, dim1=0), (4, 6)),
    "kw_expand": (lambda x: x[:1].expand(size=(3, 4, 6)), (4, 6)),
    "kw_broadcast_to": (lambda x: x[:, :1].broadcast_to(size=(4, 5)), (4, 6)),
    "kw_flip": (lambda x: x.flip(dims=(1,)), (4, 6)),
    "kw_split": (lambda x: x.split(split_size=4, dim=1), (4, 6)),
    "kw_chunk": (lambda x: x.chunk(chunks=2, dim=1), (4, 6)),
    "kw_tensor_split": (lambda x: x.tensor_split(sections=4, dim=1), (4, 6)),
    "kw_repeat": (lambda x: x.repeat(repeats=(1, 2)), (4, 6)),
    "kw_tile": (lambda x: x.tile(dims=(2,)), (4, 6)),
    "kw_squeeze": (lambda x: x[:1].squeeze(dim=0), (4, 6)),
    "kw_unsqueeze": (lambda x: x.unsqueeze(dim=1), (4, 6)),
    "kw_narrow": (lambda x: x.narrow(dim=1, start=1, length=2), (4, 6)),
    "kw_select": (lambda x: x.select(dim=1, index=2), (4, 6)),
    "kw_movedim": (lambda x: x.movedim(source=0, destination=2), (4, 4, 4)),
    "kw_movedim_pairs": (lambda x: x.movedim(source=(0, 1), destination=(1, 0)), (3, 3)),
    "kw_flatten": (lambda x: x.flatten(start_dim=1, end_dim=2), (4, 4, 4)),
    "kw_unflatten": (lambda x: x.unflatten(dim=1, sizes=(2, 3)), (4, 6)),
    "kw_swapaxes": (lambda x: x.swapaxes(axis0=0, axis1=1), (4, 6)),
    "kw_swapdims": (lambda x: x.swapdims(dim0=0, dim1=1), (4, 6)),
    "kw_unfold": (lambda x: x.unfold(dimension=1, size=2, step=2), (4, 6)),
    "kw_diagonal": (lambda x: x.diagonal(offset=1, dim1=0, dim2=1), (4, 6)),
    "kw_as_strided": (lambda x: x.as_strided(size=(2, 2), stride=(1, 2), storage_offset=1),
                      (4, 6)),
    "kw_roll": (lambda x: x.roll(shifts=1, dims=0), (4, 6)),
    "kw_unbind": (lambda x: x.unbind(dim=1), (4, 6)),
    "kw_repeat_interleave": (lambda x: x.repeat_interleave(repeats=2, dim=0), (4, 6)),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("name", list(METHODS))
def test_methods_match_torch(name: str, backend: str) -> None:
    fn, shape = METHODS[name]
    _run(fn, backend, shape)


# Functions: `T` is torch, or the builder (stridec.ir.builder) for a Value; traced, the
# torch function is recorded through the builder's.
def _ns(how: str) -> Any:
    if how == "torch":
        return torch
    return SimpleNamespace(**{name: getattr(B, name) for name in B.FUNCTIONS},
                           **{name: getattr(B.ValueBuilder, name) for name in ("narrow_copy",)})


FUNCTIONS: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "permute_copy": (lambda T, x: T.permute_copy(x, (1, 0)), (4, 6)),
    "transpose_copy": (lambda T, x: T.transpose_copy(x, 0, 2), (4, 4, 4)),
    "t_copy": (lambda T, x: T.t_copy(x), (4, 6)),
    "expand_copy": (lambda T, x: T.expand_copy(x[:1], (3, 4, 6)), (4, 6)),
    "view_copy": (lambda T, x: T.view_copy(x, (4, 2, 3)), (4, 6)),
    "squeeze_copy": (lambda T, x: T.squeeze_copy(x[:, :1]), (4, 6)),
    "unsqueeze_copy": (lambda T, x: T.unsqueeze_copy(x, 1), (4, 6)),
    "select_copy": (lambda T, x: T.select_copy(x, 1, 2), (4, 6)),
    "slice_copy": (lambda T, x: T.slice_copy(x, 1, 1, 5, 2), (4, 6)),
    "split_copy": (lambda T, x: tuple(T.split_copy(x, 4, 1)), (4, 6)),
    "split_with_sizes_copy": (lambda T, x: tuple(T.split_with_sizes_copy(x, [1, 3], 0)),
                              (4, 6)),
    "unbind_copy": (lambda T, x: tuple(T.unbind_copy(x, 1))[2], (4, 6)),
    "diagonal_copy": (lambda T, x: T.diagonal_copy(x, 1), (4, 6)),
    "as_strided_copy": (lambda T, x: T.as_strided_copy(x, (2, 2), (1, 2), 1), (4, 6)),
    "unfold_copy": (lambda T, x: T.unfold_copy(x, 1, 2, 2), (4, 6)),
    "detach_copy": (lambda T, x: T.detach_copy(x), (4, 6)),
    "alias_copy": (lambda T, x: T.alias_copy(x), (4, 6)),
    "narrow_copy": (lambda T, x: T.narrow_copy(x, 0, 1, 2), (4, 6)),
    "broadcast_tensors": (lambda T, x: T.broadcast_tensors(x[:1], x[:, :1], x[0, 0]), (4, 6)),
    "atleast_1d": (lambda T, x: T.atleast_1d(x[0, 0]), (4, 6)),
    "atleast_2d": (lambda T, x: T.atleast_2d(x[0], x), (4, 6)),
    "atleast_3d": (lambda T, x: T.atleast_3d([x[0], x, x[0, 0]]), (4, 6)),
    "einsum_permute": (lambda T, x: T.einsum("ijk->kij", x), (4, 4, 4)),
    "einsum_ellipsis": (lambda T, x: T.einsum("...j->j...", x), (4, 4, 4)),
    "einsum_implicit": (lambda T, x: T.einsum("ji", x), (4, 6)),
    "einsum_diagonal": (lambda T, x: T.einsum("iij->ji", x), (4, 4, 4)),
    "einsum_spaces": (lambda T, x: T.einsum("a b c -> c a b", x), (4, 4, 4)),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functions_match_torch(name: str, backend: str) -> None:
    fn, shape = FUNCTIONS[name]
    example = _arrangements(shape)["contiguous"]
    built = _build(lambda v: fn(_ns("builder"), v), example)
    traced = stridec.trace(lambda x: fn(torch, x), example)
    for how, graph in {"built": built, "traced": traced}.items():
        compiled = stridec.compile(graph, backend=backend)
        for arrangement, x in _arrangements(shape).items():
            _check(compiled(x), fn(torch, x), x, f"{how} {arrangement}")


def _torch_keywords(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """torch functions called with torch's keyword names."""
    return (
        torch.reshape(input=x, shape=(6, 4)),
        torch.transpose(input=x, dim0=0, dim1=1),
        torch.permute(x, dims=(1, 0)),
        torch.cat(tensors=[x, x[:1]], dim=0),
        torch.stack(tensors=[x, x], dim=1),
        *torch.split(x, split_size_or_sections=[2, 4], dim=1),
        *torch.tensor_split(x, indices=[1, 3], dim=0),
        torch.narrow(x, dim=1, start=2, length=3),
        torch.movedim(x, source=0, destination=1),
        torch.flatten(x, start_dim=0),
        torch.nn.functional.pad(input=x, pad=(1, 2), value=0.5),
    )


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_torch_functions_by_keyword(backend: str) -> None:
    _run(_torch_keywords, backend, (4, 6), build=False)


# In-place view methods change the tensor they are called on, as torch's do; pytorch's
# test_*_inplace_view cases call them on `t.view_as(t)`.
IN_PLACE: dict[str, Callable] = {
    "swapdims_": lambda x: x.view_as(x).swapdims_(0, 1),
    "swapaxes_": lambda x: x.view_as(x).swapaxes_(0, 1),
    "transpose_": lambda x: x.view_as(x).transpose_(0, 1),
    "t_": lambda x: x.view_as(x).t_(),
    "squeeze_": lambda x: x[:, :1].view_as(x[:, :1]).squeeze_(),
    "unsqueeze_": lambda x: x.view_as(x).unsqueeze_(1),
    "as_strided_": lambda x: x.view_as(x).as_strided_((6,), (2,), 1),
    "detach_": lambda x: x.t().clone().detach_(),  # torch detaches no view in place
}


def _in_place_twice(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every name bound to the tensor sees the change; other views of it do not."""
    v = x[1:]
    w = v.view_as(v)
    alias = w
    w.unsqueeze_(0).transpose_(0, 2)
    return alias.contiguous(), v, w.squeeze_(1)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("name", [*IN_PLACE, "twice"])
def test_in_place_views_match_torch(name: str, backend: str) -> None:
    fn = IN_PLACE.get(name, _in_place_twice)
    _run(fn, backend, (4, 6), build=False)


def test_conj_of_a_real_value_is_itself() -> None:
    # test_view_ops' test_conj_self: `t.conj() is t` for every real dtype
    g = stridec.Graph("conj")
    v = g.input("x", (5, 5), "float32")
    assert v.conj() is v and v.resolve_conj() is v and v.resolve_neg() is v
    t = torch.ones(5, 5)
    assert t.conj() is t and torch.conj(t) is t


def test_refusals_name_the_call() -> None:
    x = _arrangements()["contiguous"]
    cases = [
        (lambda x: x.hsplit(4), LayoutError, "hsplit: dim 1 of size 6 does not split into 4"),
        (lambda x: x.dsplit(2), LayoutError, "dsplit: expects a value of rank >= 3"),
        (lambda x: x.rot90(1, (0, 0)), LayoutError, "rot90: dims must differ"),
        (lambda x: x[0].H, LayoutError, "H: needs a matrix"),
        (lambda x: torch.einsum("ij->i", x), UnsupportedError, "einsum: .* sums over 'j'"),
        (lambda x: torch.einsum("ij,jk->ik", x, x.t()), UnsupportedError, "multiplies 2"),
        (lambda x: torch.einsum("ij->ik", x), Exception, "output label 'k'"),
        (lambda x: torch.permute_copy(x, (1, 0), out=x), UnsupportedError, "out="),
    ]
    for fn, error, match in cases:
        with pytest.raises(error, match=match):
            stridec.trace(fn, x)
        if error is not UnsupportedError:  # torch refuses the same call
            with pytest.raises((RuntimeError, ValueError, IndexError)):
                fn(x)
