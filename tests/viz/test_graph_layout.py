"""How graph and plan pictures are laid out (`stridec.viz.graphs`): no two boxes overlap,
a kernel's box holds its ops and no other, every edge runs from its source's bottom to
its target's top and through no box it does not touch; text stays at 8 points. The
layered layout is checked everywhere (CI has no Graphviz); Graphviz's `dot` where it is
installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import stridec
from stridec.errors import UnsupportedError
from stridec.viz import graphs
from stridec.viz.graphs import PanelLayout, panel_layouts

pytest.importorskip("matplotlib")


def four_kernels() -> stridec.Graph:
    """Four outputs of one input, each its own kernel (the picture of the issue)."""
    g = stridec.Graph("four")
    x = g.input("x", (2, 3, 4, 5), "float16")
    g.output(x.permute(0, 2, 3, 1).contiguous(), stridec.pad(x, (1, 1)), x.pack("NCHW4"),
             x.flip(3).contiguous())
    return g


def long_edges() -> stridec.Graph:
    """Values read many layers below where they are made, beside kernels that span those
    layers: edges must go round the kernels' boxes."""
    g = stridec.Graph("long")
    x = g.input("x", (4, 6), "float32")
    y = g.input("y", (4, 6), "float32")
    a = x.t().contiguous().to("float16").t().contiguous()  # chains: several layers
    b = stridec.cat([y, stridec.pad(y, (0, 0, 1, 1))[1:5]], 1)
    g.output(a, b, x[1:], y.flip(0).contiguous())
    return g


def philox_and_copy() -> stridec.Graph:
    g = stridec.Graph("philox")
    state = g.input("state", (6,), "uint32")
    x = g.input("x", (3, 5), "float32")
    bits, _ = g.philox(state, (4, 6))
    g.output(bits.t().contiguous(), x.t().contiguous())
    return g


GRAPHS = [four_kernels, long_edges, philox_and_copy]
ENGINES = ["layers", pytest.param("dot", marks=pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz's dot is not installed"))]


def plan_of(g: stridec.Graph):
    args = [torch.zeros(v.shape, dtype=torch.uint32 if v.dtype.name == "uint32" else
                        v.dtype.torch) for v in g.inputs]
    return stridec.compile(g, backend="cpu").plan_for(*args)


def _meets(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two rectangles (x0, y0, x1, y1) share interior points."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _corners(box: tuple[float, float, float, float], inset: float = 0.0):
    x, y, w, h = box
    return (x + inset, y + inset, x + w - inset, y + h - inset)


def _crosses(p: tuple[float, float], q: tuple[float, float],
             rect: tuple[float, float, float, float]) -> bool:
    """Whether the segment p-q passes through the interior of rect (x0, y0, x1, y1):
    Liang-Barsky clipping."""
    x0, y0, x1, y1 = rect
    dx, dy = q[0] - p[0], q[1] - p[1]
    lo, hi = 0.0, 1.0
    for d, near, far in ((dx, x0 - p[0], x1 - p[0]), (dy, y0 - p[1], y1 - p[1])):
        if abs(d) < 1e-12:
            if near >= 0 or far <= 0:
                return False
            continue
        t0, t1 = sorted((near / d, far / d))
        lo, hi = max(lo, t0), min(hi, t1)
        if lo >= hi:
            return False
    return True


def _distance(p: tuple[float, float], rect: tuple[float, float, float, float]) -> float:
    """How far p lies from the outline of rect."""
    x0, y0, x1, y1 = rect
    dx = max(x0 - p[0], 0.0, p[0] - x1)
    dy = max(y0 - p[1], 0.0, p[1] - y1)
    if dx or dy:
        return (dx * dx + dy * dy) ** 0.5
    return min(p[0] - x0, x1 - p[0], p[1] - y0, y1 - p[1])


def _polyline(lay: PanelLayout, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The edge as straight pieces (a spline sampled)."""
    if not lay.curve:
        return points
    out = [points[0]]
    for i in range(1, len(points) - 2, 3):
        p0, p1, p2, p3 = points[i - 1], points[i], points[i + 1], points[i + 2]
        for k in range(1, 17):
            t = k / 16
            out.append(tuple((1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t * t * c
                             + t ** 3 * d for a, b, c, d in zip(p0, p1, p2, p3, strict=True)))
    return out


def check_layout(graph: stridec.Graph, lay: PanelLayout, kernel_of: dict[int, int]) -> None:
    ops = range(len(graph.ops))
    assert set(lay.boxes) == set(ops)
    rects = {k: _corners(lay.boxes[k]) for k in ops}
    for a in ops:
        for b in ops:
            if a < b:
                assert not _meets(rects[a], rects[b]), f"ops {a} and {b} overlap"
    for kb, krect in lay.kernels.items():
        for k in ops:
            inside = krect[0] <= rects[k][0] and rects[k][2] <= krect[2] and \
                krect[1] <= rects[k][1] and rects[k][3] <= krect[3]
            if kernel_of.get(k) == kb:
                assert inside, f"op {k} outside its kernel {kb}'s box"
            else:
                assert not _meets(krect, rects[k]), f"op {k} inside kernel {kb}'s box"
        for other, orect in lay.kernels.items():
            if other > kb:
                assert not _meets(krect, orect), f"kernel boxes {kb} and {other} overlap"
    # One edge per operand, from the source's bottom to the target's top, through no op
    # box but its own ends' and no kernel box but its ends' kernels'.
    want = sorted((next(j for j, o in enumerate(graph.ops) if o is v.owner), k)
                  for k, op in enumerate(graph.ops) for v in op.operands)
    assert sorted((u, v) for u, v, _ in lay.edges) == want
    for u, v, points in lay.edges:
        line = _polyline(lay, points)
        if lay.curve:  # dot: from the source's outline to the target's
            assert _distance(line[0], rects[u]) < 0.08 and _distance(line[-1], rects[v]) < 0.08
        else:
            assert line[0][1] == rects[u][3] and rects[u][0] <= line[0][0] <= rects[u][2]
            assert line[-1][1] == rects[v][1] and rects[v][0] <= line[-1][0] <= rects[v][2]
        shrink = 0.03 if lay.curve else 1e-6
        for p, q in zip(line, line[1:], strict=False):
            for k in ops:
                if k not in (u, v):
                    assert not _crosses(p, q, _corners(lay.boxes[k], shrink)), \
                        f"edge {u} -> {v} runs through op {k}'s box"
            for kb, krect in lay.kernels.items():
                if kb not in (kernel_of.get(u), kernel_of.get(v)):
                    x0, y0, x1, y1 = krect
                    assert not _crosses(p, q, (x0 + shrink, y0 + shrink, x1 - shrink,
                                               y1 - shrink)), \
                        f"edge {u} -> {v} runs through kernel {kb}'s box"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("make", GRAPHS, ids=lambda f: f.__name__)
def test_plan_layouts(make, engine: str) -> None:
    plan = plan_of(make())
    from stridec.viz.kernels import kernel_boxes

    boxes = kernel_boxes(plan.program)
    kernel_of: dict[int, int] = {}
    for b, box in enumerate(boxes):
        for k in box.ops:
            kernel_of.setdefault(k, b)
    (written, lay_w), (run, lay_r) = panel_layouts(plan, engine)
    assert lay_w.engine == lay_r.engine == engine
    check_layout(written, lay_w, {})
    check_layout(run, lay_r, kernel_of)
    assert set(lay_r.kernels) == set(range(len(boxes)))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_graph_layout(engine: str) -> None:
    g = long_edges()
    ((graph, lay),) = panel_layouts(g, engine)
    check_layout(graph, lay, {})


def test_the_picture_of_four_kernels_is_legible(tmp_path: Path) -> None:
    """Text at 8 points or more, the panels one above the other: the four kernels' plan
    (3815 x 977 pixels with 7.5-point text side by side before) fits 25 inches across."""
    fig = stridec.draw(plan_of(four_kernels()), tmp_path / "four.png", engine="layers")
    width, height = fig.get_size_inches()
    assert width < 25 and height < 16
    sizes = [t.get_fontsize() for t in fig.axes[0].texts]
    assert sizes and min(sizes) >= 8


def test_auto_uses_dot_only_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphs, "_dot_program", lambda: None)
    ((_, lay),) = panel_layouts(philox_and_copy(), "auto")
    assert lay.engine == "layers"
    with pytest.raises(UnsupportedError, match="Graphviz's dot program"):
        panel_layouts(philox_and_copy(), "dot")
    with pytest.raises(UnsupportedError, match="engine must be one of auto, dot, layers"):
        stridec.draw(philox_and_copy(), engine="neato")


@pytest.mark.parametrize("name", ["NCHW4", "NCHW32", "CHWN4", "NHWC", "pitched<16>"])
def test_draw_takes_a_format(name: str, tmp_path: Path) -> None:
    fmt = stridec.get_format(name)
    fig = stridec.draw(fmt, tmp_path / "f.png")
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert any(name in t for t in texts)  # the title names it
    if name != "NHWC":
        assert "fill" in texts  # the padding (channels to a block, or a row's pitch) shows
    fig = stridec.draw(fmt, sizes=(1, 3, 2, 2) if name != "pitched<16>" else (2, 2))
    assert any("(1, 3, 2, 2)" in t or "(2, 2)" in t for t in
               {t.get_text() for t in fig.axes[0].texts})


def test_the_check_can_fail() -> None:
    """An edge drawn straight through a box between its ends is caught."""
    g = stridec.Graph("three")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous(), x)
    boxes = {0: (0.0, 0.0, 1.0, 0.5), 1: (0.0, 1.0, 1.0, 0.5), 2: (0.0, 2.0, 1.0, 0.5),
             3: (0.0, 3.0, 1.0, 0.5)}
    straight = [(0, 1, [(0.5, 0.5), (0.5, 1.0)]), (1, 2, [(0.5, 1.5), (0.5, 2.0)]),
                (2, 3, [(0.5, 2.5), (0.5, 3.0)]), (0, 3, [(0.5, 0.5), (0.5, 3.0)])]
    with pytest.raises(AssertionError, match="edge 0 -> 3 runs through op 1"):
        check_layout(g, PanelLayout(boxes, straight, {}, 1.0, 3.5), {})
