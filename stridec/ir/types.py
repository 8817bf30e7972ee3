"""`TensorType`: logical sizes, element type, and the layout over the value's root storage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stridec.errors import ShapeError, VerificationError
from stridec.ir.dtypes import DType, as_dtype
from stridec.ir.layout import Layout
from stridec.ir.symbols import Sym, format_size

__all__ = ["TensorType"]


@dataclass(frozen=True, slots=True)
class TensorType:
    """The type of an SSA value.

    `layout` addresses the value's *root storage* (the storage of the input or of the
    materializing op it is a view of). It defaults to the contiguous layout at offset 0,
    which the text form leaves out, as MLIR does for the identity memref layout:
    `tensor<2x3xf32>` versus `tensor<3x2xf32, strided<[1, 3], offset: 0>>`.

    >>> from stridec import TensorType, as_dtype
    >>> print(TensorType((2, 3), as_dtype("float16")))
    tensor<2x3xf16>
    >>> print(TensorType((3, 2), as_dtype("float16"), stridec.Layout((3, 2), (1, 3), 0)))
    tensor<3x2xf16, strided<[1, 3], offset: 0>>
    """

    sizes: tuple[int, ...]
    dtype: DType
    layout: Layout = None  # type: ignore[assignment]

    def __init__(self, sizes: Sequence[int], dtype: object, layout: Layout | None = None) -> None:
        try:
            sizes = tuple(s if isinstance(s, Sym) else int(s) for s in sizes)
        except (TypeError, ValueError):
            raise VerificationError(
                f"tensor type: sizes must be a sequence of ints; got {sizes!r}"
            ) from None
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "dtype", as_dtype(dtype))
        if layout is None:
            layout = Layout.contiguous(sizes)
        elif tuple(layout.sizes) != sizes:
            raise ShapeError(
                f"tensor type: layout sizes {layout.sizes} differ from type sizes {sizes}"
            )
        object.__setattr__(self, "layout", layout)

    @property
    def rank(self) -> int:
        """The number of dims.

        >>> from stridec import TensorType, as_dtype
        >>> TensorType((2, 3), as_dtype("f32")).rank
        2
        """
        return len(self.sizes)

    @property
    def numel(self) -> int:
        """The number of elements.

        >>> from stridec import TensorType, as_dtype
        >>> TensorType((2, 3), as_dtype("f32")).numel
        6
        """
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def with_layout(self, layout: Layout | None) -> TensorType:
        """The same sizes and dtype with another layout (None: row-major).

        >>> from stridec import TensorType, as_dtype
        >>> t = TensorType((2, 3), as_dtype("f32"))
        >>> print(t.with_layout(stridec.Layout((2, 3), (1, 2), 0)))
        tensor<2x3xf32, strided<[1, 2], offset: 0>>
        """
        return TensorType(self.sizes, self.dtype, layout)

    def has_default_layout(self) -> bool:
        """Whether the layout is row-major from offset 0: the one the text IR leaves out.

        >>> from stridec import TensorType, as_dtype
        >>> TensorType((2, 3), as_dtype("f32")).has_default_layout()
        True
        """
        return self.layout.is_default()

    def __str__(self) -> str:
        dims = "".join(f"{format_size(s, dim=True)}x" for s in self.sizes)
        if self.has_default_layout():
            return f"tensor<{dims}{self.dtype.short}>"
        return f"tensor<{dims}{self.dtype.short}, {self.layout}>"
