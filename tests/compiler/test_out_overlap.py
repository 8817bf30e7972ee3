"""`may_meet` and `buffer_layout` (stridec.compiler.outputs), against the address sets
themselves: `may_meet` never calls two layouts that share an address disjoint, and is
exact for windows of one lattice (what a zero-copy cat and a pitched buffer's windows
are); `buffer_layout` gives a layout each window is a box of, inside the storage."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.compiler.outputs import buffer_layout, byte_layout, may_meet
from stridec.ir.layout import Layout


def addresses(layout: Layout) -> set[int]:
    """Every index the layout addresses: offset + Σ i_k·s_k over all coordinates."""
    out = {layout.offset}
    for n, s in zip(layout.sizes, layout.strides, strict=True):
        out = {a + i * s for a in out for i in range(n)}
    return out if layout.numel else set()


@st.composite
def windows(draw: st.DrawFn, same_lattice: bool) -> tuple[Layout, Layout]:
    """Two windows of one row-major buffer (same strides), or of two arbitrary layouts."""
    rank = draw(st.integers(1, 3))
    full = [draw(st.integers(1, 5)) for _ in range(rank)]
    strides = [1] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = strides[k + 1] * (full[k + 1] + draw(st.integers(0, 2)))

    def window() -> Layout:
        start = [draw(st.integers(0, n - 1)) for n in full]
        sizes = [draw(st.integers(0, n - b)) for n, b in zip(full, start, strict=True)]
        offset = sum(b * s for b, s in zip(start, strides, strict=True))
        if same_lattice:
            return Layout(tuple(sizes), tuple(strides), offset)
        order = draw(st.permutations(list(range(rank))))
        return Layout(tuple(sizes), tuple(strides[order[k]] for k in range(rank)), offset)

    return window(), window()


@settings(max_examples=300, deadline=None)
@given(windows(same_lattice=True))
def test_may_meet_is_exact_for_windows_of_one_lattice(pair: tuple[Layout, Layout]) -> None:
    a, b = pair
    assert may_meet(a, b) == bool(addresses(a) & addresses(b)), (a, b)


def test_may_meet_places_windows_by_their_own_offsets() -> None:
    """Two windows of a contiguous (2, 2, 2) buffer that start at (0, 1, 0) and (1, 0, 1):
    the second starts a row lower but a plane further, so its offset less the first's,
    3, written in the strides is not its place; each offset is."""
    a = Layout((2, 1, 1), (4, 2, 1), 2)
    b = Layout((1, 2, 1), (4, 2, 1), 5)
    assert may_meet(a, b) == bool(addresses(a) & addresses(b))


@settings(max_examples=300, deadline=None)
@given(windows(same_lattice=False))
def test_may_meet_never_misses_an_overlap(pair: tuple[Layout, Layout]) -> None:
    a, b = pair
    if a.may_overlap() or b.may_overlap():
        return
    if addresses(a) & addresses(b):
        assert may_meet(a, b), (a, b)


def test_may_meet_in_bytes_across_dtypes() -> None:
    """A float32 window and a float16 view of one buffer: bytes 8..19 of the second meet
    bytes 8..23 of the first (elements 2..5 of float32, 4..9 of float16)."""
    f32 = byte_layout((3, 2), (2, 1), 0, 4)     # bytes 0..23
    f16 = byte_layout((2, 3), (3, 1), 4, 2)     # bytes 8..19
    assert may_meet(f32, f16)
    after = byte_layout((2, 3), (3, 1), 12, 2)  # bytes 24..35
    assert not may_meet(f32, after)


@settings(max_examples=200, deadline=None)
@given(windows(same_lattice=True), st.integers(0, 4))
def test_buffer_layout_holds_every_window(pair: tuple[Layout, Layout], tail: int) -> None:
    live = [w for w in pair if w.numel]
    elements = max([w.min_storage_size() for w in live], default=0) + tail
    lay = buffer_layout(pair, elements)
    assert lay.fits(elements)
    covered = addresses(lay)
    for w in live:
        assert addresses(w) <= covered
