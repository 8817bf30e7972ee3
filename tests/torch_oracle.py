"""`check_against_torch`: stridec's outputs against torch's, output by output -- dtype,
sizes, values bit for bit, strides, storage offset, and which inputs each output shares
memory with. Shared by the fidelity, regression and symbolic-plan tests. Importable from
any test module: `tests/` is on sys.path through its conftest."""

from __future__ import annotations

from typing import Any

import torch


def storage(t: torch.Tensor) -> int:
    """The address of `t`'s storage: two tensors share memory where it is the same."""
    return t.untyped_storage().data_ptr()


def check_against_torch(got: Any, want: Any, inputs: tuple[torch.Tensor, ...]) -> None:
    """`got` (an output or a tuple of them) is torch's `want` for `inputs`."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for i, (a, e) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}"
        assert torch.equal(a, e), f"output {i}: {a} != {e}"
        assert (a.stride(), a.storage_offset()) == (e.stride(), e.storage_offset()), (
            f"output {i}: strides {a.stride()} offset {a.storage_offset()}, torch "
            f"{e.stride()} offset {e.storage_offset()}")
        if not e.untyped_storage().nbytes():
            continue  # an empty storage has no address of its own: sharing cannot be told
        shared = [storage(a) == storage(x) for x in inputs]
        expected = [storage(e) == storage(x) for x in inputs]
        assert shared == expected, (
            f"output {i} shares memory with inputs {shared}, torch {expected}")
