"""The storage grid a picture draws is computed from the layout: every label is checked
against `Layout.index_of` and against torch's `as_strided` reading an `arange` storage.
No matplotlib needed."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.ir.formats import CHWN4, NCHW4, NCHW32, NHWC, get_format
from stridec.ir.layout import Layout
from stridec.viz import grid as grid_module
from stridec.viz.grid import storage_grid, unravel


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    """Random layouts: zero, negative and overlapping strides, offsets, size-0/1 dims."""
    rank = draw(st.integers(0, 4))
    sizes = tuple(draw(st.integers(0, 4)) for _ in range(rank))
    strides = tuple(draw(st.integers(-7, 9)) for _ in range(rank))
    # The lowest index addressed must be >= 0: lift the offset past the negative reach.
    reach = sum((n - 1) * -s for n, s in zip(sizes, strides, strict=True) if s < 0 and n > 0)
    offset = reach + draw(st.integers(0, 5))
    return Layout(sizes, strides, offset)


def _full(layout: Layout, extra: int = 0):
    size = layout.min_storage_size() + extra
    return storage_grid(layout, max_columns=size + 1, max_rows=size + 1, storage_size=size)


def _check_against_layout(layout: Layout, grid) -> None:
    seen: list[int] = []
    dims = enumerate(zip(layout.sizes, layout.strides, strict=True))
    stride0 = {k for k, (n, s) in dims if n > 1 and s == 0}
    for index, cell in grid.cells.items():
        assert cell.index == index
        for r in cell.reads:
            assert layout.index_of(unravel(r, layout.sizes)) == index
        seen.extend(cell.reads)
        if not cell.reads:
            assert cell.kind == "unused"
        elif len(cell.reads) == 1:
            assert cell.kind == "element"
        else:
            coords = [unravel(r, layout.sizes) for r in cell.reads]
            same = all(
                a == b
                for c in coords
                for k, (a, b) in enumerate(zip(coords[0], c, strict=True))
                if k not in stride0
            )
            assert cell.kind == ("broadcast" if same else "overlap")
    # Every logical element is drawn exactly once, and every storage index is a cell.
    assert sorted(seen) == list(range(layout.numel))
    assert set(grid.cells) == set(range(grid.storage_size))


@settings(max_examples=300, deadline=None)
@given(layouts(), st.integers(0, 3))
def test_full_grid_labels_are_the_layouts_elements(layout: Layout, extra: int) -> None:
    grid = _full(layout, extra)
    _check_against_layout(layout, grid)
    if all(s >= 0 for s in layout.strides) and layout.numel:
        # torch's oracle: the view of an arange storage holds each element's storage index.
        storage = torch.arange(grid.storage_size)
        view = torch.as_strided(storage, layout.sizes, layout.strides, layout.offset)
        held = view.reshape(-1).tolist()
        for index, cell in grid.cells.items():
            for r in cell.reads:
                assert held[r] == index


@settings(max_examples=200, deadline=None)
@given(layouts(), st.integers(2, 6), st.integers(3, 7))
def test_summarized_grid_agrees_with_the_full_one(layout: Layout, rows: int, cols: int) -> None:
    full = _full(layout)
    small = storage_grid(layout, max_columns=cols, max_rows=rows)
    assert len(small.rows) <= max(rows, 1) and len(small.columns) <= max(cols, small.width)
    for index, cell in small.cells.items():
        assert cell == full.cells[index]
        assert index == (index // small.width) * small.width + index % small.width
        assert index // small.width in small.rows and index % small.width in small.columns


def test_directml_padding_is_one_strip_with_two_padding_cells_per_row() -> None:
    # DirectML: A B C x x D E F x x -- height-stride 5 for a width of 3.
    layout = Layout.padded((2, 3), 5)
    grid = storage_grid(layout)
    assert grid.width == layout.min_storage_size() == 8
    _check_against_layout(layout, grid)
    grid = storage_grid(layout, storage_size=10)  # the seed's buffer of 10
    assert grid.width == 10 and grid.blocks == (5,)
    unused = [i for i, c in grid.cells.items() if c.kind == "unused"]
    assert unused == [i for i in range(10) if i % 5 >= 3]


def test_broadcast_cells_are_read_twice() -> None:
    layout = Layout.contiguous((3,)).expand((2, 3))  # strides (0, 1): A B C / A B C
    grid = storage_grid(layout)
    assert [grid.cells[i].kind for i in range(3)] == ["broadcast"] * 3
    assert [grid.cells[i].reads for i in range(3)] == [(0, 3), (1, 4), (2, 5)]


def test_unfold_windows_overlap() -> None:
    layout = Layout.contiguous((7,)).unfold(0, 3, 2)  # windows 0-2, 2-4, 4-6
    grid = storage_grid(layout)
    assert {i for i, c in grid.cells.items() if c.kind == "overlap"} == {2, 4}


def test_large_layouts_are_summarized_without_enumerating_them(monkeypatch) -> None:
    layout = Layout.contiguous((8, 64, 56, 56)).permute((0, 2, 3, 1))
    grid = storage_grid(layout, max_columns=16, max_rows=8)
    # The storage is NCHW: rows of W = 56; six rows, an ellipsis, the last row; 14
    # columns, an ellipsis, the last one.
    assert grid.width == 56 and grid.rows == (*range(6), 8 * 64 * 56 - 1)
    assert grid.columns == (*range(14), 55)
    _check_cells(layout, grid)
    # An overlapping layout is enumerated up to MAX_ENUMERATED elements, then clipped:
    # the grid says so, and what it shows is still right.
    monkeypatch.setattr(grid_module, "MAX_ENUMERATED", 1000)
    broadcast = Layout.contiguous((1, 300)).expand((100, 300))
    grid = storage_grid(broadcast)
    assert not grid.map.complete and grid.cells[0].kind == "broadcast"
    _check_cells(broadcast, grid)


def _check_cells(layout: Layout, grid) -> None:
    for index, cell in grid.cells.items():
        for r in cell.reads:
            assert layout.index_of(unravel(r, layout.sizes)) == index


@pytest.mark.parametrize("fmt", [NCHW4, CHWN4, NCHW32, NHWC])
@pytest.mark.parametrize("sizes", [(1, 3, 2, 3), (2, 6, 2, 2), (2, 1, 3, 5)])
def test_format_grids_hold_the_packed_elements(fmt, sizes) -> None:
    packing = fmt.packing(sizes)
    size = packing.physical_numel
    grid = storage_grid(packing, max_columns=size, max_rows=size)
    # The oracle: pack arange(numel) as the format's buffer, with torch.
    logical = torch.arange(math.prod(sizes)).reshape(sizes)
    if fmt.is_blocked:
        x = fmt.block
        c = sizes[1]
        padded = torch.full((sizes[0], -(-c // x) * x, *sizes[2:]), -1)
        padded[:, :c] = logical
        split = padded.reshape(sizes[0], -(-c // x), x, *sizes[2:])
        buffer = split.permute(*fmt.split_order(len(sizes))).reshape(-1)
    else:
        buffer = logical.permute(*fmt.split_order(len(sizes))).reshape(-1)
    for index, cell in grid.cells.items():
        want = int(buffer[index])
        if want < 0:
            assert cell.kind == "fill" and cell.reads == ()
        else:
            assert cell.reads == (want,) and cell.kind == "element"
    assert set(grid.cells) == set(range(size))


def test_pitched_rows_pad_each_row_with_fill() -> None:
    # DirectML's 3 x 3 float32 with 16-byte rows: a pitch of 4, one fill per row.
    packing = get_format("pitched<16>").packing((3, 3), "float32")
    layout = Layout.padded((3, 3), 4)
    grid = storage_grid(packing)
    assert grid.width == 12
    for index, cell in grid.cells.items():
        if index % 4 == 3:
            assert cell.kind == "fill"
        else:
            (r,) = cell.reads
            assert layout.index_of(unravel(r, (3, 3))) == index
