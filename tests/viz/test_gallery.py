"""docs/gallery.py draws every picture docs/gallery.md shows; the page's code blocks run
and print what it says."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from markdown_blocks import blocks_of
from picture_files import assert_png

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


def test_the_table_block_prints_what_the_page_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # tests/docs runs every block of the page; here, the one whose output the page quotes.
    blocks = blocks_of(PAGE)
    (k,) = [i for i, b in enumerate(blocks) if b.language == "python" and ".table()" in b.text]
    assert blocks[k + 1].language == "text"
    exec(compile(blocks[k].text, blocks[k].where, "exec"), {})
    assert capsys.readouterr().out == blocks[k + 1].text
