"""Strided layouts and their view algebra (docs/design.md#layout-model).

A `Layout` is ``(sizes, strides, offset)``, all counted in elements. The element at the
logical coordinate ``(i0, ..., i[r-1])`` lives at storage index

    offset + i0*stride0 + ... + i[r-1]*stride[r-1]

the dot product of DirectML's text: a packed D,H,W tensor of sizes (2, 2, 3) has strides
(6, 3, 1), and its element (d=1, h=0, w=1) is at {1,0,1}·{6,3,1} = 1*6 + 0*3 + 1*1 = 7.

Every view rule is a pure function from a layout to a new layout. The rules follow ATen
exactly (``inferExpandGeometry``, ``slice``, ``unfold``, ``computeStride``), so the result
of a chain of view ops equals ``(t.size(), t.stride(), t.storage_offset())`` of the same
chain applied to a torch tensor. Bad arguments raise `LayoutError` naming the sizes;
`view` returns ``None`` where torch's ``view`` would refuse and a copy is needed.

Negative strides (from `Layout.flip`) are allowed; torch cannot express them, so there the
oracle is the element read through the layout rather than the strides.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from stridec.errors import LayoutError, ShapeError, UnsupportedError, VerificationError
from stridec.ir import display
from stridec.ir.affine import MAX_RANK, Shaped, merge_dims
from stridec.ir.dtypes import as_dtype
from stridec.ir.symbols import (
    Sym,
    evaluate,
    exact_div,
    format_size,
    free_symbols,
    generic_value,
    statically_true,
)

__all__ = [
    "MAX_RANK",
    "Layout",
    "copies_at_every_binding",
    "broadcast_shapes",
    "coalesce_jointly",
    "contiguous_strides",
    "same_addresses",
]


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise VerificationError(f"{what}: expected an int; got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise VerificationError(f"{what}: expected an int; got {value!r}") from None


def _as_size(value: object, what: str) -> int | Sym:
    """An int, or a symbolic size (`stridec.ir.symbols.Sym`)."""
    return value if isinstance(value, Sym) else _as_int(value, what)


def _as_int_tuple(values: object, what: str, symbolic: bool = False) -> tuple[int, ...]:
    """`values` as a tuple of Python ints (accepts lists, tuples, torch.Size, numpy ints);
    with `symbolic`, symbolic sizes (`Sym`) too."""
    if type(values) is tuple and all(type(v) is int for v in values):
        return values
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise VerificationError(f"{what}: expected a sequence of ints; got {values!r}")
    out = []
    for v in values:
        if symbolic and isinstance(v, Sym):
            out.append(v)
            continue
        if isinstance(v, bool):
            raise VerificationError(f"{what}: expected a sequence of ints; got {values!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            message = f"{what}: expected a sequence of ints; got {values!r}"
            raise VerificationError(message) from None
    return tuple(out)


def _wrap_dim(dim: object, rank: int, what: str, sizes: tuple[int, ...], scalar_ok: bool) -> int:
    """Wrap a possibly negative dim into ``[0, rank)``, as torch's ``maybe_wrap_dim``.

    With `scalar_ok`, a rank-0 layout accepts dim 0 and -1 (torch treats a scalar as rank 1
    for ``squeeze``, ``unfold``, ``transpose``...); the caller decides what that means.
    """
    d = _as_int(dim, what)
    bound = 1 if (scalar_ok and rank == 0) else rank
    if not -bound <= d < bound:
        raise LayoutError(f"{what} {d} out of range for rank {rank} (sizes {sizes})")
    return d + bound if d < 0 else d


def _at_least_one(n: int | Sym) -> int | Sym:
    """torch counts a size-0 dim as 1 in packed strides; a symbolic size counts as itself
    (at a value making it 0 the tensor is empty, and its strides address nothing)."""
    return n if isinstance(n, Sym) else max(n, 1)


def _above_one(n: int | Sym) -> bool:
    """``n > 1`` for an int; a symbolic size takes its generic (large) value. The rules
    that ask only change strides of size-0/1 dims, which address nothing new."""
    return n > 1 if type(n) is int else generic_value(n) > 1


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of `sizes`, as torch computes them (a size-0 dim counts as 1).

    For (2, 3, 4): (3*4, 4, 1) = (12, 4, 1). For (2, 0, 3): (3, 3, 1), like torch.empty.
    Symbolic sizes give symbolic strides: ("N", 3, 4) has (12, 4, 1), (3, 4, "N") has
    (4*N, N, 1).
    """
    sizes = _as_int_tuple(sizes, "sizes", symbolic=True)
    strides = [1] * len(sizes)
    running = 1
    for k in range(len(sizes) - 1, -1, -1):
        strides[k] = running
        running *= _at_least_one(sizes[k])
    return tuple(strides)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast of `shapes` by torch's rules (aligned on the right; 1 stretches).

    ``broadcast_shapes((3, 1), (1, 4)) == (3, 4)``; a size 0 only meets 0 or 1. Raises
    `ShapeError` naming both shapes when two sizes of one dim differ and neither is 1.
    """
    tuples = []
    for shape in shapes:
        try:
            t = _as_int_tuple(shape, "broadcast_shapes", symbolic=True)
        except LayoutError as e:
            raise ShapeError(str(e)) from None
        if any(n < 0 for n in t):
            raise ShapeError(f"broadcast_shapes: sizes must be >= 0; got {t}")
        tuples.append(t)
    rank = max((len(t) for t in tuples), default=0)
    if rank > MAX_RANK:
        raise UnsupportedError(
            f"broadcast_shapes: rank {rank} is above the supported maximum of {MAX_RANK}"
        )
    out = [1] * rank
    owner: list[tuple[int, ...] | None] = [None] * rank
    for t in tuples:
        for k, n in enumerate(t):
            i = rank - len(t) + k
            if n == 1:
                continue
            if out[i] == 1:
                out[i], owner[i] = n, t
            elif out[i] != n:
                raise ShapeError(
                    f"broadcast_shapes: size {n} of shape {t} does not match size {out[i]} of "
                    f"shape {owner[i]} at dim {i} of the result (rank {rank})"
                )
    return tuple(out)


def _static_extent(
    sizes: tuple[int, ...], strides: tuple[int, ...], offset: int
) -> tuple[int, int] | tuple[None, None] | None:
    """(lowest, highest) storage index of sizes, strides (as many) and offset that are all
    Python ints, the sizes >= 0; (None, None) when a size is 0; None for anything else (a
    symbolic size, say). One loop: every layout built runs it."""
    if type(offset) is not int:
        return None
    low = high = offset
    empty = False
    for n, s in zip(sizes, strides):  # noqa: B905 -- the callers compare the lengths
        if type(n) is not int or type(s) is not int or n < 0:
            return None
        if n == 0:
            empty = True
        elif s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    return (None, None) if empty else (low, high)


def _valid_static_extent(
    sizes: object, strides: object, offset: object
) -> tuple[int, int] | tuple[None, None] | None:
    """`_static_extent` of a valid layout given as tuples of Python ints; None for anything
    else, which `Layout.__post_init__` converts and checks step by step, raising the error
    that names the fault."""
    if (
        type(sizes) is not tuple
        or type(strides) is not tuple
        or type(offset) is not int
        or offset < 0
        or len(sizes) != len(strides)
        or len(sizes) > MAX_RANK
    ):
        return None
    extent = _static_extent(sizes, strides, offset)
    if extent is None or (extent[0] is not None and extent[0] < 0):
        return None
    return extent


@dataclass(frozen=True, slots=True)
class Layout(Shaped):
    """Sizes, strides and offset of a strided tensor, in elements.

    Immutable and hashable: equal layouts hash equal and serve as cache keys. Any int
    sequence is accepted and stored as a tuple of Python ints. ``str(layout)`` is the MLIR
    memref spelling used by the text IR: ``strided<[60, 5, 1, 20], offset: 0>``.

    >>> from stridec import Layout
    >>> t = Layout.contiguous((2, 3, 4))
    >>> t
    Layout(sizes=(2, 3, 4), strides=(12, 4, 1), offset=0)
    >>> t.index_of((1, 2, 3))                # 1*12 + 2*4 + 3*1
    23
    >>> print(t.permute((2, 0, 1)))         # as the text IR writes it
    strided<[1, 12, 4], offset: 0>
    """

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    #: (lowest, highest) storage index addressed, both None when empty; None for a
    #: symbolic layout. Derived once here: verification reads it for every copy and view
    #: after every pass.
    _extent: tuple[int, int] | tuple[None, None] | None = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        extent = _valid_static_extent(self.sizes, self.strides, self.offset)
        if extent is not None:  # already canonical and valid: the usual case
            object.__setattr__(self, "_extent", extent)
            return
        sizes = _as_int_tuple(self.sizes, "layout sizes", symbolic=True)
        strides = _as_int_tuple(self.strides, "layout strides", symbolic=True)
        offset = _as_size(self.offset, "layout offset")
        if len(sizes) != len(strides):
            raise LayoutError(
                f"layout: sizes {sizes} (rank {len(sizes)}) and strides {strides} "
                f"(rank {len(strides)}) must have the same rank"
            )
        if len(sizes) > MAX_RANK:
            raise UnsupportedError(
                f"layout: rank {len(sizes)} is above the supported maximum of {MAX_RANK} "
                f"(sizes {sizes})"
            )
        if any(n < 0 for n in sizes):
            raise LayoutError(f"layout: sizes must be >= 0; got {sizes}")
        if offset < 0:
            raise LayoutError(f"layout: offset must be >= 0; got {offset} (sizes {sizes})")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "_extent", _static_extent(sizes, strides, offset))
        low = self.min_index()
        if low is not None and low < 0:
            raise LayoutError(
                f"layout: sizes {sizes}, strides {strides}, offset {offset} address index "
                f"{low}, before the start of storage"
            )

    def __str__(self) -> str:
        strides = ", ".join(map(format_size, self.strides))
        return f"strided<[{strides}], offset: {format_size(self.offset)}>"

    # -- symbolic sizes (docs/symbolic.md) ----------------------------------------------

    @property
    def free_symbols(self) -> frozenset[str]:
        """The names of the symbols in the sizes, strides and offset.

        >>> from stridec.ir.symbols import symbol
        >>> Layout.contiguous((symbol("N"), 3)).free_symbols
        frozenset({'N'})
        """
        if self._extent is not None:
            return frozenset()
        return free_symbols((self.sizes, self.strides, self.offset))

    def is_static(self) -> bool:
        """No symbolic size, stride or offset.

        >>> from stridec.ir.symbols import symbol
        >>> Layout.contiguous((2, 3)).is_static(), Layout.contiguous((symbol("N"), 3)).is_static()
        (True, False)
        """
        return self._extent is not None

    def evaluate(self, bindings: Mapping[str, int]) -> Layout:
        """The layout at the given symbol values (a static layout is itself).

        >>> from stridec.ir.symbols import symbol
        >>> n = symbol("N")
        >>> Layout.contiguous((n, 3)).evaluate({"N": 5})
        Layout(sizes=(5, 3), strides=(3, 1), offset=0)
        """
        return self.replace_symbols(lambda sizes: evaluate(sizes, bindings))

    def replace_symbols(self, replace: Callable[[Any], Any]) -> Layout:
        """The layout whose sizes, strides and offset are `replace` of this one's (a tuple
        of sizes, or a size, each), where `replace` changes only symbols: a static layout
        is itself.

        >>> from stridec.ir.symbols import evaluate, symbol
        >>> t = Layout.contiguous((symbol("N"), 3))
        >>> t.replace_symbols(lambda v: evaluate(v, {"N": 4}))
        Layout(sizes=(4, 3), strides=(3, 1), offset=0)
        """
        if self.is_static():
            return self
        return Layout(replace(self.sizes), replace(self.strides), replace(self.offset))

    # -- derived quantities -------------------------------------------------------------

    def max_index(self) -> int | None:
        """The highest storage index addressed; ``None`` for an empty layout.

        >>> Layout.padded((2, 3), 5).max_index()   # row 1 starts at 5: 5 + 2
        7
        """
        return self._index_bound(high=True)

    def min_index(self) -> int | None:
        """The lowest storage index addressed; ``None`` for an empty layout.

        >>> Layout.contiguous((2, 3)).slice(1, 1).min_index()
        1
        """
        return self._index_bound(high=False)

    def _index_bound(self, high: bool) -> int | None:
        """The offset plus (n - 1)·s over the dims whose stride s is >= 0 (`high`) or < 0;
        ``None`` for an empty layout."""
        if self._extent is not None:
            return self._extent[high]
        if self.numel == 0:
            return None
        return self.offset + sum(
            (n - 1) * s for n, s in zip(self.sizes, self.strides, strict=True)
            if (s >= 0 if high else s < 0)
        )

    def min_storage_size(self) -> int:
        """Elements of the smallest storage holding every addressed index (0 if empty).

        The offset counts: ``strided<[5, 1], offset: 0>`` over sizes (3, 3), DirectML's
        padding example, needs (3-1)*5 + (3-1)*1 + 1 = 13 elements.

        >>> Layout.padded((2, 3), 5).min_storage_size()   # 5 + 2 + 1
        8
        """
        high = self.max_index()
        return 0 if high is None else high + 1

    def buffer_bytes(self, dtype: object, align: int = 4) -> int:
        """Bytes of the smallest buffer for this layout, rounded up to `align`.

        The analogue of DirectML's ``DMLCalcBufferTensorSize``: (index of the last element
        + 1) * itemsize, rounded up to a multiple of 4 bytes by default. Unlike DirectML the
        offset counts, as it is part of the layout. `dtype` is a DType, a name or a
        torch.dtype.

        >>> Layout.contiguous((3, 3)).buffer_bytes("float16")   # 18 bytes, rounded up to 4
        20
        """
        itemsize = as_dtype(dtype).itemsize
        align = _as_int(align, "buffer_bytes align")
        if align < 1:
            raise LayoutError(f"buffer_bytes: align must be >= 1; got {align}")
        nbytes = self.min_storage_size() * itemsize
        return -(-nbytes // align) * align

    def fits(self, storage_elements: int) -> bool:
        """Whether every addressed index lies in ``[0, storage_elements)``.

        >>> Layout.contiguous((2, 3)).fits(6), Layout.contiguous((2, 3)).fits(5)
        (True, False)
        """
        high = self.max_index()
        return high is None or high < storage_elements

    def check_fits(self, storage_elements: int, what: str = "layout") -> None:
        """Raise `LayoutError` naming `what` unless the layout `fits` the storage.

        >>> Layout.contiguous((2, 3)).check_fits(5, "x")
        Traceback (most recent call last):
            ...
        stridec.errors.LayoutError: x: sizes (2, 3), strides (3, 1), offset 0 address indice...
        """
        if not self.fits(storage_elements):
            raise LayoutError(
                f"{what}: sizes {self.sizes}, strides {self.strides}, offset {self.offset} "
                f"address indices up to {self.max_index()}, outside a storage of "
                f"{storage_elements} elements"
            )

    def _one_per_dim(self, values: Sequence[int], what: str) -> tuple[int, ...]:
        """`values` as ints, one per dim, or `LayoutError` "<what> (…) have rank n, sizes
        (…) have rank m"."""
        out = _as_int_tuple(values, what)
        if len(out) != self.rank:
            raise LayoutError(
                f"{what} {out} have rank {len(out)}, sizes {self.sizes} have rank {self.rank}"
            )
        return out

    def index_of(self, coords: Sequence[int]) -> int:
        """Storage index of the element at `coords`: offset + dot(coords, strides).

        >>> Layout.contiguous((2, 3, 4)).index_of((1, 2, 3))   # 1*12 + 2*4 + 3*1
        23
        """
        coords = self._one_per_dim(coords, "index_of: coords")
        for k, (i, n) in enumerate(zip(coords, self.sizes, strict=True)):
            if not 0 <= i < n:
                raise LayoutError(
                    f"index_of: coordinate {i} out of range for dim {k} of sizes {self.sizes}"
                )
        return self.offset + sum(i * s for i, s in zip(coords, self.strides, strict=True))

    def table(self, max_rows: int | None = 32) -> str:
        """The seeds' table of logical index -> storage offset, with the arithmetic.

        For DirectML's DHW example, sizes (2, 2, 3) packed, the row of (1, 0, 1) reads
        ``(1, 0, 1) -> {1,0,1}·{6,3,1} = 7``; an offset is added in front
        (``t[:, :, :, 2]`` of the PyTorch article: ``(0, 1, 2) -> 2 + {0,1,2}·{24,12,4} =
        22``). Rows go in row-major order; past `max_rows` (None: no limit) the table shows
        the first ones, a ``...`` line and the last.

        >>> print(Layout.contiguous((2, 3)).transpose(0, 1).table())
        sizes (3, 2), strides (1, 3), offset 0
        (0, 0) -> {0,0}·{1,3} = 0
        (0, 1) -> {0,1}·{1,3} = 3
        (1, 0) -> {1,0}·{1,3} = 1
        (1, 1) -> {1,1}·{1,3} = 4
        (2, 0) -> {2,0}·{1,3} = 2
        (2, 1) -> {2,1}·{1,3} = 5
        """
        head = f"sizes {self.sizes}, strides {self.strides}, offset {self.offset}"
        numel = self.numel
        if numel == 0:
            return f"{head}\n(no elements)"
        dot = "{" + ",".join(map(str, self.strides)) + "}"
        rows = range(numel)
        if max_rows is not None and numel > max_rows:
            shown = max(max_rows - 2, 1)
            rows = [*range(shown), -1, numel - 1]
        strides = contiguous_strides(self.sizes)
        cells: list[tuple[str, str]] = []
        for flat in rows:
            if flat < 0:
                cells.append(("...", ""))
                continue
            coords = tuple((flat // s) % n for n, s in zip(self.sizes, strides, strict=True))
            parts = [str(self.offset)] if self.offset or not coords else []
            if coords:
                parts.append("{" + ",".join(map(str, coords)) + "}·" + dot)
            cells.append((str(coords), f"-> {' + '.join(parts)} = {self.index_of(coords)}"))
        width = max(len(c) for c, _ in cells)
        lines = [head] + [f"{c:<{width}} {sum_}".rstrip() for c, sum_ in cells]
        return "\n".join(lines)

    def _repr_svg_(self) -> str | None:
        """The storage picture (`stridec.draw`) for notebooks; None without matplotlib,
        so the text form shows instead. Drawn by `stridec.ir.display`'s renderer: `ir` does
        not import the drawing code."""
        return display.svg(self)

    def dim_index(self, dim: int) -> int:
        """`dim` wrapped into ``[0, rank)`` (negative dims count from the end).

        >>> Layout.contiguous((2, 3, 4)).dim_index(-1)
        2
        """
        return _wrap_dim(dim, self.rank, "dim", self.sizes, scalar_ok=False)

    # -- predicates (named as in DirectML's text) ---------------------------------------

    def _significant(self) -> list[tuple[int, int]]:
        """(size, |stride|) of the dims that move, innermost (smallest stride) first."""
        dims = [
            (n, -s if s < 0 else s)
            for n, s in zip(self.sizes, self.strides, strict=True)
            if n != 1
        ]
        dims.sort(key=lambda d: generic_value(d[1]))
        return dims

    def is_contiguous(self) -> bool:
        """Row-major packed, as torch's ``is_contiguous``: size-1 strides and the offset
        do not matter, and an empty layout is contiguous.

        >>> t = Layout.contiguous((2, 3))
        >>> t.is_contiguous(), t.transpose(0, 1).is_contiguous()
        (True, False)
        """
        if self.numel == 0:
            return True
        expected = 1
        for n, s in zip(reversed(self.sizes), reversed(self.strides), strict=True):
            if n != 1:
                if s != expected:
                    return False
                expected *= n
        return True

    def is_packed(self) -> bool:
        """Some order of the dims is row-major packed (NHWC is packed, not contiguous).

        Every element has its own address and the addresses leave no gap: sorted by stride,
        each stride is the product of the sizes inside it. A flipped dim is still packed.

        >>> nhwc = Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1))
        >>> nhwc.is_packed(), nhwc.is_contiguous()
        (True, False)
        """
        if self.numel == 0:
            return True
        expected = 1
        for n, s in self._significant():
            if s != expected:
                return False
            expected *= n
        return True

    def is_broadcast(self) -> bool:
        """Some dim of size > 1 has stride 0, so elements repeat (an empty layout never).

        >>> Layout.contiguous((1, 3)).expand((4, 3)).is_broadcast()
        True
        """
        if self._extent is not None:  # static: plain comparisons
            return self._extent[0] is not None and any(
                s == 0 and n > 1 for n, s in zip(self.sizes, self.strides, strict=True)
            )
        return self.numel != 0 and any(
            _above_one(n) and s == 0 for n, s in zip(self.sizes, self.strides, strict=True)
        )

    def may_overlap(self) -> bool:
        """Conservative: ``False`` only where each element provably has its own address.

        The proof: sorted by |stride|, every stride exceeds the span of the dims inside it.
        ``(3, 2)`` with strides ``(2, 3)`` addresses 0, 3, 2, 5, 4, 7 -- all distinct -- yet
        3 does not exceed the span (3-1)*2 = 4, so it answers ``True``.

        >>> Layout.contiguous((1, 3)).expand((2, 3)).may_overlap()
        True
        >>> Layout.contiguous((2, 3)).may_overlap()
        False
        """
        numel = self.numel
        if type(numel) is int and numel <= 1:
            return False
        reach = 0
        for n, s in self._significant():
            if s == 0 or not statically_true(s > reach):
                return True
            reach += (n - 1) * s
        return False

    def is_padded(self) -> bool:
        """No overlap, but the addressed span is larger than `numel` (row pitch, slices).

        The span is max_index - min_index + 1: an offset alone is not padding. Uses
        `may_overlap`, so a layout it cannot prove overlap-free is not called padded.

        >>> Layout.padded((2, 3), 5).is_padded()
        True
        """
        low, high = self.min_index(), self.max_index()
        if low is None or high is None or self.may_overlap():
            return False
        return statically_true(high - low + 1 > self.numel)

    def same_addresses(self, other: Layout) -> bool:
        """The same coordinate -> index map: equal sizes and, unless the layouts are empty,
        equal offsets and equal strides on every dim of size > 1.

        >>> a = Layout((1, 3), (3, 1), 0)
        >>> b = Layout((1, 3), (7, 1), 0)      # the stride of a size-1 dim never counts
        >>> a == b, a.same_addresses(b)
        (False, True)
        """
        return same_addresses(self, other)

    def is_non_overlapping_and_dense(self) -> bool:
        """torch's ``is_non_overlapping_and_dense``: sorted by stride (dims of size < 2
        last), each stride is the product of the sizes inside it. An empty layout is;
        negative strides never are (torch has none).

        >>> Layout.for_order((2, 3, 4), (2, 0, 1)).is_non_overlapping_and_dense()
        True
        """
        if any(s < 0 for s in self.strides):
            return False
        if self.numel == 0:
            return True
        if self.rank == 1:
            return not _above_one(self.sizes[0]) or self.strides[0] == 1
        order = sorted(
            range(self.rank),
            key=lambda d: (not _above_one(self.sizes[d]), generic_value(self.strides[d])),
        )
        expected = 1
        for d in order:
            if not _above_one(self.sizes[d]):
                return True
            if self.strides[d] != expected:
                return False
            expected *= self.sizes[d]
        return True

    def channels_last_order(self) -> tuple[int, ...] | None:
        """The dim order of torch's `suggest_memory_format` when it suggests channels-last:
        (0, 2, 3, 1) for a rank-4 layout whose strides look channels-last, (0, 2, 3, 4, 1)
        for rank 5 (ATen's `is_channels_last_strides_2d` / `_3d`: C innermost, then the
        spatial dims backwards, then N, each stride at least the span inside it; a
        stride-0 C or a size-0 dim is not). None: torch suggests contiguous. `pad` and
        `cat` write their result in the order suggested.

        >>> Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1)).channels_last_order()
        (0, 2, 3, 1)
        >>> Layout.contiguous((2, 3, 4, 5)).channels_last_order() is None
        True
        """
        if self.rank == 4:
            walk, order = (1, 3, 2, 0), (0, 2, 3, 1)
        elif self.rank == 5:
            walk, order = (1, 4, 3, 2, 0), (0, 2, 3, 4, 1)
        else:
            return None
        sizes, strides = self.sizes, self.strides
        if strides[1] == 0:
            return None
        least = 0
        for d in walk:
            if sizes[d] == 0 or generic_value(strides[d]) < generic_value(least):
                return None
            if d == 0 and least == strides[1]:
                return None
            least = strides[d] * (sizes[d] if _above_one(sizes[d]) else 1)
        return order

    def preserved(self) -> Layout:
        """The layout of a new tensor made "like" this one with torch's
        ``preserve_format`` (``clone``, ``flip``, ``empty_like``): these strides when they
        are non-overlapping and dense, else dense strides nesting the dims as this layout
        does (ATen's ``infer_dense_strides``): dims sorted by stride, innermost first, a
        stride-0 dim keeping its place, and equal strides putting the smaller dim inside.
        A transposed (2, 3) of strides (1, 2)... keeps (1, 2); sizes (4, 3) stepped as
        strides (6, 2) become (3, 1); an expanded (3, 4) of strides (1, 0) becomes (4, 1).
        The offset is 0.

        >>> Layout.contiguous((2, 3)).transpose(0, 1).preserved()
        Layout(sizes=(3, 2), strides=(1, 3), offset=0)
        >>> Layout.contiguous((4, 6)).slice(1, 0, None, 2).preserved()
        Layout(sizes=(4, 3), strides=(3, 1), offset=0)
        """
        if self.is_non_overlapping_and_dense():
            return Layout(self.sizes, self.strides)
        rank = self.rank
        sizes, strides = self.sizes, self.strides

        def should_swap(d0: int, d1: int) -> int:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                return 0
            if s0 != s1:
                return -1 if generic_value(s0) < generic_value(s1) else 1
            return 1 if generic_value(sizes[d0]) > generic_value(sizes[d1]) else 0

        perm = list(range(rank - 1, -1, -1))
        for i in range(1, rank):
            d1 = i
            for d0 in range(i - 1, -1, -1):
                comparison = should_swap(perm[d0], perm[d1])
                if comparison > 0:
                    perm[d0], perm[d1] = perm[d1], perm[d0]
                    d1 = d0
                elif comparison < 0:
                    break
        out = [0] * rank
        running = 1
        for d in perm:
            out[d] = running
            if _above_one(sizes[d]):
                running *= sizes[d]
        return Layout(sizes, tuple(out))

    # -- constructors -------------------------------------------------------------------

    def is_default(self) -> bool:
        """Equal to `Layout.contiguous(self.sizes)`, the layout a tensor type has when it
        names none (unlike `is_contiguous`, size-1 strides and the offset count).

        >>> t = Layout.contiguous((2, 3))
        >>> t.is_default(), t.slice(1, 1).is_default()
        (True, False)
        """
        return self.offset == 0 and self.strides == contiguous_strides(self.sizes)

    @classmethod
    def contiguous(cls, sizes: Sequence[int]) -> Layout:
        """The row-major layout of `sizes`: (2, 2, 3) gets strides (2*3, 3, 1) = (6, 3, 1).

        >>> Layout.contiguous((2, 2, 3))
        Layout(sizes=(2, 2, 3), strides=(6, 3, 1), offset=0)
        """
        sizes = _as_int_tuple(sizes, "contiguous sizes", symbolic=True)
        return cls(sizes, contiguous_strides(sizes))

    @classmethod
    def for_order(cls, sizes: Sequence[int], order: Sequence[int]) -> Layout:
        """Packed layout whose dims nest as `order`, outermost first.

        NHWC storage of NCHW sizes is order (0, 2, 3, 1): for sizes {1, 1, 3, 5} the C stride
        is 1, W stride C = 1, H stride W*C = 5 and N stride H*W*C = 15, giving DirectML's
        {15, 1, 5, 1}. A size-0 dim counts as 1, as in `contiguous_strides`.

        >>> Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1))   # NHWC
        Layout(sizes=(2, 3, 4, 5), strides=(60, 1, 15, 3), offset=0)
        """
        sizes = _as_int_tuple(sizes, "for_order sizes", symbolic=True)
        order = _as_int_tuple(order, "for_order order")
        if sorted(order) != list(range(len(sizes))):
            raise LayoutError(
                f"for_order: order {order} is not a permutation of range({len(sizes)}) "
                f"(sizes {sizes})"
            )
        strides = [0] * len(sizes)
        running = 1
        for d in reversed(order):
            strides[d] = running
            running *= _at_least_one(sizes[d])
        return cls(sizes, tuple(strides))

    @classmethod
    def padded(cls, sizes: Sequence[int], pitch: int) -> Layout:
        """Rows of `pitch` elements holding ``sizes[-1]`` real ones, as in DirectML's padding
        example: sizes (3, 3), pitch 5 -> strides (5, 1). Outer strides multiply up from the
        pitched row: (2, 3, 3), pitch 5 -> strides (3*5, 5, 1) = (15, 5, 1).

        >>> Layout.padded((2, 3), 5)
        Layout(sizes=(2, 3), strides=(5, 1), offset=0)
        """
        sizes = _as_int_tuple(sizes, "padded sizes", symbolic=True)
        pitch = _as_size(pitch, "padded pitch")
        if not sizes:
            raise LayoutError("padded: a pitched layout needs rank >= 1; got sizes ()")
        if pitch < sizes[-1]:
            raise LayoutError(
                f"padded: pitch {pitch} is smaller than the row of {sizes[-1]} elements "
                f"(sizes {sizes})"
            )
        strides = [1] * len(sizes)
        running = pitch
        for k in range(len(sizes) - 2, -1, -1):
            strides[k] = running
            running *= _at_least_one(sizes[k])
        return cls(sizes, tuple(strides))

    # -- view algebra -------------------------------------------------------------------

    def permute(self, dims: Sequence[int]) -> Layout:
        """Reorder the dims: result dim k is input dim ``dims[k]`` (strides permute too).

        >>> Layout.contiguous((2, 3, 4)).permute((2, 0, 1))
        Layout(sizes=(4, 2, 3), strides=(1, 12, 4), offset=0)
        """
        dims = self._one_per_dim(dims, "permute: dims")
        wrapped = [_wrap_dim(d, self.rank, "permute: dim", self.sizes, False) for d in dims]
        if sorted(wrapped) != list(range(self.rank)):
            raise LayoutError(
                f"permute: dims {dims} is not a permutation of range({self.rank}) "
                f"(sizes {self.sizes})"
            )
        return Layout(
            tuple(self.sizes[d] for d in wrapped),
            tuple(self.strides[d] for d in wrapped),
            self.offset,
        )

    def transpose(self, d0: int, d1: int) -> Layout:
        """Swap dims `d0` and `d1`.

        >>> Layout.contiguous((2, 3)).transpose(0, 1)
        Layout(sizes=(3, 2), strides=(1, 3), offset=0)
        """
        a = _wrap_dim(d0, self.rank, "transpose: dim", self.sizes, True)
        b = _wrap_dim(d1, self.rank, "transpose: dim", self.sizes, True)
        if self.rank == 0 or a == b:
            return self
        order = list(range(self.rank))
        order[a], order[b] = b, a
        return self.permute(order)

    def expand(self, sizes: Sequence[int]) -> Layout:
        """Broadcast to `sizes` without copying (ATen's ``inferExpandGeometry``).

        -1 keeps a size; new leading dims may be added; only a size-1 dim may change size
        and then gets stride 0. ``arange(3).expand(2, 3)`` has strides (0, 1).

        >>> Layout.contiguous((3, 1)).expand((2, 3, 4))
        Layout(sizes=(2, 3, 4), strides=(0, 1, 0), offset=0)
        """
        target = _as_int_tuple(sizes, "expand sizes", symbolic=True)
        ndim = len(target)
        if ndim < self.rank:
            raise LayoutError(
                f"expand: target sizes {target} have rank {ndim}, below the rank "
                f"{self.rank} of sizes {self.sizes}"
            )
        new_sizes = [0] * ndim
        new_strides = [0] * ndim
        for i in range(ndim - 1, -1, -1):
            d = self.rank - (ndim - i)
            if d >= 0:
                size, stride = self.sizes[d], self.strides[d]
            else:
                # A new leading dim; torch strides it as if contiguous over what follows
                # (a scalar has nothing to follow, and torch gives 0).
                size = 1
                stride = new_sizes[i + 1] * new_strides[i + 1] if i + 1 < ndim else 0
            want = target[i]
            if want == -1:
                if d < 0:
                    raise LayoutError(
                        f"expand: -1 is not allowed for the new leading dim {i} "
                        f"(target sizes {target}, sizes {self.sizes})"
                    )
                want = size
            elif want < 0:
                raise LayoutError(
                    f"expand: size {want} at dim {i} must be >= 0 or -1 "
                    f"(target sizes {target}, sizes {self.sizes})"
                )
            if size != want:
                if size != 1:
                    raise LayoutError(
                        f"expand: the expanded size {want} must match the existing size "
                        f"{size} at non-singleton dim {i} (target sizes {target}, "
                        f"sizes {self.sizes})"
                    )
                size, stride = want, 0
            new_sizes[i], new_strides[i] = size, stride
        return Layout(tuple(new_sizes), tuple(new_strides), self.offset)

    def slice(
        self, dim: int, start: int | None = None, stop: int | None = None, step: int = 1
    ) -> Layout:
        """``t[..., start:stop:step, ...]`` on `dim` (ATen's ``slice``).

        Negative start/stop count from the end, out-of-range bounds clamp, step >= 1.
        ``arange(5)[5:]`` is empty with offset 5, as in torch.

        >>> Layout.contiguous((4, 6)).slice(1, 1, None, 2)
        Layout(sizes=(4, 3), strides=(6, 2), offset=1)
        """
        if self.rank == 0:
            raise LayoutError("slice: cannot slice a rank-0 layout (sizes ())")
        d = _wrap_dim(dim, self.rank, "slice: dim", self.sizes, False)
        step = _as_int(step, "slice step")
        if step < 1:
            raise LayoutError(
                f"slice: step must be >= 1; got {step} (dim {dim}, sizes {self.sizes})"
            )
        n, s = self.sizes[d], self.strides[d]
        lo = 0 if start is None else _as_size(start, "slice start")
        hi = n if stop is None else _as_size(stop, "slice stop")
        if lo < 0:
            lo += n
        if hi < 0:
            hi += n
        lo = min(max(lo, 0), n)
        hi = min(max(hi, lo), n)
        length = (hi - lo + step - 1) // step
        offset = self.offset + lo * s
        if offset < 0:
            # Only an empty result with a negative stride gets here (torch has none): a
            # non-empty slice starts at an addressed element. Empty layouts address
            # nothing, so any offset >= 0 is right; keep the old one.
            offset = self.offset
        sizes = list(self.sizes)
        strides = list(self.strides)
        sizes[d], strides[d] = length, s * step
        return Layout(tuple(sizes), tuple(strides), offset)

    def select(self, dim: int, index: int) -> Layout:
        """``t.select(dim, index)``: drop `dim`, moving the offset to element `index`.

        ``arange(24).reshape(1, 2, 3, 4)[:, :, :, 2]`` is offset 0 + 2*1 = 2, strides
        (24, 12, 4).

        >>> Layout.contiguous((2, 3)).select(1, 2)
        Layout(sizes=(2,), strides=(3,), offset=2)
        """
        if self.rank == 0:
            raise LayoutError("select: cannot select from a rank-0 layout (sizes ())")
        d = _wrap_dim(dim, self.rank, "select: dim", self.sizes, False)
        i = _as_size(index, "select index")
        n = self.sizes[d]
        if not -n <= i < n:
            raise LayoutError(
                f"select: index {i} out of range for dim {dim} of size {n} (sizes {self.sizes})"
            )
        if i < 0:
            i += n
        offset = self.offset + i * self.strides[d]
        if offset < 0:
            # Only an empty layout with a negative stride gets here; see `slice`.
            offset = self.offset
        return Layout(
            self.sizes[:d] + self.sizes[d + 1 :], self.strides[:d] + self.strides[d + 1 :], offset
        )

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Layout:
        """Drop size-1 dims: all of them, or those of `dim` (an int or a tuple) that have
        size 1; squeezing a dim of another size is a no-op, and naming a dim twice is an
        error, as in torch.

        >>> Layout.contiguous((2, 1, 3)).squeeze()
        Layout(sizes=(2, 3), strides=(3, 1), offset=0)
        """
        if dim is None:
            chosen = set(range(self.rank))
        else:
            dims = (dim,) if not isinstance(dim, Iterable) else tuple(dim)
            wrapped = [_wrap_dim(d, self.rank, "squeeze: dim", self.sizes, True) for d in dims]
            chosen = set(wrapped)
            if len(chosen) != len(wrapped):
                raise LayoutError(
                    f"squeeze: dims {dims} name a dim more than once (sizes {self.sizes})"
                )
        for k in sorted(chosen):
            if k < self.rank and isinstance(self.sizes[k], Sym):
                raise LayoutError(
                    f"squeeze: dim {k} has the symbolic size {self.sizes[k]}, so whether it "
                    f"goes depends on the value of {', '.join(sorted(free_symbols(self.sizes[k])))}"
                    f" (sizes {_show(self.sizes)}); squeeze a dim of size 1 by its index"
                )
        keep = [k for k in range(self.rank) if not (k in chosen and self.sizes[k] == 1)]
        return Layout(
            tuple(self.sizes[k] for k in keep),
            tuple(self.strides[k] for k in keep),
            self.offset,
        )

    def unsqueeze(self, dim: int) -> Layout:
        """Insert a size-1 dim before `dim` (``-rank-1 <= dim <= rank``), strided as torch
        does: ``sizes[dim] * strides[dim]``, or 1 at the end.

        >>> Layout.contiguous((2, 3)).unsqueeze(1)
        Layout(sizes=(2, 1, 3), strides=(3, 3, 1), offset=0)
        """
        d = _wrap_dim(dim, self.rank + 1, "unsqueeze: dim", self.sizes, False)
        stride = 1 if d >= self.rank else self.sizes[d] * self.strides[d]
        return Layout(
            self.sizes[:d] + (1,) + self.sizes[d:],
            self.strides[:d] + (stride,) + self.strides[d:],
            self.offset,
        )

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Layout:
        """torch.diagonal: drop `dim1` and `dim2`, append the diagonal (stride
        ``strides[dim1] + strides[dim2]``) starting `offset` above it (below for a negative
        offset). Of a (3, 4) row-major layout, offset 1: elements (0, 1), (1, 2), (2, 3) at
        1, 1 + 5, 1 + 2·5: sizes (3,), strides (4 + 1,) = (5,), offset 1·1 = 1.

        >>> Layout.contiguous((3, 3)).diagonal()
        Layout(sizes=(3,), strides=(4,), offset=0)
        """
        d1 = _wrap_dim(dim1, self.rank, "diagonal: dim1", self.sizes, False)
        d2 = _wrap_dim(dim2, self.rank, "diagonal: dim2", self.sizes, False)
        k = _as_int(offset, "diagonal: offset")
        if d1 == d2:
            raise LayoutError(
                f"diagonal: dim1 and dim2 must differ; got {dim1} and {dim2} (sizes {self.sizes})"
            )
        n1, n2 = self.sizes[d1], self.sizes[d2]
        length = max(min(n1, n2 - k), 0) if k >= 0 else max(min(n1 + k, n2), 0)
        start = self.offset
        if length:
            start += k * self.strides[d2] if k >= 0 else -k * self.strides[d1]
        keep = [d for d in range(self.rank) if d not in (d1, d2)]
        return Layout(
            tuple(self.sizes[d] for d in keep) + (length,),
            tuple(self.strides[d] for d in keep) + (self.strides[d1] + self.strides[d2],),
            start,
        )

    def flip(self, dims: int | Sequence[int]) -> Layout:
        """Reverse `dims` without copying: negate their strides and move the offset to
        what was their last element (offset + (size-1)*stride). An empty layout only
        negates the strides.

        >>> Layout.contiguous((2, 3)).flip(1)
        Layout(sizes=(2, 3), strides=(3, -1), offset=2)
        """
        raw = (dims,) if not isinstance(dims, Iterable) else tuple(dims)
        wrapped = [_wrap_dim(d, self.rank, "flip: dim", self.sizes, True) for d in raw]
        if len(set(wrapped)) != len(wrapped):
            raise LayoutError(
                f"flip: dims {tuple(raw)} name a dim more than once (sizes {self.sizes})"
            )
        if not self.rank:  # as torch, a scalar flips along dim 0 (or -1): nothing moves
            return self
        strides = list(self.strides)
        offset = self.offset
        empty = self.numel == 0
        for d in wrapped:
            if not empty:
                offset += (self.sizes[d] - 1) * strides[d]
            strides[d] = -strides[d]
        return Layout(self.sizes, tuple(strides), offset)

    def unfold(self, dim: int, size: int, step: int) -> Layout:
        """Sliding windows of `size` every `step` along `dim`, as a new last dim (torch
        ``Tensor.unfold``). (7,) stride (1,) unfold(0, 3, 2) -> sizes (3, 3), strides (2, 1).

        >>> Layout.contiguous((5,)).unfold(0, 3, 2)
        Layout(sizes=(2, 3), strides=(2, 1), offset=0)
        """
        d = _wrap_dim(dim, self.rank, "unfold: dim", self.sizes, True)
        size = _as_int(size, "unfold size")
        step = _as_int(step, "unfold step")
        max_size = 1 if self.rank == 0 else self.sizes[d]
        if size < 0 or size > max_size:
            raise LayoutError(
                f"unfold: size {size} must be in [0, {max_size}] for dim {dim} (sizes {self.sizes})"
            )
        if step < 1:
            raise LayoutError(
                f"unfold: step must be >= 1; got {step} (dim {dim}, sizes {self.sizes})"
            )
        if self.rank == 0:
            return Layout((size,), (1,), self.offset)
        sizes = list(self.sizes)
        strides = list(self.strides)
        sizes[d] = (self.sizes[d] - size) // step + 1
        strides[d] = step * self.strides[d]
        return Layout(tuple(sizes) + (size,), tuple(strides) + (self.strides[d],), self.offset)

    def as_strided(
        self,
        sizes: Sequence[int],
        strides: Sequence[int],
        offset: int | None = None,
        *,
        storage_size: int | None = None,
    ) -> Layout:
        """A new layout over the same storage (the offset is kept when not given).

        With `storage_size` (in elements) the result must fit that storage, else
        `LayoutError`.

        >>> Layout.contiguous((2, 3)).as_strided((3, 2), (1, 3))
        Layout(sizes=(3, 2), strides=(1, 3), offset=0)
        """
        result = Layout(
            _as_int_tuple(sizes, "as_strided sizes", symbolic=True),
            _as_int_tuple(strides, "as_strided strides", symbolic=True),
            self.offset if offset is None else _as_size(offset, "as_strided offset"),
        )
        if storage_size is not None:
            result.check_fits(storage_size, "as_strided")
        return result

    def view_dtype(self, old: Any, new: Any) -> Layout:
        """The layout torch's `view(dtype)` gives a tensor of this layout and element type
        `old` read as `new` (sizes, strides and offset in elements of `new`, over the
        same bytes). Same element size: the same layout. Otherwise the last dim is
        scaled by the ratio r of the sizes, and it must have stride 1: going down (4 to 1
        byte), every other stride and the offset are multiplied by r, the last size too;
        going up, the last size, every other stride and the offset must divide by r.
        A (4, 6) float32 row-major layout as int8 is (4, 24) with strides (24, 1); its
        columns 2: (offset 2) as float64 are (4, 2), strides (3, 1), offset 1.

        >>> Layout.contiguous((4, 6)).view_dtype("float32", "int8")
        Layout(sizes=(4, 24), strides=(24, 1), offset=0)
        """
        old, new = as_dtype(old), as_dtype(new)
        if old.itemsize == new.itemsize:
            return self
        what = f"to view {old.name} as {new.name} (different element sizes)"
        if self.rank == 0:
            raise LayoutError(f"view(dtype): self.dim() cannot be 0 {what}")
        sizes, strides, offset = list(self.sizes), list(self.strides), self.offset
        if new.itemsize < old.itemsize:
            r = old.itemsize // new.itemsize
            if strides[-1] != 1:
                raise LayoutError(f"view(dtype): self.stride(-1) must be 1 {what}, but got "
                                  f"{strides[-1]}")
            return Layout((*sizes[:-1], sizes[-1] * r), (*(s * r for s in strides[:-1]), 1),
                          offset * r)
        r = new.itemsize // old.itemsize

        def divided(value: Any, name: str) -> Any:
            quotient = exact_div(value, r)  # over symbols: for every value of them
            if quotient is None:
                raise LayoutError(f"view(dtype): {name} must be divisible by {r} {what}, but "
                                  f"got {format_size(value)}")
            return quotient

        last = divided(sizes[-1], "self.size(-1)")
        offset = divided(offset, "self.storage_offset()")
        if strides[-1] != 1:
            raise LayoutError(f"view(dtype): self.stride(-1) must be 1 {what}, but got "
                              f"{strides[-1]}")
        outer = tuple(divided(st, f"self.stride({d})") for d, st in enumerate(strides[:-1]))
        return Layout((*sizes[:-1], last), (*outer, 1), offset)

    def view(self, sizes: Sequence[int]) -> Layout | None:
        """Reshape without copying, or ``None`` where a copy is needed (torch ``view``).

        One -1 is inferred. The rule is ATen's ``computeStride``: the old dims split into
        chunks that are contiguous among themselves (size-1 dims never break a chunk); the
        new sizes must group evenly into the same chunks. ``arange(24).reshape(1, 2, 3,
        4)[:, :, :, 2]`` (sizes (1, 2, 3), strides (24, 12, 4), one chunk as 12 == 3*4)
        views as (3, 2) with strides (2*4, 4) = (8, 4). An empty layout always views.

        >>> Layout.contiguous((2, 3, 4)).view((6, 4))
        Layout(sizes=(6, 4), strides=(4, 1), offset=0)
        >>> Layout.contiguous((2, 3)).transpose(0, 1).view((6,)) is None   # needs a copy
        True
        """
        shape = self._infer_view_sizes(sizes)
        strides = _view_strides(self.sizes, self.strides, shape)
        return None if strides is None else Layout(shape, strides, self.offset)

    def _infer_view_sizes(self, sizes: Sequence[int]) -> tuple[int, ...]:
        shape = list(_as_int_tuple(sizes, "view sizes", symbolic=True))
        numel = self.numel
        known = 1
        infer: int | None = None
        for k, n in enumerate(shape):
            if n == -1:
                if infer is not None:
                    raise LayoutError(
                        f"view: only one dim can be -1; got sizes {tuple(shape)} "
                        f"(layout sizes {self.sizes})"
                    )
                infer = k
            elif n < 0:
                raise LayoutError(
                    f"view: size {n} at dim {k} must be >= 0 or -1; got sizes {tuple(shape)}"
                )
            else:
                known *= n
        symbolic = isinstance(numel, Sym) or isinstance(known, Sym)
        if infer is None:
            if known != numel:
                raise LayoutError(
                    f"view: sizes {_show(shape)} ({known} elements) do not match the "
                    f"{numel} elements of sizes {_show(self.sizes)}"
                    + (_only_some(shape, self.sizes) if symbolic else "")
                )
        else:
            if known == 0:
                raise LayoutError(
                    f"view: cannot infer the -1 in sizes {_show(shape)}: with 0 elements "
                    f"(sizes {_show(self.sizes)}) it could be any value"
                )
            if isinstance(known, Sym) and not statically_true(known >= 1):
                raise LayoutError(
                    f"view: cannot infer the -1 in sizes {_show(shape)}: their product "
                    f"{known} is 0 for some values of {', '.join(sorted(known.free_symbols))}, "
                    f"and then the -1 could be any value (sizes {_show(self.sizes)})"
                )
            quotient = exact_div(numel, known)
            if quotient is None:
                raise LayoutError(
                    f"view: sizes {_show(shape)} do not fit the {numel} elements of sizes "
                    f"{_show(self.sizes)}" + (_only_some(shape, self.sizes) if symbolic else "")
                )
            shape[infer] = quotient
        return tuple(shape)

    @overload
    def coalesce(self) -> Layout: ...

    @overload
    def coalesce(self, other: Layout) -> tuple[Layout, Layout]: ...

    def coalesce(self, other: Layout | None = None) -> Layout | tuple[Layout, Layout]:
        """The fewest dims that address the same elements in the same (row-major) order.

        Size-1 dims are dropped, then dims k, k+1 merge when stride_k == size_{k+1} *
        stride_{k+1}: sizes (2, 3, 4) strides (12, 4, 1) becomes (24,) stride (1,). With
        `other` (same sizes), both are coalesced jointly -- see `coalesce_jointly`. An
        empty layout becomes sizes (0,), strides (1,).

        >>> Layout.contiguous((2, 3, 4)).coalesce()
        Layout(sizes=(24,), strides=(1,), offset=0)
        >>> Layout.contiguous((2, 3, 4)).permute((0, 2, 1)).coalesce()
        Layout(sizes=(2, 4, 3), strides=(12, 1, 4), offset=0)
        """
        if other is not None:
            return coalesce_jointly(self, other)
        return _coalesce((self,))[0]


def _show(sizes: Sequence[object]) -> str:
    """Sizes as text: ``(N, 64, 56, 56)`` (symbols unquoted)."""
    inner = ", ".join(map(str, sizes))
    return f"({inner},)" if len(sizes) == 1 else f"({inner})"


def _only_some(*sizes: Sequence[object]) -> str:
    names = sorted(free_symbols(tuple(tuple(s) for s in sizes)))
    return (
        f": it holds only for some values of {', '.join(names)}, and a symbolic view "
        "must hold for every value"
    )


def copies_at_every_binding(layout: Layout, sizes: Sequence[Any]) -> bool:
    """Whether `layout.view(sizes)` needs a copy at every binding of the symbols where no
    symbolic size of the two is 1 (a binding that makes one 1 is a class of its own): the
    rule fails before any comparison whose answer could change with the values (two sizes
    neither equal nor ordered alike for every value). LLaMA's repeat_kv,
    ``(N, 8, 4, 4, 128)`` at strides ``(4096, 512, 0, 128, 1)`` seen as ``(N, 32, 4,
    128)``: the heads (8 at stride 512) and their repeats (4 at stride 0) form no chunk
    whatever N is. ``x[:, ::2].flatten()`` of ``(N, M)`` views where M is even: not so."""
    read: list[bool] = []
    strides = _view_strides(layout.sizes, layout.strides, tuple(sizes), read)
    return strides is None and not any(read)


def _view_strides(
    old_sizes: tuple[int, ...], old_strides: tuple[int, ...], new_sizes: tuple[int, ...],
    read: list[bool] | None = None,
) -> tuple[int, ...] | None:
    """ATen's ``computeStride``, line for line (aten/src/ATen/TensorUtils.cpp). `read`,
    where given, gets one entry per comparison of two sizes made (besides asking whether
    a size is 1), True where its answer may change with the symbols' values: neither
    equal for every value nor ordered the same way for every value."""
    if read is not None:
        def note(a: Any, b: Any) -> None:
            read.append(not (type(a) is int and type(b) is int) and not (
                a == b or statically_true(a < b) or statically_true(a > b)))
    else:
        def note(a: Any, b: Any) -> None:
            pass
    if not old_sizes:
        return (1,) * len(new_sizes)
    numel = math.prod(old_sizes)
    if numel == 0 and old_sizes == new_sizes:
        return old_strides
    if numel == 0:
        # An empty tensor views as anything; torch strides it as if freshly allocated.
        return contiguous_strides(new_sizes)
    new_strides = [0] * len(new_sizes)
    view_d = len(new_sizes) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_sizes) - 1, -1, -1):
        tensor_numel *= old_sizes[tensor_d]
        end_of_chunk = tensor_d == 0 or (
            old_sizes[tensor_d - 1] != 1
            and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        )
        if tensor_d > 0 and old_sizes[tensor_d - 1] != 1:
            note(old_strides[tensor_d - 1], tensor_numel * chunk_base_stride)
        if end_of_chunk:
            while view_d >= 0 and (
                _generic_lt(view_numel, tensor_numel) or new_sizes[view_d] == 1
            ):
                note(view_numel, tensor_numel)
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_sizes[view_d]
                view_d -= 1
            if view_d >= 0:
                note(view_numel, tensor_numel)
            note(view_numel, tensor_numel)
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _generic_lt(a: int | Sym, b: int | Sym) -> bool:
    """``a < b``, symbolic sizes at their generic value (the loop that asks then checks
    equality exactly, so a symbolic view either holds identically or is refused)."""
    if type(a) is int and type(b) is int:
        return a < b
    return generic_value(a) < generic_value(b)


def _coalesce(layouts: tuple[Layout, ...]) -> tuple[Layout, ...]:
    """Coalesce layouts of equal sizes together: a merge happens only where all allow it
    (`stridec.ir.affine.merge_dims`)."""
    sizes = layouts[0].sizes
    if math.prod(sizes) == 0:
        return tuple(Layout((0,), (1,), lay.offset) for lay in layouts)
    out_sizes, out_strides = merge_dims(sizes, [lay.strides for lay in layouts])
    return tuple(
        Layout(out_sizes, st, lay.offset) for st, lay in zip(out_strides, layouts, strict=True)
    )


def coalesce_jointly(a: Layout, b: Layout) -> tuple[Layout, Layout]:
    """Coalesce two layouts of the same sizes for a copy ``b[i] = a[i]``.

    Dims merge only where the merge holds on both sides, so the k-th element of the
    coalesced `a` still pairs with the k-th element of the coalesced `b`. A contiguous
    (2, 3, 4) against its NHWC-like permutation strides (12, 1, 3) merges nothing but the
    dims that are adjacent in both.
    """
    if a.sizes != b.sizes:
        raise LayoutError(f"coalesce_jointly: sizes {a.sizes} and {b.sizes} must be equal")
    ca, cb = _coalesce((a, b))
    return ca, cb


def same_addresses(a: Layout, b: Layout) -> bool:
    """Whether `a` and `b` map every coordinate to the same storage index.

    Strides of size-1 dims never move; for empty layouts equal sizes suffice.
    """
    if a.sizes != b.sizes:
        return False
    if a.numel == 0:
        return True
    if a.offset != b.offset:
        return False
    return all(n == 1 or sa == sb for n, sa, sb in zip(a.sizes, a.strides, b.strides, strict=True))
