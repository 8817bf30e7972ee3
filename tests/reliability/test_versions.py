"""Every write into caller memory bumps the tensor's version counter, as torch's out= ops
and `copy_` do, so that autograd refuses a backward whose saved tensor a kernel has since
overwritten (torch's "modified by an inplace operation") instead of silently computing a
gradient from the new values.

The oracle is torch: each case runs the same steps with torch's own out= op in place of
the compiled graph and expects the same error and the same version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stridec
from stridec.compiler.codegen.c.philox import generate_c_philox
from stridec.compiler.codegen.philox import PhiloxSpec
from stridec.ir.dtypes import DTYPES
from stridec.runtime import launch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def transpose_graph(rows: int | str = 3) -> stridec.Graph:
    g = stridec.Graph("versions")
    x = g.input("x", (rows, 4), "float32")
    g.output(x.t().contiguous())
    return g


def backward_through(write: Callable[[torch.Tensor], Any], rows: int = 3) -> str | None:
    """Save `w` for a backward (`(a * w).sum()` saves w), let `write(w)` overwrite it,
    run the backward: the error's text, or None where backward ran."""
    w = torch.zeros(4, rows)
    a = torch.randn(4, rows, requires_grad=True)
    loss = (a * w).sum()
    write(w)
    try:
        loss.backward()
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("backend", ["cpu", "interpret", "reference"])
def test_an_out_written_after_autograd_saved_it_fails_backward_as_torch(backend: str) -> None:
    torch_error = backward_through(lambda w: torch.mul(torch.randn(4, 3), 1.0, out=w))
    assert torch_error is not None and "modified by an inplace operation" in torch_error
    fn = stridec.compile(transpose_graph(), backend=backend)
    # The first call (full path), then the cached call of the same key.
    for _ in range(2):
        error = backward_through(lambda w: fn(torch.randn(3, 4), out=w))
        assert error is not None and "modified by an inplace operation" in error


def test_out_versions_move_as_torchs() -> None:
    fn = stridec.compile(transpose_graph(), backend="cpu")
    ours, theirs = torch.empty(4, 3), torch.empty(4, 3)
    for _ in range(3):  # first call, cached calls
        fn(torch.randn(3, 4), out=ours)
        torch.mul(torch.randn(4, 3), 1.0, out=theirs)
        assert ours._version == theirs._version
    # A view's write bumps the counter its base shares.
    base = torch.empty(8, 3)
    fn(torch.randn(3, 4), out=base[2:6])
    assert base._version == 1


def test_several_outs_are_each_bumped() -> None:
    g = stridec.Graph("two")
    x = g.input("x", (3, 4), "float32")
    g.output(x.t().contiguous(), x.flip(0).contiguous())
    fn = stridec.compile(g, backend="cpu")
    a, b = torch.empty(4, 3), torch.empty(3, 4)
    for k in range(1, 3):
        fn(torch.randn(3, 4), out=(a, b))
        assert (a._version, b._version) == (k, k)


def test_symbolic_outs_are_bumped() -> None:
    fn = stridec.compile(transpose_graph("N"), backend="cpu")
    for rows in (3, 5, 5, 16):
        error = backward_through(lambda w, rows=rows: fn(torch.randn(rows, 4), out=w), rows)
        assert error is not None and "modified by an inplace operation" in error
        w = torch.empty(4, rows)
        fn(torch.randn(rows, 4), out=w)
        assert w._version == 1


def test_philox_state_updated_in_place_is_bumped() -> None:
    g = stridec.Graph("rng")
    s = g.input("state", (6,), "uint32")
    bits, new_state = g.philox(s, (16,))
    g.output(bits, new_state)
    fn = stridec.compile(g, backend="cpu")
    state = torch.zeros(6, dtype=torch.uint32)
    bits = torch.empty(16, dtype=torch.uint32)
    for k in range(1, 3):
        fn(state, out=(bits, state))
        assert (bits._version, state._version) == (k, k)


def test_torch_op_out_bumps_once_as_torchs_out_ops() -> None:
    op = stridec.compile(transpose_graph()).as_torch_op("stridec_versions::transpose")
    ours, theirs = torch.empty(4, 3), torch.empty(4, 3)
    for _ in range(2):
        op(torch.randn(3, 4), out=ours)
        torch.mul(torch.randn(4, 3), 1.0, out=theirs)
        assert ours._version == theirs._version
    error = backward_through(lambda w: op(torch.randn(3, 4), out=w))
    assert error is not None and "modified by an inplace operation" in error


def test_inference_tensors_have_no_version_and_are_written() -> None:
    fn = stridec.compile(transpose_graph(), backend="cpu")
    x = torch.randn(3, 4)
    with torch.inference_mode():
        out = torch.empty(4, 3)
        fn(x, out=out)
    assert torch.equal(out, x.t())


def test_a_single_philox_launch_bumps_what_it_writes() -> None:
    kernel = generate_c_philox(PhiloxSpec((8,), (1,), 0, (1,), 0, 8, DTYPES["uint32"]))
    dst = torch.empty(8, dtype=torch.uint32)
    new_state = torch.empty(6, dtype=torch.int32)
    launch.launch_philox(kernel, torch.zeros(6, dtype=torch.int32), dst, new_state)
    assert (dst._version, new_state._version) == (1, 1)
