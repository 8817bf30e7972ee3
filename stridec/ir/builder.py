"""The Python builder: `Graph` source methods and `Value` methods that mirror `torch.Tensor`.

g = Graph("nhwc")
x = g.input("x", (2, 3, 4, 5), "float16")
g.output(x.permute(0, 2, 3, 1).contiguous())
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any

from stridec.errors import LayoutError, ShapeError, StridecError, VerificationError
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout

__all__ = ["cat", "pad", "emit"]


def emit(graph: Graph | None, cls: type[Op], operands: Sequence[Value], attrs: dict) -> Any:
    """Build `cls` on `operands`, check it, append it to `graph`; return its result (or results).

    A refused op leaves no trace: its uses are dropped from its operands again.
    """
    if graph is None:
        raise VerificationError(f"{cls.name}: operands belong to no graph")
    op = cls(operands, attrs)
    try:
        op.verify_()
        graph.append(op)
    except StridecError:
        op.drop_uses()
        raise
    return op.results[0] if len(op.results) == 1 else tuple(op.results)


def _dims(args: tuple) -> tuple[int, ...]:
    """Accept `f(0, 2, 1)` and `f((0, 2, 1))` as torch does."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return tuple(args)


# -- Graph sources -----------------------------------------------------------------------
def _input(
    self: Graph,
    name: str,
    sizes: Sequence[int],
    dtype: Any = "float32",
    strides: Sequence[int] | None = None,
    offset: int = 0,
    storage: int | None = None,
    layout: Layout | None = None,
) -> Value:
    """A graph argument. `strides`, `offset` and `storage` (elements) declare the caller's
    buffer as DirectML's `DML_BUFFER_TENSOR_DESC` does (packed when absent): the graph is
    planned for it, e.g. an `as_strided` reading the padding of a pitched buffer."""
    if strides is not None or offset:
        if layout is not None:
            raise VerificationError(f"input '{name}': give strides and offset, or a layout")
        sizes = tuple(sizes)
        layout = Layout(sizes, tuple(strides) if strides is not None else
                        Layout.contiguous(sizes).strides, offset)
    if layout is not None and layout == Layout.contiguous(tuple(sizes)):
        layout = None  # packed: the default, printed as such
    attrs = {"name": name, "sizes": tuple(sizes), "dtype": dtype, "layout": layout,
             "storage": storage}
    return emit(self, O.InputOp, (), attrs)


def _full(self: Graph, sizes: Sequence[int], value: float, dtype: Any = "float32") -> Value:
    return emit(self, O.FullOp, (), {"sizes": tuple(sizes), "value": value, "dtype": dtype})


def _philox(self: Graph, state: Value, sizes: Sequence[int]) -> tuple[Value, Value]:
    return emit(self, O.PhiloxOp, (state,), {"sizes": tuple(sizes)})


def _philox_uniform(
    self: Graph,
    state: Value,
    sizes: Sequence[int],
    dtype: Any = "float32",
    low: float = 0.0,
    high: float = 1.0,
) -> tuple[Value, Value]:
    return emit(
        self,
        O.PhiloxUniformOp,
        (state,),
        {"sizes": tuple(sizes), "dtype": dtype, "low": low, "high": high},
    )


def _output(self: Graph, *values: Value) -> None:
    if self.output_op is not None:
        raise VerificationError(f"output: graph {self.name!r} already has an output op")
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = tuple(values[0])
    emit(self, O.OutputOp, values, {})


Graph.input = _input  # type: ignore[attr-defined]
Graph.full = _full  # type: ignore[attr-defined]
Graph.philox = _philox  # type: ignore[attr-defined]
Graph.philox_uniform = _philox_uniform  # type: ignore[attr-defined]
Graph.output = _output  # type: ignore[attr-defined]


# -- Value methods -----------------------------------------------------------------------
def _method(fn: Any) -> Any:
    setattr(Value, fn.__name__, fn)
    return fn


@_method
def permute(self: Value, *dims: int) -> Value:
    return emit(self.graph, O.PermuteOp, (self,), {"dims": _dims(dims)})


@_method
def transpose(self: Value, dim0: int, dim1: int) -> Value:
    return emit(self.graph, O.TransposeOp, (self,), {"dim0": dim0, "dim1": dim1})


@_method
def t(self: Value) -> Value:
    if self.ndim > 2:
        raise LayoutError(f"t: expects a tensor of rank <= 2; got rank {self.ndim}")
    return self if self.ndim < 2 else self.transpose(0, 1)


@_method
def expand(self: Value, *sizes: int) -> Value:
    return emit(self.graph, O.ExpandOp, (self,), {"sizes": _dims(sizes)})


@_method
def expand_as(self: Value, other: Value) -> Value:
    return self.expand(other.shape)


@_method
def slice(
    self: Value, dim: int, start: int | None = None, stop: int | None = None, step: int = 1
) -> Value:
    return emit(
        self.graph, O.SliceOp, (self,), {"dim": dim, "start": start, "stop": stop, "step": step}
    )


@_method
def narrow(self: Value, dim: int, start: int, length: int) -> Value:
    size = self.shape[dim] if -self.ndim <= dim < self.ndim else None
    if size is None:
        raise LayoutError(f"narrow: dim {dim} out of range for rank {self.ndim}")
    if start < 0:
        start += size
    if not (0 <= start <= size and 0 <= length <= size - start):
        raise LayoutError(
            f"narrow: start {start} and length {length} exceed dim {dim} of size {size}"
        )
    return self.slice(dim, start, start + length, 1)


@_method
def select(self: Value, dim: int, index: int) -> Value:
    return emit(self.graph, O.SelectOp, (self,), {"dim": dim, "index": index})


@_method
def squeeze(self: Value, dim: int | Sequence[int] | None = None) -> Value:
    dims = None if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return emit(self.graph, O.SqueezeOp, (self,), {"dims": dims})


@_method
def unsqueeze(self: Value, dim: int) -> Value:
    return emit(self.graph, O.UnsqueezeOp, (self,), {"dim": dim})


@_method
def flip(self: Value, *dims: int) -> Value:
    return emit(self.graph, O.FlipOp, (self,), {"dims": _dims(dims)})


@_method
def reshape(self: Value, *sizes: int) -> Value:
    return emit(self.graph, O.ReshapeOp, (self,), {"sizes": _dims(sizes)})


@_method
def view(self: Value, *sizes: int) -> Value:
    return emit(self.graph, O.ViewShapeOp, (self,), {"sizes": _dims(sizes)})


@_method
def flatten(self: Value, start_dim: int = 0, end_dim: int = -1) -> Value:
    return emit(self.graph, O.FlattenOp, (self,), {"start_dim": start_dim, "end_dim": end_dim})


@_method
def unflatten(self: Value, dim: int, sizes: Sequence[int]) -> Value:
    rank = self.ndim
    if not -rank <= dim < rank:
        raise LayoutError(f"unflatten: dim {dim} out of range for rank {rank}")
    dim %= rank
    shape = self.shape
    return self.view(shape[:dim] + tuple(sizes) + shape[dim + 1 :])


@_method
def movedim(self: Value, source: int | Sequence[int], destination: int | Sequence[int]) -> Value:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    rank = self.ndim
    if len(src) != len(dst):
        raise LayoutError(f"movedim: source {src} and destination {dst} differ in length")
    for d in src + dst:
        if not -rank <= d < rank:
            raise LayoutError(f"movedim: dim {d} out of range for rank {rank}")
    src = tuple(d % rank for d in src)
    dst = tuple(d % rank for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise LayoutError(f"movedim: repeated dim in source {src} or destination {dst}")
    order: list[int | None] = [None] * rank
    for s, d in zip(src, dst, strict=False):
        order[d] = s
    rest = iter(d for d in range(rank) if d not in src)
    perm = tuple(next(rest) if o is None else o for o in order)
    return self.permute(perm)


@_method
def unfold(self: Value, dimension: int, size: int, step: int) -> Value:
    return emit(self.graph, O.UnfoldOp, (self,), {"dim": dimension, "size": size, "step": step})


@_method
def as_strided(
    self: Value, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Value:
    return emit(
        self.graph,
        O.AsStridedOp,
        (self,),
        {"sizes": tuple(size), "strides": tuple(stride), "offset": storage_offset},
    )


@_method
def split(self: Value, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple:
    sizes = split_size_or_sections
    if isinstance(sizes, int):
        sizes = (sizes,)
    else:
        sizes = tuple(sizes)
        if len(sizes) == 1 and -self.ndim <= dim < self.ndim and sizes[0] != self.shape[dim]:
            # One section must be the whole dim, as in torch; the op reads `[n]` as a chunk.
            raise LayoutError(
                f"split: sections {list(sizes)} must sum to {self.shape[dim]} (dim {dim})"
            )
    out = emit(self.graph, O.SplitOp, (self,), {"sizes": sizes, "dim": dim})
    return out if isinstance(out, tuple) else (out,)


@_method
def chunk(self: Value, chunks: int, dim: int = 0) -> tuple:
    if chunks <= 0:
        raise LayoutError(f"chunk: chunks must be positive; got {chunks}")
    rank = self.ndim
    if not -rank <= dim < rank:
        raise LayoutError(f"chunk: dim {dim} out of range for rank {rank}")
    length = self.shape[dim]
    if length == 0:  # torch gives `chunks` empty pieces here, not one
        return self.split((0,) * chunks, dim)
    return self.split(-(-length // chunks), dim)


@_method
def contiguous(self: Value) -> Value:
    return emit(self.graph, O.ContiguousOp, (self,), {})


@_method
def clone(self: Value) -> Value:
    """torch's `clone()`: new memory, strides as torch's `preserve_format` keeps them."""
    return emit(self.graph, O.CloneOp, (self,), {})


@_method
def copy_to(
    self: Value, layout: Layout | Sequence[int] | None = None, dtype: Any = None, offset: int = 0
) -> Value:
    """Materialize into a new buffer with `layout` (a Layout, or strides for these sizes)."""
    if layout is not None and not isinstance(layout, Layout):
        layout = Layout(self.shape, tuple(layout), offset)
    return emit(self.graph, O.CopyOp, (self,), {"layout": layout, "dtype": dtype})


@_method
def to(self: Value, dtype: Any) -> Value:
    return emit(self.graph, O.CastOp, (self,), {"dtype": dtype})


@_method
def pack(self: Value, format: str, fill: float = 0) -> Value:
    return emit(self.graph, O.PackOp, (self,), {"format": format, "fill": fill})


@_method
def unpack(self: Value, format: str, channels: int) -> Value:
    return emit(self.graph, O.UnpackOp, (self,), {"format": format, "channels": channels})


def _getitem(self: Value, index: Any) -> Value:
    """torch indexing with ints, slices (steps ≥ 1), None and `...`."""
    if not isinstance(index, tuple):
        index = (index,)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise LayoutError("index: an index can only have a single ellipsis ('...')")
    if consumed > self.ndim:
        raise LayoutError(f"index: too many indices ({consumed}) for a tensor of rank {self.ndim}")
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([builtins.slice(None)] * (self.ndim - consumed))
        else:
            expanded.append(i)
    out, dim = self, 0
    for i in expanded:
        if i is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(i, bool) or not isinstance(i, (int, builtins.slice)):
            raise LayoutError(f"index: expected int, slice, None or '...'; got {type(i).__name__}")
        elif isinstance(i, int):
            out = out.select(dim, i)
        else:
            if i != builtins.slice(None):
                out = out.slice(dim, i.start, i.stop, 1 if i.step is None else i.step)
            dim += 1
    return out


Value.__getitem__ = _getitem  # type: ignore[attr-defined]


@_method
def __iter__(self: Value) -> Iterator[Value]:
    """The slices along dim 0, as iterating a torch tensor gives (without this, Python
    would iterate through `__getitem__` until it raised)."""
    if self.ndim == 0:
        raise LayoutError("iter: cannot iterate over a rank-0 value")
    return iter([self.select(0, i) for i in range(self.shape[0])])


# -- module functions ------------------------------------------------------------------
def cat(tensors: Sequence[Value], dim: int = 0) -> Value:
    """torch.cat: one output buffer, each input written into a slice of it."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat: expected a non-empty sequence of values; got none")
    return emit(tensors[0].graph, O.CatOp, tensors, {"dim": dim})


def pad(value: Value, pad: Sequence[int], mode: str = "constant", fill: float = 0) -> Value:
    """torch.nn.functional.pad with constant mode."""
    if mode != "constant":
        from stridec.errors import UnsupportedError

        raise UnsupportedError(f"pad: mode must be 'constant'; got {mode!r}")
    return emit(value.graph, O.PadOp, (value,), {"pad": tuple(pad), "value": fill})
