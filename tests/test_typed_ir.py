"""The IR is typed: code asks `isinstance(op, CopyOp)` and reads `op.space`, never
`op.name == "copy"` and `op.attrs["space"]`; passes erase ops through the `Rewriter`.
Read from the package's source, with Python's own tokenizer and parser (a string or
comment that mentions an op name does not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import stridec
from stridec.compiler.rewriting import Rewriter
from stridec.ir.graph import OP_REGISTRY

PACKAGE = Path(stridec.__file__).parent
OP_NAMES = set(OP_REGISTRY)


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(PACKAGE)), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(PACKAGE.rglob("*.py"))]


def _strings(node: ast.expr) -> set[str]:
    """The string constants of `"copy"` or `("input", "output")`."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def test_no_dispatch_on_op_names() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr == "name" for s in sides)
            if named and any(_strings(s) & OP_NAMES for s in sides):
                found.append(f"{path}:{node.lineno}")
    assert found == [], f"compare op classes with isinstance, not names: {found}"


def test_no_attribute_reads_by_key() -> None:
    """`op.attrs["dims"]` where `op.dims` says the same (the relate_attrs hooks read the
    dict they are completing, which is no op's)."""
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "attrs"
                and _strings(node.slice)
            ):
                found.append(f"{path}:{node.lineno}")
    assert found == [], f"read the typed accessor instead: {found}"


def test_passes_erase_through_the_rewriter() -> None:
    """Only the rewriter (and `Graph.erase`) takes an op out of its graph."""
    allowed = {"compiler/rewriting.py", "ir/graph.py"}
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and path not in allowed:
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == "graph"
                        and isinstance(node.value, ast.Constant)
                        and node.value.value is None
                    ):
                        found.append(f"{path}:{node.lineno}")
    assert found == [], f"erase with Rewriter.erase: {found}"


def test_erase_all_filters_each_use_list() -> None:
    g = stridec.Graph("g")
    x = g.input("x", (2, 3))
    a = x.permute(1, 0)
    b = x.flip(0)
    c = a.contiguous()
    g.output(x)
    dead = [a.owner, b.owner, c.owner]
    rw = Rewriter(g)
    rw.erase_all(dead)
    assert x.uses == [(g.output_op, 0)] and a.uses == []
    assert all(op.graph is None for op in dead) and rw.changed
