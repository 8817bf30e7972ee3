"""docs/gallery.py draws every picture docs/gallery.md shows; the page's code blocks run
and print what it says."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest
from picture_files import assert_png, assert_svg

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "gallery.md"


def _gallery():
    spec = importlib.util.spec_from_file_location("gallery", ROOT / "docs" / "gallery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gallery_script_draws_every_picture_of_the_page(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    paths = _gallery().main(tmp_path)
    shown = set(re.findall(r"\]\(gallery/([\w.]+\.png)\)", PAGE.read_text()))
    assert {p.name for p in paths} == shown
    for p in paths:
        assert_png(p)
        # The committed copy the page shows is there too.
        assert_png(ROOT / "docs" / "gallery" / p.name)


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_the_pages_code_blocks_run_and_print_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(PAGE.read_text())
    assert [lang for lang, _ in blocks].count("python") == 3
    namespaces = []
    for k, (lang, code) in enumerate(blocks):
        if lang != "python":
            continue
        out = io.StringIO()
        namespace: dict = {}
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"gallery.md block {k}", "exec"), namespace)
        namespaces.append(namespace)
        if k + 1 < len(blocks) and blocks[k + 1][0] == "text":
            assert out.getvalue() == blocks[k + 1][1] + "\n"
    assert_svg(namespaces[0]["path"])
    assert list(tmp_path.iterdir()) == []  # the blocks write nothing where they run
