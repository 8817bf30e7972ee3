"""What a storage picture shows, as plain data: which logical element each storage element
holds. No matplotlib here, so the picture's content is testable on its own.

A layout is drawn as its storage, the way the DirectML text and MegEngine's page draw it:
a strip of storage cells, each labelled with the logical index it holds (the row-major
number of its coordinate, MegEngine's ``0000 0009 0018 0027`` for NCHW4). DirectML's
padding example, sizes (2, 3) with a row pitch of 5, holds

    storage  0  1  2  3  4  5  6  7  8  9
    holds    0  1  2  x  x  3  4  5  x  x

where ``x`` is storage no element lives in. A long storage wraps into rows whose width is
one of the layout's strides (the pitch, one NCHW4 row of pixels), and what does not fit is
elided: the first rows and columns, an ellipsis, the last one.

Each storage cell knows every logical element stored there: none (padding, unused),
one, or several -- a broadcast when they differ only along stride-0 dims (one element
read many times), an overlap otherwise (``unfold`` windows). A blocked format (NCHW4 with
C = 3) also has cells written with the fill value that no logical element reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stridec.ir.formats import Packing
from stridec.ir.layout import Layout, contiguous_strides

__all__ = [
    "MAX_ENUMERATED",
    "Cell",
    "elide",
    "StorageGrid",
    "StorageMap",
    "layout_map",
    "packing_map",
    "storage_grid",
    "unravel",
]

MAX_ENUMERATED = 1 << 22
"""Logical elements enumerated to find the readers of an overlapping layout's cells;
beyond it the dims are clipped and the grid says it is incomplete."""


def unravel(flat: int, sizes: Sequence[int]) -> tuple[int, ...]:
    """The coordinate of row-major number `flat` in `sizes`: 7 in (2, 2, 3) is (1, 0, 1)."""
    coords = []
    for n in reversed(sizes):
        flat, i = divmod(flat, n)
        coords.append(i)
    return tuple(reversed(coords))


def _ravel(coords: Sequence[int], sizes: Sequence[int]) -> int:
    return sum(i * s for i, s in zip(coords, contiguous_strides(sizes), strict=True))


def _invert(layout: Layout, index: int) -> tuple[int, ...] | None:
    """The coordinate `layout` maps to storage `index`, or None, for a layout that cannot
    overlap (`may_overlap` is False): sorted by |stride| each stride exceeds the span of
    the dims inside it, so dividing greedily from the largest stride down is exact."""
    low = layout.min_index()
    if low is None or index < low:
        return None
    rest = index - low  # = Σ c'_k·|s_k| with c'_k = c_k, or n_k-1-c_k where s_k < 0
    coords = [0] * layout.rank
    dims = sorted(
        (k for k in range(layout.rank) if layout.sizes[k] > 1),
        key=lambda k: -abs(layout.strides[k]),
    )
    for k in dims:
        n, s = layout.sizes[k], layout.strides[k]
        c, rest = divmod(rest, abs(s))
        if c >= n:
            return None
        coords[k] = c if s > 0 else n - 1 - c
    return tuple(coords) if rest == 0 else None


@dataclass(frozen=True)
class StorageMap:
    """Where each element of a logical tensor lives in storage, and what else is there.

    `index_of(coords)` is the storage index of a logical coordinate; `readers(index)` the
    row-major numbers of the logical elements stored at `index` (computed exactly for
    layouts that cannot overlap, enumerated otherwise); `is_fill(index)` whether a packing
    writes the fill value there (a padded channel). `strides` are the storage strides that
    shape the picture (row widths, block separators); `color_dim` the logical dim whose
    coordinate colours the cells (channels for a format); `title` names what is drawn.
    """

    sizes: tuple[int, ...]
    storage_size: int
    strides: tuple[tuple[int, int], ...]  # (size, |stride|) of each dim that moves
    color_dim: int | None
    title: str
    layout: Layout | None = None
    packing: Packing | None = None
    complete: bool = True
    _readers: dict[int, tuple[int, ...]] | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    def index_of(self, coords: Sequence[int]) -> int:
        if self.layout is not None:
            return self.layout.index_of(coords)
        packing = self.packing
        assert packing is not None
        point = _packing_point(packing, tuple(coords))
        return packing.physical.index_of(point)

    def readers(self, index: int) -> tuple[int, ...]:
        if self._readers is not None:
            return self._readers.get(index, ())
        if self.layout is not None:
            coords = _invert(self.layout, index)
            return () if coords is None else (_ravel(coords, self.sizes),)
        packing = self.packing
        assert packing is not None
        point = _invert(packing.physical, index)
        if point is None or not packing.valid(point):
            return ()
        return (packing.logical.index_of(point),)

    def is_fill(self, index: int) -> bool:
        packing = self.packing
        if packing is None:
            return False
        point = _invert(packing.physical, index)
        return point is not None and not packing.valid(point)

    def row_dims(self, width: int) -> str | None:
        """For a format's buffer, the innermost buffer dims one storage row of `width`
        elements holds, as MegEngine names them (``[W, 4]`` for NCHW4); else None."""
        packing = self.packing
        if packing is None:
            return None
        from stridec.ir.formats import get_format

        fmt = get_format(packing.format)
        rank = len(packing.logical_sizes)
        if not hasattr(fmt, "split_order") or rank < 2:
            return None
        spatial = {0: (), 1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}.get(rank - 2)
        if spatial is None:
            return None
        if fmt.is_blocked:
            names = ("N", f"C/{fmt.block}", str(fmt.block), *spatial)
        else:
            names = ("N", "C", *spatial)
        order = fmt.split_order(rank)
        held, count = [], 1
        for d in reversed(order):
            if count >= width:
                break
            held.append(names[d])
            count *= packing.space[d]
        return "[" + ", ".join(reversed(held)) + "]" if count == width else None

    def broadcast_dims(self) -> tuple[int, ...]:
        """Logical dims of size > 1 and stride 0: moving along them reads the same element."""
        if self.layout is None:
            return ()
        lay = self.layout
        return tuple(k for k in range(lay.rank) if lay.sizes[k] > 1 and lay.strides[k] == 0)


def _packing_point(packing: Packing, coords: tuple[int, ...]) -> tuple[int, ...]:
    """The point of the packing's split space for logical `coords` (c = co·x + ci)."""
    if len(packing.space) == len(coords):
        return coords
    x = packing.space[2]
    return (coords[0], coords[1] // x, coords[1] % x) + coords[2:]


def _default_color_dim(layout: Layout) -> int | None:
    """Channels (dim 1) for a tensor of rank >= 4 that has them; else the outermost dim
    that moves through storage, so rows of a matrix get their own colours. A stride-0 dim
    never colours: its elements share one storage cell, which has one colour."""
    moving = [k for k, (n, s) in enumerate(zip(layout.sizes, layout.strides, strict=True))
              if n > 1 and s != 0]
    if layout.rank >= 4 and 1 in moving:
        return 1
    return moving[0] if moving else None


def layout_map(
    layout: Layout,
    storage_size: int | None = None,
    color_dim: int | None = -1,
    title: str | None = None,
) -> StorageMap:
    """The storage map of `layout`. `storage_size` (at least the layout's
    `min_storage_size`) draws storage past the last addressed element; `color_dim` -1
    picks a default, None colours nothing."""
    need = layout.min_storage_size()
    size = need if storage_size is None else max(storage_size, need)
    moving = tuple(
        (n, abs(s)) for n, s in zip(layout.sizes, layout.strides, strict=True) if n > 1 and s
    )
    readers = None
    complete = True
    if layout.may_overlap():
        readers, complete = _enumerate_readers(layout)
    return StorageMap(
        sizes=layout.sizes,
        storage_size=size,
        strides=moving,
        color_dim=_default_color_dim(layout) if color_dim == -1 else color_dim,
        title=title if title is not None else f"sizes {layout.sizes}, {layout}",
        layout=layout,
        complete=complete,
        _readers=readers,
    )


def _enumerate_readers(layout: Layout) -> tuple[dict[int, tuple[int, ...]], bool]:
    """index -> row-major numbers of its readers, by enumerating the logical elements (the
    leading dims clipped so at most `MAX_ENUMERATED` are; then False: incomplete)."""
    import numpy as np

    sizes = list(layout.sizes)
    complete = True
    while math.prod(sizes) > MAX_ENUMERATED:
        k = max(range(len(sizes)), key=lambda d: sizes[d])
        sizes[k] = max(1, sizes[k] // 2)
        complete = False
    index = np.array([layout.offset], dtype=np.int64)
    flat = np.array([0], dtype=np.int64)
    for n, s, full in zip(sizes, layout.strides, contiguous_strides(layout.sizes), strict=True):
        steps = np.arange(n, dtype=np.int64)
        index = (index[:, None] + steps * s).reshape(-1)
        flat = (flat[:, None] + steps * full).reshape(-1)
    order = np.argsort(index, kind="stable")
    index, flat = index[order], flat[order]
    readers: dict[int, tuple[int, ...]] = {}
    if index.size:
        starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        ends = np.r_[starts[1:], index.size]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            readers[int(index[a])] = tuple(sorted(flat[a:b].tolist()))
    return readers, complete


def packing_map(packing: Packing, title: str | None = None) -> StorageMap:
    """The storage map of a format's packed buffer (`Format.packing(sizes)`): blocks
    coloured by channel, padded channels marked as fill."""
    physical = contiguous_strides(packing.physical_sizes)
    moving = tuple(
        (n, s) for n, s in zip(packing.physical_sizes, physical, strict=True) if n > 1
    )
    sizes = packing.logical_sizes
    return StorageMap(
        sizes=sizes,
        storage_size=packing.physical_numel,
        strides=moving,
        # Blocks coloured by channel; pitched rows by row.
        color_dim=(1 if packing.channels is not None else 0) if len(sizes) > 1 else None,
        title=title
        if title is not None
        else f"{packing.format} of sizes {sizes}: buffer {list(packing.physical_sizes)}",
        packing=packing,
    )


@dataclass(frozen=True)
class Cell:
    """One storage element: its `index`, the row-major numbers of the logical elements
    stored there (`reads`, sorted; empty for unused storage) and its `kind`:
    "element" (one reader), "broadcast" (several, differing only along stride-0 dims),
    "overlap" (several otherwise), "fill" (a padded channel: the fill value, read by
    none), "unused" (no element lives there: row padding, storage before the offset) or
    "unknown" (no reader among the elements enumerated when the map is incomplete)."""

    index: int
    reads: tuple[int, ...]
    kind: str


@dataclass(frozen=True)
class StorageGrid:
    """The storage cells a picture shows, wrapped in rows of `width` cells.

    Row r holds storage indices ``r*width ... r*width + width - 1``. `rows` and `columns`
    are the rows and columns drawn, ascending: a jump between neighbours is an elided run
    (an ellipsis in the picture). `blocks` are the inner strides that divide `width`:
    the picture draws a heavier line every that many cells.
    """

    map: StorageMap
    width: int
    rows: tuple[int, ...]
    columns: tuple[int, ...]
    blocks: tuple[int, ...]
    cells: dict[int, Cell]

    @property
    def storage_size(self) -> int:
        return self.map.storage_size

    def cell_at(self, row: int, column: int) -> Cell | None:
        """The cell at (row, column), or None past the end of storage."""
        return self.cells.get(row * self.width + column)


def elide(count: int, limit: int) -> tuple[int, ...]:
    """All of range(count) when it fits in `limit`, else the first limit-2, then the last
    (the gap between them is drawn as an ellipsis)."""
    if count <= limit:
        return tuple(range(count))
    return tuple(range(limit - 2)) + (count - 1,)


def _width(m: StorageMap, max_columns: int) -> int:
    """Cells per row: the whole storage when it fits in `max_columns` (one strip, as the
    seeds draw it), else the largest stride of a moving dim that fits (the row pitch, one
    row of NCHW4 pixels), else the smallest stride there is (columns then elide)."""
    if m.storage_size <= max_columns:
        return max(m.storage_size, 1)
    candidates = sorted({s for n, s in m.strides if s > 1})
    fitting = [s for s in candidates if s <= max_columns]
    if fitting:
        return fitting[-1]
    if candidates:
        return candidates[0]
    return max_columns


def _kind(m: StorageMap, index: int, reads: tuple[int, ...]) -> str:
    if not reads:
        if m.is_fill(index):
            return "fill"
        return "unused" if m.complete else "unknown"
    if len(reads) == 1:
        return "element"
    spread = set(m.broadcast_dims())
    first = unravel(reads[0], m.sizes)
    for r in reads[1:]:
        coords = unravel(r, m.sizes)
        pairs = enumerate(zip(first, coords, strict=True))
        if any(a != b for k, (a, b) in pairs if k not in spread):
            return "overlap"
    return "broadcast"


def storage_grid(obj: Layout | Packing | StorageMap, max_columns: int = 16, max_rows: int = 8,
                 storage_size: int | None = None) -> StorageGrid:
    """The cells a storage picture of `obj` shows (see the module docstring)."""
    if isinstance(obj, Layout):
        m = layout_map(obj, storage_size)
    elif isinstance(obj, Packing):
        m = packing_map(obj)
    else:
        m = obj
    width = _width(m, max_columns)
    total_rows = -(-m.storage_size // width) if m.storage_size else 0
    rows = elide(total_rows, max_rows)
    columns = elide(width, max_columns)
    blocks = tuple(s for s in sorted({s for _, s in m.strides}) if 1 < s < width and width % s == 0)
    cells: dict[int, Cell] = {}
    for r in rows:
        for c in columns:
            index = r * width + c
            if index >= m.storage_size:
                continue
            reads = m.readers(index)
            cells[index] = Cell(index, reads, _kind(m, index, reads))
    return StorageGrid(m, width, rows, columns, blocks, cells)
