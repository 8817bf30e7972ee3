"""Graph and plan pictures and `stridec-opt --emit=dot`: the DOT parses (pydot), has one
cluster per kernel and every op and operand edge; every op a kernel carries out is in a
kernel's box; the pictures are valid PNG / SVG."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from picture_files import assert_png, assert_svg

import stridec
from stridec.compiler.codegen.program import Program
from stridec.ir.ops import CopyOp, PhiloxOp, PhiloxUniformOp
from stridec.ir.parser import parse
from stridec.tools.opt import main as opt_main
from stridec.viz.dot import graph_to_dot
from stridec.viz.kernels import kernel_boxes

pydot = pytest.importorskip("pydot")


def chain() -> stridec.Graph:
    g = stridec.Graph("chain")
    x = g.input("x", (2, 3, 4, 5), "float32")
    g.output(x.permute(0, 2, 3, 1).contiguous().to("float16").flip(1).contiguous())
    return g


def cat_and_pad() -> stridec.Graph:
    g = stridec.Graph("cat_pad")
    x = g.input("x", (2, 3, 4, 4), "float32")
    y = g.input("y", (2, 3, 4, 4), "float32")
    c = stridec.cat([x.permute(0, 2, 3, 1), y.flip(3).permute(0, 2, 3, 1)], 3)
    g.output(c, stridec.pad(x, (1, 1)).to("float16"))
    return g


def philox_and_copy() -> stridec.Graph:
    g = stridec.Graph("philox")
    state = g.input("state", (6,), "uint32")
    x = g.input("x", (3, 5), "float32")
    bits, _ = g.philox(state, (4, 6))
    g.output(bits.t().contiguous(), x.t().contiguous())
    return g


GRAPHS = [chain, cat_and_pad, philox_and_copy]


def plan_of(g: stridec.Graph):
    args = [torch.zeros(v.shape, dtype=torch.uint32 if v.dtype.name == "uint32" else
                        torch.float32) for v in g.inputs]
    return stridec.compile(g, backend="interpret").plan_for(*args)


def _opt_dot(g: stridec.Graph, tmp_path: Path) -> str:
    path = tmp_path / "g.ir"
    path.write_text(str(g))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert opt_main(["--emit=dot", "--target=cpu", str(path)]) == 0
    return out.getvalue()


@pytest.mark.parametrize("make", GRAPHS, ids=lambda f: f.__name__)
def test_emit_dot_parses_with_a_cluster_per_kernel(make, tmp_path: Path) -> None:
    plan = plan_of(make())
    lowered = parse(plan.ir)
    text = _opt_dot(make(), tmp_path)
    (graph,) = pydot.graph_from_dot_data(text)
    clusters = graph.get_subgraphs()
    boxes = kernel_boxes(plan.program)
    assert len(clusters) == len(boxes) >= 1
    nodes = {n.get_name() for n in graph.get_nodes()}
    for c in clusters:
        nodes |= {n.get_name() for n in c.get_nodes()}
    assert nodes >= {f"n{k}" for k in range(len(lowered.ops))}
    edges = [(e.get_source(), e.get_destination()) for e in graph.get_edges()]
    assert len(edges) == sum(len(op.operands) for op in lowered.ops)
    for c, box in zip(clusters, boxes, strict=True):
        assert {n.get_name() for n in c.get_nodes()} == {f"n{k}" for k in box.ops}
    if shutil.which("dot"):  # Graphviz's own parser, where it is installed
        svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                             check=True).stdout
        assert_svg(svg)


@pytest.mark.parametrize("make", GRAPHS, ids=lambda f: f.__name__)
def test_every_op_that_needs_a_kernel_is_in_a_kernel_box(make) -> None:
    plan = plan_of(make())
    lowered = parse(plan.ir)
    boxed = {k for box in kernel_boxes(plan.program) for k in box.ops}
    working = {k for k, op in enumerate(lowered.ops)
               if isinstance(op, (CopyOp, PhiloxOp, PhiloxUniformOp)) and op.results[0].numel()}
    assert boxed == working
    # The record survives the on-disk cache's JSON.
    again = Program.from_json(plan.program.to_json())
    assert [lch.ops for lch in again.launches] == [lch.ops for lch in plan.program.launches]


def test_dot_quotes_names() -> None:
    g = stridec.Graph('say "hi" \\ there')
    x = g.input("x", (2,), "float32")
    g.output(x.flip(0))
    (graph,) = pydot.graph_from_dot_data(graph_to_dot(g))
    assert len(graph.get_nodes()) >= 3


def test_emit_dot_without_kernels_says_why(tmp_path: Path) -> None:
    path = tmp_path / "g.ir"
    path.write_text(str(chain()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert opt_main(["--emit=dot", "--pass-pipeline=canonicalize", str(path)]) == 0
    text = out.getvalue()
    assert "// no kernels: " in text and "cluster" not in text
    pydot.graph_from_dot_data(text)


@pytest.mark.parametrize("make", GRAPHS, ids=lambda f: f.__name__)
def test_graph_and_plan_pictures(make, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    g = make()
    stridec.draw(g, tmp_path / "g.png")
    assert_png(tmp_path / "g.png")
    plan = plan_of(g)
    fig = stridec.draw(plan, tmp_path / "p.svg")
    assert_svg(tmp_path / "p.svg")
    shown = {t.get_text() for t in fig.axes[0].texts}
    for box in kernel_boxes(plan.program):
        assert box.title in shown
    assert any(t.startswith("as written") for t in shown)
    assert_svg(g._repr_svg_())
    assert_svg(plan._repr_svg_())
