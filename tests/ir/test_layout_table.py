"""`Layout.table()`: every row's arithmetic evaluates to the offset torch reads there."""

from __future__ import annotations

import itertools
import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.ir.layout import Layout

DOT = re.compile(r"\{([-\d,]*)\}·\{([-\d,]*)\}")


def _rows(table: str) -> list[tuple[tuple[int, ...], int]]:
    """(coords, offset) of each row, after checking that the row's sum adds up."""
    out = []
    for line in table.splitlines()[1:]:
        if line == "...":
            continue
        left, right = line.split(" -> ")
        coords = tuple(int(v) for v in re.findall(r"-?\d+", left))
        expression, result = right.rsplit(" = ", 1)
        total = 0
        for term in expression.split(" + "):
            m = DOT.fullmatch(term)
            if m is None:
                total += int(term)
                continue
            a = tuple(int(v) for v in m.group(1).split(","))
            b = [int(v) for v in m.group(2).split(",")]
            assert a == coords, line
            total += sum(x * y for x, y in zip(a, b, strict=True))
        assert total == int(result), line
        out.append((coords, total))
    return out


def test_directml_dhw_example() -> None:
    table = Layout.contiguous((2, 2, 3)).table()
    assert "(1, 0, 1) -> {1,0,1}·{6,3,1} = 7" in table.splitlines()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=0, max_size=4),
    st.data(),
)
def test_rows_are_torchs_offsets(sizes: list[int], data: st.DataObject) -> None:
    strides = [data.draw(st.integers(0, 7)) for _ in sizes]
    offset = data.draw(st.integers(0, 5))
    layout = Layout(sizes, strides, offset)
    storage = torch.arange(layout.min_storage_size() + 1)
    held = torch.as_strided(storage, sizes, strides, offset).reshape(-1).tolist()
    rows = _rows(layout.table(max_rows=None))
    assert [c for c, _ in rows] == list(itertools.product(*[range(n) for n in sizes]))
    assert [o for _, o in rows] == held


def test_long_tables_elide_the_middle() -> None:
    layout = Layout.contiguous((3, 40)).flip(0)
    lines = layout.table(max_rows=6).splitlines()
    assert len(lines) == 1 + 6 and lines[5] == "..."
    assert _rows("\n".join(lines))[-1] == ((2, 39), layout.index_of((2, 39)))
    assert Layout.contiguous((0, 3)).table().endswith("(no elements)")
