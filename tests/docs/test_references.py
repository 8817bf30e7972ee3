"""What the pages name exists: every backticked path of the package or the repository
(`stridec/runtime/launch.py`, `codegen/c/pool.py`, `tests/passes/`) and every pass name
(`merge-fills`, a pipeline `fuse-copies,dce`, `--pass-pipeline=...`) in README.md and
docs/*.md. A page that names a file that moved, or a pass that is not one, fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from markdown_blocks import PAGES, ROOT

from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PASS_REGISTRY, parse_pipeline

CODE = re.compile(r"`([^`\n]+)`")
# A path: under a folder of the repository, or a file path (`codegen/c/copy.py`).
PATH = re.compile(r"(?:stridec|tests|bench|examples|docs)/[\w./-]*"
                  r"|[\w.-]+(?:/[\w.-]+)*/[\w.-]+\.(?:py|ir|c|h|md|json|txt)")
# Where a path without the `stridec/` prefix may be rooted: the repository, the package,
# the compiler (`codegen/...`).
BASES = (ROOT, ROOT / "stridec", ROOT / "stridec" / "compiler")
# A kebab-case word, or a pipeline of passes with options: `plan-memory{a=b},dce`.
KEBAB = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+")
PIPELINE = re.compile(r"[a-z][\w-]*(?:\{[^}]*\})?(?:,[a-z][\w-]*(?:\{[^}]*\})?)*")
# Kebab-case words in backticks that are not passes: the command-line tools.
TOOLS = {"stridec-opt", "mlir-opt"}


def _spans(page: Path) -> list[tuple[int, str, bool]]:
    """(line, text, inline) of every backticked span of a page and every line of its code
    blocks (a sh block's `stridec-opt --pass-pipeline=...` names passes too)."""
    found = []
    text = page.read_text(encoding="utf-8")
    blocks = list(re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M))
    for m in blocks:
        for k, line in enumerate(m.group(1).splitlines()):
            found.append((text.count("\n", 0, m.start()) + 2 + k, line, False))
    outside = re.sub(r"^```[^\n]*\n(.*?)^```", lambda m: "\n" * m.group(0).count("\n"),
                     text, flags=re.S | re.M)
    for m in CODE.finditer(outside):
        found.append((outside.count("\n", 0, m.start()) + 1, m.group(1), True))
    return found


def _words(span: str) -> list[str]:
    return [w.rstrip(".:;") for w in re.split(r"[\s()=\"']+", span) if w]


def _option_names() -> set[str]:
    parse_pipeline("")  # registers every pass
    return {f.name.replace("_", "-") for cls in PASS_REGISTRY.values()
            if dataclasses.is_dataclass(cls) for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = []
    for line, span, _inline in _spans(page):
        for word in _words(span):
            if PATH.fullmatch(word) and not any((base / word).exists() for base in BASES):
                missing.append(f"{page.name}:{line}: {word}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_pass_a_page_names_is_a_pass(page: Path) -> None:
    """A kebab-case word is a pass, a pass option or a tool; a pipeline (a comma-separated
    list holding one, or the value of `--pass-pipeline=`) parses."""
    options = _option_names()  # registers every pass first
    passes = set(PASS_REGISTRY)
    wrong = []
    for line, span, inline in _spans(page):
        named = [w.split("--pass-pipeline=", 1)[1].strip("'\"")
                 for w in span.split() if w.startswith("--pass-pipeline=")]
        if inline and PIPELINE.fullmatch(span) and KEBAB.search(span):
            named.append(span)  # the whole span: `merge-fills`, `fuse-copies,dce`
        for text in named:
            if "…" in text or "..." in text:
                continue  # `--pass-pipeline=…`: a placeholder
            if KEBAB.fullmatch(text):
                if text not in passes | options | TOOLS:
                    wrong.append(f"{page.name}:{line}: {text} (not a pass, option or tool)")
                continue
            try:
                parse_pipeline(text)
            except Exception as e:  # noqa: BLE001 -- the message is the finding
                wrong.append(f"{page.name}:{line}: {text}: {e}")
    assert not wrong, "pass names that are not passes:\n" + "\n".join(wrong)


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A page naming a missing file and a pass that is not one fails both tests."""
    page = tmp_path / "bad.md"
    page.write_text("See `stridec/ir/reference.py`; then `lower-to-triton` runs, and\n"
                    "`canonicalize,lower-to-triton` too.\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="stridec/ir/reference.py"):
        test_every_path_a_page_names_exists(page)
    with pytest.raises(AssertionError, match="lower-to-triton") as caught:
        test_every_pass_a_page_names_is_a_pass(page)
    assert "bad.md:1: lower-to-triton (not a pass" in str(caught.value)
    assert "bad.md:2: canonicalize,lower-to-triton: " in str(caught.value)


def test_the_default_pipeline_the_readme_gives_is_the_compilers() -> None:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    (given,) = re.findall(r"the default pipeline `([a-z,-]+)`", text)
    assert given == DEFAULT_PIPELINE


def test_the_readme_lists_every_page_of_docs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Docs\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(docs/[\w.-]+\.md)`", section))
    assert listed == {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
