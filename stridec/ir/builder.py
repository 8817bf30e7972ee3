"""The Python builder: `Graph` source methods and `Value` methods that mirror `torch.Tensor`.

g = Graph("nhwc")
x = g.input("x", (2, 3, 4, 5), "float16")
g.output(x.permute(0, 2, 3, 1).contiguous())

The builder sits on top of the IR core (`stridec.ir.graph`), which does not know it:
the methods of `GraphBuilder` and `ValueBuilder` are added to `Graph` and `Value` when
this module loads (`_add_surface`), as the `stridec.ir` package does first.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Iterator, Sequence
from typing import Any

from stridec.errors import (
    LayoutError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir import ops as O
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DTYPES, DType, as_dtype, promote_types
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.symbols import Sym, as_sizes, exact_div

__all__ = [
    "GraphBuilder", "ValueBuilder", "cat", "stack", "hstack", "vstack", "dstack", "pad",
    "pixel_shuffle", "pixel_unshuffle", "full_like", "emit", "SURFACE", "FUNCTIONS", "einsum",
    "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d", "VIEW_COPIES",
    "permute_copy", "transpose_copy", "t_copy", "expand_copy", "view_copy", "squeeze_copy",
    "unsqueeze_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy",
    "unbind_copy", "diagonal_copy", "as_strided_copy", "unfold_copy", "detach_copy",
    "alias_copy", "replay_views",
]


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


def _sizes(args: tuple, keyword: Any, call: str, name: str) -> tuple:
    """`f(2, 3)`, `f((2, 3))` or torch's keyword form `f(name=(2, 3))`."""
    if keyword is None:
        return _dims(args)
    if args:
        raise VerificationError(f"{call}: '{name}' given by position and by keyword")
    return _dims((keyword,))


def _is_int(value: Any) -> bool:
    """An int where torch takes one: a Python int or anything with `__index__` (numpy
    integers), never a bool or a sequence."""
    return not isinstance(value, (bool, list, tuple)) and hasattr(type(value), "__index__")


def _is_dtype(value: Any) -> bool:
    """A dtype where torch's `view` takes one: a stridec `DType`, a torch dtype, or a
    dtype's name ("int8"; no symbol is named so)."""
    if isinstance(value, str):
        return value in DTYPES
    return isinstance(value, DType) or type(value).__name__ == "dtype"


def _int_or_ints(value: Any) -> tuple[Any, ...]:
    """`3` or `(3, 4)` as a tuple."""
    return (operator.index(value),) if _is_int(value) else tuple(value)


def _symbolic(sizes: Any, what: str) -> Any:
    """Sizes where a str names a symbol (`("N", 64)`, docs/symbolic.md); anything else
    as given, for the op to check."""
    if isinstance(sizes, (list, tuple)) and any(isinstance(s, str) for s in sizes):
        return as_sizes(sizes, what)
    return sizes


def _space_layout(layout: Layout | None, space: Sequence[int], into: Value | None) -> Any:
    """An explicit copy's result layout: the one given, else the buffer's, else row-major
    over its iteration space."""
    if layout is not None or into is not None:
        return layout
    return Layout.contiguous(tuple(space))


# -- Graph sources -----------------------------------------------------------------------
class GraphBuilder:
    """The `Graph` methods that add sources and the output (`g.input`, `g.full`, …)."""

    def input(
        self,
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
        planned for it, e.g. an `as_strided` reading the padding of a pitched buffer.

        >>> a = g.input("a", (2, 3), "float16")
        >>> print(a.type)
        tensor<2x3xf16>
        >>> b = g.input("b", (2, 3), "float16", strides=(1, 2))   # declared: column-major
        >>> print(b.type)
        tensor<2x3xf16, strided<[1, 2], offset: 0>>
        """
        sizes = _symbolic(sizes, f"input '{name}': sizes")
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


    def full(self, sizes: Sequence[int], value: float, dtype: Any = "float32") -> Value:
        """A new tensor of `sizes` filled with `value` (torch.full), row-major.

        >>> print(g.full((2, 3), -1.0).type)
        tensor<2x3xf32>
        """
        sizes = tuple(_symbolic(sizes, "full: sizes"))
        return emit(self, O.FullOp, (), {"sizes": sizes, "value": value, "dtype": dtype})


    def fill(
        self, layout: Layout, value: float, dtype: Any = "float32",
        space: Sequence[int] | None = None, dst: Layout | None = None,
    ) -> Value:
        """A new buffer of `layout` whose points `dst(i)` over `space` hold `value` (the
        `fill` op, docs/text-ir.md; by default the whole layout); the others are zeros.

        >>> print(g.fill(Layout((2, 3), (1, 2)), 1.5).type)
        tensor<2x3xf32, strided<[1, 2], offset: 0>>
        """
        dst = layout if dst is None else dst
        space = dst.sizes if space is None else tuple(space)
        return emit(self, O.FillOp, (), {"layout": layout, "dtype": dtype, "space": space,
                                         "dst": dst, "fill": value})


    def philox(self, state: Value, sizes: Sequence[int]) -> tuple[Value, Value]:
        """Philox4x32-10 random bits as DirectML's DML_RANDOM_GENERATOR (docs/philox.md):
        `state` is 6 words (a counter of 4, a key of 2); returns (bits, the state advanced
        by one counter per 4 elements), both new memory.

        >>> s = g.input("s", (6,), "int32")
        >>> bits, state = g.philox(s, (2, 8))
        >>> print(bits.type, state.type)
        tensor<2x8xui32> tensor<6xi32>
        """
        sizes = tuple(_symbolic(sizes, "philox: sizes"))
        return emit(self, O.PhiloxOp, (state,), {"sizes": sizes})


    def philox_uniform(
        self,
        state: Value,
        sizes: Sequence[int],
        dtype: Any = "float32",
        low: float = 0.0,
        high: float = 1.0,
    ) -> tuple[Value, Value]:
        """Uniform floats in [low, high) from the Philox bits of `state` (docs/philox.md),
        in the same kernel; returns (values, the advanced state).

        >>> s = g.input("s", (6,), "int32")
        >>> u, state = g.philox_uniform(s, (2, 8), "float16")
        >>> print(u.type)
        tensor<2x8xf16>
        """
        sizes = tuple(_symbolic(sizes, "philox_uniform: sizes"))
        return emit(
            self,
            O.PhiloxUniformOp,
            (state,),
            {"sizes": sizes, "dtype": dtype, "low": low, "high": high},
        )


    def output(self, *values: Value, reviews: Sequence[str] = ()) -> None:
        """End the graph: `values` are its results, in order; no op may follow. `reviews`:
        the arguments the last `len(reviews)` values re-view (`OutputOp`; `stridec.trace`
        records `x.t_()` on an argument so).

        >>> g.output(x.transpose(0, 1).contiguous(), x)
        >>> print(g, end="")
        graph @g {
          %x = input {name = "x"} : tensor<2x3x4xf32>
          %0 = transpose %x {dim0 = 0, dim1 = 1} : tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>
          %1 = contiguous %0 : tensor<3x2x4xf32>
          output %1, %x
        }
        """
        if self.output_op is not None:
            raise VerificationError(f"output: graph {self.name!r} already has an output op")
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = tuple(values[0])
        emit(self, O.OutputOp, values, {"reviews": tuple(reviews) or None})


# -- Value methods -----------------------------------------------------------------------
def _memory_format(call: str, memory_format: Any, rank: int) -> str | None:
    """A memory format's name (None for `preserve_format`), checked against the rank."""
    if str(memory_format).removeprefix("torch.") == "preserve_format":
        return None
    name = O.memory_format_name(call, memory_format)
    needs = O.MEMORY_FORMATS[name]
    if needs is not None and rank != needs[0]:
        raise ShapeError(f"{call}: memory_format {name} needs a tensor of rank {needs[0]}; "
                         f"got rank {rank}")
    return name


def _fresh(v: Value) -> Value:
    """`v` in new memory, row-major: what torch's composites (repeat, roll, …) return,
    even where every step here was a view."""
    return v.copy_to(Layout.contiguous(v.shape))


def _cast(name: str, dtype: str) -> Any:
    """The method `name`: `.to(dtype)`, as torch's `Tensor.<name>()`."""

    def cast(self: Value) -> Value:
        return self.to(dtype)  # type: ignore[attr-defined]

    cast.__name__ = name
    cast.__qualname__ = f"ValueBuilder.{name}"
    short = DTYPES[dtype].short
    cast.__doc__ = (f"`.to({dtype})`, as torch's `Tensor.{name}()`.\n\n"
                    f">>> print(x.{name}().type)\ntensor<2x3x4x{short}>")
    return cast


class ValueBuilder:
    """The `Value` methods that mirror `torch.Tensor`'s (`permute`, `__getitem__`, `to`, …):
    each builds its op in the value's graph. Their examples start from

    >>> g = stridec.Graph("g")
    >>> x = g.input("x", (2, 3, 4), "float32")
    >>> print(x.type)                       # row-major: strides (12, 4, 1)
    tensor<2x3x4xf32>
    """

    __slots__ = ()

    def permute(self, *args: int, dims: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.permute`: the dims reordered, a view (strides permuted).

        >>> print(x.permute(2, 0, 1).type)
        tensor<4x2x3xf32, strided<[1, 12, 4], offset: 0>>
        """
        return emit(self.graph, O.PermuteOp, (self,),
                    {"dims": _sizes(args, dims, "permute", "dims")})


    def transpose(self, dim0: int, dim1: int) -> Value:
        """As `torch.Tensor.transpose`: dims `dim0` and `dim1` swapped, a view.

        >>> print(x.transpose(0, 2).type)
        tensor<4x3x2xf32, strided<[1, 4, 12], offset: 0>>
        """
        return emit(self.graph, O.TransposeOp, (self,), {"dim0": dim0, "dim1": dim1})


    def t(self) -> Value:
        """As `torch.Tensor.t`: a matrix transposed (a value of rank < 2 itself), a view.

        >>> print(x[0].t().type)
        tensor<4x3xf32, strided<[1, 4], offset: 0>>
        """
        if self.ndim > 2:
            raise LayoutError(f"t: expects a tensor of rank <= 2; got rank {self.ndim}")
        return self if self.ndim < 2 else self.transpose(0, 1)


    def expand(self, *args: int, size: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.expand`: size-1 dims (and new leading dims) broadcast to `size`
        with stride 0, a view.

        >>> print(x[:, :1].expand(2, 3, 4).type)
        tensor<2x3x4xf32, strided<[12, 0, 1], offset: 0>>
        """
        return emit(self.graph, O.ExpandOp, (self,),
                    {"sizes": _sizes(args, size, "expand", "size")})


    def expand_as(self, other: Value) -> Value:
        """As `torch.Tensor.expand_as`: `expand` to `other`'s sizes.

        >>> print(x[:1].expand_as(x).type)
        tensor<2x3x4xf32, strided<[0, 4, 1], offset: 0>>
        """
        return self.expand(other.shape)


    def slice(
        self, dim: int, start: int | None = None, stop: int | None = None, step: int = 1
    ) -> Value:
        """`x[start:stop:step]` along `dim` (torch's slicing: negative indices wrap, bounds
        clamp, `step` >= 1), a view.

        >>> print(x.slice(2, 1, None, 2).type)
        tensor<2x3x2xf32, strided<[12, 4, 2], offset: 1>>
        """
        return emit(
            self.graph, O.SliceOp, (self,), {"dim": dim, "start": start, "stop": stop, "step": step}
        )


    def narrow(self, dim: int, start: int, length: int) -> Value:
        """As `torch.Tensor.narrow`: `length` entries of `dim` from `start`, a view.

        >>> print(x.narrow(1, 1, 2).type)
        tensor<2x2x4xf32, strided<[12, 4, 1], offset: 4>>
        """
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


    def select(self, dim: int, index: int) -> Value:
        """As `torch.Tensor.select`: entry `index` of `dim`, which goes, a view.

        >>> print(x.select(1, 2).type)
        tensor<2x4xf32, strided<[12, 1], offset: 8>>
        """
        return emit(self.graph, O.SelectOp, (self,), {"dim": dim, "index": index})


    def squeeze(self, dim: int | Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.squeeze`: size-1 dims (those of `dim`, or all) removed, a view.

        >>> print(x[:, :1].squeeze(1).type)
        tensor<2x4xf32, strided<[12, 1], offset: 0>>
        """
        dims = None if dim is None else _int_or_ints(dim)
        return emit(self.graph, O.SqueezeOp, (self,), {"dims": dims})


    def unsqueeze(self, dim: int) -> Value:
        """As `torch.Tensor.unsqueeze`: a size-1 dim inserted at `dim`, a view.

        >>> print(x.unsqueeze(0).type)
        tensor<1x2x3x4xf32>
        """
        return emit(self.graph, O.UnsqueezeOp, (self,), {"dim": dim})


    def flip(self, *args: int, dims: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.flip`: `dims` reversed, in new memory as torch's (the compiler
        reads the operand backwards: negative strides, no copy of its own).

        >>> print(x.flip(2).type)
        tensor<2x3x4xf32>
        """
        return emit(self.graph, O.FlipOp, (self,), {"dims": _sizes(args, dims, "flip", "dims")})


    def reshape(self, *args: int, shape: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.reshape`: a view where the strides allow one (`Layout.view`),
        else a row-major copy.

        >>> print(x.reshape(6, 4).type)
        tensor<6x4xf32>
        >>> print(x.transpose(0, 2).reshape(-1).type)   # a copy: no view has these strides
        tensor<24xf32>
        """
        return emit(self.graph, O.ReshapeOp, (self,),
                    {"sizes": _sizes(args, shape, "reshape", "shape")})


    def view(self, *args: int, size: Sequence[int] | None = None, dtype: Any = None) -> Value:
        """As `torch.Tensor.view`: a view of new sizes (`-1` inferred); a `LayoutError` where
        the strides allow none. `view(dtype)` reads the bytes as elements of `dtype` (a
        `bitcast`, sharing the memory): the value itself for its own dtype; of another
        element size, the last dim scaled as torch scales it (`Layout.view_dtype`).

        >>> print(x.view(2, 12).type)
        tensor<2x12xf32>
        >>> print(x.view("int16").type)
        tensor<2x3x8xi16>
        """
        if dtype is None and size is None and len(args) == 1 and _is_dtype(args[0]):
            args, dtype = (), args[0]
        if dtype is not None:
            if args or size is not None:
                raise VerificationError("view: expected new sizes or a dtype, not both; got "
                                        f"{list(args) or size} and {dtype!r}")
            if as_dtype(dtype, "view: dtype") == self.type.dtype:
                return self  # as torch: the tensor itself
            return emit(self.graph, O.BitcastOp, (self,), {"dtype": dtype})
        return emit(self.graph, O.ViewShapeOp, (self,),
                    {"sizes": _sizes(args, size, "view", "size")})


    def ravel(self) -> Value:
        """torch.ravel: `contiguous().view(-1)` -- a view only of a contiguous value.

        >>> print(x.ravel().type)
        tensor<24xf32>
        """
        return self.contiguous().view(-1)


    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Value:
        """As `torch.Tensor.flatten`: dims `start_dim` to `end_dim` merged (a view where the
        strides allow it, as `reshape`).

        >>> print(x.flatten(1).type)
        tensor<2x12xf32>
        """
        return emit(self.graph, O.FlattenOp, (self,), {"start_dim": start_dim, "end_dim": end_dim})


    def unflatten(self, dim: int, sizes: Sequence[int]) -> Value:
        """As `torch.Tensor.unflatten`: `dim` split into `sizes`, a view.

        >>> print(x.unflatten(2, (2, 2)).type)
        tensor<2x3x2x2xf32>
        """
        rank = self.ndim
        if not -rank <= dim < rank:
            raise LayoutError(f"unflatten: dim {dim} out of range for rank {rank}")
        dim %= rank
        shape = self.shape
        return self.view(shape[:dim] + tuple(sizes) + shape[dim + 1 :])


    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Value:
        """As `torch.Tensor.movedim`: dims `source` moved to `destination`, a view.

        >>> print(x.movedim(0, -1).type)
        tensor<3x4x2xf32, strided<[4, 1, 12], offset: 0>>
        """
        src, dst = _int_or_ints(source), _int_or_ints(destination)
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


    def unfold(self, dimension: int, size: int, step: int) -> Value:
        """As `torch.Tensor.unfold`: windows of `size` every `step` along `dimension`, as a
        new last dim, a view.

        >>> print(x.unfold(2, 2, 1).type)
        tensor<2x3x3x2xf32, strided<[12, 4, 1, 1], offset: 0>>
        """
        return emit(self.graph, O.UnfoldOp, (self,), {"dim": dimension, "size": size, "step": step})


    def as_strided(
        self, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
    ) -> Value:
        """As `torch.Tensor.as_strided`: the operand's storage read with sizes, strides and
        offset of your own, a view.

        >>> print(x.as_strided((3, 2), (1, 3)).type)
        tensor<3x2xf32, strided<[1, 3], offset: 0>>
        """
        return emit(
            self.graph,
            O.AsStridedOp,
            (self,),
            {"sizes": tuple(size), "strides": tuple(stride), "offset": storage_offset},
        )


    def split(self, split_size: int | Sequence[int] | None = None, dim: int = 0, *,
              split_size_or_sections: int | Sequence[int] | None = None) -> tuple:
        """torch's `split` (the method's `split_size=`, the function's
        `split_size_or_sections=`): pieces of one size, or of the sizes given (views).

        >>> for v in x.split(3, dim=2):
        ...     print(v.type)
        tensor<2x3x3xf32, strided<[12, 4, 1], offset: 0>>
        tensor<2x3x1xf32, strided<[12, 4, 1], offset: 3>>
        """
        sizes = split_size if split_size_or_sections is None else split_size_or_sections
        if sizes is None:
            raise VerificationError("split: expected split_size (an int or a list of ints)")
        if isinstance(sizes, Sym) or _is_int(sizes):
            sizes = (sizes if isinstance(sizes, Sym) else operator.index(sizes),)
            length = self.shape[dim] if -self.ndim <= dim < self.ndim else None
            count = exact_div(length, sizes[0]) if isinstance(length, Sym) else None
            if isinstance(count, int) and count > 1:
                # A symbolic dim declared a multiple of the chunk (8*B in chunks of B): the
                # sections, as many at every size (chunk(8) of an empty dim gives 8).
                sizes = sizes * count
        else:
            sizes = tuple(sizes)
            if len(sizes) == 1 and -self.ndim <= dim < self.ndim and sizes[0] != self.shape[dim]:
                # One section must be the whole dim, as in torch; the op reads `[n]` as a chunk.
                raise LayoutError(
                    f"split: sections {list(sizes)} must sum to {self.shape[dim]} (dim {dim})"
                )
        out = emit(self.graph, O.SplitOp, (self,), {"sizes": sizes, "dim": dim})
        return out if isinstance(out, tuple) else (out,)


    def split_with_sizes(self, split_sizes: Sequence[int], dim: int = 0) -> tuple:
        """torch's split_with_sizes: pieces of the sizes given, which sum to the dim.

        >>> for v in x.split_with_sizes([1, 3], dim=2):
        ...     print(v.type)
        tensor<2x3x1xf32, strided<[12, 4, 1], offset: 0>>
        tensor<2x3x3xf32, strided<[12, 4, 1], offset: 1>>
        """
        if _is_int(split_sizes):
            raise LayoutError(f"split_with_sizes: expected a list of sizes; got {split_sizes!r}")
        return self.split(list(split_sizes), dim)


    def unsafe_split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple:
        """torch's unsafe_split: `split`, whose pieces torch does not track as views.

        >>> len(x.unsafe_split(2, dim=2))
        2
        """
        return self.split(split_size, dim)


    def unsafe_chunk(self, chunks: int, dim: int = 0) -> tuple:
        """torch's unsafe_chunk: `chunk`, whose pieces torch does not track as views.

        >>> len(x.unsafe_chunk(2, dim=2))
        2
        """
        return self.chunk(chunks, dim)


    def _split_along(self, call: str, dim: int, least: int, sections: Any,
                     indices: Any) -> tuple:
        """hsplit / vsplit / dsplit: `tensor_split` along `dim`, an int number of sections
        dividing it exactly."""
        if self.ndim < least:
            raise LayoutError(f"{call}: expects a value of rank >= {least}; got rank {self.ndim}")
        what = indices if sections is None else sections
        if what is None:
            raise VerificationError(f"{call}: expected sections (an int) or indices (a list)")
        if _is_int(what):
            n, size = operator.index(what), self.shape[dim]
            if n <= 0 or size % n:
                raise LayoutError(f"{call}: dim {dim} of size {size} does not split into {n} "
                                  "equal sections")
        return self.tensor_split(what, dim)


    def hsplit(self, sections: Any = None, *, indices: Any = None) -> tuple:
        """torch.hsplit: along dim 1 (dim 0 of a 1-d value).

        >>> [v.shape for v in x.hsplit(3)]
        [(2, 1, 4), (2, 1, 4), (2, 1, 4)]
        """
        return self._split_along("hsplit", 0 if self.ndim == 1 else 1, 1, sections, indices)


    def vsplit(self, sections: Any = None, *, indices: Any = None) -> tuple:
        """torch.vsplit: along dim 0 of a value of rank >= 2.

        >>> [v.shape for v in x.vsplit(2)]
        [(1, 3, 4), (1, 3, 4)]
        """
        return self._split_along("vsplit", 0, 2, sections, indices)


    def dsplit(self, sections: Any = None, *, indices: Any = None) -> tuple:
        """torch.dsplit: along dim 2 of a value of rank >= 3.

        >>> [v.shape for v in x.dsplit([1])]
        [(2, 3, 1), (2, 3, 3)]
        """
        return self._split_along("dsplit", 2, 3, sections, indices)


    def narrow_copy(self, dim: int, start: int, length: int) -> Value:
        """torch's narrow_copy: `narrow` in new row-major memory.

        >>> print(x.narrow_copy(2, 1, 2).type)
        tensor<2x3x2xf32>
        """
        return _fresh(self.narrow(dim, start, length))


    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Value:
        """torch.rot90, as torch composes it: k = 1 flips `dims[1]` and transposes, 2 flips
        both, 3 flips `dims[0]` and transposes (a view of the flip's new memory); 0 is a
        row-major clone.

        >>> print(x.rot90(1, (1, 2)).type)
        tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>
        """
        dims = tuple(operator.index(d) for d in dims)
        rank = self.ndim
        if len(dims) != 2 or rank < 2:
            raise LayoutError(f"rot90: expects two dims of a value of rank >= 2; got dims "
                              f"{list(dims)} for rank {rank}")
        if any(not -rank <= d < rank for d in dims):
            raise LayoutError(f"rot90: dims {list(dims)} out of range for rank {rank}")
        d0, d1 = (d % rank for d in dims)
        if d0 == d1:
            raise LayoutError(f"rot90: dims must differ; got {list(dims)}")
        k = operator.index(k) % 4
        if k == 1:
            return self.flip(d1).transpose(d0, d1)
        if k == 2:
            return self.flip(d0, d1)
        if k == 3:
            return self.flip(d0).transpose(d0, d1)
        return self.clone("contiguous_format")


    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """As `torch.Tensor.chunk`: `chunks` pieces along `dim` (the last may be shorter),
        views.

        >>> [v.shape for v in x.chunk(2, dim=1)]
        [(2, 2, 4), (2, 1, 4)]
        """
        if chunks <= 0:
            raise LayoutError(f"chunk: chunks must be positive; got {chunks}")
        rank = self.ndim
        if not -rank <= dim < rank:
            raise LayoutError(f"chunk: dim {dim} out of range for rank {rank}")
        length = self.shape[dim]
        if length == 0:  # torch gives `chunks` empty pieces here, not one
            return self.split((0,) * chunks, dim)
        return self.split(-(-length // chunks), dim)


    def contiguous(self, memory_format: Any = "contiguous_format") -> Value:
        """torch's `contiguous(memory_format=...)`: the value itself where it already is
        contiguous in that format ("contiguous_format", "channels_last",
        "channels_last_3d", or torch's `torch.channels_last`...), else a copy into new
        memory in it.

        >>> print(x.transpose(1, 2).contiguous().type)
        tensor<2x4x3xf32>
        """
        if _memory_format("contiguous", memory_format, self.ndim) is None:
            raise VerificationError("contiguous: memory_format preserve_format is unsupported "
                                    "(as in torch); expected a format such as channels_last")
        return emit(self.graph, O.ContiguousOp, (self,), {"memory_format": memory_format})


    def clone(self, memory_format: Any = "preserve_format") -> Value:
        """torch's `clone()`: new memory, strides as torch's `preserve_format` keeps them,
        or laid out in the `memory_format` given.

        >>> print(x.transpose(1, 2).clone().type)
        tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>
        """
        name = _memory_format("clone", memory_format, self.ndim)
        if name is None:
            return emit(self.graph, O.CloneOp, (self,), {})
        return self.copy_to(O.memory_format_layout(name, self.shape))


    def copy_to(
        self, layout: Layout | Sequence[int] | None = None, dtype: Any = None, offset: int = 0
    ) -> Value:
        """Materialize into a new buffer with `layout` (a Layout, or strides for these sizes).

        >>> print(x.copy_to((1, 8, 2)).type)
        tensor<2x3x4xf32, strided<[1, 8, 2], offset: 0>>
        """
        if layout is not None and not isinstance(layout, Layout):
            layout = Layout(self.shape, tuple(layout), offset)
        return emit(self.graph, O.NaturalCopyOp, (self,), {"layout": layout, "dtype": dtype})

    def strided_copy(
        self, space: Sequence[int], src: Layout, dst: Layout, *, layout: Layout | None = None,
        dtype: Any = None, into: Value | None = None,
    ) -> Value:
        """An explicit copy (`strided_copy`, docs/text-ir.md): each point `i` of `space`
        copies element `src(i)` of this value's root storage to element `dst(i)` of a new
        buffer of `layout` (default row-major over `space`), or of `into`, in place.

        >>> t = x.strided_copy((4, 3), Layout((4, 3), (1, 4)), Layout((4, 3), (3, 1)))
        >>> print(t.type)                     # x's first 12 elements, transposed
        tensor<4x3xf32>
        """
        return emit(self.graph, O.StridedCopyOp, (self,) + ((into,) if into is not None else ()),
                    {"layout": _space_layout(layout, space, into), "dtype": dtype,
                     "space": tuple(space), "src": src, "dst": dst})

    def masked_copy(
        self, space: Sequence[int], src: Layout, dst: Layout, masks: Sequence[Any],
        fill: Any = None, *, layout: Layout | None = None, dtype: Any = None,
        into: Value | None = None,
    ) -> Value:
        """`strided_copy` where each of `masks`, `(coeffs, lo, hi)`, holds only where
        `lo <= Σ coeffs_k·i_k < hi`: at the other points nothing is read and `fill` is
        written (or, with `fill` None, nothing).

        >>> t = x.masked_copy((2, 4), Layout((2, 4), (12, 1)), Layout((2, 4), (4, 1)),
        ...                   [((0, 1), 0, 3)], fill=0.0)
        >>> print(t.type)                     # x[:, 0, :3] and a column of zeros
        tensor<2x4xf32>
        """
        return emit(self.graph, O.MaskedCopyOp, (self,) + ((into,) if into is not None else ()),
                    {"layout": _space_layout(layout, space, into), "dtype": dtype,
                     "space": tuple(space), "src": src, "dst": dst, "masks": masks,
                     "fill": fill})

    def framed_copy(
        self, space: Sequence[int], src: Layout, dst: Layout, frame: Sequence[Sequence[int]],
        fill: Any, *, masks: Sequence[Any] | None = None, layout: Layout | None = None,
        dtype: Any = None, into: Value | None = None,
    ) -> Value:
        """`strided_copy` (or `masked_copy`) that also writes `fill` on a frame around the
        box it writes: `frame[k] = (before, after)` points along space dim `k`, through
        `dst`'s strides (a pad in one pass).

        >>> t = x.framed_copy((4,), Layout((4,), (1,)), Layout((4,), (1,), 1), [(1, 2)], 0.0,
        ...                   layout=Layout.contiguous((7,)))
        >>> print(t.type)                     # F.pad(x[0, 0], (1, 2))
        tensor<7xf32>
        """
        return emit(self.graph, O.FramedCopyOp, (self,) + ((into,) if into is not None else ()),
                    {"layout": layout, "dtype": dtype, "space": tuple(space), "src": src,
                     "dst": dst, "masks": masks, "fill": fill, "frame": frame})


    def to(
        self, dtype: Any = None, memory_format: Any = "preserve_format", copy: bool = False
    ) -> Value:
        """torch's `.to(dtype, memory_format=..., copy=...)`: the value itself when it has
        that dtype, torch suggests that memory format for its strides and no copy is
        asked for; else new memory: a cast laid out as torch's `preserve_format`, or in
        the memory format given.

        >>> print(x.to("float16").type)
        tensor<2x3x4xf16>
        >>> x.to(torch.float32) is x
        True
        """
        same = dtype is None or as_dtype(dtype, "cast: dtype") == self.type.dtype
        name = _memory_format("to", memory_format, self.ndim)
        if not same and name is not None:
            return self.copy_to(O.memory_format_layout(name, self.shape), dtype=dtype)
        if not same:
            return emit(self.graph, O.CastOp, (self,), {"dtype": dtype})
        if copy:
            return self.clone(memory_format)
        if name is None:
            return self
        return emit(self.graph, O.ToFormatOp, (self,), {"memory_format": name})


    def pack(self, format: str, fill: float = 0) -> Value:
        """Pack an NCHW value into `format` (`stridec.FORMATS`: NHWC, NCHW4, NCHW32,
        NCHW64, CHWN4, `pitched<N>`), in new memory; channels past C (to a multiple of
        the block) hold `fill`.

        >>> y = g.input("y", (2, 3, 4, 5), "int8")
        >>> print(y.pack("NCHW4").type)        # C = 3 padded to 4
        tensor<2x1x4x5x4xi8>
        """
        return emit(self.graph, O.PackOp, (self,), {"format": format, "fill": fill})


    def unpack(self, format: str, channels: int) -> Value:
        """The inverse of `pack`: a packed value of `format` back to NCHW with `channels`
        channels (the padded ones dropped), in new memory.

        >>> y = g.input("y", (2, 1, 4, 5, 4), "int8")
        >>> print(y.unpack("NCHW4", 3).type)
        tensor<2x3x4x5xi8>
        """
        return emit(self.graph, O.UnpackOp, (self,), {"format": format, "channels": channels})


    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
        """As `torch.Tensor.diagonal`: the diagonal of dims `dim1`, `dim2` (shifted by
        `offset`) as a new last dim, a view.

        >>> print(x.diagonal(0, 1, 2).type)
        tensor<2x3xf32, strided<[12, 5], offset: 0>>
        """
        return emit(
            self.graph, O.DiagonalOp, (self,), {"offset": offset, "dim1": dim1, "dim2": dim2}
        )


    def tensor_split(self, indices_or_sections: Any = None, dim: int = 0, *,
                     sections: Any = None, indices: Any = None) -> tuple:
        """torch.tensor_split: `n` sections (the first `size % n` one longer) or the pieces
        between the given indices (clamped to the dim, as torch slices) — views.

        >>> [v.shape for v in x.tensor_split(3, dim=2)]
        [(2, 3, 2), (2, 3, 1), (2, 3, 1)]
        """
        for keyword in (sections, indices):
            if keyword is not None:
                indices_or_sections = keyword
        if indices_or_sections is None:
            raise VerificationError("tensor_split: expected sections (an int) or indices")
        rank = self.ndim
        if not -rank <= operator.index(dim) < rank:
            raise LayoutError(f"tensor_split: dim {dim} out of range for rank {rank}")
        dim = operator.index(dim) % rank
        size = self.shape[dim]
        if _is_int(indices_or_sections):
            n = operator.index(indices_or_sections)
            if n <= 0:
                raise LayoutError(f"tensor_split: sections must be positive; got {n}")
            lengths = [size // n + (1 if k < size % n else 0) for k in range(n)]
            bounds = [sum(lengths[:k]) for k in range(n + 1)]
            return tuple(self.slice(dim, bounds[k], bounds[k + 1]) for k in range(n))
        cuts = [operator.index(i) for i in indices_or_sections]
        starts, stops = [0, *cuts], [*cuts, size]
        return tuple(self.slice(dim, a, b) for a, b in zip(starts, stops, strict=True))


    def unbind(self, dim: int = 0) -> tuple:
        """As `torch.Tensor.unbind`: every entry of `dim`, which goes, as views.

        >>> for v in x.unbind(0):
        ...     print(v.type)
        tensor<3x4xf32>
        tensor<3x4xf32, strided<[4, 1], offset: 12>>
        """
        rank = self.ndim
        if not -rank <= operator.index(dim) < rank:
            raise LayoutError(f"unbind: dim {dim} out of range for rank {rank}")
        return tuple(self.select(dim, i) for i in range(self.shape[operator.index(dim)]))


    def swapaxes(self, axis0: int, axis1: int) -> Value:
        """As `torch.Tensor.swapaxes`: `transpose`.

        >>> print(x.swapaxes(0, 1).type)
        tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>
        """
        return self.transpose(axis0, axis1)


    def swapdims(self, dim0: int, dim1: int) -> Value:
        """As `torch.Tensor.swapdims`: `transpose`.

        >>> print(x.swapdims(0, 1).type)
        tensor<3x2x4xf32, strided<[4, 12, 1], offset: 0>>
        """
        return self.transpose(dim0, dim1)


    def moveaxis(self, source: int | Sequence[int],
                 destination: int | Sequence[int]) -> Value:
        """As `torch.Tensor.moveaxis`: `movedim`.

        >>> print(x.moveaxis(2, 0).type)
        tensor<4x2x3xf32, strided<[1, 12, 4], offset: 0>>
        """
        return self.movedim(source, destination)


    @property
    def T(self) -> Value:
        """`.T`: every dim reversed.

        >>> print(x.T.type)
        tensor<4x3x2xf32, strided<[1, 4, 12], offset: 0>>
        """
        return self.permute(tuple(reversed(range(self.ndim))))


    @property
    def mT(self) -> Value:
        """`.mT`: the last two dims swapped (a scalar itself, as in torch).

        >>> print(x.mT.type)
        tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>
        """
        if self.ndim == 0:
            return self
        if self.ndim < 2:
            raise LayoutError(f"mT: needs rank >= 2; got rank {self.ndim}")
        return self.transpose(-2, -1)


    @property
    def mH(self) -> Value:
        """`.mH`: the conjugate of `.mT`, which is `.mT` for stridec's real dtypes.

        >>> print(x.mH.type)
        tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>
        """
        if self.ndim == 1:
            raise LayoutError("mH: needs rank >= 2 (or a scalar); got rank 1")
        return self.mT


    @property
    def H(self) -> Value:
        """`.H`: the conjugate transpose of a matrix (`.t()` for real dtypes; a scalar
        itself, as in torch).

        >>> print(x[0].H.type)
        tensor<4x3xf32, strided<[1, 4], offset: 0>>
        """
        if self.ndim not in (0, 2):
            raise LayoutError(f"H: needs a matrix (rank 2); got rank {self.ndim}")
        return self.mT


    def adjoint(self) -> Value:
        """torch's adjoint(): `.mH`.

        >>> print(x.adjoint().type)
        tensor<2x4x3xf32, strided<[12, 1, 4], offset: 0>>
        """
        return self.mH


    def conj(self) -> Value:
        """torch's conj(): the tensor itself for a real dtype (stridec has no complex).

        >>> x.conj() is x
        True
        """
        return self


    def resolve_conj(self) -> Value:
        """torch's resolve_conj(): the tensor itself (no conjugate bit on a real dtype).

        >>> x.resolve_conj() is x
        True
        """
        return self


    def resolve_neg(self) -> Value:
        """torch's resolve_neg(): the tensor itself (no negative bit on a real dtype).

        >>> x.resolve_neg() is x
        True
        """
        return self


    def __len__(self) -> int:
        """As `len(tensor)`: the size of dim 0.

        >>> len(x)
        2
        """
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]


    def ndimension(self) -> int:
        """As `torch.Tensor.ndimension`: the rank.

        >>> x.ndimension()
        3
        """
        return self.ndim


    def nelement(self) -> int:
        """As `torch.Tensor.nelement`: the number of elements.

        >>> x.nelement()
        24
        """
        return self.numel()


    def element_size(self) -> int:
        """As `torch.Tensor.element_size`: bytes per element.

        >>> x.element_size()
        4
        """
        return self.type.dtype.itemsize


    def is_floating_point(self) -> bool:
        """As `torch.Tensor.is_floating_point`: whether the dtype is a float type.

        >>> x.is_floating_point()
        True
        """
        return self.type.dtype.is_floating


    def is_contiguous(self) -> bool:
        """Whether the layout is row-major (an input's is the declared one until a call
        specializes it).

        >>> x.is_contiguous(), x.transpose(0, 1).is_contiguous()
        (True, False)
        """
        return self.type.layout.is_contiguous()


    def broadcast_to(self, *args: int, size: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.broadcast_to`: `expand`.

        >>> print(x[:, :1].broadcast_to((2, 3, 4)).type)
        tensor<2x3x4xf32, strided<[12, 0, 1], offset: 0>>
        """
        return self.expand(*_sizes(args, size, "broadcast_to", "size"))


    def reshape_as(self, other: Value) -> Value:
        """As `torch.Tensor.reshape_as`: `reshape` to `other`'s sizes.

        >>> print(x.reshape_as(x.view(6, 4)).type)
        tensor<6x4xf32>
        """
        return self.reshape(other.shape)


    def view_as(self, other: Value) -> Value:
        """As `torch.Tensor.view_as`: `view` with `other`'s sizes.

        >>> print(x.view_as(x.view(4, 6)).type)
        tensor<4x6xf32>
        """
        return self.view(other.shape)


    def fliplr(self) -> Value:
        """As `torch.Tensor.fliplr`: `flip(1)`.

        >>> print(x.fliplr().type)
        tensor<2x3x4xf32>
        """
        return self.flip(1)


    def flipud(self) -> Value:
        """As `torch.Tensor.flipud`: `flip(0)`.

        >>> print(x.flipud().type)
        tensor<2x3x4xf32>
        """
        return self.flip(0)


    def detach(self) -> Value:
        """As `torch.Tensor.detach`: the same data, a view (autograd is torch's concern).

        >>> print(x.detach().type)
        tensor<2x3x4xf32>
        """
        return self


    def type_as(self, other: Value) -> Value:
        """As `torch.Tensor.type_as`: `.to(other.dtype)`.

        >>> y = g.input("y", (1,), "float16")
        >>> print(x.type_as(y).type)
        tensor<2x3x4xf16>
        """
        return self.to(other.type.dtype)


    def repeat(self, *args: int, repeats: Sequence[int] | None = None) -> Value:
        """out[a_k*s_k + b_k] = x[b_k]: x viewed as (1, s0, 1, s1, ...), expanded to
        (r0, s0, r1, s1, ...), reshaped to (r0*s0, r1*s1, ...) — a copy.

        >>> print(x[0].repeat(2, 1, 2).type)
        tensor<2x3x8xf32>
        """
        repeats = tuple(operator.index(r) for r in _sizes(args, repeats, "repeat", "repeats"))
        if len(repeats) < self.ndim:
            raise LayoutError(
                f"repeat: {len(repeats)} repeats for a value of rank {self.ndim}; expected at "
                f"least {self.ndim}"
            )
        shape = (1,) * (len(repeats) - self.ndim) + tuple(self.shape)
        if 2 * len(shape) > MAX_RANK:  # interleaved, the dims would pass the rank limit
            v = self.reshape(*shape)
            for d, r in enumerate(repeats):
                if r != 1:
                    v = cat([v] * r, d) if r else v.narrow(d, 0, 0)
            return _fresh(v)
        interleaved = [n for s in shape for n in (1, s)]
        expanded = [n for r, s in zip(repeats, shape, strict=True) for n in (r, s)]
        v = self.reshape(*interleaved).expand(*expanded)
        return _fresh(v.reshape(*(r * s for r, s in zip(repeats, shape, strict=True))))


    def tile(self, *args: int, dims: Sequence[int] | None = None) -> Value:
        """As `torch.Tensor.tile`: `repeat`, with fewer reps than dims padded with 1s in
        front.

        >>> print(x.tile(2).type)
        tensor<2x3x8xf32>
        """
        reps = tuple(operator.index(r) for r in _sizes(args, dims, "tile", "dims"))
        return self.repeat(*((1,) * (self.ndim - len(reps)) + reps))


    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Value:
        """As `torch.Tensor.repeat_interleave` with an int: each entry of `dim`
        repeated `repeats` times (of the flattened value without `dim`), in new memory.

        >>> print(x.repeat_interleave(2, dim=1).type)
        tensor<2x6x4xf32>
        """
        if not _is_int(repeats):
            from stridec.errors import UnsupportedError

            raise UnsupportedError(
                f"repeat_interleave: only an int number of repeats; got {type(repeats).__name__}"
            )
        x = self.flatten() if dim is None else self
        d = 0 if dim is None else operator.index(dim) % x.ndim
        sizes = list(x.shape)
        v = x.unsqueeze(d + 1).expand(*sizes[: d + 1], operator.index(repeats), *sizes[d + 1 :])
        return _fresh(v.flatten(d, d + 1))


    def roll(self, shifts: Any, dims: Any = None) -> Value:
        """Each rolled dim becomes the cat of its last `s` and first `n - s` entries.

        >>> print(x.roll(1, 2).type)
        tensor<2x3x4xf32>
        """
        if dims is None:
            return self.flatten().roll(shifts, 0).view(*self.shape)
        shifts, dims = _int_or_ints(shifts), _int_or_ints(dims)
        if len(shifts) != len(dims):
            raise LayoutError(f"roll: shifts {shifts} and dims {dims} differ in length")
        if self.numel() == 0:  # torch: a clone, strides kept
            return self.clone()
        v = self
        for s, d in zip(shifts, dims, strict=True):
            # As torch: always a cat (of a whole dim and an empty piece for a shift of 0,
            # which makes the result row-major), one dim after the other.
            n = v.shape[d]
            start = (n - s) % n
            v = cat([v.narrow(d, start, n - start), v.narrow(d, 0, start)], d)
        return v


    def __getitem__(self, index: Any) -> Value:
        """torch indexing with ints, slices (steps ≥ 1), None and `...`.

        >>> print(x[1, :, ::2].type)
        tensor<3x2xf32, strided<[4, 2], offset: 12>>
        >>> print(x[..., None].type)
        tensor<2x3x4x1xf32>
        """
        if not isinstance(index, tuple):
            index = (index,)
        consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise LayoutError("index: an index can only have a single ellipsis ('...')")
        if consumed > self.ndim:
            raise LayoutError(
                f"index: too many indices ({consumed}) for a tensor of rank {self.ndim}"
            )
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
            elif not (isinstance(i, builtins.slice) or _is_int(i)):
                raise LayoutError(
                    f"index: expected int, slice, None or '...'; got {type(i).__name__}"
                )
            elif _is_int(i):
                out = out.select(dim, operator.index(i))
            else:
                if i != builtins.slice(None):
                    out = out.slice(dim, i.start, i.stop, 1 if i.step is None else i.step)
                dim += 1
        return out


    def __iter__(self) -> Iterator[Value]:
        """The slices along dim 0, as iterating a torch tensor gives (without this, Python
        would iterate through `__getitem__` until it raised).

        >>> for v in x:
        ...     print(v.type)
        tensor<3x4xf32>
        tensor<3x4xf32, strided<[4, 1], offset: 12>>
        """
        if self.ndim == 0:
            raise LayoutError("iter: cannot iterate over a rank-0 value")
        return iter([self.select(0, i) for i in range(self.shape[0])])

    # in-place writes into memory
    def copy_(self, src: Value, non_blocking: bool = False) -> Value:
        """torch's `copy_`: `src`, broadcast to this value's sizes (and cast to its dtype,
        as torch casts), written into the elements this value addresses, in its root's
        memory (a `write` op; a graph input is written in the caller's tensor). Returns
        this value after the write, as torch returns `self`: the same view of the memory's
        new version, whose `root()` is the whole memory after the write. The value the
        write went through, and any other of the old version, may no longer be read
        (the verifier refuses it): read the returned one.

        >>> y = g.input("y", (3, 4), "float32")
        >>> row = x[0].copy_(y)                    # x[0] = y, in x's memory
        >>> print(row.type, row.root().owner.name)
        tensor<3x4xf32> write
        """
        from stridec.ir.graph import Value

        if not isinstance(src, Value):
            raise VerificationError(
                f"copy_: expected a stridec Value to copy from; got {type(src).__name__} "
                "(fill_ writes a number)"
            )
        storage = self.root()  # type: ignore[attr-defined]
        here, held = self.type.dtype, storage.type.dtype  # type: ignore[attr-defined]
        if here != held:
            raise UnsupportedError(
                f"copy_: expected a view of the memory in its own dtype {held}; got one read "
                f"as {here} (a view(dtype)), which stridec does not write through; write the "
                f"source viewed as {held} into the same elements of a {held} view instead"
            )
        if src.shape != self.shape:  # type: ignore[attr-defined]
            src = src.expand(*self.shape)  # type: ignore[attr-defined]
        written = emit(self.graph, O.WriteOp, (storage, self, src), {})  # type: ignore[attr-defined]
        return replay_views(self, storage, written)  # type: ignore[arg-type]

    def fill_(self, value: Any) -> Value:
        """torch's `fill_`: `value` written into every element this value addresses
        (`copy_` from a one-element `full` of its dtype, expanded).

        >>> print(x[:, 1].fill_(2.5).root().type)   # x after the write
        tensor<2x3x4xf32>
        """
        if isinstance(value, ValueBuilder):
            if value.ndim != 0:  # type: ignore[attr-defined]
                raise ShapeError(
                    f"fill_: a tensor value must have 0 dims; got sizes {list(value.shape)}"  # type: ignore[attr-defined]
                )
            return self.copy_(value)  # type: ignore[arg-type]
        one = self.graph.full((), value, self.dtype)  # type: ignore[attr-defined]
        return self.copy_(one)

    def zero_(self) -> Value:
        """torch's `zero_`: `fill_(0)`.

        >>> print(x.zero_().owner.name)             # x.zero_() returns x, written
        write
        """
        return self.fill_(0)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise VerificationError(
            "Value.__setitem__: a Value is one SSA value and cannot change; write with "
            "`x[index].copy_(y)` (or `.fill_(v)`), which returns the written view, whose "
            "`.root()` is x after the write (stridec.trace turns `x[index] = y` into that)"
        )

    # dtypes, as torch names them
    float = _cast("float", "float32")
    double = _cast("double", "float64")
    half = _cast("half", "float16")
    bfloat16 = _cast("bfloat16", "bfloat16")
    int = _cast("int", "int32")
    long = _cast("long", "int64")
    short = _cast("short", "int16")
    char = _cast("char", "int8")
    byte = _cast("byte", "uint8")
    bool = _cast("bool", "bool")


def replay_views(value: Value, old: Value, new: Value) -> Value:
    """`value`, a view (chain) of the root `old`, taken again over `new` (a later version of
    that memory): each view op rebuilt, in order, on the new root. `value` itself where it
    is `old`."""
    chain: list[tuple[Op, int]] = []
    v = value
    while v is not old:
        op = v.owner
        if not (op.operands and op.aliases_operand()):
            raise VerificationError(
                f"{op.name}: expected a view of the memory written; got a value that is not"
            )
        chain.append((op, v.index))
        v = op.operands[0]
    out = new
    for op, index in reversed(chain):
        made = emit(new.graph, type(op), [out, *op.operands[1:]], dict(op.attrs))
        out = made[index] if isinstance(made, tuple) else made
    return out


# -- module functions ------------------------------------------------------------------
def cat(tensors: Sequence[Value], dim: int = 0) -> Value:
    """torch.cat: one output buffer, each input written into a slice of it. Values of
    different dtypes are cast to the one torch promotes them to (`promote_types`).

    >>> g = stridec.Graph("g"); x = g.input("x", (2, 3, 4), "float32")
    >>> print(stridec.cat([x, x[:, :1]], dim=1).type)
    tensor<2x4x4xf32>
    """
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat: expected a non-empty sequence of values; got none")
    if all(isinstance(t, Value) for t in tensors):  # else the op names what is not one
        dtype = tensors[0].type.dtype
        for t in tensors[1:]:
            dtype = promote_types(dtype, t.type.dtype, "cat")
        tensors = [t.to(dtype) for t in tensors]
    return emit(tensors[0].graph, O.CatOp, tensors, {"dim": dim})


def stack(tensors: Sequence[Value], dim: int = 0) -> Value:
    """torch.stack: each value unsqueezed at `dim`, then `cat`."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: expected a non-empty sequence of values; got none")
    rank = tensors[0].ndim + 1
    if not -rank <= operator.index(dim) < rank:
        raise LayoutError(f"stack: dim {dim} out of range for rank {rank}")
    d = operator.index(dim) % rank
    if d < rank - 1:
        # As torch: a cat along `d`, then a view splitting it (the cat's layout follows
        # the inputs': channels-last stays so); only a new last dim stacks unsqueezed.
        shape = list(tensors[0].shape)
        for t in tensors[1:]:
            if list(getattr(t, "shape", shape)) != shape:  # a non-value: cat names it
                raise ShapeError(f"stack: expects each value of equal sizes; got {shape} and "
                                 f"{list(t.shape)}")
        joined = cat(tensors, d)
        return joined.view(*shape[:d], len(tensors), *shape[d:])
    return cat([t.unsqueeze(d) for t in tensors], d)


def _at_least(value: Value, rank: int) -> Value:
    """torch.atleast_1d / 2d / 3d: (n,) -> (1, n) -> (1, n, 1); a scalar -> (1, ..., 1)."""
    if value.ndim >= rank:
        return value
    if value.ndim == 0:
        return value.reshape((1,) * rank)
    if value.ndim == 1:
        value = value.unsqueeze(0)
    return value if rank == 2 else value.unsqueeze(-1)


def hstack(tensors: Sequence[Value]) -> Value:
    """torch.hstack: `cat` along dim 1, or dim 0 of 1-d values."""
    ts = [_at_least(t, 1) for t in tensors]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Value]) -> Value:
    """torch.vstack: values made at least 2-d, then `cat` along dim 0."""
    return cat([_at_least(t, 2) for t in tensors], 0)


def dstack(tensors: Sequence[Value]) -> Value:
    """torch.dstack: values made at least 3-d, then `cat` along dim 2."""
    return cat([_at_least(t, 3) for t in tensors], 2)


def full_like(value: Value, fill: float, dtype: Any = None,
              memory_format: Any = "preserve_format") -> Value:
    """torch.full_like: `value`'s sizes filled with `fill`, in new memory laid out as
    torch's `empty_like` (its strides kept, or in the `memory_format` given)."""
    attrs = {"sizes": value.shape, "value": fill,
             "dtype": value.type.dtype if dtype is None else dtype,
             "memory_format": memory_format}
    return emit(value.graph, O.FullOp, (value,), attrs)


def pixel_shuffle(value: Value, upscale_factor: int) -> Value:
    """torch.nn.functional.pixel_shuffle: (*, C·r², H, W) -> (*, C, H·r, W·r), new memory
    laid out as torch's (channels-last for a channels-last input)."""
    return emit(value.graph, O.PixelShuffleOp, (value,), {"factor": upscale_factor})


def pixel_unshuffle(value: Value, downscale_factor: int) -> Value:
    """torch.nn.functional.pixel_unshuffle: (*, C, H·r, W·r) -> (*, C·r², H, W)."""
    return emit(value.graph, O.PixelUnshuffleOp, (value,), {"factor": downscale_factor})


def pad(input: Value, pad: Sequence[int], mode: str = "constant",
        value: float | None = None, **unknown: Any) -> Value:
    """`torch.nn.functional.pad(input, pad, mode="constant", value=None)`, constant mode:
    `pad` holds (before, after) pairs from the last dim backwards (a negative one crops);
    the border holds `value` (None: 0). New memory, also for pads of 0.

    >>> g = stridec.Graph("pad")
    >>> x = g.input("x", (2, 3), "float32")
    >>> print(stridec.pad(x, (1, 2, 0, 1), value=-1.0).type)   # W 3 -> 1+3+2, H 2 -> 2+1
    tensor<3x6xf32>
    """
    if unknown:
        from stridec.errors import CallError

        name = next(iter(unknown))
        hint = " (the fill is value=, as torch.nn.functional.pad's)" if name == "fill" else ""
        raise CallError(
            f"pad: unexpected keyword argument {name!r}; expected input, pad, mode, "
            f"value{hint}"
        )
    if mode != "constant":
        from stridec.errors import UnsupportedError

        raise UnsupportedError(f"pad: mode must be 'constant'; got {mode!r}")
    return emit(input.graph, O.PadOp, (input,), {"pad": tuple(pad),
                                                  "value": 0 if value is None else value})


def _labels(spec: str, rank: int | None, equation: str) -> list[str]:
    """One einsum operand's labels, `...` as one token; checked against `rank` if given."""
    tokens: list[str] = []
    rest = spec
    while rest:
        if rest.startswith("..."):
            if "..." in tokens:
                raise ShapeError(f"einsum: more than one '...' in {spec!r} ({equation!r})")
            tokens.append("...")
            rest = rest[3:]
        elif rest[0].isascii() and rest[0].isalpha():
            tokens.append(rest[0])
            rest = rest[1:]
        else:
            raise ShapeError(f"einsum: expected letters and '...' in {equation!r}; got {rest[0]!r}")
    letters = len(tokens) - ("..." in tokens)
    if rank is not None and (letters > rank or ("..." not in tokens and letters != rank)):
        raise ShapeError(f"einsum: {spec!r} has {letters} labels for a value of rank {rank} "
                         f"({equation!r})")
    return tokens


def einsum(equation: str, *operands: Value) -> Value:
    """torch.einsum where it moves data and computes nothing: one operand whose every label
    is in the output, once -- a permutation (`ijk->kij`, `...ij->...ji`), with a label
    repeated in the input a diagonal (`iij->ji`). Views, as torch's. A sum (a label left
    out, `ii->`) or a product of operands computes values: `UnsupportedError`."""
    from stridec.errors import UnsupportedError

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise ShapeError(f"einsum: expected an equation str; got {type(equation).__name__}")
    eq = "".join(equation.split())
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ShapeError(f"einsum: {equation!r} names {len(inputs)} operand(s); got "
                         f"{len(operands)}")
    if len(operands) != 1:
        raise UnsupportedError(f"einsum: {equation!r} multiplies {len(operands)} operands "
                               "(a contraction computes values; only one operand is a layout)")
    (value,) = operands
    rank = value.ndim
    tokens = _labels(inputs[0], rank, equation)
    if not arrow:  # implicit output: '...' then the labels used once, in ASCII order
        once = sorted(t for t in set(tokens) if t != "..." and tokens.count(t) == 1)
        rhs = ("..." if "..." in tokens else "") + "".join(once)
    out = _labels(rhs, None, equation)
    ell = rank - (len(tokens) - ("..." in tokens))
    dims: list[str] = []
    for t in tokens:
        dims.extend([f"...{k}" for k in range(ell)] if t == "..." else [t])
    for t in out:
        if t != "..." and t not in tokens:
            raise ShapeError(f"einsum: output label {t!r} is not an input label ({equation!r})")
        if out.count(t) > 1:
            raise ShapeError(f"einsum: output label {t!r} appears more than once ({equation!r})")
    summed = [t for t in tokens if t not in out and not (t == "..." and ell == 0)]
    if summed:
        raise UnsupportedError(f"einsum: {equation!r} sums over {summed[0]!r} (a sum computes "
                               "values; every input label must be in the output)")
    v = value
    for label in dict.fromkeys(t for t in dims if dims.count(t) > 1):
        while dims.count(label) > 1:  # as torch: the repeated dims' diagonal, put last
            d1 = dims.index(label)
            d2 = dims.index(label, d1 + 1)
            if v.shape[d1] != v.shape[d2]:
                raise ShapeError(f"einsum: label {label!r} is repeated over sizes "
                                 f"{v.shape[d1]} and {v.shape[d2]} ({equation!r})")
            v = v.diagonal(0, d1, d2)
            dims = [t for k, t in enumerate(dims) if k not in (d1, d2)] + [label]
    order: list[str] = []
    for t in out:
        order.extend([f"...{k}" for k in range(ell)] if t == "..." else [t])
    return v.permute(tuple(dims.index(t) for t in order))


def broadcast_tensors(*tensors: Value) -> tuple[Value, ...]:
    """torch.broadcast_tensors: each value expanded to the broadcast of all sizes (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    from stridec.ir.layout import broadcast_shapes

    sizes = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(sizes) for t in tensors)


def _at_least_all(rank: int, tensors: tuple) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_at_least(t, rank) for t in tensors[0])
    if len(tensors) == 1:
        return _at_least(tensors[0], rank)
    return tuple(_at_least(t, rank) for t in tensors)


def atleast_1d(*tensors: Value) -> Any:
    """torch.atleast_1d: a scalar as (1,); others themselves. Several values: a tuple."""
    return _at_least_all(1, tensors)


def atleast_2d(*tensors: Value) -> Any:
    """torch.atleast_2d: (n,) as (1, n), a scalar as (1, 1) (views)."""
    return _at_least_all(2, tensors)


def atleast_3d(*tensors: Value) -> Any:
    """torch.atleast_3d: (n,) as (1, n, 1), (m, n) as (m, n, 1) (views)."""
    return _at_least_all(3, tensors)


def _view_copy(name: str) -> Any:
    """torch.<name>_copy: the view `name`, in new row-major memory (as torch's view-copy
    ops: the view, then `clone(memory_format=torch.contiguous_format)`)."""

    def view_copy(value: Value, *args: Any, **kwargs: Any) -> Any:
        out = value if name == "alias" else getattr(value, name)(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_fresh(o) for o in out)
        return _fresh(out)

    view_copy.__name__ = view_copy.__qualname__ = f"{name}_copy"
    view_copy.__doc__ = f"torch.{name}_copy: `{name}` in new row-major memory."
    return view_copy


# torch's view-copy functions (`torch.permute_copy`, ...): each view, then new memory.
permute_copy = _view_copy("permute")
transpose_copy = _view_copy("transpose")
t_copy = _view_copy("t")
expand_copy = _view_copy("expand")
view_copy = _view_copy("view")
squeeze_copy = _view_copy("squeeze")
unsqueeze_copy = _view_copy("unsqueeze")
select_copy = _view_copy("select")
slice_copy = _view_copy("slice")
split_copy = _view_copy("split")
split_with_sizes_copy = _view_copy("split_with_sizes")
unbind_copy = _view_copy("unbind")
diagonal_copy = _view_copy("diagonal")
as_strided_copy = _view_copy("as_strided")
unfold_copy = _view_copy("unfold")
detach_copy = _view_copy("detach")
alias_copy = _view_copy("alias")
VIEW_COPIES: tuple[str, ...] = (
    "permute", "transpose", "t", "expand", "view", "squeeze", "unsqueeze", "select", "slice",
    "split", "split_with_sizes", "unbind", "diagonal", "as_strided", "unfold", "detach",
    "alias",
)


# The tensor surface builder and trace share: every name is a `Value` attribute that
# mirrors `torch.Tensor`'s, and `stridec.trace` records it through the `Value` method
# (docs/torch.md lists it; tests check both directions).
SURFACE: tuple[str, ...] = (
    # views
    "permute", "transpose", "swapaxes", "swapdims", "t", "T", "mT", "H", "mH", "adjoint",
    "expand", "expand_as", "broadcast_to", "reshape", "reshape_as", "view", "view_as",
    "flatten", "unflatten", "ravel", "squeeze", "unsqueeze", "flip", "fliplr", "flipud",
    "unfold", "movedim", "moveaxis", "narrow", "select", "diagonal", "as_strided", "split",
    "split_with_sizes", "unsafe_split", "chunk", "unsafe_chunk", "tensor_split", "hsplit",
    "vsplit", "dsplit", "unbind", "detach", "conj", "resolve_conj", "resolve_neg",
    "__getitem__", "__iter__",
    # new memory
    "contiguous", "clone", "repeat", "tile", "repeat_interleave", "roll", "rot90",
    "narrow_copy",
    # in-place writes into memory
    "copy_", "fill_", "zero_",
    # dtypes
    "to", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "char",
    "byte", "bool",
    # metadata
    "shape", "size", "dim", "ndim", "ndimension", "numel", "nelement", "dtype",
    "element_size", "is_floating_point", "is_contiguous", "__len__",
)


# The torch functions without a `Tensor` method of that name, each a function of this
# module (`torch.cat` is `cat`, `torch.permute_copy` is `permute_copy`, ...).
FUNCTIONS: tuple[str, ...] = (
    "cat", "stack", "hstack", "vstack", "dstack", "broadcast_tensors", "atleast_1d",
    "atleast_2d", "atleast_3d", "einsum", "full_like", "pad", "pixel_shuffle",
    "pixel_unshuffle", *(f"{name}_copy" for name in VIEW_COPIES),
)


def _add_surface(surface: type, core: type) -> None:
    """Give the core class `core` the members `surface` defines: the builder on top of
    the IR core. A name the core defines itself is never replaced."""
    for name, member in vars(surface).items():
        if name in ("__module__", "__qualname__", "__doc__", "__slots__", "__dict__",
                    "__weakref__", "__firstlineno__", "__static_attributes__"):
            continue
        if name in vars(core):
            raise TypeError(f"builder: {core.__name__}.{name} is the core's own; the builder "
                            "must not replace it")
        setattr(core, name, member)


_add_surface(GraphBuilder, Graph)
_add_surface(ValueBuilder, Value)
