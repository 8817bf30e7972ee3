"""The reference executor: runs any graph op by op with plain torch (numpy for Philox).

It is the oracle every compiled backend is compared against: each op runs as torch
runs it, so every value has torch's values, strides and storage -- a view of an input is
a torch view of the caller's tensor, `contiguous()` of a contiguous tensor is that tensor,
a `copy` to a layout is a new tensor with exactly that layout (offset included).
`as_strided` reads the storage of its operand's tensor, as torch's does. Ops that address
a buffer the compiler made (the explicit form of `copy`, placed Philox values) read the
root value's storage as a flat 1-D tensor and gather through the layout's index map
`offset + Σ i_k·stride_k` -- which also covers negative strides, which torch tensors
cannot express.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from stridec.errors import CallError
from stridec.ir.casts import cast
from stridec.ir.graph import Graph, Value
from stridec.ir.layout import Layout
from stridec.runtime.launch import flat_storage

__all__ = [
    "run_reference",
    "layout_indices",
    "linear_form",
    "gather",
    "scatter",
    "put",
    "flat_storage",
]


def linear_form(
    sizes: Sequence[int], coeffs: Sequence[int], base: int = 0, device: Any = "cpu"
) -> torch.Tensor:
    """`base + Σ i_k·coeffs_k` at every point `i` of `sizes` (any signs), as int64."""
    rank = len(sizes)
    index = torch.full((), base, dtype=torch.int64, device=device)
    for k, (size, c) in enumerate(zip(sizes, coeffs, strict=False)):
        shape = [1] * rank
        shape[k] = size
        index = index + (torch.arange(size, device=device, dtype=torch.int64) * c).view(shape)
    return index.expand(tuple(sizes)) if rank else index


def layout_indices(layout: Layout, device: Any = "cpu") -> torch.Tensor:
    """Storage index of every element, shaped like the layout: `offset + Σ i_k·stride_k`."""
    return linear_form(layout.sizes, layout.strides, layout.offset, device)


def gather(storage: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The logical tensor a layout reads from a flat storage."""
    if layout.numel == 0:
        return storage.new_empty(layout.sizes)
    return storage[layout_indices(layout, storage.device)]


def put(storage: torch.Tensor, indices: torch.Tensor, values: torch.Tensor) -> None:
    """`storage[indices] = values` for every stridec dtype.

    torch has no `index_put` for uint32, so its bits go through an int32 view.
    """
    values = values.to(storage.dtype)
    if storage.dtype == torch.uint32:
        storage, values = storage.view(torch.int32), values.view(torch.int32)
    storage[indices] = values


def scatter(storage: torch.Tensor, layout: Layout, values: torch.Tensor) -> None:
    """Write `values` (logical, shaped like the layout) into `storage` through the layout."""
    if layout.numel == 0:
        return
    put(storage, layout_indices(layout, storage.device), values)


def _view(storage: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The tensor `layout` makes of a flat `storage`: a view sharing it."""
    return torch.as_strided(storage, layout.sizes, layout.strides, layout.offset)


def _valid(space: Layout, masks: Any, device: Any) -> torch.Tensor:
    """Where every bound `lo <= Σ coeffs_k·i_k < hi` holds over the space."""
    valid = torch.ones(space.sizes, dtype=torch.bool, device=device)
    for coeffs, lo, hi in masks:
        linear = linear_form(space.sizes, coeffs, 0, device)
        valid &= (linear >= lo) & (linear < hi)
    return valid


def _masked(values: torch.Tensor, space: Layout, masks: Any, fill: Any) -> torch.Tensor:
    if not masks:
        return values
    valid = _valid(space, masks, values.device)
    fill_t = torch.full((), 0 if fill is None else fill, dtype=values.dtype, device=values.device)
    return torch.where(valid, values, fill_t)


class _Executor:
    def __init__(self, graph: Graph, device: Any) -> None:
        self.graph = graph
        self.device = device
        self.values: dict[int, torch.Tensor] = {}
        self.storages: dict[int, torch.Tensor] = {}

    def storage_of(self, value: Value) -> torch.Tensor:
        root = value.root()
        found = self.storages.get(id(root))
        if found is None:
            logical = self.values[id(root)]
            if root.owner.name == "input":
                found = flat_storage(logical)
            else:
                layout = root.type.layout
                found = torch.zeros(
                    layout.min_storage_size(), dtype=logical.dtype, device=logical.device
                )
                scatter(found, layout, logical)
            self.storages[id(root)] = found
        return found

    def run_copy(self, op: Any, args: list[torch.Tensor]) -> torch.Tensor:
        a = op.attrs
        layout: Layout = a["layout"]
        dtype = a["dtype"].torch
        if len(op.operands) == 2:
            buffer = self.storage_of(op.operands[1]).clone()
        else:
            buffer = torch.zeros(layout.min_storage_size(), dtype=dtype, device=self.device)
        if a["space"] is None:
            scatter(buffer, layout, cast(args[0], dtype))
            self.storages[id(op.result)] = buffer
            return _view(buffer, layout)
        space = Layout.contiguous(a["space"])
        if op.operands and space.numel:
            storage = self.storage_of(op.operands[0])
            indices = layout_indices(a["src"], storage.device)
            if a["masks"]:  # masked points are never read: point them at element 0
                indices = torch.where(_valid(space, a["masks"], storage.device), indices, 0)
            values = cast(storage[indices], dtype)
        elif op.operands:
            values = torch.empty(a["space"], dtype=dtype, device=self.device)
        else:
            values = torch.full(a["space"], a["fill"], dtype=dtype, device=self.device)
        if a["masks"] and a["fill"] is None:
            # A domain restriction: only the points where every bound holds are written.
            valid = _valid(space, a["masks"], values.device)
            indices = layout_indices(a["dst"], values.device)
            put(buffer, indices[valid], values[valid])
        else:
            scatter(buffer, a["dst"], _masked(values, space, a["masks"], a["fill"]))
        self.storages[id(op.result)] = buffer
        return _view(buffer, layout)

    def run_placed_philox(self, op: Any, args: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Philox values written through an index map: value `index(j)` lands at `dst(j)`."""
        a = op.attrs
        values, new_state = op.reference(args[0])
        flat = values.reshape(-1)
        layout: Layout = a["layout"]
        if len(op.operands) == 2:  # written into a buffer in place
            buffer = self.storage_of(op.operands[1]).clone()
        else:
            buffer = torch.zeros(layout.min_storage_size(), dtype=flat.dtype, device=flat.device)
        space = Layout.contiguous(a["space"])
        if space.numel:
            indices = layout_indices(a["index"], flat.device)
            valid = _valid(space, a["masks"], flat.device) if a["masks"] else None
            if valid is not None:
                indices = torch.where(valid, indices, 0)
            placed = flat[indices] if flat.numel() else torch.zeros(a["space"], dtype=flat.dtype)
            if valid is not None:
                placed = _masked(placed, space, a["masks"], a["fill"])
            scatter(buffer, a["dst"], placed)
        self.storages[id(op.results[0])] = buffer
        return _view(buffer, layout), new_state

    def run_as_strided(self, op: Any, t: torch.Tensor) -> torch.Tensor:
        """torch's `as_strided` over the storage of the operand's tensor: a view of it.
        Over a buffer the compiler made, or with negative strides, a gather."""
        layout: Layout = op.result.type.layout
        root = op.operands[0].root()
        if id(root) in self.storages or any(st < 0 for st in layout.strides):
            storage = self.storage_of(op.operands[0])
            # The caller's storage may be smaller than the declared one (a broadcast).
            layout.check_fits(storage.numel(), "as_strided")
            return gather(storage, layout)
        layout.check_fits(t.untyped_storage().nbytes() // t.element_size(), "as_strided")
        return torch.as_strided(t, layout.sizes, layout.strides, layout.offset)

    def run(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        by_input = {id(v): t for v, t in zip(self.graph.inputs, tensors, strict=False)}
        for op in self.graph.ops:
            args = [self.values[id(v)] for v in op.operands]
            if op.name == "input":
                results: tuple = (by_input[id(op.result)],)
            elif op.name == "output":
                return tuple(args)
            elif op.name == "as_strided":
                results = (self.run_as_strided(op, args[0]),)
            elif op.name == "copy":
                results = (self.run_copy(op, args),)
            elif op.name in ("philox", "philox_uniform") and op.attrs["space"] is not None:
                results = self.run_placed_philox(op, args)
            elif op.name == "full":
                results = op.reference(device=self.device)
            else:
                results = op.reference(*args)
            for r, t in zip(op.results, results, strict=False):
                self.values[id(r)] = t
        return ()


def _caller_layouts(graph: Graph, tensors: Sequence[Any]) -> dict[str, Layout]:
    """Check the arguments (CallError); return the caller's layouts that differ from the
    declared ones, by input name."""
    inputs = graph.inputs
    if len(tensors) != len(inputs):
        raise CallError(f"{graph.name}: expected {len(inputs)} tensor(s); got {len(tensors)}")
    layouts: dict[str, Layout] = {}
    device = None
    for v, t in zip(inputs, tensors, strict=True):
        name, expected = v.owner.attrs["name"], v.type
        if not isinstance(t, torch.Tensor):
            raise CallError(f"input '{name}': expected a torch.Tensor; got {type(t).__name__}")
        if tuple(t.shape) != expected.sizes or t.dtype != expected.dtype.torch:
            raise CallError(
                f"input '{name}': expected sizes {list(expected.sizes)} and dtype "
                f"{expected.dtype}; got {list(t.shape)} {t.dtype}"
            )
        if device is not None and t.device != device:
            raise CallError(f"input '{name}': expected device {device}; got {t.device}")
        device = t.device
        layout = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
        if not layout.same_addresses(expected.layout):
            layouts[name] = layout
    return layouts


def run_reference(graph: Graph, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Run `graph` on `tensors` with plain torch; returns the outputs as a tuple.

    As a compiled graph is, the graph is first specialized to the caller's strides and
    offsets, so that `as_strided` (and a reshape's choice between view and copy) reads the
    storage the caller passed, as torch would.
    """
    layouts = _caller_layouts(graph, tensors)
    if layouts:
        graph = graph.specialize(layouts)
    device = tensors[0].device if tensors else "cpu"
    return _Executor(graph, device).run(tensors)
