"""The `out=` argument of a compiled graph: checks, the specialization it adds, and the
results a program did not write straight copied into the caller's tensors (`into_outs`).
What the compiler makes of the outs -- each output written into its out, or staged -- is
`stridec.compiler.outputs`; the calls that run them, `stridec.runtime.call_path`.

Every check runs before any kernel, and each failure is a `CallError` naming the
argument (`out` for one output, `out[i]` for several):

- the count (a tensor for one output, a tuple or list of one tensor per output);
- each a plain strided tensor of the output's sizes and dtype, on the inputs' device,
  without a pending negation, with memory of its own (`without_memory`), not requiring
  grad (as torch's `out=`);
- its own elements distinct (an expanded tensor would receive two values per address);
- inside its storage;
- no two outs sharing memory (`may_meet`, at byte level, so dtype views of one buffer
  compare too).

An out that may share memory with an input is *staged* (`stridec.compiler.outputs`): the
program computes that output apart and writes it into `out` last. The specialization is
`(storages, targets)`: per distinct storage (per dtype; a staged out alone) its size in
elements, dtype and whether it is staged; per output its storage, strides and offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from stridec.compiler.outputs import OutStorage, OutTarget, byte_layout, may_meet
from stridec.errors import CallError
from stridec.ir.dtypes import as_dtype
from stridec.ir.layout import Layout
from stridec.ir.types import TensorType
from stridec.runtime.launch import bump_versions
from stridec.runtime.tensors import without_memory

__all__ = ["OutCall", "as_outs", "check_out_tensors", "check_outs", "into_outs"]


class OutCall:
    """A checked `out=`: the tensors to return, the tensor standing for each storage
    (appended to the program's arguments), and the specialization key."""

    __slots__ = ("outs", "storage_tensors", "storages", "targets", "key")

    def __init__(self, outs: tuple[torch.Tensor, ...], storage_tensors: list[torch.Tensor],
                 storages: list[OutStorage], targets: list[OutTarget]) -> None:
        self.outs = outs
        self.storage_tensors = storage_tensors
        self.storages = storages
        self.targets = targets
        self.key = (
            tuple((s.elements, s.dtype, s.staged) for s in storages),
            tuple((t.storage, t.layout.strides, t.layout.offset) for t in targets),
        )


def _bytes(t: torch.Tensor) -> Layout:
    return byte_layout(t.shape, t.stride(), t.storage_offset(), t.element_size())


def _name(i: int, n: int) -> str:
    return "out" if n == 1 else f"out[{i}]"


def check_out_tensors(graph_name: str, types: Sequence[TensorType], out: Any,
                      device: torch.device, *, data: bool = True) -> tuple[tuple, list[Layout]]:
    """The outs of `out` (a tensor, or a tuple or list of one per output) checked one by
    one, and their layouts; without `data` (fake tensors) their memory and storage are
    not looked at."""
    n = len(types)
    if isinstance(out, torch.Tensor):
        outs: tuple = (out,)
    elif isinstance(out, (tuple, list)):
        outs = tuple(out)
    else:
        raise CallError(
            f"{graph_name}: 'out' must be a tensor or a tuple of {n} tensor(s); "
            f"got {type(out).__name__}"
        )
    if len(outs) != n:
        raise CallError(
            f"{graph_name}: 'out' must give one tensor per output: expected {n}; got {len(outs)}"
        )
    return outs, [_check_out(_name(i, n), t, ty, device, data)
                  for i, (t, ty) in enumerate(zip(outs, types, strict=True))]


def _check_out(name: str, t: Any, ty: TensorType, device: torch.device,
               data: bool) -> Layout:
    """One out's checks (module docstring); with `data`, also its memory and storage."""
    if not isinstance(t, torch.Tensor):
        raise CallError(f"{name}: expected a torch.Tensor; got {type(t).__name__}")
    if t.is_nested or t.layout != torch.strided:
        raise CallError(f"{name}: expected a strided tensor; got layout {t.layout}")
    if t.dtype != ty.dtype.torch:
        raise CallError(f"{name}: expected dtype {ty.dtype}; got {t.dtype}")
    if tuple(t.shape) != ty.sizes:
        raise CallError(f"{name}: expected sizes {list(ty.sizes)}; got {list(t.shape)}")
    if t.device != device:
        raise CallError(f"{name}: expected device {device} (the inputs'); got {t.device}")
    if t.is_neg() or t.is_conj():
        raise CallError(f"{name}: expected a tensor without a pending negation or conjugation")
    missing = without_memory(t) if data else None
    if missing is not None:
        raise CallError(f"{name}: expected a tensor with memory of its own; got {missing}")
    if t.requires_grad:
        raise CallError(
            f"{name}: expected a tensor that does not require grad (out= writes in "
            "place, outside autograd, as torch's out= arguments)"
        )
    layout = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
    if layout.may_overlap():
        raise CallError(
            f"{name}: expected each element at its own address; strides "
            f"{list(layout.strides)} over sizes {list(layout.sizes)} give some "
            "elements one address (an expanded tensor)"
        )
    if data and t.numel():
        storage = t.untyped_storage().nbytes() // t.element_size()
        if not layout.fits(storage):
            raise CallError(
                f"{name}: layout {layout} reaches element {layout.max_index()}, past "
                f"its storage of {storage} elements"
            )
    return layout


def check_outs(graph_name: str, types: Sequence[TensorType], out: Any,
               inputs: Sequence[torch.Tensor], device: torch.device) -> OutCall:
    outs, layouts = check_out_tensors(graph_name, types, out, device)
    n = len(types)
    ptrs = [t.untyped_storage().data_ptr() for t in outs]
    for i in range(n):
        if not outs[i].numel():
            continue
        for j in range(i):
            if (ptrs[i] == ptrs[j] and outs[j].numel()
                    and may_meet(_bytes(outs[i]), _bytes(outs[j]))):
                raise CallError(
                    f"{_name(i, n)}: shares memory with {_name(j, n)}; expected every out "
                    "tensor to have memory of its own (disjoint windows of one buffer are fine)"
                )
    storages: list[OutStorage] = []
    storage_tensors: list[torch.Tensor] = []
    targets: list[OutTarget] = []
    groups: dict[tuple, int] = {}
    input_ptrs = [(x.untyped_storage().data_ptr(), x) for x in inputs]
    for i, t in enumerate(outs):
        staged = bool(t.numel()) and any(
            p == ptrs[i] and x.numel() and may_meet(_bytes(t), _bytes(x)) for p, x in input_ptrs
        )
        group = (ptrs[i], t.dtype, i if staged else -1)
        k = groups.get(group)
        if k is None:
            k = groups[group] = len(storages)
            storages.append(OutStorage(
                t.untyped_storage().nbytes() // t.element_size(), as_dtype(t.dtype).name, staged
            ))
            storage_tensors.append(t)
        targets.append(OutTarget(k, layouts[i]))
    return OutCall(outs, storage_tensors, storages, targets)


def as_outs(out: Any) -> tuple[Any, ...]:
    """The tensors of an `out=` argument (a tensor, or a tuple or list of them); anything
    else as a tuple of itself, for `check_outs` to name."""
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def into_outs(outs: tuple[torch.Tensor, ...], results: Any, bump: bool = True) -> Any:
    """The outs of a call given the program's `results`: each result that is not its out
    (an out the program did not write straight) copied in, every result computed before
    any copy -- a result in the memory of an out still to be written is cloned first.
    With `bump`, the version of each out the program wrote straight is bumped (a copy
    bumps its own)."""
    if type(results) is not tuple:
        results = (results,)
    if bump:
        bump_versions(tuple(o for o, r in zip(outs, results, strict=True) if r is o))
    pending = [(o, r) for o, r in zip(outs, results, strict=True) if r is not o]
    ptrs = {o.untyped_storage().data_ptr() for o, _ in pending if o.numel()}
    pending = [(o, r.clone() if r.numel() and r.untyped_storage().data_ptr() in ptrs
                else r) for o, r in pending]
    for o, r in pending:
        o.copy_(r)
    return outs[0] if len(outs) == 1 else outs
