"""The package's layers, read from its source (`stridec.tools.layers`): every `import`
and `from … import` in every module — at the top or inside a function, a lazy import
counts the same — and every `importlib.import_module("…")` of a constant name.

Data flows one way (`ir` ← `compiler` ← `runtime` ← `torch`): a module imports only its
own layer and the ones below it, plus the package's base modules (`stridec.errors`,
`stridec.version`); `tools` and the package root sit on top and nothing imports them.
`ir` and `compiler` need neither torch nor a GPU: they import neither torch nor Triton
(they write kernel source text; the runtime loads it). Modules of different folders
never import each other in a cycle, and below `torch/` no modules do at all: the IR core
(`ir/graph.py`) knows neither the builder on top of it nor the op catalogue (typing-only
imports, under `if TYPE_CHECKING:`, never run and do not count as a cycle).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stridec.tools import layers

# viz (pictures) reads only the IR: beside the compiler.
LAYERS = {"ir": 0, "compiler": 1, "viz": 1, "runtime": 2, "torch": 3, "tools": 4}
BASE = {"stridec.errors", "stridec.version"}
FOREIGN_BELOW_RUNTIME = ("torch", "triton")  # what ir/ and compiler/ must not import
PACKAGE = layers.PACKAGE
MODULES = layers.package_modules()


def imports(path: Path) -> Iterator[tuple[int, str]]:
    return layers.imports(path, MODULES, PACKAGE)


def layer(module: str) -> int | None:
    """The layer of a module of the package: None for a base module, 5 for the root."""
    if module in BASE:
        return None
    parts = module.split(".")
    if len(parts) == 1:
        return 5
    return LAYERS.get(parts[1], 5)


def violations(module: str, path: Path) -> list[str]:
    found = []
    own = layer(module)
    for line, target in imports(path):
        where = f"{path.relative_to(PACKAGE.parent)}:{line}"
        top = target.split(".")[0]
        if top == "stridec":
            theirs = layer(target)
            if own is not None and theirs is not None and theirs > own:
                found.append(f"{where}: {module} (layer {own}) imports {target} (layer {theirs})")
            if own is None and theirs is not None:
                found.append(f"{where}: base module {module} imports {target}")
        elif top in FOREIGN_BELOW_RUNTIME and own is not None and own <= LAYERS["compiler"]:
            found.append(f"{where}: {module} imports {target}, which ir/ and compiler/ never need")
    return found


def test_no_module_imports_a_higher_layer() -> None:
    found = [v for module, path in MODULES.items() for v in violations(module, path)]
    assert not found, "imports against the layering:\n" + "\n".join(found)


def folder(module: str) -> str:
    return layers.folder_of(module, MODULES, PACKAGE)


def import_graph(typing: bool = True) -> dict[str, set[str]]:
    return layers.import_graph(MODULES, PACKAGE, typing)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_crosses_folders() -> None:
    crossing = [c for c in cycles(import_graph()) if len({folder(m) for m in c}) > 1]
    assert not crossing, "import cycles across folders:\n" + "\n".join(map(str, crossing))


# The layers whose modules import each other in no cycle at all (what runs: imports under
# `if TYPE_CHECKING:` left out).
ACYCLIC = ("ir", "compiler", "viz", "runtime")


def test_no_import_cycle_below_torch() -> None:
    found = [c for c in cycles(import_graph(typing=False))
             if any(layer(m) is not None and m.split(".")[1] in ACYCLIC for m in c)]
    assert not found, "import cycles below torch/:\n" + "\n".join(map(str, found))


# -- the checks can fail -----------------------------------------------------------------
def test_the_checks_see_lazy_upward_imports_and_cycles(tmp_path: Path) -> None:
    """A lazy `import torch` inside a function of ir/, and a cycle ir ↔ compiler, are
    found (each check run on a small made-up package)."""
    fake = tmp_path / "stridec"
    (fake / "ir").mkdir(parents=True)
    (fake / "compiler").mkdir()
    for init in (fake / "__init__.py", fake / "ir" / "__init__.py",
                 fake / "compiler" / "__init__.py"):
        init.write_text("")
    (fake / "ir" / "a.py").write_text(
        "def f():\n    import torch\n    from stridec.compiler import b\n"
    )
    (fake / "compiler" / "b.py").write_text("from stridec.ir import a\n")
    # Within ir/: c and d import each other at run time; e and f only for types.
    (fake / "ir" / "c.py").write_text("from stridec.ir import d\n")
    (fake / "ir" / "d.py").write_text("def f():\n    from stridec.ir import c\n")
    (fake / "ir" / "e.py").write_text("from stridec.ir import f\n")
    (fake / "ir" / "f.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stridec.ir import e\n")
    global PACKAGE, MODULES
    saved = PACKAGE, MODULES
    PACKAGE = fake
    MODULES = layers.package_modules(fake)
    try:
        found = violations("stridec.ir.a", MODULES["stridec.ir.a"])
        assert any("imports torch" in v for v in found)
        assert any("imports stridec.compiler.b (layer 1)" in v for v in found)
        with pytest.raises(AssertionError, match="cycles across folders"):
            test_no_import_cycle_crosses_folders()
        with pytest.raises(AssertionError, match="below torch") as raised:
            test_no_import_cycle_below_torch()
        assert "stridec.ir.c" in str(raised.value) and "stridec.ir.e" not in str(raised.value)
    finally:
        PACKAGE, MODULES = saved


def test_stridec_opt_emits_kernels_without_torch(tmp_path: Path) -> None:
    """Parsing, the whole pipeline and Triton code generation — a pad's fill included,
    whose bits are converted as torch converts them — run with torch never imported."""
    import subprocess
    import sys

    source = tmp_path / "g.ir"
    source.write_text(
        "graph @g {\n"
        '  %x = input {name = "x"} : tensor<4x8xf16>\n'
        "  %t = transpose %x {dim0 = 0, dim1 = 1} : "
        "tensor<8x4xf16, strided<[1, 8], offset: 0>>\n"
        "  %p = pad %t {pad = [1, 2], value = 0.1} : tensor<8x7xf16>\n"
        "  output %p\n"
        "}\n"
    )
    check = (
        "import sys\n"
        "from stridec.tools.opt import main\n"
        f"status = main(['--emit=triton', {str(source)!r}])\n"
        "assert status == 0, status\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert "@triton.jit" in done.stdout and "tl.full" in done.stdout, done.stdout


def test_the_architecture_picture_is_generated_from_the_code() -> None:
    """docs/architecture.md shows `python -m stridec.tools.layers` as it prints now."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = page.index("```mermaid\n") + len("```mermaid\n")
    shown = page[start : page.index("```", start)]
    assert shown == layers.mermaid(), (
        "docs/architecture.md: the picture is stale; paste the output of "
        "`python -m stridec.tools.layers` into its mermaid block"
    )
