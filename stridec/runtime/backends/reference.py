"""The reference executor: runs any graph op by op with plain torch (numpy for Philox).

It is the oracle every compiled backend is compared against: each op runs as torch
runs it, so every value has torch's values, strides and storage -- a view of an input is
a torch view of the caller's tensor, `contiguous()` of a contiguous tensor is that tensor,
a `copy` to a layout is a new tensor with exactly that layout (offset included).
`as_strided` reads the storage of its operand's tensor, as torch's does. Ops that address
a buffer the compiler made (the explicit copies, placed Philox values) read the
root value's storage as a flat 1-D tensor and gather through the layout's index map
`offset + Σ i_k·stride_k` -- which also covers negative strides, which torch tensors
cannot express.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from stridec.compiler.outputs import check_write_overlap
from stridec.errors import CallError, UnsupportedError, VerificationError
from stridec.ir import ops as O
from stridec.ir.dtypes import as_dtype
from stridec.ir.formats import get_format
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.rules import OpRules
from stridec.runtime.backends.reference_casts import cast
from stridec.runtime.backends.reference_philox import philox_bits, uniform_from_bits
from stridec.runtime.launch import flat_storage, reinterpret

__all__ = [
    "RULES",
    "run_reference",
    "evaluate",
    "pack_reference",
    "unpack_reference",
    "layout_indices",
    "linear_form",
    "gather",
    "scatter",
    "put",
    "flat_storage",
    "reinterpret",
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


# -- the meaning of each op ------------------------------------------------------------
class _Run:
    """What a rule may ask of the run it is part of: the device, the caller's tensor of an
    input, and the flat root storage under a value (ops that address storage: as_strided,
    the explicit copies, placed Philox values). `evaluate` runs one op on logical tensors
    alone: it has no storage to give."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def argument(self, op: Op) -> torch.Tensor:
        raise VerificationError(f"{op.name}: an argument's tensor comes from the executor")

    def storage_of(self, value: Value, what: str) -> torch.Tensor:
        """The flat storage (from element 0) under `value`'s root."""
        raise VerificationError(f"{what}: needs the root storage; run the graph (run_reference)")

    def keep_storage(self, value: Value, storage: torch.Tensor) -> None:
        """`storage` is the flat storage of `value`, a buffer its op made."""


#: The meaning of each op class in plain torch (docs/adding-an-op.md): `rule(run, op,
#: *operand tensors) -> result tensors`, `run` a `_Run`. Registered beside each rule; a
#: class without one names why (`OpRules.declare_none`).
RULES: OpRules[Callable[..., tuple]] = OpRules("reference rule")


@RULES.register(O.InputOp)
def _input_op(run: _Run, op: Any):
    return (run.argument(op),)


@RULES.register(O.OutputOp)
def _output_op(run: _Run, op: Any, *tensors):
    return tensors


@RULES.register(O.FullOp)
def _full_op(run: _Run, op: Any, *tensors):
    full = torch.full(op.sizes, op.value, dtype=op.dtype.torch, device=run.device)
    if not tensors:
        return (full,)
    # torch's full_like: empty_like's layout (the fill goes through torch.full, which
    # holds every dtype's values exactly)
    out = torch.empty_like(tensors[0], dtype=full.dtype,
                           memory_format=getattr(torch, op.memory_format))
    return (out.copy_(full),)


def _natural_philox(op: Any, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The values row-major and the advanced state (the natural form)."""
    bits, new_state = philox_bits(state.cpu().numpy(), op.sizes)
    if isinstance(op, O.PhiloxUniformOp):
        values = uniform_from_bits(bits, op.dtype, op.low, op.high)
        out = torch.from_numpy(values) if not isinstance(values, torch.Tensor) else values
        out = _row_major(out.reshape(op.sizes).to(op.dtype.torch).to(state.device))
    else:
        out = _row_major(torch.from_numpy(bits.astype("uint32")).to(state.device))
    return out, _state_tensor(new_state, state)


@RULES.register(O.PhiloxOp, O.PhiloxUniformOp)
def _philox_op(run: _Run, op: Any, state, into=None):
    """Natural form: the values row-major. Placed form: value `index(j)` lands at `dst(j)`
    of a buffer of result `layout` (the buffer operand's storage, when it has one)."""
    values, new_state = _natural_philox(op, state)
    if op.space is None:
        return values, new_state
    flat = values.reshape(-1)
    layout: Layout = op.layout
    if into is not None:  # written into a buffer in place
        buffer = run.storage_of(op.operands[1], op.name).clone()
    else:
        buffer = torch.zeros(layout.min_storage_size(), dtype=flat.dtype, device=flat.device)
    space = Layout.contiguous(op.space)
    if space.numel:
        indices = layout_indices(op.index, flat.device)
        valid = _valid(space, op.masks, flat.device) if op.masks else None
        if valid is not None:
            indices = torch.where(valid, indices, 0)
        placed = flat[indices] if flat.numel() else torch.zeros(op.space, dtype=flat.dtype)
        if valid is not None:
            placed = _masked(placed, space, op.masks, op.fill)
        scatter(buffer, op.dst, placed)
    run.keep_storage(op.results[0], buffer)
    return _view(buffer, layout), new_state


@RULES.register(O.PermuteOp)
def _permute_op(run: _Run, op: Any, t):
    return (t.permute(op.dims),)


@RULES.register(O.TransposeOp)
def _transpose_op(run: _Run, op: Any, t):
    return (t.transpose(op.dim0, op.dim1),)


@RULES.register(O.ExpandOp)
def _expand_op(run: _Run, op: Any, t):
    return (t.expand(op.sizes),)


@RULES.register(O.SliceOp)
def _slice_op(run: _Run, op: Any, t):
    dim = op.dim % t.dim()
    index = (slice(None),) * dim + (slice(op.start, op.stop, op.step),)
    return (t[index],)


@RULES.register(O.SelectOp)
def _select_op(run: _Run, op: Any, t):
    return (t.select(op.dim, op.index),)


@RULES.register(O.SqueezeOp)
def _squeeze_op(run: _Run, op: Any, t):
    dims = op.dims
    return (t.squeeze() if dims is None else t.squeeze(tuple(dims)),)


@RULES.register(O.UnsqueezeOp)
def _unsqueeze_op(run: _Run, op: Any, t):
    return (t.unsqueeze(op.dim),)


@RULES.register(O.UnfoldOp)
def _unfold_op(run: _Run, op: Any, t):
    return (t.unfold(op.dim, op.size, op.step),)


@RULES.register(O.DiagonalOp)
def _diagonal_op(run: _Run, op: Any, t):
    return (torch.diagonal(t, op.offset, op.dim1, op.dim2),)


@RULES.register(O.AsStridedOp)
def _as_strided_op(run: _Run, op: Any, t):
    """torch's `as_strided` over the storage of the operand's tensor, in elements of the
    result's dtype: a view of it (a buffer this executor made is that tensor's storage
    too). With negative strides, which torch refuses, a gather."""
    dtype = op.result.type.dtype.torch
    storage = reinterpret(run.storage_of(op.operands[0], op.name), dtype)
    layout: Layout = op.result.type.layout
    if any(st < 0 for st in layout.strides):
        # The caller's storage may be smaller than the declared one (a broadcast).
        layout.check_fits(storage.numel(), "as_strided")
        return (gather(storage, layout),)
    if t.dtype != dtype:
        t = reinterpret(t, dtype)
    layout.check_fits(t.untyped_storage().nbytes() // t.element_size(), "as_strided")
    return (torch.as_strided(t, layout.sizes, layout.strides, layout.offset),)


@RULES.register(O.BitcastOp)
def _bitcast_op(run: _Run, op: Any, t):
    return (t.view(op.dtype.torch),)


@RULES.register(O.ReshapeOp, O.ViewShapeOp)
def _reshape_op(run: _Run, op: Any, t):
    return (t.reshape(op.sizes),)


@RULES.register(O.FlattenOp)
def _flatten_op(run: _Run, op: Any, t):
    return (t.flatten(op.start_dim, op.end_dim),)


@RULES.register(O.SplitOp)
def _split_op(run: _Run, op: Any, t):
    s = op.sizes
    return tuple(t.split(s[0] if len(s) == 1 else list(s), op.dim))


def _memory_format(op: Any) -> torch.memory_format:
    return getattr(torch, op.memory_format)


@RULES.register(O.ContiguousOp)
def _contiguous_op(run: _Run, op: Any, t):
    return (t.contiguous(memory_format=_memory_format(op)),)


@RULES.register(O.ToFormatOp)
def _to_format_op(run: _Run, op: Any, t):
    return (t.to(memory_format=_memory_format(op)),)


@RULES.register(O.CloneOp)
def _clone_op(run: _Run, op: Any, t):
    return (t.clone(),)


def _uint32_as_int32(fn: Callable[..., torch.Tensor], t: torch.Tensor, *args: Any) -> tuple:
    """`fn(t, *args)`; torch has no CPU kernel of some ops for uint32: their bit patterns
    (int32) move instead."""
    if t.dtype == torch.uint32:
        return (fn(t.view(torch.int32), *args).view(torch.uint32),)
    return (fn(t, *args),)


@RULES.register(O.PixelShuffleOp)
def _pixel_shuffle_op(run: _Run, op: Any, t):
    return _uint32_as_int32(F.pixel_shuffle, t, op.factor)


@RULES.register(O.PixelUnshuffleOp)
def _pixel_unshuffle_op(run: _Run, op: Any, t):
    return _uint32_as_int32(F.pixel_unshuffle, t, op.factor)


@RULES.register(O.FlipOp)
def _flip_op(run: _Run, op: Any, t):
    return _uint32_as_int32(torch.flip, t, op.dims)


def _copy_buffer(run: _Run, op: Any) -> torch.Tensor:
    """What a copy writes: a copy of its buffer operand's storage, else zeros."""
    dtype = op.dtype.torch
    if op.writes_into:
        return reinterpret(run.storage_of(op.operands[1], op.name), dtype).clone()
    return torch.zeros(op.layout.min_storage_size(), dtype=dtype, device=run.device)


@RULES.register(O.NaturalCopyOp)
def _natural_copy_op(run: _Run, op: Any, *tensors):
    """The operand's elements in a new buffer of the result's layout (and dtype)."""
    layout: Layout = op.layout
    buffer = _copy_buffer(run, op)
    scatter(buffer, layout, cast(tensors[0], op.dtype.torch))
    run.keep_storage(op.result, buffer)
    return (_view(buffer, layout),)


@RULES.register(O.StridedCopyOp, O.MaskedCopyOp, O.FramedCopyOp, O.FillOp)
def _explicit_copy_op(run: _Run, op: Any, *tensors):
    """Each point of `space` reads the operand's root storage at `src` and writes the
    buffer at `dst` (a fill writes `fill`; `fill` where a mask fails; a domain
    restriction, fill None, writes only where every mask holds); `frame` points get
    `fill` first."""
    layout: Layout = op.layout
    dtype = op.dtype.torch
    buffer = _copy_buffer(run, op)
    space = Layout.contiguous(op.space)
    if op.frame:  # the frame around the box gets `fill` (the box is written below)
        framed = op.framed_dst()
        scatter(buffer, framed, torch.full(framed.sizes, op.fill, dtype=dtype,
                                           device=run.device))
    if isinstance(op, O.FillOp):
        values = torch.full(op.space, op.fill, dtype=dtype, device=run.device)
    elif space.numel:  # the source's bytes, in its elements
        storage = reinterpret(run.storage_of(op.operands[0], op.name),
                              op.operands[0].type.dtype.torch)
        indices = layout_indices(op.src, storage.device)
        if op.masks:  # masked points are never read: point them at element 0
            indices = torch.where(_valid(space, op.masks, storage.device), indices, 0)
        values = cast(storage[indices], dtype)
    else:
        values = torch.empty(op.space, dtype=dtype, device=run.device)
    if op.masks and op.fill is None:
        # A domain restriction: only the points where every bound holds are written.
        valid = _valid(space, op.masks, values.device)
        indices = layout_indices(op.dst, values.device)
        put(buffer, indices[valid], values[valid])
    else:
        scatter(buffer, op.dst, _masked(values, space, op.masks, op.fill))
    run.keep_storage(op.result, buffer)
    return (_view(buffer, layout),)


@RULES.register(O.PackOp)
def _pack_op(run: _Run, op: Any, t):
    return (pack_reference(get_format(op.format), t, op.fill),)


@RULES.register(O.UnpackOp)
def _unpack_op(run: _Run, op: Any, t):
    fmt = get_format(op.format)
    sizes = op.logical_sizes(tuple(t.shape), as_dtype(t.dtype))
    return (unpack_reference(fmt, t, sizes),)


@RULES.register(O.PadOp)
def _pad_op(run: _Run, op: Any, t):
    # F.pad places the input; the fill is written as `full` writes it (F.pad reads an
    # int64 fill through a double, turning 2^63 - 1 into -2^63).
    pads = list(op.pad)
    placed = F.pad(t, pads, mode="constant", value=0)
    inside = F.pad(torch.ones(t.shape, dtype=torch.bool, device=t.device), pads, value=False)
    fill = torch.full((), op.value, dtype=t.dtype, device=t.device)
    # Filled in place, so the result keeps F.pad's layout (torch's strides, also for an
    # empty result); uint32 has no masked_fill on the CPU: its int32 bit patterns do.
    bits, fill_bits = placed, fill
    if t.dtype == torch.uint32:
        bits, fill_bits = placed.view(torch.int32), fill.view(torch.int32)
    bits.masked_fill_(~inside, fill_bits)
    return (placed,)


@RULES.register(O.CastOp)
def _cast_op(run: _Run, op: Any, t):
    """torch's bits (`reference_casts.cast`) in the cast's preserve_format layout."""
    if op.aliases_operand():
        return (t,)
    # torch's own preserve_format for the tensor at hand (not the graph's declared layout).
    out = torch.empty_like(t, dtype=op.dtype.torch)
    return (out.copy_(cast(t, op.dtype.torch)),)


@RULES.register(O.CatOp)
def _cat_op(run: _Run, op: Any, *ts):
    return (torch.cat(ts, op.dim),)


def _state_tensor(words: Any, like: torch.Tensor) -> torch.Tensor:
    """Six uint32 words as a tensor of `like`'s dtype (bit pattern), shape and device."""
    t = torch.from_numpy(words.astype("uint32").reshape(-1)).view(like.dtype)
    return t.reshape(like.shape).to(like.device)


def _row_major(t: torch.Tensor) -> torch.Tensor:
    """`t` with row-major strides, an empty one too (numpy gives those stride 0)."""
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    return out.copy_(t) if t.numel() else out


def _valid_points(space: Sequence[int], masks: Sequence[Any], device: Any) -> torch.Tensor:
    """Bool tensor over `space`: where every bound `lo <= Σ coeffs_k·i_k < hi` holds."""
    valid = torch.ones(tuple(space), dtype=torch.bool, device=device)
    for m in masks:
        linear = linear_form(tuple(space), m.coeffs, 0, device)
        valid &= (linear >= m.lo) & (linear < m.hi)
    return valid


def pack_reference(fmt: Any, t: torch.Tensor, fill: Any = 0) -> torch.Tensor:
    """Pack a logical tensor through the format's `Packing` description, in plain torch."""
    p = fmt.packing(tuple(t.shape), as_dtype(t.dtype), fill)
    out = torch.full(p.physical_sizes, fill, dtype=t.dtype, device=t.device)
    if out.numel() == 0:
        return out
    valid = _valid_points(p.space, p.mask, t.device)
    src = layout_indices(p.logical, t.device).clamp(0, max(t.numel() - 1, 0))
    values = (
        t.contiguous().reshape(-1)[src] if t.numel() else torch.full_like(src, 0, dtype=t.dtype)
    )
    dst = layout_indices(p.physical, t.device)
    put(out.view(-1), dst[valid], values[valid])
    return out


def unpack_reference(fmt: Any, t: torch.Tensor, logical_sizes: Sequence[int]) -> torch.Tensor:
    """Unpack a physical tensor to `logical_sizes` through the format's `Packing`, in torch."""
    p = fmt.unpacking(tuple(logical_sizes), as_dtype(t.dtype))
    out = torch.empty(tuple(logical_sizes), dtype=t.dtype, device=t.device)
    if out.numel() == 0:
        return out
    valid = _valid_points(p.space, p.mask, t.device)
    src = layout_indices(p.physical, t.device)[valid]
    dst = layout_indices(p.logical, t.device)[valid]
    put(out.view(-1), dst, t.contiguous().reshape(-1)[src])
    return out


@RULES.register(O.WriteOp)
def _write_op(run: _Run, op: Any, storage: torch.Tensor, dest: torch.Tensor,
              src: torch.Tensor) -> tuple[torch.Tensor]:
    """`dest.copy_(src)` in `storage`'s memory (the caller's tensor, for an input: views of
    it are torch views), cast as the compiled copies cast; a source reading what the write
    overwrites is refused as the compiled graph refuses it. The result is `storage`."""
    if op.src.root() is op.storage and dest.numel() and src.numel():
        check_write_overlap(op.dest.type.layout, op.src.type.layout)
    if src.dtype != dest.dtype:
        src = cast(src, dest.dtype)
    if dest.numel():
        dest.copy_(src)
    return (storage,)


def _rule(op: Op) -> Callable[..., tuple]:
    rule = RULES.lookup(type(op))
    if rule is None:
        why = RULES.why_none(type(op))
        raise UnsupportedError(f"{op.name}: the reference backend has no rule for this op"
                               + (f" ({why})" if why else ""))
    return rule


def evaluate(op: Op, *tensors: torch.Tensor, device: Any = "cpu") -> tuple[torch.Tensor, ...]:
    """The results of `op` on logical operand tensors (`device` places an op without
    operands); `UnsupportedError` for an op without a rule, `VerificationError` for one
    that addresses a root storage (run the graph through `run_reference`)."""
    return tuple(_rule(op)(_Run(device), op, *tensors))


# -- the executor -------------------------------------------------------------------------
def _valid(space: Layout, masks: Any, device: Any) -> torch.Tensor:
    """Where every bound `lo <= Σ coeffs_k·i_k < hi` holds over the space."""
    valid = torch.ones(space.sizes, dtype=torch.bool, device=device)
    for coeffs, lo, hi in masks:
        linear = linear_form(space.sizes, coeffs, 0, device)
        valid &= (linear >= lo) & (linear < hi)
    return valid


# Unsigned words and the signed type of their width: torch.where on the bits (torch 2.11's
# CPU has no `where` for uint32).
_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _masked(values: torch.Tensor, space: Layout, masks: Any, fill: Any) -> torch.Tensor:
    if not masks:
        return values
    valid = _valid(space, masks, values.device)
    fill_t = torch.full((), 0 if fill is None else fill, dtype=values.dtype, device=values.device)
    signed = _SIGNED.get(values.dtype)
    if signed is not None:
        return torch.where(valid, values.view(signed), fill_t.view(signed)).view(values.dtype)
    return torch.where(valid, values, fill_t)


class _Executor(_Run):
    """Runs a graph op by op, each by its class's rule, keeping every value's tensor and
    the flat storage of each root it was asked for."""

    def __init__(self, graph: Graph, device: Any) -> None:
        super().__init__(device)
        self.graph = graph
        self.values: dict[int, torch.Tensor] = {}
        self.storages: dict[int, torch.Tensor] = {}
        self.arguments: dict[int, torch.Tensor] = {}

    def argument(self, op: Op) -> torch.Tensor:
        return self.arguments[id(op.result)]

    def storage_of(self, value: Value, what: str) -> torch.Tensor:
        root = value.root()
        found = self.storages.get(id(root))
        if found is None:
            logical = self.values[id(root)]
            if root.owner.is_argument:
                found = flat_storage(logical)
            else:
                layout = root.type.layout
                found = torch.zeros(
                    layout.min_storage_size(), dtype=logical.dtype, device=logical.device
                )
                scatter(found, layout, logical)
            self.storages[id(root)] = found
        return found

    def keep_storage(self, value: Value, storage: torch.Tensor) -> None:
        self.storages[id(value)] = storage

    def run(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        self.arguments = {id(v): t for v, t in zip(self.graph.inputs, tensors, strict=False)}
        for op in self.graph.ops:
            results = _rule(op)(self, op, *[self.values[id(v)] for v in op.operands])
            if op.is_terminator:
                return tuple(results)
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
        name, expected = v.owner.arg_name, v.type
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

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> g.output(x.flip(2).contiguous())
    >>> t = torch.randn(2, 3, 4)
    >>> (y,) = stridec.run_reference(g, t)
    >>> torch.equal(y, t.flip(2))
    True
    """
    layouts = _caller_layouts(graph, tensors)
    if layouts:
        graph = graph.specialize(layouts)
    device = tensors[0].device if tensors else "cpu"
    return _Executor(graph, device).run(tensors)
