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

from collections.abc import Iterable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

__all__ = ["AlignedStandIns", "FakeTensor", "active_fake_mode", "dispatch_modes", "misaligned",
           "without_memory"]

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


def _misaligned(t: Any) -> bool:
    """Whether `t` is a strided tensor with elements and memory whose data pointer is not
    a multiple of its element size, or whose storage's is not a multiple of 8 (a copy of
    runs of 2, 4 or 8 bytes moves them as elements of that size)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_nested:
        return False
    try:
        return bool(t.data_ptr() % t.element_size() or t.untyped_storage().data_ptr() % 8
                    ) and bool(t.numel()) and without_memory(t) is None
    except (RuntimeError, NotImplementedError):  # no memory: the checks name it
        return False


def misaligned(tensors: Iterable[Any]) -> bool:
    """Whether some tensor of `tensors` with elements has a data pointer that is not a
    multiple of its element size, or a storage whose pointer is not a multiple of 8.
    torch makes such tensors (`frombuffer` at an odd offset, numpy views at odd byte
    offsets) and runs on them; the C kernels assume aligned elements (a fill's pattern,
    vector loads; runs of a few bytes moved as elements of up to 8 bytes), so a call
    stages them (`AlignedStandIns`)."""
    return any(_misaligned(t) for t in tensors)


class AlignedStandIns:
    """Aligned copies standing in for misaligned tensors during one call: each storage
    that a misaligned tensor of `tensors` lives in gets one new (aligned) storage of the
    same size, holding the bytes every tensor of `tensors` in that storage spans; a
    stand-in is a tensor of the same dtype, sizes, strides and offset over it, so the
    call specializes as it would on the original. `write_back` copies the written
    tensors' spans back; `original` turns a result over a stand-in's storage into the
    same view of the original storage. Costs a copy of those bytes each way: rare
    tensors, a correct result (torch's kernels run on them too)."""

    def __init__(self, tensors: Iterable[Any]) -> None:
        tensors = list(tensors)
        staged = {t.untyped_storage().data_ptr() for t in tensors if _misaligned(t)}
        # storage pointer -> (lowest byte, past the highest, the tensors in it): every
        # tensor in a storage that one misaligned tensor makes staged
        spans: dict[int, tuple[int, int, list[torch.Tensor]]] = {}
        for t in tensors:
            if (not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_nested
                    or not t.numel() or without_memory(t) is not None):
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr not in staged:
                continue
            es = t.element_size()
            lo = t.storage_offset() * es
            hi = lo + es * (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(),
                                                                   strict=True)))
            if ptr in spans:
                lo, hi = min(lo, spans[ptr][0]), max(hi, spans[ptr][1])
                spans[ptr][2].append(t)
            spans[ptr] = (lo, hi, spans.get(ptr, (0, 0, [t]))[2])
        # storage pointer -> (span, the original storage as bytes, the copy as bytes, the
        # original tensors in it)
        self._copies: dict[int, tuple[int, int, torch.Tensor, torch.Tensor,
                                      list[torch.Tensor]]] = {}
        for ptr, (lo, hi, held) in spans.items():
            storage = held[0].untyped_storage()
            original = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),))
            copy = torch.empty(storage.nbytes(), dtype=torch.uint8)
            copy[lo:hi].copy_(original[lo:hi])
            self._copies[ptr] = (lo, hi, original, copy, held)
        self._by_copy = {c[3].data_ptr(): ptr for ptr, c in self._copies.items()}

    def of(self, t: Any) -> Any:
        """The stand-in of `t` (`t` itself where its storage needs none)."""
        if not isinstance(t, torch.Tensor) or not self._copies:
            return t
        try:
            found = self._copies.get(t.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):
            return t
        if found is None:
            return t
        return torch.empty(0, dtype=t.dtype).set_(found[3].untyped_storage(),
                                                  t.storage_offset(), t.shape, t.stride())

    def write_back(self, written: Iterable[torch.Tensor]) -> None:
        """Copy the spans of the stand-ins' storages that `written` (originals) live in
        back into the originals' storages."""
        done = set()
        for t in written:
            ptr = t.untyped_storage().data_ptr() if t.numel() else None
            if ptr in self._copies and ptr not in done:
                done.add(ptr)
                lo, hi, original, copy, _ = self._copies[ptr]
                original[lo:hi].copy_(copy[lo:hi])

    def original(self, result: torch.Tensor) -> torch.Tensor:
        """`result` as the same view of the original storage where it is a view of a
        stand-in's (an output that aliases an input: a view of the original tensor, so it
        shares its version counter as torch's views do), else `result`."""
        if not self._by_copy or not result.numel():
            return result
        ptr = self._by_copy.get(result.untyped_storage().data_ptr())
        if ptr is None:
            return result
        base = next((t for t in self._copies[ptr][4] if t.dtype == result.dtype), None)
        if base is None:  # a view as another dtype: over the storage itself
            return torch.empty(0, dtype=result.dtype).set_(
                self._copies[ptr][2].untyped_storage(), result.storage_offset(),
                result.shape, result.stride())
        return torch.as_strided(base, result.shape, result.stride(), result.storage_offset())
