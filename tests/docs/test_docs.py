"""Docs are tests: every code block of README.md and docs/*.md (any page added later
included) is checked here.

Each block is fenced with a language:

- `python` blocks run, in order, one namespace per page (a page reads like one session);
  a block fenced `python gpu` needs CUDA and is skipped without it;
- `mlir` blocks are text IR: each parses, verifies and prints exactly as written (less
  its `//` comment lines); a block fenced `mlir pipeline=a,b` is also what that pass
  pipeline makes of the page's previous `mlir` block (`stridec-opt --pass-pipeline=a,b`);
- `sh`, `text`, `ebnf`, `console`, `json` and `mermaid` blocks are shown, not run (the
  README's `sh` blocks are the commands CI runs: tests/docs/test_ci.py; a `mermaid`
  picture is generated from the code and compared by tests/test_layers.py); a
  `stridec-opt` command in an `sh` block must be one its parser accepts.

A fence without a language, or an indented code block, is refused: the test could not
tell how to check it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import torch
from markdown_blocks import PAGES, ROOT, Block, blocks_of

import stridec

SHOWN_ONLY = {"sh", "text", "ebnf", "console", "json", "mermaid"}


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def test_the_pages_are_found() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "design.md", "text-ir.md", "passes.md", "torch.md"} <= names
    assert any(b.language == "python" for b in ALL_BLOCKS)
    assert any(b.language == "mlir" for b in ALL_BLOCKS)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.where)
def test_every_block_has_a_language_the_tests_know(block: Block) -> None:
    assert block.language in {"python", "mlir"} | SHOWN_ONLY, (
        f"{block.where}: fence the block with one of ```python, ```mlir, "
        f"{', '.join(sorted(SHOWN_ONLY))} (got {block.language or 'nothing'!r})"
    )
    known = {"python": ("gpu",), "mlir": ("pipeline=",)}.get(block.language, ())
    for flag in block.flags:
        assert flag.startswith(known) if known else False, (
            f"{block.where}: unknown fence flag {flag!r} for {block.language}"
        )


# -- python: each page runs top to bottom ------------------------------------------------------
PYTHON_PAGES = [p for p in PAGES if any(b.language == "python" for b in blocks_of(p))]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(
    page: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "__doc__"}
    skipped = []
    for block in blocks_of(page):
        if block.language != "python":
            continue
        if "gpu" in block.flags and not torch.cuda.is_available():
            skipped.append(block.where)
            continue
        # Line numbers in a traceback are the page's own; the page's code runs as written,
        # without this module's `from __future__` (a dataclass on a page evaluates its
        # annotations, as in a script).
        code = compile("\n" * block.line + block.text, str(page.relative_to(ROOT)), "exec",
                       dont_inherit=True)
        exec(code, namespace)
    capsys.readouterr()
    if skipped:
        pytest.skip(f"needs a CUDA device: {', '.join(skipped)} (the rest ran)")


# -- mlir: parses and prints as written ------------------------------------------------------
MLIR_BLOCKS = [b for b in ALL_BLOCKS if b.language == "mlir"]


@pytest.mark.parametrize("block", MLIR_BLOCKS, ids=lambda b: b.where)
def test_ir_blocks_print_as_written(block: Block) -> None:
    graph = stridec.parse(block.text)
    graph.verify()
    assert str(graph) == _without_comments(block.text)


PIPELINE_PAIRS = [
    (before, after)
    for page in PAGES
    for before, after in zip(
        [b for b in blocks_of(page) if b.language == "mlir"],
        [b for b in blocks_of(page) if b.language == "mlir"][1:],
        strict=False,
    )
    if any(flag.startswith("pipeline=") for flag in after.flags)
]


@pytest.mark.parametrize("before, after", PIPELINE_PAIRS, ids=[a.where for _, a in PIPELINE_PAIRS])
def test_ir_after_a_pipeline_is_what_the_passes_print(before: Block, after: Block) -> None:
    from stridec.compiler.pass_manager import PassManager

    (flag,) = [f for f in after.flags if f.startswith("pipeline=")]
    graph = stridec.parse(before.text)
    PassManager.parse(flag.removeprefix("pipeline=")).run(graph)
    assert str(graph) == _without_comments(after.text)


def test_passes_page_shows_each_pass_before_and_after() -> None:
    """docs/passes.md: every pass of the default pipeline with an example has its result
    checked (a `pipeline=` block)."""
    checked = {
        name
        for _, after in PIPELINE_PAIRS
        if after.page.name == "passes.md"
        for f in after.flags
        if f.startswith("pipeline=")
        for name in f.removeprefix("pipeline=").split(",")
    }
    assert {"canonicalize", "fold-views", "lower-formats", "fuse-copies", "eliminate-copies",
            "plan-memory", "merge-fills"} <= checked


def _without_comments(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.lstrip().startswith("//"))


# -- sh: stridec-opt command lines are ones it accepts ---------------------------------------
OPT_LINES = [
    (b, line)
    for b in ALL_BLOCKS
    if b.language == "sh"
    for line in b.text.splitlines()
    if line.strip().startswith("stridec-opt")
]


@pytest.mark.parametrize("block, line", OPT_LINES, ids=[b.where for b, _ in OPT_LINES])
def test_stridec_opt_commands_parse(block: Block, line: str) -> None:
    from stridec.tools.opt import _parser

    words = shlex.split(line, comments=True)
    redirects = [i for i, w in enumerate(words) if w in ("<", ">", "2>", "|")]
    words = words[: redirects[0]] if redirects else words
    _parser().parse_args(words[1:])  # a bad flag exits (SystemExit fails the test)
