"""The picture of a layout: its storage strip above, the logical tensor below, both
labelled with the logical index (row-major number) of each element.

The content comes from `stridec.viz.grid` (pure data); this module only places it on a
matplotlib figure. Units are cells: every cell is 1 x 1, the figure's size follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stridec.viz.grid import StorageGrid, StorageMap, elide, unravel

__all__ = ["draw_storage", "dim_names"]

# Colours of the cell kinds that are not elements; elements take their colour dim's.
UNUSED = "#f2f2f2"
FILL = "#d9d9d9"
BROADCAST_EDGE = "#e67e00"
OVERLAP_EDGE = "#c0392b"
NEGATIVE = "#c0392b"
PALETTE = (
    "#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99",
    "#ffff99", "#8dd3c7", "#bebada", "#80b1d3", "#fccde5",
)

MAX_SLICES = 6
MAX_LOGICAL = 8


def dim_names(rank: int) -> tuple[str, ...]:
    """The letters the seeds use: W; H W; D H W; N C H W; N C D H W; else d0, d1, ..."""
    return {
        1: ("W",),
        2: ("H", "W"),
        3: ("D", "H", "W"),
        4: ("N", "C", "H", "W"),
        5: ("N", "C", "D", "H", "W"),
    }.get(rank, tuple(f"d{k}" for k in range(rank)))


def _colour(m: StorageMap, flat: int) -> str:
    if m.color_dim is None:
        return PALETTE[0]
    c = unravel(flat, m.sizes)[m.color_dim]
    count = m.sizes[m.color_dim]
    if count <= len(PALETTE):
        return PALETTE[c]
    import matplotlib.colors as mcolors

    hue = (c * 0.61803398875) % 1.0  # golden-ratio steps keep neighbours apart
    return mcolors.to_hex(mcolors.hsv_to_rgb((hue, 0.35, 0.97)))


def _label(reads: Sequence[int]) -> str:
    if len(reads) == 1:
        return str(reads[0])
    if len(reads) == 2:
        return f"{reads[0]},{reads[1]}"
    return f"{reads[0]},{reads[1]},…"


def _fontsize(text: str, base: float) -> float:
    return base if len(text) <= 3 else base * 3.2 / len(text) + 1.5


def _positions(picked: Sequence[int]) -> list[tuple[int | None, float]]:
    """Each picked index with its drawing position; None marks an ellipsis slot."""
    out: list[tuple[int | None, float]] = []
    x = 0.0
    prev = None
    for i in picked:
        if prev is not None and i != prev + 1:
            out.append((None, x))
            x += 1
        out.append((i, x))
        x += 1
        prev = i
    return out


class _Canvas:
    """Patches and texts in cell units (y grows downwards), placed on a figure at the end
    at `SCALE` inches per unit, so cells stay square whatever the content."""

    def __init__(self) -> None:
        self.patches: list[Any] = []
        self.texts: list[tuple[float, float, str, dict]] = []
        self.lines: list[tuple[Sequence[float], Sequence[float], dict]] = []
        self.right = 0.0
        self.bottom = 0.0

    def rect(self, x: float, y: float, w: float, h: float, **kw: Any) -> None:
        from matplotlib.patches import Rectangle

        self.patches.append(Rectangle((x, y), w, h, **kw))
        self.right = max(self.right, x + w)
        self.bottom = max(self.bottom, y + h)

    def text(self, x: float, y: float, s: str, **kw: Any) -> None:
        self.texts.append((x, y, s, kw))
        self.bottom = max(self.bottom, y + 0.3)

    def line(self, xs: Sequence[float], ys: Sequence[float], **kw: Any) -> None:
        self.lines.append((xs, ys, kw))

    def figure(self, width: float, height: float) -> Any:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(width * SCALE, height * SCALE))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, width)
        ax.set_ylim(height, 0)
        ax.axis("off")
        for p in self.patches:
            ax.add_patch(p)
        for xs, ys, kw in self.lines:
            ax.plot(xs, ys, **kw)
        for x, y, s, kw in self.texts:
            ax.text(x, y, s, **kw)
        return fig


SCALE = 0.42
GREY = "#555555"
MIXED = "#e8e8e8"


def _cell_colour(m: StorageMap, reads: Sequence[int]) -> str:
    colours = {_colour(m, r) for r in reads}
    return colours.pop() if len(colours) == 1 else MIXED


def draw_storage(grid: StorageGrid, title: str | None = None,
                 names: Sequence[str] | None = None) -> Any:
    """The figure of `grid`: the storage cells (wrapped rows, elisions as ellipses), the
    logical tensor in its shape below, a legend of what the marks mean."""
    m = grid.map
    names = tuple(names) if names is not None else _default_names(m)
    cv = _Canvas()
    kinds = _draw_strip(cv, grid, top=1.0)
    _draw_logical(cv, m, names, top=cv.bottom + 0.9)
    legend_top = cv.bottom + 0.6
    _draw_legend(cv, m, names, kinds, legend_top, grid)
    cv.text(0.2, 0.45, title if title is not None else m.title, ha="left", va="center",
            fontsize=10, weight="bold")
    width = max(cv.right + 0.6, 0.6 + 0.21 * len(title or m.title), 12.0)
    return cv.figure(width, cv.bottom + 0.4)


def _default_names(m: StorageMap) -> tuple[str, ...]:
    """A format's dims are N, C, H, W (its logical tensor is NCHW); a bare layout's are
    d0, d1, ... (its dims mean whatever the caller says), except the DirectML letters of
    rank 1 to 3 (W; H, W; D, H, W)."""
    rank = len(m.sizes)
    if m.packing is not None or rank <= 3:
        return dim_names(rank)
    return tuple(f"d{k}" for k in range(rank))


LEFT = 2.6  # room for the row labels


def _draw_strip(cv: _Canvas, grid: StorageGrid, top: float) -> set[str]:
    """The storage cells; returns the kinds drawn (for the legend)."""
    m = grid.map
    cols = _positions(grid.columns)
    rows = _positions(grid.rows)
    single = len(grid.rows) <= 1
    kinds: set[str] = set()
    if m.storage_size == 0:
        cv.text(LEFT, top + 0.5, "storage: none (the tensor has no elements)", ha="left",
                va="center", fontsize=8, color=GREY)
        return kinds
    small = dict(ha="center", va="center", fontsize=7, color=GREY)
    cv.text(LEFT - 0.3, top + 0.35, "storage\nindex" if single else "storage\nrow start",
            ha="right", va="center", fontsize=8, color=GREY)
    for c, x in cols:
        label = "…" if c is None else (str(c) if single else f"+{c}")
        cv.text(LEFT + x + 0.5, top + 0.35, label, **small)
    y0 = top + 0.8
    start = m.layout.offset if m.layout is not None else 0

    for r, y in rows:
        yy = y0 + y
        if r is None:
            for _, x in cols:
                cv.text(LEFT + x + 0.5, yy + 0.5, "⋮", ha="center", va="center", fontsize=10)
            continue
        if not single:
            cv.text(LEFT - 0.3, yy + 0.5, str(r * grid.width), ha="right", va="center",
                    fontsize=8, color=GREY)
        for c, x in cols:
            xx = LEFT + x
            if c is None:
                cv.text(xx + 0.5, yy + 0.5, "…", ha="center", va="center", fontsize=10)
                continue
            cell = grid.cell_at(r, c)
            if cell is None:
                continue
            kinds.add(cell.kind)
            _draw_cell(cv, m, cell, xx, yy)
            if cell.index == start and m.numel and start:
                # Where element 0 lives, when the offset moves it off index 0.
                from matplotlib.patches import Polygon

                cv.patches.append(Polygon([(xx, yy), (xx + 0.36, yy), (xx, yy + 0.36)],
                                          closed=True, color="black"))
                kinds.add("offset")
    # Heavier lines every block of an inner stride (the pitch, a block of 4 channels).
    height = len(rows)
    for level, b in enumerate(grid.blocks):  # larger blocks, heavier lines
        for c, x in cols:
            if c is not None and c % b == 0 and c:
                cv.line([LEFT + x, LEFT + x], [y0 - 0.1 * (level + 1), y0 + height +
                        0.1 * (level + 1)], color="black", linewidth=1.6 + 1.2 * level)
    cv.bottom = max(cv.bottom, y0 + height + 0.2)
    return kinds


def _draw_cell(cv: _Canvas, m: StorageMap, cell: Any, x: float, y: float) -> None:
    if cell.reads:
        edge, lw = {"broadcast": (BROADCAST_EDGE, 2.4), "overlap": (OVERLAP_EDGE, 2.4)}.get(
            cell.kind, (GREY, 0.6))
        cv.rect(x, y, 1, 1, facecolor=_cell_colour(m, cell.reads), edgecolor=GREY,
                linewidth=0.6)
        if lw > 1:
            cv.rect(x + 0.06, y + 0.06, 0.88, 0.88, fill=False, edgecolor=edge, linewidth=lw)
        text = _label(cell.reads)
        cv.text(x + 0.5, y + 0.47, text, ha="center", va="center",
                fontsize=_fontsize(text, 10))
        if len(cell.reads) > 1:
            cv.text(x + 0.9, y + 0.88, f"×{len(cell.reads)}", ha="right", va="bottom",
                    fontsize=6, color=edge)
        return
    if cell.kind == "fill":
        cv.rect(x, y, 1, 1, facecolor=FILL, edgecolor="#b0b0b0", linewidth=0, hatch="///")
        cv.rect(x, y, 1, 1, fill=False, edgecolor=GREY, linewidth=0.6)
        cv.text(x + 0.5, y + 0.5, "fill", ha="center", va="center", fontsize=7,
                bbox=dict(facecolor=FILL, edgecolor="none", pad=0.5))
        return
    cv.rect(x, y, 1, 1, facecolor=UNUSED, edgecolor=GREY, linewidth=0.6)
    cv.text(x + 0.5, y + 0.5, "?" if cell.kind == "unknown" else "x", ha="center",
            va="center", fontsize=9, color="#999999")


def _draw_logical(cv: _Canvas, m: StorageMap, names: Sequence[str], top: float) -> None:
    """The logical tensor: 2-D slices of its last two dims, one per leading coordinate."""
    sizes = m.sizes
    rank = len(sizes)
    cv.text(LEFT - 0.3, top + 0.3, "logical\ntensor", ha="right", va="top", fontsize=8,
            color=GREY)
    if m.numel == 0:
        cv.text(LEFT, top + 0.3, f"no elements: sizes {sizes}", ha="left", va="top",
                fontsize=8, color=GREY)
        return
    lead = sizes[:-2] if rank >= 2 else ()
    grid_rows = sizes[-2] if rank >= 2 else 1
    grid_cols = sizes[-1] if rank >= 1 else 1
    lrows = _positions(elide(grid_rows, MAX_LOGICAL))
    lcols = _positions(elide(grid_cols, MAX_LOGICAL))
    many = len(lrows) * len(lcols) > 16
    slices = _positions(_pick_slices(lead, 3 if many else MAX_SLICES))
    slice_w = len(lcols) + 1.4
    per_line = max(1, int(max(cv.right - LEFT + 1.4, 2 * slice_w) // slice_w))
    slice_h = len(lrows) + 1.5
    layout = m.layout
    negative = {k for k in range(rank) if layout is not None and layout.strides[k] < 0}
    for s_index, (lead_flat, _) in enumerate(slices):
        line_no, slot = divmod(s_index, per_line)
        sx = LEFT + slot * slice_w
        sy = top + 0.9 + line_no * slice_h
        if lead_flat is None:
            cv.text(sx + 0.3, sy + len(lrows) / 2, "…", ha="left", va="center", fontsize=14)
            continue
        lead_coords = unravel(lead_flat, lead) if lead else ()
        if lead:
            heading = ", ".join(f"{names[k]}={i}" for k, i in enumerate(lead_coords))
            cv.text(sx, sy - 0.55, heading, ha="left", va="bottom", fontsize=8)
        if rank >= 1:
            for c, x in lcols:
                cv.text(sx + x + 0.5, sy - 0.15, "…" if c is None else str(c), ha="center",
                        va="bottom", fontsize=6, color=GREY)
        for r, y in lrows:
            if rank >= 2:
                cv.text(sx - 0.12, sy + y + 0.5, "⋮" if r is None else str(r), ha="right",
                        va="center", fontsize=6, color=GREY)
            for c, x in lcols:
                xx, yy = sx + x, sy + y
                if r is None or c is None:
                    cv.text(xx + 0.5, yy + 0.5, "⋮" if r is None else "…", ha="center",
                            va="center", fontsize=9)
                    continue
                coords = lead_coords + ((r,) if rank >= 2 else ()) + ((c,) if rank >= 1 else ())
                flat = _flat(coords, sizes)
                cv.rect(xx, yy, 1, 1, facecolor=_colour(m, flat), edgecolor=GREY, linewidth=0.6)
                cv.text(xx + 0.5, yy + 0.4, str(flat), ha="center", va="center",
                        fontsize=_fontsize(str(flat), 9))
                at = f"@{m.index_of(coords)}"
                cv.text(xx + 0.5, yy + 0.8, at, ha="center", va="center",
                        fontsize=min(6.0, _fontsize(at, 6.5)), color="#333333")
    # Axis names; a dim whose stride is negative walks storage backwards.
    axes = []
    if rank >= 1:
        axes.append((rank - 1, "→"))
    if rank >= 2:
        axes.append((rank - 2, "↓"))
    notes = [f"{arrow} {names[k]}" for k, arrow in axes]
    notes += [f"{names[k]}: stride {layout.strides[k]}, walks storage backwards"
              for k in sorted(negative)]
    cv.text(LEFT, cv.bottom + 0.35, ";  ".join(notes), ha="left", va="center", fontsize=7,
            color=NEGATIVE if negative else GREY)


def _draw_legend(cv: _Canvas, m: StorageMap, names: Sequence[str], kinds: set[str],
                 top: float, grid: StorageGrid) -> None:
    entries: list[tuple[dict, str]] = [
        (dict(facecolor=PALETTE[0], edgecolor=GREY),
         "cell: the logical index (row-major) of the element there; @: its storage index"),
    ]
    if "unused" in kinds:
        entries.append((dict(facecolor=UNUSED, edgecolor=GREY),
                        "x: storage this layout does not address (padding, or elements "
                        "outside a slice)"))
    if "offset" in kinds:
        entries.append((dict(facecolor="white", edgecolor=GREY),
                        f"black corner: element 0, at the offset ({m.layout.offset})"))
    if "fill" in kinds:
        channels = m.packing is not None and m.packing.channels is not None
        padded = "a padded channel" if channels else "row padding (the pitch)"
        entries.append((dict(facecolor=FILL, edgecolor=GREY, hatch="///"),
                        f"fill: {padded}, written with the fill value, never read"))
    if "broadcast" in kinds:
        entries.append((dict(facecolor="white", edgecolor=BROADCAST_EDGE, linewidth=2.4),
                        "broadcast: one element read ×k times (a stride-0 dim)"))
    if "overlap" in kinds:
        entries.append((dict(facecolor="white", edgecolor=OVERLAP_EDGE, linewidth=2.4),
                        "overlap: ×k logical elements at one storage element"))
    if "unknown" in kinds:
        entries.append((dict(facecolor=UNUSED, edgecolor=GREY),
                        "?: readers not enumerated (a large overlapping layout)"))
    y = top
    for style, text in entries:
        cv.rect(0.4, y, 0.7, 0.55, **style)
        if text.startswith("black corner"):
            from matplotlib.patches import Polygon

            cv.patches.append(Polygon([(0.4, y), (0.65, y), (0.4, y + 0.25)], closed=True,
                                      color="black"))
        cv.text(1.35, y + 0.3, text, ha="left", va="center", fontsize=7.5)
        y += 0.75
    notes = []
    if m.color_dim is not None:
        notes.append(f"colour: the {names[m.color_dim]} coordinate (dim {m.color_dim})")
    if len(grid.rows) > 1:
        dims = m.row_dims(grid.width)
        notes.append(f"one storage row: {grid.width} elements" + (f", buffer dims {dims}"
                                                                 if dims else ""))
    for note in notes:
        cv.text(0.4, y + 0.25, note, ha="left", va="center", fontsize=7.5)
        y += 0.55


def _flat(coords: Sequence[int], sizes: Sequence[int]) -> int:
    flat = 0
    for i, n in zip(coords, sizes, strict=True):
        flat = flat * n + i
    return flat


def _pick_slices(lead: Sequence[int], limit: int) -> tuple[int, ...]:
    count = 1
    for n in lead:
        count *= n
    return elide(count, limit)
