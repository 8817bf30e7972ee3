"""The op catalogue (docs/design.md#ir): sources, views, materializations and `output`.

Each op declares its attributes once (`stridec.ir.attributes.attr`: their checks, their
canonical form, their text order and the typed accessors come from there), infers its
result types — including the layout over the root storage, so every view is visibly a
stride rewrite — and verifies what normalization cannot. Their meaning in plain torch —
the oracle — is the reference backend's (`stridec.runtime.backends.reference.RULES`):
the IR itself needs no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from stridec.errors import (
    LayoutError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir import attributes as A
from stridec.ir.affine import MAX_RANK, invert_strided
from stridec.ir.attributes import attr, check_fill
from stridec.ir.dtypes import DType, as_dtype, convert
from stridec.ir.formats import get_format
from stridec.ir.graph import Op, Value, register_op
from stridec.ir.layout import Layout
from stridec.ir.symbols import (
    Sym,
    UndecidedError,
    evaluate,
    exact_div,
    free_symbols,
    statically_true,
)
from stridec.ir.types import TensorType


# -- attribute relations ------------------------------------------------------------------
def _prefixed(op: str, fn: Any, *args: Any) -> Any:
    """Call a layout rule; re-raise its error with the op name in front."""
    try:
        return fn(*args)
    except StridecError as e:
        if str(e).startswith(f"{op}:"):
            raise
        raise type(e)(f"{op}: {e}") from e


# -- sources -----------------------------------------------------------------------------
@register_op
class InputOp(Op):
    """A graph argument: its sizes, dtype and, optionally, a declared layout and storage.

    As DirectML's `DML_BUFFER_TENSOR_DESC`, an input may declare its strides and offset
    (`layout`, packed when absent) and the elements its storage holds (`storage`, at
    least what the layout addresses): the graph is planned for that buffer, so an
    `as_strided` may address any element of it. A caller's tensor of another layout is
    re-specialized where the graph's meaning does not depend on the declared one.
    """

    name = "input"
    surface = ("Graph.input",)
    num_operands = 0
    is_argument = True
    arg_name: str = attr(A.nonempty_str, key="name", doc="The argument's name.")
    sizes: tuple[int, ...] = attr(A.sizes, in_type=True)
    dtype: DType = attr(A.dtype, in_type=True)
    layout: Layout | None = attr(A.layout, None, in_type=True, doc="None: row-major.")
    storage: int | None = attr(
        A.integer, None, doc="Elements of the storage; None: what the layout addresses."
    )

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        sizes, layout, storage = attrs["sizes"], attrs["layout"], attrs["storage"]
        if layout is not None and layout.sizes != sizes:
            raise ShapeError(f"input '{attrs['name']}': layout sizes {layout.sizes} != {sizes}")
        if storage is not None:
            need = (layout or Layout.contiguous(sizes)).min_storage_size()
            if storage < need:
                raise LayoutError(
                    f"input '{attrs['name']}': storage of {storage} elements is smaller than "
                    f"the {need} its layout {layout or Layout.contiguous(sizes)} addresses"
                )

    def infer_types(self, operand_types: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(self.sizes, self.dtype, self.layout)]

    @property
    def declared(self) -> bool:
        """Whether the graph was planned for a given layout or storage (not the default)."""
        return self.layout is not None or self.storage is not None

    @classmethod
    def from_text(cls, operands, attrs, result_types) -> Op:  # type: ignore[override]
        if len(result_types) != 1:
            raise VerificationError("input: expected one result type")
        t = result_types[0]
        layout = None if t.has_default_layout() else t.layout
        return cls((), {**attrs, "sizes": t.sizes, "dtype": t.dtype, "layout": layout})


def storage_elements(root: Value, dtype: DType | None = None) -> int:
    """Elements of the storage under a root value: an input's declared `storage`, else
    what its layout addresses (a buffer a copy allocates holds exactly that); counted in
    elements of `dtype` (a view that reads the bytes as another element type), whole
    ones only, as torch counts `nbytes // element_size()`."""
    op = root.owner
    if isinstance(op, InputOp) and op.storage is not None:
        elements = op.storage
    else:
        elements = root.type.layout.min_storage_size()
    if dtype is None or dtype.itemsize == root.type.dtype.itemsize:
        return elements
    return elements * root.type.dtype.itemsize // dtype.itemsize


@register_op
class FullOp(Op):
    """A tensor of `sizes` filled with `value` (torch.full), row-major. With an operand,
    torch's `full_like` (`zeros_like`, `ones_like`): the operand's sizes, in new memory
    laid out as torch's `empty_like` lays it out -- `memory_format` "preserve_format"
    keeps the operand's strides as `Layout.preserved` does (a transposed operand gives a
    transposed result), a format name lays it out in that format. Nothing of the
    operand is read."""

    name = "full"
    surface = ("Graph.full", "torch.full_like")
    num_operands = None
    sizes: tuple[int, ...] = attr(A.sizes)
    value: int | float | bool = attr(A.number)
    dtype: DType = attr(A.dtype)
    memory_format: str | None = attr(
        lambda op, key, value: "preserve_format" if str(value).removeprefix("torch.") ==
        "preserve_format" else memory_format_name(op, value), None)

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        check_fill(cls.name, "value", attrs["value"], attrs["dtype"])
        if len(operand_types) > 1:
            raise VerificationError(
                f"full: expected no operand, or one to be like; got {len(operand_types)}")
        if not operand_types:
            if attrs["memory_format"] is not None:
                raise VerificationError("full: 'memory_format' needs an operand to be like")
            return
        like = operand_types[0]
        if attrs["sizes"] != like.sizes:
            raise ShapeError(f"full: sizes {list(attrs['sizes'])} differ from the sizes "
                             f"{list(like.sizes)} of the operand it is like")
        if attrs["memory_format"] is None:
            attrs["memory_format"] = "preserve_format"
        needs = MEMORY_FORMATS.get(attrs["memory_format"])
        if needs is not None and like.rank != needs[0]:
            raise ShapeError(f"full: memory_format {attrs['memory_format']} needs a tensor "
                             f"of rank {needs[0]}; got rank {like.rank}")

    def infer_types(self, operand_types):
        if not operand_types:
            return [TensorType(self.sizes, self.dtype)]
        if self.memory_format == "preserve_format":
            return [TensorType(self.sizes, self.dtype, operand_types[0].layout.preserved())]
        return [TensorType(self.sizes, self.dtype,
                           memory_format_layout(self.memory_format, self.sizes))]

    def printed_attrs(self):
        shown = super().printed_attrs()
        if shown.get("memory_format") == "preserve_format":
            shown.pop("memory_format")
        return shown


def _check_state(op: str, t: TensorType) -> None:
    if t.dtype.name not in ("uint32", "int32"):
        raise VerificationError(f"{op}: state must be uint32 or int32; got {t.dtype.name}")
    if t.sizes not in ((6,), (1, 1, 1, 6)):
        raise VerificationError(f"{op}: state must have shape (6,) or (1, 1, 1, 6); got {t.sizes}")


class _PhiloxBase(Op):
    """Shared by `philox` and `philox_uniform`.

    Natural form: the values are written contiguously, element `i` (row-major) being word
    `i mod 4` of Philox4x32-10(counter + ⌊i/4⌋, key). Placed form (after `fuse-copies`
    folds a copy of the values into the generator): iterate over `space`; at point `j` the
    value of logical index `index(j)` is stored at `dst(j)` of a buffer with result
    `layout` (or `fill` where a mask fails). `sizes` keeps the logical shape, which sets
    how far the state advances: ⌈numel/4⌉ counters. A placed generator may take a second
    operand, a buffer it writes in place (a caller's `out` storage): its values then have
    that buffer's type, as a `copy` into a buffer has.
    """

    num_operands = None
    # The placement: all None in the natural form.
    layout: Layout | None = attr(A.layout, None, doc="The placed values' buffer layout.")
    space: tuple[int, ...] | None = attr(A.sizes, None, doc="The iteration space.")
    index: Layout | None = attr(A.layout, None, doc="The logical index of each point.")
    dst: Layout | None = attr(A.layout, None, doc="The buffer index of each point.")
    masks: tuple | None = attr(A.masks, None, doc="`(coeffs, lo, hi)` bounds.")
    fill: int | float | bool | None = attr(A.number, None, doc="Written where a mask fails.")

    def written_root(self) -> Value | None:
        return self.operands[1].root() if len(self.operands) == 2 else None

    def value_dtype(self) -> DType:
        raise NotImplementedError

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        space = attrs["space"]
        if space is None:
            for key in ("layout", "index", "dst", "masks", "fill"):
                if attrs[key] is not None:
                    raise VerificationError(f"{cls.name}: '{key}' needs 'space'")
            return
        for key in ("layout", "index", "dst"):
            lay = attrs[key]
            if lay is None or (key != "layout" and lay.sizes != space):
                over = "" if key == "layout" else f" over space {list(space)}"
                raise VerificationError(f"{cls.name}: '{key}' must be a Layout{over}; got {lay}")

    def infer_types(self, operand_types):
        if len(operand_types) not in (1, 2):
            raise VerificationError(
                f"{self.name}: expected a state (and a buffer to write into); got "
                f"{len(operand_types)} operand(s)"
            )
        _check_state(self.name, operand_types[0])
        state = operand_types[0]
        layout = self.layout
        if len(operand_types) == 2:
            into = operand_types[1]
            if layout is None or into.layout != layout or into.dtype != self.value_dtype():
                raise VerificationError(
                    f"{self.name}: buffer operand {into} does not match placed layout {layout} "
                    f"/ dtype {self.value_dtype()}"
                )
        if layout is None:
            values = TensorType(self.sizes, self.value_dtype())
        else:
            values = TensorType(layout.sizes, self.value_dtype(), layout)
        return [values, TensorType(state.sizes, state.dtype)]

    @property
    def is_placed(self) -> bool:
        return self.space is not None


@register_op
class PhiloxOp(_PhiloxBase):
    """Philox4x32-10 bits (docs/design.md#philox): `bits, new_state = philox(state, sizes)`."""

    name = "philox"
    surface = ("Graph.philox",)
    sizes: tuple[int, ...] = attr(A.sizes, doc="The logical shape of the bits.")

    def value_dtype(self) -> DType:
        return as_dtype("uint32")


@register_op
class PhiloxUniformOp(_PhiloxBase):
    """Uniform floats from Philox bits, `low + (bits >> (32 - d))·2^-d·(high - low)` with
    `d` the dtype's significand bits (24, 11, 8: below 1 in every dtype, as torch.rand)
    (docs/design.md#philox)."""

    name = "philox_uniform"
    surface = ("Graph.philox_uniform",)
    sizes: tuple[int, ...] = attr(A.sizes, doc="The logical shape of the values.")
    dtype: DType = attr(A.dtype, "float32")
    low: float = attr(A.real, 0.0)
    high: float = attr(A.real, 1.0)

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        dtype = attrs["dtype"]
        if dtype.name not in ("float32", "float16", "bfloat16"):
            raise VerificationError(
                f"philox_uniform: dtype must be float32, float16 or bfloat16; got {dtype.name}"
            )
        low, high = attrs["low"], attrs["high"]
        # As torch's uniform_: finite bounds, low <= high, and high - low a finite float
        # (so no value is ever NaN).
        f32 = as_dtype("float32")
        scale32 = (
            convert(convert(high, f32) - convert(low, f32), f32)
            if math.isfinite(low) and math.isfinite(high) else math.inf
        )
        if not (math.isfinite(low) and math.isfinite(high) and low <= high) or not (
            math.isfinite(scale32)
        ):
            raise ShapeError(
                f"philox_uniform: expects finite low <= high with a finite float32 "
                f"high - low; got low={low!r}, high={high!r}"
            )
        super().relate_attrs(attrs, operand_types)

    def value_dtype(self) -> DType:
        return self.dtype


# -- views -------------------------------------------------------------------------------
class ViewOp(Op):
    """A zero-copy op: the result layout is a rule applied to the operand's layout."""

    is_view = True

    def result_layout(self, layout: Layout) -> Layout:
        raise NotImplementedError(self.name)

    def infer_types(self, operand_types):
        t = operand_types[0]
        layout = _prefixed(self.name, self.result_layout, t.layout)
        return [TensorType(layout.sizes, t.dtype, layout)]


@register_op
class PermuteOp(ViewOp):
    name = "permute"
    surface = ("Tensor.permute",)
    dims: tuple[int, ...] = attr(A.ints)

    def result_layout(self, layout):
        return layout.permute(self.dims)


@register_op
class TransposeOp(ViewOp):
    name = "transpose"
    surface = ("Tensor.transpose", "Tensor.swapaxes", "Tensor.swapdims", "Tensor.t")
    dim0: int = attr(A.integer)
    dim1: int = attr(A.integer)

    def result_layout(self, layout):
        return layout.transpose(self.dim0, self.dim1)


@register_op
class ExpandOp(ViewOp):
    name = "expand"
    surface = ("Tensor.expand", "Tensor.expand_as", "Tensor.broadcast_to")
    sizes: tuple[int, ...] = attr(A.shape, doc="-1 keeps a dim's size.")

    def result_layout(self, layout):
        return layout.expand(self.sizes)


@register_op
class SliceOp(ViewOp):
    """`t[..., start:stop:step, ...]` along `dim` (torch semantics: wrap, clamp, step ≥ 1)."""

    name = "slice"
    surface = ("Tensor.narrow", "Tensor.__getitem__")
    dim: int = attr(A.integer)
    start: int | None = attr(A.size, None)
    stop: int | None = attr(A.size, None)
    step: int = attr(A.integer, 1)

    def result_layout(self, layout):
        return layout.slice(self.dim, self.start, self.stop, self.step)


@register_op
class SelectOp(ViewOp):
    name = "select"
    surface = ("Tensor.select", "Tensor.__getitem__")
    dim: int = attr(A.integer)
    index: int = attr(A.size)

    def result_layout(self, layout):
        return layout.select(self.dim, self.index)


@register_op
class SqueezeOp(ViewOp):
    name = "squeeze"
    surface = ("Tensor.squeeze",)
    dims: tuple[int, ...] | None = attr(A.ints, None, doc="None: every size-1 dim.")

    def result_layout(self, layout):
        return layout.squeeze(self.dims)


@register_op
class UnsqueezeOp(ViewOp):
    name = "unsqueeze"
    surface = ("Tensor.unsqueeze",)
    dim: int = attr(A.integer)

    def result_layout(self, layout):
        return layout.unsqueeze(self.dim)


@register_op
class UnfoldOp(ViewOp):
    name = "unfold"
    surface = ("Tensor.unfold",)
    dim: int = attr(A.integer)
    size: int = attr(A.integer)
    step: int = attr(A.integer)

    def result_layout(self, layout):
        return layout.unfold(self.dim, self.size, self.step)


@register_op
class DiagonalOp(ViewOp):
    """torch.diagonal(offset, dim1, dim2): a view (`Layout.diagonal`)."""

    name = "diagonal"
    surface = ("Tensor.diagonal",)
    offset: int = attr(A.integer, 0)
    dim1: int = attr(A.integer, 0)
    dim2: int = attr(A.integer, 1)

    def result_layout(self, layout):
        return layout.diagonal(self.offset, self.dim1, self.dim2)


@register_op
class AsStridedOp(ViewOp):
    """An explicit stride rewrite over the operand's root storage (absolute offset), in
    elements of the operand's dtype -- or of `dtype`, the bytes read as that element type
    (`fold-views` writes a chain of views that reinterprets bits, `bitcast`, so)."""

    name = "as_strided"
    surface = ("Tensor.as_strided",)
    sizes: tuple[int, ...] = attr(A.sizes)
    strides: tuple[int, ...] = attr(A.sym_ints)
    offset: int | None = attr(A.size, None, doc="None: the operand's offset.")
    dtype: DType | None = attr(A.dtype, None, doc="None: the operand's element type.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        sizes, strides, offset = attrs["sizes"], attrs["strides"], attrs["offset"]
        if len(strides) != len(sizes):
            raise LayoutError(
                f"as_strided: sizes {list(sizes)} and strides {list(strides)} differ in rank"
            )
        if offset is not None and offset < 0:
            raise LayoutError(f"as_strided: offset must be >= 0; got {offset}")
        if operand_types and attrs["dtype"] == operand_types[0].dtype:
            attrs["dtype"] = None  # the operand's: said once
        if attrs["dtype"] is not None and offset is None:
            raise VerificationError("as_strided: a 'dtype' needs an 'offset' (in elements of "
                                    "that dtype)")

    def result_layout(self, layout):
        offset = layout.offset if self.offset is None else self.offset
        return Layout(self.sizes, self.strides, offset)

    def infer_types(self, operand_types):
        t = operand_types[0]
        layout = _prefixed(self.name, self.result_layout, t.layout)
        return [TensorType(layout.sizes, self.dtype or t.dtype, layout)]

    def verify_(self) -> None:
        """The result must address only the root's storage, as torch's as_strided checks."""
        result = self.result.type
        storage = storage_elements(self.operands[0].root(), result.dtype)
        result.layout.check_fits(storage, "as_strided")


@register_op
class BitcastOp(ViewOp):
    """torch's `view(dtype)`: the operand's bytes read as elements of `dtype`, a view
    sharing its memory (MLIR's `vector.bitcast`). The layout follows torch's rule
    (`Layout.view_dtype`): the same for an element of the same size, else the last dim
    scaled. The result's layout, as every view's, is over its root's storage, in
    elements of its own dtype."""

    name = "bitcast"
    surface = ("Tensor.view",)
    dtype: DType = attr(A.dtype, doc="The element type the bytes are read as.")

    def infer_types(self, operand_types):
        t = operand_types[0]
        layout = _prefixed(self.name, t.layout.view_dtype, t.dtype, self.dtype)
        return [TensorType(layout.sizes, self.dtype, layout)]


def _resolve_sizes(op: str, sizes: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """Infer a single -1 as torch does; check the element count."""
    if sizes.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1; got {list(sizes)}")
    known = math.prod(s for s in sizes if s != -1)
    if any(s < -1 for s in sizes):
        raise ShapeError(f"{op}: invalid size in {list(sizes)}")
    if -1 in sizes:
        inferred = None if not statically_true(known >= 1) else exact_div(numel, known)
        if inferred is None:
            raise _shape_error(op, sizes, numel)
        sizes = tuple(inferred if s == -1 else s for s in sizes)
    if math.prod(sizes) != numel:
        raise _shape_error(op, sizes, numel)
    return sizes


def _shape_error(op: str, sizes: tuple, numel: Any) -> StridecError:
    """A shape that does not fit: a `ShapeError`, or where symbols are involved an
    `UndecidedError` (a `LayoutError`) naming them."""
    names = sorted(free_symbols((sizes, numel)))
    message = f"{op}: shape {list(sizes)} is invalid for input of size {numel}"
    if not names:
        return ShapeError(message)
    return UndecidedError(
        f"{message} for some values of {', '.join(names)}: a symbolic shape must fit for "
        "every value (docs/symbolic.md)"
    )


class _ReshapeLike(ViewOp):
    """A view when the operand's layout allows one (`viewed`), else a row-major copy."""

    def viewed(self, layout: Layout) -> Layout | None:
        raise NotImplementedError(self.name)

    def viewed_at(self, layout: Layout, bindings: Any) -> Layout | None:
        """`viewed` of a concrete `layout`, the op's own symbols bound by `bindings`."""
        return self.viewed(layout)

    def aliases_operand(self) -> bool:
        return self.viewed(self.operands[0].type.layout) is not None


class _ReshapeBase(_ReshapeLike):
    sizes: tuple[int, ...] = attr(A.shape, doc="The new sizes; a -1 is resolved on build.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if operand_types:
            attrs["sizes"] = _resolve_sizes(cls.name, attrs["sizes"], operand_types[0].numel)

    @classmethod
    def bound_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> dict:
        """A -1 resolved over symbols counts the elements of its operand for every value
        of the class `N >= 1`: `x[1:].reshape(-1)` of a dim N is `12*N - 12` long. Bound
        at N = 0 the slice is empty (torch clamps it) and that count negative: the one
        size that binds below 0, the others above, is torch's -1 again -- 0."""
        sizes = attrs["sizes"]
        if (operand_types and operand_types[0].numel == 0
                and all(isinstance(s, int) for s in sizes)
                and sum(s < 0 for s in sizes) == 1 and all(s != 0 for s in sizes)):
            attrs = {**attrs, "sizes": tuple(-1 if s < 0 else s for s in sizes)}
        return attrs

    def viewed(self, layout: Layout) -> Layout | None:
        return layout.view(self.sizes)

    def viewed_at(self, layout: Layout, bindings: Any) -> Layout | None:
        return layout.view(evaluate(self.sizes, bindings))

    def infer_types(self, operand_types):
        t = operand_types[0]
        layout = self.viewed(t.layout)
        return [TensorType(self.sizes, t.dtype, layout)]


@register_op
class ReshapeOp(_ReshapeBase):
    """torch's reshape contract: a view when `Layout.view` allows, else a contiguous copy."""

    name = "reshape"
    surface = ("Tensor.reshape", "Tensor.reshape_as")


@register_op
class ViewShapeOp(_ReshapeBase):
    """torch's view: a stride rewrite, or an error when the layout does not allow one."""

    name = "view"
    surface = ("Tensor.view", "Tensor.view_as")

    def infer_types(self, operand_types):
        t = operand_types[0]
        layout = self.viewed(t.layout)
        if layout is None:
            raise LayoutError(
                f"view: sizes {list(self.sizes)} are not viewable from layout "
                f"{t.layout} (use reshape, which copies)"
            )
        return [TensorType(layout.sizes, t.dtype, layout)]

    def aliases_operand(self) -> bool:
        return True


@register_op
class FlattenOp(_ReshapeLike):
    """torch.flatten(start_dim, end_dim): a reshape (view when possible, else a copy)."""

    name = "flatten"
    surface = ("Tensor.flatten",)
    start_dim: int = attr(A.integer, 0)
    end_dim: int = attr(A.integer, -1)

    def _sizes_for(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        rank = len(sizes)
        if rank == 0:
            return (1,)
        start = self.start_dim
        end = self.end_dim
        for d in (start, end):
            if not -rank <= d < rank:
                raise LayoutError(f"flatten: dim {d} out of range for rank {rank}")
        start, end = start % rank, end % rank
        if start > end:
            raise LayoutError(f"flatten: start_dim {start} comes after end_dim {end}")
        return sizes[:start] + (math.prod(sizes[start : end + 1]),) + sizes[end + 1 :]

    def viewed(self, layout):
        sizes = self._sizes_for(layout.sizes)
        if layout.rank and sizes == layout.sizes:  # one dim: torch returns the tensor itself
            return layout
        return layout.view(sizes)

    def infer_types(self, operand_types):
        t = operand_types[0]
        return [TensorType(self._sizes_for(t.sizes), t.dtype, self.viewed(t.layout))]


@register_op
class SplitOp(ViewOp):
    """torch.split along `dim`: `sizes` of one entry is a chunk size, of several the
    section sizes (the builder turns torch's one-section list `[n]` into the chunk `[n]`,
    after checking that n is the whole dim)."""

    name = "split"
    surface = ("Tensor.split", "Tensor.split_with_sizes", "Tensor.unsafe_split")
    sizes: tuple[int, ...] = attr(A.sym_ints, doc="One chunk size, or the section sizes.")
    dim: int = attr(A.integer, 0)

    def sections(self, layout: Layout) -> list[tuple[int, int]]:
        rank = layout.rank
        dim = self.dim
        if not -rank <= dim < rank:
            raise LayoutError(f"split: dim {dim} out of range for rank {rank}")
        length = layout.sizes[dim % rank]
        sizes = self.sizes
        if len(sizes) == 1:
            chunk = sizes[0]
            if chunk < 0 or (chunk == 0 and length > 0):
                raise LayoutError(
                    f"split: split size must be positive (or 0 for an empty dim {dim}); got {chunk}"
                )
            if isinstance(length, Sym) and chunk != length:
                raise UndecidedError(
                    f"split: how many chunks of {chunk} the symbolic size {length} of dim "
                    f"{dim} makes depends on {', '.join(sorted(length.free_symbols))}; split "
                    f"in sections that sum to {length}, or declare the size a multiple "
                    "(stridec.trace's dynamic={0: {0: '8*B'}}: chunk(8) gives chunks of B)"
                )
            count = max(1, math.ceil(length / chunk)) if chunk > 0 else 1
            parts = [min(chunk, length - k * chunk) for k in range(count)]
        else:
            if sum(sizes) != length or any(s < 0 for s in sizes):
                raise LayoutError(
                    f"split: sections {list(sizes)} must be >= 0 and sum to {length} (dim {dim})"
                )
            parts = list(sizes)
        out, start = [], 0
        for p in parts:
            out.append((start, start + p))
            start += p
        return out

    def infer_types(self, operand_types):
        t = operand_types[0]
        dim = self.dim
        results = []
        for start, stop in _prefixed(self.name, self.sections, t.layout):
            layout = t.layout.slice(dim, start, stop, 1)
            results.append(TensorType(layout.sizes, t.dtype, layout))
        return results


# -- materializations --------------------------------------------------------------------
# Memory formats by name: the rank they need and the dim order they nest (None: row-major).
MEMORY_FORMATS: dict[str, tuple[int, tuple[int, ...]] | None] = {
    "contiguous_format": None,
    "channels_last": (4, (0, 2, 3, 1)),
    "channels_last_3d": (5, (0, 2, 3, 4, 1)),
}


def memory_format_name(op: str, value: Any) -> str:
    """A memory format's name: "channels_last" or torch's `torch.channels_last` alike."""
    name = str(value).removeprefix("torch.")
    if name not in MEMORY_FORMATS:
        raise VerificationError(
            f"{op}: attribute 'memory_format' must be one of {sorted(MEMORY_FORMATS)}; "
            f"got {value!r}"
        )
    return name


def memory_format_layout(name: str, sizes: Sequence[int]) -> Layout:
    """The layout of new memory of `sizes` in the format `name`, as torch's `empty(...,
    memory_format=...)`: row-major counts a size-0 dim as 1, channels-last does not (a
    size-0 H zeroes N's stride: (2, 3, 0, 5) gets strides (0, 1, 15, 3))."""
    needs = MEMORY_FORMATS[name]
    if needs is None:
        return Layout.contiguous(sizes)
    strides = [0] * len(sizes)
    running = 1
    for d in reversed(needs[1]):
        strides[d] = running
        running *= sizes[d]
    return Layout(tuple(sizes), tuple(strides))


def is_contiguous_as(layout: Layout, order: Sequence[int]) -> bool:
    """torch's `is_contiguous(memory_format=...)` for the format nesting the dims as
    `order`: dense in that order, the strides of size-1 dims not counting (nor the offset).
    Unlike the row-major rule, an empty layout is not exempt: its strides are checked as
    the others' (a size-0 dim zeroes what the dims outside it must have)."""
    expected = 1
    for d in reversed(order):
        if layout.sizes[d] != 1:
            if layout.strides[d] != expected:
                return False
            expected *= layout.sizes[d]
    return True


@register_op
class ContiguousOp(Op):
    """torch's `contiguous(memory_format=...)`: the operand itself -- a view, sharing its
    memory -- when it already is contiguous in that format (`is_contiguous`: the offset
    and the strides of size-1 dims do not matter), else a copy into new memory laid out
    in it (row-major, or channels-last: `Layout.for_order`). As `reshape`, which of the two
    it is follows from the operand's layout, known once the graph is specialized to the
    caller's strides."""

    name = "contiguous"
    surface = ("Tensor.contiguous",)
    memory_format: str = attr(lambda op, key, value: memory_format_name(op, value),
                              "contiguous_format")

    @classmethod
    def relate_attrs(cls, attrs, operand_types):
        name = attrs["memory_format"]
        needs = MEMORY_FORMATS[name]
        if needs is not None and operand_types and operand_types[0].rank != needs[0]:
            raise ShapeError(
                f"{cls.name}: memory_format {name} needs a tensor of rank {needs[0]}; got rank "
                f"{operand_types[0].rank}"
            )

    def in_format(self, layout: Layout) -> bool:
        """Whether torch hands the operand of `layout` back itself."""
        needs = MEMORY_FORMATS[self.memory_format]
        return layout.is_contiguous() if needs is None else is_contiguous_as(layout, needs[1])

    def aliases_operand(self) -> bool:
        return self.in_format(self.operands[0].type.layout)

    def infer_types(self, operand_types):
        t = operand_types[0]
        if self.in_format(t.layout):
            return [TensorType(t.sizes, t.dtype, t.layout)]
        return [TensorType(t.sizes, t.dtype,
                           memory_format_layout(self.memory_format, t.sizes))]

    def printed_attrs(self):
        if type(self) is ContiguousOp and self.memory_format == "contiguous_format":
            return {}  # `contiguous()`'s default goes without saying; `.to`'s has no default
        return super().printed_attrs()


@register_op
class ToFormatOp(ContiguousOp):
    """torch's `.to(memory_format=...)` (same dtype): the operand itself when torch
    suggests that format for its strides (`suggest_memory_format`:
    `Layout.channels_last_order`) -- a stepped channels-last slice is handed back though
    it is not contiguous, a transposed matrix for `contiguous_format` too -- else a copy
    into new memory in that format."""

    name = "to_format"
    surface = ("Tensor.to",)

    def in_format(self, layout: Layout) -> bool:
        needs = MEMORY_FORMATS[self.memory_format]
        suggested = layout.channels_last_order()
        return suggested is None if needs is None else suggested == needs[1]


@register_op
class PixelShuffleOp(Op):
    """torch's `pixel_shuffle(x, r)`: (*, C·r², H, W) -> (*, C, H·r, W·r), `out[..., c,
    h·r + i, w·r + j] = x[..., c·r² + i·r + j, h, w]`, in new memory laid out as torch
    lays it: channels-last where torch suggests channels-last for a rank-4 `x`
    (`suggest_memory_format`), else row-major. A copy over the space (*, C, H, r, W, r)."""

    name = "pixel_shuffle"
    surface = ("torch.pixel_shuffle",)
    factor: int = attr(A.integer)

    @classmethod
    def relate_attrs(cls, attrs, operand_types):
        if attrs["factor"] <= 0:
            raise ShapeError(f"{cls.name}: factor must be positive; got {attrs['factor']}")

    def check_rank(self, sizes: Sequence[int]) -> None:
        """Rank >= 3, and the copy's space (two more dims) within the rank limit."""
        if len(sizes) < 3:
            raise ShapeError(f"{self.name}: expects a tensor of rank >= 3; got sizes {list(sizes)}")
        if len(sizes) + 2 > MAX_RANK:
            raise UnsupportedError(f"{self.name}: rank {len(sizes)} is above the maximum "
                                   f"{MAX_RANK - 2}")

    def result_sizes(self, sizes: Sequence[int]) -> tuple[int, ...]:
        r = self.factor
        self.check_rank(sizes)
        *batch, c, h, w = sizes
        if c % (r * r):
            raise ShapeError(f"{self.name}: channels (dim -3) {c} must be divisible by the "
                             f"factor squared {r * r}")
        return (*batch, c // (r * r), h * r, w * r)

    def space(self) -> tuple[int, ...]:
        """(*, C, H, r, W, r) of the result's C, H and W."""
        r = self.factor
        *batch, c, h, w = self.result.type.sizes
        return (*batch, c, h // r if r else 0, r, w // r if r else 0, r)

    @staticmethod
    def spread(layout: Layout, r: int) -> Layout:
        """The (*, C·r², H, W) side over the space: c·r² + i·r + j, h, w."""
        *batch, c, h, w = layout.strides
        sizes = layout.sizes
        return Layout((*sizes[:-3], sizes[-3] // (r * r), sizes[-2], r, sizes[-1], r),
                      (*batch, r * r * c, h, r * c, w, c), layout.offset)

    @staticmethod
    def blocked(layout: Layout, r: int) -> Layout:
        """The (*, C, H·r, W·r) side over the space: c, h·r + i, w·r + j."""
        *batch, c, h, w = layout.strides
        sizes = layout.sizes
        return Layout((*sizes[:-3], sizes[-3], sizes[-2] // r, r, sizes[-1] // r, r),
                      (*batch, c, r * h, h, r * w, w), layout.offset)

    def source_and_destination(self) -> tuple[Layout, Layout]:
        """The operand's and the result's layouts over the copy's space."""
        r = self.factor
        return (self.spread(self.operands[0].type.layout, r),
                self.blocked(self.result.type.layout, r))

    def infer_types(self, operand_types):
        t = operand_types[0]
        sizes = self.result_sizes(t.sizes)
        return [TensorType(sizes, t.dtype, _suggested_format(self.name, t.layout, sizes))]


@register_op
class PixelUnshuffleOp(PixelShuffleOp):
    """torch's `pixel_unshuffle(x, r)`: (*, C, H·r, W·r) -> (*, C·r², H, W), the inverse
    of `pixel_shuffle`, laid out as torch lays it (as `pixel_shuffle`). As torch's, an
    empty `x` gives a copy of itself, of its own sizes."""

    name = "pixel_unshuffle"
    surface = ("torch.pixel_unshuffle",)

    def result_sizes(self, sizes):
        r = self.factor
        self.check_rank(sizes)
        *batch, c, h, w = sizes
        if h % r or w % r:
            raise ShapeError(f"{self.name}: height {h} and width {w} (dims -2, -1) must be "
                             f"divisible by the factor {r}")
        return (*batch, c * r * r, h // r, w // r)

    def space(self):
        r = self.factor
        *batch, c, h, w = self.operands[0].type.sizes
        return (*batch, c, h // r, r, w // r, r)

    def source_and_destination(self):
        r = self.factor
        return (self.blocked(self.operands[0].type.layout, r),
                self.spread(self.result.type.layout, r))

    def infer_types(self, operand_types):
        t = operand_types[0]
        sizes = self.result_sizes(t.sizes)
        if t.numel == 0:  # torch clones an empty input, sizes and all
            return [TensorType(t.sizes, t.dtype, t.layout.preserved())]
        return [TensorType(sizes, t.dtype, _suggested_format(self.name, t.layout, sizes))]


def _suggested_format(op: str, layout: Layout, sizes: Sequence[int]) -> Layout:
    """New memory of `sizes` in the format torch suggests for `layout`: channels-last for
    a rank-4 layout that looks it, else row-major; torch refuses channels_last_3d."""
    order = layout.channels_last_order()
    if order is None:
        return Layout.contiguous(sizes)
    if len(order) == 5:
        raise LayoutError(f"{op}: an input torch takes as channels_last_3d is unsupported "
                          f"(as in torch); got strides {list(layout.strides)}")
    return memory_format_layout("channels_last", sizes)


class _FreshLikeOp(Op):
    """A new tensor "like" the operand (torch's `preserve_format`, `Layout.preserved`):
    always new memory, never a view, even where the copy is trivial."""

    def infer_types(self, operand_types):
        t = operand_types[0]
        return [TensorType(t.sizes, t.dtype, t.layout.preserved())]

    def source_layout(self) -> Layout:
        """The operand's layout read in the order the result is written."""
        return self.operands[0].type.layout


@register_op
class CloneOp(_FreshLikeOp):
    """torch's `clone()`: the same elements in new memory, strides as `preserve_format`."""

    name = "clone"
    surface = ("Tensor.clone",)


@register_op
class FlipOp(_FreshLikeOp):
    """torch's `flip(dims)`: the elements reversed along `dims`, in new memory with the
    operand's strides as `preserve_format` keeps them (a flipped `x.t()` stays
    transposed). The compiler reads the operand through negative strides
    (`Layout.flip`), so the copy fuses into whatever reads the flipped tensor; what reads
    its storage (`as_strided`, `view`) reads the new tensor's, as in torch."""

    name = "flip"
    surface = ("Tensor.flip", "Tensor.fliplr", "Tensor.flipud")
    dims: tuple[int, ...] = attr(A.ints)

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if operand_types:
            _prefixed(cls.name, operand_types[0].layout.flip, attrs["dims"])  # checks the dims

    def source_layout(self) -> Layout:
        return self.operands[0].type.layout.flip(self.dims)


# -- copies -------------------------------------------------------------------------------
# Attributes the copy types share; each type lists the ones it takes, in text order.
def _layout_attr(default: Any = None) -> Any:
    return attr(A.layout, default,
                doc="The result's layout (default: the buffer's, else row-major).")


def _dtype_attr(default: Any = None) -> Any:
    return attr(A.dtype, default,
                doc="The result's dtype (a cast fused into the copy when it differs).")


def _space_attr() -> Any:
    return attr(A.sizes, doc="The iteration space.")


def _src_attr() -> Any:
    return attr(A.layout, doc="The source root's storage index of each point of `space`.")


def _dst_attr() -> Any:
    return attr(A.layout, doc="The buffer's storage index of each point of `space`.")


class CopyOp(Op):
    """Every copy: a materialization into a new buffer of result `layout` and `dtype`
    (a cast fused into the copy where it differs from its source's), or, given a
    buffer operand `into` after the source, into that buffer in place (cat writes
    several inputs into one buffer); the result then has the buffer's type. Indices
    count elements of the source's dtype: a source that reads its root's bytes as
    another type (a `bitcast`) is read so, never converted.

    The types (as MLIR separates `memref.copy`, `memref.subview` and `linalg.fill`):
    `copy` (`NaturalCopyOp`, element by element), and the explicit forms over an
    iteration space `space` that `lower-formats` and `fuse-copies` write
    (`ExplicitCopyOp`): `strided_copy`, `masked_copy`, `framed_copy` and `fill`.
    `isinstance(op, CopyOp)` asks for any of them; `copy_type` names the one an
    attribute set calls for.
    """

    num_operands = None
    #: How many operands the type takes: a source and, optionally, a buffer written into.
    operand_counts: tuple[int, ...] = (1, 2)

    def __init__(self, operands=(), attrs=None, result_types=None) -> None:
        if type(self) in (CopyOp, ExplicitCopyOp):
            raise VerificationError(
                f"{type(self).__name__} is the base of the copy types; build one of "
                f"{[c.__name__ for c in COPY_TYPES]} (or `explicit_copy_op`)")
        foreign = [k for k in attrs or () if k not in self.attr_names]
        if foreign:  # say which type takes it
            key = foreign[0]
            takers = [c.name for c in COPY_TYPES if key in c.attr_names]
            raise VerificationError(
                f"{self.name}: takes no '{key}'"
                + (f" ({' or '.join(takers)} does)" if takers else "")
                + f"; its attributes are {list(self.attr_names)}"
            )
        super().__init__(operands, attrs, result_types)

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if len(operand_types) not in cls.operand_counts:
            expected = ("no operand" if cls.operand_counts == (0,)
                        else "a source and, optionally, a buffer to write into")
            raise VerificationError(
                f"{cls.name}: expected {expected}; got {len(operand_types)} operand(s)")
        src_t = operand_types[0] if cls.operand_counts != (0,) else None
        layout = attrs["layout"]
        if layout is None:
            layout = attrs["layout"] = cls.implied_layout(operand_types)
        if any(s < 0 for s in layout.strides):
            raise LayoutError(
                f"{cls.name}: result strides must be >= 0; got {list(layout.strides)}")
        if attrs["dtype"] is None:
            assert src_t is not None  # a fill's dtype is required
            attrs["dtype"] = src_t.dtype

    @staticmethod
    def implied_layout(operand_types: Sequence[TensorType]) -> Layout | None:
        """The layout of a copy whose attributes name none: its buffer's, else row-major
        over its source's sizes; None for a fill (no operands), which must name one."""
        if len(operand_types) == 2:
            return operand_types[1].layout
        if operand_types:
            return Layout.contiguous(operand_types[0].sizes)
        return None

    def infer_types(self, operand_types):
        layout, dtype = self.layout, self.dtype
        if len(operand_types) == 2:
            into = operand_types[1]
            if into.layout != layout or into.dtype != dtype:
                raise VerificationError(
                    f"{self.name}: buffer operand {into} does not match layout {layout} "
                    f"/ dtype {dtype}"
                )
        return [TensorType(layout.sizes, dtype, layout)]

    def written_root(self) -> Value | None:
        return self.operands[1].root() if len(self.operands) == 2 else None

    @property
    def writes_into(self) -> bool:
        """Whether the copy writes into a buffer operand in place (`copy %src, %buffer`)."""
        return len(self.operands) == 2

    def printed_attrs(self):
        shown = super().printed_attrs()
        layout = self.layout
        if layout.is_default():
            shown.pop("layout", None)
        if self.operands and self.dtype == self.operands[0].type.dtype:
            shown.pop("dtype", None)
        if isinstance(self, ExplicitCopyOp) and self.dst == layout:
            shown.pop("layout", None)
        if "layout" not in shown and layout != self.implied_layout(
            [v.type for v in self.operands]
        ):
            # The parser can only leave `layout` out where `relate_attrs` infers it back.
            shown = {"layout": layout, **shown}
        return shown


@register_op
class NaturalCopyOp(CopyOp):
    """`copy`: result element `c` = source element `c` (equal sizes), in a buffer of
    result `layout` (default row-major) and `dtype` (default the source's)."""

    name = "copy"
    surface = ("Value.copy_to",)
    layout: Layout = _layout_attr()
    dtype: DType = _dtype_attr()

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        super().relate_attrs(attrs, operand_types)
        layout, src_t = attrs["layout"], operand_types[0]
        if layout.sizes != src_t.sizes:
            raise ShapeError(
                f"copy: layout sizes {list(layout.sizes)} differ from operand sizes "
                f"{list(src_t.sizes)}"
            )

    @classmethod
    def text_form(cls, operands: Sequence[Value], attrs: Mapping[str, Any]) -> tuple:
        # `copy` with explicit attributes: the one copy op of text IR before the types.
        kind = copy_type(len(operands), attrs)
        return kind, (attrs if kind is cls else explicit_copy_attrs(kind, attrs))


class ExplicitCopyOp(CopyOp):
    """An explicit copy: iterate over `space`; for each coordinate `i`, `dst` storage
    index `dst.offset + Σ i_k·dst.strides_k` of the buffer gets source root storage
    index `src.offset + Σ i_k·src.strides_k` (or, for a fill, the value `fill`)."""

    # What a type without the attribute reads as, for passes that read any explicit copy.
    src: Layout | None = None
    masks: tuple | None = None
    fill: int | float | bool | None = None
    frame: tuple[tuple[int, int], ...] | None = None

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        super().relate_attrs(attrs, operand_types)
        space = attrs["space"]
        for key in ("src", "dst"):
            lay = attrs.get(key)
            if key in attrs and lay.sizes != space:
                raise VerificationError(
                    f"{cls.name}: '{key}' must be a Layout over space {list(space)}; got {lay}"
                )
        for coeffs, _, _ in attrs.get("masks") or ():
            if len(coeffs) != len(space):
                raise VerificationError(
                    f"{cls.name}: mask coeffs {list(coeffs)} must have rank {len(space)}"
                )
        if attrs.get("fill") is not None:
            check_fill(cls.name, "fill", attrs["fill"], attrs["dtype"])

    def framed_dst(self) -> Layout:
        """`dst` over the space grown by `frame`: where the copy and its frame write."""
        dst: Layout = self.dst
        frame = self.frame or ((0, 0),) * dst.rank
        return Layout(
            tuple(n + b + a for n, (b, a) in zip(dst.sizes, frame, strict=True)),
            dst.strides,
            dst.offset - sum(b * s for (b, _), s in zip(frame, dst.strides, strict=True)),
        )

    def verify_(self) -> None:
        """An explicit copy reads inside its source's storage and writes inside its buffer,
        one address per point. Masked points are exempt: they are never read, and a
        domain restriction (fill None) never writes them either."""
        dst: Layout = self.dst
        if dst.is_broadcast():
            raise VerificationError(
                f"{self.name}: 'dst' {dst} writes several points to one address")
        if len(self.operands) == 2:
            buffer = storage_elements(self.operands[1].root(), self.dtype)
        else:
            buffer = self.layout.min_storage_size()
        if self.frame:
            try:
                framed = self.framed_dst()
            except LayoutError as e:
                raise VerificationError(
                    f"{self.name}: 'frame' {self.frame} reaches outside 'dst': {e}"
                ) from None
            if invert_strided(framed.sizes, framed.strides, framed.offset) is None:
                raise VerificationError(
                    f"{self.name}: 'dst' grown by 'frame' {self.frame} writes several points "
                    "to one address"
                )
            framed.check_fits(buffer, f"{self.name}: dst with its frame")
        if not self.masks:
            dst.check_fits(buffer, f"{self.name}: dst")
            if self.operands:
                source = self.operands[0]
                self.src.check_fits(storage_elements(source.root(), source.type.dtype),
                                    f"{self.name}: src")


@register_op
class StridedCopyOp(ExplicitCopyOp):
    """`strided_copy`: every point of `space` copies source root element `src(i)` to
    buffer element `dst(i)` (a transpose, a slice written into a cat's buffer, a flip
    reading backwards)."""

    name = "strided_copy"
    surface = ("Value.strided_copy",)
    layout: Layout = _layout_attr()
    dtype: DType = _dtype_attr()
    space: tuple[int, ...] = _space_attr()
    src: Layout = _src_attr()
    dst: Layout = _dst_attr()


@register_op
class MaskedCopyOp(ExplicitCopyOp):
    """`masked_copy`: a strided copy whose points where a mask fails read nothing and
    get `fill` (packing's padded channels), or, without `fill`, are not written at all
    (a domain restriction: unpacking)."""

    name = "masked_copy"
    surface = ("Value.masked_copy",)
    layout: Layout = _layout_attr()
    dtype: DType = _dtype_attr()
    space: tuple[int, ...] = _space_attr()
    src: Layout = _src_attr()
    dst: Layout = _dst_attr()
    masks: tuple = attr(A.masks, doc="`(coeffs, lo, hi)` bounds: a point is valid where "
                        "`lo <= Σ coeffs_k·i_k < hi` holds for each.")
    fill: int | float | bool | None = attr(
        A.number, None, doc="What a masked point gets; none: it is not written.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if attrs["masks"] is None:
            raise VerificationError(
                "masked_copy: 'masks' must hold at least one [coeffs, lo, hi]; got [] "
                "(a copy without masks is a strided_copy)")
        super().relate_attrs(attrs, operand_types)


@register_op
class FramedCopyOp(ExplicitCopyOp):
    """`framed_copy` (made by `merge-fills`): a strided (or masked) copy that also writes
    `fill` on a frame around its box, `before_k` points before it and `after_k` after it
    along each space dim, through `dst`'s strides. It runs as one masked copy over the
    framed space, so a pad's fill and its copy of the kept box write each element once."""

    name = "framed_copy"
    surface = ("Value.framed_copy",)
    layout: Layout = _layout_attr()
    dtype: DType = _dtype_attr()
    space: tuple[int, ...] = _space_attr()
    src: Layout = _src_attr()
    dst: Layout = _dst_attr()
    masks: tuple | None = attr(A.masks, None, doc="As `masked_copy`'s (its points get `fill`).")
    fill: int | float | bool = attr(A.number, doc="What the frame (and masked points) get.")
    frame: tuple[tuple[int, int], ...] = attr(
        A.frame, doc="`[before, after]` points around the box, per space dim.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        super().relate_attrs(attrs, operand_types)
        frame, space = attrs["frame"], attrs["space"]
        if len(frame) != len(space):
            raise VerificationError(
                f"framed_copy: 'frame' must be one [before, after] per space dim "
                f"({len(space)}); got {[list(p) for p in frame]}"
            )
        if not any(b or a for b, a in frame):
            raise VerificationError(
                f"framed_copy: 'frame' {[list(p) for p in frame]} frames nothing (a copy "
                "without a frame is a strided_copy or masked_copy)")


@register_op
class FillOp(ExplicitCopyOp):
    """`fill`: a new buffer of `layout` and `dtype` whose points `dst(i)` over `space`
    get `fill`; nothing is read (the lowered `full`, and the fill of a pad's frame)."""

    name = "fill"
    surface = ("Graph.fill",)
    operand_counts = (0,)
    layout: Layout = _layout_attr(A.REQUIRED)
    dtype: DType = _dtype_attr(A.REQUIRED)
    space: tuple[int, ...] = _space_attr()
    dst: Layout = _dst_attr()
    fill: int | float | bool = attr(A.number, doc="The value written.")


#: The copy types, in text order.
COPY_TYPES: tuple[type[CopyOp], ...] = (
    NaturalCopyOp, StridedCopyOp, MaskedCopyOp, FramedCopyOp, FillOp)
# `copy` reads every copy type's attributes (`NaturalCopyOp.text_form`).
NaturalCopyOp.parsed_attr_names = tuple(
    dict.fromkeys(k for c in COPY_TYPES for k in c.text_attr_names))


def copy_type(operand_count: int, attrs: Mapping[str, Any]) -> type[CopyOp]:
    """The copy type an attribute set calls for: no `space`, the natural `copy`; no
    source, a `fill`; a `frame` that is not all zero, `framed_copy`; `masks`,
    `masked_copy`; else `strided_copy`. How the parser reads the one `copy` op of older
    text, and how rewrites whose masks and frames are computed (`fuse-copies`,
    `merge-fills`) choose the type of the copies they build (`explicit_copy_op`).

    >>> copy_type(1, {"space": [2], "src": None, "masks": [[[1], 0, 1]]}).name
    'masked_copy'
    """
    if attrs.get("space") is None:
        return NaturalCopyOp
    if operand_count == 0:
        return FillOp
    frame = attrs.get("frame")
    if frame and any(b or a for b, a in frame):
        return FramedCopyOp
    return MaskedCopyOp if attrs.get("masks") else StridedCopyOp


def explicit_copy_attrs(cls: type[CopyOp], attrs: Mapping[str, Any]) -> dict[str, Any]:
    """`attrs` without what `cls` lacks and the old `copy` ignored: an empty `frame` or
    `masks`, and a `fill` that no point of a copy without masks or frame gets. Anything
    else `cls` lacks stays, for `cls` to refuse by name."""
    out = {k: v for k, v in attrs.items() if not (v is None and k not in cls.attr_names)}
    if "frame" not in cls.attr_names and not (out.get("frame") and any(
            b or a for b, a in out["frame"])):
        out.pop("frame", None)
    if "masks" not in cls.attr_names and not out.get("masks") and cls is not NaturalCopyOp:
        out.pop("masks", None)
    if cls is StridedCopyOp and not out.get("masks"):
        out.pop("fill", None)
    return out


def explicit_copy_op(operands: Sequence[Value], attrs: Mapping[str, Any]) -> CopyOp:
    """The copy of the type `attrs` call for (`copy_type`), from a dict in which a
    type's absent attributes may be None: how rewrites that compute masks and frames,
    and the parser reading the one `copy` of older text, build copies."""
    cls = copy_type(len(operands), attrs)
    return cls(operands, explicit_copy_attrs(cls, attrs))


@register_op
class PackOp(Op):
    """Pack a logical NCHW (or NC…) tensor into a format's physical layout
    (docs/design.md#formats)."""

    name = "pack"
    surface = ("Value.pack",)
    format: str = attr(A.format_name, doc="The physical format (stridec.ir.formats).")
    fill: int | float | bool = attr(A.number, 0, doc="What the padding holds.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if operand_types:
            check_fill(cls.name, "fill", attrs["fill"], operand_types[0].dtype)

    def packing(self, sizes: Sequence[int], dtype: DType) -> Any:
        fmt = get_format(self.format)
        return _prefixed(self.name, fmt.packing, tuple(sizes), dtype, self.fill)

    def infer_types(self, operand_types):
        t = operand_types[0]
        return [TensorType(self.packing(t.sizes, t.dtype).physical_sizes, t.dtype)]

    def printed_attrs(self):
        shown = super().printed_attrs()
        if shown.get("fill") == 0 and not isinstance(shown.get("fill"), float):
            shown.pop("fill")
        return shown


def logical_sizes_of(
    fmt: Any, physical: Sequence[int], channels: int, dtype: Any
) -> tuple[int, ...]:
    """Invert `physical_sizes`: the logical sizes whose packing has these physical sizes.

    `channels` is the logical size of the blocked dim (C for NCHWx / CHWN4, the row length
    for pitched rows); it is checked by packing the candidate and comparing.
    """
    physical = tuple(physical)
    order = getattr(fmt, "split_order", None)
    if order is None:  # pitched rows: same rank, the last dim is the pitch
        candidate = physical[:-1] + (channels,) if physical else physical
    elif not fmt.is_blocked:
        split = order(len(physical))
        candidate = tuple(physical[split.index(d)] for d in range(len(physical)))
    else:
        split = order(len(physical) - 1)
        space = [physical[split.index(d)] for d in range(len(physical))]
        candidate = tuple([space[0], channels] + space[3:])
    try:
        expected = fmt.physical_sizes(candidate, dtype)
    except StridecError:
        expected = None
    if expected != physical:
        raise ShapeError(
            f"unpack: a {fmt.name} tensor of sizes {list(physical)} cannot hold {channels} "
            f"channels (packing {list(candidate)} gives {expected})"
        )
    return candidate


@register_op
class UnpackOp(Op):
    """Unpack a format's physical tensor back to logical form with `channels` channels."""

    name = "unpack"
    surface = ("Value.unpack",)
    format: str = attr(A.format_name, doc="The physical format (stridec.ir.formats).")
    channels: int = attr(A.integer, doc="The logical size of the blocked dim.")

    def logical_sizes(self, physical: Sequence[int], dtype: DType) -> tuple[int, ...]:
        return logical_sizes_of(get_format(self.format), physical, self.channels, dtype)

    def infer_types(self, operand_types):
        t = operand_types[0]
        return [TensorType(self.logical_sizes(t.sizes, t.dtype), t.dtype)]


def _suggested(layout: Layout, sizes: Sequence[int]) -> Layout | None:
    """The layout torch gives the new tensor of `sizes` that `pad` makes of one of
    `layout` (`suggest_memory_format`): channels-last where `layout` looks channels-last
    (torch's strides, also where a crop leaves a size-0 dim), else None (row-major)."""
    order = layout.channels_last_order()
    if order is None:
        return None
    return memory_format_layout("channels_last" if len(order) == 4 else "channels_last_3d",
                                sizes)


@register_op
class PadOp(Op):
    """torch.nn.functional.pad, constant mode: `pad` pairs from the last dim backwards."""

    name = "pad"
    surface = ("torch.pad",)
    pad: tuple[int, ...] = attr(A.ints, doc="(before, after) pairs from the last dim backwards.")
    value: int | float | bool = attr(A.number, 0, doc="What the padding holds.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        pad = attrs["pad"]
        rank = operand_types[0].rank if operand_types else 0
        if len(pad) % 2 or len(pad) // 2 > rank:
            raise ShapeError(f"pad: 'pad' must hold pairs for at most {rank} dims; got {list(pad)}")
        if operand_types:
            check_fill(cls.name, "value", attrs["value"], operand_types[0].dtype)

    def padded_sizes(self, sizes: Sequence[int]) -> tuple[int, ...]:
        out = list(sizes)
        pad = self.pad
        for k in range(len(pad) // 2):
            d = len(out) - 1 - k
            before, after = pad[2 * k], pad[2 * k + 1]
            # As torch: each negative pad crops what the dim has, before any padding.
            if sizes[d] + min(before, 0) + min(after, 0) < 0:
                raise ShapeError(
                    f"pad: dim {d} of size {sizes[d]} cannot be cropped by {[before, after]}"
                )
            out[d] = sizes[d] + before + after
        return tuple(out)

    def infer_types(self, operand_types):
        t = operand_types[0]
        sizes = self.padded_sizes(t.sizes)
        pad = self.pad
        if all(p <= 0 for p in pad):
            # torch crops, then clones: strides as `preserve_format` keeps the crop's.
            kept = t.layout
            for k in range(len(pad) // 2):
                d = t.rank - 1 - k
                kept = kept.slice(d, -pad[2 * k], t.sizes[d] + pad[2 * k + 1], 1)
            return [TensorType(sizes, t.dtype, kept.preserved())]
        return [TensorType(sizes, t.dtype, _suggested(t.layout, sizes))]


@register_op
class CastOp(Op):
    """Element type conversion with torch's `.to(dtype)` rules (the reference backend's
    `reference_casts`), into a new buffer laid out as torch's `preserve_format` lays it
    (`Layout.preserved`): a transpose's cast keeps the transposed strides."""

    name = "cast"
    surface = (
        "Tensor.to", "Tensor.type_as", "Tensor.float", "Tensor.double", "Tensor.half",
        "Tensor.bfloat16", "Tensor.int", "Tensor.long", "Tensor.short", "Tensor.char",
        "Tensor.byte", "Tensor.bool",
    )
    dtype: DType = attr(A.dtype)

    def aliases_operand(self) -> bool:
        """A cast to the operand's own dtype is the operand (torch's `.to` returns `self`)."""
        return self.dtype == self.operands[0].type.dtype

    def infer_types(self, operand_types):
        t = operand_types[0]
        if self.dtype == t.dtype:
            return [TensorType(t.sizes, t.dtype, t.layout)]
        return [TensorType(t.sizes, self.dtype, t.layout.preserved())]


@register_op
class CatOp(Op):
    """torch.cat along `dim`: one output buffer, each input written into a slice of it."""

    name = "cat"
    surface = ("torch.cat",)
    num_operands = None
    dim: int = attr(A.integer, 0)

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if not operand_types:
            raise ShapeError("cat: expected at least one tensor; got none")

    def infer_types(self, operand_types):
        first = operand_types[0]
        rank = first.rank
        dim = self.dim
        if rank == 0 or not -rank <= dim < rank:
            raise LayoutError(f"cat: dim {dim} out of range for rank {rank}")
        dim %= rank
        total = 0
        for i, t in enumerate(operand_types):
            if t.dtype != first.dtype:
                raise ShapeError(f"cat: operand {i} has dtype {t.dtype}; expected {first.dtype}")
            if t.rank != rank or any(
                a != b
                for k, (a, b) in enumerate(zip(t.sizes, first.sizes, strict=False))
                if k != dim
            ):
                raise ShapeError(
                    f"cat: operand {i} has sizes {list(t.sizes)}; expected {list(first.sizes)} "
                    f"except in dim {dim}"
                )
            total += t.sizes[dim]
        sizes = first.sizes[:dim] + (total,) + first.sizes[dim + 1 :]
        orders = {t.layout.channels_last_order() for t in operand_types}
        order = orders.pop() if len(orders) == 1 else None
        layout = None if order is None else Layout.for_order(sizes, order)
        return [TensorType(sizes, first.dtype, layout)]


@register_op
class WriteOp(Op):
    """torch's in-place writes (`x[idx] = y`, `x.copy_(y)`, `x.fill_(v)`): `src` written
    into the elements that `dest`, a view of `storage`, addresses. The result is `storage`
    after the write: a new version of the same memory, of `storage`'s type, that every
    later op reads instead (the graph stays SSA; `stridec.ir.verifier` refuses a read of a
    version after an op wrote over it).

        %1 = slice %x {dim = 1, start = 2, stop = 4} : tensor<2x2xf32, strided<[6, 1], offset: 2>>
        %2 = write %x, %1, %y : tensor<2x6xf32>

    writes `y` (2 x 2) into columns 2 and 3 of `x`, in `x`'s memory: a call's argument is
    written in place, as torch writes it. `src` has `dest`'s sizes (torch broadcasts it
    first: the builder expands it; a `fill_` is a one-element `full` expanded) and may
    have another dtype (cast as `copy_` casts). It is a write, not a view: its result is a
    root (`aliases_operand` is False), so no view folds through it to the memory's older
    versions; `storage_root` finds the memory.
    """

    name = "write"
    surface = ("Tensor.copy_", "Tensor.fill_", "Tensor.zero_")
    num_operands = 3

    def written_root(self) -> Value | None:
        return self.operands[0]

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        storage, dest, src = operand_types
        if dest.dtype != storage.dtype:
            raise VerificationError(
                f"write: dest {dest} must be a view of storage {storage} (same dtype)"
            )
        if src.sizes != dest.sizes:
            raise ShapeError(
                f"write: src sizes {list(src.sizes)} differ from dest sizes "
                f"{list(dest.sizes)} (expand the src first, as torch broadcasts it)"
            )

    def infer_types(self, operand_types):
        t = operand_types[0]
        return [TensorType(t.sizes, t.dtype, t.layout)]

    def verify_(self) -> None:
        storage, dest = self.operands[0], self.operands[1]
        if storage.root() is not storage or dest.root() is not storage:
            raise VerificationError(
                "write: operand 1 (dest) must be a view of operand 0 (storage), itself a "
                "root (not a view)"
            )
        if dest.type.numel and dest.type.layout.may_overlap():
            raise VerificationError(
                f"write: dest layout {dest.type.layout} gives some elements one address "
                "(an expanded view); torch refuses to write into it"
            )

    @property
    def storage(self) -> Value:
        return self.operands[0]

    @property
    def dest(self) -> Value:
        return self.operands[1]

    @property
    def src(self) -> Value:
        return self.operands[2]


def storage_root(value: Value) -> Value:
    """The value that holds `value`'s memory first: its root, and through each write into
    that root (a `write`, a `copy` into a buffer, Philox values placed into one) the root
    written into -- an input, or the op that allocated the buffer."""
    v = value.root()
    while True:
        op = v.owner
        if isinstance(op, WriteOp):
            v = op.operands[0].root()
        elif isinstance(op, CopyOp) and op.writes_into:
            v = op.operands[1].root()
        elif isinstance(op, _PhiloxBase) and len(op.operands) == 2 and v is op.results[0]:
            v = op.operands[1].root()
        else:
            return v


def writes_storage(op: Op) -> Value | None:
    """The root version `op` writes over in place (`write`'s storage, a `copy` into a
    buffer's buffer, a placed Philox op's buffer), or None: `Op.written_root`."""
    return op.written_root()


def has_effects(op: Op) -> bool:
    """Whether `op` must stay even where nothing reads its results: it writes into the
    memory of a graph input (a `write`, or a copy into an argument's storage)."""
    written = writes_storage(op)
    return written is not None and isinstance(storage_root(written).owner, InputOp)


@register_op
class OutputOp(Op):
    """The graph results, in order. `reviews` names the arguments that in-place view
    methods re-viewed (`x.t_()`, `x.unsqueeze_(0)`: torch changes the caller's tensor's
    sizes, strides and offset): the last `len(reviews)` results are hidden, one per such
    call, each the argument's view at the end, which a call gives the caller's tensor
    (`as_strided_`, a version bump each, as torch's in-place view methods bump one).

        output %0, %1 {reviews = ["x"]}

    returns `%0`; `%1` (a view of `%x`) is `x`'s new view.
    """

    name = "output"
    surface = ("Graph.output",)
    num_operands = None
    is_terminator = True
    reviews: tuple[str, ...] | None = attr(A.names, None, doc="None: no argument re-viewed.")

    @classmethod
    def relate_attrs(cls, attrs: dict, operand_types: Sequence[TensorType]) -> None:
        if not operand_types:
            raise VerificationError("output: expected at least one value to return; got none")

    def infer_types(self, operand_types):
        return []

    def verify_(self) -> None:
        if not self.operands:
            raise VerificationError("output: expected at least one value to return; got none")
        reviews = self.reviews or ()
        if len(reviews) >= len(self.operands):
            raise VerificationError(
                f"output: reviews names {len(reviews)} argument(s), one per hidden trailing "
                f"result; expected fewer than the {len(self.operands)} results"
            )
        hidden = self.operands[len(self.operands) - len(reviews):]
        for name, v in zip(reviews, hidden, strict=True):
            root = storage_root(v)
            if not isinstance(root.owner, InputOp) or root.owner.arg_name != name:
                raise VerificationError(
                    f"output: a result re-viewing argument {name!r} must be a view of that "
                    f"argument's memory; got {v.type}"
                )

    @property
    def visible(self) -> list[Value]:
        """The results a call returns (the hidden re-views left out)."""
        return list(self.operands[:len(self.operands) - len(self.reviews or ())])


def is_materialization(op: Op) -> bool:
    """Whether `op` writes a new buffer (rather than being a view or a source)."""
    return not isinstance(op, (InputOp, OutputOp)) and not op.aliases_operand()


__all__ = [
    name for name, obj in list(globals().items()) if isinstance(obj, type) and issubclass(obj, Op)
] + [
    "is_materialization",
    "has_effects",
    "storage_root",
    "writes_storage",
    "COPY_TYPES",
    "copy_type",
    "explicit_copy_attrs",
    "explicit_copy_op",
    "DType",
    "Value",
]
