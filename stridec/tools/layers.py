"""The package's imports, read from its source: what the layering test checks and what
draws the layer picture of docs/architecture.md.

    python -m stridec.tools.layers            # the picture, as Mermaid text

Every `import` and `from … import` counts, at the top of a module or inside a function
(a lazy import is still an import), and so does `importlib.import_module("…")` of a
constant name. An import under `if TYPE_CHECKING:` counts for the layering (even a type
must come from below) but is no runtime dependency: `import_graph(typing=False)` leaves
it out, as the check for import cycles does.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PACKAGE", "module_name", "package_modules", "imports", "import_graph",
           "folder_of", "mermaid"]

PACKAGE = Path(__file__).resolve().parents[1]

# The folders, lowest layer first, as the picture stacks them.
LAYER_ORDER = ("ir", "compiler", "viz", "runtime", "torch", "tools")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _typing_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            for statement in node.body:
                inside.update(id(n) for n in ast.walk(statement))
    return inside


def imports(path: Path, modules: dict[str, Path], package: Path = PACKAGE,
            typing: bool = True) -> Iterator[tuple[int, str]]:
    """(line, imported module) for each import in the file, wherever it sits (those under
    `if TYPE_CHECKING:` only with `typing`). For `from a.b import c`, the module is
    `a.b.c` when that is a module of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = set() if typing else _typing_only(tree)
    here = module_name(path, package)
    if path.name != "__init__.py":
        here = here.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if full in modules else base
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


def import_graph(modules: dict[str, Path], package: Path = PACKAGE,
                 typing: bool = True) -> dict[str, set[str]]:
    """Module → the package's modules it imports (itself left out); without `typing`,
    only the imports that run (none under `if TYPE_CHECKING:`)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target in imports(path, modules, package, typing):
            while target and target not in modules:  # `from pkg.mod import name`
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def folder_of(module: str, modules: dict[str, Path], package: Path = PACKAGE) -> str:
    """The folder holding a module, relative to the package's parent (`stridec/ir`); the
    package's own `__init__` and `__main__` (its public API and `python -m stridec`,
    above every layer) are `stridec/__init__`."""
    path = modules[module]
    if path in (package / "__init__.py", package / "__main__.py"):
        return f"{package.name}/__init__"
    return path.parent.relative_to(package.parent).as_posix()


def mermaid(package: Path = PACKAGE) -> str:
    """The layers as a Mermaid flowchart: one box per folder (listing its modules), one
    arrow per pair of folders where a module of one imports a module of the other,
    pointing from the importer down to what it uses."""
    modules = package_modules(package)
    graph = import_graph(modules, package)
    folders: dict[str, list[str]] = {}
    for module in modules:
        folders.setdefault(folder_of(module, modules, package), []).append(module)

    def rank(folder: str) -> tuple[int, str]:
        parts = folder.split("/")
        if len(parts) == 1:
            return (-1, folder)  # the base modules: errors, version
        order = LAYER_ORDER.index(parts[1]) if parts[1] in LAYER_ORDER else len(LAYER_ORDER)
        return (order, folder)

    def node(folder: str) -> str:
        return folder.replace("/", "_")

    lines = ["flowchart BT"]
    for folder in sorted(folders, key=rank):
        if folder.endswith("/__init__"):
            label = f"{folder}.py (public API), __main__.py"
        else:
            names = sorted(m.rpartition(".")[2] for m in folders[folder]
                           if modules[m].name != "__init__.py")
            label = f"{folder}/" + ("<br/>" + " ".join(names) if names else "")
        lines.append(f'    {node(folder)}["{label}"]')
    edges = sorted({
        (folder_of(a, modules, package), folder_of(b, modules, package))
        for a, targets in graph.items() for b in targets
        if folder_of(a, modules, package) != folder_of(b, modules, package)
    }, key=lambda e: (rank(e[0]), rank(e[1])))
    for src, dst in edges:
        lines.append(f"    {node(src)} --> {node(dst)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.stdout.write(mermaid())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
