"""What a kernel needs of a caller's torch tensor: memory of its own that a data pointer
reaches (`without_memory` says why a tensor has none), and the fake tensors that stand
for such memory under torch's `FakeTensorMode` (`active_fake_mode`).

torch has tensors of many kinds that pass a type check and carry no memory a kernel can
address: a `FakeTensor` (its storage's pointer is 0), a wrapper subclass (a
`__torch_dispatch__` tensor such as `TwoTensor`, `FunctionalTensor`: its storage has no
pointer at all), sparse, nested and opaque ones (no storage). A call given one is refused
with a `CallError` naming the argument; a kernel never runs on it.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

__all__ = ["FakeTensor", "active_fake_mode", "dispatch_modes", "without_memory"]

# How many `TorchDispatchMode`s are active (FakeTensorMode, make_fx's, a user's): under
# one, torch allocations may be fake, so a kernel may not write them.
dispatch_modes = torch._C._len_torch_dispatch_stack
_FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE


def active_fake_mode() -> FakeTensorMode | None:
    """The active `FakeTensorMode`, if any."""
    return torch._C._get_dispatch_mode(_FAKE_KEY)  # type: ignore[no-any-return]


def without_memory(t: torch.Tensor) -> str | None:
    """Why a kernel cannot address `t`'s memory, as the end of a sentence "expected a
    tensor with memory of its own; got ...", or None where it can. (Only a subclass of
    `torch.Tensor` can lack it among strided tensors: the caller checks layouts.)"""
    if type(t) is torch.Tensor:
        return None
    if isinstance(t, FakeTensor):
        return ("a FakeTensor, which has no data (call under its FakeTensorMode for fake "
                "results)")
    try:
        storage = t.untyped_storage()
        pointer = storage.data_ptr()
    except (RuntimeError, NotImplementedError) as e:
        return f"a {type(t).__name__} whose storage has no data pointer ({e})"
    if pointer == 0 and storage.nbytes():
        return f"a {type(t).__name__} whose storage of {storage.nbytes()} bytes is at address 0"
    return None
