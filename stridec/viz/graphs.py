"""Pictures of graphs and plans: ops as boxes, each the op's text with its results' types
and layouts, an arrow per operand; views (free stride rewrites) dashed. A plan is drawn
twice, one panel above the other: as written, and as run (the graph after the passes)
with the ops of each kernel boxed together under the kernel's kind and strategy.

Where Graphviz's `dot` is on the PATH it lays the boxes out (`dot -Tjson`: positions and
spline edges, kernels as clusters); elsewhere `layered_layout` does, a layered drawing of
its own (a Sugiyama layout): every op a layer below the ops it reads, an edge over
several layers bent through slots of its own in the layers between, the ops of a kernel
in a band of their own, and an edge crossing a kernel's band only between layers the
kernel does not span. So an edge never runs through a box it does not touch, with either
engine. Text is 8 points at any size of graph: a larger graph makes a larger picture.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stridec.errors import UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.ops import InputOp, OutputOp
from stridec.ir.printer import value_names
from stridec.viz.kernels import KernelBox, is_view, op_lines

__all__ = ["draw_graph", "draw_plan", "layered_layout", "dot_layout", "panel_layouts",
           "PanelLayout", "ENGINES"]

FONT = 8.0  # points, monospace
CHAR_W = FONT * 0.61 / 72  # inches per character of DejaVu Sans Mono
LINE_H = FONT * 1.32 / 72  # inches per line
PAD = 0.07  # inside a box, around its text
WRAP = 46  # characters per line of a box's text; longer lines wrap at ", "
GAP_X = 0.3  # between boxes side by side
GUTTER = 0.3  # the width of an empty band between two kernels' bands
DUMMY_W = 0.16  # a slot an edge passes through
STRIP = 0.3  # the part of a gap between layers where edges run across
BOX_PAD = 0.12  # a kernel's box around its ops
TITLE_H = LINE_H + 0.06  # per line of a kernel's title
KERNEL_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2")
ENGINES = ("auto", "dot", "layers")


@dataclass
class PanelLayout:
    """Where everything of one graph goes, in inches from the top-left, y downwards:
    each op's box `(x, y, w, h)`, each edge `(source op, target op, points)` (a polyline,
    or with `curve` a cubic Bezier spline: start, then three points per piece), and each
    kernel's box `(x0, y0, x1, y1)` with its title."""

    boxes: dict[int, tuple[float, float, float, float]]
    edges: list[tuple[int, int, list[tuple[float, float]]]]
    kernels: dict[int, tuple[float, float, float, float]]
    width: float
    height: float
    curve: bool = False
    engine: str = "layers"


def _wrap(line: str) -> list[str]:
    """A line of a box's text in pieces of at most `WRAP` characters, broken after ", "
    (continuations indented by 4)."""
    out: list[str] = []
    rest = line
    indent = ""
    while len(indent) + len(rest) > WRAP:
        limit = WRAP - len(indent)
        cut = rest.rfind(", ", 0, limit)
        if cut <= 0:
            cut = limit - 1
            piece, rest = rest[:cut], rest[cut:]
        else:
            piece, rest = rest[: cut + 1], rest[cut + 2:]
        out.append(indent + piece)
        indent = "    "
    out.append(indent + rest)
    return out


@dataclass
class _Panel:
    graph: Graph
    title: str
    kernels: list[KernelBox] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = value_names(self.graph)
        self.lines = {k: [piece for line in op_lines(self.graph, op, names, clip=False)
                          for piece in _wrap(line)]
                      for k, op in enumerate(self.graph.ops)}
        self.size = {k: (max(len(s) for s in ls) * CHAR_W + 2 * PAD,
                         len(ls) * LINE_H + 2 * PAD) for k, ls in self.lines.items()}
        position = {id(op): k for k, op in enumerate(self.graph.ops)}
        self.edges = [(position[id(v.owner)], k) for k, op in enumerate(self.graph.ops)
                      for v in op.operands]
        self.kernel_of: dict[int, int] = {}
        for b, box in enumerate(self.kernels):
            for k in box.ops:
                self.kernel_of.setdefault(k, b)
        self.titles = {b: box.title.splitlines() for b, box in enumerate(self.kernels)}


# -- the layered layout (no Graphviz needed) ----------------------------------------------
def layered_layout(sizes: dict[int, tuple[float, float]], edges: Sequence[tuple[int, int]],
                   kernel_of: dict[int, int], titles: dict[int, list[str]]) -> PanelLayout:
    """Boxes of `sizes` (width, height) keyed by op position, in topological order; edges
    (source, target); `kernel_of` gives the kernel box of an op (titles: its lines).
    See the module docstring."""
    keys = sorted(sizes)
    layer = {k: 0 for k in keys}
    for u, v in sorted(edges, key=lambda e: e[1]):
        layer[v] = max(layer[v], layer[u] + 1)
    kernels = sorted(set(kernel_of.values()))
    kernel_band = {b: 2 * i + 1 for i, b in enumerate(kernels)}  # odd bands: kernels
    n_bands = 2 * len(kernels) + 1  # even bands: everything else
    band: dict[Any, int] = {k: kernel_band[kernel_of[k]] for k in keys if k in kernel_of}
    neighbours: dict[int, list[int]] = {k: [] for k in keys}
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    free = [k for k in keys if k not in band]
    for _ in range(len(free) + 1):  # a free op goes to the free band nearest its neighbours
        for k in free:
            placed = [band[n] for n in neighbours[k] if n in band]
            if placed:
                mean = sum(placed) / len(placed)
                band[k] = min(range(0, n_bands, 2), key=lambda c: (abs(c - mean), c))
        if all(k in band for k in free):
            break
    for k in free:
        band.setdefault(k, 0)
    spans = {kernel_band[b]: (min(layer[k] for k in keys if kernel_of.get(k) == b),
                              max(layer[k] for k in keys if kernel_of.get(k) == b))
             for b in kernels}

    def blocked(c: int, gap: int) -> bool:
        """Whether a kernel's band `c` spans the gap below layer `gap`."""
        lo, hi = spans.get(c, (1, 0))
        return lo <= gap < hi

    # Edges over several layers pass through slots ("dummies") in the layers between.
    chains: list[list[Any]] = []
    slot_band: dict[Any, int] = {}
    slot_layer: dict[Any, int] = {}
    for e, (u, v) in enumerate(edges):
        chain: list[Any] = [u]
        here = band[u]
        for lay in range(layer[u] + 1, layer[v]):
            same = band[u] == band[v] and band[u] % 2
            if same:
                target = band[u]
            else:
                # The free band nearest v's reachable from here across the gap above.
                step = 1 if band[v] > here else -1
                target = here if here % 2 == 0 else here + step
                c = here
                while c != band[v] and 0 <= c + step < n_bands:
                    if (c + step) % 2 and blocked(c + step, lay - 1):
                        break
                    c += step
                    if c % 2 == 0:
                        target = c
                if target % 2 and not same:
                    target = target + step if 0 <= target + step < n_bands else target - step
            slot = ("slot", e, lay)
            slot_band[slot], slot_layer[slot] = target, lay
            chain.append(slot)
            here = target
        chain.append(v)
        chains.append(chain)
    where = {**{k: (band[k], layer[k]) for k in keys},
             **{s: (slot_band[s], slot_layer[s]) for s in slot_band}}
    width = {**{k: sizes[k][0] for k in keys}, **{s: DUMMY_W for s in slot_band}}
    groups: dict[tuple[int, int], list[Any]] = {}
    for item in [*keys, *slot_band]:
        groups.setdefault(where[item], []).append(item)
    links: dict[Any, list[Any]] = {item: [] for item in where}
    for chain in chains:
        for a, b in zip(chain, chain[1:], strict=False):
            links[a].append(b)
            links[b].append(a)
    n_layers = 1 + max(layer.values(), default=0)
    heights = [max((sizes[k][1] for k in keys if layer[k] == lay), default=0.2)
               for lay in range(n_layers)]
    # Band widths and x of each item: a few sweeps ordering each group by the mean x of
    # what it links to.
    x: dict[Any, float] = {}
    for _ in range(4):
        prev = dict(x)
        band_w = [GUTTER] * n_bands
        for (b, _lay), items in groups.items():
            span = sum(width[i] for i in items) + GAP_X * (len(items) - 1)
            band_w[b] = max(band_w[b], span + (2 * BOX_PAD if b % 2 else 0))
        for b in kernels:
            lines = titles.get(b, [])
            longest = max((len(t) for t in lines), default=0)
            band_w[kernel_band[b]] = max(band_w[kernel_band[b]],
                                         longest * CHAR_W + 2 * BOX_PAD)
        left = [0.0] * n_bands
        for b in range(1, n_bands):
            left[b] = left[b - 1] + band_w[b - 1] + GAP_X
        for (b, _lay), items in groups.items():
            if prev:
                items.sort(key=lambda i: (sum(prev[n] for n in links[i]) / len(links[i])
                                          if links[i] else prev[i]))
            span = sum(width[i] for i in items) + GAP_X * (len(items) - 1)
            at = left[b] + (band_w[b] - span) / 2
            for i in items:
                x[i] = at + width[i] / 2
                at += width[i] + GAP_X
    # y: layers one under another; below each, the bottom pads of the kernels' boxes, the
    # strip the edges run across, and the title of a kernel that starts at the next layer.
    top = [0.0] * n_layers
    y = BOX_PAD + TITLE_H * max((len(t) for t in titles.values()), default=0)
    title_zone = BOX_PAD + TITLE_H * max((len(t) for t in titles.values()), default=0)
    for lay in range(n_layers):
        top[lay] = y
        y += heights[lay] + BOX_PAD + STRIP + title_zone
    boxes = {k: (x[k] - sizes[k][0] / 2, top[layer[k]], *sizes[k]) for k in keys}

    def strip(lay: int) -> tuple[float, float]:
        start = top[lay] + heights[lay] + BOX_PAD
        return start, start + STRIP

    edges_out = []
    for chain in chains:
        points: list[tuple[float, float]] = []
        for a, b in zip(chain, chain[1:], strict=False):
            lay = where[a][1]
            s0, s1 = strip(lay)
            a_bottom = boxes[a][1] + boxes[a][3] if a in boxes else top[lay] + heights[lay]
            b_top = boxes[b][1] if b in boxes else top[lay + 1]
            if not points:
                points.append((x[a], a_bottom))
            points += [(x[a], s0), (x[b], s1), (x[b], b_top)]
        edges_out.append((chain[0], chain[-1], points))
    kernel_boxes = {}
    for b in kernels:
        members = [k for k in keys if kernel_of.get(k) == b]
        inside = members + [s for s in slot_band if slot_band[s] == kernel_band[b]]
        x0 = min(x[i] - width[i] / 2 for i in inside) - BOX_PAD
        x1 = max(x[i] + width[i] / 2 for i in inside) + BOX_PAD
        longest = max((len(t) for t in titles.get(b, [])), default=0)
        x1 = max(x1, x0 + longest * CHAR_W + 2 * BOX_PAD)
        lo, hi = spans[kernel_band[b]]
        y0 = top[lo] - BOX_PAD - TITLE_H * len(titles.get(b, []))
        y1 = top[hi] + heights[hi] + BOX_PAD
        kernel_boxes[b] = (x0, y0, x1, y1)
    right = max([r[0] + r[2] for r in boxes.values()]
                + [kb[2] for kb in kernel_boxes.values()] + [0.0])
    return PanelLayout(boxes, edges_out, kernel_boxes, right, y - STRIP - title_zone + BOX_PAD)


# -- Graphviz -------------------------------------------------------------------------------
def _dot_program() -> str | None:
    return shutil.which("dot")


def dot_layout(sizes: dict[int, tuple[float, float]], edges: Sequence[tuple[int, int]],
               kernel_of: dict[int, int], titles: dict[int, list[str]]) -> PanelLayout:
    """The same picture laid out by Graphviz's `dot` (`dot -Tjson` on boxes of our sizes,
    kernels as clusters); `UnsupportedError` where it is not installed or fails."""
    program = _dot_program()
    if program is None:
        raise UnsupportedError("draw: engine 'dot' needs Graphviz's dot program on the PATH")
    lines = ["digraph g {", f"  graph [rankdir=TB, nodesep={GAP_X}, ranksep={STRIP + 0.2}, "
             'splines=spline, fontname="Courier", fontsize=8];',
             '  node [shape=box, fixedsize=true, label=""];']
    by_kernel: dict[int, list[int]] = {}
    for k, b in kernel_of.items():
        by_kernel.setdefault(b, []).append(k)
    for k, (w, h) in sorted(sizes.items()):
        if k not in kernel_of:
            lines.append(f"  n{k} [width={w:.3f}, height={h:.3f}];")
    for b, members in sorted(by_kernel.items()):
        label = "\\l".join(t.replace('"', "'") for t in titles.get(b, [])) + "\\l"
        lines.append(f'  subgraph cluster_{b} {{ label="{label}"; labeljust=l;')
        for k in sorted(members):
            w, h = sizes[k]
            lines.append(f"    n{k} [width={w:.3f}, height={h:.3f}];")
        lines.append("  }")
    lines += [f"  n{u} -> n{v};" for u, v in edges]
    lines.append("}")
    try:
        done = subprocess.run([program, "-Tjson"], input="\n".join(lines), text=True,
                              capture_output=True, timeout=60, check=True)
        data = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        raise UnsupportedError(f"draw: Graphviz's dot failed ({e})") from e
    _, _, bb_w, bb_h = (float(v) / 72 for v in data["bb"].split(","))
    boxes: dict[int, tuple[float, float, float, float]] = {}
    kernels: dict[int, tuple[float, float, float, float]] = {}
    gvid: dict[int, int] = {}
    for obj in data.get("objects", []):
        name = obj.get("name", "")
        if name.startswith("cluster_"):
            x0, y0, x1, y1 = (float(v) / 72 for v in obj["bb"].split(","))
            kernels[int(name.removeprefix("cluster_"))] = (x0, bb_h - y1, x1, bb_h - y0)
        elif name.startswith("n") and "pos" in obj:
            k = int(name[1:])
            cx, cy = (float(v) / 72 for v in obj["pos"].split(","))
            w, h = float(obj["width"]), float(obj["height"])
            boxes[k] = (cx - w / 2, bb_h - cy - h / 2, w, h)
            gvid[obj["_gvid"]] = k
    edges_out = []
    for edge in data.get("edges", []):
        parts = edge["pos"].split()
        tip = None
        if parts[0].startswith("e,"):
            tip = tuple(float(v) / 72 for v in parts[0][2:].split(","))
            parts = parts[1:]
        points = [(float(a) / 72, bb_h - float(b) / 72)
                  for a, b in (p.split(",") for p in parts)]
        if tip is not None:  # the arrow's tip: one more straight piece, as a flat curve
            end = (tip[0], bb_h - tip[1])
            points += [points[-1], end, end]
        edges_out.append((gvid[edge["tail"]], gvid[edge["head"]], points))
    return PanelLayout(boxes, edges_out, kernels, bb_w, bb_h, curve=True, engine="dot")


def _layout(panel: _Panel, engine: str) -> PanelLayout:
    args = (panel.size, panel.edges, panel.kernel_of, panel.titles)
    if engine == "dot" or (engine == "auto" and _dot_program() is not None):
        try:
            return dot_layout(*args)
        except UnsupportedError:
            if engine == "dot":
                raise
    return layered_layout(*args)


# -- drawing --------------------------------------------------------------------------------
def _draw_panel(ax: Any, panel: _Panel, lay: PanelLayout, ox: float, oy: float) -> None:
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, PathPatch
    from matplotlib.path import Path as MPath

    ax.text(ox, oy - 0.12, panel.title, ha="left", va="bottom", fontsize=10, weight="bold")
    for b, (x0, y0, x1, y1) in lay.kernels.items():
        colour = KERNEL_COLOURS[b % len(KERNEL_COLOURS)]
        ax.add_patch(FancyBboxPatch((ox + x0, oy + y0), x1 - x0, y1 - y0,
                                    boxstyle="round,pad=0,rounding_size=0.08",
                                    facecolor=colour, alpha=0.08, edgecolor=colour,
                                    linewidth=1.6, zorder=0))
        ax.text(ox + x0 + BOX_PAD / 2, oy + y0 + 0.04, "\n".join(panel.titles.get(b, [])),
                ha="left", va="top", fontsize=FONT, family="monospace", color=colour,
                weight="bold", linespacing=1.2, zorder=4)
    for k, (x, y, w, h) in lay.boxes.items():
        op = panel.graph.ops[k]
        face = "#eeeeee" if isinstance(op, (InputOp, OutputOp)) else "white"
        ax.add_patch(FancyBboxPatch((ox + x, oy + y), w, h,
                                    boxstyle="round,pad=0,rounding_size=0.04",
                                    facecolor=face, edgecolor="#333333", linewidth=0.9,
                                    linestyle="--" if is_view(op) else "-", zorder=2))
        ax.text(ox + x + PAD, oy + y + PAD, "\n".join(panel.lines[k]), ha="left", va="top",
                fontsize=FONT, family="monospace", linespacing=1.2, zorder=3)
    for _, _, points in lay.edges:
        shifted = [(ox + px, oy + py) for px, py in points]
        if lay.curve:
            codes = [MPath.MOVETO] + [MPath.CURVE4] * (len(shifted) - 1)
            body = shifted[:-3] if len(shifted) > 4 else shifted[:1]
            if len(body) > 1:
                ax.add_patch(PathPatch(MPath(body, codes[: len(body)]), facecolor="none",
                                       edgecolor="#555555", linewidth=0.9, zorder=1))
            start = body[-1]
        else:
            ax.plot([p[0] for p in shifted[:-1]], [p[1] for p in shifted[:-1]],
                    color="#555555", linewidth=0.9, zorder=1, solid_joinstyle="round")
            start = shifted[-2]
        ax.add_patch(FancyArrowPatch(start, shifted[-1], arrowstyle="-|>", mutation_scale=9,
                                     color="#555555", linewidth=0.9, shrinkA=0, shrinkB=0,
                                     zorder=1))


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise UnsupportedError(f"draw: engine must be one of {', '.join(ENGINES)}; "
                               f"got {engine!r}")


def _figure(panels: Sequence[_Panel], layouts: Sequence[PanelLayout],
            note: str | None = None) -> Any:
    """Panels one above the other, each under its title."""
    from matplotlib.figure import Figure

    margin, head = 0.35, 0.45
    width = max(lay.width for lay in layouts) + 2 * margin
    width = max(width, max(len(p.title) for p in panels) * 0.1 + 2 * margin)
    height = sum(lay.height + head + 0.25 for lay in layouts) + 0.3 + (0.35 if note else 0)
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    y = 0.2
    for panel, lay in zip(panels, layouts, strict=True):
        _draw_panel(ax, panel, lay, margin, y + head)
        y += lay.height + head + 0.25
    if note:
        ax.text(margin, height - 0.25, note, ha="left", va="center", fontsize=FONT,
                color="#555555")
    return fig


LEGEND = "dashed: a view (free, a stride rewrite); solid: an op that writes memory"


def _panels(obj: Any, title: str | None = None,
            boxes: Sequence[KernelBox] = ()) -> list[_Panel]:
    """A graph's one panel; a plan's two: as written (when it knows its graph) and as run,
    the graph after the passes with the ops of each kernel boxed."""
    if isinstance(obj, Graph):
        return [_Panel(obj, title or f"graph @{obj.name}", list(boxes))]
    from stridec.ir.parser import parse
    from stridec.viz.kernels import kernel_boxes

    count = len(obj.program.launches)
    panels = []
    source = getattr(obj, "graph", None)
    if source is not None:
        count_ops = sum(not isinstance(op, (InputOp, OutputOp)) for op in source.ops)
        panels.append(_Panel(source, f"as written: {count_ops} op{'s' * (count_ops != 1)}"))
    run = title or f"as run: {count} kernel launch{'es' if count != 1 else ''}"
    panels.append(_Panel(parse(obj.ir), run, kernel_boxes(obj.program)))
    return panels


def panel_layouts(obj: Any, engine: str = "auto") -> list[tuple[Any, PanelLayout]]:
    """(graph, layout) of each panel of a graph's or a plan's picture, as `draw` lays it
    out with `engine`."""
    _check_engine(engine)
    return [(p.graph, _layout(p, engine)) for p in _panels(obj)]


def draw_graph(graph: Graph, title: str | None = None, boxes: Sequence[KernelBox] = (),
               engine: str = "auto") -> Any:
    """The figure of `graph`: its ops, each value's type and layout, views dashed."""
    _check_engine(engine)
    panels = _panels(graph, title, boxes)
    return _figure(panels, [_layout(p, engine) for p in panels], LEGEND)


def draw_plan(plan: Any, title: str | None = None, engine: str = "auto") -> Any:
    """A plan as written (when it knows its graph) above as run: the graph after the
    passes, the ops of each kernel boxed with the kernel's kind, strategy and grid."""
    _check_engine(engine)
    panels = _panels(plan, title)
    return _figure(panels, [_layout(p, engine) for p in panels],
                   LEGEND + "; boxed: the ops one kernel carries out")
