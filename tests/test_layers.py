"""The package's layers, read from its source: every `import` and `from … import` in
every module — at the top or inside a function, a lazy import counts the same — and
every `importlib.import_module("…")` of a constant name.

Data flows one way (`ir` ← `compiler` ← `runtime` ← `torch`): a module imports only its
own layer and the ones below it, plus the package's base modules (`stridec.errors`,
`stridec.version`); `tools` and the package root sit on top and nothing imports them.
`ir` and `compiler` need neither torch nor a GPU: they import neither torch nor Triton
(they write kernel source text; the runtime loads it). Modules of different folders
never import each other in a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stridec"
LAYERS = {"ir": 0, "compiler": 1, "runtime": 2, "torch": 3, "tools": 4}
BASE = {"stridec.errors", "stridec.version"}
FOREIGN_BELOW_RUNTIME = ("torch", "triton")  # what ir/ and compiler/ must not import


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for each import in the file, wherever it sits. For
    `from a.b import c`, the module is `a.b.c` when that is a module of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if full in MODULES else base
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


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
    path = MODULES[module]
    return str(path.parent.relative_to(PACKAGE.parent))


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, target in imports(path):
            while target and target not in MODULES:  # `from pkg.mod import name`
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


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
    global PACKAGE, MODULES
    saved = PACKAGE, MODULES
    PACKAGE = fake
    MODULES = {module_name(p): p for p in sorted(fake.rglob("*.py"))}
    try:
        found = violations("stridec.ir.a", MODULES["stridec.ir.a"])
        assert any("imports torch" in v for v in found)
        assert any("imports stridec.compiler.b (layer 1)" in v for v in found)
        with pytest.raises(AssertionError, match="cycles across folders"):
            test_no_import_cycle_crosses_folders()
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
