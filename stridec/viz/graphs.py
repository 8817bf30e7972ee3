"""Pictures of graphs and plans: ops as boxes in layers (an op sits below what it reads),
each box the op's text with its results' types and layouts; views (free stride rewrites)
dashed. A plan is drawn twice: as written, and as run (the graph after the passes) with
the ops of each kernel boxed together under the kernel's kind and strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stridec.ir.graph import Graph
from stridec.ir.ops import InputOp, OutputOp
from stridec.ir.printer import value_names
from stridec.viz.kernels import KernelBox, is_view, op_lines

__all__ = ["draw_graph", "draw_plan"]

FONT = 7.5  # points, monospace
CHAR_W = FONT * 0.64 / 72  # inches per character of DejaVu Sans Mono
LINE_H = FONT * 1.35 / 72
PAD = 0.08
GAP_X = 0.35
GAP_Y = 0.45
BOX_PAD = 0.14
KERNEL_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2")


class _Panel:
    """Node rectangles of one graph, in inches, y downwards, with its kernel boxes."""

    def __init__(self, graph: Graph, boxes: Sequence[KernelBox], title: str) -> None:
        self.graph = graph
        self.title = title
        self.boxes = list(boxes)
        names = value_names(graph)
        box_of: dict[int, int] = {}
        for b, box in enumerate(self.boxes):
            for position in box.ops:
                box_of.setdefault(position, b)
        self.box_of = box_of
        position = {id(op): k for k, op in enumerate(graph.ops)}
        layer: dict[int, int] = {}
        for k, op in enumerate(graph.ops):
            layer[k] = 1 + max((layer[position[id(v.owner)]] for v in op.operands), default=-1)
        self.lines = {k: op_lines(graph, op, names) for k, op in enumerate(graph.ops)}
        size = {k: (max(len(s) for s in ls) * CHAR_W + 2 * PAD, len(ls) * LINE_H + 2 * PAD)
                for k, ls in self.lines.items()}
        layers: dict[int, list[int]] = {}
        for k in range(len(graph.ops)):
            layers.setdefault(layer[k], []).append(k)
        # With kernel boxes, each box gets its own column (ops of no kernel, the first),
        # so boxes never overlap; without, each layer is centred.
        column = {k: box_of.get(k, -1) if self.boxes else 0 for k in range(len(graph.ops))}
        self.rect: dict[int, tuple[float, float, float, float]] = {}
        spans: dict[tuple[int, int], float] = {}
        tops: dict[int, float] = {}
        y = 0.55 + (0.35 if self.boxes else 0)
        for lay in sorted(layers):
            tops[lay] = y
            height = max(size[k][1] for k in layers[lay])
            y += height + GAP_Y + (0.45 if self.boxes else 0)
            for c in sorted({column[k] for k in layers[lay]}):
                members = [k for k in layers[lay] if column[k] == c]
                spans[(lay, c)] = sum(size[k][0] for k in members) + GAP_X * (len(members) - 1)
        columns = sorted(set(column.values()))
        col_w = {c: max(w for (_, cc), w in spans.items() if cc == c) for c in columns}
        col_x: dict[int, float] = {}
        x = 0.0
        for c in columns:
            col_x[c] = x
            x += col_w[c] + GAP_X + (2 * BOX_PAD + 0.3 if self.boxes else 0)
        for (lay, c), span in spans.items():
            x = col_x[c] + (col_w[c] - span) / 2
            for k in sorted(k for k in layers[lay] if column[k] == c):
                w, h = size[k]
                self.rect[k] = (x, tops[lay], w, h)
                x += w + GAP_X
        self.height = y
        width = max((r[0] + r[2] for r in self.rect.values()), default=0.0)
        self.width = max(width + 2 * BOX_PAD, len(title) * 0.1)

    def draw(self, ax: Any, ox: float, oy: float) -> None:
        from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

        ax.text(ox, oy + 0.15, self.title, ha="left", va="top", fontsize=10, weight="bold")
        for b, box in enumerate(self.boxes):
            members = [k for k in box.ops if self.box_of.get(k) == b and k in self.rect]
            if not members:
                continue
            x0 = min(self.rect[k][0] for k in members) - BOX_PAD
            y0 = min(self.rect[k][1] for k in members) - BOX_PAD
            x1 = max(self.rect[k][0] + self.rect[k][2] for k in members) + BOX_PAD
            y1 = max(self.rect[k][1] + self.rect[k][3] for k in members) + BOX_PAD
            colour = KERNEL_COLOURS[b % len(KERNEL_COLOURS)]
            ax.add_patch(FancyBboxPatch((ox + x0 + BOX_PAD, oy + y0), x1 - x0, y1 - y0,
                                        boxstyle="round,pad=0.02,rounding_size=0.08",
                                        facecolor=colour, alpha=0.10, edgecolor=colour,
                                        linewidth=1.8, zorder=0))
            ax.text(ox + x0 + BOX_PAD, oy + y0 - 0.04, box.title, ha="left", va="bottom",
                    fontsize=7.5, color=colour, weight="bold", zorder=4,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1))
        for k, (x, y, w, h) in self.rect.items():
            op = self.graph.ops[k]
            face = "#eeeeee" if isinstance(op, (InputOp, OutputOp)) else "white"
            ax.add_patch(FancyBboxPatch((ox + x + BOX_PAD, oy + y), w, h,
                                        boxstyle="round,pad=0,rounding_size=0.04",
                                        facecolor=face, edgecolor="#333333", linewidth=0.9,
                                        linestyle="--" if is_view(op) else "-", zorder=2))
            ax.text(ox + x + BOX_PAD + PAD, oy + y + PAD, "\n".join(self.lines[k]),
                    ha="left", va="top", fontsize=FONT, family="monospace",
                    linespacing=1.2, zorder=3)
        position = {id(op): k for k, op in enumerate(self.graph.ops)}
        for k, op in enumerate(self.graph.ops):
            x, y, w, _ = self.rect[k]
            for v in op.operands:
                p = position[id(v.owner)]
                px, py, pw, ph = self.rect[p]
                ax.add_patch(FancyArrowPatch(
                    (ox + px + BOX_PAD + pw / 2, oy + py + ph),
                    (ox + x + BOX_PAD + w / 2, oy + y),
                    arrowstyle="-|>", mutation_scale=9, color="#555555", linewidth=0.9,
                    shrinkA=1, shrinkB=1, zorder=1))


def _figure(panels: Sequence[_Panel], note: str | None = None) -> Any:
    from matplotlib.figure import Figure

    gap = 0.6
    width = sum(p.width for p in panels) + gap * (len(panels) + 1)
    height = max(p.height for p in panels) + 0.3 + (0.35 if note else 0)
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    x = gap
    for p in panels:
        p.draw(ax, x, 0.2)
        x += p.width + gap
    if note:
        ax.text(gap, height - 0.2, note, ha="left", va="center", fontsize=8, color="#555555")
    return fig


LEGEND = "dashed: a view (free, a stride rewrite); solid: an op that writes memory"


def draw_graph(graph: Graph, title: str | None = None, boxes: Sequence[KernelBox] = ()) -> Any:
    """The figure of `graph`: its ops, each value's type and layout, views dashed."""
    return _figure([_Panel(graph, boxes, title or f"graph @{graph.name}")], LEGEND)


def draw_plan(plan: Any, title: str | None = None) -> Any:
    """A plan as written (when it knows its graph) and as run: the graph after the passes,
    the ops of each kernel boxed with the kernel's kind, strategy and grid."""
    from stridec.ir.parser import parse
    from stridec.viz.kernels import kernel_boxes

    lowered = parse(plan.ir)
    boxes = kernel_boxes(plan.program)
    count = len(plan.program.launches)
    panels = []
    source = getattr(plan, "graph", None)
    if source is not None:
        count_ops = sum(not isinstance(op, (InputOp, OutputOp)) for op in source.ops)
        panels.append(_Panel(source, (), f"as written: {count_ops} op{'s' * (count_ops != 1)}"))
    run = title or f"as run: {count} kernel launch{'es' if count != 1 else ''}"
    panels.append(_Panel(lowered, boxes, run))
    return _figure(panels, LEGEND + "; boxed: the ops one kernel carries out")
