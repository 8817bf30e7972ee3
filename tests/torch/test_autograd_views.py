"""Gradients through `diagonal`, `as_strided` and `clone`, against torch autograd: the
same function run by torch and by a compiled graph (cpu and reference), the gradient of
its inputs for one random output gradient compared bit for bit (every adjoint here moves
and adds values, in float64, where torch's does the same sums). `as_strided` reads its
operand's storage, so its gradient follows the caller's strides and offset: each case
runs on four arrangements of the input's memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import stridec
from stridec.errors import UnsupportedError

BACKENDS = ["cpu", "reference"]


def _arrangements(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    n = 1
    for s in shape:
        n *= s
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(3 * n + 7, dtype=torch.float64, generator=gen)
    rev = tuple(reversed(shape))
    perm = tuple(reversed(range(len(shape))))
    return {
        "contiguous": base[:n].view(shape),
        "transposed": base[:n].view(rev).permute(perm),
        "stepped": base[: 2 * n].view(*shape[:-1], 2 * shape[-1])[..., ::2],
        "offset": base[5 : 5 + n].view(shape),
    }


def _leaf(x: torch.Tensor) -> torch.Tensor:
    """A leaf that requires grad with the sizes, strides and storage offset of `x`, over
    a storage of its own of the same size."""
    storage = torch.zeros(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype)
    leaf = storage.as_strided(x.size(), x.stride(), x.storage_offset())
    leaf.copy_(x)
    return leaf.requires_grad_()


def _grads(fn: Callable, x: torch.Tensor, run: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """(the compiled call's gradient, torch's) of a leaf laid out as `x`, for the same
    random output gradient."""
    leaf = _leaf(x)
    ours, theirs = run(leaf), fn(leaf)
    g = torch.randn(theirs.shape, dtype=theirs.dtype, generator=torch.Generator().manual_seed(2))
    (got,) = torch.autograd.grad(ours, leaf, g)
    (want,) = torch.autograd.grad(theirs, leaf, g)
    return got, want


DIAGONALS: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "main": (lambda x: x.diagonal(), (4, 4)),
    "above": (lambda x: x.diagonal(2), (4, 6)),
    "below": (lambda x: x.diagonal(-1), (4, 6)),
    "far_below": (lambda x: x.diagonal(-3), (4, 6)),
    "dims_swapped": (lambda x: x.diagonal(1, 1, 0), (3, 4, 5)),
    "outer_dims": (lambda x: x.diagonal(-1, 2, 0), (3, 4, 5)),
    "empty": (lambda x: x.diagonal(7), (4, 6)),
    "einsum": (lambda x: torch.einsum("iij->ji", x) if isinstance(x, torch.Tensor)
               else stridec.ir.builder.einsum("iij->ji", x), (4, 4, 3)),
    "then_copy": (lambda x: x.diagonal(1).flip(0), (5, 6)),
}

AS_STRIDED: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "window": (lambda x: x.as_strided((2, 2), (1, 3), 1), (4, 6)),
    "overlapping_rows": (lambda x: x.as_strided((3, 4), (1, 1)), (4, 6)),
    "broadcast": (lambda x: x.as_strided((3, 5), (0, 2), 2), (4, 6)),
    "the_diagonal": (lambda x: x.as_strided((4,), (7,)), (4, 6)),
    "every_element_twice": (lambda x: x.as_strided((2, 24), (0, 1)), (4, 6)),
    "windows_of_a_view": (lambda x: x.t().as_strided((3, 3, 2), (5, 2, 1), 3), (4, 6)),
    "of_a_flip": (lambda x: x.flip(0).as_strided((2, 3), (6, 1), 7), (4, 6)),
    "of_a_copy": (lambda x: x.t().contiguous().as_strided((3, 3), (4, 1)), (4, 6)),
    "three_dims": (lambda x: x.as_strided((2, 3, 2), (12, 2, 5), 1), (4, 6)),
}


def _compiled(fn: Callable, x: torch.Tensor, backend: str) -> Callable:
    g = stridec.Graph("grad")
    v = g.input("x", tuple(x.shape), "float64")
    g.output(fn(v))
    return stridec.compile(g, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [*DIAGONALS, "clone"])
def test_diagonal_and_clone_gradients_are_torchs(case: str, backend: str) -> None:
    fn, shape = DIAGONALS.get(case, (lambda x: x.t().clone(), (4, 6)))
    for arrangement, x in _arrangements(shape).items():
        got, want = _grads(fn, x, _compiled(fn, x, backend))
        assert torch.equal(got, want), (case, arrangement)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(AS_STRIDED))
def test_as_strided_gradient_is_torchs_for_every_caller_layout(case: str, backend: str) -> None:
    fn, shape = AS_STRIDED[case]
    compiled = _compiled(fn, _arrangements(shape)["contiguous"], backend)
    for arrangement, x in _arrangements(shape).items():
        got, want = _grads(fn, x, compiled)
        assert torch.equal(got, want), (case, arrangement, got, want)


def test_as_strided_double_backward() -> None:
    fn, shape = AS_STRIDED["overlapping_rows"]
    x = _leaf(_arrangements(shape)["transposed"])
    compiled = _compiled(fn, x, "cpu")
    assert torch.autograd.gradcheck(compiled, [x], fast_mode=True)
    assert torch.autograd.gradgradcheck(compiled, [x], fast_mode=True)


def test_as_strided_of_memory_shared_by_elements_is_refused_at_the_call() -> None:
    """torch divides the gradient of a storage element among the elements that share it;
    stridec has no division: an expanded caller tensor is refused before running."""
    fn, shape = AS_STRIDED["window"]
    compiled = _compiled(fn, torch.zeros(shape, dtype=torch.float64), "cpu")
    x = torch.randn(1, 6, dtype=torch.float64).expand(4, 6).detach().requires_grad_()
    with pytest.raises(UnsupportedError, match="share memory .* computes no quotients"):
        compiled(x)
    with torch.no_grad():
        assert torch.equal(compiled(x), fn(x))


def test_torch_op_as_strided_backward_for_the_declared_layout_only() -> None:
    """The operator's one backward is built for the declared layout: another caller
    layout is refused at the forward that records autograd, the declared one runs."""
    fn, shape = AS_STRIDED["window"]
    x = _arrangements(shape)
    op = _compiled(fn, x["contiguous"], "cpu").as_torch_op("stridec_test_views::window")
    got, want = _grads(fn, x["contiguous"], op)
    assert torch.equal(got, want)
    with pytest.raises(UnsupportedError, match="as_strided reads argument 'x' with strides"):
        op(_leaf(x["transposed"]))
